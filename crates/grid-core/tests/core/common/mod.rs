//! Shared helpers of the tests: the data of `../shared/data`, the fixtures shared with
//! `fuzz/` ([`fixtures`]), the differential mask fixture ([`masker`]), a seeded generator.
#![allow(dead_code)]

pub mod fixtures;
pub mod masker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use grid_core::schema::load_spider;
use grid_core::{Dialect, Language, Lexicon, Policy, Schema};

/// `$GRID_DATA_DIR`, or `../shared/data` beside the repository.
pub fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("GRID_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    dir.join("spider/tables.json").exists().then_some(dir)
}

/// Prints why a data-driven test does nothing, and returns `None`.
pub fn spider_or_skip(test: &str) -> Option<PathBuf> {
    let d = data_dir();
    if d.is_none() {
        eprintln!("SKIP {test}: ../shared/data/spider is absent (set GRID_DATA_DIR to run it)");
    }
    d
}

pub fn dialect() -> Arc<Dialect> {
    static D: OnceLock<Arc<Dialect>> = OnceLock::new();
    D.get_or_init(|| Arc::new(Dialect::postgres().expect("the shipped dialect builds")))
        .clone()
}

pub struct Gold {
    /// 1-based line number in `dev_gold_pg.sql`.
    pub line: usize,
    pub sql: String,
    pub db: String,
}

/// Every line of the Spider dev gold, those PostgreSQL refuses included.
pub fn gold_all(dir: &std::path::Path) -> Vec<Gold> {
    std::fs::read_to_string(dir.join("spider/dev_gold_pg.sql"))
        .expect("gold file")
        .lines()
        .enumerate()
        .filter_map(|(i, l)| Some((i + 1, l.rsplit_once('\t')?)))
        .map(|(line, (sql, db))| Gold {
            line,
            sql: sql.to_string(),
            db: db.trim().to_string(),
        })
        .collect()
}

/// The gold lines PostgreSQL 15 refuses to parse (`tests/spider_refused_by_postgres.tsv`).
pub fn refused_by_postgres() -> std::collections::BTreeSet<usize> {
    include_str!("../../../../../tests/spider_refused_by_postgres.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.split('\t')
                .next()
                .and_then(|n| n.trim().parse().ok())
                .expect("a line number")
        })
        .collect()
}

/// The gold statements PostgreSQL parses: every line but [`refused_by_postgres`].
pub fn gold(dir: &std::path::Path) -> Vec<Gold> {
    let refused = refused_by_postgres();
    gold_all(dir)
        .into_iter()
        .filter(|g| !refused.contains(&g.line))
        .collect()
}

pub fn schemas(dir: &std::path::Path) -> HashMap<String, Schema> {
    let d = dialect();
    let reserved = |w: &str| d.is_reserved(w);
    load_spider(&dir.join("spider/tables.json"), &reserved)
        .expect("tables.json")
        .into_iter()
        .map(|s| (s.db_id.clone(), s))
        .collect()
}

/// Languages per database under one policy, built on first use.
pub struct Langs {
    schemas: HashMap<String, Schema>,
    policy: Policy,
    built: HashMap<String, Arc<Language>>,
}

impl Langs {
    pub fn new(dir: &std::path::Path, policy: Policy) -> Langs {
        Langs {
            schemas: schemas(dir),
            policy,
            built: HashMap::new(),
        }
    }

    pub fn schema(&self, db: &str) -> &Schema {
        &self.schemas[db]
    }

    pub fn get(&mut self, db: &str) -> Arc<Language> {
        if let Some(l) = self.built.get(db) {
            return l.clone();
        }
        let d = dialect();
        let reserved = |w: &str| d.is_reserved(w);
        let lx = Lexicon::from_schema(&self.schemas[db], &self.policy, &reserved).expect("lexicon");
        let l = Arc::new(Language::build(d.clone(), &self.policy, &lx).expect("language"));
        self.built.insert(db.to_string(), l.clone());
        l
    }
}

/// A small deterministic generator (xorshift), so failures reproduce from the seed printed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The grammar's example statements (one per line), shipped with the repository.
pub fn examples() -> Vec<String> {
    include_str!("../../../../../grammars/examples.sql")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
        .map(str::to_string)
        .collect()
}

/// A schema in which every unquoted word of `texts` that is not reserved is a table and a
/// column: the lexicon then constrains nothing the texts use, so what is checked is L1.
pub fn permissive_schema(texts: &[String]) -> Schema {
    let d = dialect();
    grid_core::schema::permissive(texts, &|w| d.is_reserved(w))
}

pub fn language_for(schema: &Schema, policy: &Policy) -> Arc<Language> {
    let d = dialect();
    let reserved = |w: &str| d.is_reserved(w);
    let lx = Lexicon::from_schema(schema, policy, &reserved).expect("lexicon");
    Arc::new(Language::build(d.clone(), policy, &lx).expect("language"))
}

/// `hr.employees` and `"Sales"."Leads"` off the search path, `employees` on it, and a
/// column `employees` (so `hr.employees` is also a qualifier and a column): what the
/// qualified-name tests spell.
pub fn qualified_schema() -> Schema {
    use grid_core::schema::Table;
    Schema {
        db_id: "qualified".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name"]),
            Table::with_columns("orders", &["id", "total", "employees"]),
            Table::qualified_with_columns("hr", "employees", &["id", "name", "salary"]),
            Table::qualified_with_columns("hr", "salaries", &["id", "amount"]),
            Table::qualified_with_columns("Sales", "Leads", &["id"]),
        ],
    }
}

/// The non-special ids spelling each byte alone, by byte.
pub fn byte_ids(vocab: &grid_vocab::Vocabulary) -> Vec<Vec<u32>> {
    (0..=255u8)
        .map(|b| {
            vocab
                .iter()
                .filter(|(id, t)| !vocab.is_special(*id) && *t == [b])
                .map(|(id, _)| id)
                .collect()
        })
        .collect()
}

/// Feeds each statement byte by byte and, at every byte offset (mid-identifier, mid-string,
/// mid-comment and mid-keyword positions too) and at its end, has `mask` compute (and check)
/// the mask there: every id of `byte_ids` spelling the next byte must be allowed, and EOS at
/// the end. Returns the offsets checked.
pub fn over_offsets_by(
    lang: &Language,
    byte_ids: &[Vec<u32>],
    statements: &[&str],
    mask: &mut dyn FnMut(
        &mut grid_core::Session<'_>,
        &grid_core::Config,
        &str,
    ) -> grid_core::mask::Mask,
) -> usize {
    let mut s = grid_core::Session::new(lang);
    let mut checked = 0;
    for text in statements {
        let bytes = text.as_bytes();
        let mut cfg = s.start();
        for i in 0..=bytes.len() {
            let what = format!("{:?} at byte {i}", &text[..i]);
            let m = mask(&mut s, &cfg, &what);
            checked += 1;
            match bytes.get(i) {
                Some(&b) => {
                    for &id in &byte_ids[usize::from(b)] {
                        assert!(m.contains(id), "{what}: next byte {:?} blocked", b as char);
                    }
                    s.feed(&mut cfg, &[b]).expect("statement byte");
                }
                None => assert!(m.eos, "{text}: EOS not allowed at the end"),
            }
        }
    }
    checked
}
