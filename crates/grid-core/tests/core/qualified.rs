//! Qualified column references where every FROM clause they may name is written (issue 33):
//! the qualifier names a range variable in scope there, and the column is one of it. In a
//! select list, before its FROM, any qualifier and any column of the lexicon as before.
//! Fast mask ≡ trial-parse oracle ≡ cached mask through them; random walks of the language
//! give the checker no unknown qualifier or column after FROM.

use crate::common;

use grid_core::schema::{Schema, Table};
use grid_core::{Language, Lexicon, Policy, Session};

/// Spider's `pets_1`, and a relation off the search path.
fn pets_schema() -> Schema {
    Schema {
        db_id: "pets".into(),
        tables: vec![
            Table::with_columns(
                "student",
                &[
                    "stuid",
                    "lname",
                    "fname",
                    "age",
                    "sex",
                    "major",
                    "advisor",
                    "city_code",
                ],
            ),
            Table::with_columns("has_pet", &["stuid", "petid"]),
            Table::with_columns("pets", &["petid", "pettype", "pet_age", "weight"]),
            Table::qualified_with_columns("hr", "staff", &["id", "salary"]),
        ],
    }
}

fn pets_language() -> Language {
    let dialect = common::dialect();
    let policy = Policy::default();
    let reserved = |w: &str| dialect.is_reserved(w);
    let lx = Lexicon::from_schema(&pets_schema(), &policy, &reserved).expect("lexicon");
    Language::build(dialect, &policy, &lx).expect("language")
}

fn check(lang: &Language, sql: &str) -> Result<(), String> {
    Session::new(lang)
        .check(sql.as_bytes())
        .map_err(|e| format!("{e:?}"))
}

/// Qualified references PostgreSQL binds.
pub const ACCEPTED: &[&str] = &[
    "SELECT stuid FROM student WHERE stuid NOT IN (SELECT stuid FROM has_pet WHERE has_pet.petid = 1)",
    "SELECT T1.fname FROM student AS T1 JOIN has_pet AS T2 ON T1.stuid = T2.stuid WHERE T2.petid > 1 ORDER BY T1.age",
    "SELECT count(*) FROM student AS s GROUP BY s.major HAVING max(s.age) > 20",
    "SELECT fname FROM student WHERE student.age > 20",
    // Correlated: an enclosing query's range variable.
    "SELECT fname FROM student AS s WHERE EXISTS (SELECT 1 FROM has_pet AS h WHERE h.stuid = s.stuid)",
    "SELECT fname FROM student AS s WHERE 1 < (SELECT count(*) FROM has_pet WHERE has_pet.stuid = s.stuid)",
    // Derived tables and CTEs: their named outputs, a `*` over a relation its columns.
    "SELECT 1 FROM (SELECT stuid, age AS a FROM student) AS t WHERE t.a > 1 AND t.stuid > 0",
    "SELECT 1 FROM (SELECT * FROM student) AS t WHERE t.lname = 'x'",
    "SELECT 1 FROM (SELECT s.* FROM student AS s) AS t WHERE t.major = 1",
    "WITH c AS (SELECT stuid, count(*) AS n FROM has_pet GROUP BY stuid) SELECT 1 FROM c WHERE c.n > 1",
    "WITH c AS (SELECT * FROM pets) SELECT 1 FROM c AS k WHERE k.weight > 1",
    "SELECT 1 FROM student AS e(k) WHERE e.k > 1 AND e.age > 1",
    // LATERAL sees its siblings.
    "SELECT 1 FROM student AS s, LATERAL (SELECT h.petid FROM has_pet AS h WHERE h.stuid = s.stuid) AS q WHERE q.petid > 1",
    // A JOIN's ON sees both its sides, joined ones included.
    "SELECT 1 FROM student AS a JOIN has_pet AS b ON a.stuid = b.stuid JOIN pets AS c ON c.petid = b.petid AND a.age > 1",
    "SELECT 1 FROM student AS a JOIN (has_pet AS b JOIN pets AS c ON b.petid = c.petid) ON a.stuid = b.stuid",
    // A relation written qualified is qualified by its bare name.
    "SELECT 1 FROM hr.staff WHERE staff.salary > 1",
    "SELECT 1 FROM hr.staff AS x WHERE x.id = 1",
    // Quoted, and in other cases.
    "SELECT 1 FROM student AS \"S\" WHERE \"S\".age > 1 AND \"S\".\"age\" > 1",
    "SELECT 1 FROM Student WHERE STUDENT.Age > 1",
    // The ORDER BY of a query sees its FROM items.
    "SELECT fname FROM student ORDER BY student.age",
    "SELECT major FROM student AS s GROUP BY s.major ORDER BY sum(s.age) DESC LIMIT 1",
    "SELECT fname FROM student AS s ORDER BY (SELECT max(h.petid) FROM has_pet AS h WHERE h.stuid = s.stuid)",
    "(SELECT fname FROM student) ORDER BY fname",
    // Before FROM, as before: any qualifier, any column of the lexicon.
    "SELECT T1.lname FROM has_pet AS T1",
    "SELECT x.pettype FROM student",
    "SELECT (SELECT count(*) FROM has_pet AS h WHERE h.stuid = s.stuid) FROM student AS s",
    "SELECT (SELECT max(h.petid) FROM has_pet AS h WHERE h.stuid = zz.age) FROM student",
    "SELECT DISTINCT ON (s.age) s.fname FROM student AS s",
    // Window definitions and a window's ORDER BY.
    "SELECT rank() OVER (PARTITION BY s.major ORDER BY s.age) FROM student AS s WHERE s.age > 1",
    // INSERT, UPDATE and DELETE as before.
    "DELETE FROM student WHERE student.age > 1",
    "UPDATE student SET age = 1 WHERE x.age = 2",
];

/// Qualified references PostgreSQL does not bind, after FROM.
pub const REFUSED: &[&str] = &[
    // No FROM item named so in scope.
    "SELECT stuid FROM student WHERE stuid NOT IN (SELECT stuid FROM has_pet WHERE pets.pettype = 'cat')",
    "SELECT 1 FROM student WHERE x.age > 1",
    "SELECT 1 WHERE student.age > 1",
    // An alias hides the relation's name.
    "SELECT 1 FROM student AS s WHERE student.age > 1",
    // Not a column of that range variable.
    "SELECT 1 FROM has_pet AS T1 WHERE T1.lname = 'x'",
    "SELECT 1 FROM student AS a JOIN has_pet AS b ON a.stuid = b.stuid WHERE b.age > 1",
    "SELECT 1 FROM (SELECT stuid FROM student) AS t WHERE t.age > 1",
    "SELECT 1 FROM (SELECT age AS a FROM student) AS t WHERE t.age > 1",
    "WITH c AS (SELECT stuid FROM student) SELECT 1 FROM c WHERE c.age > 1",
    "SELECT 1 FROM hr.staff WHERE staff.age > 1",
    // A CTE that no FROM item names is no qualifier.
    "WITH c AS (SELECT stuid FROM student) SELECT 1 FROM student WHERE c.stuid > 1",
    // A FROM subquery does not see its siblings (LATERAL does).
    "SELECT 1 FROM student AS s, (SELECT 1 AS z FROM has_pet AS h WHERE h.stuid = s.stuid) AS q",
    // A JOIN's ON does not see the other FROM items of its SELECT.
    "SELECT 1 FROM pets AS p, student AS a JOIN has_pet AS b ON a.stuid = p.petid",
    "SELECT 1 FROM student AS a JOIN (has_pet AS b JOIN pets AS c ON a.stuid = b.stuid) ON true",
    // A query's FROM items end with it: the ORDER BY of a set operation, another query.
    "SELECT stuid FROM student UNION SELECT stuid FROM has_pet ORDER BY student.stuid",
    "SELECT stuid FROM student AS s UNION SELECT stuid FROM has_pet WHERE s.age > 1",
    "SELECT stuid FROM student AS s UNION VALUES (s.age)",
    "SELECT stuid FROM student WHERE EXISTS (SELECT 1 FROM pets AS p) AND p.petid > 1",
    // In a subquery after FROM, its own FROM and the enclosing ones only.
    "SELECT fname FROM student AS s WHERE EXISTS (SELECT 1 FROM has_pet AS h WHERE q.stuid = 1)",
];

#[test]
fn qualified_references_after_from_bind() {
    let lang = pets_language();
    for sql in ACCEPTED {
        if let Err(e) = check(&lang, sql) {
            panic!("{sql}\n  refused: {e}");
        }
    }
}

#[test]
fn qualified_references_after_from_that_do_not_bind_are_refused() {
    let lang = pets_language();
    for sql in REFUSED {
        assert!(check(&lang, sql).is_err(), "{sql}\n  accepted");
    }
}

// ---------------------------------------------------------------------------------------
// Fast mask ≡ trial-parse oracle ≡ cached mask

/// Fragments that start, end or cross qualifiers, dots and columns.
#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    " T1", "T1", "T1.", "T", "1", "1.", ".", " .", ". ", ".stuid", ".age", ".lname", "age", " age",
    "stu", "id", "stuid", " stuid", "T2.stuid", " T2", "T2", "2.", " s", "s", "s.", " s.age", "h.",
    " h", ".petid", "pet", "petid", " has_pet", "has", "_pet", "has_pet.", " student", "student",
    "student.", "dent", " pets", "pets.", ".pettype", " WHERE", " ON", " AND", " =", " >", " 1",
    ")", "(", " (", ",", " FROM", " JOIN", " AS", " ORDER BY", " GROUP BY", " sum(", " staff",
    "staff.", ".salary", " hr.staff", " \"S\"", "\"S\".", "\".age", "S", "\"", " x", "x.", " q",
    " c", "c.", ".n", " n", " k", "k.", " t", "t.", ".a", " e", "e.", ".k", "AS T1 WHERE T1.",
    " s WHERE s.", ") AS t WHERE t.", " STUDENT", "STUDENT.", ".Age", " zz", "zz.", ".fname",
];

fn synthetic_vocab() -> grid_vocab::Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec(), b"<pad>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    grid_vocab::Vocabulary::from_served(toks, &[1], Some(0)).expect("vocabulary")
}

struct Fixture {
    vocab: grid_vocab::Vocabulary,
    plain: grid_core::mask::Masker,
    cached: grid_core::mask::Masker,
    dynamic_ids: usize,
}

impl Fixture {
    fn new() -> Fixture {
        use std::sync::Arc;
        let vocab = synthetic_vocab();
        let trie = Arc::new(grid_core::trie::TokenTrie::build(&vocab).expect("trie"));
        let cache = Arc::new(grid_core::cache::MaskCache::new(4));
        Fixture {
            plain: grid_core::mask::Masker::new(trie.clone()),
            cached: grid_core::mask::Masker::with_cache(trie, cache),
            vocab,
            dynamic_ids: 0,
        }
    }

    /// The plain mask at `cfg`, asserted equal to the oracle's and to the cached one.
    fn checked(
        &mut self,
        s: &mut Session<'_>,
        cfg: &grid_core::Config,
        what: &str,
    ) -> grid_core::mask::Mask {
        let fast = self.plain.mask(s, cfg);
        let slow = grid_core::oracle::oracle_mask(s, cfg, &self.vocab);
        let vs = format!("{what}: fast vs oracle");
        common::fixtures::assert_same_mask(&fast, &slow, &self.vocab, &vs, false);
        let mut on = self.cached.mask(s, cfg);
        on.visited = fast.visited;
        let vs = format!("{what}: cache on vs off");
        common::fixtures::assert_same_mask(&on, &fast, &self.vocab, &vs, true);
        self.dynamic_ids += fast
            .cd_classes
            .iter()
            .filter(|c| *c.key == grid_core::cd_class::CdKey::Dynamic)
            .map(|c| c.ids.len())
            .sum::<usize>();
        fast
    }
}

/// At every byte offset of the shapes, accepted and (up to where they fail) refused.
#[test]
fn fast_equals_oracle_equals_cache_through_qualifiers() {
    let lang = pets_language();
    let mut fx = Fixture::new();
    let ids = common::byte_ids(&fx.vocab);
    let n = common::over_offsets_by(&lang, &ids, ACCEPTED, &mut |s, cfg, what| {
        fx.checked(s, cfg, what)
    });
    let mut s = Session::new(&lang);
    let mut refused = 0;
    for sql in REFUSED {
        let mut cfg = s.start();
        for (i, &b) in sql.as_bytes().iter().enumerate() {
            fx.checked(&mut s, &cfg, &format!("{:?} at byte {i}", &sql[..i]));
            refused += 1;
            if s.feed(&mut cfg, &[b]).is_err() {
                break;
            }
        }
    }
    assert!(n + refused > 3000, "{n} + {refused}");
    assert!(
        fx.dynamic_ids > 1000,
        "only {} ids only the statement's names allow",
        fx.dynamic_ids
    );
}

/// Random walks through allowed tokens from the shapes' prefixes, preferring the tokens
/// only names allow; every mask on the way checked three ways.
#[test]
fn random_walks_through_qualifiers_agree() {
    let lang = pets_language();
    let mut fx = Fixture::new();
    let mut s = Session::new(&lang);
    let mut rng = common::Rng(0x0a11_a5e5);
    let mut steps = 0;
    for text in ACCEPTED {
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
                    .filter(|c| *c.key == grid_core::cd_class::CdKey::Dynamic)
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
    assert!(steps > 500, "{steps}");
}
