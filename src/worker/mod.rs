//! The mask worker: a background worker that owns what is shared across sessions (the
//! ask pipeline of `grid_ask` on a thread of its own, with its languages, tries, mask
//! cache and endpoint clients) and writes the audit store, and the backends' way to
//! reach it.
//!
//! - `protocol`: frames and messages on the socket.
//! - `sqlstate`: the pipeline's failures as SQLSTATEs.
//! - `priority`: socket threads that read a large request run at a lower CPU priority.
//! - `server`: the worker process (socket threads, the pipeline's thread, the main
//!   thread that alone touches PostgreSQL).
//! - `transaction`: the worker's own transactions (the audit writes).
//! - `client`: a backend's interruptible request.
//! - `warmup`: the worker that, once after a start, has the endpoints' vocabularies
//!   prepared before the first ask.
//!
//! The socket is `grid_pg.sock` in the data directory (the working directory of every
//! PostgreSQL process, and reachable by the server's OS user only).

mod client;
mod priority;
pub mod protocol;
mod server;
mod sqlstate;
mod transaction;
pub(crate) mod warmup;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;

use crate::error::raise;
use client::{call, ClientError};
use protocol::{sqlstate_code, Request, Response};

/// The worker's socket, relative to the data directory.
pub const SOCKET_NAME: &str = "grid_pg.sock";

/// Whether the postmaster loaded the library from `shared_preload_libraries` (and so
/// registered the worker). Set in the postmaster; backends inherit it when forked.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Sends `request` and returns the worker's answer; raises the ERROR of any failure
/// (the worker's own SQLSTATE for a request it refused), prefixed by `what`.
pub fn request(what: &str, request: &Request, timeout: Duration) -> Response {
    request_judged(what, request, timeout, None)
}

/// [`request`], judging with `judge` each statement the worker sends to be judged (an
/// ask's: see [`protocol`]).
pub fn request_judged(
    what: &str,
    request: &Request,
    timeout: Duration,
    judge: Option<client::JudgeFn<'_>>,
) -> Response {
    let outcome = if PRELOADED.load(Ordering::Relaxed) {
        call(what, request, timeout, judge)
    } else {
        Err(ClientError::NotPreloaded)
    };
    match outcome {
        Ok(Response::Error { sqlstate, message }) => {
            raise(sqlstate_code(&sqlstate), format!("{what}: {message}"))
        }
        Ok(response) => response,
        Err(e) => raise(e.sqlstate(), format!("{what}: {e}")),
    }
}

/// Raises the ERROR of an answer that does not fit the request.
pub fn unexpected(what: &str, response: &Response) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
        format!("{what}: unexpected answer from the grid_pg worker: {response:?}"),
    )
}

/// Raises an ERROR unless the worker runs and this session is connected to the database
/// of the audit store (`grid.database`), the only one the worker writes.
pub fn require_store_database(what: &str) {
    // Without the worker, grid.database is not even defined: say what is missing.
    if !PRELOADED.load(Ordering::Relaxed) {
        let e = ClientError::NotPreloaded;
        raise(e.sqlstate(), format!("{what}: {e}"));
    }
    let here = Spi::get_one::<String>("SELECT pg_catalog.current_database()::text")
        .ok()
        .flatten()
        .unwrap_or_default();
    let store = crate::guc::database();
    if here != store {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "{what}: the audit store is in database \"{store}\" (grid.database), this session is connected to \"{here}\""
            )
        );
    }
}

/// Registers the worker with the postmaster. Only possible while the postmaster loads
/// `shared_preload_libraries`; the caller checks that.
pub fn register() {
    PRELOADED.store(true, Ordering::Relaxed);
    BackgroundWorkerBuilder::new("grid_pg mask worker")
        .set_type("grid_pg mask worker")
        .set_library("grid_pg")
        .set_function("grid_worker_main")
        // Shared memory and a database connection (for the audit writes).
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
    BackgroundWorkerBuilder::new("grid_pg warm-up")
        .set_type("grid_pg warm-up")
        .set_library("grid_pg")
        .set_function("grid_warmup_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        // Once: an endpoint it could not have prepared is fetched by its first ask.
        .set_restart_time(None)
        .load();
}

/// The worker functions of the SQL API.
#[pg_schema]
mod grid {
    use std::sync::atomic::{AtomicU64, Ordering};

    use pgrx::prelude::*;

    use super::protocol::{Request, Response, MAX_PING_DELAY_MS};

    static NONCE: AtomicU64 = AtomicU64::new(1);

    /// `grid.worker_ping(delay_ms)`: a round trip to the mask worker; returns the worker's
    /// answer as jsonb (`{"type": "pong", "nonce": …, "worker_pid": …}`). `delay_ms` asks
    /// the worker to answer late, to see that the wait can be cancelled.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn worker_ping(delay_ms: default!(i32, 0)) -> pgrx::JsonB {
        let Ok(delay_ms) = u32::try_from(delay_ms) else {
            error!("grid.worker_ping: delay_ms must be between 0 and {MAX_PING_DELAY_MS}")
        };
        if delay_ms > MAX_PING_DELAY_MS {
            error!("grid.worker_ping: delay_ms must be between 0 and {MAX_PING_DELAY_MS}");
        }
        let nonce = NONCE.fetch_add(1, Ordering::Relaxed);
        const WHAT: &str = "grid.worker_ping";
        let request = Request::Ping { nonce, delay_ms };
        match super::request(WHAT, &request, crate::guc::timeout()) {
            r @ Response::Pong { nonce: n, .. } if n == nonce => match serde_json::to_value(r) {
                Ok(v) => pgrx::JsonB(v),
                Err(e) => error!("{WHAT}: {e}"),
            },
            other => super::unexpected(WHAT, &other),
        }
    }

    /// `grid.audit_append_synthetic(...)`: has the mask worker append a generation of the
    /// given sampled tokens through grid-core's chain writer, sealed with `stop` (left
    /// unsealed when `stop` is NULL), in a transaction of the worker's own that is
    /// committed when this returns: a ROLLBACK of the caller keeps it. For tests of the
    /// audit store; superusers only.
    #[pg_extern(security_invoker, volatile)]
    #[search_path(pg_catalog, pg_temp)]
    fn audit_append_synthetic(
        question: Option<String>,
        final_sql: Option<String>,
        tokens: Vec<Option<i32>>,
        stop: default!(Option<&str>, "'eos'"),
    ) -> i64 {
        const WHAT: &str = "grid.audit_append_synthetic";
        super::require_store_database(WHAT);
        let timeout = crate::guc::timeout();
        // Half the caller's wait: a lock the worker cannot get is reported as such,
        // before the caller stops waiting.
        let lock_timeout_ms = u32::try_from(timeout.as_millis() / 2).unwrap_or(u32::MAX);
        let request = match crate::audit::synthetic_request(
            question,
            final_sql,
            &tokens,
            stop,
            lock_timeout_ms,
        ) {
            Ok(r) => r,
            Err(e) => super::raise(e.sqlstate(), e.to_string()),
        };
        match super::request(WHAT, &Request::AppendSynthetic(request), timeout) {
            Response::Appended { generation, .. } => generation,
            other => super::unexpected(WHAT, &other),
        }
    }
}
