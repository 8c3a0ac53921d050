//! Bare column references where every FROM clause they may name is written (issue 33): the
//! name is a column of a range variable in scope there (`SCOPED_COL`), by the scope rules
//! of qualified references; where a FROM is still to come, any column of the lexicon as
//! before. Output names where PostgreSQL allows them (`ALIAS_REF`), and function, type and
//! keyword words that share a column's spelling, stay. Fast mask ≡ trial-parse oracle ≡
//! cached mask through them, and what the names add is exactly what the mask finds token by
//! token; the reserve finishes a bare column in progress.

use crate::common;
use crate::qualified::{assert_the_reserve_finishes, check, pets_language};

use common::masker::{vocab_with, MaskFixture};
use grid_core::cd_class::CdKey;
use grid_core::schema::{Schema, Table};
use grid_core::{Language, Lexicon, Policy, Session};

/// `events` has columns spelled like a function (`count`, `max`), a type (`date`) and a
/// keyword PostgreSQL does not reserve (`year`); `people` has none of them.
fn events_schema() -> Schema {
    Schema {
        db_id: "events".into(),
        tables: vec![
            Table::with_columns("events", &["id", "count", "date", "year", "max", "Kind"]),
            Table::with_columns("people", &["id", "name", "events_id"]),
        ],
    }
}

fn events_language() -> Language {
    let dialect = common::dialect();
    let policy = Policy::default();
    let reserved = |w: &str| dialect.is_reserved(w);
    let lx = Lexicon::from_schema(&events_schema(), &policy, &reserved).expect("lexicon");
    Language::build(dialect, &policy, &lx).expect("language")
}

/// Bare references the language takes (pets: `student`, `has_pet`, `pets`, `hr.staff`):
/// after FROM those PostgreSQL binds, or leaves to its ambiguity rule.
const ACCEPTED: &[&str] = &[
    "SELECT fname FROM student WHERE age > 20",
    "SELECT count(*) FROM student GROUP BY major HAVING max(age) > 20",
    "SELECT fname FROM student ORDER BY age DESC, lname",
    "SELECT 1 FROM student AS s JOIN has_pet AS h ON s.stuid = h.stuid WHERE petid > 1",
    "SELECT stuid FROM has_pet WHERE petid IN (SELECT petid FROM pets WHERE weight > 10)",
    // Correlated: a column of an enclosing query's range variable.
    "SELECT fname FROM student WHERE EXISTS (SELECT 1 FROM has_pet WHERE petid > age)",
    "SELECT fname FROM student WHERE 1 < (SELECT count(*) FROM has_pet WHERE petid = city_code)",
    // A JOIN's ON sees its two sides.
    "SELECT 1 FROM student JOIN has_pet ON student.stuid = has_pet.stuid AND petid > age",
    "SELECT 1 FROM student AS a JOIN (has_pet AS b JOIN pets AS c ON weight = pet_age) ON age > 1",
    // Derived tables, CTEs, `*` over a relation, column alias lists.
    "SELECT 1 FROM (SELECT stuid, age AS a FROM student) AS t WHERE a > 1 AND stuid > 0",
    "SELECT 1 FROM (SELECT * FROM student) AS t WHERE lname = 'x'",
    "WITH c AS (SELECT stuid, count(*) AS n FROM has_pet GROUP BY stuid) SELECT 1 FROM c WHERE n > 1",
    "WITH c AS (SELECT * FROM pets) SELECT 1 FROM c AS k WHERE weight > 1",
    "SELECT 1 FROM student AS e(k) WHERE k > 1 AND age > 1",
    "SELECT 1 FROM has_pet AS h(a, b) WHERE a = b",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT n FROM r",
    // LATERAL sees its siblings; USING lists the columns of both sides.
    "SELECT 1 FROM student AS s, LATERAL (SELECT petid FROM has_pet WHERE age > 1) AS q WHERE petid > 1",
    "SELECT 1 FROM student JOIN has_pet USING (stuid) WHERE petid > 1 AND stuid > 1",
    "SELECT 1 FROM student NATURAL JOIN has_pet WHERE petid > 1 AND age > 1",
    // A join alias brings the columns of both sides; VALUES and CTE column lists.
    "SELECT 1 FROM (student JOIN has_pet USING (stuid)) AS j WHERE petid > 1 AND age > 1",
    "SELECT 1 FROM (VALUES (1, 2)) AS v(p, q) WHERE p < q",
    "WITH c(x, y) AS (SELECT stuid, petid FROM has_pet) SELECT 1 FROM c WHERE x = y",
    "WITH c AS (SELECT s.* FROM student AS s) SELECT 1 FROM c WHERE age > 1",
    "SELECT 1 FROM (SELECT max(weight), count(*) FROM pets) AS t WHERE max > count",
    // A relation off the search path, quoted names, other cases.
    "SELECT 1 FROM hr.staff WHERE salary > 1",
    "SELECT 1 FROM student WHERE \"age\" > 1 AND AGE > 1 AND Age < 99",
    // Output names: whole ORDER BY and GROUP BY items.
    "SELECT count(*) AS pettype FROM student ORDER BY pettype",
    "SELECT count(*) AS n FROM student GROUP BY major ORDER BY n DESC",
    "SELECT age + 1 AS weight FROM student GROUP BY weight",
    "(SELECT fname FROM student) ORDER BY age",
    "SELECT stuid FROM student UNION SELECT stuid FROM has_pet ORDER BY stuid",
    // Two range variables with the name: the checker's to refuse, not the mask's.
    "SELECT 1 FROM student JOIN has_pet ON student.stuid = has_pet.stuid WHERE stuid > 1",
    // Where a FROM is still to come, any column of the lexicon, as before.
    "SELECT petid FROM student",
    "SELECT (SELECT max(petid) FROM has_pet WHERE weight = age) FROM student",
    "SELECT DISTINCT ON (weight) fname FROM student",
    "UPDATE student SET age = 1 WHERE petid = 2",
    "DELETE FROM student WHERE weight = 1",
    "INSERT INTO student (age) SELECT petid FROM has_pet WHERE weight > 1",
];

/// Bare references PostgreSQL does not bind, after FROM.
const REFUSED: &[&str] = &[
    "SELECT 1 FROM student WHERE petid > 1",
    "SELECT 1 FROM student AS s WHERE weight > 1",
    "SELECT 1 WHERE age > 1",
    "SELECT 1 FROM student GROUP BY weight",
    "SELECT 1 FROM student ORDER BY weight",
    "SELECT 1 FROM student GROUP BY major HAVING max(weight) > 1",
    // Not in the subquery's FROM, nor in an enclosing one's.
    "SELECT stuid FROM has_pet WHERE petid IN (SELECT petid FROM pets WHERE age > 1)",
    // A JOIN's ON does not see the other FROM items of its SELECT.
    "SELECT 1 FROM pets, student JOIN has_pet ON weight > 1",
    // A FROM subquery does not see its siblings (LATERAL does).
    "SELECT 1 FROM student, (SELECT 1 AS z FROM has_pet WHERE age > 1) AS q",
    // A derived table's outputs only; an alias list renames by position.
    "SELECT 1 FROM (SELECT stuid FROM student) AS t WHERE age > 1",
    "SELECT 1 FROM has_pet AS h(a, b) WHERE petid > 1",
    "SELECT 1 FROM student AS e(k) WHERE stuid > 1",
    // A CTE that no FROM item names.
    "WITH c AS (SELECT count(*) AS n FROM student) SELECT 1 FROM student WHERE n > 1",
    // A set operation's ORDER BY sees its output names only.
    "SELECT stuid FROM student UNION SELECT stuid FROM has_pet ORDER BY age",
    // An output name is no column in an expression, in WHERE or in HAVING.
    "SELECT count(*) AS n FROM student ORDER BY n + 1",
    "SELECT age AS n FROM student WHERE n > 1",
    "SELECT count(*) AS n FROM student GROUP BY major HAVING n > 1",
    // A join alias hides nothing of its columns, but only they are in scope.
    "SELECT 1 FROM (student JOIN has_pet USING (stuid)) AS j WHERE weight > 1",
    "WITH c(x, y) AS (SELECT stuid, petid FROM has_pet) SELECT 1 FROM c WHERE petid > 1",
    // A query's FROM items end with it.
    "SELECT stuid FROM student WHERE EXISTS (SELECT 1 FROM pets) AND weight > 1",
];

/// Names spelled like functions, types and keywords.
const EVENTS_ACCEPTED: &[&str] = &[
    "SELECT year FROM events GROUP BY year HAVING count(*) > max(count)",
    "SELECT 1 FROM events WHERE count > 1 AND max > count AND year = 2020",
    "SELECT 1 FROM events WHERE date > date '2020-01-01' AND date IS NOT NULL",
    "SELECT 1 FROM events WHERE EXTRACT(year FROM date) = year",
    "SELECT 1 FROM events WHERE \"Kind\" = 'x' ORDER BY count, date",
    "SELECT 1 FROM people WHERE name = 'x' AND (SELECT count(*) FROM events) > 1",
    "SELECT 1 FROM people GROUP BY name HAVING max(events_id) > 1",
    "SELECT 1 FROM people JOIN events ON events_id = events.id WHERE count > 1",
];

const EVENTS_REFUSED: &[&str] = &[
    "SELECT 1 FROM people WHERE count > 1",
    "SELECT 1 FROM people WHERE year = 2020",
    "SELECT 1 FROM people WHERE max > 1",
    "SELECT 1 FROM people WHERE date > 1",
    "SELECT 1 FROM people WHERE \"Kind\" = 'x'",
    "SELECT 1 FROM people ORDER BY date",
];

#[test]
fn bare_references_after_from_bind() {
    let lang = pets_language();
    for sql in ACCEPTED {
        if let Err(e) = check(&lang, sql) {
            panic!("{sql}\n  refused: {e}");
        }
    }
    let lang = events_language();
    for sql in EVENTS_ACCEPTED {
        if let Err(e) = check(&lang, sql) {
            panic!("{sql}\n  refused: {e}");
        }
    }
}

#[test]
fn bare_references_after_from_that_do_not_bind_are_refused() {
    let lang = pets_language();
    for sql in REFUSED {
        assert!(check(&lang, sql).is_err(), "{sql}\n  accepted");
    }
    let lang = events_language();
    for sql in EVENTS_REFUSED {
        assert!(check(&lang, sql).is_err(), "{sql}\n  accepted");
    }
}

// ---------------------------------------------------------------------------------------
// Fast mask ≡ trial-parse oracle ≡ cached mask

/// Fragments that start, end or cross bare names: after blanks and punctuation, cut short,
/// whole and then ended, quoted, in other cases; with a relation brought into scope and
/// its column named in one token; and words spelled like the names.
#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    " age", "age", "ag", " ag", "e", "es", "age)", "age,", " age)", "(age", "(ag", " (age", "=age",
    " AGE", "AGE", "Age", "\"age\"", " \"age", "\"ag", "age\"", " petid", "petid", "pet", "id",
    " stuid", "stuid", "stu", " weight", "weight", "wei", "ght", " lname", "lname", " fname",
    " major", " city_code", "city_", "code", " salary", " k", "k", " a", "a", " b", "b", " n",
    "n", " z", " pettype", " pet_age", "_age", " WHERE", " WHERE age", " WHERE a", "t WHERE age",
    "t WHERE wei", "student WHERE age", " student WHERE age >", "s WHERE weight", "_pet ON petid",
    "pets WHERE weight", "staff WHERE sal", " ON", " ON age", " AND", " AND age", " OR", " =",
    " >", " <", " 1", "1", ")", "(", " (", ",", ", ", " FROM", " JOIN", " AS", " ORDER BY",
    " ORDER BY age", " GROUP BY", " GROUP BY major", " HAVING", " max(", "max(", " count(*)",
    " count", "count", "count(", " date", "date", " year", "year", " max", "max", " Kind",
    " \"Kind\"", "\"K", " name", "name", " events_id", " people", " events", "events", " id",
    " DESC", " IS NULL", " IN", " EXISTS", " (SELECT", " SELECT", "SELECT", " LATERAL",
    " USING", " UNION", "'x'", " '", "\"", " \"", "\"\"", "*/age", "/**/age", "/* */ ag", "-- c\nage",
    "\nage", "\tage", ". age", ".age", "s.", "T1.", " T1", " h", " s", "h.", "r", " r", " c",
];

/// At every byte offset of the shapes, accepted and (up to where they fail) refused.
#[test]
fn fast_equals_oracle_equals_cache_through_bare_names() {
    let mut fx = MaskFixture::new(vocab_with(FRAGMENTS)).checking_dynamic_class();
    let ids = common::byte_ids(&fx.vocab);
    let mut n = 0;
    let mut refused = 0;
    for (lang, accepted, rejected) in [
        (pets_language(), ACCEPTED, REFUSED),
        (events_language(), EVENTS_ACCEPTED, EVENTS_REFUSED),
    ] {
        n += common::over_offsets_by(&lang, &ids, accepted, &mut |s, cfg, what| {
            fx.checked(s, cfg, what)
        });
        let mut s = Session::new(&lang);
        for sql in rejected {
            let mut cfg = s.start();
            for (i, &b) in sql.as_bytes().iter().enumerate() {
                fx.checked(&mut s, &cfg, &format!("{:?} at byte {i}", &sql[..i]));
                refused += 1;
                if s.feed(&mut cfg, &[b]).is_err() {
                    break;
                }
            }
        }
    }
    eprintln!(
        "{n} offsets of accepted statements, {refused} of refused ones, {} ids added by the names",
        fx.dynamic_ids
    );
    assert!(n + refused > 3000, "{n} + {refused}");
    assert!(
        fx.dynamic_ids > 3000,
        "only {} ids only the names allow",
        fx.dynamic_ids
    );
}

/// Random walks through allowed tokens from the shapes' prefixes, preferring the tokens
/// only names allow; every mask on the way checked as above.
#[test]
fn random_walks_through_bare_names_agree() {
    let mut fx = MaskFixture::new(vocab_with(FRAGMENTS)).checking_dynamic_class();
    let mut rng = common::Rng(0x0ba2_e5e5);
    let mut steps = 0;
    for (lang, accepted) in [
        (pets_language(), ACCEPTED),
        (events_language(), EVENTS_ACCEPTED),
    ] {
        let mut s = Session::new(&lang);
        for text in accepted {
            let mut prefixes = vec![s.start()];
            let mut cfg = s.start();
            for &b in text.as_bytes() {
                s.feed(&mut cfg, &[b]).expect("statement byte");
                prefixes.push(cfg.clone());
            }
            for walk in 0..2 {
                let mut cfg = prefixes[rng.below(prefixes.len())].clone();
                for k in 0..12 {
                    let m = fx.checked(&mut s, &cfg, &format!("{text:?} walk {walk} step {k}"));
                    steps += 1;
                    let dynamic: Vec<u32> = m
                        .cd_classes
                        .iter()
                        .filter(|c| *c.key == CdKey::Dynamic)
                        .flat_map(|c| c.ids.iter().copied())
                        .collect();
                    let all: Vec<u32> = m.ids().filter(|&id| !fx.vocab.is_special(id)).collect();
                    let pool = if !dynamic.is_empty() && rng.below(2) == 0 {
                        dynamic
                    } else {
                        all
                    };
                    if pool.is_empty() {
                        break;
                    }
                    let id = pool[rng.below(pool.len())];
                    s.feed(&mut cfg, fx.vocab.token_bytes(id))
                        .expect("an allowed token is accepted");
                }
            }
        }
    }
    assert!(steps > 800, "{steps}");
}

/// The reserve finishes a bare column wherever it stands unfinished (in progress, quoted,
/// after an operator), then completes the statement within its count; and where a FROM is
/// written and an expression must follow, it writes one the parser takes.
#[test]
fn the_reserve_finishes_a_bare_column() {
    assert_the_reserve_finishes(
        &vocab_with(FRAGMENTS),
        &[
            "SELECT 1 FROM student WHERE ag",
            "SELECT 1 FROM student WHERE age",
            "SELECT 1 FROM student WHERE \"ag",
            "SELECT 1 FROM student WHERE age > maj",
            "SELECT 1 FROM student WHERE",
            "SELECT 1 FROM student WHERE age >",
            "SELECT 1 FROM student GROUP BY",
            "SELECT 1 FROM student ORDER BY",
            "SELECT 1 FROM student JOIN has_pet ON",
            "SELECT 1 FROM student JOIN has_pet ON pet",
            "SELECT 1 FROM (SELECT 1 AS zz) AS s WHERE z",
            "SELECT 1 FROM hr.staff WHERE sal",
            "WITH c AS (SELECT * FROM pets) SELECT 1 FROM c WHERE pet_",
        ],
    );
}

/// The mask itself, token by token: after FROM it offers a bare column of a range variable
/// in scope and no other (an enclosing query's FROM items, a derived table's or CTE's
/// outputs, an ORDER BY's output names too); in a select list, any column of the lexicon.
/// Each verdict is also the oracle's (the fixture asserts it). `age` is also a function of
/// PostgreSQL's, and `n` begins `NOT` and `NULL`: they stand for no refused column here.
#[test]
fn the_mask_offers_the_columns_in_scope_and_no_other() {
    let lang = pets_language();
    let mut fx = MaskFixture::new(vocab_with(FRAGMENTS)).checking_dynamic_class();
    let id = |v: &grid_vocab::Vocabulary, t: &str| {
        v.iter()
            .find(|(_, b)| *b == t.as_bytes())
            .map(|(id, _)| id)
            .unwrap_or_else(|| panic!("no token {t:?}"))
    };
    // (prefix, tokens allowed there, tokens refused there)
    let cases: &[(&str, &[&str], &[&str])] = &[
        // A FROM to come: every column word.
        ("SELECT", &[" age", " petid", " weight", " salary"], &[]),
        (
            "SELECT 1 FROM student WHERE age IN (SELECT",
            &[" petid", " weight", " age"],
            &[],
        ),
        (
            "UPDATE student SET age = 1 WHERE",
            &[" petid", " weight"],
            &[],
        ),
        // After FROM: the FROM items' columns only.
        (
            "SELECT 1 FROM student WHERE",
            &[" age", " fname", " stuid", " AGE", " \"age"],
            &[" petid", " weight", " salary", " pettype", " z"],
        ),
        (
            "SELECT 1 FROM student WHERE age > 1 AND",
            &[" major"],
            &[" petid"],
        ),
        ("SELECT 1 FROM student GROUP BY", &[" major"], &[" weight"]),
        (
            "SELECT 1 FROM student GROUP BY major HAVING max(",
            &["age"],
            &["weight", "petid"],
        ),
        (
            "SELECT 1 FROM hr.staff WHERE",
            &[" salary"],
            &[" fname", " stuid"],
        ),
        // Correlated: the enclosing FROM's columns and the subquery's own.
        (
            "SELECT 1 FROM student WHERE EXISTS (SELECT 1 FROM has_pet WHERE",
            &[" petid", " age", " stuid"],
            &[" weight"],
        ),
        // A FROM subquery does not see its siblings; LATERAL does.
        (
            "SELECT 1 FROM student, (SELECT 1 FROM has_pet WHERE",
            &[" petid"],
            &[" major", " fname"],
        ),
        (
            "SELECT 1 FROM student, LATERAL (SELECT 1 FROM has_pet WHERE",
            &[" petid", " age"],
            &[" weight"],
        ),
        // A JOIN's ON: its two sides only.
        (
            "SELECT 1 FROM pets, student JOIN has_pet ON",
            &[" age", " petid"],
            &[" weight"],
        ),
        // USING: the columns of both sides.
        (
            "SELECT 1 FROM student JOIN has_pet USING (",
            &["stuid"],
            &[],
        ),
        (
            "SELECT 1 FROM student JOIN has_pet USING (stuid) WHERE",
            &[" stuid", " petid", " age"],
            &[" weight"],
        ),
        // A derived table's outputs, renamed; a CTE's outputs (a `*` brings the relation's).
        (
            "SELECT 1 FROM (SELECT stuid, age AS a FROM student) AS t WHERE",
            &[" a", " stuid"],
            &[" major", " fname"],
        ),
        (
            "WITH c AS (SELECT * FROM pets) SELECT 1 FROM c AS k WHERE",
            &[" weight", " petid"],
            &[" major"],
        ),
        (
            "WITH c AS (SELECT count(*) AS z FROM pets) SELECT 1 FROM student WHERE",
            &[" age"],
            &[" z", " weight"],
        ),
        // An alias list renames by position.
        (
            "SELECT 1 FROM has_pet AS h(a, b) WHERE",
            &[" a", " b"],
            &[" petid", " stuid"],
        ),
        // ORDER BY: output names as whole items, and the FROM items' columns.
        (
            "SELECT count(*) AS z FROM student ORDER BY",
            &[" z", " age"],
            &[" weight"],
        ),
        (
            "SELECT count(*) AS z FROM student ORDER BY age +",
            &[" age"],
            &[" z", " weight"],
        ),
        // A set operation's ORDER BY: its output names only.
        (
            "SELECT stuid FROM student UNION SELECT stuid FROM has_pet ORDER BY",
            &[" stuid"],
            &[" major", " petid"],
        ),
    ];
    let mut s = Session::new(&lang);
    for (prefix, allowed, refused) in cases {
        let mut cfg = s.start();
        if let Err(e) = s.feed(&mut cfg, prefix.as_bytes()) {
            panic!("{prefix}: {e:?}");
        }
        let m = fx.checked(&mut s, &cfg, prefix);
        for t in *allowed {
            assert!(m.contains(id(&fx.vocab, t)), "{prefix} + {t:?}: refused");
        }
        for t in *refused {
            assert!(!m.contains(id(&fx.vocab, t)), "{prefix} + {t:?}: offered");
        }
    }
}
