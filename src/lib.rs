//! grid_pg: the PostgreSQL side of grid.
//!
//! This crate is deliberately thin: the engine (grammar pipeline, lexer,
//! viable-prefix parser, masks, audit chain) lives in `crates/grid-core`, and the ask
//! pipeline that runs it (language, prompt, decode loop, checker, repair, seals) in
//! `crates/grid-ask`; both build and test without PostgreSQL. Here we expose them as
//! SQL, run the pipeline in a background worker, judge statements as the caller and
//! store the audit. `docs/architecture.md` follows one `grid.ask` through all of it.
//!
//! Modules, one concept each.
//!
//! The SQL API and what an ask reads as the caller:
//! - `ask`: `grid.ask()`, `grid.run()` and `grid.explain()`, the backend's half of a
//!   generation: the question, the caller's snapshot, policy and settings sent to the
//!   worker, and `grid.run()`'s read-only run of the answer;
//! - `question`: what a question must be before anything reaches a prompt;
//! - `caller`: the caller's own `search_path`, read inside a function that pins its own;
//! - `catalog`: `grid.catalog_snapshot()` (one SQL query, sql/catalog_snapshot.sql), the
//!   query every ask runs as the caller;
//! - `policy`: per-role bans and write opt-in, `grid.policy` (sql/policy.sql);
//! - `examples`: curated question/SQL pairs, `grid.examples` (sql/examples.sql), and
//!   which of them an ask shows the model;
//! - `feedback`: `grid.feedback()`, an asker's word on its own generations, and the
//!   curators' queue of candidate examples (sql/feedback.sql);
//! - `descriptions`: notes on relations and columns written for the model,
//!   `grid.describe()` and `grid.descriptions` (sql/descriptions.sql), and which of them
//!   an ask shows; `grid.show_values()`, which opts a column in for value hints;
//! - `value_hints`: the few distinct values of opted-in text columns, read as the caller
//!   when `grid.value_hints` is on (sql/value_hint_columns.sql);
//! - `store`: the stores askers may not read, read and written as their owner;
//! - `provenance`: whose text may reach a prompt, `grid.trusted_author()` and
//!   `grid_curator` (sql/provenance.sql);
//! - `guc`: every `grid.*` configuration parameter.
//!
//! Checking and running a statement as the caller:
//! - `judge`: PostgreSQL plans each statement as the caller (`EXPLAIN`, rolled back)
//!   before it is returned or an example is shown;
//! - `resolution`: what a statement binds as the caller, and whether the caller trusts
//!   all of it, checked before anything plans or runs it;
//! - `subtransaction`: the rolled-back subtransaction, with pinned settings and a
//!   timeout, in which the judge plans, `grid.run()` runs and value hints are read.
//!
//! The worker and the audit:
//! - `worker`: the mask worker (a background worker that runs the ask pipeline and
//!   writes the audit), the warm-up worker, and the backends' socket client;
//! - `audit`: the append-only audit store, its verifier and `grid.replay()`
//!   (sql/audit.sql).
//!
//! Errors:
//! - `error`: `raise`, the one way the extension raises an ERROR of its own (an SQLSTATE
//!   and a message made ASCII).
//!
//! PostgreSQL versions:
//! - `pgversion`: what differs between PostgreSQL 15 and 18, each difference with its
//!   reason.
//!
//! Tests only (`#[cfg(any(test, feature = "pg_test"))]` on the module):
//! - `tests`: every pgrx test (`#[pg_test]`), one concept per file under `src/tests/`,
//!   with their helpers and fixtures; the modules above hold no pgrx test (a few keep
//!   plain `#[cfg(test)]` unit tests of their own private logic).
//!
//! Layout of the SQL API:
//! - every object lives in schema `grid`, created by `sql/bootstrap.sql`;
//! - each Rust module marked `#[pg_schema]` maps to the schema of the same name;
//! - every function pins `search_path` with `#[search_path(pg_catalog, pg_temp)]`
//!   (or `SET search_path` in SQL) and is SECURITY INVOKER (the
//!   `every_grid_function_pins_search_path` and
//!   `every_grid_function_is_invoker_and_not_executable_by_public` tests of `tests::api`
//!   check this);
//!   `grid.ask()`, `grid.explain()` and `grid.run()` read the caller's own path where
//!   they need it (`caller`);
//! - EXECUTE on every function is revoked from PUBLIC by `sql/privileges.sql`, the
//!   last SQL of the extension script: a DBA grants what each role may call.

use pgrx::prelude::*;

mod ask;
mod audit;
mod caller;
mod catalog;
mod descriptions;
mod error;
mod examples;
mod feedback;
mod guc;
mod judge;
mod pgversion;
mod policy;
mod provenance;
mod question;
mod resolution;
mod store;
mod subtransaction;
mod value_hints;
mod worker;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

// The first SQL of the extension script: creates schema `grid`.
extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);

// The last: EXECUTE privileges of every function created before it.
extension_sql_file!("../sql/privileges.sql", name = "privileges", finalize);

/// Runs once per process that loads the library (every backend that calls a grid
/// function, or the postmaster with `shared_preload_libraries`).
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    guc::register();
    // SAFETY: a flag the postmaster sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        guc::register_preloaded();
        worker::register();
        // The dialect's tables, built once here so that every backend and the worker
        // inherit them through fork rather than building them at their first ask; and
        // the dialect's projection for a reading role under the default policy (most
        // askers'), so that a role's first ask after a start builds its lexicon only.
        // A failure is left for the ask to report.
        if let Ok(dialect) = grid_core::Dialect::generated() {
            let _ = grid_ask::language::warm(&dialect);
        }
        PRELOADED_DIALECT_BUILDS.store(
            grid_core::Dialect::builds(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// The dialects the postmaster built at preload ([`grid_core::Dialect::builds`]), which
/// every backend inherits: a backend that builds none more still reads this many.
pub static PRELOADED_DIALECT_BUILDS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The SQL API in schema `grid`.
#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.version()`: the version of the installed extension library.
    #[pg_extern(security_invoker, stable, parallel_safe)]
    #[search_path(pg_catalog, pg_temp)]
    fn version() -> &'static str {
        env!("CARGO_PKG_VERSION")
    }
}

/// Required by `cargo pgrx test`; must be visible at the crate root.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {
        // one-off initialisation when the pg_test framework starts
    }

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // The mask worker starts only from shared_preload_libraries, and writes the
        // audit store of the tests' database.
        vec![
            "shared_preload_libraries = 'grid_pg'",
            "grid.database = 'pgrx_tests'",
        ]
    }
}
