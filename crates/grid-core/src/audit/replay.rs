//! The replayer hook: walks every sealed generation step by step and compares what the
//! caller recomputes from archived artifacts with what the log recorded, bit for bit.
//!
//! The audit module knows nothing of grammars or vocabularies: the caller (the decode
//! loop's replayer) fetches the artifacts named by the seal's fingerprints, drives a
//! session with the recorded tokens, and answers each step with a [`MaskCommit`].

use std::collections::HashMap;

use thiserror::Error;

use super::chain::Entry;
use super::hash::to_hex;
use super::record::{StepKind, StepRecord, Token};
use super::seal::Seal;
use super::verify::{verify, Summary, VerifyError, VerifyOptions};

/// What the recompute function is told about a step. It holds no recorded commitment
/// (config hash, mask entry id, blocked count): those must come from the artifacts.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    pub generation: u64,
    pub step: u32,
    /// The seal of the generation: fingerprints of the artifacts to load, mode flags.
    pub seal: &'a Seal,
    /// The output so far: the tokens of steps `0..step`, but for `Banned` records.
    pub prefix: &'a [Token],
    /// The ids the `Banned` records since the last output token removed: the step's
    /// mask is the exact mask without them.
    pub(crate) banned: &'a [u32],
    /// The token this step emitted, to check against the mask and then advance with.
    pub(crate) token: Token,
    /// How it was chosen.
    pub(crate) kind: StepKind,
}

/// What a step's mask is, recomputed: the values the record commits to, and whether the
/// recorded token is in the mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskCommit {
    pub config_hash: u64,
    pub mask_entry_id: [u8; 16],
    pub blocked_count: u32,
    /// Whether the recorded token (EOS: the EOS bit) is allowed by the recomputed mask.
    pub token_allowed: bool,
}

/// Why the recompute function could not answer (missing artifact, …).
pub type RecomputeError = Box<dyn std::error::Error + Send + Sync>;

/// Replays one sealed generation whose chain was verified elsewhere: `records` are its
/// step records in step order, `seal` its seal. Returns the steps replayed.
pub fn replay_generation<'r>(
    records: impl IntoIterator<Item = &'r StepRecord>,
    seal: &Seal,
    recompute: &mut Recompute<'_>,
) -> Result<u64, ReplayError> {
    let mut prefix: Vec<Token> = Vec::new();
    let mut banned: Vec<u32> = Vec::new();
    let mut steps = 0u64;
    for r in records {
        let ctx = StepContext {
            generation: r.generation,
            step: r.step,
            seal,
            prefix: &prefix,
            banned: &banned,
            token: r.token,
            kind: r.kind,
        };
        let got = recompute(&ctx).map_err(|source| ReplayError::Recompute {
            generation: r.generation,
            step: r.step,
            source,
        })?;
        let difference = if got.config_hash != r.config_hash {
            Some(Difference::ConfigHash {
                recorded: r.config_hash,
                recomputed: got.config_hash,
            })
        } else if got.mask_entry_id != r.mask_entry_id {
            Some(Difference::MaskEntryId {
                recorded: r.mask_entry_id,
                recomputed: got.mask_entry_id,
            })
        } else if got.blocked_count != r.blocked_count {
            Some(Difference::BlockedCount {
                recorded: r.blocked_count,
                recomputed: got.blocked_count,
            })
        } else {
            None
        };
        if let Some(difference) = difference {
            return Err(ReplayError::Mismatch {
                generation: r.generation,
                step: r.step,
                difference,
            });
        }
        if !got.token_allowed {
            return Err(ReplayError::TokenNotAllowed {
                generation: r.generation,
                step: r.step,
                token: r.token,
            });
        }
        match (r.kind.emits(), r.token) {
            (true, t) => {
                prefix.push(t);
                banned.clear();
            }
            (false, Token::Id(id)) => banned.push(id),
            (false, Token::Eos) => {}
        }
        steps += 1;
    }
    Ok(steps)
}

/// The recompute callback: called for every step of every sealed generation, generations
/// in seal order, steps in order, the first call of a generation with `step == 0`.
pub type Recompute<'f> = dyn FnMut(&StepContext<'_>) -> Result<MaskCommit, RecomputeError> + 'f;

/// A committed value whose recomputation differs from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    ConfigHash {
        recorded: u64,
        recomputed: u64,
    },
    MaskEntryId {
        recorded: [u8; 16],
        recomputed: [u8; 16],
    },
    BlockedCount {
        recorded: u32,
        recomputed: u32,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::ConfigHash {
                recorded,
                recomputed,
            } => write!(
                f,
                "config_hash recorded {recorded:016x}, recomputed {recomputed:016x}"
            ),
            Difference::MaskEntryId {
                recorded,
                recomputed,
            } => write!(
                f,
                "mask_entry_id recorded {}, recomputed {}",
                to_hex(recorded),
                to_hex(recomputed)
            ),
            Difference::BlockedCount {
                recorded,
                recomputed,
            } => write!(
                f,
                "blocked_count recorded {recorded}, recomputed {recomputed}"
            ),
        }
    }
}

/// The first reason a log does not replay.
#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("chain: {0}")]
    Chain(#[from] VerifyError),
    #[error("generation {generation}, step {step}: {difference}")]
    Mismatch {
        generation: u64,
        step: u32,
        difference: Difference,
    },
    #[error("generation {generation}, step {step}: the recorded token {token:?} is not in the recomputed mask")]
    TokenNotAllowed {
        generation: u64,
        step: u32,
        token: Token,
    },
    #[error("generation {generation}, step {step}: recompute failed: {source}")]
    Recompute {
        generation: u64,
        step: u32,
        #[source]
        source: RecomputeError,
    },
}

/// What a replay covered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySummary {
    /// The chain verification the replay started with.
    pub(crate) chain: Summary,
    /// Sealed generations replayed.
    pub generations: u64,
    /// Steps replayed (steps of unsealed generations are not: their artifacts are unknown).
    pub steps: u64,
}

/// Verifies the chain (with `opts`), then replays every sealed generation through
/// `recompute`, returning the first difference.
pub fn replay(
    entries: &[Entry],
    opts: &VerifyOptions,
    recompute: &mut Recompute<'_>,
) -> Result<ReplaySummary, ReplayError> {
    let chain = verify(entries, opts)?;
    // The chain verified, so each generation's records are in step order and each
    // sealed generation has exactly one seal.
    let mut records: HashMap<u64, Vec<&StepRecord>> = HashMap::new();
    let mut seals: Vec<&Seal> = Vec::new();
    for e in entries {
        match e {
            Entry::Step(r) => records.entry(r.generation).or_default().push(r),
            Entry::Seal(s) => seals.push(s),
        }
    }
    let (mut generations, mut steps) = (0u64, 0u64);
    for seal in seals {
        let mine = records.get(&seal.generation).into_iter().flatten().copied();
        steps += replay_generation(mine, seal, recompute)?;
        generations += 1;
    }
    Ok(ReplaySummary {
        chain,
        generations,
        steps,
    })
}
