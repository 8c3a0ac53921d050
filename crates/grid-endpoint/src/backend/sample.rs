//! The sampling rule every backend applies to its allowed candidates, so that a mock, a
//! real model and a replay agree on what "greedy" and "seeded" mean:
//!
//! * temperature 0: the argmax of the allowed logits, ties to the lowest id; the reported
//!   logprob is the token's log-probability under the softmax of the allowed logits
//!   (temperature 1);
//! * otherwise: keep the `top_k` most likely allowed tokens (ties to the lowest id), and
//!   draw from their softmax at the temperature with one uniform number derived from
//!   `(seed, position)` alone, so a replay with the same seeds draws the same.
//!
//! [`sample_row`] applies a step's allowed set to a model's whole logits row: every id
//! outside the set is −∞, which includes every id of the row beyond the served
//! vocabulary (a model's padding rows), since the set is over the served ids only.

use crate::backend::{Allowed, Sample};
use crate::error::BackendError;
use crate::protocol::Sampling;

/// SplitMix64 finaliser: a well-mixed 64-bit hash step.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform number in `[0, 1)` from a hash.
pub(crate) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Picks from `(id, logit)` candidates by the sampling parameters (see the module
/// documentation). `None` when there are no candidates.
pub(crate) fn choose(
    cands: &mut [(u32, f64)],
    sampling: &Sampling,
    position: usize,
) -> Option<Sample> {
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

/// Samples one token from a model's logits `row` under `allowed` (see the module
/// documentation). Fails when an allowed id has no logit in the row, when a logit of the
/// allowed set is NaN, or when nothing is allowed.
pub fn sample_row(
    row: &[f32],
    allowed: &Allowed,
    sampling: &Sampling,
    position: usize,
) -> Result<Sample, BackendError> {
    let mut cands = Vec::with_capacity(allowed.len());
    for id in allowed.tokens().chain(allowed.eos()) {
        let Some(&logit) = row.get(id as usize) else {
            return Err(BackendError::new(format!(
                "allowed id {id} is beyond the model's logits row of {}",
                row.len()
            )));
        };
        if logit.is_nan() {
            return Err(BackendError::new(format!(
                "the model's logit of id {id} is NaN"
            )));
        }
        cands.push((id, f64::from(logit)));
    }
    choose(&mut cands, sampling, position).ok_or_else(|| BackendError::new("nothing is allowed"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tokenset::TokenSet;

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

    fn allowed(n: usize, ids: &[u32], cd: &[u32], eos: Option<u32>) -> Allowed {
        Allowed::new(
            Arc::new(TokenSet::from_ids(n, ids.iter().copied()).unwrap()),
            cd,
            eos,
        )
    }

    #[test]
    fn a_row_is_masked_before_the_argmax() {
        // The row is longer than the vocabulary of 6 (a model's padding rows 6 and 7
        // hold the largest logits) and its best served id, 1, is not allowed.
        let row = [0.5, 9.0, 1.0, 3.0, 3.0, 8.0, 50.0, 60.0];
        let greedy = Sampling::greedy();
        let a = allowed(6, &[0, 2, 3, 4], &[], None);
        // 3 and 4 tie: the lowest id wins.
        let s = sample_row(&row, &a, &greedy, 0).unwrap();
        assert_eq!(s.token, 3);
        let lse = [0.5f64, 1.0, 3.0, 3.0]
            .iter()
            .map(|x| x.exp())
            .sum::<f64>()
            .ln();
        assert!((s.logprob.unwrap() - (3.0 - lse)).abs() < 1e-12);
        // A CD-pass id joins the set; EOS only through the gate.
        assert_eq!(
            sample_row(&row, &allowed(6, &[0, 2], &[1], None), &greedy, 0)
                .unwrap()
                .token,
            1
        );
        assert_eq!(
            sample_row(&row, &allowed(6, &[0, 2], &[], None), &greedy, 0)
                .unwrap()
                .token,
            2
        );
        assert_eq!(
            sample_row(&row, &allowed(6, &[0, 2], &[], Some(5)), &greedy, 0)
                .unwrap()
                .token,
            5
        );
    }

    #[test]
    fn sampled_tokens_stay_in_the_set_and_replay() {
        let row: Vec<f32> = (0..64).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let a = allowed(60, &[3, 9, 17, 33, 59], &[], Some(2));
        for seed in 0..200u64 {
            let s = Sampling {
                temperature: 0.8,
                top_k: Some(3),
                seed,
            };
            let x = sample_row(&row, &a, &s, 11).unwrap();
            assert!(a.contains(x.token));
            assert_eq!(sample_row(&row, &a, &s, 11).unwrap(), x);
        }
    }

    #[test]
    fn a_short_row_or_a_nan_is_an_error() {
        let a = allowed(10, &[1, 8], &[], None);
        assert!(sample_row(&[0.0; 5], &a, &Sampling::greedy(), 0).is_err());
        let mut row = [0.0f32; 10];
        row[8] = f32::NAN;
        assert!(sample_row(&row, &a, &Sampling::greedy(), 0).is_err());
    }
}
