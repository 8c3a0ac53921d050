//! The judge: PostgreSQL parses, analyses and plans each statement the pipeline accepts,
//! as the caller, before `grid.ask()`, `grid.run()` or `grid.explain()` returns anything.
//! It runs in the asking backend (where the caller's privileges are), when the worker
//! sends the statement on the ask's connection: `EXPLAIN` (never `ANALYZE`: nothing is
//! executed) in a subtransaction that is rolled back, under the caller's `search_path`
//! and the settings `grid.run()` pins (read-only among them), bounded by the caller's
//! `statement_timeout` or else [`JUDGE_TIMEOUT_MS`]. This catches what the mask and the
//! checker cannot: type errors, wrong or ambiguous bindings, column privileges,
//! functions the role may not execute. Before the `EXPLAIN`, what the statement binds
//! must be the objects of authors the caller trusts ([`crate::resolution`]): planning
//! can already run a view's or a policy's code.
//!
//! PostgreSQL's error becomes the verdict (its SQLSTATE, its message and hint); the
//! pipeline sanitizes the message before it quotes it to the model, seals it or returns
//! it (`grid_ask::sanitize`). A cancel (`pg_cancel_backend`, `statement_timeout`) is not
//! a verdict: it is raised, and the worker seals the ask as cancelled.

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use grid_ask::{Candidate, Verdict};

/// Longest EXPLAIN of the judge when the caller has no `statement_timeout`.
pub const JUDGE_TIMEOUT_MS: i32 = 10_000;

/// PostgreSQL's verdict on `candidate`, planned as the caller under `search_path`.
pub fn judge(candidate: &Candidate, search_path: &str) -> Verdict {
    let current = Spi::get_one::<String>("SELECT current_user::text")
        .ok()
        .flatten()
        .unwrap_or_default();
    if current != candidate.current_user {
        crate::error::raise(
            PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
            format!(
                "the grid_pg worker asked to judge a statement of role {:?} in a session of {current:?}",
                candidate.current_user
            ),
        );
    }
    let statement = crate::subtransaction::without_terminator(&candidate.sql);
    let explain = format!("EXPLAIN (COSTS OFF) {statement}");
    // What the statement binds is checked before it is planned: planning alone runs
    // code (a STABLE function of a row-security policy is folded at plan time).
    let outcome =
        crate::subtransaction::in_rolled_back_subtransaction(search_path, JUDGE_TIMEOUT_MS, || {
            let untrusted = crate::resolution::untrusted_objects(statement)?;
            if !untrusted.is_empty() {
                return Ok(Some(untrusted));
            }
            Spi::run(&explain).map(|()| None)
        });
    match outcome {
        Ok(Ok(None)) => Verdict::Pass,
        Ok(Ok(Some(untrusted))) => Verdict::Fail {
            code: crate::worker::protocol::sqlstate_text(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            ),
            message: crate::resolution::refusal(&untrusted),
        },
        Ok(Err(e)) => Verdict::Fail {
            code: crate::worker::protocol::sqlstate_text(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR),
            message: e.to_string(),
        },
        Err(e) => match *e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r)
                if r.sql_error_code() != PgSqlErrorCode::ERRCODE_QUERY_CANCELED =>
            {
                let message = match r.hint() {
                    Some(h) if !h.is_empty() => format!("{} (hint: {h})", r.message()),
                    _ => r.message().to_string(),
                };
                Verdict::Fail {
                    code: crate::worker::protocol::sqlstate_text(r.sql_error_code()),
                    message,
                }
            }
            e => e.rethrow(),
        },
    }
}
