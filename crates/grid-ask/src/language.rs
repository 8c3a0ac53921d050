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
pub(crate) struct Compiled {
    pub(crate) snapshot: CatalogSnapshot,
    /// The role's base policy, before its grants narrow it.
    pub(crate) base: Policy,
    /// Shared with every other vocabulary's compilation of it ([`role_language`]).
    pub(crate) language: Arc<Language>,
    pub(crate) reserve: ReserveTable,
    /// What choosing the relations of its prompts reads of the snapshot.
    pub(crate) schema_index: SchemaIndex,
    /// What the seals of its generations record.
    pub(crate) fingerprints: Fingerprints,
    /// The artifacts its seals name, digested, made at its first seal
    /// (`record::artifacts`).
    pub(crate) artifacts: OnceLock<Vec<Arc<DigestedArtifact>>>,
}

/// The key of a compiled language.
type LanguageKey = ([u8; 16], String, String);

/// The most recently used languages, most recent first (see the module documentation).
#[derive(Default)]
pub(crate) struct Languages {
    kept: VecDeque<(LanguageKey, Arc<Compiled>)>,
}

impl Languages {
    /// The language of `ask`'s role over `vocab`, compiled unless kept.
    pub(crate) fn compile(
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
pub(crate) fn parse(ask: &Ask) -> Result<(CatalogSnapshot, Policy), Failure> {
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
pub(crate) fn parse_parts(
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

/// A role's language, built once: the first thread that asks for it builds it, and any
/// other that asks meanwhile waits for that build instead of starting its own (a wide
/// role's language takes seconds of a core, and a role's first asks tend to come
/// together: the examples' vetting where the ask arrives, then the pipeline).
type LanguageSlot = Arc<OnceLock<Result<Arc<Language>, Failure>>>;

/// The role languages this process keeps, most recent first: every vocabulary's
/// [`Compiled`] and the host's vetting of curated examples (`examples`) share
/// them, so that a role's language is built once, by whichever needs it first. The lock
/// is held to look up and to insert, never while a language builds (that waits on the
/// slot). A failed build is not kept.
static ROLE_LANGUAGES: Mutex<VecDeque<(RoleKey, LanguageSlot)>> = Mutex::new(VecDeque::new());

/// The language of the role whose snapshot and base policy these are, built unless kept
/// (or waited for while another thread builds it). `fingerprint` is the snapshot's
/// ([`CatalogSnapshot::fingerprint`]), taken once where it was read: at tens of thousands
/// of columns it is not free.
pub(crate) fn role_language(
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
    let slot = {
        let mut kept = kept();
        let hit = kept
            .iter()
            .position(|(k, _)| *k == key)
            .and_then(|pos| kept.remove(pos));
        let entry = hit.unwrap_or_else(|| (key, Arc::new(OnceLock::new())));
        let slot = entry.1.clone();
        kept.push_front(entry);
        kept.truncate(LANGUAGES_KEPT);
        slot
    };
    let built = slot.get_or_init(|| build_role_language(dialect, snapshot, base));
    if built.is_err() {
        // Not kept: the next ask builds again (and reports its own failure).
        kept().retain(|(_, s)| !Arc::ptr_eq(s, &slot));
    }
    built.clone()
}

/// The key of every role language this process has built, in order ([`role_language`]'s
/// builds, for the tests of its single flight).
#[cfg(test)]
static BUILT: Mutex<Vec<RoleKey>> = Mutex::new(Vec::new());

fn build_role_language(
    dialect: &Arc<Dialect>,
    snapshot: &CatalogSnapshot,
    base: &Policy,
) -> Result<Arc<Language>, Failure> {
    #[cfg(test)]
    BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((
            dialect.fingerprint,
            snapshot.fingerprint(),
            base.canonical_json(),
        ));
    let language = snapshot
        .language(dialect.clone(), base)
        .map_err(|e| match e {
            CatalogError::NothingGranted { .. } => Failure::new(
                FailureKind::NothingGranted,
                format!("{e}: GRANT it SELECT (or INSERT, UPDATE, DELETE) on a table first"),
            ),
            other => Failure::internal(format!("the role's language does not build: {other}")),
        })?;
    Ok(Arc::new(language))
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
pub(crate) fn reader_language(dialect: &Arc<Dialect>) -> Result<Arc<Language>, Failure> {
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

    /// How many times this process has built the language of `key`.
    fn builds_of(key: &RoleKey) -> usize {
        BUILT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|k| *k == key)
            .count()
    }

    /// Threads that ask for one role's language at once share one build: the others
    /// wait for it (and get the very same language) instead of building their own.
    #[test]
    fn a_roles_language_is_built_once_by_threads_that_ask_together() {
        // A dialect of the test's own: no other test's language has its key.
        let dialect = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
        let snapshot: CatalogSnapshot =
            serde_json::from_str(include_str!("../tests/fixtures/analyst_snapshot.json"))
                .expect("snapshot");
        let fingerprint = snapshot.fingerprint();
        let base = Policy::for_asker(None).expect("policy");
        let key: RoleKey = (dialect.fingerprint, fingerprint, base.canonical_json());
        let start = std::sync::Barrier::new(4);
        let languages: Vec<Arc<Language>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        role_language(&dialect, &snapshot, &fingerprint, &base)
                            .unwrap_or_else(|f| panic!("{f:?}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert!(languages.iter().all(|l| Arc::ptr_eq(l, &languages[0])));
        assert_eq!(builds_of(&key), 1, "threads asking together each built it");
        let again = role_language(&dialect, &snapshot, &fingerprint, &base).expect("kept");
        assert!(Arc::ptr_eq(&again, &languages[0]));
        assert_eq!(builds_of(&key), 1);
    }

    /// A build that fails is not kept: the next ask builds again.
    #[test]
    fn a_failed_build_is_not_kept() {
        let dialect = Arc::new(Dialect::postgres_without_comments().expect("dialect"));
        let nothing: CatalogSnapshot = serde_json::from_value(serde_json::json!({
            "format": 1, "role": "nobody", "search_path": ["public"], "relations": []
        }))
        .expect("snapshot");
        let base = Policy::for_asker(None).expect("policy");
        let fingerprint = nothing.fingerprint();
        let key: RoleKey = (dialect.fingerprint, fingerprint, base.canonical_json());
        for _ in 0..2 {
            match role_language(&dialect, &nothing, &fingerprint, &base) {
                Err(f) => assert_eq!(f.kind, FailureKind::NothingGranted),
                Ok(_) => panic!("a role with nothing granted has a language"),
            }
        }
        assert_eq!(builds_of(&key), 2, "the failed build was kept");
        let kept = ROLE_LANGUAGES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(kept.iter().all(|(k, _)| *k != key));
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
