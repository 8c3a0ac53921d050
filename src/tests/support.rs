//! Helpers of the pgrx tests: statements that must succeed, values to read, and
//! statements that must be refused, run so that a refusal does not abort the test's
//! transaction.

use pgrx::prelude::*;

/// The single value `query` returns; panics (fails the test) on error.
pub fn select_one<T: IntoDatum + FromDatum>(query: &str) -> Option<T> {
    Spi::get_one::<T>(query).unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// The non-NULL values of the first (text) column of `query`'s rows; panics (fails the
/// test) on error.
pub fn select_texts(query: &str) -> Vec<String> {
    Spi::connect(|c| {
        c.select(query, None, &[])
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .filter_map(|r| r.get::<String>(1).ok().flatten())
            .collect()
    })
}

/// Runs `query`; panics (fails the test) on error.
pub fn run(query: &str) {
    Spi::run(query).unwrap_or_else(|e| panic!("{query}: {e}"));
}

/// Creates `pg_temp.grid_test_try(text)`, which runs a statement in a subtransaction and
/// returns `NULL`, or `'<SQLSTATE>: <message>'` when it fails (a cancel included). Call it first in a test,
/// as the superuser.
pub fn install() {
    run(
        "CREATE OR REPLACE FUNCTION pg_temp.grid_test_try(q text) RETURNS text
         LANGUAGE plpgsql AS $try$
         BEGIN
             EXECUTE q;
             RETURN NULL;
         EXCEPTION WHEN query_canceled OR others THEN
             RETURN SQLSTATE || ': ' || SQLERRM;
         END
         $try$",
    );
}

/// `None` when `statement` runs, `Some("<SQLSTATE>: <message>")` when it is refused;
/// either way its effects are confined to a subtransaction that is rolled back on error.
pub fn refusal(statement: &str) -> Option<String> {
    Spi::get_one_with_args::<String>("SELECT pg_temp.grid_test_try($1)", &[statement.into()])
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

/// Asserts that `statement` is refused with `sqlstate`; returns the message.
pub fn assert_refused(statement: &str, sqlstate: &str) -> String {
    match refusal(statement) {
        None => panic!("{statement}: ran, expected SQLSTATE {sqlstate}"),
        Some(m) => {
            assert!(
                m.starts_with(&format!("{sqlstate}: ")),
                "{statement}: expected SQLSTATE {sqlstate}, got {m}"
            );
            m
        }
    }
}

/// Waits (up to about ten seconds) until the mask worker answers a ping: the tests may
/// start before the postmaster has started it.
pub fn worker_ready() {
    install();
    for _ in 0..100 {
        if refusal("SELECT grid.worker_ping()").is_none() {
            return;
        }
        run("SELECT pg_sleep(0.1)");
    }
    panic!(
        "the worker never answered: {:?}",
        refusal("SELECT grid.worker_ping()")
    );
}

/// Sets up a test's model: `script` (the scripted mock's entries) written to a file of
/// its own (`tag` and the process id name it), `statements` run (the fixture's tables,
/// roles and settings), then `grid.endpoint` pointed at the script.
pub fn scripted_mock(tag: &str, script: &str, statements: &[&str]) {
    worker_ready();
    let path = std::env::temp_dir().join(format!("{tag}_script_{}.json", std::process::id()));
    std::fs::write(&path, script).expect("write the mock script");
    for sql in statements {
        run(sql);
    }
    run(&format!(
        "SET grid.endpoint = 'mock:scripted:{}'",
        path.display()
    ));
}

/// `grid.ask(question)` as the current role; fails the test on error.
pub fn ask(question: &str) -> String {
    select_one::<String>(&format!("SELECT grid.ask($q${question}$q$)")).unwrap_or_default()
}

/// `(generation, final_sql, <column>, repair_of)` of a row of `grid.generations`.
pub type Row = (i64, Option<String>, Option<String>, Option<i64>);

/// The generations of `question` in the audit store, in order, with the text column
/// `column` (`refused`, `verdict`) third.
pub fn generations(question: &str, column: &str) -> Vec<Row> {
    Spi::connect(|c| {
        c.select(
            &format!(
                "SELECT generation, final_sql, {column}, repair_of FROM grid.generations
                  WHERE question = $1 ORDER BY generation"
            ),
            None,
            &[question.into()],
        )
        .expect("generations")
        .map(|r| {
            (
                r.get::<i64>(1).ok().flatten().unwrap_or(-1),
                r.get::<String>(2).ok().flatten(),
                r.get::<String>(3).ok().flatten(),
                r.get::<i64>(4).ok().flatten(),
            )
        })
        .collect()
    })
}

/// The prompt artifact's document (`{"prompt": {"user": ...}, "examples": [...], ...}`)
/// of the latest generation of `question`: what the model was shown.
pub fn prompt_artifact(question: &str) -> serde_json::Value {
    Spi::get_one_with_args::<pgrx::JsonB>(
        "SELECT a.content_json FROM grid.generations g
           JOIN grid.artifacts a ON a.kind = 'prompt' AND a.digest = g.prompt_digest
          WHERE g.question = $1 ORDER BY g.generation DESC LIMIT 1",
        &[question.into()],
    )
    .unwrap_or_else(|e| panic!("the prompt of {question:?}: {e}"))
    .map(|j| j.0)
    .unwrap_or_default()
}

/// The user part of the prompt the model was shown for the latest `question`.
pub fn shown(question: &str) -> String {
    prompt_artifact(question)["prompt"]["user"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
