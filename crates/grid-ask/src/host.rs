//! What the host and the pipeline exchange: the host sends [`Input`]s (asks, the judge's
//! verdicts, endpoints to prepare) and takes [`Output`]s (step records as they are made,
//! each ask's seals and answer, news of its progress) through its [`Outbox`].

use std::time::Duration;

use grid_core::audit::StepRecord;

use crate::failure::Failure;
use crate::flow::Finished;
use crate::job::Job;
use crate::judge::Verdict;

/// What the host hands the pipeline.
pub enum Input {
    Ask(Box<Job>),
    /// The judge's verdict on the candidate of ask `ask`, after
    /// [`crate::judge::Ruling::Later`].
    Verdict {
        ask: u64,
        verdict: Verdict,
    },
    /// Fetch and prepare the vocabulary of the endpoint a setting names, before any ask
    /// needs it (a host sends the endpoints its configuration names when it starts). Done
    /// only while no ask waits, and at most once an endpoint: a later ask finds it kept.
    Warm(Warm),
}

/// An endpoint to prepare ([`Input::Warm`]).
#[derive(Clone, Debug)]
pub struct Warm {
    /// The `grid.endpoint` setting, as written.
    pub endpoint: String,
    /// How long its vocabulary's fetch may take.
    pub timeout: Duration,
    /// Threads of the pool of cold mask walks, as [`Job::threads`].
    pub threads: usize,
}

/// What the pipeline hands the host.
pub enum Output {
    /// Step records, in the order they were made (so that a generation in flight is on
    /// record up to its last step).
    Steps(Vec<StepRecord>),
    /// An ask's seals and answer: the host stores the seals, then answers.
    Finish(Box<Finished>),
    /// A decode loop took ask `ask` from the queue: its language is compiled (unless
    /// kept) and its prompt rendered (by the endpoint, for some) before it starts (a host
    /// tells a waiting asker, as for the two below).
    Taken { ask: u64 },
    /// Generation `generation` of ask `ask` joined its decode loop: the model evaluates
    /// its prompt next, and its first step record says decoding has begun.
    Started { ask: u64, generation: u64 },
    /// What an [`Input::Warm`] came to: the model and the number of tokens of the
    /// endpoint's vocabulary, or why it could not be had (the first ask then tries again).
    Warmed {
        endpoint: String,
        outcome: Result<(String, usize), Failure>,
        took: Duration,
    },
}

/// Where [`Output`]s go.
pub trait Outbox: Send + Sync {
    fn send(&self, output: Output);
}
