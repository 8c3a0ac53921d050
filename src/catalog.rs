//! `grid.catalog_snapshot()`: what the calling role may use, read from pg_catalog as the
//! caller, in the format `grid_core::catalog::CatalogSnapshot` reads. It is one plain SQL
//! query (sql/catalog_snapshot.sql): the privilege checks are PostgreSQL's own
//! `has_*_privilege` functions, and nothing here runs with more rights than the caller.

use pgrx::prelude::*;

/// The query of `grid.catalog_snapshot(search_path)`, the path as `$1` (`text[]`): the
/// function runs it, and `grid.ask()` runs the very same query as the caller, so that a
/// DBA may grant `grid.ask(text)` alone. Run it under the pinned `search_path`, as the
/// function does.
pub const SNAPSHOT_QUERY: &str = include_str!("../sql/catalog_snapshot.sql");

#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.catalog_snapshot(search_path)`: the caller's snapshot under `search_path`
    /// (default: the caller's own, `current_schemas(false)`, evaluated before the pinned
    /// path applies). SECURITY INVOKER: every privilege check answers for the caller.
    #[pg_extern(security_invoker, stable)]
    #[search_path(pg_catalog, pg_temp)]
    fn catalog_snapshot(
        search_path: default!(
            Option<Vec<Option<String>>>,
            "pg_catalog.current_schemas(false)::pg_catalog.text[]"
        ),
    ) -> Option<pgrx::JsonB> {
        match super::read_snapshot(search_path) {
            Ok(read) => read.snapshot.map(pgrx::JsonB),
            Err(e) => error!("grid.catalog_snapshot: {e}"),
        }
    }
}

/// What [`SNAPSHOT_QUERY`] reads as the caller: the snapshot, and what the trust rule
/// left out of it (`[count, up to four owners]`, for the asker's NOTICE).
pub struct Read {
    pub snapshot: Option<serde_json::Value>,
    pub left_out: Option<serde_json::Value>,
}

/// The sort memory the query is given at least: a wide catalog's columns, sorted to be
/// grouped by relation, spilled to disk under the default 4 MB.
const SNAPSHOT_WORK_MEM: &str = "64MB";

/// Runs [`SNAPSHOT_QUERY`] as the caller, for the search path `search_path`, with JIT off:
/// on a large catalog the planner's cost estimate passes `jit_above_cost`, and compiling
/// the query's expressions took 0.1 s of every ask at a thousand tables, more than it
/// saves on a query that reads each catalog row once. `work_mem` is raised to
/// [`SNAPSHOT_WORK_MEM`] when it is lower. The caller's settings are put back.
///
/// The query builds `json`, not `jsonb`: the document is read once, here, into a
/// `serde_json::Value` (whose objects are keyed maps, as `jsonb`'s are), and building a
/// `jsonb` tree only to print it again was a third of the query's time at 45,000 columns.
pub fn read_snapshot(
    search_path: Option<Vec<Option<String>>>,
) -> Result<Read, pgrx::spi::SpiError> {
    // One statement to read both settings, one to set them: every ask runs these.
    let (jit, work_mem) = Spi::get_two::<String, String>(
        "SELECT pg_catalog.current_setting('jit'), pg_catalog.current_setting('work_mem')",
    )?;
    Spi::run_with_args(
        "SELECT pg_catalog.set_config('jit', 'off', true), \
                CASE WHEN pg_catalog.pg_size_bytes(pg_catalog.current_setting('work_mem')) \
                          OPERATOR(pg_catalog.<) pg_catalog.pg_size_bytes($1) \
                     THEN pg_catalog.set_config('work_mem', $1, true) END",
        &[SNAPSHOT_WORK_MEM.into()],
    )?;
    let read =
        Spi::get_two_with_args::<pgrx::Json, pgrx::Json>(SNAPSHOT_QUERY, &[search_path.into()]);
    Spi::run_with_args(
        "SELECT pg_catalog.set_config('jit', $1, true), pg_catalog.set_config('work_mem', $2, true)",
        &[
            jit.unwrap_or_else(|| "on".into()).into(),
            work_mem.unwrap_or_else(|| "4MB".into()).into(),
        ],
    )?;
    let (snapshot, left_out) = read?;
    Ok(Read {
        snapshot: snapshot.map(|j| j.0),
        left_out: left_out.map(|j| j.0),
    })
}

extension_sql!(
    "COMMENT ON FUNCTION grid.catalog_snapshot(text[]) IS \
     'The relations, columns, keys and comments the calling role may use, per verb (format 1).';",
    name = "catalog_snapshot_comment",
    requires = [grid::catalog_snapshot]
);
