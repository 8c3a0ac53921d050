//! Curated examples (`grid.examples`, sql/examples.sql): question/SQL pairs that members
//! of `grid_curator` write and `grid.ask()` shows the model before the question, as
//! few-shot pairs, when `grid.examples` (k) is above 0.
//!
//! At each ask:
//! 1. in the asking backend ([`offered`]), the authors the caller trusts are read as the
//!    caller (`grid.trusted_author`), then the store as its owner (askers may not read
//!    it): the rows of those authors, ranked by similarity to the question, at most
//!    [`EXAMINED_PER_K`]·k of them. They travel with the ask, unvetted
//!    (`grid_ask::request::Offered`);
//! 2. in the worker, where the caller's language is kept compiled (it is the language the
//!    ask's masks come from), a row is a candidate only if its SQL is a sentence of that
//!    language and the checker passes it for the caller; each candidate is then sent back
//!    to the backend to be judged (`EXPLAIN` as the caller, [`crate::judge`]) on the
//!    ask's connection, like a statement the model wrote (`grid_ask::examples`);
//! 3. the first k that pass, in rank order, that fit `grid.examples_bytes` are rendered
//!    into the prompt; its prompt artifact records them by id and digest
//!    (`grid_ask::contents::PromptRecord`).
//!
//! So no backend builds a language (or the dialect) to vet examples: a new connection
//! costs what the store's reading and the judge's plans cost, not a compilation.
//!
//! Every row read is examined whatever happens to the others, and a row dropped at any
//! step is dropped silently: no error, NOTICE or count says that it exists.
//!
//! Similarity: full-text search, built into PostgreSQL (no extension to install): the
//! lexemes of `to_tsvector('english', …)` of the question and of each example's question,
//! ranked by the cosine of their sets (shared lexemes over the geometric mean of their
//! counts), ties by id. `pg_trgm` would rank misspellings better but is a contrib module:
//! `CREATE EXTENSION grid_pg` would then need `CASCADE`.

use pgrx::prelude::*;

use grid_ask::request::{Example, Offered};

// The table and its trigger, after grid_curator exists and the trigger's check function.
extension_sql_file!(
    "../sql/examples.sql",
    name = "examples",
    requires = ["provenance", grid::check_example]
);

/// Rows read per example shown, at most: what an ask examines is bounded by k, not by
/// the size of the store.
const EXAMINED_PER_K: i32 = 4;

/// Longest reading of the store when the caller has no `statement_timeout`.
const READ_TIMEOUT_MS: i32 = 10_000;

/// The store's rows of the trusted authors `$2` (`name[]`), the closest to the question
/// `$1` first, at most `$3`.
const RANKED: &str = "
WITH q AS (
    SELECT pg_catalog.tsvector_to_array(
               pg_catalog.to_tsvector('pg_catalog.english'::pg_catalog.regconfig, $1)) AS l)
SELECT e.id, e.question, e.sql
  FROM grid.examples e, q,
       LATERAL (SELECT pg_catalog.tsvector_to_array(
                    pg_catalog.to_tsvector('pg_catalog.english'::pg_catalog.regconfig, e.question)) AS l) x
 WHERE e.added_by OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.name[])
 ORDER BY (SELECT pg_catalog.count(*) FROM pg_catalog.unnest(x.l) w
            WHERE w OPERATOR(pg_catalog.=) ANY (q.l))::pg_catalog.float8
          OPERATOR(pg_catalog./) pg_catalog.sqrt(
              GREATEST(pg_catalog.cardinality(x.l), 1)::pg_catalog.float8
              OPERATOR(pg_catalog.*) GREATEST(pg_catalog.cardinality(q.l), 1)::pg_catalog.float8) DESC,
          e.id
 LIMIT $3";

/// The examples to offer with an ask of `question`, closest first, to be vetted by the
/// worker (see the module documentation); `None` when `grid.examples` is 0 or none can
/// be read. A cancel is raised; any other failure leaves the ask without examples (the
/// question is still asked).
pub fn offered(what: &str, question: &str) -> Option<Offered> {
    let k = crate::guc::examples();
    if k <= 0 {
        return None;
    }
    let candidates = match ranked(question, k.saturating_mul(EXAMINED_PER_K)) {
        Ok(rows) => rows,
        Err(why) => {
            pgrx::debug1!("{what}: no examples: {why}");
            return None;
        }
    };
    (!candidates.is_empty()).then(|| Offered {
        candidates,
        most: u32::try_from(k).unwrap_or(0),
        bytes: u32::try_from(crate::guc::examples_bytes()).unwrap_or(0),
    })
}

/// The rows of the store by authors the caller trusts, closest to `question` first, at
/// most `limit`, read as the store's owner. A cancel is raised.
fn ranked(question: &str, limit: i32) -> Result<Vec<Example>, String> {
    let trusted = crate::provenance::trusted_authors()
        .map_err(|e| format!("reading the trusted authors: {e}"))?;
    if trusted.is_empty() {
        return Ok(Vec::new());
    }
    crate::store::read_as_owner("grid.examples", READ_TIMEOUT_MS, || {
        Spi::connect(|c| {
            let rows = c.select(
                RANKED,
                None,
                &[question.into(), trusted.into(), i64::from(limit).into()],
            )?;
            let mut out = Vec::new();
            for r in rows {
                if let (Some(id), Some(question), Some(sql)) =
                    (r.get::<i64>(1)?, r.get::<String>(2)?, r.get::<String>(3)?)
                {
                    out.push(Example { id, question, sql });
                }
            }
            Ok(out)
        })
    })
}

/// The SQL API in schema `grid`.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.check_example(question, sql)`: nothing when an example may be stored (a
    /// question `grid.ask()` would take; one statement the engine's parser reads);
    /// otherwise an error that says what to change. The trigger of `grid.examples` calls
    /// it at every INSERT and UPDATE.
    #[pg_extern(security_invoker, immutable, strict)]
    #[search_path(pg_catalog, pg_temp)]
    fn check_example(question: &str, sql: &str) {
        if let Err(e) = crate::question::check_question(question) {
            ereport!(
                ERROR,
                e.sqlstate(),
                e.to_string().replacen(
                    "grid.ask: the question",
                    "grid.examples: the example's question",
                    1
                )
            );
        }
        if let Err(why) = super::check_sql(sql) {
            ereport!(ERROR, PgSqlErrorCode::ERRCODE_SYNTAX_ERROR, why);
        }
    }
}

/// Why `sql` may not be stored as an example's SQL, if it may not: longer than a
/// question may be, or not one statement of the dialect's kinds (SELECT, INSERT, UPDATE,
/// DELETE) whose every construct the checker can read. Names are not checked here (they
/// are the asker's, at each ask).
fn check_sql(sql: &str) -> Result<(), String> {
    use grid_core::catalog::{CatalogSnapshot, FORMAT};
    use grid_core::checker::ViolationKind;
    if sql.len() > grid_core::prompt::MAX_QUESTION_BYTES {
        return Err(format!(
            "grid.examples: the example's SQL is {} bytes long; the limit is {} bytes",
            sql.len(),
            grid_core::prompt::MAX_QUESTION_BYTES
        ));
    }
    let nobody = CatalogSnapshot {
        format: FORMAT,
        role: String::new(),
        search_path: Vec::new(),
        relations: Vec::new(),
        denied_functions: Vec::new(),
    };
    let why = grid_core::checker::check(sql.trim(), &nobody)
        .into_iter()
        .find_map(|v| match v.kind {
            ViolationKind::Unparsable { message } => Some(message),
            ViolationKind::StatementCount { count } => Some(format!("{count} statements, not one")),
            ViolationKind::UnsupportedStatement { what } => {
                Some(format!("{what} is not a statement grid.ask writes"))
            }
            ViolationKind::Unsupported { what } => Some(format!("{what} cannot be checked")),
            _ => None,
        });
    match why {
        None => Ok(()),
        Some(why) => Err(format!(
            "grid.examples: the example's SQL is not one statement the engine can parse ({why}): \
             write one SELECT (or INSERT, UPDATE, DELETE) statement in PostgreSQL syntax"
        )),
    }
}
