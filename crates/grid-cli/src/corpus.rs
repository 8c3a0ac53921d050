//! Gold corpora (`SQL<TAB>db_id` lines), the arguments that name one ([`CorpusArgs`]),
//! the per-database languages they are checked in, and how their masks are computed
//! ([`CacheMode`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, ValueEnum};
use grid_core::cache::MaskCache;
use grid_core::mask::Masker;
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, GridError, Language, Lexicon, Policy, Schema};

/// A gold corpus and the schemas and policy it is checked under.
#[derive(Args)]
pub struct CorpusArgs {
    /// Spider-format tables.json with every database's schema.
    #[arg(long)]
    pub tables: PathBuf,
    /// File of `SQL<TAB>db_id` lines.
    #[arg(long)]
    pub gold: PathBuf,
    /// Policy JSON file (default: every verb, no bans).
    #[arg(long)]
    pub policy: Option<PathBuf>,
}

impl CorpusArgs {
    pub fn policy(&self) -> Result<Policy, GridError> {
        read_policy(self.policy.as_deref())
    }

    pub fn gold(&self) -> Result<Vec<GoldLine>, GridError> {
        read_gold(&self.gold)
    }
}

/// How masks are computed: through the write-back mask cache, or by the trie walk alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CacheMode {
    On,
    Off,
}

impl CacheMode {
    /// A masker over `trie` in this mode.
    pub fn masker(self, trie: Arc<TokenTrie>) -> Masker {
        match self {
            CacheMode::On => Masker::with_cache(trie, Arc::new(MaskCache::new(64))),
            CacheMode::Off => Masker::new(trie),
        }
    }
}

/// One gold statement.
pub struct GoldLine {
    /// 1-based line number in the file.
    pub line: usize,
    pub sql: String,
    pub db: String,
}

pub fn read_gold(path: &Path) -> Result<Vec<GoldLine>, GridError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| GridError::Schema(format!("cannot read gold file {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let (sql, db) = raw.rsplit_once('\t').ok_or_else(|| {
            GridError::Schema(format!(
                "{}:{}: expected SQL<TAB>db_id",
                path.display(),
                i + 1
            ))
        })?;
        out.push(GoldLine {
            line: i + 1,
            sql: sql.to_string(),
            db: db.trim().to_string(),
        });
    }
    Ok(out)
}

/// Builds each database's language once, on first use.
pub struct Languages {
    pub dialect: Arc<Dialect>,
    schemas: HashMap<String, Schema>,
    policy: Policy,
    built: HashMap<String, Arc<Language>>,
}

impl Languages {
    pub fn new(tables: &Path, policy: Policy) -> Result<Languages, GridError> {
        let dialect = Arc::new(Dialect::postgres()?);
        let reserved = |w: &str| dialect.is_reserved(w);
        let schemas = grid_core::schema::load_spider(tables, &reserved)?
            .into_iter()
            .map(|s| (s.db_id.clone(), s))
            .collect();
        Ok(Languages {
            dialect,
            schemas,
            policy,
            built: HashMap::new(),
        })
    }

    pub fn get(&mut self, db: &str) -> Result<Arc<Language>, GridError> {
        if let Some(l) = self.built.get(db) {
            return Ok(l.clone());
        }
        let schema = self.schemas.get(db).ok_or_else(|| {
            GridError::Schema(format!("database {db:?} is not in the tables file"))
        })?;
        let d = self.dialect.clone();
        let reserved = |w: &str| d.is_reserved(w);
        let lexicon = Lexicon::from_schema(schema, &self.policy, &reserved)?;
        let lang = Arc::new(Language::build(
            self.dialect.clone(),
            &self.policy,
            &lexicon,
        )?);
        self.built.insert(db.to_string(), lang.clone());
        Ok(lang)
    }
}

pub fn read_policy(path: Option<&Path>) -> Result<Policy, GridError> {
    match path {
        None => Ok(Policy::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| GridError::Policy(format!("cannot read {}: {e}", p.display())))?;
            Policy::from_json(&text)
        }
    }
}
