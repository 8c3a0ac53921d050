//! Errors of the client (whole calls) and of single generations.
//!
//! Every failure a network peer can cause is a value here, never a panic, and each kind
//! a caller must tell apart is its own variant. No variant ever holds an API key: URLs
//! are reported without credentials and request headers are never echoed.

use crate::protocol::ErrorCode;

/// A whole call failed (no per-generation results).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens at the endpoint's address (connection refused), after `attempts`
    /// connection attempts.
    #[error("connection to {endpoint} refused ({attempts} attempt(s))")]
    ConnectionRefused {
        /// The endpoint, without credentials.
        endpoint: String,
        /// Connection attempts made.
        attempts: u32,
    },
    /// Connecting failed for another reason (unreachable host, name resolution, TLS).
    #[error("could not connect to {endpoint} ({attempts} attempt(s)): {detail}")]
    Connect {
        /// The endpoint, without credentials.
        endpoint: String,
        /// Connection attempts made.
        attempts: u32,
        /// What failed.
        detail: String,
    },
    /// The connect or request timeout elapsed (while connecting, waiting for the reply
    /// or reading it). Not retried: the server may have acted on the request.
    #[error("request to {endpoint} timed out: {detail}")]
    Timeout {
        /// The endpoint, without credentials.
        endpoint: String,
        /// Which timeout.
        detail: String,
    },
    /// The server answered with an HTTP 5xx status.
    #[error("server error HTTP {status}: {message}")]
    ServerError {
        /// The status code.
        status: u16,
        /// The error message of the reply, or the start of its body.
        message: String,
    },
    /// The server refused the request with an HTTP 4xx status (other than a vocabulary
    /// mismatch).
    #[error("request refused with HTTP {status} ({code}): {message}")]
    Rejected {
        /// The status code.
        status: u16,
        /// The request-level error code (`bad_request`, `unsupported_protocol`, …), or
        /// `http` when the body had none.
        code: String,
        /// The error message of the reply, or the start of its body.
        message: String,
    },
    /// The server's vocabulary is not the client's: its masks would mean other tokens.
    #[error("vocabulary fingerprint mismatch: client {client}, server {server}")]
    VocabMismatch {
        /// The client's fingerprint.
        client: String,
        /// The server's fingerprint (empty when the server did not say).
        server: String,
    },
    /// The reply arrived whole but is not what the protocol says (not JSON, wrong shape,
    /// wrong count or order of results, a token id out of range, …).
    #[error("malformed reply: {detail}")]
    MalformedReply {
        /// What was wrong.
        detail: String,
    },
    /// The connection closed before the server answered (no status line).
    #[error("connection closed before the reply: {detail}")]
    Disconnected {
        /// What failed.
        detail: String,
    },
    /// The server answered, then the connection closed (or failed) before the body it
    /// announced was complete: the step was received, but what was sampled is lost.
    #[error("reply truncated, connection closed mid-body: {detail}")]
    TruncatedReply {
        /// What failed.
        detail: String,
    },
    /// The reply names another protocol version.
    #[error("protocol mismatch: expected {expected}, server speaks {got}")]
    ProtocolMismatch {
        /// [`crate::protocol::PROTOCOL`].
        expected: String,
        /// What the server said.
        got: String,
    },
    /// A constrained request (allowed ids or logit bias) came back with a token outside
    /// the allowed set: the server ignored the constraint, and the token was not taken.
    #[error("server returned token {token}, outside the allowed set (step {step})")]
    IllegalToken {
        /// The returned token.
        token: u32,
        /// The generation step (number of tokens generated before it).
        step: usize,
    },
    /// A token string in an OpenAI-compatible reply names no single vocabulary id.
    #[error("cannot map the token {token:?} to a vocabulary id")]
    UnmappableToken {
        /// The token string, as sent.
        token: String,
    },
    /// The caller's input is invalid (e.g. an empty allowed set, a bad URL).
    #[error("invalid input: {detail}")]
    InvalidInput {
        /// What was wrong.
        detail: String,
    },
    /// Another transport failure.
    #[error("transport error: {detail}")]
    Transport {
        /// What failed.
        detail: String,
    },
}

impl ClientError {
    /// A short stable name of the variant, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientError::ConnectionRefused { .. } => "connection_refused",
            ClientError::Connect { .. } => "connect",
            ClientError::Timeout { .. } => "timeout",
            ClientError::ServerError { .. } => "server_error",
            ClientError::Rejected { .. } => "rejected",
            ClientError::VocabMismatch { .. } => "vocab_mismatch",
            ClientError::MalformedReply { .. } => "malformed_reply",
            ClientError::Disconnected { .. } => "disconnected",
            ClientError::TruncatedReply { .. } => "truncated_reply",
            ClientError::ProtocolMismatch { .. } => "protocol_mismatch",
            ClientError::IllegalToken { .. } => "illegal_token",
            ClientError::UnmappableToken { .. } => "unmappable_token",
            ClientError::InvalidInput { .. } => "invalid_input",
            ClientError::Transport { .. } => "transport",
        }
    }

    pub(crate) fn malformed(detail: impl Into<String>) -> Self {
        ClientError::MalformedReply {
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        ClientError::InvalidInput {
            detail: detail.into(),
        }
    }
}

/// One generation's step failed (the other generations of the request are unaffected).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct GenerationError {
    /// The error code, as the server sent it.
    pub code: ErrorCode,
    /// The explanation.
    pub message: String,
}

/// A backend could not sample a token for one generation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    /// What failed.
    pub(crate) message: String,
}

impl BackendError {
    /// A backend error with this message.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into(),
        }
    }
}
