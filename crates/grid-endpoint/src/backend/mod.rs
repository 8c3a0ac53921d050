//! Backends: what samples one token per generation under its allowed set.
//!
//! The server hands a backend a batch of [`SampleContext`]s (one per ready generation)
//! and checks every answer against the allowed set before it is sent: a backend that
//! answers outside mask ∪ cd_pass (or EOS when the gate is shut) gets its answer refused
//! (`backend_violation`), never emitted.
//!
//! * [`mock`] (with [`script`] and the [`builtin`] vocabulary): the scripted and
//!   adversarial mocks, which choose from the allowed set directly;
//! * [`forward`]: a mock with a forward pass (logits per history), pipelined;
//! * [`llama`]: a GGUF model run in process by llama.cpp (feature `llama`), pipelined;
//! * [`vllm`]: a front for a vLLM server;
//! * [`pipeline`]: the model thread of the stateful backends, which starts the forward
//!   pass of each sampled token as soon as the step is answered;
//! * [`sample`]: the sampling rule they all share.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::chat::{RenderError, RenderedPrompt};
use crate::error::BackendError;
use crate::protocol::{ChatMessage, Sampling};
use crate::tokenset::TokenSet;

pub mod builtin;
pub mod forward;
pub mod llama;
pub mod mock;
pub mod pipeline;
pub mod sample;
pub mod script;
pub mod vllm;

/// A boxed, sendable future (what [`Backend::sample_batch`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The ids a step may sample: the mask entry's set, the step's CD pass list, and EOS
/// when the gate is open.
#[derive(Debug, Clone)]
pub struct Allowed {
    /// The mask entry's set (shared with the server's cache).
    mask: Arc<TokenSet>,
    /// CD-pass ids not already in `mask`, ascending.
    extra: Vec<u32>,
    /// The EOS id when EOS is allowed this step.
    eos: Option<u32>,
}

impl Allowed {
    /// mask ∪ cd_pass ∪ {eos}. Ids of `cd_pass` outside the mask's universe are
    /// dropped (the server validates them before).
    pub fn new(mask: Arc<TokenSet>, cd_pass: &[u32], eos: Option<u32>) -> Self {
        let mut extra: Vec<u32> = cd_pass
            .iter()
            .copied()
            .filter(|&id| (id as usize) < mask.universe() && !mask.contains(id))
            .collect();
        extra.sort_unstable();
        extra.dedup();
        Allowed { mask, extra, eos }
    }

    /// Whether `id` may be sampled (EOS only when the gate is open).
    pub fn contains(&self, id: u32) -> bool {
        self.eos == Some(id) || self.mask.contains(id) || self.extra.binary_search(&id).is_ok()
    }

    /// The EOS id, when EOS is allowed.
    pub(crate) fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Number of allowed ids, EOS included when allowed.
    pub(crate) fn len(&self) -> usize {
        let eos_extra = self
            .eos
            .is_some_and(|e| !self.mask.contains(e) && self.extra.binary_search(&e).is_err());
        self.mask.len() + self.extra.len() + usize::from(eos_extra)
    }

    /// Whether nothing may be sampled.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The allowed ids other than EOS, each once (mask ids ascending, then CD-pass ids
    /// ascending).
    pub(crate) fn tokens(&self) -> impl Iterator<Item = u32> + '_ {
        let eos = self.eos;
        self.mask
            .iter()
            .chain(self.extra.iter().copied())
            .filter(move |&id| Some(id) != eos)
    }

    /// Every allowed id, EOS included when allowed, ascending.
    pub(crate) fn ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.tokens().chain(self.eos).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// What a backend sees of one generation's step.
#[derive(Debug, Clone, Copy)]
pub struct SampleContext<'a> {
    /// The generation's id.
    pub generation: &'a str,
    /// The prompt tokens.
    pub prompt: &'a [u32],
    /// Every token after the prompt (sampled and forced), including this step's
    /// `tokens_to_append`.
    pub generated: &'a [u32],
    /// What may be sampled.
    pub allowed: &'a Allowed,
    /// The sampling parameters.
    pub sampling: Sampling,
}

impl SampleContext<'_> {
    /// The history length (prompt + generated): the step's position.
    pub(crate) fn position(&self) -> usize {
        self.prompt.len() + self.generated.len()
    }
}

/// A sampled token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The token id.
    pub token: u32,
    /// Its log-probability under the backend's masked distribution, when known.
    pub logprob: Option<f64>,
}

/// A model that samples one token per generation of a batch, each from its allowed set.
///
/// Every context carries the generation's whole history, so a backend may keep state
/// per generation (a KV cache) as an optimisation only: it must reconcile what it holds
/// with the history it is given (a restart, a resync or a retried step may change it),
/// and may drop any of it at any time.
pub trait Backend: Send + Sync + 'static {
    /// The model's name (served in the vocabulary reply).
    fn model(&self) -> &str;

    /// One result per context, in order. A backend must choose only allowed ids; the
    /// server checks it regardless.
    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>>;

    /// The server no longer holds these generations (released by the client, or evicted
    /// from its sessions): a stateful backend frees what it keeps for them. Must not
    /// block for long (the server calls it from its request handler). Default: nothing.
    fn release(&self, _generations: &[String]) {}

    /// Whether [`Backend::render_chat`] renders with the model's own chat template.
    fn chat_template(&self) -> bool {
        false
    }

    /// `messages` as the model's prompt, tokenized by the model's own tokenizer: with its
    /// chat template when it has one (the assistant's turn opened), otherwise the plain
    /// join ([`crate::chat::render_plain`]). `None` (the default): the backend has no
    /// tokenizer of its own, and the server encodes the plain join with the served
    /// vocabulary.
    fn render_chat<'a>(
        &'a self,
        _messages: &'a [ChatMessage],
    ) -> Option<BoxFuture<'a, Result<RenderedPrompt, RenderError>>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_union() {
        let mask = Arc::new(TokenSet::from_ids(10, [1, 3]).unwrap());
        let a = Allowed::new(mask.clone(), &[3, 5, 5, 12], Some(9));
        assert_eq!(a.ids(), vec![1, 3, 5, 9]);
        assert_eq!(a.len(), 4);
        assert!(a.contains(9) && a.contains(5) && !a.contains(2) && !a.contains(12));
        assert_eq!(a.tokens().collect::<Vec<_>>(), vec![1, 3, 5]);
        let shut = Allowed::new(mask, &[], None);
        assert!(!shut.contains(9));
        assert_eq!(shut.len(), 2);
    }
}
