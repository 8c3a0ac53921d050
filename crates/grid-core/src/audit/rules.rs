//! What a well-formed generation looks like: the per-generation progress both the writer
//! and the verifier keep, and the step/stop rules they both enforce (one definition, so
//! the writer can never produce a log the verifier rejects).

use thiserror::Error;

use super::hash::{generation_genesis, Digest32};
use super::record::{StepKind, Token};
use super::seal::{DecodeMode, Mode, StopReason};

/// A step that breaks a rule of the record kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StepRule {
    #[error("kind {kind:?} with token {token:?}: EOS tokens are exactly the Eos records")]
    KindTokenMismatch { kind: StepKind, token: Token },
    #[error("a step follows the generation's Eos record")]
    AfterEos,
    #[error("a {kind:?} step follows budget completion (only completion tokens and EOS may)")]
    AfterCompletion { kind: StepKind },
    #[error("a replayed step follows a step of another kind (replayed steps come first)")]
    ReplayedLate,
}

/// A stop reason or mode that does not fit the generation's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StopRule {
    #[error("stop {stop:?} needs a final Eos record")]
    MissingEos { stop: StopReason },
    #[error("the generation ended with EOS but the stop reason is {stop:?}")]
    UnexpectedEos { stop: StopReason },
    #[error("budget-completion records but stop reason {stop:?}")]
    CompletionStop { stop: StopReason },
    #[error("stop {stop:?} is impossible in decode mode {mode:?}")]
    WrongMode { stop: StopReason, mode: DecodeMode },
    #[error("budget-completion records in decode mode {mode:?}")]
    CompletionMode { mode: DecodeMode },
    #[error("replayed or banned records (a rewind repair) in decode mode {mode:?}")]
    RewindMode { mode: DecodeMode },
}

/// The state of one generation's chain after the records seen so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Step number the next record must carry (= records seen). u64 so that a record
    /// with step `u32::MAX` cannot overflow it.
    pub(crate) next_step: u64,
    /// `hash` of the last record, or the generation's genesis constant.
    pub(crate) tip: Digest32,
    /// An `Eos` record was seen (it must have been the last).
    pub(crate) ended: bool,
    /// A `BudgetCompleted` record was seen.
    pub(crate) completing: bool,
    /// A record of a kind other than `Replayed` was seen (no `Replayed` may follow).
    pub(crate) past_replay: bool,
    /// A `Replayed` or `Banned` record was seen (the generation is a rewind repair).
    pub(crate) rewound: bool,
}

impl Progress {
    /// A generation with no records yet.
    pub(crate) fn genesis(generation: u64) -> Progress {
        Progress {
            next_step: 0,
            tip: generation_genesis(generation),
            ended: false,
            completing: false,
            past_replay: false,
            rewound: false,
        }
    }

    /// Whether a record of this kind and token may come next.
    pub(crate) fn check_step(&self, token: Token, kind: StepKind) -> Result<(), StepRule> {
        if (kind == StepKind::Eos) != (token == Token::Eos) {
            return Err(StepRule::KindTokenMismatch { kind, token });
        }
        if self.ended {
            return Err(StepRule::AfterEos);
        }
        if self.completing && !matches!(kind, StepKind::BudgetCompleted | StepKind::Eos) {
            return Err(StepRule::AfterCompletion { kind });
        }
        if kind == StepKind::Replayed && self.past_replay {
            return Err(StepRule::ReplayedLate);
        }
        Ok(())
    }

    /// Records an accepted step.
    pub(crate) fn advance(&mut self, hash: Digest32, kind: StepKind) {
        self.next_step += 1;
        self.tip = hash;
        self.ended |= kind == StepKind::Eos;
        self.completing |= kind == StepKind::BudgetCompleted;
        self.past_replay |= kind != StepKind::Replayed;
        self.rewound |= matches!(kind, StepKind::Replayed | StepKind::Banned);
    }

    /// Whether the generation may be sealed with this stop reason and mode.
    pub(crate) fn check_stop(&self, stop: StopReason, mode: Mode) -> Result<(), StopRule> {
        if stop.ends_with_eos() && !self.ended {
            return Err(StopRule::MissingEos { stop });
        }
        if !stop.ends_with_eos() && self.ended {
            return Err(StopRule::UnexpectedEos { stop });
        }
        if self.completing && self.ended && stop != StopReason::BudgetCompleted {
            return Err(StopRule::CompletionStop { stop });
        }
        if self.completing && mode.decode != DecodeMode::Mode1 {
            return Err(StopRule::CompletionMode { mode: mode.decode });
        }
        if self.rewound && mode.decode != DecodeMode::Mode1 {
            return Err(StopRule::RewindMode { mode: mode.decode });
        }
        let fits = match stop {
            StopReason::BudgetCompleted => mode.decode == DecodeMode::Mode1,
            StopReason::BudgetTruncated => {
                matches!(mode.decode, DecodeMode::Mode2 | DecodeMode::Unconstrained)
            }
            _ => true,
        };
        if !fits {
            return Err(StopRule::WrongMode {
                stop,
                mode: mode.decode,
            });
        }
        Ok(())
    }
}
