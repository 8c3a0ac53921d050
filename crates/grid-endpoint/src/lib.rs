//! The model endpoint of grid_pg.
//!
//! The extension drives the decode loop: it computes the exact mask of every step, owns
//! termination and the audit trail. The endpoint only samples under the mask. This
//! crate holds
//!
//! * [`protocol`]: the `grid-endpoint/1` wire types (`GET /v1/vocabulary`,
//!   `POST /v1/step`, `POST /v1/prompt`), documented in `docs/endpoint-protocol.md`;
//! * [`chat`]: chat prompts, rendered by the model's template or joined plainly;
//! * [`client`]: the protocol client ([`EndpointClient`]) and the direct mode for stock
//!   OpenAI-compatible servers ([`DirectClient`]: exact masked greedy from top-k
//!   logprobs and constrained single steps);
//! * [`model`] (feature `decode`): the decode loop's `Model` over the mocks in process
//!   and over an [`EndpointClient`];
//! * [`spec`]: which model an endpoint setting names (`mock:…` or a URL), parsed once
//!   for the extension and the CLI;
//! * [`server`]: the reference endpoint ([`Server`]) with its [`backend`]s: deterministic
//!   mocks (scripted, adversarial, and one with a forward pass), a vLLM front, and
//!   (feature `llama`) a real model run in process by llama.cpp. The stateful ones are
//!   pipelined ([`backend::pipeline`]): the forward pass that feeds a sampled token runs
//!   while the client computes the next mask.
//!
//! Every failure a peer can cause is a typed error ([`ClientError`], per-generation
//! [`GenerationError`]), never a panic; the server never emits a token outside the
//! allowed set, whatever its backend answers.

pub mod backend;
pub mod chat;
pub mod client;
pub(crate) mod error;
pub(crate) mod lru;
#[cfg(feature = "decode")]
pub mod model;
pub mod protocol;
pub mod server;
pub mod spec;
pub(crate) mod tokenset;

pub use backend::{Allowed, Backend, Sample, SampleContext};
pub use chat::RenderedPrompt;
pub use client::{
    ClientConfig, DirectClient, DirectConfig, EndpointClient, HttpConfig, Mask, Sampled, StepInput,
};
pub use error::{BackendError, ClientError};
pub use protocol::{ChatMessage, Role, Sampling, PROTOCOL};
pub use server::{Server, ServerConfig};
pub use spec::{EndpointSpec, SpecError};
pub use tokenset::{EntryId, TokenSet};
