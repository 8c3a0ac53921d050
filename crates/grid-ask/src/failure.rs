//! Why an ask gives no statement: a [`FailureKind`] (what the host maps to its own error
//! codes: the extension to SQLSTATEs, the CLI to a line of output) and a message that
//! says what to do.

use grid_core::message::{ascii_snippet, one_line};
use grid_core::statement::{Decline, DECLINE_REASON_MAX};
use grid_endpoint::ClientError;
use thiserror::Error;

/// The kinds of failure, one per distinct remedy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// No endpoint is configured.
    EndpointUnset,
    /// A setting or an input cannot be used as given (the endpoint setting, the model
    /// name, the role's policy, the question, a mock script).
    InvalidValue,
    /// A file a setting names cannot be read (a mock script).
    UnreadableFile,
    /// The role may use no relation at all.
    NothingGranted,
    /// The checker refused the statement (after the repair, if one ran): it is not
    /// returned.
    Refused,
    /// The model declined (`CANNOT ANSWER 'reason'`, [`grid_core::statement::decline_of`]):
    /// it wrote no statement, and said why. Neither repaired nor judged.
    Declined,
    /// The judge refused the statement (after the repair, if one ran); `code` is the
    /// judge's own error code, passed through to the caller as the judge gave it.
    Judged { code: String },
    /// The token budget is below the shortest statement the role can write.
    BudgetTooSmall,
    /// The asker went away, or the generation ran past its time and was stopped.
    Cancelled,
    /// The endpoint did not answer within the generation's time.
    EndpointTimeout,
    /// The endpoint cannot be reached (refused or failed connection).
    EndpointUnreachable,
    /// The endpoint answered with an error, or the model failed.
    EndpointFailed,
    /// The endpoint serves another vocabulary than the one the masks were made for.
    VocabularyMismatch,
    /// The endpoint's reply breaks the protocol.
    EndpointProtocol,
    /// The connection to the endpoint broke.
    EndpointDisconnected,
    /// The endpoint's reply was cut short after its status line: whether the step was
    /// taken is unknown.
    EndpointReplyCut,
    /// Any other transport failure on the way to the endpoint.
    EndpointTransport,
    /// A bug or an unexpected state of the pipeline (the audit chain refused a write,
    /// the grammar does not build, ...).
    Internal,
}

impl FailureKind {
    /// A stable name (for logs, artifacts and the CLI).
    pub fn name(&self) -> &'static str {
        match self {
            FailureKind::EndpointUnset => "endpoint_unset",
            FailureKind::InvalidValue => "invalid_value",
            FailureKind::UnreadableFile => "unreadable_file",
            FailureKind::NothingGranted => "nothing_granted",
            FailureKind::Refused => "refused",
            FailureKind::Declined => "declined",
            FailureKind::Judged { .. } => "judged",
            FailureKind::BudgetTooSmall => "budget_too_small",
            FailureKind::Cancelled => "cancelled",
            FailureKind::EndpointTimeout => "endpoint_timeout",
            FailureKind::EndpointUnreachable => "endpoint_unreachable",
            FailureKind::EndpointFailed => "endpoint_failed",
            FailureKind::VocabularyMismatch => "vocabulary_mismatch",
            FailureKind::EndpointProtocol => "endpoint_protocol",
            FailureKind::EndpointDisconnected => "endpoint_disconnected",
            FailureKind::EndpointReplyCut => "endpoint_reply_cut",
            FailureKind::EndpointTransport => "endpoint_transport",
            FailureKind::Internal => "internal",
        }
    }
}

/// A failure and its message (what to do about it).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::Internal, message)
    }

    /// The model's decline, its reason quoted: `the model declined: <reason>`, then what
    /// to do. The reason is the model's own text (plain words, at most
    /// [`grid_core::statement::DECLINE_REASON_MAX`] characters by the grammar); it is
    /// escaped and bounded all the same ([`grid_core::message`]).
    pub(crate) fn declined(d: &Decline) -> Failure {
        let reason = ascii_snippet(&d.reason, DECLINE_REASON_MAX);
        Failure::new(
            FailureKind::Declined,
            format!(
                "the model declined: {} (rephrase the question if what you may read can \
                 answer it, or ask the DBA to grant what it needs)",
                one_line(&reason)
            ),
        )
    }

    /// An endpoint client's failure: each kind of client error its own kind.
    pub(crate) fn endpoint(e: &ClientError) -> Failure {
        use FailureKind as K;
        let kind = match e {
            ClientError::ConnectionRefused { .. } | ClientError::Connect { .. } => {
                K::EndpointUnreachable
            }
            ClientError::Timeout { .. } => K::EndpointTimeout,
            ClientError::ServerError { .. } | ClientError::Rejected { .. } => K::EndpointFailed,
            ClientError::VocabMismatch { .. } => K::VocabularyMismatch,
            ClientError::MalformedReply { .. }
            | ClientError::ProtocolMismatch { .. }
            | ClientError::IllegalToken { .. }
            | ClientError::UnmappableToken { .. } => K::EndpointProtocol,
            ClientError::Disconnected { .. } => K::EndpointDisconnected,
            ClientError::TruncatedReply { .. } => K::EndpointReplyCut,
            ClientError::InvalidInput { .. } => K::InvalidValue,
            ClientError::Transport { .. } => K::EndpointTransport,
        };
        Failure::new(kind, format!("model endpoint ({}): {e}", e.kind()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decline_quotes_its_reason_escaped_and_bounded_and_says_what_to_do() {
        let f = Failure::declined(&Decline {
            reason: "no table holds salaries".into(),
        });
        assert_eq!(f.kind, FailureKind::Declined);
        assert_eq!(f.kind.name(), "declined");
        assert!(
            f.message
                .starts_with("the model declined: no table holds salaries ("),
            "{}",
            f.message
        );
        assert!(f.message.contains("rephrase") && f.message.contains("grant"));
        // What the grammar never lets through is escaped and cut all the same.
        let f = Failure::declined(&Decline {
            reason: format!("a\n-- b\u{202e}{}", "x".repeat(300)),
        });
        assert!(
            f.message.is_ascii() && !f.message.contains('\n'),
            "{}",
            f.message
        );
        assert!(f.message.len() < 400, "{}", f.message);
    }
}
