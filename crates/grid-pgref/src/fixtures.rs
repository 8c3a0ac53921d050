//! What the differential run reads: languages over a built-in schema (data-free) and over
//! Spider's schemas, the Spider gold and questions (when `../shared/data` is there), and a
//! vocabulary of SQL pieces that spells anything in few tokens.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use grid_core::grammar::spec::{LexiconKind, TermKind};
use grid_core::schema::{load_spider, Schema, Table};
use grid_core::{Dialect, Language, Lexicon, Policy};
use grid_endpoint::backend::script::{Script, ScriptEntry};
use grid_vocab::Vocabulary;

/// `$GRID_DATA_DIR`, or `../shared/data` beside the repository, when it holds Spider.
pub fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("GRID_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    dir.join("spider/tables.json").exists().then_some(dir)
}

/// A role's language with what it was built from.
pub struct Role {
    pub name: String,
    pub policy: Policy,
    pub lexicon: Lexicon,
    pub lang: Language,
}

impl Role {
    pub fn new(name: &str, dialect: &Arc<Dialect>, schema: &Schema, policy: Policy) -> Role {
        let reserved = |w: &str| dialect.is_reserved(w);
        let mut lexicon = Lexicon::from_schema(schema, &policy, &reserved).expect("lexicon");
        if schema.db_id == "shop" {
            // What the built-in schema's role may not see.
            for kind in LexiconKind::ALL.iter().filter(|k| k.is_relation()) {
                lexicon.retain_relations(*kind, |t| t != "salaries");
            }
            lexicon.retain_words(LexiconKind::Column, |c| c != "secret");
        }
        let lang = Language::build(dialect.clone(), &policy, &lexicon).expect("language");
        Role {
            name: name.to_string(),
            policy,
            lexicon,
            lang,
        }
    }
}

/// The built-in schema: `salaries` and the column `secret` exist but the role may not see
/// them; a quoted column and a reserved-word column need quoting.
pub fn shop() -> Schema {
    Schema {
        db_id: "shop".into(),
        tables: vec![
            Table::with_columns("employees", &["id", "name", "dept_id", "hired", "Rating"]),
            Table::with_columns(
                "orders",
                &["id", "employee_id", "amount", "placed", "order"],
            ),
            Table::with_columns("depts", &["id", "title"]),
            Table::with_columns("salaries", &["id", "secret"]),
        ],
    }
}

/// The dialects a statement is generated in: the extension's (no comments, ASCII names)
/// and the full one.
pub fn dialects() -> Vec<(&'static str, Arc<Dialect>)> {
    vec![
        (
            "extension",
            Arc::new(Dialect::postgres_without_comments().expect("extension dialect")),
        ),
        ("full", Arc::new(Dialect::postgres().expect("dialect"))),
    ]
}

/// Every role of the built-in schema, in the extension's dialect (what the mask admits in
/// production): every verb, and SELECT only. (The full dialect's comments are no part of
/// generated SQL; PostgreSQL nests block comments and refuses `NOT /**/ LIKE`, which the full
/// dialect does not follow.)
pub fn builtin_roles() -> Vec<Role> {
    let (d, dialect) = dialects().remove(0);
    [
        ("all", Policy::default()),
        ("select", Policy::select_only()),
    ]
    .into_iter()
    .map(|(p, policy)| Role::new(&format!("shop/{d}/{p}"), &dialect, &shop(), policy))
    .collect()
}

/// Spider dev: schemas, gold lines (with their databases) and questions.
pub struct Spider {
    pub schemas: HashMap<String, Schema>,
    /// `(sql, db)` per line of `dev_gold_pg.sql`.
    pub gold: Vec<(String, String)>,
    /// `(question, db)` per item of `dev.json`, in the order of the gold lines.
    pub questions: Vec<(String, String)>,
}

impl Spider {
    pub fn load(dir: &Path, dialect: &Dialect) -> Spider {
        let reserved = |w: &str| dialect.is_reserved(w);
        let schemas = load_spider(&dir.join("spider/tables.json"), &reserved)
            .expect("tables.json")
            .into_iter()
            .map(|s| (s.db_id.clone(), s))
            .collect();
        let gold = std::fs::read_to_string(dir.join("spider/dev_gold_pg.sql"))
            .expect("dev_gold_pg.sql")
            .lines()
            .filter_map(|l| l.rsplit_once('\t'))
            .map(|(sql, db)| (sql.to_string(), db.trim().to_string()))
            .collect();
        let dev: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("spider/dev.json")).expect("dev.json"),
        )
        .expect("dev.json is JSON");
        let questions = dev
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|it| {
                        Some((
                            it["question"].as_str()?.to_string(),
                            it["db_id"].as_str()?.to_string(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Spider {
            schemas,
            gold,
            questions,
        }
    }

    /// The scripted mock's script for `db`: each question of it → its PostgreSQL gold.
    pub fn script(&self, db: &str) -> Script {
        let entries = self
            .questions
            .iter()
            .zip(&self.gold)
            .filter(|((_, d), _)| d == db)
            .map(|((q, _), (sql, _))| ScriptEntry {
                pattern: q.clone(),
                sql: sql.clone(),
            })
            .collect();
        Script { entries }
    }

    /// The databases with gold lines, in order of first appearance.
    pub fn databases(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.gold
            .iter()
            .filter(|(_, db)| seen.insert(db.clone()))
            .map(|(_, db)| db.clone())
            .collect()
    }
}

/// SQL fragments walks and mocks spell statements with, besides single bytes and
/// keywords: aliases the dynamic lexicon reads, qualifiers, literals.
const FRAGMENTS: &[&str] = &[
    " n",
    " cnt",
    " total",
    " x",
    " t1",
    " t2",
    " s",
    " q",
    " AS n",
    " AS cnt",
    " AS total",
    ".n",
    ".cnt",
    ".total",
    " T1.",
    " T2.",
    " s.",
    "(*)",
    " = ",
    " 1",
    " 2",
    "'x'",
    " 'a'",
    " (",
    ")",
    ", ",
    " *",
    "::",
    " E'",
    " 1.5",
    "\"",
    " \"Rating\"",
    " \"order\"",
    " (SELECT",
    ") AS s",
    ") s",
    " ORDER BY",
    " GROUP BY",
    " COUNT(*)",
    " count(",
    " max(",
    " sum(",
    " DATE(",
    " date_part(",
];

/// A vocabulary of SQL pieces: every printable ASCII byte and the newline; the dialect's
/// keywords, upper case after a space and lower case alone; [`FRAGMENTS`]; and `words`
/// after a space. EOS is id 0.
pub fn sql_vocabulary(dialect: &Dialect, words: &BTreeSet<String>) -> Vocabulary {
    let mut toks: BTreeSet<Vec<u8>> = BTreeSet::new();
    toks.extend((0x20..=0x7eu8).map(|b| vec![b]));
    toks.insert(b"\n".to_vec());
    for d in &dialect.spec.decls {
        if let TermKind::Keyword { word } = &d.kind {
            toks.insert(format!(" {}", word.to_ascii_uppercase()).into_bytes());
            toks.insert(word.as_bytes().to_vec());
        }
    }
    toks.extend(FRAGMENTS.iter().map(|f| f.as_bytes().to_vec()));
    toks.extend(words.iter().map(|w| format!(" {w}").into_bytes()));
    let mut all = vec![b"<eos>".to_vec()];
    all.extend(toks);
    Vocabulary::from_served(all, &[0], Some(0)).expect("vocabulary")
}

/// The lexicon words of `lexicons` (for [`sql_vocabulary`]).
pub fn words_of<'a>(lexicons: impl Iterator<Item = &'a Lexicon>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for lx in lexicons {
        for ws in lx.words.values() {
            out.extend(
                ws.iter()
                    .filter(|w| w.bytes().all(|b| b.is_ascii_graphic()))
                    .cloned(),
            );
        }
    }
    out
}

/// The grammar's example statements (`grammars/examples.sql`, one per line): every
/// construct of the dialect.
pub fn examples() -> Vec<String> {
    include_str!("../../../grammars/examples.sql")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
        .map(str::to_string)
        .collect()
}

/// [`grid_core::schema::permissive`] over the dialect's reserved words.
pub fn permissive_schema(dialect: &Dialect, texts: &[String]) -> Schema {
    grid_core::schema::permissive(texts, &|w| dialect.is_reserved(w))
}
