//! The script of the scripted mock: which SQL the "model" tries to write for a prompt.
//!
//! ```json
//! {"entries": [
//!   {"match": "how many employees", "sql": "SELECT count(*) FROM employees"},
//!   {"match": "salary", "sql": "SELECT name, amount FROM salaries"}
//! ]}
//! ```
//!
//! A bare array of entries is accepted too, and `question` is a synonym of `match`.
//! An entry applies when its `match` text occurs in the prompt (ASCII case-insensitive);
//! the first applicable entry wins.

use serde::Deserialize;

/// One script line: prompts containing `pattern` target `sql`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ScriptEntry {
    /// Text that must occur in the prompt (ASCII case-insensitive).
    #[serde(rename = "match", alias = "question")]
    pub pattern: String,
    /// The SQL the model tries to spell.
    pub sql: String,
}

/// An ordered list of entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The entries, first match wins.
    pub entries: Vec<ScriptEntry>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptDoc {
    Object { entries: Vec<ScriptEntry> },
    Array(Vec<ScriptEntry>),
}

/// A script that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("bad script: {0}")]
pub struct ScriptError(pub String);

impl Script {
    /// Parses a script document.
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        let doc: ScriptDoc = serde_json::from_str(text).map_err(|e| {
            ScriptError(format!(
                "{e} (expected {{\"entries\": [{{\"match\": …, \"sql\": …}}]}})"
            ))
        })?;
        let entries = match doc {
            ScriptDoc::Object { entries } | ScriptDoc::Array(entries) => entries,
        };
        if let Some(e) = entries.iter().find(|e| e.pattern.is_empty()) {
            return Err(ScriptError(format!(
                "an entry has an empty match (sql {:?})",
                e.sql
            )));
        }
        Ok(Script { entries })
    }

    /// The target SQL for a prompt, if an entry applies.
    pub(crate) fn target_for(&self, prompt: &[u8]) -> Option<&str> {
        let hay = prompt.to_ascii_lowercase();
        self.entries
            .iter()
            .find(|e| contains(&hay, e.pattern.to_ascii_lowercase().as_bytes()))
            .map(|e| e.sql.as_str())
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_and_first_match() {
        let s = Script::parse(
            r#"{"entries":[{"match":"Employees","sql":"A"},{"question":"emp","sql":"B"}]}"#,
        )
        .unwrap();
        assert_eq!(s.target_for(b"how many employees?"), Some("A"));
        assert_eq!(s.target_for(b"emp"), Some("B"));
        assert_eq!(s.target_for(b"nothing"), None);
        let a = Script::parse(r#"[{"match":"x","sql":"Y"}]"#).unwrap();
        assert_eq!(a.entries.len(), 1);
        assert!(Script::parse(r#"{"entries":[{"match":"","sql":"Y"}]}"#).is_err());
        assert!(Script::parse("nope").is_err());
    }
}
