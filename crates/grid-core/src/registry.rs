//! A single-flight registry of compiled artifacts (languages, token tries) keyed by
//! fingerprint.
//!
//! However many callers ask for one key at once, one of them builds and the others wait for
//! that build: all get the same `Arc` or the same error. A success is kept until evicted; a
//! failure is kept for a time-to-live (negative caching), so a bad grammar or tokenizer is
//! not rebuilt by every request, yet a fixed one is picked up. The clock is injectable so
//! that tests can step over the TTL.

use std::collections::HashMap;
use std::hash::Hash;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::trie::{TokenTrie, TrieError};

/// Monotonic time since some fixed origin.
pub trait Clock: Send + Sync {
    fn now(&self) -> Duration;
}

/// The process's monotonic clock.
#[derive(Debug)]
pub(crate) struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Why a registry lookup has no value: the build's own error (shared by every caller of
/// that flight and, within the TTL, by later ones), or a build that panicked.
#[derive(Debug, Error)]
pub enum BuildError<E: std::error::Error + 'static> {
    #[error("{0}")]
    Failed(#[source] Arc<E>),
    #[error("the build panicked")]
    Panicked,
}

impl<E: std::error::Error + 'static> Clone for BuildError<E> {
    fn clone(&self) -> Self {
        match self {
            BuildError::Failed(e) => BuildError::Failed(e.clone()),
            BuildError::Panicked => BuildError::Panicked,
        }
    }
}

type Outcome<V, E> = Result<Arc<V>, BuildError<E>>;

/// One build in progress: its outcome once known.
struct Flight<V, E: std::error::Error + 'static> {
    done: Mutex<Option<Outcome<V, E>>>,
    cv: Condvar,
}

impl<V, E: std::error::Error + 'static> Flight<V, E> {
    fn wait(&self) -> Outcome<V, E> {
        let mut g = lock(&self.done);
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }

    fn complete(&self, r: Outcome<V, E>) {
        *lock(&self.done) = Some(r);
        self.cv.notify_all();
    }
}

enum Slot<V, E: std::error::Error + 'static> {
    Building(Arc<Flight<V, E>>),
    Ready(Arc<V>),
    /// A failed build and when it failed.
    Failed(BuildError<E>, Duration),
}

/// Artifacts of type `V` by key `K`; see the module documentation.
pub struct Registry<K, V, E: std::error::Error + 'static> {
    slots: Mutex<HashMap<K, Slot<V, E>>>,
    /// How long a failure is served without a rebuild.
    negative_ttl: Duration,
    clock: Arc<dyn Clock>,
    builds: AtomicU64,
}

/// Token tries by vocabulary fingerprint.
pub type TrieRegistry = Registry<String, TokenTrie, TrieError>;

impl<K: Eq + Hash + Clone, V, E: std::error::Error + 'static> Registry<K, V, E> {
    pub fn new(negative_ttl: Duration) -> Self {
        Self::with_clock(negative_ttl, Arc::new(SystemClock::default()))
    }

    pub fn with_clock(negative_ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Registry {
            slots: Mutex::default(),
            negative_ttl,
            clock,
            builds: AtomicU64::new(0),
        }
    }

    /// The artifact of `key`, built by `build` unless it is built, being built, or failed
    /// less than the TTL ago.
    pub fn get_or_build(
        &self,
        key: &K,
        build: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, BuildError<E>> {
        let flight = {
            let mut slots = lock(&self.slots);
            match slots.get(key) {
                Some(Slot::Ready(v)) => return Ok(v.clone()),
                Some(Slot::Building(f)) => {
                    let f = f.clone();
                    drop(slots);
                    return f.wait();
                }
                Some(Slot::Failed(e, at)) if self.clock.now() < *at + self.negative_ttl => {
                    return Err(e.clone());
                }
                _ => {}
            }
            let f = Arc::new(Flight {
                done: Mutex::new(None),
                cv: Condvar::new(),
            });
            slots.insert(key.clone(), Slot::Building(f.clone()));
            f
        };
        self.builds.fetch_add(1, Ordering::Relaxed);
        // A panicking build must still release its waiters.
        let r = match catch_unwind(AssertUnwindSafe(build)) {
            Ok(Ok(v)) => Ok(Arc::new(v)),
            Ok(Err(e)) => Err(BuildError::Failed(Arc::new(e))),
            Err(_) => Err(BuildError::Panicked),
        };
        let slot = match &r {
            Ok(v) => Slot::Ready(v.clone()),
            Err(e) => Slot::Failed(e.clone(), self.clock.now()),
        };
        lock(&self.slots).insert(key.clone(), slot);
        flight.complete(r.clone());
        r
    }

    /// Forgets `key` (a superseded artifact); a build in flight still completes for its
    /// waiters.
    pub fn evict(&self, key: &K) {
        let mut slots = lock(&self.slots);
        if !matches!(slots.get(key), Some(Slot::Building(_))) {
            slots.remove(key);
        }
    }

    /// Builds started so far.
    pub fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
