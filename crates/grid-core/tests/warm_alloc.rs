//! A warm step allocates nothing: a counting global allocator around `Masker::mask_into` on
//! a replay the mask cache has already seen. The session is fresh, so its first steps intern
//! stacks and fill its memos; once the stream's configuration recurs (here from well before
//! position 100 on), a step is cache lookups, memo lookups and copies into the caller's
//! buffers, and the count must be 0 at every later position, however long the output.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use grid_core::cache::MaskCache;
use grid_core::mask::{Mask, Masker};
use grid_core::schema::{Schema, Table};
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;

struct Counting;

thread_local! {
    // Per thread: a warm step runs on the caller's thread alone (a hit walks nothing in
    // parallel), while other threads of the process (the test harness, a rayon worker of
    // the cold pass waking late on a loaded machine) may allocate at any moment. Const
    // initialised and without a destructor, so reading it never allocates.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the thread's locals may be gone while it exits.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded to `System` unchanged; the counter has no effect on it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PIECES: &[&str] = &[
    "SELECT", " (", "(", "1", " 1", " IN", ",", ")", " FROM", " t",
];

/// `SELECT ((…(1 IN (1, 1, 1, …` as ids: `depth` open groups that never close, so the
/// parser's stack stays put while the output grows (as in `grid bench-r`).
fn stream(ids: &HashMap<&str, u32>, depth: usize, items: usize) -> Vec<u32> {
    let mut out = vec![ids["SELECT"], ids[" ("]];
    out.extend(std::iter::repeat_n(ids["("], depth));
    out.extend([ids["1"], ids[" IN"], ids[" ("], ids["1"]]);
    for _ in 0..items {
        out.extend([ids[","], ids[" 1"]]);
    }
    out
}

#[test]
fn a_warm_step_allocates_nothing() {
    let mut toks: Vec<Vec<u8>> = vec![b"<eos>".to_vec()];
    toks.extend((0..=255u8).map(|b| vec![b]));
    toks.extend(PIECES.iter().map(|p| p.as_bytes().to_vec()));
    let vocab = Vocabulary::from_served(toks, &[], Some(0)).expect("vocabulary");
    let ids: HashMap<&str, u32> = PIECES
        .iter()
        .enumerate()
        .map(|(i, p)| (*p, (257 + i) as u32))
        .collect();
    let dialect = Arc::new(Dialect::postgres().expect("dialect"));
    let schema = Schema {
        db_id: "warm".into(),
        tables: vec![Table::with_columns("t", &["a"])],
    };
    let policy = Policy::default();
    let lexicon =
        Lexicon::from_schema(&schema, &policy, &|w| dialect.is_reserved(w)).expect("lexicon");
    let lang = Language::build(dialect.clone(), &policy, &lexicon).expect("language");
    let trie = Arc::new(TokenTrie::build(&vocab).expect("trie"));
    let mut masker = Masker::with_cache(trie, Arc::new(MaskCache::new(4)));

    let items = 600;
    let ids = stream(&ids, 4, items);
    let mut per_step = Vec::new();
    let mut m = Mask::empty(0, 0);
    for pass in 0..2 {
        let mut session = Session::new(&lang);
        let mut cfg = session.start();
        for (pos, &id) in ids.iter().enumerate() {
            let before = allocations();
            masker.mask_into(&mut session, &cfg, &mut m);
            let after = allocations();
            assert!(m.contains(id), "pass {pass}: token {pos} refused");
            if pass == 1 {
                per_step.push(after - before);
            }
            session
                .feed(&mut cfg, vocab.token_bytes(id))
                .expect("stream token");
        }
    }
    let stats = masker.cache_stats().expect("cached");
    let n = per_step.len();
    let first: u64 = per_step[..100].iter().sum();
    let later: u64 = per_step[100..].iter().sum();
    println!(
        "warm steps: {n}; allocations: {first} in the first 100 (a fresh session's memos), \
         {later} in the {} after; cache {stats:?}",
        n - 100
    );
    assert!(stats.misses > 0 && stats.hits > stats.misses, "{stats:?}");
    let allocating: Vec<usize> = (100..n).filter(|&i| per_step[i] > 0).collect();
    assert!(
        allocating.is_empty(),
        "warm steps that allocate, at positions {allocating:?} (counts {:?})",
        allocating.iter().map(|&i| per_step[i]).collect::<Vec<_>>()
    );
}
