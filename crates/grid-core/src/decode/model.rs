//! What the decode loop asks of a model: one token per ready generation, chosen under the
//! exact mask, for a whole batch at once.

use thiserror::Error;

use crate::mask::Mask;

/// A model's choice for one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Token(u32),
    /// End of the statement (only ever accepted when the mask's EOS bit is set).
    Eos,
}

/// One generation's step as the model sees it.
#[derive(Debug, Clone, Copy)]
pub struct ModelStep<'a> {
    pub generation: u64,
    /// The prompt's token ids.
    pub prompt: &'a [u32],
    /// Every token emitted so far (sampled, forced, completed).
    pub generated: &'a [u32],
    /// The exact mask of this step (never approximate).
    pub mask: &'a Mask,
    /// Its content address ([`crate::decode::mask_entry_id`]), as recorded in the audit log.
    pub mask_entry_id: [u8; 16],
    /// The generation's sampling seed.
    pub seed: u64,
}

/// A model failure: of the whole batch (the call returns `Err`) or of one generation (its
/// slot holds `Err`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("model: {0}")]
pub struct ModelError(pub String);

/// A model that steps many generations as one batch.
pub trait Model {
    /// One choice per step of `batch`, in order.
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError>;

    /// Requests made to the model so far (for reports).
    fn round_trips(&self) -> u64 {
        0
    }
}

/// A model that chooses for one generation at a time, reading nothing of the batch's other
/// generations (the scripted, random and fuzzing models of tests): every one is a
/// [`Model`] that takes a batch's steps in order.
pub trait StepModel {
    /// The choice for one generation's step: `Err` fails that generation alone.
    fn choose(&mut self, step: &ModelStep<'_>) -> Result<Choice, ModelError>;
}

impl<M: StepModel> Model for M {
    fn step(
        &mut self,
        batch: &[ModelStep<'_>],
    ) -> Result<Vec<Result<Choice, ModelError>>, ModelError> {
        Ok(batch.iter().map(|s| self.choose(s)).collect())
    }
}
