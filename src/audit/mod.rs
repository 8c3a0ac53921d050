//! The audit store inside PostgreSQL (tables in sql/audit.sql): grid-core's hash-chained
//! log, stored in `grid.audit_log` / `grid.generations`, verified by grid-core's verifier.
//!
//! - `rows`: the row format of step records and seals (both directions).
//! - `sink`: the writer's sink (`TableSink`) and the stored head.
//! - `artifacts`: the content-addressed artifacts the seals name.
//! - `feedback`: the feedback chain (`grid.feedback_log`): writing a record, its head,
//!   verifying it.
//! - `verify`: reading the store back as one log and verifying it.
//! - `replay`: recomputing a stored generation's masks from its artifacts.
//!
//! Only the mask worker writes, in transactions of its own that it commits before it
//! answers, so that a caller's ROLLBACK cannot erase what it asked, and one process
//! holds the chain's head: the pipeline's step records and seals ([`store_steps`],
//! [`store_seals`]), and the generations of given tokens that
//! `grid.audit_append_synthetic()` (superusers only, for tests) asks for
//! ([`write_synthetic`]), through the same `ChainWriter` and sink; and the feedback
//! records `grid.feedback()` asks for ([`record_feedback`]). Nothing here calls the
//! worker: the SQL functions that do live in `worker` and `feedback`.

mod artifacts;
mod feedback;
mod replay;
mod rows;
mod sink;
mod verify;

use grid_core::audit::{
    text_digest, ChainWriter, DecodeMode, Fingerprints, Head, Mode, SealInput, SealMeta, StepInput,
    StepKind, StopReason, Token,
};
use pgrx::prelude::*;

pub use feedback::{record_feedback, FeedbackNote};
use grid_ask::record::sealed_role;
use grid_ask::{ArtifactKind, SealToWrite};
use serde::{Deserialize, Serialize};
pub use sink::StoreError;
use sink::{Asked, TableSink};
pub use verify::verify_store;

// The tables, after the schema exists.
extension_sql_file!(
    "../../sql/audit.sql",
    name = "audit_store",
    requires = ["bootstrap"]
);

/// A generation of given sampled tokens, as `grid.audit_append_synthetic()` asks for it.
/// The backend has checked the caller (a superuser) and the values; the worker checks
/// them again, since anything that reaches the socket may send this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticGeneration {
    pub question: Option<String>,
    pub final_sql: Option<String>,
    pub tokens: Vec<u32>,
    /// A `StopReason` name; `None` leaves the generation unsealed.
    pub stop: Option<String>,
    pub session_user: String,
    pub current_user: String,
    /// How long the worker may wait for the store's lock (a caller that holds a
    /// conflicting lock must get an error, not a worker stuck until it commits).
    pub lock_timeout_ms: u32,
}

/// A stored generation's seal and final statement, if it is sealed (for tests).
#[cfg(any(test, feature = "pg_test"))]
pub fn stored_seal(
    generation: i64,
) -> Result<Option<(grid_core::audit::Seal, Option<String>)>, String> {
    Ok(replay::read(generation)?
        .0
        .map(|row| (row.seal, row.final_sql)))
}

/// The stored head, as text `<seals>:<64 hex digits>`.
pub fn head_text() -> Result<String, StoreError> {
    Ok(sink::stored_head()?.to_string())
}

/// What `grid.audit_append_synthetic()` refuses, in the backend or in the worker.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    #[error("grid.audit_append_synthetic: only superusers may append to the audit store")]
    NotSuperuser,
    #[error("grid.audit_append_synthetic: token {0} is not a vocabulary id (0 ≤ id < 2^32)")]
    Token(i64),
    #[error("grid.audit_append_synthetic: tokens must not contain NULL")]
    NullToken,
    #[error("grid.audit_append_synthetic: unknown stop reason {0:?} (one of eos, budget_completed, budget_truncated, error, cancelled)")]
    Stop(String),
    #[error("grid.audit_append_synthetic: grid_pg is not installed in the worker's database (grid.database)")]
    NotInstalled,
    #[error("grid.audit_append_synthetic: {0}")]
    Write(#[from] grid_core::audit::WriteError),
    #[error("grid.audit_append_synthetic: {0}")]
    Store(#[from] StoreError),
}

impl SyntheticError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            SyntheticError::NotSuperuser => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            SyntheticError::Token(_) | SyntheticError::NullToken | SyntheticError::Stop(_) => {
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
            }
            SyntheticError::NotInstalled => {
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            SyntheticError::Write(_) | SyntheticError::Store(_) => {
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR
            }
        }
    }
}

/// The content a synthetic generation records for the artifact `label`, and its
/// fingerprint (the first 16 bytes of the content's text digest): content-addressed like
/// the real artifacts.
fn synthetic_artifact(label: &str) -> ([u8; 16], serde_json::Value) {
    let d = text_digest(label);
    let mut fp = [0u8; 16];
    fp.copy_from_slice(&d[..16]);
    (fp, serde_json::json!({ "synthetic": label }))
}

fn synthetic_fingerprint(label: &str) -> [u8; 16] {
    synthetic_artifact(label).0
}

fn parse_stop(name: &str) -> Result<StopReason, SyntheticError> {
    StopReason::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| SyntheticError::Stop(name.to_string()))
}

/// The backend's half of `grid.audit_append_synthetic()`: checks the caller and the
/// values, and says who asks.
pub fn synthetic_request(
    question: Option<String>,
    final_sql: Option<String>,
    tokens: &[Option<i32>],
    stop: Option<&str>,
    lock_timeout_ms: u32,
) -> Result<SyntheticGeneration, SyntheticError> {
    // SAFETY: superuser() only reads the current user's role attributes.
    if !unsafe { pg_sys::superuser() } {
        return Err(SyntheticError::NotSuperuser);
    }
    if let Some(name) = stop {
        parse_stop(name)?;
    }
    let tokens = tokens
        .iter()
        .map(|t| {
            let v = i64::from(t.ok_or(SyntheticError::NullToken)?);
            u32::try_from(v).map_err(|_| SyntheticError::Token(v))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let (session_user, current_user) =
        Spi::get_two::<String, String>("SELECT session_user::text, current_user::text")
            .map_err(StoreError::from)?;
    Ok(SyntheticGeneration {
        question,
        final_sql,
        tokens,
        stop: stop.map(str::to_string),
        session_user: session_user.unwrap_or_default(),
        current_user: current_user.unwrap_or_default(),
        lock_timeout_ms,
    })
}

/// The worker's half: appends one generation whose sampled tokens are `g.tokens` (an
/// EOS record is added when the stop reason ends with one), sealed unless `g.stop` is
/// `None` (as a crash in the middle of a generation would leave it), with the artifacts
/// its seal names; returns its generation id and the seal chain's head after it. Runs in
/// the worker's transaction, which the caller commits.
pub fn write_synthetic(g: &SyntheticGeneration) -> Result<(i64, Head), SyntheticError> {
    let stop = g.stop.as_deref().map(parse_stop).transpose()?;
    let installed =
        Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('grid.generations') IS NOT NULL")
            .map_err(StoreError::from)?;
    if installed != Some(true) {
        return Err(SyntheticError::NotInstalled);
    }
    Spi::run(&format!(
        "SET LOCAL lock_timeout = {}",
        g.lock_timeout_ms.max(1)
    ))
    .map_err(StoreError::from)?;
    sink::lock_for_append()?;
    let head: Head = sink::stored_head()?;
    let generation = Spi::get_one::<i64>("SELECT pg_catalog.nextval('grid.generation_seq')")
        .map_err(StoreError::from)?
        .unwrap_or(0);
    let sink = TableSink::new(Asked {
        session_user: g.session_user.clone(),
        current_user: Some(g.current_user.clone()),
        question: g.question.clone(),
        final_sql: g.final_sql.clone(),
        refused: None,
        repair_of: None,
        ask_key: None,
    })?;
    let id = u64::try_from(generation).unwrap_or(0);
    let mut writer = ChainWriter::resume(sink, head);
    writer.begin(id)?;
    let vocabulary = u32::MAX;
    for (i, &token) in g.tokens.iter().enumerate() {
        let i = i as u64;
        let mask = synthetic_fingerprint(&format!("synthetic mask {i}"));
        writer.step(
            id,
            StepInput {
                config_hash: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                mask_entry_id: mask,
                token: Token::Id(token),
                blocked_count: vocabulary - 1,
                kind: StepKind::Sampled,
            },
        )?;
    }
    let Some(stop) = stop else {
        return Ok((generation, writer.head()));
    };
    if stop.ends_with_eos() {
        writer.step(
            id,
            StepInput {
                config_hash: 0,
                mask_entry_id: synthetic_fingerprint("synthetic mask eos"),
                token: Token::Eos,
                blocked_count: 0,
                kind: StepKind::Eos,
            },
        )?;
    }
    let decode = if stop == StopReason::BudgetTruncated {
        DecodeMode::Mode2
    } else {
        DecodeMode::Mode1
    };
    // The lexicons depend on the question here, so that a test can remove the artifact
    // of one generation only.
    let labels = [
        "synthetic grammar".to_string(),
        format!(
            "synthetic lexicons for {}",
            g.question.as_deref().unwrap_or("")
        ),
        "synthetic policy".to_string(),
        "synthetic vocabulary".to_string(),
    ];
    let [grammar, lexicons, policy, vocabulary] = labels.map(|l| synthetic_artifact(&l));
    let fingerprints = Fingerprints {
        grammar: grammar.0,
        lexicons: lexicons.0,
        policy: policy.0,
        vocabulary: vocabulary.0,
    };
    // The artifacts first: a stored seal always finds what it names.
    for (kind, (fingerprint, content)) in [
        (ArtifactKind::Grammar, grammar),
        (ArtifactKind::Lexicons, lexicons),
        (ArtifactKind::Policy, policy),
        (ArtifactKind::Vocabulary, vocabulary),
    ] {
        artifacts::store(&grid_ask::DigestedArtifact::new(grid_ask::Artifact {
            kind,
            fingerprint,
            content: None,
            content_json: Some(content),
        }))?;
    }
    let head = writer.seal(
        id,
        SealInput {
            stop,
            fingerprints,
            mode: Mode {
                decode,
                cache: false,
            },
            meta: SealMeta {
                role: Some(sealed_role(&g.session_user, &g.current_user)),
                question_digest: g.question.as_deref().map(text_digest),
                sql_digest: g.final_sql.as_deref().map(text_digest),
                verdict: None,
                // Sealed as generations were before prompts were: no prompt to bind.
                prompt_digest: None,
            },
        },
    )?;
    Ok((generation, head))
}

/// Two fresh generation ids (a first attempt and its repair); gaps are harmless.
pub fn draw_generation_ids() -> Result<[u64; 2], StoreError> {
    let mut ids = [0u64; 2];
    for id in ids.iter_mut() {
        let v =
            Spi::get_one::<i64>("SELECT pg_catalog.nextval('grid.generation_seq')")?.unwrap_or(0);
        *id = u64::try_from(v).unwrap_or(0);
    }
    Ok(ids)
}

/// Stores step records made by the engine (their hashes are final: a generation's step
/// chain does not depend on the seal chain).
pub fn store_steps(steps: &[grid_core::audit::StepRecord]) -> Result<(), StoreError> {
    let sink = TableSink::new(Asked {
        session_user: String::new(),
        current_user: None,
        question: None,
        final_sql: None,
        refused: None,
        repair_of: None,
        ask_key: None,
    })?;
    for r in steps {
        sink.insert(&grid_core::audit::Entry::Step(r.clone()))?;
    }
    Ok(())
}

/// Stores the seals of one ask: their artifacts first, then each seal re-anchored to the
/// stored head under the writers' lock (the engine chains them from a genesis head it
/// cannot know). Returns the head after them.
pub fn store_seals(
    seals: &[SealToWrite],
    session_user: &str,
    ask_key: Option<&grid_core::audit::Digest32>,
) -> Result<Head, StoreError> {
    for s in seals {
        for a in &s.artifacts {
            artifacts::store(a)?;
        }
    }
    sink::lock_for_append()?;
    let mut head = sink::stored_head()?;
    for s in seals {
        let seal = s.anchored(head);
        let sink = TableSink::started_at(
            Asked {
                session_user: session_user.to_string(),
                current_user: Some(s.current_user.clone()),
                question: Some(s.question.clone()),
                final_sql: s.final_sql.clone(),
                refused: s.refused.clone(),
                repair_of: s.repair_of,
                ask_key: ask_key.copied(),
            },
            s.started_at,
        )?;
        sink.insert(&grid_core::audit::Entry::Seal(seal.clone()))?;
        head = seal.head();
    }
    Ok(head)
}

/// Appends a row to `grid.runs`: `grid.run` is about to run the statement of
/// `generation` for (`session_user`, `current_user`), come to as `called_as`
/// (sql/audit.sql). Returns the run's id.
pub fn record_run(
    generation: i64,
    (session_user, current_user): (&str, &str),
    called_as: &str,
) -> Result<i64, StoreError> {
    let run = Spi::get_one_with_args::<i64>(
        "INSERT INTO grid.runs (generation, session_user_name, current_user_name, called_as) \
         VALUES ($1, $2, $3, $4) RETURNING run",
        &[
            generation.into(),
            session_user.into(),
            current_user.into(),
            called_as.into(),
        ],
    )?;
    Ok(run.unwrap_or(0))
}

/// The audit functions of the SQL API.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    use grid_core::audit::Head;

    /// `grid.verify_audit(expected_head, expected_feedback_head)`: verifies every chain
    /// of the store, the feedback chain last (and, given the heads exported earlier by
    /// `grid.audit_head()` and `grid.feedback_head()`, that no tail was dropped).
    /// SECURITY INVOKER: the caller reads the tables (the `grid_auditor` role may).
    // pgrx reads the column names from the `name!` markers of the signature itself, so the
    // row type cannot be moved to an alias.
    #[allow(clippy::type_complexity)]
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn verify_audit(
        expected_head: default!(Option<&str>, "NULL"),
        expected_feedback_head: default!(Option<&str>, "NULL"),
    ) -> TableIterator<
        'static,
        (
            name!(ok, bool),
            name!(checked, i64),
            name!(first_bad_generation, Option<i64>),
            name!(first_bad_step, Option<i32>),
            name!(reason, Option<String>),
        ),
    > {
        let anchor = match expected_head.map(str::parse::<Head>).transpose() {
            Ok(h) => h,
            Err(e) => {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("grid.verify_audit: expected_head: {e}")
                );
            }
        };
        let feedback_anchor = match expected_feedback_head.map(str::parse::<Head>).transpose() {
            Ok(h) => h,
            Err(e) => {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("grid.verify_audit: expected_feedback_head: {e}")
                );
            }
        };
        let outcome = match super::verify_store(anchor, feedback_anchor) {
            Ok(o) => o,
            Err(e) => error!("grid.verify_audit: {e}"),
        };
        let row = match outcome.finding {
            None => {
                let notes: Vec<String> = [
                    (outcome.unsealed > 0).then(|| {
                        format!(
                            "{} generation(s) without a seal (in flight, or interrupted)",
                            outcome.unsealed
                        )
                    }),
                    (outcome.unbound > 0).then(|| {
                        format!(
                            "{} generation(s) sealed without a prompt digest (written before \
                             prompts were sealed): their artifacts are checked for presence only",
                            outcome.unbound
                        )
                    }),
                ]
                .into_iter()
                .flatten()
                .collect();
                (
                    true,
                    outcome.checked,
                    None,
                    None,
                    (!notes.is_empty()).then(|| notes.join("; ")),
                )
            }
            Some(f) => (false, outcome.checked, f.generation, f.step, Some(f.reason)),
        };
        TableIterator::once(row)
    }

    /// `grid.replay(generation)`: recomputes every mask of `generation` from the archived
    /// artifacts (the role's catalog snapshot and policy, the vocabulary, this version's
    /// dialect) and compares each step with what the log committed to: configuration
    /// hash, mask entry id, blocked count, and that the token was allowed. `ok` false
    /// names the first differing step, or why the generation cannot be replayed.
    /// SECURITY INVOKER: the caller reads the tables (the `grid_auditor` role may).
    #[allow(clippy::type_complexity)]
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn replay(
        generation: i64,
    ) -> TableIterator<
        'static,
        (
            name!(ok, bool),
            name!(steps, i64),
            name!(first_bad_step, Option<i32>),
            name!(reason, Option<String>),
        ),
    > {
        match super::replay::replay(generation) {
            Ok(r) => TableIterator::once((r.ok, r.steps, r.first_bad_step, r.reason)),
            Err(e) => error!("grid.replay: {e}"),
        }
    }

    /// `grid.feedback_head()`: the head of the feedback chain, `<records>:<hash>`, to keep
    /// outside the database beside `grid.audit_head()` and pass to `grid.verify_audit()`
    /// later (its second argument).
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn feedback_head() -> String {
        match super::feedback::stored_head() {
            Ok(h) => h.to_string(),
            Err(e) => error!("grid.feedback_head: {e}"),
        }
    }

    /// `grid.audit_head()`: the head of the seal chain, `<seals>:<hash>`, to keep outside
    /// the database and pass to `grid.verify_audit()` later.
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn audit_head() -> String {
        match super::head_text() {
            Ok(h) => h,
            Err(e) => error!("grid.audit_head: {e}"),
        }
    }
}
