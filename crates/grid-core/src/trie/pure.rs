//! The tokens spelled only with the bytes of one set, by spelling length: what a miss walk
//! can take as a block where the lexeme in progress absorbs any run of those bytes
//! ([`crate::scan::absorbing_run`]), instead of walking each token's bytes.
//!
//! Inside a quoted name every byte but `"` goes on the name, so at a position where a free
//! name is viable every token without a `"` (about 99% of a large vocabulary) is allowed
//! whatever the name so far: the walk only has to visit the tokens that hold a `"` (or are
//! longer than the name may still grow). Built on first use per byte set and kept with the
//! trie ([`TokenTrie::pure`]).

use super::TokenTrie;

/// A set of bytes: bit `b % 64` of word `b / 64`.
pub type ByteSet = [u64; 4];

/// Whether `b` is in `set`.
#[inline]
pub fn has_byte(set: &ByteSet, b: u8) -> bool {
    set[usize::from(b / 64)] & (1 << (b % 64)) != 0
}

/// Takes `b` out of `set`.
#[inline]
pub fn clear_byte(set: &mut ByteSet, b: u8) {
    set[usize::from(b / 64)] &= !(1 << (b % 64));
}

/// The tokens of one trie whose every byte is in [`PureTokens::bytes`] ("pure" tokens).
///
/// Invariants: `ids` holds the ids of every pure node but the root (aliases included), by
/// spelling length ascending, those of length `l` at `ids[by_len[l]..by_len[l + 1]]`;
/// `first_upto[l]` is the smallest pure token node of length `1..=l` (`u32::MAX` when none);
/// `bits` has every id of `ids` set and no other; bit `n` of `pure` says the path to node
/// `n` is pure, bit `n` of `pure_below` that every node of `n`'s subtree is; `deepest[n]` is
/// the longest spelling in `n`'s subtree.
#[derive(Debug)]
pub struct PureTokens {
    pub bytes: ByteSet,
    ids: Vec<u32>,
    by_len: Vec<u32>,
    first_upto: Vec<u32>,
    bits: Vec<u32>,
    pure: Vec<u64>,
    pure_below: Vec<u64>,
    deepest: Vec<u32>,
}

impl PureTokens {
    pub fn build(trie: &TokenTrie, bytes: ByteSet) -> PureTokens {
        let n = trie.len();
        let words = n.div_ceil(64);
        let mut pure = vec![0u64; words];
        let mut pure_below = vec![0u64; words];
        // (length, node) of every pure token node.
        let mut tokens: Vec<(u32, u32)> = Vec::new();
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
            let (up, above) = path.last().map_or((0, true), |&(u, _, p)| (u, p));
            let p = above && has_byte(&bytes, trie.byte(i));
            parent[i] = up;
            path.push((i as u32, i + trie.size(i), p));
            deepest[i] = path.len() as u32;
            if p {
                pure[i / 64] |= 1 << (i % 64);
                if !trie.ids(i).is_empty() {
                    tokens.push((path.len() as u32, i as u32));
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
        // Stable by length: nodes ascending within one length.
        tokens.sort_by_key(|&(len, _)| len);
        let max = trie.max_len();
        let mut by_len = vec![0u32; max + 2];
        let mut first = vec![u32::MAX; max + 1];
        let mut ids = Vec::new();
        let mut bits = vec![0u32; trie.n_ids().div_ceil(32)];
        let mut k = 0;
        for len in 0..=max {
            by_len[len] = ids.len() as u32;
            while k < tokens.len() && tokens[k].0 as usize == len {
                let node = tokens[k].1;
                first[len] = first[len].min(node);
                for id in trie.ids(node as usize).iter() {
                    ids.push(id);
                    bits[id as usize / 32] |= 1 << (id % 32);
                }
                k += 1;
            }
        }
        by_len[max + 1] = ids.len() as u32;
        let mut first_upto = first;
        for l in 1..first_upto.len() {
            first_upto[l] = first_upto[l].min(first_upto[l - 1]);
        }
        PureTokens {
            bytes,
            ids,
            by_len,
            first_upto,
            bits,
            pure,
            pure_below,
            deepest,
        }
    }

    /// Whether the path to `node` is pure.
    #[inline]
    pub fn is_pure(&self, node: usize) -> bool {
        self.pure[node / 64] & (1 << (node % 64)) != 0
    }

    /// Whether every node of `node`'s subtree is pure.
    #[inline]
    pub fn pure_below(&self, node: usize) -> bool {
        self.pure_below[node / 64] & (1 << (node % 64)) != 0
    }

    /// Whether every token of `node`'s subtree is pure and spelled with at most `len` bytes.
    #[inline]
    pub fn covers(&self, node: usize, len: usize) -> bool {
        self.pure_below(node) && self.deepest[node] as usize <= len
    }

    /// Number of pure ids spelled with `1..=len` bytes.
    pub fn count_upto(&self, len: usize) -> usize {
        self.by_len[(len + 1).min(self.by_len.len() - 1)] as usize
    }

    /// The smallest pure token node spelled with `1..=len` bytes.
    pub fn first_upto(&self, len: usize) -> Option<u32> {
        let f = self.first_upto[len.min(self.first_upto.len() - 1)];
        (f != u32::MAX).then_some(f)
    }

    /// Sets in `bits` (a mask's words) the pure ids spelled with `1..=len` bytes; returns
    /// how many there are.
    pub fn set_upto(&self, len: usize, bits: &mut [u32]) -> usize {
        let k = self.count_upto(len);
        let (short, long) = self.ids.split_at(k);
        if long.len() < short.len() {
            for (b, &w) in bits.iter_mut().zip(&self.bits) {
                *b |= w;
            }
            // The long ones are in no other way in `bits` (the caller's bits hold none of
            // the pure ids), so clearing them leaves exactly the short ones.
            for &id in long {
                bits[id as usize / 32] &= !(1 << (id % 32));
            }
        } else {
            for &id in short {
                bits[id as usize / 32] |= 1 << (id % 32);
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

    /// Against a brute force over the vocabulary: the pure ids of each length, the first
    /// node, and the node bits.
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
        for len in 0..=trie.max_len() + 1 {
            let mut want: Vec<u32> = (1..v.len() as u32)
                .filter(|&id| {
                    let t = v.token_bytes(id);
                    !t.is_empty() && t.len() <= len && t.iter().all(|&b| has_byte(&bytes, b))
                })
                .collect();
            let mut bits = vec![0u32; trie.n_ids().div_ceil(32)];
            let k = p.set_upto(len, &mut bits);
            let mut got: Vec<u32> = (0..v.len() as u32)
                .filter(|&id| bits[id as usize / 32] & (1 << (id % 32)) != 0)
                .collect();
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "length {len}");
            assert_eq!(k, want.len());
            assert_eq!(p.count_upto(len), want.len());
            let first = want
                .iter()
                .map(|&id| trie.find(v.token_bytes(id)).unwrap() as u32)
                .min();
            assert_eq!(p.first_upto(len), first, "length {len}");
        }
        for n in 0..trie.len() {
            let sp = trie.spelling(n);
            assert_eq!(p.is_pure(n), sp.iter().all(|&b| b != b'"'), "{sp:?}");
            let below = (n..n + trie.size(n)).all(|m| trie.spelling(m).iter().all(|&b| b != b'"'));
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
