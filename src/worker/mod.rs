//! The mask worker: a background worker that will own what is shared across sessions
//! (grammar registry, tries, mask cache, endpoint client, decode loop), and the
//! backends' way to reach it.
//!
//! - `protocol`: frames and messages on the socket.
//! - `server`: the worker process.
//! - `client`: a backend's interruptible request.
//!
//! The socket is `grid_pg.sock` in the data directory (the working directory of every
//! PostgreSQL process, and reachable by the server's OS user only).

mod client;
mod protocol;
mod server;

use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;

/// The worker's socket, relative to the data directory.
pub const SOCKET_NAME: &str = "grid_pg.sock";

/// Registers the worker with the postmaster. Only possible while the postmaster loads
/// `shared_preload_libraries`; the caller checks that.
pub fn register() {
    BackgroundWorkerBuilder::new("grid_pg mask worker")
        .set_type("grid_pg mask worker")
        .set_library("grid_pg")
        .set_function("grid_worker_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

/// The worker functions of the SQL API.
#[pg_schema]
mod grid {
    use std::sync::atomic::{AtomicU64, Ordering};

    use pgrx::prelude::*;

    use super::client::call;
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
        match call(&Request::Ping { nonce, delay_ms }, crate::guc::timeout()) {
            Ok(r @ Response::Pong { nonce: n, .. }) if n == nonce => {
                match serde_json::to_value(r) {
                    Ok(v) => pgrx::JsonB(v),
                    Err(e) => error!("grid.worker_ping: {e}"),
                }
            }
            Ok(Response::Error { message }) => {
                error!("grid.worker_ping: the worker says: {message}")
            }
            Ok(other) => error!("grid.worker_ping: unexpected answer {other:?}"),
            Err(e) => error!("grid.worker_ping: {e}"),
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use std::time::Duration;

    use crate::testing::{install, refusal, run, select_one};
    use pgrx::prelude::*;

    /// Waits (up to about ten seconds) for the worker to listen.
    fn worker_ready() {
        for _ in 0..100 {
            if refusal("SELECT grid.worker_ping()").is_none() {
                return;
            }
            run("SELECT pg_sleep(0.1)");
        }
        panic!(
            "the worker never answered: {:?}",
            refusal("SELECT grid.worker_ping()")
        );
    }

    #[pg_test]
    fn a_ping_is_answered_by_the_background_worker() {
        install();
        worker_ready();
        let pong: Option<pgrx::JsonB> = select_one("SELECT grid.worker_ping()");
        let pong = pong.map(|j| j.0).unwrap_or_default();
        assert_eq!(pong["type"], "pong");
        // A worker without a database connection is not in pg_stat_activity; its process
        // title names it.
        let pid = pong["worker_pid"].as_i64().unwrap_or(0);
        let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let title = String::from_utf8_lossy(&title);
        assert!(
            title.contains("grid_pg mask worker"),
            "pid {pid}: {title:?}"
        );
        let backend: Option<i32> = select_one("SELECT pg_catalog.pg_backend_pid()");
        assert_ne!(Some(pid), backend.map(i64::from));
    }

    #[pg_test]
    fn grid_timeout_bounds_the_wait() {
        install();
        worker_ready();
        run("SET grid.timeout = '300ms'");
        let m = refusal("SELECT grid.worker_ping(30000)").unwrap_or_default();
        assert!(m.contains("did not answer within grid.timeout"), "{m}");
    }

    #[pg_test]
    fn a_cancel_request_stops_the_wait() {
        install();
        worker_ready();
        // What pg_cancel_backend does: SIGINT to the backend, here from a plain thread
        // while the backend waits for an answer the worker delays by 30 s (grid.timeout
        // is 30 s too: without the cancel the call would succeed).
        let pid = std::process::id().to_string();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::process::Command::new("sh")
                .args(["-c", &format!("kill -INT {pid}")])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        let m = refusal("SELECT grid.worker_ping(30000)").unwrap_or_default();
        assert!(killer.join().unwrap_or(false), "kill -INT failed");
        assert!(
            m.starts_with("57014: canceling statement due to user request"),
            "{m}"
        );
    }
}
