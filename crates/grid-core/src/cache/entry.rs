//! Cache entries: the stack-independent part of a mask, immutable and content-addressed.

use std::sync::{Arc, OnceLock};

use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::key::{put_bytes, put_terms, CacheKey};
use crate::cd_class::CdKey;
use crate::termset::TermSet;

/// The encoding tag hashed between key and payload: a new payload layout gets a new tag,
/// so ids of different layouts never collide.
pub(crate) const ENCODING_TAG: &[u8] = b"grid-mask-entry/3";

/// Bytes buffered before they are fed to the hash.
const HASH_CHUNK: usize = 1 << 14;

/// `BLAKE2b-128(key ‖ encoding tag ‖ payload)`.
pub type EntryId = [u8; 16];

/// The cacheable part of the mask at every configuration with one key.
///
/// Invariants: `ci_bits` has one bit per vocabulary id, only non-special ids set, and
/// `ci_count` of them; the classes are in order of their first token in the trie's depth
/// first order, their ids ascending and disjoint from the CI ids and from each other's;
/// [`Entry::id`] is the hash of the key and the payload.
#[derive(Debug)]
pub struct Entry {
    /// The key the entry was sealed under (its id hashes it).
    key: CacheKey,
    /// The id, computed when first asked: only a second publish under one key compares
    /// ids, and hashing every id of a large entry cost a cold miss a tenth of its time.
    id: OnceLock<EntryId>,
    /// CI ids, pre-packed as mask words: a hit copies them in one pass.
    pub ci_bits: Box<[u32]>,
    pub ci_count: u32,
    /// The first CI token in trie order: its node (for the forced run of a singleton).
    pub ci_first: Option<u32>,
    /// Every token whose verdict needs the live stacks, grouped by verdict equivalence.
    pub classes: Box<[CdCandidates]>,
    /// The distinct emitted sequences of the classes (`classes[i].key.emitted ==
    /// emissions[class_emission[i]]`): a step shifts each once, however many classes share it.
    pub(crate) emissions: Box<[SmallVec<[TermSet; 2]>]>,
    pub(crate) class_emission: Box<[u32]>,
}

/// Equal keys and payloads (so equal ids, whether computed yet or not).
impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.key == other.key
            && self.ci_bits == other.ci_bits
            && self.ci_count == other.ci_count
            && self.ci_first == other.ci_first
            && self.classes == other.classes
            && self.emissions == other.emissions
            && self.class_emission == other.class_emission
    }
}

impl Eq for Entry {}

/// One verdict-equivalence class of CD candidates: all allowed or all blocked on any
/// stacks with the key's `A`.
#[derive(Clone, Debug)]
pub struct CdCandidates {
    /// Shared with the walk's merged tails and with the masks' [`crate::CdClass`]es.
    pub(crate) key: Arc<CdKey>,
    /// Alias-expanded ids, as ascending runs, disjoint (a miss files a class from the
    /// lists of the walk tails it spans). Sorted into one list only when the class is
    /// first allowed ([`CdCandidates::ids`]): most classes of a cold entry never are.
    runs: SmallVec<[Arc<[u32]>; 1]>,
    sorted: OnceLock<Arc<[u32]>>,
    /// The class's first token in trie order: its node and its spelling, fed when the
    /// verdict needs the full viability check.
    pub(crate) rep_node: u32,
    pub(crate) rep: SmallVec<[u8; 16]>,
}

/// Equal keys, ids and first tokens, however the ids are split into runs.
impl PartialEq for CdCandidates {
    fn eq(&self, other: &CdCandidates) -> bool {
        self.key == other.key
            && self.len() == other.len()
            && self.ids() == other.ids()
            && self.rep_node == other.rep_node
            && self.rep == other.rep
    }
}

impl Eq for CdCandidates {}

impl CdCandidates {
    /// A class of the ids in `runs`: each ascending, no id in two.
    pub(crate) fn new(
        key: Arc<CdKey>,
        runs: SmallVec<[Arc<[u32]>; 1]>,
        rep_node: u32,
        rep: SmallVec<[u8; 16]>,
    ) -> CdCandidates {
        debug_assert!(runs.iter().all(|r| r.windows(2).all(|w| w[0] < w[1])));
        CdCandidates {
            key,
            runs,
            sorted: OnceLock::new(),
            rep_node,
            rep,
        }
    }

    /// The number of ids.
    pub(crate) fn len(&self) -> usize {
        self.runs.iter().map(|r| r.len()).sum()
    }

    /// Every id, run by run (ascending within a run).
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs.iter().flat_map(|r| r.iter()).copied()
    }

    /// The ids ascending, as one list. Shared: a hit hands the mask this list, not a copy.
    pub(crate) fn ids(&self) -> &Arc<[u32]> {
        match &self.runs[..] {
            [one] => one,
            runs => self.sorted.get_or_init(|| {
                let mut all: Vec<u32> = Vec::with_capacity(self.len());
                for r in runs {
                    all.extend_from_slice(r);
                }
                // Ascending runs: the stable sort finds and merges them.
                all.sort();
                all.into()
            }),
        }
    }
}

impl Entry {
    /// Seals a payload under `key` (its id is computed when first asked).
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
                *index.entry(c.key.emitted()).or_insert_with(|| {
                    emissions.push(c.key.emitted().into());
                    emissions.len() as u32 - 1
                })
            })
            .collect();
        drop(index);
        Entry {
            key: key.clone(),
            id: OnceLock::new(),
            ci_bits,
            ci_count,
            ci_first,
            classes,
            emissions: emissions.into(),
            class_emission,
        }
    }

    /// The content address: `BLAKE2b-128(key ‖ encoding tag ‖ payload)`.
    pub fn id(&self) -> EntryId {
        *self.id.get_or_init(|| self.hash())
    }

    fn hash(&self) -> EntryId {
        // The payload is streamed into the hash through a small buffer: an entry's id lists
        // run to hundreds of kilobytes on large vocabularies.
        let mut h = Blake2b::<U16>::new();
        let mut bytes = Vec::with_capacity(HASH_CHUNK);
        self.key.encode(&mut bytes);
        bytes.extend_from_slice(ENCODING_TAG);
        self.encode_payload(&mut bytes, &mut |b| {
            if b.len() >= HASH_CHUNK {
                h.update(&b[..]);
                b.clear();
            }
        });
        h.update(&bytes);
        h.finalize().into()
    }

    /// Heap bytes the entry holds (what the cache's budget counts).
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let classes: usize = self
            .classes
            .iter()
            .map(|c| {
                // The key counted whole, though a merged tail's classes share theirs.
                size_of::<CdCandidates>()
                    + size_of::<CdKey>()
                    + c.len() * size_of::<u32>()
                    + std::mem::size_of_val(c.key.emitted())
            })
            .sum();
        size_of::<Entry>()
            + self.ci_bits.len() * size_of::<u32>()
            + classes
            + self.emissions.len() * size_of::<SmallVec<[TermSet; 2]>>()
            + self.class_emission.len() * size_of::<u32>()
    }

    /// Writes the payload into `out`, calling `flush` on it between pieces.
    fn encode_payload(&self, out: &mut Vec<u8>, flush: &mut impl FnMut(&mut Vec<u8>)) {
        out.extend_from_slice(&(self.ci_bits.len() as u32).to_le_bytes());
        for w in self.ci_bits.iter() {
            out.extend_from_slice(&w.to_le_bytes());
            flush(out);
        }
        out.extend_from_slice(&self.ci_count.to_le_bytes());
        out.extend_from_slice(&self.ci_first.map_or(u32::MAX, |n| n).to_le_bytes());
        out.extend_from_slice(&(self.classes.len() as u32).to_le_bytes());
        for c in self.classes.iter() {
            match &*c.key {
                CdKey::Scanned { emitted, trail: t } => {
                    out.push(0);
                    out.extend_from_slice(&(emitted.len() as u32).to_le_bytes());
                    for e in emitted {
                        put_terms(out, e);
                    }
                    out.push(u8::from(t.idle));
                    put_terms(out, &t.live);
                    match &t.cutback {
                        None => out.push(0),
                        Some(c) => {
                            out.push(1);
                            out.extend_from_slice(&c.q.to_le_bytes());
                            out.extend_from_slice(&c.w.to_le_bytes());
                            put_terms(out, &c.cands);
                            out.push(u8::from(c.word));
                            put_bytes(out, &c.rest);
                        }
                    }
                }
                CdKey::Exact { node } => {
                    out.push(1);
                    out.extend_from_slice(&node.to_le_bytes());
                }
                // Never in an entry (its tokens are found on the live configuration), but a
                // tag of its own all the same.
                CdKey::Dynamic => out.push(2),
            }
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            for id in c.ids().iter() {
                out.extend_from_slice(&id.to_le_bytes());
                flush(out);
            }
            out.extend_from_slice(&c.rep_node.to_le_bytes());
            put_bytes(out, &c.rep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::key::{GenericKey, KeyBody, Remainder};
    use crate::scan::{Cutback, TrailKey};

    #[test]
    fn the_streamed_id_is_the_hash_of_the_whole_encoding() {
        let key = CacheKey::Generic(GenericKey(KeyBody {
            scope: [7; 16],
            remainder: Remainder::Raw(b"emplo".as_slice().into()),
            allowed: TermSet::singleton(3),
        }));
        // Id lists long enough that the encoding spans many hash chunks.
        let classes: Box<[CdCandidates]> = (0..40u32)
            .map(|c| {
                CdCandidates::new(
                    Arc::new(if c % 7 == 6 {
                        CdKey::Exact { node: c }
                    } else {
                        CdKey::Scanned {
                            emitted: [TermSet::singleton(c as u16 % 5)].into_iter().collect(),
                            trail: TrailKey {
                                idle: c % 2 == 0,
                                live: TermSet::singleton(c as u16 % 11),
                                cutback: (c % 3 == 0).then(|| Cutback {
                                    q: c,
                                    w: c * 3,
                                    cands: TermSet::singleton(1),
                                    word: true,
                                    rest: b"x".as_slice().into(),
                                }),
                            },
                        }
                    }),
                    // Two runs, interleaved: the encoding reads them merged.
                    [0, 1]
                        .into_iter()
                        .map(|k| {
                            (0..1_000)
                                .map(|i| 100_000 + c * 2_000 + 2 * i + k)
                                .collect()
                        })
                        .collect(),
                    c,
                    b"ab".as_slice().into(),
                )
            })
            .collect();
        let ci_bits: Box<[u32]> = (0..5_000u32)
            .map(|w| w.wrapping_mul(2_654_435_761))
            .collect();
        let e = Entry::new(&key, ci_bits.clone(), 77, Some(4), classes.clone());
        let mut whole = Vec::new();
        key.encode(&mut whole);
        whole.extend_from_slice(ENCODING_TAG);
        e.encode_payload(&mut whole, &mut |_| {});
        assert!(whole.len() > 10 * HASH_CHUNK, "{}", whole.len());
        let expected: EntryId = Blake2b::<U16>::digest(&whole).into();
        assert_eq!(e.id(), expected);
        // The id is computed when asked, and an entry that has it equals one that has not.
        let again = Entry::new(&key, ci_bits.clone(), 77, Some(4), classes.clone());
        assert!(again.id.get().is_none());
        assert_eq!(e, again);
        assert_eq!(again.id(), expected);
        // And the id reads the payload: one id moved changes it.
        let mut other = classes.to_vec();
        let mut ids = other[39].ids().to_vec();
        ids[1_999] += 1;
        let c = &other[39];
        other[39] = CdCandidates::new(
            c.key.clone(),
            [ids.into()].into_iter().collect(),
            c.rep_node,
            c.rep.clone(),
        );
        let f = Entry::new(&key, ci_bits, 77, Some(4), other.into());
        assert_ne!(e.id(), f.id());
    }
}
