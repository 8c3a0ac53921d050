//! Timings of the llama backend through the protocol on loopback (`bench/llama.sh` runs
//! it; feature `llama`):
//!
//! ```text
//! cargo run --release -p grid-endpoint --features llama --example llama_bench -- MODEL.gguf [THREADS]
//! ```
//!
//! For a Spider-size schema and a wide one (24 tables): the time to the first token of a question on
//! a new schema (the prompt evaluated whole) and of a second question on the same schema
//! (only its own tokens), prompt tokens per second, then greedy generation under an open
//! mask (every normal token, EOS shut) with and without overlap, alone and eight at a
//! time. Prints one Markdown table row per schema.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use grid_endpoint::backend::llama::{LlamaBackend, LlamaConfig};
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::{ChatMessage, Role, Sampling, Server, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;

/// Tokens generated per measured generation.
const GEN: usize = 48;

fn schemas() -> Vec<(&'static str, String)> {
    let spider = "CREATE TABLE singer (singer_id integer PRIMARY KEY, name text, country text, song_name text, song_release_year text, age integer, is_male boolean);
CREATE TABLE concert (concert_id integer PRIMARY KEY, concert_name text, theme text, stadium_id integer REFERENCES stadium(stadium_id), year text);
CREATE TABLE stadium (stadium_id integer PRIMARY KEY, location text, name text, capacity integer, highest integer, lowest integer, average integer);
CREATE TABLE singer_in_concert (concert_id integer REFERENCES concert(concert_id), singer_id integer REFERENCES singer(singer_id));".to_string();
    let wide = (0..24)
        .map(|t| {
            let cols: Vec<String> = (0..8)
                .map(|c| {
                    format!(
                        "col_{t}_{c} {}",
                        ["integer", "text", "date", "numeric"][c % 4]
                    )
                })
                .collect();
            format!(
                "CREATE TABLE table_{t} (id integer PRIMARY KEY, {});",
                cols.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        ("spider (concert_singer)", spider),
        ("wide (24 tables)", wide),
    ]
}

fn chat(schema: &str, q: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new(
            Role::System,
            format!("You write one PostgreSQL query that answers the question, over these tables only:\n{schema}"),
        ),
        ChatMessage::new(Role::User, q),
    ]
}

struct Bench {
    client: EndpointClient,
    vocab: Arc<Vocabulary>,
    mask: Mask,
    _server: grid_endpoint::server::RunningServer,
}

impl Bench {
    async fn new(path: &PathBuf, threads: usize, overlap: bool) -> Bench {
        let mut config = LlamaConfig::new(path);
        config.threads = threads;
        config.ctx = Some(16_384);
        config.overlap = overlap;
        let backend = Arc::new(LlamaBackend::load(&config).expect("the model loads"));
        let vocab = backend.vocabulary().clone();
        let server = Server::new(vocab.clone(), backend, ServerConfig::default())
            .spawn(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind loopback");
        // A long prompt on a slow (or busy) CPU takes minutes.
        let mut cc = ClientConfig::default();
        cc.http.request_timeout = std::time::Duration::from_secs(900);
        let client = EndpointClient::new(&server.url(), vocab.fingerprint(), cc).expect("client");
        let open = TokenSet::from_ids(
            vocab.len(),
            (0..vocab.len() as u32).filter(|&i| !vocab.is_special(i)),
        )
        .expect("ids");
        Bench {
            client,
            mask: Mask::content_addressed(open),
            vocab,
            _server: server,
        }
    }

    async fn prompt(&self, schema: &str, q: &str) -> Vec<u32> {
        self.client
            .render_prompt(&chat(schema, q), &self.vocab)
            .await
            .expect("render")
    }

    /// One step of each generation (ids `g0..`), in one request; appends the tokens.
    async fn step(&self, ids: &[String], hs: &mut [Vec<u32>], prompt_lens: &[usize]) {
        let inputs: Vec<StepInput<'_>> = ids
            .iter()
            .zip(hs.iter())
            .zip(prompt_lens)
            .map(|((id, h), &p)| StepInput {
                id,
                history: h,
                prompt_len: p,
                mask: &self.mask,
                cd_pass: &[],
                eos_allowed: false,
                sampling: Sampling::greedy(),
            })
            .collect();
        let out = self.client.step(&inputs).await.expect("step");
        drop(inputs);
        for (h, r) in hs.iter_mut().zip(out) {
            h.push(r.expect("sampled").token);
        }
    }

    /// Seconds to the first token, then generated tokens per second, of `k` generations
    /// of `prompt` run together.
    async fn generate(&self, tag: &str, prompt: &[u32], k: usize) -> (f64, f64) {
        let ids: Vec<String> = (0..k).map(|i| format!("{tag}-{i}")).collect();
        let mut hs = vec![prompt.to_vec(); k];
        let lens = vec![prompt.len(); k];
        let t = Instant::now();
        self.step(&ids, &mut hs, &lens).await;
        let first = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for _ in 1..GEN {
            self.step(&ids, &mut hs, &lens).await;
        }
        let rate = ((GEN - 1) * k) as f64 / t.elapsed().as_secs_f64();
        for id in &ids {
            self.client.release(id);
        }
        (first, rate)
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .expect("usage: llama_bench MODEL.gguf [THREADS]"),
    );
    let threads: usize = args.next().map_or(1, |t| t.parse().expect("threads"));
    let on = Bench::new(&path, threads, true).await;
    let off = Bench::new(&path, threads, false).await;
    println!(
        "| schema | prompt tokens | first token, new schema (s) | prompt tok/s | first token, 2nd question (s) | its own tokens | gen tok/s overlap | gen tok/s no overlap | 8 at once, tok/s |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, schema) in schemas() {
        let q1 = on
            .prompt(&schema, "How many rows does the first table have?")
            .await;
        let q2 = on
            .prompt(
                &schema,
                "List the names of every row, in alphabetical order.",
            )
            .await;
        let own = q2.len() - q1.iter().zip(&q2).take_while(|(a, b)| a == b).count();
        let (ttft_new, gen_on) = on.generate(&format!("{name}-a"), &q1, 1).await;
        let (ttft_second, _) = on.generate(&format!("{name}-b"), &q2, 1).await;
        let (_, gen_off) = off.generate(&format!("{name}-a"), &q1, 1).await;
        let (_, gen_8) = on.generate(&format!("{name}-c"), &q2, 8).await;
        println!(
            "| {name} | {} | {ttft_new:.2} | {:.0} | {ttft_second:.3} | {own} | {gen_on:.1} | {gen_off:.1} | {gen_8:.1} |",
            q1.len(),
            q1.len() as f64 / ttft_new,
        );
    }
}
