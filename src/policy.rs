//! `grid.policy` (sql/policy.sql): per-role bans, DML targets and the write verbs a role
//! may be asked (opt-in: `grid_core::Policy::for_asker`), in grid-core's `Policy` format. The
//! table's CHECK constraint calls `grid.check_policy(jsonb)`, so a row that grid-core could
//! not read is refused when it is written, with grid-core's reason, rather than when a
//! role next asks.

use pgrx::prelude::*;

// The table, after its CHECK function and the auditors' role (made by the audit store).
extension_sql_file!(
    "../sql/policy.sql",
    name = "policy_table",
    requires = ["audit_store", grid::check_policy]
);

#[pg_schema]
mod grid {
    use pgrx::prelude::*;

    /// `grid.check_policy(policy jsonb)`: true when `policy` is a valid
    /// `grid_core::policy::Policy`; otherwise an error that says what is wrong.
    #[pg_extern(security_invoker, immutable, strict)]
    #[search_path(pg_catalog, pg_temp)]
    fn check_policy(policy: pgrx::JsonB) -> bool {
        match serde_json::from_value::<grid_core::Policy>(policy.0) {
            Ok(_) => true,
            Err(e) => {
                ereport!(
                    ERROR,
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("grid.policy: not a valid policy: {e}")
                );
            }
        }
    }
}
