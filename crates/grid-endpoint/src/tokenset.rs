//! Token sets as packed bitsets, and the content-addressed ids of mask entries.
//!
//! On the wire a set of token ids over a vocabulary of `n` ids is `ceil(n / 32)` `u32`
//! words, little-endian, back to back, base64 (standard alphabet, padded): id `i` is bit
//! `i % 32` of word `i / 32`; bits at or above `n` in the last word are zero.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a packed bitset or an entry id could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetDecodeError {
    /// The payload is not valid base64.
    #[error("payload is not base64: {0}")]
    Base64(String),
    /// The payload does not hold exactly `ceil(vocab / 32)` words.
    #[error("payload has {got} bytes, expected {expected} for a vocabulary of {vocab}")]
    Length {
        /// Decoded byte length.
        got: usize,
        /// `4 * ceil(vocab / 32)`.
        expected: usize,
        /// Vocabulary size.
        vocab: usize,
    },
    /// A bit at or above the vocabulary size is set.
    #[error("payload sets bit {bit}, beyond the vocabulary of {vocab}")]
    BitOutOfRange {
        /// The offending bit (token id).
        bit: usize,
        /// Vocabulary size.
        vocab: usize,
    },
    /// An id given to [`TokenSet::from_ids`] is out of range.
    #[error("token id {id} is out of range for a vocabulary of {vocab}")]
    IdOutOfRange {
        /// The offending id.
        id: u32,
        /// Vocabulary size.
        vocab: usize,
    },
}

/// A set of token ids of a vocabulary of `universe` ids, packed one bit per id.
///
/// Invariant: `words.len() == universe.div_ceil(32)` and no bit at or above `universe`
/// is set, so equal sets have equal words.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenSet {
    /// The vocabulary size (number of ids the set ranges over).
    universe: usize,
    /// Bit `i % 32` of `words[i / 32]` is id `i`.
    words: Vec<u32>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("universe", &self.universe)
            .field("len", &self.len())
            .finish()
    }
}

impl TokenSet {
    /// The empty set over `universe` ids.
    pub fn new(universe: usize) -> Self {
        TokenSet {
            universe,
            words: vec![0; universe.div_ceil(32)],
        }
    }

    /// Every id of `universe`.
    pub fn full(universe: usize) -> Self {
        let mut s = TokenSet {
            universe,
            words: vec![u32::MAX; universe.div_ceil(32)],
        };
        s.clear_tail();
        s
    }

    /// The set of `ids`; an id at or above `universe` is an error.
    pub fn from_ids(
        universe: usize,
        ids: impl IntoIterator<Item = u32>,
    ) -> Result<Self, SetDecodeError> {
        let mut s = TokenSet::new(universe);
        for id in ids {
            if !s.insert(id) && id as usize >= universe {
                return Err(SetDecodeError::IdOutOfRange {
                    id,
                    vocab: universe,
                });
            }
        }
        Ok(s)
    }

    /// Decodes a base64 payload (see the module documentation).
    pub(crate) fn from_base64(universe: usize, payload: &str) -> Result<Self, SetDecodeError> {
        let bytes = STANDARD
            .decode(payload)
            .map_err(|e| SetDecodeError::Base64(e.to_string()))?;
        Self::from_le_bytes(universe, &bytes)
    }

    /// Decodes little-endian packed words.
    pub(crate) fn from_le_bytes(universe: usize, bytes: &[u8]) -> Result<Self, SetDecodeError> {
        let expected = universe.div_ceil(32) * 4;
        if bytes.len() != expected {
            return Err(SetDecodeError::Length {
                got: bytes.len(),
                expected,
                vocab: universe,
            });
        }
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let s = TokenSet { universe, words };
        if let Some(bit) = s.first_bit_beyond_universe() {
            return Err(SetDecodeError::BitOutOfRange {
                bit,
                vocab: universe,
            });
        }
        Ok(s)
    }

    /// The payload: packed little-endian words, base64.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.to_le_bytes())
    }

    /// The packed little-endian words.
    pub(crate) fn to_le_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The vocabulary size this set ranges over.
    pub(crate) fn universe(&self) -> usize {
        self.universe
    }

    /// The packed words.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Whether `id` is in the set (ids out of range are not).
    pub fn contains(&self, id: u32) -> bool {
        let i = id as usize;
        i < self.universe && self.words[i / 32] & (1 << (i % 32)) != 0
    }

    /// Adds `id`; returns whether it was added (false when present or out of range).
    pub fn insert(&mut self, id: u32) -> bool {
        let i = id as usize;
        if i >= self.universe || self.contains(id) {
            return false;
        }
        self.words[i / 32] |= 1 << (i % 32);
        true
    }

    /// Removes `id`; returns whether it was present.
    pub fn remove(&mut self, id: u32) -> bool {
        if !self.contains(id) {
            return false;
        }
        let i = id as usize;
        self.words[i / 32] &= !(1 << (i % 32));
        true
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The ids of the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some(wi as u32 * 32 + b)
            })
        })
    }

    fn clear_tail(&mut self) {
        let r = self.universe % 32;
        if r != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u32 << r) - 1;
            }
        }
    }

    fn first_bit_beyond_universe(&self) -> Option<usize> {
        let r = self.universe % 32;
        let last = *self.words.last()?;
        if r == 0 {
            return None;
        }
        let beyond = last & !((1u32 << r) - 1);
        (beyond != 0).then(|| (self.words.len() - 1) * 32 + beyond.trailing_zeros() as usize)
    }
}

/// The content-addressed id of a mask-cache entry: 16 bytes, on the wire as 32 lowercase
/// hex digits. The extension computes it as `BLAKE2b-128(key ‖ encoding tag ‖ payload)`;
/// the endpoint treats it as an opaque name for an immutable payload.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(pub [u8; 16]);

impl EntryId {
    /// An id derived from a set alone: `BLAKE2b-128("grid-endpoint/mask\0" ‖ universe as
    /// u64le ‖ packed words)`. For callers (tests, the CLI) without an id of their own; the
    /// extension uses `grid_core::decode::mask_entry_id`.
    pub fn of_set(set: &TokenSet) -> Self {
        let mut h = Blake2b::<U16>::new();
        h.update(b"grid-endpoint/mask\0");
        h.update((set.universe() as u64).to_le_bytes());
        h.update(set.to_le_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize());
        EntryId(out)
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hex digits (either case).
    pub(crate) fn from_hex(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 32 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in b.chunks_exact(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Some(EntryId(out))
    }
}

impl fmt::Debug for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntryId({})", self.to_hex())
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for EntryId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for EntryId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        EntryId::from_hex(&s)
            .ok_or_else(|| serde::de::Error::custom("entry_id must be 32 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_invariants() {
        let s = TokenSet::from_ids(70, [0, 5, 31, 32, 69]).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 5, 31, 32, 69]);
        let back = TokenSet::from_base64(70, &s.to_base64()).unwrap();
        assert_eq!(back, s);
        assert!(TokenSet::from_ids(70, [70]).is_err());
        assert_eq!(TokenSet::full(70).len(), 70);
        // A bit beyond the universe is refused.
        let mut bytes = TokenSet::new(70).to_le_bytes();
        bytes[8] = 0b1000_0000;
        assert!(matches!(
            TokenSet::from_le_bytes(70, &bytes),
            Err(SetDecodeError::BitOutOfRange { bit: 71, .. })
        ));
        assert!(TokenSet::from_le_bytes(70, &bytes[..8]).is_err());
    }

    #[test]
    fn entry_id_hex() {
        let id = EntryId::of_set(&TokenSet::full(10));
        assert_eq!(EntryId::from_hex(&id.to_hex()), Some(id));
        assert_eq!(EntryId::from_hex("zz"), None);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<EntryId>(&json).unwrap(), id);
    }
}
