//! `grid.policy` (src/policy.rs): rows are checked, written by superusers and read by
//! their role.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::{assert_refused, install, run, select_one};
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
