//! The judge: the last check of a statement, after the mask and the checker, made by the
//! host (the extension has PostgreSQL plan the statement as the caller). The pipeline
//! hands each statement the checker passed to [`Judge::judge`] as a [`Candidate`]; the
//! judge answers at once ([`Ruling::Now`]) or later ([`Ruling::Later`]): the ask is then
//! parked until the host hands the verdict back (`Input::Verdict`), and goes on from
//! there: answered, or repaired once with the judge's message quoted back.
//! See the crate documentation for the flow.

use serde::{Deserialize, Serialize};

/// A statement the checker passed, for the judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The ask's id (its first generation's), which the verdict names.
    pub ask: u64,
    /// The generation that wrote `sql`.
    pub generation: u64,
    pub sql: String,
    /// Who asked: the judge checks the statement as this role.
    pub session_user: String,
    pub current_user: String,
    /// Whether a verdict that fails still leads to a repair (the ask has not used its
    /// one repair, and repair is not switched off): the judge may use it to decide how
    /// much to say.
    pub repairable: bool,
}

/// The judge's verdict on a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// No judge looked at it (a host without one).
    Unjudged,
    /// The judge accepts the statement.
    Pass,
    /// The judge refuses it: its error code (passed through to the caller) and message
    /// (quoted back to the model in the repair).
    Fail { code: String, message: String },
}

/// When the verdict comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ruling {
    Now(Verdict),
    /// The host delivers the verdict later, naming [`Candidate::ask`].
    Later,
}

/// What the host implements to judge a statement.
pub trait Judge: Send {
    fn judge(&mut self, candidate: &Candidate) -> Ruling;
}

/// The judge of a host that has none: every statement is [`Verdict::Unjudged`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJudge;

impl Judge for NoJudge {
    fn judge(&mut self, _: &Candidate) -> Ruling {
        Ruling::Now(Verdict::Unjudged)
    }
}
