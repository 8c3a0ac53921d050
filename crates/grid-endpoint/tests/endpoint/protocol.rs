//! The grid-endpoint/1 protocol end to end: the reference server with the scripted mock,
//! driven by the client the way the extension's decode loop will drive it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::{all_plain, bounded, id_of, spawn_server, sql_vocab};
use grid_endpoint::backend::mock::ScriptedMock;
use grid_endpoint::backend::script::Script;
use grid_endpoint::backend::{BoxFuture, Sample, SampleContext};
use grid_endpoint::client::{ApiKey, ClientConfig, EndpointClient, HttpConfig, Mask, StepInput};
use grid_endpoint::protocol::{ErrorCode, StepResponse};
use grid_endpoint::{Backend, BackendError, ClientError, Sampling, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;
use serde_json::{json, Value};

const SCRIPT: &str = r#"{"entries":[
  {"match":"how many employees","sql":"SELECT count(*) FROM employees"},
  {"match":"show salaries","sql":"SELECT * FROM salaries"}
]}"#;

fn scripted(vocab: &Arc<Vocabulary>) -> Arc<ScriptedMock> {
    Arc::new(ScriptedMock::new(
        vocab.clone(),
        Script::parse(SCRIPT).expect("script"),
    ))
}

/// One generation as the decode loop holds it.
struct Gen {
    id: String,
    history: Vec<u32>,
    prompt_len: usize,
    done: bool,
}

impl Gen {
    fn new(id: &str, vocab: &Vocabulary, prompt: &str) -> Self {
        let history = vocab.encode(prompt);
        Gen {
            id: id.into(),
            prompt_len: history.len(),
            history,
            done: false,
        }
    }

    fn text(&self, vocab: &Vocabulary) -> String {
        String::from_utf8_lossy(&vocab.decode(&self.history[self.prompt_len..])).into_owned()
    }
}

/// The mask of a step: (mask, cd_pass, eos_allowed).
type MaskFn<'a> = dyn Fn(&Gen) -> (Mask, Vec<u32>, bool) + 'a;

/// Runs ticks until every generation has sampled EOS or `max_ticks`; checks every
/// sampled token against its allowed set. Returns the number of ticks.
async fn drive(
    client: &EndpointClient,
    vocab: &Vocabulary,
    gens: &mut [Gen],
    mask_for: &MaskFn<'_>,
    sampling: Sampling,
    max_ticks: usize,
) -> usize {
    let eos = vocab.eos_id().expect("eos");
    let mut ticks = 0;
    while ticks < max_ticks && gens.iter().any(|g| !g.done) {
        ticks += 1;
        let live: Vec<usize> = (0..gens.len()).filter(|&i| !gens[i].done).collect();
        let masks: Vec<(Mask, Vec<u32>, bool)> = live.iter().map(|&i| mask_for(&gens[i])).collect();
        let inputs: Vec<StepInput> = live
            .iter()
            .zip(&masks)
            .map(|(&i, (mask, cd, eos_ok))| StepInput {
                id: &gens[i].id,
                history: &gens[i].history,
                prompt_len: gens[i].prompt_len,
                mask,
                cd_pass: cd,
                eos_allowed: *eos_ok,
                sampling,
            })
            .collect();
        let results = client.step(&inputs).await.expect("step");
        drop(inputs);
        for ((&i, (mask, cd, eos_ok)), r) in live.iter().zip(&masks).zip(results) {
            let s = r.expect("generation step");
            let allowed =
                mask.set.contains(s.token) || cd.contains(&s.token) || (*eos_ok && s.token == eos);
            assert!(allowed, "token {} outside the allowed set", s.token);
            if s.token == eos {
                gens[i].done = true;
            } else {
                gens[i].history.push(s.token);
            }
        }
    }
    ticks
}

fn full_mask(vocab: &Vocabulary) -> Mask {
    Mask::content_addressed(all_plain(vocab))
}

fn client_for(url: &str, vocab: &Vocabulary) -> EndpointClient {
    EndpointClient::new(url, vocab.fingerprint(), ClientConfig::default()).expect("client")
}

#[tokio::test]
async fn vocabulary_round_trip() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let served = client.check_vocabulary().await.expect("vocabulary");
        assert_eq!(served.vocabulary.fingerprint(), vocab.fingerprint());
        assert_eq!(served.vocabulary.len(), vocab.len());
        assert_eq!(served.vocabulary.eos_id(), vocab.eos_id());
        assert_eq!(served.vocabulary.special_ids(), vocab.special_ids());
        assert_eq!(served.header.protocol, "grid-endpoint/1");
        assert_eq!(served.header.model, "mock-scripted");
        assert_eq!(served.header.mask_cache_capacity, 4096);
        for id in 0..vocab.len() as u32 {
            assert_eq!(served.vocabulary.token_bytes(id), vocab.token_bytes(id));
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn scripted_mock_spells_targets_one_request_per_tick() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let mut gens = vec![
            Gen::new("a", &vocab, "question: how many employees?"),
            Gen::new("b", &vocab, "question: show salaries"),
            Gen::new("c", &vocab, "question: something else"),
        ];
        let mask = full_mask(&vocab);
        let ticks = drive(
            &client,
            &vocab,
            &mut gens,
            &|_| (mask.clone(), vec![], true),
            Sampling::greedy(),
            40,
        )
        .await;
        assert_eq!(gens[0].text(&vocab), "SELECT count(*) FROM employees");
        assert!(gens[0].done && gens[1].done);
        assert_eq!(gens[1].text(&vocab), "SELECT * FROM salaries");
        // One request per tick: the payload went with the first, nothing was resent.
        let stats = client.stats();
        assert_eq!(stats.round_trips, ticks as u64);
        assert_eq!(stats.payloads_sent, 1);
        assert_eq!(stats.resends, 0);
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn forced_spans_travel_as_tokens_to_append() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let mut g = Gen::new("f", &vocab, "question: show salaries");
        let mask = full_mask(&vocab);
        let mut sampled = 0;
        for _ in 0..20 {
            let input = StepInput {
                id: &g.id,
                history: &g.history,
                prompt_len: g.prompt_len,
                mask: &mask,
                cd_pass: &[],
                eos_allowed: true,
                sampling: Sampling::greedy(),
            };
            let s = client.step(&[input]).await.unwrap().remove(0).unwrap();
            sampled += 1;
            if Some(s.token) == vocab.eos_id() {
                break;
            }
            g.history.push(s.token);
            // After "SELECT" the loop forces " *" (a singleton-mask span) itself.
            if g.text(&vocab) == "SELECT" {
                g.history.push(id_of(&vocab, " "));
                g.history.push(id_of(&vocab, "*"));
            }
        }
        assert_eq!(g.text(&vocab), "SELECT * FROM salaries");
        // SELECT, FROM, salaries, EOS: four samples; the forced span was not sampled.
        assert_eq!(sampled, 4);
        assert_eq!(client.stats().round_trips, 4);
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn the_mask_wins_over_the_script() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let employees = id_of(&vocab, " employees");
        let lexicon =
            Mask::content_addressed(TokenSet::from_ids(vocab.len(), [employees]).unwrap());
        let full = full_mask(&vocab);
        let mut gens = vec![Gen::new("m", &vocab, "question: show salaries")];
        // A role that cannot read salaries: after FROM only `employees` is allowed, and
        // EOS only once a table is named.
        let mask_for = |g: &Gen| {
            let text = g.text(&vocab);
            if text.ends_with(" FROM") {
                (lexicon.clone(), vec![], false)
            } else {
                (full.clone(), vec![], text.ends_with("employees"))
            }
        };
        drive(
            &client,
            &vocab,
            &mut gens,
            &mask_for,
            Sampling::greedy(),
            30,
        )
        .await;
        assert_eq!(gens[0].text(&vocab), "SELECT * FROM employees");
        assert!(gens[0].done);
        server.stop().await;
    })
    .await;
}

/// Runs three generations with two alternating masks against `config`; returns the
/// texts and the client's stats.
async fn run_three(config: ServerConfig) -> (Vec<String>, grid_endpoint::client::ClientStats) {
    let vocab = sql_vocab();
    let server = spawn_server(vocab.clone(), scripted(&vocab), config).await;
    let client = client_for(&server.url(), &vocab);
    let full = full_mask(&vocab);
    // The same allowed set under another entry id: exercises the cache per id.
    let other = Mask {
        entry_id: grid_endpoint::EntryId([7; 16]),
        set: full.set.clone(),
    };
    let mut gens = vec![
        Gen::new("x", &vocab, "question: how many employees?"),
        Gen::new("y", &vocab, "question: show salaries"),
        Gen::new("z", &vocab, "question: how many employees?"),
    ];
    let mask_for = |g: &Gen| {
        let m = if (g.history.len() + g.id.len()) % 2 == 0 {
            &full
        } else {
            &other
        };
        (m.clone(), vec![], true)
    };
    drive(
        &client,
        &vocab,
        &mut gens,
        &mask_for,
        Sampling::greedy(),
        40,
    )
    .await;
    server.stop().await;
    (
        gens.iter().map(|g| g.text(&vocab)).collect(),
        client.stats(),
    )
}

#[tokio::test]
async fn mask_misses_and_evicted_histories_resend_without_changing_results() {
    bounded(async {
        let (reference, ref_stats) = run_three(ServerConfig::default()).await;
        assert_eq!(ref_stats.resends, 0);
        assert_eq!(reference[0], "SELECT count(*) FROM employees");
        // A one-entry mask cache: the server keeps forgetting payloads.
        let (texts, stats) = run_three(ServerConfig {
            mask_cache_capacity: 1,
            ..ServerConfig::default()
        })
        .await;
        assert_eq!(texts, reference);
        assert!(stats.resends > 0, "{stats:?}");
        // A one-generation session table: the server keeps forgetting histories.
        let (texts, stats) = run_three(ServerConfig {
            max_sessions: 1,
            ..ServerConfig::default()
        })
        .await;
        assert_eq!(texts, reference);
        assert!(stats.resends > 0, "{stats:?}");
    })
    .await;
}

#[tokio::test]
async fn a_fresh_client_resyncs_a_generation() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let mask = full_mask(&vocab);
        let mut g = Gen::new("r", &vocab, "question: how many employees?");
        let first = client_for(&server.url(), &vocab);
        let mut gens = std::slice::from_mut(&mut g);
        drive(
            &first,
            &vocab,
            gens,
            &|_| (mask.clone(), vec![], false),
            Sampling::greedy(),
            3,
        )
        .await;
        // A second client (say, after a worker restart) knows nothing of what the server
        // holds: it sends the whole history, with the prompt length.
        let second = client_for(&server.url(), &vocab);
        gens = std::slice::from_mut(&mut g);
        drive(
            &second,
            &vocab,
            gens,
            &|_| (mask.clone(), vec![], true),
            Sampling::greedy(),
            30,
        )
        .await;
        assert_eq!(g.text(&vocab), "SELECT count(*) FROM employees");
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn sampling_with_temperature_is_reproducible() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let mask = full_mask(&vocab);
        let sampling = Sampling {
            temperature: 1.5,
            top_k: Some(8),
            seed: 42,
        };
        let mut runs = Vec::new();
        for run in 0..2 {
            let client = client_for(&server.url(), &vocab);
            let mut gens = vec![Gen::new(&format!("t{run}"), &vocab, "question: unscripted")];
            drive(
                &client,
                &vocab,
                &mut gens,
                &|_| (mask.clone(), vec![], true),
                sampling,
                12,
            )
            .await;
            runs.push(gens[0].history.clone());
        }
        assert_eq!(runs[0], runs[1]);
        server.stop().await;
    })
    .await;
}

/// Posts raw JSON to the server; returns (status, body).
async fn post(url: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/step"))
        .json(body)
        .send()
        .await
        .expect("post");
    let status = resp.status().as_u16();
    let v = resp.json().await.expect("json reply");
    (status, v)
}

fn gen(id: &str, position: u64, append: &[u32], mask: Value, cd: &[u32], eos: bool) -> Value {
    json!({
        "id": id, "position": position, "tokens_to_append": append, "mask": mask,
        "cd_pass": cd, "eos_allowed": eos, "sampling": {"temperature": 0.0, "seed": 1}
    })
}

fn request(vocab: &Vocabulary, gens: Vec<Value>) -> Value {
    json!({"protocol": "grid-endpoint/1", "vocab_fingerprint": vocab.fingerprint(), "generations": gens})
}

fn statuses(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| match r["status"].as_str() {
            Some("error") => format!("error:{}", r["code"].as_str().unwrap_or("?")),
            Some(s) => s.to_string(),
            None => "?".into(),
        })
        .collect()
}

#[tokio::test]
async fn wire_semantics() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let url = server.url();
        let full = all_plain(&vocab);
        let id = grid_endpoint::EntryId::of_set(&full).to_hex();
        let prompt = vocab.encode("question: show salaries");
        let pad = vocab.special_ids()[0];
        let eos = vocab.eos_id().unwrap();

        // Unknown entry without payload; unknown generation at position 3.
        let (st, v) = post(
            &url,
            &request(
                &vocab,
                vec![
                    gen("a", 0, &prompt, json!({"entry_id": id}), &[], true),
                    gen(
                        "b",
                        3,
                        &[],
                        json!({"entry_id": id, "payload": full.to_base64()}),
                        &[],
                        true,
                    ),
                ],
            ),
        )
        .await;
        assert_eq!(st, 200);
        assert_eq!(
            v["results"][0],
            json!({"id": "a", "status": "need", "mask": true, "history": false})
        );
        assert_eq!(
            v["results"][1],
            json!({"id": "b", "status": "need", "mask": false, "history": true})
        );

        // The payload of b was cached: a's step now succeeds without one.
        let (_, v) = post(
            &url,
            &request(
                &vocab,
                vec![gen("a", 0, &prompt, json!({"entry_id": id}), &[], true)],
            ),
        )
        .await;
        assert_eq!(statuses(&v), ["ok"]);
        let first = v["results"][0]["token"].as_u64().unwrap() as u32;
        assert_eq!(vocab.token_bytes(first), b"SELECT");
        assert!(v["results"][0]["logprob"].as_f64().unwrap() <= 0.0);
        let held = prompt.len() as u64 + 1;

        // Wrong position: need history; right position: ok.
        let (_, v) = post(
            &url,
            &request(
                &vocab,
                vec![gen("a", held + 1, &[], json!({"entry_id": id}), &[], true)],
            ),
        )
        .await;
        assert_eq!(statuses(&v), ["need"]);
        let (_, v) = post(
            &url,
            &request(
                &vocab,
                vec![gen("a", held, &[], json!({"entry_id": id}), &[], true)],
            ),
        )
        .await;
        assert_eq!(statuses(&v), ["ok"]);

        // Per-generation refusals, each leaving the others alone.
        let with_pad = TokenSet::from_ids(vocab.len(), [1, pad]).unwrap();
        let other = TokenSet::from_ids(vocab.len(), [1, 2]).unwrap();
        let empty = TokenSet::new(vocab.len());
        let (_, v) = post(
            &url,
            &request(
                &vocab,
                vec![
                    gen(
                        "p",
                        0,
                        &prompt,
                        json!({"entry_id": "11".repeat(16), "payload": with_pad.to_base64()}),
                        &[],
                        false,
                    ),
                    gen("q", 0, &prompt, json!({"entry_id": id}), &[eos], true),
                    gen(
                        "e",
                        0,
                        &prompt,
                        json!({"entry_id": "22".repeat(16), "payload": empty.to_base64()}),
                        &[],
                        false,
                    ),
                    gen(
                        "c",
                        0,
                        &prompt,
                        json!({"entry_id": id, "payload": other.to_base64()}),
                        &[],
                        false,
                    ),
                    gen("d", 0, &prompt, json!({"entry_id": id}), &[], false),
                    gen("d", 0, &prompt, json!({"entry_id": id}), &[], false),
                    gen("o", 0, &[9999], json!({"entry_id": id}), &[], false),
                    gen(
                        "x",
                        0,
                        &prompt,
                        json!({"entry_id": id, "payload": "***"}),
                        &[],
                        false,
                    ),
                    gen(
                        "y",
                        0,
                        &prompt,
                        json!({"entry_id": id, "payload": "AAAA"}),
                        &[],
                        false,
                    ),
                ],
            ),
        )
        .await;
        assert_eq!(
            statuses(&v),
            [
                "error:invalid_mask",
                "error:invalid_mask",
                "error:empty_mask",
                "error:mask_conflict",
                "ok",
                "error:duplicate_id",
                "error:invalid_request",
                "error:invalid_mask",
                "error:invalid_mask",
            ]
        );
        let mut bad_sampling = gen("s", 0, &prompt, json!({"entry_id": id}), &[], false);
        bad_sampling["sampling"]["temperature"] = json!(-1.0);
        let (_, v) = post(&url, &request(&vocab, vec![bad_sampling])).await;
        assert_eq!(statuses(&v), ["error:invalid_sampling"]);

        // Release: the server forgets the generation.
        let mut r = request(
            &vocab,
            vec![gen("a", held + 1, &[], json!({"entry_id": id}), &[], true)],
        );
        r["release"] = json!(["a"]);
        let (_, v) = post(&url, &r).await;
        assert_eq!(
            v["results"][0],
            json!({"id": "a", "status": "need", "mask": false, "history": true})
        );

        // Request-level refusals.
        let (st, v) = post(
            &url,
            &json!({"protocol": "grid-endpoint/9", "vocab_fingerprint": "x", "generations": []}),
        )
        .await;
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("unsupported_protocol"))
        );
        let (st, v) = post(
            &url,
            &json!({"protocol": "grid-endpoint/1", "vocab_fingerprint": "00", "generations": []}),
        )
        .await;
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (409, Some("vocab_mismatch"))
        );
        assert_eq!(
            v["error"]["server_fingerprint"].as_str(),
            Some(vocab.fingerprint())
        );
        let (st, v) = post(&url, &json!({"nonsense": true})).await;
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("bad_request"))
        );
        let resp = reqwest::get(format!("{url}/v1/nothing")).await.unwrap();
        assert_eq!(resp.status().as_u16(), 404);
        let resp = reqwest::get(format!("{url}/v1/step")).await.unwrap();
        assert_eq!(resp.status().as_u16(), 405);

        // The reply parses as the protocol's types.
        let (_, v) = post(
            &url,
            &request(
                &vocab,
                vec![gen("z", 0, &prompt, json!({"entry_id": id}), &[], false)],
            ),
        )
        .await;
        let parsed: StepResponse = serde_json::from_value(v).unwrap();
        assert_eq!(parsed.results.len(), 1);
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn eos_only_through_the_gate() {
    bounded(async {
        let vocab = sql_vocab();
        let server = spawn_server(vocab.clone(), scripted(&vocab), ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let mask = full_mask(&vocab);
        // The target is spelled after 4 samples; with the gate shut the mock must go on.
        let mut gens = vec![Gen::new("g", &vocab, "question: show salaries")];
        let ticks = drive(
            &client,
            &vocab,
            &mut gens,
            &|_| (mask.clone(), vec![], false),
            Sampling::greedy(),
            8,
        )
        .await;
        assert_eq!(ticks, 8);
        assert!(!gens[0].done);
        assert!(gens[0].text(&vocab).starts_with("SELECT * FROM salaries"));
        server.stop().await;
    })
    .await;
}

/// A backend that answers outside the allowed set on its first call.
struct Cheater {
    cheated: AtomicBool,
    inner: Arc<ScriptedMock>,
    pad: u32,
}

impl Backend for Cheater {
    fn model(&self) -> &str {
        "cheater"
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        if !self.cheated.swap(true, Ordering::SeqCst) {
            let out = batch
                .iter()
                .map(|_| {
                    Ok(Sample {
                        token: self.pad,
                        logprob: None,
                    })
                })
                .collect();
            return Box::pin(std::future::ready(out));
        }
        self.inner.sample_batch(batch)
    }
}

#[tokio::test]
async fn a_backend_answer_outside_the_mask_is_never_emitted() {
    bounded(async {
        let vocab = sql_vocab();
        let backend = Arc::new(Cheater {
            cheated: AtomicBool::new(false),
            inner: scripted(&vocab),
            pad: vocab.special_ids()[0],
        });
        let server = spawn_server(vocab.clone(), backend, ServerConfig::default()).await;
        let client = client_for(&server.url(), &vocab);
        let mask = full_mask(&vocab);
        let g = Gen::new("v", &vocab, "question: show salaries");
        let input = StepInput {
            id: &g.id,
            history: &g.history,
            prompt_len: g.prompt_len,
            mask: &mask,
            cd_pass: &[],
            eos_allowed: false,
            sampling: Sampling::greedy(),
        };
        let r = client
            .step(std::slice::from_ref(&input))
            .await
            .unwrap()
            .remove(0);
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::BackendViolation);
        // Nothing changed on the server: the same step now succeeds.
        let s = client.step(&[input]).await.unwrap().remove(0).unwrap();
        assert_eq!(vocab.token_bytes(s.token), b"SELECT");
        server.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_required_bearer_token_is_enforced() {
    bounded(async {
        let vocab = sql_vocab();
        let config = ServerConfig {
            api_key: ApiKey::new("s3cret"),
            ..ServerConfig::default()
        };
        let server = spawn_server(vocab.clone(), scripted(&vocab), config).await;
        let anon = client_for(&server.url(), &vocab);
        let err = anon.fetch_vocabulary().await.unwrap_err();
        assert!(matches!(&err, ClientError::Rejected { status: 401, code, .. } if code == "unauthorized"), "{err:?}");
        let cfg = ClientConfig {
            http: HttpConfig { api_key: ApiKey::new("s3cret"), ..HttpConfig::default() },
            ..ClientConfig::default()
        };
        let keyed = EndpointClient::new(&server.url(), vocab.fingerprint(), cfg).unwrap();
        keyed.check_vocabulary().await.expect("authorized");
        server.stop().await;
    })
    .await;
}

#[test]
fn protocol_types_round_trip() {
    let v = json!({
        "protocol": "grid-endpoint/1",
        "results": [
            {"id": "a", "status": "ok", "token": 5, "logprob": -0.25},
            {"id": "b", "status": "ok", "token": 6, "logprob": null},
            {"id": "c", "status": "need", "mask": true, "history": false},
            {"id": "d", "status": "error", "code": "empty_mask", "message": "m"},
            {"id": "e", "status": "error", "code": "from_the_future", "message": "m"}
        ]
    });
    let r: StepResponse = serde_json::from_value(v).unwrap();
    let codes: BTreeMap<String, String> = r
        .results
        .iter()
        .map(|g| (g.id.clone(), format!("{:?}", g.outcome)))
        .collect();
    assert!(codes["e"].contains("Unknown"));
    let back = serde_json::to_value(&r).unwrap();
    assert_eq!(back["results"][2]["status"], "need");
}
