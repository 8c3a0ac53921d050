//! The judge (src/judge.rs): PostgreSQL plans each statement as the caller, so a type
//! error, a column without SELECT or a function without EXECUTE is caught, repaired or
//! refused with PostgreSQL's SQLSTATE; with `grid.judge` off, statements are sealed
//! unjudged.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{ask, assert_refused, run, scripted_mock, select_one, Row};
    use pgrx::prelude::*;

    /// What the scripted "model" writes: statements the mask and the checker pass and
    /// PostgreSQL refuses. A repair prompt quotes the refused statement back, so the
    /// repair entries come first.
    const SCRIPT: &str = r#"{"entries": [
        {"match": "rejected:\n-- SELECT SUM(name) FROM grid_j_t", "sql": "SELECT SUM(n) FROM grid_j_t"},
        {"match": "rejected:\n-- SELECT salary FROM grid_j_staff", "sql": "SELECT name FROM grid_j_pay"},
        {"match": "sum the names", "sql": "SELECT SUM(name) FROM grid_j_t"},
        {"match": "compare the ids", "sql": "SELECT name FROM grid_j_t WHERE id = 'abc'"},
        {"match": "the staff salaries", "sql": "SELECT salary FROM grid_j_staff"},
        {"match": "the hidden view", "sql": "SELECT x FROM grid_j_hv"},
        {"match": "round the numbers", "sql": "SELECT round(n, 1) FROM grid_j_t"},
        {"match": "list the names", "sql": "SELECT name FROM grid_j_t"}
    ]}"#;

    /// A table; a payroll of which the analyst may read `id` and `name` only (column
    /// GRANTs) and a `security_invoker` view over all of it, which the analyst may read
    /// (so the snapshot, and the checker, see `salary` as readable: PostgreSQL checks the
    /// payroll's column privileges as the caller); a view over a table the analyst may
    /// not see at all; the scripted mock.
    fn fixture() {
        scripted_mock(
            "grid_j",
            SCRIPT,
            &[
            "CREATE TABLE public.grid_j_t (id int, name text, n int)",
            "INSERT INTO public.grid_j_t VALUES (1, 'a', 2), (2, 'b', 3)",
            "CREATE TABLE public.grid_j_pay (id int, name text, salary numeric)",
            "CREATE VIEW public.grid_j_staff WITH (security_invoker = true) AS
                 SELECT id, name, salary FROM public.grid_j_pay",
            "CREATE TABLE public.grid_j_hidden_base (x int)",
            "CREATE VIEW public.grid_j_hv WITH (security_invoker = true) AS
                 SELECT x FROM public.grid_j_hidden_base",
            "CREATE ROLE grid_j_analyst NOLOGIN IN ROLE grid_user",
            "GRANT SELECT ON public.grid_j_t, public.grid_j_staff, public.grid_j_hv TO grid_j_analyst",
            "GRANT SELECT (id, name) ON public.grid_j_pay TO grid_j_analyst",
            "SET search_path = public",
            "SET grid.max_tokens = 48",
            "SET grid.timeout = '60s'",
            ],
        );
    }

    /// `(generation, final_sql, verdict, repair_of)` of each generation of `question`.
    fn generations(question: &str) -> Vec<Row> {
        crate::tests::support::generations(question, "verdict")
    }

    fn verdict(text: Option<&str>) -> grid_ask::Verdict {
        text.and_then(grid_ask::Verdict::from_record)
            .unwrap_or_else(|| panic!("not a recorded verdict: {text:?}"))
    }

    fn failed_with(text: Option<&str>, code: &str) -> String {
        match verdict(text) {
            grid_ask::Verdict::Fail { code: c, message } if c == code => message,
            other => panic!("expected a failure {code}, got {other:?}"),
        }
    }

    /// Every generation of `question` replays, and the whole store verifies.
    fn the_record_holds(question: &str) {
        for (g, ..) in generations(question) {
            let ok: Option<bool> = select_one(&format!("SELECT ok FROM grid.replay({g})"));
            let why: Option<String> = select_one(&format!("SELECT reason FROM grid.replay({g})"));
            assert_eq!(ok, Some(true), "generation {g}: {why:?}");
        }
        let ok: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(ok, Some(true));
    }

    #[pg_test]
    fn a_type_error_is_caught_by_the_judge_and_repaired_or_refused_with_its_sqlstate() {
        fixture();
        run("SET ROLE grid_j_analyst");
        // sum(text): PostgreSQL has no such function (42883); the repair sums a number.
        assert_eq!(ask("sum the names"), "SELECT SUM(n) FROM grid_j_t");
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('sum the names')");
        assert_eq!(rows, Some(1));
        // An integer compared with a text literal that does not cast (22P02), twice.
        let m = assert_refused("SELECT grid.ask('compare the ids')", "22P02");
        assert!(m.contains("SQLSTATE 22P02") && m.contains("abc"), "{m}");
        assert!(!m.contains("WHERE"), "the refused statement leaked: {m}");
        assert_refused("SELECT * FROM grid.run('compare the ids')", "22P02");
        // grid.explain: the steps without their tokens, the refusal a NOTICE.
        let (steps, tokens): (Option<i64>, Option<i64>) =
            Spi::get_two("SELECT count(*), count(token) FROM grid.explain('compare the ids')")
                .expect("explain");
        run("RESET ROLE");
        assert!(steps.unwrap_or(0) > 3, "{steps:?}");
        assert_eq!(tokens, Some(0));

        let rows = generations("sum the names");
        assert!(rows.len() >= 2, "{rows:?}");
        let m = failed_with(rows[0].2.as_deref(), "42883");
        assert!(m.contains("function sum(text) does not exist"), "{m}");
        assert_eq!(rows[1].3, Some(rows[0].0));
        assert_eq!(verdict(rows[1].2.as_deref()), grid_ask::Verdict::Pass);
        let rows = generations("compare the ids");
        for r in &rows {
            failed_with(r.2.as_deref(), "22P02");
        }
        the_record_holds("sum the names");
        the_record_holds("compare the ids");
    }

    #[pg_test]
    fn a_column_without_select_is_caught_by_the_judge_and_repaired() {
        fixture();
        run("SET ROLE grid_j_analyst");
        // Through the view, PostgreSQL needs SELECT on every payroll column the view
        // reads (as the caller): the repair reads the payroll's readable column itself.
        assert_eq!(ask("the staff salaries"), "SELECT name FROM grid_j_pay");
        run("RESET ROLE");
        let rows = generations("the staff salaries");
        assert_eq!(rows.len(), 2, "{rows:?}");
        let m = failed_with(rows[0].2.as_deref(), "42501");
        // The payroll is the analyst's to see (it may read two of its columns).
        assert_eq!(m, "permission denied for table grid_j_pay");
        assert_eq!(verdict(rows[1].2.as_deref()), grid_ask::Verdict::Pass);
        the_record_holds("the staff salaries");

        // A table the analyst may not see at all is never named: not to the model, not
        // in the seal, not in the error.
        run("SET ROLE grid_j_analyst");
        let m = assert_refused("SELECT grid.ask('the hidden view')", "42501");
        run("RESET ROLE");
        assert!(m.contains("permission denied for table <hidden>"), "{m}");
        assert!(!m.contains("grid_j_hidden_base"), "{m}");
        for r in generations("the hidden view") {
            let m = failed_with(r.2.as_deref(), "42501");
            assert_eq!(m, "permission denied for table <hidden>");
        }
        the_record_holds("the hidden view");
    }

    #[pg_test]
    fn a_function_without_execute_is_refused_with_postgresqls_sqlstate() {
        fixture();
        // round(numeric, integer) only: round stays in the mask (its other overloads may
        // be executed), PostgreSQL refuses the call as the caller.
        run("REVOKE EXECUTE ON FUNCTION pg_catalog.round(numeric, integer) FROM PUBLIC");
        run("SET ROLE grid_j_analyst");
        let m = assert_refused("SELECT grid.ask('round the numbers')", "42501");
        run("RESET ROLE");
        assert!(m.contains("permission denied for function round"), "{m}");
        assert!(m.contains("and its repair too"), "{m}");
        let rows = generations("round the numbers");
        assert_eq!(rows.len(), 2, "{rows:?}");
        for r in &rows {
            failed_with(r.2.as_deref(), "42501");
        }
        the_record_holds("round the numbers");
    }

    #[pg_test]
    fn with_grid_judge_off_statements_are_returned_unjudged_and_sealed_so() {
        fixture();
        // The audit store is shared by the tests: questions of their own.
        run("SET grid.judge = off");
        run("SET ROLE grid_j_analyst");
        assert_eq!(
            ask("unjudged: sum the names"),
            "SELECT SUM(name) FROM grid_j_t"
        );
        run("RESET ROLE");
        let rows = generations("unjudged: sum the names");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(verdict(rows[0].2.as_deref()), grid_ask::Verdict::Off);
        the_record_holds("unjudged: sum the names");
        run("RESET grid.judge");
        run("SET ROLE grid_j_analyst");
        assert_eq!(ask("judged: list the names"), "SELECT name FROM grid_j_t");
        run("RESET ROLE");
        let rows = generations("judged: list the names");
        assert_eq!(verdict(rows[0].2.as_deref()), grid_ask::Verdict::Pass);
    }
}
