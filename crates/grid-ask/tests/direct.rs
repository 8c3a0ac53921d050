//! Whole asks through the pipeline in the direct mode (`grid.endpoint =
//! 'openai+http://…'`): a fake OpenAI-compatible server (grid-endpoint's, whose "model" is
//! a fixed scoring function) answers over loopback, the vocabulary is read from a local
//! tokenizer file. Every step's token is in its mask (the record replays: each mask is
//! recomputed from the artifacts and the token checked against it), the statement is the
//! same whichever way the masks travel (`allowed_token_ids`, chunked or not, or
//! `logit_bias`), and each failure is typed with a message that says what to do.

mod common;

#[path = "../../grid-endpoint/tests/endpoint/common/fake_openai.rs"]
#[allow(dead_code)]
mod fake_openai;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::ask_one;
use fake_openai::{FakeOpenAi, FakeOptions};
use grid_ask::{Ablation, Answer, AskSettings, AuditLevel, Failure, FailureKind, Finished};

use grid_core::audit::{StepKind, StepRecord};
use grid_endpoint::backend::builtin::builtin_vocabulary;

const MODEL: &str = "fake-model";

/// Loopback, any free port (the fake's `super::loopback`).
fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The fake on its own runtime (the pipeline blocks on runtimes of its own, which
/// cannot nest in another).
struct Fake {
    server: FakeOpenAi,
    _rt: tokio::runtime::Runtime,
}

fn fake(change: impl FnOnce(&mut FakeOptions)) -> Fake {
    let v = builtin_vocabulary().expect("built-in vocabulary");
    let mut o = FakeOptions::vllm(v.len(), v.eos_id().expect("eos"));
    o.model = Some(MODEL.into());
    change(&mut o);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(fake_openai::spawn(o));
    Fake { server, _rt: rt }
}

/// The built-in vocabulary as a tokenizer file on disk (what `tokenizer=` names).
fn tokenizer() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    common::file_once(&PATH, "grid-ask-direct", || {
        let v = builtin_vocabulary().expect("built-in vocabulary");
        v.to_served_json().into_bytes()
    })
}

fn endpoint(url: &str, extra: &str) -> String {
    format!(
        "openai+{url}/v1?model={MODEL}&tokenizer={}{extra}",
        tokenizer().display()
    )
}

fn settings(endpoint: String) -> AskSettings {
    AskSettings {
        endpoint: Some(endpoint),
        model: None,
        max_tokens: 48,
        temperature: 0.0,
        timeout_ms: 20_000,
        audit: AuditLevel::Full,
        ablation: Ablation::default(),
        judge: true,
        fault: None,
        decline: false,
    }
}

fn ask(question: &str, settings: AskSettings) -> Finished {
    ask_one(question, settings).1
}

fn answer(question: &str, settings: AskSettings) -> (Answer, usize) {
    let (steps, f) = ask_one(question, settings);
    outcome(&f, &steps)
}

/// What the ask answered (a statement, or the checker's refusal naming it: the fake's
/// "model" writes valid SQL under the masks, not always sensible SQL) and how many of its
/// steps the model chose.
fn outcome(f: &Finished, steps: &[StepRecord]) -> (Answer, usize) {
    let sampled = steps.iter().filter(|s| s.kind == StepKind::Sampled).count();
    if let Answer::Failed(e) = &f.answer {
        assert_eq!(e.kind, FailureKind::Refused, "{e:?}");
    }
    (f.answer.clone(), sampled)
}

fn failure(f: &Finished) -> &Failure {
    match &f.answer {
        Answer::Failed(e) => e,
        Answer::Generated(g) => panic!("{g:?}"),
    }
}

const QUESTIONS: &[&str] = &["list the names", "how many employees are there?"];

#[test]
fn a_stock_server_answers_under_the_masks_the_same_whichever_way_they_travel() {
    for q in QUESTIONS {
        let vllm = fake(|_| {});
        let chunked = answer(q, settings(endpoint(&vllm.server.url(), "")));
        assert!(chunked.1 > 0, "{q}: the model chose no token");
        let requests = vllm.server.requests();
        // Each request continues an attempt's prompt (the first, or its repair's).
        let mut prompts: Vec<&[u32]> = Vec::new();
        for r in &requests {
            if !prompts.iter().any(|p| r.prompt.starts_with(p)) {
                prompts.push(&r.prompt);
            }
        }
        assert!(prompts.len() <= 2, "{q}: {} prompts", prompts.len());
        assert!(requests.iter().all(|r| r.token_ids && r.logprobs == 5));

        let one = fake(|_| {});
        let per_token = answer(q, settings(endpoint(&one.server.url(), "&chunk=1")));
        assert_eq!(per_token, chunked, "{q}: chunk=1");
        // Steps are served from the chunk the server wrote while the mask allows it.
        assert!(
            requests.len() < one.server.requests().len(),
            "{q}: chunks saved no request"
        );

        let llama = fake(|_| {});
        let biased = answer(
            q,
            settings(endpoint(&llama.server.url(), "&server=llama.cpp")),
        );
        assert_eq!(biased, chunked, "{q}: logit_bias");
        assert!(llama.server.requests().iter().all(|r| r.allowed.is_none()));

        // A server that refuses allowed_token_ids is sent logit_bias instead.
        let refusing = fake(|o| o.reject_allowed_token_ids = true);
        let fallback = answer(q, settings(endpoint(&refusing.server.url(), "")));
        assert_eq!(fallback, chunked, "{q}: fallback");
        eprintln!(
            "{q:?}: {} sampled steps; {} requests chunked, {} per token, {} with logit_bias",
            chunked.1,
            requests.len(),
            one.server.requests().len(),
            llama.server.requests().len()
        );
    }
}

#[test]
fn failures_of_a_stock_server_are_typed_and_say_what_to_do() {
    let q = QUESTIONS[0];
    // Nothing listens on the port of a fake that has gone.
    let gone = fake(|_| {}).server.url();
    let f = ask(q, settings(endpoint(&gone, "")));
    assert_eq!(failure(&f).kind, FailureKind::EndpointUnreachable, "{f:?}");

    let wrong = fake(|_| {});
    let f = ask(
        q,
        settings(endpoint(&wrong.server.url(), "").replace(MODEL, "other")),
    );
    let e = failure(&f);
    assert_eq!(e.kind, FailureKind::InvalidValue);
    assert!(
        e.message.contains("does not serve the model \"other\""),
        "{e:?}"
    );
    assert!(
        e.message.contains(MODEL) && e.message.contains("model="),
        "{e:?}"
    );

    // A server that ignores the constraint is caught at the first token outside the mask.
    let ignoring = fake(|o| o.ignore_constraints = true);
    let f = ask(q, settings(endpoint(&ignoring.server.url(), "&chunk=1")));
    assert_eq!(failure(&f).kind, FailureKind::EndpointProtocol, "{f:?}");
    assert!(failure(&f).message.contains("illegal_token"), "{f:?}");

    let ok = fake(|_| {});
    let mut s = settings(endpoint(&ok.server.url(), ""));
    s.temperature = 0.7;
    let f = ask(q, s);
    assert_eq!(failure(&f).kind, FailureKind::InvalidValue);
    assert!(failure(&f).message.contains("set grid.temperature to 0"));

    let f = ask(
        q,
        settings(format!(
            "openai+{}/v1?model={MODEL}&tokenizer=/nonexistent/tok",
            ok.server.url()
        )),
    );
    assert_eq!(failure(&f).kind, FailureKind::UnreadableFile);
    assert!(failure(&f).message.contains("tokenizer="), "{f:?}");

    let f = ask(
        q,
        settings(format!("openai+{}/v1?model={MODEL}", ok.server.url())),
    );
    assert_eq!(failure(&f).kind, FailureKind::InvalidValue);
    assert!(failure(&f).message.contains("tokenizer= is missing"));
}

/// `template=server`: the prompt sent is the server's rendering of the system and user
/// messages (ChatML in the fake, one id per byte), the assistant's turn opened; `eos=`
/// names the token that ends the reply, and one the tokenizer lacks is refused.
#[test]
fn the_servers_chat_template_and_the_end_of_turn_are_settings() {
    let q = QUESTIONS[0];
    let server = fake(|_| {});
    let templated = answer(
        q,
        settings(endpoint(&server.server.url(), "&template=server")),
    );
    assert!(templated.1 > 0, "the model chose no token");
    let requests = server.server.requests();
    let n = grid_endpoint::backend::builtin::builtin_vocabulary()
        .unwrap()
        .len() as u32;
    let ids = |t: &str| -> Vec<u32> { t.bytes().map(|b| u32::from(b) % n).collect() };
    let first = &requests[0].prompt;
    assert!(first.starts_with(&ids("<|im_start|>system\n")), "{first:?}");
    let tail = ids("<|im_start|>assistant\n");
    assert!(
        requests.iter().all(|r| r.prompt.len() >= first.len()),
        "every request continues the rendered prompt"
    );
    assert!(
        first.windows(tail.len()).any(|w| w == tail),
        "the assistant's turn is opened"
    );

    let eos = grid_endpoint::backend::builtin::builtin_vocabulary()
        .unwrap()
        .eos_id()
        .unwrap();
    let by_id = answer(
        q,
        settings(endpoint(&fake(|_| {}).server.url(), &format!("&eos={eos}"))),
    );
    assert_eq!(
        by_id,
        answer(q, settings(endpoint(&fake(|_| {}).server.url(), "")))
    );

    let f = ask(
        q,
        settings(endpoint(&fake(|_| {}).server.url(), "&eos=%3Cnope%3E")),
    );
    let e = failure(&f);
    assert_eq!(e.kind, FailureKind::InvalidValue, "{e:?}");
    assert!(
        e.message.contains("eos=\"<nope>\"") && e.message.contains("end of turn"),
        "{e:?}"
    );
}
