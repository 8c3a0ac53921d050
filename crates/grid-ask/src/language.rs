//! A role's compiled language, and the cache of them: keyed by (catalog snapshot
//! fingerprint, base policy, vocabulary). The snapshot is taken as the caller at every ask,
//! so any DDL, GRANT or REVOKE changes the key before the next ask: nothing to invalidate.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use grid_core::audit::Fingerprints;
use grid_core::cache::MaskCache;
use grid_core::catalog::{CatalogError, CatalogSnapshot};
use grid_core::decode::fingerprints;
use grid_core::prompt::SchemaIndex;
use grid_core::reserve::ReserveTable;
use grid_core::{Dialect, Language, Policy};
use serde::Deserialize;

use crate::contents::DigestedArtifact;
use crate::failure::{Failure, FailureKind};
use crate::models::VocabState;
use crate::request::{Ask, Parsed};

/// Compiled languages kept.
const LANGUAGES_KEPT: usize = 64;

/// A role's compiled language over one vocabulary.
pub struct Compiled {
    pub snapshot: CatalogSnapshot,
    /// The role's base policy, before its grants narrow it.
    pub base: Policy,
    /// Shared with every other vocabulary's compilation of it ([`role_language`]).
    pub language: Arc<Language>,
    pub reserve: ReserveTable,
    /// What choosing the relations of its prompts reads of the snapshot.
    pub schema_index: SchemaIndex,
    /// What the seals of its generations record.
    pub fingerprints: Fingerprints,
    /// The artifacts its seals name, digested, made at its first seal
    /// (`record::artifacts`).
    pub artifacts: OnceLock<Vec<Arc<DigestedArtifact>>>,
}

/// The key of a compiled language.
type LanguageKey = ([u8; 16], String, String);

/// The most recently used languages, most recent first (see the module documentation).
#[derive(Default)]
pub struct Languages {
    kept: VecDeque<(LanguageKey, Arc<Compiled>)>,
}

impl Languages {
    /// The language of `ask`'s role over `vocab`, compiled unless kept.
    pub fn compile(
        &mut self,
        dialect: &Arc<Dialect>,
        ask: &Ask,
        vocab: &VocabState,
        cache: &MaskCache,
    ) -> Result<Arc<Compiled>, Failure> {
        let parsed = parsed_of(ask);
        let (snapshot, base, snapshot_fingerprint) = parsed.parts()?;
        let key: LanguageKey = (
            *snapshot_fingerprint,
            base.canonical_json(),
            vocab.vocab.fingerprint().to_string(),
        );
        if let Some(pos) = self.kept.iter().position(|(k, _)| *k == key) {
            if let Some(hit) = self.kept.remove(pos) {
                let compiled = hit.1.clone();
                self.kept.push_front(hit);
                return Ok(compiled);
            }
        }
        let language = role_language(dialect, snapshot, snapshot_fingerprint, base)?;
        let reserve = ReserveTable::build(&language, &vocab.speller);
        // The walks every statement's first masks share, done before the first token is
        // asked for rather than on it (no mask changes).
        cache.warm(&language, &vocab.trie);
        let fingerprints = fingerprints(&language, vocab.vocab.fingerprint());
        let schema_index = SchemaIndex::of(snapshot, &|w: &str| dialect.is_reserved(w));
        let compiled = Arc::new(Compiled {
            snapshot: snapshot.clone(),
            base: base.clone(),
            language,
            reserve,
            schema_index,
            fingerprints,
            artifacts: OnceLock::new(),
        });
        self.kept.push_front((key, compiled.clone()));
        self.kept.truncate(LANGUAGES_KEPT);
        Ok(compiled)
    }
}

/// The snapshot (validated) and the base policy an ask is compiled from.
pub fn parse(ask: &Ask) -> Result<(CatalogSnapshot, Policy), Failure> {
    parse_parts(&ask.snapshot, ask.policy.as_ref(), &ask.current_user)
}

/// [`parse`] of `ask`, with the snapshot's fingerprint.
fn parsed(ask: &Ask) -> Parsed {
    Parsed(Arc::new(parse(ask).map(|(snapshot, base)| {
        let fingerprint = snapshot.fingerprint();
        (snapshot, base, fingerprint)
    })))
}

/// `ask`'s parts as [`prepare`] read them, or read now when it did not.
fn parsed_of(ask: &Ask) -> Parsed {
    ask.parsed.clone().unwrap_or_else(|| parsed(ask))
}

/// Reads `ask`'s snapshot and policy into [`Ask::parsed`], where the ask arrives, so that
/// neither the pipeline nor the vetting of its examples ([`for_ask`]) reads them again.
pub fn prepare(ask: &mut Ask) {
    ask.parsed = Some(parsed(ask));
}

/// [`for_role`] of an ask's own snapshot and policy, as [`prepare`] read them: the
/// parts, and the role's language over the process's dialect for generated SQL.
pub fn for_ask(ask: &Ask) -> Result<(Parsed, Arc<Language>), Failure> {
    let parsed = parsed_of(ask);
    let (snapshot, base, fingerprint) = parsed.parts()?;
    let language = role_language(&generated_dialect()?, snapshot, fingerprint, base)?;
    Ok((parsed, language))
}

/// The process's dialect for generated SQL.
fn generated_dialect() -> Result<Arc<Dialect>, Failure> {
    Dialect::generated()
        .map_err(|e| Failure::internal(format!("the SQL dialect grammar does not build: {e}")))
}

/// [`parse`] of a snapshot and a policy as an ask carries them, for role `role`.
pub fn parse_parts(
    snapshot: &serde_json::Value,
    policy: Option<&serde_json::Value>,
    role: &str,
) -> Result<(CatalogSnapshot, Policy), Failure> {
    // Read from the document in place: a wide catalog's is megabytes, not worth a copy.
    let snapshot: CatalogSnapshot = CatalogSnapshot::deserialize(snapshot)
        .map_err(CatalogError::from)
        .and_then(|s: CatalogSnapshot| s.validate().map(|()| s))
        .map_err(|e| Failure::internal(format!("catalog snapshot: {e}")))?;
    let base = match policy {
        None => Policy::default(),
        Some(p) => Policy::from_json(&p.to_string()).map_err(|e| {
            Failure::new(
                FailureKind::InvalidValue,
                format!("the grid.policy row of role {role:?} cannot be used: {e}"),
            )
        })?,
    };
    Ok((snapshot, base))
}

/// The snapshot (validated) and the language of the role whose snapshot and policy these
/// are (as an ask carries them), over the process's dialect for generated SQL: what a
/// host checks a statement against outside an ask.
pub fn for_role(
    snapshot: &serde_json::Value,
    policy: Option<&serde_json::Value>,
    role: &str,
) -> Result<(CatalogSnapshot, Arc<Language>), Failure> {
    let (snapshot, base) = parse_parts(snapshot, policy, role)?;
    let language = role_language(
        &generated_dialect()?,
        &snapshot,
        &snapshot.fingerprint(),
        &base,
    )?;
    Ok((snapshot, language))
}

/// The key of a role's language: the dialect's, the snapshot's and the policy's
/// fingerprints (the vocabulary plays no part in it).
type RoleKey = ([u8; 16], [u8; 16], String);

/// The role languages this process keeps, most recent first: every vocabulary's
/// [`Compiled`] and the host's vetting of curated examples (`examples`) share
/// them, so that a role's language is built once, by whichever needs it first. The lock
/// is held to look up and to insert, never while a language builds.
static ROLE_LANGUAGES: Mutex<VecDeque<(RoleKey, Arc<Language>)>> = Mutex::new(VecDeque::new());

/// The language of the role whose snapshot and base policy these are, built unless kept.
/// `fingerprint` is the snapshot's ([`CatalogSnapshot::fingerprint`]), taken once where it
/// was read: at tens of thousands of columns it is not free.
pub fn role_language(
    dialect: &Arc<Dialect>,
    snapshot: &CatalogSnapshot,
    fingerprint: &[u8; 16],
    base: &Policy,
) -> Result<Arc<Language>, Failure> {
    let key: RoleKey = (dialect.fingerprint, *fingerprint, base.canonical_json());
    let kept = || {
        ROLE_LANGUAGES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    {
        let mut kept = kept();
        if let Some(pos) = kept.iter().position(|(k, _)| *k == key) {
            if let Some(hit) = kept.remove(pos) {
                let language = hit.1.clone();
                kept.push_front(hit);
                return Ok(language);
            }
        }
    }
    let language = Arc::new(
        snapshot
            .language(dialect.clone(), base)
            .map_err(|e| match e {
                CatalogError::NothingGranted { .. } => Failure::new(
                    FailureKind::NothingGranted,
                    format!("{e}: GRANT it SELECT (or INSERT, UPDATE, DELETE) on a table first"),
                ),
                other => Failure::internal(format!("the role's language does not build: {other}")),
            })?,
    );
    let mut kept = kept();
    // Another thread may have built it meanwhile: the first one kept stays.
    if let Some((_, first)) = kept.iter().find(|(k, _)| *k == key) {
        return Ok(first.clone());
    }
    kept.push_front((key, language.clone()));
    kept.truncate(LANGUAGES_KEPT);
    Ok(language)
}

/// Builds the language of a role that reads one table under the default policy (no
/// `grid.policy` row: SELECT only), and so the dialect's projection that every such role
/// shares: most askers' (the projection is most of a language's build; a role's lexicon
/// is the rest). A host calls it when it starts, so that a role's first ask pays for its
/// own lexicon only.
pub fn warm(dialect: &Arc<Dialect>) -> Result<(), Failure> {
    reader_language(dialect).map(drop)
}

/// The language of a role that reads one table of one column with the default policy:
/// what [`warm`] builds, and what warms a new vocabulary's tables
/// (`grid_core::cache::MaskCache::warm`) before any role asks with it.
pub fn reader_language(dialect: &Arc<Dialect>) -> Result<Arc<Language>, Failure> {
    let snapshot: CatalogSnapshot = serde_json::from_value(serde_json::json!({
        "format": 1, "role": "reader", "search_path": ["public"],
        "relations": [{
            "schema": "public", "name": "t", "kind": "table", "on_search_path": true,
            "privileges": ["select"],
            "columns": [{"name": "c", "type": "integer", "privileges": ["select"]}]
        }]
    }))
    .map_err(|e| Failure::internal(format!("the warm-up snapshot: {e}")))?;
    let base = Policy::for_asker(None)
        .map_err(|e| Failure::internal(format!("the default policy: {e}")))?;
    role_language(dialect, &snapshot, &snapshot.fingerprint(), &base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask_with(snapshot: serde_json::Value) -> Ask {
        let mut ask: Ask = serde_json::from_value(serde_json::json!({
            "question": "how many staff",
            "snapshot": snapshot,
            "session_user": "alice",
            "current_user": "analyst",
            "database": "db",
            "settings": {"endpoint": "mock:scripted", "model": null, "max_tokens": 64,
                         "temperature": 0.0, "timeout_ms": 1000, "audit": "full"},
        }))
        .expect("ask");
        ask.parsed = None;
        ask
    }

    /// An ask read where it arrives ([`prepare`]) compiles to the very language an ask
    /// read by the pipeline does (the kept one: the keys are equal), and one whose
    /// snapshot cannot be read fails the same way.
    #[test]
    fn a_prepared_ask_compiles_as_the_pipeline_would() {
        let dialect = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
        let vocab = grid_endpoint::backend::builtin::builtin_vocabulary().expect("vocabulary");
        let vocab = VocabState::new(Arc::new(vocab), "builtin".into()).expect("state");
        let cache = MaskCache::new(4);
        let mut languages = Languages::default();
        let snapshot: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/analyst_snapshot.json"))
                .expect("snapshot");
        let plain = ask_with(snapshot.clone());
        let mut prepared = ask_with(snapshot);
        prepare(&mut prepared);
        assert!(prepared.parsed.is_some());
        let first = languages
            .compile(&dialect, &plain, &vocab, &cache)
            .unwrap_or_else(|f| panic!("{f:?}"));
        let again = languages
            .compile(&dialect, &prepared, &vocab, &cache)
            .unwrap_or_else(|f| panic!("{f:?}"));
        assert!(Arc::ptr_eq(&first, &again));
        let broken = serde_json::json!({"relations": "not a list"});
        let mut prepared = ask_with(broken.clone());
        prepare(&mut prepared);
        let fails = |ask: &Ask| match Languages::default().compile(&dialect, ask, &vocab, &cache) {
            Ok(_) => panic!("a broken snapshot compiled"),
            Err(f) => f,
        };
        assert_eq!(fails(&prepared), fails(&ask_with(broken)));
    }

    #[test]
    fn after_the_warm_up_a_reading_roles_language_builds_no_projection() {
        // A dialect of the test's own, so that no other test's languages count.
        let dialect = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
        warm(&dialect).expect("warm");
        let kept = dialect.projections();
        assert_eq!(kept, 1);
        let analyst: CatalogSnapshot =
            serde_json::from_str(include_str!("../tests/fixtures/analyst_snapshot.json"))
                .expect("snapshot");
        let base = Policy::for_asker(None).expect("policy");
        analyst.language(dialect.clone(), &base).expect("language");
        assert_eq!(
            dialect.projections(),
            kept,
            "the analyst needed another projection"
        );
        // A role whose policy lets it write needs one of its own.
        let writer = Policy::for_asker(Some(&serde_json::json!({"verbs": ["select", "update"]})))
            .expect("policy");
        analyst
            .language(dialect.clone(), &writer)
            .expect("language");
        assert_eq!(dialect.projections(), kept + 1);
    }
}
