//! Greedy longest-match encoding, for vocabularies without a known tokenizer.

use rustc_hash::FxHashMap;

/// Maps each non-special spelling to its smallest id and encodes by longest match.
#[derive(Debug)]
pub(crate) struct GreedyEncoder {
    by_bytes: FxHashMap<Vec<u8>, u32>,
    max_len: usize,
}

impl GreedyEncoder {
    /// Over a vocabulary's non-special `tokens` (id and bytes, by id).
    pub(crate) fn new<'v>(tokens: impl Iterator<Item = (u32, &'v [u8])>) -> Self {
        let mut by_bytes = FxHashMap::default();
        let mut max_len = 0;
        for (id, b) in tokens {
            if b.is_empty() {
                continue;
            }
            max_len = max_len.max(b.len());
            by_bytes.entry(b.to_vec()).or_insert(id);
        }
        GreedyEncoder { by_bytes, max_len }
    }

    /// Longest match at each position; a byte no token starts with is skipped (only
    /// possible for a vocabulary that is not byte-complete).
    pub(crate) fn encode(&self, text: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let longest = self.max_len.min(text.len() - pos);
            let hit = (1..=longest)
                .rev()
                .find_map(|n| self.by_bytes.get(&text[pos..pos + n]).map(|&id| (id, n)));
            match hit {
                Some((id, n)) => {
                    out.push(id);
                    pos += n;
                }
                None => pos += 1,
            }
        }
        out
    }
}
