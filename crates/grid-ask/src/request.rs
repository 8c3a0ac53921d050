//! What an ask is made of: the question, the role's catalog snapshot, who asks, and the
//! settings that shape the generation. The extension's backend fills it in as the caller
//! and sends it to its worker (it is the `ask` message of the worker's socket, hence
//! serde with unknown fields refused); `grid generate` fills it in from its flags.

use serde::{Deserialize, Serialize};

/// One question to answer as one role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    pub question: String,
    /// The role's catalog snapshot (`grid_core::catalog::CatalogSnapshot` as JSON), taken
    /// as the caller under the caller's search path.
    pub snapshot: serde_json::Value,
    pub session_user: String,
    pub current_user: String,
    pub database: String,
    /// The role's base policy (bans, verbs, DML targets; `grid.policy`), if it has one.
    #[serde(default)]
    pub policy: Option<serde_json::Value>,
    /// For `grid.explain()`: a statement the checker refuses is answered with its steps
    /// (and the refusal) rather than an error.
    #[serde(default)]
    pub explain: bool,
    pub settings: AskSettings,
    /// The curated examples the host chose for this question, best first: each in the
    /// asker's language and passed by its judge (the extension's `grid.examples`). The
    /// prompt shows them before the question; the prompt artifact records them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
    /// Curated examples not vetted yet: the extension's backend reads them from its store
    /// and its worker vets them into [`Ask::examples`] where the role's language is kept
    /// (`examples::vet`), before the pipeline sees the ask. The pipeline shows
    /// only [`Ask::examples`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Offered>,
    /// The snapshot and policy read, filled in where the ask arrives
    /// (`language::prepare`, on the worker's socket thread): the pipeline, which
    /// every ask waits for, then reads a large catalog's JSON no more. Never sent.
    #[serde(skip)]
    pub parsed: Option<Parsed>,
}

/// An ask's snapshot and base policy as read from its JSON, and the snapshot's
/// fingerprint; or why they cannot be read. Derived from the ask's other fields, so it
/// takes no part in comparing asks.
#[derive(Clone)]
pub struct Parsed(pub std::sync::Arc<Result<ParsedParts, crate::failure::Failure>>);

/// What [`Parsed`] holds when the ask's parts can be read: the snapshot, the base
/// policy, and the snapshot's fingerprint.
pub(crate) type ParsedParts = (
    grid_core::catalog::CatalogSnapshot,
    grid_core::Policy,
    [u8; 16],
);

impl Parsed {
    /// The parts, or why they cannot be read.
    pub fn parts(&self) -> Result<&ParsedParts, crate::failure::Failure> {
        self.0.as_ref().as_ref().map_err(Clone::clone)
    }
}

impl PartialEq for Parsed {
    fn eq(&self, _: &Parsed) -> bool {
        true
    }
}

impl std::fmt::Debug for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_ok() {
            "Parsed(ok)"
        } else {
            "Parsed(error)"
        })
    }
}

impl Ask {
    /// What tells two asks apart for reusing an answer (`grid.run(question)` right after
    /// `grid.ask(question)`): the digest of the question, who asks (its role and
    /// database), the catalog snapshot as sent (descriptions and value hints included),
    /// the base policy, whether it is an explain, and the settings that shape a
    /// generation. Not the curated examples (a curator's edit between the two calls does
    /// not make the statement read any less the role's), the timeout, the fault setting,
    /// or the session user.
    pub fn reuse_key(&self) -> grid_core::audit::Digest32 {
        let settings = AskSettings {
            timeout_ms: 0,
            fault: None,
            ..self.settings.clone()
        };
        // Serialized by reference: the snapshot of a wide catalog is megabytes, and a
        // `json!` array would copy it first. The settings go through a `Value` as they
        // always have, so their keys stay sorted and the key stays what it was.
        let settings = serde_json::to_value(settings).unwrap_or_default();
        let key = serde_json::to_string(&(
            "grid-ask-reuse-1",
            &self.question,
            &self.current_user,
            &self.database,
            self.explain,
            &self.snapshot,
            &self.policy,
            &settings,
        ))
        .unwrap_or_default();
        grid_core::audit::text_digest(&key)
    }
}

/// The curated examples offered for an ask, and how many of them the prompt may show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// The closest to the question first.
    pub candidates: Vec<Example>,
    /// Examples shown at most (the extension's `grid.examples`).
    pub most: u32,
    /// Bytes of their questions and SQL shown at most (`grid.examples_bytes`).
    pub bytes: u32,
}

/// A curated example (a row of the extension's `grid.examples`) as an ask uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Its id in the host's store.
    pub id: i64,
    pub question: String,
    pub sql: String,
}

impl Example {
    /// The digest the audit names it by: over its question and SQL (not its id), so that
    /// an auditor can tell whether the stored row still says what the model was shown.
    pub(crate) fn digest(&self) -> grid_core::audit::Digest32 {
        let pair = serde_json::json!([self.question, self.sql]).to_string();
        grid_core::audit::text_digest(&pair)
    }

    /// What the prompt renders.
    pub(crate) fn shown(&self) -> grid_core::prompt::Example {
        grid_core::prompt::Example {
            question: self.question.clone(),
            sql: self.sql.clone(),
        }
    }
}

/// The settings that shape one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskSettings {
    /// Which model (`grid_endpoint::EndpointSpec`'s forms).
    pub endpoint: Option<String>,
    /// The model the endpoint must serve, if any.
    pub model: Option<String>,
    pub max_tokens: u32,
    pub temperature: f64,
    /// One whole generation, end to end.
    pub timeout_ms: u64,
    pub audit: AuditLevel,
    #[serde(default)]
    pub ablation: Ablation,
    /// Fault injection for tests: `panic` makes the pipeline panic as a bug would.
    #[serde(default)]
    pub fault: Option<String>,
    /// Whether the host's judge sees the statement (the extension's superuser-only
    /// `grid.judge`); off, every statement is sealed with the verdict `off`.
    #[serde(default = "judge_on")]
    pub judge: bool,
    /// Whether the prompt teaches the model to decline (`CANNOT ANSWER 'reason'`,
    /// [`grid_core::prompt::DECLINE`]; the extension's superuser-only `grid.decline`, off
    /// by default). The grammar admits a decline either way; this changes only what the
    /// model is told, which the prompt artifact records. Left out of the JSON when off,
    /// so that the reuse key of an ask without it is what it was.
    #[serde(default, skip_serializing_if = "is_false")]
    pub decline: bool,
}

fn judge_on() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What the audit records of an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditLevel {
    /// Every step record and the seal of every generation: the log verifies and replays.
    Full,
    /// Nothing.
    Off,
}

impl AuditLevel {
    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            AuditLevel::Full => "full",
            AuditLevel::Off => "off",
        }
    }

    pub(crate) fn records(self) -> bool {
        self == AuditLevel::Full
    }
}

/// Levers switched off, to measure what each brings (the accuracy harness's arms). In
/// the extension only a superuser may set them (`grid.ablation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ablation {
    /// No mask: the same prompt and model, every non-special token and EOS allowed at
    /// every step; sealed in decode mode `unconstrained`.
    #[serde(default)]
    pub unconstrained: bool,
    /// No repair: an ask ends at the first refusal (the checker's or the judge's).
    #[serde(default)]
    pub no_repair: bool,
    /// Repair only by asking again with the reasons quoted back, never by rewinding
    /// ([`crate::rewind`]): what the rewind brings.
    #[serde(default)]
    pub(crate) prompt_repair: bool,
}

impl Ablation {
    /// The named arms: `none`, `no_repair`, `prompt_repair`, `unconstrained` (no mask
    /// and no repair: the model alone, the baseline an accuracy measurement compares
    /// with).
    pub fn named(name: &str) -> Option<Ablation> {
        match name {
            "none" => Some(Ablation::default()),
            "no_repair" => Some(Ablation {
                no_repair: true,
                ..Ablation::default()
            }),
            "prompt_repair" => Some(Ablation {
                prompt_repair: true,
                ..Ablation::default()
            }),
            "unconstrained" => Some(Ablation {
                unconstrained: true,
                no_repair: true,
                ..Ablation::default()
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> Ask {
        Ask {
            question: "how many staff".into(),
            snapshot: serde_json::json!({"relations": []}),
            session_user: "alice".into(),
            current_user: "analyst".into(),
            database: "db".into(),
            policy: Some(serde_json::json!({"verbs": ["select"]})),
            explain: false,
            settings: AskSettings {
                endpoint: Some("mock:scripted".into()),
                model: None,
                max_tokens: 64,
                temperature: 0.0,
                timeout_ms: 1000,
                audit: AuditLevel::Full,
                ablation: Ablation::default(),
                fault: None,
                judge: true,
                decline: false,
            },
            examples: Vec::new(),
            offered: None,
            parsed: None,
        }
    }

    #[test]
    fn the_reuse_key_tells_apart_what_shapes_the_answer_and_nothing_else() {
        let base = ask().reuse_key();
        let changed: Vec<fn(&mut Ask)> = vec![
            |a| a.question.push('?'),
            |a| a.current_user = "clerk".into(),
            |a| a.database = "other".into(),
            |a| a.explain = true,
            |a| a.snapshot = serde_json::json!({"relations": [1]}),
            |a| a.policy = None,
            |a| a.settings.temperature = 0.5,
            |a| a.settings.max_tokens = 65,
            |a| a.settings.endpoint = None,
            |a| a.settings.judge = false,
            |a| a.settings.decline = true,
        ];
        for (i, change) in changed.iter().enumerate() {
            let mut a = ask();
            change(&mut a);
            assert_ne!(a.reuse_key(), base, "change {i} kept the key");
        }
        let same: Vec<fn(&mut Ask)> = vec![
            |a| a.session_user = "bob".into(),
            |a| a.settings.timeout_ms = 9,
            |a| a.settings.fault = Some("panic".into()),
            |a| {
                a.examples = vec![Example {
                    id: 1,
                    question: "q".into(),
                    sql: "SELECT 1".into(),
                }]
            },
        ];
        for (i, change) in same.iter().enumerate() {
            let mut a = ask();
            change(&mut a);
            assert_eq!(a.reuse_key(), base, "change {i} changed the key");
        }
    }

    #[test]
    fn the_reuse_key_is_what_it_was_when_the_ask_was_copied_to_be_keyed() {
        // The key as it was made before it was serialized by reference: a stored
        // `ask_key` from an earlier version still finds its ask.
        let copied = |a: &Ask| {
            let settings = AskSettings {
                timeout_ms: 0,
                fault: None,
                ..a.settings.clone()
            };
            let key = serde_json::json!([
                "grid-ask-reuse-1",
                a.question,
                a.current_user,
                a.database,
                a.explain,
                a.snapshot,
                a.policy,
                settings,
            ]);
            grid_core::audit::text_digest(&key.to_string())
        };
        let mut a = ask();
        assert_eq!(a.reuse_key(), copied(&a));
        a.snapshot = serde_json::json!({"relations": [{"b": 1.5, "a": "\u{2028}é\"x"}]});
        a.policy = None;
        a.explain = true;
        assert_eq!(a.reuse_key(), copied(&a));
    }
}
