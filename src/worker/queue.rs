//! How jobs reach the engine's decode loop and what the loop holds on to while it runs:
//! - [`Inbox`]: the queue of asks, kept in arrival order; a running loop takes the asks of
//!   its own group as they come, the others wait for the loop to end;
//! - [`InLoop`]: the jobs of the running loop not answered yet (what the endpoint
//!   client's abort hook watches, and what a panic fails);
//! - [`Pinned`]: the append-only arena that keeps the languages of a loop's generations
//!   alive, and in place, until the loop ends.

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use grid_core::audit::{text_digest, to_hex};

use super::engine::Job;

/// Jobs with equal keys share one decode loop (same model, same sampling).
pub fn group_key(job: &Job) -> String {
    let s = &job.ask.settings;
    format!(
        "{:?}\0{}\0{}\0{}\0{}",
        s.endpoint,
        s.temperature.to_bits(),
        s.timeout_ms,
        s.model.as_deref().unwrap_or(""),
        job.api_key
            .as_deref()
            .map(|k| to_hex(&text_digest(k)))
            .unwrap_or_default()
    )
}

/// The engine's queue of jobs.
pub struct Inbox {
    jobs: Receiver<Job>,
    /// Taken off the channel, not served yet, in arrival order.
    held: VecDeque<Arc<Job>>,
}

impl Inbox {
    pub fn new(jobs: Receiver<Job>) -> Inbox {
        Inbox {
            jobs,
            held: VecDeque::new(),
        }
    }

    /// The next loop's group: the oldest waiting job and every waiting job of its group,
    /// in arrival order (jobs queued together share a loop, as they always have). Blocks
    /// while no job waits; `None` once the channel is closed and nothing is held.
    pub fn next_group(&mut self) -> Option<Vec<Arc<Job>>> {
        if self.held.is_empty() {
            let job = self.jobs.recv().ok()?;
            self.held.push_back(Arc::new(job));
        }
        while let Ok(job) = self.jobs.try_recv() {
            self.held.push_back(Arc::new(job));
        }
        let key = group_key(self.held.front()?);
        let (group, others): (VecDeque<_>, VecDeque<_>) =
            self.held.drain(..).partition(|j| group_key(j) == key);
        self.held = others;
        Some(group.into())
    }

    /// A job of group `key` that arrived since the last look, for the running loop.
    /// Nothing once a job of another group waits: a later job of the running group never
    /// overtakes it (otherwise a steady stream of one group would starve the others).
    pub fn arrival(&mut self, key: &str) -> Option<Arc<Job>> {
        if !self.held.is_empty() {
            return None;
        }
        let job = Arc::new(self.jobs.try_recv().ok()?);
        if group_key(&job) == key {
            return Some(job);
        }
        self.held.push_back(job);
        None
    }

    /// Puts jobs the running loop could not take back at the head of the queue, in their
    /// order (they arrived before any job still held).
    pub fn give_back(&mut self, jobs: Vec<Arc<Job>>) {
        for job in jobs.into_iter().rev() {
            self.held.push_front(job);
        }
    }
}

/// The jobs of the running loop that are not answered yet. Shared with the endpoint
/// client's abort hook (on another task of the engine thread), hence the lock.
#[derive(Clone, Default)]
pub struct InLoop(Arc<Mutex<Vec<Arc<Job>>>>);

impl InLoop {
    fn jobs(&self) -> MutexGuard<'_, Vec<Arc<Job>>> {
        // A panic never leaves the list half-changed: every change is one push or retain.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn enter(&self, job: Arc<Job>) {
        self.jobs().push(job);
    }

    /// `job` has been answered.
    pub fn leave(&self, job: &Job) {
        self.jobs().retain(|j| j.ids != job.ids);
    }

    /// Whether nobody waits for the loop any more (every job cancelled or past its
    /// deadline): a request in flight can then be abandoned.
    pub fn all_gone(&self) -> bool {
        self.jobs().iter().all(|j| j.gone())
    }

    /// The jobs not answered, which leave.
    pub fn drain(&self) -> Vec<Arc<Job>> {
        std::mem::take(&mut *self.jobs())
    }
}

/// Languages a loop may hold (as many as the engine caches); a job with another waits
/// for the next loop, so a loop that never ends cannot pile them up.
pub const PINNED: usize = 64;

/// An append-only arena of `Arc<T>`s for one decode loop: `pin` takes `&self` and the
/// references it hands out live as long as the arena, so a generation admitted while the
/// loop runs can borrow its language for the loop's whole life (grid-core's
/// `Batch<'l>`). Sound without `unsafe`: each slot is a `OnceCell` set at most once and
/// never cleared or moved while the arena lives, and the slots are allocated up front.
/// At most [`PINNED`] distinct values.
pub struct Pinned<T> {
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
    pub fn pin(&self, value: &Arc<T>) -> Option<&T> {
        for slot in self.slots.iter() {
            match slot.get() {
                Some(kept) if Arc::ptr_eq(kept, value) => return Some(kept),
                Some(_) => continue,
                None => return Some(slot.get_or_init(|| value.clone())),
            }
        }
        None
    }
}
