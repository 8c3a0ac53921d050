//! Gold corpora (`SQL<TAB>db_id` lines) and the per-database languages they are checked in.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use grid_core::{Dialect, GridError, Language, Lexicon, Policy, Schema};

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
