//! The pgrx tests (`#[pg_test]`), apart from the host code they test: one concept per
//! file, each run inside a throwaway PostgreSQL by `cargo pgrx test`. Compiled only for
//! tests (the crate root declares this module under `#[cfg(any(test, feature =
//! "pg_test"))]`).
//!
//! pgrx creates each `#[pg_test]` as SQL function `tests.<name>()` and calls it there, so
//! every test sits directly in a `#[pgrx::pg_schema] mod tests { ... }` (written inline:
//! the macro reads the module's body), one per file below. A test's libtest name is
//! therefore `tests::<file>::tests::pg_<name>`, the path the name filters of
//! `scripts/test.sh` (`PG18_TESTS`, `PG18_SKIP`) match.
//!
//! The SQL API and what an ask reads as the caller:
//! - `api`: schema `grid`, `grid.version()`, and every function's `search_path`,
//!   SECURITY INVOKER and EXECUTE privileges;
//! - `ask`: `grid.ask()`: grants, policy, catalog and search path at each ask, what it
//!   refuses before the worker is asked, and its errors;
//! - `run`: `grid.run()` and `grid.explain()`;
//! - `repair`: a refused statement's repair and rewind, the unconstrained ablation, and
//!   `grid.ask` against `grid generate`'s pipeline;
//! - `attacks`: prompt injection, another role's steering comment, adversarial asks;
//! - `decline`: the model's decline, its SQLSTATE and audit, and `grid.decline`;
//! - `catalog`: `grid.catalog_snapshot()`;
//! - `policy`: `grid.policy`;
//! - `examples`: curated examples and which of them an ask is shown;
//! - `feedback`: `grid.feedback()`, the curators' candidates and their promotion, and the
//!   feedback chain in `grid.verify_audit()`;
//! - `descriptions`: `grid.describe()` and which descriptions an ask is shown;
//! - `value_hints`: the values an ask is shown, and `grid.show_values()`;
//! - `provenance`: whose comments may reach a prompt;
//! - `guc`: the `grid.*` settings.
//!
//! Checking and running a statement as the caller:
//! - `judge`: PostgreSQL's plan as the caller, and `grid.judge` off;
//! - `resolution`: another role's objects, never bound, planned or run;
//! - `meaning`: one meaning for every statement, by PostgreSQL's own lexer.
//!
//! The worker and the audit:
//! - `worker`: the mask worker, its socket and the backend's wait;
//! - `endpoint_faults`: endpoint faults seen through `grid.ask()`, each with its SQLSTATE;
//! - `audit`: the audit store, and what each ask leaves in it.
//!
//! Helpers:
//! - `support`: statements that must succeed, values to read, refusals, the scripted mock;
//! - `employees`: the fixture of `ask`, `run`, `repair`, `attacks` and the ask tests of
//!   `audit`.

mod api;
mod ask;
mod attacks;
mod audit;
mod catalog;
mod decline;
mod descriptions;
mod employees;
mod endpoint_faults;
mod examples;
mod feedback;
mod guc;
mod judge;
mod meaning;
mod policy;
mod provenance;
mod repair;
mod resolution;
mod run;
mod support;
mod value_hints;
mod worker;
