//! The dynamic lexicon: names the statement introduces are words of its language where
//! PostgreSQL resolves them, and nowhere else; they never reach a relation, column or
//! function outside the lexicon. Fast mask ≡ trial-parse oracle and cache on ≡ off through
//! them. Data-free.

use crate::common;

use std::sync::Arc;

use common::masker::MaskFixture;
use common::Rng;
use grid_core::cache::MaskCache;
use grid_core::grammar::spec::LexiconKind;
use grid_core::mask::Masker;
use grid_core::schema::{Schema, Table};
use grid_core::trie::TokenTrie;
use grid_core::{Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;

/// `salaries` exists but the role may not see it; `pg_sleep` is no function of the
/// allow-list; `secret` is no column the role may see.
fn shop_schema() -> Schema {
    Schema {
        db_id: "shop".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "dept_id", "hired"]),
            Table::with_columns("orders", &["id", "employee_id", "amount", "placed"]),
            Table::with_columns("depts", &["id", "title"]),
            Table::with_columns("salaries", &["id", "secret"]),
        ],
    }
}

fn shop_language() -> Language {
    let dialect = common::dialect();
    let policy = Policy::default();
    let reserved = |w: &str| dialect.is_reserved(w);
    let mut lx = Lexicon::from_schema(&shop_schema(), &policy, &reserved).expect("lexicon");
    lx.retain_relations(LexiconKind::Table, |t| t != "salaries");
    lx.retain_words(LexiconKind::Column, |c| c != "secret");
    Language::build(dialect, &policy, &lx).expect("language")
}

/// Statements the language must accept: every shape of issue 20's first item.
const ACCEPTED: &[&str] = &[
    // Select-list aliases in ORDER BY and GROUP BY.
    "SELECT name, COUNT(*) AS n FROM employees GROUP BY name ORDER BY n DESC",
    "SELECT dept_id, COUNT(*) n FROM employees GROUP BY dept_id ORDER BY n, dept_id LIMIT 3",
    "SELECT upper(name) AS who FROM employees GROUP BY who ORDER BY who NULLS LAST",
    "SELECT COUNT(*) FROM employees ORDER BY count",
    "SELECT 1 FROM (SELECT SUM(amount) AS \"Total\" FROM orders) AS t WHERE \"Total\" > 0",
    "SELECT amount AS total FROM orders UNION SELECT id FROM depts ORDER BY total",
    // Derived-table outputs, qualified and bare, in the clauses after FROM.
    "SELECT e.name FROM employees AS e JOIN (SELECT employee_id, SUM(amount) AS total FROM orders GROUP BY employee_id) AS t2 ON e.id = t2.employee_id WHERE t2.total = 3539",
    "SELECT employee_id FROM (SELECT employee_id, RANK() OVER (ORDER BY amount DESC) AS rnk FROM orders) AS r WHERE rnk <= 5",
    "SELECT COUNT(*) FROM (SELECT COUNT(id) AS n FROM orders GROUP BY employee_id) AS s WHERE s.n > 2",
    "SELECT * FROM (SELECT MAX(amount) AS m FROM orders) s ORDER BY s.m",
    "SELECT 1 FROM (SELECT * FROM (SELECT amount AS x FROM orders) a) b WHERE b.x > 1",
    "SELECT id FROM employees WHERE dept_id IN (SELECT 1 FROM (SELECT dept_id AS d FROM employees) q WHERE q.d > 0)",
    // CTE outputs, also in the main select list, and column lists.
    "WITH c AS (SELECT employee_id, COUNT(*) AS cnt FROM orders GROUP BY employee_id) SELECT MAX(cnt) FROM c",
    "WITH c AS (SELECT COUNT(*) AS cnt FROM orders) SELECT c.cnt FROM c",
    "WITH c(who, k) AS (SELECT name, id FROM employees) SELECT who FROM c WHERE k > 1 ORDER BY who",
    "WITH a AS (SELECT amount AS v FROM orders), b AS (SELECT v * 2 AS w FROM a) SELECT w FROM b",
    "WITH RECURSIVE t(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM t WHERE k < 10) SELECT k FROM t",
    // Column alias lists.
    "SELECT 1 FROM (SELECT id, amount FROM orders) AS p(a, b) WHERE b > 0 AND p.a > 0",
    "SELECT 1 FROM (VALUES (1, 'a'), (2, 'b')) AS v(x, y) WHERE v.y = 'a' ORDER BY x",
    "SELECT 1 FROM employees AS e(k) WHERE e.k > 1",
    "SELECT 1 FROM orders AS o(oid, eid) JOIN employees ON eid = employees.id",
    // LATERAL sees its siblings.
    "SELECT e.name FROM employees e, LATERAL (SELECT MAX(amount) AS m FROM orders WHERE orders.employee_id = e.id) q WHERE q.m > 0",
    "SELECT 1 FROM (SELECT 1 AS z) a, LATERAL (SELECT a.z AS y) b WHERE b.y = 1",
    // Names from function calls and casts.
    "SELECT 1 FROM (SELECT SUM(amount) FROM orders) s WHERE s.sum > 0",
    "SELECT 1 FROM (SELECT CAST(placed AS date) AS d FROM orders) t GROUP BY d",
    // Function-style casts and date/time functions.
    "SELECT name FROM employees WHERE DATE(hired) > '2014-09-01'",
    "SELECT DATE(SUBSTR(placed, 1, 10)) FROM orders",
    "SELECT date_part('year', hired), date_trunc('month', hired), to_char(hired, 'YYYY'), age(now(), hired) FROM employees",
    "SELECT EXTRACT(YEAR FROM hired), make_date(2020, 1, 1) FROM employees",
];

/// Statements it must refuse: names where PostgreSQL does not resolve them, or that would
/// reach what the role may not use.
const REFUSED: &[&str] = &[
    // An alias is no column in WHERE, HAVING or an expression of ORDER BY.
    "SELECT COUNT(*) AS n FROM employees WHERE n > 1",
    "SELECT COUNT(*) AS n FROM employees GROUP BY dept_id HAVING n > 1",
    "SELECT COUNT(*) AS n FROM employees ORDER BY n + 1",
    // ... nor in another SELECT's clauses.
    "SELECT id FROM employees WHERE id IN (SELECT id AS k FROM orders) ORDER BY k",
    // A derived table's columns are not words before its FROM item (select list), nor
    // after its scope ends.
    "SELECT s.n FROM (SELECT COUNT(*) AS n FROM orders) s",
    "SELECT id FROM employees WHERE EXISTS (SELECT 1 FROM (SELECT 1 AS z) q) AND z = 1",
    // A FROM subquery does not see its siblings (LATERAL does).
    "SELECT 1 FROM (SELECT 1 AS z) a, (SELECT z FROM orders) b",
    // After a qualifier, only that range variable's columns.
    "SELECT 1 FROM employees e, (SELECT 1 AS z) q WHERE e.z = 1",
    // Never a relation, a function or a type.
    "SELECT COUNT(*) AS salaries FROM employees ORDER BY salaries, (SELECT 1 FROM salaries)",
    "WITH c AS (SELECT 1 AS salaries) SELECT 1 FROM salaries",
    "SELECT 1 AS pg_sleep FROM employees ORDER BY pg_sleep(1)",
    "SELECT 1 FROM (SELECT 1 AS pg_sleep) s WHERE pg_sleep(1) = 0",
    "SELECT 1 FROM (SELECT 1 AS n) s WHERE CAST(1 AS n) = 1",
    // A column the role may not see, spelled as a name nothing introduced.
    "SELECT secret FROM employees",
    "SELECT 1 FROM (SELECT id FROM employees) s WHERE s.secret = 1",
];

fn check(lang: &Language, sql: &str) -> Result<(), String> {
    let mut s = Session::new(lang);
    s.check(sql.as_bytes()).map_err(|e| format!("{e:?}"))
}

#[test]
fn the_shapes_parse() {
    let lang = shop_language();
    for sql in ACCEPTED {
        if let Err(e) = check(&lang, sql) {
            panic!("{sql}\n  refused: {e}");
        }
    }
}

/// The viability check's search over cut-backs tries one byte of each class the scanner
/// cannot tell apart, plus the bytes of the names the statement introduced (a comparison
/// with such a name reads bytes, not classes); by brute force it tries all 256. The two
/// agree wherever a lexeme that only a cut-back can save is in progress: every prefix of
/// the accepted and refused shapes, with names of bytes no static word has, each followed
/// by the starts of lexemes that die on a later byte.
#[test]
fn cut_backs_through_names_try_every_byte_that_matters() {
    let lang = shop_language();
    let mut texts: Vec<String> = ACCEPTED
        .iter()
        .chain(REFUSED)
        .map(|s| s.to_string())
        .collect();
    texts.extend([
        "SELECT 1 FROM (SELECT 1 AS zq, 2 AS \"Ωx\") s WHERE s.zq > 1 AND \"Ωx\" = 2".to_string(),
        "WITH \"q\"\"z\" AS (SELECT 1 AS kj) SELECT kj FROM \"q\"\"z\" ORDER BY kj".to_string(),
        "SELECT amount AS éé FROM orders ORDER BY éé".to_string(),
    ]);
    let tails = [
        "/*", "/*/", "\"a\"\"", "\"zq\"\"", "1e", "1.5e+", "B'1", "X'f", "E'", "-", "<", ".", "*/",
    ];
    let mut searched = 0;
    for text in &texts {
        let bytes = text.as_bytes();
        for k in 0..=bytes.len() {
            for tail in tails {
                let mut s = Session::new(&lang);
                let mut cfg = s.start();
                if s.feed(&mut cfg, &bytes[..k]).is_err()
                    || s.feed(&mut cfg, tail.as_bytes()).is_err()
                {
                    continue;
                }
                let pending = cfg
                    .scan
                    .last
                    .is_some_and(|(len, _)| (len as usize) < cfg.scan.rem.len());
                if !pending {
                    continue;
                }
                searched += 1;
                let fast = s.is_viable(&cfg);
                let brute = s.is_viable_by_every_byte(&cfg);
                assert_eq!(
                    fast,
                    brute,
                    "{}{tail}: by class {fast}, by every byte {brute}",
                    String::from_utf8_lossy(&bytes[..k])
                );
            }
        }
    }
    assert!(searched > 100, "only {searched} cut-backs searched");
}

#[test]
fn names_are_refused_where_postgres_does_not_resolve_them() {
    let lang = shop_language();
    for sql in REFUSED {
        assert!(check(&lang, sql).is_err(), "{sql}\n  accepted");
    }
}

// ---------------------------------------------------------------------------------------
// Fast mask ≡ trial-parse oracle ≡ cached mask

/// Fragments that end or start names the statements introduce, cross lexeme boundaries
/// around them, or spell them in parts and in other cases.
#[rustfmt::skip]
const FRAGMENTS: &[&str] = &[
    " n", "n", "n ", " n DESC", ".n", "n,", "n)", " n)", "(n", " total", "total", "tot", "al",
    "al,", "al ", "AL", " TOTAL", ".total", " t2", "t2.", " rnk", "rnk", "rnk <=", " cnt", "cnt)",
    "(cnt", "\"Total\"", " \"To", "tal\"", "\"T", " AS", " as", " ORDER", " BY", " GROUP",
    " ORDER BY", " BY n", " DESC", " NULLS", " LAST", " WHERE", " FROM", " SELECT", "SELECT",
    " (SELECT", " JOIN", " ON", " LIMIT", " HAVING", " s", "s.", " s.n", " q", "q.", " k",
    "k", " who", "who", " c", "c", " v", "v.", " x", "x", " y", "y", " m", ".m", " z", " d",
    " count", "count", " sum", ".sum", "COUNT(*)", " COUNT(*)", " DATE(", "DATE", "date",
    " date_part", "(", ")", " (", "),", ",", ", ", " =", " >", " <=", " 1", "1", ";", " *",
    "*", " AS n", " AS total", "n ORDER BY n", ") s WHERE s.n", "k + 1", " e", "e.", " a", "a.",
    " b", " p", "p.", " eid", " oid", " z = 1", "salaries", " salaries", " pg_sleep", "pg_sleep(",
    " secret", "secret",
    // A name introduced and used within one token, or after the lexeme in progress ends,
    // quoted or not, whole or cut short.
    "Total\" FROM orders) AS t WHERE \"To", "who ORDER BY \"who\"", " ORDER BY \"", "n ORDER BY \"",
    "m FROM orders) s ORDER BY s.m", " AS who FROM employees GROUP BY who ORDER BY wh",
];

const DUPLICATED: &[&str] = &[" n", "total", ".n"];

/// [`common::masker::vocab_with`] [`FRAGMENTS`], then each spelling of [`DUPLICATED`] once
/// more (an alias).
fn synthetic_vocab() -> Vocabulary {
    common::masker::vocab_with(&[FRAGMENTS, DUPLICATED].concat())
}

#[test]
fn fast_equals_oracle_equals_cache_at_every_offset() {
    let lang = shop_language();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let ids = common::byte_ids(&fx.vocab);
    let n = common::over_offsets_by(&lang, &ids, ACCEPTED, &mut |s, cfg, what| {
        fx.checked(s, cfg, what)
    });
    assert!(n > 2000, "{n}");
    assert!(
        fx.dynamic_classes > 100,
        "only {} masks had tokens only the statement's names allow",
        fx.dynamic_classes
    );
}

/// Random walks through allowed tokens from the statements' prefixes, preferring the tokens
/// only names allow; every mask on the way checked three ways.
#[test]
fn random_walks_through_names_agree() {
    let lang = shop_language();
    let mut fx = MaskFixture::new(synthetic_vocab());
    let mut s = Session::new(&lang);
    let mut rng = Rng(0x5eed_2020);
    let mut steps = 0;
    for text in ACCEPTED {
        let mut prefixes = vec![s.start()];
        let mut cfg = s.start();
        for &b in text.as_bytes() {
            s.feed(&mut cfg, &[b]).expect("statement byte");
            prefixes.push(cfg.clone());
        }
        for walk in 0..3 {
            let mut cfg = prefixes[rng.below(prefixes.len())].clone();
            for k in 0..20 {
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
    assert!(steps > 1000, "{steps}");
}

// ---------------------------------------------------------------------------------------
// What a name may still bind to, and who refuses it

/// A name is never a relation, function or type (above); as a column, PostgreSQL may bind
/// it to a column of a relation the statement reads rather than to the introduced column
/// (a CTE's column is a word in a select list before any FROM names the CTE). Then it is a
/// column word like any other, and the checker binds it: a column the role may not see is
/// refused there (and by the server's column privileges). After FROM, a bare column is
/// one of a range variable in scope, so there such a name is no word at all.
#[test]
fn a_name_that_binds_to_a_hidden_column_is_the_checkers_to_refuse() {
    use grid_core::catalog::CatalogSnapshot;
    use grid_core::checker::ViolationKind;
    let lang = shop_language();
    // The role reads employees' columns but `secret` (column-level grants only).
    let snapshot = CatalogSnapshot::from_json(
        r#"{"format":1,"role":"clerk","search_path":["public"],"relations":[
        {"schema":"public","name":"employees","on_search_path":true,"privileges":[],
         "columns":[{"name":"id","privileges":["select"]},{"name":"name","privileges":["select"]},
                    {"name":"dept_id","privileges":["select"]},{"name":"hired","privileges":["select"]}]},
        {"schema":"public","name":"orders","on_search_path":true,"privileges":["select"],
         "columns":[{"name":"id","privileges":["select"]},{"name":"employee_id","privileges":["select"]},
                    {"name":"amount","privileges":["select"]},{"name":"placed","privileges":["select"]}]}]}"#,
    )
    .expect("snapshot");
    let sql = "WITH c AS (SELECT 1 AS secret) SELECT e.name FROM employees e GROUP BY secret";
    assert!(check(&lang, sql).is_err(), "{sql}: the mask admits it");
    // In a select list, before its FROM, any word of the lexicon stands; the checker
    // refuses what binds to nothing.
    let sql = "WITH c AS (SELECT 1 AS secret) SELECT secret FROM employees";
    assert!(check(&lang, sql).is_ok(), "{sql}: the mask refuses it");
    let v = grid_core::checker::check(sql, &snapshot);
    assert!(
        v.iter().any(|v| matches!(
            &v.kind,
            ViolationKind::UnknownColumn { column, .. } if column == "secret"
        )),
        "{sql}: {v:?}"
    );
    // Where the name binds to what the statement introduced, the checker agrees.
    for sql in [
        "SELECT count(*) AS secret FROM employees GROUP BY name ORDER BY secret",
        "SELECT 1 FROM (SELECT amount AS secret FROM orders) s WHERE s.secret > 0",
        "WITH c AS (SELECT amount AS secret FROM orders) SELECT max(secret) FROM c",
    ] {
        assert!(check(&lang, sql).is_ok(), "{sql}: the mask admits it");
        let v = grid_core::checker::check(sql, &snapshot);
        assert!(v.is_empty(), "{sql}: {v:?}");
    }
}

// ---------------------------------------------------------------------------------------
// The decode loop and its audit replay through names

/// Writes its script's token at each position when allowed, then ends as soon as EOS is.
struct Script(Vec<u32>);

impl grid_core::decode::StepModel for Script {
    fn choose(
        &mut self,
        s: &grid_core::decode::ModelStep<'_>,
    ) -> Result<grid_core::decode::Choice, grid_core::decode::ModelError> {
        use grid_core::decode::Choice;
        match self.0.get(s.generated.len()) {
            Some(&t) if s.mask.contains(t) => Ok(Choice::Token(t)),
            _ if s.mask.eos => Ok(Choice::Eos),
            _ => Ok(Choice::Token(s.mask.ids().find(|&i| i != 0).unwrap_or(0))),
        }
    }
}

/// Statements that use the names they introduce go through the decode loop with the mask
/// cache, come out as written, and their audit log replays bit for bit from the artifacts
/// (the replay recomputes every mask uncached: the names come from the output itself).
#[test]
fn generations_through_names_replay_bit_for_bit() {
    use grid_core::audit::{replay, AuditLog, SealMeta, StopReason, VerifyOptions};
    use grid_core::decode::{DecodeOptions, Decoder, GenerationSpec, Recomputer};
    use grid_core::reserve::{ReserveTable, Speller};
    let lang = shop_language();
    let vocab = synthetic_vocab();
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let speller = Speller::of(&vocab);
    let reserve = ReserveTable::build(&lang, &speller);
    let texts = [
        "SELECT dept_id, COUNT(*) AS n FROM employees GROUP BY dept_id ORDER BY n DESC",
        "SELECT 1 FROM (SELECT SUM(amount) AS total FROM orders) AS s WHERE s.total > 2",
        "WITH c(who, k) AS (SELECT name, id FROM employees) SELECT who FROM c WHERE k > 1 ORDER BY who",
    ];
    let specs: Vec<GenerationSpec<'_>> = texts
        .iter()
        .enumerate()
        .map(|(i, _)| GenerationSpec {
            id: i as u64,
            language: &lang,
            reserve: &reserve,
            prompt: vec![],
            max_tokens: 200,
            seed: i as u64,
            meta: SealMeta::default(),
            unconstrained: false,
            rewind: None,
        })
        .collect();
    let mut log = AuditLog::in_memory();
    for (spec, text) in specs.iter().zip(texts) {
        let mut dec = Decoder::new(
            &vocab,
            Masker::with_cache(trie.clone(), Arc::new(MaskCache::new(4))),
            &speller,
            DecodeOptions {
                cache: true,
                ..DecodeOptions::default()
            },
        );
        let out = dec
            .run(
                std::slice::from_ref(spec),
                &mut Script(vocab.encode(text)),
                &mut log,
                &mut |_, _| false,
            )
            .expect("audit writes");
        assert_eq!(out[0].stop, StopReason::Eos, "{text}: {:?}", out[0].error);
        assert_eq!(String::from_utf8_lossy(&out[0].text), text);
    }
    let mut rc = Recomputer::new(trie.clone(), &vocab);
    let summary = replay(log.entries(), &VerifyOptions::default(), &mut |ctx| {
        rc.recompute(&lang, ctx)
    })
    .expect("the log replays bit for bit");
    assert!(summary.steps > 30, "{summary:?}");
}

/// The reserve finishes a name in progress as that name (no other terminal could), then
/// completes the statement within its count.
#[test]
fn the_reserve_finishes_a_name_in_progress() {
    use grid_core::reserve::{ReserveMemo, ReserveTable, Speller};
    let lang = shop_language();
    let vocab = synthetic_vocab();
    let speller = Speller::of(&vocab);
    let table = ReserveTable::build(&lang, &speller);
    for prefix in [
        "SELECT 1 FROM (SELECT 1 AS total) s WHERE s.tot",
        "SELECT 1 FROM (SELECT 1 AS \"Total\") s WHERE s.\"To",
        "SELECT COUNT(*) AS cnt FROM employees GROUP BY dept_id ORDER BY cn",
        "WITH c AS (SELECT 1 AS zz) SELECT z",
    ] {
        let mut s = Session::new(&lang);
        let mut cfg = s.start();
        s.feed(&mut cfg, prefix.as_bytes()).expect("prefix");
        assert!(s.is_viable(&cfg), "{prefix}");
        let mut memo = ReserveMemo::default();
        let cost = table.reserve(&mut s, &mut memo, &cfg, &speller);
        let tail = table
            .completion(&mut s, &mut memo, &cfg, &speller)
            .unwrap_or_else(|| panic!("{prefix}: no completion"));
        let full = format!("{prefix}{}", String::from_utf8_lossy(&tail));
        assert!(check(&lang, &full).is_ok(), "{full}");
        let tokens = speller.segment(&tail).expect("spelled").len() as u32;
        assert!(
            tokens <= cost,
            "{full}: {tokens} tokens over a reserve of {cost}"
        );
    }
}
