//! What differs between the PostgreSQL majors grid_pg builds for: 15 (feature `pg15`) and
//! 18 (feature `pg18`). Everything else in `src/` and `sql/` is the same code on both;
//! each difference below says why it is one.

use std::ffi::CStr;

use pgrx::pg_sys;

#[cfg(not(any(feature = "pg15", feature = "pg18")))]
compile_error!("grid_pg builds for PostgreSQL 15 (feature pg15) or 18 (feature pg18)");

/// `TimeoutId::STATEMENT_TIMEOUT` (utils/timeout.h, which pgrx does not bind): 3 in
/// PostgreSQL 15 and in 18 alike. 17 added `TRANSACTION_TIMEOUT` to the enum, after it, so
/// the value did not move; a major that moves it gets its own line here.
#[cfg(any(feature = "pg15", feature = "pg18"))]
pub const STATEMENT_TIMEOUT: u32 = 3;

/// The GUC table's entry for parameter `name` (its canonical, lower-case name), or null
/// when there is none.
///
/// # Safety
/// A backend's main thread, with the GUC table built; the entry is valid until the table
/// changes (a placeholder defined, a library loaded).
#[cfg(feature = "pg15")]
pub unsafe fn guc_variable(name: &CStr) -> *mut pg_sys::config_generic {
    // PostgreSQL 15: the table is one array, `get_guc_variables()` with
    // `GetNumConfigOptions()` entries; `find_option` is static in guc.c.
    let vars = pg_sys::get_guc_variables();
    if vars.is_null() {
        return std::ptr::null_mut();
    }
    let Ok(n) = usize::try_from(pg_sys::GetNumConfigOptions()) else {
        return std::ptr::null_mut();
    };
    for i in 0..n {
        let var = *vars.add(i);
        if !var.is_null() && !(*var).name.is_null() && CStr::from_ptr((*var).name) == name {
            return var;
        }
    }
    std::ptr::null_mut()
}

/// See the `pg15` version above.
///
/// # Safety
/// As there.
#[cfg(feature = "pg18")]
pub unsafe fn guc_variable(name: &CStr) -> *mut pg_sys::config_generic {
    // PostgreSQL 16 and later: the table is a hash; `GetNumConfigOptions()` is gone and
    // `get_guc_variables(&n)` pallocs a fresh sorted array at each call. `find_option` is
    // exported instead: no placeholder is created, and with `skip_errors` a missing name
    // is a null, not an error.
    pg_sys::find_option(name.as_ptr(), false, true, pg_sys::PGERROR as i32)
}

/// The relation a range table entry binds, if it binds one: what the trust check
/// (`crate::resolution`) collects from a rewritten statement, views included.
///
/// # Safety
/// `rte` points to a range table entry of a query tree built in this backend.
#[cfg(feature = "pg15")]
pub unsafe fn bound_relation(rte: *const pg_sys::RangeTblEntry) -> Option<pg_sys::Oid> {
    // PostgreSQL 15: a view the rewriter expanded is an RTE_SUBQUERY without its relid,
    // but the view's own query keeps RTE_RELATION entries for the view (its OLD and NEW
    // placeholders), so every relation, views included, shows as an RTE_RELATION.
    ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION).then_some((*rte).relid)
}

/// See the `pg15` version above.
///
/// # Safety
/// As there.
#[cfg(feature = "pg18")]
pub unsafe fn bound_relation(rte: *const pg_sys::RangeTblEntry) -> Option<pg_sys::Oid> {
    // PostgreSQL 16 and later: a view's query has no OLD and NEW placeholders any more;
    // the rewriter turns the view's RTE_RELATION into an RTE_SUBQUERY that keeps the
    // view's relid (for its lock and permission checks). Without this arm a view would
    // not be collected, and another role's view over trusted tables would pass.
    match (*rte).rtekind {
        pg_sys::RTEKind::RTE_RELATION => Some((*rte).relid),
        pg_sys::RTEKind::RTE_SUBQUERY if (*rte).relid != pg_sys::InvalidOid => Some((*rte).relid),
        _ => None,
    }
}
