//! Pipelining: a stateful model on a thread of its own, whose next forward pass starts
//! as soon as a token is sampled.
//!
//! The forward pass that computes the logits of step t+1 needs token t, not the mask of
//! step t+1. So once a step has sampled its tokens, the model thread replies first and
//! then, with overlap on, runs the forward pass that feeds each sampled token
//! ([`Stepper::ahead`]) while the client computes the next masks. The next step waits
//! for that pass only because the thread serves jobs in order (the step job queues
//! behind it); it then finds the logits ready and only masks and samples them. A step
//! costs max(forward, mask) plus one round trip instead of their sum.
//!
//! Why the work ahead is always safe to do, and never changes an answer:
//!
//! * **It is keyed by history.** A stepper keeps the logits it computed ahead with the
//!   history they are the logits of, and a step uses them only when its history is that
//!   history. A next step that brings forced tokens, restarts the generation (position
//!   0), or retries after a lost reply has another history: the work is discarded (or,
//!   for a KV cache, its longest common prefix kept), and the step computes what it
//!   needs. A mask is therefore always applied to the logits of exactly the position it
//!   was computed for.
//! * **Generations that end.** Nothing is computed after a sampled EOS. A generation the
//!   client stops (its grammar complete, its budget spent, cancelled) or the server
//!   evicts is released ([`Job::Release`]): jobs are served in order, so the release
//!   frees the state the work ahead made, after that work.
//! * **Failures.** A failure of the work ahead answers nobody: the stepper drops what it
//!   held for those generations, so their next step runs the forward pass itself and,
//!   if it fails again, reports it as any step does (a per-generation `backend` error).
//! * **Bounds.** The work ahead holds state only for generations of the step just
//!   served, each of which already counts against the stepper's bound on live
//!   generations (`--max-generations`): it never admits a new one.
//!
//! The model runs on one thread fed by a channel because the models it serves (a llama
//! context) are not `Sync`, and a step is synchronous work that must not block the async
//! server. [`spawn`] starts the thread, [`Pipeline`] is the server's handle on it.

use std::sync::mpsc;
use std::time::Instant;

use crate::backend::{Allowed, BoxFuture, Sample, SampleContext};
use crate::error::BackendError;
use crate::protocol::Sampling;

/// One generation of a step job: owned copies of its [`SampleContext`].
#[derive(Debug)]
pub struct StepItem {
    /// The generation's id.
    pub(crate) id: String,
    /// Prompt, then every token since (this step's forced tokens included).
    pub(crate) history: Vec<u32>,
    /// The prompt's length within `history`.
    pub prompt_len: usize,
    /// What may be sampled.
    pub(crate) allowed: Allowed,
    /// The sampling parameters.
    pub(crate) sampling: Sampling,
}

impl StepItem {
    /// The history the work ahead computes the logits after: this step's, then `token`.
    pub(crate) fn continued(&self, token: u32) -> Vec<u32> {
        let mut h = Vec::with_capacity(self.history.len() + 1);
        h.extend_from_slice(&self.history);
        h.push(token);
        h
    }
}

/// A model served on the pipeline's thread.
pub(crate) trait Stepper {
    /// The counters [`Job::Stats`] reports.
    type Stats: Send + 'static;

    /// Samples one token per item, in order: runs the forward passes the items still
    /// need (their histories' logits not held), masks each row and samples.
    fn step(&mut self, items: &[StepItem]) -> Vec<Result<Sample, BackendError>>;

    /// Runs the forward pass of `items[i].history` followed by `token`, for every
    /// `(i, token)` of `ahead`, and holds its logits for the next step. A failure drops
    /// what is held for those generations (the next step computes it again).
    fn ahead(&mut self, items: &[StepItem], ahead: &[(usize, u32)]);

    /// Frees what is held for these generations.
    fn release(&mut self, generations: &[String]);

    /// The counters now.
    fn stats(&self) -> Self::Stats;
}

/// The results of a step job, one per item, in order.
pub(crate) type StepResults = Vec<Result<Sample, BackendError>>;

/// What the model thread is asked to do.
pub(crate) enum Job<T> {
    /// Sample one token for every item; the results go to `reply`.
    Step {
        items: Vec<StepItem>,
        reply: tokio::sync::oneshot::Sender<StepResults>,
        /// When the server sent it (for the trace).
        queued: Instant,
    },
    /// Free what is held for these generations.
    Release(Vec<String>),
    /// Report the stepper's counters (tests and benchmarks).
    Stats(tokio::sync::oneshot::Sender<T>),
}

/// How the model thread serves steps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PipelineConfig {
    /// Run the forward pass of each sampled token right after the reply.
    pub(crate) overlap: bool,
    /// The served vocabulary's EOS: a sampled EOS ends its generation, so nothing is
    /// computed after it.
    pub(crate) eos: Option<u32>,
    /// Print one JSON line per step job on stderr, its times in milliseconds since the
    /// thread started: `{"grid_endpoint_step":n,"items":k,"queued_ms":…,
    /// "replied_ms":…,"step_ms":…,"ahead_ms":…}` (sent by the server, replied, the
    /// model thread's time on the step and on the work ahead after it). For bench/.
    pub(crate) trace: bool,
}

/// Serves `jobs` with `stepper` until every sender is gone.
pub(crate) fn serve<S: Stepper>(
    mut stepper: S,
    jobs: mpsc::Receiver<Job<S::Stats>>,
    config: PipelineConfig,
) {
    let epoch = Instant::now();
    let mut steps = 0u64;
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Step {
                items,
                reply,
                queued,
            } => {
                let started = Instant::now();
                let out = stepper.step(&items);
                let ahead: Vec<(usize, u32)> = out
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| r.as_ref().ok().map(|s| (i, s.token)))
                    .filter(|&(_, t)| Some(t) != config.eos)
                    .collect();
                // The reply goes first: the client computes its next masks while the
                // forward passes below run.
                let _ = reply.send(out);
                let replied = Instant::now();
                if config.overlap && !ahead.is_empty() {
                    stepper.ahead(&items, &ahead);
                }
                steps += 1;
                if config.trace {
                    let ms =
                        |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
                    eprintln!(
                        "{{\"grid_endpoint_step\":{steps},\"items\":{},\"queued_ms\":{:.3},\
                         \"replied_ms\":{:.3},\"step_ms\":{:.3},\"ahead_ms\":{:.3}}}",
                        items.len(),
                        ms(epoch, queued),
                        ms(epoch, replied),
                        ms(started, replied),
                        ms(replied, Instant::now()),
                    );
                }
            }
            Job::Release(ids) => stepper.release(&ids),
            Job::Stats(reply) => {
                let _ = reply.send(stepper.stats());
            }
        }
    }
}

/// What the body of a model thread gets: it builds its stepper there (a llama context
/// must be made on the thread that uses it) and then [`Starter::run`]s it, or
/// [`Starter::fail`]s.
pub struct Starter<T> {
    jobs: mpsc::Receiver<Job<T>>,
    ready: mpsc::Sender<Result<(), String>>,
}

impl<T> Starter<T> {
    /// The stepper could not be built; [`spawn`] returns `message`.
    pub fn fail(self, message: String) {
        let _ = self.ready.send(Err(message));
    }

    /// Reports the thread ready and serves jobs with `stepper` until the [`Pipeline`]
    /// is dropped.
    pub(crate) fn run<S: Stepper<Stats = T>>(self, stepper: S, config: PipelineConfig) {
        let _ = self.ready.send(Ok(()));
        serve(stepper, self.jobs, config);
    }
}

/// Starts a model thread named `name` running `body`, and waits until it is ready.
pub(crate) fn spawn<T: Send + 'static>(
    name: &str,
    body: impl FnOnce(Starter<T>) + Send + 'static,
) -> Result<Pipeline<T>, String> {
    let (jobs, rx) = mpsc::channel::<Job<T>>();
    let (ready, ready_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(Starter { jobs: rx, ready }))
        .map_err(|e| format!("cannot start the model thread: {e}"))?;
    ready_rx
        .recv()
        .map_err(|_| "the model thread stopped while starting".to_string())??;
    Ok(Pipeline { jobs })
}

/// The server's handle on a model thread: what a pipelined [`crate::Backend`] forwards
/// its calls to.
pub(crate) struct Pipeline<T> {
    jobs: mpsc::Sender<Job<T>>,
}

impl<T> std::fmt::Debug for Pipeline<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").finish_non_exhaustive()
    }
}

fn stopped() -> BackendError {
    BackendError::new("the backend's model thread has stopped")
}

impl<T: Send + 'static> Pipeline<T> {
    /// [`crate::Backend::sample_batch`]: the batch as one step job.
    pub(crate) fn sample_batch<'a>(
        &'a self,
        batch: &'a [SampleContext<'a>],
    ) -> BoxFuture<'a, StepResults> {
        let items: Vec<StepItem> = batch
            .iter()
            .map(|c| {
                let mut history = Vec::with_capacity(c.position());
                history.extend_from_slice(c.prompt);
                history.extend_from_slice(c.generated);
                StepItem {
                    id: c.generation.to_string(),
                    history,
                    prompt_len: c.prompt.len(),
                    allowed: c.allowed.clone(),
                    sampling: c.sampling,
                }
            })
            .collect();
        let n = items.len();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.jobs.send(Job::Step {
            items,
            reply: tx,
            queued: Instant::now(),
        });
        Box::pin(async move {
            let fail = || (0..n).map(|_| Err(stopped())).collect();
            if sent.is_err() {
                return fail();
            }
            rx.await.unwrap_or_else(|_| fail())
        })
    }

    /// [`crate::Backend::release`]: queued behind the jobs sent before, so it also
    /// frees what their work ahead made. Never blocks.
    pub(crate) fn release(&self, generations: &[String]) {
        // A stopped thread holds nothing left to free.
        let _ = self.jobs.send(Job::Release(generations.to_vec()));
    }

    /// The stepper's counters, once the jobs sent before are served.
    pub(crate) async fn stats(&self) -> Result<T, BackendError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs.send(Job::Stats(tx)).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::tokenset::TokenSet;

    const EOS: u32 = 9;

    /// Samples 5 for every item but `eos` (EOS) and `err` (an error); records what it is
    /// asked. Its work ahead waits for the test to have received the step's reply.
    struct Recorder {
        log: Arc<Mutex<Vec<String>>>,
        replied: mpsc::Receiver<()>,
    }

    impl Stepper for Recorder {
        type Stats = usize;

        fn step(&mut self, items: &[StepItem]) -> StepResults {
            let ids: Vec<&str> = items.iter().map(|it| it.id.as_str()).collect();
            self.log
                .lock()
                .unwrap()
                .push(format!("step {}", ids.join(",")));
            items
                .iter()
                .map(|it| match it.id.as_str() {
                    "eos" => Ok(Sample {
                        token: EOS,
                        logprob: None,
                    }),
                    "err" => Err(BackendError::new("failed")),
                    _ => Ok(Sample {
                        token: 5,
                        logprob: None,
                    }),
                })
                .collect()
        }

        fn ahead(&mut self, items: &[StepItem], ahead: &[(usize, u32)]) {
            let after_reply = self.replied.recv_timeout(Duration::from_secs(20)).is_ok();
            let what: Vec<String> = ahead
                .iter()
                .map(|&(i, t)| format!("{}:{:?}", items[i].id, items[i].continued(t)))
                .collect();
            self.log.lock().unwrap().push(format!(
                "ahead {} {}",
                what.join(","),
                if after_reply {
                    "after the reply"
                } else {
                    "BEFORE the reply"
                }
            ));
        }

        fn release(&mut self, generations: &[String]) {
            self.log
                .lock()
                .unwrap()
                .push(format!("release {}", generations.join(",")));
        }

        fn stats(&self) -> usize {
            self.log.lock().unwrap().len()
        }
    }

    async fn run(overlap: bool) -> Vec<String> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (replied_tx, replied) = mpsc::channel();
        let thread_log = log.clone();
        let pipeline = spawn("test-pipeline", move |start| {
            let config = PipelineConfig {
                overlap,
                eos: Some(EOS),
                trace: false,
            };
            start.run(
                Recorder {
                    log: thread_log,
                    replied,
                },
                config,
            );
        })
        .unwrap();
        let allowed = Allowed::new(
            Arc::new(TokenSet::from_ids(10, 0..9).unwrap()),
            &[],
            Some(EOS),
        );
        let history = [1u32, 2];
        let contexts: Vec<SampleContext> = ["a", "eos", "err"]
            .iter()
            .map(|id| SampleContext {
                generation: id,
                prompt: &history[..1],
                generated: &history[1..],
                allowed: &allowed,
                sampling: Sampling::greedy(),
            })
            .collect();
        let out = pipeline.sample_batch(&contexts).await;
        replied_tx.send(()).unwrap();
        assert_eq!(out[0].as_ref().unwrap().token, 5);
        assert_eq!(out[1].as_ref().unwrap().token, EOS);
        assert!(out[2].is_err());
        pipeline.release(&["a".to_string()]);
        // Served after everything sent before.
        pipeline.stats().await.unwrap();
        let events = log.lock().unwrap().clone();
        events
    }

    #[tokio::test]
    async fn the_reply_goes_first_then_the_pass_of_each_sampled_token_but_eos() {
        assert_eq!(
            run(true).await,
            [
                "step a,eos,err",
                "ahead a:[1, 2, 5] after the reply",
                "release a"
            ]
        );
        assert_eq!(run(false).await, ["step a,eos,err", "release a"]);
    }
}
