//! The tokens spelled, after their first byte, only with the bytes of one set, by first
//! byte and spelling length: what a miss walk can take as a block where the lexeme in
//! progress absorbs any run of those bytes ([`crate::scan::absorbing_run`]), or a fresh
//! word starts ([`crate::scan::word_run`]), instead of walking each token's bytes.
//!
//! Inside a quoted name every byte but `"` goes on the name, so at a position where a free
//! name is viable every token without a `"` (about 99% of a large vocabulary) is allowed
//! whatever the name so far: the walk only has to visit the tokens that hold a `"` (or are
//! longer than the name may still grow). The first byte is apart because it is read from
//! the lexeme in progress, whose state may refuse a few bytes that the rest of the run
//! takes (`D` then `I` may go on `DISTINCT`), or from a blank the word follows (` name`);
//! so one set of bytes serves every such start. Built on first use per byte set and kept
//! with the trie ([`TokenTrie::pure`]).

use super::TokenTrie;

/// A set of bytes: bit `b % 64` of word `b / 64`.
pub(crate) type ByteSet = [u64; 4];

/// Whether `b` is in `set`.
#[inline]
pub fn has_byte(set: &ByteSet, b: u8) -> bool {
    set[usize::from(b / 64)] & (1 << (b % 64)) != 0
}

/// Takes `b` out of `set`.
#[inline]
pub(crate) fn clear_byte(set: &mut ByteSet, b: u8) {
    set[usize::from(b / 64)] &= !(1 << (b % 64));
}

/// The set of one byte.
pub(crate) fn byte_set(b: u8) -> ByteSet {
    let mut s = [0; 4];
    s[usize::from(b / 64)] |= 1 << (b % 64);
    s
}

/// The tokens of one trie whose every byte after the first is in [`PureTokens::bytes`]
/// ("pure" tokens; every one-byte token is).
///
/// Invariants, with `m = max_len + 1`: `ids` holds the ids of every pure node but the root
/// (aliases included), grouped by first byte `b`, then by spelling length `l` ascending,
/// those of `(b, l)` at `ids[off[b m + l]..off[b m + l + 1]]`; `first[b m + l]` is the
/// smallest pure token node of first byte `b` and length `1..=l` (`u32::MAX` when none);
/// `bits` has every id of `ids` set and no other; bit `n` of `pure` says the path to node
/// `n` is pure after its first byte (so every child of the root is), bit `n` of
/// `pure_below` that every node of `n`'s subtree is; `deepest[n]` is the longest spelling
/// in `n`'s subtree.
#[derive(Debug)]
pub(crate) struct PureTokens {
    pub(crate) bytes: ByteSet,
    ids: Vec<u32>,
    off: Vec<u32>,
    first: Vec<u32>,
    /// `max_len + 1`: the stride of `off` and `first`.
    m: usize,
    bits: Vec<u32>,
    pure: Vec<u64>,
    pure_below: Vec<u64>,
    deepest: Vec<u32>,
}

impl PureTokens {
    pub(crate) fn build(trie: &TokenTrie, bytes: ByteSet) -> PureTokens {
        let n = trie.len();
        let words = n.div_ceil(64);
        let mut pure = vec![0u64; words];
        let mut pure_below = vec![0u64; words];
        // (first byte, length, node) of every pure token node.
        let mut tokens: Vec<(u8, u32, u32)> = Vec::new();
        // Impure nodes among the first `i` (prefix counts): a subtree is pure iff it holds
        // none.
        let mut impure_before = vec![0u32; n + 1];
        let mut deepest = vec![0u32; n];
        let mut parent = vec![0u32; n];
        // The path: (node, subtree end, pure) per depth, root excluded.
        let mut path: Vec<(u32, usize, bool)> = Vec::new();
        pure[0] |= 1;
        for i in 1..n {
            while path.last().is_some_and(|&(_, e, _)| i >= e) {
                path.pop();
            }
            let (up, p) = match path.last() {
                None => (0, true),
                Some(&(u, _, above)) => (u, above && has_byte(&bytes, trie.byte(i))),
            };
            parent[i] = up;
            path.push((i as u32, i + trie.size(i), p));
            deepest[i] = path.len() as u32;
            if p {
                pure[i / 64] |= 1 << (i % 64);
                if !trie.ids(i).is_empty() {
                    let lead = trie.byte(path[0].0 as usize);
                    tokens.push((lead, path.len() as u32, i as u32));
                }
            }
            impure_before[i + 1] = impure_before[i] + u32::from(!p);
        }
        // Children come after their parent: one pass backwards lifts the depths.
        for i in (1..n).rev() {
            let up = parent[i] as usize;
            deepest[up] = deepest[up].max(deepest[i]);
        }
        for i in 0..n {
            if impure_before[i + trie.size(i)] == impure_before[i] {
                pure_below[i / 64] |= 1 << (i % 64);
            }
        }
        // Nodes ascending within a group.
        tokens.sort_unstable();
        let m = trie.max_len() + 1;
        let mut off = vec![0u32; 256 * m + 1];
        let mut first = vec![u32::MAX; 256 * m];
        let mut ids = Vec::new();
        let mut bits = vec![0u32; trie.n_ids().div_ceil(32)];
        let mut k = 0;
        for g in 0..256 * m {
            off[g] = ids.len() as u32;
            let (b, len) = ((g / m) as u8, (g % m) as u32);
            while k < tokens.len() && (tokens[k].0, tokens[k].1) == (b, len) {
                let node = tokens[k].2;
                first[g] = first[g].min(node);
                for id in trie.ids(node as usize).iter() {
                    ids.push(id);
                    bits[id as usize / 32] |= 1 << (id % 32);
                }
                k += 1;
            }
            if g % m > 0 {
                first[g] = first[g].min(first[g - 1]);
            }
        }
        off[256 * m] = ids.len() as u32;
        PureTokens {
            bytes,
            ids,
            off,
            first,
            m,
            bits,
            pure,
            pure_below,
            deepest,
        }
    }

    /// Whether the path to `node` is pure after its first byte.
    #[inline]
    pub(crate) fn is_pure(&self, node: usize) -> bool {
        self.pure[node / 64] & (1 << (node % 64)) != 0
    }

    /// Whether every node of `node`'s subtree is pure.
    #[inline]
    pub(crate) fn pure_below(&self, node: usize) -> bool {
        self.pure_below[node / 64] & (1 << (node % 64)) != 0
    }

    /// Whether every token of `node`'s subtree is pure and spelled with at most `len` bytes.
    #[inline]
    pub(crate) fn covers(&self, node: usize, len: usize) -> bool {
        self.pure_below(node) && self.deepest[node] as usize <= len
    }

    /// The ids of first byte `b` spelled with `1..=len` bytes.
    fn group(&self, b: u8, len: usize) -> &[u32] {
        let at = usize::from(b) * self.m;
        let len = len.min(self.m - 1);
        &self.ids[self.off[at + 1] as usize..self.off[at + len + 1] as usize]
    }

    /// The ids of first byte `b` spelled with more than `len` bytes.
    fn longer(&self, b: u8, len: usize) -> &[u32] {
        let at = usize::from(b) * self.m;
        let len = len.min(self.m - 1);
        &self.ids[self.off[at + len + 1] as usize..self.off[at + self.m] as usize]
    }

    /// Number of pure ids with a first byte in `lead`, spelled with `1..=len` bytes.
    pub(crate) fn count_upto(&self, lead: &ByteSet, len: usize) -> usize {
        (0..=255u8)
            .filter(|&b| has_byte(lead, b))
            .map(|b| self.group(b, len).len())
            .sum()
    }

    /// The smallest pure token node with a first byte in `lead`, spelled with `1..=len`
    /// bytes.
    pub(crate) fn first_upto(&self, lead: &ByteSet, len: usize) -> Option<u32> {
        let len = len.min(self.m - 1);
        (0..=255u8)
            .filter(|&b| has_byte(lead, b))
            .map(|b| self.first[usize::from(b) * self.m + len])
            .min()
            .filter(|&f| f != u32::MAX)
    }

    /// Sets in `bits` (a mask's words, which hold none of the pure ids) the pure ids with a
    /// first byte in `lead`, spelled with `1..=len` bytes; returns how many there are.
    pub(crate) fn set_upto(&self, lead: &ByteSet, len: usize, bits: &mut [u32]) -> usize {
        let k = self.count_upto(lead, len);
        if self.ids.len() - k < k {
            // Fewer to take out than to put in: every pure id, then the others out.
            for (b, &w) in bits.iter_mut().zip(&self.bits) {
                *b |= w;
            }
            for b in 0..=255u8 {
                let out = if has_byte(lead, b) {
                    self.longer(b, len)
                } else {
                    self.longer(b, 0)
                };
                for &id in out {
                    bits[id as usize / 32] &= !(1 << (id % 32));
                }
            }
        } else {
            for b in (0..=255u8).filter(|&b| has_byte(lead, b)) {
                for &id in self.group(b, len) {
                    bits[id as usize / 32] |= 1 << (id % 32);
                }
            }
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid_vocab::Vocabulary;

    fn set(bytes: impl IntoIterator<Item = u8>) -> ByteSet {
        let mut s = [0u64; 4];
        for b in bytes {
            s[usize::from(b / 64)] |= 1 << (b % 64);
        }
        s
    }

    /// Against a brute force over the vocabulary: the pure ids of each first byte and length,
    /// the first node, and the node bits.
    #[test]
    fn pure_tokens_by_length_equal_a_brute_force() {
        let toks: &[&[u8]] = &[
            b"<eos>", b"a", b"ab", b"a\"", b"\"", b"\"a", b"abc", b"ab", b"b\"c", b"bcd", b"",
            b"xyz", b"x", b"a\"b\"", b"aaaa",
        ];
        let v = Vocabulary::from_served(toks.iter().map(|t| t.to_vec()).collect(), &[0], Some(0))
            .unwrap();
        let trie = TokenTrie::build(&v).unwrap();
        let bytes = set((0..=255u8).filter(|&b| b != b'"'));
        let p = PureTokens::build(&trie, bytes);
        let tail_pure = |t: &[u8]| t.iter().skip(1).all(|&b| has_byte(&bytes, b));
        for lead in [
            set(0..=255u8),
            set((0..=255u8).filter(|&b| b != b'a')),
            set([b'"']),
            set([b'a', b'x']),
            set(std::iter::empty()),
        ] {
            for len in 0..=trie.max_len() + 1 {
                let mut want: Vec<u32> = (1..v.len() as u32)
                    .filter(|&id| {
                        let t = v.token_bytes(id);
                        !t.is_empty() && t.len() <= len && has_byte(&lead, t[0]) && tail_pure(t)
                    })
                    .collect();
                let mut bits = vec![0u32; trie.n_ids().div_ceil(32)];
                let k = p.set_upto(&lead, len, &mut bits);
                let got: Vec<u32> = (0..v.len() as u32)
                    .filter(|&id| bits[id as usize / 32] & (1 << (id % 32)) != 0)
                    .collect();
                want.sort_unstable();
                assert_eq!(got, want, "length {len}");
                assert_eq!(k, want.len());
                assert_eq!(p.count_upto(&lead, len), want.len());
                let first = want
                    .iter()
                    .map(|&id| trie.find(v.token_bytes(id)).unwrap() as u32)
                    .min();
                assert_eq!(p.first_upto(&lead, len), first, "length {len}");
            }
        }
        for n in 0..trie.len() {
            let sp = trie.spelling(n);
            assert_eq!(p.is_pure(n), tail_pure(&sp), "{sp:?}");
            let below = (n..n + trie.size(n)).all(|m| tail_pure(&trie.spelling(m)));
            assert_eq!(p.pure_below(n), below, "{sp:?}");
            let deepest = (n..n + trie.size(n))
                .map(|m| trie.spelling(m).len())
                .max()
                .unwrap();
            for len in 0..=trie.max_len() {
                assert_eq!(p.covers(n, len), below && deepest <= len, "{sp:?} {len}");
            }
        }
    }
}
