//! The stack-free walk that builds a cache entry on a miss.
//!
//! It walks the token trie from the key's scan state with the scanner alone, knowing the
//! stacks only through `A`. A subtree is pruned only when it is dead on *every* stack set
//! with that `A`: the scanner refuses, the first lexeme handed over has no candidate in `A`,
//! or, before any lexeme is handed over, the lexeme in progress can neither become a
//! terminal of `A ∪ skip` nor be cut back to one. Every surviving token is CI (the same two
//! cases as [`crate::mask`]) or a CD candidate, filed under its [`CdKey`]; the live stacks
//! decide the candidates on each step, one verdict per class.
//!
//! The root's subtrees are independent, so they may be walked in parallel (rayon); the parts
//! are merged in trie order, which makes the entry bit-identical to a serial walk.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::entry::{CdCandidates, Entry};
use super::key::CacheKey;
use crate::language::Language;
use crate::mask::{CdKey, TrailKey};
use crate::recognizer::{scan_byte, Scan};
use crate::termset::TermSet;
use crate::trie::TokenTrie;

/// What a walk needs besides the trie: the language, the start state and `A`.
#[derive(Clone, Copy)]
pub struct WalkStart<'a> {
    pub lang: &'a Language,
    pub scan: &'a Scan,
    pub offset: usize,
    pub allowed: TermSet,
}

/// The result of walking one subtree.
#[derive(Default)]
struct Part {
    ci: Vec<u32>,
    ci_first: Option<u32>,
    classes: Vec<PartClass>,
    index: FxHashMap<CdKey, usize>,
    visited: u32,
}

/// A CD class as one subtree saw it: ids in walk order, first token.
struct PartClass {
    key: CdKey,
    ids: Vec<u32>,
    rep_node: u32,
    rep: SmallVec<[u8; 16]>,
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
        let c = match self.index.get(&key) {
            Some(&c) => c,
            None => {
                self.index.insert(key.clone(), self.classes.len());
                self.classes.push(PartClass {
                    key,
                    ids: Vec::new(),
                    rep_node: node as u32,
                    rep: spelling.into(),
                });
                self.classes.len() - 1
            }
        };
        self.classes[c].ids.extend(ids.iter());
    }
}

/// Builds the entry of `key` at `start`; `parallel` walks the root's subtrees on rayon.
/// Returns the entry and the number of trie nodes visited.
pub fn build(
    trie: &TokenTrie,
    key: &CacheKey,
    start: WalkStart<'_>,
    parallel: bool,
) -> (Entry, u32) {
    let mut root = Part::default();
    // The empty spelling (if a token has it) keeps the output as it is: viable, CI.
    root.record(trie, 0, None, &[]);
    let subtrees: Vec<usize> = trie.children(0).collect();
    let parts: Vec<Part> = if parallel {
        subtrees
            .par_iter()
            .map(|&c| walk_subtree(trie, start, c))
            .collect()
    } else {
        subtrees
            .iter()
            .map(|&c| walk_subtree(trie, start, c))
            .collect()
    };
    let mut ci_bits = vec![0u32; trie.n_ids().div_ceil(32)];
    let mut ci_count = 0;
    let mut ci_first = None;
    let mut classes: Vec<PartClass> = Vec::new();
    let mut index: FxHashMap<CdKey, usize> = FxHashMap::default();
    let mut visited = 0;
    for p in std::iter::once(root).chain(parts) {
        visited += p.visited;
        for &id in &p.ci {
            ci_bits[id as usize / 32] |= 1 << (id % 32);
        }
        ci_count += p.ci.len() as u32;
        ci_first = ci_first.or(p.ci_first);
        for class in p.classes {
            match index.get(&class.key) {
                Some(&c) => classes[c].ids.extend(class.ids),
                None => {
                    index.insert(class.key.clone(), classes.len());
                    classes.push(class);
                }
            }
        }
    }
    let classes: Vec<CdCandidates> = classes
        .into_iter()
        .map(|mut c| {
            c.ids.sort_unstable();
            CdCandidates {
                key: c.key,
                ids: c.ids.into(),
                rep_node: c.rep_node,
                rep: c.rep,
            }
        })
        .collect();
    let entry = Entry::new(key, ci_bits.into(), ci_count, ci_first, classes.into());
    (entry, visited)
}

/// Walks the subtree of the root's child `sub`.
fn walk_subtree(trie: &TokenTrie, start: WalkStart<'_>, sub: usize) -> Part {
    let WalkStart {
        lang,
        scan,
        offset,
        allowed,
    } = start;
    let skip = lang.terms().skip;
    let allowed_or_skip = allowed.union(&skip);
    let mut part = Part::default();
    let depth = trie.max_len() + 1;
    let mut frames: Vec<(Scan, usize)> = vec![(scan.clone(), offset); depth];
    let mut log: Vec<TermSet> = Vec::new();
    let mut log_len = vec![0usize; depth];
    let mut path: Vec<u8> = Vec::new();
    // Subtree ends of the nodes on the current path, root excluded.
    let mut ends: Vec<usize> = Vec::new();
    let n = sub + trie.size(sub);
    let mut i = sub;
    while i < n {
        while ends.last().is_some_and(|&e| i >= e) {
            ends.pop();
        }
        let d = ends.len() + 1;
        let (before, rest) = frames.split_at_mut(d);
        let (f, off) = &mut rest[0];
        f.clone_from(&before[d - 1].0);
        *off = before[d - 1].1;
        log.truncate(log_len[d - 1]);
        path.truncate(d - 1);
        path.push(trie.byte(i));
        part.visited += 1;
        let scanned = scan_byte(lang, f, off, trie.byte(i), &mut |c, _| {
            if c.intersects(&skip) {
                return Ok(());
            }
            // The first lexeme handed over is taken iff one of its candidates is in `A`.
            if log.is_empty() && !c.intersects(&allowed) {
                return Err(());
            }
            log.push(c);
            Ok(())
        });
        if scanned.is_err() {
            i += trie.size(i);
            continue;
        }
        let direct = f.rem.is_empty() || lang.live(f.q, f.w).intersects(&allowed_or_skip);
        if log.is_empty() && !direct && !f.last.is_some_and(|(_, c)| c.intersects(&allowed_or_skip))
        {
            i += trie.size(i);
            continue;
        }
        log_len[d] = log.len();
        if trie.token(i).is_some() {
            let ci = match log.len() {
                0 => direct,
                1 => f.rem.is_empty() || lang.live(f.q, f.w).intersects(&skip),
                _ => false,
            };
            let cd = (!ci).then(|| CdKey {
                emitted: log.iter().copied().collect(),
                trail: TrailKey::of(f),
            });
            part.record(trie, i, cd, &path);
        }
        ends.push(i + trie.size(i));
        i += 1;
    }
    part
}
