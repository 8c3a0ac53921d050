//! What an ask answers: the statement and how it was written ([`Generated`], with the
//! explain rows), or a [`Failure`].

use grid_core::audit::{StepKind, StepRecord, StopReason, Token};
use grid_vocab::Vocabulary;
use serde::{Deserialize, Serialize};

use crate::failure::Failure;

/// The answer to one ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Generated(Generated),
    Failed(Failure),
}

/// A generated statement and how it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generated {
    /// The generation whose output is `sql` (the repair's, when there was one).
    pub generation: u64,
    /// Empty when `refused` is set.
    pub sql: String,
    /// `Eos` or `BudgetCompleted` (`BudgetTruncated` for an unconstrained generation).
    pub stop: StopReason,
    /// The first attempt's generation, when `generation` is its repair.
    pub repaired_from: Option<u64>,
    /// Why the first attempt was sent to repair, as displayed.
    pub repair_reasons: Vec<String>,
    /// Every step of `generation`, in order.
    pub steps: Vec<ExplainStep>,
    /// The seal chain's head after the ask (`<seals>:<hash>`), set by the host that
    /// stores the seals; empty until then.
    pub head: String,
    /// Why the statement is not returned (only for an explain ask; `sql` is then empty).
    #[serde(default)]
    pub refused: Option<String>,
}

/// One decoding step as `grid.explain()` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainStep {
    pub step: u32,
    /// The token's text (lossy UTF-8); `None` for the end of the statement, and for every
    /// step of a statement that is not returned.
    pub token: Option<String>,
    /// Vocabulary tokens the mask allowed and blocked.
    pub allowed: u32,
    pub blocked: u32,
    pub kind: StepKind,
}

/// The steps of a generation as explain rows; `with_tokens` false for a statement that is
/// not returned (its tokens never leave the pipeline).
pub(crate) fn explain_rows(
    steps: &[StepRecord],
    vocab: &Vocabulary,
    with_tokens: bool,
) -> Vec<ExplainStep> {
    let n = u32::try_from(vocab.len()).unwrap_or(u32::MAX);
    steps
        .iter()
        .map(|r| ExplainStep {
            step: r.step,
            token: match r.token {
                Token::Id(id) if with_tokens => {
                    Some(String::from_utf8_lossy(vocab.token_bytes(id)).into_owned())
                }
                Token::Id(_) | Token::Eos => None,
            },
            allowed: n.saturating_sub(r.blocked_count),
            blocked: r.blocked_count,
            kind: r.kind,
        })
        .collect()
}
