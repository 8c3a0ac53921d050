//! The model's decline (`CANNOT ANSWER 'reason'`, issue 33): what `grid.ask`, `grid.run`
//! and `grid.explain` say when the model declines, what the audit keeps of it, and the
//! `grid.decline` setting that teaches the form.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::employees::fixture;
    use crate::tests::support::{ask, assert_refused, generations, run, select_one};
    use pgrx::prelude::*;

    /// A model that declines (`CANNOT ANSWER 'reason'`): `grid.ask` and `grid.run` fail
    /// with SQLSTATE P0002 and the model's reason, nothing is repaired or judged, and each
    /// generation is audited like any answer (its output and `refused` saying it declined,
    /// no verdict): never one of the role's answers, and `grid.verify_audit()` and
    /// `grid.replay()` pass. `grid.explain` shows its steps and tokens, the decline as a
    /// NOTICE.
    #[pg_test]
    fn a_decline_fails_with_its_own_sqlstate_and_is_audited() {
        const Q: &str = "what is the phase of the moon";
        const DECLINE: &str = "CANNOT ANSWER 'no moon data'";
        fixture();
        run("SET ROLE grid_t_analyst");
        let m = assert_refused(&format!("SELECT grid.ask('{Q}')"), "P0002");
        assert!(m.contains("the model declined: no moon data"), "{m}");
        assert!(m.contains("rephrase") && m.contains("grant"), "{m}");
        assert!(m.is_ascii() && !m.contains('\n'), "{m}");
        let m = assert_refused(&format!("SELECT * FROM grid.run('{Q}')"), "P0002");
        assert!(m.contains("the model declined: "), "{m}");
        let spelled: Option<String> = select_one(&format!(
            "SELECT string_agg(token, '' ORDER BY step) FROM grid.explain('{Q}')"
        ));
        assert_eq!(spelled.as_deref(), Some(DECLINE));
        let mine: Option<i64> = select_one(&format!(
            "SELECT count(*) FROM grid.my_answers WHERE question = '{Q}'"
        ));
        assert_eq!(mine, Some(0), "a decline is no answer");
        run("RESET ROLE");
        let rows = generations(Q, "refused");
        assert_eq!(
            rows.len(),
            3,
            "ask, run and explain, none repaired: {rows:?}"
        );
        for (g, sql, refused, repair_of) in &rows {
            assert_eq!(sql.as_deref(), Some(DECLINE));
            assert_eq!(refused.as_deref(), Some("declined: no moon data"));
            assert_eq!(*repair_of, None);
            let (ok, reason): (Option<bool>, Option<String>) =
                Spi::get_two(&format!("SELECT ok, reason FROM grid.replay({g})")).expect("replay");
            assert_eq!(ok, Some(true), "{reason:?}");
        }
        assert!(
            generations(Q, "verdict").iter().all(|r| r.2.is_none()),
            "the judge saw a decline"
        );
        let stops = crate::tests::support::select_texts(&format!(
            "SELECT stop FROM grid.generations WHERE question = '{Q}'"
        ));
        assert!(stops.iter().all(|s| s == "eos"), "{stops:?}");
        let verified: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(verified, Some(true));
        // The record of a decline is recomputed: a superuser who clears it is found out.
        let g = rows[0].0;
        run("SET session_replication_role = replica");
        run(&format!(
            "UPDATE grid.generations SET refused = NULL WHERE generation = {g}"
        ));
        run("RESET session_replication_role");
        let (ok, reason): (Option<bool>, Option<String>) =
            Spi::get_two(&format!("SELECT ok, reason FROM grid.replay({g})")).expect("replay");
        assert_eq!(ok, Some(false));
        assert!(reason.unwrap_or_default().contains("verdict"));
    }

    /// `grid.decline` (superuser-only, off by default) teaches the model the decline: the
    /// prompt artifact says so and its system part holds the instruction; the ask is
    /// answered as before, and its generation replays (the prompt rendered with the
    /// instruction). Off, the prompt is what it always was.
    #[pg_test]
    fn grid_decline_teaches_the_decline_and_the_record_says_so() {
        const Q: &str = "list the employees, taught to decline";
        fixture();
        run("SET ROLE grid_t_analyst");
        assert_eq!(ask(Q), "SELECT name FROM grid_t_employees");
        run("RESET ROLE");
        let plain = crate::tests::support::prompt_artifact(Q);
        assert!(plain.get("decline").is_none(), "{plain}");
        let system = |doc: &serde_json::Value| {
            doc["prompt"]["system"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        assert!(!system(&plain).contains("CANNOT ANSWER"), "{plain}");
        run("SET grid.decline = on");
        run("SET ROLE grid_t_analyst");
        assert_eq!(ask(Q), "SELECT name FROM grid_t_employees");
        run("RESET ROLE");
        run("RESET grid.decline");
        let taught = crate::tests::support::prompt_artifact(Q);
        assert_eq!(taught["decline"], serde_json::json!(true), "{taught}");
        assert!(
            system(&taught).contains(grid_core::prompt::DECLINE),
            "{taught}"
        );
        let g: Option<i64> = select_one(&format!(
            "SELECT max(generation) FROM grid.generations WHERE question = '{Q}'"
        ));
        let (ok, reason): (Option<bool>, Option<String>) = Spi::get_two(&format!(
            "SELECT ok, reason FROM grid.replay({})",
            g.unwrap_or(-1)
        ))
        .expect("replay");
        assert_eq!(ok, Some(true), "{reason:?}");
        let verified: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(verified, Some(true));
    }
}
