//! The direct mode: exact greedy decoding under a caller-computed mask against a stock
//! OpenAI-compatible server that does not speak `grid-endpoint/1`.
//!
//! A singleton mask is a forced token and costs no round trip. Otherwise each round asks
//! for a chunk of `k` greedy tokens continuing the output, with the top
//! alternatives of every position. The longest prefix of the chunk whose tokens are each
//! allowed (by `mask_for` of the output so far) is kept. At the first illegal token the
//! masked greedy choice is the most likely *allowed* alternative of that position, when
//! one is listed and its rank is unambiguous (every unlisted token is at most as likely
//! as the last listed one); otherwise one constrained step (`allowed_token_ids`, or
//! `logit_bias` on servers without it) decides. Either way the result is exactly
//! per-step masked greedy, with far fewer round trips when the model mostly agrees with
//! the mask. Where the mask keeps overruling the model (a chunk's very first token needs
//! a constrained step), the client stops paying for chunks that will be thrown away: it
//! serves the next positions by constrained steps directly, for a run (first 4) that doubles
//! (up to `2 × max(chunk, 8)`) while chunk probes keep failing and resets when one pays
//! off, so it costs at most a few percent more than per-step decoding there. Every kept token is checked against its mask: a server that ignores a
//! constraint gets [`ClientError::IllegalToken`], never a token outside the mask.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use grid_vocab::Vocabulary;

use crate::chat::RenderedPrompt;
use crate::client::http::{Http, HttpConfig};
use crate::client::openai::{
    parse_completion, Completion, CompletionRequest, TokenMap, COMPLETIONS_PATH,
};
use crate::error::ClientError;
use crate::protocol::ChatMessage;
use crate::spec::ServerKind;
use crate::tokenset::TokenSet;

/// Path of the model list.
pub(crate) const MODELS_PATH: &str = "/v1/models";
/// llama-server's chat template rendering: `{"messages":[…]}` → `{"prompt":"…"}`.
pub(crate) const APPLY_TEMPLATE_PATH: &str = "/apply-template";
/// The tokenizer of llama-server (`{"content":…}`) and of vLLM (`{"messages":[…]}` too).
pub(crate) const TOKENIZE_PATH: &str = "/tokenize";

/// How a constrained step restricts the server's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintStyle {
    /// vLLM's `allowed_token_ids`.
    AllowedTokenIds,
    /// OpenAI's `logit_bias`: +100 on the allowed ids, or −100 on the others when fewer.
    LogitBias,
    /// `allowed_token_ids`, switching to `logit_bias` for good when the server refuses it
    /// (HTTP 400/422).
    Auto,
}

/// Settings of a [`DirectClient`].
#[derive(Debug, Clone)]
pub struct DirectConfig {
    /// Transport settings.
    pub http: HttpConfig,
    /// Tokens asked for per round (`max_tokens`), at least 1.
    pub chunk: usize,
    /// Alternatives asked for per position (`logprobs`), at least 1.
    pub top_logprobs: usize,
    /// How constrained steps are sent.
    pub constraint: ConstraintStyle,
    /// Send vLLM's extensions (`return_tokens_as_token_ids`, `skip_special_tokens`).
    /// Without them token strings are mapped back through the vocabulary, which is exact
    /// only for tokens whose bytes are valid UTF-8 and unique.
    pub vllm_extensions: bool,
}

impl Default for DirectConfig {
    fn default() -> Self {
        DirectConfig {
            http: HttpConfig::default(),
            chunk: 16,
            top_logprobs: 5,
            constraint: ConstraintStyle::Auto,
            vllm_extensions: true,
        }
    }
}

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// EOS was chosen (it is not in `tokens`).
    Eos,
    /// `max_new_tokens` were generated.
    Length,
}

/// The result of a greedy generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GreedyOutput {
    /// The generated tokens (without EOS).
    pub tokens: Vec<u32>,
    /// Why it stopped.
    pub finish: Finish,
    /// Requests made.
    pub round_trips: u64,
    /// Constrained single steps among them.
    pub(crate) constrained_steps: u64,
}

/// A client of an OpenAI-compatible completions server, for one model and vocabulary.
#[derive(Debug)]
pub struct DirectClient {
    http: Http,
    model: String,
    vocab: Arc<Vocabulary>,
    map: TokenMap,
    config: DirectConfig,
    /// Set once the server has refused `allowed_token_ids` (Auto style).
    use_bias: AtomicBool,
}

/// Requests made, and the constrained single steps among them.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub(crate) round_trips: u64,
    pub(crate) constrained: u64,
}

/// One generation's state between the steps of [`DirectClient::next`]: the last chunk
/// the server wrote and the adaptive run of constrained steps.
#[derive(Debug, Default)]
pub(crate) struct Lookahead {
    chunk: Option<Chunk>,
    /// The length of the last run of constrained steps (doubles while chunk probes fail).
    run: usize,
    /// Positions still to be served by constrained steps before the next chunk probe.
    direct_run: usize,
    /// This generation's requests.
    pub(crate) n: Counters,
}

/// A chunk of greedy tokens the server wrote after `prefix` (the output then).
#[derive(Debug)]
struct Chunk {
    prefix: Vec<u32>,
    /// `max_tokens` of its request.
    asked: usize,
    completion: Completion,
}

impl Chunk {
    /// Whether `out` is this chunk's prefix followed by some of its own tokens.
    fn continues(&self, out: &[u32]) -> bool {
        let Some(written) = out.get(self.prefix.len()..) else {
            return false;
        };
        out[..self.prefix.len()] == self.prefix[..]
            && written.len() <= self.completion.tokens.len()
            && written
                .iter()
                .zip(&self.completion.tokens)
                .all(|(a, t)| *a == t.id)
    }
}

impl DirectClient {
    /// A client of `base_url` (the server root; a trailing `/v1` is accepted) serving
    /// `model` with vocabulary `vocab`.
    pub fn new(
        base_url: &str,
        model: impl Into<String>,
        vocab: Arc<Vocabulary>,
        config: DirectConfig,
    ) -> Result<Self, ClientError> {
        if config.chunk == 0 || config.top_logprobs == 0 {
            return Err(ClientError::invalid("chunk and top_logprobs must be ≥ 1"));
        }
        Ok(DirectClient {
            http: Http::new(base_url, config.http.clone())?,
            model: model.into(),
            vocab,
            map: TokenMap::new(),
            config,
            use_bias: AtomicBool::new(false),
        })
    }

    /// The model names the server lists (`GET /v1/models`), or `None` when it does not
    /// serve that call (404).
    pub async fn served_models(&self) -> Result<Option<Vec<String>>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Listed {
            id: String,
        }
        #[derive(serde::Deserialize)]
        struct Models {
            data: Vec<Listed>,
        }
        let reply = match self.http.get(MODELS_PATH).await {
            Err(ClientError::Rejected { status: 404, .. }) => return Ok(None),
            other => other?,
        };
        let models: Models = serde_json::from_slice(&reply.body)
            .map_err(|e| ClientError::malformed(format!("{MODELS_PATH} reply: {e}")))?;
        Ok(Some(models.data.into_iter().map(|m| m.id).collect()))
    }

    /// `messages` as the served model expects them: rendered with its chat template by the
    /// server (llama-server's `/apply-template`, then `/tokenize` with control tokens
    /// parsed; vLLM's `/tokenize` with the messages), the assistant's turn opened. Nothing
    /// is added to what the template writes (no BOS: the templates of chat models write
    /// their own). A message holding the text of a special token of the vocabulary is
    /// refused before anything is sent, so no message can open or close a turn (the llama
    /// backend's rule). Every id must lie in the vocabulary.
    pub async fn render_chat(
        &self,
        messages: &[ChatMessage],
        server: ServerKind,
    ) -> Result<RenderedPrompt, ClientError> {
        for m in messages {
            if let Some(t) = self
                .control_texts()
                .find(|t| m.content.contains(t.as_str()))
            {
                return Err(ClientError::invalid(format!(
                    "a {} message contains {t:?}, a control token of the model",
                    m.role.as_str()
                )));
            }
        }
        #[derive(serde::Deserialize)]
        struct Applied {
            prompt: String,
        }
        #[derive(serde::Deserialize)]
        struct Tokens {
            tokens: Vec<u32>,
        }
        let (text, reply) = match server {
            ServerKind::LlamaCpp => {
                let reply = self
                    .http
                    .post_json_stateless(
                        APPLY_TEMPLATE_PATH,
                        &serde_json::json!({ "messages": messages }),
                    )
                    .await?;
                let applied: Applied = serde_json::from_slice(&reply.body).map_err(|e| {
                    ClientError::malformed(format!("{APPLY_TEMPLATE_PATH} reply: {e}"))
                })?;
                let body = serde_json::json!({
                    "content": applied.prompt,
                    "add_special": false,
                    "parse_special": true,
                });
                (
                    Some(applied.prompt),
                    self.http.post_json_stateless(TOKENIZE_PATH, &body).await?,
                )
            }
            ServerKind::Vllm => {
                let body = serde_json::json!({
                    "model": self.model,
                    "messages": messages,
                    "add_generation_prompt": true,
                    "add_special_tokens": false,
                });
                // vLLM answers with the ids only: the text is decoded from them.
                (
                    None,
                    self.http.post_json_stateless(TOKENIZE_PATH, &body).await?,
                )
            }
        };
        let tokens: Tokens = serde_json::from_slice(&reply.body)
            .map_err(|e| ClientError::malformed(format!("{TOKENIZE_PATH} reply: {e}")))?;
        let n = self.vocab.len();
        if let Some(bad) = tokens.tokens.iter().find(|&&t| t as usize >= n) {
            return Err(ClientError::malformed(format!(
                "{TOKENIZE_PATH} wrote id {bad}, outside the vocabulary of {n}: is tokenizer= \
                 the served model's?"
            )));
        }
        // Strictly: the prompt archived and sealed is the text of the ids the model is
        // shown, never a replacement character in place of their bytes.
        let text = match text {
            Some(t) => t,
            None => String::from_utf8(self.vocab.decode(&tokens.tokens)).map_err(|e| {
                ClientError::malformed(format!(
                    "{TOKENIZE_PATH} reply: the ids do not spell UTF-8 text (from byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })?,
        };
        Ok(RenderedPrompt {
            tokens: tokens.tokens,
            text,
        })
    }

    /// The texts of the vocabulary's special tokens (those a tokenizer parsing control
    /// tokens turns into one id).
    fn control_texts(&self) -> impl Iterator<Item = String> + '_ {
        self.vocab.special_ids().iter().filter_map(|&id| {
            String::from_utf8(self.vocab.decode(&[id]))
                .ok()
                .filter(|t| !t.is_empty())
        })
    }

    /// The model this client asks for.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The server as shown in messages (no credentials).
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }

    /// Greedy decoding under the mask, in chunks (see the module documentation).
    /// `mask_for(output)` is the allowed set after `output` (the generated tokens so
    /// far, without the prompt); it holds EOS exactly when EOS is allowed.
    pub async fn greedy(
        &self,
        prompt: &[u32],
        max_new_tokens: usize,
        mut mask_for: impl FnMut(&[u32]) -> TokenSet,
    ) -> Result<GreedyOutput, ClientError> {
        let eos = self.vocab.eos_id();
        let mut out: Vec<u32> = Vec::new();
        let mut look = Lookahead::default();
        while out.len() < max_new_tokens {
            let allowed = checked_mask(&mut mask_for, &out)?;
            let pick = self
                .next(
                    prompt,
                    &out,
                    &allowed,
                    max_new_tokens - out.len(),
                    &mut look,
                )
                .await?;
            if Some(pick) == eos {
                return Ok(done(out, Finish::Eos, look.n));
            }
            out.push(pick);
        }
        Ok(done(out, Finish::Length, look.n))
    }

    /// The masked greedy choice after `prompt` + `out` under `allowed` (EOS included
    /// exactly when allowed), from the chunk `look` holds when it still continues `out`,
    /// else from a new chunk of at most `remaining` tokens (see the module
    /// documentation). `look` is one generation's, kept between its steps; dropping it
    /// costs round trips, never a different choice.
    pub(crate) async fn next(
        &self,
        prompt: &[u32],
        out: &[u32],
        allowed: &TokenSet,
        remaining: usize,
        look: &mut Lookahead,
    ) -> Result<u32, ClientError> {
        if allowed.is_empty() {
            return Err(ClientError::invalid(format!(
                "an empty mask after {} tokens",
                out.len()
            )));
        }
        let eos = self.vocab.eos_id();
        if look.direct_run > 0 {
            look.direct_run -= 1;
            look.chunk = None;
            return match forced(allowed) {
                Some(id) => Ok(id),
                None => self.constrained(prompt, out, allowed, &mut look.n).await,
            };
        }
        // A singleton mask is a forced token: no round trip.
        if let Some(id) = forced(allowed) {
            return Ok(id);
        }
        let max_run = 2 * self.config.chunk.max(8);
        for _ in 0..2 {
            if let Some(c) = look.chunk.take().filter(|c| c.continues(out)) {
                let at = out.len() - c.prefix.len();
                if let Some(t) = c.completion.tokens.get(at) {
                    if allowed.contains(t.id) {
                        let id = t.id;
                        look.run = 0;
                        look.chunk = Some(c);
                        return Ok(id);
                    }
                    // The model's choice is illegal here: the masked greedy choice is the
                    // best allowed alternative, when the list decides it.
                    let listed = best_listed(&t.top, allowed);
                    if let Some(id) = listed {
                        look.run = 0;
                        return Ok(id);
                    }
                    if at == 0 {
                        look.run = (2 * look.run).clamp(4, max_run);
                        look.direct_run = look.run;
                    } else {
                        look.run = 0;
                    }
                    return self.constrained(prompt, out, allowed, &mut look.n).await;
                }
                let stopped = c.completion.finish_reason.as_deref() == Some("stop")
                    && c.completion.tokens.len() < c.asked;
                if stopped {
                    // The model's next choice was EOS.
                    if let Some(e) = eos.filter(|&e| allowed.contains(e)) {
                        return Ok(e);
                    }
                    return self.constrained(prompt, out, allowed, &mut look.n).await;
                }
            }
            let asked = self.config.chunk.min(remaining.max(1));
            let completion = self
                .complete(&concat(prompt, out), asked, None, &mut look.n)
                .await?;
            if completion.tokens.is_empty() && completion.finish_reason.as_deref() != Some("stop") {
                return Err(ClientError::malformed(
                    "completion returned no tokens and did not stop",
                ));
            }
            look.chunk = Some(Chunk {
                prefix: out.to_vec(),
                asked,
                completion,
            });
        }
        // A fresh chunk always continues the output, so the loop returned above.
        Err(ClientError::malformed(
            "the completion could not be followed",
        ))
    }

    /// The reference: one constrained greedy step per token (none for a token forced
    /// by a singleton mask).
    pub async fn greedy_per_step(
        &self,
        prompt: &[u32],
        max_new_tokens: usize,
        mut mask_for: impl FnMut(&[u32]) -> TokenSet,
    ) -> Result<GreedyOutput, ClientError> {
        let eos = self.vocab.eos_id();
        let mut out: Vec<u32> = Vec::new();
        let mut n = Counters::default();
        while out.len() < max_new_tokens {
            let allowed = checked_mask(&mut mask_for, &out)?;
            let pick = match forced(&allowed) {
                Some(id) => id,
                None => self.constrained(prompt, &out, &allowed, &mut n).await?,
            };
            if Some(pick) == eos {
                return Ok(done(out, Finish::Eos, n));
            }
            out.push(pick);
        }
        Ok(done(out, Finish::Length, n))
    }

    /// One greedy token after `prompt` + `out` restricted to `allowed`.
    async fn constrained(
        &self,
        prompt: &[u32],
        out: &[u32],
        allowed: &TokenSet,
        n: &mut Counters,
    ) -> Result<u32, ClientError> {
        let (context, step) = (concat(prompt, out), out.len());
        n.constrained += 1;
        let bias = match self.config.constraint {
            ConstraintStyle::LogitBias => true,
            ConstraintStyle::AllowedTokenIds => false,
            ConstraintStyle::Auto => self.use_bias.load(Ordering::Relaxed),
        };
        let reply = match self.complete(&context, 1, Some((allowed, bias)), n).await {
            Err(ClientError::Rejected { status, .. })
                if !bias
                    && self.config.constraint == ConstraintStyle::Auto
                    && (status == 400 || status == 422) =>
            {
                self.use_bias.store(true, Ordering::Relaxed);
                self.complete(&context, 1, Some((allowed, true)), n).await?
            }
            other => other?,
        };
        let eos = self.vocab.eos_id();
        let token = match reply.tokens.first() {
            Some(t) => t.id,
            None if reply.finish_reason.as_deref() == Some("stop") => eos.ok_or_else(|| {
                ClientError::malformed("the model stopped but the vocabulary has no EOS")
            })?,
            None => return Err(ClientError::malformed("constrained step returned no token")),
        };
        if !allowed.contains(token) {
            return Err(ClientError::IllegalToken { token, step });
        }
        Ok(token)
    }

    async fn complete(
        &self,
        context: &[u32],
        max_tokens: usize,
        constraint: Option<(&TokenSet, bool)>,
        n: &mut Counters,
    ) -> Result<Completion, ClientError> {
        let (allowed_token_ids, logit_bias) = match constraint {
            None => (None, None),
            Some((set, false)) => (Some(set.iter().collect()), None),
            Some((set, true)) => (None, Some(bias_for(set))),
        };
        let req = CompletionRequest {
            model: &self.model,
            prompt: context,
            max_tokens,
            temperature: 0.0,
            top_k: None,
            seed: None,
            logprobs: self.config.top_logprobs,
            allowed_token_ids,
            logit_bias,
            return_tokens_as_token_ids: self.config.vllm_extensions,
            skip_special_tokens: self.config.vllm_extensions.then_some(false),
        };
        n.round_trips += 1;
        let reply = self
            .http
            .post_json_stateless(COMPLETIONS_PATH, &req)
            .await?;
        parse_completion(&reply.body, &self.vocab, &self.map)
    }
}

fn concat(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

fn done(tokens: Vec<u32>, finish: Finish, n: Counters) -> GreedyOutput {
    GreedyOutput {
        tokens,
        finish,
        round_trips: n.round_trips,
        constrained_steps: n.constrained,
    }
}

/// The only allowed id, when the set has exactly one: masked greedy needs no model call.
fn forced(allowed: &TokenSet) -> Option<u32> {
    let mut it = allowed.iter();
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

fn checked_mask(
    mask_for: &mut impl FnMut(&[u32]) -> TokenSet,
    out: &[u32],
) -> Result<TokenSet, ClientError> {
    let m = mask_for(out);
    if m.is_empty() {
        return Err(ClientError::invalid(format!(
            "mask_for returned an empty set after {} tokens",
            out.len()
        )));
    }
    Ok(m)
}

/// The most likely allowed alternative of a position, when the list proves it is the
/// masked greedy choice: it is strictly more likely than every other allowed listed
/// token and, unless the list covers the whole vocabulary, strictly more likely than the
/// last entry (which bounds every unlisted token, however many entries the server chose
/// to return).
fn best_listed(top: &[(u32, f64)], allowed: &TokenSet) -> Option<u32> {
    let mut it = top.iter().filter(|(id, _)| allowed.contains(*id));
    let &(best, p) = it.next()?;
    if it.next().is_some_and(|&(_, q)| q >= p) {
        return None;
    }
    if top.len() < allowed.universe() {
        let floor = top.last().map(|&(_, q)| q)?;
        if p <= floor {
            return None;
        }
    }
    Some(best)
}

/// `logit_bias` restricting the choice to `set`: +100 on its ids, or −100 on the others
/// when they are fewer.
fn bias_for(set: &TokenSet) -> BTreeMap<String, f64> {
    let inside = set.len();
    let outside = set.universe() - inside;
    if inside <= outside {
        set.iter().map(|id| (id.to_string(), 100.0)).collect()
    } else {
        (0..set.universe() as u32)
            .filter(|&id| !set.contains(id))
            .map(|id| (id.to_string(), -100.0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_listed_respects_the_floor() {
        let allowed = TokenSet::from_ids(10, [3, 4]).unwrap();
        // 4 is listed last, so an unlisted allowed token may beat it.
        assert_eq!(
            best_listed(&[(1, -0.1), (2, -1.0), (4, -2.0)], &allowed),
            None
        );
        // 4 is above the floor: decided.
        assert_eq!(
            best_listed(&[(1, -0.1), (4, -1.0), (2, -2.0)], &allowed),
            Some(4)
        );
        // A list of the whole vocabulary decides even at its end.
        let small = TokenSet::from_ids(2, [1]).unwrap();
        assert_eq!(best_listed(&[(0, -0.1), (1, -1.0)], &small), Some(1));
        // A tie between allowed tokens is left to the server.
        assert_eq!(
            best_listed(&[(1, -0.1), (3, -1.0), (4, -1.0), (2, -3.0)], &allowed),
            None
        );
        assert_eq!(best_listed(&[(1, -0.1)], &allowed), None);
    }

    #[test]
    fn bias_takes_the_smaller_side() {
        let few = TokenSet::from_ids(10, [1]).unwrap();
        assert_eq!(bias_for(&few).len(), 1);
        let many = TokenSet::from_ids(10, 0..9).unwrap();
        let b = bias_for(&many);
        assert_eq!(b.get("9"), Some(&-100.0));
        assert_eq!(b.len(), 1);
    }
}
