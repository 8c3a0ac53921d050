//! The backend's side of the worker socket: one request, one response, waiting on the
//! socket and the backend's latch together, so that `statement_timeout`,
//! `pg_cancel_backend` and postmaster death end the wait at once (the interrupt is raised
//! by `CHECK_FOR_INTERRUPTS` as the usual ERROR), and `grid.timeout` bounds it.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use thiserror::Error;

use grid_ask::{Candidate, Verdict};

use super::protocol::{encode, FrameReader, ProtocolError, Request, Response};
use super::SOCKET_NAME;

/// Longest single wait between interrupt checks, whatever else wakes us.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Why a request got no response.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("the grid_pg worker is not running: grid_pg is not in shared_preload_libraries")]
    NotPreloaded,
    #[error("the grid_pg worker is not running (starting, restarting, or failed to start; see the server log): {0}")]
    NotRunning(std::io::Error),
    #[error("the grid_pg worker did not answer within grid.timeout ({0:?})")]
    Timeout(Duration),
    #[error("the grid_pg worker closed the connection")]
    Closed,
    #[error("grid_pg worker connection: {0}")]
    Protocol(#[from] ProtocolError),
    #[error("the grid_pg worker asked for a verdict on a request that is not an ask")]
    UnaskedJudge,
}

impl ClientError {
    /// The SQLSTATE the backend raises for this failure.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            ClientError::NotPreloaded | ClientError::NotRunning(_) => {
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            // As statement_timeout.
            ClientError::Timeout(_) => PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            ClientError::Closed => PgSqlErrorCode::ERRCODE_CONNECTION_FAILURE,
            ClientError::Protocol(e) => e.sqlstate(),
            ClientError::UnaskedJudge => PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Protocol(ProtocolError::Io(e))
    }
}

/// Waits until `fd` is ready for `event` (a `WL_SOCKET_*` flag), the latch is set, or
/// `timeout` passes; then serves pending interrupts (which may raise an ERROR).
fn wait(fd: i32, event: u32, timeout: Duration) {
    let ms = i64::try_from(timeout.min(MAX_WAIT).as_millis()).unwrap_or(1000);
    let events = pg_sys::WL_LATCH_SET | event | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: a backend's main thread; MyLatch is the backend's own latch.
    unsafe {
        let rc = pg_sys::WaitLatchOrSocket(
            pg_sys::MyLatch,
            events as i32,
            fd,
            ms as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        if rc & pg_sys::WL_LATCH_SET as i32 != 0 {
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
    }
    check_for_interrupts!();
}

/// Writes all of `frame`, waiting (interruptibly) while the socket is full.
fn send(
    stream: &mut UnixStream,
    frame: &[u8],
    timeout: Duration,
    remaining: &dyn Fn() -> Duration,
) -> Result<(), ClientError> {
    let fd = stream.as_raw_fd();
    let mut sent = 0;
    while sent < frame.len() {
        match stream.write(&frame[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if remaining().is_zero() {
                    return Err(ClientError::Timeout(timeout));
                }
                wait(fd, pg_sys::WL_SOCKET_WRITEABLE, remaining());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// How the backend judges a statement the worker sends it ([`Response::Judge`]).
pub type JudgeFn<'a> = &'a mut dyn FnMut(&Candidate) -> Verdict;

/// A wait longer than this is reported ([`Reporter`]).
const QUIET: Duration = Duration::from_secs(2);

/// How often a stage that lasts is reported again.
const REPEAT: Duration = Duration::from_secs(5);

/// Tells an asker who waits what its request waits for, at DEBUG1 (seen with
/// `SET client_min_messages = debug1`): once the wait passes [`QUIET`], at each change
/// of stage and every [`REPEAT`] while one lasts.
struct Reporter<'a> {
    what: &'a str,
    started: Instant,
    stage: &'static str,
    /// When the last report was made, and of which stage.
    said: Option<(Instant, &'static str)>,
}

impl Reporter<'_> {
    fn at(&mut self, stage: &'static str) {
        self.stage = stage;
        self.tick();
    }

    fn tick(&mut self) {
        let stage = self.stage;
        let waited = self.started.elapsed();
        if waited < QUIET {
            return;
        }
        let due = self
            .said
            .is_none_or(|(at, said)| said != stage || at.elapsed() >= REPEAT);
        if due {
            pgrx::debug1!(
                "{}: waiting {:.1} s: {}",
                self.what,
                waited.as_secs_f64(),
                stage
            );
            self.said = Some((Instant::now(), stage));
        }
    }
}

/// Sends `request` to the worker and returns its response, within `timeout`. A
/// statement the worker wants judged on the way is judged by `judge` (an ask's), its
/// verdict sent back on the connection; without `judge` that is a protocol error. What
/// the request waits for is reported at DEBUG1 once it has waited a few seconds
/// ([`Reporter`]); `what` names the SQL function in those reports.
pub fn call(
    what: &str,
    request: &Request,
    timeout: Duration,
    mut judge: Option<JudgeFn<'_>>,
) -> Result<Response, ClientError> {
    let mut reporter = Reporter {
        what,
        started: Instant::now(),
        stage: "waiting for the grid_pg worker",
        said: None,
    };
    let deadline = Instant::now() + timeout;
    let remaining = || deadline.saturating_duration_since(Instant::now());
    let mut stream = UnixStream::connect(SOCKET_NAME).map_err(ClientError::NotRunning)?;
    stream.set_nonblocking(true)?;
    let fd = stream.as_raw_fd();

    send(&mut stream, &encode(request)?, timeout, &remaining)?;

    let mut reader = FrameReader::new();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.next::<Response>()? {
            Some(Response::Progress { stage }) => {
                reporter.at(stage.says());
                continue;
            }
            Some(Response::Judge(candidate)) => {
                let Some(judge) = judge.as_mut() else {
                    return Err(ClientError::UnaskedJudge);
                };
                reporter.at("PostgreSQL plans a statement as the caller (the judge)");
                let verdict = judge(&candidate);
                reporter.at("the worker goes on after the judge's verdict");
                let frame = encode(&Request::Verdict {
                    ask: candidate.ask,
                    verdict,
                })?;
                send(&mut stream, &frame, timeout, &remaining)?;
                continue;
            }
            Some(response) => return Ok(response),
            None => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(ClientError::Closed),
            Ok(n) => reader.push(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if remaining().is_zero() {
                    return Err(ClientError::Timeout(timeout));
                }
                wait(fd, pg_sys::WL_SOCKET_READABLE, remaining());
                reporter.tick();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn every_failure_has_a_sqlstate_and_says_what_to_do() {
        use super::super::protocol::sqlstate_text;
        let refused = std::io::Error::from(ErrorKind::ConnectionRefused);
        let cases = [
            (
                ClientError::NotPreloaded,
                "55000",
                "shared_preload_libraries",
            ),
            (
                ClientError::NotRunning(refused),
                "55000",
                "see the server log",
            ),
            (
                ClientError::Timeout(Duration::from_millis(300)),
                "57014",
                "grid.timeout",
            ),
            (ClientError::Closed, "08006", "closed the connection"),
            (
                ClientError::Protocol(ProtocolError::TooLarge(1 << 30)),
                "54000",
                "exceeds the limit",
            ),
            (
                ClientError::Protocol(ProtocolError::Truncated),
                "08P01",
                "middle of a frame",
            ),
        ];
        for (e, state, words) in cases {
            assert_eq!(sqlstate_text(e.sqlstate()), state, "{e}");
            assert!(e.to_string().contains(words), "{e}");
        }
    }
}
