//! The vLLM backend against a fake vLLM server on loopback: the allowed list sent is
//! exactly mask ∪ cd_pass ∪ {EOS when allowed}, the chosen token is the fake model's
//! masked greedy choice, and a vLLM that ignores the list is caught by the server.

use std::sync::Arc;
use std::time::Duration;

use crate::common::fake_openai::{self, FakeOptions};
use crate::common::{bounded, dead_port, spawn_server, sql_vocab};
use grid_endpoint::backend::mock::mix;
use grid_endpoint::backend::vllm::{VllmBackend, VllmConfig};
use grid_endpoint::client::openai::{parse_completion, TokenMap};
use grid_endpoint::client::{ClientConfig, EndpointClient, HttpConfig, Mask, StepInput};
use grid_endpoint::protocol::ErrorCode;
use grid_endpoint::{ClientError, Sampling, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;

fn backend(url: &str, vocab: &Arc<Vocabulary>) -> Arc<VllmBackend> {
    let config = VllmConfig {
        url: url.to_string(),
        model: "fake-model".into(),
        http: HttpConfig {
            request_timeout: Duration::from_secs(10),
            retries: 0,
            ..HttpConfig::default()
        },
    };
    Arc::new(VllmBackend::new(config, vocab.clone()).expect("backend"))
}

/// A small pseudo-random plain set.
fn small_set(vocab: &Vocabulary, seed: u64) -> TokenSet {
    let plain: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&i| !vocab.is_special(i))
        .collect();
    let ids = (0..1 + seed % 6).map(|j| plain[(mix(seed, j) % plain.len() as u64) as usize]);
    TokenSet::from_ids(vocab.len(), ids).unwrap()
}

#[tokio::test]
async fn allowed_list_is_honoured_and_the_choice_is_masked_greedy() {
    bounded(async {
        let vocab = sql_vocab();
        let eos = vocab.eos_id().unwrap();
        let fake = fake_openai::spawn(FakeOptions::vllm(vocab.len(), eos)).await;
        let server = spawn_server(
            vocab.clone(),
            backend(&fake.url(), &vocab),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        assert_eq!(
            client.check_vocabulary().await.unwrap().header.model,
            "fake-model"
        );
        // Two generations per tick; a long prompt makes EOS competitive.
        let prompts = [
            vocab.encode("question: how many employees? how many employees? how many"),
            vocab.encode("question: show salaries"),
        ];
        let mut histories: Vec<Vec<u32>> = prompts.to_vec();
        let mut done = [false, false];
        let mut expected_lists: Vec<Vec<u32>> = Vec::new();
        let mut eos_seen = 0;
        for tick in 0..24u64 {
            let live: Vec<usize> = (0..2).filter(|&g| !done[g]).collect();
            if live.is_empty() {
                break;
            }
            let steps: Vec<(Mask, Vec<u32>, bool)> = live
                .iter()
                .map(|&g| {
                    let seed = mix(tick, g as u64);
                    let cd = vec![(seed % 90) as u32];
                    (
                        Mask::content_addressed(small_set(&vocab, seed)),
                        cd,
                        seed % 2 == 0,
                    )
                })
                .collect();
            let inputs: Vec<StepInput> = live
                .iter()
                .zip(&steps)
                .map(|(&g, (mask, cd, gate))| StepInput {
                    id: if g == 0 { "a" } else { "b" },
                    history: &histories[g],
                    prompt_len: prompts[g].len(),
                    mask,
                    cd_pass: cd,
                    eos_allowed: *gate,
                    sampling: Sampling::greedy(),
                })
                .collect();
            let results = client.step(&inputs).await.unwrap();
            drop(inputs);
            for ((&g, (mask, cd, gate)), r) in live.iter().zip(&steps).zip(results) {
                let s = r.unwrap();
                let mut list: Vec<u32> = mask.set.iter().chain(cd.iter().copied()).collect();
                if *gate {
                    list.push(eos);
                }
                list.sort_unstable();
                list.dedup();
                let want = fake_openai::greedy(&histories[g], vocab.len(), eos, Some(&list), None);
                assert_eq!(s.token, want, "tick {tick} generation {g}");
                assert!(list.contains(&s.token));
                expected_lists.push(list);
                if s.token == eos {
                    eos_seen += 1;
                    done[g] = true;
                } else {
                    histories[g].push(s.token);
                    assert!(s.logprob.is_some_and(|p| p <= 0.0));
                }
            }
        }
        assert!(
            eos_seen > 0,
            "EOS (left out of vLLM's output) was never chosen"
        );
        let log = fake.requests();
        assert_eq!(log.len(), expected_lists.len());
        let mut sent: Vec<Vec<u32>> = log.iter().map(|r| r.allowed.clone().unwrap()).collect();
        let mut expected = expected_lists;
        // Requests of a tick run concurrently: compare as multisets.
        sent.sort();
        expected.sort();
        assert_eq!(sent, expected);
        for r in &log {
            assert_eq!(r.max_tokens, 1);
            assert!(r.token_ids);
            assert_eq!(r.logprobs, 1);
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_vllm_that_ignores_the_list_is_caught() {
    bounded(async {
        let vocab = sql_vocab();
        let eos = vocab.eos_id().unwrap();
        let mut opts = FakeOptions::vllm(vocab.len(), eos);
        opts.ignore_constraints = true;
        let fake = fake_openai::spawn(opts).await;
        let server = spawn_server(
            vocab.clone(),
            backend(&fake.url(), &vocab),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        let history = vocab.encode("question: show salaries");
        let mut violations = 0;
        for seed in 0..10u64 {
            let mask = Mask::content_addressed(small_set(&vocab, seed));
            let input = StepInput {
                id: "v",
                history: &history,
                prompt_len: history.len(),
                mask: &mask,
                cd_pass: &[],
                eos_allowed: false,
                sampling: Sampling::greedy(),
            };
            match client.step(&[input]).await.unwrap().remove(0) {
                Ok(s) => assert!(mask.set.contains(s.token)),
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::BackendViolation);
                    violations += 1;
                }
            }
        }
        assert!(violations > 0);
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_vllm_is_a_backend_error_per_generation() {
    bounded(async {
        let vocab = sql_vocab();
        let addr = dead_port().await;
        let server = spawn_server(
            vocab.clone(),
            backend(&format!("http://{addr}"), &vocab),
            ServerConfig::default(),
        )
        .await;
        let client =
            EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
                .unwrap();
        let history = vocab.encode("question");
        let mask = Mask::content_addressed(small_set(&vocab, 1));
        let input = StepInput {
            id: "u",
            history: &history,
            prompt_len: history.len(),
            mask: &mask,
            cd_pass: &[],
            eos_allowed: false,
            sampling: Sampling::greedy(),
        };
        let e = client.step(&[input]).await.unwrap().remove(0).unwrap_err();
        assert_eq!(e.code, ErrorCode::Backend);
        assert!(e.message.contains("refused"), "{}", e.message);
        server.stop().await;
    })
    .await;
}

#[test]
fn token_strings_and_token_id_forms_both_parse() {
    let vocab = sql_vocab();
    let map = TokenMap::new();
    let body = br#"{"choices":[{"finish_reason":"length","logprobs":{
        "tokens":["SELECT","token_id:3"],
        "token_logprobs":[-0.5,-1.0],
        "top_logprobs":[{"SELECT":-0.5," FROM":-2.0},{"token_id:3":-1.0,"token_id:4":-1.5}]}}]}"#;
    let c = parse_completion(body, &vocab, &map).unwrap();
    assert_eq!(c.tokens.len(), 2);
    assert_eq!(vocab.token_bytes(c.tokens[0].id), b"SELECT");
    assert_eq!(c.tokens[0].top.len(), 2);
    assert_eq!(vocab.token_bytes(c.tokens[0].top[1].0), b" FROM");
    assert_eq!(c.tokens[1].id, 3);
    assert_eq!(c.tokens[1].logprob, Some(-1.0));
    assert_eq!(c.finish_reason.as_deref(), Some("length"));
    // Unknown strings and out-of-range ids are errors, not panics.
    let bad = br#"{"choices":[{"logprobs":{"tokens":["no such token"]}}]}"#;
    assert!(matches!(
        parse_completion(bad, &vocab, &map),
        Err(ClientError::UnmappableToken { .. })
    ));
    let bad = br#"{"choices":[{"logprobs":{"tokens":["token_id:99999"]}}]}"#;
    assert!(matches!(
        parse_completion(bad, &vocab, &map),
        Err(ClientError::MalformedReply { .. })
    ));
    assert!(matches!(
        parse_completion(b"{\"choices\":[]}", &vocab, &map),
        Err(ClientError::MalformedReply { .. })
    ));
}

/// llama.cpp's `llama-server` (b1-0c1e570, built from the llama-cpp-python 0.3.36 sdist)
/// answers `/v1/completions` with the chat API's `content` form of logprobs; the shape of
/// its reply, with ids of the test vocabulary. Its ids are taken as given; an entry
/// without one is mapped by its bytes.
#[test]
fn the_content_form_of_logprobs_parses_by_id_then_bytes() {
    let vocab = sql_vocab();
    let map = TokenMap::new();
    let select = map.id_of(&vocab, "SELECT").unwrap();
    let from = map.id_of(&vocab, " FROM").unwrap();
    let body = format!(
        r#"{{"choices":[{{"text":"SELECT FROM","index":0,"logprobs":{{"content":[
            {{"id":{select},"token":"SELECT","bytes":[83,69,76,69,67,84],"logprob":-0.25,
              "top_logprobs":[{{"id":{from},"token":" FROM","bytes":[32,70,82,79,77],"logprob":-2.5}},
                              {{"id":{select},"token":"SELECT","bytes":[83,69,76,69,67,84],"logprob":-0.25}}]}},
            {{"token":" FROM","bytes":[32,70,82,79,77],"logprob":-1.0,"top_logprobs":[]}}
        ]}},"finish_reason":"length"}}],"object":"text_completion"}}"#
    );
    let c = parse_completion(body.as_bytes(), &vocab, &map).unwrap();
    assert_eq!(c.tokens.len(), 2);
    assert_eq!(c.tokens[0].id, select);
    assert_eq!(c.tokens[0].logprob, Some(-0.25));
    assert_eq!(
        c.tokens[0].top,
        vec![(select, -0.25), (from, -2.5)],
        "most likely first"
    );
    assert_eq!(c.tokens[1].id, from, "mapped by its bytes");
    assert_eq!(c.finish_reason.as_deref(), Some("length"));
    // An id out of the vocabulary, an entry naming no token: errors, not panics.
    let bad = br#"{"choices":[{"logprobs":{"content":[{"id":99999,"logprob":-1.0}]}}]}"#;
    assert!(matches!(
        parse_completion(bad, &vocab, &map),
        Err(ClientError::MalformedReply { .. })
    ));
    let bad = br#"{"choices":[{"logprobs":{"content":[{"logprob":-1.0}]}}]}"#;
    assert!(matches!(
        parse_completion(bad, &vocab, &map),
        Err(ClientError::MalformedReply { .. })
    ));
}
