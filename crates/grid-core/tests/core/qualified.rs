//! Qualified column references where every FROM clause they may name is written (issue 33):
//! the qualifier names a range variable in scope there, and the column is one of it. In a
//! select list, before its FROM, any qualifier and any column of the lexicon as before.
//! Fast mask ≡ trial-parse oracle ≡ cached mask through them; random walks of the language
//! give the checker no unknown qualifier or column after FROM.

use crate::common;

use common::masker::{vocab_with, MaskFixture};

use grid_core::schema::{Schema, Table};
use grid_core::{Language, Lexicon, Policy, Session};

/// Spider's `pets_1`, and a relation off the search path.
pub(crate) fn pets_schema() -> Schema {
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

pub(crate) fn pets_language() -> Language {
    let dialect = common::dialect();
    let policy = Policy::default();
    let reserved = |w: &str| dialect.is_reserved(w);
    let lx = Lexicon::from_schema(&pets_schema(), &policy, &reserved).expect("lexicon");
    Language::build(dialect, &policy, &lx).expect("language")
}

pub(crate) fn check(lang: &Language, sql: &str) -> Result<(), String> {
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
    "SELECT 1 FROM has_pet AS h(a, b, c) WHERE h.a = h.b",
    "SELECT 1 FROM (student AS a JOIN has_pet AS b USING (stuid)) AS j WHERE j.petid > 1",
    // LATERAL sees its siblings.
    "SELECT 1 FROM student AS s, LATERAL (SELECT h.petid FROM has_pet AS h WHERE h.stuid = s.stuid) AS q WHERE q.petid > 1",
    // A JOIN's ON sees both its sides, joined ones included.
    "SELECT 1 FROM student AS a JOIN has_pet AS b ON a.stuid = b.stuid JOIN pets AS c ON c.petid = b.petid AND a.age > 1",
    "SELECT 1 FROM student AS a JOIN (has_pet AS b JOIN pets AS c ON b.petid = c.petid) ON a.stuid = b.stuid",
    // A relation written qualified is qualified by its bare name.
    "SELECT 1 FROM hr.staff WHERE staff.salary > 1",
    "SELECT 1 FROM hr.staff AS x WHERE x.id = 1",
    // Blanks and comments around the dot.
    "SELECT 1 FROM student AS T1 WHERE T1 . age > 1 AND T1. sex = 'f' AND T1 .major = 1",
    "SELECT 1 FROM student AS T1 WHERE T1./* c */age > 1 AND T1/**/./**/sex = 'f'",
    "SELECT 1 FROM student AS T1 WHERE T1.-- c\nage > 1",
    "SELECT 1 FROM student AS T1 WHERE T1-- c\n.age > 1 AND T1/* c */ . sex = 'm'",
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
    // A column alias list renames by position.
    "SELECT 1 FROM student AS e(k) WHERE e.stuid > 1",
    // A join's alias hides the names inside it.
    "SELECT 1 FROM (student AS a JOIN has_pet AS b USING (stuid)) AS j WHERE a.age > 1",
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
    "*/age", "/**/age", "/* c */ ag", "*/", "/*", " */sex", "\nage", "-- c\nage", ". age", " .ag",
    "\"age\"", ".\"age", " \"S", "T1.ag", "1.age >", "- c\n.age", "*/.age", "/* */ . ag",
];

/// At every byte offset of the shapes, accepted and (up to where they fail) refused.
#[test]
fn fast_equals_oracle_equals_cache_through_qualifiers() {
    let lang = pets_language();
    let mut fx = MaskFixture::new(vocab_with(FRAGMENTS));
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
    let mut fx = MaskFixture::new(vocab_with(FRAGMENTS));
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

// ---------------------------------------------------------------------------------------
// Random walks of the language, checked by the checker

/// Words the walking vocabulary spells whole (each bare and after a space).
const WALK_WORDS: &[&str] = &[
    "SELECT", "FROM", "WHERE", "JOIN", "ON", "AND", "OR", "NOT", "GROUP BY", "ORDER BY", "LIMIT",
    "AS", "IN", "EXISTS", "LIKE", "IS NULL", "BETWEEN", "HAVING", "DISTINCT", "UNION", "LATERAL",
    "count(*)", "max(", "min(", "sum(", "avg(", "T1", "T2", "T3", "t", "s", "=", ">", "<", "1",
    "'x'", "(", ")", ",", "(SELECT", "WITH", "USING",
];

/// Printable ASCII bytes, the words above and every table and column of `schema` after a
/// space, and the columns after a dot: words the walker may string together without
/// making one long identifier of them.
fn walk_vocab(schema: &Schema) -> grid_vocab::Vocabulary {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    // No `/` or `-`: comments would take the walks' budgets.
    toks.extend(
        (b' '..=b'~')
            .filter(|b| !b"/-".contains(b))
            .map(|b| vec![b]),
    );
    let mut words: Vec<String> = WALK_WORDS.iter().map(|w| w.to_string()).collect();
    for t in &schema.tables {
        words.push(t.name.clone());
        words.extend(t.columns.iter().map(|c| c.name.clone()));
    }
    let mut seen = std::collections::HashSet::new();
    for w in &words {
        for t in [format!(" {w}"), format!(".{w}")] {
            if seen.insert(t.clone()) {
                toks.push(t.into_bytes());
            }
        }
    }
    grid_vocab::Vocabulary::from_served(toks, &[0], Some(0)).expect("vocabulary")
}

/// The walking model: its generation's opening first (while the mask allows it); then EOS
/// with probability 1/8 when allowed; else a token only the statement's names allow (three
/// times in four, when there is one), else a word (seven times in eight, when one is
/// allowed), else any allowed token.
struct Walker {
    rng: common::Rng,
    /// Per generation, the token ids of its opening.
    openings: Vec<Vec<u32>>,
}

impl grid_core::decode::StepModel for Walker {
    fn choose(
        &mut self,
        s: &grid_core::decode::ModelStep<'_>,
    ) -> Result<grid_core::decode::Choice, grid_core::decode::ModelError> {
        use grid_core::decode::Choice;
        let opening = &self.openings[s.generation as usize];
        if let Some(&t) = opening.get(s.generated.len()) {
            if s.generated.iter().zip(opening).all(|(a, b)| a == b) && s.mask.contains(t) {
                return Ok(Choice::Token(t));
            }
        }
        if s.mask.eos && self.rng.below(8) == 0 {
            return Ok(Choice::Eos);
        }
        let named: Vec<u32> = s
            .mask
            .cd_classes
            .iter()
            .filter(|c| *c.key == grid_core::cd_class::CdKey::Dynamic)
            .flat_map(|c| c.ids.iter().copied())
            .collect();
        if !named.is_empty() && self.rng.below(4) != 0 {
            return Ok(Choice::Token(named[self.rng.below(named.len())]));
        }
        let all: Vec<u32> = s.mask.ids().filter(|&i| i != 0).collect();
        // Ids past the bytes are the words.
        let words: Vec<u32> = all.iter().copied().filter(|&i| i > 93).collect();
        let pool = if !words.is_empty() && self.rng.below(8) != 0 {
            words
        } else {
            all
        };
        if pool.is_empty() {
            return Ok(Choice::Eos);
        }
        Ok(Choice::Token(pool[self.rng.below(pool.len())]))
    }
}

/// An opening that writes a FROM clause of `schema`'s tables (aliased or not, joined,
/// derived, a CTE, nested) up to where a qualified reference may stand after it; or none.
fn opening(schema: &Schema, rng: &mut common::Rng) -> String {
    let t = &schema.tables;
    let mut pick = || t[rng.below(t.len())].name.clone();
    let (a, b) = (pick(), pick());
    let forms = [
        String::new(),
        format!("SELECT * FROM {a} WHERE "),
        format!("SELECT count(*) FROM {a} AS T1 WHERE "),
        format!("SELECT * FROM {a} AS T1 JOIN {b} AS T2 ON "),
        format!("SELECT * FROM {a} AS T1 JOIN {b} ON "),
        format!("SELECT * FROM {a}, {b} AS T2 WHERE "),
        format!("SELECT * FROM {a} AS T1 WHERE EXISTS (SELECT * FROM {b} AS T2 WHERE "),
        format!("SELECT * FROM {a} AS T1 WHERE 1 IN (SELECT 1 FROM {b} WHERE "),
        format!("SELECT * FROM (SELECT * FROM {a}) AS s WHERE "),
        format!("SELECT * FROM {a} AS T1, LATERAL (SELECT * FROM {b} AS T2 WHERE "),
        format!("WITH c AS (SELECT * FROM {a}) SELECT * FROM c WHERE "),
        format!("SELECT count(*) FROM {a} AS T1 GROUP BY "),
        format!("SELECT * FROM {a} AS T1 ORDER BY "),
    ];
    forms[rng.below(forms.len())].clone()
}

/// `n` walks of the language of `schema` (at most `max_tokens` tokens, the reserve
/// completing each), each from its [`opening`]: the statements.
fn walks(lang: &Language, schema: &Schema, n: usize, seed: u64, max_tokens: u32) -> Vec<String> {
    use grid_core::audit::{AuditLog, SealMeta, StopReason};
    use grid_core::decode::{DecodeOptions, Decoder, GenerationSpec};
    use grid_core::reserve::{ReserveTable, Speller};
    use std::sync::Arc;
    let vocab = walk_vocab(schema);
    let trie = Arc::new(grid_core::trie::TokenTrie::build(&vocab).expect("trie"));
    let speller = Speller::of(&vocab);
    let reserve = ReserveTable::build(lang, &speller);
    let specs: Vec<GenerationSpec<'_>> = (0..n)
        .map(|i| GenerationSpec {
            id: i as u64,
            language: lang,
            reserve: &reserve,
            prompt: vec![],
            max_tokens,
            seed: seed + i as u64,
            meta: SealMeta::default(),
            unconstrained: false,
            rewind: None,
        })
        .collect();
    let mut dec = Decoder::new(
        &vocab,
        grid_core::mask::Masker::with_cache(trie, Arc::new(grid_core::cache::MaskCache::new(4))),
        &speller,
        DecodeOptions {
            cache: true,
            ..DecodeOptions::default()
        },
    );
    let mut log = AuditLog::in_memory();
    let mut rng = common::Rng(seed | 1);
    let openings = (0..n)
        .map(|_| vocab.encode(&opening(schema, &mut rng)))
        .collect();
    let mut walker = Walker { rng, openings };
    let out = dec
        .run(&specs, &mut walker, &mut log, &mut |_, _| false)
        .expect("an in-memory audit log");
    if std::env::var_os("GRID_SHOW_WALKS").is_some() {
        for o in &out {
            eprintln!("stop {:?} after {} tokens", o.stop, o.tokens.len());
        }
    }
    out.into_iter()
        .filter(|o| matches!(o.stop, StopReason::Eos | StopReason::BudgetCompleted))
        .map(|o| String::from_utf8_lossy(&o.text).into_owned())
        .collect()
}

/// The qualified references of `sql` (a sentence of `lang`), as stored names, each with
/// whether the language read it as `QUALIFIER DOT QUAL_COL` (after every FROM clause it
/// may name) rather than `IDENT DOT ...` (in a select list, before its FROM).
fn qualified_references(lang: &Language, sql: &str) -> Vec<(String, String, bool)> {
    let names = &lang.terms().names;
    let qualifier = names
        .iter()
        .position(|n| n == "QUALIFIER")
        .expect("QUALIFIER") as u16;
    let mut s = Session::new(lang);
    let lexemes = s
        .lexemes(sql.as_bytes())
        .unwrap_or_else(|e| panic!("{sql:?} is no sentence: {e:?}"));
    let stored = |l: &grid_core::recognizer::Lexeme| {
        grid_core::scope::stored_of(&sql.as_bytes()[l.start..l.end]).to_string()
    };
    let mut out = Vec::new();
    for w in lexemes.windows(3) {
        if &sql[w[1].start..w[1].end] != "." {
            continue;
        }
        // The stacks the qualifier's lexeme is handed to: a blank ends the one before.
        let mut cfg = s.start();
        let before = format!("{} ", &sql[..w[0].start]);
        s.feed(&mut cfg, before.as_bytes())
            .expect("a prefix of a sentence");
        let checked = s.allowed(&cfg).contains(qualifier);
        out.push((stored(&w[0]), stored(&w[2]), checked));
    }
    out
}

/// The bare column references of `sql` (a sentence of `lang`: every name lexeme with no
/// dot before or after it and no parenthesis after it), as stored names, each with whether
/// a stack there may take `SCOPED_COL` (every FROM clause the reference may name is
/// written) and whether the language read it so (a stack there takes it for the name).
fn bare_references(lang: &Language, sql: &str) -> Vec<(String, bool, bool)> {
    let scoped = lang.sem.scoped_col().expect("SCOPED_COL");
    let mut s = Session::new(lang);
    let lexemes = s
        .lexemes(sql.as_bytes())
        .unwrap_or_else(|e| panic!("{sql:?} is no sentence: {e:?}"));
    let text = |l: &grid_core::recognizer::Lexeme| &sql[l.start..l.end];
    let mut out = Vec::new();
    for (k, l) in lexemes.iter().enumerate() {
        let t = text(l);
        let word =
            t.starts_with('"') || t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let next = lexemes.get(k + 1).map(text);
        let prev = k.checked_sub(1).map(|j| text(&lexemes[j]));
        if !word || prev == Some(".") || matches!(next, Some("." | "(")) {
            continue;
        }
        let name = grid_core::scope::stored_of(t.as_bytes());
        let mut cfg = s.start();
        let before = format!("{} ", &sql[..l.start]);
        s.feed(&mut cfg, before.as_bytes())
            .expect("a prefix of a sentence");
        let (mut at_scoped, mut read) = (false, false);
        for &st in &cfg.stacks {
            if s.stacks.allowed(&lang.table, st).contains(scoped) {
                at_scoped = true;
                read |= s.stacks.visible(&lang.sem, st, scoped).contains(&name);
            }
        }
        out.push((name.to_string(), at_scoped, read));
    }
    out
}

/// What the walks of one language came to.
#[derive(Default, Debug)]
pub(crate) struct WalkCounts {
    pub statements: usize,
    pub checked_references: usize,
    /// Checker refusals of a checked reference: an unknown relation or alias it names, or
    /// an unknown column after it.
    pub refusals: Vec<String>,
    /// Bare names the language read as columns in scope (`SCOPED_COL`).
    pub scoped_bare: usize,
    /// Checker refusals of a bare name for an unknown column, where every bare occurrence
    /// of the name is after every FROM clause it may name.
    pub bare_refusals: Vec<String>,
    /// Checker refusals of a bare name two range variables have (the checker's business,
    /// not the mask's: counted, not asserted).
    pub ambiguous: usize,
}

/// Walks `lang` and has the checker read each statement as a role granted all of `schema`.
pub(crate) fn walk_and_check(
    lang: &Language,
    schema: &Schema,
    n: usize,
    seed: u64,
    counts: &mut WalkCounts,
) {
    use grid_core::catalog::CatalogSnapshot;
    use grid_core::checker::ViolationKind;
    let snapshot = CatalogSnapshot::granting_all(schema, "walker");
    for sql in walks(lang, schema, n, seed, 160) {
        if std::env::var_os("GRID_SHOW_WALKS").is_some() {
            eprintln!("walk: {sql}");
        }
        counts.statements += 1;
        let refs = qualified_references(lang, &sql);
        counts.checked_references += refs.iter().filter(|r| r.2).count();
        let bare = bare_references(lang, &sql);
        counts.scoped_bare += bare.iter().filter(|r| r.2).count();
        for v in grid_core::checker::check(&sql, &snapshot) {
            match &v.kind {
                ViolationKind::AmbiguousColumn { .. } => {
                    counts.ambiguous += 1;
                    continue;
                }
                ViolationKind::UnknownColumn {
                    qualifier: None,
                    column,
                } => {
                    // Every bare occurrence of the name is after FROM.
                    let mut at = bare.iter().filter(|r| &r.0 == column).peekable();
                    if at.peek().is_some() && at.all(|r| r.1) {
                        counts.bare_refusals.push(format!("{sql}\n    {v}"));
                    }
                    continue;
                }
                ViolationKind::UnknownRelation { .. }
                | ViolationKind::UnknownColumn {
                    qualifier: Some(_), ..
                } => {}
                _ => continue,
            }
            // The reference the violation quotes (`q.c`, as sqlparser prints it) is one
            // after FROM when every occurrence of it is (the checker quotes each once).
            let quoted: Vec<String> = v
                .fragment
                .split('.')
                .map(|p| grid_core::scope::stored_of(p.as_bytes()).to_string())
                .collect();
            let [q, c] = quoted.as_slice() else {
                continue;
            };
            let mut at = refs.iter().filter(|r| &r.0 == q && &r.1 == c).peekable();
            if at.peek().is_some() && at.all(|r| r.2) {
                counts.refusals.push(format!("{sql}\n    {v}"));
            }
        }
    }
}

/// Random walks of the language over the built-in schemas: the checker refuses none of
/// their qualified references after FROM for an unknown relation, alias or column, and
/// none of their bare names after FROM for an unknown column.
#[test]
fn walks_name_after_from_only_what_the_checker_binds() {
    let mut counts = WalkCounts::default();
    let dialect = common::dialect();
    let policy = Policy::default();
    for (k, schema) in [pets_schema(), common::fixtures::hr_schema()]
        .into_iter()
        .enumerate()
    {
        let lang = common::fixtures::language(&dialect, &schema, &policy);
        walk_and_check(
            &lang,
            &schema,
            60,
            0x9a1c_0000 + k as u64 * 1000,
            &mut counts,
        );
    }
    report("built-in schemas", &counts);
}

/// Prints what the walks came to and asserts that the checker refused none of their
/// references after FROM for naming what is not in scope.
fn report(what: &str, counts: &WalkCounts) {
    eprintln!(
        "{what}: {} statements walked; {} qualified references after FROM, {} refused; \
         {} bare names read as columns in scope, {} refused as unknown, {} ambiguous",
        counts.statements,
        counts.checked_references,
        counts.refusals.len(),
        counts.scoped_bare,
        counts.bare_refusals.len(),
        counts.ambiguous,
    );
    assert!(counts.checked_references > 30, "{counts:?}");
    assert!(counts.scoped_bare > 30, "{counts:?}");
    assert!(counts.refusals.is_empty(), "{}", counts.refusals.join("\n"));
    assert!(
        counts.bare_refusals.is_empty(),
        "{}",
        counts.bare_refusals.join("\n")
    );
}

/// The same over Spider's dev databases (skipped without `../shared/data`).
#[test]
fn spider_walks_name_after_from_only_what_the_checker_binds() {
    let Some(dir) =
        common::spider_or_skip("spider_walks_name_after_from_only_what_the_checker_binds")
    else {
        return;
    };
    let dbs: std::collections::BTreeSet<String> =
        common::gold(&dir).into_iter().map(|g| g.db).collect();
    let mut langs = common::Langs::new(&dir, Policy::default());
    let mut counts = WalkCounts::default();
    for (k, db) in dbs.iter().enumerate() {
        let lang = langs.get(db);
        let schema = langs.schema(db).clone();
        walk_and_check(&lang, &schema, 8, 0x5b1d_0000 + k as u64 * 100, &mut counts);
    }
    report(&format!("Spider dev databases ({})", dbs.len()), &counts);
}

/// For each prefix (a viable prefix of a sentence of [`pets_language`]), the reserve's
/// completion over `vocab` makes a statement the checker passes, in no more tokens than
/// the reserve counted. Shared by the qualified and the bare column tests.
pub(crate) fn assert_the_reserve_finishes(vocab: &grid_vocab::Vocabulary, prefixes: &[&str]) {
    use grid_core::reserve::{ReserveMemo, ReserveTable, Speller};
    let lang = pets_language();
    let speller = Speller::of(vocab);
    let table = ReserveTable::build(&lang, &speller);
    for &prefix in prefixes {
        let mut s = Session::new(&lang);
        let mut cfg = s.start();
        if let Err(e) = s.feed(&mut cfg, prefix.as_bytes()) {
            panic!("{prefix}: {e:?}");
        }
        assert!(s.is_viable(&cfg), "{prefix}");
        let mut memo = ReserveMemo::default();
        let cost = table.reserve(&mut s, &mut memo, &cfg, &speller);
        let tail = table
            .completion(&mut s, &mut memo, &cfg, &speller)
            .unwrap_or_else(|| panic!("{prefix}: no completion (reserve {cost})"));
        let full = format!("{prefix}{}", String::from_utf8_lossy(&tail));
        assert!(check(&lang, &full).is_ok(), "{full}");
        let tokens = speller.segment(&tail).expect("spelled").len() as u32;
        assert!(
            tokens <= cost,
            "{full}: {tokens} tokens over a reserve of {cost}"
        );
    }
}

/// The reserve finishes a qualified column wherever it stands unfinished (a qualifier in
/// progress, whole, with its dot, a column in progress), then completes the statement
/// within its count.
#[test]
fn the_reserve_finishes_a_qualified_column() {
    assert_the_reserve_finishes(
        &vocab_with(FRAGMENTS),
        &[
            "SELECT 1 FROM student AS T1 WHERE T",
            "SELECT 1 FROM student AS T1 WHERE T1",
            "SELECT 1 FROM student AS T1 WHERE T1 ",
            "SELECT 1 FROM student AS T1 WHERE T1.",
            "SELECT 1 FROM student AS T1 WHERE T1 . ",
            "SELECT 1 FROM student AS T1 WHERE T1.ag",
            "SELECT 1 FROM student AS T1 WHERE \"t1\".\"ag",
            "SELECT 1 FROM (SELECT 1 AS zz) AS s WHERE s",
            "SELECT 1 FROM (SELECT 1 AS zz) AS s WHERE s.",
            "SELECT 1 FROM hr.staff WHERE staff.",
            "SELECT 1 FROM student JOIN has_pet ON has_pet.stuid = stud",
        ],
    );
}
