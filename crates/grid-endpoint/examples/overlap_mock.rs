//! The overlap on the forward mock, timed (`bench/overlap.sh --mock` runs it):
//!
//! ```text
//! cargo run --profile ci -p grid-endpoint --example overlap_mock -- [FORWARD_MS] [MASK_MS] [STEPS]
//! ```
//!
//! A forward mock whose pass sleeps FORWARD_MS (default 50) behind the protocol on
//! loopback, and a client that takes MASK_MS (default 50) to "compute" each mask before
//! its step: STEPS (default 40) greedy steps of one generation, pipelined and with
//! `--no-overlap`. Pipelined, a step should cost about max(forward, mask) plus a round
//! trip; without, their sum. Prints one Markdown table row per arm.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use grid_endpoint::backend::builtin::builtin_vocabulary;
use grid_endpoint::backend::forward::{ForwardConfig, ForwardMock, HashedForward};
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::{Sampling, Server, ServerConfig, TokenSet};

async fn run(overlap: bool, forward_ms: u64, mask_ms: u64, steps: usize) -> f64 {
    let vocab = Arc::new(builtin_vocabulary().expect("the built-in vocabulary"));
    let forward = HashedForward {
        vocab_size: vocab.len(),
        delay: Duration::from_millis(forward_ms),
        seed: 1,
    };
    let config = ForwardConfig {
        overlap,
        ..ForwardConfig::default()
    };
    let mock = Arc::new(ForwardMock::new(&vocab, forward, config).expect("the mock starts"));
    let server = Server::new(vocab.clone(), mock, ServerConfig::default())
        .spawn(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind loopback");
    let client = EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
        .expect("client");
    let plain = TokenSet::from_ids(
        vocab.len(),
        (0..vocab.len() as u32).filter(|&i| !vocab.is_special(i)),
    )
    .expect("ids");
    let mask = Mask::content_addressed(plain);
    let mut history = vec![1u32, 2, 3];
    let mut started = Instant::now();
    for t in 0..=steps {
        if t == 1 {
            // The first step evaluates the prompt: not a steady-state step.
            started = Instant::now();
        }
        // The client's mask computation (a sleep, as the forward pass is).
        tokio::time::sleep(Duration::from_millis(mask_ms)).await;
        let input = StepInput {
            id: "g",
            history: &history,
            prompt_len: 3,
            mask: &mask,
            cd_pass: &[],
            eos_allowed: false,
            sampling: Sampling::greedy(),
        };
        let out = client.step(&[input]).await.expect("step");
        let token = out[0].as_ref().expect("sampled").token;
        history.push(token);
    }
    let per_step = started.elapsed().as_secs_f64() * 1e3 / steps as f64;
    server.stop().await;
    per_step
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut next = |default: u64| {
        args.next()
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let forward_ms = next(50);
    let mask_ms = next(50);
    let steps = next(40) as usize;
    println!("| arm | forward (ms) | mask (ms) | steps | ms per step |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (arm, overlap) in [("pipelined", true), ("--no-overlap", false)] {
        let ms = run(overlap, forward_ms, mask_ms, steps).await;
        println!("| {arm} | {forward_ms} | {mask_ms} | {steps} | {ms:.1} |");
    }
}
