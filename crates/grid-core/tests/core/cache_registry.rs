//! The single-flight registry of compiled artifacts: one build for N concurrent requests,
//! the same result or the same error for all, failures cached for a TTL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use grid_core::registry::{BuildError, Clock, Registry, TrieRegistry};
use grid_core::trie::TokenTrie;
use grid_vocab::Vocabulary;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("bad grammar {0}")]
struct BadGrammar(u32);

/// A clock the test moves by hand.
#[derive(Default)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::SeqCst))
    }
}

const N: usize = 8;

/// `N` threads ask for `key` at once; each build takes a while so that they overlap.
fn race<V: Send + Sync + 'static>(
    reg: &Registry<u32, V, BadGrammar>,
    key: u32,
    build: impl Fn() -> Result<V, BadGrammar> + Sync,
) -> Vec<Result<Arc<V>, BuildError<BadGrammar>>> {
    let barrier = Barrier::new(N);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let (barrier, build) = (&barrier, &build);
                s.spawn(move || {
                    barrier.wait();
                    reg.get_or_build(&key, || {
                        std::thread::sleep(Duration::from_millis(50));
                        build()
                    })
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    })
}

#[test]
fn concurrent_requests_make_one_build_and_share_it() {
    let reg: Registry<u32, String, BadGrammar> = Registry::new(Duration::from_secs(60));
    let built = AtomicU64::new(0);
    let out = race(&reg, 7, || {
        built.fetch_add(1, Ordering::SeqCst);
        Ok("table".to_string())
    });
    assert_eq!(built.load(Ordering::SeqCst), 1, "one build");
    assert_eq!(reg.builds(), 1);
    let first = out[0].as_ref().expect("built");
    for r in &out {
        assert!(
            Arc::ptr_eq(first, r.as_ref().expect("built")),
            "one Arc for all"
        );
    }
    // Later requests are served without building; another key builds.
    let again = reg.get_or_build(&7, || Ok("other".into())).expect("cached");
    assert!(Arc::ptr_eq(first, &again));
    reg.get_or_build(&8, || Ok("eight".into())).expect("built");
    assert_eq!(reg.builds(), 2);
}

#[test]
fn concurrent_failures_share_one_error_which_is_cached_for_the_ttl() {
    let clock = Arc::new(ManualClock::default());
    let reg: Registry<u32, String, BadGrammar> =
        Registry::with_clock(Duration::from_secs(30), clock.clone());
    let built = AtomicU64::new(0);
    let out = race(&reg, 1, || {
        built.fetch_add(1, Ordering::SeqCst);
        Err(BadGrammar(1))
    });
    assert_eq!(built.load(Ordering::SeqCst), 1, "one build");
    let errors: Vec<Arc<BadGrammar>> = out
        .into_iter()
        .map(|r| match r {
            Err(BuildError::Failed(e)) => e,
            other => panic!("expected the build's error, got {other:?}"),
        })
        .collect();
    assert!(
        errors.iter().all(|e| Arc::ptr_eq(e, &errors[0])),
        "the same error"
    );
    // Within the TTL: the cached error, no build.
    clock.advance(Duration::from_secs(29));
    let r = reg.get_or_build(&1, || Ok("fixed".into()));
    assert!(matches!(r, Err(BuildError::Failed(ref e)) if Arc::ptr_eq(e, &errors[0])));
    assert_eq!(reg.builds(), 1);
    // Past it: rebuilt, and the fix is picked up.
    clock.advance(Duration::from_secs(2));
    let r = reg
        .get_or_build(&1, || Ok("fixed".into()))
        .expect("rebuilt");
    assert_eq!(*r, "fixed");
    assert_eq!(reg.builds(), 2);
}

#[test]
fn a_panicking_build_releases_its_waiters_with_an_error() {
    let reg: Registry<u32, String, BadGrammar> = Registry::new(Duration::from_secs(60));
    let out = race(&reg, 3, || panic!("builder bug"));
    assert_eq!(reg.builds(), 1);
    assert!(out.iter().all(|r| matches!(r, Err(BuildError::Panicked))));
    reg.evict(&3);
    assert_eq!(
        *reg.get_or_build(&3, || Ok("ok".into())).expect("rebuilt"),
        "ok"
    );
}

#[test]
fn token_tries_are_built_once_per_fingerprint() {
    let toks: Vec<Vec<u8>> = [b"<eos>".to_vec()]
        .into_iter()
        .chain((0..=255u8).map(|b| vec![b]))
        .collect();
    let vocab = Vocabulary::from_served(toks, &[], Some(0)).expect("vocabulary");
    let reg = TrieRegistry::new(Duration::from_secs(60));
    let key = vocab.fingerprint().to_string();
    let barrier = Barrier::new(4);
    let tries: Vec<Arc<TokenTrie>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (reg, key, vocab, barrier) = (&reg, &key, &vocab, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    reg.get_or_build(key, || TokenTrie::build(vocab))
                        .expect("trie")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(reg.builds(), 1);
    assert!(tries.iter().all(|t| Arc::ptr_eq(t, &tries[0])));
    assert_eq!(tries[0].n_ids(), 257);
}
