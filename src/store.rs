//! The extension's stores that askers may not read (`grid.examples`, `grid.descriptions`),
//! read and written as their owner from inside a grid function: the function decides, as
//! the caller, what the caller may be shown or may change, and only then touches the
//! store, in a restricted security context. No SQL-callable function reads or writes a
//! store with more rights than its caller; the check and the access are one C call.

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

/// The owner of the store `table` (a schema-qualified name), if it exists.
pub(crate) fn owner_of(table: &str) -> Result<Option<pg_sys::Oid>, pgrx::spi::Error> {
    Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT c.relowner FROM pg_catalog.pg_class c
          WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
        &[table.into()],
    )
}

/// Runs `body` as `role`, in a restricted security context (as PostgreSQL runs
/// maintenance as a table's owner), and returns to the caller's identity after it. An
/// ERROR inside unwinds to the enclosing (sub)transaction, whose abort restores the
/// caller's identity.
pub(crate) fn as_role<T>(role: pg_sys::Oid, body: impl FnOnce() -> T) -> T {
    let mut caller = pg_sys::Oid::INVALID;
    let mut context: std::ffi::c_int = 0;
    // SAFETY: a backend's main thread inside a transaction.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut caller, &mut context);
        let restricted = (pg_sys::SECURITY_LOCAL_USERID_CHANGE
            | pg_sys::SECURITY_RESTRICTED_OPERATION) as std::ffi::c_int;
        pg_sys::SetUserIdAndSecContext(role, context | restricted);
    }
    let out = body();
    // SAFETY: as above; the identity saved before.
    unsafe { pg_sys::SetUserIdAndSecContext(caller, context) };
    out
}

/// Reads the store `table` as its owner with `body`, in a subtransaction rolled back
/// afterwards under the pinned search path, bounded by the caller's `statement_timeout`
/// or else `timeout_ms`. A cancel is raised; any other failure is returned as its
/// message (the caller goes on without what it would have read).
pub(crate) fn read_as_owner<T>(
    table: &str,
    timeout_ms: i32,
    body: impl FnOnce() -> Result<T, pgrx::spi::Error>,
) -> Result<T, String> {
    let owner = owner_of(table)
        .map_err(|e| format!("finding {table}: {e}"))?
        .ok_or_else(|| format!("{table} does not exist"))?;
    let read = crate::subtransaction::in_rolled_back_subtransaction(
        "pg_catalog, pg_temp",
        timeout_ms,
        || as_role(owner, body),
    );
    match read {
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => match *e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r)
                if r.sql_error_code() != PgSqlErrorCode::ERRCODE_QUERY_CANCELED =>
            {
                Err(r.message().to_string())
            }
            e => e.rethrow(),
        },
    }
}
