//! L3: the words each identifier category allows, as stored names, and how each stored name
//! may be spelled in SQL.

use std::collections::{BTreeMap, BTreeSet};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use crate::error::{GridError, Result};
use crate::grammar::spec::LexiconKind;
use crate::policy::{Policy, Verb};
use crate::schema::{stored_name, Schema};

/// Functions a generated statement may call when the caller supplies no list: read-only
/// built-ins that models use. Anything that reads files, sleeps, or touches the server is
/// absent on purpose.
pub const DEFAULT_FUNCTIONS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stddev",
    "stddev_samp",
    "stddev_pop",
    "variance",
    "var_samp",
    "var_pop",
    "bool_and",
    "bool_or",
    "every",
    "array_agg",
    "string_agg",
    "json_agg",
    "jsonb_agg",
    "lower",
    "upper",
    "length",
    "char_length",
    "character_length",
    "octet_length",
    "initcap",
    "concat",
    "concat_ws",
    "replace",
    "split_part",
    "substr",
    "substring",
    "strpos",
    "lpad",
    "rpad",
    "ltrim",
    "rtrim",
    "btrim",
    "trim",
    "reverse",
    "repeat",
    "starts_with",
    "regexp_replace",
    "to_char",
    "to_date",
    "to_timestamp",
    "to_number",
    "date_trunc",
    "date_part",
    "age",
    "now",
    "make_date",
    "abs",
    "round",
    "trunc",
    "ceil",
    "ceiling",
    "floor",
    "sign",
    "sqrt",
    "power",
    "exp",
    "ln",
    "log",
    "mod",
    "div",
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

/// Identifier-like type names (keyword types such as `integer` are grammar keywords).
pub const DEFAULT_TYPES: &[&str] = &[
    "text",
    "date",
    "bool",
    "int2",
    "int4",
    "int8",
    "float4",
    "float8",
    "json",
    "jsonb",
    "uuid",
    "bytea",
    "money",
    "inet",
    "citext",
    "serial",
    "bigserial",
];

/// The allowed stored names per category, plus every relation name of the schema (granted
/// or not), which a CTE reference may never spell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lexicon {
    pub words: BTreeMap<LexiconKind, BTreeSet<String>>,
    pub relations: BTreeSet<String>,
}

impl Lexicon {
    /// Every table and column of `schema`, per-verb targets from `policy` (all tables when
    /// the policy names none), and the default functions and types.
    pub fn from_schema(
        schema: &Schema,
        policy: &Policy,
        is_reserved: &dyn Fn(&str) -> bool,
    ) -> Result<Lexicon> {
        let mut lx = Lexicon::default();
        let all_tables: BTreeSet<String> = schema.tables.iter().map(|t| t.name.clone()).collect();
        lx.relations = all_tables.clone();
        lx.words.insert(LexiconKind::Table, all_tables.clone());
        lx.words.insert(
            LexiconKind::Column,
            schema
                .tables
                .iter()
                .flat_map(|t| t.columns.iter().map(|c| c.name.clone()))
                .collect(),
        );
        lx.words.insert(
            LexiconKind::Function,
            DEFAULT_FUNCTIONS.iter().map(|s| s.to_string()).collect(),
        );
        lx.words.insert(
            LexiconKind::Type,
            DEFAULT_TYPES.iter().map(|s| s.to_string()).collect(),
        );
        for (verb, kind, listed) in [
            (
                Verb::Insert,
                LexiconKind::InsertTable,
                &policy.insert_tables,
            ),
            (
                Verb::Update,
                LexiconKind::UpdateTable,
                &policy.update_tables,
            ),
            (
                Verb::Delete,
                LexiconKind::DeleteTable,
                &policy.delete_tables,
            ),
        ] {
            let targets = match listed {
                _ if !policy.allows(verb) => BTreeSet::new(),
                None => all_tables.clone(),
                Some(names) => names
                    .iter()
                    .map(|n| {
                        let s = if all_tables.contains(n) {
                            n.clone()
                        } else {
                            stored_name(n, is_reserved)
                        };
                        if all_tables.contains(&s) {
                            Ok(s)
                        } else {
                            Err(GridError::Policy(format!(
                                "{} names {n:?}, which is not a table of {}",
                                kind.name(),
                                schema.db_id
                            )))
                        }
                    })
                    .collect::<Result<_>>()?,
            };
            lx.words.insert(kind, targets);
        }
        Ok(lx)
    }

    pub fn words(&self, kind: LexiconKind) -> impl Iterator<Item = &String> {
        self.words.get(&kind).into_iter().flatten()
    }

    pub fn is_empty(&self, kind: LexiconKind) -> bool {
        self.words.get(&kind).is_none_or(|w| w.is_empty())
    }

    /// BLAKE2b-128 over a canonical listing.
    pub fn fingerprint(&self) -> [u8; 16] {
        let mut h = Blake2b::<U16>::new();
        for (k, ws) in &self.words {
            h.update(k.name().as_bytes());
            h.update([0xff]);
            for w in ws {
                h.update((w.len() as u32).to_le_bytes());
                h.update(w.as_bytes());
            }
        }
        h.update(b"relations");
        for r in &self.relations {
            h.update((r.len() as u32).to_le_bytes());
            h.update(r.as_bytes());
        }
        h.finalize().into()
    }
}

/// True when PostgreSQL would read `stored` back from the unquoted spelling: lower case
/// `[a-z_][a-z0-9_$]*` and not a reserved word.
pub fn spells_unquoted(stored: &str, is_reserved: &dyn Fn(&str) -> bool) -> bool {
    stored
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && stored
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'$')
        && !is_reserved(stored)
}

/// The double-quoted spelling, with `"` doubled.
pub fn quoted(stored: &str) -> String {
    format!("\"{}\"", stored.replace('"', "\"\""))
}

/// Every canonical spelling of a stored name: quoted always, unquoted when it folds back.
pub fn spellings(stored: &str, is_reserved: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut v = vec![quoted(stored)];
    if spells_unquoted(stored, is_reserved) {
        v.push(stored.to_string());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Table;

    fn reserved(w: &str) -> bool {
        matches!(w, "order" | "select")
    }

    fn schema() -> Schema {
        let t = Table::with_columns;
        Schema {
            db_id: "shop".into(),
            tables: vec![
                t("orders", &["id", "Total Due"]),
                t("salaries", &["amount"]),
            ],
        }
    }

    #[test]
    fn spellings_follow_folding() {
        assert_eq!(
            spellings("song_name", &reserved),
            vec!["\"song_name\"", "song_name"]
        );
        assert_eq!(
            spellings("Official_ratings_(millions)", &reserved),
            vec!["\"Official_ratings_(millions)\""]
        );
        assert_eq!(spellings("order", &reserved), vec!["\"order\""]);
        assert_eq!(spellings("a\"b", &reserved), vec!["\"a\"\"b\""]);
    }

    #[test]
    fn policy_targets() {
        let p = Policy::from_json(r#"{"verbs":["select","insert"],"insert_tables":["orders"]}"#)
            .unwrap();
        let lx = Lexicon::from_schema(&schema(), &p, &reserved).unwrap();
        assert_eq!(
            lx.words(LexiconKind::InsertTable).collect::<Vec<_>>(),
            vec!["orders"]
        );
        assert!(lx.is_empty(LexiconKind::DeleteTable));
        assert!(lx.words(LexiconKind::Column).any(|c| c == "Total Due"));
        let bad = Policy::from_json(r#"{"verbs":["insert"],"insert_tables":["nope"]}"#).unwrap();
        assert!(Lexicon::from_schema(&schema(), &bad, &reserved).is_err());
        assert_ne!(lx.fingerprint(), Lexicon::default().fingerprint());
    }
}
