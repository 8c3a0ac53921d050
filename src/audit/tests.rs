//! The audit store in PostgreSQL: honest logs verify, edits are found where they are,
//! the store refuses to be changed, and only auditors read it.

#[pgrx::pg_schema]
mod tests {
    use crate::testing::{assert_refused, install, refusal, run, select_one};
    use grid_core::audit::Head;
    use pgrx::prelude::*;

    type Verdict = (bool, i64, Option<i64>, Option<i32>, Option<String>);

    fn verify(expected_head: Option<&str>) -> Verdict {
        Spi::connect(|client| {
            let row = client
                .select(
                    "SELECT ok, checked, first_bad_generation, first_bad_step, reason
                       FROM grid.verify_audit($1)",
                    None,
                    &[expected_head.into()],
                )?
                .first();
            Ok::<_, pgrx::spi::SpiError>((
                row.get::<bool>(1)?.unwrap_or(false),
                row.get::<i64>(2)?.unwrap_or(-1),
                row.get::<i64>(3)?,
                row.get::<i32>(4)?,
                row.get::<String>(5)?,
            ))
        })
        .unwrap_or_else(|e| panic!("grid.verify_audit: {e}"))
    }

    fn append(question: &str, sql: &str, tokens: Vec<i32>, stop: &str) -> i64 {
        Spi::get_one_with_args::<i64>(
            "SELECT grid.audit_append_synthetic($1, $2, $3, $4)",
            &[question.into(), sql.into(), tokens.into(), stop.into()],
        )
        .unwrap_or_else(|e| panic!("append: {e}"))
        .unwrap_or_else(|| panic!("append: NULL"))
    }

    fn head() -> String {
        select_one("SELECT grid.audit_head()").unwrap_or_default()
    }

    fn rows() -> i64 {
        select_one::<i64>(
            "SELECT (SELECT count(*) FROM grid.audit_log) + (SELECT count(*) FROM grid.generations)",
        )
        .unwrap_or(-1)
    }

    /// Runs `sql` as a superuser with the append-only triggers off, as an attacker with
    /// superuser rights would.
    fn tamper(sql: &str) {
        run("SET LOCAL session_replication_role = replica");
        run(sql);
        run("SET LOCAL session_replication_role = origin");
    }

    #[pg_test]
    fn honest_generations_verify_and_the_head_follows_the_seals() {
        assert_eq!(verify(None), (true, 0, None, None, None));
        assert_eq!(head(), Head::genesis().to_string());

        let g1 = append(
            "how many staff?",
            "SELECT count(*) FROM staff",
            vec![10, 11, 12],
            "eos",
        );
        let g2 = append(
            "all orders",
            "SELECT * FROM orders",
            vec![20, 21],
            "budget_completed",
        );
        let g3 = append("broken", "", vec![30], "error");
        let g4 = append("long", "SELECT", vec![40, 41, 42, 43], "budget_truncated");
        assert!(g1 < g2 && g2 < g3 && g3 < g4);

        // 3 + EOS, 2 + EOS, 1, 4 step records; 4 seals.
        assert_eq!(rows(), 4 + 3 + 1 + 4 + 4);
        assert_eq!(verify(None), (true, 16, None, None, None));

        let h = head();
        let parsed: Head = h.parse().expect("audit_head() is a head");
        assert_eq!(parsed.seals, 4);
        let last: Option<String> = select_one(
            "SELECT encode(hash, 'hex') FROM grid.generations ORDER BY seal_index DESC LIMIT 1",
        );
        assert_eq!(last.as_deref(), Some(h.split_once(':').map_or("", |p| p.1)));
        assert!(verify(Some(&h)).0);

        // What the rows say: who asked, the texts, EOS as a NULL token.
        let who: Option<String> = select_one(&format!(
            "SELECT session_user_name || '/' || current_user_name || '/' || question || '/' || stop
               FROM grid.generations WHERE generation = {g1}"
        ));
        let me: Option<String> = select_one("SELECT session_user || '/' || current_user");
        assert_eq!(who, me.map(|m| format!("{m}/how many staff?/eos")));
        let eos: Option<String> = select_one(&format!(
            "SELECT kind || ':' || coalesce(token::text, 'null') FROM grid.audit_log
              WHERE generation = {g1} AND step = 3"
        ));
        assert_eq!(eos.as_deref(), Some("eos:null"));
    }

    #[pg_test]
    fn a_superuser_edit_is_found_at_its_generation_and_step() {
        let g1 = append("q1", "SELECT 1", vec![1, 2, 3], "eos");
        let g2 = append("q2", "SELECT 2", vec![4, 5, 6], "eos");
        let _g3 = append("q3", "SELECT 3", vec![7, 8], "eos");
        assert!(verify(None).0);

        tamper(&format!(
            "UPDATE grid.audit_log SET blocked_count = blocked_count - 1
              WHERE generation = {g2} AND step = 1"
        ));
        let (ok, checked, generation, step, reason) = verify(None);
        assert!(!ok);
        assert_eq!((generation, step), (Some(g2), Some(1)));
        // g1: 4 steps and its seal, then g2's step 0.
        assert_eq!(checked, 6);
        let reason = reason.unwrap_or_default();
        assert!(reason.contains("step hash mismatch"), "{reason}");

        // An earlier edit of a text the seal commits to is found first (this time with
        // the trigger disabled rather than bypassed).
        run("ALTER TABLE grid.generations DISABLE TRIGGER append_only");
        run(&format!(
            "UPDATE grid.generations SET question = 'q1, edited' WHERE generation = {g1}"
        ));
        run("ALTER TABLE grid.generations ENABLE TRIGGER append_only");
        let (ok, _, generation, step, reason) = verify(None);
        assert!(!ok);
        assert_eq!((generation, step), (Some(g1), None));
        let reason = reason.unwrap_or_default();
        assert!(reason.contains("question"), "{reason}");
    }

    #[pg_test]
    fn an_unsealed_generation_is_incomplete_not_tampering() {
        let _g1 = append("q1", "SELECT 1", vec![1], "eos");
        let open: Option<i64> =
            select_one("SELECT grid.audit_append_synthetic('q2', NULL, ARRAY[2, 3], NULL)");
        let g3 = append("q3", "SELECT 3", vec![4], "eos");
        let (ok, checked, generation, step, reason) = verify(None);
        assert!(ok);
        assert_eq!((checked, generation, step), (3 + 2 + 3, None, None));
        let reason = reason.unwrap_or_default();
        assert!(
            reason.contains("1 generation(s) without a seal"),
            "{reason}"
        );
        // The open generation does not enter the seal chain: g3 is seal 1.
        let index: Option<i64> = select_one(&format!(
            "SELECT seal_index FROM grid.generations WHERE generation = {g3}"
        ));
        assert_eq!(index, Some(1));
        assert!(open.is_some());
    }

    #[pg_test]
    fn a_malformed_or_moved_row_is_reported_not_a_panic() {
        let g1 = append("q1", "SELECT 1", vec![1, 2], "eos");
        tamper(&format!(
            "ALTER TABLE grid.audit_log DROP CONSTRAINT audit_log_kind_check;
             UPDATE grid.audit_log SET kind = 'invented' WHERE generation = {g1} AND step = 0"
        ));
        let (ok, checked, generation, step, reason) = verify(None);
        assert!(!ok);
        assert_eq!((checked, generation, step), (0, Some(g1), Some(0)));
        let reason = reason.unwrap_or_default();
        assert!(
            reason.contains("malformed row") && reason.contains("kind"),
            "{reason}"
        );
    }

    #[pg_test]
    fn a_dropped_tail_shows_only_against_the_exported_head() {
        let _g1 = append("q1", "SELECT 1", vec![1], "eos");
        let g2 = append("q2", "SELECT 2", vec![2], "eos");
        let anchored = head();
        tamper(&format!(
            "DELETE FROM grid.audit_log WHERE generation = {g2};
             DELETE FROM grid.generations WHERE generation = {g2}"
        ));
        // Inside the database the shorter log is a valid chain ...
        assert!(verify(None).0);
        // ... but not the one the auditor anchored.
        let (ok, _, _, _, reason) = verify(Some(&anchored));
        assert!(!ok);
        let reason = reason.unwrap_or_default();
        assert!(reason.contains("truncated"), "{reason}");

        install();
        let m = assert_refused("SELECT * FROM grid.verify_audit('not a head')", "22023");
        assert!(m.contains("expected_head"), "{m}");
    }

    #[pg_test]
    fn update_delete_and_truncate_are_refused_even_to_the_owner() {
        install();
        let g = append("q", "SELECT 1", vec![1], "eos");
        let before = rows();
        for table in ["grid.audit_log", "grid.generations", "grid.artifacts"] {
            // Statement-level: refused even when no row would be touched.
            for sql in [
                format!("DELETE FROM {table}"),
                format!("DELETE FROM {table} WHERE false"),
                format!("TRUNCATE {table}"),
            ] {
                let m = assert_refused(&sql, "42501");
                assert!(m.contains("append-only"), "{sql}: {m}");
            }
        }
        let m = assert_refused(
            "UPDATE grid.artifacts SET content = NULL WHERE false",
            "42501",
        );
        assert!(m.contains("append-only"), "{m}");
        let m = assert_refused(
            &format!("UPDATE grid.audit_log SET blocked_count = 0 WHERE generation = {g}"),
            "42501",
        );
        assert!(m.contains("append-only"), "{m}");
        let m = assert_refused(
            "UPDATE grid.generations SET question = 'x' WHERE false",
            "42501",
        );
        assert!(m.contains("append-only"), "{m}");
        assert_eq!(rows(), before);
        assert!(verify(None).0);
    }

    #[pg_test]
    fn a_rolled_back_writer_leaves_a_log_that_still_verifies() {
        let _g1 = append("q1", "SELECT 1", vec![1, 2], "eos");
        let h1 = head();
        let before = rows();
        // The writer's transaction (here a subtransaction) rolls back after appending.
        run("DO $$
             BEGIN
                 PERFORM grid.audit_append_synthetic('q2', 'SELECT 2', ARRAY[3, 4], 'eos');
                 RAISE EXCEPTION 'rolled back';
             EXCEPTION WHEN raise_exception THEN
                 NULL;
             END
             $$");
        assert_eq!(rows(), before);
        assert_eq!(head(), h1);
        assert!(verify(Some(&h1)).0);
        // The chain continues from the head that was kept.
        let g3 = append("q3", "SELECT 3", vec![5], "eos");
        let index: Option<i64> = select_one(&format!(
            "SELECT seal_index FROM grid.generations WHERE generation = {g3}"
        ));
        assert_eq!(index, Some(1));
        assert_eq!(verify(Some(&h1)), (true, before + 3, None, None, None));
    }

    #[pg_test]
    fn auditors_read_and_verify_and_nobody_else_does() {
        install();
        let _g = append("q", "SELECT 1", vec![1], "eos");
        run("CREATE ROLE grid_t_auditor NOLOGIN IN ROLE grid_auditor");
        run("CREATE ROLE grid_t_plain NOLOGIN");

        run("SET ROLE grid_t_auditor");
        assert_eq!(verify(None), (true, 3, None, None, None));
        assert!(head().starts_with("1:"));
        let n: Option<i64> = select_one("SELECT count(*) FROM grid.audit_log");
        assert_eq!(n, Some(2));
        assert_refused(
            "INSERT INTO grid.artifacts (kind, fingerprint) VALUES ('grammar', '\\x00')",
            "42501",
        );
        assert_refused("DELETE FROM grid.audit_log", "42501");
        let m = assert_refused(
            "SELECT grid.audit_append_synthetic('q', 'x', ARRAY[1])",
            "42501",
        );
        assert!(m.contains("permission denied for function"), "{m}");
        run("RESET ROLE");

        run("SET ROLE grid_t_plain");
        assert_refused("SELECT count(*) FROM grid.audit_log", "42501");
        assert_refused("SELECT count(*) FROM grid.generations", "42501");
        assert_refused("SELECT * FROM grid.verify_audit()", "42501");
        run("RESET ROLE");

        // EXECUTE alone does not open the tables, nor the writer.
        run("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA grid TO grid_t_plain");
        run("SET ROLE grid_t_plain");
        let m = assert_refused("SELECT * FROM grid.verify_audit()", "42501");
        assert!(m.contains("permission denied for table"), "{m}");
        let m = assert_refused(
            "SELECT grid.audit_append_synthetic('q', 'x', ARRAY[1])",
            "42501",
        );
        assert!(m.contains("only superusers"), "{m}");
        run("RESET ROLE");
    }

    #[pg_test]
    fn the_synthetic_writer_rejects_bad_input_clearly() {
        install();
        let m = refusal("SELECT grid.audit_append_synthetic('q', 'x', ARRAY[1, -5])")
            .unwrap_or_default();
        assert!(m.contains("token -5"), "{m}");
        let m = refusal("SELECT grid.audit_append_synthetic('q', 'x', ARRAY[1, NULL])")
            .unwrap_or_default();
        assert!(m.contains("NULL"), "{m}");
        let m = refusal("SELECT grid.audit_append_synthetic('q', 'x', ARRAY[1], 'done')")
            .unwrap_or_default();
        assert!(m.contains("unknown stop reason"), "{m}");
        assert_eq!(rows(), 0);
    }
}
