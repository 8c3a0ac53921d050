//! One meaning for every statement (issue 16, docs/security.md): the dialect admits no
//! text that PostgreSQL could read two ways under a setting a role can change
//! (`standard_conforming_strings`, `backslash_quote`, `escape_string_warning`), nor text
//! its lexer cuts where PostgreSQL's does not. The corpus (`tests/one_meaning.json`) runs
//! against PostgreSQL's own lexer under every setting in the extension's pgrx tests
//! (src/tests/meaning.rs); here, without PostgreSQL, what the dialect must refuse and what it
//! must keep, lexeme by lexeme. Data-free.

use std::sync::Arc;

use grid_core::schema::{Schema, Table};
use grid_core::{Dialect, Language, Lexicon, Policy, Session};

/// The extension's language over the tables the attack used.
fn language() -> Language {
    let d = Arc::new(Dialect::postgres_without_comments().expect("the extension dialect"));
    let schema = Schema {
        db_id: "attack".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "dept"]),
            Table::with_columns("salaries", &["employee_id", "salary"]),
        ],
    };
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(&schema, &Policy::default(), &reserved).expect("lexicon");
    Language::build(d.clone(), &Policy::default(), &lx).expect("language")
}

/// One statement of `tests/one_meaning.json`.
struct Case {
    sql: String,
    keeps: bool,
    /// What the dialect must read, lexeme by lexeme, when it keeps the statement.
    lexemes: Vec<String>,
}

fn corpus() -> Vec<Case> {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../../tests/one_meaning.json")).expect("corpus");
    doc["statements"]
        .as_array()
        .expect("statements")
        .iter()
        .map(|c| Case {
            sql: c["sql"].as_str().expect("sql").to_string(),
            keeps: c["dialect"] == "keeps",
            lexemes: c["lexemes"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

#[test]
fn text_that_a_setting_could_read_otherwise_is_refused() {
    let lang = language();
    let mut s = Session::new(&lang);
    let cases = corpus();
    let refused: Vec<&Case> = cases.iter().filter(|c| !c.keeps).collect();
    assert!(refused.len() >= 20, "{}", refused.len());
    for c in refused {
        assert!(!s.complete(c.sql.as_bytes()), "accepted: {:?}", c.sql);
    }
    // Not even a prefix: the mask never offers the byte that opens the difference.
    for prefix in [
        "SELECT '\\",
        "SELECT E'\\'",
        "SELECT name FROM employees WHERE id||-",
        "SELECT name FROM employees WHERE id^+",
        "SELECT name\r",
        "SELECT name\x0c",
        "SELECT 'a\x07",
    ] {
        assert!(!s.viable(prefix.as_bytes()), "viable: {prefix:?}");
    }
}

#[test]
fn kept_statements_lex_as_postgres_lexes_them() {
    let lang = language();
    let mut s = Session::new(&lang);
    let cases = corpus();
    let kept: Vec<&Case> = cases.iter().filter(|c| c.keeps).collect();
    assert!(kept.len() >= 8, "{}", kept.len());
    for c in kept {
        let got: Vec<&str> = s
            .lexemes(c.sql.as_bytes())
            .unwrap_or_else(|e| panic!("{:?} refused: {e:?}", c.sql))
            .iter()
            .map(|l| &c.sql[l.start..l.end])
            .collect();
        assert_eq!(got, c.lexemes, "{:?}", c.sql);
    }
}
