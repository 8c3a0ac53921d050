//! The audit store inside PostgreSQL (tables in sql/audit.sql): grid-core's hash-chained
//! log, stored in `grid.audit_log` / `grid.generations`, verified by grid-core's verifier.
//!
//! - `rows`: the row format of step records and seals (both directions).
//! - `sink`: the writer's sink (`TableSink`) and the stored head.
//! - `verify`: reading the store back as one log and verifying it.
//!
//! The decode loop's writer will run in the mask worker, in its own transactions, so
//! that a caller's ROLLBACK cannot erase what it asked. Until then
//! `grid.audit_append_synthetic()` writes a generation of given tokens through the same
//! `ChainWriter` and sink, in the caller's transaction; it is for tests and
//! superusers only.

mod rows;
mod sink;
mod verify;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

use grid_core::audit::{
    text_digest, ChainWriter, DecodeMode, Fingerprints, Head, Mode, SealInput, SealMeta, StepInput,
    StepKind, StopReason, Token,
};
use pgrx::prelude::*;

pub use sink::StoreError;
use sink::{Asked, TableSink};
pub use verify::verify_store;

// The tables, after the schema exists.
extension_sql_file!(
    "../../sql/audit.sql",
    name = "audit_store",
    requires = ["bootstrap"]
);

/// The stored head, as text `<seals>:<64 hex digits>`.
pub fn head_text() -> Result<String, StoreError> {
    Ok(sink::stored_head()?.to_string())
}

/// What `grid.audit_append_synthetic()` refuses.
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
    #[error("grid.audit_append_synthetic: {0}")]
    Write(#[from] grid_core::audit::WriteError),
    #[error("grid.audit_append_synthetic: {0}")]
    Store(#[from] StoreError),
}

/// The fingerprint a synthetic generation records for each artefact: the first 16 bytes
/// of the text digest of a fixed label, so that every synthetic generation shares them.
fn synthetic_fingerprint(label: &str) -> [u8; 16] {
    let d = text_digest(label);
    let mut fp = [0u8; 16];
    fp.copy_from_slice(&d[..16]);
    fp
}

/// Appends one sealed generation whose sampled tokens are `tokens` (an EOS record is
/// added when `stop` ends with one), as the writer of the decode loop will; returns its
/// generation id. With `stop` = `None` the generation is left unsealed, as a crash in the
/// middle of a generation would leave it.
pub fn append_synthetic(
    question: Option<String>,
    final_sql: Option<String>,
    tokens: &[Option<i32>],
    stop: Option<&str>,
) -> Result<i64, SyntheticError> {
    // SAFETY: superuser() only reads the current user's role attributes.
    if !unsafe { pg_sys::superuser() } {
        return Err(SyntheticError::NotSuperuser);
    }
    let stop = stop
        .map(|name| {
            StopReason::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .ok_or_else(|| SyntheticError::Stop(name.to_string()))
        })
        .transpose()?;
    let ids = tokens
        .iter()
        .map(|t| {
            let v = i64::from(t.ok_or(SyntheticError::NullToken)?);
            u32::try_from(v).map_err(|_| SyntheticError::Token(v))
        })
        .collect::<Result<Vec<u32>, _>>()?;

    sink::lock_for_append()?;
    let head: Head = sink::stored_head()?;
    let generation = Spi::get_one::<i64>("SELECT pg_catalog.nextval('grid.generation_seq')")
        .map_err(StoreError::from)?
        .unwrap_or(0);
    let (session_user, current_user) =
        Spi::get_two::<String, String>("SELECT session_user::text, current_user::text")
            .map_err(StoreError::from)?;
    let sink = TableSink::new(Asked {
        session_user: session_user.unwrap_or_default(),
        question: question.clone(),
        final_sql: final_sql.clone(),
    })?;
    let id = u64::try_from(generation).unwrap_or(0);
    let mut writer = ChainWriter::resume(sink, head);
    writer.begin(id)?;
    let vocabulary = u32::MAX;
    for (i, &token) in ids.iter().enumerate() {
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
        return Ok(generation);
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
    writer.seal(
        id,
        SealInput {
            stop,
            fingerprints: Fingerprints {
                grammar: synthetic_fingerprint("synthetic grammar"),
                lexicons: synthetic_fingerprint("synthetic lexicons"),
                policy: synthetic_fingerprint("synthetic policy"),
                vocabulary: synthetic_fingerprint("synthetic vocabulary"),
            },
            mode: Mode {
                decode,
                cache: false,
            },
            meta: SealMeta {
                role: current_user,
                question_digest: question.as_deref().map(text_digest),
                sql_digest: final_sql.as_deref().map(text_digest),
            },
        },
    )?;
    Ok(generation)
}

/// The audit functions of the SQL API.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    use grid_core::audit::Head;

    /// `grid.verify_audit(expected_head)`: verifies every chain of the store (and, given
    /// the head exported earlier by `grid.audit_head()`, that no tail was dropped).
    /// SECURITY INVOKER: the caller reads the tables (the `grid_auditor` role may).
    // pgrx reads the column names from the `name!` markers of the signature itself, so the
    // row type cannot be moved to an alias.
    #[allow(clippy::type_complexity)]
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn verify_audit(
        expected_head: default!(Option<&str>, "NULL"),
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
        let outcome = match super::verify_store(anchor) {
            Ok(o) => o,
            Err(e) => error!("grid.verify_audit: {e}"),
        };
        let row = match outcome.finding {
            None => (
                true,
                outcome.checked,
                None,
                None,
                (outcome.unsealed > 0).then(|| {
                    format!(
                        "{} generation(s) without a seal (in flight, or interrupted)",
                        outcome.unsealed
                    )
                }),
            ),
            Some(f) => (false, outcome.checked, f.generation, f.step, Some(f.reason)),
        };
        TableIterator::once(row)
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

    /// `grid.audit_append_synthetic(...)`: appends a generation of the given sampled
    /// tokens through grid-core's chain writer, in the caller's transaction, sealed with
    /// `stop` (left unsealed when `stop` is NULL).
    /// For tests until the mask worker writes real generations; superusers only.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn audit_append_synthetic(
        question: Option<String>,
        final_sql: Option<String>,
        tokens: Vec<Option<i32>>,
        stop: default!(Option<&str>, "'eos'"),
    ) -> i64 {
        match super::append_synthetic(question, final_sql, &tokens, stop) {
            Ok(g) => g,
            Err(e @ super::SyntheticError::NotSuperuser) => {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    e.to_string()
                );
            }
            Err(e) => error!("{e}"),
        }
    }
}
