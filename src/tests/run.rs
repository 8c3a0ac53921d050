//! `grid.run()` and `grid.explain()` (src/ask.rs): the answer's rows, run as the caller in a
//! read-only subtransaction; a run by generation, and a run right after an ask that reuses
//! its answer; every step explained; what a run leaves behind (locks, settings).

#[pgrx::pg_schema]
mod tests {
    use crate::tests::employees::fixture;
    use crate::tests::support::{ask, assert_refused, run, select_one};
    use pgrx::prelude::*;

    #[pg_test]
    fn explain_shows_every_step_and_run_returns_the_rows() {
        fixture();
        run("SET ROLE grid_t_analyst");
        let spelled: Option<String> = select_one(
            "SELECT string_agg(coalesce(token, ''), '' ORDER BY step) FROM grid.explain('list the employees')",
        );
        assert_eq!(
            spelled.as_deref(),
            Some("SELECT name FROM grid_t_employees")
        );
        let last: Option<String> = select_one(
            "SELECT kind FROM grid.explain('list the employees') ORDER BY step DESC LIMIT 1",
        );
        assert_eq!(last.as_deref(), Some("eos"));
        let bounds: Option<bool> = select_one(
            "SELECT bool_and(allowed > 0 AND blocked > 0) FROM grid.explain('list the employees')",
        );
        assert_eq!(bounds, Some(true));
        let names: Option<String> = select_one(
            "SELECT string_agg(r ->> 'name', ',' ORDER BY r ->> 'name') FROM grid.run('list the employees') r",
        );
        assert_eq!(names.as_deref(), Some("Ada,Grace"));
        let one: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the employees', 1)");
        assert_eq!(one, Some(1));
        // grid.run leaves the session as it was: still read-write.
        let ro: Option<String> = select_one("SELECT current_setting('transaction_read_only')");
        assert_eq!(ro.as_deref(), Some("off"));
        // A statement that fails as it runs: its error, and the session as it was, also
        // when the caller catches the error.
        assert_refused("SELECT * FROM grid.run('divide by zero')", "22012");
        run("DO $$ BEGIN PERFORM * FROM grid.run('divide by zero');
             EXCEPTION WHEN division_by_zero THEN NULL; END $$");
        let ro: Option<String> = select_one("SELECT current_setting('transaction_read_only')");
        assert_eq!(ro.as_deref(), Some("off"));
        let again: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the employees')");
        assert_eq!(again, Some(2));
        // A statement that ends with the `;` the dialect allows runs all the same.
        assert_eq!(
            ask("list the employees with a terminator"),
            "SELECT name FROM grid_t_employees;"
        );
        let rows: Option<i64> =
            select_one("SELECT count(*) FROM grid.run('list the employees with a terminator')");
        assert_eq!(rows, Some(2));
        run("RESET ROLE");
        // The clerk holds INSERT on orders, but writes are opt-in: without a grid.policy
        // row that names INSERT it is asked SELECTs only, and it may read nothing.
        run("SET ROLE grid_t_clerk");
        let m = assert_refused("SELECT grid.ask('add an order')", "42501");
        assert!(m.contains("grid.policy"), "{m}");
        run("RESET ROLE");
        run(r#"INSERT INTO grid.policy (role_name, policy)
               VALUES ('grid_t_clerk', '{"verbs": ["select", "insert"]}')"#);
        // With the row, grid.ask gives the INSERT, and grid.run does not run it.
        run("SET ROLE grid_t_clerk");
        assert_eq!(
            ask("add an order"),
            "INSERT INTO grid_t_orders (id, amount) VALUES (7, 10)"
        );
        let m = assert_refused("SELECT * FROM grid.run('add an order')", "25006");
        assert!(m.contains("read-only"), "{m}");
        run("RESET ROLE");
        let orders: Option<i64> = select_one("SELECT count(*) FROM public.grid_t_orders");
        assert_eq!(orders, Some(0));
    }

    /// `grid.run(generation)` runs the statement the role read, only its own, only while
    /// it is still in its language; `grid.run(question)` right after `grid.ask` of the
    /// same question runs that answer without asking the model; `grid.runs` says which.
    #[pg_test]
    fn run_by_generation_runs_what_was_read_and_a_run_right_after_an_ask_reuses_it() {
        fixture();
        let count = |q: &str| select_one::<i64>(q).unwrap_or(-1);
        // Its own question, and only its rows: the tests run concurrently and append to
        // the shared store meanwhile.
        const Q: &str = "list the employees, to run by generation";
        let sealed_now = || {
            count(&format!(
                "SELECT count(*) FROM grid.generations WHERE question = '{Q}'"
            ))
        };
        run("SET ROLE grid_t_analyst");
        assert_eq!(ask(Q), "SELECT name FROM grid_t_employees");
        let g = count(&format!(
            "SELECT max(generation) FROM grid.my_answers WHERE question = '{Q}'"
        ));
        let sql: Option<String> = select_one(&format!(
            "SELECT sql FROM grid.my_answers WHERE generation = {g}"
        ));
        assert_eq!(sql.as_deref(), Some("SELECT name FROM grid_t_employees"));
        run("RESET ROLE");
        let sealed = sealed_now();
        run("SET ROLE grid_t_analyst");
        let names: Option<String> = select_one(&format!(
            "SELECT string_agg(r ->> 'name', ',' ORDER BY r ->> 'name') \
             FROM grid.run('{Q}') r"
        ));
        assert_eq!(names.as_deref(), Some("Ada,Grace"));
        assert_eq!(count(&format!("SELECT count(*) FROM grid.run({g})")), 2);
        assert_eq!(count(&format!("SELECT count(*) FROM grid.run({g}, 1)")), 1);
        run("RESET ROLE");
        assert_eq!(sealed_now(), sealed, "the model was asked again");
        let runs = crate::tests::support::select_texts(&format!(
            "SELECT called_as || ':' || current_user_name FROM grid.runs \
              WHERE generation = {g} ORDER BY run"
        ));
        assert_eq!(
            runs,
            [
                "reused:grid_t_analyst",
                "generation:grid_t_analyst",
                "generation:grid_t_analyst"
            ]
        );
        // Another role may neither run nor list it; nor may anyone run what was never an
        // answer.
        run("SET ROLE grid_t_clerk");
        // (The store outlives each test's transaction: other tests' answers may be here.)
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM grid.my_answers WHERE generation = {g}"
            )),
            0
        );
        let m = assert_refused(&format!("SELECT * FROM grid.run({g})"), "42501");
        assert!(m.contains("not a statement grid_pg returned"), "{m}");
        run("RESET ROLE");
        run("SET ROLE grid_t_analyst");
        assert_refused("SELECT * FROM grid.run(-1)", "42501");
        run("RESET ROLE");
        // A revoke since: the statement is no longer the role's, and does not run.
        run("REVOKE SELECT ON public.grid_t_employees FROM grid_t_analyst");
        run("GRANT SELECT (id) ON public.grid_t_employees TO grid_t_analyst");
        run("SET ROLE grid_t_analyst");
        let m = assert_refused(&format!("SELECT * FROM grid.run({g})"), "42501");
        assert!(
            m.contains("no longer one the current role may be given"),
            "{m}"
        );
        run("RESET ROLE");
        run("GRANT SELECT ON public.grid_t_employees TO grid_t_analyst");
        // Another question in between: the model is asked again.
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            ask("list the employees in detail"),
            "SELECT id, name FROM grid_t_employees"
        );
        assert_eq!(count(&format!("SELECT count(*) FROM grid.run('{Q}')")), 2);
        run("RESET ROLE");
        let last = crate::tests::support::select_texts(&format!(
            "SELECT r.called_as FROM grid.runs r JOIN grid.generations g USING (generation) \
              WHERE g.question = '{Q}' ORDER BY r.run DESC LIMIT 1"
        ));
        assert_eq!(last, ["asked"]);
        assert_eq!(
            sealed_now(),
            sealed + 1,
            "grid.run asked the model once more"
        );
    }

    /// grid.run releases the session-level advisory locks its statement took (a view the
    /// caller may read calls a function that takes one), and leaves the caller's own.
    #[pg_test]
    fn grid_run_releases_the_advisory_locks_its_statement_took() {
        fixture();
        // A trusted author's view (the superuser's): another role's would never run.
        for sql in [
            "CREATE FUNCTION public.grid_t_lock(k bigint) RETURNS bigint LANGUAGE sql
                 AS $$ SELECT pg_catalog.pg_advisory_lock(k); SELECT k $$",
            "CREATE FUNCTION public.grid_t_tell(v text) RETURNS text LANGUAGE sql
                 AS $$ SELECT pg_catalog.set_config('application_name', v, false);
                       SELECT pg_catalog.set_config('grid_t.note', v, false) $$",
            "CREATE VIEW public.grid_t_items AS
                 SELECT public.grid_t_lock(4242) AS label FROM public.grid_t_employees",
            "CREATE VIEW public.grid_t_many AS
                 SELECT public.grid_t_lock(4243) + public.grid_t_lock(10000 + g) - g AS label,
                        public.grid_t_tell('leaked ' || g) AS note
                   FROM pg_catalog.generate_series(1, 1001) AS g",
            "GRANT SELECT ON public.grid_t_items, public.grid_t_many TO grid_t_analyst",
            "SET application_name = 'grid_t_app'",
        ] {
            run(sql);
        }
        let held = || -> Option<i64> {
            select_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
                  AND pid = pg_backend_pid() AND granted",
            )
        };
        run("SELECT pg_advisory_lock(7)");
        assert_eq!(held(), Some(1));
        run("SET ROLE grid_t_analyst");
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the items')");
        run("RESET ROLE");
        assert_eq!(rows, Some(2));
        // The view took lock 4242 twice (once per row); both holds are gone, lock 7 stays.
        assert_eq!(held(), Some(1));
        // Lock 4243 taken 1,001 times and 1,001 others, settings changed on the way: gone,
        // with the caller's own lock 7 kept (one release per hold) and without it (all at
        // once).
        run("SET ROLE grid_t_analyst");
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the many labels')");
        run("RESET ROLE");
        assert_eq!(rows, Some(1000));
        assert_eq!(held(), Some(1));
        let mine: Option<bool> = select_one("SELECT pg_advisory_unlock(7)");
        assert_eq!(mine, Some(true));
        assert_eq!(held(), Some(0));
        run("SET ROLE grid_t_analyst");
        let rows: Option<i64> =
            select_one("SELECT count(*) FROM grid.run('list the many labels', 2000)");
        run("RESET ROLE");
        assert_eq!(rows, Some(1001));
        assert_eq!(held(), Some(0));
        let left: Option<String> = select_one(
            "SELECT current_setting('application_name') || ' ' ||
                    coalesce(current_setting('grid_t.note', true), '')",
        );
        assert_eq!(left.as_deref(), Some("grid_t_app "));
        let shown: Option<String> = select_one(
            "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        );
        assert_eq!(shown.as_deref(), Some("grid_t_app"));
    }
}
