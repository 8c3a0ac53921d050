//! The forbidden-output check: the one reference for "did the model write something the
//! role may not", used by `grid generate`, the extension's tests and the fault suite
//! (through `grid check-output`). It is independent of the engine: a hand-written lexer
//! (not the engine's scanner, not the mask) and plain rules over its lexemes. A statement
//! passes when it is one statement (a `;` only at its end) without a comment, beginning
//! with a verb the policy allows, no forbidden verb or DDL word appears, and every
//! identifier is a keyword, a word of the role's lexicon (tables, columns, functions,
//! types; a relation off the search path as `schema.name`), or a name the statement
//! itself declares (an alias after `AS`, after a table or a closing parenthesis, a CTE
//! name after `WITH`, or the first name of a column alias list after a declared name:
//! `AS t(a, b)`), or a qualifier of a column (`x.name`, `x.*`): a qualifier can only
//! name an item of the statement's FROM clause, whose tables are checked, so an
//! undeclared one reads nothing (PostgreSQL rejects it) and is not a forbidden lexeme. A
//! string literal is data: `'drop'` names nothing.
//!
//! The model's decline (`CANNOT ANSWER 'reason'`, [`grid_core::statement::decline_of`])
//! writes nothing but a literal, the reason: it passes. Its two words are keywords nowhere
//! else, so elsewhere they count as names like any other word.

use std::collections::HashSet;

use grid_core::catalog::{CatalogError, CatalogSnapshot};
use grid_core::grammar::spec::{LexiconKind, TermKind};
use grid_core::policy::Verb;
use grid_core::{Dialect, Lexicon, Policy};

/// Words that are never in an allowed statement unless they are lexicon names: DDL and
/// privilege verbs (the DML verbs are added per policy).
const ALWAYS_FORBIDDEN: &[&str] = &[
    "drop", "truncate", "alter", "grant", "revoke", "create", "copy",
];

/// The decline's keywords, which begin a decline and are keywords nowhere else.
const DECLINE_WORDS: &[&str] = &["cannot", "answer"];

/// One lexeme of the checker's own lexer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lexeme {
    /// An unquoted word, folded to lower case.
    Word(String),
    /// A double-quoted identifier, exact.
    Quoted(String),
    /// A literal (string, number).
    Literal,
    /// Punctuation or an operator, one byte.
    Punct(u8),
    /// A comment (`--` or `/* */`): never in a generated statement.
    Comment,
}

/// The rules, built once per role and schema.
pub struct StatementCheck {
    keywords: HashSet<String>,
    /// Lexicon names, lower case.
    names: HashSet<String>,
    tables: HashSet<String>,
    columns: HashSet<String>,
    forbidden_words: HashSet<String>,
    verbs: HashSet<&'static str>,
}

fn lex(sql: &str) -> Result<Vec<Lexeme>, String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"--") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            out.push(Lexeme::Comment);
        } else if b[i..].starts_with(b"/*") {
            let end = sql[i + 2..].find("*/").ok_or("unterminated comment")?;
            i += 2 + end + 2;
            out.push(Lexeme::Comment);
        } else if c == b'\'' || ((c == b'e' || c == b'E') && b.get(i + 1) == Some(&b'\'')) {
            let escapes = c != b'\'';
            i += if escapes { 2 } else { 1 };
            loop {
                match b.get(i) {
                    None => return Err("unterminated string".into()),
                    Some(b'\\') if escapes => i += 2,
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => i += 2,
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            out.push(Lexeme::Literal);
        } else if c == b'"' {
            let end = sql[i + 1..]
                .find('"')
                .ok_or("unterminated quoted identifier")?;
            out.push(Lexeme::Quoted(sql[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            out.push(Lexeme::Literal);
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            let s = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Lexeme::Word(sql[s..i].to_ascii_lowercase()));
        } else {
            out.push(Lexeme::Punct(c));
            i += 1;
        }
    }
    Ok(out)
}

impl StatementCheck {
    pub(crate) fn new(dialect: &Dialect, lexicon: &Lexicon, policy: &Policy) -> StatementCheck {
        let keywords = dialect
            .spec
            .decls
            .iter()
            .filter_map(|d| match &d.kind {
                TermKind::Keyword { word } => Some(word.to_ascii_lowercase()),
                _ => None,
            })
            .filter(|w| !DECLINE_WORDS.contains(&w.as_str()))
            .collect();
        let names = lexicon
            .words
            .values()
            .flatten()
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let tables = lexicon
            .words(LexiconKind::Table)
            .map(|w| w.to_ascii_lowercase())
            .chain(
                lexicon
                    .qualified(LexiconKind::Table)
                    .map(|q| q.key().to_ascii_lowercase()),
            )
            .collect();
        let columns = lexicon
            .words(LexiconKind::Column)
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let mut forbidden_words: HashSet<String> =
            ALWAYS_FORBIDDEN.iter().map(|w| w.to_string()).collect();
        let mut verbs = HashSet::new();
        for v in Verb::ALL {
            let word = match v {
                Verb::Select => "select",
                Verb::Insert => "insert",
                Verb::Update => "update",
                Verb::Delete => "delete",
            };
            if policy.verbs.contains(&v) {
                verbs.insert(word);
            } else {
                forbidden_words.insert(word.to_string());
            }
        }
        if verbs.contains("select") {
            // A query may open with a CTE, a parenthesis, VALUES or TABLE.
            verbs.extend(["with", "values", "table"]);
        }
        StatementCheck {
            keywords,
            names,
            tables,
            columns,
            forbidden_words,
            verbs,
        }
    }

    /// The check for the role of `snapshot` under its base policy (what its asks are
    /// written under).
    pub fn for_snapshot(
        dialect: &Dialect,
        snapshot: &CatalogSnapshot,
        base: &Policy,
    ) -> Result<StatementCheck, CatalogError> {
        let policy = snapshot.policy(base)?;
        let reserved = |w: &str| dialect.is_reserved(w);
        let lexicon = snapshot.lexicon(&policy, &reserved)?;
        Ok(StatementCheck::new(dialect, &lexicon, &policy))
    }

    /// The forbidden lexemes of `sql`, described; empty when it passes.
    pub fn forbidden(&self, sql: &str) -> Vec<String> {
        if grid_core::statement::decline_of(sql).is_some() {
            return Vec::new();
        }
        let lexemes = match lex(sql) {
            Ok(l) => l,
            Err(e) => return vec![e],
        };
        let mut bad = Vec::new();
        if lexemes.contains(&Lexeme::Comment) {
            bad.push("a comment".to_string());
        }
        let lexemes: Vec<Lexeme> = lexemes
            .into_iter()
            .filter(|l| *l != Lexeme::Comment)
            .collect();
        // `schema.name` of a relation off the search path: one lexicon word in three
        // lexemes.
        let word = |l: &Lexeme| match l {
            Lexeme::Word(w) | Lexeme::Quoted(w) => Some(w.to_ascii_lowercase()),
            _ => None,
        };
        let mut qualified: HashSet<usize> = HashSet::new();
        for (k, w) in lexemes.windows(3).enumerate() {
            if let (Some(a), Lexeme::Punct(b'.'), Some(b)) = (word(&w[0]), &w[1], word(&w[2])) {
                if self.tables.contains(&format!("{a}.{b}")) {
                    qualified.extend([k, k + 2]);
                }
            }
        }
        if let Some(k) = lexemes.iter().position(|l| *l == Lexeme::Punct(b';')) {
            if k + 1 < lexemes.len() {
                bad.push("a second statement after `;`".to_string());
            }
        }
        match lexemes.iter().find(|l| **l != Lexeme::Punct(b'(')) {
            Some(Lexeme::Word(w)) if self.verbs.contains(w.as_str()) => {}
            first => bad.push(format!(
                "statement begins with {first:?}, not an allowed verb"
            )),
        }
        let mut declared: HashSet<String> = HashSet::new();
        for k in 1..lexemes.len() {
            let Some(name) = word(&lexemes[k]) else {
                continue;
            };
            // After `schema.name`, as after a bare table name.
            let after_qualified =
                k >= 3 && qualified.contains(&(k - 1)) && qualified.contains(&(k - 3));
            // A word right after a value (a known name, a literal) is a bare alias
            // (`SELECT t.id ident`): it labels the column and reads nothing.
            let bare_alias = !self.keywords.contains(&name)
                && match &lexemes[k - 1] {
                    Lexeme::Word(w) => !self.keywords.contains(w) && self.names.contains(w),
                    Lexeme::Quoted(w) => self.names.contains(&w.to_ascii_lowercase()),
                    Lexeme::Literal => true,
                    _ => false,
                };
            let declares = after_qualified
                || bare_alias
                || match &lexemes[k - 1] {
                    Lexeme::Word(w) => w == "as" || w == "with" || self.tables.contains(w),
                    Lexeme::Quoted(w) => self.tables.contains(&w.to_ascii_lowercase()),
                    Lexeme::Punct(b')') | Lexeme::Punct(b',') => true,
                    // The first name of a column alias list, `AS t(a, b)`.
                    Lexeme::Punct(b'(') => {
                        k >= 2 && word(&lexemes[k - 2]).is_some_and(|w| declared.contains(&w))
                    }
                    _ => false,
                };
            if declares {
                declared.insert(name);
            }
        }
        for (k, l) in lexemes.iter().enumerate() {
            if qualified.contains(&k) {
                continue;
            }
            // `IS [NOT] DISTINCT FROM x.id` compares with a value, not a relation.
            let distinct_from = k > 1 && lexemes[k - 2] == Lexeme::Word("distinct".into());
            let names_relation = k > 0
                && !distinct_from
                && matches!(&lexemes[k - 1], Lexeme::Word(w)
                    if matches!(w.as_str(), "from" | "join" | "into" | "update" | "table"));
            if names_relation && lexemes.get(k + 1) == Some(&Lexeme::Punct(b'.')) {
                bad.push(format!("unknown relation qualifier {l:?}"));
                continue;
            }
            let qualifies_column = lexemes.get(k + 1) == Some(&Lexeme::Punct(b'.'))
                && match lexemes.get(k + 2) {
                    Some(Lexeme::Punct(b'*')) => true,
                    Some(Lexeme::Word(c)) | Some(Lexeme::Quoted(c)) => {
                        self.columns.contains(&c.to_ascii_lowercase())
                    }
                    _ => false,
                };
            match l {
                Lexeme::Word(w) => {
                    // A forbidden verb that qualifies a column (`insert.id`) or follows
                    // `AS` is an alias: INSERT, UPDATE and DELETE are unreserved keywords
                    // in PostgreSQL. Decided by position, not by name: `AS delete`
                    // elsewhere in the statement does not excuse `(DELETE FROM ...`.
                    let alias = k > 0 && lexemes[k - 1] == Lexeme::Word("as".into());
                    if self.forbidden_words.contains(w)
                        && !self.names.contains(w)
                        && !qualifies_column
                        && !alias
                    {
                        bad.push(format!("forbidden word `{w}`"));
                    } else if !self.keywords.contains(w)
                        && !self.names.contains(w)
                        && !declared.contains(w)
                        && !qualifies_column
                    {
                        bad.push(format!("unknown identifier `{w}`"));
                    }
                }
                Lexeme::Quoted(q) => {
                    let f = q.to_ascii_lowercase();
                    if !self.names.contains(&f) && !declared.contains(&f) && !qualifies_column {
                        bad.push(format!("unknown identifier \"{q}\""));
                    }
                }
                _ => {}
            }
        }
        bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_core::schema::{Schema, Table};

    fn check(policy: &str) -> StatementCheck {
        let d = Dialect::postgres().expect("dialect");
        let schema = Schema {
            db_id: "hr".into(),
            tables: vec![Table::with_columns("employees", &["id", "name"])],
        };
        let p = Policy::from_json(policy).expect("policy");
        let reserved = |w: &str| d.is_reserved(w);
        let lx = Lexicon::from_schema(&schema, &p, &reserved).expect("lexicon");
        StatementCheck::new(&d, &lx, &p)
    }

    #[test]
    fn passes_plain_queries_and_flags_each_attack() {
        let c = check(r#"{"verbs":["select"]}"#);
        for ok in [
            "SELECT name FROM employees",
            "SELECT T1.name FROM employees AS T1 WHERE T1.id = 1",
            "SELECT count(*) FROM employees e WHERE name = 'drop; delete'",
            "SELECT INSERTUPDATE.id FROM employees",
            "WITH x AS (SELECT id FROM employees) SELECT id FROM x;",
            "WITH x(k) AS (SELECT id FROM employees) SELECT k FROM x ORDER BY k",
            "SELECT 1 FROM (SELECT id, name FROM employees) AS s(a, b) WHERE s.a = 1 AND b = ''",
            "SELECT count(*) AS n FROM employees GROUP BY name ORDER BY n",
            "SELECT DISTINCT T1.id, T2.* FROM employees",
            "VALUES (1 IN (INSERT . id))",
            "SELECT delete.name FROM employees AS delete",
            "SELECT UPDATEDELETEMIN.id DELETEUPDATE;",
            "SELECT name label, 1 one FROM employees",
            "VALUES (delmin.id IS NOT DISTINCT FROM insdel . id)",
        ] {
            assert_eq!(c.forbidden(ok), Vec::<String>::new(), "{ok}");
        }
        for bad in [
            "DELETE FROM employees",
            "SELECT name FROM salaries",
            "SELECT name FROM employees; DROP TABLE employees",
            "SELECT \"Salary\" FROM employees",
            "SELECT name FROM secret.employees",
            "SELECT name FROM employees WHERE x = 'unterminated",
            "SELECT name FROM employees -- drop",
            "SELECT name FROM employees /* hidden */",
            "SELECT name FROM \"salaries\"",
            "SELECT salaries_x FROM employees",
            "SELECT name FROM employees WHERE id IN (DELETE FROM employees)",
            "SELECT insert.salary FROM employees",
            "WITH d AS (DELETE FROM employees RETURNING id) SELECT 1 AS delete FROM d",
        ] {
            assert!(!c.forbidden(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_decline_passes_and_its_words_are_names_elsewhere() {
        let c = check(r#"{"verbs":["select"]}"#);
        for ok in [
            "CANNOT ANSWER 'no table holds salaries; drop that'",
            "cannot answer 'x';",
            "SELECT 1 AS answer, name cannot FROM employees",
        ] {
            assert_eq!(c.forbidden(ok), Vec::<String>::new(), "{ok}");
        }
        for bad in [
            "SELECT answer FROM employees",
            "SELECT cannot FROM employees",
            "CANNOT ANSWER 'x'; DROP TABLE employees",
            "CANNOT ANSWER 'it''s'",
        ] {
            assert!(!c.forbidden(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn relations_off_the_search_path_pass_qualified_only() {
        let d = Dialect::postgres_without_comments().expect("dialect");
        let snapshot = CatalogSnapshot::from_json(include_str!(
            "../../grid-core/tests/core/fixtures/catalog_qualified.json"
        ))
        .expect("snapshot");
        let c = StatementCheck::for_snapshot(&d, &snapshot, &Policy::default()).expect("check");
        assert_eq!(
            c.forbidden("SELECT id FROM hr.employees"),
            Vec::<String>::new()
        );
        assert_eq!(
            c.forbidden("SELECT e.id FROM hr.employees AS e JOIN hr.employees f ON f.id = e.id"),
            Vec::<String>::new()
        );
        assert!(!c.forbidden("SELECT id FROM hr.payroll").is_empty());
        assert!(!c.forbidden("SELECT id FROM secret.employees").is_empty());
    }
}
