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

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use crate::testing::{
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
