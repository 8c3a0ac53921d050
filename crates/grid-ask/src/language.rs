//! A role's compiled language, and the cache of them: keyed by (catalog snapshot
//! fingerprint, base policy, vocabulary). The snapshot is taken as the caller at every ask,
//! so any DDL, GRANT or REVOKE changes the key before the next ask: nothing to invalidate.

use std::collections::VecDeque;
use std::sync::Arc;

use grid_core::audit::Fingerprints;
use grid_core::cache::MaskCache;
use grid_core::catalog::{CatalogError, CatalogSnapshot};
use grid_core::decode::fingerprints;
use grid_core::reserve::ReserveTable;
use grid_core::{Dialect, Language, Policy};

use crate::failure::{Failure, FailureKind};
use crate::models::VocabState;
use crate::request::Ask;

/// Compiled languages kept.
const LANGUAGES_KEPT: usize = 64;

/// A role's compiled language over one vocabulary.
pub struct Compiled {
    pub snapshot: CatalogSnapshot,
    /// The role's base policy, before its grants narrow it.
    pub base: Policy,
    pub language: Language,
    pub reserve: ReserveTable,
    /// What the seals of its generations record.
    pub fingerprints: Fingerprints,
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
        let snapshot: CatalogSnapshot = serde_json::from_value(ask.snapshot.clone())
            .map_err(CatalogError::from)
            .and_then(|s: CatalogSnapshot| s.validate().map(|()| s))
            .map_err(|e| Failure::internal(format!("catalog snapshot: {e}")))?;
        let base = match &ask.policy {
            None => Policy::default(),
            Some(p) => Policy::from_json(&p.to_string()).map_err(|e| {
                Failure::new(
                    FailureKind::InvalidValue,
                    format!(
                        "the grid.policy row of role {:?} cannot be used: {e}",
                        ask.current_user
                    ),
                )
            })?,
        };
        let key: LanguageKey = (
            snapshot.fingerprint(),
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
        let language = snapshot
            .language(dialect.clone(), &base)
            .map_err(|e| match e {
                CatalogError::NothingGranted { .. } => Failure::new(
                    FailureKind::NothingGranted,
                    format!("{e}: GRANT it SELECT (or INSERT, UPDATE, DELETE) on a table first"),
                ),
                other => Failure::internal(format!("the role's language does not build: {other}")),
            })?;
        let reserve = ReserveTable::build(&language, &vocab.speller);
        // The walks every statement's first masks share, done before the first token is
        // asked for rather than on it (no mask changes).
        cache.warm(&language, &vocab.trie);
        let fingerprints = fingerprints(&language, vocab.vocab.fingerprint());
        let compiled = Arc::new(Compiled {
            snapshot,
            base,
            language,
            reserve,
            fingerprints,
        });
        self.kept.push_front((key, compiled.clone()));
        self.kept.truncate(LANGUAGES_KEPT);
        Ok(compiled)
    }
}
