//! The row format of the audit store: how each field of grid-core's `StepRecord`,
//! `Seal` and `FeedbackRecord` is held in a column of `grid.audit_log` /
//! `grid.generations` (sql/audit.sql) / `grid.feedback_log` (sql/feedback.sql), in both
//! directions. One definition, so that what the writer stores is exactly what
//! the verifier reads back.
//!
//! Column forms: u64 ids as `bigint` (≥ 0); u32 counts as `integer` or `bigint`;
//! `config_hash` as 8 bytes big-endian; hashes, ids and fingerprints as raw `bytea`;
//! the token as `bigint`, NULL for EOS; enums as their grid-core spelling.

use grid_core::audit::{
    DecodeMode, FeedbackRecord, FeedbackVerdict, Fingerprints, Mode, Seal, SealMeta, StepKind,
    StepRecord, StopReason, Token,
};
use pgrx::spi::SpiHeapTupleData;
use thiserror::Error;

/// A row that does not hold a well-formed record: an edit outside the writer (the
/// verifier reports it as an altered row), or a value the writer cannot store.
#[derive(Debug, Error)]
pub enum RowError {
    #[error("column {column}: {message}")]
    Read {
        column: &'static str,
        message: String,
    },
    #[error("column {column} is NULL")]
    Null { column: &'static str },
    #[error("column {column}: {found} is out of range")]
    Range { column: &'static str, found: i64 },
    #[error("column {column}: expected {expected} bytes, found {found}")]
    Length {
        column: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("column {column}: unknown value {found:?}")]
    Unknown { column: &'static str, found: String },
}

/// Columns of `grid.audit_log` read by [`step_from_row`], in ordinal order.
pub const STEP_COLUMNS: &str =
    "entry, generation, step, config_hash, mask_entry_id, token, blocked_count, kind, prev_hash, hash";

/// Columns of `grid.generations` read by [`seal_from_row`], in ordinal order.
pub const SEAL_COLUMNS: &str = "entry, generation, seal_index, stop, steps, last_step_hash, \
     grammar_fp, lexicons_fp, policy_fp, vocabulary_fp, decode_mode, mask_cache, \
     current_user_name, question_digest, sql_digest, prev_seal_hash, hash, question, final_sql, \
     session_user_name, verdict, prompt_digest";

/// Columns of `grid.feedback_log` read by [`feedback_from_row`], in ordinal order.
pub const FEEDBACK_COLUMNS: &str = "feedback, generation, session_user_name, current_user_name, \
     verdict, corrected_sql, corrected_sql_digest, seal_hash, prev_hash, hash";

/// A feedback record as read back, with the texts it commits to.
#[derive(Debug)]
pub struct FeedbackRow {
    pub record: FeedbackRecord,
    pub current_user: String,
    pub corrected_sql: Option<String>,
}

/// A seal as read back, with the texts its digests commit to.
#[derive(Debug)]
pub struct SealRow {
    pub seal: Seal,
    pub question: Option<String>,
    pub final_sql: Option<String>,
}

fn get<T: pgrx::IntoDatum + pgrx::FromDatum>(
    row: &SpiHeapTupleData<'_>,
    ordinal: usize,
    column: &'static str,
) -> Result<Option<T>, RowError> {
    row.get::<T>(ordinal).map_err(|e| RowError::Read {
        column,
        message: e.to_string(),
    })
}

fn required<T: pgrx::IntoDatum + pgrx::FromDatum>(
    row: &SpiHeapTupleData<'_>,
    ordinal: usize,
    column: &'static str,
) -> Result<T, RowError> {
    get(row, ordinal, column)?.ok_or(RowError::Null { column })
}

fn unsigned_64(v: i64, column: &'static str) -> Result<u64, RowError> {
    u64::try_from(v).map_err(|_| RowError::Range { column, found: v })
}

fn unsigned_32(v: i64, column: &'static str) -> Result<u32, RowError> {
    u32::try_from(v).map_err(|_| RowError::Range { column, found: v })
}

fn bytes<const N: usize>(v: &[u8], column: &'static str) -> Result<[u8; N], RowError> {
    <[u8; N]>::try_from(v).map_err(|_| RowError::Length {
        column,
        expected: N,
        found: v.len(),
    })
}

fn required_bytes<const N: usize>(
    row: &SpiHeapTupleData<'_>,
    ordinal: usize,
    column: &'static str,
) -> Result<[u8; N], RowError> {
    bytes(&required::<Vec<u8>>(row, ordinal, column)?, column)
}

fn optional_bytes<const N: usize>(
    row: &SpiHeapTupleData<'_>,
    ordinal: usize,
    column: &'static str,
) -> Result<Option<[u8; N]>, RowError> {
    get::<Vec<u8>>(row, ordinal, column)?
        .map(|v| bytes(&v, column))
        .transpose()
}

/// The `entry` (log position) and `generation` of a row, read before the rest so that a
/// malformed row can still be located.
pub fn locate(row: &SpiHeapTupleData<'_>) -> (Option<i64>, Option<i64>) {
    (
        row.get::<i64>(1).ok().flatten(),
        row.get::<i64>(2).ok().flatten(),
    )
}

/// The step number of a `grid.audit_log` row, if readable.
pub fn step_number(row: &SpiHeapTupleData<'_>) -> Option<i32> {
    row.get::<i32>(3).ok().flatten()
}

/// A `grid.audit_log` row (columns [`STEP_COLUMNS`]) as a step record.
pub fn step_from_row(row: &SpiHeapTupleData<'_>) -> Result<StepRecord, RowError> {
    let kind_name: String = required(row, 8, "kind")?;
    let kind = StepKind::ALL
        .into_iter()
        .find(|k| k.name() == kind_name)
        .ok_or(RowError::Unknown {
            column: "kind",
            found: kind_name,
        })?;
    let token = match get::<i64>(row, 6, "token")? {
        None => Token::Eos,
        Some(id) => Token::Id(unsigned_32(id, "token")?),
    };
    let step: i32 = required(row, 3, "step")?;
    Ok(StepRecord {
        generation: unsigned_64(required(row, 2, "generation")?, "generation")?,
        step: unsigned_32(i64::from(step), "step")?,
        config_hash: u64::from_be_bytes(required_bytes(row, 4, "config_hash")?),
        mask_entry_id: required_bytes(row, 5, "mask_entry_id")?,
        token,
        blocked_count: unsigned_32(required(row, 7, "blocked_count")?, "blocked_count")?,
        kind,
        prev_hash: required_bytes(row, 9, "prev_hash")?,
        hash: required_bytes(row, 10, "hash")?,
    })
}

/// A `grid.generations` row (columns [`SEAL_COLUMNS`]) as a seal and its texts.
pub fn seal_from_row(row: &SpiHeapTupleData<'_>) -> Result<SealRow, RowError> {
    let stop_name: String = required(row, 4, "stop")?;
    let stop = StopReason::ALL
        .into_iter()
        .find(|s| s.name() == stop_name)
        .ok_or(RowError::Unknown {
            column: "stop",
            found: stop_name,
        })?;
    let mode_name: String = required(row, 11, "decode_mode")?;
    let decode = DecodeMode::ALL
        .into_iter()
        .find(|m| m.name() == mode_name)
        .ok_or(RowError::Unknown {
            column: "decode_mode",
            found: mode_name,
        })?;
    let steps: i32 = required(row, 5, "steps")?;
    let seal = Seal {
        index: unsigned_64(required(row, 3, "seal_index")?, "seal_index")?,
        generation: unsigned_64(required(row, 2, "generation")?, "generation")?,
        stop,
        steps: unsigned_32(i64::from(steps), "steps")?,
        last_step_hash: required_bytes(row, 6, "last_step_hash")?,
        fingerprints: Fingerprints {
            grammar: required_bytes(row, 7, "grammar_fp")?,
            lexicons: required_bytes(row, 8, "lexicons_fp")?,
            policy: required_bytes(row, 9, "policy_fp")?,
            vocabulary: required_bytes(row, 10, "vocabulary_fp")?,
        },
        mode: Mode {
            decode,
            cache: required(row, 12, "mask_cache")?,
        },
        meta: SealMeta {
            role: get::<String>(row, 13, "current_user_name")?.map(|current| {
                let session: Option<String> = get(row, 20, "session_user_name").ok().flatten();
                super::sealed_role(session.as_deref().unwrap_or(""), &current)
            }),
            question_digest: optional_bytes(row, 14, "question_digest")?,
            sql_digest: optional_bytes(row, 15, "sql_digest")?,
            verdict: get(row, 21, "verdict")?,
            prompt_digest: optional_bytes(row, 22, "prompt_digest")?,
        },
        prev_seal_hash: required_bytes(row, 16, "prev_seal_hash")?,
        hash: required_bytes(row, 17, "hash")?,
    };
    Ok(SealRow {
        seal,
        question: get(row, 18, "question")?,
        final_sql: get(row, 19, "final_sql")?,
    })
}

/// A `grid.feedback_log` row (columns [`FEEDBACK_COLUMNS`] first) as a feedback record
/// and its texts.
pub fn feedback_from_row(row: &SpiHeapTupleData<'_>) -> Result<FeedbackRow, RowError> {
    let verdict_name: String = required(row, 5, "verdict")?;
    let verdict = FeedbackVerdict::parse(&verdict_name)
        .filter(|v| v.name() == verdict_name)
        .ok_or(RowError::Unknown {
            column: "verdict",
            found: verdict_name,
        })?;
    let session: String = required(row, 3, "session_user_name")?;
    let current: String = required(row, 4, "current_user_name")?;
    let record = FeedbackRecord {
        index: unsigned_64(required(row, 1, "feedback")?, "feedback")?,
        generation: unsigned_64(required(row, 2, "generation")?, "generation")?,
        seal_hash: required_bytes(row, 8, "seal_hash")?,
        role: super::sealed_role(&session, &current),
        verdict,
        correction_digest: optional_bytes(row, 7, "corrected_sql_digest")?,
        prev_hash: required_bytes(row, 9, "prev_hash")?,
        hash: required_bytes(row, 10, "hash")?,
    };
    Ok(FeedbackRow {
        record,
        current_user: current,
        corrected_sql: get(row, 6, "corrected_sql")?,
    })
}

/// A u64 id as a `bigint` column value.
pub fn id_column(v: u64, column: &'static str) -> Result<i64, RowError> {
    i64::try_from(v).map_err(|_| RowError::Range {
        column,
        found: i64::MAX,
    })
}

/// A u32 count as an `integer` column value.
pub fn int_column(v: u32, column: &'static str) -> Result<i32, RowError> {
    i32::try_from(v).map_err(|_| RowError::Range {
        column,
        found: i64::from(v),
    })
}

/// The `token` column value: the id, or NULL for EOS.
pub fn token_column(t: Token) -> Option<i64> {
    match t {
        Token::Id(id) => Some(i64::from(id)),
        Token::Eos => None,
    }
}
