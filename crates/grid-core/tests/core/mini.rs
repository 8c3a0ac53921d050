//! The recognizer on a small dialect: lexing rules, identifier categories, CTE scoping and
//! policies, each checked on statements that must and must not be recognised.

use std::sync::Arc;

use grid_core::grammar::Dialect;
use grid_core::policy::Policy;
use grid_core::schema::{Column, Schema, Table};
use grid_core::{Language, Lexicon, Session, StopKind};

fn dialect() -> Arc<Dialect> {
    Arc::new(
        Dialect::load(
            include_str!("fixtures/mini.y"),
            include_str!("fixtures/mini.lex"),
        )
        .unwrap(),
    )
}

fn schema() -> Schema {
    let t = Table::with_columns;
    Schema {
        db_id: "hr".into(),
        tables: vec![
            t("employees", &["id", "name", "Rating_(millions)"]),
            t("employees_public", &["id", "name"]),
            t("orders", &["id", "total"]),
        ],
    }
}

/// The schema has a `salaries` table the role may not read: it is a relation (so a CTE may
/// not borrow its name) but not in the table lexicon.
fn language(policy: &Policy) -> Language {
    let d = dialect();
    let reserved = |w: &str| d.is_reserved(w);
    let mut lx = Lexicon::from_schema(&schema(), policy, &reserved).unwrap();
    lx.relations.insert("salaries".into());
    Language::build(d.clone(), policy, &lx).unwrap()
}

#[test]
fn recognises_and_refuses_statements() {
    let lang = language(&Policy::default());
    let mut s = Session::new(&lang);
    for ok in [
        "SELECT name FROM employees",
        "select NAME from EMPLOYEES;",
        "SELECT T1.name FROM employees AS T1",
        "SELECT t.name FROM employees t",
        "SELECT count(*) FROM employees",
        "SELECT \"Rating_(millions)\" FROM employees",
        "SELECT \"name\" FROM \"employees\"",
        "SELECT 'it''s' , 1.5e3 FROM employees",
        "SELECT /* c */ name -- x\nFROM employees",
        "SELECT name FROM employees UNION SELECT name FROM employees_public",
        "WITH x AS (SELECT name FROM employees) SELECT name FROM x",
        "SELECT name FROM (SELECT name FROM employees) sub",
        "INSERT INTO orders VALUES (1)",
    ] {
        assert!(s.complete(ok.as_bytes()), "should be recognised: {ok}");
    }
    for bad in [
        "SELECT name FROM salaries",
        "SELECT name FROM employeesx",
        "SELECT \"Name\" FROM employees",
        "SELECT Rating_(millions) FROM employees",
        "SELECT name FROM employees select",
        "SELECT name FROM x",
        "WITH x AS (SELECT name FROM employees) SELECT name FROM salaries",
        "WITH x AS (SELECT name FROM employees) SELECT name FROM \"salaries\"",
        "SELECT 1ex FROM employees",
        "SELECT name FROM employees; SELECT 1 FROM employees",
        "SELECT name FROM",
        "SELECT lower(*) FROM employees x y",
    ] {
        assert!(!s.complete(bad.as_bytes()), "should be refused: {bad}");
    }
}

#[test]
fn viable_prefixes_follow_the_lexicon() {
    let lang = language(&Policy::default());
    let mut s = Session::new(&lang);
    assert!(s.viable(b"select * from emplo") || s.viable(b"select name from emplo"));
    assert!(s.viable(b"select name from emplo"));
    assert!(s.viable(b"select name from employees_p"));
    assert!(!s.viable(b"select name from emplr"));
    assert!(!s.viable(b"select name from sal"));
    assert!(s.viable(b"select name from employees"));
    assert!(s.viable(b"SELECT 1e"), "1e can still become 1e5");
    assert!(s.viable(b"SELECT 1e+"));
    assert!(s.viable(b"SELECT 'abc"));
    assert!(s.viable(b"SELECT /* unterminated"));
    assert!(!s.viable(b"SELECT name FROM employees;;"));
    assert!(s.viable(b""));
    assert!(!s.complete(b""));
}

#[test]
fn stops_say_where_and_what() {
    let lang = language(&Policy::default());
    let mut s = Session::new(&lang);
    let e = s.check(b"SELECT name FROM salaries").unwrap_err();
    assert_eq!(e.offset, 17);
    let names = lang.terms().names_of(&e.expected);
    assert!(names.contains(&"TABLE_NAME"), "{names:?}");
    let e = s.check(b"SELECT name FROM").unwrap_err();
    assert_eq!(e.kind, StopKind::Incomplete);
    let e = s.check(b"SELECT 1ex").unwrap_err();
    assert_eq!(e.kind, StopKind::SplitWord);
    assert_eq!(e.offset, 7);
    let e = s.check(b"SELECT #").unwrap_err();
    assert_eq!((e.kind, e.offset), (StopKind::NoLexeme, 7));
}

#[test]
fn select_only_policy_removes_writes() {
    let lang = language(&Policy::select_only());
    let mut s = Session::new(&lang);
    assert!(!s.viable(b"INSERT"));
    assert!(!s.viable(b"ins"));
    assert!(s.viable(b"sel"));
    let all = language(&Policy::default());
    let mut s = Session::new(&all);
    assert!(s.viable(b"INSERT INTO ord"));
    let only =
        Policy::from_json(r#"{"verbs":["select","insert"],"insert_tables":["orders"]}"#).unwrap();
    let lang = language(&only);
    let mut s = Session::new(&lang);
    assert!(s.viable(b"INSERT INTO ord"));
    assert!(!s.viable(b"INSERT INTO emp"));
}

#[test]
fn bans_remove_clauses() {
    let p =
        Policy::from_json(r#"{"verbs":["select"],"ban":["set_ops","subqueries","cte"]}"#).unwrap();
    let lang = language(&p);
    let mut s = Session::new(&lang);
    assert!(s.complete(b"SELECT name FROM employees"));
    assert!(
        s.viable(b"SELECT name FROM employees UNION"),
        "UNIONX would be an alias"
    );
    assert!(!s.viable(b"SELECT name FROM employees UNION "));
    assert!(!s.viable(b"SELECT name FROM ("));
    assert!(!s.viable(b"WITH"));
}

/// W ⊆ R is checked when a language is built: a word no spelling of which the identifier
/// terminal can scan is refused by name instead of producing a dead-end mask later.
#[test]
fn unscannable_words_are_build_errors() {
    let d = dialect();
    let mut s = schema();
    s.tables[0].columns.push(Column {
        name: String::new(),
        ty: "text".into(),
    });
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(&s, &Policy::default(), &reserved).unwrap();
    match Language::build(d.clone(), &Policy::default(), &lx) {
        Err(grid_core::GridError::UnscannableWord { word, category, .. }) => {
            assert_eq!(word, "\"\"");
            assert_eq!(category, "column");
        }
        other => panic!("expected UnscannableWord, got {:?}", other.map(|_| ())),
    }
}
