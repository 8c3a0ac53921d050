//! Where a refused statement is rewound to (see [`grid_core::decode::Rewind`]).
//!
//! The checker refuses a reference the mask cannot see is wrong: a column under the alias
//! of a table that lacks it (`T2.headofstate`, T2 being `countrylanguage`), a qualifier
//! that names no FROM item. Small models told so in a repair prompt copy the statement
//! anyway (issue 19's probe: 0 of 20 right at 1.5B). Stopped at the mistake itself, with
//! their choice there taken away, they pick their next one (`T1.` for `T2.`): 4 of 20.
//!
//! The rewind point of a violation is a byte of its reference: the output is kept up to
//! the token that holds it, and that token is banned. For a qualified reference it is
//! the qualifier's last byte: with the digit of `T2` a token of its own, that keeps `T`
//! and bans `2`. For an unqualified one it is the first: the name itself was the wrong
//! choice, and a ban inside it only makes the model spell another word from its first
//! pieces (`horsepower` rewound to `horse` became `hpascilate` in issue 19's run).

use grid_core::checker::{Violation, ViolationKind};
use grid_core::decode::Rewind;

/// The rewind of a statement `sql`, written as `tokens` (whose bytes `bytes` gives, and
/// which spell `sql` exactly), refused for `violations`: at the earliest reference a
/// violation locates in the statement. `None` when no violation is about a reference, or
/// none of their references is found in the text.
pub(crate) fn rewind_point<'v>(
    sql: &str,
    tokens: &[u32],
    bytes: impl Fn(u32) -> &'v [u8],
    violations: &[Violation],
) -> Option<Rewind> {
    let spelled: usize = tokens.iter().map(|&t| bytes(t).len()).sum();
    if spelled != sql.len() {
        return None;
    }
    let point = violations
        .iter()
        .filter(|v| about_a_reference(&v.kind))
        .filter_map(|v| rewind_byte(sql, &v.fragment))
        .min()?;
    let mut end = 0usize;
    for (k, &t) in tokens.iter().enumerate() {
        end += bytes(t).len();
        if end > point {
            return Some(Rewind {
                replay: tokens[..k].to_vec(),
                ban: t,
            });
        }
    }
    None
}

/// Violations that name a reference the model chose (rather than the statement's shape).
fn about_a_reference(kind: &ViolationKind) -> bool {
    matches!(
        kind,
        ViolationKind::UnknownRelation { .. }
            | ViolationKind::UnknownColumn { .. }
            | ViolationKind::AmbiguousColumn { .. }
            | ViolationKind::ColumnPrivilege { .. }
            | ViolationKind::TablePrivilege { .. }
            | ViolationKind::Wildcard { .. }
    )
}

/// The byte offset in `sql` of the last byte of `fragment`'s qualifier (the part before
/// its first `.` outside double quotes), or of its first byte when it has none, at the
/// fragment's first occurrence as whole words (exact, else ignoring ASCII case).
fn rewind_byte(sql: &str, fragment: &str) -> Option<usize> {
    if fragment.is_empty() {
        return None;
    }
    let at = whole_word_at(sql, fragment).or_else(|| {
        let (s, f) = (sql.to_ascii_lowercase(), fragment.to_ascii_lowercase());
        whole_word_at(&s, &f)
    })?;
    let mut quoted = false;
    for (i, b) in fragment.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b'.' if !quoted => return (i > 0).then(|| at + i - 1),
            _ => {}
        }
    }
    Some(at)
}

/// The first occurrence of `needle` in `hay` not inside a longer identifier.
fn whole_word_at(hay: &str, needle: &str) -> Option<usize> {
    let word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let bytes = hay.as_bytes();
    hay.match_indices(needle).map(|(i, _)| i).find(|&i| {
        let before = i.checked_sub(1).and_then(|j| bytes.get(j));
        !word(before) && !word(bytes.get(i + needle.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens as the strings they spell (ids are indexes).
    fn rewind(pieces: &[&'static str], violations: &[Violation]) -> Option<(String, String)> {
        let sql: String = pieces.concat();
        let ids: Vec<u32> = (0..pieces.len() as u32).collect();
        let r = rewind_point(&sql, &ids, |t| pieces[t as usize].as_bytes(), violations)?;
        let kept: String = r.replay.iter().map(|&t| pieces[t as usize]).collect();
        Some((kept, pieces[r.ban as usize].to_string()))
    }

    fn column(qualifier: Option<&str>, column: &str, fragment: &str) -> Violation {
        Violation {
            kind: ViolationKind::UnknownColumn {
                qualifier: qualifier.map(str::to_string),
                column: column.to_string(),
            },
            role: "r".into(),
            fragment: fragment.into(),
            hint: None,
        }
    }

    const STATEMENT: [&str; 14] = [
        "SELECT",
        " T",
        "2",
        ".",
        "head",
        "of",
        "state",
        " FROM",
        " country",
        " AS",
        " T",
        "1",
        " JOIN",
        " countrylanguage AS T2",
    ];

    #[test]
    fn a_wrong_alias_is_rewound_to_its_last_character() {
        let v = column(Some("t2"), "headofstate", "T2.headofstate");
        assert_eq!(
            rewind(&STATEMENT, &[v]),
            Some(("SELECT T".to_string(), "2".to_string()))
        );
    }

    #[test]
    fn an_unqualified_reference_is_rewound_to_the_token_that_begins_it() {
        let v = column(None, "headofstate", "headofstate");
        assert_eq!(
            rewind(&STATEMENT, &[v]),
            Some(("SELECT T2.".to_string(), "head".to_string()))
        );
        // A token that holds the space before it too is the one banned; the reference is
        // found as a whole word (not inside `countrylanguage`, nor `headofstate` in
        // `state`).
        let v = column(None, "country", "country");
        assert_eq!(
            rewind(&STATEMENT, &[v]),
            Some((
                "SELECT T2.headofstate FROM".to_string(),
                " country".to_string()
            ))
        );
        let v = column(None, "state", "state");
        assert_eq!(rewind(&STATEMENT, &[v]), None);
    }

    #[test]
    fn the_earliest_reference_wins_and_case_is_ignored_when_it_must_be() {
        let late = column(Some("t1"), "x", "T1.x");
        let early = column(Some("t2"), "headofstate", "t2.HEADOFSTATE");
        let (kept, ban) = rewind(&STATEMENT, &[late, early]).unwrap();
        assert_eq!((kept.as_str(), ban.as_str()), ("SELECT T", "2"));
    }

    #[test]
    fn a_quoted_dot_does_not_end_the_qualifier() {
        let pieces = ["SELECT", " \"a", ".b\"", ".c", " FROM", " t"];
        let v = column(Some("a.b"), "c", "\"a.b\".c");
        assert_eq!(
            rewind(&pieces, &[v]),
            Some(("SELECT \"a".to_string(), ".b\"".to_string()))
        );
    }

    #[test]
    fn no_rewind_without_a_located_reference() {
        let shape = Violation {
            kind: ViolationKind::StatementCount { count: 2 },
            role: "r".into(),
            fragment: "SELECT".into(),
            hint: None,
        };
        assert_eq!(rewind(&STATEMENT, &[shape]), None);
        let elsewhere = column(Some("t9"), "x", "T9.x");
        assert_eq!(rewind(&STATEMENT, &[elsewhere]), None);
        // Tokens that do not spell the statement (a lossy decoding) are not rewound.
        let v = column(Some("t2"), "headofstate", "T2.headofstate");
        let sql: String = STATEMENT.concat();
        let r = rewind_point(&format!("{sql} "), &[0, 1], |_| b"SELECT", &[v]);
        assert_eq!(r, None);
    }
}
