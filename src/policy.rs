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

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::testing::{assert_refused, install, run, select_one};
    use pgrx::prelude::*;

    #[pg_test]
    fn policies_are_checked_written_by_superusers_and_read_by_their_role() {
        install();
        run(r#"INSERT INTO grid.policy (role_name, policy) VALUES
               ('grid_t_reader', '{"verbs": ["select"], "ban": []}'),
               ('grid_t_other', '{}')"#);
        let m = assert_refused(
            r#"INSERT INTO grid.policy (role_name, policy) VALUES ('x', '{"verbz": []}')"#,
            "22023",
        );
        assert!(
            m.contains("not a valid policy") && m.contains("verbz"),
            "{m}"
        );

        run("CREATE ROLE grid_t_reader NOLOGIN");
        run("SET ROLE grid_t_reader");
        let mine: Option<String> = select_one("SELECT string_agg(role_name, ',') FROM grid.policy");
        assert_eq!(mine.as_deref(), Some("grid_t_reader"));
        assert_refused(
            "INSERT INTO grid.policy (role_name, policy) VALUES ('grid_t_reader', '{}')",
            "42501",
        );
        assert_refused("DELETE FROM grid.policy", "42501");
        assert_refused("UPDATE grid.policy SET policy = '{}'", "42501");
        run("RESET ROLE");

        run("CREATE ROLE grid_t_policy_auditor NOLOGIN IN ROLE grid_auditor");
        run("SET ROLE grid_t_policy_auditor");
        let all: Option<i64> = select_one("SELECT count(*) FROM grid.policy");
        assert_eq!(all, Some(2));
        run("RESET ROLE");
    }
}
