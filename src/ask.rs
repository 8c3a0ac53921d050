//! `grid.ask(question)`: the backend's half of a generation. It checks the question,
//! gathers what the decode loop needs from the caller's session (the catalog snapshot as
//! the caller, who is asking, the `grid.*` settings) and sends it to the mask worker,
//! which runs the decode loop and writes the audit. The API key never passes through the
//! backend: the worker reads it from its own configuration.

use thiserror::Error;

use pgrx::PgSqlErrorCode;

/// Longest question, in bytes of UTF-8.
pub const MAX_QUESTION_BYTES: usize = 1 << 20;

/// A question `grid.ask()` refuses before anything is sent.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuestionError {
    #[error("grid.ask: the question is empty")]
    Empty,
    #[error(
        "grid.ask: the question is {0} bytes long; the limit is {MAX_QUESTION_BYTES} bytes (1 MiB)"
    )]
    TooLong(usize),
    #[error("grid.ask: the question contains the control character U+{code:04X} at character {position} (only tab, line feed and carriage return are allowed)")]
    Control { code: u32, position: usize },
}

impl QuestionError {
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            QuestionError::TooLong(_) => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            QuestionError::Empty | QuestionError::Control { .. } => {
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE
            }
        }
    }
}

/// Checks a question: not blank, at most [`MAX_QUESTION_BYTES`], no control characters
/// but tab, line feed and carriage return (they would reach the prompt unseen).
pub fn check_question(question: &str) -> Result<(), QuestionError> {
    if question.len() > MAX_QUESTION_BYTES {
        return Err(QuestionError::TooLong(question.len()));
    }
    if question.trim().is_empty() {
        return Err(QuestionError::Empty);
    }
    match question
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    {
        Some((position, c)) => Err(QuestionError::Control {
            code: u32::from(c),
            position,
        }),
        None => Ok(()),
    }
}

#[pgrx::pg_schema]
mod grid {
    use pgrx::prelude::*;

    use crate::guc;
    use crate::worker::protocol::{AskRequest, AskSettings, Request};
    use crate::worker::{raise, request, require_store_database, unexpected};

    fn one<T: IntoDatum + FromDatum>(
        what: &str,
        query: &str,
        args: &[pgrx::datum::DatumWithOid],
    ) -> Option<T> {
        match Spi::get_one_with_args::<T>(query, args) {
            Ok(v) => v,
            Err(e) => raise(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("{what}: {e}"),
            ),
        }
    }

    /// `grid.ask(question)`: the SQL the calling role may run for `question`, generated
    /// under its privileges and audited. SECURITY INVOKER: the catalog snapshot is the
    /// caller's (it needs EXECUTE on `grid.catalog_snapshot(name[])` too).
    ///
    /// The one grid function whose search_path is not pinned: the snapshot must say what
    /// the caller reaches unqualified, so it is taken under the caller's search_path.
    /// Every name this function uses is schema-qualified, and as an invoker function it
    /// could only mislead its own caller.
    #[pg_extern(security_invoker, volatile)]
    fn ask(question: &str) -> String {
        const WHAT: &str = "grid.ask";
        if let Err(e) = super::check_question(question) {
            raise(e.sqlstate(), e.to_string());
        }
        require_store_database(WHAT);
        let snapshot = one::<pgrx::JsonB>(
            WHAT,
            "SELECT grid.catalog_snapshot(pg_catalog.current_schemas(false))",
            &[],
        )
        .map(|j| j.0)
        .unwrap_or_default();
        let who = one::<pgrx::JsonB>(
            WHAT,
            "SELECT pg_catalog.jsonb_build_array(session_user, current_user, pg_catalog.current_database())",
            &[],
        )
        .map(|j| j.0)
        .unwrap_or_default();
        let text = |i: usize| who[i].as_str().unwrap_or_default().to_string();
        let ask = Request::Ask(AskRequest {
            question: question.to_string(),
            snapshot,
            session_user: text(0),
            current_user: text(1),
            database: text(2),
            settings: AskSettings {
                endpoint: guc::endpoint(),
                model: guc::model(),
                max_tokens: guc::max_tokens(),
                temperature: guc::temperature(),
                timeout_ms: u64::try_from(guc::timeout().as_millis()).unwrap_or(u64::MAX),
                audit: guc::audit().name().to_string(),
            },
        });
        let response = request(WHAT, &ask, guc::timeout());
        unexpected(WHAT, &response)
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn questions_are_checked_before_anything_is_sent() {
        assert_eq!(check_question(""), Err(QuestionError::Empty));
        assert_eq!(check_question(" \n\t "), Err(QuestionError::Empty));
        assert_eq!(
            check_question("a\u{7}b"),
            Err(QuestionError::Control {
                code: 7,
                position: 1
            })
        );
        assert_eq!(
            check_question("é\u{1b}[31m"),
            Err(QuestionError::Control {
                code: 0x1b,
                position: 1
            })
        );
        assert!(matches!(
            check_question("a\u{85}"),
            Err(QuestionError::Control { code: 0x85, .. })
        ));
        let long = "x".repeat(MAX_QUESTION_BYTES + 1);
        assert_eq!(
            check_question(&long),
            Err(QuestionError::TooLong(MAX_QUESTION_BYTES + 1))
        );
        assert_eq!(check_question(&long[1..]), Ok(()));
        assert_eq!(check_question("how many\r\n\tstaff?"), Ok(()));
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use crate::testing::{assert_refused, run, select_one, worker_ready};
    use pgrx::prelude::*;

    #[pg_test]
    fn bad_questions_are_refused_before_the_worker_is_asked() {
        worker_ready();
        for (call, state, words) in [
            ("SELECT grid.ask('')", "22023", "empty"),
            ("SELECT grid.ask(E' \\n\\t')", "22023", "empty"),
            (
                "SELECT grid.ask('ring ' || chr(7))",
                "22023",
                "U+0007 at character 5",
            ),
            (
                "SELECT grid.ask(repeat('x', 1048577))",
                "54000",
                "limit is 1048576 bytes",
            ),
        ] {
            let m = assert_refused(call, state);
            assert!(m.contains(words), "{call}: {m}");
        }
    }

    #[pg_test]
    fn a_question_reaches_the_worker_with_the_callers_snapshot_and_no_key() {
        worker_ready();
        run("CREATE TABLE public.grid_t_ask_a (id int)");
        run("CREATE TABLE public.grid_t_ask_b (id int)");
        run("CREATE ROLE grid_t_asker NOLOGIN");
        run("GRANT SELECT ON public.grid_t_ask_a TO grid_t_asker");
        run("CREATE SCHEMA grid_t_ask_s");
        run("GRANT USAGE ON SCHEMA grid_t_ask_s TO grid_t_asker");
        run("GRANT EXECUTE ON FUNCTION grid.ask(text) TO grid_t_asker");
        run("SET search_path = grid_t_ask_s, public");
        run("SET grid.api_key = 'sk-never-sent-0123'");
        run("SET ROLE grid_t_asker");
        // Without EXECUTE on the snapshot the caller cannot send one.
        let m = assert_refused("SELECT grid.ask('how many ids?')", "42501");
        assert!(m.contains("catalog_snapshot"), "{m}");
        run("RESET ROLE");
        run("GRANT EXECUTE ON FUNCTION grid.catalog_snapshot(name[]) TO grid_t_asker");
        run("SET ROLE grid_t_asker");
        let relations: Option<i64> =
            select_one("SELECT jsonb_array_length(grid.catalog_snapshot() -> 'relations')::bigint");
        let m = assert_refused("SELECT grid.ask(E'how many ids?\\n')", "0A000");
        run("RESET ROLE");
        assert!(m.contains("not yet available"), "{m}");
        assert!(m.contains("question of 14 bytes"), "{m}");
        assert!(m.contains("from role \"grid_t_asker\""), "{m}");
        // The caller's snapshot: the one table it may use, not the other.
        assert_eq!(relations, Some(1));
        assert!(m.contains("snapshot of 1 relations"), "{m}");
        // Under the caller's search_path, not the pinned one of the grid functions.
        assert!(
            m.contains(r#"under search_path ["grid_t_ask_s","public"]"#),
            "{m}"
        );
        assert!(m.contains("max_tokens 512"), "{m}");
        // The session's key is not the worker's: it is never sent, nor echoed.
        assert!(m.contains("API key not configured"), "{m}");
        assert!(!m.contains("sk-never-sent"), "{m}");
    }
}
