//! A bounded, thread-safe cache from pre-token word bytes to token ids.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

/// Words cached before the cache is cleared and starts again (bounds memory on
/// adversarial input; real text has a small working set of words).
const MAX_WORDS: usize = 1 << 16;

/// Word bytes → ids.
type WordMap = FxHashMap<Box<[u8]>, Box<[u32]>>;

/// Pre-token word → its ids. Encoding a word is a pure function of the word, so a hit
/// is always the right answer; a poisoned lock just disables the cache.
#[derive(Debug, Default)]
pub(crate) struct WordCache {
    map: Mutex<WordMap>,
}

impl WordCache {
    /// Appends the ids of `word` to `out`, computing them with `compute` on a miss.
    pub(crate) fn encode_into(
        &self,
        word: &[u8],
        out: &mut Vec<u32>,
        compute: impl FnOnce(&[u8], &mut Vec<u32>),
    ) {
        if let Ok(map) = self.map.lock() {
            if let Some(ids) = map.get(word) {
                out.extend_from_slice(ids);
                return;
            }
        }
        let start = out.len();
        compute(word, out);
        if let Ok(mut map) = self.map.lock() {
            if map.len() >= MAX_WORDS {
                map.clear();
            }
            map.insert(word.into(), out[start..].into());
        }
    }
}
