//! The pipeline's thread: its state ([`Engine`]: the dialect, the models, the compiled
//! languages, the mask cache, the pool of cold mask walks) and its body ([`run`]), which
//! takes the host's [`Input`]s ([`Job`]s, the judge's verdicts) and serves each group of
//! asks in a decode loop ([`crate::round`]), handing the host [`Output`]s through its
//! [`Outbox`] ([`crate::host`]).

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use grid_core::cache::MaskCache;
use grid_core::Dialect;
use grid_endpoint::EndpointSpec;

use crate::failure::Failure;
use crate::flow::Finished;
use crate::hands::{Hands, Parking};
use crate::host::{Input, Outbox, Output, Warm};
use crate::job::Job;
use crate::judge::{Judge, Verdict};
use crate::language::{Compiled, Languages};
use crate::models::{
    bounded_http_config, http_config, MockDefaults, ModelSlot, Models, VocabState,
};
use crate::queue::{group_key, Entry, InLoop, Inbox, Pinned, Repair};
use crate::round::Round;

/// Mask cache namespaces kept (one per dialect, lexicon and vocabulary in use); their
/// memory is bounded by [`Job::mask_cache_bytes`].
const MASK_CACHE_NAMESPACES: usize = 1 << 14;

/// How often asks parked for the judge are looked at (their asker may have gone).
const SWEEP: Duration = Duration::from_millis(200);

/// The pipeline's state (see the module documentation). Caches are this thread's own,
/// so no lock.
pub(crate) struct Engine {
    dialect: Arc<Dialect>,
    models: Models,
    languages: Languages,
    cache: Arc<MaskCache>,
    /// The pool of cold mask walks, and the thread count it was built for.
    pool: Option<(usize, rayon::ThreadPool)>,
}

impl Engine {
    pub(crate) fn new(defaults: MockDefaults) -> Result<Engine, Failure> {
        // The process's one copy: the extension's worker inherits it from the postmaster.
        let dialect = Dialect::generated().map_err(|e| {
            Failure::internal(format!("the SQL dialect grammar does not build: {e}"))
        })?;
        Ok(Engine {
            dialect,
            models: Models::new(defaults),
            languages: Languages::default(),
            cache: Arc::new(MaskCache::new(MASK_CACHE_NAMESPACES)),
            pool: None,
        })
    }

    /// Serves a group of entries that share an endpoint in one decode loop, which admits
    /// the group's later entries as they arrive (see [`Round`]).
    fn serve(&mut self, group: Vec<Entry>, inbox: &mut Inbox, hands: &mut Hands<'_>) {
        let Some(first) = group.first() else { return };
        let threads = first.job().threads;
        // A changed cache budget takes effect at the next miss.
        self.cache.set_budget(first.job().mask_cache_bytes);
        self.in_pool(threads, |e| e.serve_in_pool(group, inbox, hands));
    }

    /// Runs `f` in the pool of cold mask walks of `threads` threads (made anew when the
    /// count changed).
    fn in_pool<R: Send>(&mut self, threads: usize, f: impl FnOnce(&mut Engine) -> R + Send) -> R {
        if self.pool.as_ref().is_none_or(|(n, _)| *n != threads) {
            self.pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("grid-mask-{i}"))
                .build()
                .ok()
                .map(|p| (threads, p));
        }
        match self.pool.take() {
            Some((n, pool)) => {
                let r = pool.install(|| f(self));
                self.pool = Some((n, pool));
                r
            }
            None => f(self),
        }
    }

    fn serve_in_pool(&mut self, group: Vec<Entry>, inbox: &mut Inbox, hands: &mut Hands<'_>) {
        // Declared before the lanes: the generations borrow their languages, and the
        // rounds their vocabularies, from these arenas.
        let pinned = Pinned::default();
        let vocabs: Pinned<VocabState> = Pinned::default();
        let mut lanes: Vec<Lane<'_>> = Vec::new();
        self.open(group, &pinned, &vocabs, &mut lanes, inbox, hands);
        loop {
            // One tick of each lane in turn: every open group's decode moves.
            for lane in lanes.iter_mut() {
                if lane.round.runs() {
                    lane.round.step(&mut self.models, &mut lane.slot, hands);
                }
            }
            self.admit_arrivals(&mut lanes, inbox, hands);
            let mut i = 0;
            while i < lanes.len() {
                if lanes[i].round.runs() {
                    i += 1;
                    continue;
                }
                let lane = lanes.remove(i);
                self.unwatch(&lane.slot);
                if lane.round.stale() {
                    // The server changed models: its vocabulary is fetched again at the
                    // next ask.
                    self.models.forget(&lane.endpoint);
                }
            }
            // A group that waits gets a lane of its own while one is free; without one,
            // the open lanes admit nothing more, so that they end and free theirs (a
            // steady stream of one group never starves the others).
            while lanes.len() < LANES && !pinned.is_full() {
                let Some(group) = inbox.next_group_without(|e| takes(&lanes, e)) else {
                    break;
                };
                for entry in &group {
                    hands.in_loop.enter(entry.job().clone());
                }
                self.open(group, &pinned, &vocabs, &mut lanes, inbox, hands);
            }
            if inbox.waits_without(|e| takes(&lanes, e)) {
                for lane in lanes.iter_mut() {
                    lane.round.close();
                }
            }
            if lanes.is_empty() {
                return;
            }
        }
    }

    /// Opens a lane for `group` (its endpoint, vocabulary and model: the settings of its
    /// first job) and admits its entries; a group whose model cannot be had is refused.
    fn open<'l>(
        &mut self,
        group: Vec<Entry>,
        pinned: &'l Pinned<Compiled>,
        vocabs: &'l Pinned<VocabState>,
        lanes: &mut Vec<Lane<'l>>,
        inbox: &mut Inbox,
        hands: &mut Hands<'_>,
    ) {
        fail_if_asked(&group);
        let Some(first) = group.first() else { return };
        let first = first.job().clone();
        let prepared = self.prepare(&first).and_then(|(endpoint, vocab, slot)| {
            let kept = vocabs
                .pin(&vocab)
                .ok_or_else(|| Failure::internal("the decode loops hold too many vocabularies"))?;
            Ok((endpoint, vocab, kept, slot))
        });
        let (endpoint, vocab, kept, slot) = match prepared {
            Ok(p) => p,
            Err(f) => {
                for entry in group {
                    hands.refuse(entry, &f, &self.dialect);
                }
                return;
            }
        };
        let key = group_key(&first);
        let mut round = Round::new(
            key.clone(),
            vocab,
            kept,
            pinned,
            self.dialect.clone(),
            self.cache.clone(),
        );
        self.watch(&slot, hands.in_loop, key);
        for entry in group {
            round.admit(&mut self.languages, entry, hands);
        }
        inbox.give_back(round.take_held_back());
        lanes.push(Lane {
            round,
            slot,
            endpoint,
        });
    }

    /// Prepares the vocabulary of the endpoint `w` names ([`Input::Warm`]): fetched, its
    /// trie built, and the trie's tables every language over the dialect shares (where
    /// names start in the tokens, the tokens of each lexeme body) built by warming a
    /// small reading role's language over it; what is left to a role's first ask is its
    /// own language.
    fn warm(&mut self, w: &Warm) -> Result<(String, usize), Failure> {
        let spec = Models::spec_of(Some(&w.endpoint))?;
        let vocab = self
            .models
            .vocabulary(&spec, &bounded_http_config(w.timeout, None))?;
        let language = crate::language::reader_language(&self.dialect)?;
        let cache = self.cache.clone();
        self.in_pool(w.threads, |_| cache.warm(&language, &vocab.trie));
        Ok((vocab.model.clone(), vocab.vocab.len()))
    }

    /// The endpoint, vocabulary and model of a group (the settings of its first job).
    fn prepare(
        &mut self,
        first: &Job,
    ) -> Result<(EndpointSpec, Arc<VocabState>, ModelSlot), Failure> {
        let settings = &first.ask.settings;
        let http = http_config(settings, first.api_key.as_deref());
        let spec = Models::spec(settings)?;
        let vocab = self.models.vocabulary(&spec, &http)?;
        if let Some(wanted) = settings.model.as_deref() {
            if wanted != vocab.model {
                return Err(Failure::new(
                    crate::failure::FailureKind::InvalidValue,
                    format!(
                        "grid.model is {wanted:?}, but the endpoint serves {:?}: point \
                         grid.endpoint at an endpoint of that model, or reset grid.model",
                        vocab.model
                    ),
                ));
            }
        }
        let model = self
            .models
            .model(&spec, settings, first.api_key.as_deref(), &vocab)?;
        Ok((spec, vocab, model))
    }

    /// Lets the endpoint client abandon a request once every job of the lane's group is
    /// gone (the list grows as jobs are admitted and shrinks as they are answered).
    fn watch(&mut self, slot: &ModelSlot, in_loop: &InLoop, key: String) {
        let in_loop = in_loop.clone();
        self.models
            .set_abort(slot, Some(Arc::new(move || in_loop.all_gone_in(&key))));
    }

    fn unwatch(&mut self, slot: &ModelSlot) {
        self.models.set_abort(slot, None);
    }

    /// Admits what arrived for the lanes' groups since the last tick: new asks, and the
    /// repairs of asks whose verdict came.
    fn admit_arrivals(&mut self, lanes: &mut [Lane<'_>], inbox: &mut Inbox, hands: &mut Hands<'_>) {
        for lane in lanes.iter_mut() {
            while lane.round.admits() {
                let Some(entry) = inbox.arrival(|e| lane.round.takes(e)) else {
                    break;
                };
                hands.in_loop.enter(entry.job().clone());
                fail_if_asked(std::slice::from_ref(&entry));
                lane.round.admit(&mut self.languages, entry, hands);
            }
        }
        for entry in resolve(inbox.verdicts(), hands) {
            match lanes
                .iter_mut()
                .find(|l| l.round.admits() && l.round.takes(&entry))
            {
                Some(lane) => {
                    hands.in_loop.enter(entry.job().clone());
                    lane.round.admit(&mut self.languages, entry, hands);
                }
                None => inbox.push(entry),
            }
        }
        for lane in lanes.iter_mut() {
            inbox.give_back(lane.round.take_held_back());
        }
    }
}

/// Groups decoded at once, each in a loop of its own ([`Round`]), ticked in turn.
const LANES: usize = 4;

/// An open group: its loop, the model it asks, and the endpoint behind it.
struct Lane<'l> {
    round: Round<'l>,
    slot: ModelSlot,
    endpoint: EndpointSpec,
}

/// Whether an open lane takes `entry` (its group, and for a repair its vocabulary).
fn takes(lanes: &[Lane<'_>], entry: &Entry) -> bool {
    lanes.iter().any(|l| l.round.takes(entry))
}

/// The verdicts that came: each parked ask answered, or its repair to run.
fn resolve(verdicts: Vec<(u64, Verdict)>, hands: &mut Hands<'_>) -> Vec<Entry> {
    let mut repairs = Vec::new();
    for (ask, verdict) in verdicts {
        // A verdict for no parked ask (answered meanwhile, or forged) is dropped.
        let Some(w) = hands.parked.remove(&ask) else {
            continue;
        };
        let next = w
            .parked
            .judged(verdict, &w.vocab.prompter(), &w.vocab.vocab);
        if let Some((a, f)) = hands.follow(next, &w.vocab) {
            repairs.push(Entry::Repair(Box::new(Repair {
                attempt: a,
                flow: f,
                vocab: w.vocab.clone(),
            })));
        }
    }
    repairs
}

/// `grid.debug_fault = 'panic'`: the pipeline panics as a bug would; every job of the
/// loop is answered with an error and the pipeline goes on (see [`run`]).
fn fail_if_asked(entries: &[Entry]) {
    if entries
        .iter()
        .any(|e| e.job().ask.settings.fault.as_deref() == Some("panic"))
    {
        panic!("grid.debug_fault = 'panic'");
    }
}

/// The pipeline's thread: takes inputs until the host hangs up, and serves each group of
/// asks (those that share an endpoint and its settings) in one decode loop, which admits
/// the group's later asks while it runs. Asks parked for the judge wait for their
/// verdict; one whose asker has gone (or all of them, once the host has hung up) is
/// answered as cancelled, its seals kept. A panic fails the asks of the loop not
/// answered yet (with an error each, unsealed) and the pipeline starts afresh.
pub fn run(
    inputs: Receiver<Input>,
    outbox: &dyn Outbox,
    judge: &mut dyn Judge,
    defaults: MockDefaults,
) {
    // Built before the first ask (the dialect's tables take a moment), not during it.
    let mut engine: Option<Engine> = Engine::new(defaults.clone()).ok();
    let mut inbox = Inbox::new(inputs);
    let mut parked = Parking::new();
    loop {
        let wait = (!parked.is_empty()).then_some(SWEEP);
        let more = inbox.wait(wait);
        let in_loop = InLoop::default();
        let mut hands = Hands {
            outbox,
            in_loop: &in_loop,
            judge: &mut *judge,
            parked: &mut parked,
        };
        let repairs = resolve(inbox.verdicts(), &mut hands);
        for r in repairs {
            inbox.push(r);
        }
        let closed = inbox.closed();
        let gone: Vec<u64> = hands
            .parked
            .iter()
            .filter(|(_, w)| closed || w.parked.job().gone())
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            if let Some(w) = hands.parked.remove(&id) {
                hands.finish(w.parked.abandoned(&w.vocab.vocab));
            }
        }
        let Some(group) = inbox.next_group() else {
            if let Some(w) = inbox.next_warm() {
                let started = Instant::now();
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        match engine.as_mut() {
                            Some(e) => e.warm(&w),
                            None => Engine::new(defaults.clone())
                                .and_then(|e| engine.insert(e).warm(&w)),
                        }
                    }))
                    .unwrap_or_else(|_| Err(Failure::internal("a panic while it was prepared")));
                outbox.send(Output::Warmed {
                    endpoint: w.endpoint,
                    outcome,
                    took: started.elapsed(),
                });
                continue;
            }
            if !more && hands.parked.is_empty() {
                return;
            }
            continue;
        };
        // Outside the unwind boundary: what a panic leaves unanswered is answered here.
        for entry in &group {
            in_loop.enter(entry.job().clone());
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let e = match engine.as_mut() {
                Some(e) => e,
                None => match Engine::new(defaults.clone()) {
                    Ok(e) => engine.insert(e),
                    Err(f) => {
                        for entry in group {
                            hands.finish(Finished {
                                ask: entry.job().id(),
                                session_user: entry.job().ask.session_user.clone(),
                                seals: Vec::new(),
                                answer: crate::answer::Answer::Failed(f.clone()),
                                generations: Vec::new(),
                            });
                        }
                        return;
                    }
                },
            };
            e.serve(group, &mut inbox, &mut hands);
        }));
        let why = match outcome {
            Ok(()) => "the decode loop ended without answering".to_string(),
            Err(panic) => {
                engine = None;
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown".into());
                format!("panic: {what}")
            }
        };
        for job in in_loop.drain() {
            outbox.send(Output::Finish(Box::new(Finished {
                ask: job.id(),
                session_user: job.ask.session_user.clone(),
                seals: Vec::new(),
                answer: crate::answer::Answer::Failed(Failure::internal(format!(
                    "the generation failed inside the worker ({why}); the worker goes on"
                ))),
                generations: Vec::new(),
            })));
        }
    }
}
