//! The llama backend (`grid-endpoint serve --backend llama --model FILE.gguf`): a real
//! model run in process by llama.cpp, through the `llama-cpp-2` binding (crates.io; it
//! builds llama.cpp from its vendored source with cmake). Feature `llama`; feature
//! `cuda` builds the same backend on llama.cpp's CUDA backend (set `--gpu-layers`).
//!
//! * **Vocabulary**: the model's own, read from the GGUF ([`vocab`]): token bytes,
//!   special ids, EOS = the chat template's end of turn; ids of the logits row beyond
//!   the tokenizer's tokens are not served, so they are never allowed.
//! * **State** ([`kv`]): one KV sequence per live generation, reconciled with the
//!   history of every step by longest common prefix; evaluated prompts kept in an LRU
//!   and copied (`seq_cp`, no memory copy in the unified cache) into new generations.
//!   [`Backend::release`] frees a generation's sequence.
//! * **Steps** ([`engine`]): on the model thread of a [`crate::backend::pipeline`];
//!   every generation of a step in one llama batch, each logits row masked in process ([`crate::backend::sample`]:
//!   disallowed ids −∞, EOS only through the gate), greedy at temperature 0 (ties to the
//!   lowest id), otherwise a draw seeded from `(seed, position)`. With overlap on, the
//!   sampled tokens are decoded right after the reply, while the client computes the
//!   next masks.
//! * **Chat prompts** ([`template`]): the GGUF's chat template, rendered as Hugging Face
//!   does, tokenized by llama.cpp's tokenizer (exact for the model); a message that
//!   contains the text of a control token is refused, so no message can forge a turn.
//!
//! The bookkeeping ([`kv`]), the vocabulary rules ([`vocab`]) and the GGUF metadata
//! reader ([`gguf`]) are plain Rust and
//! always built (and unit-tested without a model); the rest needs the feature.

pub mod gguf;
pub mod kv;
pub mod vocab;

#[cfg(feature = "llama")]
pub(crate) mod engine;
#[cfg(feature = "llama")]
pub(crate) mod template;

#[cfg(feature = "llama")]
mod backend;
#[cfg(feature = "llama")]
pub use backend::{runtime, LlamaBackend, LlamaConfig};
