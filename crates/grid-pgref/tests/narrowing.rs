//! Where the language is narrower than PostgreSQL's parser, and why: each statement here
//! is one PostgreSQL parses but the checker's parser (sqlparser) cannot read, one
//! PostgreSQL's parser itself refuses, one whose comment PostgreSQL's lexer ends
//! elsewhere, or one PostgreSQL 15 and 16 read differently; the language refuses them all. (The checker binds
//! every column of a statement to check privileges: one it cannot read it would refuse as
//! "does not parse", so the mask must not admit it.)

use grid_core::{Policy, Session};
use grid_pgref::{checker_parses, fixtures, postgres_parses};

/// PostgreSQL parses these; sqlparser cannot.
const CHECKER_CANNOT_READ: &[&str] = &[
    "SELECT x BETWEEN a <> b AND c FROM t",
    "SELECT x BETWEEN a IS DISTINCT FROM b AND c FROM t",
    "SELECT x BETWEEN SYMMETRIC 7 AND 3 FROM t",
    "SELECT count(*) OVER (ROWS 3 PRECEDING EXCLUDE CURRENT ROW) FROM t",
    "SELECT TRIM(LEADING FROM y) FROM t",
    "SELECT TRIM('x' FROM y, 'z') FROM t",
    "SELECT x LIKE ALL (SELECT 'a') FROM t",
    "SELECT x NOT ILIKE SOME (SELECT 'a') FROM t",
    "INSERT INTO t (VALUES (1))",
    "INSERT INTO t (WITH a AS (SELECT 1) SELECT 1)",
    "SELECT POSITION(a < b IN c) FROM t",
    "SELECT count(*) OVER (abort ORDER BY a) FROM t WINDOW abort AS ()",
    "SELECT 1 WINDOW w AS ()",
    "SELECT x::uuid(72) FROM t",
    "SELECT trim.x FROM t AS trim",
    "SELECT 1 values",
    "SELECT 1 FROM t set",
    "SELECT 1 FROM t partition",
];

/// PostgreSQL's parser refuses these bare labels (its AS_LABEL keywords; SET after a
/// DELETE target) and an EXTRACT field that is a keyword; the language too.
const POSTGRES_REFUSES_WORDS: &[&str] = &[
    "SELECT 1 year",
    "SELECT 1 over",
    "DELETE FROM t set",
    "SELECT EXTRACT(over FROM x) FROM t",
];

/// libpg_query 15 reads these as a number and a label (`98.` and `n`); the PostgreSQL 15
/// server (15.20) and 16 on refuse them ("trailing junk after numeric literal":
/// scripts/pg-parse-diff.sh). The language refuses them, so that every parser reads it
/// alike.
const VERSIONS_READ_OTHERWISE: &[&str] = &["SELECT 98.n", "SELECT 1.e FROM t"];

/// PostgreSQL's parser refuses these (it merges the options of a query around a
/// parenthesized one into it).
const POSTGRES_REFUSES: &[&str] = &[
    "(SELECT 1 LIMIT 1) LIMIT 1",
    "(SELECT 1 OFFSET 1) OFFSET 1",
    "((SELECT 1 ORDER BY 1)) ORDER BY 1",
    "(WITH a AS (SELECT 1) SELECT 1 ORDER BY 1) ORDER BY 1",
    "WITH a AS (SELECT 1) (WITH b AS (SELECT 2) SELECT 3)",
    "WITH a AS (SELECT 1) (SELECT 2 ORDER BY 1) ORDER BY 1",
    // Block comments nest: this one is never closed.
    "SELECT 1 /* a /* b */",
];

/// PostgreSQL parses these, but its lexer ends their comments elsewhere than a comment
/// that runs to a line feed or to the first `*/` would end: at a carriage return (the rest
/// of the line is code: `SELECT 1 + 2`), and past a nested `/* */`. The language refuses
/// them (a carriage return is no whitespace; a block comment holds no `/*`).
const COMMENTS_READ_OTHERWISE: &[&str] = &["SELECT 1 -- x\r+ 2", "SELECT 1 /* a /* b */ FROM t */"];

/// What the language keeps of the same constructs.
const KEPT: &[&str] = &[
    "SELECT x BETWEEN (a <> b) AND c FROM t",
    "SELECT x BETWEEN a || b AND c FROM t",
    "SELECT TRIM(BOTH 'x' FROM y), TRIM(y), TRIM(y, 'x'), TRIM(LEADING y) FROM t",
    "SELECT x LIKE ANY (SELECT 'a'), x LIKE ALL (ARRAY['a']) FROM t",
    "INSERT INTO t (x) (VALUES (1))",
    "INSERT INTO t SELECT 1 UNION (SELECT 2)",
    "(SELECT 1 ORDER BY 1) UNION (SELECT 2 LIMIT 1) ORDER BY 1",
    "(SELECT 1) ORDER BY 1 LIMIT 1",
    "WITH a AS (SELECT 1) (SELECT 2) ORDER BY 1",
    "SELECT 1 AS year, 2 AS values, 3 xx FROM t AS partition",
    "SELECT count(*) OVER w FROM t WINDOW w AS ()",
    "SELECT EXTRACT(year FROM x), EXTRACT(isodow FROM x) FROM t",
    "SELECT \"trim\".x FROM t AS \"trim\"",
    "SELECT 1 -- x\n+ 2",
    "SELECT 1 /* a/b * c ** / // */ FROM t /**/ /***/",
];

#[test]
fn the_language_refuses_what_the_checker_or_postgres_cannot_take() {
    let all: Vec<String> = CHECKER_CANNOT_READ
        .iter()
        .chain(POSTGRES_REFUSES)
        .chain(POSTGRES_REFUSES_WORDS)
        .chain(COMMENTS_READ_OTHERWISE)
        .chain(VERSIONS_READ_OTHERWISE)
        .chain(KEPT)
        .map(|s| s.to_string())
        .collect();
    let dialects = fixtures::dialects();
    let (_, full) = &dialects[1];
    let role = fixtures::Role::new(
        "narrowing",
        full,
        &fixtures::permissive_schema(full, &all),
        Policy::default(),
    );
    let mut s = Session::new(&role.lang);
    for sql in CHECKER_CANNOT_READ {
        assert!(postgres_parses(sql).is_ok(), "PostgreSQL parses {sql}");
        assert!(
            checker_parses(sql).is_err(),
            "the checker now reads {sql}: widen the language"
        );
        assert!(
            s.check(sql.as_bytes()).is_err(),
            "the language admits {sql}"
        );
    }
    for sql in POSTGRES_REFUSES.iter().chain(POSTGRES_REFUSES_WORDS) {
        assert!(postgres_parses(sql).is_err(), "PostgreSQL parses {sql}");
        assert!(
            s.check(sql.as_bytes()).is_err(),
            "the language admits {sql}"
        );
    }
    for sql in COMMENTS_READ_OTHERWISE
        .iter()
        .chain(VERSIONS_READ_OTHERWISE)
    {
        assert!(postgres_parses(sql).is_ok(), "PostgreSQL refuses {sql}");
        assert!(
            s.check(sql.as_bytes()).is_err(),
            "the language admits {sql}"
        );
    }
    for sql in KEPT {
        assert!(postgres_parses(sql).is_ok(), "PostgreSQL refuses {sql}");
        assert!(checker_parses(sql).is_ok(), "the checker cannot read {sql}");
        if let Err(e) = s.check(sql.as_bytes()) {
            panic!("the language refuses {sql}: {e:?}");
        }
    }
}
