//! Fixtures of the real-model tests: the model (from `GRID_TEST_MODEL`), an endpoint
//! running it on loopback, the prompts, the masks, and an independent reference that
//! computes masked greedy decoding straight through llama-cpp-2.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;

use grid_endpoint::backend::llama::{runtime, LlamaBackend, LlamaConfig};
use grid_endpoint::backend::mock::mix;
use grid_endpoint::client::{ClientConfig, EndpointClient, Mask, StepInput};
use grid_endpoint::server::RunningServer;
use grid_endpoint::{ChatMessage, Role, Sampling, Server, ServerConfig, TokenSet};
use grid_vocab::Vocabulary;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

/// The GGUF under test, or `None` (and a SKIPPED line) when `GRID_TEST_MODEL` is unset.
pub fn model_path() -> Option<PathBuf> {
    match std::env::var_os("GRID_TEST_MODEL") {
        None => {
            println!(
                "SKIPPED: set GRID_TEST_MODEL to a GGUF file \
                 (GRID_TEST_MODEL=$(scripts/model.sh qwen2.5-coder-0.5b))"
            );
            None
        }
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "GRID_TEST_MODEL={} is not a file", p.display());
            Some(p)
        }
    }
}

/// The context size every test uses (the reference's too).
pub const N_CTX: u32 = 4096;

/// A backend for `path` with the test defaults, adjusted by `f`.
pub fn backend(path: &PathBuf, f: impl FnOnce(&mut LlamaConfig)) -> Arc<LlamaBackend> {
    let mut config = LlamaConfig::new(path);
    config.ctx = Some(N_CTX);
    f(&mut config);
    Arc::new(LlamaBackend::load(&config).expect("the model loads"))
}

/// An endpoint on loopback serving `backend`, and a client of it.
pub struct Endpoint {
    pub backend: Arc<LlamaBackend>,
    pub vocab: Arc<Vocabulary>,
    pub server: RunningServer,
    pub client: EndpointClient,
}

pub async fn endpoint(backend: Arc<LlamaBackend>) -> Endpoint {
    let vocab = backend.vocabulary().clone();
    let server = Server::new(vocab.clone(), backend.clone(), ServerConfig::default())
        .spawn(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind loopback");
    let client = client_of(&server, &vocab);
    Endpoint {
        backend,
        vocab,
        server,
        client,
    }
}

/// A fresh client (it knows nothing the server holds).
pub fn client_of(server: &RunningServer, vocab: &Vocabulary) -> EndpointClient {
    EndpointClient::new(&server.url(), vocab.fingerprint(), ClientConfig::default())
        .expect("client")
}

/// The schema every question is asked over.
pub const SCHEMA: &str = "CREATE TABLE departments (id integer PRIMARY KEY, name text, budget numeric);
CREATE TABLE employees (id integer PRIMARY KEY, name text, department_id integer REFERENCES departments(id), hired date, salary numeric);
CREATE TABLE orders (id integer PRIMARY KEY, employee_id integer REFERENCES employees(id), amount numeric, placed date);";

pub const QUESTIONS: [&str; 20] = [
    "How many employees are there?",
    "List the names of all departments.",
    "Which employee took the most orders?",
    "What is the average salary per department?",
    "List all employees hired in 2023.",
    "What is the total amount of orders placed in March?",
    "Which departments have a budget above 100000?",
    "Show the five largest orders with the employee's name.",
    "How many orders did each employee place?",
    "Which employees have no orders?",
    "What is the highest salary?",
    "List departments with more than ten employees.",
    "Show the name and hire date of the newest employee.",
    "What is the sum of all order amounts?",
    "Which department has the most employees?",
    "List employees whose salary is above the average.",
    "How many departments are there?",
    "Show orders placed after 2024-01-01.",
    "What is the average order amount per employee?",
    "List employee names in alphabetical order.",
];

/// The chat of question `q`.
pub fn chat(q: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::new(
            Role::System,
            format!(
                "You write one PostgreSQL query that answers the question, over these tables only:\n{SCHEMA}"
            ),
        ),
        ChatMessage::new(Role::User, q),
    ]
}

/// How a generation's steps are masked (the mask of step `k` after `generated`).
#[derive(Debug, Clone, Copy)]
pub enum Regime {
    /// Tokens spelled only from SQL-ish ASCII (letters, digits, space, `_,.*()=<>'`).
    Sqlish,
    /// A seeded half of every token, different at every step.
    Half,
    /// Sqlish tokens, of which a seeded 70% at every step.
    SqlishMost,
    /// Only lowercase letters and spaces.
    Lowercase,
}

impl Regime {
    pub fn of(i: usize) -> Regime {
        [
            Regime::Sqlish,
            Regime::Half,
            Regime::SqlishMost,
            Regime::Lowercase,
        ][i % 4]
    }

    /// The steps before EOS may be sampled.
    fn eos_after(self) -> usize {
        match self {
            Regime::Sqlish => 3,
            Regime::Half => 5,
            Regime::SqlishMost => 4,
            Regime::Lowercase => 2,
        }
    }
}

fn sqlish(b: &[u8]) -> bool {
    !b.is_empty()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || b" _,.*()=<>'".contains(&c))
}

fn lowercase(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|&c| c.is_ascii_lowercase() || c == b' ')
}

/// The mask of step `step` (EOS excluded: it is the gate).
pub fn mask(vocab: &Vocabulary, regime: Regime, step: usize) -> (TokenSet, bool) {
    let seed = mix(step as u64, regime as u64);
    let keep = |id: u32, pct: u64| mix(seed, u64::from(id)) % 100 < pct;
    let ids = (0..vocab.len() as u32).filter(|&id| {
        if vocab.is_special(id) {
            return false;
        }
        let b = vocab.token_bytes(id);
        match regime {
            Regime::Sqlish => sqlish(b),
            Regime::Half => keep(id, 50),
            Regime::SqlishMost => sqlish(b) && keep(id, 70),
            Regime::Lowercase => lowercase(b),
        }
    });
    let set = TokenSet::from_ids(vocab.len(), ids).expect("ids in range");
    (set, step >= regime.eos_after())
}

/// Longest generation of the tests.
pub const MAX_TOKENS: usize = 16;

/// A generation in progress through the endpoint.
pub struct Gen {
    pub id: String,
    pub history: Vec<u32>,
    pub prompt_len: usize,
    pub regime: Regime,
    pub done: bool,
}

impl Gen {
    pub fn new(id: impl Into<String>, prompt: Vec<u32>, regime: Regime) -> Gen {
        Gen {
            id: id.into(),
            prompt_len: prompt.len(),
            history: prompt,
            regime,
            done: false,
        }
    }

    pub fn generated(&self) -> &[u32] {
        &self.history[self.prompt_len..]
    }
}

/// One tick: one step of every generation not done, in one request.
pub async fn tick(client: &EndpointClient, vocab: &Vocabulary, gens: &mut [&mut Gen]) {
    let eos = vocab.eos_id().expect("the model has an EOS");
    let live: Vec<usize> = (0..gens.len()).filter(|&i| !gens[i].done).collect();
    let masks: Vec<(Mask, bool)> = live
        .iter()
        .map(|&i| {
            let (set, gate) = mask(vocab, gens[i].regime, gens[i].generated().len());
            (Mask::content_addressed(set), gate)
        })
        .collect();
    let inputs: Vec<StepInput<'_>> = live
        .iter()
        .zip(&masks)
        .map(|(&i, (m, gate))| StepInput {
            id: &gens[i].id,
            history: &gens[i].history,
            prompt_len: gens[i].prompt_len,
            mask: m,
            cd_pass: &[],
            eos_allowed: *gate,
            sampling: Sampling::greedy(),
        })
        .collect();
    let out = client.step(&inputs).await.expect("the step call");
    drop(inputs);
    for ((&i, (m, gate)), r) in live.iter().zip(&masks).zip(out) {
        let s = r.unwrap_or_else(|e| panic!("generation {}: {e}", gens[i].id));
        assert!(m.set.contains(s.token) || (*gate && s.token == eos));
        let g = &mut gens[i];
        if s.token == eos {
            g.done = true;
        } else {
            g.history.push(s.token);
            if g.generated().len() >= MAX_TOKENS {
                g.done = true;
            }
        }
    }
}

/// Runs generations to the end, all in every tick.
pub async fn run(client: &EndpointClient, vocab: &Vocabulary, gens: &mut [Gen]) {
    while gens.iter().any(|g| !g.done) {
        let mut refs: Vec<&mut Gen> = gens.iter_mut().collect();
        tick(client, vocab, &mut refs).await;
    }
}

/// The independent reference: the same model through llama-cpp-2 directly, one
/// sequence, the prompt in one batch, then one token per decode; the mask applied to
/// the logits row here, and the argmax taken here (ties: the lowest id).
pub struct Reference {
    model: LlamaModel,
}

impl Reference {
    pub fn load(path: &PathBuf) -> Reference {
        let rt = runtime().expect("llama runtime");
        let model = LlamaModel::load_from_file(rt, path, &LlamaModelParams::default())
            .expect("the model loads");
        Reference { model }
    }

    /// The model's logits row length.
    pub fn n_vocab(&self) -> usize {
        self.model.n_vocab() as usize
    }

    fn context(&self) -> LlamaContext<'_> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(N_CTX))
            .with_n_batch(2048)
            .with_n_ubatch(512)
            .with_n_threads(1)
            .with_n_threads_batch(1);
        self.model
            .new_context(runtime().expect("llama runtime"), params)
            .expect("a context")
    }

    /// Masked greedy decoding of `prompt` under `regime`, at most [`MAX_TOKENS`]
    /// tokens: the generated ids (EOS not included), and at how many steps the mask
    /// overruled the model (its unmasked argmax was not allowed).
    pub fn greedy(&self, vocab: &Vocabulary, prompt: &[u32], regime: Regime) -> (Vec<u32>, usize) {
        let eos = vocab.eos_id().expect("EOS");
        let mut ctx = self.context();
        let mut batch = LlamaBatch::new(prompt.len().max(1), 1);
        for (i, &t) in prompt.iter().enumerate() {
            batch
                .add(
                    LlamaToken::new(t as i32),
                    i as i32,
                    &[0],
                    i + 1 == prompt.len(),
                )
                .expect("batch");
        }
        ctx.decode(&mut batch).expect("decode the prompt");
        let mut out = Vec::new();
        let mut overruled = 0;
        let mut pos = prompt.len();
        loop {
            let row = ctx.get_logits_ith(batch.n_tokens() - 1);
            let (set, gate) = mask(vocab, regime, out.len());
            let top = (0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0) as u32;
            overruled += usize::from(!(set.contains(top) || (gate && top == eos)));
            let mut best: Option<(u32, f32)> = None;
            for id in set.iter().chain(gate.then_some(eos)) {
                let l = row[id as usize];
                if best.is_none_or(|(b, bl)| l > bl || (l == bl && id < b)) {
                    best = Some((id, l));
                }
            }
            let (tok, _) = best.expect("a non-empty mask");
            if tok == eos {
                return (out, overruled);
            }
            out.push(tok);
            if out.len() >= MAX_TOKENS {
                return (out, overruled);
            }
            batch.clear();
            batch
                .add(LlamaToken::new(tok as i32), pos as i32, &[0], true)
                .expect("batch");
            pos += 1;
            ctx.decode(&mut batch).expect("decode a token");
        }
    }

    /// The logits rows after each of `prompt` followed by `generated` (the last
    /// `generated.len() + 1` rows), for explaining a difference.
    pub fn rows(&self, prompt: &[u32], generated: &[u32]) -> Vec<Vec<f32>> {
        let mut ctx = self.context();
        let mut all = prompt.to_vec();
        all.extend_from_slice(generated);
        let mut batch = LlamaBatch::new(all.len(), 1);
        for (i, &t) in all.iter().enumerate() {
            batch
                .add(
                    LlamaToken::new(t as i32),
                    i as i32,
                    &[0],
                    i + 1 >= prompt.len(),
                )
                .expect("batch");
        }
        ctx.decode(&mut batch).expect("decode");
        (prompt.len() - 1..all.len())
            .map(|i| ctx.get_logits_ith(i as i32).to_vec())
            .collect()
    }
}

/// How close two allowed tokens' logits must be for a difference between two
/// schedules of the same computation to count as a near tie (see [`compare`]).
pub const NEAR_TIE: f32 = 0.5;

/// Compares `got` with `want`, two masked greedy generations of `prompt` under `regime`
/// computed on different schedules (batch shapes, cache layouts): `Ok(None)` when
/// identical; `Ok(Some(gap))` when they first differ at a near tie, i.e. where the two
/// tokens' logits (recomputed in one batch by the reference) are within [`NEAR_TIE`];
/// `Err` otherwise (a wrong context, not float noise).
pub fn compare(
    r: &Reference,
    vocab: &Vocabulary,
    prompt: &[u32],
    got: &[u32],
    want: &[u32],
) -> Result<Option<f32>, String> {
    if got == want {
        return Ok(None);
    }
    let eos = vocab.eos_id().expect("EOS");
    let k = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let at = |g: &[u32]| g.get(k).copied().unwrap_or(eos);
    let (a, b) = (at(got), at(want));
    let row = &r.rows(prompt, &want[..k])[k];
    let gap = (row[a as usize] - row[b as usize]).abs();
    let show = |t: u32| {
        format!(
            "{t} {:?} ({})",
            String::from_utf8_lossy(vocab.token_bytes(t)),
            row[t as usize]
        )
    };
    if gap <= NEAR_TIE {
        Ok(Some(gap))
    } else {
        Err(format!(
            "first difference at generated token {k}: {} against {}, a gap of {gap}",
            show(a),
            show(b)
        ))
    }
}

/// Renders every question's chat through the endpoint.
pub async fn prompts(e: &Endpoint) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for q in QUESTIONS {
        out.push(
            e.client
                .render_prompt(&chat(q), &e.vocab)
                .await
                .expect("render"),
        );
    }
    out
}
