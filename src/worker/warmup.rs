//! The warm-up worker: a background worker that runs once after the cluster starts,
//! reads which endpoints `grid.endpoint` names (the server's configuration, and every
//! `ALTER DATABASE … SET` and `ALTER ROLE … SET` of it), and asks the mask worker to
//! fetch and prepare their vocabularies before the first ask needs them.
//!
//! Why a worker of its own: reading `pg_db_role_setting` takes a database connection, and
//! the mask worker connects only when a request needs it (its database may not exist yet
//! when the postmaster starts it, and a worker that connects to a missing database ends).
//! This one may end so: it is never restarted, and the first ask then fetches its
//! endpoint's vocabulary itself, as it did before.

use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::prelude::*;

use super::client::call;
use super::protocol::{Request, Response};

/// How long the warm-up waits for the mask worker's socket after the start.
const SOCKET_WAIT: Duration = Duration::from_secs(30);

/// Every `grid.endpoint` value the cluster's settings name, for any database or role, in
/// the order the mask worker warms them (it takes the first few, `WARMED_MAX`): the
/// server's own value, then each database's, then the roles' settings, those that more
/// roles share first. `grid.endpoint` is `SUSET`, so only a superuser, or a role granted
/// `SET` on it, writes these settings; the order still keeps a setting that names one
/// role's endpoint from crowding out the server's and the databases'.
pub(crate) const ENDPOINTS: &str = "
    SELECT COALESCE(pg_catalog.array_agg(e ORDER BY source, shared DESC, e), '{}')
      FROM (SELECT e, pg_catalog.min(source) AS source, pg_catalog.count(*) AS shared
              FROM (SELECT pg_catalog.current_setting('grid.endpoint', true) AS e, 0 AS source
                    UNION ALL
                    SELECT pg_catalog.substr(c, 15),
                           CASE WHEN s.setrole = 0 THEN 1 ELSE 2 END
                      FROM pg_catalog.pg_db_role_setting s,
                           pg_catalog.unnest(s.setconfig) AS c
                     WHERE c LIKE 'grid.endpoint=%') AS named
             WHERE e <> ''
             GROUP BY e) AS ranked";

/// Entry point of the warm-up worker (named in its registration).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn grid_warmup_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGTERM);
    let database = crate::guc::database();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    let endpoints: Vec<String> = BackgroundWorker::transaction(|| {
        Spi::get_one::<Vec<String>>(ENDPOINTS)
            .ok()
            .flatten()
            .unwrap_or_default()
    });
    if endpoints.is_empty() {
        return;
    }
    let request = Request::Warm { endpoints };
    let started = Instant::now();
    loop {
        match call("grid_pg warm-up", &request, SOCKET_WAIT, None) {
            Ok(Response::Warming { queued }) => {
                log!("grid_pg warm-up: {queued} endpoint(s) handed to the mask worker");
                return;
            }
            Ok(other) => {
                log!("grid_pg warm-up: unexpected answer from the mask worker: {other:?}");
                return;
            }
            // The mask worker starts beside this one: its socket may not be there yet.
            Err(_) if started.elapsed() < SOCKET_WAIT && !BackgroundWorker::sigterm_received() => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => {
                log!("grid_pg warm-up: the mask worker could not be reached ({e}); the first ask of each endpoint fetches its vocabulary");
                return;
            }
        }
    }
}
