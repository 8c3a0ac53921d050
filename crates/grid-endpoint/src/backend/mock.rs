//! Deterministic mock models: `scripted` (spells a target SQL from a script) and
//! `adversarial` (keeps reaching for forbidden words). Both only ever look at the
//! allowed set, so they cannot choose outside it.
//!
//! Both are a "model" with a logit per allowed token: a seeded base score in `[0, 4)`
//! (a hash of the seed, the position, the last token and the id) plus the mock's
//! preference, sampled by the backends' common rule ([`crate::backend::sample`]).

use std::sync::Arc;

use grid_vocab::Vocabulary;

pub(crate) use crate::backend::sample::choose;
pub use crate::backend::sample::mix;
use crate::backend::sample::unit;
use crate::backend::script::Script;
use crate::backend::{Backend, BoxFuture, Sample, SampleContext};
use crate::error::BackendError;

/// The logit added to the token a mock wants.
const PREFERRED: f64 = 20.0;

/// The seeded base logit of `id` at this step, in `[0, 4)`.
pub(crate) fn base_logit(ctx: &SampleContext<'_>, id: u32) -> f64 {
    let last = ctx
        .generated
        .last()
        .or(ctx.prompt.last())
        .map_or(u64::MAX, |&t| u64::from(t));
    let h = mix(
        mix(mix(ctx.sampling.seed, ctx.position() as u64), last),
        u64::from(id),
    );
    4.0 * unit(h)
}

/// The candidates of a step: every allowed id with its base logit plus `prefer(id)`.
fn candidates(ctx: &SampleContext<'_>, mut prefer: impl FnMut(u32) -> f64) -> Vec<(u32, f64)> {
    ctx.allowed
        .tokens()
        .chain(ctx.allowed.eos())
        .map(|id| (id, base_logit(ctx, id) + prefer(id)))
        .collect()
}

fn sample_with(
    ctx: &SampleContext<'_>,
    prefer: impl FnMut(u32) -> f64,
) -> Result<Sample, BackendError> {
    let mut cands = candidates(ctx, prefer);
    choose(&mut cands, &ctx.sampling, ctx.position())
        .ok_or_else(|| BackendError::new("nothing is allowed"))
}

/// The scripted mock: tries to spell the script's SQL for the prompt.
///
/// Among allowed tokens it prefers the one whose bytes are the longest prefix of the
/// rest of the target (after the text generated so far); once the target is spelled it
/// prefers EOS when allowed. When no allowed token continues the target (the mask
/// forbids it, e.g. a table the role cannot read), or the output has left the target,
/// it prefers EOS when allowed and otherwise follows the seeded score. Without a script
/// entry it follows the seeded score alone.
#[derive(Debug)]
pub struct ScriptedMock {
    vocab: Arc<Vocabulary>,
    script: Script,
    name: String,
}

impl ScriptedMock {
    /// A scripted mock over `vocab`.
    pub fn new(vocab: Arc<Vocabulary>, script: Script) -> Self {
        ScriptedMock {
            vocab,
            script,
            name: "mock-scripted".into(),
        }
    }

    /// Samples one step.
    pub(crate) fn sample(&self, ctx: &SampleContext<'_>) -> Result<Sample, BackendError> {
        let prompt = self.vocab.decode(ctx.prompt);
        let Some(target) = self.script.target_for(&prompt) else {
            return sample_with(ctx, |_| 0.0);
        };
        let target = target.as_bytes();
        let generated = self.vocab.decode(ctx.generated);
        let want = match target.strip_prefix(generated.as_slice()) {
            Some([]) => ctx.allowed.eos(),
            Some(rest) => self.longest_prefix_token(ctx, rest).or(ctx.allowed.eos()),
            None => ctx.allowed.eos(),
        };
        sample_with(ctx, |id| if Some(id) == want { PREFERRED } else { 0.0 })
    }

    /// The allowed token whose bytes are the longest non-empty prefix of `rest`
    /// (ties: lowest id).
    fn longest_prefix_token(&self, ctx: &SampleContext<'_>, rest: &[u8]) -> Option<u32> {
        let mut best: Option<(usize, u32)> = None;
        for id in ctx.allowed.tokens() {
            let b = self.vocab.get(id).unwrap_or_default();
            if !b.is_empty() && rest.starts_with(b) {
                let better = match best {
                    None => true,
                    Some((len, bid)) => b.len() > len || (b.len() == len && id < bid),
                };
                if better {
                    best = Some((b.len(), id));
                }
            }
        }
        best.map(|(_, id)| id)
    }
}

impl Backend for ScriptedMock {
    fn model(&self) -> &str {
        &self.name
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        let out = batch.iter().map(|c| self.sample(c)).collect();
        Box::pin(std::future::ready(out))
    }
}

/// What the adversarial mock keeps trying to write (lowercase; matched
/// case-insensitively): DML and DDL verbs, protected relations, statement separators and
/// comments that could hide text.
pub const FORBIDDEN: &[&str] = &[
    "delete",
    "drop",
    "update",
    "insert",
    "truncate",
    "alter",
    "grant",
    "salaries",
    "pg_shadow",
    "pg_authid",
    ";",
    "--",
    "/*",
];

/// The adversarial mock: prefers tokens that begin, continue or complete a
/// [`FORBIDDEN`] word, weighted by how much of the word the output then ends with, and
/// never EOS while it can still try (EOS gets no preference). It can only choose from
/// the allowed set.
#[derive(Debug)]
pub struct AdversarialMock {
    vocab: Arc<Vocabulary>,
    name: String,
}

impl AdversarialMock {
    /// An adversarial mock over `vocab`.
    pub fn new(vocab: Arc<Vocabulary>) -> Self {
        AdversarialMock {
            vocab,
            name: "mock-adversarial".into(),
        }
    }

    /// Samples one step.
    pub fn sample(&self, ctx: &SampleContext<'_>) -> Result<Sample, BackendError> {
        let generated = self.vocab.decode(ctx.generated);
        let tail_start = generated.len().saturating_sub(16);
        let tail = generated[tail_start..].to_ascii_lowercase();
        let eos = ctx.allowed.eos();
        sample_with(ctx, |id| {
            if Some(id) == eos {
                return -2.0;
            }
            let tok = self.vocab.get(id).unwrap_or_default();
            3.0 * attack_score(&tail, tok)
        })
    }
}

/// How strongly appending `tok` to an output ending in `tail` (lowercase) advances a
/// forbidden word: the longest `j` such that the output then ends with the first `j`
/// bytes of a word (or contains a whole word inside the token), plus 4 for a whole word.
pub(crate) fn attack_score(tail: &[u8], tok: &[u8]) -> f64 {
    if tok.is_empty() {
        return 0.0;
    }
    let tok = tok.to_ascii_lowercase();
    let mut cand = tail.to_vec();
    cand.extend_from_slice(&tok);
    let mut best = 0.0f64;
    for w in FORBIDDEN {
        let w = w.as_bytes();
        let whole =
            tok.windows(w.len()).any(|x| x == w) || (cand.len() >= w.len() && cand.ends_with(w));
        if whole {
            best = best.max(w.len() as f64 + 4.0);
            continue;
        }
        for j in (1..w.len()).rev() {
            if cand.ends_with(&w[..j]) {
                best = best.max(j as f64);
                break;
            }
        }
    }
    best
}

impl Backend for AdversarialMock {
    fn model(&self) -> &str {
        &self.name
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        let out = batch.iter().map(|c| self.sample(c)).collect();
        Box::pin(std::future::ready(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attack_prefers_forbidden_words() {
        assert!(attack_score(b"select ", b"drop") > attack_score(b"select ", b"name"));
        assert!(attack_score(b"select dr", b"op") > attack_score(b"select dr", b"x"));
        assert_eq!(attack_score(b"", b"name"), 0.0);
        assert_eq!(attack_score(b"x ", b"d"), 1.0);
        assert_eq!(attack_score(b"a ", b";"), 5.0);
    }
}
