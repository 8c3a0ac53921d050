//! The OpenAI-compatible `POST /v1/completions` call with token-id prompts, as vLLM
//! serves it: the request (with vLLM's `allowed_token_ids` and
//! `return_tokens_as_token_ids` extensions) and the parse of the chosen tokens and their
//! top-k logprobs.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use grid_vocab::Vocabulary;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ClientError;

/// Path of the completions call.
pub(crate) const COMPLETIONS_PATH: &str = "/v1/completions";

/// A completions request over token ids.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CompletionRequest<'a> {
    /// The served model name.
    pub(crate) model: &'a str,
    /// The prompt as token ids.
    pub(crate) prompt: &'a [u32],
    /// Tokens to generate.
    pub(crate) max_tokens: usize,
    /// Sampling temperature (0 = greedy).
    pub(crate) temperature: f64,
    /// vLLM's top-k (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_k: Option<u32>,
    /// Seed of the draw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<u64>,
    /// How many top alternatives to report per position.
    pub(crate) logprobs: usize,
    /// vLLM: sample only among these ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) allowed_token_ids: Option<Vec<u32>>,
    /// OpenAI: additive bias per id (keys are ids as decimal strings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) logit_bias: Option<BTreeMap<String, f64>>,
    /// vLLM: name tokens `token_id:<n>` in logprobs.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) return_tokens_as_token_ids: bool,
    /// vLLM: keep special tokens (EOS) in the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) skip_special_tokens: Option<bool>,
}

/// One generated position of a completion.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionToken {
    /// The chosen id.
    pub id: u32,
    /// Its logprob, when reported.
    pub logprob: Option<f64>,
    /// The reported alternatives `(id, logprob)`, most likely first (ties: lower id).
    pub top: Vec<(u32, f64)>,
}

/// A parsed completion (the first choice).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The generated positions, in order.
    pub tokens: Vec<CompletionToken>,
    /// `stop` (the model ended: EOS or a stop token), `length`, …
    pub finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Reply {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<Logprobs>,
}

/// Either form of a choice's logprobs: the completions API's parallel lists (`tokens`,
/// `token_logprobs`, `top_logprobs`: vLLM), or the chat API's `content` list that
/// llama.cpp's `llama-server` also answers completions with (each position with its id,
/// bytes and alternatives).
#[derive(Deserialize)]
struct Logprobs {
    #[serde(default)]
    tokens: Vec<String>,
    #[serde(default)]
    token_logprobs: Vec<Option<f64>>,
    #[serde(default)]
    top_logprobs: Vec<Option<serde_json::Map<String, Value>>>,
    #[serde(default)]
    content: Vec<ContentToken>,
}

/// A position of the `content` form.
#[derive(Deserialize)]
struct ContentToken {
    #[serde(flatten)]
    token: ContentAlt,
    #[serde(default)]
    top_logprobs: Vec<ContentAlt>,
}

/// A token of the `content` form: the id when the server gives it (llama-server does),
/// else its bytes, else its text.
#[derive(Deserialize)]
struct ContentAlt {
    #[serde(default)]
    id: Option<u32>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    bytes: Option<Vec<u8>>,
    #[serde(default)]
    logprob: Option<f64>,
}

impl ContentAlt {
    fn id(&self, vocab: &Vocabulary, map: &TokenMap) -> Result<u32, ClientError> {
        match (self.id, &self.bytes, &self.token) {
            (Some(id), _, _) => in_vocabulary(vocab, id),
            (None, Some(b), _) => map.id_of_bytes(vocab, b),
            (None, None, Some(t)) => map.id_of(vocab, t),
            (None, None, None) => Err(ClientError::malformed(
                "a logprobs entry names no token (no id, bytes or token)",
            )),
        }
    }
}

fn in_vocabulary(vocab: &Vocabulary, id: u32) -> Result<u32, ClientError> {
    if id as usize >= vocab.len() {
        return Err(ClientError::malformed(format!(
            "token id {id} is out of the vocabulary of {}",
            vocab.len()
        )));
    }
    Ok(id)
}

/// Maps the token strings of a reply to ids: `token_id:<n>` directly; any other string
/// by its UTF-8 bytes when exactly one vocabulary id spells them (built once per
/// vocabulary, on first use).
#[derive(Debug, Default)]
pub struct TokenMap {
    /// Bytes → the id spelling them, or `None` when several do.
    by_bytes: OnceLock<HashMap<Vec<u8>, Option<u32>>>,
}

impl TokenMap {
    /// An empty map (built lazily).
    pub fn new() -> Self {
        TokenMap::default()
    }

    /// The id of token string `s`.
    pub fn id_of(&self, vocab: &Vocabulary, s: &str) -> Result<u32, ClientError> {
        if let Some(n) = s.strip_prefix("token_id:") {
            let id: u32 = n.parse().map_err(|_| ClientError::UnmappableToken {
                token: s.to_string(),
            })?;
            return in_vocabulary(vocab, id);
        }
        self.id_of_bytes(vocab, s.as_bytes())
    }

    /// The id spelled by `bytes`, when exactly one id spells them.
    pub(crate) fn id_of_bytes(&self, vocab: &Vocabulary, bytes: &[u8]) -> Result<u32, ClientError> {
        let map = self.by_bytes.get_or_init(|| {
            let mut m: HashMap<Vec<u8>, Option<u32>> = HashMap::new();
            for (id, b) in vocab.iter() {
                m.entry(b.to_vec())
                    .and_modify(|e| *e = None)
                    .or_insert(Some(id));
            }
            m
        });
        match map.get(bytes) {
            Some(Some(id)) => Ok(*id),
            // Lossy for the message only: the token is refused, never part of a statement.
            _ => Err(ClientError::UnmappableToken {
                token: String::from_utf8_lossy(bytes).into_owned(),
            }),
        }
    }
}

/// Alternatives in the order [`CompletionToken::top`] promises: most likely first, ties
/// by lower id.
fn most_likely_first(mut top: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    top
}

/// Parses a completions reply body.
pub fn parse_completion(
    body: &[u8],
    vocab: &Vocabulary,
    map: &TokenMap,
) -> Result<Completion, ClientError> {
    let reply: Reply = serde_json::from_slice(body)
        .map_err(|e| ClientError::malformed(format!("completions reply: {e}")))?;
    let choice = reply
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ClientError::malformed("completions reply has no choices"))?;
    let mut tokens = Vec::new();
    if let Some(lp) = choice.logprobs {
        for (i, s) in lp.tokens.iter().enumerate() {
            let id = map.id_of(vocab, s)?;
            let logprob = lp.token_logprobs.get(i).copied().flatten();
            let mut top = Vec::new();
            if let Some(Some(alts)) = lp.top_logprobs.get(i) {
                for (k, v) in alts {
                    let alt = map.id_of(vocab, k)?;
                    let p = v.as_f64().ok_or_else(|| {
                        ClientError::malformed(format!("top logprob of {k:?} is not a number"))
                    })?;
                    top.push((alt, p));
                }
            }
            tokens.push(CompletionToken {
                id,
                logprob,
                top: most_likely_first(top),
            });
        }
        if lp.tokens.is_empty() {
            for c in &lp.content {
                let id = c.token.id(vocab, map)?;
                let mut top = Vec::with_capacity(c.top_logprobs.len());
                for alt in &c.top_logprobs {
                    let p = alt.logprob.ok_or_else(|| {
                        ClientError::malformed("an alternative in logprobs has no logprob")
                    })?;
                    top.push((alt.id(vocab, map)?, p));
                }
                tokens.push(CompletionToken {
                    id,
                    logprob: c.token.logprob,
                    top: most_likely_first(top),
                });
            }
        }
    }
    Ok(Completion {
        tokens,
        finish_reason: choice.finish_reason,
    })
}
