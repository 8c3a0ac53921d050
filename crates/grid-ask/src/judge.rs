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
    /// The judge was switched off for the ask (the extension's superuser-only
    /// `grid.judge = off`, for ablation).
    Off,
    /// The judge accepts the statement.
    Pass,
    /// The judge refuses it: its error code (passed through to the caller) and message
    /// (quoted back to the model in the repair). The pipeline keeps, quotes and seals the
    /// message only as [`crate::sanitize`] leaves it.
    Fail { code: String, message: String },
}

impl Verdict {
    /// The verdict as the seal records it: canonical JSON (`{"verdict":"pass"}`,
    /// `{"verdict":"fail","code":"42501","message":"…"}`), the inverse of
    /// [`Verdict::from_record`].
    pub(crate) fn record(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A recorded verdict, if `text` is one in its canonical form.
    pub fn from_record(text: &str) -> Option<Verdict> {
        serde_json::from_str::<Verdict>(text)
            .ok()
            .filter(|v| v.record() == text)
    }
}

/// Why the verdicts recorded for a generation cannot be what the pipeline decided, if
/// they cannot (what `grid.replay()` checks, since the judge cannot be run again: it
/// judged as the caller, in the caller's session, against the catalog of that moment).
/// `verdict` is the generation's recorded verdict, `refused` whether the checker refuses
/// its statement (recomputed), `repaired` whether another generation repairs it.
///
/// The rules the pipeline keeps: the judge sees only statements the checker passed; a
/// verdict is recorded in canonical form, a failure with a five-character SQLSTATE and a
/// message; a statement that passed (or was not judged) is never repaired.
pub fn recorded_inconsistency(
    verdict: Option<&str>,
    refused: bool,
    repaired: bool,
) -> Option<String> {
    let text = verdict?;
    let Some(v) = Verdict::from_record(text) else {
        return Some(format!("the recorded verdict {text:?} is not a verdict"));
    };
    if refused {
        return Some(format!(
            "the checker refuses the statement, yet the judge's verdict {text} is recorded              (the judge sees only statements the checker passed)"
        ));
    }
    match v {
        Verdict::Fail { code, message } => {
            if code.len() != 5
                || !code
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
            {
                return Some(format!(
                    "the recorded verdict's SQLSTATE {code:?} is not one"
                ));
            }
            if message.trim().is_empty() {
                return Some("the recorded failed verdict has no message".into());
            }
            None
        }
        Verdict::Pass | Verdict::Off | Verdict::Unjudged if repaired => Some(format!(
            "the statement's verdict is {text}, yet another generation repairs it"
        )),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_recorded_canonically() {
        let fail = Verdict::Fail {
            code: "42501".into(),
            message: "permission denied for table <hidden>".into(),
        };
        for v in [Verdict::Pass, Verdict::Off, Verdict::Unjudged, fail.clone()] {
            assert_eq!(Verdict::from_record(&v.record()), Some(v));
        }
        assert_eq!(Verdict::Pass.record(), r#"{"verdict":"pass"}"#);
        assert_eq!(Verdict::Off.record(), r#"{"verdict":"off"}"#);
        assert_eq!(Verdict::from_record(r#"{ "verdict": "pass" }"#), None);
    }

    #[test]
    fn recorded_verdicts_are_checked_for_consistency() {
        let pass = Verdict::Pass.record();
        let fail = Verdict::Fail {
            code: "42883".into(),
            message: "function sum(text) does not exist".into(),
        }
        .record();
        assert_eq!(recorded_inconsistency(None, true, false), None);
        assert_eq!(recorded_inconsistency(Some(&pass), false, false), None);
        assert_eq!(recorded_inconsistency(Some(&fail), false, true), None);
        assert!(recorded_inconsistency(Some(&pass), false, true).is_some());
        assert!(recorded_inconsistency(Some(&pass), true, false).is_some());
        assert!(recorded_inconsistency(Some("pass"), false, false).is_some());
        let bad_code = Verdict::Fail {
            code: "4250".into(),
            message: "m".into(),
        }
        .record();
        assert!(recorded_inconsistency(Some(&bad_code), false, true).is_some());
    }
}

/// The judge of a host that has none: every statement is [`Verdict::Unjudged`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJudge;

impl Judge for NoJudge {
    fn judge(&mut self, _: &Candidate) -> Ruling {
        Ruling::Now(Verdict::Unjudged)
    }
}
