//! What binds an archived artifact's *content* to the audit chain: each artifact's
//! content digest ([`content_digest`]), and the generation's prompt artifact
//! ([`PromptRecord`]), which holds the prompt the model was shown and the content digests
//! of the four artifacts the seal's fingerprints name. The seal carries the prompt
//! artifact's own content digest (`SealMeta::prompt_digest`), so the seal chain binds the
//! prompt and, through it, every byte of every artifact of the generation.
//!
//! Why a second digest beside the fingerprints: a fingerprint says what an artifact
//! *means* to the masks (the lexicons fingerprint is over the words of the lexicons, not
//! over the snapshot they came from; the vocabulary's over its tokens), so an edit that
//! changes no mask (a table comment inside an archived snapshot, which only the prompt
//! shows) keeps the fingerprint. The content digest is over the stored content itself.
//!
//! Invariant (kept by `record`, checked by `grid.verify_audit()` and the
//! replays): for a seal with a prompt digest `d`, the prompt artifact stored under the
//! fingerprint `d[..16]` has content digest `d`, and the content digest of each artifact
//! the seal's fingerprints name is the one that prompt artifact lists for its kind.

use std::collections::BTreeMap;

use std::ops::Deref;
use std::sync::Arc;

use grid_core::audit::{artifact_digest, from_hex, to_hex, Digest32, Fingerprints};
use grid_core::prompt::Prompt;

use crate::request::Example;

/// The kinds of artifact a seal names: one per fingerprint, and the prompt, which the
/// seal's prompt digest names ([`crate::contents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArtifactKind {
    Grammar,
    Lexicons,
    Policy,
    Vocabulary,
    Prompt,
}

impl ArtifactKind {
    /// The kinds the seal's fingerprints name, in their order.
    pub const ALL: [ArtifactKind; 4] = [
        ArtifactKind::Grammar,
        ArtifactKind::Lexicons,
        ArtifactKind::Policy,
        ArtifactKind::Vocabulary,
    ];

    /// The spelling of `grid.artifacts.kind`.
    pub fn name(self) -> &'static str {
        match self {
            ArtifactKind::Grammar => "grammar",
            ArtifactKind::Lexicons => "lexicons",
            ArtifactKind::Policy => "policy",
            ArtifactKind::Vocabulary => "vocabulary",
            ArtifactKind::Prompt => "prompt",
        }
    }

    pub fn from_name(name: &str) -> Option<ArtifactKind> {
        ArtifactKind::ALL
            .into_iter()
            .chain([ArtifactKind::Prompt])
            .find(|k| k.name() == name)
    }

    /// The seal's fingerprint of this kind (none for the prompt, which the seal names by
    /// its prompt digest).
    pub fn of(self, f: &Fingerprints) -> Option<[u8; 16]> {
        match self {
            ArtifactKind::Grammar => Some(f.grammar),
            ArtifactKind::Lexicons => Some(f.lexicons),
            ArtifactKind::Policy => Some(f.policy),
            ArtifactKind::Vocabulary => Some(f.vocabulary),
            ArtifactKind::Prompt => None,
        }
    }
}

/// One artifact of a seal, addressed by the seal's fingerprint of its kind (the prompt by
/// the first 16 bytes of the seal's prompt digest): a document, or bytes (the
/// vocabulary). Its content is bound to the seal by its content digest
/// ([`crate::contents`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub kind: ArtifactKind,
    pub fingerprint: [u8; 16],
    pub content: Option<Vec<u8>>,
    pub content_json: Option<serde_json::Value>,
}

/// An artifact and its content digest ([`content_digest`]), taken once. A compiled
/// language's artifacts are built and digested at its first seal and shared by every
/// later one (`Compiled::artifacts`): the lexicons of a wide catalog are megabytes of
/// JSON, and digesting them per seal held up every other ask of the worker's loop.
///
/// Invariant: `digest == content_digest(&artifact)`; the fields are private so that only
/// [`DigestedArtifact::new`] and [`PromptRecord::digested`] make one.
#[derive(Debug, PartialEq)]
pub struct DigestedArtifact {
    artifact: Artifact,
    digest: Digest32,
}

impl DigestedArtifact {
    pub fn new(artifact: Artifact) -> Arc<DigestedArtifact> {
        let digest = content_digest(&artifact);
        Arc::new(DigestedArtifact { artifact, digest })
    }

    pub fn digest(&self) -> &Digest32 {
        &self.digest
    }

    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }
}

impl Deref for DigestedArtifact {
    type Target = Artifact;

    fn deref(&self) -> &Artifact {
        &self.artifact
    }
}

/// `v` as canonical JSON text: object keys sorted by their bytes, no whitespace,
/// strings escaped as serde_json escapes them, and a number that is a whole float
/// written as the integer it is. That is the form a document keeps through a
/// PostgreSQL `jsonb` column, which reorders keys and may rewrite a float such as
/// `1e15` as `1000000000000000`.
pub(crate) fn canonical_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&v.to_string()),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.push_str(&format!("{}", f as i64));
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&str, &Value> = map.iter().map(|(k, v)| (k.as_str(), v)).collect();
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::from(k).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

/// An artifact's content digest: [`artifact_digest`] over `len ‖ kind`, then the bytes
/// and the document, each as `u8 0` when absent or `u8 1 ‖ u64 length ‖ bytes` (the
/// document as [`canonical_json`]), lengths little-endian. The fingerprint is not part of
/// it (the prompt artifact's fingerprint is cut from it).
pub fn content_digest(a: &Artifact) -> Digest32 {
    let kind = a.kind.name().as_bytes();
    let json = a.content_json.as_ref().map(canonical_json);
    let kind_len = (kind.len() as u64).to_le_bytes();
    let mut parts: Vec<&[u8]> = vec![&kind_len, kind];
    let head = |v: Option<&[u8]>| -> Vec<u8> {
        match v {
            None => vec![0],
            Some(b) => {
                let mut h = vec![1];
                h.extend_from_slice(&(b.len() as u64).to_le_bytes());
                h
            }
        }
    };
    let content_head = head(a.content.as_deref());
    let json_head = head(json.as_deref().map(str::as_bytes));
    parts.push(&content_head);
    if let Some(c) = &a.content {
        parts.push(c);
    }
    parts.push(&json_head);
    if let Some(j) = &json {
        parts.push(j.as_bytes());
    }
    artifact_digest(&parts)
}

/// The key of a prompt artifact: the first 16 bytes of its content digest.
pub fn prompt_fingerprint(digest: &Digest32) -> [u8; 16] {
    let mut fp = [0u8; 16];
    fp.copy_from_slice(&digest[..16]);
    fp
}

/// A generation's prompt artifact, as a document:
///
/// ```text
/// {"prompt": {"system": "...", "user": "...", "rendering": "flat", "schema_bytes": 12000}
///            (or null: the model was never asked),
///  "artifacts": {"grammar": "<64 hex>", "lexicons": "…", "policy": "…", "vocabulary": "…"},
///  "examples": [{"id": 7, "digest": "<64 hex>", "question": "…", "sql": "…"}, …],
///  "decline": true}
/// ```
///
/// `examples` (absent when the prompt showed none, so that records from before keep their
/// digests) are the curated examples the prompt showed, in order, each with its
/// [`crate::request::Example::digest`]: the seal binds them through its prompt digest, and
/// a replay renders the prompt again from them.
///
/// `decline` (absent when false, likewise) says that the prompt taught the decline
/// ([`grid_core::prompt::Prompt::teaching_decline`], the ask's setting): the seal binds it,
/// and a replay renders the prompt again with it.
///
/// `rendering` names how the prompt became tokens ([`Rendering::name`]); `schema_bytes` is
/// the DDL budget it was rendered with, so that a replay can render it again from the
/// archived snapshot; `artifacts` are the [`content_digest`]s of the seal's artifacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptRecord {
    /// The prompt and the DDL budget it was rendered with.
    pub prompt: Option<(Prompt, usize)>,
    /// How the prompt became token ids.
    pub rendering: Rendering,
    /// The content digest of each fingerprinted artifact, by kind.
    pub artifacts: BTreeMap<&'static str, Digest32>,
    /// The curated examples the prompt showed, in order.
    pub examples: Vec<Example>,
    /// Whether the prompt taught the decline.
    pub decline: bool,
}

/// How a prompt became token ids, as its prompt artifact records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// [`Prompt::flat`] through the vocabulary's encoder.
    Flat,
    /// The system and user messages through the endpoint's model's chat template and
    /// tokenizer.
    ChatTemplate,
}

impl Rendering {
    pub(crate) const ALL: [Rendering; 2] = [Rendering::Flat, Rendering::ChatTemplate];

    /// The spelling of the prompt artifact's `rendering`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Rendering::Flat => "flat",
            Rendering::ChatTemplate => "chat-template",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Rendering> {
        Rendering::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl PromptRecord {
    /// The record of `prompt` (rendered with a DDL budget of `schema_bytes`) over
    /// `artifacts` (the fingerprinted ones; others are ignored).
    pub(crate) fn new(
        prompt: Option<(&Prompt, usize)>,
        rendering: Rendering,
        artifacts: &[Arc<DigestedArtifact>],
        examples: &[Example],
    ) -> PromptRecord {
        PromptRecord {
            examples: examples.to_vec(),
            decline: false,
            prompt: prompt.map(|(p, n)| (p.clone(), n)),
            rendering,
            artifacts: artifacts
                .iter()
                .filter(|a| ArtifactKind::ALL.contains(&a.kind))
                .map(|a| (a.kind.name(), a.digest))
                .collect(),
        }
    }

    /// The document the artifact stores.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "prompt": self.prompt.as_ref().map(|(p, n)| serde_json::json!({
                "system": p.system,
                "user": p.user,
                "rendering": self.rendering.name(),
                "schema_bytes": n,
            })),
            "artifacts": self
                .artifacts
                .iter()
                .map(|(k, d)| ((*k).to_string(), serde_json::Value::from(to_hex(d))))
                .collect::<serde_json::Map<_, _>>(),
        });
        if !self.examples.is_empty() {
            doc["examples"] = self
                .examples
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "id": e.id,
                        "digest": to_hex(&e.digest()),
                        "question": e.question,
                        "sql": e.sql,
                    })
                })
                .collect();
        }
        if self.decline {
            doc["decline"] = true.into();
        }
        doc
    }

    /// The artifact, and its content digest (the seal's prompt digest).
    pub(crate) fn artifact(&self) -> (Artifact, Digest32) {
        let mut a = Artifact {
            kind: ArtifactKind::Prompt,
            fingerprint: [0; 16],
            content: None,
            content_json: Some(self.to_json()),
        };
        let digest = content_digest(&a);
        a.fingerprint = prompt_fingerprint(&digest);
        (a, digest)
    }

    /// [`PromptRecord::artifact`] with its digest kept: the digest is taken once (the
    /// fingerprint cut from it is no part of what it covers, so the pair stays true).
    pub(crate) fn digested(&self) -> Arc<DigestedArtifact> {
        let (artifact, digest) = self.artifact();
        Arc::new(DigestedArtifact { artifact, digest })
    }

    /// The record a prompt artifact holds (the inverse of [`PromptRecord::to_json`]).
    pub(crate) fn parse(a: &Artifact) -> Result<PromptRecord, String> {
        let doc = a
            .content_json
            .as_ref()
            .ok_or("the prompt artifact has no document")?;
        let mut rendering = Rendering::Flat;
        let prompt = match &doc["prompt"] {
            serde_json::Value::Null => None,
            p => {
                let text = |k: &str| {
                    p[k].as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("the prompt artifact's prompt has no {k}"))
                };
                let Some(r) = p["rendering"].as_str().and_then(Rendering::from_name) else {
                    return Err(format!(
                        "the prompt artifact's rendering {} is none of {:?}",
                        p["rendering"],
                        Rendering::ALL.map(Rendering::name)
                    ));
                };
                rendering = r;
                let n = p["schema_bytes"]
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or("the prompt artifact's prompt has no schema_bytes")?;
                Some((
                    Prompt {
                        system: text("system")?,
                        user: text("user")?,
                    },
                    n,
                ))
            }
        };
        let mut artifacts = BTreeMap::new();
        for kind in ArtifactKind::ALL {
            let hex = doc["artifacts"][kind.name()].as_str().ok_or_else(|| {
                format!(
                    "the prompt artifact lists no content digest for the {} artifact",
                    kind.name()
                )
            })?;
            let d = from_hex::<32>(hex).map_err(|e| {
                format!(
                    "the prompt artifact's digest of the {} artifact: {e}",
                    kind.name()
                )
            })?;
            artifacts.insert(kind.name(), d);
        }
        let mut examples = Vec::new();
        for e in doc["examples"].as_array().into_iter().flatten() {
            let (Some(id), Some(question), Some(sql)) =
                (e["id"].as_i64(), e["question"].as_str(), e["sql"].as_str())
            else {
                return Err(format!("the prompt artifact's example {e} is incomplete"));
            };
            let example = Example {
                id,
                question: question.to_string(),
                sql: sql.to_string(),
            };
            if e["digest"].as_str() != Some(to_hex(&example.digest()).as_str()) {
                return Err(format!(
                    "the prompt artifact's example {id} does not have the digest it lists"
                ));
            }
            examples.push(example);
        }
        let decline = match &doc["decline"] {
            serde_json::Value::Null => false,
            serde_json::Value::Bool(true) => true,
            other => {
                return Err(format!(
                    "the prompt artifact's decline {other} is not true (absent when false)"
                ))
            }
        };
        Ok(PromptRecord {
            prompt,
            rendering,
            artifacts,
            examples,
            decline,
        })
    }
}

/// An archived artifact whose content is not what its seal bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Altered {
    pub kind: ArtifactKind,
    pub fingerprint: [u8; 16],
    pub why: String,
}

impl std::fmt::Display for Altered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} artifact {} was altered: {}",
            self.kind.name(),
            to_hex(&self.fingerprint),
            self.why
        )
    }
}

/// Checks that the prompt artifact `prompt` has the sealed `prompt_digest` and that each
/// artifact `get` returns for a fingerprinted kind has the content digest the prompt
/// artifact lists (an artifact `get` does not return is not checked: absence is the
/// caller's finding). Returns the prompt record.
pub fn check_bound<'a>(
    prompt_digest: &Digest32,
    prompt: &Artifact,
    get: impl Fn(ArtifactKind) -> Option<&'a Artifact>,
) -> Result<PromptRecord, Altered> {
    let found = content_digest(prompt);
    if found != *prompt_digest {
        return Err(Altered {
            kind: ArtifactKind::Prompt,
            fingerprint: prompt.fingerprint,
            why: format!(
                "its content digest is {}, the seal's prompt_digest {}",
                to_hex(&found),
                to_hex(prompt_digest)
            ),
        });
    }
    let record = PromptRecord::parse(prompt).map_err(|why| Altered {
        kind: ArtifactKind::Prompt,
        fingerprint: prompt.fingerprint,
        why,
    })?;
    for kind in ArtifactKind::ALL {
        let Some(a) = get(kind) else { continue };
        check_listed(&record, a)?;
    }
    Ok(record)
}

/// Checks that `a` has the content digest `record` lists for its kind.
pub fn check_listed(record: &PromptRecord, a: &Artifact) -> Result<(), Altered> {
    check_digest(record, a, &content_digest(a))
}

/// Checks that `found`, the content digest of `a`, is the one `record` lists for its
/// kind (for a caller that keeps digests it computed once).
pub(crate) fn check_digest(
    record: &PromptRecord,
    a: &Artifact,
    found: &Digest32,
) -> Result<(), Altered> {
    let listed = record.artifacts.get(a.kind.name());
    if listed != Some(found) {
        return Err(Altered {
            kind: a.kind,
            fingerprint: a.fingerprint,
            why: format!(
                "its content digest is {}, the sealed prompt artifact lists {}",
                to_hex(found),
                listed.map_or("none".to_string(), |d| to_hex(d))
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(v: serde_json::Value) -> Artifact {
        Artifact {
            kind: ArtifactKind::Lexicons,
            fingerprint: [1; 16],
            content: None,
            content_json: Some(v),
        }
    }

    #[test]
    fn canonical_json_is_what_jsonb_keeps() {
        // jsonb orders keys by length, then bytes, and prints 1e15 as an integer.
        let written = serde_json::json!({"zeta": 1e15, "a": [1.5, true, null], "é": "x\"y"});
        let stored: serde_json::Value = serde_json::from_str(
            r#"{"a": [1.5, true, null], "é": "x\"y", "zeta": 1000000000000000}"#,
        )
        .expect("json");
        assert_eq!(canonical_json(&written), canonical_json(&stored));
        assert_eq!(
            canonical_json(&written),
            r#"{"a":[1.5,true,null],"zeta":1000000000000000,"é":"x\"y"}"#
        );
        assert_ne!(
            canonical_json(&serde_json::json!({"a": 1})),
            canonical_json(&serde_json::json!({"a": "1"}))
        );
    }

    #[test]
    fn the_content_digest_covers_kind_bytes_and_document_unambiguously() {
        let a = doc(serde_json::json!({"comment": "x"}));
        let d = content_digest(&a);
        assert_eq!(
            d,
            content_digest(&Artifact {
                fingerprint: [2; 16],
                ..a.clone()
            })
        );
        assert_ne!(d, content_digest(&doc(serde_json::json!({"comment": "y"}))));
        assert_ne!(
            d,
            content_digest(&Artifact {
                kind: ArtifactKind::Grammar,
                ..a.clone()
            })
        );
        let bytes = |c: Option<&[u8]>, j: Option<serde_json::Value>| {
            content_digest(&Artifact {
                kind: ArtifactKind::Vocabulary,
                fingerprint: [0; 16],
                content: c.map(<[u8]>::to_vec),
                content_json: j,
            })
        };
        // Bytes that spell a document are not that document.
        assert_ne!(
            bytes(Some(b"1"), None),
            bytes(None, Some(serde_json::json!(1)))
        );
        assert_ne!(bytes(Some(b""), None), bytes(None, None));
    }

    /// One artifact of each fingerprinted kind.
    fn every_kind() -> Vec<Arc<DigestedArtifact>> {
        ArtifactKind::ALL
            .into_iter()
            .map(|kind| {
                DigestedArtifact::new(Artifact {
                    kind,
                    ..doc(serde_json::json!({ "k": kind.name() }))
                })
            })
            .collect()
    }

    #[test]
    fn a_prompt_record_reads_back_and_lists_every_fingerprinted_kind() {
        let arts = every_kind();
        let prompt = Prompt {
            system: "s".into(),
            user: "u".into(),
        };
        let record = PromptRecord::new(Some((&prompt, 100)), Rendering::Flat, &arts, &[]);
        let (a, digest) = record.artifact();
        assert_eq!(a.fingerprint, prompt_fingerprint(&digest));
        assert_eq!(PromptRecord::parse(&a), Ok(record.clone()));
        let get = |k: ArtifactKind| arts.iter().find(|a| a.kind == k).map(|a| a.artifact());
        assert_eq!(check_bound(&digest, &a, get), Ok(record.clone()));
        // An artifact with other content, and a record without one of the kinds.
        let other = doc(serde_json::json!({"k": "other"}));
        assert_eq!(
            check_listed(&record, &other).map_err(|e| e.kind),
            Err(ArtifactKind::Lexicons)
        );
        let mut short = record.to_json();
        short["artifacts"]
            .as_object_mut()
            .map(|m| m.remove("policy"));
        let short = Artifact {
            content_json: Some(short),
            ..a.clone()
        };
        assert!(PromptRecord::parse(&short).is_err());
        assert_eq!(
            check_bound(&digest, &short, get).map_err(|e| e.kind),
            Err(ArtifactKind::Prompt)
        );
    }

    #[test]
    fn a_prompt_record_says_whether_it_taught_the_decline_and_the_digest_binds_it() {
        let prompt = Prompt {
            system: "s".into(),
            user: "u".into(),
        };
        let arts = every_kind();
        let plain = PromptRecord::new(Some((&prompt, 100)), Rendering::Flat, &arts, &[]);
        assert!(plain.to_json().get("decline").is_none(), "absent when off");
        let taught = PromptRecord {
            decline: true,
            ..plain.clone()
        };
        let (a, digest) = taught.artifact();
        assert_eq!(
            a.content_json.as_ref().map(|d| &d["decline"]),
            Some(&true.into())
        );
        assert_ne!(
            digest,
            plain.artifact().1,
            "the seal's prompt digest binds it"
        );
        assert_eq!(PromptRecord::parse(&a), Ok(taught));
        let mut odd = a.content_json.clone().unwrap_or_default();
        odd["decline"] = false.into();
        let odd = Artifact {
            content_json: Some(odd),
            ..a
        };
        assert!(
            PromptRecord::parse(&odd).is_err(),
            "false is written as absent"
        );
    }

    #[test]
    fn renderings_keep_the_spellings_sealed_records_hold() {
        assert_eq!(
            Rendering::ALL.map(Rendering::name),
            ["flat", "chat-template"]
        );
        for r in Rendering::ALL {
            assert_eq!(Rendering::from_name(r.name()), Some(r));
        }
        assert_eq!(Rendering::from_name("chat"), None);
    }

    #[test]
    fn a_prompt_record_lists_its_examples_by_id_and_digest_and_an_edit_is_found() {
        let prompt = Prompt {
            system: "s".into(),
            user: "u".into(),
        };
        let arts = every_kind();
        let plain = PromptRecord::new(Some((&prompt, 100)), Rendering::Flat, &arts, &[]);
        assert!(
            plain.to_json().get("examples").is_none(),
            "absent when none"
        );
        let examples = [
            Example {
                id: 7,
                question: "how many".into(),
                sql: "SELECT count(*) FROM t".into(),
            },
            Example {
                id: 3,
                question: "names".into(),
                sql: "SELECT name FROM t".into(),
            },
        ];
        let record = PromptRecord::new(Some((&prompt, 100)), Rendering::Flat, &arts, &examples);
        let doc = record.to_json();
        assert_eq!(doc["examples"][0]["id"], 7);
        assert_eq!(
            doc["examples"][1]["digest"],
            to_hex(&examples[1].digest()).as_str()
        );
        let (a, digest) = record.artifact();
        assert_ne!(
            digest,
            plain.artifact().1,
            "the seal's prompt digest binds them"
        );
        assert_eq!(PromptRecord::parse(&a), Ok(record.clone()));
        // The digest is over the question and the SQL: another text, another digest.
        let mut edited = doc.clone();
        edited["examples"][0]["sql"] = "SELECT * FROM salaries".into();
        let edited = Artifact {
            content_json: Some(edited),
            ..a.clone()
        };
        assert!(PromptRecord::parse(&edited)
            .unwrap_err()
            .contains("example 7 does not have the digest"));
        assert_ne!(content_digest(&edited), digest);
    }
}
