//! What a generated statement writes, as the person about to run it must be told: its
//! verb and its target relation, read from the statement as the checker reads it
//! ([`crate::checker::parse_one`]: `sqlparser`, PostgreSQL dialect). `grid.ask` names them
//! in a NOTICE; `grid.run` refuses to run a write.

use sqlparser::ast::{FromTable, Statement, TableFactor, TableObject};

use crate::policy::Verb;

/// A statement's write: its verb (never SELECT) and target, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub verb: Verb,
    /// The target relation as the statement names it (`orders`, `hr.orders`).
    pub target: String,
}

impl Write {
    /// The verb in upper case, as SQL spells it.
    pub fn verb_sql(&self) -> &'static str {
        match self.verb {
            Verb::Select => "SELECT",
            Verb::Insert => "INSERT",
            Verb::Update => "UPDATE",
            Verb::Delete => "DELETE",
        }
    }
}

/// The write of `sql`, when it is one INSERT, UPDATE or DELETE (`None` for a SELECT).
/// A statement that does not parse, or that is several statements, is reported by its
/// first word when that is a write verb, with an unknown target: a write is never
/// mistaken for a read.
pub fn write_of(sql: &str) -> Option<Write> {
    let first = sql
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let by_word = match first.as_str() {
        "insert" => Some(Verb::Insert),
        "update" => Some(Verb::Update),
        "delete" => Some(Verb::Delete),
        _ => None,
    };
    let parsed = crate::checker::parse_one(sql).ok();
    let unknown = || "(unknown)".to_string();
    match parsed {
        Some(Statement::Insert(i)) => Some(Write {
            verb: Verb::Insert,
            target: match &i.table {
                TableObject::TableName(n) => n.to_string(),
                _ => unknown(),
            },
        }),
        Some(Statement::Update(u)) => Some(Write {
            verb: Verb::Update,
            target: match &u.table.relation {
                TableFactor::Table { name, .. } => name.to_string(),
                _ => unknown(),
            },
        }),
        Some(Statement::Delete(d)) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
            };
            Some(Write {
                verb: Verb::Delete,
                target: match from.first().map(|t| &t.relation) {
                    Some(TableFactor::Table { name, .. }) => name.to_string(),
                    _ => unknown(),
                },
            })
        }
        Some(Statement::Query(_)) => None,
        _ => by_word.map(|verb| Write {
            verb,
            target: unknown(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_named_by_verb_and_target() {
        let w = |sql: &str| write_of(sql).map(|w| (w.verb_sql(), w.target));
        assert_eq!(w("SELECT 1"), None);
        assert_eq!(w("WITH x AS (SELECT 1) SELECT * FROM x"), None);
        assert_eq!(
            w("INSERT INTO atk.inbox (id, note) SELECT employee_id, salary FROM salaries"),
            Some(("INSERT", "atk.inbox".to_string()))
        );
        assert_eq!(
            w("update \"Orders\" SET a = 1"),
            Some(("UPDATE", "\"Orders\"".to_string()))
        );
        assert_eq!(
            w("DELETE FROM orders AS o WHERE o.id = 1;"),
            Some(("DELETE", "orders".to_string()))
        );
        // Read as the checker reads them: PostgreSQL's postfix ISNULL, and an INSERT's
        // source ending at its target list before ON CONFLICT.
        assert_eq!(
            w("DELETE FROM orders WHERE note ISNULL AND id NOTNULL"),
            Some(("DELETE", "orders".to_string()))
        );
        assert_eq!(
            w("INSERT INTO t (a) SELECT 1 ON CONFLICT DO NOTHING"),
            Some(("INSERT", "t".to_string()))
        );
        // Unparsable, or two statements: the first word still says it writes.
        assert_eq!(
            w("INSERT INTO orders VALUES ("),
            Some(("INSERT", "(unknown)".to_string()))
        );
        assert_eq!(
            w(" delete from a; select 1"),
            Some(("DELETE", "(unknown)".to_string()))
        );
        assert_eq!(w("SELECT 'insert'"), None);
    }
}
