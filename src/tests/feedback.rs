//! Feedback (src/feedback.rs, sql/feedback.sql): only the role that asked says `right` or
//! `wrong` of its generations, a correction is checked as that role (its language, the
//! checker, the judge), curators read the candidates with their counts and promote one
//! into `grid.examples`, and the feedback chain is verified by `grid.verify_audit()`.
//!
//! The worker commits the feedback records (like the generations), so the store is shared
//! by every test and outlives each: each test asks questions of its own (a nonce in them)
//! and reads only the rows of its generations.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::employees::fixture;
    use crate::tests::support::{ask, assert_refused, refusal, run, select_one, select_texts};
    use grid_core::audit::Head;
    use pgrx::prelude::*;

    /// What the fixture's scripted "model" writes for any question that starts with
    /// "list the employees" (and for none of the entries before it).
    const LISTED: &str = "SELECT name FROM grid_t_employees";

    /// A question of this test's own: `stem` and a nonce (hex: no other entry of the
    /// fixture's script matches it).
    fn question(stem: &str) -> String {
        let nonce: String =
            select_one("SELECT md5(random()::text || clock_timestamp()::text)").unwrap_or_default();
        format!("{stem} {}", &nonce[..12])
    }

    /// Asks `q` as `role` and returns the generation of its answer.
    fn answered(role: &str, q: &str) -> i64 {
        run(&format!("SET ROLE {role}"));
        assert_eq!(ask(q), LISTED);
        let g: Option<i64> = select_one(&format!(
            "SELECT max(generation) FROM grid.my_answers WHERE question = $q${q}$q$"
        ));
        run("RESET ROLE");
        g.expect("the answer is the role's")
    }

    fn count(query: &str) -> i64 {
        select_one::<i64>(query).unwrap_or(-1)
    }

    type Verdict = (bool, Option<i64>, Option<String>);

    /// `grid.verify_audit(NULL, feedback_head)`: ok, first_bad_generation, reason.
    fn verify(feedback_head: Option<&str>) -> Verdict {
        Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT ok, first_bad_generation, reason FROM grid.verify_audit(NULL, $1)",
                    None,
                    &[feedback_head.into()],
                )?
                .first();
            Ok::<_, pgrx::spi::SpiError>((
                row.get::<bool>(1)?.unwrap_or(false),
                row.get::<i64>(2)?,
                row.get::<String>(3)?,
            ))
        })
        .unwrap_or_else(|e| panic!("grid.verify_audit: {e}"))
    }

    /// Runs `sql` as a superuser with the append-only triggers off, as an attacker with
    /// superuser rights would.
    fn tamper(sql: &str) {
        run("SET LOCAL session_replication_role = replica");
        run(sql);
        run("SET LOCAL session_replication_role = origin");
    }

    /// The role that asked says right or wrong of its generation, with or without a
    /// correction, as often as it likes; another role, a superuser and nobody may not;
    /// a verdict other than the two, or a correction with `right`, is refused (22023); the
    /// record is the worker's, so a rollback of the caller keeps it.
    #[pg_test]
    fn only_the_asker_says_right_or_wrong_of_its_generations() {
        fixture();
        let q = question("list the employees, for feedback");
        let g = answered("grid_t_analyst", &q);

        run("SET ROLE grid_t_analyst");
        let right = count(&format!("SELECT grid.feedback({g}, 'right')"));
        assert!(right >= 0, "{right}");
        let m = assert_refused(&format!("SELECT grid.feedback({g}, 'maybe')"), "22023");
        assert!(m.contains("'right' or 'wrong'"), "{m}");
        assert_refused(&format!("SELECT grid.feedback({g}, NULL)"), "22004");
        assert_refused("SELECT grid.feedback(NULL, 'right')", "22004");
        let m = assert_refused(
            &format!("SELECT grid.feedback({g}, 'right', 'SELECT id FROM grid_t_employees')"),
            "22023",
        );
        assert!(m.contains("only with 'wrong'"), "{m}");
        let m = assert_refused(
            &format!("SELECT grid.feedback({g}, 'wrong', '  ')"),
            "22023",
        );
        assert!(m.contains("empty"), "{m}");
        // The verdict in any case; a correction in the role's language; none.
        let corrected = count(&format!(
            "SELECT grid.feedback({g}, 'WRONG', 'SELECT id, name FROM grid_t_employees')"
        ));
        let plain = count(&format!(
            "SELECT grid.feedback(generation => {g}, verdict => 'wrong')"
        ));
        assert!(
            right < corrected && corrected < plain,
            "{right} {corrected} {plain}"
        );
        // What the role said, and only that.
        let said = select_texts(&format!(
            "SELECT verdict || ':' || coalesce(sql, '-') FROM grid.my_feedback
              WHERE generation = {g} ORDER BY feedback"
        ));
        assert_eq!(
            said,
            [
                format!("right:{LISTED}"),
                "wrong:SELECT id, name FROM grid_t_employees".to_string(),
                "wrong:-".to_string()
            ]
        );
        // A rollback of the caller does not take a record back (the worker committed it).
        assert!(refusal(&format!(
            "DO $$ BEGIN PERFORM grid.feedback({g}, 'right'); RAISE EXCEPTION 'undone'; END $$"
        ))
        .is_some_and(|m| m.contains("undone")));
        let m = assert_refused("SELECT grid.feedback(-1, 'wrong')", "42501");
        assert!(m.contains("not one the current role asked"), "{m}");
        // Askers read neither the log nor the queue.
        assert_refused("SELECT count(*) FROM grid.feedback_log", "42501");
        assert_refused("SELECT count(*) FROM grid.example_candidates", "42501");
        run("RESET ROLE");

        // Another role: refused as for a generation that does not exist, and it sees none
        // of the analyst's feedback.
        run("SET ROLE grid_t_clerk");
        let m = assert_refused(&format!("SELECT grid.feedback({g}, 'wrong')"), "42501");
        assert!(m.contains("not one the current role asked"), "{m}");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM grid.my_feedback WHERE generation = {g}"
            )),
            0
        );
        run("RESET ROLE");
        // A superuser speaks for its own generations only (SET ROLE to speak as another).
        let m = assert_refused(&format!("SELECT grid.feedback({g}, 'right')"), "42501");
        assert!(m.contains("not one the current role asked"), "{m}");

        let rows = select_texts(&format!(
            "SELECT verdict || ':' || current_user_name || ':' || coalesce(corrected_sql, '-')
               FROM grid.feedback_log WHERE generation = {g} ORDER BY feedback"
        ));
        assert_eq!(
            rows,
            [
                "right:grid_t_analyst:-",
                "wrong:grid_t_analyst:SELECT id, name FROM grid_t_employees",
                "wrong:grid_t_analyst:-",
                "right:grid_t_analyst:-"
            ]
        );
    }

    /// A correction the role's language does not hold (a table it may not read, two
    /// statements) is refused with 42501 before anything plans it; one PostgreSQL refuses
    /// as the role, with PostgreSQL's SQLSTATE; nothing is recorded. A refused generation
    /// is not an answer: `right` of it is refused, `wrong` with a correction is taken.
    #[pg_test]
    fn a_correction_outside_the_language_or_judged_wrong_is_refused() {
        fixture();
        let q = question("list the employees, to correct");
        let g = answered("grid_t_analyst", &q);
        run("SET ROLE grid_t_analyst");
        for outside in [
            "SELECT salary FROM grid_t_salaries",
            "SELECT name FROM grid_t_employees; SELECT id FROM grid_t_employees",
            "DELETE FROM grid_t_employees",
        ] {
            let m = assert_refused(
                &format!("SELECT grid.feedback({g}, 'wrong', $c${outside}$c$)"),
                "42501",
            );
            assert!(m.contains("not one the current role may be given"), "{m}");
        }
        // In the language, and the checker passes it; PostgreSQL cannot plan it.
        let m = assert_refused(
            &format!(
                "SELECT grid.feedback({g}, 'wrong', \
                 $c$SELECT name FROM grid_t_employees WHERE id = 'abc'$c$)"
            ),
            "22P02",
        );
        assert!(
            m.contains("PostgreSQL refuses the corrected statement"),
            "{m}"
        );
        run("RESET ROLE");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM grid.feedback_log WHERE generation = {g}"
            )),
            0
        );

        // A refused ask (the checker refuses the statement; no repair): not an answer.
        run("SET grid.ablation = no_repair");
        let refused_q = question("stays wrong, to correct");
        run("SET ROLE grid_t_analyst");
        let m = refusal(&format!("SELECT grid.ask($q${refused_q}$q$)"));
        assert!(m.is_some(), "the ask was answered");
        run("RESET ROLE");
        run("RESET grid.ablation");
        let r = count(&format!(
            "SELECT max(generation) FROM grid.generations WHERE question = $q${refused_q}$q$"
        ));
        assert!(r > 0, "{r}");
        run("SET ROLE grid_t_analyst");
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM grid.my_answers WHERE generation = {r}"
            )),
            0
        );
        let m = assert_refused(&format!("SELECT grid.feedback({r}, 'right')"), "22023");
        assert!(m.contains("returned no statement"), "{m}");
        run(&format!(
            "SELECT grid.feedback({r}, 'wrong', 'SELECT id FROM grid_t_employees')"
        ));
        // The refused statement itself is never shown to the role.
        let said = select_texts(&format!(
            "SELECT coalesce(sql, '-') FROM grid.my_feedback WHERE generation = {r}"
        ));
        assert_eq!(said, ["SELECT id FROM grid_t_employees"]);
        run("RESET ROLE");
    }

    /// Two askers vouch for the same answer (one of them twice: counted once), one
    /// corrects another answer of it (which disputes the answer); a curator reads the queue with the counts and promotes a pair
    /// into grid.examples through its trigger, once; askers read and promote nothing.
    #[pg_test]
    fn curators_read_the_candidates_with_counts_and_promote_one() {
        fixture();
        for sql in [
            "CREATE ROLE grid_t_fb_second NOLOGIN IN ROLE grid_user",
            "GRANT SELECT ON public.grid_t_employees TO grid_t_fb_second",
            "CREATE ROLE grid_t_fb_curator NOLOGIN IN ROLE grid_curator",
        ] {
            run(sql);
        }
        let q = question("list the employees, a candidate");
        let first = answered("grid_t_analyst", &q);
        let second = answered("grid_t_fb_second", &q);
        let other = answered("grid_t_analyst", &q);
        run("SET ROLE grid_t_analyst");
        run(&format!("SELECT grid.feedback({first}, 'right')"));
        run(&format!("SELECT grid.feedback({first}, 'right')"));
        run(&format!(
            "SELECT grid.feedback({other}, 'wrong', 'SELECT id, name FROM grid_t_employees')"
        ));
        run("RESET ROLE");
        run("SET ROLE grid_t_fb_second");
        run(&format!("SELECT grid.feedback({second}, 'right')"));
        run("RESET ROLE");

        run("SET ROLE grid_t_analyst");
        assert_refused("SELECT count(*) FROM grid.example_candidates", "42501");
        let m = assert_refused(
            &format!("SELECT grid.promote_candidate($q${q}$q$, '{LISTED}')"),
            "42501",
        );
        assert!(m.contains("permission denied for function"), "{m}");
        run("RESET ROLE");

        run("SET ROLE grid_t_fb_curator");
        let queue = select_texts(&format!(
            "SELECT sql || '|' || times || '|' || confirmed || '|' || corrected || '|' ||
                    array_to_string(ARRAY(SELECT unnest(said_by) ORDER BY 1), ',') || '|' ||
                    disputed || '|' || promoted
               FROM grid.example_candidates WHERE question = $q${q}$q$ ORDER BY sql"
        ));
        assert_eq!(
            queue,
            [
                "SELECT id, name FROM grid_t_employees|1|0|1|grid_t_analyst|0|false".to_string(),
                // Disputed: the analyst said 'wrong' of another answer that returned it.
                format!("{LISTED}|2|2|0|grid_t_analyst,grid_t_fb_second|1|false"),
            ]
        );
        let id = count(&format!(
            "SELECT grid.promote_candidate($q${q}$q$, '{LISTED}')"
        ));
        assert!(id > 0, "{id}");
        // Through the table's trigger: the curator is the author.
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM grid.examples WHERE id = {id}
                   AND added_by = 'grid_t_fb_curator' AND question = $q${q}$q$
                   AND sql = '{LISTED}'"
            )),
            1
        );
        // Once: promoting it again gives the same example.
        assert_eq!(
            count(&format!(
                "SELECT grid.promote_candidate($q${q}$q$, '{LISTED}')"
            )),
            id
        );
        let promoted: Option<bool> = select_one(&format!(
            "SELECT promoted FROM grid.example_candidates
              WHERE question = $q${q}$q$ AND sql = '{LISTED}'"
        ));
        assert_eq!(promoted, Some(true));
        // Only what feedback proposes.
        let m = assert_refused(
            &format!("SELECT grid.promote_candidate($q${q}$q$, 'SELECT 1')"),
            "22023",
        );
        assert!(m.contains("no feedback proposes"), "{m}");
        assert_refused("SELECT grid.promote_candidate(NULL, 'SELECT 1')", "22004");
        run("RESET ROLE");
    }

    /// `grid.verify_audit()` verifies the feedback chain: an honest one passes, with and
    /// against its exported head; an edited correction, an edited verdict and a dropped
    /// last record are found. The store is append-only for feedback too.
    #[pg_test]
    fn verify_audit_checks_the_feedback_chain_and_finds_an_edit() {
        fixture();
        let q = question("list the employees, to verify");
        let g = answered("grid_t_analyst", &q);
        run("SET ROLE grid_t_analyst");
        let f = count(&format!(
            "SELECT grid.feedback({g}, 'wrong', 'SELECT id FROM grid_t_employees')"
        ));
        run("RESET ROLE");
        assert!(f >= 0, "{f}");
        for statement in [
            format!("UPDATE grid.feedback_log SET verdict = 'right', corrected_sql = NULL WHERE feedback = {f}"),
            format!("DELETE FROM grid.feedback_log WHERE feedback = {f}"),
        ] {
            let m = assert_refused(&statement, "42501");
            assert!(m.contains("append-only"), "{m}");
        }
        assert_refused(
            "SELECT * FROM grid.verify_audit(NULL, 'not a head')",
            "22023",
        );

        // The feedback writers' lock, to the end of the test: no record is appended
        // meanwhile (no grid.feedback after this line: the worker would wait for it).
        run("LOCK TABLE grid.feedback_log IN SHARE ROW EXCLUSIVE MODE");
        let head: String = select_one("SELECT grid.feedback_head()").unwrap_or_default();
        let parsed = head.parse::<Head>().expect("a head");
        assert!(
            parsed.seals > u64::try_from(f).unwrap_or(u64::MAX),
            "{head}"
        );
        let (ok, _, why) = verify(Some(&head));
        assert!(ok, "{why:?}");

        // The correction edited: its digest no longer matches.
        tamper(&format!(
            "UPDATE grid.feedback_log SET corrected_sql = 'SELECT name FROM grid_t_employees' \
              WHERE feedback = {f}"
        ));
        let (ok, bad, why) = verify(None);
        assert!(!ok);
        assert_eq!(bad, Some(g));
        let why = why.unwrap_or_default();
        assert!(
            why.contains(&format!("feedback {f} ")) && why.contains("corrected_sql"),
            "{why}"
        );
        tamper(&format!(
            "UPDATE grid.feedback_log SET corrected_sql = 'SELECT id FROM grid_t_employees' \
              WHERE feedback = {f}"
        ));
        assert!(verify(None).0);

        // The verdict turned, correction and digest dropped: the record's hash.
        let digest: Option<String> = select_one(&format!(
            "SELECT encode(corrected_sql_digest, 'hex') FROM grid.feedback_log WHERE feedback = {f}"
        ));
        let digest = digest.expect("the correction's digest");
        tamper(&format!(
            "UPDATE grid.feedback_log SET verdict = 'right', corrected_sql = NULL, \
                    corrected_sql_digest = NULL WHERE feedback = {f}"
        ));
        let (ok, bad, why) = verify(None);
        assert!(!ok);
        assert_eq!(bad, Some(g));
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("feedback hash mismatch")),
            "{why:?}"
        );
        tamper(&format!(
            "UPDATE grid.feedback_log SET verdict = 'wrong', \
                    corrected_sql = 'SELECT id FROM grid_t_employees', \
                    corrected_sql_digest = decode('{digest}', 'hex') WHERE feedback = {f}"
        ));
        let (ok, _, why) = verify(Some(&head));
        assert!(ok, "{why:?}");

        // The last record dropped: a shorter chain is a valid chain, found only against
        // the exported head.
        tamper(&format!(
            "DELETE FROM grid.feedback_log WHERE feedback = {}",
            parsed.seals - 1
        ));
        let (ok, _, why) = verify(None);
        assert!(ok, "{why:?}");
        let (ok, bad, why) = verify(Some(&head));
        assert!(!ok);
        assert_eq!(bad, None);
        assert!(
            why.as_deref().is_some_and(|w| w.contains("truncated")),
            "{why:?}"
        );
    }

    /// The new functions are SECURITY INVOKER with the pinned path (as the api tests
    /// check of every function) and granted by role: askers may give feedback, curators
    /// promote, auditors read the feedback chain's head.
    #[pg_test]
    fn feedback_functions_are_invoker_pinned_and_granted_by_role() {
        for (function, role, may) in [
            ("grid.feedback(bigint, text, text)", "grid_user", true),
            ("grid.feedback(bigint, text, text)", "public", false),
            ("grid.promote_candidate(text, text)", "grid_curator", true),
            ("grid.promote_candidate(text, text)", "grid_user", false),
            ("grid.feedback_head()", "grid_auditor", true),
            ("grid.verify_audit(text, text)", "grid_auditor", true),
        ] {
            let (pinned, definer, granted): (Option<bool>, Option<bool>, Option<bool>) =
                Spi::get_three(&format!(
                    "SELECT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false),
                            p.prosecdef,
                            has_function_privilege('{role}', p.oid, 'EXECUTE')
                       FROM pg_catalog.pg_proc p WHERE p.oid = '{function}'::regprocedure"
                ))
                .unwrap_or_else(|e| panic!("{function}: {e}"));
            assert_eq!(pinned, Some(true), "{function}");
            assert_eq!(definer, Some(false), "{function}");
            assert_eq!(granted, Some(may), "{function} for {role}");
        }
        for (relation, role, may) in [
            ("grid.my_feedback", "grid_user", true),
            ("grid.example_candidates", "grid_user", false),
            ("grid.example_candidates", "grid_curator", true),
            ("grid.feedback_log", "grid_user", false),
            ("grid.feedback_log", "grid_curator", false),
            ("grid.feedback_log", "grid_auditor", true),
        ] {
            let granted: Option<bool> = select_one(&format!(
                "SELECT has_table_privilege('{role}', '{relation}', 'SELECT')"
            ));
            assert_eq!(granted, Some(may), "{relation} for {role}");
        }
    }
}
