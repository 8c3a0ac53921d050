//! The generation engine of the worker: what `grid.ask()` runs off the main thread. It
//! compiles a role's language from the caller's catalog snapshot, reaches the model,
//! runs grid-core's decode loop, checks the output (one repair), and says what the
//! audit store must record. No PostgreSQL call is made here: the step records go to the
//! main thread as they are made, the seals and the answer once a job is done.
//!
//! One decode loop runs at a time, for one group of jobs (same endpoint and sampling; see
//! [`Round`]): the group's jobs that arrive while it runs join it between ticks, each job
//! is answered as soon as its last generation stops, and a repair joins the same loop.
//!
//! Caches (this thread's own, so no lock):
//! - vocabularies with their tries and spellers, per endpoint;
//! - compiled languages with their reserve tables, per (catalog snapshot fingerprint,
//!   base policy, vocabulary): the snapshot is taken as the caller at every ask, so any
//!   DDL, GRANT or REVOKE changes the key before the next ask; nothing to invalidate;
//! - the mask cache, shared by every language (namespaced by language fingerprint);
//! - the endpoint clients, so the server's mask cache is reused across asks.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grid_core::audit::{
    text_digest, to_hex, AuditSink, ChainWriter, DecodeMode, Entry, Fingerprints, Mode, Seal,
    SealInput, SealMeta, SinkError, StepKind, StepRecord, StopReason, Token, WriteError,
};
use grid_core::cache::MaskCache;
use grid_core::catalog::{CatalogError, CatalogSnapshot};
use grid_core::checker::{self, Violation};
use grid_core::decode::{
    fingerprints, Batch, DecodeError, DecodeOptions, Decoder, GenerationSpec, Model, Outcome,
};
use grid_core::mask::Masker;
use grid_core::prompt;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, Language, Policy};
use grid_endpoint::backend::builtin::builtin_vocabulary;
use grid_endpoint::backend::mock::{mix, AdversarialMock, ScriptedMock};
use grid_endpoint::backend::script::Script;
use grid_endpoint::client::ApiKey;
use grid_endpoint::model::{InProcess, Remote, SamplingPlan};
use grid_endpoint::{
    Backend, ClientConfig, ClientError, EndpointClient, EndpointSpec, HttpConfig, SpecError,
};
use grid_vocab::Vocabulary;
use pgrx::PgSqlErrorCode;

use super::protocol::{AskRequest, ExplainStep, Generated, Response};
use super::queue::{group_key, InLoop, Inbox, Pinned};
use super::transaction::Failure;

/// Bytes of schema DDL the prompt may carry (the mask is never trimmed).
const PROMPT_SCHEMA_BYTES: usize = 12_000;

/// Compiled languages kept.
const LANGUAGES_KEPT: usize = 64;

/// Mask cache namespaces kept (one per dialect, lexicon and vocabulary in use); their
/// memory is bounded by `grid.mask_cache_mb`.
const MASK_CACHE_NAMESPACES: usize = 1 << 14;

/// An ask handed to the engine by the main thread.
pub struct Job {
    /// Generation ids drawn for it: the first attempt's and the repair's.
    pub ids: [u64; 2],
    pub ask: AskRequest,
    /// The worker's `grid.api_key`, read on the main thread; never logged or echoed.
    pub api_key: Option<String>,
    /// Set when the asking backend has gone away (cancelled, timed out, disconnected).
    pub cancel: Arc<AtomicBool>,
    /// The last moment the backend waits for.
    pub deadline: Instant,
    /// When the ask reached the worker (seconds since the Unix epoch).
    pub started_at: f64,
    /// `grid.worker_threads` as the worker read it (0: one per CPU).
    pub threads: usize,
    /// `grid.mask_cache_mb` as the worker read it, in bytes.
    pub mask_cache_bytes: usize,
    pub reply: std::sync::mpsc::Sender<Response>,
}

impl Job {
    /// Whether the asking backend no longer waits (cancelled, gone, or past its deadline).
    pub fn gone(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() > self.deadline
    }
}

/// A seal to store, with who asked and the artefacts it names.
pub struct SealToWrite {
    /// Chained from a genesis head here; the main thread re-anchors it to the stored head.
    pub seal: Seal,
    pub question: String,
    /// `current_user` of the ask (the seal's role binds it with `session_user`).
    pub current_user: String,
    pub final_sql: Option<String>,
    /// The checker's violations, when `final_sql` is not returned.
    pub refused: Option<String>,
    /// The generation this one repairs.
    pub repair_of: Option<u64>,
    pub artefacts: Vec<Artefact>,
    /// When the ask reached the worker (seconds since the Unix epoch).
    pub started_at: f64,
}

/// One artefact of a seal (`grid.artifacts`).
pub struct Artefact {
    pub kind: &'static str,
    pub fingerprint: [u8; 16],
    pub content: Option<Vec<u8>>,
    pub content_json: Option<serde_json::Value>,
}

/// What the engine hands the main thread.
pub enum Output {
    /// Step records, in the order they were made.
    Steps(Vec<StepRecord>),
    /// A job's seals and its answer, sent once the seals are stored.
    Finish(Box<Finish>),
}

/// A finished job.
pub struct Finish {
    pub seals: Vec<SealToWrite>,
    /// Who asked (recorded beside the seals).
    pub session_user: String,
    pub response: Response,
    pub reply: std::sync::mpsc::Sender<Response>,
}

/// Where [`Output`]s go (the main thread's queue).
pub trait Outbox: Send + Sync {
    fn send(&self, output: Output);
}

/// The model `grid.endpoint` names.
fn endpoint_spec(endpoint: Option<&str>) -> Result<EndpointSpec, Failure> {
    EndpointSpec::parse(endpoint).map_err(|e| match e {
        SpecError::Unset => Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("grid.endpoint is {e}"),
        ),
        SpecError::Invalid(_) => Failure::new(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("grid.endpoint {e}"),
        ),
    })
}

/// The key of an endpoint's vocabulary (one for both mocks: the built-in one).
fn vocabulary_key(spec: &EndpointSpec) -> String {
    match spec {
        EndpointSpec::Scripted(_) | EndpointSpec::Adversarial => "builtin".into(),
        EndpointSpec::Http(url) => url.clone(),
    }
}

/// A vocabulary and what masks and reserves need of it.
struct VocabState {
    vocab: Arc<Vocabulary>,
    trie: Arc<TokenTrie>,
    speller: Speller,
    /// The model the endpoint says it serves.
    model: String,
}

impl VocabState {
    fn new(vocab: Vocabulary, model: String) -> Result<VocabState, Failure> {
        let trie = TokenTrie::shared(&vocab).map_err(|e| {
            Failure::new(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("the endpoint's vocabulary cannot be used: {e}"),
            )
        })?;
        let speller = Speller::of(&vocab);
        Ok(VocabState {
            vocab: Arc::new(vocab),
            trie,
            speller,
            model,
        })
    }
}

/// A role's compiled language.
struct Compiled {
    snapshot: CatalogSnapshot,
    base: Policy,
    language: Language,
    reserve: ReserveTable,
    fingerprints: Fingerprints,
}

/// The key of a compiled language.
type LanguageKey = ([u8; 16], String, String);

/// The engine's state (see the module documentation).
pub struct Engine {
    dialect: Arc<Dialect>,
    vocabularies: HashMap<String, Arc<VocabState>>,
    languages: VecDeque<(LanguageKey, Arc<Compiled>)>,
    cache: Arc<MaskCache>,
    remotes: HashMap<String, Remote>,
    /// The pool of cold mask walks, and the `grid.worker_threads` it was built for.
    pool: Option<(usize, rayon::ThreadPool)>,
}

impl Engine {
    pub fn new() -> Result<Engine, Failure> {
        let dialect = Dialect::postgres_without_comments().map_err(|e| {
            Failure::new(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("the SQL dialect grammar does not build: {e}"),
            )
        })?;
        Ok(Engine {
            dialect: Arc::new(dialect),
            vocabularies: HashMap::new(),
            languages: VecDeque::new(),
            cache: Arc::new(MaskCache::new(MASK_CACHE_NAMESPACES)),
            remotes: HashMap::new(),
            pool: None,
        })
    }

    fn vocabulary(
        &mut self,
        spec: &EndpointSpec,
        http: &HttpConfig,
    ) -> Result<Arc<VocabState>, Failure> {
        let key = vocabulary_key(spec);
        if let Some(v) = self.vocabularies.get(&key) {
            return Ok(v.clone());
        }
        let (vocab, model) = match spec {
            EndpointSpec::Scripted(_) | EndpointSpec::Adversarial => {
                let v = builtin_vocabulary().map_err(|e| {
                    Failure::new(
                        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                        format!("built-in vocabulary: {e}"),
                    )
                })?;
                let model = if matches!(spec, EndpointSpec::Adversarial) {
                    "mock-adversarial"
                } else {
                    "mock-scripted"
                };
                (v, model.to_string())
            }
            EndpointSpec::Http(url) => {
                let client = EndpointClient::new(
                    url,
                    String::new(),
                    ClientConfig {
                        http: http.clone(),
                        ..ClientConfig::default()
                    },
                )
                .map_err(|e| endpoint_failure(&e))?;
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        Failure::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, e.to_string())
                    })?;
                let served = rt
                    .block_on(client.fetch_vocabulary())
                    .map_err(|e| endpoint_failure(&e))?;
                (served.vocabulary, served.header.model)
            }
        };
        let state = Arc::new(VocabState::new(vocab, model)?);
        self.vocabularies.insert(key, state.clone());
        Ok(state)
    }

    fn compile(&mut self, ask: &AskRequest, vocab: &VocabState) -> Result<Arc<Compiled>, Failure> {
        let snapshot: CatalogSnapshot = serde_json::from_value(ask.snapshot.clone())
            .map_err(CatalogError::from)
            .and_then(|s: CatalogSnapshot| s.validate().map(|()| s))
            .map_err(|e| {
                Failure::new(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("catalog snapshot: {e}"),
                )
            })?;
        let base = match &ask.policy {
            None => Policy::default(),
            Some(p) => Policy::from_json(&p.to_string()).map_err(|e| {
                Failure::new(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!(
                        "the grid.policy row of role {:?} cannot be used: {e}",
                        ask.current_user
                    ),
                )
            })?,
        };
        let key: LanguageKey = (
            snapshot.fingerprint(),
            base.canonical_json(),
            vocab.vocab.fingerprint().to_string(),
        );
        if let Some(pos) = self.languages.iter().position(|(k, _)| *k == key) {
            if let Some(hit) = self.languages.remove(pos) {
                let compiled = hit.1.clone();
                self.languages.push_front(hit);
                return Ok(compiled);
            }
        }
        let language = snapshot
            .language(self.dialect.clone(), &base)
            .map_err(|e| match e {
                CatalogError::NothingGranted { .. } => Failure::new(
                    PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    format!("{e}: GRANT it SELECT (or INSERT, UPDATE, DELETE) on a table first"),
                ),
                other => Failure::new(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("the role's language does not build: {other}"),
                ),
            })?;
        let reserve = ReserveTable::build(&language, &vocab.speller);
        let fingerprints = fingerprints(&language, vocab.vocab.fingerprint());
        let compiled = Arc::new(Compiled {
            snapshot,
            base,
            language,
            reserve,
            fingerprints,
        });
        self.languages.push_front((key, compiled.clone()));
        self.languages.truncate(LANGUAGES_KEPT);
        Ok(compiled)
    }

    /// The model for `spec`, with the settings of `ask`.
    fn model(
        &mut self,
        spec: &EndpointSpec,
        ask: &AskRequest,
        api_key: Option<&str>,
        vocab: &VocabState,
    ) -> Result<ModelSlot, Failure> {
        let plan = SamplingPlan {
            temperature: ask.settings.temperature,
            top_k: None,
        };
        let internal =
            |e: std::io::Error| Failure::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, e.to_string());
        let backend: Arc<dyn Backend> = match spec {
            EndpointSpec::Adversarial => Arc::new(AdversarialMock::new(vocab.vocab.clone())),
            EndpointSpec::Scripted(path) => {
                let script = match path {
                    None => Script::default(),
                    Some(p) => {
                        let text = std::fs::read_to_string(p).map_err(|e| {
                            Failure::new(
                                PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
                                format!("the mock script {} cannot be read: {e}", p.display()),
                            )
                        })?;
                        Script::parse(&text).map_err(|e| {
                            Failure::new(
                                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                                format!("the mock script {}: {e}", p.display()),
                            )
                        })?
                    }
                };
                Arc::new(ScriptedMock::new(vocab.vocab.clone(), script))
            }
            EndpointSpec::Http(url) => {
                let key = format!(
                    "{url}\0{}\0{}\0{}",
                    ask.settings.timeout_ms,
                    ask.settings.temperature.to_bits(),
                    api_key.map(|k| to_hex(&text_digest(k))).unwrap_or_default()
                );
                if !self.remotes.contains_key(&key) {
                    let client = EndpointClient::new(
                        url,
                        vocab.vocab.fingerprint(),
                        ClientConfig {
                            http: http_config(ask, api_key),
                            ..ClientConfig::default()
                        },
                    )
                    .map_err(|e| endpoint_failure(&e))?;
                    let remote =
                        Remote::new(client, vocab.vocab.clone(), plan).map_err(internal)?;
                    // A bounded map: settings that change often would otherwise pile up.
                    if self.remotes.len() >= 16 {
                        self.remotes.clear();
                    }
                    self.remotes.insert(key.clone(), remote);
                }
                return Ok(ModelSlot::Remote(key));
            }
        };
        Ok(ModelSlot::Local(Box::new(
            InProcess::new(backend, vocab.vocab.clone(), plan).map_err(internal)?,
        )))
    }

    /// Serves a group of jobs that share an endpoint in one decode loop, which admits the
    /// group's later jobs as they arrive (see [`Round`]).
    pub fn serve(
        &mut self,
        group: Vec<Arc<Job>>,
        inbox: &mut Inbox,
        in_loop: &InLoop,
        outbox: &dyn Outbox,
    ) {
        let Some(first) = group.first() else { return };
        let threads = first.threads;
        // A reload that changes grid.mask_cache_mb takes effect at the next miss.
        self.cache.set_budget(first.mask_cache_bytes);
        if self.pool.as_ref().is_none_or(|(n, _)| *n != threads) {
            // A reload that changes grid.worker_threads takes effect here.
            self.pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("grid-mask-{i}"))
                .build()
                .ok()
                .map(|p| (threads, p));
        }
        match self.pool.take() {
            Some((n, pool)) => {
                pool.install(|| self.serve_in_pool(group, inbox, in_loop, outbox));
                self.pool = Some((n, pool));
            }
            None => self.serve_in_pool(group, inbox, in_loop, outbox),
        }
    }

    fn serve_in_pool(
        &mut self,
        group: Vec<Arc<Job>>,
        inbox: &mut Inbox,
        in_loop: &InLoop,
        outbox: &dyn Outbox,
    ) {
        fail_if_asked(&group);
        let Some(first) = group.first() else { return };
        let (endpoint, vocab, mut slot) = match self.prepare(first) {
            Ok(p) => p,
            Err(f) => {
                for job in &group {
                    refuse(outbox, in_loop, job, &f, &self.dialect);
                }
                return;
            }
        };
        // Declared before the round: the generations borrow their languages from it.
        let pinned = Pinned::default();
        let mut round = Round::new(
            group_key(first),
            &vocab,
            &pinned,
            self.cache.clone(),
            in_loop,
            outbox,
        );
        self.watch(&slot, in_loop);
        for job in group {
            self.admit(&mut round, job);
        }
        inbox.give_back(round.take_held_back());
        while round.runs() {
            self.step(&mut round, &mut slot);
            self.admit_arrivals(&mut round, inbox);
        }
        self.unwatch(&slot);
        if round.stale {
            // The server changed models: fetch its vocabulary again at the next ask.
            self.vocabularies.remove(&vocabulary_key(&endpoint));
            self.remotes.clear();
        }
    }

    /// The endpoint, vocabulary and model of a group (the settings of its first job).
    fn prepare(
        &mut self,
        first: &Job,
    ) -> Result<(EndpointSpec, Arc<VocabState>, ModelSlot), Failure> {
        let http = http_config(&first.ask, first.api_key.as_deref());
        let spec = endpoint_spec(first.ask.settings.endpoint.as_deref())?;
        let vocab = self.vocabulary(&spec, &http)?;
        if let Some(wanted) = first.ask.settings.model.as_deref() {
            if wanted != vocab.model {
                return Err(Failure::new(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!(
                        "grid.model is {wanted:?}, but the endpoint serves {:?}: point \
                         grid.endpoint at an endpoint of that model, or reset grid.model",
                        vocab.model
                    ),
                ));
            }
        }
        let model = self.model(&spec, &first.ask, first.api_key.as_deref(), &vocab)?;
        Ok((spec, vocab, model))
    }

    /// Lets the endpoint client abandon a request once every job of the loop is gone
    /// (the list grows as jobs are admitted and shrinks as they are answered).
    fn watch(&mut self, slot: &ModelSlot, in_loop: &InLoop) {
        if let ModelSlot::Remote(key) = slot {
            if let Some(r) = self.remotes.get_mut(key.as_str()) {
                let in_loop = in_loop.clone();
                r.set_abort(Some(Arc::new(move || in_loop.all_gone())));
            }
        }
    }

    fn unwatch(&mut self, slot: &ModelSlot) {
        if let ModelSlot::Remote(key) = slot {
            if let Some(r) = self.remotes.get_mut(key.as_str()) {
                r.set_abort(None);
            }
        }
    }

    /// Puts a job's first generation into the round's loop. A job that cannot be asked
    /// is answered at once (sealed as `unreached`); one whose language does not fit in
    /// the round's arena is held back for the next loop.
    fn admit(&mut self, round: &mut Round<'_>, job: Arc<Job>) {
        let compiled = match self.compile(&job.ask, round.vocab) {
            Ok(c) => c,
            Err(f) => return round.refuse(&job, &f, &self.dialect),
        };
        if round.pinned.pin(&compiled).is_none() {
            return round.hold_back(job);
        }
        match Attempt::first(job.clone(), compiled, round.vocab) {
            Ok(a) => round.start(a, None),
            Err(f) => round.refuse(&job, &f, &self.dialect),
        }
    }

    /// Admits the jobs of the round's group that arrived since the last tick.
    fn admit_arrivals(&mut self, round: &mut Round<'_>, inbox: &mut Inbox) {
        while round.admits() {
            let Some(job) = inbox.arrival(&round.key) else {
                break;
            };
            round.in_loop.enter(job.clone());
            fail_if_asked(std::slice::from_ref(&job));
            self.admit(round, job);
        }
        inbox.give_back(round.take_held_back());
    }

    /// One tick of the round's loop, then what follows for each generation that stopped.
    fn step(&mut self, round: &mut Round<'_>, slot: &mut ModelSlot) {
        let Some(model) = model_of(&mut self.remotes, slot) else {
            return round.fail_all(&Failure::new(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "the endpoint client was dropped",
            ));
        };
        let outcomes = round.tick(model);
        let client_error = match slot {
            ModelSlot::Remote(key) => self
                .remotes
                .get_mut(key.as_str())
                .and_then(Remote::take_error),
            ModelSlot::Local(_) => None,
        };
        if let Some(ClientError::VocabMismatch { .. }) = &client_error {
            round.stale = true;
        }
        match outcomes {
            Ok(outcomes) => {
                for o in outcomes {
                    round.settle(o, client_error.as_ref());
                }
            }
            Err(e) => round.fail_all(&audit_failure(&e)),
        }
    }
}

/// `grid.debug_fault = 'panic'`: the engine panics as a bug would; every job of the loop
/// is answered with an error and the worker goes on (see [`run_engine`]).
fn fail_if_asked(jobs: &[Arc<Job>]) {
    if jobs
        .iter()
        .any(|j| j.ask.settings.fault.as_deref() == Some("panic"))
    {
        panic!("grid.debug_fault = 'panic'");
    }
}

/// The model a tick asks (borrowed for the tick only: admissions between ticks need the
/// engine).
fn model_of<'a>(
    remotes: &'a mut HashMap<String, Remote>,
    slot: &'a mut ModelSlot,
) -> Option<&'a mut dyn Model> {
    match slot {
        ModelSlot::Local(m) => Some(m.as_mut()),
        ModelSlot::Remote(key) => remotes.get_mut(key.as_str()).map(|r| r as &mut dyn Model),
    }
}

/// A live generation of a round and what its job waits for.
struct Running {
    attempt: Attempt,
    /// For a repair: the first attempt, answered with it.
    first: Option<Attempted>,
}

/// One decode loop of a group of jobs (same endpoint and sampling). Jobs of the group
/// that arrive while it runs join it at the next tick; each job is answered as soon as
/// its last generation stops; a repair joins the loop as a new generation. So a short
/// ask never waits for a long one, nor an arrival for the loop to end (unless a job of
/// another group came before it: see [`Inbox::arrival`]).
struct Round<'l> {
    key: String,
    vocab: &'l VocabState,
    /// The languages of the round's generations (outlives `batch`).
    pinned: &'l Pinned<Compiled>,
    decoder: Decoder<'l>,
    batch: Batch<'l>,
    writer: ChainWriter<ForwardSink<'l>>,
    /// The live generations, by id.
    running: BTreeMap<u64, Running>,
    in_loop: &'l InLoop,
    outbox: &'l dyn Outbox,
    /// Jobs whose language did not fit in `pinned`: back to the queue.
    held_back: Vec<Arc<Job>>,
    /// The endpoint serves another vocabulary than ours: no more admissions.
    stale: bool,
}

impl<'l> Round<'l> {
    fn new(
        key: String,
        vocab: &'l VocabState,
        pinned: &'l Pinned<Compiled>,
        cache: Arc<MaskCache>,
        in_loop: &'l InLoop,
        outbox: &'l dyn Outbox,
    ) -> Round<'l> {
        let decoder = Decoder::new(
            &vocab.vocab,
            Masker::with_cache(vocab.trie.clone(), cache),
            &vocab.speller,
            DecodeOptions {
                masks_per_tick: None,
                cache: true,
            },
        );
        let sink = ForwardSink {
            outbox,
            seals: HashMap::new(),
            steps: HashMap::new(),
            unrecorded: HashSet::new(),
        };
        Round {
            key,
            vocab,
            pinned,
            decoder,
            batch: Batch::new(),
            writer: ChainWriter::new(sink),
            running: BTreeMap::new(),
            in_loop,
            outbox,
            held_back: Vec::new(),
            stale: false,
        }
    }

    /// Whether a generation is live or an outcome is still to be handed back.
    fn runs(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether jobs that arrive may still join (none held back: they came first).
    fn admits(&self) -> bool {
        !self.stale && self.held_back.is_empty()
    }

    fn hold_back(&mut self, job: Arc<Job>) {
        self.in_loop.leave(&job);
        self.held_back.push(job);
    }

    fn take_held_back(&mut self) -> Vec<Arc<Job>> {
        std::mem::take(&mut self.held_back)
    }

    /// Begins an attempt's generation at the next tick.
    fn start(&mut self, attempt: Attempt, first: Option<Attempted>) {
        let pinned: &'l Pinned<Compiled> = self.pinned;
        let Some(compiled) = pinned.pin(&attempt.compiled) else {
            let f = Failure::new(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "the decode loop holds too many languages",
            );
            return self.conclude(first, attempt.failed(f));
        };
        if attempt.job.ask.settings.audit == "off" {
            self.writer.sink_mut().unrecorded.insert(attempt.generation);
        }
        let spec = attempt.spec(compiled);
        match self.decoder.admit(&mut self.batch, spec, &mut self.writer) {
            Ok(()) => {
                self.running
                    .insert(attempt.generation, Running { attempt, first });
            }
            Err(e) => self.conclude(first, attempt.failed(audit_failure(&e))),
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

    /// A generation stopped: its attempt is judged, then its job answered or repaired.
    fn settle(&mut self, outcome: Outcome, client_error: Option<&ClientError>) {
        let Some(run) = self.running.remove(&outcome.generation) else {
            return;
        };
        let sink = self.writer.sink_mut();
        let seal = sink.seals.remove(&outcome.generation);
        let steps = sink.steps.remove(&outcome.generation).unwrap_or_default();
        sink.unrecorded.remove(&outcome.generation);
        let done = Attempted::new(run.attempt, outcome, seal, steps, client_error);
        self.conclude(run.first, done);
    }

    /// An attempt is over: its job is answered, or its repair joins the loop.
    fn conclude(&mut self, first: Option<Attempted>, done: Attempted) {
        if let Some(first) = first {
            let (seals, response) = first.finish(Some(&done), self.vocab);
            return self.answer(&first.job, seals, response);
        }
        match done.repair(self.vocab) {
            Some(repair) => self.start(repair, Some(done)),
            None => {
                let (seals, response) = done.finish(None, self.vocab);
                self.answer(&done.job, seals, response);
            }
        }
    }

    /// Every live generation fails with `f` (they stay unsealed: the chain refused a
    /// write, or no model is left to step them), and the loop ends.
    fn fail_all(&mut self, f: &Failure) {
        self.batch = Batch::new();
        for run in std::mem::take(&mut self.running).into_values() {
            self.conclude(run.first, run.attempt.failed(f.clone()));
        }
    }

    fn refuse(&mut self, job: &Arc<Job>, f: &Failure, dialect: &Dialect) {
        refuse(self.outbox, self.in_loop, job, f, dialect);
    }

    fn answer(&mut self, job: &Job, seals: Vec<SealToWrite>, response: Response) {
        answer(self.outbox, self.in_loop, job, seals, response);
    }
}

fn audit_failure(e: &WriteError) -> Failure {
    Failure::new(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("the audit chain refused a write: {e}"),
    )
}

/// Answers a job that cannot be asked: sealed as `unreached`, with the failure.
fn refuse(outbox: &dyn Outbox, in_loop: &InLoop, job: &Job, f: &Failure, dialect: &Dialect) {
    let seal = unreached(job, f, dialect);
    answer(
        outbox,
        in_loop,
        job,
        seal.into_iter().collect(),
        error_response(f),
    );
}

/// Sends a job's seals and answer; the job leaves the loop.
fn answer(
    outbox: &dyn Outbox,
    in_loop: &InLoop,
    job: &Job,
    seals: Vec<SealToWrite>,
    response: Response,
) {
    finish_with(outbox, job, seals, response);
    in_loop.leave(job);
}

enum ModelSlot {
    Local(Box<dyn Model>),
    /// A key of `Engine::remotes`.
    Remote(String),
}

fn http_config(ask: &AskRequest, api_key: Option<&str>) -> HttpConfig {
    let timeout = Duration::from_millis(ask.settings.timeout_ms.max(1));
    HttpConfig {
        connect_timeout: timeout.min(Duration::from_secs(5)),
        request_timeout: timeout,
        retries: 0,
        api_key: api_key.and_then(ApiKey::new),
        ..HttpConfig::default()
    }
}

/// The SQLSTATE and message of an endpoint failure: each kind its own state.
fn endpoint_failure(e: &ClientError) -> Failure {
    use PgSqlErrorCode as C;
    let code = match e {
        ClientError::ConnectionRefused { .. } | ClientError::Connect { .. } => {
            C::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
        }
        ClientError::Timeout { .. } => C::ERRCODE_SYSTEM_ERROR,
        ClientError::ServerError { .. } | ClientError::Rejected { .. } => {
            C::ERRCODE_EXTERNAL_ROUTINE_EXCEPTION
        }
        ClientError::VocabMismatch { .. } => C::ERRCODE_DATATYPE_MISMATCH,
        ClientError::MalformedReply { .. }
        | ClientError::ProtocolMismatch { .. }
        | ClientError::IllegalToken { .. }
        | ClientError::UnmappableToken { .. } => C::ERRCODE_PROTOCOL_VIOLATION,
        ClientError::Disconnected { .. } => C::ERRCODE_CONNECTION_FAILURE,
        // The step reached the endpoint; whether and what it sampled is unknown.
        ClientError::TruncatedReply { .. } => C::ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN,
        ClientError::InvalidInput { .. } => C::ERRCODE_INVALID_PARAMETER_VALUE,
        ClientError::Transport { .. } => C::ERRCODE_CONNECTION_EXCEPTION,
    };
    Failure::new(code, format!("model endpoint ({}): {e}", e.kind()))
}

fn error_response(f: &Failure) -> Response {
    Response::error(f.sqlstate, f.message.clone())
}

fn finish_with(outbox: &dyn Outbox, job: &Job, seals: Vec<SealToWrite>, response: Response) {
    outbox.send(Output::Finish(Box::new(Finish {
        seals,
        session_user: job.ask.session_user.clone(),
        response,
        reply: job.reply.clone(),
    })));
}

/// The sink of the engine's chain writer: step records go to the main thread at once
/// (so that a generation in flight is on disk up to its last step), seals are kept until
/// the job is answered (the main thread anchors them to the stored head).
struct ForwardSink<'o> {
    outbox: &'o dyn Outbox,
    /// The seals of generations not settled yet.
    seals: HashMap<u64, Seal>,
    /// The step records of generations not settled yet (for `grid.explain()`).
    steps: HashMap<u64, Vec<StepRecord>>,
    /// Live generations asked with `grid.audit = off`: nothing of theirs is stored.
    unrecorded: HashSet<u64>,
}

impl AuditSink for ForwardSink<'_> {
    fn append(&mut self, entry: &Entry) -> Result<(), SinkError> {
        match entry {
            Entry::Step(r) => {
                if !self.unrecorded.contains(&r.generation) {
                    self.outbox.send(Output::Steps(vec![r.clone()]));
                }
                self.steps.entry(r.generation).or_default().push(r.clone());
            }
            Entry::Seal(s) => {
                self.seals.insert(s.generation, s.clone());
            }
        }
        Ok(())
    }
}

/// One generation to run for a job.
struct Attempt {
    job: Arc<Job>,
    generation: u64,
    compiled: Arc<Compiled>,
    prompt: Vec<u32>,
    /// Set for a repair: the first attempt's generation.
    repair_of: Option<u64>,
}

impl Attempt {
    /// The first attempt, or why the question cannot be put to the model (the backend
    /// refuses the same questions first; a request sent straight to the socket meets it
    /// here, and is never asked without its schema).
    fn first(
        job: Arc<Job>,
        compiled: Arc<Compiled>,
        vocab: &VocabState,
    ) -> Result<Attempt, Failure> {
        let dialect = compiled.language.dialect.clone();
        let reserved = |w: &str| dialect.is_reserved(w);
        let text = prompt::question_prompt(
            &compiled.snapshot,
            &job.ask.question,
            PROMPT_SCHEMA_BYTES,
            &reserved,
        )
        .map_err(|e| {
            Failure::new(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("the question cannot be asked: {e}"),
            )
        })?;
        Ok(Attempt {
            generation: job.ids[0],
            job,
            prompt: vocab.vocab.encode(&text.flat()),
            compiled,
            repair_of: None,
        })
    }

    /// The generation to run, over the language `compiled` (this attempt's, as kept
    /// for the loop's life).
    fn spec<'l>(&self, compiled: &'l Compiled) -> GenerationSpec<'l> {
        let ask = &self.job.ask;
        GenerationSpec {
            id: self.generation,
            language: &compiled.language,
            reserve: &compiled.reserve,
            prompt: self.prompt.clone(),
            max_tokens: ask.settings.max_tokens,
            seed: mix(0x6772_6964, self.generation),
            meta: SealMeta {
                role: Some(crate::audit::sealed_role(
                    &ask.session_user,
                    &ask.current_user,
                )),
                question_digest: Some(text_digest(&ask.question)),
                sql_digest: None,
            },
            unconstrained: false,
        }
    }

    fn failed(self, f: Failure) -> Attempted {
        Attempted {
            job: self.job,
            generation: self.generation,
            compiled: self.compiled,
            seal: None,
            steps: Vec::new(),
            sql: None,
            stop: None,
            violations: Vec::new(),
            failure: Some(f),
            repair_of: self.repair_of,
        }
    }
}

/// A generation that ran.
struct Attempted {
    job: Arc<Job>,
    generation: u64,
    compiled: Arc<Compiled>,
    seal: Option<Seal>,
    steps: Vec<StepRecord>,
    sql: Option<String>,
    stop: Option<StopReason>,
    /// What the semantic checker found in `sql`.
    violations: Vec<Violation>,
    /// Why the generation gives no statement.
    failure: Option<Failure>,
    repair_of: Option<u64>,
}

impl Attempted {
    fn new(
        a: Attempt,
        o: Outcome,
        seal: Option<Seal>,
        steps: Vec<StepRecord>,
        client_error: Option<&ClientError>,
    ) -> Attempted {
        let a_deadline = a.job.deadline;
        let a_gone = a.job.cancel.load(Ordering::Relaxed);
        let timeout_ms = a.job.ask.settings.timeout_ms;
        let mut seal = seal;
        // Every field but the failure is set below.
        let mut done = a.failed(Failure::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, ""));
        let sql = String::from_utf8_lossy(&o.text).into_owned();
        if let Some(s) = seal.as_mut() {
            s.meta.sql_digest = Some(text_digest(&sql));
        }
        done.seal = seal;
        done.steps = steps;
        done.stop = Some(o.stop);
        done.failure = match (o.stop, &o.error) {
            (StopReason::Eos | StopReason::BudgetCompleted, _) => None,
            (_, Some(DecodeError::Model(_))) if !a_gone && Instant::now() > a_deadline => {
                Some(Failure::new(
                    PgSqlErrorCode::ERRCODE_SYSTEM_ERROR,
                    format!(
                        "model endpoint (timeout): no answer within grid.timeout ({timeout_ms} ms)"
                    ),
                ))
            }
            (StopReason::Cancelled, _) if Instant::now() > a_deadline => {
                Some(Failure::new(
                    PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                    format!(
                        "the generation took longer than grid.timeout ({timeout_ms} ms) and was stopped"
                    ),
                ))
            }
            (StopReason::Cancelled, _) | (_, Some(DecodeError::Model(_))) if a_gone => {
                Some(Failure::new(
                    PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                    "the generation was cancelled (the asking session went away)",
                ))
            }
            (_, Some(DecodeError::Model(m))) => Some(match client_error {
                Some(e) => endpoint_failure(e),
                None => Failure::new(
                    PgSqlErrorCode::ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
                    format!("model endpoint: {m}"),
                ),
            }),
            (
                _,
                Some(DecodeError::BudgetBelowReserve {
                    max_tokens,
                    reserve,
                }),
            ) => Some(Failure::new(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "grid.max_tokens is {max_tokens}, below the {reserve} tokens of the \
                         shortest statement this role can write: raise grid.max_tokens"
                ),
            )),
            (_, e) => Some(Failure::new(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!(
                    "the decode loop stopped with an error: {}",
                    e.as_ref()
                        .map_or("unknown".to_string(), ToString::to_string)
                ),
            )),
        };
        if done.failure.is_none() {
            done.violations = checker::check(&sql, &done.compiled.snapshot);
        }
        done.sql = Some(sql);
        done
    }

    /// The repair attempt, when the checker refused the statement of a first attempt.
    fn repair(&self, vocab: &VocabState) -> Option<Attempt> {
        if self.repair_of.is_some() || self.violations.is_empty() {
            return None;
        }
        let sql = self.sql.as_deref()?;
        let dialect = self.compiled.language.dialect.clone();
        let reserved = |w: &str| dialect.is_reserved(w);
        let text = prompt::repair_prompt(
            &self.compiled.snapshot,
            &self.job.ask.question,
            PROMPT_SCHEMA_BYTES,
            sql,
            &self.violations,
            &reserved,
        )
        .ok()?;
        Some(Attempt {
            job: self.job.clone(),
            generation: self.job.ids[1],
            compiled: self.compiled.clone(),
            prompt: vocab.vocab.encode(&text.flat()),
            repair_of: Some(self.generation),
        })
    }

    fn seal_to_write(&self, vocab: &VocabState) -> Option<SealToWrite> {
        if self.job.ask.settings.audit == "off" {
            return None;
        }
        let seal = self.seal.clone()?;
        Some(SealToWrite {
            seal,
            question: self.job.ask.question.clone(),
            current_user: self.job.ask.current_user.clone(),
            final_sql: self.sql.clone(),
            refused: refusal(&self.violations),
            repair_of: self.repair_of,
            artefacts: artefacts(&self.compiled, vocab),
            started_at: self.job.started_at,
        })
    }

    /// The job's seals and answer (`again`: its repair, if one ran).
    fn finish(
        &self,
        again: Option<&Attempted>,
        vocab: &VocabState,
    ) -> (Vec<SealToWrite>, Response) {
        let mut seals: Vec<SealToWrite> = self.seal_to_write(vocab).into_iter().collect();
        if let Some(r) = again {
            seals.extend(r.seal_to_write(vocab));
        }
        let last = again.unwrap_or(self);
        let role = &self.job.ask.current_user;
        let response = match (&last.failure, last.sql.as_deref()) {
            (Some(f), _) => error_response(f),
            (None, Some(sql)) if last.violations.is_empty() => Response::Generated(Generated {
                generation: i64::try_from(last.generation).unwrap_or(i64::MAX),
                sql: sql.to_string(),
                stop: last.stop.map_or("error", StopReason::name).to_string(),
                repaired_from: again.map(|_| i64::try_from(self.generation).unwrap_or(i64::MAX)),
                repair_reasons: if again.is_some() {
                    reasons(&self.violations)
                } else {
                    Vec::new()
                },
                steps: explain(&last.steps, vocab, true),
                head: String::new(),
                refused: None,
            }),
            (None, Some(_)) => {
                // Neither the statement nor its tokens leave the worker: only the audit
                // (grid.generations.final_sql, grid.audit_log) keeps them, for the auditor.
                let why = format!(
                    "the model's statement is not allowed for role {role:?} and was not returned \
                     (after one repair): {}",
                    refusal(&last.violations).unwrap_or_default()
                );
                if self.job.ask.explain {
                    Response::Generated(Generated {
                        generation: i64::try_from(last.generation).unwrap_or(i64::MAX),
                        sql: String::new(),
                        stop: last.stop.map_or("error", StopReason::name).to_string(),
                        repaired_from: again
                            .map(|_| i64::try_from(self.generation).unwrap_or(i64::MAX)),
                        repair_reasons: reasons(&self.violations),
                        steps: explain(&last.steps, vocab, false),
                        head: String::new(),
                        refused: Some(why),
                    })
                } else {
                    Response::error(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, why)
                }
            }
            (None, None) => Response::error(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "the generation produced no statement",
            ),
        };
        (seals, response)
    }
}

/// The seal of an ask that failed before its generation could begin (the endpoint or
/// the role's language could not be reached): no step, stop `error`, and artefacts that
/// say what was asked and why it went no further, so that every ask is in the log. Its
/// fingerprints address those artefacts: the dialect, the caller's snapshot and policy
/// as sent, and the failure in place of a vocabulary.
fn unreached(job: &Job, failure: &Failure, dialect: &Dialect) -> Option<SealToWrite> {
    if job.ask.settings.audit == "off" {
        return None;
    }
    let b16 = |parts: &[&[u8]]| -> [u8; 16] {
        let d = text_digest(
            &parts
                .iter()
                .map(|p| to_hex(p))
                .collect::<Vec<_>>()
                .join(":"),
        );
        let mut fp = [0u8; 16];
        fp.copy_from_slice(&d[..16]);
        fp
    };
    let grammar = serde_json::json!({
        "dialect": "postgres",
        "dialect_fingerprint": to_hex(&dialect.fingerprint),
        "grid_pg": env!("CARGO_PKG_VERSION"),
    });
    let lexicons = serde_json::json!({
        "snapshot": job.ask.snapshot,
        "base_policy": job.ask.policy,
    });
    let policy = job.ask.policy.clone().unwrap_or(serde_json::Value::Null);
    let unavailable = serde_json::json!({
        "unavailable": job.ask.settings.endpoint,
        "sqlstate": super::protocol::sqlstate_text(failure.sqlstate),
        "reason": failure.message,
    });
    let artefact = |kind: &'static str, doc: serde_json::Value| Artefact {
        kind,
        fingerprint: b16(&[
            b"grid_pg/unreached/v1",
            kind.as_bytes(),
            doc.to_string().as_bytes(),
        ]),
        content: None,
        content_json: Some(doc),
    };
    let artefacts = vec![
        artefact("grammar", grammar),
        artefact("lexicons", lexicons),
        artefact("policy", policy),
        artefact("vocabulary", unavailable),
    ];
    let fingerprints = Fingerprints {
        grammar: artefacts[0].fingerprint,
        lexicons: artefacts[1].fingerprint,
        policy: artefacts[2].fingerprint,
        vocabulary: artefacts[3].fingerprint,
    };
    let mut writer = ChainWriter::new(Vec::<Entry>::new());
    let id = job.ids[0];
    writer.begin(id).ok()?;
    writer
        .seal(
            id,
            SealInput {
                stop: StopReason::Error,
                fingerprints,
                mode: Mode {
                    decode: DecodeMode::Mode1,
                    cache: false,
                },
                meta: SealMeta {
                    role: Some(crate::audit::sealed_role(
                        &job.ask.session_user,
                        &job.ask.current_user,
                    )),
                    question_digest: Some(text_digest(&job.ask.question)),
                    sql_digest: None,
                },
            },
        )
        .ok()?;
    let seal = writer.into_sink().into_iter().find_map(|e| match e {
        Entry::Seal(s) => Some(s),
        Entry::Step(_) => None,
    })?;
    Some(SealToWrite {
        seal,
        question: job.ask.question.clone(),
        current_user: job.ask.current_user.clone(),
        final_sql: None,
        refused: None,
        repair_of: None,
        artefacts,
        started_at: job.started_at,
    })
}

/// The checker's violations as messages name them.
fn reasons(violations: &[Violation]) -> Vec<String> {
    violations.iter().map(ToString::to_string).collect()
}

/// The checker's violations as `grid.generations.refused` records them (and
/// `grid.replay()` recomputes them): `None` when there are none.
pub fn refusal(violations: &[Violation]) -> Option<String> {
    (!violations.is_empty()).then(|| reasons(violations).join("; "))
}

/// The artefacts a replay of a generation needs, content-addressed by the seal's
/// fingerprints.
fn artefacts(c: &Compiled, vocab: &VocabState) -> Vec<Artefact> {
    let f = &c.fingerprints;
    vec![
        Artefact {
            kind: "grammar",
            fingerprint: f.grammar,
            content: None,
            content_json: Some(serde_json::json!({
                "dialect": "postgres",
                "dialect_fingerprint": to_hex(&c.language.dialect.fingerprint),
                "policy": serde_json::from_str::<serde_json::Value>(&c.language.policy.canonical_json()).unwrap_or_default(),
                "grid_pg": env!("CARGO_PKG_VERSION"),
            })),
        },
        Artefact {
            kind: "lexicons",
            fingerprint: f.lexicons,
            content: None,
            content_json: Some(serde_json::json!({
                "snapshot": serde_json::to_value(&c.snapshot).unwrap_or_default(),
                "base_policy": serde_json::from_str::<serde_json::Value>(&c.base.canonical_json()).unwrap_or_default(),
            })),
        },
        Artefact {
            kind: "policy",
            fingerprint: f.policy,
            content: None,
            content_json: serde_json::from_str(&c.language.policy.canonical_json()).ok(),
        },
        Artefact {
            kind: "vocabulary",
            fingerprint: f.vocabulary,
            content: Some(vocab.vocab.to_served_json().into_bytes()),
            content_json: None,
        },
    ]
}

/// The steps of a generation as `grid.explain()` shows them; without their tokens
/// (`None`) for a statement that is not returned.
fn explain(steps: &[StepRecord], vocab: &VocabState, with_tokens: bool) -> Vec<ExplainStep> {
    let n = u32::try_from(vocab.vocab.len()).unwrap_or(u32::MAX);
    steps
        .iter()
        .map(|r| ExplainStep {
            step: r.step,
            token: match r.token {
                Token::Id(id) if with_tokens => {
                    Some(String::from_utf8_lossy(vocab.vocab.token_bytes(id)).into_owned())
                }
                Token::Id(_) | Token::Eos => None,
            },
            allowed: n.saturating_sub(r.blocked_count),
            blocked: r.blocked_count,
            kind: match r.kind {
                StepKind::Sampled => "sampled",
                StepKind::Forced => "forced",
                StepKind::Eos => "eos",
                StepKind::BudgetCompleted => "budget_completed",
            }
            .to_string(),
        })
        .collect()
}

/// The engine's thread: takes jobs, and serves each group (jobs that share an endpoint
/// and its settings) in one decode loop, which admits the group's later jobs while it
/// runs; a panic fails the jobs of the loop not answered yet (with an error each) and
/// the engine starts afresh.
pub fn run_engine(jobs: std::sync::mpsc::Receiver<Job>, outbox: Arc<dyn Outbox + Send + Sync>) {
    // Built before the first ask (the dialect's tables take a moment), not during it.
    let mut engine: Option<Engine> = Engine::new().ok();
    let mut inbox = Inbox::new(jobs);
    while let Some(group) = inbox.next_group() {
        // Outside the unwind boundary: what a panic leaves unanswered is answered here.
        let in_loop = InLoop::default();
        for job in &group {
            in_loop.enter(job.clone());
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let e = match engine.as_mut() {
                Some(e) => e,
                None => match Engine::new() {
                    Ok(e) => engine.insert(e),
                    Err(f) => {
                        for job in &group {
                            answer(
                                outbox.as_ref(),
                                &in_loop,
                                job,
                                Vec::new(),
                                error_response(&f),
                            );
                        }
                        return;
                    }
                },
            };
            e.serve(group, &mut inbox, &in_loop, outbox.as_ref());
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
            finish_with(
                outbox.as_ref(),
                &job,
                Vec::new(),
                Response::error(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("the generation failed inside the worker ({why}); the worker goes on"),
                ),
            );
        }
    }
}
