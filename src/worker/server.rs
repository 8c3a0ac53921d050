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

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::protocol::{
    encode, read_blocking, AskRequest, FrameReader, Request, Response, SyntheticGeneration,
    MAX_PING_DELAY_MS,
};
use super::transaction::{committed, Failure};
use super::SOCKET_NAME;

/// Longest sleep of the main thread when nothing wakes it.
const IDLE_MS: std::ffi::c_long = 1000;

/// Longest wait for the next bytes of a request: a client that connects and stays silent
/// (or stops in the middle of a frame) does not hold a socket thread for ever.
const IDLE_CONNECTION: Duration = Duration::from_secs(60);

/// A request on its way to the main thread, with where to send the answer.
struct Job {
    request: Request,
    reply: mpsc::Sender<Response>,
}

/// The socket threads' way to the main thread: the job channel and the wake-up socket.
#[derive(Clone)]
struct ToMain {
    jobs: mpsc::Sender<Job>,
    wake: Arc<UnixStream>,
}

impl ToMain {
    fn send(&self, job: Job) -> bool {
        if self.jobs.send(job).is_err() {
            return false;
        }
        // Non-blocking: when the buffer is full the main thread is due to wake anyway.
        let _ = (&*self.wake).write(&[1]);
        true
    }
}

/// Serves one connection: request, answer, until the backend hangs up.
fn serve(mut stream: UnixStream, main: ToMain) {
    if stream.set_read_timeout(Some(IDLE_CONNECTION)).is_err() {
        return;
    }
    let mut reader = FrameReader::new();
    loop {
        let response = match read_blocking::<Request>(&mut stream, &mut reader) {
            Ok(None) => return,
            Ok(Some(request)) => {
                let delay = match &request {
                    Request::Ping { delay_ms, .. } => (*delay_ms).min(MAX_PING_DELAY_MS),
                    Request::AppendSynthetic(_) | Request::Ask(_) => 0,
                };
                let (reply, answer) = mpsc::channel();
                if !main.send(Job { request, reply }) {
                    return;
                }
                let Ok(response) = answer.recv() else { return };
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

/// What the main thread keeps between requests.
struct Worker {
    /// Whether the process is connected to `grid.database` (done at the first request
    /// that needs it: the database may not exist yet when the postmaster starts the
    /// worker, and connecting to a missing one would end the process).
    connected: bool,
}

impl Worker {
    /// The main thread's answer to a request.
    fn answer(&mut self, request: &Request) -> Response {
        match request {
            Request::Ping { nonce, .. } => Response::Pong {
                nonce: *nonce,
                // SAFETY: MyProcPid is set once at process start; read on the main thread.
                worker_pid: unsafe { pg_sys::MyProcPid },
            },
            Request::AppendSynthetic(g) => self.append_synthetic(g),
            Request::Ask(a) => ask(a),
        }
    }

    fn connect(&mut self) {
        if !self.connected {
            let database = crate::guc::database();
            BackgroundWorker::connect_worker_to_spi(Some(&database), None);
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
}

/// The worker's half of `grid.ask()`: the decode loop is not plugged in yet. The answer
/// says what arrived, so that the request the backend builds can be checked.
fn ask(a: &AskRequest) -> Response {
    let relations = a.snapshot["relations"].as_array().map_or(0, Vec::len);
    // Read here and only here; never put the key itself in a message.
    let key = if crate::guc::api_key().is_some() {
        "configured"
    } else {
        "not configured"
    };
    Response::error(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!(
            "not yet available: the decode loop is not part of this version (the worker received a question of {} bytes from role {:?}, a catalog snapshot of {relations} relations under search_path {}, max_tokens {}; API key {key})",
            a.question.len(),
            a.current_user,
            a.snapshot["search_path"],
            a.settings.max_tokens,
        ),
    )
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
    let (jobs, requests) = mpsc::channel::<Job>();
    let main = ToMain {
        jobs,
        wake: Arc::new(wake),
    };
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
    let mut worker = Worker { connected: false };
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
        }
        while matches!(woken.read(&mut drain), Ok(n) if n > 0) {}
        while let Ok(job) = requests.try_recv() {
            // A backend that went away meanwhile drops its receiver; nothing to do.
            let _ = job.reply.send(worker.answer(&job.request));
        }
    }
    let _ = std::fs::remove_file(SOCKET_NAME);
}
