//! What a generated statement writes, as the person about to run it must be told: its
//! verb and its target relation, read from the statement as the checker reads it
//! ([`crate::checker::parse_one`]: `sqlparser`, PostgreSQL dialect). `grid.ask` names them
//! in a NOTICE; `grid.run` refuses to run a write.
//!
//! And whether a finished output is no statement at all but the model's decline
//! ([`decline_of`]): `CANNOT ANSWER 'reason'`, the grammar's `decline_statement`, which
//! neither the checker nor the judge is ever asked about.

use sqlparser::ast::{FromTable, Statement, TableFactor, TableObject};

use crate::policy::Verb;

/// A statement's write: its verb (never SELECT) and target, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub(crate) verb: Verb,
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

/// The model's decline: the one output of the language that is not SQL, `CANNOT ANSWER
/// 'reason'` (`grammars/postgres.y`, `decline_statement`), and the reason it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decline {
    /// The reason, as written between the quotes: plain words ([`is_reason`]).
    pub reason: String,
}

/// The longest reason a decline may give, in characters (and bytes: it is ASCII).
pub const DECLINE_REASON_MAX: usize = 200;

/// Whether `c` may be in a decline's reason: an ASCII letter or digit, a space, or one of
/// `. , ; : ! ? ( ) / _ -` (`DECLINE_REASON` in `grammars/postgres.lex`).
pub(crate) fn is_reason_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || " .,;:!?()/_-".contains(c)
}

/// Whether `text` is a decline's reason: 1 to [`DECLINE_REASON_MAX`] characters of
/// [`is_reason_char`], the first a letter or a digit. So it holds no quote, backslash,
/// control character or anything beyond ASCII.
pub(crate) fn is_reason(text: &str) -> bool {
    text.len() <= DECLINE_REASON_MAX
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.chars().all(is_reason_char)
}

/// The decline `output` is, if it is one: `CANNOT ANSWER 'reason'` as the generated
/// dialect spells it (the words in any case, whitespace of spaces, tabs and line feeds
/// around and between the parts, none needed before the quote, an optional `;` at the
/// end), with a reason [`is_reason`] admits. Exactly the sentences of the grammar's
/// `decline_statement` in the generated dialect (which has no comments): what the mask
/// admitted after `CANNOT` is read here, and anything else is not a decline (an output
/// with a comment inside is left to the checker, which refuses it). `None` for every
/// statement.
pub fn decline_of(output: &str) -> Option<Decline> {
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n');
    let word = |rest: &str, w: &str| -> Option<usize> {
        let head = rest.get(..w.len())?;
        head.eq_ignore_ascii_case(w).then_some(w.len())
    };
    let rest = output.trim_start_matches(blank);
    let rest = &rest[word(rest, "cannot")?..];
    // A word ends before a blank: `cannotanswer` is one word.
    let after = rest.trim_start_matches(blank);
    if after.len() == rest.len() {
        return None;
    }
    let rest = &after[word(after, "answer")?..];
    let rest = rest.trim_start_matches(blank);
    let body = rest.strip_prefix('\'')?;
    let close = body.find('\'')?;
    let (reason, tail) = (&body[..close], &body[close + 1..]);
    let tail = tail.trim_matches(blank);
    let tail = tail.strip_prefix(';').unwrap_or(tail);
    (is_reason(reason) && tail.trim_start_matches(blank).is_empty()).then(|| Decline {
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declines_are_read_with_their_reason_and_nothing_else_is() {
        let reason = |s: &str| decline_of(s).map(|d| d.reason);
        let r = |s: &str| Some(s.to_string());
        assert_eq!(
            reason("CANNOT ANSWER 'the role can read no table about salaries'"),
            r("the role can read no table about salaries")
        );
        assert_eq!(reason(" cannot\tAnswer\n'x';\n"), r("x"));
        assert_eq!(
            reason("Cannot answer'no, (sorry): 2 of 3 / a_b-c!?.'"),
            r("no, (sorry): 2 of 3 / a_b-c!?.")
        );
        assert_eq!(reason("CANNOT ANSWER 'x' ; "), r("x"));
        let longest = "a".repeat(DECLINE_REASON_MAX);
        assert_eq!(
            reason(&format!("CANNOT ANSWER '{longest}'")),
            Some(longest.clone())
        );
        for not in [
            "SELECT 1",
            "SELECT 'CANNOT ANSWER ''x'''",
            "CANNOT ANSWER",
            "CANNOT ANSWER ''",
            "CANNOT ANSWER ' x'",
            "CANNOT ANSWER 'it''s'",
            "CANNOT ANSWER 'a\nb'",
            "CANNOT ANSWER 'a\tb'",
            "CANNOT ANSWER 'caf\u{e9}'",
            "CANNOT ANSWER 'a\\b'",
            "CANNOT ANSWER 'a\"b'",
            "CANNOT ANSWER E'x'",
            "CANNOT ANSWER 'x';;",
            "CANNOT ANSWER 'x'; SELECT 1",
            "CANNOT ANSWER 'x' 'y'",
            "CANNOTANSWER 'x'",
            "CANNOT ANSWERS 'x'",
            "CANNOT -- c\nANSWER 'x'",
            "CANNOT\rANSWER 'x'",
            "CAN NOT ANSWER 'x'",
            "CANNOT ANSWER 'x",
        ] {
            assert_eq!(reason(not), None, "{not:?}");
        }
        assert_eq!(reason(&format!("CANNOT ANSWER '{longest}a'")), None);
    }

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
