//! [`ForwardMock`]: a mock with a forward pass, pipelined like the llama backend.
//!
//! The scripted and adversarial mocks choose a token straight from the allowed set; they
//! have no logits to compute, so there is nothing to overlap. This mock has a model's
//! shape: a [`Forward`] pass computes the logits row that follows each history of a
//! batch (by default [`HashedForward`]: a seeded score of the last two tokens, after an
//! optional sleep that stands for the model's time), each row is masked and sampled
//! ([`sample_row`], the llama backend's rule), and it runs on a model thread of the
//! [`pipeline`](crate::backend::pipeline), so with overlap on the forward pass of each
//! sampled token runs while the client computes the next mask. It is how the tests show
//! the overlap and its exactness without a model (`serve --backend mock --mock forward
//! --forward-ms 50` serves it).
//!
//! State: per generation, the last row computed and the history it follows (`Held`),
//! at most `max_generations` of them (least recently used dropped first; a dropped one
//! is computed again when it comes back).

use std::time::Duration;

use grid_vocab::Vocabulary;

use crate::backend::pipeline::{self, Pipeline, PipelineConfig, StepItem, StepResults, Stepper};
use crate::backend::sample::{mix, sample_row};
use crate::backend::{Backend, BoxFuture, Sample, SampleContext};
use crate::error::BackendError;
use crate::lru::Lru;

/// A model's forward pass over a batch.
pub trait Forward: Send + 'static {
    /// The logits row that follows each of `histories` (prompt and every token since),
    /// in order, each as long as the vocabulary; or why the pass failed (a failure of
    /// the whole batch, as a failed `llama_decode`).
    fn forward(&mut self, histories: &[&[u32]]) -> Result<Vec<Vec<f32>>, String>;
}

/// The default [`Forward`]: logit of id `i` after a history ending in `a, b` is a hash
/// of `(seed, a, b, i)` scaled to `[0, 8)`, so greedy decoding is deterministic and
/// depends on the history; each pass first sleeps `delay` (the model's time).
#[derive(Debug, Clone)]
pub struct HashedForward {
    /// Logits per row (the vocabulary's size).
    pub vocab_size: usize,
    /// Sleep per pass (not per row: a batch costs one pass, as on a real model).
    pub delay: Duration,
    /// Varies the scores.
    pub seed: u64,
}

impl HashedForward {
    /// The row after `history`.
    pub fn row(&self, history: &[u32]) -> Vec<f32> {
        let n = history.len();
        let a = n.checked_sub(2).map_or(u64::MAX, |i| u64::from(history[i]));
        let b = n.checked_sub(1).map_or(u64::MAX, |i| u64::from(history[i]));
        let base = mix(mix(self.seed, a), b);
        (0..self.vocab_size as u64)
            .map(|i| (mix(base, i) >> 40) as f32 / (1u64 << 24) as f32 * 8.0)
            .collect()
    }
}

impl Forward for HashedForward {
    fn forward(&mut self, histories: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        Ok(histories.iter().map(|h| self.row(h)).collect())
    }
}

/// Settings of a [`ForwardMock`].
#[derive(Debug, Clone, Copy)]
pub struct ForwardConfig {
    /// Run the forward pass of each sampled token right after the reply.
    pub overlap: bool,
    /// Generations whose last row is held.
    pub max_generations: usize,
    /// One line per step on stderr ([`PipelineConfig::trace`]).
    pub trace: bool,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            overlap: true,
            max_generations: 64,
            trace: false,
        }
    }
}

/// Counters of a [`ForwardMock`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardStats {
    /// Forward passes run (each over a batch).
    pub(crate) passes: u64,
    /// Rows computed (histories over all passes).
    pub(crate) rows: u64,
    /// Rows computed ahead of the next step.
    pub(crate) ahead_rows: u64,
    /// Step items whose row was held (computed ahead): no pass of their own.
    pub ready_hits: u64,
    /// Generations holding a row now.
    pub held: usize,
}

/// One generation's last computed row and the history it follows.
#[derive(Debug)]
struct Held {
    history: Vec<u32>,
    row: Vec<f32>,
}

/// The model thread's state.
struct ForwardStepper<F> {
    forward: F,
    held: Lru<String, Held>,
    stats: ForwardStats,
}

impl<F: Forward> ForwardStepper<F> {
    /// One forward pass over `histories`: a row each, in order.
    fn pass(&mut self, histories: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        self.stats.passes += 1;
        let rows = self.forward.forward(histories)?;
        if rows.len() != histories.len() {
            return Err(format!(
                "the forward pass returned {} rows for {} histories",
                rows.len(),
                histories.len()
            ));
        }
        self.stats.rows += rows.len() as u64;
        Ok(rows)
    }

    /// Whether the row after `item`'s history is held (and marks it used).
    fn holds(&mut self, item: &StepItem) -> bool {
        self.held
            .get(&item.id)
            .is_some_and(|h| h.history == item.history)
    }
}

impl<F: Forward> Stepper for ForwardStepper<F> {
    type Stats = ForwardStats;

    fn step(&mut self, items: &[StepItem]) -> StepResults {
        let need: Vec<usize> = (0..items.len())
            .filter(|&i| !self.holds(&items[i]))
            .collect();
        self.stats.ready_hits += (items.len() - need.len()) as u64;
        let mut fresh: Vec<Option<Vec<f32>>> = vec![None; items.len()];
        let mut failed = None;
        if !need.is_empty() {
            let histories: Vec<&[u32]> =
                need.iter().map(|&i| items[i].history.as_slice()).collect();
            match self.pass(&histories) {
                Ok(rows) => {
                    for (&i, row) in need.iter().zip(rows) {
                        fresh[i] = Some(row);
                    }
                }
                Err(e) => {
                    for &i in &need {
                        self.held.remove(&items[i].id);
                    }
                    failed = Some(e);
                }
            }
        }
        let mut out = Vec::with_capacity(items.len());
        for (it, row) in items.iter().zip(&fresh) {
            let row = match row {
                Some(row) => Some(row.as_slice()),
                None => self
                    .held
                    .peek(&it.id)
                    .filter(|h| h.history == it.history)
                    .map(|h| h.row.as_slice()),
            };
            out.push(match row {
                Some(row) => sample_row(row, &it.allowed, &it.sampling, it.history.len()),
                None => Err(BackendError::new(
                    failed.clone().unwrap_or_else(|| "no logits held".into()),
                )),
            });
        }
        // A retried step (a lost reply) finds its row again.
        for (it, row) in items.iter().zip(fresh) {
            if let Some(row) = row {
                let history = it.history.clone();
                self.held.insert(it.id.clone(), Held { history, row });
            }
        }
        out
    }

    fn ahead(&mut self, items: &[StepItem], ahead: &[(usize, u32)]) {
        let histories: Vec<Vec<u32>> = ahead.iter().map(|&(i, t)| items[i].continued(t)).collect();
        let views: Vec<&[u32]> = histories.iter().map(Vec::as_slice).collect();
        match self.pass(&views) {
            Ok(rows) => {
                self.stats.ahead_rows += rows.len() as u64;
                for ((&(i, _), history), row) in ahead.iter().zip(histories).zip(rows) {
                    self.held.insert(items[i].id.clone(), Held { history, row });
                }
            }
            // Their next step runs the pass itself, and reports the failure if it
            // recurs.
            Err(_) => {
                for &(i, _) in ahead {
                    self.held.remove(&items[i].id);
                }
            }
        }
    }

    fn release(&mut self, generations: &[String]) {
        for id in generations {
            self.held.remove(id);
        }
    }

    fn stats(&self) -> ForwardStats {
        ForwardStats {
            held: self.held.len(),
            ..self.stats
        }
    }
}

/// A pipelined mock model (see the [module documentation](self)).
#[derive(Debug)]
pub struct ForwardMock {
    pipeline: Pipeline<ForwardStats>,
}

impl ForwardMock {
    /// Starts the model thread of `forward` over `vocab` (its EOS ends a generation).
    pub fn new(
        vocab: &Vocabulary,
        forward: impl Forward,
        config: ForwardConfig,
    ) -> Result<ForwardMock, String> {
        let pipeline_config = PipelineConfig {
            overlap: config.overlap,
            eos: vocab.eos_id(),
            trace: config.trace,
        };
        let max_generations = config.max_generations.max(1);
        let pipeline = pipeline::spawn("grid-mock-forward", move |start| {
            start.run(
                ForwardStepper {
                    forward,
                    held: Lru::new(max_generations),
                    stats: ForwardStats::default(),
                },
                pipeline_config,
            );
        })?;
        Ok(ForwardMock { pipeline })
    }

    /// The model thread's counters, once the jobs sent before are served.
    pub async fn stats(&self) -> Result<ForwardStats, BackendError> {
        self.pipeline.stats().await
    }
}

impl Backend for ForwardMock {
    fn model(&self) -> &str {
        "mock-forward"
    }

    fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, Vec<Result<Sample, BackendError>>> {
        self.pipeline.sample_batch(batch)
    }

    fn release(&self, generations: &[String]) {
        self.pipeline.release(generations);
    }
}
