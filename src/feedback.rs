//! Feedback (sql/feedback.sql): `grid.feedback(generation, verdict, corrected_sql)`, by
//! which an asker says whether the statement one of its own generations returned was
//! right, or wrong (with the statement that answers the question, if it has one); the
//! curators' queue `grid.example_candidates` and `grid.promote_candidate` are SQL.
//!
//! Who may say what:
//! - only the role that asked, of its own generations: the generation's
//!   `grid.generations.current_user_name` must be the caller's `current_user` (the rule of
//!   `grid.my_answers`). A superuser is no exception: it speaks for the generations it
//!   asked; to speak for another role it must `SET ROLE` to it, and the record then names
//!   the superuser as the session user;
//! - `right` only of an answer (a generation in `grid.answers`: its statement was
//!   returned to the role), and never with a correction;
//! - `wrong` of any of its generations, refused ones too (an ask the checker or the judge
//!   refused may have deserved an answer: the correction says which), with or without a
//!   correction.
//!
//! A correction must be a statement the role may be given now, checked exactly as
//! `grid.run(generation)` checks a stored statement (the caller's snapshot and policy
//! taken as for an ask, the worker's check against the language it keeps for them, and
//! the checker) and then judged as a curated example is (PostgreSQL's `EXPLAIN` as the
//! caller, [`crate::judge`]): the language first, since planning can run code. Refused
//! with 42501 (outside the role's language or grants) or the judge's SQLSTATE.
//!
//! The record is written by the worker in a transaction of its own
//! ([`crate::audit::record_feedback`]), committed before `grid.feedback` returns, as
//! `grid.runs` rows are: a ROLLBACK of the caller does not take it back.

use pgrx::prelude::*;

use crate::ask::{prepare, refusal_now, Purpose};
use crate::worker::protocol::{sqlstate_code, FeedbackNote, Request, Response};

// The feedback chain's table, its views and grid.promote_candidate: after the audit
// store (grid.generations, grid.answers, the append-only trigger) and the examples
// (grid.examples, grid_curator).
extension_sql_file!(
    "../sql/feedback.sql",
    name = "feedback",
    requires = ["audit_store", "examples"]
);

const WHAT: &str = "grid.feedback";

/// Longest reading of the audit store when the caller has no `statement_timeout`.
const READ_TIMEOUT_MS: i32 = 10_000;

/// Raises an ERROR with `code`, `message` (made ASCII: it may quote the caller's text)
/// and `hint`, which says what to do.
fn refuse(code: PgSqlErrorCode, message: String, hint: &str) -> ! {
    let message = grid_core::message::ascii(&message).into_owned();
    pgrx::pg_sys::panic::ErrorReport::new(code, message, WHAT)
        .set_hint(hint)
        .report(PgLogLevel::ERROR);
    unreachable!("an ERROR does not return");
}

/// The verdict `verdict` names: `right` or `wrong`, in any ASCII case.
fn verdict_of(verdict: Option<&str>) -> grid_core::audit::FeedbackVerdict {
    const HINT: &str = "'right': the statement returned answers the question; 'wrong': it does \
                        not (give the statement that does as corrected_sql, if you have it).";
    let Some(v) = verdict else {
        refuse(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{WHAT}: verdict must be 'right' or 'wrong', not NULL"),
            HINT,
        );
    };
    match grid_core::audit::FeedbackVerdict::parse(v) {
        Some(v) => v,
        None => refuse(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "{WHAT}: verdict must be 'right' or 'wrong', not '{}'",
                grid_core::message::ascii_snippet(v, 40)
            ),
            HINT,
        ),
    }
}

/// A generation of the caller's, as the store holds it.
struct Own {
    /// Whether its statement was returned to the role (`grid.answers`).
    answer: bool,
}

/// `generation` if it was asked by `role` (read as the store's owner: askers may not
/// read it).
fn own_generation(generation: i64, role: &str) -> Option<Own> {
    let read = crate::store::read_as_owner("grid.generations", READ_TIMEOUT_MS, || {
        Spi::connect(|c| {
            let rows = c.select(
                "SELECT EXISTS (SELECT FROM grid.answers a
                                 WHERE a.generation OPERATOR(pg_catalog.=) g.generation)
                   FROM grid.generations g
                  WHERE g.generation OPERATOR(pg_catalog.=) $1
                    AND g.current_user_name OPERATOR(pg_catalog.=) $2",
                Some(1),
                &[generation.into(), role.into()],
            )?;
            let mut found = None;
            for r in rows {
                found = Some(Own {
                    answer: r.get::<bool>(1)?.unwrap_or(false),
                });
            }
            Ok(found)
        })
    });
    match read {
        Ok(found) => found,
        Err(e) => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{WHAT}: reading the generations: {e}"),
        ),
    }
}

/// Raises unless `sql` is a statement the caller may be given now: in its language, passed
/// by the checker (the path of `grid.run(generation)`), then planned by PostgreSQL as the
/// caller (the judge, as a curated example is judged).
fn check_correction(generation: u64, sql: &str, prepared: &crate::ask::Prepared) {
    if let Some(why) = refusal_now(WHAT, sql, &prepared.ask) {
        refuse(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{WHAT}: the corrected statement is not one the current role may be given: {why}"
            ),
            "Write it as grid.ask would: one statement over the tables, columns and functions \
             the role may use (grid.catalog_snapshot() lists them), then give the feedback again.",
        );
    }
    let candidate = grid_ask::Candidate {
        ask: 0,
        generation,
        sql: sql.to_string(),
        session_user: prepared.ask.session_user.clone(),
        current_user: prepared.ask.current_user.clone(),
        repairable: false,
    };
    match crate::judge::judge(&candidate, &prepared.caller_path) {
        grid_ask::Verdict::Pass => {}
        grid_ask::Verdict::Fail { code, message } => refuse(
            sqlstate_code(&code),
            format!(
                "{WHAT}: PostgreSQL refuses the corrected statement as the current role \
                 (SQLSTATE {code}): {message}"
            ),
            "Correct it until EXPLAIN of it succeeds as the current role, then give the \
             feedback again.",
        ),
        other => crate::error::raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("{WHAT}: the judge gave no verdict on the corrected statement: {other:?}"),
        ),
    }
}

/// `grid.feedback(generation, verdict, corrected_sql)`: see the module documentation.
/// Returns the record's index in `grid.feedback_log`.
fn give(generation: Option<i64>, verdict: Option<&str>, corrected_sql: Option<&str>) -> i64 {
    use grid_core::audit::FeedbackVerdict;
    let verdict = verdict_of(verdict);
    let Some(generation) = generation else {
        refuse(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{WHAT}: generation must not be NULL"),
            "SELECT generation, question, sql FROM grid.my_answers lists the role's answers.",
        );
    };
    let correction = corrected_sql.map(str::trim);
    if let Some(sql) = correction {
        if verdict == FeedbackVerdict::Right {
            refuse(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{WHAT}: a corrected statement comes only with 'wrong'"),
                "Say 'right' without corrected_sql, or 'wrong' with it.",
            );
        }
        if sql.is_empty() {
            refuse(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("{WHAT}: corrected_sql is empty"),
                "Give the statement that answers the question, or leave corrected_sql NULL to \
                 say 'wrong' without one.",
            );
        }
        if sql.len() > grid_core::prompt::MAX_QUESTION_BYTES {
            refuse(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "{WHAT}: corrected_sql is {} bytes long; the limit is {} bytes",
                    sql.len(),
                    grid_core::prompt::MAX_QUESTION_BYTES
                ),
                "Give a shorter statement: an example's SQL has the same limit.",
            );
        }
    }
    // Who the caller is; with a correction, the language it must be in (the snapshot and
    // policy taken as for an ask: the store's database and the worker required).
    let prepared = correction.map(|_| prepare(WHAT, "", false, Purpose::Language));
    let (session_user, current_user) = match &prepared {
        Some(p) => (p.ask.session_user.clone(), p.ask.current_user.clone()),
        None => {
            crate::worker::require_store_database(WHAT);
            match Spi::get_two::<String, String>("SELECT session_user::text, current_user::text") {
                Ok((Some(s), Some(c))) => (s, c),
                Ok(_) => crate::error::raise(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("{WHAT}: no current role"),
                ),
                Err(e) => crate::error::raise(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("{WHAT}: reading the current role: {e}"),
                ),
            }
        }
    };
    // The same refusal for another role's generation and for none: nothing is said about
    // generations the caller did not ask.
    let Some(own) = own_generation(generation, &current_user) else {
        refuse(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{WHAT}: generation {generation} is not one the current role asked"),
            "Feedback is given by the role that asked, on its own generations: SELECT \
             generation, question, sql FROM grid.my_answers lists its answers.",
        );
    };
    if verdict == FeedbackVerdict::Right && !own.answer {
        refuse(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "{WHAT}: generation {generation} returned no statement to the current role \
                 (it was refused, or failed): only 'wrong' may be said of it"
            ),
            "Say 'wrong', with the statement that answers the question as corrected_sql.",
        );
    }
    if let (Some(sql), Some(prepared)) = (correction, &prepared) {
        check_correction(u64::try_from(generation).unwrap_or(0), sql, prepared);
    }
    let note = Request::RecordFeedback(FeedbackNote {
        generation,
        session_user,
        current_user,
        verdict: verdict.name().to_string(),
        corrected_sql: correction.map(str::to_string),
    });
    match crate::worker::request(WHAT, &note, crate::guc::timeout()) {
        Response::Noted { feedback } => feedback,
        other => crate::worker::unexpected(WHAT, &other),
    }
}

/// The SQL API in schema `grid`.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.feedback(generation, verdict, corrected_sql DEFAULT NULL)`: records what the
    /// calling role says of one of its own generations, `right` or `wrong` (with the
    /// statement that answers its question, checked as the role), chained in
    /// `grid.feedback_log`; returns the record's number. See `crate::feedback`.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn feedback(
        generation: Option<i64>,
        verdict: Option<&str>,
        corrected_sql: default!(Option<&str>, "NULL"),
    ) -> i64 {
        super::give(generation, verdict, corrected_sql)
    }
}
