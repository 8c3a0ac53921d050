//! Deterministic mock models: `scripted` (spells a target SQL from a script) and
//! `adversarial` (keeps reaching for forbidden words). Both only ever look at the
//! allowed set, so they cannot choose outside it.
//!
//! Both are a "model" with a logit per allowed token: a seeded base score in `[0, 4)`
//! (a hash of the seed, the position, the last token and the id) plus the mock's
//! preference. The choice is the argmax at temperature 0 (ties: lowest id) or a seeded
//! draw from the softmax of the allowed logits (after `top_k`) otherwise; the reported
//! logprob is the chosen token's log-probability under that masked distribution (at
//! temperature 1 when greedy).

use std::sync::Arc;

use grid_vocab::Vocabulary;

use crate::backend::script::Script;
use crate::backend::{Backend, BoxFuture, Sample, SampleContext};
use crate::error::BackendError;
use crate::protocol::Sampling;

/// The logit added to the token a mock wants.
const PREFERRED: f64 = 20.0;

/// SplitMix64 finaliser: a well-mixed 64-bit hash step.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform number in `[0, 1)` from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The seeded base logit of `id` at this step, in `[0, 4)`.
pub fn base_logit(ctx: &SampleContext<'_>, id: u32) -> f64 {
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

/// Picks from `(id, logit)` candidates by the sampling parameters (see the module
/// documentation). `None` when there are no candidates.
pub fn choose(cands: &mut [(u32, f64)], sampling: &Sampling, position: usize) -> Option<Sample> {
    if cands.is_empty() {
        return None;
    }
    if sampling.temperature <= 0.0 {
        let &(token, best) = cands
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
        let lse = log_sum_exp(cands.iter().map(|c| c.1));
        return Some(Sample {
            token,
            logprob: Some(best - lse),
        });
    }
    cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let keep = sampling
        .top_k
        .map_or(cands.len(), |k| (k as usize).clamp(1, cands.len()));
    let kept = &cands[..keep];
    let t = sampling.temperature;
    let lse = log_sum_exp(kept.iter().map(|c| c.1 / t));
    let u = unit(mix(mix(sampling.seed, 0x5eed), position as u64));
    let mut acc = 0.0;
    for &(token, logit) in kept {
        let lp = logit / t - lse;
        acc += lp.exp();
        if u < acc {
            return Some(Sample {
                token,
                logprob: Some(lp),
            });
        }
    }
    let &(token, logit) = kept.last()?;
    Some(Sample {
        token,
        logprob: Some(logit / t - lse),
    })
}

fn log_sum_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + xs.map(|x| (x - m).exp()).sum::<f64>().ln()
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
    pub fn sample(&self, ctx: &SampleContext<'_>) -> Result<Sample, BackendError> {
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
pub fn attack_score(tail: &[u8], tok: &[u8]) -> f64 {
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

    #[test]
    fn greedy_choice_is_argmax_with_logprob() {
        let mut c = vec![(3, 1.0), (1, 2.0), (2, 2.0)];
        let s = choose(&mut c, &Sampling::greedy(), 0).unwrap();
        assert_eq!(s.token, 1);
        assert!(s.logprob.unwrap() < 0.0);
        let mut one = vec![(7, 0.5)];
        let t = Sampling {
            temperature: 0.7,
            top_k: Some(1),
            seed: 9,
        };
        assert_eq!(choose(&mut one, &t, 3).unwrap().token, 7);
    }
}
