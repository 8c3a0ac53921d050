//! The mask worker's process: a background worker started by the postmaster (with
//! `grid_pg` in `shared_preload_libraries`) that serves backends over a unix socket.
//!
//! Threads: the main thread is the only one that touches PostgreSQL (latch, signals, SPI
//! and the audit writes, one request at a time: that is what keeps one chain head);
//! socket threads only move frames. A socket thread hands
//! each request to the main thread through a channel, then writes a byte to a wake-up
//! socket pair on which the main thread waits together with its latch (PostgreSQL's latch
//! functions are not for foreign threads), and waits for the answer. pgrx's thread check turns any PostgreSQL call from another thread into a
//! panic.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use grid_ask::{
    Ask, Candidate, Finished, Input, Judge, MockDefaults, Outbox, Output, Ruling, SealToWrite,
    Verdict,
};

use super::priority::SocketPriority;
use super::protocol::{
    encode, read_blocking, read_blocking_seeing, Admits, FeedbackNote, FrameReader, Request,
    Response, RunRecord, Stage, SyntheticGeneration, MAX_PING_DELAY_MS, WARMED_MAX,
};
use super::transaction::{committed, Failure};
use super::SOCKET_NAME;

/// Longest fetch of a warmed endpoint's vocabulary.
const WARM_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest sleep of the main thread when nothing wakes it.
const IDLE_MS: std::ffi::c_long = 1000;

/// Longest wait for the next bytes of a request: a client that connects and stays silent
/// (or stops in the middle of a frame) does not hold a socket thread for ever.
const IDLE_CONNECTION: Duration = Duration::from_secs(60);

/// A request on its way to the main thread, with where to send the answer.
struct Job {
    request: Request,
    reply: mpsc::Sender<Response>,
    /// Set by the socket thread when the backend goes away before the answer.
    cancel: Arc<AtomicBool>,
    /// When the socket thread read the request: an ask's `grid.timeout` runs from here,
    /// its examples' vetting included.
    received: Instant,
    /// An ask's [`Ask::reuse_key`], computed on the socket thread (a digest of the whole
    /// snapshot: not work for the main thread, which every ask's audit waits on).
    reuse_key: Option<grid_core::audit::Digest32>,
}

/// What the main thread is given to do: a backend's request, the pipeline's output, a
/// statement the pipeline wants judged (sent to its asker), a verdict (sent to the
/// pipeline).
enum Work {
    Request(Box<Job>),
    Engine(Output),
    Judge(Candidate),
    Verdict { ask: u64, verdict: Verdict },
}

/// The other threads' way to the main thread: the work channel and the wake-up socket.
#[derive(Clone)]
struct ToMain {
    work: mpsc::Sender<Work>,
    wake: Arc<UnixStream>,
}

impl ToMain {
    fn send(&self, work: Work) -> bool {
        if self.work.send(work).is_err() {
            return false;
        }
        // Non-blocking: when the buffer is full the main thread is due to wake anyway.
        let _ = (&*self.wake).write(&[1]);
        true
    }
}

impl Outbox for ToMain {
    fn send(&self, output: Output) {
        ToMain::send(self, Work::Engine(output));
    }
}

/// The worker's judge: PostgreSQL as the caller, in the asking backend. Each candidate
/// goes to the main thread, which sends it to the ask's socket thread and so to its
/// backend ([`Response::Judge`]); the verdict comes back on that connection
/// ([`Request::Verdict`]) and reaches the pipeline as [`Input::Verdict`].
struct BackendJudge(ToMain);

impl Judge for BackendJudge {
    fn judge(&mut self, candidate: &Candidate) -> Ruling {
        if self.0.send(Work::Judge(candidate.clone())) {
            Ruling::Later
        } else {
            // The main thread is gone: so is every asker.
            Ruling::Now(Verdict::Unjudged)
        }
    }
}

/// Sends `candidate` to the backend and reads its verdict: `None` when the backend went
/// away or answered anything but a verdict on this candidate's ask.
fn judged(
    stream: &mut UnixStream,
    reader: &mut FrameReader,
    candidate: &Candidate,
) -> Option<Verdict> {
    let frame = encode(&Response::Judge(candidate.clone())).ok()?;
    stream.write_all(&frame).ok()?;
    match read_blocking::<Request>(stream, reader) {
        Ok(Some(Request::Verdict { ask, verdict })) if ask == candidate.ask => Some(verdict),
        _ => None,
    }
}

/// Vets the examples offered with `ask` into the ones its prompt shows
/// ([`grid_ask::examples`]), on this socket thread before the pipeline sees the ask. The
/// role's language is the one the pipeline compiles for the ask, kept for the process
/// ([`grid_ask::language::role_language`]): built here when the ask is the first to need
/// it, found there by the pipeline. Each candidate that language and the checker admit
/// is judged by the asking backend on this connection, as generation 0 of ask 0 (no
/// generation is drawn for it, and none is recorded). Examples the request carries
/// already are dropped: only vetted ones are shown. `None` when the backend went away.
fn vet_examples(stream: &mut UnixStream, reader: &mut FrameReader, ask: &mut Ask) -> Option<()> {
    ask.examples.clear();
    let Some(offered) = ask.offered.take() else {
        return Some(());
    };
    // Whatever stops the vetting leaves the ask without examples; the pipeline meets the
    // same failure (a snapshot or policy it cannot use) and says so.
    let Ok((parsed, language)) = grid_ask::language::for_ask(ask) else {
        return Some(());
    };
    let Ok((snapshot, _, _)) = parsed.parts() else {
        return Some(());
    };
    let mut gone = false;
    let shown = grid_ask::examples::vet(offered, &language, snapshot, &mut |e| {
        if gone {
            return false;
        }
        let candidate = Candidate {
            ask: 0,
            generation: 0,
            sql: e.sql.trim().to_string(),
            session_user: ask.session_user.clone(),
            current_user: ask.current_user.clone(),
            repairable: false,
        };
        match judged(stream, reader, &candidate) {
            Some(verdict) => verdict == Verdict::Pass,
            None => {
                gone = true;
                false
            }
        }
    });
    if gone {
        return None;
    }
    ask.examples = shown;
    Some(())
}

/// Whether the statement is in the role's language now, and the checker passes it: the
/// language the pipeline keeps for that snapshot and policy, built here if no ask has.
fn admits(a: &Admits) -> Response {
    match grid_ask::language::for_role(&a.snapshot, a.policy.as_ref(), &a.current_user) {
        Ok((snapshot, language)) => Response::Admitted {
            refusal: grid_ask::examples::refusal(&language, &snapshot, &a.sql),
        },
        Err(f) => Response::error(super::sqlstate::failure_sqlstate(&f.kind), f.message),
    }
}

/// How often a socket thread waiting for an answer checks that its backend is still there.
const HANGUP_POLL: Duration = Duration::from_millis(100);

/// Whether the backend closed its end (or broke the protocol by sending more while it
/// waits). Leaves the stream blocking.
fn hung_up(stream: &mut UnixStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut byte = [0u8; 1];
    let gone = match stream.read(&mut byte) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    gone || stream.set_nonblocking(false).is_err()
}

/// Serves one connection: request, answer, until the backend hangs up.
fn serve(mut stream: UnixStream, main: ToMain) {
    if stream.set_read_timeout(Some(IDLE_CONNECTION)).is_err() {
        return;
    }
    let mut reader = FrameReader::new();
    let mut priority = SocketPriority::default();
    loop {
        let read = read_blocking_seeing::<Request>(&mut stream, &mut reader, |len| {
            priority.saw_frame(len)
        });
        let response = match read {
            Ok(None) => return,
            Ok(Some(Request::Verdict { .. })) => Response::error(
                PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
                "a verdict is accepted only right after the worker asked for one",
            ),
            Ok(Some(mut request)) => {
                let received = Instant::now();
                let mut reuse_key = None;
                if let Request::Ask(ask) = &mut request {
                    grid_ask::language::prepare(ask);
                    if vet_examples(&mut stream, &mut reader, ask).is_none() {
                        return;
                    }
                    reuse_key = Some(ask.reuse_key());
                }
                // Served here: the language is this process's, and no PostgreSQL is needed.
                if let Request::Admits(a) = &request {
                    let response = admits(a);
                    let sent = encode(&response).and_then(|frame| Ok(stream.write_all(&frame)?));
                    if sent.is_err() || matches!(response, Response::Error { .. }) {
                        return;
                    }
                    continue;
                }
                let delay = match &request {
                    Request::Ping { delay_ms, .. } => (*delay_ms).min(MAX_PING_DELAY_MS),
                    Request::AppendSynthetic(_)
                    | Request::Ask(_)
                    | Request::Verdict { .. }
                    | Request::Admits(_)
                    | Request::RecordRun(_)
                    | Request::RecordFeedback(_)
                    | Request::Warm { .. } => 0,
                };
                let (reply, answer) = mpsc::channel();
                let cancel = Arc::new(AtomicBool::new(false));
                let job = Job {
                    request,
                    reply,
                    cancel: cancel.clone(),
                    received,
                    reuse_key,
                };
                if !main.send(Work::Request(Box::new(job))) {
                    return;
                }
                let response = loop {
                    match answer.recv_timeout(HANGUP_POLL) {
                        Ok(Response::Judge(c)) => match judged(&mut stream, &mut reader, &c) {
                            Some(verdict) => {
                                if !main.send(Work::Verdict {
                                    ask: c.ask,
                                    verdict,
                                }) {
                                    return;
                                }
                            }
                            None => {
                                // The ask, parked for the verdict, is answered as
                                // cancelled with its seals.
                                cancel.store(true, Ordering::Relaxed);
                                return;
                            }
                        },
                        Ok(Response::Progress { stage }) => {
                            let frame = encode(&Response::Progress { stage });
                            if frame.and_then(|f| Ok(stream.write_all(&f)?)).is_err() {
                                cancel.store(true, Ordering::Relaxed);
                                return;
                            }
                        }
                        Ok(r) => break r,
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if hung_up(&mut stream) {
                                // The generation stops at its next step; its audit rows
                                // are written all the same.
                                cancel.store(true, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                };
                // The delay is served here, never on the main thread.
                std::thread::sleep(Duration::from_millis(u64::from(delay)));
                response
            }
            // A frame that cannot be read ends the conversation: what follows it in the
            // stream cannot be trusted to start a frame.
            Err(e) => Response::error(e.sqlstate(), format!("bad request frame: {e}")),
        };
        let sent = encode(&response).and_then(|frame| Ok(stream.write_all(&frame)?));
        if sent.is_err() || matches!(response, Response::Error { .. }) {
            return;
        }
    }
}

/// Accepts connections, one socket thread each.
fn accept(listener: UnixListener, main: ToMain) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let main = main.clone();
        if std::thread::Builder::new()
            .name("grid-socket".into())
            .spawn(move || serve(stream, main))
            .is_err()
        {
            // Out of threads: the connection is dropped and the backend sees it closed.
            continue;
        }
    }
}

/// An ask in the pipeline, as the main thread keeps it.
struct Waiting {
    /// Where its progress and answer go.
    reply: mpsc::Sender<Response>,
    /// Its [`Ask::reuse_key`], which its seals are stored with.
    key: Option<grid_core::audit::Digest32>,
    /// Its generation ids: the first attempt's (the ask's id) and the repair's.
    ids: [u64; 2],
}

/// What the main thread keeps between requests.
struct Worker {
    /// Whether the process is connected to `grid.database` (done at the first request
    /// that needs it: the database may not exist yet when the postmaster starts the
    /// worker, and connecting to a missing one would end the process).
    connected: bool,
    /// The pipeline thread's inputs.
    pipeline: mpsc::Sender<Input>,
    /// The asks in the pipeline, by ask id.
    waiting: HashMap<u64, Waiting>,
    /// Generations some of whose step records could not be stored: their later records
    /// and their seal are not written (the log keeps a verifiable prefix, unsealed).
    broken: HashSet<u64>,
    /// Step records received and not yet stored.
    steps: Vec<grid_core::audit::StepRecord>,
}

impl Worker {
    /// The main thread's answer to a request, or `None` when the engine answers it later.
    fn answer(&mut self, job: &Job) -> Option<Response> {
        match &job.request {
            Request::Ping { nonce, .. } => Some(Response::Pong {
                nonce: *nonce,
                // SAFETY: MyProcPid is set once at process start; read on the main thread.
                worker_pid: unsafe { pg_sys::MyProcPid },
            }),
            Request::AppendSynthetic(g) => Some(self.append_synthetic(g)),
            Request::Ask(a) => self.ask(a, job),
            Request::RecordRun(r) => Some(self.record_run(r)),
            Request::RecordFeedback(n) => Some(self.record_feedback(n)),
            Request::Warm { endpoints } => Some(Response::Warming {
                queued: self.warm(endpoints),
            }),
            // The socket thread answers these itself.
            Request::Admits(_) => Some(Response::error(
                PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
                "a language check reached the worker's main thread",
            )),
            // The socket thread takes verdicts; one that got here answers nothing.
            Request::Verdict { .. } => Some(Response::error(
                PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
                "a verdict is accepted only right after the worker asked for one",
            )),
        }
    }

    /// Hands the pipeline the distinct endpoints of `endpoints` (at most [`WARMED_MAX`])
    /// to prepare while no ask waits; how many.
    fn warm(&self, endpoints: &[String]) -> u32 {
        let mut distinct: Vec<&str> = Vec::new();
        for e in endpoints.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if !distinct.contains(&e) && distinct.len() < WARMED_MAX {
                distinct.push(e);
            }
        }
        let mut queued = 0;
        for e in distinct {
            let warm = grid_ask::Warm {
                endpoint: e.to_string(),
                timeout: WARM_TIMEOUT,
                threads: crate::guc::worker_threads(),
            };
            if self.pipeline.send(Input::Warm(warm)).is_ok() {
                queued += 1;
            }
        }
        queued
    }

    fn connect(&mut self) {
        if !self.connected {
            let database = crate::guc::database();
            BackgroundWorker::connect_worker_to_spi(Some(&database), None);
            // The audit is written whatever the database's or the role's settings say:
            // a write that gave up would lose an ask's record. Set once for the session
            // (they would otherwise come from ALTER DATABASE/ROLE ... SET); a request may
            // still set a bound of its own for its transaction (audit_append_synthetic's
            // SET LOCAL). A session that holds a lock which conflicts with the writers'
            // (only the audit tables' owner or a superuser may take one; autovacuum
            // yields) makes the worker wait until it lets go.
            if let Err(f) = committed(|| {
                Spi::run(
                    "SELECT pg_catalog.set_config('lock_timeout', '0', false), \
                            pg_catalog.set_config('statement_timeout', '0', false)",
                )
                .map_err(|e| Failure::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, e.to_string()))
            }) {
                warning!(
                    "grid_pg worker: cannot clear the audit's timeouts: {}",
                    f.message
                );
            }
            self.connected = true;
            log!("grid_pg worker: connected to database {database:?} (grid.database)");
        }
    }

    fn append_synthetic(&mut self, g: &SyntheticGeneration) -> Response {
        self.connect();
        // The head is read from the store's last seal under the writers' lock each time:
        // a restarted worker resumes where the committed rows end.
        let written = committed(|| {
            crate::audit::write_synthetic(g).map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        });
        match written {
            Ok((generation, head)) => Response::Appended {
                generation,
                head: head.to_string(),
            },
            Err(f) => Response::error(f.sqlstate, f.message),
        }
    }

    /// Tells the asker of `generation` that it is at `first` (its first attempt) or
    /// `repair` (its repair).
    fn progress(&self, generation: u64, first: Stage, repair: Stage) {
        for w in self.waiting.values() {
            if let Some(i) = w.ids.iter().position(|&g| g == generation) {
                let stage = if i == 0 { first } else { repair };
                let _ = w.reply.send(Response::Progress { stage });
                return;
            }
        }
    }

    fn record_run(&mut self, r: &RunRecord) -> Response {
        self.connect();
        match committed(|| {
            crate::audit::record_run(
                r.generation,
                (&r.session_user, &r.current_user),
                &r.called_as,
            )
            .map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        }) {
            Ok(run) => Response::Recorded { run },
            Err(f) => Response::error(f.sqlstate, f.message),
        }
    }

    fn record_feedback(&mut self, n: &FeedbackNote) -> Response {
        self.connect();
        match committed(|| {
            crate::audit::record_feedback(n).map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        }) {
            Ok(feedback) => Response::Noted { feedback },
            Err(f) => Response::error(f.sqlstate, f.message),
        }
    }

    /// Draws the ask's generation ids and hands it to the pipeline.
    fn ask(&mut self, a: &Ask, job: &Job) -> Option<Response> {
        self.connect();
        let ids = committed(|| {
            crate::audit::draw_generation_ids()
                .map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        });
        let ids = match ids {
            Ok(ids) => ids,
            Err(f) => return Some(Response::error(f.sqlstate, f.message)),
        };
        // grid.timeout bounds the whole generation (a cancel may end it sooner).
        let wait = Duration::from_millis(a.settings.timeout_ms);
        let sent = self.pipeline.send(Input::Ask(Box::new(grid_ask::Job {
            ids,
            ask: a.clone(),
            // Read here and only here; never put in a message.
            api_key: crate::guc::api_key(),
            cancel: job.cancel.clone(),
            deadline: job.received + wait,
            threads: crate::guc::worker_threads(),
            mask_cache_bytes: crate::guc::mask_cache_bytes(),
            started_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            seed: grid_ask::SEED,
        })));
        match sent {
            Ok(()) => {
                // A backend that went away meanwhile dropped its receiver; nothing to do.
                let _ = job.reply.send(Response::Progress {
                    stage: Stage::Queued,
                });
                self.waiting.insert(
                    ids[0],
                    Waiting {
                        reply: job.reply.clone(),
                        key: job.reuse_key,
                        ids,
                    },
                );
                None
            }
            Err(_) => Some(Response::error(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                "the worker's ask pipeline is not running",
            )),
        }
    }

    /// Stores the step records received so far, in one transaction.
    fn store_steps(&mut self) {
        if self.steps.is_empty() {
            return;
        }
        let steps: Vec<_> = std::mem::take(&mut self.steps)
            .into_iter()
            .filter(|r| !self.broken.contains(&r.generation))
            .collect();
        let stored = committed(|| {
            crate::audit::store_steps(&steps).map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        });
        if let Err(f) = stored {
            warning!(
                "grid_pg worker: step records could not be stored: {}",
                f.message
            );
            self.broken.extend(steps.iter().map(|r| r.generation));
        }
    }

    /// Stores an ask's seals, then answers it.
    fn finish(
        &mut self,
        seals: Vec<SealToWrite>,
        session_user: &str,
        ask_key: Option<&grid_core::audit::Digest32>,
        response: Response,
    ) -> Response {
        self.store_steps();
        if seals.is_empty() {
            return response;
        }
        if let Some(s) = seals
            .iter()
            .find(|s| self.broken.contains(&s.seal.generation))
        {
            let g = s.seal.generation;
            for s in &seals {
                self.broken.remove(&s.seal.generation);
            }
            return Response::error(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!(
                    "generation {g}: its step records could not all be stored, so it is left unsealed and its SQL is not returned"
                ),
            );
        }
        let stored = committed(|| {
            crate::audit::store_seals(&seals, session_user, ask_key)
                .map_err(|e| Failure::new(e.sqlstate(), e.to_string()))
        });
        match (stored, response) {
            (Ok(head), Response::Generated(mut g)) => {
                g.head = head.to_string();
                Response::Generated(g)
            }
            (Ok(_), other) => other,
            (Err(f), _) => Response::error(
                f.sqlstate,
                format!(
                    "the audit record could not be stored, so the SQL is not returned: {}",
                    f.message
                ),
            ),
        }
    }

    fn work(&mut self, work: Work) {
        match work {
            Work::Request(job) => {
                self.store_steps();
                if let Some(r) = self.answer(&job) {
                    // A backend that went away meanwhile drops its receiver; nothing to do.
                    let _ = job.reply.send(r);
                }
            }
            Work::Judge(c) => {
                // No asker waits (it went away): its socket thread has set the ask's
                // cancel flag, and the pipeline answers the parked ask as cancelled.
                if let Some(w) = self.waiting.get(&c.ask) {
                    let _ = w.reply.send(Response::Judge(c));
                }
            }
            Work::Verdict { ask, verdict } => {
                // A pipeline that is gone answers nobody; nothing to do.
                let _ = self.pipeline.send(Input::Verdict { ask, verdict });
            }
            Work::Engine(Output::Steps(mut records)) => {
                self.connect();
                // A generation's first step: its prompt is evaluated, the model writes.
                for r in records.iter().filter(|r| r.step == 0) {
                    self.progress(r.generation, Stage::Decoding, Stage::RepairDecoding);
                }
                self.steps.append(&mut records);
            }
            Work::Engine(Output::Warmed {
                endpoint,
                outcome,
                took,
            }) => match outcome {
                Ok((model, tokens)) => log!(
                    "grid_pg worker: endpoint {endpoint:?} is ready: model {model:?}, \
                     {tokens} tokens, prepared in {} ms",
                    took.as_millis()
                ),
                Err(f) => log!(
                    "grid_pg worker: endpoint {endpoint:?} could not be prepared ({}); \
                     its first ask tries again",
                    f.message
                ),
            },
            Work::Engine(Output::Taken { ask }) => {
                self.progress(ask, Stage::Preparing, Stage::Preparing);
            }
            Work::Engine(Output::Started { generation, .. }) => {
                self.progress(generation, Stage::Prompt, Stage::RepairPrompt);
            }
            Work::Engine(Output::Finish(f)) => {
                self.connect();
                let Finished {
                    ask,
                    seals,
                    session_user,
                    answer,
                    ..
                } = *f;
                let waiting = self.waiting.remove(&ask);
                let key = waiting.as_ref().and_then(|w| w.key.as_ref());
                let r = self.finish(seals, &session_user, key, Response::of(answer));
                // A backend that went away meanwhile dropped its receiver; nothing to do.
                if let Some(w) = waiting {
                    let _ = w.reply.send(r);
                }
            }
        }
    }
}

/// Entry point of the background worker (named in its registration).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn grid_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);

    // The working directory is the data directory: a relative path keeps the socket's
    // address short whatever the data directory's length. A socket left by a previous
    // run of the worker is replaced.
    let _ = std::fs::remove_file(SOCKET_NAME);
    let listener = match UnixListener::bind(SOCKET_NAME) {
        Ok(l) => l,
        Err(e) => {
            error!("grid_pg worker: cannot listen on {SOCKET_NAME} in the data directory: {e}")
        }
    };
    let (mut woken, wake) = match UnixStream::pair().and_then(|(r, w)| {
        r.set_nonblocking(true)?;
        w.set_nonblocking(true)?;
        Ok((r, w))
    }) {
        Ok(pair) => pair,
        Err(e) => error!("grid_pg worker: cannot make the wake-up socket pair: {e}"),
    };
    let (work, requests) = mpsc::channel::<Work>();
    let main = ToMain {
        work,
        wake: Arc::new(wake),
    };
    let (pipeline, inputs) = mpsc::channel::<Input>();
    let outbox = main.clone();
    let mut judge = BackendJudge(main.clone());
    if let Err(e) = std::thread::Builder::new()
        .name("grid-engine".into())
        .spawn(move || grid_ask::engine::run(inputs, &outbox, &mut judge, MockDefaults::default()))
    {
        error!("grid_pg worker: cannot start the ask pipeline's thread: {e}");
    }
    if let Err(e) = std::thread::Builder::new()
        .name("grid-accept".into())
        .spawn(move || accept(listener, main))
    {
        error!("grid_pg worker: cannot start the socket thread: {e}");
    }
    log!("grid_pg worker: listening on {SOCKET_NAME} in the data directory");

    let events = pg_sys::WL_LATCH_SET
        | pg_sys::WL_SOCKET_READABLE
        | pg_sys::WL_TIMEOUT
        | pg_sys::WL_EXIT_ON_PM_DEATH;
    let mut drain = [0u8; 256];
    let mut worker = Worker {
        connected: false,
        pipeline,
        waiting: HashMap::new(),
        broken: HashSet::new(),
        steps: Vec::new(),
    };
    // The endpoint the server's configuration names (postgresql.conf, ALTER SYSTEM): no
    // connection needed. The warm-up worker adds those of ALTER DATABASE and ALTER ROLE.
    worker.warm(crate::guc::endpoint().as_slice());
    loop {
        // SAFETY: the worker's main thread and its own latch.
        unsafe {
            let rc = pg_sys::WaitLatchOrSocket(
                pg_sys::MyLatch,
                events as i32,
                woken.as_raw_fd(),
                IDLE_MS,
                pg_sys::PG_WAIT_EXTENSION,
            );
            if rc & pg_sys::WL_LATCH_SET as i32 != 0 {
                pg_sys::ResetLatch(pg_sys::MyLatch);
            }
        }
        check_for_interrupts!();
        if BackgroundWorker::sigterm_received() {
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: main thread, outside any transaction.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            // An endpoint already kept is not fetched again.
            worker.warm(crate::guc::endpoint().as_slice());
        }
        while matches!(woken.read(&mut drain), Ok(n) if n > 0) {}
        while let Ok(work) = requests.try_recv() {
            worker.work(work);
        }
        worker.store_steps();
    }
    let _ = std::fs::remove_file(SOCKET_NAME);
}
