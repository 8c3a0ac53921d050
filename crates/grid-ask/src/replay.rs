//! A generation's language and vocabulary rebuilt from its artifacts (the inverse of
//! [`crate::record::artifacts`]), for `grid.replay()` and `grid audit replay`: the masks
//! of a generation are recomputed from what its seal names, long after the schema or the
//! grants have changed.

use std::sync::Arc;

use grid_core::audit::to_hex;
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
    let dialect = Dialect::postgres_without_comments()
        .map_err(|e| format!("the dialect does not build: {e}"))?;
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
        .language(Arc::new(dialect), &base)
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
