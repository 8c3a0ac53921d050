//! Merge-rank BPE (Hugging Face `tokenizers` `BPE` model) and the byte-level encoder
//! built on it.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::cache::WordCache;
use crate::pretokenize::PreTokenizer;
use crate::vocab::Encode;

/// The merge list of a BPE model: `(left id, right id) → (rank, merged id)`, where rank is
/// the line number of the merge (lower merges first).
#[derive(Debug, Default)]
pub(crate) struct MergeTable {
    merges: FxHashMap<(u32, u32), (u32, u32)>,
}

/// A symbol of a word being merged: a doubly linked list over a vector.
#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: usize,
    next: usize,
    alive: bool,
}

const NONE: usize = usize::MAX;

impl MergeTable {
    /// Adds a merge; the first occurrence of a pair keeps its rank (as in HF).
    pub(crate) fn insert(&mut self, left: u32, right: u32, rank: u32, merged: u32) {
        self.merges.entry((left, right)).or_insert((rank, merged));
    }

    /// Merges `ids` (the initial symbols of one word) exactly as HF's `Word::merge_all`:
    /// repeatedly apply the lowest-rank applicable merge, leftmost first among equal
    /// ranks, then append the resulting ids to `out`.
    pub(crate) fn merge_into(&self, ids: &[u32], out: &mut Vec<u32>) {
        if ids.len() < 2 {
            out.extend_from_slice(ids);
            return;
        }
        let n = ids.len();
        let mut sym: Vec<Symbol> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| Symbol {
                id,
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == n { NONE } else { i + 1 },
                alive: true,
            })
            .collect();
        // Min-heap on (rank, position); the merged id rides along to detect staleness.
        let mut heap: BinaryHeap<Reverse<(u32, usize, u32)>> = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(&(rank, merged)) = self.merges.get(&(ids[i], ids[i + 1])) {
                heap.push(Reverse((rank, i, merged)));
            }
        }
        while let Some(Reverse((rank, pos, merged))) = heap.pop() {
            let left = sym[pos];
            if !left.alive || left.next == NONE {
                continue;
            }
            let right = sym[left.next];
            match self.merges.get(&(left.id, right.id)) {
                Some(&(r, m)) if r == rank && m == merged => {}
                _ => continue,
            }
            let right_pos = left.next;
            sym[pos].id = merged;
            sym[pos].next = right.next;
            sym[right_pos].alive = false;
            if right.next != NONE {
                sym[right.next].prev = pos;
            }
            if left.prev != NONE {
                if let Some(&(r, m)) = self.merges.get(&(sym[left.prev].id, merged)) {
                    heap.push(Reverse((r, left.prev, m)));
                }
            }
            if right.next != NONE {
                if let Some(&(r, m)) = self.merges.get(&(merged, sym[right.next].id)) {
                    heap.push(Reverse((r, pos, m)));
                }
            }
        }
        let mut i = 0;
        while i != NONE {
            out.push(sym[i].id);
            i = sym[i].next;
        }
    }
}

/// Encoder of a byte-level BPE tokenizer (GPT-2, Qwen2.5, Llama-3 `tokenizer.json`).
#[derive(Debug)]
pub(crate) struct ByteLevelEncoder {
    /// Normalization and splitting into words.
    pub(crate) pre: PreTokenizer,
    /// HF `ByteLevel.add_prefix_space`: a space is prepended to text not starting with one.
    pub(crate) add_prefix_space: bool,
    /// Id of the single-character token of each byte (the byte's stand-in character);
    /// bytes without one are skipped, as HF does when the model has no unknown token.
    pub(crate) byte_ids: [Option<u32>; 256],
    /// The merges.
    pub(crate) merges: MergeTable,
    /// With HF `ignore_merges` (Llama-3 `tokenizer.json`): a word that is itself a token
    /// is emitted whole. Maps token bytes to id for regular (non-added) tokens.
    pub(crate) whole_words: Option<FxHashMap<Vec<u8>, u32>>,
    /// Pre-token word cache.
    pub(crate) cache: WordCache,
}

impl Encode for ByteLevelEncoder {
    /// Normalization plus the optional prefix space: the text whose bytes the ids spell.
    fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let normalized = self.pre.normalize(text);
        if self.add_prefix_space && !normalized.starts_with(' ') && !normalized.is_empty() {
            Cow::Owned(format!(" {normalized}"))
        } else {
            normalized
        }
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        let text = self.normalize(text);
        let text: &str = &text;
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for word in self.pre.split(text) {
            self.cache
                .encode_into(word.as_bytes(), &mut out, |w, out| self.encode_word(w, out));
        }
        out
    }
}

impl ByteLevelEncoder {
    fn encode_word(&self, word: &[u8], out: &mut Vec<u32>) {
        if let Some(whole) = &self.whole_words {
            if let Some(&id) = whole.get(word) {
                out.push(id);
                return;
            }
        }
        let ids: Vec<u32> = word
            .iter()
            .filter_map(|&b| self.byte_ids[usize::from(b)])
            .collect();
        self.merges.merge_into(&ids, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_rank_first_leftmost_on_ties() {
        // ids: a=0 b=1 ab=2 bb=3 abb=4
        let mut t = MergeTable::default();
        t.insert(1, 1, 0, 3); // b b   (rank 0)
        t.insert(0, 1, 1, 2); // a b   (rank 1)
        t.insert(0, 3, 2, 4); // a bb  (rank 2)
        let mut out = vec![];
        t.merge_into(&[0, 1, 1], &mut out); // a b b -> a bb -> abb
        assert_eq!(out, vec![4]);
        out.clear();
        t.merge_into(&[1, 1, 1], &mut out); // b b b -> bb b (leftmost)
        assert_eq!(out, vec![3, 1]);
        out.clear();
        t.merge_into(&[0, 1, 0, 1], &mut out);
        assert_eq!(out, vec![2, 2]);
        out.clear();
        t.merge_into(&[], &mut out);
        assert!(out.is_empty());
    }
}
