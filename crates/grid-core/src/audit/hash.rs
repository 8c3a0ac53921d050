//! BLAKE2b-256 under domain tags, the two genesis constants, and the lowercase-hex text
//! form of every hash, id and fingerprint of the audit chain.
//!
//! Every hash of the chain is `BLAKE2b-256(tag ‖ canonical bytes)`, where the tag is one of
//! the NUL-terminated ASCII strings below. Distinct tags keep a step hash, a seal hash and
//! a genesis constant from ever being confused with one another, and the `/v1` suffix
//! names the encoding: a change to any canonical encoding gets a new tag.

use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};
use thiserror::Error;

/// A 32-byte BLAKE2b-256 digest: step hashes, seal hashes, genesis constants, text digests.
pub type Digest32 = [u8; 32];

/// Domain tag of a step record hash ([`crate::audit::StepRecord::compute_hash`]).
pub const STEP_TAG: &[u8] = b"grid_pg/audit/step/v1\0";
/// Domain tag of a seal hash ([`crate::audit::Seal::compute_hash`]).
pub const SEAL_TAG: &[u8] = b"grid_pg/audit/seal/v1\0";
/// Domain tag of a generation's genesis constant ([`generation_genesis`]).
pub const GENESIS_TAG: &[u8] = b"grid_pg/audit/genesis/v1\0";
/// Domain tag of the global seal chain's genesis constant ([`seal_genesis`]).
pub const SEAL_GENESIS_TAG: &[u8] = b"grid_pg/audit/seal-genesis/v1\0";
/// Domain tag of a text digest ([`text_digest`]).
pub const TEXT_TAG: &[u8] = b"grid_pg/audit/text/v1\0";

/// Domain tag of an artifact's content digest ([`artifact_digest`]).
pub const ARTIFACT_TAG: &[u8] = b"grid_pg/audit/artifact/v1\0";

/// BLAKE2b-256 of `tag ‖ parts[0] ‖ parts[1] ‖ …`.
pub(crate) fn tagged(tag: &[u8], parts: &[&[u8]]) -> Digest32 {
    let mut h = Blake2b::<U32>::new();
    h.update(tag);
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The `prev_hash` of step 0 of generation `generation`:
/// `BLAKE2b-256("grid_pg/audit/genesis/v1\0" ‖ u64le(generation))`.
///
/// Deriving it from the generation id (rather than one constant for all) means the first
/// record of a generation cannot be moved to another generation, and a generation's whole
/// chain cannot be replayed under another id, without breaking its first link.
pub fn generation_genesis(generation: u64) -> Digest32 {
    tagged(GENESIS_TAG, &[&generation.to_le_bytes()])
}

/// The `prev_seal_hash` of seal 0: `BLAKE2b-256("grid_pg/audit/seal-genesis/v1\0")`.
/// It is also the hash of the head of an empty log (`Head { seals: 0, .. }`).
pub fn seal_genesis() -> Digest32 {
    tagged(SEAL_GENESIS_TAG, &[])
}

/// `BLAKE2b-256("grid_pg/audit/text/v1\0" ‖ utf8(text))`: the digest a seal may carry in
/// place of the question or the final SQL text.
pub fn text_digest(text: &str) -> Digest32 {
    tagged(TEXT_TAG, &[text.as_bytes()])
}

/// `BLAKE2b-256("grid_pg/audit/artifact/v1\0" ‖ parts[0] ‖ parts[1] ‖ …)`: the content
/// digest of an archived artifact, over the canonical encoding its owner defines
/// (`grid_ask::contents::content_digest`), given in parts so that a large artifact is
/// not copied to be hashed.
pub fn artifact_digest(parts: &[&[u8]]) -> Digest32 {
    tagged(ARTIFACT_TAG, parts)
}

/// Lowercase hex, two digits per byte, most significant nibble first.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Why a hex string is not an `N`-byte value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HexError {
    #[error("expected {expected} hex digits, found {found}")]
    Length { expected: usize, found: usize },
    #[error("not a hex digit at position {position}")]
    Digit { position: usize },
}

/// Parses exactly `2 * N` hex digits (either case) into `N` bytes.
pub fn from_hex<const N: usize>(s: &str) -> Result<[u8; N], HexError> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return Err(HexError::Length {
            expected: 2 * N,
            found: b.len(),
        });
    }
    let nibble = |i: usize| -> Result<u8, HexError> {
        match b[i] {
            c @ b'0'..=b'9' => Ok(c - b'0'),
            c @ b'a'..=b'f' => Ok(c - b'a' + 10),
            c @ b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(HexError::Digit { position: i }),
        }
    };
    let mut out = [0u8; N];
    for (k, o) in out.iter_mut().enumerate() {
        *o = (nibble(2 * k)? << 4) | nibble(2 * k + 1)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let v = [0x00u8, 0x7f, 0x80, 0xff];
        assert_eq!(to_hex(&v), "007f80ff");
        assert_eq!(from_hex::<4>("007F80ff"), Ok(v));
        assert_eq!(
            from_hex::<4>("007f80f"),
            Err(HexError::Length {
                expected: 8,
                found: 7
            })
        );
        assert_eq!(
            from_hex::<4>("007g80ff"),
            Err(HexError::Digit { position: 3 })
        );
    }

    #[test]
    fn genesis_constants_differ() {
        assert_ne!(generation_genesis(0), generation_genesis(1));
        assert_ne!(generation_genesis(0), seal_genesis());
        assert_ne!(text_digest(""), seal_genesis());
    }
}
