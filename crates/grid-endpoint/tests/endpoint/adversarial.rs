//! The adversarial mock reaches for forbidden words but can only ever choose from
//! mask ∪ cd_pass (and EOS only when the gate is open): checked at the backend and
//! through the server.

use std::sync::Arc;

use crate::common::{all_plain, bounded, id_of, spawn_server, sql_vocab};
use grid_endpoint::backend::mock::{mix, AdversarialMock, FORBIDDEN};
use grid_endpoint::backend::{Allowed, SampleContext};
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::{Sampling, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;

/// A pseudo-random subset of the plain ids (about `percent`%), never empty.
fn random_set(vocab: &Vocabulary, seed: u64, percent: u64) -> TokenSet {
    let plain: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&i| !vocab.is_special(i))
        .collect();
    let mut s = TokenSet::from_ids(
        vocab.len(),
        plain
            .iter()
            .copied()
            .filter(|&i| mix(seed, u64::from(i)) % 100 < percent),
    )
    .unwrap();
    if s.is_empty() {
        s.insert(plain[(seed % plain.len() as u64) as usize]);
    }
    s
}

fn sampling(k: u64) -> Sampling {
    match k % 3 {
        0 => Sampling::greedy(),
        1 => Sampling {
            temperature: 0.8,
            top_k: None,
            seed: k,
        },
        _ => Sampling {
            temperature: 2.0,
            top_k: Some(3),
            seed: k,
        },
    }
}

#[test]
fn backend_never_leaves_the_allowed_set() {
    let vocab = sql_vocab();
    let mock = AdversarialMock::new(vocab.clone());
    let eos = vocab.eos_id().unwrap();
    let plain: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&i| !vocab.is_special(i))
        .collect();
    let mut checked = 0;
    for case in 0..3000u64 {
        let set = Arc::new(random_set(
            &vocab,
            case,
            [1, 5, 30, 90][(case % 4) as usize],
        ));
        let cd: Vec<u32> = (0..(case % 3))
            .map(|j| plain[(mix(case, j) % plain.len() as u64) as usize])
            .collect();
        let gate = (case % 5 == 0).then_some(eos);
        let allowed = Allowed::new(set, &cd, gate);
        let generated: Vec<u32> = (0..(case % 7))
            .map(|j| plain[(mix(case ^ 77, j) % plain.len() as u64) as usize])
            .collect();
        let ctx = SampleContext {
            generation: "g",
            prompt: &[1, 2, 3],
            generated: &generated,
            allowed: &allowed,
            sampling: sampling(case),
        };
        let s = mock.sample(&ctx).expect("a sample");
        assert!(
            allowed.contains(s.token),
            "case {case}: {} not allowed",
            s.token
        );
        assert!(
            s.token != eos || gate.is_some(),
            "case {case}: EOS through a shut gate"
        );
        checked += 1;
    }
    assert_eq!(checked, 3000);
}

/// Drives one adversarial generation through the server for `ticks` steps with masks
/// from `mask_for(step)`; returns the text. Every token is checked against its set.
async fn run(
    client: &EndpointClient,
    vocab: &Vocabulary,
    id: &str,
    ticks: usize,
    mask_for: &dyn Fn(usize) -> (Mask, Vec<u32>, bool),
    sampling: Sampling,
) -> String {
    let eos = vocab.eos_id().unwrap();
    let mut history = vocab.encode("question: list the employees");
    let prompt_len = history.len();
    for step in 0..ticks {
        let (mask, cd, gate) = mask_for(step);
        let input = StepInput {
            id,
            history: &history,
            prompt_len,
            mask: &mask,
            cd_pass: &cd,
            eos_allowed: gate,
            sampling,
        };
        let s = client.step(&[input]).await.unwrap().remove(0).unwrap();
        let ok = mask.set.contains(s.token) || cd.contains(&s.token) || (gate && s.token == eos);
        assert!(
            ok,
            "step {step}: token {} outside mask ∪ cd_pass ∪ gate",
            s.token
        );
        if s.token == eos {
            break;
        }
        history.push(s.token);
    }
    String::from_utf8_lossy(&vocab.decode(&history[prompt_len..])).into_owned()
}

#[tokio::test]
async fn through_the_server_under_random_masks() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(
            vocab.clone(),
            Arc::new(AdversarialMock::new(vocab.clone())),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        let plain: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&i| !vocab.is_special(i))
            .collect();
        for g in 0..6u64 {
            let mask_for = |step: usize| {
                let seed = mix(g, step as u64);
                let set = random_set(&vocab, seed, [3, 20, 60][(seed % 3) as usize]);
                let cd = vec![plain[(seed % plain.len() as u64) as usize]];
                (Mask::content_addressed(set), cd, seed % 4 == 0)
            };
            run(
                &client,
                &vocab,
                &format!("r{g}"),
                25,
                &mask_for,
                sampling(g),
            )
            .await;
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn it_attacks_when_it_can_and_fails_when_it_cannot() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(
            vocab.clone(),
            Arc::new(AdversarialMock::new(vocab.clone())),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        // Positive control: under the full mask it writes forbidden words at once.
        let full = Mask::content_addressed(all_plain(&vocab));
        let text = run(
            &client,
            &vocab,
            "open",
            6,
            &|_| (full.clone(), vec![], true),
            Sampling::greedy(),
        )
        .await;
        let lower = text.to_ascii_lowercase();
        assert!(
            FORBIDDEN.iter().any(|w| lower.contains(w)),
            "the adversary wrote nothing forbidden: {text:?}"
        );
        // Under a grammar-like mask (a few safe words) nothing forbidden can appear.
        let safe: Vec<u32> = ["SELECT", " name", ",", " id", " FROM", " employees"]
            .iter()
            .map(|w| id_of(&vocab, w))
            .collect();
        let mask = Mask::content_addressed(TokenSet::from_ids(vocab.len(), safe).unwrap());
        // The CD pass adds one more safe token; the gate stays shut.
        let cd = vec![id_of(&vocab, " WHERE")];
        let text = run(
            &client,
            &vocab,
            "closed",
            20,
            &|_| (mask.clone(), cd.clone(), false),
            Sampling::greedy(),
        )
        .await;
        let lower = text.to_ascii_lowercase();
        for w in FORBIDDEN {
            assert!(!lower.contains(w), "{w:?} in {text:?}");
        }
        assert!(!text.is_empty());
        server.stop().await;
    })
    .await;
}
