//! `grid.ask()` (src/ask.rs): its answer follows the caller's grants, policy, catalog and
//! search path at each ask; what it refuses before the worker is asked (questions, the
//! DBA's ceilings, snapshot bounds, roles without EXECUTE); the errors it gives (no
//! endpoint, another model, a worker panic), ASCII whatever they quote.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::employees::{blocked, fixture, names_salaries};
    use crate::tests::support::{ask, assert_refused, run, select_one, worker_ready};
    use pgrx::prelude::*;

    /// The fixture's first question, as the analyst, answers as it always does.
    fn the_analyst_asks_as_usual() {
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
        run("RESET ROLE");
    }

    #[pg_test]
    fn asks_follow_grant_and_revoke_at_the_next_ask() {
        fixture();
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
        // The model tries salaries, which the analyst may not read: blocked.
        blocked("show the salaries");
        // Whatever came of it, explain shows its steps (and never the table): their
        // tokens when the statement is returned, none when the checker refused it.
        let (steps, spelled): (Option<i64>, Option<String>) = Spi::get_two(
            "SELECT count(*), string_agg(token, '' ORDER BY step) FROM grid.explain('show the salaries')",
        )
        .expect("explain");
        assert!(steps.unwrap_or(0) > 3, "{steps:?}");
        if let Some(spelled) = spelled {
            assert!(spelled.starts_with("SELECT"), "{spelled}");
            assert!(!names_salaries(&spelled), "{spelled}");
        }
        run("RESET ROLE");
        run("GRANT SELECT ON public.grid_t_salaries TO grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("show the salaries"),
            "SELECT salary FROM grid_t_salaries"
        );
        run("RESET ROLE");
        run("REVOKE SELECT ON public.grid_t_salaries FROM grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        let again = blocked("show the salaries");
        run("RESET ROLE");

        // Who asked, what, and what came out, sealed and verifiable.
        let row: Option<pgrx::JsonB> = select_one(
            "SELECT to_jsonb(g) FROM grid.generations g ORDER BY seal_index DESC LIMIT 1",
        );
        let row = row.map(|j| j.0).unwrap_or_default();
        assert_eq!(row["current_user_name"], "grid_t_analyst");
        assert_eq!(row["question"], "show the salaries");
        if let Some(sql) = &again {
            assert_eq!(row["final_sql"].as_str(), Some(sql.as_str()));
        }
        assert!(
            row["stop"] == "eos" || row["stop"] == "budget_completed",
            "{row}"
        );
        let ok: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(ok, Some(true));
    }

    #[pg_test]
    fn ddl_changes_the_language_at_the_next_ask() {
        fixture();
        let wanted = "ok:SELECT grade FROM grid_t_employees";
        let try_ask = || {
            run("SET ROLE grid_t_analyst");
            let answer: Option<String> =
                select_one("SELECT public.grid_t_try_ask('list the grades')");
            run("RESET ROLE");
            answer.unwrap_or_default()
        };
        // No such column yet: the mask has no `grade` to offer.
        assert_ne!(try_ask(), wanted);
        run("ALTER TABLE public.grid_t_employees ADD COLUMN grade int");
        assert_eq!(try_ask(), wanted);
        run("ALTER TABLE public.grid_t_employees DROP COLUMN grade");
        assert_ne!(try_ask(), wanted);
        // A dropped table is gone from the next ask too.
        run("GRANT SELECT ON public.grid_t_salaries TO grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("show the salaries"),
            "SELECT salary FROM grid_t_salaries"
        );
        run("RESET ROLE");
        run("DROP TABLE public.grid_t_salaries");
        run("SET ROLE grid_t_analyst");
        blocked("show the salaries");
        run("RESET ROLE");
    }

    #[pg_test]
    fn a_function_revoked_from_the_role_is_not_offered() {
        fixture();
        let capitalise = || {
            run("SET ROLE grid_t_analyst");
            let answer: Option<String> =
                select_one("SELECT public.grid_t_try_ask('capitalise the names')");
            run("RESET ROLE");
            answer.unwrap_or_default()
        };
        let wanted = "ok:SELECT initcap(name) FROM grid_t_employees";
        assert_eq!(capitalise(), wanted);
        // initcap(text) has no other overload. Undone with the test's transaction.
        run("REVOKE EXECUTE ON FUNCTION pg_catalog.initcap(text) FROM PUBLIC");
        let denied = capitalise();
        assert!(
            !denied.to_ascii_lowercase().contains("initcap("),
            "{denied}"
        );
        run("GRANT EXECUTE ON FUNCTION pg_catalog.initcap(text) TO grid_t_analyst");
        assert_eq!(capitalise(), wanted);
    }

    #[pg_test]
    fn a_grid_policy_row_narrows_what_the_role_may_write() {
        fixture();
        // Room for a join spelled mostly byte by byte in the built-in vocabulary.
        run("SET grid.max_tokens = 200");
        run("SET ROLE grid_t_analyst");
        let joined = ask("who took orders");
        assert!(joined.contains(" JOIN "), "{joined}");
        run("RESET ROLE");
        run(r#"INSERT INTO grid.policy (role_name, policy)
               VALUES ('grid_t_analyst', '{"verbs": ["select"], "ban": ["joins"]}')"#);
        run("SET ROLE grid_t_analyst");
        let answer: Option<String> =
            select_one("SELECT public.grid_t_try_ask('who took orders, no joins')");
        run("RESET ROLE");
        let answer = answer.unwrap_or_default();
        // The mask has no JOIN for this role now: whatever the model wrote instead, it
        // joins nothing (or the checker refused it).
        assert!(
            !answer.to_ascii_uppercase().contains("JOIN") || answer.starts_with("42501"),
            "{answer}"
        );
    }

    #[pg_test]
    fn execute_on_grid_ask_alone_lets_a_role_ask_under_its_own_search_path() {
        fixture();
        for sql in [
            "CREATE SCHEMA grid_t_app",
            "CREATE TABLE grid_t_app.grid_t_items (id int, label text)",
            "INSERT INTO grid_t_app.grid_t_items VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            // What a DBA grants by hand, without grid_user (so without EXECUTE on
            // grid.catalog_snapshot()).
            "CREATE ROLE grid_t_granted NOLOGIN",
            "GRANT USAGE ON SCHEMA grid, grid_t_app TO grid_t_granted",
            "GRANT EXECUTE ON FUNCTION grid.ask(text), grid.run(text, integer) TO grid_t_granted",
            "GRANT SELECT ON grid_t_app.grid_t_items TO grid_t_granted",
            "SET search_path = grid_t_app, public",
            "SET ROLE grid_t_granted",
        ] {
            run(sql);
        }
        let denied = crate::tests::support::refusal("SELECT grid.catalog_snapshot()");
        assert!(denied.is_some_and(|m| m.starts_with("42501")));
        // The table is on the caller's path, so it is offered (and written) unqualified,
        // and grid.run runs the statement under that path.
        assert_eq!(ask("list the items"), "SELECT label FROM grid_t_items");
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the items')");
        assert_eq!(rows, Some(3));
        let path: Option<String> = select_one("SELECT current_setting('search_path')");
        assert_eq!(path.as_deref(), Some("grid_t_app, public"));
        // Off the caller's path, the same table is offered qualified, and only so.
        run("SET search_path = public");
        assert_eq!(
            ask("list the far items"),
            "SELECT label FROM grid_t_app.grid_t_items"
        );
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the far items')");
        assert_eq!(rows, Some(3));
        let bare: Option<String> = select_one("SELECT public.grid_t_try_ask('list the items')");
        assert_ne!(bare.as_deref(), Some("ok:SELECT label FROM grid_t_items"));
        run("RESET ROLE");
        let pinned: Option<bool> = select_one(
            "SELECT bool_and(proconfig @> ARRAY['search_path=pg_catalog, pg_temp'])
               FROM pg_catalog.pg_proc
              WHERE oid IN ('grid.ask(text)'::regprocedure, 'grid.run(text, integer)'::regprocedure,
                            'grid.explain(text)'::regprocedure)",
        );
        assert_eq!(pinned, Some(true));
    }

    #[pg_test]
    fn a_role_without_grid_user_cannot_ask() {
        fixture();
        run("CREATE ROLE grid_t_outsider NOLOGIN");
        run("SET ROLE grid_t_outsider");
        let m = assert_refused("SELECT grid.ask('list the employees')", "42501");
        run("RESET ROLE");
        assert!(
            m.contains("grid.ask") || m.contains("permission denied"),
            "{m}"
        );
    }

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
                "limit is 8192 bytes",
            ),
            (
                "SELECT grid.ask(repeat('x', 8193))",
                "54000",
                "is 8193 bytes long",
            ),
            (
                "SELECT * FROM grid.run('ring ' || chr(7))",
                "22023",
                "grid.run",
            ),
        ] {
            let m = assert_refused(call, state);
            assert!(m.contains(words), "{call}: {m}");
        }
    }

    #[pg_test]
    fn a_long_question_reaches_the_model_with_its_schema() {
        fixture();
        let question = format!("list the employees{}", " in detail".repeat(800));
        assert!(question.len() <= crate::question::MAX_QUESTION_BYTES);
        run("SET ROLE grid_t_analyst");
        // The script's entry for it matches the prompt's layout (schema, then the
        // question), not the bare question.
        assert_eq!(ask(&question), "SELECT id, name FROM grid_t_employees");
        run("RESET ROLE");
    }

    /// A role that is not a superuser asks within the DBA's ceilings on grid.timeout and
    /// grid.max_tokens; a DBA raises them per role. Refused before the worker is asked.
    #[pg_test]
    fn a_role_cannot_raise_its_timeout_or_budget_above_the_dbas_ceiling() {
        fixture();
        run("SET ROLE grid_t_analyst");
        run("SET grid.timeout = '20min'");
        let m = assert_refused("SELECT grid.ask('list the employees')", "42501");
        assert!(m.contains("grid.timeout_limit (600000 ms)"), "{m}");
        run("SET grid.timeout = '60s'");
        run("SET grid.max_tokens = 4096");
        let m = assert_refused("SELECT grid.ask('list the employees')", "42501");
        assert!(m.contains("grid.max_tokens_limit (2048)"), "{m}");
        run("SET grid.max_tokens = 64");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
        // Only a superuser sets the ceilings; one set for the role lets it ask longer.
        assert_refused("SET grid.timeout_limit = '1h'", "42501");
        run("RESET ROLE");
        run("SET grid.max_tokens_limit = 8192");
        run("SET ROLE grid_t_analyst");
        run("SET grid.max_tokens = 4096");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
        run("RESET ROLE");
        run("RESET grid.max_tokens_limit");
        // A superuser is not bound by them.
        run("SET grid.max_tokens = 4096");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
    }

    /// What a role may use is bounded before the worker is asked, with the setting that
    /// raises the bound named (not a frame error from the worker's socket).
    #[pg_test]
    fn a_snapshot_above_its_bounds_is_refused_naming_the_setting() {
        fixture();
        for (setting, unit) in [
            (
                "grid.max_snapshot_relations = 1",
                "grid.max_snapshot_relations (1 relations)",
            ),
            (
                "grid.max_snapshot_columns = 2",
                "grid.max_snapshot_columns (2 columns)",
            ),
            (
                "grid.max_snapshot_size = '64kB'",
                "grid.max_snapshot_size (65536 bytes)",
            ),
        ] {
            run(&format!("SET {setting}"));
            if setting.starts_with("grid.max_snapshot_size") {
                // 64 kB holds the fixture: a wide table (about 130 kB of snapshot) fills it.
                let columns: Vec<String> = (0..1000)
                    .map(|i| format!("a_rather_long_column_name_number_{i} int"))
                    .collect();
                run(&format!(
                    "CREATE TABLE public.grid_t_wide ({})",
                    columns.join(", ")
                ));
                run("GRANT SELECT ON public.grid_t_wide TO grid_t_analyst");
            }
            run("SET ROLE grid_t_analyst");
            let m = assert_refused("SELECT grid.ask('list the employees')", "54000");
            run("RESET ROLE");
            assert!(m.contains(unit), "{m}");
            run(&format!(
                "RESET {}",
                setting.split(' ').next().unwrap_or_default()
            ));
        }
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("list the employees"),
            "SELECT name FROM grid_t_employees"
        );
        run("RESET ROLE");
    }

    #[pg_test]
    fn grid_model_must_name_the_model_the_endpoint_serves() {
        fixture();
        run("SET grid.model = 'some-other-model'");
        run("SET ROLE grid_t_analyst");
        let m = assert_refused("SELECT grid.ask('list the employees')", "22023");
        run("RESET ROLE");
        assert!(m.contains("mock-scripted"), "{m}");
        run("SET grid.model = 'mock-scripted'");
        the_analyst_asks_as_usual();
    }

    #[pg_test]
    fn an_unreachable_endpoint_is_an_error_that_never_shows_the_key() {
        fixture();
        run("SET grid.endpoint = 'http://127.0.0.1:9'");
        run("SET grid.api_key = 'sk-never-shown-0123'");
        run("SET ROLE grid_t_analyst");
        let m = assert_refused("SELECT grid.ask('list the employees')", "08001");
        run("RESET ROLE");
        assert!(m.contains("refused"), "{m}");
        assert!(!m.contains("sk-never-shown"), "{m}");
        // Without an endpoint: what to set.
        run("RESET grid.endpoint");
        let m = assert_refused("SELECT grid.ask('list the employees')", "55000");
        assert!(m.contains("grid.endpoint is not set"), "{m}");
    }

    #[pg_test]
    fn a_panic_in_the_worker_is_an_error_and_the_worker_goes_on() {
        fixture();
        run("SET grid.debug_fault = 'panic'");
        let m = assert_refused("SELECT grid.ask('list the employees')", "XX000");
        assert!(
            m.contains("panic") && m.contains("the worker goes on"),
            "{m}"
        );
        run("RESET grid.debug_fault");
        the_analyst_asks_as_usual();
    }

    /// A refusal's message is ASCII even when what it quotes is not, so it reaches a
    /// LATIN1 client (the fault suite checks that through a real LATIN1 connection).
    #[pg_test]
    fn a_refusal_that_quotes_other_characters_is_ascii() {
        fixture();
        run("CREATE TABLE public.grid_t_notes (\"名前\" text)");
        run("GRANT SELECT ON public.grid_t_notes TO grid_t_analyst");
        run("SET client_encoding = 'LATIN1'");
        run("SET ROLE grid_t_analyst");
        // The column exists, but not in grid_t_employees: the checker refuses it.
        let m = assert_refused("SELECT grid.ask('the kanji names')", "42501");
        run("RESET ROLE");
        run("RESET client_encoding");
        assert!(m.is_ascii(), "{m}");
        assert!(m.contains("<U+540D><U+524D>"), "{m}");
    }
}
