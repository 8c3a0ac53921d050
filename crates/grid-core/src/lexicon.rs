//! L3: the words each identifier category allows, as stored names, and how each stored name
//! may be spelled in SQL.

use std::collections::{BTreeMap, BTreeSet};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use crate::error::{GridError, Result};
use crate::grammar::spec::LexiconKind;
use crate::policy::{Policy, Verb};
use crate::schema::{stored_name, QualifiedName, Schema, Table};

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
    "strpos",
    "lpad",
    "rpad",
    "ltrim",
    "rtrim",
    "btrim",
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
    "date_bin",
    "age",
    "now",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timezone",
    "make_date",
    "make_time",
    "make_timestamp",
    "make_timestamptz",
    "make_interval",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "isfinite",
    // Function-style casts (`DATE(x)`): the identifier type names PostgreSQL's grammar takes
    // as a function name; the call is the pg_catalog function of that name when one
    // matches, else the cast. (Keyword types such as `numeric` or `timestamp` are not
    // function names there.)
    "date",
    "text",
    "bool",
    "int2",
    "int4",
    "int8",
    "float4",
    "float8",
    // Not `json`: from PostgreSQL 16 `JSON(...)` is the SQL/JSON constructor, whose
    // grammar takes exactly one argument (`JSON()` is a syntax error there), and `x::json`
    // says the same as `json(x)` on every version.
    "jsonb",
    "uuid",
    "bytea",
    "money",
    "inet",
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

/// Identifier-like type names (keyword types such as `integer` are grammar keywords): the
/// ones of PostgreSQL's core that the checker's parser reads in a typed literal
/// (`date '2020-01-01'`) and a cast.
pub(crate) const DEFAULT_TYPES: &[&str] = &[
    "text", "date", "bool", "int2", "int4", "int8", "float4", "float8", "json", "jsonb", "uuid",
    "bytea",
];

/// The allowed stored names per category, plus every relation name of the schema (granted
/// or not), which a CTE reference may never spell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lexicon {
    pub words: BTreeMap<LexiconKind, BTreeSet<String>>,
    /// Relation words written schema-qualified (`schema.table`), per relation category: the
    /// relations the bare name does not reach through the search path.
    pub qualified: BTreeMap<LexiconKind, BTreeSet<QualifiedName>>,
    /// Bare names of every relation, qualified ones included: a CTE reference spells none
    /// of them (conservative: PostgreSQL would let a CTE take the name of a relation off
    /// the search path, but one rule for every relation name is simpler to audit).
    pub relations: BTreeSet<String>,
    /// Per relation, by its [`Table::key`], the columns of the column lexicon it has, in
    /// the schema's order: what may follow a qualifier that names it ([`crate::scope`]).
    /// Invariant: every name listed is a word of [`LexiconKind::Column`].
    pub(crate) columns: BTreeMap<String, Vec<String>>,
}

/// The relations of one category, split by how they are written.
#[derive(Default)]
struct Relations {
    bare: BTreeSet<String>,
    qualified: BTreeSet<QualifiedName>,
}

impl Relations {
    fn add(&mut self, t: &Table) {
        match &t.qualifier {
            None => {
                self.bare.insert(t.name.clone());
            }
            Some(s) => {
                self.qualified.insert(QualifiedName::new(s, &t.name));
            }
        }
    }
}

impl Lexicon {
    /// Every table and column of `schema`, per-verb targets from `policy` (all tables when
    /// the policy names none; a listed name is a table's [`Table::key`], or a name that
    /// folds to one), and the default functions and types.
    pub fn from_schema(
        schema: &Schema,
        policy: &Policy,
        is_reserved: &dyn Fn(&str) -> bool,
    ) -> Result<Lexicon> {
        let mut lx = Lexicon {
            relations: schema.tables.iter().map(|t| t.name.clone()).collect(),
            ..Lexicon::default()
        };
        let mut all = Relations::default();
        for t in &schema.tables {
            all.add(t);
        }
        lx.set_relations(LexiconKind::Table, all);
        lx.words.insert(
            LexiconKind::Column,
            schema
                .tables
                .iter()
                .flat_map(|t| t.columns.iter().map(|c| c.name.clone()))
                .collect(),
        );
        lx.columns = schema
            .tables
            .iter()
            .map(|t| (t.key(), t.columns.iter().map(|c| c.name.clone()).collect()))
            .collect();
        lx.words.insert(
            LexiconKind::Function,
            DEFAULT_FUNCTIONS.iter().map(|s| s.to_string()).collect(),
        );
        lx.words.insert(
            LexiconKind::Type,
            DEFAULT_TYPES.iter().map(|s| s.to_string()).collect(),
        );
        let by_key: BTreeMap<String, &Table> = schema.tables.iter().map(|t| (t.key(), t)).collect();
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
            let mut targets = Relations::default();
            match listed {
                _ if !policy.allows(verb) => {}
                None => schema.tables.iter().for_each(|t| targets.add(t)),
                Some(names) => {
                    for n in names {
                        let t = by_key
                            .get(n)
                            .or_else(|| by_key.get(&stored_name(n, is_reserved)))
                            .ok_or_else(|| {
                                GridError::Policy(format!(
                                    "{} names {n:?}, which is not a table of {}",
                                    kind.name(),
                                    schema.db_id
                                ))
                            })?;
                        targets.add(t);
                    }
                }
            }
            lx.set_relations(kind, targets);
        }
        Ok(lx)
    }

    fn set_relations(&mut self, kind: LexiconKind, r: Relations) {
        self.words.insert(kind, r.bare);
        if !r.qualified.is_empty() {
            self.qualified.insert(kind, r.qualified);
        }
    }

    /// Keeps, of the relations of `kind`, those whose key (`name`, or `schema.name` when
    /// qualified) `keep` accepts.
    pub fn retain_relations(&mut self, kind: LexiconKind, keep: impl Fn(&str) -> bool) {
        if let Some(w) = self.words.get_mut(&kind) {
            w.retain(|n| keep(n));
        }
        if let Some(q) = self.qualified.get_mut(&kind) {
            q.retain(|n| keep(&n.key()));
            if q.is_empty() {
                self.qualified.remove(&kind);
            }
        }
    }

    /// Keeps, of the words of `kind` (a category without qualified words: functions,
    /// types, columns), those `keep` accepts (for columns, in every relation's list too).
    pub fn retain_words(&mut self, kind: LexiconKind, keep: impl Fn(&str) -> bool) {
        if let Some(w) = self.words.get_mut(&kind) {
            w.retain(|n| keep(n));
        }
        if kind == LexiconKind::Column {
            for cs in self.columns.values_mut() {
                cs.retain(|n| keep(n));
            }
        }
    }

    /// The columns of the relation whose [`Table::key`] is `key` (none for a relation the
    /// lexicon does not know).
    pub fn columns_of(&self, key: &str) -> &[String] {
        self.columns.get(key).map_or(&[], Vec::as_slice)
    }

    /// The bare words of `kind`.
    pub fn words(&self, kind: LexiconKind) -> impl Iterator<Item = &String> {
        self.words.get(&kind).into_iter().flatten()
    }

    /// The schema-qualified words of `kind` (relation categories only).
    pub fn qualified(&self, kind: LexiconKind) -> impl Iterator<Item = &QualifiedName> {
        self.qualified.get(&kind).into_iter().flatten()
    }

    pub fn is_empty(&self, kind: LexiconKind) -> bool {
        self.words.get(&kind).is_none_or(|w| w.is_empty())
            && self.qualified.get(&kind).is_none_or(|q| q.is_empty())
    }

    /// BLAKE2b-128 over a canonical listing.
    pub(crate) fn fingerprint(&self) -> [u8; 16] {
        let mut h = Blake2b::<U16>::new();
        let put = |h: &mut Blake2b<U16>, w: &str| {
            h.update((w.len() as u32).to_le_bytes());
            h.update(w.as_bytes());
        };
        for (k, ws) in &self.words {
            h.update(k.name().as_bytes());
            h.update([0xff]);
            for w in ws {
                put(&mut h, w);
            }
        }
        h.update(b"relations");
        for r in &self.relations {
            put(&mut h, r);
        }
        // Which relation has which column decides what follows a qualifier.
        h.update(b"columns");
        for (r, cs) in &self.columns {
            put(&mut h, r);
            h.update((cs.len() as u32).to_le_bytes());
            for c in cs {
                put(&mut h, c);
            }
        }
        // Only when present, so that a lexicon without qualified words keeps the
        // fingerprint it had before they existed (audit logs replay against it).
        for (k, qs) in self.qualified.iter().filter(|(_, q)| !q.is_empty()) {
            h.update(b"qualified");
            h.update(k.name().as_bytes());
            h.update([0xff]);
            for q in qs {
                put(&mut h, &q.schema);
                put(&mut h, &q.name);
            }
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

/// Every canonical spelling of a qualified name: each part spelled either way it may be
/// (`hr.employees`, `"hr".employees`, `hr."employees"`, `"hr"."employees"`), joined by
/// a dot with no space, as one word.
pub(crate) fn qualified_spellings(
    q: &QualifiedName,
    is_reserved: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let names = spellings(&q.name, is_reserved);
    spellings(&q.schema, is_reserved)
        .iter()
        .flat_map(|s| names.iter().map(move |n| format!("{s}.{n}")))
        .collect()
}

/// How the model is shown a relation: each part bare when it folds back, quoted otherwise.
pub(crate) fn written(
    qualifier: Option<&str>,
    name: &str,
    is_reserved: &dyn Fn(&str) -> bool,
) -> String {
    let part = |p: &str| {
        if spells_unquoted(p, is_reserved) {
            p.to_string()
        } else {
            quoted(p)
        }
    };
    match qualifier {
        None => part(name),
        Some(s) => format!("{}.{}", part(s), part(name)),
    }
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

    #[test]
    fn qualified_words_spell_each_part_as_it_folds() {
        let q = QualifiedName::new("hr", "Employees");
        assert_eq!(
            qualified_spellings(&q, &reserved),
            vec!["\"hr\".\"Employees\"", "hr.\"Employees\""]
        );
        let q = QualifiedName::new("hr", "staff");
        assert_eq!(qualified_spellings(&q, &reserved).len(), 4);
        assert_eq!(
            written(Some("Sales"), "order", &reserved),
            "\"Sales\".\"order\""
        );
        assert_eq!(written(None, "staff", &reserved), "staff");
    }

    #[test]
    fn qualified_relations_are_their_own_words_and_policy_keys() {
        let mut s = schema();
        s.tables
            .push(Table::qualified_with_columns("hr", "salaries", &["amount"]));
        let p =
            Policy::from_json(r#"{"verbs":["select","update"],"update_tables":["hr.salaries"]}"#)
                .unwrap();
        let lx = Lexicon::from_schema(&s, &p, &reserved).unwrap();
        assert!(lx.is_empty(LexiconKind::InsertTable));
        assert_eq!(lx.words(LexiconKind::UpdateTable).count(), 0);
        assert!(!lx.is_empty(LexiconKind::UpdateTable));
        assert_eq!(
            lx.qualified(LexiconKind::UpdateTable).collect::<Vec<_>>(),
            vec![&QualifiedName::new("hr", "salaries")]
        );
        assert_eq!(
            lx.words(LexiconKind::Table).collect::<Vec<_>>(),
            vec!["orders", "salaries"]
        );
        assert_eq!(lx.qualified(LexiconKind::Table).count(), 1);
        // A CTE may spell neither bare name.
        assert!(lx.relations.contains("salaries"));
        let mut unqualified = lx.clone();
        unqualified.qualified.clear();
        assert_ne!(lx.fingerprint(), unqualified.fingerprint());
        let mut read_none = lx.clone();
        read_none.retain_relations(LexiconKind::Table, |k| k != "hr.salaries");
        assert_eq!(read_none.qualified(LexiconKind::Table).count(), 0);
        assert_eq!(read_none.words(LexiconKind::Table).count(), 2);
    }
}
