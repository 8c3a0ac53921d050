//! Cache entries: the stack-independent part of a mask, immutable and content-addressed.

use std::sync::Arc;

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::key::{put_bytes, put_terms, CacheKey};
use crate::mask::CdKey;
use crate::termset::TermSet;

/// The encoding tag hashed between key and payload: a new payload layout gets a new tag,
/// so ids of different layouts never collide.
pub const ENCODING_TAG: &[u8] = b"grid-mask-entry/1";

/// `BLAKE2b-128(key ‖ encoding tag ‖ payload)`.
pub type EntryId = [u8; 16];

/// The cacheable part of the mask at every configuration with one key.
///
/// Invariants: `ci_bits` has one bit per vocabulary id, only non-special ids set, and
/// `ci_count` of them; the classes are in order of their first token in the trie's depth
/// first order, their ids ascending and disjoint from the CI ids and from each other's;
/// `id` is the hash of the key and the payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: EntryId,
    /// CI ids, pre-packed as mask words: a hit copies them in one pass.
    pub ci_bits: Box<[u32]>,
    pub ci_count: u32,
    /// The first CI token in trie order: its node (for the forced run of a singleton).
    pub ci_first: Option<u32>,
    /// Every token whose verdict needs the live stacks, grouped by verdict equivalence.
    pub classes: Box<[CdCandidates]>,
    /// The distinct emitted sequences of the classes (`classes[i].key.emitted ==
    /// emissions[class_emission[i]]`): a step shifts each once, however many classes share it.
    pub emissions: Box<[SmallVec<[TermSet; 2]>]>,
    pub class_emission: Box<[u32]>,
}

/// One verdict-equivalence class of CD candidates: all allowed or all blocked on any
/// stacks with the key's `A`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CdCandidates {
    pub key: CdKey,
    /// Alias-expanded ids, ascending. Shared: a hit hands the mask this list, not a copy.
    pub ids: Arc<[u32]>,
    /// The class's first token in trie order: its node and its spelling, fed when the
    /// verdict needs the full viability check.
    pub rep_node: u32,
    pub rep: SmallVec<[u8; 16]>,
}

impl Entry {
    /// Seals a payload under `key`: computes its id.
    pub fn new(
        key: &CacheKey,
        ci_bits: Box<[u32]>,
        ci_count: u32,
        ci_first: Option<u32>,
        classes: Box<[CdCandidates]>,
    ) -> Entry {
        let mut emissions: Vec<SmallVec<[TermSet; 2]>> = Vec::new();
        let mut index: FxHashMap<&[TermSet], u32> = FxHashMap::default();
        let class_emission: Box<[u32]> = classes
            .iter()
            .map(|c| {
                *index.entry(&c.key.emitted[..]).or_insert_with(|| {
                    emissions.push(c.key.emitted.clone());
                    emissions.len() as u32 - 1
                })
            })
            .collect();
        drop(index);
        let mut e = Entry {
            id: [0; 16],
            ci_bits,
            ci_count,
            ci_first,
            classes,
            emissions: emissions.into(),
            class_emission,
        };
        let mut bytes = Vec::new();
        key.encode(&mut bytes);
        bytes.extend_from_slice(ENCODING_TAG);
        e.encode_payload(&mut bytes);
        e.id = Blake2b::<U16>::digest(&bytes).into();
        e
    }

    fn encode_payload(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.ci_bits.len() as u32).to_le_bytes());
        for w in self.ci_bits.iter() {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.ci_count.to_le_bytes());
        out.extend_from_slice(&self.ci_first.map_or(u32::MAX, |n| n).to_le_bytes());
        out.extend_from_slice(&(self.classes.len() as u32).to_le_bytes());
        for c in self.classes.iter() {
            out.extend_from_slice(&(c.key.emitted.len() as u32).to_le_bytes());
            for e in &c.key.emitted {
                put_terms(out, e);
            }
            let t = &c.key.trail;
            out.push(u8::from(t.idle));
            out.extend_from_slice(&t.q.to_le_bytes());
            out.extend_from_slice(&t.w.to_le_bytes());
            match &t.cutback {
                None => out.push(0),
                Some((cands, word, v)) => {
                    out.push(1);
                    put_terms(out, cands);
                    out.push(u8::from(*word));
                    put_bytes(out, v);
                }
            }
            out.extend_from_slice(&(c.ids.len() as u32).to_le_bytes());
            for id in c.ids.iter() {
                out.extend_from_slice(&id.to_le_bytes());
            }
            out.extend_from_slice(&c.rep_node.to_le_bytes());
            put_bytes(out, &c.rep);
        }
    }
}
