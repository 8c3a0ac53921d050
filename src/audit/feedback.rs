//! The feedback chain in PostgreSQL (`grid.feedback_log`, sql/feedback.sql): grid-core's
//! `FeedbackRecord`s, written by the worker in a transaction of its own (as `grid.runs`
//! rows are) and verified by `grid.verify_audit()` after the seal chain.
//!
//! The backend (`crate::feedback`) checks the caller, its generation and its correction
//! as the caller; the worker checks again what it can see from the store (anything that
//! reaches the socket may send a note): the generation is sealed and was asked by the
//! note's `current_user`, `right` is said only of an answer and with no correction.
//! Writers serialise on a lock of `grid.feedback_log` held to the end of their
//! transaction, so the head read at the start stays the head until the record is stored.

use grid_core::audit::{
    feedback_genesis_head, text_digest, FeedbackRecord, FeedbackVerdict, FeedbackVerifier, Head,
};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use serde::{Deserialize, Serialize};

use super::rows::{self, id_column, RowError, FEEDBACK_COLUMNS};
use super::sink::StoreError;
use super::verify::Finding;

/// Rows fetched per round trip of the verifier's cursor.
const BATCH: i64 = 1000;

/// What `grid.feedback()` asks the worker to record (a row of `grid.feedback_log`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackNote {
    pub generation: i64,
    pub session_user: String,
    pub current_user: String,
    /// `right` or `wrong`.
    pub verdict: String,
    /// The corrected statement, only with `wrong`.
    pub corrected_sql: Option<String>,
}

/// What the worker refuses to record, or why it could not.
#[derive(Debug, thiserror::Error)]
pub enum FeedbackError {
    #[error("verdict must be 'right' or 'wrong', not {0:?}")]
    Verdict(String),
    #[error("a corrected statement comes only with 'wrong'")]
    CorrectionWithRight,
    #[error("generation {0} is not one the current role asked")]
    NotTheRoles(i64),
    #[error(
        "generation {0} returned no statement to the current role: only 'wrong' may be said of it"
    )]
    NotAnAnswer(i64),
    #[error("grid_pg is not installed in the worker's database (grid.database)")]
    NotInstalled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<pgrx::spi::SpiError> for FeedbackError {
    fn from(e: pgrx::spi::SpiError) -> FeedbackError {
        FeedbackError::Store(e.into())
    }
}

impl From<RowError> for FeedbackError {
    fn from(e: RowError) -> FeedbackError {
        FeedbackError::Store(e.into())
    }
}

impl FeedbackError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            FeedbackError::Verdict(_)
            | FeedbackError::CorrectionWithRight
            | FeedbackError::NotAnAnswer(_) => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            FeedbackError::NotTheRoles(_) => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            FeedbackError::NotInstalled => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            FeedbackError::Store(e) => e.sqlstate(),
        }
    }
}

/// Takes the feedback writers' lock (held until the transaction ends).
fn lock_for_append() -> Result<(), StoreError> {
    Spi::run("LOCK TABLE grid.feedback_log IN SHARE ROW EXCLUSIVE MODE")?;
    Ok(())
}

/// The head of the stored feedback chain: the last record's index + 1 and hash, or the
/// genesis head of an empty chain.
pub fn stored_head() -> Result<Head, StoreError> {
    super::sink::chain_head(
        "SELECT feedback, hash FROM grid.feedback_log ORDER BY feedback DESC LIMIT 1",
        "feedback",
        feedback_genesis_head(),
    )
}

/// The worker's half of `grid.feedback()`: checks the note against the store, chains
/// the record after the stored head and appends it. Returns its index (the row's
/// `feedback`). Runs in the worker's transaction, which the caller commits.
pub fn record_feedback(n: &FeedbackNote) -> Result<i64, FeedbackError> {
    let verdict = FeedbackVerdict::parse(&n.verdict)
        .ok_or_else(|| FeedbackError::Verdict(n.verdict.clone()))?;
    if verdict == FeedbackVerdict::Right && n.corrected_sql.is_some() {
        return Err(FeedbackError::CorrectionWithRight);
    }
    let installed =
        Spi::get_one::<bool>("SELECT pg_catalog.to_regclass('grid.feedback_log') IS NOT NULL")?;
    if installed != Some(true) {
        return Err(FeedbackError::NotInstalled);
    }
    let generation =
        u64::try_from(n.generation).map_err(|_| FeedbackError::NotTheRoles(n.generation))?;
    // The generation's seal, if the note's role asked it, and whether it is an answer.
    let sealed = Spi::connect(|c| {
        let rows = c.select(
            "SELECT g.hash,
                    EXISTS (SELECT FROM grid.answers a
                             WHERE a.generation OPERATOR(pg_catalog.=) g.generation)
               FROM grid.generations g
              WHERE g.generation OPERATOR(pg_catalog.=) $1
                AND g.current_user_name OPERATOR(pg_catalog.=) $2",
            Some(1),
            &[n.generation.into(), n.current_user.as_str().into()],
        )?;
        let mut found = None;
        for r in rows {
            found = Some((r.get::<Vec<u8>>(1)?, r.get::<bool>(2)?.unwrap_or(false)));
        }
        Ok::<_, pgrx::spi::SpiError>(found)
    })?;
    let Some((Some(seal_hash), answer)) = sealed else {
        return Err(FeedbackError::NotTheRoles(n.generation));
    };
    if verdict == FeedbackVerdict::Right && !answer {
        return Err(FeedbackError::NotAnAnswer(n.generation));
    }
    let seal_hash = <[u8; 32]>::try_from(seal_hash.as_slice()).map_err(|_| RowError::Length {
        column: "hash",
        expected: 32,
        found: seal_hash.len(),
    })?;
    lock_for_append()?;
    let head = stored_head()?;
    let record = FeedbackRecord::chained(
        head,
        generation,
        seal_hash,
        super::sealed_role(&n.session_user, &n.current_user),
        verdict,
        n.corrected_sql.as_deref().map(text_digest),
    );
    let index = id_column(record.index, "feedback")?;
    Spi::run_with_args(
        "INSERT INTO grid.feedback_log (feedback, generation, session_user_name, \
         current_user_name, verdict, corrected_sql, corrected_sql_digest, seal_hash, \
         prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            index.into(),
            n.generation.into(),
            n.session_user.as_str().into(),
            n.current_user.as_str().into(),
            verdict.name().into(),
            n.corrected_sql.as_deref().into(),
            record.correction_digest.map(|d| d.to_vec()).into(),
            record.seal_hash.to_vec().into(),
            record.prev_hash.to_vec().into(),
            record.hash.to_vec().into(),
        ],
    )?;
    Ok(index)
}

/// What verifying the feedback chain found: the records that passed before the first
/// problem (or all), and the first problem.
pub struct Verified {
    pub checked: i64,
    pub finding: Option<Finding>,
}

/// Verifies the feedback chain as committed, against `expected_head` (a
/// `grid.feedback_head()` exported earlier) if given: each record's hash and link
/// (grid-core's `FeedbackVerifier`), its correction against its digest, and its
/// generation's seal and asker against `grid.generations` (the seal chain itself is
/// verified before).
pub fn verify(client: &SpiClient<'_>, expected_head: Option<Head>) -> Result<Verified, StoreError> {
    let query = format!(
        "SELECT x.*, g.hash, g.current_user_name
           FROM (SELECT {FEEDBACK_COLUMNS} FROM grid.feedback_log) x
           LEFT JOIN grid.generations g ON g.generation OPERATOR(pg_catalog.=) x.generation
          ORDER BY x.feedback"
    );
    let mut cursor = client.try_open_cursor(&query, &[])?;
    let mut verifier = FeedbackVerifier::new(expected_head);
    let mut checked: i64 = 0;
    loop {
        let table = cursor.fetch(BATCH)?;
        if table.is_empty() {
            break;
        }
        for row in table {
            let index = row.get::<i64>(1).ok().flatten();
            let generation = row.get::<i64>(2).ok().flatten();
            let fail = |reason: String| Verified {
                checked,
                finding: Some(Finding {
                    generation,
                    step: None,
                    reason,
                }),
            };
            let at = format!(
                "feedback {} (generation {})",
                index.map_or("?".to_string(), |i| i.to_string()),
                generation.map_or("?".to_string(), |g| g.to_string())
            );
            let read = match rows::feedback_from_row(&row) {
                Ok(read) => read,
                Err(e) => return Ok(fail(format!("{at}: malformed row: {e}"))),
            };
            if let Err(e) = verifier.push(&read.record) {
                return Ok(fail(e.to_string()));
            }
            let differs = match (&read.corrected_sql, &read.record.correction_digest) {
                (Some(t), Some(d)) => text_digest(t) != *d,
                (Some(_), None) | (None, Some(_)) => true,
                (None, None) => false,
            };
            if differs {
                return Ok(fail(format!(
                    "{at}: corrected_sql does not match the chained corrected_sql_digest"
                )));
            }
            let sealed: Option<Vec<u8>> = row.get(11).ok().flatten();
            let asker: Option<String> = row.get(12).ok().flatten();
            match sealed {
                None => {
                    return Ok(fail(format!(
                        "{at}: its generation has no seal in grid.generations"
                    )))
                }
                Some(h) if h.as_slice() != read.record.seal_hash.as_slice() => {
                    return Ok(fail(format!(
                        "{at}: its generation's seal is not the one the record binds"
                    )))
                }
                Some(_) => {}
            }
            if asker.as_deref() != Some(read.current_user.as_str()) {
                return Ok(fail(format!(
                    "{at}: said by {:?}, but the generation was asked by {:?}",
                    read.current_user,
                    asker.unwrap_or_default()
                )));
            }
            checked += 1;
        }
    }
    match verifier.finish() {
        Ok(_) => Ok(Verified {
            checked,
            finding: None,
        }),
        Err(e) => Ok(Verified {
            checked,
            finding: Some(Finding {
                generation: None,
                step: None,
                reason: e.to_string(),
            }),
        }),
    }
}
