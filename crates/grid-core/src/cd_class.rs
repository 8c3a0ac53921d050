//! The classes of context-dependent tokens (see [`crate::mask`]): a CD token's verdict reads
//! the stacks, but only through what its scan handed over and where it stopped, so tokens
//! with equal [`CdKey`]s fed at the same remainder share one verdict. The mask walk and the
//! cache's walk both file tokens under these keys; the masker decides one per class.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::scan::TrailKey;
use crate::termset::TermSet;

/// What the verdict of a CD token depends on, besides the live stacks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CdKey {
    /// Feeding a token `t` at `κ = (σ, r)` scans `r · bytes(t)` into lexemes handed to the
    /// parser, with candidate sets `C1 … Ck` (ignored lexemes are not handed over), and a
    /// trailing lexeme in progress. The scan itself reads no stack, so the verdict is
    /// "the stacks take `C1`, then `C2`, … (contextual resolution shifts every candidate
    /// some stack can take), and the trailing lexeme is still viable on the stacks reached".
    /// The candidate sets already say everything the lexicons decide about the emitted
    /// segments (the word trie is part of the scan), and the trailing viability reads the
    /// trailing scan state only through its `TrailKey`. So two allowed CD tokens with equal
    /// keys, fed at the same remainder, have equal verdicts on every stack: one
    /// stack-dependent verdict per class decides the whole class.
    Scanned {
        /// `C1 … Ck`, in scan order.
        emitted: SmallVec<[TermSet; 2]>,
        trail: TrailKey,
    },
    /// A token whose scan asks the stacks after a lexeme it hands over (the dot of a
    /// `schema.table` word): its verdict is the full check of its spelling. By token node,
    /// one per class.
    Exact { node: u32 },
    /// The tokens that only names the statement introduced allow (the dynamic lexicon,
    /// [`crate::scope`]), each checked in full on the live configuration: never cached, one
    /// class per step.
    Dynamic,
}

impl CdKey {
    /// The lexemes handed over before the trailing one (none for [`CdKey::Exact`], whose
    /// verdict reads no emission list).
    pub(crate) fn emitted(&self) -> &[TermSet] {
        match self {
            CdKey::Scanned { emitted, .. } => emitted,
            CdKey::Exact { .. } | CdKey::Dynamic => &[],
        }
    }
}

/// A verdict-equivalence class of CD tokens allowed at one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdClass {
    /// Shared with the cache entry the class came from.
    pub key: Arc<CdKey>,
    /// Alias-expanded ids, ascending. Shared with the cache entry the class came from.
    pub ids: Arc<[u32]>,
}
