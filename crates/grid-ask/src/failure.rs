//! Why an ask gives no statement: a [`FailureKind`] (what the host maps to its own error
//! codes: the extension to SQLSTATEs, the CLI to a line of output) and a message that
//! says what to do.

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
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::Internal, message)
    }

    /// An endpoint client's failure: each kind of client error its own kind.
    pub fn endpoint(e: &ClientError) -> Failure {
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
