//! One decoding step of one generation: the step record, its canonical encoding and hash.

use serde::{Deserialize, Serialize};

use super::hash::{tagged, Digest32, STEP_TAG};

/// The token a step emitted: a vocabulary id, or the end of the statement.
///
/// EOS is its own value rather than the vocabulary's EOS id, because it enters only
/// through the EOS gate and means "the output is a complete sentence" whatever the
/// tokenizer calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Token {
    Id(u32),
    Eos,
}

impl Token {
    /// Canonical bytes: `u8 tag (0 = id, 1 = EOS) ‖ u32le (the id, 0 for EOS)`.
    fn encode(self) -> [u8; 5] {
        let (tag, v) = match self {
            Token::Id(id) => (0u8, id),
            Token::Eos => (1u8, 0),
        };
        let mut b = [0u8; 5];
        b[0] = tag;
        b[1..].copy_from_slice(&v.to_le_bytes());
        b
    }
}

/// How a step's token was chosen.
///
/// Invariants checked by the writer and the verifier (see `rules.rs`): `kind == Eos` if
/// and only if `token == Token::Eos`; an `Eos` record is the last step of its generation;
/// after a `BudgetCompleted` record only `BudgetCompleted` or `Eos` records follow;
/// `Replayed` records come first, before any record of another kind; `Replayed` and
/// `Banned` records are written in mode 1 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The endpoint sampled the token from the step's mask.
    Sampled,
    /// The mask was a singleton and the token was appended without sampling (every token
    /// of a forced span, interior ones included, gets its own record).
    Forced,
    /// The EOS tail record: the output is a complete sentence and the generation ended.
    Eos,
    /// The budget reserve triggered: the loop wrote this token of the shortest legal
    /// completion (mode 1 only).
    BudgetCompleted,
    /// A rewind repair carried this token over from the generation it repairs (the
    /// statement up to the reference the checker refused): it is in the step's exact
    /// mask, and the model did not choose it again (mode 1 only).
    Replayed,
    /// Not a token of the output: the rewind point. The token is the one the repaired
    /// generation chose here, and it is removed from the mask of the records that follow
    /// at this position (the record itself commits to the exact mask, which holds it), so
    /// the model continues with its next choice (mode 1 only).
    Banned,
}

impl StepKind {
    /// Canonical byte of the kind.
    pub(crate) fn code(self) -> u8 {
        match self {
            StepKind::Sampled => 0,
            StepKind::Forced => 1,
            StepKind::Eos => 2,
            StepKind::BudgetCompleted => 3,
            StepKind::Replayed => 4,
            StepKind::Banned => 5,
        }
    }

    /// The JSONL / SQL spelling.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Sampled => "sampled",
            StepKind::Forced => "forced",
            StepKind::Eos => "eos",
            StepKind::BudgetCompleted => "budget_completed",
            StepKind::Replayed => "replayed",
            StepKind::Banned => "banned",
        }
    }

    /// Whether the record's token is part of the output (every kind but `Banned`).
    pub(crate) fn emits(self) -> bool {
        self != StepKind::Banned
    }

    /// Every kind, in code order.
    pub const ALL: [StepKind; 6] = [
        StepKind::Sampled,
        StepKind::Forced,
        StepKind::Eos,
        StepKind::BudgetCompleted,
        StepKind::Replayed,
        StepKind::Banned,
    ];
}

/// Length of a step record's canonical encoding, without the domain tag.
pub const STEP_ENCODING_LEN: usize = 8 + 4 + 8 + 16 + 5 + 4 + 1 + 32;

/// The record of one decoding step (`grid.audit_log` row, `{"type":"step"}` JSONL line).
///
/// Invariant of a well-formed log (kept by [`crate::audit::ChainWriter`], checked by
/// [`crate::audit::verify`]): the records of generation `g` appear in the log in step
/// order `0, 1, 2, …` without gaps, interleaved arbitrarily with other generations'
/// records; `prev_hash` of step 0 is [`crate::audit::generation_genesis`]`(g)` and of step
/// `s > 0` is the `hash` of step `s - 1`; `hash == compute_hash()`; no record of `g`
/// follows the seal of `g`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    /// Generation id (unique per log; the caller allocates it, e.g. from a sequence).
    pub generation: u64,
    /// Position of the step in its generation, from 0.
    pub step: u32,
    /// Rolling parser-configuration hash before the step (the hash of each live stack, see
    /// `crate::decode::config_hash`).
    pub config_hash: u64,
    /// Content-addressed id of the mask entry the token was chosen from.
    pub mask_entry_id: [u8; 16],
    /// The emitted token.
    pub token: Token,
    /// How many vocabulary tokens the mask blocked at this step.
    pub blocked_count: u32,
    /// How the token was chosen.
    pub kind: StepKind,
    /// Hash of the previous record of this generation, or its genesis constant.
    pub prev_hash: Digest32,
    /// `compute_hash()` at the time of writing.
    pub hash: Digest32,
}

impl StepRecord {
    /// The canonical encoding of every field except `hash`, in this order, little-endian:
    /// `u64 generation ‖ u32 step ‖ u64 config_hash ‖ [16] mask_entry_id ‖ u8 token tag ‖
    /// u32 token id ‖ u32 blocked_count ‖ u8 kind ‖ [32] prev_hash`.
    pub(crate) fn encode(&self) -> [u8; STEP_ENCODING_LEN] {
        let mut b = [0u8; STEP_ENCODING_LEN];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            b[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&self.generation.to_le_bytes());
        put(&self.step.to_le_bytes());
        put(&self.config_hash.to_le_bytes());
        put(&self.mask_entry_id);
        put(&self.token.encode());
        put(&self.blocked_count.to_le_bytes());
        put(&[self.kind.code()]);
        put(&self.prev_hash);
        b
    }

    /// `BLAKE2b-256("grid_pg/audit/step/v1\0" ‖ encode())`.
    pub fn compute_hash(&self) -> Digest32 {
        tagged(STEP_TAG, &[&self.encode()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> StepRecord {
        StepRecord {
            generation: 1,
            step: 2,
            config_hash: 3,
            mask_entry_id: [4; 16],
            token: Token::Id(5),
            blocked_count: 6,
            kind: StepKind::Sampled,
            prev_hash: [7; 32],
            hash: [0; 32],
        }
    }

    #[test]
    fn encoding_layout_is_fixed() {
        let e = rec().encode();
        assert_eq!(&e[0..8], &1u64.to_le_bytes());
        assert_eq!(&e[8..12], &2u32.to_le_bytes());
        assert_eq!(&e[12..20], &3u64.to_le_bytes());
        assert_eq!(&e[20..36], &[4u8; 16]);
        assert_eq!(&e[36..41], &[0, 5, 0, 0, 0]);
        assert_eq!(&e[41..45], &6u32.to_le_bytes());
        assert_eq!(e[45], 0);
        assert_eq!(&e[46..78], &[7u8; 32]);
    }

    #[test]
    fn eos_and_id_zero_hash_differently() {
        let a = StepRecord {
            token: Token::Id(0),
            ..rec()
        };
        let b = StepRecord {
            token: Token::Eos,
            ..rec()
        };
        assert_ne!(a.compute_hash(), b.compute_hash());
        // `hash` itself is not an input.
        let c = StepRecord {
            hash: [9; 32],
            ..a.clone()
        };
        assert_eq!(a.compute_hash(), c.compute_hash());
    }
}
