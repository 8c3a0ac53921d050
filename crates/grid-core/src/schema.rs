//! Database schemas as the engine sees them: relations and their columns, by the names
//! PostgreSQL stores. Loaded from Spider-format `tables.json` here; the extension builds the
//! same structure from the live catalog.

use std::path::Path;

use serde::Deserialize;

use crate::error::{GridError, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The name as stored in the catalog (already folded when it was created unquoted).
    pub name: String,
    pub ty: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    /// The schema written before the name (`schema.name`) when the name alone does not reach
    /// this relation through the search path; `None` for a relation named bare.
    pub qualifier: Option<String>,
    pub columns: Vec<Column>,
    /// Indexes into `columns`.
    pub primary_key: Vec<usize>,
    /// `(column, referenced table, referenced column)`, by index.
    pub foreign_keys: Vec<(usize, usize, usize)>,
}

impl Table {
    /// A table of text columns with no keys, by stored names.
    pub fn with_columns(name: &str, columns: &[&str]) -> Table {
        Table {
            name: name.to_string(),
            qualifier: None,
            columns: columns
                .iter()
                .map(|c| Column {
                    name: c.to_string(),
                    ty: "text".into(),
                })
                .collect(),
            primary_key: Vec::new(),
            foreign_keys: Vec::new(),
        }
    }

    /// [`Table::with_columns`] for a relation named `schema.name`.
    pub fn qualified_with_columns(schema: &str, name: &str, columns: &[&str]) -> Table {
        Table {
            qualifier: Some(schema.to_string()),
            ..Table::with_columns(name, columns)
        }
    }

    /// How policy lists name the relation: `name`, or `schema.name` when it is qualified
    /// (stored names, joined by a dot).
    pub fn key(&self) -> String {
        match &self.qualifier {
            None => self.name.clone(),
            Some(s) => QualifiedName::new(s, &self.name).key(),
        }
    }
}

/// A relation named schema-qualified, by the stored names of its schema and itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName {
    pub(crate) schema: String,
    pub(crate) name: String,
}

impl QualifiedName {
    pub fn new(schema: &str, name: &str) -> QualifiedName {
        QualifiedName {
            schema: schema.to_string(),
            name: name.to_string(),
        }
    }

    /// `schema.name`, the stored names joined by a dot (for keys and messages, not SQL).
    pub fn key(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    pub db_id: String,
    pub tables: Vec<Table>,
}

impl Schema {
    /// The relation the bare name `stored` reaches (not a qualified one).
    pub fn table(&self, stored: &str) -> Option<&Table> {
        self.tables
            .iter()
            .find(|t| t.qualifier.is_none() && t.name == stored)
    }
}

/// The name PostgreSQL stores for an identifier written in a Spider schema. A simple name
/// (letters, digits, underscores, not starting with a digit, not reserved) was created
/// unquoted and is stored folded to lower case; any other name was created quoted and is
/// stored exactly as written.
pub(crate) fn stored_name(written: &str, is_reserved: &dyn Fn(&str) -> bool) -> String {
    let simple = written
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && written
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !is_reserved(written);
    if simple {
        written.to_ascii_lowercase()
    } else {
        written.to_string()
    }
}

/// A schema in which every unquoted word of `texts` (outside string literals) that does not
/// start with a digit and is not reserved is a table, and a column of every table: a
/// lexicon built from it constrains nothing those texts use, so what a test of them checks
/// is the dialect.
pub fn permissive(texts: &[String], is_reserved: &dyn Fn(&str) -> bool) -> Schema {
    let mut words = std::collections::BTreeSet::new();
    for t in texts {
        let mut in_str = false;
        for w in t.split(|c: char| {
            if c == '\'' {
                in_str = !in_str;
            }
            in_str || !(c.is_ascii_alphanumeric() || c == '_')
        }) {
            let w = w.to_ascii_lowercase();
            if !w.is_empty() && !w.as_bytes()[0].is_ascii_digit() && !is_reserved(&w) {
                words.insert(w);
            }
        }
    }
    let columns: Vec<&str> = words.iter().map(String::as_str).collect();
    Schema {
        db_id: "permissive".into(),
        tables: words
            .iter()
            .map(|w| Table::with_columns(w, &columns))
            .collect(),
    }
}

#[derive(Deserialize)]
struct SpiderDb {
    db_id: String,
    table_names_original: Vec<String>,
    column_names_original: Vec<(i64, String)>,
    column_types: Vec<String>,
    #[serde(default)]
    primary_keys: Vec<serde_json::Value>,
    #[serde(default)]
    foreign_keys: Vec<(usize, usize)>,
}

/// Reads every database of a Spider `tables.json`.
pub fn load_spider(path: &Path, is_reserved: &dyn Fn(&str) -> bool) -> Result<Vec<Schema>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| GridError::Schema(format!("cannot read {}: {e}", path.display())))?;
    parse_spider(&text, is_reserved)
}

pub(crate) fn parse_spider(text: &str, is_reserved: &dyn Fn(&str) -> bool) -> Result<Vec<Schema>> {
    let dbs: Vec<SpiderDb> = serde_json::from_str(text)?;
    dbs.into_iter()
        .map(|db| spider_schema(db, is_reserved))
        .collect()
}

fn spider_schema(db: SpiderDb, is_reserved: &dyn Fn(&str) -> bool) -> Result<Schema> {
    let bad = |m: String| GridError::Schema(format!("{}: {m}", db.db_id));
    let mut tables: Vec<Table> = db
        .table_names_original
        .iter()
        .map(|t| Table {
            name: stored_name(t, is_reserved),
            qualifier: None,
            columns: Vec::new(),
            primary_key: Vec::new(),
            foreign_keys: Vec::new(),
        })
        .collect();
    // Global column index -> (table, position in table).
    let mut position = Vec::with_capacity(db.column_names_original.len());
    for (i, (t, name)) in db.column_names_original.iter().enumerate() {
        if *t < 0 {
            position.push(None);
            continue;
        }
        let table = tables
            .get_mut(*t as usize)
            .ok_or_else(|| bad(format!("column {name} names table {t}")))?;
        let ty = db.column_types.get(i).cloned().unwrap_or_default();
        position.push(Some((*t as usize, table.columns.len())));
        table.columns.push(Column {
            name: stored_name(name, is_reserved),
            ty,
        });
    }
    let locate = |c: usize| {
        position
            .get(c)
            .copied()
            .flatten()
            .ok_or_else(|| bad(format!("no column {c}")))
    };
    for pk in &db.primary_keys {
        // Spider gives either a column index or a list of them (composite keys).
        let cols: Vec<usize> = match pk {
            serde_json::Value::Number(n) => {
                n.as_u64().map(|c| vec![c as usize]).unwrap_or_default()
            }
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_u64().map(|c| c as usize))
                .collect(),
            _ => Vec::new(),
        };
        for c in cols {
            let (t, p) = locate(c)?;
            tables[t].primary_key.push(p);
        }
    }
    for &(from, to) in &db.foreign_keys {
        let (t, p) = locate(from)?;
        let (rt, rp) = locate(to)?;
        tables[t].foreign_keys.push((p, rt, rp));
    }
    Ok(Schema {
        db_id: db.db_id,
        tables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(w: &str) -> bool {
        matches!(w.to_ascii_lowercase().as_str(), "order" | "select")
    }

    #[test]
    fn stored_names_follow_postgres_folding() {
        assert_eq!(stored_name("Song_Name", &reserved), "song_name");
        assert_eq!(
            stored_name("Official_ratings_(millions)", &reserved),
            "Official_ratings_(millions)"
        );
        assert_eq!(
            stored_name("18_49_Rating_Share", &reserved),
            "18_49_Rating_Share"
        );
        assert_eq!(
            stored_name("Free Meal Count (K-12)", &reserved),
            "Free Meal Count (K-12)"
        );
        assert_eq!(stored_name("Order", &reserved), "Order");
    }

    #[test]
    fn parses_a_spider_database() {
        let text = r#"[{"db_id":"d","table_names_original":["Singer","concert"],
            "column_names_original":[[-1,"*"],[0,"Singer_ID"],[0,"Name"],[1,"Singer_ID"]],
            "column_types":["text","number","text","number"],"primary_keys":[1],"foreign_keys":[[3,1]],
            "table_names":[],"column_names":[]}]"#;
        let s = parse_spider(text, &reserved).unwrap();
        assert_eq!(s[0].tables[0].name, "singer");
        assert_eq!(s[0].tables[0].columns[1].name, "name");
        assert_eq!(s[0].tables[0].primary_key, vec![0]);
        assert_eq!(s[0].tables[1].foreign_keys, vec![(0, 0, 0)]);
        assert!(parse_spider("[{}]", &reserved).is_err());
    }
}
