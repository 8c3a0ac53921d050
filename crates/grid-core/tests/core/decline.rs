//! The decline (`CANNOT ANSWER 'reason'`, `decline_statement` in `grammars/postgres.y`):
//! a sentence of every role's language, only at the start of a statement, with a reason of
//! plain words; its words are names everywhere else; `statement::decline_of` reads exactly
//! the declines of the generated dialect; the mask and the oracle agree on its prefixes
//! (`masks.rs`), and no budget completion begins one (`reserve_completion.rs`).

use std::sync::Arc;

use grid_core::policy::{Ban, Policy, Verb};
use grid_core::schema::{Schema, Table};
use grid_core::statement::{decline_of, DECLINE_REASON_MAX};
use grid_core::{Dialect, Language, Lexicon, Session};

/// A table `answer` with a column `cannot`, and a table `t` with a column `answer`: the
/// decline's words as names of each kind.
pub fn decline_words_schema() -> Schema {
    Schema {
        db_id: "words".into(),
        tables: vec![
            Table::with_columns("answer", &["id", "cannot"]),
            Table::with_columns("t", &["id", "answer"]),
        ],
    }
}

/// The generated dialect's language of `schema` under `policy`.
pub fn generated_language(schema: &Schema, policy: &Policy) -> Arc<Language> {
    let d = Dialect::generated().expect("the generated dialect builds");
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(schema, policy, &reserved).expect("lexicon");
    Arc::new(Language::build(d, policy, &lx).expect("language"))
}

/// Declines the language admits, as the model may write them.
pub const DECLINES: &[&str] = &[
    "CANNOT ANSWER 'the role can read no table about salaries'",
    "cannot answer'x';",
    " Cannot\tAnswer\n'no, (sorry): 2 of 3 / a_b-c!?.' ;\n",
    "CANNOT ANSWER '0'",
];

/// Texts that are not sentences: a reason that is not plain words, or the form anywhere
/// but at the start of a statement.
const NOT_SENTENCES: &[&str] = &[
    "CANNOT ANSWER ''",
    "CANNOT ANSWER ' x'",
    "CANNOT ANSWER 'it''s'",
    "CANNOT ANSWER 'a\nb'",
    "CANNOT ANSWER 'a\tb'",
    "CANNOT ANSWER 'a\rb'",
    "CANNOT ANSWER 'caf\u{e9}'",
    "CANNOT ANSWER 'a\\b'",
    "CANNOT ANSWER 'a\"b'",
    "CANNOT ANSWER 'a*b'",
    "CANNOT ANSWER E'x'",
    "CANNOT ANSWER 'x' 'y'",
    "CANNOT ANSWER 'x';;",
    "CANNOT ANSWER 'x'; SELECT 1",
    "SELECT 1; CANNOT ANSWER 'x'",
    "CANNOT ANSWER",
    "CANNOT 'x'",
    "ANSWER 'x'",
    "CANNOTANSWER 'x'",
    "CANNOT ANSWER 'x",
    "SELECT CANNOT ANSWER 'x'",
    "(CANNOT ANSWER 'x')",
    "WITH c AS (CANNOT ANSWER 'x') SELECT 1",
    "SELECT 1 FROM answer WHERE id IN (CANNOT ANSWER 'x')",
    "CANNOT ANSWER 'x' -- why\n",
];

/// Statements that use the decline's words as names.
const NAMES: &[&str] = &[
    "SELECT cannot FROM answer",
    "SELECT answer.cannot, a.id FROM answer, answer AS a",
    "SELECT answer FROM t WHERE answer = 'CANNOT ANSWER'",
    "SELECT id cannot FROM answer",
    "SELECT 1 AS answer, 2 AS cannot",
    "SELECT x.cannot FROM answer x JOIN t ON t.answer = x.cannot",
    "WITH cannot AS (SELECT answer FROM t) SELECT answer FROM cannot",
    "SELECT count(*) AS answer FROM t ORDER BY answer",
];

#[test]
fn a_decline_is_a_sentence_at_the_start_only_and_its_reason_is_plain_words() {
    let lang = generated_language(&decline_words_schema(), &Policy::default());
    let mut s = Session::new(&lang);
    for ok in DECLINES {
        assert!(s.complete(ok.as_bytes()), "refused: {ok:?}");
    }
    let longest = "a".repeat(DECLINE_REASON_MAX);
    assert!(s.complete(format!("CANNOT ANSWER '{longest}'").as_bytes()));
    assert!(!s.complete(format!("CANNOT ANSWER '{longest}b'").as_bytes()));
    assert!(!s.viable(format!("CANNOT ANSWER '{longest}b").as_bytes()));
    for bad in NOT_SENTENCES {
        assert!(!s.complete(bad.as_bytes()), "accepted: {bad:?}");
    }
    // Where a decline is on its way, only its reason may follow: the quote inside a
    // reason, or a line feed, ends the way.
    assert!(s.viable(b"CANNOT ANSWER 'it"));
    assert!(!s.viable(b"CANNOT ANSWER 'it''"));
    assert!(!s.viable(b"CANNOT ANSWER 'it\n"));
    assert!(!s.viable(b"CANNOT ANSWER 'it\\"));
    // And a string elsewhere is what it always was.
    assert!(s.complete(b"SELECT answer FROM t WHERE answer = 'it''s\nx'"));
}

#[test]
fn the_decline_words_are_names_everywhere_else() {
    let lang = generated_language(&decline_words_schema(), &Policy::default());
    let mut s = Session::new(&lang);
    for ok in NAMES {
        assert!(s.complete(ok.as_bytes()), "refused: {ok:?}");
    }
    // Not reserved: spelled bare in the role's lexicon.
    let d = Dialect::generated().expect("dialect");
    assert!(!d.is_reserved("cannot") && !d.is_reserved("answer"));
    // In the full dialect too (a column named like the words, and the decline itself).
    let full = crate::common::language_for(&decline_words_schema(), &Policy::default());
    let mut f = Session::new(&full);
    for ok in NAMES.iter().chain(DECLINES) {
        assert!(
            f.complete(ok.as_bytes()),
            "the full dialect refused: {ok:?}"
        );
    }
}

/// Every projection keeps the decline: it names no verb, and no ban removes it.
#[test]
fn every_projection_keeps_the_decline() {
    let policies = [
        Policy::select_only(),
        Policy::default(),
        Policy {
            verbs: vec![Verb::Insert],
            ..Policy::default()
        },
        Policy {
            verbs: vec![Verb::Select],
            ban: vec![
                Ban::SetOps,
                Ban::Subqueries,
                Ban::Window,
                Ban::Cte,
                Ban::Joins,
            ],
            ..Policy::default()
        },
    ];
    for p in policies {
        let lang = generated_language(&decline_words_schema(), &p);
        let mut s = Session::new(&lang);
        for ok in DECLINES {
            assert!(s.complete(ok.as_bytes()), "{p:?} refused {ok:?}");
        }
    }
}

/// `decline_of` reads exactly the sentences that begin with the decline's word, and with
/// the reason between the quotes: on the declines, on what is not a sentence, on
/// statements that use the words as names, and on every cut and one-byte edit of the
/// declines.
#[test]
fn decline_of_reads_exactly_the_declines_of_the_generated_dialect() {
    let lang = generated_language(&decline_words_schema(), &Policy::default());
    let mut s = Session::new(&lang);
    let starts_with_cannot = |t: &str| {
        t.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .find(|w| !w.is_empty())
            .is_some_and(|w| w.eq_ignore_ascii_case("cannot"))
    };
    let mut texts: Vec<String> = DECLINES
        .iter()
        .chain(NOT_SENTENCES)
        .chain(NAMES)
        .map(|t| t.to_string())
        .collect();
    for d in DECLINES {
        for i in 0..d.len() {
            texts.push(d[..i].to_string());
            for b in [b' ', b'\'', b';', b'\n', b'x', b'(', b'-', b'*', b'"'] {
                let mut edited = d.as_bytes().to_vec();
                edited[i] = b;
                texts.extend(String::from_utf8(edited).ok());
                let mut inserted = d.as_bytes().to_vec();
                inserted.insert(i, b);
                texts.extend(String::from_utf8(inserted).ok());
            }
        }
    }
    let mut declines = 0;
    for t in &texts {
        let sentence = s.complete(t.as_bytes());
        let read = decline_of(t);
        assert_eq!(
            read.is_some(),
            sentence && starts_with_cannot(t),
            "{t:?}: decline_of {read:?}, sentence {sentence}"
        );
        if let Some(d) = read {
            declines += 1;
            let quoted = format!("'{}'", d.reason);
            assert!(t.contains(&quoted), "{t:?}: reason {:?}", d.reason);
        }
    }
    assert!(declines > 50, "{declines}");
}
