//! The catalog as one role sees it: the `jsonb` that `grid.catalog_snapshot()` returns,
//! read as the caller, and what the engine derives from it — the visible [`Schema`], the
//! role's [`Policy`] (verbs and per-verb target tables from its GRANTs), its [`Lexicon`] and
//! [`Language`], and a fingerprint that keys caches per (role, catalog state).
//!
//! Column-level privileges cannot be enforced by a left-to-right mask (the SELECT list comes
//! before FROM): the column lexicon is the union of the columns the role may touch in any
//! way, and [`crate::checker`] enforces the rest after the parse.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

use crate::error::GridError;
use crate::grammar::spec::LexiconKind;
use crate::grammar::Dialect;
use crate::language::Language;
use crate::lexicon::Lexicon;
use crate::policy::{Policy, Verb};
use crate::schema::{Column, Schema, Table};

/// The snapshot format this code reads.
pub const FORMAT: u32 = 1;

#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("catalog snapshot is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),

    #[error("catalog snapshot format {found} is not supported (expected {FORMAT})")]
    Format { found: u32 },

    #[error("catalog snapshot lists {what} twice")]
    Duplicate { what: String },

    #[error("role {role} may use no relation{detail}")]
    NothingGranted { role: String, detail: String },

    #[error("{0}")]
    Engine(#[from] GridError),
}

/// One role's view of the catalog. Relations are ordered by schema and name, columns by
/// attnum; every listed relation carries at least one privilege of the role on it or on one
/// of its columns, and every listed column at least one column privilege.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogSnapshot {
    pub format: u32,
    /// `current_user` when the snapshot was taken.
    pub role: String,
    /// `current_schemas(false)`, in search order.
    #[serde(default)]
    pub search_path: Vec<String>,
    #[serde(default)]
    pub relations: Vec<Relation>,
    /// Names of [`crate::lexicon::DEFAULT_FUNCTIONS`] of which the role may execute no
    /// overload (a DBA revoked EXECUTE): left out of the function lexicon. Empty for a
    /// role that may call them all, and then absent from the JSON and the fingerprint, so
    /// that snapshots from before the field still mean (and hash) what they meant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_functions: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    Table,
    View,
    MaterializedView,
    ForeignTable,
    /// A kind this code does not know (e.g. from a newer server); treated like a table.
    #[serde(other)]
    Other,
}

impl RelationKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RelationKind::Table => "table",
            RelationKind::View => "view",
            RelationKind::MaterializedView => "materialized_view",
            RelationKind::ForeignTable => "foreign_table",
            RelationKind::Other => "other",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    pub schema: String,
    pub name: String,
    #[serde(default = "table_kind")]
    pub kind: RelationKind,
    /// True when the schema is on the search path, so that the model writes the name
    /// unqualified.
    #[serde(default)]
    pub on_search_path: bool,
    #[serde(default)]
    pub comment: Option<String>,
    /// The description written for the model (`grid.describe`), when the host gives one
    /// the role may be shown; the prompt shows it in place of [`Relation::comment`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Table-level privileges the role holds.
    #[serde(default, deserialize_with = "privileges")]
    pub privileges: BTreeSet<Verb>,
    #[serde(default)]
    pub columns: Vec<CatalogColumn>,
    #[serde(default)]
    pub primary_key: Vec<String>,
    #[serde(default)]
    pub foreign_keys: Vec<ForeignKey>,
}

fn table_kind() -> RelationKind {
    RelationKind::Table
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogColumn {
    pub name: String,
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub not_null: bool,
    #[serde(default)]
    pub comment: Option<String>,
    /// The description written for the model, as for [`Relation::description`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Column privileges the role holds; they include what table-level grants give.
    #[serde(default, deserialize_with = "privileges")]
    pub privileges: BTreeSet<Verb>,
    /// The few values the role reads in the column, when the host gives value hints.
    /// The prompt shows them beside the column; the language does not depend on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_hint: Option<ValueHint>,
}

/// Longest value a hint shows, in bytes: a longer one is free text, not a category.
pub const HINT_VALUE_BYTES: usize = 64;

/// The distinct values of a column as its role reads them (the host reads them as the
/// role, so grants and row security apply), for the model to spell a literal the way
/// the data does ('FR', not 'France').
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueHint {
    /// Distinct, sorted by bytes, each at most [`HINT_VALUE_BYTES`] long and free of
    /// control characters (one line of the prompt).
    pub values: Vec<String>,
    /// Whether every row was read; otherwise these are the values of the rows read.
    pub complete: bool,
}

impl ValueHint {
    /// The hint for a column whose rows read hold the distinct non-null values
    /// `distinct`, or `None` when the column is not a category: no value but blanks
    /// (nothing to spell), more than `max`, or one longer than [`HINT_VALUE_BYTES`]
    /// (`any_long` says whether the rows held one the host did not return) or with a
    /// control character.
    pub fn of(
        mut distinct: Vec<String>,
        any_long: bool,
        complete: bool,
        max: usize,
    ) -> Option<ValueHint> {
        distinct.sort();
        distinct.dedup();
        let categorical = !any_long
            && distinct.iter().any(|v| !v.trim().is_empty())
            && distinct.len() <= max
            && distinct
                .iter()
                .all(|v| v.len() <= HINT_VALUE_BYTES && !v.chars().any(char::is_control));
        categorical.then_some(ValueHint {
            values: distinct,
            complete,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub ref_schema: String,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
}

/// Privilege names as `has_table_privilege` spells them, any case. Privileges that do not
/// bear on generated statements (REFERENCES, TRIGGER, TRUNCATE, …) are dropped.
fn privileges<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<Verb>, D::Error> {
    let names = Option::<Vec<String>>::deserialize(d)?.unwrap_or_default();
    Ok(names
        .iter()
        .filter_map(|n| match n.to_ascii_lowercase().as_str() {
            "select" => Some(Verb::Select),
            "insert" => Some(Verb::Insert),
            "update" => Some(Verb::Update),
            "delete" => Some(Verb::Delete),
            _ => None,
        })
        .collect())
}

/// A description written for the model (`grid.describe` in the extension): of relation
/// `schema.relation` itself when `column` is `None`, else of that column. Names are the
/// stored (case-folded) names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    pub schema: String,
    pub relation: String,
    pub column: Option<String>,
    pub text: String,
}

/// Puts each of `descriptions` into `snapshot` (the JSON of `grid.catalog_snapshot()`, as
/// the host will send and archive it) beside the relation or column it describes, and
/// returns how many were put. One that names a relation or a column the snapshot does not
/// list is dropped: the snapshot is what the role may see, so a description reaches a
/// prompt exactly where a catalog comment could. It works on the JSON rather than on a
/// [`CatalogSnapshot`] so that the rest of the document stays byte for byte what the
/// catalog query returned.
pub fn attach_descriptions(
    snapshot: &mut serde_json::Value,
    descriptions: &[Description],
) -> usize {
    let mut put = 0;
    for d in descriptions {
        let Some(relation) = snapshot["relations"].as_array_mut().and_then(|rs| {
            rs.iter_mut()
                .find(|r| r["schema"] == d.schema.as_str() && r["name"] == d.relation.as_str())
        }) else {
            continue;
        };
        let target = match &d.column {
            None => Some(relation),
            Some(column) => relation["columns"]
                .as_array_mut()
                .and_then(|cs| cs.iter_mut().find(|c| c["name"] == column.as_str())),
        };
        if let Some(object) = target.and_then(serde_json::Value::as_object_mut) {
            object.insert("description".into(), d.text.clone().into());
            put += 1;
        }
    }
    put
}

/// A relation of the snapshot that the model is not offered, and why. Every relation of a
/// format 1 snapshot can be named (off the search path, qualified); one is omitted when
/// the name the model would write is not one to show ([`shows_name`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Omitted {
    pub(crate) schema: String,
    pub name: String,
    pub(crate) reason: String,
}

/// A relation the model is offered, and how it names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offered<'a> {
    pub relation: &'a Relation,
    /// The model writes `schema.name`: the bare name does not reach this relation through
    /// the search path (its schema is off the path, or a relation of the same name comes
    /// earlier on it).
    pub qualified: bool,
}

/// Whether a stored name may reach the prompt and the lexicon: it holds no character that
/// hides what text does ([`crate::text::is_unsafe_name`]: a control, format or separator
/// character, which the generated dialect could not spell anyway) and spells no model
/// control token (`<|im_end|>` in a prompt ends the turn, or fails the whole request).
/// Such a name is left out rather than escaped: escaped, it would no longer be the name
/// the model must write; and it is no name a schema needs.
pub(crate) fn shows_name(name: &str) -> bool {
    !crate::text::is_unsafe_name(name)
}

/// Why a relation whose name [`shows_name`] refuses is omitted.
const UNSHOWN_NAME: &str =
    "its name holds a control or format character, or spells a model control token";

impl Offered<'_> {
    /// How the lexicon and policy lists name it: `name`, or `schema.name` when qualified.
    pub fn key(&self) -> String {
        if self.qualified {
            self.relation.qualified()
        } else {
            self.relation.name.clone()
        }
    }

    /// The schema written before the name, when qualified.
    pub fn qualifier(&self) -> Option<&str> {
        self.qualified.then_some(self.relation.schema.as_str())
    }
}

impl Relation {
    pub(crate) fn column(&self, stored: &str) -> Option<&CatalogColumn> {
        self.columns.iter().find(|c| c.name == stored)
    }

    /// Whether the role may use this relation as the target or source of `verb`: a
    /// table-level grant, or for SELECT/INSERT/UPDATE a grant on any column (PostgreSQL
    /// has no column-level DELETE).
    pub fn grants(&self, verb: Verb) -> bool {
        self.privileges.contains(&verb)
            || (verb != Verb::Delete && self.columns.iter().any(|c| c.privileges.contains(&verb)))
    }

    /// `schema.name`, for messages.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

impl CatalogSnapshot {
    /// Reads the JSON of `grid.catalog_snapshot()`: unknown keys are ignored, missing
    /// optional keys default, the format must be [`FORMAT`], and no relation or column
    /// may be listed twice.
    pub fn from_json(text: &str) -> Result<CatalogSnapshot, CatalogError> {
        let snap: CatalogSnapshot = serde_json::from_str(text)?;
        snap.validate()?;
        Ok(snap)
    }

    pub fn validate(&self) -> Result<(), CatalogError> {
        if self.format != FORMAT {
            return Err(CatalogError::Format { found: self.format });
        }
        let mut seen = BTreeSet::new();
        for r in &self.relations {
            if !seen.insert((r.schema.as_str(), r.name.as_str())) {
                return Err(CatalogError::Duplicate {
                    what: format!("relation {}", r.qualified()),
                });
            }
            let mut cols = BTreeSet::new();
            for c in &r.columns {
                if !cols.insert(c.name.as_str()) {
                    return Err(CatalogError::Duplicate {
                        what: format!("column {}.{}", r.qualified(), c.name),
                    });
                }
            }
        }
        Ok(())
    }

    /// A snapshot in which `role` holds every privilege on every table and column of
    /// `schema`: bare tables in schema `public`, the search path; qualified ones in their
    /// own schema, off it (Spider databases, tests, the CLI).
    pub fn granting_all(schema: &Schema, role: &str) -> CatalogSnapshot {
        let all: BTreeSet<Verb> = Verb::ALL.into_iter().collect();
        let schema_of = |t: &Table| t.qualifier.clone().unwrap_or_else(|| "public".into());
        let relations = schema
            .tables
            .iter()
            .map(|t| Relation {
                schema: schema_of(t),
                name: t.name.clone(),
                kind: RelationKind::Table,
                on_search_path: t.qualifier.is_none(),
                comment: None,
                description: None,
                privileges: all.clone(),
                columns: t
                    .columns
                    .iter()
                    .map(|c| CatalogColumn {
                        name: c.name.clone(),
                        ty: c.ty.clone(),
                        not_null: false,
                        comment: None,
                        description: None,
                        privileges: all.clone(),
                        value_hint: None,
                    })
                    .collect(),
                primary_key: t
                    .primary_key
                    .iter()
                    .filter_map(|&i| t.columns.get(i).map(|c| c.name.clone()))
                    .collect(),
                foreign_keys: t
                    .foreign_keys
                    .iter()
                    .filter_map(|&(c, rt, rc)| {
                        let target = schema.tables.get(rt)?;
                        Some(ForeignKey {
                            columns: vec![t.columns.get(c)?.name.clone()],
                            ref_schema: schema_of(target),
                            ref_table: target.name.clone(),
                            ref_columns: vec![target.columns.get(rc)?.name.clone()],
                        })
                    })
                    .collect(),
            })
            .collect();
        CatalogSnapshot {
            format: FORMAT,
            role: role.to_string(),
            search_path: vec!["public".into()],
            relations,
            denied_functions: Vec::new(),
        }
    }

    /// The relations the model is offered, and the ones left out with the reason (none in
    /// format 1). First those the bare name reaches, in search-path order and then by name:
    /// on the path (`on_search_path`, which the snapshot computes against every relation of
    /// the catalog, visible or not), and the first of their name, as PostgreSQL resolves
    /// it. Then every other relation by schema and name, qualified: off the path, or hidden
    /// by a relation of the same name earlier on it.
    pub fn visible(&self) -> (Vec<Offered<'_>>, Vec<Omitted>) {
        let rank = |schema: &str| self.search_path.iter().position(|s| s == schema);
        let mut on_path: Vec<(usize, &Relation)> = Vec::new();
        let mut off_path: Vec<&Relation> = Vec::new();
        for r in &self.relations {
            match rank(&r.schema) {
                Some(i) if r.on_search_path => on_path.push((i, r)),
                _ => off_path.push(r),
            }
        }
        on_path.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let mut shown = Vec::new();
        for (_, r) in on_path {
            if names.insert(&r.name) {
                shown.push(Offered {
                    relation: r,
                    qualified: false,
                });
            } else {
                off_path.push(r);
            }
        }
        off_path.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        shown.extend(off_path.into_iter().map(|r| Offered {
            relation: r,
            qualified: true,
        }));
        let (shown, unshown): (Vec<Offered<'_>>, Vec<Offered<'_>>) = shown
            .into_iter()
            .partition(|o| shows_name(&o.relation.name) && o.qualifier().is_none_or(shows_name));
        let omitted = unshown
            .into_iter()
            .map(|o| Omitted {
                schema: o.relation.schema.clone(),
                name: o.relation.name.clone(),
                reason: UNSHOWN_NAME.to_string(),
            })
            .collect();
        (shown, omitted)
    }

    /// The visible relations and the columns the role may touch, with keys among them. A
    /// qualified relation carries its schema ([`Table::qualifier`]).
    pub fn schema(&self) -> Schema {
        let (shown, _) = self.visible();
        let index: BTreeMap<(&str, &str), usize> = shown
            .iter()
            .enumerate()
            .map(|(i, o)| ((o.relation.schema.as_str(), o.relation.name.as_str()), i))
            .collect();
        let position = |r: &Relation, c: &str| {
            r.columns
                .iter()
                .filter(|x| shows_name(&x.name))
                .position(|x| x.name == c)
        };
        let tables = shown
            .iter()
            .map(|o| {
                let r = o.relation;
                let mut foreign_keys = Vec::new();
                for fk in &r.foreign_keys {
                    let Some(&t) = index.get(&(fk.ref_schema.as_str(), fk.ref_table.as_str()))
                    else {
                        continue;
                    };
                    let target = shown[t].relation;
                    for (c, rc) in fk.columns.iter().zip(&fk.ref_columns) {
                        if let (Some(p), Some(rp)) = (position(r, c), position(target, rc)) {
                            foreign_keys.push((p, t, rp));
                        }
                    }
                }
                Table {
                    name: r.name.clone(),
                    qualifier: o.qualifier().map(str::to_string),
                    columns: r
                        .columns
                        .iter()
                        .filter(|c| shows_name(&c.name))
                        .map(|c| Column {
                            name: c.name.clone(),
                            ty: c.ty.clone(),
                        })
                        .collect(),
                    primary_key: r
                        .primary_key
                        .iter()
                        .filter_map(|c| position(r, c))
                        .collect(),
                    foreign_keys,
                }
            })
            .collect();
        Schema {
            db_id: format!("catalog of role {}", self.role),
            tables,
        }
    }

    /// The role's policy: the verbs of `base` (e.g. from `grid.policy`) that some visible
    /// relation grants, each DML verb restricted to the relations that grant it (and to
    /// those `base` lists, when it lists any), and the bans of `base`. Relations are listed
    /// by [`Offered::key`]; `base` may name one by its key or as `schema.name`.
    pub fn policy(&self, base: &Policy) -> Result<Policy, CatalogError> {
        let (shown, omitted) = self.visible();
        let granting = |v: Verb| shown.iter().filter(move |o| o.relation.grants(v));
        let narrow = |v: Verb, listed: &Option<Vec<String>>| -> Vec<String> {
            granting(v)
                .filter(|o| {
                    listed
                        .as_ref()
                        .is_none_or(|l| l.contains(&o.key()) || l.contains(&o.relation.qualified()))
                })
                .map(|o| o.key())
                .collect()
        };
        let insert = narrow(Verb::Insert, &base.insert_tables);
        let update = narrow(Verb::Update, &base.update_tables);
        let delete = narrow(Verb::Delete, &base.delete_tables);
        let verbs: Vec<Verb> = base
            .verbs
            .iter()
            .copied()
            .filter(|&v| match v {
                Verb::Select => granting(Verb::Select).next().is_some(),
                Verb::Insert => !insert.is_empty(),
                Verb::Update => !update.is_empty(),
                Verb::Delete => !delete.is_empty(),
            })
            .collect();
        if verbs.is_empty() {
            let unabled: Vec<&str> = [Verb::Insert, Verb::Update, Verb::Delete]
                .into_iter()
                .filter(|&v| !base.allows(v) && granting(v).next().is_some())
                .map(|v| match v {
                    Verb::Insert => "INSERT",
                    Verb::Update => "UPDATE",
                    _ => "DELETE",
                })
                .collect();
            let detail = if !unabled.is_empty() {
                format!(
                    " (it holds {} on some, but its grid.policy row does not enable writes: \
                     a DBA names them in the row's \"verbs\")",
                    unabled.join(", ")
                )
            } else if omitted.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} relation(s) omitted: {})",
                    omitted.len(),
                    omitted
                        .iter()
                        .map(|o| format!("{}.{}: {}", o.schema, o.name, o.reason))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            };
            return Err(CatalogError::NothingGranted {
                role: self.role.clone(),
                detail,
            });
        }
        let mut verbs = verbs;
        verbs.sort();
        verbs.dedup();
        Ok(Policy {
            verbs,
            ban: base.ban.clone(),
            insert_tables: Some(insert),
            update_tables: Some(update),
            delete_tables: Some(delete),
        })
    }

    /// The role's lexicon under `policy` (from [`CatalogSnapshot::policy`]): tables in FROM
    /// are the relations it may read, columns every column it may touch, DML targets as the
    /// policy lists them.
    pub fn lexicon(
        &self,
        policy: &Policy,
        is_reserved: &dyn Fn(&str) -> bool,
    ) -> Result<Lexicon, CatalogError> {
        let mut lx = Lexicon::from_schema(&self.schema(), policy, is_reserved)?;
        let readable: BTreeSet<String> = if policy.allows(Verb::Select) {
            self.visible()
                .0
                .into_iter()
                .filter(|o| o.relation.grants(Verb::Select))
                .map(|o| o.key())
                .collect()
        } else {
            BTreeSet::new()
        };
        lx.retain_relations(LexiconKind::Table, |k| readable.contains(k));
        lx.retain_words(LexiconKind::Function, |f| {
            !self.denied_functions.iter().any(|d| d == f)
        });
        Ok(lx)
    }

    /// The compiled language of the role: policy, lexicon and the dialect projected by them.
    pub fn language(&self, dialect: Arc<Dialect>, base: &Policy) -> Result<Language, CatalogError> {
        let policy = self.policy(base)?;
        let reserved = |w: &str| dialect.is_reserved(w);
        let lexicon = self.lexicon(&policy, &reserved)?;
        Ok(Language::build(dialect.clone(), &policy, &lexicon)?)
    }

    /// BLAKE2b-128 over a canonical encoding: relations sorted by (schema, name), privilege
    /// sets sorted, foreign keys sorted, columns and the search path in their own order
    /// (both carry meaning), every string length-prefixed. Equal for snapshots that mean
    /// the same, whatever the key order or whitespace of the JSON.
    pub fn fingerprint(&self) -> [u8; 16] {
        let mut e = Canonical(Blake2b::<U16>::new());
        e.tag(b"grid-catalog");
        e.num(self.format as u64);
        e.str(&self.role);
        e.num(self.search_path.len() as u64);
        for s in &self.search_path {
            e.str(s);
        }
        let mut rels: Vec<&Relation> = self.relations.iter().collect();
        rels.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        e.num(rels.len() as u64);
        for r in rels {
            e.str(&r.schema);
            e.str(&r.name);
            e.str(r.kind.name());
            e.num(r.on_search_path as u64);
            e.opt(r.comment.as_deref());
            // Descriptions only where present, so that snapshots without them keep
            // their fingerprints.
            if let Some(d) = &r.description {
                e.tag(b"description");
                e.str(d);
            }
            e.privileges(&r.privileges);
            e.num(r.columns.len() as u64);
            for c in &r.columns {
                e.str(&c.name);
                e.str(&c.ty);
                e.num(c.not_null as u64);
                e.opt(c.comment.as_deref());
                if let Some(d) = &c.description {
                    e.tag(b"description");
                    e.str(d);
                }
                e.privileges(&c.privileges);
                // Only where present, so that snapshots without values keep their
                // fingerprints.
                if let Some(h) = &c.value_hint {
                    e.tag(b"value-hint");
                    e.num(h.complete as u64);
                    e.num(h.values.len() as u64);
                    for v in &h.values {
                        e.str(v);
                    }
                }
            }
            e.num(r.primary_key.len() as u64);
            for k in &r.primary_key {
                e.str(k);
            }
            let mut fks: Vec<&ForeignKey> = r.foreign_keys.iter().collect();
            fks.sort_by(|a, b| {
                (&a.columns, &a.ref_schema, &a.ref_table, &a.ref_columns).cmp(&(
                    &b.columns,
                    &b.ref_schema,
                    &b.ref_table,
                    &b.ref_columns,
                ))
            });
            e.num(fks.len() as u64);
            for fk in fks {
                e.num(fk.columns.len() as u64);
                for c in &fk.columns {
                    e.str(c);
                }
                e.str(&fk.ref_schema);
                e.str(&fk.ref_table);
                e.num(fk.ref_columns.len() as u64);
                for c in &fk.ref_columns {
                    e.str(c);
                }
            }
        }
        if !self.denied_functions.is_empty() {
            let denied: BTreeSet<&String> = self.denied_functions.iter().collect();
            e.tag(b"denied-functions");
            e.num(denied.len() as u64);
            for f in denied {
                e.str(f);
            }
        }
        e.0.finalize().into()
    }
}

/// A prefix-free encoding fed straight into the hash.
struct Canonical(Blake2b<U16>);

impl Canonical {
    fn tag(&mut self, t: &[u8]) {
        self.0.update(t);
    }
    fn num(&mut self, n: u64) {
        self.0.update(n.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.num(s.len() as u64);
        self.0.update(s.as_bytes());
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.num(0),
            Some(s) => {
                self.num(1);
                self.str(s);
            }
        }
    }
    fn privileges(&mut self, p: &BTreeSet<Verb>) {
        self.num(p.len() as u64);
        for v in p {
            self.num(*v as u64);
        }
    }
}
