//! How work reaches the pipeline's decode loops and what the loops hold on to while they
//! run:
//! - [`Inbox`]: the host's inputs (asks, and the judge's verdicts), and the entries that
//!   wait for a loop, in arrival order; an open loop takes the entries of its own group
//!   as they come, and an entry of a group without a loop gets one of its own beside the
//!   others (up to the engine's lanes), so no ask waits behind another group's decode;
//! - [`InLoop`]: the jobs of the open loops not answered yet (what the endpoint
//!   clients' abort hooks watch, and what a panic fails);
//! - [`Pinned`]: the append-only arena that keeps the languages of the loops' generations
//!   alive, and in place, until the loops end.

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::flow::{Attempt, Flow};
use crate::host::{Input, Warm};
use crate::job::Job;
use crate::judge::Verdict;
use crate::models::VocabState;

/// Jobs with equal keys share one decode loop (same model, same sampling). Not the
/// timeout: each job keeps its own deadline in a loop (a generation past it is cancelled,
/// and a request in flight abandoned once every job of the loop has gone), so an ask with
/// another `grid.timeout` is decoded beside the others, not after them.
pub(crate) fn group_key(job: &Job) -> String {
    crate::models::client_key(&job.ask.settings, job.api_key.as_deref())
}

/// Work for a decode loop.
pub(crate) enum Entry {
    /// A new ask.
    Ask(Arc<Job>),
    /// An ask whose statement the judge refused, to repair.
    Repair(Box<Repair>),
}

/// The repair of an ask whose statement the judge refused.
pub(crate) struct Repair {
    pub(crate) attempt: Attempt,
    /// The ask's flow.
    pub(crate) flow: Flow,
    /// The vocabulary its first attempt was written in.
    pub(crate) vocab: Arc<VocabState>,
}

impl Entry {
    pub(crate) fn job(&self) -> &Arc<Job> {
        match self {
            Entry::Ask(job) => job,
            Entry::Repair(r) => &r.attempt.job,
        }
    }

    fn key(&self) -> String {
        group_key(self.job())
    }
}

/// The pipeline's queue (see the module documentation).
pub(crate) struct Inbox {
    inputs: Receiver<Input>,
    /// Taken off the channel, not served yet, in arrival order.
    held: VecDeque<Entry>,
    /// Verdicts received and not yet handed on, in arrival order.
    verdicts: VecDeque<(u64, Verdict)>,
    /// Endpoints to prepare while nothing else waits, in arrival order.
    warms: VecDeque<Warm>,
    /// The host has hung up: no more inputs.
    closed: bool,
}

impl Inbox {
    pub(crate) fn new(inputs: Receiver<Input>) -> Inbox {
        Inbox {
            inputs,
            held: VecDeque::new(),
            verdicts: VecDeque::new(),
            warms: VecDeque::new(),
            closed: false,
        }
    }

    fn take(&mut self, input: Input) {
        match input {
            Input::Ask(job) => self.held.push_back(Entry::Ask(Arc::from(job))),
            Input::Verdict { ask, verdict } => self.verdicts.push_back((ask, verdict)),
            Input::Warm(w) => self.warms.push_back(w),
        }
    }

    /// Waits until there is something to do or `wait` has passed (for ever without it),
    /// then takes every input that has arrived. False once the host has hung up and
    /// nothing is held.
    pub(crate) fn wait(&mut self, wait: Option<Duration>) -> bool {
        if self.held.is_empty() && self.verdicts.is_empty() && self.warms.is_empty() && !self.closed
        {
            let input = match wait {
                None => self
                    .inputs
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => self.inputs.recv_timeout(d),
            };
            match input {
                Ok(i) => self.take(i),
                Err(RecvTimeoutError::Disconnected) => self.closed = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        self.drain();
        !(self.closed && self.held.is_empty() && self.verdicts.is_empty())
    }

    /// The oldest endpoint to prepare ([`Input::Warm`]), once nothing else waits.
    pub(crate) fn next_warm(&mut self) -> Option<Warm> {
        if !self.held.is_empty() || !self.verdicts.is_empty() {
            return None;
        }
        self.warms.pop_front()
    }

    fn drain(&mut self) {
        loop {
            match self.inputs.try_recv() {
                Ok(i) => self.take(i),
                Err(std::sync::mpsc::TryRecvError::Empty) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    /// Whether the host has hung up.
    pub(crate) fn closed(&self) -> bool {
        self.closed
    }

    /// The verdicts received so far (taken off the channel by [`Inbox::wait`] and
    /// [`Inbox::arrival`]; asks are never taken off it here, so that a running loop still
    /// sees them arrive).
    pub(crate) fn verdicts(&mut self) -> Vec<(u64, Verdict)> {
        self.verdicts.drain(..).collect()
    }

    /// The next loop's group: the oldest waiting entry and every waiting entry of its
    /// group, in arrival order (entries queued together share a loop).
    pub(crate) fn next_group(&mut self) -> Option<Vec<Entry>> {
        self.next_group_without(|_| false)
    }

    /// [`Inbox::next_group`] among the entries no open loop `takes`.
    pub(crate) fn next_group_without(
        &mut self,
        takes: impl Fn(&Entry) -> bool,
    ) -> Option<Vec<Entry>> {
        let key = self.held.iter().find(|e| !takes(e))?.key();
        let (group, others): (VecDeque<_>, VecDeque<_>) = self
            .held
            .drain(..)
            .partition(|e| e.key() == key && !takes(e));
        self.held = others;
        Some(group.into())
    }

    /// Whether an entry waits that no open loop `takes`.
    pub(crate) fn waits_without(&self, takes: impl Fn(&Entry) -> bool) -> bool {
        self.held.iter().any(|e| !takes(e))
    }

    /// Queues an entry behind those waiting.
    pub(crate) fn push(&mut self, entry: Entry) {
        self.held.push_back(entry);
    }

    /// The oldest entry an open loop `takes`, with what has arrived on the channel since
    /// the last look (verdicts met on the way are kept for [`Inbox::verdicts`]).
    pub(crate) fn arrival(&mut self, takes: impl Fn(&Entry) -> bool) -> Option<Entry> {
        self.drain();
        let i = self.held.iter().position(takes)?;
        self.held.remove(i)
    }

    /// Puts entries a loop could not take back at the head of the queue, in their order
    /// (they arrived before any entry still held).
    pub(crate) fn give_back(&mut self, entries: Vec<Entry>) {
        for e in entries.into_iter().rev() {
            self.held.push_front(e);
        }
    }
}

/// The jobs of the open loops that are not answered yet. Shared with the endpoint
/// clients' abort hooks (on another task of the pipeline's thread), hence the lock.
#[derive(Clone, Default)]
pub(crate) struct InLoop(Arc<Mutex<Vec<Arc<Job>>>>);

impl InLoop {
    fn jobs(&self) -> MutexGuard<'_, Vec<Arc<Job>>> {
        // A panic never leaves the list half-changed: every change is one push or retain.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn enter(&self, job: Arc<Job>) {
        self.jobs().push(job);
    }

    /// Ask `ask` has been answered, or waits outside the loop (for the judge).
    pub(crate) fn leave(&self, ask: u64) {
        self.jobs().retain(|j| j.id() != ask);
    }

    /// Whether nobody waits for the loop of group `key` any more (every job of it
    /// cancelled or past its deadline): a request in flight can then be abandoned.
    pub(crate) fn all_gone_in(&self, key: &str) -> bool {
        self.jobs()
            .iter()
            .filter(|j| group_key(j) == key)
            .all(|j| j.gone())
    }

    /// The jobs not answered, which leave.
    pub(crate) fn drain(&self) -> Vec<Arc<Job>> {
        std::mem::take(&mut *self.jobs())
    }
}

/// Languages the open loops may hold together (as many as the pipeline caches); a job
/// with another waits for the next loops, so loops that never end cannot pile them up.
pub(crate) const PINNED: usize = 64;

/// An append-only arena of `Arc<T>`s for the decode loops open together: `pin` takes `&self` and the
/// references it hands out live as long as the arena, so a generation admitted while the
/// loop runs can borrow its language for the loop's whole life (grid-core's
/// `Batch<'l>`). Sound without `unsafe`: each slot is a `OnceCell` set at most once and
/// never cleared or moved while the arena lives, and the slots are allocated up front.
/// At most [`PINNED`] distinct values.
pub(crate) struct Pinned<T> {
    slots: Box<[OnceCell<Arc<T>>]>,
}

impl<T> Default for Pinned<T> {
    fn default() -> Self {
        Pinned {
            slots: (0..PINNED).map(|_| OnceCell::new()).collect(),
        }
    }
}

impl<T> Pinned<T> {
    /// `value`, kept until the arena is dropped (once per distinct `Arc`); `None` when
    /// the arena is full.
    pub(crate) fn pin(&self, value: &Arc<T>) -> Option<&T> {
        for slot in self.slots.iter() {
            match slot.get() {
                Some(kept) if Arc::ptr_eq(kept, value) => return Some(kept),
                Some(_) => continue,
                None => return Some(slot.get_or_init(|| value.clone())),
            }
        }
        None
    }

    /// Whether no value can be pinned anew.
    pub(crate) fn is_full(&self) -> bool {
        self.slots.iter().all(|s| s.get().is_some())
    }
}
