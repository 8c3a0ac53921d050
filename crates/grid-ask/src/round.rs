//! One decode loop of a group of asks (same endpoint and sampling): asks of the group
//! that arrive while it runs join it at the next tick; each ask is answered as soon as
//! its last generation stops; a repair joins the loop as a new generation. So a short
//! ask never waits for a long one, nor an arrival for the loop to end (unless an ask of
//! another group came before it: see [`crate::queue::Inbox::arrival`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use grid_core::audit::{
    AuditSink, ChainWriter, Entry as LogEntry, Seal, SinkError, StepRecord, WriteError,
};
use grid_core::cache::MaskCache;
use grid_core::decode::{Batch, DecodeOptions, Decoder, Model, Outcome};
use grid_core::mask::Masker;
use grid_core::Dialect;
use grid_endpoint::ClientError;

use crate::failure::Failure;
use crate::flow::{Attempt, Attempted, Flow};
use crate::hands::Hands;
use crate::host::Output;
use crate::language::{Compiled, Languages};
use crate::models::{ModelSlot, Models, Prompter, VocabState};
use crate::queue::{group_key, Entry, Pinned};

/// How far ahead of the least-served generation of the loop (in the time its steps took)
/// another may be before it skips ticks (see `grid_core::decode`'s fairness): an ask's
/// steps on a narrow language take a millisecond or two, one over thousands of names
/// tens of milliseconds.
const SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// A live generation of a round and its ask's flow.
struct Running {
    attempt: Attempt,
    flow: Flow,
}

/// See the module documentation.
pub(crate) struct Round<'l> {
    key: String,
    vocab: &'l VocabState,
    /// The same vocabulary, for asks that leave the loop (parked for the judge).
    shared_vocab: Arc<VocabState>,
    prompter: Prompter,
    /// The languages of the round's generations (outlives `batch`).
    pinned: &'l Pinned<Compiled>,
    decoder: Decoder<'l>,
    batch: Batch<'l>,
    writer: ChainWriter<ForwardSink>,
    /// The live generations, by id.
    running: BTreeMap<u64, Running>,
    /// Entries whose language did not fit in `pinned`: back to the queue.
    held_back: Vec<Entry>,
    /// The endpoint serves another vocabulary than ours: no more admissions.
    stale: bool,
    /// No more admissions: an entry was held back (its language did not fit), or a group
    /// waits for a loop of its own and none is free. The loop ends once it has drained.
    closing: bool,
    /// The pipeline's dialect and mask cache, which admitted asks' languages are compiled
    /// over and warm.
    dialect: Arc<Dialect>,
    cache: Arc<MaskCache>,
}

impl<'l> Round<'l> {
    pub(crate) fn new(
        key: String,
        shared_vocab: Arc<VocabState>,
        vocab: &'l VocabState,
        pinned: &'l Pinned<Compiled>,
        dialect: Arc<Dialect>,
        cache: Arc<MaskCache>,
    ) -> Round<'l> {
        let decoder = Decoder::new(
            &vocab.vocab,
            Masker::with_cache(vocab.trie.clone(), cache.clone()),
            &vocab.speller,
            DecodeOptions {
                masks_per_tick: None,
                cache: true,
                slice: Some(SLICE),
            },
        );
        Round {
            key,
            vocab,
            prompter: vocab.prompter(),
            shared_vocab,
            pinned,
            decoder,
            batch: Batch::new(),
            writer: ChainWriter::new(ForwardSink::default()),
            running: BTreeMap::new(),
            held_back: Vec::new(),
            stale: false,
            closing: false,
            dialect,
            cache,
        }
    }

    /// Whether a generation is live or an outcome is still to be handed back.
    pub(crate) fn runs(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether entries that arrive may still join (none held back: they came first).
    pub(crate) fn admits(&self) -> bool {
        !self.stale && !self.closing
    }

    /// Admits nothing more: the loop ends once its generations have.
    pub(crate) fn close(&mut self) {
        self.closing = true;
    }

    /// Whether `entry` belongs to this loop (its group, and for a repair its vocabulary).
    pub(crate) fn takes(&self, entry: &Entry) -> bool {
        group_key(entry.job()) == self.key
            && match entry {
                Entry::Ask(_) => true,
                Entry::Repair(r) => Arc::ptr_eq(&r.vocab, &self.shared_vocab),
            }
    }

    pub(crate) fn stale(&self) -> bool {
        self.stale
    }

    pub(crate) fn take_held_back(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.held_back)
    }

    fn hold_back(&mut self, entry: Entry, hands: &mut Hands<'_>) {
        self.closing = true;
        hands.in_loop.leave(entry.job().id());
        self.held_back.push(entry);
    }

    /// Puts an entry's generation into the loop. An ask that cannot be asked is answered
    /// at once (sealed as unreached); one whose language does not fit in the round's
    /// arena is held back for the next loop. `languages` are the pipeline's, kept across
    /// loops.
    pub(crate) fn admit(&mut self, languages: &mut Languages, entry: Entry, hands: &mut Hands<'_>) {
        let compiled = match &entry {
            Entry::Ask(job) => {
                hands.outbox.send(Output::Taken { ask: job.id() });
                match languages.compile(&self.dialect, &job.ask, self.vocab, &self.cache) {
                    Ok(c) => c,
                    Err(f) => return hands.refuse(entry, &f, &self.dialect),
                }
            }
            Entry::Repair(r) => r.attempt.compiled.clone(),
        };
        if self.pinned.pin(&compiled).is_none() {
            return self.hold_back(entry, hands);
        }
        match entry {
            Entry::Ask(job) => match Attempt::first(job.clone(), compiled, &self.prompter) {
                Ok(a) => self.start(a, Flow::default(), hands),
                Err(f) => hands.refuse(Entry::Ask(job), &f, &self.dialect),
            },
            Entry::Repair(r) => self.start(r.attempt, r.flow, hands),
        }
    }

    /// Begins an attempt's generation at the next tick.
    fn start(&mut self, attempt: Attempt, flow: Flow, hands: &mut Hands<'_>) {
        let pinned: &'l Pinned<Compiled> = self.pinned;
        let Some(compiled) = pinned.pin(&attempt.compiled) else {
            let f = Failure::internal("the decode loop holds too many languages");
            return self.conclude(flow, attempt.failed(f), hands);
        };
        if !attempt.job.ask.settings.audit.records() {
            self.writer.sink_mut().unrecorded.insert(attempt.generation);
        }
        let spec = attempt.spec(compiled);
        let admitted = self.decoder.admit(&mut self.batch, spec, &mut self.writer);
        self.flush(hands);
        match admitted {
            Ok(()) => {
                hands.outbox.send(Output::Started {
                    ask: attempt.job.id(),
                    generation: attempt.generation,
                });
                self.running
                    .insert(attempt.generation, Running { attempt, flow });
            }
            Err(e) => self.conclude(flow, attempt.failed(audit_failure(&e)), hands),
        }
    }

    /// One tick of the loop over the model of `slot` (one of `models`), then what follows
    /// for each generation that stopped.
    pub(crate) fn step(
        &mut self,
        models: &mut Models,
        slot: &mut ModelSlot,
        hands: &mut Hands<'_>,
    ) {
        let Some(model) = models.get(slot) else {
            return self.fail_all(&Failure::internal("the endpoint client was dropped"), hands);
        };
        let outcomes = self.tick(model);
        self.flush(hands);
        let client_error = models.take_error(slot);
        if let Some(ClientError::VocabMismatch { .. }) = &client_error {
            self.stale = true;
        }
        match outcomes {
            Ok(outcomes) => {
                for o in outcomes {
                    self.settle(o, client_error.as_ref(), hands);
                }
            }
            Err(e) => self.fail_all(&audit_failure(&e), hands),
        }
    }

    fn tick(&mut self, model: &mut dyn Model) -> Result<Vec<Outcome>, WriteError> {
        let running = &self.running;
        let mut cancel = |generation: u64, _: usize| {
            running
                .get(&generation)
                .is_none_or(|r| r.attempt.job.gone())
        };
        self.decoder
            .tick(&mut self.batch, model, &mut self.writer, &mut cancel)
    }

    /// Sends the step records made since the last call.
    fn flush(&mut self, hands: &mut Hands<'_>) {
        let made = std::mem::take(&mut self.writer.sink_mut().made);
        if !made.is_empty() {
            hands.outbox.send(Output::Steps(made));
        }
    }

    /// A generation stopped: its attempt is checked, then its ask goes on.
    fn settle(
        &mut self,
        outcome: Outcome,
        client_error: Option<&ClientError>,
        hands: &mut Hands<'_>,
    ) {
        let Some(run) = self.running.remove(&outcome.generation) else {
            return;
        };
        let sink = self.writer.sink_mut();
        let seal = sink.seals.remove(&outcome.generation);
        let steps = sink.steps.remove(&outcome.generation).unwrap_or_default();
        sink.unrecorded.remove(&outcome.generation);
        let done = Attempted::new(run.attempt, outcome, seal, steps, client_error);
        self.conclude(run.flow, done, hands);
    }

    /// An attempt is over: its ask is answered, parked for the judge, or its repair
    /// joins the loop.
    fn conclude(&mut self, flow: Flow, done: Attempted, hands: &mut Hands<'_>) {
        let next = flow.after(done, &self.prompter, &self.vocab.vocab);
        let shared = self.shared_vocab.clone();
        if let Some((a, f)) = hands.follow(next, &shared) {
            self.start(a, f, hands);
        }
    }

    /// Every live generation fails with `f` (they stay unsealed: the chain refused a
    /// write, or no model is left to step them), and the loop ends.
    fn fail_all(&mut self, f: &Failure, hands: &mut Hands<'_>) {
        self.batch = Batch::new();
        for run in std::mem::take(&mut self.running).into_values() {
            self.conclude(run.flow, run.attempt.failed(f.clone()), hands);
        }
    }
}

fn audit_failure(e: &WriteError) -> Failure {
    Failure::internal(format!("the audit chain refused a write: {e}"))
}

/// The sink of the loop's chain writer: step records are handed to the host after each
/// admission and tick (so that a generation in flight is on record up to its last step),
/// seals are kept until their ask is answered (the host anchors them to its head).
#[derive(Default)]
struct ForwardSink {
    /// Records made and not yet handed to the host.
    made: Vec<StepRecord>,
    /// The seals of generations not settled yet.
    seals: HashMap<u64, Seal>,
    /// The step records of generations not settled yet (for the explain rows).
    steps: HashMap<u64, Vec<StepRecord>>,
    /// Live generations of asks that are not audited: nothing of theirs is handed on.
    unrecorded: HashSet<u64>,
}

impl AuditSink for ForwardSink {
    fn append(&mut self, entry: &LogEntry) -> Result<(), SinkError> {
        match entry {
            LogEntry::Step(r) => {
                if !self.unrecorded.contains(&r.generation) {
                    self.made.push(r.clone());
                }
                self.steps.entry(r.generation).or_default().push(r.clone());
            }
            LogEntry::Seal(s) => {
                self.seals.insert(s.generation, s.clone());
            }
        }
        Ok(())
    }
}
