//! Writing the audit store: a grid-core `AuditSink` whose entries become rows of
//! `grid.audit_log` and `grid.generations`, and the head a new writer resumes from.
//!
//! Writers serialise on a lock of `grid.generations` held to the end of their
//! transaction: the head read at the start stays the head until their seal is stored, so
//! two writers can never fork the seal chain.

use grid_core::audit::{AuditSink, Entry, Head, SinkError};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use thiserror::Error;

use super::rows::{id_column, int_column, token_column, RowError};

/// Why the store could not be read or written.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("audit store: {0}")]
    Spi(#[from] pgrx::spi::SpiError),
    #[error("audit store: {0}")]
    Row(#[from] RowError),
}

/// Who asked and what, for the generation's `grid.generations` row. Only the role is
/// part of the seal; the texts are bound to it through the seal's digests.
#[derive(Debug, Clone)]
pub struct Asked {
    pub session_user: String,
    pub current_user: Option<String>,
    pub question: Option<String>,
    pub final_sql: Option<String>,
    /// The checker's violations when `final_sql` was not returned.
    pub refused: Option<String>,
    /// The generation this one repairs.
    pub repair_of: Option<u64>,
    /// The ask's `grid_ask::Ask::reuse_key` (column `ask_key`, not hashed).
    pub ask_key: Option<grid_core::audit::Digest32>,
}

/// The sink of one generation's writer: step records go to `grid.audit_log`, the seal to
/// `grid.generations` together with [`Asked`]. `started_at` is taken when the sink is
/// made, `finished_at` when the seal is stored.
pub struct TableSink {
    asked: Asked,
    started_at: TimestampWithTimeZone,
}

impl StoreError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR
    }
}

impl TableSink {
    /// A sink whose generation started at `started_at` (seconds since the Unix epoch).
    pub fn started_at(asked: Asked, started_at: f64) -> Result<TableSink, StoreError> {
        let started_at = Spi::get_one_with_args::<TimestampWithTimeZone>(
            "SELECT pg_catalog.to_timestamp($1)",
            &[started_at.into()],
        )?
        .ok_or(RowError::Null {
            column: "started_at",
        })?;
        Ok(TableSink { asked, started_at })
    }

    pub fn new(asked: Asked) -> Result<TableSink, StoreError> {
        let started_at = Spi::get_one::<TimestampWithTimeZone>(
            "SELECT pg_catalog.clock_timestamp()",
        )?
        .ok_or(RowError::Null {
            column: "started_at",
        })?;
        Ok(TableSink { asked, started_at })
    }
}

/// Takes the writers' lock (see the module comment). Held until the transaction ends.
pub fn lock_for_append() -> Result<(), StoreError> {
    Spi::run("LOCK TABLE grid.generations IN SHARE ROW EXCLUSIVE MODE")?;
    Ok(())
}

/// The head of the stored seal chain: the last seal's index + 1 and hash, or the genesis
/// head of an empty store.
pub fn stored_head() -> Result<Head, StoreError> {
    chain_head(
        "SELECT seal_index, hash FROM grid.generations ORDER BY seal_index DESC LIMIT 1",
        "seal_index",
        Head::genesis(),
    )
}

/// The head of a stored hash chain: `last` reads its last record's index (`index_column`)
/// and hash, and the head is that index + 1 and the hash, or `genesis` when it reads no
/// row. Both chains, the seals' and the feedback's, are read this way.
pub fn chain_head(
    last: &str,
    index_column: &'static str,
    genesis: Head,
) -> Result<Head, StoreError> {
    let last = Spi::connect(|client| {
        let table = client.select(last, None, &[])?;
        if table.is_empty() {
            return Ok::<_, StoreError>(None);
        }
        let row = table.first();
        Ok(Some((row.get::<i64>(1)?, row.get::<Vec<u8>>(2)?)))
    })?;
    match last {
        None => Ok(genesis),
        Some((Some(index), Some(hash))) => {
            let last = u64::try_from(index).map_err(|_| RowError::Range {
                column: index_column,
                found: index,
            })?;
            let hash = <[u8; 32]>::try_from(hash.as_slice()).map_err(|_| RowError::Length {
                column: "hash",
                expected: 32,
                found: hash.len(),
            })?;
            Ok(Head {
                seals: last.saturating_add(1),
                hash,
            })
        }
        Some((None, _)) => Err(RowError::Null {
            column: index_column,
        }
        .into()),
        Some((_, None)) => Err(RowError::Null { column: "hash" }.into()),
    }
}

impl TableSink {
    pub fn insert(&self, entry: &Entry) -> Result<(), StoreError> {
        match entry {
            Entry::Step(r) => {
                let args: Vec<DatumWithOid> = vec![
                    id_column(r.generation, "generation")?.into(),
                    int_column(r.step, "step")?.into(),
                    r.config_hash.to_be_bytes().to_vec().into(),
                    r.mask_entry_id.to_vec().into(),
                    token_column(r.token).into(),
                    i64::from(r.blocked_count).into(),
                    r.kind.name().into(),
                    r.prev_hash.to_vec().into(),
                    r.hash.to_vec().into(),
                ];
                Spi::run_with_args(
                    "INSERT INTO grid.audit_log (entry, generation, step, config_hash, \
                     mask_entry_id, token, blocked_count, kind, prev_hash, hash) \
                     VALUES (pg_catalog.nextval('grid.audit_entry_seq'), \
                     $1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    &args,
                )?;
            }
            Entry::Seal(s) => {
                let f = &s.fingerprints;
                let args: Vec<DatumWithOid> = vec![
                    id_column(s.generation, "generation")?.into(),
                    self.asked.session_user.as_str().into(),
                    self.asked.current_user.as_deref().into(),
                    self.asked.question.as_deref().into(),
                    s.meta.question_digest.map(|d| d.to_vec()).into(),
                    self.asked.final_sql.as_deref().into(),
                    s.meta.sql_digest.map(|d| d.to_vec()).into(),
                    id_column(s.index, "seal_index")?.into(),
                    s.stop.name().into(),
                    int_column(s.steps, "steps")?.into(),
                    s.last_step_hash.to_vec().into(),
                    f.grammar.to_vec().into(),
                    f.lexicons.to_vec().into(),
                    f.policy.to_vec().into(),
                    f.vocabulary.to_vec().into(),
                    s.mode.decode.name().into(),
                    s.mode.cache.into(),
                    s.prev_seal_hash.to_vec().into(),
                    s.hash.to_vec().into(),
                    self.started_at.into(),
                    self.asked.refused.as_deref().into(),
                    self.asked
                        .repair_of
                        .map(|g| id_column(g, "repair_of"))
                        .transpose()?
                        .into(),
                    s.meta.verdict.as_deref().into(),
                    s.meta.prompt_digest.map(|d| d.to_vec()).into(),
                    self.asked.ask_key.map(|k| k.to_vec()).into(),
                ];
                Spi::run_with_args(
                    "INSERT INTO grid.generations (entry, generation, session_user_name, \
                     current_user_name, question, question_digest, final_sql, sql_digest, \
                     seal_index, stop, steps, last_step_hash, grammar_fp, lexicons_fp, \
                     policy_fp, vocabulary_fp, decode_mode, mask_cache, prev_seal_hash, hash, \
                     started_at, finished_at, refused, repair_of, verdict, prompt_digest, ask_key) \
                     VALUES (pg_catalog.nextval('grid.audit_entry_seq'), \
                     $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
                     $17, $18, $19, $20, pg_catalog.clock_timestamp(), $21, $22, $23, $24, $25)",
                    &args,
                )?;
            }
        }
        Ok(())
    }
}

impl AuditSink for TableSink {
    fn append(&mut self, entry: &Entry) -> Result<(), SinkError> {
        self.insert(entry).map_err(|e| Box::new(e) as SinkError)
    }
}
