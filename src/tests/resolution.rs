//! Another role's objects (src/resolution.rs): never in the asker's language, never
//! planned by the judge or run by `grid.run()`, and a built-in name never binds another
//! role's overload.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{ask, assert_refused, run, scripted_mock, select_one};
    use grid_ask::{Candidate, Verdict};
    use pgrx::prelude::*;

    const SCRIPT: &str = r#"{"entries": [
        {"match": "the average salary", "sql": "SELECT avg_salary FROM atk.average_salary"},
        {"match": "round the ids", "sql": "SELECT round(id) FROM grid_r_t"},
        {"match": "list the ids", "sql": "SELECT id FROM grid_r_t"}
    ]}"#;

    /// The trap: a sequence every trap function advances. `nextval` is not undone by a
    /// rollback, so a call inside the judge's or `grid.run()`'s rolled-back
    /// subtransaction still shows.
    fn trap_calls() -> i64 {
        select_one::<i64>(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.grid_r_trap",
        )
        .unwrap_or(-1)
    }

    /// A table and an analyst; an untrusted role, mallory, who may create in `public`
    /// (as in every database upgraded from PostgreSQL 14 or older) and owns schema `atk`,
    /// where it plants: a view over an IMMUTABLE function, a table whose row-security
    /// policy calls a STABLE one, a trigger function and a domain whose check calls a
    /// trap, each granted to PUBLIC. The superuser (a trusted author) wraps two of them:
    /// a view over mallory's view, a table with mallory's trigger, a column of mallory's
    /// domain.
    fn fixture() {
        scripted_mock(
            "grid_r",
            SCRIPT,
            &[
                "CREATE SEQUENCE public.grid_r_trap",
                "GRANT USAGE ON SEQUENCE public.grid_r_trap TO PUBLIC",
                "CREATE TABLE public.grid_r_t (id int)",
                "INSERT INTO public.grid_r_t VALUES (1), (2)",
                "CREATE ROLE grid_r_analyst NOLOGIN IN ROLE grid_user",
                "GRANT SELECT ON public.grid_r_t TO grid_r_analyst",
                "CREATE ROLE grid_r_mallory NOLOGIN",
                "GRANT CREATE ON SCHEMA public TO grid_r_mallory",
                "CREATE SCHEMA atk AUTHORIZATION grid_r_mallory",
                "SET ROLE grid_r_mallory",
                "CREATE FUNCTION atk.leak() RETURNS numeric LANGUAGE plpgsql IMMUTABLE
                     AS $$ BEGIN PERFORM pg_catalog.nextval('public.grid_r_trap'); RETURN 1; END $$",
                "CREATE VIEW atk.average_salary AS SELECT atk.leak() AS avg_salary",
                "CREATE FUNCTION atk.probe() RETURNS int LANGUAGE plpgsql STABLE
                     AS $$ BEGIN PERFORM pg_catalog.nextval('public.grid_r_trap'); RETURN 1; END $$",
                "CREATE TABLE atk.rtb (k int)",
                "INSERT INTO atk.rtb VALUES (1)",
                "ALTER TABLE atk.rtb ENABLE ROW LEVEL SECURITY",
                "CREATE POLICY rtb_k ON atk.rtb USING (k = atk.probe())",
                "CREATE FUNCTION atk.on_write() RETURNS trigger LANGUAGE plpgsql
                     AS $$ BEGIN PERFORM pg_catalog.nextval('public.grid_r_trap'); RETURN NEW; END $$",
                "CREATE FUNCTION atk.fine(int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
                     AS $$ BEGIN PERFORM pg_catalog.nextval('public.grid_r_trap'); RETURN true; END $$",
                "CREATE DOMAIN atk.fine_int AS int CHECK (atk.fine(VALUE))",
                "GRANT USAGE ON SCHEMA atk TO PUBLIC",
                "GRANT SELECT ON atk.average_salary, atk.rtb TO PUBLIC",
                "RESET ROLE",
                "CREATE VIEW public.grid_r_wrap AS SELECT avg_salary FROM atk.average_salary",
                "CREATE TABLE public.grid_r_log (id int, d atk.fine_int)",
                "CREATE TRIGGER grid_r_log_w BEFORE INSERT ON public.grid_r_log
                     FOR EACH ROW EXECUTE FUNCTION atk.on_write()",
                "CREATE TABLE public.grid_r_typed (id int, d atk.fine_int)",
                "GRANT SELECT ON public.grid_r_wrap TO grid_r_analyst",
                "GRANT SELECT, INSERT ON public.grid_r_log, public.grid_r_typed TO grid_r_analyst",
                "SET search_path = public",
                "SET grid.max_tokens = 48",
                "SET grid.timeout = '60s'",
            ],
        );
    }

    /// `(schema.name, its columns)` of the analyst's snapshot, for the fixture's objects.
    fn analysts_relations() -> Vec<(String, Vec<String>)> {
        run("SET ROLE grid_r_analyst");
        let s = select_one::<pgrx::JsonB>("SELECT grid.catalog_snapshot()")
            .map(|j| j.0)
            .unwrap_or_default();
        run("RESET ROLE");
        s["relations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let name = format!("{}.{}", r["schema"].as_str()?, r["name"].as_str()?);
                let columns = r["columns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect();
                (name.starts_with("atk.") || name.starts_with("public.grid_r_"))
                    .then_some((name, columns))
            })
            .collect()
    }

    /// The judge's verdict on `sql` as the analyst under `public`.
    fn judged(sql: &str) -> Verdict {
        run("SET ROLE grid_r_analyst");
        let v = crate::judge::judge(
            &Candidate {
                ask: 0,
                generation: 0,
                sql: sql.to_string(),
                session_user: select_one::<String>("SELECT session_user::text").unwrap_or_default(),
                current_user: "grid_r_analyst".to_string(),
                repairable: false,
            },
            "public",
        );
        run("RESET ROLE");
        v
    }

    fn refused_as_untrusted(sql: &str, names: &str) {
        match judged(sql) {
            Verdict::Fail { code, message } => {
                assert_eq!(code, "42501", "{sql}: {message}");
                assert!(message.starts_with("untrusted code: "), "{sql}: {message}");
                assert!(message.contains(names), "{sql}: {message}");
            }
            v => panic!("{sql}: judged {v:?}"),
        }
    }

    #[pg_test]
    fn another_roles_objects_are_not_in_the_askers_language() {
        fixture();
        let seen = analysts_relations();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        // Mallory's view and table, the superuser's view over mallory's view and table
        // with mallory's trigger are out; the typed table is in without the domain column.
        assert_eq!(
            names,
            vec!["public.grid_r_t", "public.grid_r_typed"],
            "{seen:?}"
        );
        assert_eq!(seen[1].1, vec!["id".to_string()]);
        // A DBA who vouches for mallory (grid_curator) brings its objects in.
        run("GRANT grid_curator TO grid_r_mallory");
        let vouched: Vec<String> = analysts_relations().into_iter().map(|(n, _)| n).collect();
        run("REVOKE grid_curator FROM grid_r_mallory");
        for n in [
            "atk.average_salary",
            "atk.rtb",
            "public.grid_r_wrap",
            "public.grid_r_log",
        ] {
            assert!(vouched.iter().any(|v| v == n), "{n} not in {vouched:?}");
        }
        assert_eq!(trap_calls(), 0);
    }

    #[pg_test]
    fn the_judge_never_plans_another_roles_code() {
        fixture();
        // Each statement, as the analyst: the judge refuses it before any EXPLAIN.
        refused_as_untrusted(
            "SELECT avg_salary FROM atk.average_salary",
            "function atk.leak() (owner grid_r_mallory)",
        );
        refused_as_untrusted(
            "SELECT avg_salary FROM public.grid_r_wrap",
            "view atk.average_salary",
        );
        refused_as_untrusted(
            "SELECT k FROM atk.rtb",
            "function atk.probe() (owner grid_r_mallory)",
        );
        refused_as_untrusted(
            "INSERT INTO public.grid_r_log (id) VALUES (1)",
            "function atk.on_write()",
        );
        refused_as_untrusted(
            "INSERT INTO public.grid_r_typed (d) VALUES (1)",
            "type atk.fine_int (owner grid_r_mallory)",
        );
        // Nested deeper than the snapshot looks: a subquery, a CTE.
        refused_as_untrusted(
            "SELECT id FROM grid_r_t WHERE id IN (SELECT k FROM atk.rtb)",
            "atk.probe()",
        );
        refused_as_untrusted(
            "WITH a AS (SELECT avg_salary FROM atk.average_salary) SELECT * FROM a",
            "atk.leak()",
        );
        assert_eq!(trap_calls(), 0, "the judge ran mallory's code");
        assert_eq!(judged("SELECT id FROM grid_r_t"), Verdict::Pass);
        // The trap is live: the analyst's own EXPLAIN, without the check, runs it.
        run("SET ROLE grid_r_analyst");
        run("EXPLAIN SELECT avg_salary FROM atk.average_salary");
        run("RESET ROLE");
        assert!(
            trap_calls() > 0,
            "the trap never fired: the test proves nothing"
        );
    }

    #[pg_test]
    fn a_built_in_name_never_binds_another_roles_overload() {
        fixture();
        run("SET ROLE grid_r_analyst");
        assert_eq!(ask("round the ids"), "SELECT round(id) FROM grid_r_t");
        run("RESET ROLE");
        // round(integer) is an exact match where pg_catalog.round(numeric) needs a cast:
        // mallory's overload would win for the same text.
        run("SET ROLE grid_r_mallory");
        run(
            "CREATE FUNCTION public.round(integer) RETURNS integer LANGUAGE plpgsql
                 AS $$ BEGIN PERFORM pg_catalog.nextval('public.grid_r_trap'); RETURN 0; END $$",
        );
        run("RESET ROLE");
        run("SET ROLE grid_r_analyst");
        let m = assert_refused("SELECT grid.ask('round the ids, again')", "42501");
        assert!(m.contains("untrusted code"), "{m}");
        assert_refused(
            "SELECT * FROM grid.run('round the ids, once more')",
            "42501",
        );
        run("RESET ROLE");
        // Unjudged, the text comes back, and grid.run still checks before it runs.
        run("SET grid.judge = off");
        run("SET ROLE grid_r_analyst");
        assert_eq!(
            ask("round the ids, unjudged"),
            "SELECT round(id) FROM grid_r_t"
        );
        let m = assert_refused("SELECT * FROM grid.run('round the ids, unjudged')", "42501");
        assert!(m.contains("function public.round(integer)"), "{m}");
        let rows: Option<i64> = select_one("SELECT count(*) FROM grid.run('list the ids')");
        run("RESET ROLE");
        run("RESET grid.judge");
        assert_eq!(rows, Some(2));
        assert_eq!(trap_calls(), 0, "mallory's overload ran");
    }
}
