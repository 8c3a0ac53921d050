//! The ask pipeline of grid_pg, without PostgreSQL: a question and the asking role's
//! catalog snapshot in; a statement written under the role's masks, checked, repaired at
//! most once, judged, and sealed in the audit chain out. `grid.ask()` runs it in the
//! extension's worker (which adds the socket, the background worker, SPI and the mapping
//! of [`FailureKind`]s to SQLSTATEs); `grid generate` runs it from the command line.
//!
//! # The pipeline
//!
//! 1. **Model and language.** The ask's endpoint setting names a model
//!    ([`grid_endpoint::EndpointSpec`]); its vocabulary is fetched once and kept
//!    ([`models`]). The role's language is compiled from its snapshot and base policy,
//!    and kept by (snapshot fingerprint, policy, vocabulary) ([`language`]).
//! 2. **Prompt.** [`grid_core::prompt`] makes a structured prompt (a system part with the
//!    instruction, a user part with the schema and the question);
//!    [`models::Prompter::tokens`] is the one place a prompt becomes token ids (today the
//!    flat text through the vocabulary's encoder; an endpoint's chat rendering replaces
//!    its body).
//! 3. **Generation.** Asks that share an endpoint and its sampling run in one decode loop
//!    ([`round`]), which admits the group's later asks between ticks and answers each ask
//!    as soon as it is done ([`queue`] holds what waits).
//! 4. **Checker, repair, judge** ([`flow`]): the checker refuses a statement (column
//!    privileges, ...); a refused statement is repaired once, the violations quoted back.
//!    A statement the checker passes goes to the host's [`Judge`]; a statement the judge
//!    refuses is repaired once too (one repair per ask in all), the judge's message
//!    quoted back. A refused statement is never returned. An output that is the model's
//!    decline (`CANNOT ANSWER 'reason'`, [`grid_core::statement::decline_of`]) is no
//!    statement: it ends the ask with its reason ([`FailureKind::Declined`]), unchecked,
//!    unjudged and unrepaired.
//! 5. **Seals and artifacts** ([`record`]): every generation that ran is sealed, with
//!    the artifacts its fingerprints name (grammar, lexicons, policy, vocabulary) and the
//!    prompt the model was shown, whose digest the seal carries and which binds the
//!    others' contents ([`contents`]); an ask that fails before its generation begins is
//!    sealed too. They are made in this one place; [`replay`] rebuilds a generation's
//!    language from them.
//! 6. **Answer** ([`answer`]): the statement with its explain rows, or a [`Failure`].
//!
//! [`output::StatementCheck`] is the independent check of what a model wrote (no
//! forbidden lexeme for the role), the one reference the tests and the tools call.
//!
//! # Running it
//!
//! [`engine::run`] is the body of the pipeline's thread: the host sends
//! [`host::Input`]s (asks as [`Job`]s, and the judge's verdicts) and receives
//! [`host::Output`]s through its [`host::Outbox`]: step records as they are made
//! (so that a generation in flight is on record up to its last step), then each ask's
//! [`flow::Finished`] (its seals, chained from the genesis head, which the host
//! re-anchors to its stored head with [`record::SealToWrite::anchored`], and its
//! [`Answer`]). [`ask_all`] runs a fixed set of asks to their answers on the calling
//! thread (the CLI, tests).
//!
//! # The judge, and why the flow can be resumed
//!
//! The judge is the host's last check of a statement: the extension will have
//! PostgreSQL parse, analyse and plan it (EXPLAIN, never executed) *as the caller*.
//! That must run in the asking backend (the caller's session, its SPI), not on the
//! pipeline's thread in the worker. So judging is asynchronous:
//!
//! - when a statement passes the checker, the pipeline calls [`Judge::judge`] with a
//!   [`Candidate`] (the ask's id, the generation, the statement, who asks, whether a
//!   failure can still be repaired);
//! - a judge that can decide on the spot returns [`Ruling::Now`]; the CLI's
//!   [`NoJudge`] says [`Verdict::Unjudged`] for every statement;
//! - a judge that cannot returns [`Ruling::Later`] after handing the candidate on (the
//!   worker's judge will send it to the asking backend as a "judge this" answer on the
//!   ask's own connection). The ask is *parked*: it leaves the decode loop (which goes on
//!   with the others), keeping its attempts, seals and language;
//! - the host hands the verdict back as [`host::Input::Verdict`] (the backend runs
//!   EXPLAIN in a subtransaction it rolls back and sends the verdict on the same
//!   connection; the worker's socket thread passes it to the pipeline). A pass answers
//!   the ask; a failure starts its repair (if the ask has not used it), which joins the
//!   next decode loop of its group like a new ask and comes back to the judge in turn;
//!   a second failure ends the ask with the judge's own error code
//!   ([`FailureKind::Judged`]);
//! - a parked ask whose asker goes away (cancelled, past its deadline, or the host hangs
//!   up) is answered as cancelled with its seals, so that no audit row is lost.
//!
//! The verdict is kept on the attempt ([`flow::Attempted::verdict`]) and reaches
//! [`flow::Flow::finish`], where the seals are made: recording it in the seal is a change
//! of that one function (and of the seal format).
//!
//! # Ablations
//!
//! [`Ablation`] (the extension's superuser-only `grid.ablation`, `grid generate
//! --ablation`): `unconstrained` runs the same prompt and model with no mask (every
//! non-special token allowed, EOS always allowed), sealed in decode mode
//! `unconstrained` so that such a generation can never pass for a guarded one;
//! `no_repair` ends an ask at its first refusal. The checker still checks every
//! statement: an unconstrained statement it refuses is not returned either.

pub(crate) mod answer;
pub mod contents;
pub mod engine;
pub mod examples;
pub(crate) mod failure;
pub mod flow;
mod hands;
pub mod host;
pub(crate) mod job;
pub mod judge;
pub mod language;
pub(crate) mod models;
pub(crate) mod output;
pub(crate) mod queue;
pub mod record;
pub mod replay;
pub mod request;
pub(crate) mod rewind;
mod round;
pub mod sanitize;

pub use answer::{Answer, Generated};
pub use contents::{Artifact, ArtifactKind, DigestedArtifact};
pub use failure::{Failure, FailureKind};
pub use flow::Finished;
pub use host::{Input, Outbox, Output, Warm};
pub use job::{Job, SEED};
pub use judge::{Candidate, Judge, NoJudge, Ruling, Verdict};
pub use models::MockDefaults;
pub use output::StatementCheck;
pub use record::SealToWrite;
pub use request::{Ablation, Ask, AskSettings, AuditLevel};

/// Runs `jobs` through the pipeline on the calling thread, judged by `judge`, and
/// returns every output in the order it was made (each ask's step records, then its
/// [`Output::Finish`]). What `grid generate` runs: the same [`engine::run`] as the
/// extension's worker.
pub fn ask_all(jobs: Vec<Job>, judge: &mut dyn Judge, defaults: MockDefaults) -> Vec<Output> {
    let (tx, rx) = std::sync::mpsc::channel();
    for job in jobs {
        // The receiver lives until `run` returns.
        let _ = tx.send(Input::Ask(Box::new(job)));
    }
    drop(tx);
    let outbox = Collect::default();
    engine::run(rx, &outbox, judge, defaults);
    outbox.into_outputs()
}

/// An outbox that keeps what it is sent.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<Output>>);

impl Collect {
    fn into_outputs(self) -> Vec<Output> {
        self.0
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Outbox for Collect {
    fn send(&self, output: Output) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(output);
    }
}
