//! What an audit record commits to about a step, computed from the configuration and the
//! mask alone, so that a replay from archived artifacts recomputes it bit for bit.

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

use crate::mask::Mask;
use crate::recognizer::{Config, Session};
use crate::trie::TokenTrie;

/// Domain tag of a mask entry id.
pub const MASK_ENTRY_TAG: &[u8] = b"grid_pg/mask-entry/v1\0";

/// The content address of a mask: `BLAKE2b-128(tag ‖ u64le word count ‖ words as u32le ‖
/// u8 eos)`. Equal masks (same allowed ids, same EOS bit) have equal ids whatever computed
/// them (walk, oracle, a forced run, a cache).
pub(crate) fn mask_entry_id(mask: &Mask) -> [u8; 16] {
    let mut h = Blake2b::<U16>::new();
    h.update(MASK_ENTRY_TAG);
    h.update((mask.bits.len() as u64).to_le_bytes());
    for w in &mask.bits {
        h.update(w.to_le_bytes());
    }
    h.update([u8::from(mask.eos)]);
    h.finalize().into()
}

/// The configuration hash a record carries: the rolling hash of each live stack (O(1) per
/// stack, never a walk of the stack) and the lexeme in progress, as
/// `low64(BLAKE2b-128(u32le stack count ‖ u64le H(stack)… ‖ u32le remainder length ‖
/// remainder bytes))`, stack hashes ascending. (Sorted by hash, not by node id: ids depend
/// on what else the session's arena was asked, which a replay does not repeat.)
pub(crate) fn config_hash(session: &Session<'_>, cfg: &Config) -> u64 {
    let mut hashes: smallvec::SmallVec<[u64; 4]> =
        cfg.stacks.iter().map(|&s| session.stacks.hash(s)).collect();
    hashes.sort_unstable();
    let mut h = Blake2b::<U16>::new();
    h.update((hashes.len() as u32).to_le_bytes());
    for x in hashes {
        h.update(x.to_le_bytes());
    }
    h.update((cfg.scan.rem.len() as u32).to_le_bytes());
    h.update(&cfg.scan.rem);
    let d: [u8; 16] = h.finalize().into();
    let mut low = [0u8; 8];
    low.copy_from_slice(&d[..8]);
    u64::from_le_bytes(low)
}

/// The mask a forced token was appended under: exactly that id allowed, EOS shut.
pub(crate) fn singleton_mask(n_ids: usize, n_special: usize, id: u32) -> Mask {
    let mut m = Mask::empty(n_ids, n_special);
    m.set(id);
    m.allowed = 1;
    m.blocked -= 1;
    m
}

/// The mask of an unconstrained step: every non-special id and EOS allowed.
pub(crate) fn full_mask(trie: &TokenTrie) -> Mask {
    let n = trie.n_ids();
    let special = trie.special_ids();
    let mut m = Mask::empty(n, special.len());
    for (w, word) in m.bits.iter_mut().enumerate() {
        let first = w * 32;
        *word = if first + 32 <= n {
            u32::MAX
        } else {
            (1u32 << (n - first)) - 1
        };
    }
    for &id in special {
        if let Some(word) = m.bits.get_mut(id as usize / 32) {
            *word &= !(1 << (id % 32));
        }
    }
    if let Some(eos) = trie.eos_id() {
        m.set(eos);
    }
    m.allowed = m.blocked;
    m.blocked = 0;
    m.eos = true;
    m
}
