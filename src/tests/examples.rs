//! Curated examples (src/examples.rs, `grid.examples`): an ask is shown only those in its
//! role's language, and the seal names them; the backend builds no dialect or language to
//! vet them; only curators write them, and only SQL the engine parses.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{
        ask, assert_refused, prompt_artifact, run, scripted_mock, select_one, shown,
    };
    use pgrx::prelude::*;

    const SCRIPT: &str = r#"{"entries": [
        {"match": "which staff", "sql": "SELECT name FROM grid_x_staff"}
    ]}"#;

    /// Staff the analyst reads in part (not `band`), salaries it may not see at all, a
    /// payroll clerk who reads both; a curator; three examples by the curator (one over
    /// staff, one over salaries, one over `band`) and one whose author nobody vouches
    /// for, written with the trigger off (as a restore could).
    fn fixture() {
        scripted_mock(
            "grid_x",
            SCRIPT,
            &[
                "CREATE TABLE public.grid_x_staff (id int, name text, dept text, band text)",
                "INSERT INTO public.grid_x_staff VALUES (1, 'Ann', 'ops', 'A'), (2, 'Bob', 'dev', 'B')",
                "CREATE TABLE public.grid_x_salaries (staff_id int, amount numeric)",
                "CREATE ROLE grid_x_analyst NOLOGIN IN ROLE grid_user",
                "CREATE ROLE grid_x_clerk NOLOGIN IN ROLE grid_user",
                "CREATE ROLE grid_x_curator NOLOGIN IN ROLE grid_curator",
                "CREATE ROLE grid_x_stranger NOLOGIN",
                "GRANT SELECT (id, name, dept) ON public.grid_x_staff TO grid_x_analyst",
                "GRANT SELECT ON public.grid_x_staff, public.grid_x_salaries TO grid_x_clerk",
                "SET search_path = public",
                "SET grid.max_tokens = 48",
                "SET grid.timeout = '60s'",
                "SET grid.examples = 5",
                "SET ROLE grid_x_curator",
                "INSERT INTO grid.examples (question, sql) VALUES
                   ('how many staff work in each dept', 'SELECT dept, count(*) FROM grid_x_staff GROUP BY dept'),
                   ('what is the total of all staff salaries', 'SELECT sum(amount) FROM grid_x_salaries'),
                   ('which staff are in band A', 'SELECT name FROM grid_x_staff WHERE band = ''A''')",
                "RESET ROLE",
                "SET session_replication_role = replica",
                "INSERT INTO grid.examples (question, sql, added_by) VALUES
                   ('which staff names, untrusted', 'SELECT id FROM grid_x_staff', 'grid_x_stranger')",
                "RESET session_replication_role",
            ],
        );
    }

    fn ask_as(role: &str, question: &str) -> (String, Vec<i64>) {
        run(&format!("SET ROLE {role}"));
        assert_eq!(ask(question), "SELECT name FROM grid_x_staff");
        run("RESET ROLE");
        let ids = prompt_artifact(question)["examples"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["id"].as_i64()).collect())
            .unwrap_or_default();
        (shown(question), ids)
    }

    fn id_of(sql_like: &str) -> i64 {
        select_one::<i64>(&format!(
            "SELECT id FROM grid.examples WHERE sql LIKE '%{sql_like}%'"
        ))
        .expect("the example is stored")
    }

    #[pg_test]
    fn the_analyst_is_shown_only_examples_in_its_language_and_the_seal_names_them() {
        fixture();
        let staff = id_of("GROUP BY dept");
        let salaries = id_of("grid_x_salaries");
        let band = id_of("band =");
        let (p, ids) = ask_as("grid_x_analyst", "which staff, with examples");
        assert_eq!(ids, vec![staff], "{p}");
        assert!(
            p.contains(
                "-- Example:\nhow many staff work in each dept\n-- SQL:\n\
                 SELECT dept, count(*) FROM grid_x_staff GROUP BY dept\n"
            ),
            "{p}"
        );
        // Neither the table it may not see, nor the column it may not read, nor the
        // words of an author nobody vouches for; nor that they were there.
        for hidden in ["salar", "band", "untrusted", "SELECT id"] {
            assert!(!p.contains(hidden), "{hidden}: {p}");
        }
        // The clerk may read all of it: the same store shows it the three (so the
        // analyst's prompt lacks them because of its grants, not by accident).
        let (p, mut ids) = ask_as("grid_x_clerk", "which staff, as the clerk");
        ids.sort();
        let mut all = vec![staff, salaries, band];
        all.sort();
        assert_eq!(ids, all, "{p}");
        assert!(p.contains("SELECT sum(amount) FROM grid_x_salaries"), "{p}");
        assert!(!p.contains("untrusted"), "{p}");
        // The prompt artifact lists each by id and the digest of its text, and the
        // store verifies: the prompt re-renders from the archived examples.
        let doc = prompt_artifact("which staff, with examples");
        assert_eq!(
            doc["examples"][0]["digest"].as_str().map(str::len),
            Some(64)
        );
        let (ok, reason): (Option<bool>, Option<String>) =
            Spi::get_two("SELECT ok, reason FROM grid.verify_audit()").expect("verify_audit");
        assert_eq!(ok, Some(true), "{reason:?}");
        // Off: none.
        run("SET grid.examples = 0");
        let (p, ids) = ask_as("grid_x_clerk", "which staff, examples off");
        assert!(ids.is_empty() && !p.contains("Example"), "{p}");
    }

    /// The backend builds neither a dialect nor a language to vet the examples: the
    /// worker vets them against the language it keeps, and the postmaster built the
    /// dialect at preload (lib.rs), which every backend inherits through fork.
    #[pg_test]
    fn an_ask_with_examples_builds_no_dialect_and_no_language_in_the_backend() {
        fixture();
        let preloaded = crate::PRELOADED_DIALECT_BUILDS.load(std::sync::atomic::Ordering::Relaxed);
        assert!(preloaded >= 1, "the postmaster built no dialect at preload");
        let projections = grid_core::Dialect::generated().map_or(0, |d| d.projections());
        assert!(
            projections >= 1,
            "the postmaster built no projection at preload"
        );
        let languages = grid_core::Language::builds();
        let (p, ids) = ask_as("grid_x_clerk", "which staff, with the inherited dialect");
        assert_eq!(ids.len(), 3, "{p}");
        // A second role, and the first again: each vetted in the worker.
        assert!(!ask_as("grid_x_analyst", "which staff, another role")
            .1
            .is_empty());
        assert_eq!(ask_as("grid_x_clerk", "which staff, again").1.len(), 3);
        assert_eq!(
            grid_core::Dialect::builds(),
            preloaded,
            "a backend built a dialect"
        );
        assert_eq!(
            grid_core::Language::builds(),
            languages,
            "a backend built a language"
        );
    }

    #[pg_test]
    fn an_example_that_leaves_the_askers_language_after_a_revoke_is_not_shown() {
        fixture();
        let staff = id_of("GROUP BY dept");
        assert_eq!(
            ask_as("grid_x_analyst", "which staff, before").1,
            vec![staff]
        );
        run("REVOKE SELECT (dept) ON public.grid_x_staff FROM grid_x_analyst");
        let (p, ids) = ask_as("grid_x_analyst", "which staff, after the revoke");
        assert!(ids.is_empty(), "{ids:?}");
        assert!(!p.contains("dept") && !p.contains("Example"), "{p}");
        // The judge drops what the language admits and PostgreSQL refuses as the asker:
        // a function it may not execute.
        run("GRANT SELECT (dept) ON public.grid_x_staff TO grid_x_analyst");
        run("SET ROLE grid_x_curator");
        run("INSERT INTO grid.examples (question, sql) VALUES
               ('the staff names in upper case', 'SELECT upper(name) FROM grid_x_staff')");
        run("RESET ROLE");
        let upper = id_of("upper(name)");
        let mut ids = ask_as("grid_x_analyst", "which staff, upper").1;
        ids.sort();
        assert_eq!(ids, vec![staff, upper]);
        run("REVOKE EXECUTE ON FUNCTION pg_catalog.upper(text) FROM PUBLIC");
        // upper(anyrange) keeps upper in the mask; PostgreSQL refuses upper(text).
        assert_eq!(
            ask_as("grid_x_analyst", "which staff, no upper").1,
            vec![staff]
        );
    }

    #[pg_test]
    fn only_curators_write_examples_and_only_sql_the_engine_parses() {
        fixture();
        run("SET ROLE grid_x_analyst");
        let m = assert_refused(
            "INSERT INTO grid.examples (question, sql) VALUES ('q', 'SELECT 1')",
            "42501",
        );
        assert!(m.contains("permission denied for table examples"), "{m}");
        assert_refused("SELECT count(*) FROM grid.examples", "42501");
        assert_refused("DELETE FROM grid.examples", "42501");
        run("RESET ROLE");
        run("SET ROLE grid_x_curator");
        let m = assert_refused(
            "INSERT INTO grid.examples (question, sql) VALUES ('q', 'SELEC name FROM grid_x_staff')",
            "42601",
        );
        assert!(
            m.contains(
                "grid.examples: the example's SQL is not one statement the engine can parse"
            ),
            "{m}"
        );
        let m = assert_refused(
            "INSERT INTO grid.examples (question, sql) VALUES ('q', 'SELECT 1; SELECT 2')",
            "42601",
        );
        assert!(m.contains("2 statements"), "{m}");
        let m = assert_refused(
            "UPDATE grid.examples SET sql = 'DROP TABLE grid_x_staff' WHERE sql LIKE '%GROUP BY%'",
            "42601",
        );
        assert!(m.contains("grid.examples"), "{m}");
        assert_refused(
            "INSERT INTO grid.examples (question, sql) VALUES ('   ', 'SELECT 1')",
            "22023",
        );
        // Authorship is the writer's, whatever the statement says.
        run("INSERT INTO grid.examples (question, sql, added_by)
               VALUES ('forged', 'SELECT 1', 'postgres')");
        let by: Option<String> =
            select_one("SELECT added_by::text FROM grid.examples WHERE question = 'forged'");
        assert_eq!(by.as_deref(), Some("grid_x_curator"));
        run("DELETE FROM grid.examples WHERE question = 'forged'");
        run("RESET ROLE");
    }
}
