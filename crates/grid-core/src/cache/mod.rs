//! The write-back mask cache.
//!
//! A mask splits into a part that is a function of a [`CacheKey`] (the CI ids, and the CD
//! candidates grouped into verdict-equivalence classes) and the verdicts of those classes on
//! the live stacks. The first part is cached: built on a miss by the stack-free walk
//! ([`walk`]), published as an immutable, content-addressed [`Entry`], and on every later
//! configuration with the same key copied into the mask row in one pass. The class verdicts
//! and EOS are always computed on the live configuration, never cached.
//!
//! Entries live in a [`Namespace`] per scope (dialect, lexicon and vocabulary). A namespace
//! is superseded (rolls over) when more scopes are in use than the cache keeps, or when the
//! live namespaces together hold more bytes than the cache's budget: the oldest is retired,
//! and a masker holding it moves to a fresh one, so a retired namespace's entries are never
//! consulted again and its memory goes when the last masker lets go of it.

pub(crate) mod entry;
pub mod key;
pub mod walk;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rustc_hash::FxHashMap;
use thiserror::Error;

use crate::language::Language;
use crate::trie::TokenTrie;

pub(crate) use entry::CdCandidates;
pub use entry::{Entry, EntryId};
pub(crate) use key::Scope;
pub use key::{CacheKey, GenericKey, IdentKey, KeyBody, Position, Remainder};
pub(crate) use walk::TailMemo;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The identifier rule: a generic verdict would admit tokens spelling identifiers the
    /// lexicon forbids.
    #[error("a generic mask-cache entry was consulted at an identifier position")]
    GenericAtIdentifier,
    #[error("an identifier mask-cache entry was consulted at a generic position")]
    IdentAtGeneric,
    /// Two different payloads for one key: the key does not determine the cached part.
    #[error("two payloads published for one mask-cache key: entry {existing} already there, {offered} offered")]
    Conflict { existing: String, offered: String },
}

/// The entries of one scope.
#[derive(Debug)]
pub struct Namespace {
    pub(crate) scope: Scope,
    /// Distinguishes successive namespaces of one scope.
    pub generation: u64,
    retired: AtomicBool,
    entries: RwLock<FxHashMap<CacheKey, Arc<Entry>>>,
    /// Heap bytes of the entries published here.
    entry_bytes: AtomicUsize,
    /// The miss walks' shared parts below lexeme hand-overs.
    tails: TailMemo,
}

impl Namespace {
    fn new(scope: Scope, generation: u64) -> Namespace {
        Namespace {
            scope,
            generation,
            retired: AtomicBool::new(false),
            entries: RwLock::default(),
            entry_bytes: AtomicUsize::new(0),
            tails: TailMemo::default(),
        }
    }

    /// The memo of walk tails that misses in this namespace share.
    pub(crate) fn tails(&self) -> &TailMemo {
        &self.tails
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.entries.read().map_or(0, |m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes held: the entries and the tail memo.
    pub(crate) fn bytes(&self) -> usize {
        self.entry_bytes.load(Ordering::Relaxed) + self.tails.bytes()
    }

    /// The entry of `key`, consulted at a position of kind `at`. A key of the other kind is
    /// an error in every build.
    pub fn get(&self, key: &CacheKey, at: Position) -> Result<Option<Arc<Entry>>, CacheError> {
        match (key.position(), at) {
            (Position::Generic, Position::Ident) => return Err(CacheError::GenericAtIdentifier),
            (Position::Ident, Position::Generic) => return Err(CacheError::IdentAtGeneric),
            _ => {}
        }
        Ok(self.entries.read().ok().and_then(|m| m.get(key).cloned()))
    }

    /// Publishes `entry` under `key`, idempotently: when the key already has an entry with
    /// the same id, that one is returned; a different id is a [`CacheError::Conflict`].
    pub fn publish(&self, key: CacheKey, entry: Entry) -> Result<Arc<Entry>, CacheError> {
        let mut m = match self.entries.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(e) = m.get(&key) {
            if e.id() == entry.id() {
                return Ok(e.clone());
            }
            return Err(CacheError::Conflict {
                existing: hex(&e.id()),
                offered: hex(&entry.id()),
            });
        }
        self.entry_bytes
            .fetch_add(entry.heap_bytes(), Ordering::Relaxed);
        let e = Arc::new(entry);
        m.insert(key, e.clone());
        Ok(e)
    }
}

/// The cache shared by every masker over one process; cheap to clone through an `Arc`.
#[derive(Debug)]
pub struct MaskCache {
    /// Namespaces kept before the oldest rolls over.
    capacity: usize,
    /// Heap bytes the live namespaces may hold together.
    budget: AtomicUsize,
    spaces: Mutex<Spaces>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Namespaces retired to keep within the budget.
    over_budget: AtomicU64,
}

#[derive(Debug, Default)]
struct Spaces {
    live: VecDeque<Arc<Namespace>>,
    generations: u64,
}

/// Hit and miss counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
}

impl CacheStats {
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

impl MaskCache {
    /// A cache keeping at most `capacity` namespaces (at least one), with no memory budget.
    pub fn new(capacity: usize) -> MaskCache {
        MaskCache {
            capacity: capacity.max(1),
            budget: AtomicUsize::new(usize::MAX),
            spaces: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            over_budget: AtomicU64::new(0),
        }
    }

    /// Sets the heap bytes the live namespaces may hold together; it is enforced after each
    /// miss, by retiring the oldest namespaces (the one in use too, if it alone is over).
    pub fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }

    /// Heap bytes held by the live namespaces.
    pub fn bytes(&self) -> usize {
        self.lock().live.iter().map(|n| n.bytes()).sum()
    }

    /// Namespaces retired so far to keep within the budget.
    pub fn retired_over_budget(&self) -> u64 {
        self.over_budget.load(Ordering::Relaxed)
    }

    /// Retires the oldest live namespaces until the rest fit the budget.
    pub(crate) fn enforce_budget(&self) {
        let budget = self.budget();
        let mut s = self.lock();
        let mut held: usize = s.live.iter().map(|n| n.bytes()).sum();
        while held > budget {
            let Some(old) = s.live.pop_front() else {
                break;
            };
            held -= old.bytes().min(held);
            old.retired.store(true, Ordering::Release);
            self.over_budget.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Spaces> {
        match self.spaces.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The live namespace of `scope`, opening one (and retiring the oldest beyond
    /// capacity) when there is none.
    pub fn namespace(&self, scope: Scope) -> Arc<Namespace> {
        let mut s = self.lock();
        if let Some(ns) = s.live.iter().find(|n| n.scope == scope) {
            return ns.clone();
        }
        s.generations += 1;
        let ns = Arc::new(Namespace::new(scope, s.generations));
        s.live.push_back(ns.clone());
        while s.live.len() > self.capacity {
            if let Some(old) = s.live.pop_front() {
                old.retired.store(true, Ordering::Release);
            }
        }
        ns
    }

    /// Walks ahead, in the namespace of `lang` over `trie`, the tails that the first masks
    /// of every statement meet ([`walk::warm_tails`]), builds the trie's pure-token sets
    /// their blocks read ([`walk::warm_blocks`]) and the trie's index of name
    /// starts if the language reads the statement's names, so that a new language's first
    /// questions do neither; returns the tails it walked. Masks are the same with or
    /// without it.
    pub fn warm(&self, lang: &Language, trie: &TokenTrie) -> usize {
        if lang.sem.enabled() {
            // Built once per trie, on the first mask that reads the statement's names.
            trie.starts();
        }
        walk::warm_blocks(trie, lang);
        let ns = self.namespace(key::scope_of(lang, trie.fingerprint()));
        walk::warm_tails(trie, lang, ns.tails(), true)
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn count(&self, hit: bool) {
        let c = if hit { &self.hits } else { &self.misses };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
