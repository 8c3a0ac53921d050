//! The token trie: every non-special token of a vocabulary as a byte trie, packed for the
//! mask walk.
//!
//! One trie per vocabulary fingerprint ([`TokenTrie::shared`] keeps one per fingerprint for
//! the process). Special tokens are not in it: they are never in a mask (EOS enters a mask
//! only through the EOS gate of [`crate::mask`]). [`starts`] indexes where a name may begin
//! inside the tokens, built on first use ([`TokenTrie::starts`]); [`pure`] the tokens
//! spelled with the bytes of one set, built on first use per set ([`TokenTrie::pure`]);
//! [`names`] finds the tokens that begin a name right after a short lead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use grid_vocab::Vocabulary;
use thiserror::Error;

pub(crate) mod names;
pub mod pure;
pub(crate) mod starts;

use pure::{ByteSet, PureTokens};
use starts::TokenStarts;

#[derive(Debug, Error)]
pub enum TrieError {
    #[error("the vocabulary has {0} ids; the token trie holds at most {max}", max = TokenTrie::MAX_IDS)]
    TooManyIds(usize),
    #[error("the token trie would have {0} nodes; it holds at most {max}", max = u32::MAX >> 1)]
    TooManyNodes(usize),
}

/// `token + 1` in bits 8..32 of a packed node; 0 is "no token".
const TOKEN_SHIFT: u32 = 8;
const TOKEN_MASK: u64 = 0x00ff_ffff;
/// Bit 32: the node's spelling has more than one id (see [`TokenTrie::ids`]).
const ALIAS_BIT: u64 = 1 << 32;
const SIZE_SHIFT: u32 = 33;

/// A byte trie over the spellings of the non-special tokens of one vocabulary.
///
/// Layout: `nodes` is the trie in DFS pre-order, children in ascending byte order, one
/// packed `u64` per node:
///
/// | bits | field |
/// | --- | --- |
/// | 0..8 | edge byte (the byte on the edge from the parent; 0 for the root) |
/// | 8..32 | smallest token id with this spelling, plus one; 0 when no token spells it |
/// | 32 | alias flag: more than one id spells it |
/// | 33..64 | subtree size, the node itself included |
///
/// Invariants, established by [`TokenTrie::build`]:
/// * node 0 is the root (the empty spelling); the spelling of node `i` is the edge bytes on
///   the path from the root;
/// * the children of node `i` are `i + 1`, then each next sibling at `c + size(c)`, up to
///   `i + size(i)` (exclusive), so a subtree is the contiguous range `i..i + size(i)` and
///   skipping it is one addition;
/// * every leaf carries a token (no dead branches);
/// * `alias_nodes` is ascending; node `alias_nodes[k]` has its ids, all of them, ascending, in
///   `alias_ids[alias_start[k]..alias_start[k + 1]]`; exactly the nodes with the alias flag
///   are listed;
/// * every non-special id of the vocabulary is the token, or one of the aliases, of exactly
///   one node; no special id is.
#[derive(Debug)]
pub struct TokenTrie {
    nodes: Vec<u64>,
    alias_nodes: Vec<u32>,
    alias_start: Vec<u32>,
    alias_ids: Vec<u32>,
    /// Number of ids of the vocabulary (masks are bitsets over `0..n_ids`).
    n_ids: usize,
    /// Special ids, ascending (always masked).
    special: Vec<u32>,
    eos: Option<u32>,
    /// The longest spelling, in bytes (the depth of the deepest node).
    max_len: usize,
    fingerprint: String,
    /// Where names may start in the tokens, for the dynamic lexicon; built on first use.
    starts: OnceLock<TokenStarts>,
    /// The pure tokens of each byte set asked for so far, at most [`TokenTrie::PURE_SETS`].
    pure: Mutex<Vec<Arc<PureTokens>>>,
}

impl TokenTrie {
    /// The largest vocabulary the packed node's 24-bit token field can hold.
    pub(crate) const MAX_IDS: usize = (TOKEN_MASK - 1) as usize;

    /// The most byte sets whose pure tokens a trie keeps ([`TokenTrie::pure`]): the bodies
    /// of a few lexemes (a quoted name, a literal, a comment, a word) in the dialects that
    /// share the trie. Past it the oldest goes.
    pub(crate) const PURE_SETS: usize = 17;

    /// Builds the trie of `vocab`'s non-special tokens.
    pub fn build(vocab: &Vocabulary) -> Result<TokenTrie, TrieError> {
        if vocab.len() > Self::MAX_IDS {
            return Err(TrieError::TooManyIds(vocab.len()));
        }
        let mut order: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| !vocab.is_special(id))
            .collect();
        // Sorted spellings list the trie's nodes in DFS pre-order; ties by id, so the first
        // id of a spelling is its smallest.
        order.sort_unstable_by(|&a, &b| {
            vocab
                .token_bytes(a)
                .cmp(vocab.token_bytes(b))
                .then(a.cmp(&b))
        });
        // (edge byte, ids) per node, sizes filled when a node is closed.
        let mut nodes: Vec<(u8, Vec<u32>, u32)> = vec![(0, Vec::new(), 0)];
        // Node index per depth along the current path; path[0] is the root.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_len = 0;
        for &id in &order {
            let s = vocab.token_bytes(id);
            max_len = max_len.max(s.len());
            if s.is_empty() || s == prev {
                // The empty spelling is the root; a repeated one is the last node made.
                let target = if s.is_empty() {
                    0
                } else {
                    path[path.len() - 1]
                };
                nodes[target].1.push(id);
                continue;
            }
            let lcp = s.iter().zip(prev).take_while(|(a, b)| a == b).count();
            while path.len() > lcp + 1 {
                if let Some(n) = path.pop() {
                    nodes[n].2 = (nodes.len() - n) as u32;
                }
            }
            for &b in &s[lcp..] {
                path.push(nodes.len());
                nodes.push((b, Vec::new(), 0));
            }
            if let Some(&n) = path.last() {
                nodes[n].1.push(id);
            }
            prev = s;
        }
        while let Some(n) = path.pop() {
            nodes[n].2 = (nodes.len() - n) as u32;
        }
        if nodes.len() > (u32::MAX >> 1) as usize {
            return Err(TrieError::TooManyNodes(nodes.len()));
        }
        let mut trie = TokenTrie {
            nodes: Vec::with_capacity(nodes.len()),
            alias_nodes: Vec::new(),
            alias_start: vec![0],
            alias_ids: Vec::new(),
            n_ids: vocab.len(),
            special: vocab.special_ids().to_vec(),
            eos: vocab.eos_id(),
            max_len,
            fingerprint: vocab.fingerprint().to_string(),
            starts: OnceLock::new(),
            pure: Mutex::default(),
        };
        for (i, (b, ids, size)) in nodes.into_iter().enumerate() {
            let mut packed = u64::from(b) | u64::from(size) << SIZE_SHIFT;
            if let Some(&first) = ids.first() {
                packed |= (u64::from(first) + 1) << TOKEN_SHIFT;
            }
            if ids.len() > 1 {
                packed |= ALIAS_BIT;
                trie.alias_nodes.push(i as u32);
                trie.alias_ids.extend_from_slice(&ids);
                trie.alias_start.push(trie.alias_ids.len() as u32);
            }
            trie.nodes.push(packed);
        }
        Ok(trie)
    }

    /// The trie of `vocab`, built once per fingerprint while any caller holds it.
    pub fn shared(vocab: &Vocabulary) -> Result<Arc<TokenTrie>, TrieError> {
        static TRIES: OnceLock<Mutex<HashMap<String, Weak<TokenTrie>>>> = OnceLock::new();
        let reg = TRIES.get_or_init(Mutex::default);
        let fp = vocab.fingerprint();
        if let Some(t) = reg
            .lock()
            .ok()
            .and_then(|m| m.get(fp).and_then(Weak::upgrade))
        {
            return Ok(t);
        }
        let t = Arc::new(TokenTrie::build(vocab)?);
        if let Ok(mut m) = reg.lock() {
            m.retain(|_, w| w.strong_count() > 0);
            m.insert(fp.to_string(), Arc::downgrade(&t));
        }
        Ok(t)
    }

    /// Where names may start inside the tokens ([`TokenStarts`]), built on first use.
    pub(crate) fn starts(&self) -> &TokenStarts {
        self.starts.get_or_init(|| TokenStarts::build(self))
    }

    /// The tokens spelled after their first byte only with bytes of `bytes`
    /// ([`PureTokens`]), built on first use and kept, at most [`TokenTrie::PURE_SETS`] sets.
    pub(crate) fn pure(&self, bytes: &ByteSet) -> Arc<PureTokens> {
        let mut kept = self.pure.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = kept.iter().find(|p| p.bytes == *bytes) {
            return p.clone();
        }
        if kept.len() >= Self::PURE_SETS {
            // The oldest goes (a walker still holding it keeps its own reference).
            kept.remove(0);
        }
        // Built under the lock: two walkers that want one set build it once.
        let p = Arc::new(PureTokens::build(self, *bytes));
        kept.push(p.clone());
        p
    }

    /// The byte sets whose pure tokens are kept, oldest first.
    pub fn pure_kept(&self) -> Vec<ByteSet> {
        let kept = self.pure.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter().map(|p| p.bytes).collect()
    }

    /// Number of nodes, the root included.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    pub(crate) fn byte(&self, node: usize) -> u8 {
        self.nodes[node] as u8
    }

    /// The smallest id spelled by the path to `node`, if any.
    #[inline]
    pub(crate) fn token(&self, node: usize) -> Option<u32> {
        match (self.nodes[node] >> TOKEN_SHIFT) & TOKEN_MASK {
            0 => None,
            t => Some(t as u32 - 1),
        }
    }

    /// Size of the subtree of `node`, the node included: its subtree is `node..node + size`.
    #[inline]
    pub(crate) fn size(&self, node: usize) -> usize {
        (self.nodes[node] >> SIZE_SHIFT) as usize
    }

    /// Whether more than one id spells `node`.
    #[inline]
    pub(crate) fn has_aliases(&self, node: usize) -> bool {
        self.nodes[node] & ALIAS_BIT != 0
    }

    /// Every id spelled by the path to `node` (empty when none).
    pub(crate) fn ids(&self, node: usize) -> IdsOf<'_> {
        if self.has_aliases(node) {
            if let Ok(k) = self.alias_nodes.binary_search(&(node as u32)) {
                let (a, b) = (self.alias_start[k], self.alias_start[k + 1]);
                return IdsOf::Many(&self.alias_ids[a as usize..b as usize]);
            }
        }
        IdsOf::One(self.token(node))
    }

    /// The children of `node`, in ascending byte order.
    pub(crate) fn children(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        let end = node + self.size(node);
        let mut c = node + 1;
        std::iter::from_fn(move || {
            (c < end).then(|| {
                let this = c;
                c += self.size(c);
                this
            })
        })
    }

    /// The spelling of `node`: the edge bytes from the root (empty for the root and for a
    /// node out of range).
    pub(crate) fn spelling(&self, node: usize) -> Vec<u8> {
        let mut out = Vec::new();
        if node >= self.len() {
            return out;
        }
        let mut n = 0;
        while n != node {
            match self
                .children(n)
                .find(|&c| c <= node && node < c + self.size(c))
            {
                Some(c) => {
                    out.push(self.byte(c));
                    n = c;
                }
                None => break,
            }
        }
        out
    }

    /// The node spelling exactly `bytes`, if the trie has one.
    pub fn find(&self, bytes: &[u8]) -> Option<usize> {
        let mut n = 0;
        for &b in bytes {
            n = self.children(n).find(|&c| self.byte(c) == b)?;
        }
        Some(n)
    }

    /// Number of ids of the vocabulary (special ones included).
    pub fn n_ids(&self) -> usize {
        self.n_ids
    }

    pub(crate) fn special_ids(&self) -> &[u32] {
        &self.special
    }

    pub(crate) fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// The longest token spelling, in bytes.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The fingerprint of the vocabulary this trie was built from.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// The ids of one trie node: its token, or its whole alias class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IdsOf<'t> {
    One(Option<u32>),
    Many(&'t [u32]),
}

impl IdsOf<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            IdsOf::One(t) => usize::from(t.is_some()),
            IdsOf::Many(s) => s.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, many): (Option<u32>, &[u32]) = match *self {
            IdsOf::One(t) => (t, &[]),
            IdsOf::Many(s) => (None, s),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &[&[u8]], special: &[u32]) -> Vocabulary {
        Vocabulary::from_served(
            tokens.iter().map(|t| t.to_vec()).collect(),
            special,
            special.first().copied(),
        )
        .unwrap()
    }

    /// Every spelling reachable by walking the packed array, with its ids.
    fn spellings(t: &TokenTrie) -> Vec<(Vec<u8>, Vec<u32>)> {
        fn go(t: &TokenTrie, n: usize, path: &mut Vec<u8>, out: &mut Vec<(Vec<u8>, Vec<u32>)>) {
            let ids: Vec<u32> = t.ids(n).iter().collect();
            if !ids.is_empty() {
                out.push((path.clone(), ids));
            }
            for c in t.children(n) {
                path.push(t.byte(c));
                go(t, c, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        go(t, 0, &mut Vec::new(), &mut out);
        out
    }

    #[test]
    fn layout_and_aliases() {
        let v = vocab(
            &[
                b"<eos>", b"ab", b"a", b"abc", b"b", b"ab", b"", b"ab", b"<s>",
            ],
            &[0, 8],
        );
        let t = TokenTrie::build(&v).unwrap();
        // root, a, ab, abc, b
        assert_eq!(t.len(), 5);
        assert_eq!(t.size(0), 5);
        assert_eq!(t.max_len(), 3);
        assert_eq!(
            spellings(&t),
            vec![
                (b"".to_vec(), vec![6]),
                (b"a".to_vec(), vec![2]),
                (b"ab".to_vec(), vec![1, 5, 7]),
                (b"abc".to_vec(), vec![3]),
                (b"b".to_vec(), vec![4]),
            ]
        );
        let ab = t.find(b"ab").unwrap();
        assert!(t.has_aliases(ab));
        assert_eq!(t.token(ab), Some(1));
        assert_eq!(t.size(ab), 2);
        assert_eq!(t.find(b"<eos>"), None, "special tokens are not in the trie");
        assert_eq!(t.eos_id(), Some(0));
        assert_eq!(t.n_ids(), 9);
    }

    #[test]
    fn every_non_special_id_is_on_exactly_one_node() {
        let mut toks: Vec<Vec<u8>> = Vec::new();
        for a in [b'x', b'y', b' '] {
            toks.push(vec![a]);
            for b in [b'x', b'(', b'\''] {
                toks.push(vec![a, b]);
                toks.push(vec![a, b, a]);
            }
        }
        toks.push(b"x(".to_vec());
        toks.push(b"<|end|>".to_vec());
        let refs: Vec<&[u8]> = toks.iter().map(Vec::as_slice).collect();
        let special = [toks.len() as u32 - 1];
        let v = vocab(&refs, &special);
        let t = TokenTrie::build(&v).unwrap();
        let mut seen = vec![0u32; v.len()];
        for (sp, ids) in spellings(&t) {
            for id in ids {
                assert_eq!(v.token_bytes(id), sp.as_slice());
                seen[id as usize] += 1;
            }
        }
        for id in 0..v.len() as u32 {
            assert_eq!(seen[id as usize], u32::from(!v.is_special(id)), "id {id}");
        }
        // Subtrees are contiguous: the sizes add up.
        for n in 0..t.len() {
            let kids: usize = t.children(n).map(|c| t.size(c)).sum();
            assert_eq!(t.size(n), kids + 1);
        }
    }

    #[test]
    fn shared_is_one_per_fingerprint() {
        let v = vocab(&[b"<eos>", b"a"], &[0]);
        let a = TokenTrie::shared(&v).unwrap();
        let b = TokenTrie::shared(&v).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let w = vocab(&[b"<eos>", b"b"], &[0]);
        let c = TokenTrie::shared(&w).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.fingerprint(), w.fingerprint());
    }
}
