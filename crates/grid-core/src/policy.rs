//! A role's policy: which statement kinds it may write, which tables each verb may target,
//! and which clauses are banned. The extension derives it from GRANTs plus `grid.policy`
//! ([`Policy::for_asker`]: write verbs are opt-in there); the CLI reads it as JSON, e.g.
//! `{"verbs":["select"],"ban":["set_ops"]}`.

use serde::{Deserialize, Serialize};

use crate::error::{GridError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    Select,
    Insert,
    Update,
    Delete,
}

impl Verb {
    pub const ALL: [Verb; 4] = [Verb::Select, Verb::Insert, Verb::Update, Verb::Delete];

    /// The alternative of the grammar's `statement` rule that this verb keeps.
    pub(crate) fn statement_rule(self) -> &'static str {
        match self {
            Verb::Select => "select_statement",
            Verb::Insert => "insert_statement",
            Verb::Update => "update_statement",
            Verb::Delete => "delete_statement",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ban {
    SetOps,
    Subqueries,
    Window,
    Cte,
    Joins,
}

impl Ban {
    /// A production naming any of these symbols (in either template copy) is removed.
    pub(crate) fn markers(self) -> &'static [&'static str] {
        match self {
            Ban::SetOps => &["UNION", "INTERSECT", "EXCEPT"],
            Ban::Subqueries => &["subquery"],
            Ban::Window => &["OVER", "WINDOW"],
            Ban::Cte => &["with_clause"],
            Ban::Joins => &["joined_table", "comma_join"],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default = "all_verbs")]
    pub verbs: Vec<Verb>,
    #[serde(default)]
    pub ban: Vec<Ban>,
    /// Tables INSERT may target, by name (`schema.name` for a relation written
    /// qualified); absent means every table of the schema.
    #[serde(default)]
    pub insert_tables: Option<Vec<String>>,
    #[serde(default)]
    pub update_tables: Option<Vec<String>>,
    #[serde(default)]
    pub delete_tables: Option<Vec<String>>,
}

fn all_verbs() -> Vec<Verb> {
    Verb::ALL.to_vec()
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            verbs: all_verbs(),
            ban: Vec::new(),
            insert_tables: None,
            update_tables: None,
            delete_tables: None,
        }
    }
}

impl Policy {
    pub fn from_json(text: &str) -> Result<Policy> {
        let mut p: Policy = serde_json::from_str(text).map_err(|e| {
            GridError::Policy(format!(
                "{e}; expected e.g. {{\"verbs\":[\"select\",\"insert\"],\"ban\":[\"set_ops\"],\"insert_tables\":[\"orders\"]}} \
                 with verbs from select/insert/update/delete and bans from set_ops/subqueries/window/cte/joins"
            ))
        })?;
        if p.verbs.is_empty() {
            return Err(GridError::Policy(
                "no verbs: the language would be empty".into(),
            ));
        }
        p.verbs.sort();
        p.verbs.dedup();
        p.ban.sort();
        p.ban.dedup();
        Ok(p)
    }

    /// The policy `grid.ask` applies to a role, from its `grid.policy` row (`None`: no
    /// row). Write verbs are opt-in: without a row, or with a row that lists no `verbs`,
    /// the role writes SELECT only, whatever its grants allow; a DBA enables INSERT,
    /// UPDATE or DELETE by naming them in the row (they still need the grants). So a
    /// table another role granted the asker never makes a question write to it unless
    /// a DBA said the asker may write.
    pub fn for_asker(row: Option<&serde_json::Value>) -> Result<Policy> {
        let mut row = row.cloned().unwrap_or_else(|| serde_json::json!({}));
        match row.as_object_mut() {
            Some(o) => {
                o.entry("verbs")
                    .or_insert_with(|| serde_json::json!([Verb::Select]));
            }
            None => {
                return Err(GridError::Policy(format!(
                    "expected a JSON object, got {row}"
                )))
            }
        }
        Policy::from_json(&row.to_string())
    }

    /// Whether the policy lets the role write (any verb but SELECT).
    pub fn writes(&self) -> bool {
        self.verbs.iter().any(|v| *v != Verb::Select)
    }

    pub fn select_only() -> Policy {
        Policy {
            verbs: vec![Verb::Select],
            ..Policy::default()
        }
    }

    pub(crate) fn allows(&self, v: Verb) -> bool {
        self.verbs.contains(&v)
    }

    /// Canonical JSON, for fingerprints.
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let p = Policy::from_json(r#"{"verbs":["select","insert"],"insert_tables":["orders"]}"#)
            .unwrap();
        assert!(p.allows(Verb::Insert) && !p.allows(Verb::Delete));
        assert_eq!(
            p.insert_tables.as_deref(),
            Some(&["orders".to_string()][..])
        );
        assert_eq!(Policy::from_json("{}").unwrap().verbs.len(), 4);
        assert!(Policy::from_json(r#"{"verbs":["drop"]}"#).is_err());
        assert!(Policy::from_json(r#"{"verbs":[]}"#).is_err());
        assert!(Policy::from_json(r#"{"verb":["select"]}"#).is_err());
    }

    #[test]
    fn an_asker_writes_only_what_a_policy_row_names() {
        let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert_eq!(Policy::for_asker(None).unwrap(), Policy::select_only());
        let banned = Policy::for_asker(Some(&json(r#"{"ban":["joins"]}"#))).unwrap();
        assert_eq!(banned.verbs, vec![Verb::Select]);
        assert_eq!(banned.ban, vec![Ban::Joins]);
        assert!(!banned.writes());
        let clerk = Policy::for_asker(Some(&json(
            r#"{"verbs":["insert","select"],"insert_tables":["orders"]}"#,
        )))
        .unwrap();
        assert!(clerk.allows(Verb::Insert) && !clerk.allows(Verb::Delete));
        assert!(clerk.writes());
        assert!(Policy::for_asker(Some(&json(r#"{"verbs":[]}"#))).is_err());
        assert!(Policy::for_asker(Some(&json("[1]"))).is_err());
        // What it returns reads back as itself (the worker parses it again).
        assert_eq!(Policy::from_json(&clerk.canonical_json()).unwrap(), clerk);
    }
}
