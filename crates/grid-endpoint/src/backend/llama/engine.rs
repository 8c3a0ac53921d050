//! The llama model thread's [`Stepper`]: owns the llama context and the [`KvBook`].
//! llama.cpp is synchronous and not thread-safe per context, so it runs on the
//! pipeline's thread ([`crate::backend::pipeline`]) and never on the async runtime.
//!
//! A step plans with the book, applies the cache operations, decodes every entry of the
//! step as one llama batch (several decode calls only when longer than llama's batch
//! size), masks each generation's logits row and samples ([`sample_row`]). The work
//! ahead ([`Stepper::ahead`], with overlap on) decodes each sampled token as one batch
//! again, so the logits of the next step are ready while the client computes the next
//! mask: the next step only masks them. The book holds those logits with the sequence
//! they belong to, and the next step's history is reconciled with the sequence like
//! any other (longest common prefix), so a history that does not continue with the
//! sampled token discards them.
//!
//! A failed decode resets the step's generations (they are recomputed next time) and
//! answers an error for each; a panic inside llama's bindings resets the whole cache.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::DecodeError;

use crate::backend::llama::kv::{KvBook, KvOp, Logits, Plan, Request, Slot};
use crate::backend::pipeline::{StepItem, StepResults, Stepper};
use crate::backend::sample::sample_row;
use crate::error::BackendError;

/// Counters of the model thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Tokens decoded (entries of all batches, a shared entry once).
    pub decoded: u64,
    /// Tokens decoded ahead of the next step (overlap).
    pub speculated: u64,
    /// Steps whose logits were ready without decoding (overlap hits).
    pub ready_hits: u64,
    /// `llama_decode` calls.
    pub(crate) decode_calls: u64,
    /// Generations holding a sequence now.
    pub generations: usize,
    /// Kept prompts now.
    pub prefixes: usize,
    /// Microseconds spent in `llama_decode` (the forward passes).
    pub(crate) decode_us: u64,
}

/// Settings of the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineConfig {
    pub(crate) max_generations: usize,
    pub(crate) max_prefixes: usize,
    pub(crate) n_ctx: usize,
    pub(crate) n_batch: usize,
}

/// The state of the model thread.
pub(crate) struct Engine<'m> {
    ctx: LlamaContext<'m>,
    book: KvBook<Vec<f32>>,
    batch: LlamaBatch<'static>,
    config: EngineConfig,
    stats: EngineStats,
}

impl Stepper for Engine<'_> {
    type Stats = EngineStats;

    fn step(&mut self, items: &[StepItem]) -> StepResults {
        self.guarded(items, |e, items| e.sample(items))
    }

    fn ahead(&mut self, items: &[StepItem], ahead: &[(usize, u32)]) {
        self.guarded(items, |e, items| {
            e.speculate(items, ahead);
            Vec::new()
        });
    }

    fn release(&mut self, generations: &[String]) {
        for id in generations {
            if let Some(op) = self.book.release(id) {
                // Clearing a whole sequence cannot fail.
                let _ = self.apply(&[op]);
            }
        }
    }

    fn stats(&self) -> EngineStats {
        let mut s = self.stats;
        s.generations = self.book.generations();
        s.prefixes = self.book.prefixes();
        s
    }
}

impl<'m> Engine<'m> {
    pub(crate) fn new(ctx: LlamaContext<'m>, config: EngineConfig) -> Self {
        let book = KvBook::new(config.max_generations, config.max_prefixes, config.n_ctx);
        let batch = LlamaBatch::new(config.n_batch, book.sequences() as i32);
        Engine {
            ctx,
            book,
            batch,
            config,
            stats: EngineStats::default(),
        }
    }

    /// Runs `f`; a panic in it resets the cache and the book and fails every item.
    fn guarded(
        &mut self,
        items: &[StepItem],
        f: impl FnOnce(&mut Self, &[StepItem]) -> StepResults,
    ) -> StepResults {
        match catch_unwind(AssertUnwindSafe(|| f(self, items))) {
            Ok(out) => out,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                eprintln!("grid-endpoint: the llama backend failed ({what}); its cache is reset");
                self.ctx.clear_kv_cache();
                self.book = KvBook::new(
                    self.config.max_generations,
                    self.config.max_prefixes,
                    self.config.n_ctx,
                );
                items
                    .iter()
                    .map(|_| {
                        Err(BackendError::new(format!(
                            "the llama backend failed: {what}"
                        )))
                    })
                    .collect()
            }
        }
    }

    fn requests(items: &[StepItem]) -> Vec<Request<'_>> {
        items
            .iter()
            .map(|it| Request {
                id: &it.id,
                history: &it.history,
                prompt_len: it.prompt_len,
            })
            .collect()
    }

    /// One step: decode what the items need, then mask and sample each row.
    fn sample(&mut self, items: &[StepItem]) -> StepResults {
        let requests = Self::requests(items);
        let plan = match self.run_plan(&requests) {
            Ok(plan) => plan,
            Err(e) => {
                return items
                    .iter()
                    .map(|_| Err(BackendError::new(e.clone())))
                    .collect()
            }
        };
        items
            .iter()
            .zip(&plan.slots)
            .map(|(it, slot)| match slot {
                Slot::Failed(m) => Err(BackendError::new(m.clone())),
                Slot::Ready { logits, .. } => {
                    if *logits == Logits::Held {
                        self.stats.ready_hits += 1;
                    }
                    let row = self.book.row(&it.id).ok_or_else(|| {
                        BackendError::new("internal: no logits for a served generation")
                    })?;
                    sample_row(row, &it.allowed, &it.sampling, it.history.len())
                }
            })
            .collect()
    }

    /// Decodes the sampled tokens of a step ahead of the next one.
    fn speculate(&mut self, items: &[StepItem], ahead: &[(usize, u32)]) {
        let histories: Vec<Vec<u32>> = ahead.iter().map(|&(i, t)| items[i].continued(t)).collect();
        let requests: Vec<Request<'_>> = ahead
            .iter()
            .zip(&histories)
            .map(|(&(i, _), h)| Request {
                id: &items[i].id,
                history: h,
                prompt_len: items[i].prompt_len,
            })
            .collect();
        let before = self.stats.decoded;
        // A failure has already reset these generations; the next step recomputes them.
        let _ = self.run_plan(&requests);
        self.stats.speculated += self.stats.decoded - before;
    }

    /// Plans, applies and decodes `requests`, then records the outcome in the book.
    /// An error fails the whole step (its generations were reset).
    fn run_plan(&mut self, requests: &[Request<'_>]) -> Result<Plan, String> {
        let plan = self.book.plan(requests);
        let in_step: HashSet<&str> = requests.iter().map(|r| r.id).collect();
        let outcome = self
            .apply(&plan.before)
            .and_then(|()| self.decode(&plan, &in_step));
        match outcome {
            Ok(mut rows) => {
                let ops = self.book.commit(requests, &plan, &mut rows);
                if let Err(e) = self.apply(&ops) {
                    // Only kept prompts were being written: drop them all.
                    eprintln!("grid-endpoint: keeping a prompt failed ({e})");
                    while self.book.prefixes() > 0 {
                        match self.book.evict_for_space(&in_step) {
                            Some(op) => {
                                let _ = self.apply(&[op]);
                            }
                            None => break,
                        }
                    }
                }
                Ok(plan)
            }
            Err(e) => {
                let ops = self.book.abort(requests, &plan);
                let _ = self.apply(&ops);
                Err(e)
            }
        }
    }

    /// Applies cache operations in order.
    fn apply(&mut self, ops: &[KvOp]) -> Result<(), String> {
        let seq = |s: i32| u32::try_from(s).map_err(|_| format!("bad sequence id {s}"));
        for op in ops {
            match *op {
                KvOp::Clear { seq: s } => {
                    self.ctx
                        .clear_kv_cache_seq(Some(seq(s)?), None, None)
                        .map_err(|e| e.to_string())?;
                }
                KvOp::Truncate { seq: s, from } => {
                    let from = u32::try_from(from).map_err(|e| e.to_string())?;
                    let done = self
                        .ctx
                        .clear_kv_cache_seq(Some(seq(s)?), Some(from), None)
                        .map_err(|e| e.to_string())?;
                    if !done {
                        return Err(format!("llama cannot truncate sequence {s} at {from}"));
                    }
                }
                KvOp::Share { src, dst, len } => {
                    let len = u32::try_from(len).map_err(|e| e.to_string())?;
                    self.ctx
                        .copy_kv_cache_seq(src, dst, Some(0), Some(len))
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Decodes the plan's entries in order, in calls of at most `n_batch` entries, and
    /// returns the logits row of every output entry. When the cache is full it frees
    /// kept prompts and idle generations (least recently used first) and tries again.
    fn decode(
        &mut self,
        plan: &Plan,
        in_step: &HashSet<&str>,
    ) -> Result<HashMap<usize, Vec<f32>>, String> {
        let mut rows = HashMap::new();
        let n_batch = self.config.n_batch.max(1);
        let mut start = 0;
        while start < plan.entries.len() {
            let chunk = &plan.entries[start..(start + n_batch).min(plan.entries.len())];
            loop {
                self.batch.clear();
                for e in chunk {
                    let pos = i32::try_from(e.pos).map_err(|e| e.to_string())?;
                    let token = i32::try_from(e.token).map_err(|e| e.to_string())?;
                    self.batch
                        .add(LlamaToken::new(token), pos, &e.seqs, e.output)
                        .map_err(|e| format!("llama batch: {e}"))?;
                }
                self.stats.decode_calls += 1;
                let started = Instant::now();
                let decoded = self.ctx.decode(&mut self.batch);
                self.stats.decode_us += started.elapsed().as_micros() as u64;
                match decoded {
                    Ok(()) => break,
                    Err(DecodeError::NoKvCacheSlot) => match self.book.evict_for_space(in_step) {
                        Some(op) => self.apply(&[op])?,
                        None => {
                            return Err(format!(
                                "the KV cache of {} cells is full with this step's generations \
                                 (raise --ctx)",
                                self.config.n_ctx
                            ))
                        }
                    },
                    Err(e) => return Err(format!("llama_decode failed: {e}")),
                }
            }
            self.stats.decoded += chunk.len() as u64;
            for (k, e) in chunk.iter().enumerate() {
                if e.output {
                    let k = i32::try_from(k).map_err(|e| e.to_string())?;
                    rows.insert(start + k as usize, self.ctx.get_logits_ith(k).to_vec());
                }
            }
            start += chunk.len();
        }
        Ok(rows)
    }
}
