//! The mask worker's process: a background worker started by the postmaster (with
//! `grid_pg` in `shared_preload_libraries`) that serves backends over a unix socket.
//!
//! Threads: the main thread is the only one that touches PostgreSQL (latch, signals, and
//! later SPI and the audit writes); socket threads only move frames. A socket thread hands
//! each request to the main thread through a channel and waits for the answer; the main
//! thread drains the channel every time its latch wakes or its short timeout expires.
//! pgrx's thread check turns any PostgreSQL call from another thread into a panic.

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::protocol::{encode, read_blocking, FrameReader, Request, Response, MAX_PING_DELAY_MS};
use super::SOCKET_NAME;

/// How long the main thread sleeps when nothing wakes it: the latency a request can wait
/// before the main thread sees it.
const POLL: Duration = Duration::from_millis(20);

/// A request on its way to the main thread, with where to send the answer.
struct Job {
    request: Request,
    reply: mpsc::Sender<Response>,
}

/// Serves one connection: request, answer, until the backend hangs up.
fn serve(mut stream: UnixStream, jobs: mpsc::Sender<Job>) {
    let mut reader = FrameReader::new();
    loop {
        let response = match read_blocking::<Request>(&mut stream, &mut reader) {
            Ok(None) => return,
            Ok(Some(request)) => {
                let delay = match &request {
                    Request::Ping { delay_ms, .. } => (*delay_ms).min(MAX_PING_DELAY_MS),
                };
                let (reply, answer) = mpsc::channel();
                if jobs.send(Job { request, reply }).is_err() {
                    return;
                }
                let Ok(response) = answer.recv() else { return };
                // The delay is served here, never on the main thread.
                std::thread::sleep(Duration::from_millis(u64::from(delay)));
                response
            }
            Err(e) => Response::Error {
                message: e.to_string(),
            },
        };
        let sent = encode(&response).and_then(|frame| Ok(stream.write_all(&frame)?));
        if sent.is_err() || matches!(response, Response::Error { .. }) {
            return;
        }
    }
}

/// Accepts connections, one socket thread each.
fn accept(listener: UnixListener, jobs: mpsc::Sender<Job>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let jobs = jobs.clone();
        if std::thread::Builder::new()
            .name("grid-socket".into())
            .spawn(move || serve(stream, jobs))
            .is_err()
        {
            // Out of threads: the connection is dropped and the backend sees it closed.
            continue;
        }
    }
}

/// The main thread's answer to a request.
fn answer(request: &Request) -> Response {
    match *request {
        Request::Ping { nonce, .. } => Response::Pong {
            nonce,
            // SAFETY: MyProcPid is set once at process start; read on the main thread.
            worker_pid: unsafe { pg_sys::MyProcPid },
        },
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
    let (jobs, requests) = mpsc::channel::<Job>();
    if let Err(e) = std::thread::Builder::new()
        .name("grid-accept".into())
        .spawn(move || accept(listener, jobs))
    {
        error!("grid_pg worker: cannot start the socket thread: {e}");
    }
    log!("grid_pg worker: listening on {SOCKET_NAME} in the data directory");

    while BackgroundWorker::wait_latch(Some(POLL)) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: main thread, outside any transaction.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        while let Ok(job) = requests.try_recv() {
            // A backend that went away meanwhile drops its receiver; nothing to do.
            let _ = job.reply.send(answer(&job.request));
        }
    }
    let _ = std::fs::remove_file(SOCKET_NAME);
}
