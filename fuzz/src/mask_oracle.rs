//! The trie walk against the brute-force oracle, with and without the shared mask cache,
//! along token paths the input chooses. The cache lives for the whole process, so entries
//! published by earlier inputs, other roles and the other dialect are hit later (cross-role
//! hits); its small capacity makes namespaces roll over.
//!
//! Input: a role byte, then one byte per step: its low 7 bits pick the `k`-th allowed token
//! (`k` modulo the allowed count); with the high bit set, a blocked token is tried instead
//! and must be refused by the recognizer.

use std::sync::{Arc, LazyLock, Mutex};

use grid_core::cache::MaskCache;
use grid_core::mask::Masker;
use grid_core::oracle::oracle_mask;
use grid_core::trie::TokenTrie;
use grid_core::Session;

use crate::fixtures::{assert_same_mask, LANGUAGES, VOCAB};

/// Steps per input: each costs one oracle pass over the vocabulary.
const MAX_STEPS: usize = 24;

struct Maskers {
    plain: Masker,
    cached: Masker,
}

static MASKERS: LazyLock<Mutex<Maskers>> = LazyLock::new(|| {
    let trie = Arc::new(TokenTrie::build(&VOCAB).expect("fixture trie"));
    let cache = Arc::new(MaskCache::new(2));
    Mutex::new(Maskers {
        plain: Masker::new(trie.clone()),
        cached: Masker::with_cache(trie, cache),
    })
});

fn spell(ids: &[u32]) -> Vec<String> {
    ids.iter()
        .take(8)
        .map(|&id| format!("{id}:{:?}", String::from_utf8_lossy(VOCAB.token_bytes(id))))
        .collect()
}

/// Builds the languages and the maskers: libFuzzer's init, so that the first input is
/// not charged with them.
pub fn init() {
    LazyLock::force(&LANGUAGES);
    LazyLock::force(&MASKERS);
}

pub fn run(data: &[u8]) {
    let Some((&pick, steps)) = data.split_first() else {
        return;
    };
    let lang = &LANGUAGES[pick as usize % LANGUAGES.len()];
    let mut guard = MASKERS.lock().unwrap_or_else(|p| p.into_inner());
    let m = &mut *guard;
    let mut s = Session::new(lang);
    let mut cfg = s.start();
    let mut text = Vec::new();
    for &b in steps.iter().take(MAX_STEPS) {
        let at = String::from_utf8_lossy(&text).into_owned();
        let fast = m.plain.mask(&mut s, &cfg);
        let cached = m.cached.mask(&mut s, &cfg);
        let oracle = oracle_mask(&mut s, &cfg, &VOCAB);
        assert_same_mask(
            &fast,
            &oracle,
            &VOCAB,
            &format!("walk vs oracle at {at:?}"),
            false,
        );
        assert_same_mask(
            &cached,
            &fast,
            &VOCAB,
            &format!("cache on vs off at {at:?}"),
            true,
        );

        let allowed: Vec<u32> = fast.ids().filter(|&id| !VOCAB.is_special(id)).collect();
        if b & 0x80 != 0 {
            let blocked: Vec<u32> = (0..VOCAB.len() as u32)
                .filter(|&id| !VOCAB.is_special(id) && !fast.contains(id))
                .collect();
            if let Some(&id) = blocked.get(usize::from(b & 0x7f) % blocked.len().max(1)) {
                let mut c = cfg.clone();
                let refused = s.feed(&mut c, VOCAB.token_bytes(id)).is_err() || !s.is_viable(&c);
                assert!(refused, "blocked {:?} is viable after {at:?}", spell(&[id]));
            }
            continue;
        }
        let Some(&id) = allowed.get(usize::from(b) % allowed.len().max(1)) else {
            assert!(
                fast.eos,
                "dead end at {at:?}: nothing allowed, not even EOS"
            );
            break;
        };
        let bytes = VOCAB.token_bytes(id);
        s.feed(&mut cfg, bytes)
            .expect("an allowed token is accepted");
        assert!(
            s.is_viable(&cfg),
            "allowed {:?} leads nowhere",
            spell(&[id])
        );
        text.extend_from_slice(bytes);
    }
}
