//! A generated statement's sandbox in the caller's backend: a subtransaction rolled back
//! afterwards, under the caller's `search_path` and pinned settings, bounded by a timeout.
//! What `grid.run()` runs its statement in ([`crate::ask`]), the judge its EXPLAIN
//! ([`crate::judge`]) and the value hints their reads ([`crate::value_hints`]).

/// Sets `search_path` (`$1`) until the end of the calling grid function (whose own SET
/// clause restores the caller's value when it returns) or of the enclosing subtransaction.
pub(crate) const SET_SEARCH_PATH: &str = "SELECT pg_catalog.set_config('search_path', $1, true)";

/// PostgreSQL's timeout API (utils/timeout.h), which pgrx does not bind.
mod timeout {
    pub use crate::pgversion::STATEMENT_TIMEOUT;
    unsafe extern "C-unwind" {
        pub fn enable_timeout_after(id: u32, delay_ms: i32);
        pub fn disable_timeout(id: u32, keep_indicator: bool);
        pub fn get_timeout_active(id: u32) -> bool;
    }
}

/// `sql` without the `;` the dialect lets a statement end with (`statement opt_semi`:
/// at most one, at the very end, since generated SQL has no comments), so that it can be
/// wrapped as a subquery.
pub(crate) fn without_terminator(sql: &str) -> &str {
    let t = sql.trim_end();
    t.strip_suffix(';').map_or(t, str::trim_end)
}

/// The settings a generated statement is read and run under by `grid.run()` (set
/// locally in its subtransaction, whatever the caller set): the dialect's strings mean
/// the same under any value of these (docs/security.md), and pinning them keeps it so
/// should a statement ever hold text the dialect did not check.
const PINNED_SETTINGS: &[(&str, &str)] = &[
    ("standard_conforming_strings", "on"),
    ("backslash_quote", "off"),
    ("transaction_read_only", "on"),
];

/// Runs `body` as the caller, under the caller's `search_path` and the
/// [`PINNED_SETTINGS`], in a subtransaction that is rolled back afterwards (so its
/// `SET LOCAL`s and anything it did end with it), bounded by the caller's
/// `statement_timeout` or else `default_timeout_ms`. An ERROR inside is caught (and the
/// subtransaction rolled back), so that the caller goes on in the state it was in: the
/// caller decides whether to rethrow it. What `grid.run()` runs its statement in, and
/// the judge its EXPLAIN.
pub(crate) fn in_rolled_back_subtransaction<T>(
    search_path: &str,
    default_timeout_ms: i32,
    body: impl FnOnce() -> Result<T, pgrx::spi::Error>,
) -> Result<Result<T, pgrx::spi::Error>, Box<pgrx::pg_sys::panic::CaughtError>> {
    use pgrx::prelude::*;
    // SAFETY: a backend's main thread inside a transaction; the subtransaction is ended
    // by `end` below, on success and on error alike.
    let (context, owner) = unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        (context, owner)
    };
    let armed = unsafe { !timeout::get_timeout_active(timeout::STATEMENT_TIMEOUT) };
    if armed {
        unsafe { timeout::enable_timeout_after(timeout::STATEMENT_TIMEOUT, default_timeout_ms) };
    }
    // Disarms our timeout and rolls the subtransaction back (its SET LOCAL with it).
    let end = move || unsafe {
        if armed {
            timeout::disable_timeout(timeout::STATEMENT_TIMEOUT, false);
        }
        pg_sys::RollbackAndReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    };
    let body = std::panic::AssertUnwindSafe(body);
    let outcome = pgrx::PgTryBuilder::new(move || {
        let body = body;
        // The statement's names are the caller's: it runs under the caller's path.
        let mut set = Spi::run_with_args(SET_SEARCH_PATH, &[search_path.into()]);
        for (name, value) in PINNED_SETTINGS {
            set = set.and_then(|()| Spi::run(&format!("SET LOCAL {name} = {value}")));
        }
        Ok(set.and_then(|()| (body.0)()))
    })
    .catch_others(|e| Err(Box::new(e)))
    .execute();
    end();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_terminator_is_dropped_before_the_statement_is_wrapped() {
        assert_eq!(without_terminator("SELECT 1;"), "SELECT 1");
        assert_eq!(without_terminator("SELECT 1 ; \n"), "SELECT 1");
        assert_eq!(without_terminator("SELECT ';'"), "SELECT ';'");
        assert_eq!(without_terminator("SELECT 1"), "SELECT 1");
    }
}
