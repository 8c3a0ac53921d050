//! A generation's language and vocabulary rebuilt from its artifacts (the inverse of
//! [`crate::record::artifacts`]), for `grid.replay()` and `grid audit replay`: the masks
//! of a generation are recomputed from what its seal names, long after the schema or the
//! grants have changed. [`ArtifactSet`] holds artifacts outside a database (the file
//! beside a `grid generate --audit-out` log), [`replay_log`] replays a whole log from
//! one. Before masks are replayed, a seal's artifacts are checked against the contents it
//! bound ([`ArtifactSet::check_bound`], [`crate::contents`]), and the archived prompt
//! against the archived snapshot ([`check_rendering`]).

use std::collections::HashMap;
use std::sync::Arc;

use grid_core::audit::{
    from_hex, replay, to_hex, Entry, Fingerprints, ReplayError, ReplaySummary, Seal, VerifyOptions,
};
use grid_core::decode::Recomputer;
use grid_core::prompt::question_prompt_with;

use crate::contents::{check_bound, prompt_fingerprint, PromptRecord};
use crate::contents::{Artifact, ArtifactKind};
use grid_core::catalog::CatalogSnapshot;
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, Language, Policy};
use grid_vocab::Vocabulary;

/// What a replay recomputes a generation's masks with.
pub struct Replayable {
    /// The role's catalog snapshot as the generation saw it (the checker's input too).
    pub snapshot: CatalogSnapshot,
    pub language: Language,
    pub vocab: Vocabulary,
    pub trie: Arc<TokenTrie>,
}

/// Rebuilds the replay inputs from the grammar and lexicons documents and the vocabulary
/// bytes of a seal's artifacts; the error says why it cannot be done (a generation of
/// another dialect version, a malformed artifact).
pub fn from_artifacts(
    grammar: &serde_json::Value,
    lexicons: &serde_json::Value,
    vocabulary: &[u8],
) -> Result<Replayable, String> {
    // The dialect is this version's own: a generation written by another grammar
    // version cannot be replayed by it, and says so.
    let dialect = Dialect::generated().map_err(|e| format!("the dialect does not build: {e}"))?;
    let sealed = grammar["dialect_fingerprint"].as_str().unwrap_or_default();
    if sealed != to_hex(&dialect.fingerprint) {
        return Err(format!(
            "the generation was written with dialect {sealed}, this version of grid_pg has {}",
            to_hex(&dialect.fingerprint)
        ));
    }
    let snapshot: CatalogSnapshot = serde_json::from_value(lexicons["snapshot"].clone())
        .map_err(|e| format!("lexicons artifact: {e}"))?;
    let base = Policy::from_json(&lexicons["base_policy"].to_string())
        .map_err(|e| format!("lexicons artifact: {e}"))?;
    let language = snapshot
        .language(dialect, &base)
        .map_err(|e| format!("the language does not build: {e}"))?;
    let vocab = std::str::from_utf8(vocabulary)
        .map_err(|e| e.to_string())
        .and_then(|t| Vocabulary::from_served_json(t).map_err(|e| e.to_string()))
        .map_err(|e| format!("vocabulary artifact: {e}"))?;
    let trie = TokenTrie::shared(&vocab).map_err(|e| format!("vocabulary artifact: {e}"))?;
    Ok(Replayable {
        snapshot,
        language,
        vocab,
        trie,
    })
}

/// Artifacts by kind and fingerprint, each kept once.
#[derive(Debug, Clone, Default)]
pub struct ArtifactSet {
    by: HashMap<(ArtifactKind, [u8; 16]), Artifact>,
}

impl ArtifactSet {
    /// Adds `a` unless one of its kind and fingerprint is there (the same content).
    pub fn insert(&mut self, a: Artifact) {
        self.by.entry((a.kind, a.fingerprint)).or_insert(a);
    }

    pub fn get(&self, kind: ArtifactKind, fingerprint: &[u8; 16]) -> Option<&Artifact> {
        self.by.get(&(kind, *fingerprint))
    }

    pub fn len(&self) -> usize {
        self.by.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }

    /// As a JSON array: `{"kind", "fingerprint" (hex), "content" (UTF-8 text, the
    /// vocabulary) or "content_json"}` per artifact, sorted.
    pub fn to_json(&self) -> serde_json::Value {
        let mut items: Vec<&Artifact> = self.by.values().collect();
        items.sort_by_key(|a| (a.kind.name(), a.fingerprint));
        serde_json::Value::Array(
            items
                .into_iter()
                .map(|a| {
                    serde_json::json!({
                        "kind": a.kind.name(),
                        "fingerprint": to_hex(&a.fingerprint),
                        "content": a.content.as_ref().map(|c| String::from_utf8_lossy(c).into_owned()),
                        "content_json": a.content_json,
                    })
                })
                .collect(),
        )
    }

    /// The inverse of [`ArtifactSet::to_json`].
    pub fn from_json(doc: &serde_json::Value) -> Result<ArtifactSet, String> {
        let mut set = ArtifactSet::default();
        for (i, item) in doc
            .as_array()
            .ok_or("an artifact list is a JSON array")?
            .iter()
            .enumerate()
        {
            let kind = item["kind"]
                .as_str()
                .and_then(ArtifactKind::from_name)
                .ok_or_else(|| format!("artifact {i}: unknown kind {}", item["kind"]))?;
            let fingerprint = from_hex::<16>(item["fingerprint"].as_str().unwrap_or_default())
                .map_err(|e| format!("artifact {i}: fingerprint: {e}"))?;
            set.insert(Artifact {
                kind,
                fingerprint,
                content: item["content"].as_str().map(|t| t.as_bytes().to_vec()),
                content_json: Some(item["content_json"].clone()).filter(|v| !v.is_null()),
            });
        }
        Ok(set)
    }

    /// The replay inputs of a seal with `fingerprints`.
    pub(crate) fn inputs(&self, f: &Fingerprints) -> Result<Replayable, String> {
        let missing = |k: ArtifactKind| {
            format!(
                "the {} artifact {} is missing",
                k.name(),
                to_hex(&k.of(f).unwrap_or_default())
            )
        };
        let doc = |k: ArtifactKind| {
            k.of(f)
                .and_then(|fp| self.get(k, &fp))
                .and_then(|a| a.content_json.as_ref())
                .ok_or_else(|| missing(k))
        };
        let vocabulary = self
            .get(ArtifactKind::Vocabulary, &f.vocabulary)
            .and_then(|a| a.content.as_deref())
            .ok_or_else(|| missing(ArtifactKind::Vocabulary))?;
        from_artifacts(
            doc(ArtifactKind::Grammar)?,
            doc(ArtifactKind::Lexicons)?,
            vocabulary,
        )
    }

    /// Whether the artifacts of `seal` are the ones it bound: its prompt artifact has the
    /// sealed prompt digest, and every artifact its fingerprints name has the content
    /// digest that prompt artifact lists. A seal without a prompt digest (written before
    /// prompts were sealed) binds no content: `Ok(None)`.
    pub fn check_bound(&self, seal: &Seal) -> Result<Option<PromptRecord>, String> {
        let Some(digest) = seal.meta.prompt_digest else {
            return Ok(None);
        };
        let fp = prompt_fingerprint(&digest);
        let prompt = self
            .get(ArtifactKind::Prompt, &fp)
            .ok_or_else(|| format!("the prompt artifact {} is missing", to_hex(&fp)))?;
        let f = &seal.fingerprints;
        check_bound(&digest, prompt, |k| k.of(f).and_then(|fp| self.get(k, &fp)))
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// Whether `shown`, the prompt a generation's artifact says the model was shown, is the
/// one the archived `snapshot` renders for `question`: equal to it for a first attempt;
/// for a repair (`repair`), beginning with its schema and question (the rejected
/// statement and the reasons follow, which the snapshot does not render). A prompt that
/// taught the decline (its record says so) is rendered teaching it. So a snapshot that
/// replays the masks is also the one the prompt showed the model.
pub fn check_rendering(
    shown: &PromptRecord,
    snapshot: &CatalogSnapshot,
    dialect: &Dialect,
    question: &str,
    repair: bool,
) -> Result<(), String> {
    let Some((prompt, schema_bytes)) = &shown.prompt else {
        return Err("the prompt artifact holds no prompt, yet the model was asked".into());
    };
    let reserved = |w: &str| dialect.is_reserved(w);
    let examples = crate::flow::shown_examples(&shown.examples);
    let rendered = question_prompt_with(snapshot, question, *schema_bytes, &examples, &reserved)
        .map_err(|e| format!("the question does not render a prompt: {e}"))?;
    let rendered = if shown.decline {
        rendered.teaching_decline()
    } else {
        rendered
    };
    let same = if repair {
        prompt.user.starts_with(&rendered.user) && prompt.system.starts_with(&rendered.system)
    } else {
        *prompt == rendered
    };
    if same {
        Ok(())
    } else {
        Err(
            "the archived prompt is not the one the archived catalog snapshot renders for              the question: the snapshot or the prompt was altered"
                .into(),
        )
    }
}

/// Verifies `entries` and recomputes every step of every sealed generation from the
/// artifacts its seal names (each set of inputs rebuilt once).
pub fn replay_log(
    entries: &[Entry],
    artifacts: &ArtifactSet,
    opts: &VerifyOptions,
) -> Result<ReplaySummary, ReplayError> {
    let mut inputs: HashMap<Fingerprints, Result<Replayable, String>> = HashMap::new();
    for e in entries {
        if let Entry::Seal(s) = e {
            if s.steps > 0 {
                inputs
                    .entry(s.fingerprints)
                    .or_insert_with(|| artifacts.inputs(&s.fingerprints));
            }
        }
    }
    // A seal's artifacts must be the ones it bound before its masks are replayed.
    let mut bound: HashMap<u64, String> = HashMap::new();
    for e in entries {
        if let Entry::Seal(s) = e {
            if let Err(why) = artifacts.check_bound(s) {
                bound.insert(s.generation, why);
            }
        }
    }
    let mut recomputers: HashMap<Fingerprints, Recomputer<'_>> = inputs
        .iter()
        .filter_map(|(f, r)| {
            let r = r.as_ref().ok()?;
            Some((*f, Recomputer::new(r.trie.clone(), &r.vocab)))
        })
        .collect();
    replay(entries, opts, &mut |ctx| {
        if let Some(why) = bound.get(&ctx.generation) {
            return Err(why.clone().into());
        }
        let f = ctx.seal.fingerprints;
        let language = match inputs.get(&f) {
            Some(Ok(r)) => &r.language,
            Some(Err(e)) => return Err(e.clone().into()),
            None => return Err("no artifacts for the generation".into()),
        };
        let rc = recomputers
            .get_mut(&f)
            .ok_or("no artifacts for the generation")?;
        rc.recompute(language, ctx)
    })
}
