//! The stack-free walk that builds a cache entry on a miss.
//!
//! It walks the token trie from the key's scan state with the scanner alone, knowing the
//! stacks only through `A`. A subtree is pruned only when it is dead on *every* stack set
//! with that `A`: the scanner refuses, the first lexeme handed over has no candidate in `A`,
//! or, before any lexeme is handed over, the lexeme in progress can neither become a
//! terminal of `A ∪ skip` nor be cut back to one without splitting a word. Every surviving
//! token is CI (the same two cases as [`crate::mask`]) or a CD candidate, filed under its
//! [`CdKey`]; the live stacks decide the candidates on each step, one verdict per class.
//!
//! The root's subtrees are independent, so they may be walked in parallel (rayon); the parts
//! are merged in trie order, which makes the entry bit-identical to a serial walk.
//!
//! Past a lexeme handed over, the walk cannot say whether the parser expects a relation, so
//! where the scan then reads the dot of a `schema.table` word (which joins the word only
//! where one is expected), every token below is filed [`CdKey::Exact`]: its verdict is the
//! full check of its spelling on the live stacks. Before any hand-over, `A` answers.
//!
//! Once a lexeme has been handed over on the path to a node, the walk below it reads neither
//! `A` nor the key's remainder: only the scanner prunes, and each token's class is the
//! path's emissions plus what the scan state at the node leads to (the state in its normal
//! form: the scan reads nothing else of the lexeme in progress). So that part, a [`Tail`],
//! is memoised per namespace ([`TailMemo`]) by node and scan state, and shared between keys.
//! It is most of a miss's work: after a pending word, a token starting with ` ` hands the
//! word over at depth 1, and the space-led half of the vocabulary below it is the same walk
//! for every key that ends in a word. The tail filed below a path (its keys with the path's
//! emissions in front, its CI tokens picked out) is kept too, as a [`Merged`] tail by node,
//! scan state and those emissions: a miss then files each of its classes with one probe of
//! a kept hash, where building, hashing and cloning the keys was half a slow miss.
//!
//! Where the lexeme in progress absorbs a run of bytes whatever they are and whatever it
//! spells so far ([`absorbing_run`]: inside a quoted name where a free name is viable, every
//! byte but `"`), every token spelled with such bytes, up to the run's length, is CI: those
//! come as a block from the trie's [`PureTokens`] of the run's bytes, and the walk visits
//! only the subtrees that hold another token. Every prefix of a long quoted name is a new key
//! (its remainder is the raw bytes), so without this each of them walked the whole trie.
//!
//! Likewise where a word starts a fresh lexeme with nothing handed to the parser (after a
//! blank, at an expression's start) and every state the automaton reaches on letters keeps
//! a terminal of `A` that no lexicon decides ([`word_run`]): the tokens spelled with letters,
//! `_` and (where the automaton keeps them in an identifier) the bytes ≥ 0x80 come as a
//! block, and so do those that begin with a blank byte the key's start
//! takes as a blank and go on with such a word (` name`, [`blank_led`]). Otherwise nothing
//! is handed over before the leaves, and the walk read `A` at every node of the trie. A
//! block's tokens are the trie's [`PureTokens`] of the run's later bytes whose first byte
//! is one the run may begin with, so the byte sets stay few: inside a word, the first byte
//! may be held back from the run (it may go on a word of the lexicon) and the rest not.
//!
//! [`warm_tails`] walks ahead, when a language is built, the tails every key with a whole
//! lexeme in progress meets (below each child of the root).

use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use hashbrown::HashTable;
use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};
use smallvec::SmallVec;

use super::entry::{CdCandidates, Entry};
use super::key::CacheKey;
use crate::cd_class::CdKey;
use crate::language::Language;
use crate::lexer::is_word_byte;
use crate::scan::{
    absorbing_run, scan_byte, splits, word_run, Absorbing, Scan, ScanHost, ScanStop, TrailKey,
};
use crate::termset::TermSet;
use crate::trie::pure::{byte_set, has_byte, ByteSet, PureTokens};
use crate::trie::TokenTrie;

/// Below this many descendants a node's tail is walked in place rather than memoised: the
/// lookup and merge would cost about as much as the walk.
const TAIL_MIN_NODES: usize = 64;

/// The most token ids a namespace's tails hold together; past it, tails are still used but
/// no more are kept.
const TAIL_MEMO_MAX_IDS: usize = 1 << 22;

/// An absorbing run is taken as a block only when at least this many byte values are in
/// it: a small set spells few tokens, and each set costs a pass over the trie once. Where
/// the dialect keeps text to valid UTF-8, a run is ASCII only (a byte above it may begin a
/// character the run cannot finish): a word's 64 bytes, a literal's or a quoted name's 95
/// to 97, which still spell most of a vocabulary.
const RUN_MIN_BYTES: u32 = 64;

/// What a walk needs besides the trie: the language, the start state and `A`.
#[derive(Clone, Copy)]
pub struct WalkStart<'a> {
    pub lang: &'a Language,
    pub scan: &'a Scan,
    pub offset: usize,
    pub allowed: TermSet,
}

/// The result of walking some nodes.
#[derive(Debug, Default)]
struct Part {
    ci: Vec<u32>,
    /// CI ids taken from merged tails as whole lists.
    ci_lists: Vec<Arc<[u32]>>,
    ci_first: Option<u32>,
    classes: Vec<PartClass>,
    /// `classes` by key, through the hash each class keeps (so a class from a [`Merged`]
    /// tail is filed without hashing its key again).
    index: HashTable<usize>,
    visited: u32,
}

/// A CD class as one part saw it: its ids, first token and its spelling (in a [`Tail`], the
/// spelling below the tail's node).
#[derive(Clone, Debug)]
struct PartClass {
    /// Shared: a merged tail's classes are filed into many entries, and an entry's
    /// classes into the masks that allow them.
    key: Arc<CdKey>,
    /// [`key_hash`] of `key`.
    hash: u64,
    ids: ClassIds,
    rep_node: u32,
    /// The spelling of `rep_node` (shared: a merged tail's classes are filed into many
    /// entries).
    rep: Arc<[u8]>,
}

fn key_hash(key: &CdKey) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// A class's ids while a walk collects them: those recorded here, in walk order, and whole
/// lists taken from tails, each ascending. An entry's class keeps the tail lists as runs
/// ([`ClassIds::into_runs`]; [`CdCandidates::ids`] sorts them into one list when the class
/// is first allowed); a tail's own class is sorted once, through a bitset when large
/// ([`ClassIds::into_sorted`]).
#[derive(Clone, Debug, Default)]
struct ClassIds {
    own: Vec<u32>,
    shared: SmallVec<[Arc<[u32]>; 1]>,
}

/// A class with at least this many ids is sorted through a bitset of the vocabulary rather
/// than by comparisons.
const BITSET_SORT_MIN: usize = 1024;

impl ClassIds {
    fn len(&self) -> usize {
        self.own.len() + self.shared.iter().map(|a| a.len()).sum::<usize>()
    }

    fn append(&mut self, more: &ClassIds) {
        self.own.extend_from_slice(&more.own);
        self.shared.extend(more.shared.iter().cloned());
    }

    /// The ids as ascending runs: the tail lists as they are, and those recorded here
    /// sorted into one.
    fn into_runs(self) -> SmallVec<[Arc<[u32]>; 1]> {
        let ClassIds {
            mut own,
            mut shared,
        } = self;
        if !own.is_empty() {
            own.sort_unstable();
            shared.push(own.into());
        }
        shared
    }

    /// The ids ascending. `bits` is a zeroed bitset over every id, and is left zeroed.
    fn into_sorted(self, bits: &mut Vec<u64>) -> Arc<[u32]> {
        let ClassIds {
            mut own,
            mut shared,
        } = self;
        if own.is_empty() && shared.len() == 1 {
            return shared.remove(0);
        }
        let n = own.len() + shared.iter().map(|a| a.len()).sum::<usize>();
        if n < BITSET_SORT_MIN {
            for a in &shared {
                own.extend_from_slice(a);
            }
            // The shared lists are ascending runs, which the stable sort finds and merges.
            own.sort();
            return own.into();
        }
        // Ids are distinct (a class's ids are disjoint from every other's and each is one
        // token's), so the bitset loses none.
        let (mut lo, mut hi) = (usize::MAX, 0);
        for id in own.iter().chain(shared.iter().flat_map(|a| a.iter())) {
            let w = *id as usize / 64;
            if w >= bits.len() {
                bits.resize(w + 1, 0);
            }
            bits[w] |= 1 << (id % 64);
            lo = lo.min(w);
            hi = hi.max(w);
        }
        let mut out = Vec::with_capacity(n);
        for (w, word) in bits.iter_mut().enumerate().take(hi + 1).skip(lo) {
            let mut x = std::mem::take(word);
            while x != 0 {
                out.push((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        debug_assert_eq!(out.len(), n, "a class holds an id twice");
        out.into()
    }
}

impl Part {
    fn record(&mut self, trie: &TokenTrie, node: usize, cd: Option<CdKey>, spelling: &[u8]) {
        let ids = trie.ids(node);
        if ids.is_empty() {
            return;
        }
        let Some(key) = cd else {
            self.ci_first.get_or_insert(node as u32);
            self.ci.extend(ids.iter());
            return;
        };
        let c = self.class(key, node as u32, spelling);
        self.classes[c].ids.own.extend(ids.iter());
    }

    /// The index of the class `key`, opened with first token `node` if it is new.
    fn class(&mut self, key: CdKey, node: u32, spelling: &[u8]) -> usize {
        let hash = key_hash(&key);
        match self.find(hash, &key) {
            Some(c) => c,
            None => self.open(PartClass {
                key: Arc::new(key),
                hash,
                ids: ClassIds::default(),
                rep_node: node,
                rep: Arc::from(spelling),
            }),
        }
    }

    /// The index of the class keyed `key`, whose hash is `hash`.
    fn find(&self, hash: u64, key: &CdKey) -> Option<usize> {
        let classes = &self.classes;
        self.index.find(hash, |&c| *classes[c].key == *key).copied()
    }

    /// Files `class`, whose key no class here has, and returns its index.
    fn open(&mut self, class: PartClass) -> usize {
        let c = self.classes.len();
        let classes = &self.classes;
        self.index
            .insert_unique(class.hash, c, |&i| classes[i].hash);
        self.classes.push(class);
        c
    }

    /// Adds `class`'s ids to the class with its key, or files it as a new one.
    fn absorb(&mut self, class: PartClass) {
        match self.find(class.hash, &class.key) {
            Some(c) => {
                let into = &mut self.classes[c];
                if class.rep_node < into.rep_node {
                    into.rep_node = class.rep_node;
                    into.rep = class.rep;
                }
                into.ids.append(&class.ids);
            }
            None => {
                self.open(class);
            }
        }
    }

    /// Files every token of the subtree of `node` as [`CdKey::Exact`], with its whole
    /// spelling from the trie's root.
    fn exact_below(&mut self, trie: &TokenTrie, node: usize) {
        for n in node..node + trie.size(node) {
            if trie.ids(n).is_empty() {
                continue;
            }
            let key = CdKey::Exact { node: n as u32 };
            let c = self.class(key, n as u32, &trie.spelling(n));
            self.classes[c].ids.own.extend(trie.ids(n).iter());
        }
    }

    /// Files the tokens of a merged tail as the walk would have at its node.
    fn merge(&mut self, merged: &Merged) {
        if let Some(f) = merged.ci_first {
            self.ci_first = Some(self.ci_first.map_or(f, |g| g.min(f)));
        }
        self.ci_lists.extend(merged.ci.iter().cloned());
        self.classes.reserve(merged.classes.len());
        for class in &merged.classes {
            match self.find(class.hash, &class.key) {
                Some(c) => self.classes[c].ids.append(&class.ids),
                None => {
                    self.open(class.clone());
                }
            }
        }
    }
}

/// A [`Tail`] as it files below one path: its classes keyed with the path's emissions in
/// front, their spellings from the trie's root, and the CI ones picked out. A function of
/// the tail and the path's emissions (the node fixes the path), so kept beside the tail:
/// the merge of a tail into a miss's part is then one probe per class with a kept hash,
/// not a key built, hashed and cloned.
#[derive(Debug)]
struct Merged {
    /// The CI classes' ids.
    ci: Vec<Arc<[u32]>>,
    ci_first: Option<u32>,
    /// The CD classes, in the tail's order (of first token), keys distinct.
    classes: Vec<PartClass>,
}

impl Merged {
    /// `tail` filed below a path that handed `emitted` over and spells `path`.
    fn of(lang: &Language, tail: &Tail, emitted: &[TermSet], path: &[u8]) -> Merged {
        let skip = lang.terms().skip;
        let mut m = Merged {
            ci: Vec::new(),
            ci_first: None,
            classes: Vec::with_capacity(tail.0.classes.len()),
        };
        for class in &tail.0.classes {
            let (below, t) = match &*class.key {
                CdKey::Scanned { emitted, trail } => (emitted, trail),
                // By node, with the whole spelling: the same class on any path. (A tail
                // holds no dynamic class; it would merge the same way.)
                CdKey::Exact { .. } | CdKey::Dynamic => {
                    m.classes.push(class.clone());
                    continue;
                }
            };
            // The CI case (b): exactly one lexeme handed over, and what follows can only be,
            // or still become, an ignored one.
            if emitted.len() == 1 && below.is_empty() && (t.idle || t.live.intersects(&skip)) {
                m.ci_first.get_or_insert(class.rep_node);
                if !class.ids.own.is_empty() {
                    m.ci.push(class.ids.own.as_slice().into());
                }
                m.ci.extend(class.ids.shared.iter().cloned());
                continue;
            }
            let key = CdKey::Scanned {
                emitted: emitted.iter().chain(below).copied().collect(),
                trail: t.clone(),
            };
            let rep: Arc<[u8]> = path.iter().chain(class.rep.iter()).copied().collect();
            m.classes.push(PartClass {
                hash: key_hash(&key),
                key: Arc::new(key),
                ids: class.ids.clone(),
                rep_node: class.rep_node,
                rep,
            });
        }
        m
    }

    /// Heap bytes beside the tail's own (the ids are the tail's lists): the classes, each
    /// with a key and a spelling of its own.
    fn heap_bytes(&self) -> usize {
        self.classes
            .iter()
            .map(|c| {
                std::mem::size_of::<PartClass>()
                    + std::mem::size_of::<CdKey>()
                    + 2 * std::mem::size_of::<usize>()
                    + c.rep.len()
            })
            .sum::<usize>()
            + self.ci.len() * std::mem::size_of::<Arc<[u32]>>()
    }
}

/// The tokens below one trie node, walked from the scan state at the node after at least one
/// lexeme was handed over on the path to it: every token is in a class keyed by the lexemes
/// handed over *below* the node and its trailing lexeme; [`Part::merge_tail`] prefixes the
/// path's emissions and picks out the CI tokens. Classes in order of first token, as a walk
/// would meet them, so merging gives the same part as walking.
#[derive(Debug)]
pub(crate) struct Tail(Part);

/// Where a tail starts: the node and the scan state there in its normal form (`Remainder`'s
/// T2 form, plus whether a lexeme is in progress; the offsets are left out).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TailAt {
    node: u32,
    q: u32,
    w: u32,
    idle: bool,
    last: Option<(TermSet, bool, SmallVec<[u8; 8]>)>,
}

impl TailAt {
    fn of(node: usize, s: &Scan) -> TailAt {
        let last = s.last.map(|(len, c)| {
            let len = len as usize;
            (c, is_word_byte(s.rem[len - 1]), s.rem[len..].into())
        });
        TailAt {
            node: node as u32,
            q: s.q,
            w: s.w,
            idle: s.rem.is_empty(),
            last,
        }
    }
}

/// The tails of one namespace (so of one dialect, lexicon and vocabulary).
#[derive(Debug)]
pub struct TailMemo {
    /// Nodes with fewer descendants are walked in place.
    min_nodes: usize,
    tails: RwLock<FxHashMap<TailAt, Arc<Tail>>>,
    /// The tails kept, merged below the emissions of the paths that reached them.
    merged: RwLock<FxHashMap<MergedAt, Arc<Merged>>>,
    /// Token ids held by all tails, against [`TAIL_MEMO_MAX_IDS`].
    ids: AtomicUsize,
    /// Heap bytes of the merged tails besides the tails' id lists, against
    /// [`MERGED_MEMO_MAX_BYTES`].
    merged_bytes: AtomicUsize,
    hits: AtomicU64,
}

/// Where a merged tail applies: the tail's start and the lexemes handed over above it.
type MergedAt = (TailAt, SmallVec<[TermSet; 2]>);

/// The most heap bytes a namespace's merged tails hold besides the tails' id lists.
const MERGED_MEMO_MAX_BYTES: usize = 1 << 26;

impl Default for TailMemo {
    fn default() -> TailMemo {
        TailMemo::with_min_nodes(TAIL_MIN_NODES)
    }
}

impl TailMemo {
    /// A memo that takes over below every hand-over with at least `n` descendants (the
    /// default is 64; tests use 1 to send every tail through the memo).
    pub fn with_min_nodes(n: usize) -> TailMemo {
        TailMemo {
            min_nodes: n.max(1),
            tails: RwLock::default(),
            merged: RwLock::default(),
            ids: AtomicUsize::new(0),
            merged_bytes: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
        }
    }

    /// Heap bytes of the tails kept (their id lists, which dominate) and of their merges.
    pub(crate) fn bytes(&self) -> usize {
        self.ids.load(Ordering::Relaxed) * std::mem::size_of::<u32>()
            + self.merged_bytes.load(Ordering::Relaxed)
    }

    /// Tails served from the memo.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Tails kept.
    pub fn len(&self) -> usize {
        self.tails.read().map_or(0, |m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, at: &TailAt) -> Option<Arc<Tail>> {
        let t = self.tails.read().ok()?.get(at).cloned();
        self.hits
            .fetch_add(u64::from(t.is_some()), Ordering::Relaxed);
        t
    }

    fn holds(&self, at: &TailAt) -> bool {
        self.tails.read().is_ok_and(|m| m.contains_key(at))
    }

    fn get_merged(&self, at: &MergedAt) -> Option<Arc<Merged>> {
        self.merged.read().ok()?.get(at).cloned()
    }

    /// Keeps `merged` while the memo has room (a race keeps either of two equal ones).
    fn keep_merged(&self, at: MergedAt, merged: Arc<Merged>) {
        let n = merged.heap_bytes();
        keep_within(
            &self.merged,
            &self.merged_bytes,
            MERGED_MEMO_MAX_BYTES,
            n,
            at,
            merged,
        );
    }

    /// Keeps `tail` while the memo has room. Two walkers racing on one node computed the
    /// same tail (it is a function of the key), so either may win.
    fn keep(&self, at: TailAt, tail: Arc<Tail>) {
        let n = tail.0.classes.iter().map(|c| c.ids.len()).sum::<usize>();
        keep_within(&self.tails, &self.ids, TAIL_MEMO_MAX_IDS, n, at, tail);
    }
}

/// Inserts `value`, of size `n`, into `map` when `used` stays within `max` with it; `used`
/// counts what the map holds (a value replaced by a racing insert is not counted twice).
fn keep_within<K: Eq + std::hash::Hash, V>(
    map: &RwLock<FxHashMap<K, V>>,
    used: &AtomicUsize,
    max: usize,
    n: usize,
    key: K,
    value: V,
) {
    if used.fetch_add(n, Ordering::Relaxed) + n > max {
        used.fetch_sub(n, Ordering::Relaxed);
        return;
    }
    if let Ok(mut m) = map.write() {
        if m.insert(key, value).is_some() {
            used.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

/// Builds the entry of `key` at `start`; `parallel` walks the root's subtrees on rayon, and
/// `tails` (the namespace's memo, if any) supplies and keeps the parts below hand-overs.
/// Where the lexeme in progress absorbs a run of bytes, the tokens spelled with them come
/// as a block (see the module documentation). Returns the entry and the number of trie
/// nodes visited (tails reused and tokens taken as a block count none).
pub fn build(
    trie: &TokenTrie,
    key: &CacheKey,
    start: WalkStart<'_>,
    parallel: bool,
    tails: Option<&TailMemo>,
) -> (Entry, u32) {
    let (blocks, absorbing) = blocks_at(trie, start);
    // Past an absorbing run, what is left to walk is small: no threads. After a fresh word
    // the rest of the vocabulary is still to walk, so threads as asked.
    build_with(trie, key, start, parallel && !absorbing, tails, &blocks)
}

/// The blocks a miss at `start` takes (see the module documentation), and whether it is
/// an absorbing run's (the only one then).
fn blocks_at(trie: &TokenTrie, start: WalkStart<'_>) -> (SmallVec<[Block; 2]>, bool) {
    let max = trie.max_len();
    let block = |r: Absorbing| Block {
        pure: trie.pure(&r.bytes),
        lead: r.lead,
        len: r.len,
    };
    let mut blocks: SmallVec<[Block; 2]> = SmallVec::new();
    let run = absorbing_run(start.lang, start.scan, &start.allowed, max)
        .filter(|r| r.bytes.iter().map(|w| w.count_ones()).sum::<u32>() >= RUN_MIN_BYTES);
    if let Some(run) = run {
        blocks.push(block(run));
        return (blocks, true);
    }
    // A fresh word, and one after a blank the token begins with.
    blocks.extend(word_run(start.lang, start.scan, &start.allowed, max).map(block));
    for lead in BLANK_LEADS {
        blocks.extend(blank_led(start, lead, max).map(block));
    }
    (blocks, false)
}

/// The blocks a miss at `start` takes as CI without visiting them, as the bytes their
/// tokens begin with, the bytes that follow and the longest spelling: what the tests
/// read to know that a case took its block.
pub fn block_runs(trie: &TokenTrie, start: WalkStart<'_>) -> Vec<(ByteSet, ByteSet, usize)> {
    blocks_at(trie, start)
        .0
        .iter()
        .map(|b| (b.lead, b.pure.bytes, b.len))
        .collect()
}

/// The bytes a token may begin a blank with before a word: the run of [`blank_led`].
const BLANK_LEADS: [u8; 4] = [b' ', b'\n', b'\t', b'\r'];

/// The run of a token that begins with `lead` and goes on with a word, where `lead` keeps
/// or starts a blank at the key's start and hands nothing to the parser: the word's run
/// after that blank ([`word_run`]), one byte longer, with `lead` as its only first byte.
/// The token `lead` alone is CI there too (a blank in progress, case (a) of
/// [`crate::mask`]).
fn blank_led(start: WalkStart<'_>, lead: u8, max: usize) -> Option<Absorbing> {
    let lang = start.lang;
    let skip = lang.terms().skip;
    let (mut after, mut off) = (start.scan.clone(), start.offset);
    let mut log = Vec::new();
    let mut host = StackFree {
        log: &mut log,
        skip,
        allowed: start.allowed,
        handed_over: false,
        relation_in_a: lang.relation_expected(&start.allowed),
    };
    scan_byte(lang, &mut after, &mut off, lead, &mut host).ok()?;
    let blank = !after.rem.is_empty()
        && log.is_empty()
        && lang
            .live(after.q, after.w)
            .intersects(&start.allowed.union(&skip));
    if !blank {
        return None;
    }
    let word = word_run(lang, &after, &start.allowed, max.saturating_sub(1))?;
    Some(Absorbing {
        lead: byte_set(lead),
        bytes: word.bytes,
        len: 1 + word.len,
    })
}

/// Tokens a walk takes as CI without visiting them: the pure tokens of `pure` whose first
/// byte is in `lead`, spelled with at most `len` bytes. The blocks of one walk have
/// disjoint `lead`s, so a child of the root is in at most one.
struct Block {
    pure: Arc<PureTokens>,
    lead: ByteSet,
    len: usize,
}

/// [`build`] visiting every node it does not prune, absorbing runs or not: the reference
/// the block is tested against.
pub fn build_every_node(
    trie: &TokenTrie,
    key: &CacheKey,
    start: WalkStart<'_>,
    parallel: bool,
    tails: Option<&TailMemo>,
) -> (Entry, u32) {
    build_with(trie, key, start, parallel, tails, &[])
}

/// [`build`], taking the tokens of `blocks` as CI without visiting them.
fn build_with(
    trie: &TokenTrie,
    key: &CacheKey,
    start: WalkStart<'_>,
    parallel: bool,
    tails: Option<&TailMemo>,
    blocks: &[Block],
) -> (Entry, u32) {
    let mut root = Part::default();
    // The empty spelling (if a token has it) keeps the output as it is: viable, CI.
    root.record(trie, 0, None, &[]);
    let subtrees: Vec<usize> = trie.children(0).collect();
    let walker = Walker {
        trie,
        start,
        tails,
        blocks,
    };
    let range = |c: usize| c..c + trie.size(c);
    // One part per thread (in parallel) or for the whole walk: a class is hashed once per
    // part, not once per subtree.
    let parts: Vec<Part> = if parallel {
        subtrees
            .par_iter()
            .fold(
                || (Scratch::default(), Part::default()),
                |(mut s, mut p), &c| {
                    walker.walk(range(c), &mut s, &mut p);
                    (s, p)
                },
            )
            .map(|(_, p)| p)
            .collect()
    } else {
        let mut s = Scratch::default();
        for &c in &subtrees {
            walker.walk(range(c), &mut s, &mut root);
        }
        Vec::new()
    };
    let mut ci_bits = vec![0u32; trie.n_ids().div_ceil(32)];
    let mut ci_count = 0;
    let mut ci_first: Option<u32> = None;
    for (k, b) in blocks.iter().enumerate() {
        // `set_upto` reads bits that hold none of its pure ids: a later block's into its
        // own words.
        if k == 0 {
            ci_count += b.pure.set_upto(&b.lead, b.len, &mut ci_bits) as u32;
        } else {
            let mut own = vec![0u32; ci_bits.len()];
            ci_count += b.pure.set_upto(&b.lead, b.len, &mut own) as u32;
            for (w, o) in ci_bits.iter_mut().zip(own) {
                *w |= o;
            }
        }
        ci_first = match (ci_first, b.pure.first_upto(&b.lead, b.len)) {
            (Some(a), Some(f)) => Some(a.min(f)),
            (a, f) => a.or(f),
        };
    }
    let mut parts: Vec<Part> = std::iter::once(root).chain(parts).collect();
    // The classes merge into those of the part with most of them, which are not hashed again.
    let most = (0..parts.len())
        .max_by_key(|&k| parts[k].classes.len())
        .unwrap_or(0);
    let mut into = Part {
        classes: std::mem::take(&mut parts[most].classes),
        index: std::mem::take(&mut parts[most].index),
        ..Part::default()
    };
    let mut visited = 0;
    for p in parts {
        visited += p.visited;
        for &id in p.ci.iter().chain(p.ci_lists.iter().flat_map(|l| l.iter())) {
            ci_bits[id as usize / 32] |= 1 << (id % 32);
        }
        ci_count += p.ci.len() as u32;
        ci_count += p.ci_lists.iter().map(|l| l.len() as u32).sum::<u32>();
        ci_first = match (ci_first, p.ci_first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for class in p.classes {
            into.absorb(class);
        }
    }
    let mut classes = into.classes;
    // Node numbers are the trie's depth-first order, so the class whose first token comes
    // first comes first, however the parts split the walk.
    classes.sort_unstable_by_key(|c| c.rep_node);
    let classes: Vec<CdCandidates> = classes
        .into_iter()
        .map(|c| {
            CdCandidates::new(
                c.key,
                c.ids.into_runs(),
                c.rep_node,
                SmallVec::from_slice(&c.rep),
            )
        })
        .collect();
    let entry = Entry::new(key, ci_bits.into(), ci_count, ci_first, classes.into());
    (entry, visited)
}

/// Builds the trie's pure-token sets ([`TokenTrie::pure`]) that the blocks of a statement's
/// first keys read: a fresh word's (the words after a blank read it too; with the bytes
/// above ASCII only where the dialect's identifiers take them), and the runs inside a word,
/// a quoted name and a string literal as they stand one byte in. Done when a language is
/// built, like [`warm_tails`], because the first key to want a set builds it (15-25 ms on
/// a 152k vocabulary). A set is a function of the trie and its bytes: a key that wants
/// another builds it as before, and no mask changes. Returns the sets asked for.
pub fn warm_blocks(trie: &TokenTrie, lang: &Language) -> usize {
    let all: TermSet = (0..lang.terms().names.len().min(TermSet::CAPACITY) as u16).collect();
    let fresh = Scan::fresh(lang, 0);
    let mut sets: Vec<ByteSet> = word_run(lang, &fresh, &all, trie.max_len())
        .map(|r| r.bytes)
        .into_iter()
        .collect();
    for opening in [b"q".as_slice(), b"\"q", b"'q"] {
        let (mut f, mut off) = (fresh.clone(), 0);
        let mut log = Vec::new();
        let mut host = StackFree {
            log: &mut log,
            skip: lang.terms().skip,
            allowed: all,
            handed_over: false,
            relation_in_a: false,
        };
        if opening
            .iter()
            .all(|&b| scan_byte(lang, &mut f, &mut off, b, &mut host).is_ok())
        {
            sets.extend(absorbing_run(lang, &f, &all, trie.max_len()).map(|r| r.bytes));
        }
    }
    for bytes in &sets {
        trie.pure(bytes);
    }
    sets.len()
}

/// Walks and keeps the tails that every key whose lexeme in progress is whole meets: below
/// each child of the root, from the scan state after its byte once that lexeme was handed
/// over (a fresh scan of the byte). After a word, ` ` opens the space-led half of the
/// vocabulary; after `(` or `,`, a letter opens the words. Done when a language is built,
/// it takes the first walk of those tails off the first questions; the tails are the ones
/// a miss would have walked and kept (a tail is a function of its node and scan state in
/// the namespace), so no mask changes. Returns the tails walked (none already kept).
pub(crate) fn warm_tails(
    trie: &TokenTrie,
    lang: &Language,
    memo: &TailMemo,
    parallel: bool,
) -> usize {
    let fresh = Scan::fresh(lang, 0);
    let walker = Walker {
        trie,
        start: WalkStart {
            lang,
            scan: &fresh,
            offset: 0,
            allowed: TermSet::default(),
        },
        tails: Some(memo),
        blocks: &[],
    };
    let skip = lang.terms().skip;
    let one = |&c: &usize| -> usize {
        let (mut f, mut off) = (fresh.clone(), 0);
        let mut log = Vec::new();
        let mut host = StackFree {
            log: &mut log,
            skip,
            allowed: TermSet::default(),
            handed_over: true,
            relation_in_a: false,
        };
        // A byte no lexeme begins with prunes the subtree; one that reads a `schema.table`
        // dot files it exact: no tail either way.
        if scan_byte(lang, &mut f, &mut off, trie.byte(c), &mut host).is_err() {
            return 0;
        }
        let at = TailAt::of(c, &f);
        if memo.holds(&at) {
            return 0;
        }
        walker.tail(&at, c, &f, off);
        1
    };
    let children: Vec<usize> = trie
        .children(0)
        .filter(|&c| trie.size(c) > memo.min_nodes)
        .collect();
    if parallel {
        children.par_iter().map(one).sum()
    } else {
        children.iter().map(one).sum()
    }
}

/// A walk's buffers, kept across the subtrees one thread walks.
#[derive(Default)]
struct Scratch {
    /// `frames[d]`: the scan state and input offset after the first `d` bytes of the path.
    frames: Vec<(Scan, usize)>,
    /// Lexemes handed over along the path (ignored ones left out).
    log: Vec<TermSet>,
    /// `log_len[d]`: length of `log` at depth `d`.
    log_len: Vec<usize>,
    path: Vec<u8>,
    /// Subtree ends of the nodes on the path.
    ends: Vec<usize>,
}

/// The scan host of a walk without stacks: it knows them only through `A`, and only until
/// a lexeme is handed over.
struct StackFree<'a> {
    /// Lexemes handed over along the path (ignored ones left out).
    log: &'a mut Vec<TermSet>,
    skip: TermSet,
    allowed: TermSet,
    /// A lexeme was handed over above the walk's start (a tail).
    handed_over: bool,
    /// Whether `A` expects a relation.
    relation_in_a: bool,
}

impl ScanHost for StackFree<'_> {
    type Refused = ();

    fn lexeme(&mut self, c: TermSet, _at: usize, _bytes: &[u8]) -> Result<(), ()> {
        if c.intersects(&self.skip) {
            return Ok(());
        }
        // The first lexeme handed over is taken iff one of its candidates is in `A`.
        if !self.handed_over && self.log.is_empty() && !c.intersects(&self.allowed) {
            return Err(());
        }
        self.log.push(c);
        Ok(())
    }

    fn relation_expected(&mut self) -> Option<bool> {
        (!self.handed_over && self.log.is_empty()).then_some(self.relation_in_a)
    }
}

/// What lies above the nodes a walk starts from.
#[derive(Clone, Copy)]
enum Above<'b> {
    /// The key's start: nothing handed over yet, and the block of the root's child walked.
    Start(Option<&'b Block>),
    /// A lexeme was handed over (a tail): nothing reads `A`, and no block applies.
    HandedOver,
}

struct Walker<'a> {
    trie: &'a TokenTrie,
    start: WalkStart<'a>,
    tails: Option<&'a TailMemo>,
    /// The blocks of the start: their tokens are CI, filed by the caller, and not visited.
    blocks: &'a [Block],
}

impl Walker<'_> {
    /// Walks the key's nodes in `nodes` (whole subtrees, in trie order, after those `part`
    /// has) from the key's scan state at their parent, the root, into `part`.
    fn walk(&self, nodes: Range<usize>, s: &mut Scratch, part: &mut Part) {
        let (scan, offset) = (self.start.scan, self.start.offset);
        let lead = self.trie.byte(nodes.start);
        let block = self.blocks.iter().find(|b| has_byte(&b.lead, lead));
        self.walk_from(scan, offset, nodes, Above::Start(block), s, part);
    }

    /// The tail below `node`, from scan state `scan` there (a lexeme was handed over on the
    /// way): from the memo, or walked and kept.
    fn tail(&self, at: &TailAt, node: usize, scan: &Scan, offset: usize) -> Arc<Tail> {
        let memo = self.tails;
        if let Some(t) = memo.and_then(|m| m.get(at)) {
            return t;
        }
        let mut part = Part::default();
        let below = node + 1..node + self.trie.size(node);
        self.walk_from(
            scan,
            offset,
            below,
            Above::HandedOver,
            &mut Scratch::default(),
            &mut part,
        );
        // Sorted and shared once here: an entry class that is exactly one tail class takes
        // the list as it is.
        let mut bits = Vec::new();
        for c in &mut part.classes {
            let ids = std::mem::take(&mut c.ids).into_sorted(&mut bits);
            c.ids = ClassIds {
                own: Vec::new(),
                shared: smallvec::smallvec![ids],
            };
        }
        let tail = Arc::new(Tail(part));
        if let Some(m) = memo {
            m.keep(at.clone(), tail.clone());
        }
        tail
    }

    /// The tail below `node` (from scan state `scan` there) merged below a path that
    /// handed `emitted` over and spells `path`: from the memo, or merged and kept.
    fn merged(
        &self,
        node: usize,
        scan: &Scan,
        offset: usize,
        emitted: &[TermSet],
        path: &[u8],
    ) -> Arc<Merged> {
        let at = (TailAt::of(node, scan), emitted.iter().copied().collect());
        if let Some(m) = self.tails.and_then(|m| m.get_merged(&at)) {
            return m;
        }
        let tail = self.tail(&at.0, node, scan, offset);
        let merged = Arc::new(Merged::of(self.start.lang, &tail, emitted, path));
        if let Some(m) = self.tails {
            m.keep_merged(at, merged.clone());
        }
        merged
    }

    /// Walks `nodes` (sibling subtrees, in trie order) from `scan` at their parent. In a
    /// tail ([`Above::HandedOver`]), a lexeme was handed over above the parent: nothing
    /// reads `A`, and every token is filed in a class keyed by the emissions below the
    /// parent.
    fn walk_from(
        &self,
        scan: &Scan,
        offset: usize,
        nodes: Range<usize>,
        above: Above<'_>,
        s: &mut Scratch,
        part: &mut Part,
    ) {
        let (handed_over, block) = match above {
            Above::Start(block) => (false, block),
            Above::HandedOver => (true, None),
        };
        let trie = self.trie;
        let WalkStart { lang, allowed, .. } = self.start;
        let skip = lang.terms().skip;
        let allowed_or_skip = allowed.union(&skip);
        let relation_in_a = lang.relation_expected(&allowed);
        let depth = trie.max_len() + 1;
        let Scratch {
            frames,
            log,
            log_len,
            path,
            ends,
        } = s;
        if frames.len() < depth {
            frames.resize(depth, (scan.clone(), offset));
            log_len.resize(depth, 0);
        }
        frames[0].0.clone_from(scan);
        frames[0].1 = offset;
        log.clear();
        log_len[0] = 0;
        path.clear();
        ends.clear();
        let mut i = nodes.start;
        while i < nodes.end {
            while ends.last().is_some_and(|&e| i >= e) {
                ends.pop();
            }
            let d = ends.len() + 1;
            // From the key's start (the root), a subtree of tokens all in the run: filed.
            let run = block;
            if run.is_some_and(|b| b.pure.covers(i, b.len)) {
                i += trie.size(i);
                continue;
            }
            let (before, rest) = frames.split_at_mut(d);
            let (f, off) = &mut rest[0];
            f.clone_from(&before[d - 1].0);
            *off = before[d - 1].1;
            log.truncate(log_len[d - 1]);
            path.truncate(d - 1);
            path.push(trie.byte(i));
            part.visited += 1;
            let mut host = StackFree {
                log: &mut *log,
                skip,
                allowed,
                handed_over,
                relation_in_a,
            };
            match scan_byte(lang, f, off, trie.byte(i), &mut host) {
                Ok(()) => {}
                Err(ScanStop::Undecided) => {
                    part.exact_below(trie, i);
                    i += trie.size(i);
                    continue;
                }
                Err(_) => {
                    i += trie.size(i);
                    continue;
                }
            }
            let first = !handed_over && log.is_empty();
            let direct = f.rem.is_empty() || lang.live(f.q, f.w).intersects(&allowed_or_skip);
            // Not viable as it is, so only a cut back can save the subtree: to the longest
            // accepted prefix so far (a longer one would have a terminal of `live`, which
            // holds none of `A ∪ skip`), and only if that prefix is in `A ∪ skip` and the
            // cut splits no word: at a statement's head, `SELECT` is never cut off the
            // identifier `SELECTx`, whose subtree is half the vocabulary.
            let cut_may_save = |&(len, c): &(u32, TermSet)| {
                let len = len as usize;
                c.intersects(&allowed_or_skip)
                    && (len >= f.rem.len() || !splits(lang, &c, f.rem[len - 1], f.rem[len]))
            };
            if first && !direct && !f.last.as_ref().is_some_and(cut_may_save) {
                i += trie.size(i);
                continue;
            }
            log_len[d] = log.len();
            let in_run = run.is_some_and(|b| d <= b.len && b.pure.is_pure(i));
            if trie.token(i).is_some() && !in_run {
                let ci = !handed_over
                    && match log.len() {
                        0 => direct,
                        1 => f.rem.is_empty() || lang.live(f.q, f.w).intersects(&skip),
                        _ => false,
                    };
                let cd = (!ci).then(|| CdKey::Scanned {
                    emitted: log.iter().copied().collect(),
                    trail: TrailKey::of(lang, f),
                });
                part.record(trie, i, cd, path);
            }
            if !handed_over
                && !log.is_empty()
                && self.tails.is_some_and(|m| trie.size(i) > m.min_nodes)
            {
                part.merge(&self.merged(i, f, *off, log, path));
                i += trie.size(i);
                continue;
            }
            ends.push(i + trie.size(i));
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct ids in a scrambled order (`i ↦ 7919 i mod p` is one to one below the prime
    /// `p`), with gaps.
    fn scrambled(n: u32, skip: u32) -> Vec<u32> {
        (0..n)
            .map(|i| i * 7_919 % 200_003)
            .filter(|id| id % 7 != skip)
            .collect()
    }

    #[test]
    fn class_ids_sort_the_same_through_the_bitset_and_leave_it_zeroed() {
        let mut bits = Vec::new();
        for (own, runs) in [
            (10usize, 0usize),
            (50, 3),
            (3_000, 0),
            (700, 2),
            (0, 5),
            (0, 1),
        ] {
            let ids = scrambled(20_000, 3);
            let mut c = ClassIds {
                own: ids[..own].to_vec(),
                shared: SmallVec::new(),
            };
            let mut at = own;
            for r in 0..runs {
                let len = 400 * (r + 1);
                let mut run = ids[at..at + len].to_vec();
                run.sort_unstable();
                c.shared.push(run.into());
                at += len;
            }
            let mut expected = ids[..at].to_vec();
            expected.sort_unstable();
            let one_run = own == 0 && runs == 1;
            let shared = c.shared.first().cloned();
            assert_eq!(c.len(), at);
            let got = c.into_sorted(&mut bits);
            assert_eq!(&got[..], &expected[..], "{own} own, {runs} runs");
            if one_run {
                assert!(
                    Arc::ptr_eq(&got, &shared.expect("one run")),
                    "shared as it is"
                );
            }
            assert!(bits.iter().all(|&w| w == 0), "the bitset is left zeroed");
        }
        assert!(!bits.is_empty(), "a large class went through the bitset");
    }
}
