//! A statement the checker refuses: repaired once by a new prompt or a rewind, never
//! returned when it stays wrong, and replayed with its repair; under the unconstrained
//! ablation still checked; and `grid.ask` runs the same pipeline as `grid generate`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::employees::{blocked, fixture};
    use crate::tests::support::{ask, assert_refused, generations, run, select_one};
    use pgrx::prelude::*;

    #[pg_test]
    fn a_refused_statement_is_repaired_once_and_never_returned() {
        fixture();
        let generations = |question: &str| generations(question, "refused");
        // `amount` is a column the analyst may read (of grid_t_orders), so the mask lets
        // the model write it; the checker finds that grid_t_employees has no such
        // column, the repair prompt quotes that back, and the repair is returned. (The
        // repair by a new prompt: the scripted model answers that from its script.)
        run("SET grid.ablation = prompt_repair");
        run("SET ROLE grid_t_analyst");
        assert_eq!(ask("repair me"), "SELECT id FROM grid_t_employees");
        run("RESET ROLE");
        let rows = generations("repair me");
        assert_eq!(rows.len(), 2, "{rows:?}");
        let (first, repair) = (&rows[0], &rows[1]);
        assert_eq!(
            first.1.as_deref(),
            Some("SELECT amount FROM grid_t_employees")
        );
        assert!(
            first.2.as_deref().is_some_and(|r| r.contains("amount")),
            "{first:?}"
        );
        assert_eq!(first.3, None);
        assert_eq!(repair.1.as_deref(), Some("SELECT id FROM grid_t_employees"));
        assert_eq!((repair.2.as_deref(), repair.3), (None, Some(first.0)));

        // A repair that is refused again: an error that names the violation but not the
        // statement, and explain shows the steps without their tokens.
        run("SET ROLE grid_t_analyst");
        let m = assert_refused("SELECT grid.ask('stays wrong')", "42501");
        assert!(
            m.contains("not returned") && m.contains("employee_id"),
            "{m}"
        );
        assert!(!m.contains("SELECT"), "the refused statement leaked: {m}");
        let (steps, tokens): (Option<i64>, Option<i64>) =
            Spi::get_two("SELECT count(*), count(token) FROM grid.explain('stays wrong')")
                .expect("explain");
        run("RESET ROLE");
        assert!(steps.unwrap_or(0) > 3, "{steps:?}");
        assert_eq!(tokens, Some(0));
        let rows = generations("stays wrong");
        assert_eq!(rows.len(), 4, "{rows:?}");
        for pair in rows.chunks(2) {
            assert!(pair.iter().all(|r| r.2.is_some()), "{pair:?}");
            assert_eq!(pair[1].3, Some(pair[0].0), "{pair:?}");
        }

        // The verdict is not hashed, but grid.replay recomputes it from the archived
        // snapshot: a superuser who clears it is found out.
        let ok: Option<bool> = select_one(&format!("SELECT ok FROM grid.replay({})", first.0));
        assert_eq!(ok, Some(true));
        run("SET session_replication_role = replica");
        run(&format!(
            "UPDATE grid.generations SET refused = NULL WHERE generation = {}",
            first.0
        ));
        run("RESET session_replication_role");
        let (ok, reason): (Option<bool>, Option<String>) =
            Spi::get_two(&format!("SELECT ok, reason FROM grid.replay({})", first.0))
                .expect("replay");
        assert_eq!(ok, Some(false));
        assert!(reason.unwrap_or_default().contains("verdict"));
        run("RESET grid.ablation");
    }

    /// As shipped, the refused reference is rewound: the repair replays the first
    /// statement's tokens up to it and bans the token chosen there; its records are
    /// stored (`replayed`, `banned`), and grid.replay recomputes every mask, the ban's
    /// included. (The scripted model spells its script again, so the repair is refused
    /// too.)
    #[pg_test]
    fn a_refused_reference_is_rewound_and_the_rewind_replays() {
        fixture();
        run("SET ROLE grid_t_analyst");
        // Its own question: the audit rows of other tests stay (the worker commits them).
        // What the scripted model writes once its choice is banned is whatever its
        // fallback picks from the mask (a made-up name the checker refuses, or a statement
        // that passes): either way the rewind's records are what is checked below.
        let outcome = crate::tests::support::refusal("SELECT grid.ask('rewind, then repair me')");
        run("RESET ROLE");
        let rows = generations("rewind, then repair me", "refused");
        assert_eq!(rows.len(), 2, "{rows:?}");
        let (first, rewind) = (rows[0].0, rows[1].0);
        assert_eq!(rows[1].3, Some(first));
        assert!(
            rows[0].2.is_some(),
            "the first statement was refused: {rows:?}"
        );
        match outcome {
            Some(m) => {
                assert!(
                    m.starts_with("42501: ") && m.contains("after one repair"),
                    "{m}"
                );
                assert!(rows[1].2.is_some(), "{rows:?}");
            }
            None => assert!(
                rows[1].2.is_none(),
                "a refused rewind was returned: {rows:?}"
            ),
        }
        let kinds: Option<String> = select_one(&format!(
            "SELECT string_agg(kind, ',' ORDER BY step) FROM grid.audit_log WHERE generation = {rewind}"
        ));
        let kinds = kinds.unwrap_or_default();
        assert!(kinds.starts_with("replayed,"), "{kinds}");
        assert_eq!(kinds.matches("banned").count(), 1, "{kinds}");
        // The ban is the token the first statement chose at that step.
        let same: Option<bool> = select_one(&format!(
            "SELECT b.token = f.token FROM grid.audit_log b JOIN grid.audit_log f
               ON f.generation = {first} AND f.step = b.step
             WHERE b.generation = {rewind} AND b.kind = 'banned'"
        ));
        assert_eq!(same, Some(true));
        for g in [first, rewind] {
            let (ok, reason): (Option<bool>, Option<String>) =
                Spi::get_two(&format!("SELECT ok, reason FROM grid.replay({g})")).expect("replay");
            assert_eq!(ok, Some(true), "{reason:?}");
        }
        let verified: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(verified, Some(true));
    }

    #[pg_test]
    fn the_unconstrained_ablation_is_sealed_as_such_and_still_checked() {
        fixture();
        // Guarded, the analyst's salary question never names the table.
        run("SET ROLE grid_t_analyst");
        blocked("show the salaries");
        run("RESET ROLE");
        // Without the mask (a superuser's setting) the model writes it; the checker
        // refuses it, so it is not returned, and nothing repairs it.
        run("SET grid.ablation = unconstrained");
        run("SET ROLE grid_t_analyst");
        let m = assert_refused("SELECT grid.ask('show the salaries')", "42501");
        assert!(!m.contains("SELECT"), "the refused statement leaked: {m}");
        // The analyst can change the ablation neither way.
        assert_refused("RESET grid.ablation", "42501");
        assert_refused("SET grid.ablation = none", "42501");
        run("RESET ROLE");
        let row: Option<pgrx::JsonB> = select_one(
            "SELECT to_jsonb(g) FROM grid.generations g ORDER BY seal_index DESC LIMIT 1",
        );
        let row = row.map(|j| j.0).unwrap_or_default();
        assert_eq!(row["decode_mode"], "unconstrained", "{row}");
        assert_eq!(
            row["final_sql"], "SELECT salary FROM grid_t_salaries",
            "{row}"
        );
        assert!(row["refused"].is_string(), "{row}");
        let asked: Option<i64> = select_one(
            "SELECT count(*) FROM grid.generations WHERE question = 'show the salaries'
                AND decode_mode = 'unconstrained'",
        );
        assert_eq!(asked, Some(1), "no repair under the ablation");
        let ok: Option<bool> = select_one(&format!(
            "SELECT ok FROM grid.replay({})",
            row["generation"]
        ));
        assert_eq!(ok, Some(true));
        let ok: Option<bool> = select_one("SELECT ok FROM grid.verify_audit()");
        assert_eq!(ok, Some(true));
        run("RESET grid.ablation");
    }

    /// grid.ask and the pipeline `grid generate` runs (grid_ask::ask_all, with no judge)
    /// answer the same question, with its repair, with the same statement and the same
    /// seals: given the same generation ids, every field but the chain position.
    #[pg_test]
    fn grid_ask_and_grid_generate_run_one_pipeline() {
        fixture();
        run("SET grid.ablation = prompt_repair");
        run("SET ROLE grid_t_analyst");
        let sql = ask("repair me");
        run("RESET ROLE");
        run("RESET grid.ablation");
        let ids: Vec<i64> = Spi::connect(|c| {
            c.select(
                "SELECT generation FROM (SELECT generation FROM grid.generations
                  WHERE question = 'repair me' ORDER BY generation DESC LIMIT 2) g
                  ORDER BY generation",
                None,
                &[],
            )
            .expect("generations")
            .filter_map(|r| r.get::<i64>(1).ok().flatten())
            .collect()
        });
        assert_eq!(ids.len(), 2, "a first attempt and its repair");
        let stored: Vec<(grid_core::audit::Seal, Option<String>)> = ids
            .iter()
            .map(|&g| {
                crate::audit::stored_seal(g)
                    .expect("readable")
                    .expect("sealed")
            })
            .collect();
        let (session_user, lexicons): (Option<String>, Option<pgrx::JsonB>) =
            Spi::get_two(&format!(
                "SELECT g.session_user_name, a.content_json FROM grid.generations g
               JOIN grid.artifacts a ON a.kind = 'lexicons' AND a.fingerprint = g.lexicons_fp
              WHERE g.generation = {}",
                ids[0]
            ))
            .expect("the first attempt's artifacts");
        let lexicons = lexicons.map(|j| j.0).unwrap_or_default();
        let job = grid_ask::Job::new(
            [ids[0] as u64, ids[1] as u64],
            grid_ask::Ask {
                question: "repair me".into(),
                snapshot: lexicons["snapshot"].clone(),
                session_user: session_user.unwrap_or_default(),
                current_user: "grid_t_analyst".into(),
                database: String::new(),
                policy: Some(lexicons["base_policy"].clone()),
                explain: false,
                examples: Vec::new(),
                offered: None,
                parsed: None,
                settings: grid_ask::AskSettings {
                    endpoint: crate::guc::endpoint(),
                    model: None,
                    max_tokens: crate::guc::max_tokens(),
                    temperature: crate::guc::temperature(),
                    timeout_ms: 60_000,
                    audit: grid_ask::AuditLevel::Full,
                    ablation: grid_ask::Ablation::named("prompt_repair").unwrap_or_default(),
                    fault: None,
                    judge: true,
                    decline: false,
                },
            },
        );
        let outputs = grid_ask::ask_all(
            vec![job],
            &mut grid_ask::NoJudge,
            grid_ask::MockDefaults::default(),
        );
        let finished = outputs
            .into_iter()
            .find_map(|o| match o {
                grid_ask::Output::Finish(f) => Some(*f),
                grid_ask::Output::Steps(_)
                | grid_ask::Output::Taken { .. }
                | grid_ask::Output::Started { .. }
                | grid_ask::Output::Warmed { .. } => None,
            })
            .expect("the pipeline answers");
        match &finished.answer {
            grid_ask::Answer::Generated(g) => assert_eq!(g.sql, sql),
            other => panic!("{other:?}"),
        }
        assert_eq!(finished.seals.len(), 2);
        for (mine, (theirs, final_sql)) in finished.seals.iter().zip(&stored) {
            let (a, b) = (&mine.seal, theirs);
            assert_eq!(
                (a.generation, a.stop, a.steps, a.last_step_hash),
                (b.generation, b.stop, b.steps, b.last_step_hash)
            );
            assert_eq!((a.fingerprints, a.mode), (b.fingerprints, b.mode));
            // The extension's judge planned the statement; the pipeline here has none
            // (NoJudge), so only the verdicts differ.
            let unjudged = |m: &grid_core::audit::SealMeta| grid_core::audit::SealMeta {
                verdict: None,
                ..m.clone()
            };
            assert_eq!(unjudged(&a.meta), unjudged(&b.meta));
            assert_eq!(&mine.final_sql, final_sql);
        }
    }
}
