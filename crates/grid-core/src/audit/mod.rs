//! The audit chain: every decoding step of every
//! generation is a hash-chained record, every generation ends with a seal, and seals
//! chain globally so that a dropped tail shows against an externally kept head.
//!
//! - `hash`: BLAKE2b-256 under domain tags, genesis constants, hex.
//! - `record`: [`StepRecord`] and its canonical encoding.
//! - `seal`: [`Seal`], stop reasons, fingerprints, mode flags, [`Head`].
//! - `rules`: what a well-formed generation looks like (shared by writer and verifier).
//! - `chain`: the writer, [`ChainWriter`] / [`AuditLog`], and [`AuditSink`].
//! - `feedback`: the feedback chain beside the seal chain ([`FeedbackRecord`],
//!   [`FeedbackVerifier`]): what askers said of their generations.
//! - `verify`: the verifier and its precisely located errors.
//! - `replay`: the hook through which the decode loop recomputes masks.
//! - `jsonl`: the `--audit-out` file format.
//!
//! Chains: record `s` of generation `g` carries `prev_hash` = hash of record `s - 1` of
//! `g`, or [`generation_genesis`]`(g)` for `s = 0`; seal `i` carries `prev_seal_hash` =
//! hash of seal `i - 1`, or [`seal_genesis`] for `i = 0`, and commits to its generation's
//! step count and last record hash.

mod chain;
mod feedback;
mod hash;
pub mod jsonl;
mod record;
mod replay;
mod rules;
mod seal;
mod verify;

pub use chain::{
    AuditLog, AuditSink, ChainWriter, Entry, SealInput, SinkError, StepInput, WriteError,
};
pub use feedback::{
    feedback_genesis, feedback_genesis_head, FeedbackError, FeedbackReason, FeedbackRecord,
    FeedbackVerdict, FeedbackVerifier, FEEDBACK_GENESIS_TAG, FEEDBACK_TAG,
};
pub use hash::from_hex;
pub use hash::{
    artifact_digest, seal_genesis, Digest32, HexError, ARTIFACT_TAG, GENESIS_TAG, SEAL_GENESIS_TAG,
    SEAL_TAG, STEP_TAG, TEXT_TAG,
};
pub use hash::{generation_genesis, text_digest, to_hex};
pub use jsonl::{read_jsonl, write_jsonl, JsonlError, JsonlReader, JsonlSink, LineError};
pub use record::{StepKind, StepRecord, Token, STEP_ENCODING_LEN};
pub use replay::{replay, Difference, MaskCommit, RecomputeError, ReplayError, StepContext};
pub use replay::{replay_generation, Recompute, ReplaySummary};
pub use rules::{StepRule, StopRule};
pub use seal::{DecodeMode, Fingerprints, Head, HeadParseError, Mode, Seal, SealMeta, StopReason};
pub use verify::{verify, Incomplete, Reason, Site, Summary, Verifier, VerifyError, VerifyOptions};
