//! The wire types of the `grid-endpoint/1` protocol (see `docs/endpoint-protocol.md`).
//!
//! Three calls:
//!
//! * `GET /v1/vocabulary` → [`VocabularyHeader`] fields plus the served-vocabulary
//!   document of `grid_vocab::served` (`tokens`, `special`, `eos`) in one JSON object.
//! * `POST /v1/step` with a [`StepRequest`] → [`StepResponse`]: one request per tick
//!   serving every ready generation; one [`GenerationResult`] per generation, in order.
//! * `POST /v1/prompt` with a [`PromptRequest`] → [`PromptResponse`]: chat messages
//!   rendered with the model's chat template and tokenized by its own tokenizer.
//!
//! A request-level failure is an HTTP error status with an [`ErrorBody`].

use serde::{Deserialize, Serialize};

use crate::tokenset::EntryId;

/// The protocol name and version carried by every request and reply.
pub const PROTOCOL: &str = "grid-endpoint/1";

/// Path of the vocabulary call.
pub(crate) const VOCABULARY_PATH: &str = "/v1/vocabulary";

/// Path of the step call.
pub(crate) const STEP_PATH: &str = "/v1/step";

/// Path of the prompt-rendering call.
pub(crate) const PROMPT_PATH: &str = "/v1/prompt";

/// The metadata fields of the `GET /v1/vocabulary` reply. The same JSON object also
/// holds the served vocabulary (`tokens`, `special`, `eos`), which
/// `grid_vocab::Vocabulary::from_served_json` reads (it ignores these fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VocabularyHeader {
    /// Always [`PROTOCOL`].
    pub protocol: String,
    /// The model the endpoint samples from (informational).
    pub model: String,
    /// `Vocabulary::fingerprint()` of the served vocabulary; the client recomputes it
    /// from the tokens and refuses a reply where the two differ.
    pub fingerprint: String,
    /// Number of vocabulary ids (`tokens.len()`).
    pub vocab_size: usize,
    /// How many mask payloads the server keeps (its LRU capacity), so a client can
    /// predict which entry ids the server still holds.
    pub mask_cache_capacity: usize,
    /// The most generations one step request may carry.
    pub max_batch: usize,
    /// Whether `POST /v1/prompt` renders with the model's own chat template (otherwise
    /// it renders the plain join of the messages). Absent (false) from older servers,
    /// which do not serve `/v1/prompt` at all.
    #[serde(default)]
    pub chat_template: bool,
}

/// `POST /v1/step`: one tick of every ready generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepRequest {
    /// Always [`PROTOCOL`].
    pub(crate) protocol: String,
    /// The fingerprint of the vocabulary the client's masks are over; a server with
    /// another vocabulary refuses the whole request (HTTP 409, `vocab_mismatch`).
    pub(crate) vocab_fingerprint: String,
    /// Generations the client has finished with; the server drops their state before
    /// serving `generations`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) release: Vec<String>,
    /// The generations to advance by one sampled token each. Ids are unique within a
    /// request.
    pub(crate) generations: Vec<GenerationStep>,
}

/// One generation's step: tokens to append without sampling, then one token sampled
/// under the mask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GenerationStep {
    /// The generation's id, chosen by the client (1 to 256 bytes).
    pub(crate) id: String,
    /// How many tokens the server already holds for this generation before this step
    /// (the length of its history). `0` (re)starts the generation: `tokens_to_append`
    /// is then its whole history. Otherwise it must equal the server's history length,
    /// or the server answers `need` with `history: true`.
    pub(crate) position: u64,
    /// Tokens appended to the history before sampling, unsampled: the prompt (and on a
    /// resync everything since) when `position` is 0, forced spans otherwise. The token
    /// sampled by the previous step is already in the server's history and is never
    /// resent.
    #[serde(default)]
    pub(crate) tokens_to_append: Vec<u32>,
    /// Only when `position` is 0: how many leading tokens of `tokens_to_append` are the
    /// prompt (the rest was generated). Absent means all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) prompt_tokens: Option<u64>,
    /// The cached part of the mask.
    pub(crate) mask: MaskRef,
    /// Context-dependent ids allowed this step on top of the mask entry.
    #[serde(default)]
    pub(crate) cd_pass: Vec<u32>,
    /// Whether EOS may be sampled this step (the EOS gate). EOS is never in the mask
    /// payload or `cd_pass`.
    pub(crate) eos_allowed: bool,
    /// Sampling parameters.
    pub(crate) sampling: Sampling,
}

/// A mask entry by content-addressed id, with its payload when the client believes the
/// server does not hold it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MaskRef {
    /// The entry's id (32 hex digits).
    pub(crate) entry_id: EntryId,
    /// The packed bitset of allowed ids (see `crate::tokenset`), base64; absent when the
    /// server should already hold the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) payload: Option<String>,
}

/// Sampling parameters of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Softmax temperature; `0` is greedy (ties to the lowest id).
    pub temperature: f64,
    /// Keep only the `top_k` most likely allowed tokens before sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Seed of the step's random draw; the draw of step `position` uses
    /// `(seed, history length)`, so a replay with the same seed draws the same.
    pub seed: u64,
}

impl Sampling {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            top_k: None,
            seed: 0,
        }
    }
}

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The user's turn.
    User,
    /// The model's earlier turn.
    Assistant,
}

impl Role {
    /// The wire name (also the role name chat templates expect).
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a chat prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Its author.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl ChatMessage {
    /// A message of `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
        }
    }
}

/// `POST /v1/prompt`: render chat messages as the model's prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PromptRequest {
    /// Always [`PROTOCOL`].
    pub(crate) protocol: String,
    /// The conversation so far, in order; the reply opens the assistant's turn after it.
    pub(crate) messages: Vec<ChatMessage>,
}

/// The reply to a prompt request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PromptResponse {
    /// Always [`PROTOCOL`].
    pub(crate) protocol: String,
    /// The fingerprint of the vocabulary `tokens` are ids of (the served one).
    pub(crate) vocab_fingerprint: String,
    /// The rendered prompt's token ids, as the model's tokenizer writes them (special
    /// tokens of the template included): the `prompt` of the generation.
    pub(crate) tokens: Vec<u32>,
    /// The rendered text the tokens spell.
    pub(crate) text: String,
    /// Whether the model's chat template rendered it (otherwise: the plain join).
    pub(crate) chat_template: bool,
}

/// The reply to a step request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResponse {
    /// Always [`PROTOCOL`].
    pub(crate) protocol: String,
    /// One result per requested generation, in request order.
    pub results: Vec<GenerationResult>,
}

/// One generation's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationResult {
    /// The generation's id, as requested.
    pub id: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What happened to one generation's step. Anything but `ok` changed nothing on the
/// server: the history is as before the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// A token was sampled from mask ∪ cd_pass (∪ EOS when allowed) and appended to the
    /// server's history.
    Ok {
        /// The sampled id.
        token: u32,
        /// Its log-probability under the backend's masked distribution, when known.
        logprob: Option<f64>,
    },
    /// The server lacks state to serve the step; resend the generation with the mask
    /// payload (`mask`) and/or from position 0 with the whole history (`history`).
    Need {
        /// The mask entry is not in the server's cache.
        mask: bool,
        /// The server's history length differs from `position` (or it has none).
        history: bool,
    },
    /// The step was refused or failed.
    Error {
        /// A machine-readable code.
        code: ErrorCode,
        /// A human-readable explanation.
        message: String,
    },
}

/// Per-generation error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A token id in `tokens_to_append` or `cd_pass` is out of range, or the id is bad.
    InvalidRequest,
    /// The mask payload is malformed, or it or `cd_pass` admits a special id.
    InvalidMask,
    /// Mask ∪ cd_pass is empty and EOS is not allowed: nothing can be sampled.
    EmptyMask,
    /// The payload differs from the one the server holds under the same entry id.
    MaskConflict,
    /// The generation id appears twice in the request.
    DuplicateId,
    /// Another request is serving this generation right now.
    Busy,
    /// The sampling parameters are invalid (negative or non-finite temperature, top_k 0).
    InvalidSampling,
    /// The backend failed (e.g. the vLLM server is unreachable).
    Backend,
    /// The backend returned a token outside the allowed set; the server refused to emit
    /// it.
    BackendViolation,
    /// The server answered `need` to a resend that carried everything (client-side code).
    ProtocolViolation,
    /// A code this client does not know (a newer server).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The wire name of the code.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidMask => "invalid_mask",
            ErrorCode::EmptyMask => "empty_mask",
            ErrorCode::MaskConflict => "mask_conflict",
            ErrorCode::DuplicateId => "duplicate_id",
            ErrorCode::Busy => "busy",
            ErrorCode::InvalidSampling => "invalid_sampling",
            ErrorCode::Backend => "backend",
            ErrorCode::BackendViolation => "backend_violation",
            ErrorCode::ProtocolViolation => "protocol_violation",
            ErrorCode::Unknown => "unknown",
        }
    }
}

/// The body of a request-level error reply (any non-2xx status).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    /// The error.
    pub(crate) error: RequestError,
}

/// A request-level error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RequestError {
    /// One of [`request_codes`].
    pub(crate) code: String,
    /// A human-readable explanation.
    pub(crate) message: String,
    /// With `vocab_mismatch`: the server's vocabulary fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_fingerprint: Option<String>,
}

/// Request-level error codes and their HTTP statuses.
pub(crate) mod request_codes {
    /// 400: the body is not a valid request.
    pub(crate) const BAD_REQUEST: &str = "bad_request";
    /// 400: `protocol` is not `grid-endpoint/1`.
    pub(crate) const UNSUPPORTED_PROTOCOL: &str = "unsupported_protocol";
    /// 401: a bearer token is required and was missing or wrong.
    pub(crate) const UNAUTHORIZED: &str = "unauthorized";
    /// 404: no such path.
    pub(crate) const NOT_FOUND: &str = "not_found";
    /// 405: wrong method for the path.
    pub(crate) const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// 400: `POST /v1/prompt` messages the model's template cannot render (e.g. one
    /// holds the text of a control token).
    pub(crate) const INVALID_PROMPT: &str = "invalid_prompt";
    /// 409: `vocab_fingerprint` is not the server's.
    pub(crate) const VOCAB_MISMATCH: &str = "vocab_mismatch";
    /// 413: the body or the batch is too large.
    pub(crate) const TOO_LARGE: &str = "too_large";
    /// 500: the server failed.
    pub(crate) const INTERNAL: &str = "internal";
    /// 500: the backend failed (e.g. it could not render a prompt).
    pub(crate) const BACKEND: &str = "backend";
}
