//! The ask pipeline end to end, without PostgreSQL: the scripted mock over the built-in
//! vocabulary, a role with column-level privileges. Answers, the checker's repair, the
//! ablations, the judge (now and later, with the flow resumed), failures, and the audit
//! record of every ask (its chain verifies and every generation replays from its
//! artifacts).

use std::collections::{BTreeMap, HashSet};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use grid_ask::engine::{Input, Output};
use grid_ask::{
    ask_all, Ablation, Answer, Ask, AskSettings, AuditLevel, Candidate, FailureKind, Finished, Job,
    Judge, MockDefaults, NoJudge, Outbox, Ruling, Verdict,
};
use grid_core::audit::{
    verify, DecodeMode, Entry, Head, StepKind, StepRecord, StopReason, VerifyOptions,
};

/// The analyst may read `employees`, and of `salaries` only `employee_id` (it may update
/// `amount`, so the mask offers it; the checker refuses reading it).
const SNAPSHOT: &str = include_str!("fixtures/analyst_snapshot.json");

/// What the "model" tries to write (first match in the prompt wins).
const SCRIPT: &str = include_str!("fixtures/analyst_script.json");

fn script_file() -> String {
    let path = std::env::temp_dir().join(format!("grid-ask-test-{}.json", std::process::id()));
    std::fs::write(&path, SCRIPT).expect("write the script");
    path.display().to_string()
}

fn settings() -> AskSettings {
    AskSettings {
        endpoint: Some(format!("mock:scripted:{}", script_file())),
        model: None,
        max_tokens: 48,
        temperature: 0.0,
        timeout_ms: 60_000,
        audit: AuditLevel::Full,
        ablation: Ablation::default(),
        fault: None,
    }
}

fn job(n: u64, question: &str, settings: AskSettings) -> Job {
    Job::new(
        [2 * n + 1, 2 * n + 2],
        Ask {
            question: question.into(),
            snapshot: serde_json::from_str(SNAPSHOT).expect("snapshot"),
            session_user: "alice".into(),
            current_user: "analyst".into(),
            database: "db".into(),
            policy: None,
            explain: false,
            settings,
        },
    )
}

/// The step records and the finished asks, in the order they were sent; checks that every
/// ask's records came before its answer.
fn split(outputs: Vec<Output>) -> (Vec<StepRecord>, Vec<Finished>) {
    let mut steps = Vec::new();
    let mut done = Vec::new();
    for o in outputs {
        match o {
            Output::Steps(mut s) => steps.append(&mut s),
            Output::Finish(f) => {
                let sent: HashSet<u64> = steps.iter().map(|r| r.generation).collect();
                for s in &f.seals {
                    assert!(
                        s.seal.steps == 0 || sent.contains(&s.seal.generation),
                        "the seal of generation {} came before its steps",
                        s.seal.generation
                    );
                }
                done.push(*f);
            }
        }
    }
    (steps, done)
}

/// The log a host stores (each seal anchored to the head before it) verifies, and every
/// generation in it replays from its own artifacts.
fn record_verifies_and_replays(steps: &[StepRecord], done: &[Finished]) {
    let mut log: Vec<Entry> = steps.iter().cloned().map(Entry::Step).collect();
    let mut head = Head::genesis();
    for f in done {
        for s in &f.seals {
            let seal = s.anchored(head);
            head = seal.head();
            log.push(Entry::Seal(seal));
        }
    }
    let summary = verify(&log, &VerifyOptions::default()).expect("the record verifies");
    assert_eq!(
        summary.generations as usize,
        done.iter().map(|f| f.seals.len()).sum::<usize>()
    );
    let mut artifacts = grid_ask::replay::ArtifactSet::default();
    for s in done.iter().flat_map(|f| &f.seals) {
        for a in &s.artifacts {
            artifacts.insert(a.clone());
        }
    }
    // What a file beside a log holds reads back the same.
    let artifacts = grid_ask::replay::ArtifactSet::from_json(&artifacts.to_json())
        .expect("the artifact list reads back");
    let replayed = grid_ask::replay::replay_log(&log, &artifacts, &VerifyOptions::default())
        .expect("every mask replays from the artifacts");
    assert_eq!(replayed.generations, summary.generations);
}

fn ask_one(question: &str, settings: AskSettings) -> (Vec<StepRecord>, Finished) {
    let (steps, mut done) = split(ask_all(
        vec![job(0, question, settings)],
        &mut NoJudge,
        MockDefaults::default(),
    ));
    record_verifies_and_replays(&steps, &done);
    assert_eq!(done.len(), 1);
    (steps, done.remove(0))
}

fn generated(f: &Finished) -> &grid_ask::Generated {
    match &f.answer {
        Answer::Generated(g) => g,
        Answer::Failed(e) => panic!("{e:?}"),
    }
}

fn failed(f: &Finished) -> &grid_ask::Failure {
    match &f.answer {
        Answer::Failed(e) => e,
        Answer::Generated(g) => panic!("{g:?}"),
    }
}

#[test]
fn a_question_is_answered_sealed_and_explained() {
    let (steps, f) = ask_one("list the names", settings());
    let g = generated(&f);
    assert_eq!(g.sql, "SELECT name FROM employees");
    assert_eq!(
        (g.generation, g.repaired_from, g.stop),
        (1, None, StopReason::Eos)
    );
    let spelled: String = g.steps.iter().filter_map(|s| s.token.clone()).collect();
    assert_eq!(spelled, g.sql);
    assert_eq!(g.steps.last().map(|s| s.kind), Some(StepKind::Eos));
    assert_eq!(g.steps.len(), steps.len());
    assert_eq!(f.seals.len(), 1);
    let s = &f.seals[0];
    assert_eq!(s.final_sql.as_deref(), Some(g.sql.as_str()));
    assert_eq!((s.refused.as_deref(), s.repair_of), (None, None));
    assert_eq!(s.seal.mode.decode, DecodeMode::Mode1);
    assert_eq!(s.seal.meta.role.as_deref(), Some(r#"["alice","analyst"]"#));
    assert_eq!(
        s.seal.meta.sql_digest,
        Some(grid_core::audit::text_digest(&g.sql))
    );
    let kinds: Vec<&str> = s.artifacts.iter().map(|a| a.kind.name()).collect();
    assert_eq!(kinds, ["grammar", "lexicons", "policy", "vocabulary"]);
}

#[test]
fn a_refused_statement_is_repaired_once_and_a_second_refusal_is_final() {
    let (_, f) = ask_one("who earns what", settings());
    let g = generated(&f);
    assert_eq!(g.sql, "SELECT employee_id FROM salaries");
    assert_eq!((g.generation, g.repaired_from), (2, Some(1)));
    assert_eq!(g.repair_reasons.len(), 1);
    assert!(g.repair_reasons[0].contains("salaries.amount"), "{g:?}");
    assert_eq!(f.seals.len(), 2);
    assert_eq!(
        f.seals[0].final_sql.as_deref(),
        Some("SELECT amount FROM salaries")
    );
    assert!(f.seals[0].refused.is_some());
    assert_eq!(f.seals[1].repair_of, Some(1));

    let (_, f) = ask_one("this stays wrong", settings());
    let e = failed(&f);
    assert_eq!(e.kind, FailureKind::Refused);
    assert!(
        e.message.contains("not allowed for role \"analyst\""),
        "{e}"
    );
    assert!(
        !e.message.contains("SELECT amount"),
        "the statement leaks: {e}"
    );
    assert_eq!(f.seals.len(), 2);
    assert!(f.seals.iter().all(|s| s.refused.is_some()));

    // Explained, the refusal shows the steps without their tokens.
    let mut s = settings();
    s.max_tokens = 48;
    let mut j = job(0, "this stays wrong", s);
    j.ask.explain = true;
    let (_, done) = split(ask_all(vec![j], &mut NoJudge, MockDefaults::default()));
    let g = generated(&done[0]);
    assert!(g.refused.is_some() && g.sql.is_empty(), "{g:?}");
    assert!(!g.steps.is_empty());
    assert!(g.steps.iter().all(|s| s.token.is_none()));
}

#[test]
fn without_repair_the_first_refusal_ends_the_ask() {
    let mut s = settings();
    s.ablation = Ablation::named("no_repair").expect("an arm");
    let (_, f) = ask_one("who earns what", s);
    assert_eq!(failed(&f).kind, FailureKind::Refused);
    assert_eq!(f.seals.len(), 1);
    assert_eq!(f.generations.len(), 1);
}

#[test]
fn unconstrained_generations_are_sealed_as_such_and_still_checked() {
    // With the mask, the model cannot name a relation the snapshot lacks.
    let (_, f) = ask_one("the secret table", settings());
    for g in &f.generations {
        assert!(!g.sql.as_deref().unwrap_or("").contains("payroll"), "{g:?}");
    }
    // Without it, it writes what it likes; the checker refuses it, so it is not returned.
    let mut s = settings();
    s.ablation = Ablation::named("unconstrained").expect("an arm");
    let (_, f) = ask_one("the secret table", s);
    assert_eq!(failed(&f).kind, FailureKind::Refused);
    assert_eq!(f.seals.len(), 1, "the unconstrained arm does not repair");
    let seal = &f.seals[0];
    assert_eq!(seal.seal.mode.decode, DecodeMode::Unconstrained);
    assert_eq!(
        seal.final_sql.as_deref(),
        Some("SELECT secret FROM payroll")
    );
    assert_eq!(seal.seal.stop, StopReason::Eos);

    // An unconstrained statement the checker passes is returned, sealed unconstrained.
    let mut s = settings();
    s.ablation = Ablation::named("unconstrained").expect("an arm");
    let (_, f) = ask_one("list the names", s);
    assert_eq!(generated(&f).sql, "SELECT name FROM employees");
    assert_eq!(f.seals[0].seal.mode.decode, DecodeMode::Unconstrained);
}

#[test]
fn failures_are_typed_and_sealed() {
    let mut s = settings();
    s.endpoint = None;
    let (_, f) = ask_one("list the names", s);
    assert_eq!(failed(&f).kind, FailureKind::EndpointUnset);
    assert!(failed(&f).message.starts_with("grid.endpoint is not set"));
    assert_eq!(f.seals.len(), 1, "an ask that never started is sealed");
    assert_eq!(
        (f.seals[0].seal.stop, f.seals[0].seal.steps),
        (StopReason::Error, 0)
    );

    let mut s = settings();
    s.endpoint = Some("ftp://nowhere".into());
    let (_, f) = ask_one("list the names", s);
    assert_eq!(failed(&f).kind, FailureKind::InvalidValue);

    let mut s = settings();
    s.max_tokens = 1;
    let (_, f) = ask_one("list the names", s);
    assert_eq!(failed(&f).kind, FailureKind::BudgetTooSmall);

    let mut s = settings();
    s.endpoint = Some("mock:scripted:/nonexistent/script.json".into());
    let (_, f) = ask_one("list the names", s);
    assert_eq!(failed(&f).kind, FailureKind::UnreadableFile);

    let mut j = job(0, "list the names", settings());
    j.ask.snapshot = serde_json::json!({"format": 1, "role": "nobody", "relations": []});
    let (_, done) = split(ask_all(vec![j], &mut NoJudge, MockDefaults::default()));
    assert_eq!(failed(&done[0]).kind, FailureKind::NothingGranted);

    // With audit off, nothing is handed on to record.
    let mut s = settings();
    s.audit = AuditLevel::Off;
    let (steps, f) = ask_one("list the names", s);
    assert!(steps.is_empty() && f.seals.is_empty());
    assert_eq!(generated(&f).sql, "SELECT name FROM employees");
}

#[test]
fn a_panic_fails_the_asks_of_its_loop_and_the_pipeline_goes_on() {
    let mut s = settings();
    s.fault = Some("panic".into());
    // Another endpoint setting: its own group, served after the panic.
    let mut other = settings();
    other.temperature = 0.5;
    let (_, done) = split(ask_all(
        vec![job(0, "list the names", s), job(1, "list the names", other)],
        &mut NoJudge,
        MockDefaults::default(),
    ));
    assert_eq!(done.len(), 2);
    assert_eq!(failed(&done[0]).kind, FailureKind::Internal);
    assert!(failed(&done[0]).message.contains("panic"));
    assert_eq!(generated(&done[1]).sql, "SELECT name FROM employees");
}

#[test]
fn asks_of_one_group_share_a_loop_and_each_gets_its_own_answer() {
    let questions = [
        "list the names",
        "who earns what",
        "this stays wrong",
        "list the names",
    ];
    let jobs = questions
        .iter()
        .enumerate()
        .map(|(i, q)| job(i as u64, q, settings()))
        .collect();
    let (steps, done) = split(ask_all(jobs, &mut NoJudge, MockDefaults::default()));
    record_verifies_and_replays(&steps, &done);
    let by_ask: BTreeMap<u64, &Finished> = done.iter().map(|f| (f.ask, f)).collect();
    assert_eq!(generated(by_ask[&1]).sql, "SELECT name FROM employees");
    assert_eq!(
        generated(by_ask[&3]).sql,
        "SELECT employee_id FROM salaries"
    );
    assert_eq!(failed(by_ask[&5]).kind, FailureKind::Refused);
    assert_eq!(generated(by_ask[&7]).sql, "SELECT name FROM employees");
}

/// A judge that fails the first `fail` statements it sees, at once.
struct Strict {
    fail: usize,
    seen: Vec<Candidate>,
}

impl Judge for Strict {
    fn judge(&mut self, c: &Candidate) -> Ruling {
        self.seen.push(c.clone());
        if self.seen.len() <= self.fail {
            Ruling::Now(Verdict::Fail {
                code: "42804".into(),
                message: format!("column \"name\" is of type text (judging {})", c.sql),
            })
        } else {
            Ruling::Now(Verdict::Pass)
        }
    }
}

#[test]
fn the_judge_sees_what_the_checker_passed_and_its_refusal_is_repaired_once() {
    let mut judge = Strict {
        fail: 1,
        seen: Vec::new(),
    };
    let (steps, done) = split(ask_all(
        vec![job(0, "list the names", settings())],
        &mut judge,
        MockDefaults::default(),
    ));
    record_verifies_and_replays(&steps, &done);
    let g = generated(&done[0]);
    assert_eq!(g.sql, "SELECT id FROM employees");
    assert_eq!(g.repaired_from, Some(1));
    assert!(g.repair_reasons[0].contains("is of type text"), "{g:?}");
    assert_eq!(judge.seen.len(), 2);
    assert!(judge.seen[0].repairable && !judge.seen[1].repairable);
    assert_eq!(judge.seen[0].current_user, "analyst");

    // A statement the checker refuses never reaches the judge; the judge's second
    // refusal is final, with its own code.
    let mut judge = Strict {
        fail: 2,
        seen: Vec::new(),
    };
    let (_, done) = split(ask_all(
        vec![
            job(0, "this stays wrong", settings()),
            job(1, "list the names", settings()),
        ],
        &mut judge,
        MockDefaults::default(),
    ));
    assert_eq!(judge.seen.len(), 2);
    assert!(judge.seen.iter().all(|c| c.ask == 3), "{:?}", judge.seen);
    let judged = done.iter().find(|f| f.ask == 3).expect("ask 3 answered");
    let e = failed(judged);
    assert_eq!(
        e.kind,
        FailureKind::Judged {
            code: "42804".into()
        }
    );
    assert_eq!(judged.seals.len(), 2);
}

/// A judge that hands every candidate to the host, as the worker's will.
struct Deferring(mpsc::Sender<Candidate>);

impl Judge for Deferring {
    fn judge(&mut self, c: &Candidate) -> Ruling {
        let _ = self.0.send(c.clone());
        Ruling::Later
    }
}

/// Collects what the pipeline's thread sends.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<Output>>>);

impl Outbox for Shared {
    fn send(&self, output: Output) {
        if let Ok(mut v) = self.0.lock() {
            v.push(output);
        }
    }
}

impl Shared {
    fn finished(&self) -> Vec<u64> {
        self.0
            .lock()
            .map(|v| {
                v.iter()
                    .filter_map(|o| match o {
                        Output::Finish(f) => Some(f.ask),
                        Output::Steps(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn take(&self) -> Vec<Output> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

#[test]
fn a_verdict_given_later_resumes_the_ask_where_it_waited() {
    let (inputs, rx) = mpsc::channel();
    let (candidates, judged) = mpsc::channel();
    let outbox = Shared::default();
    let thread = {
        let outbox = outbox.clone();
        std::thread::spawn(move || {
            grid_ask::engine::run(
                rx,
                &outbox,
                &mut Deferring(candidates),
                MockDefaults::default(),
            )
        })
    };
    let wait = Duration::from_secs(60);
    let send = |i: Input| inputs.send(i).expect("the pipeline listens");
    send(Input::Ask(Box::new(job(0, "list the names", settings()))));
    let first = judged.recv_timeout(wait).expect("a candidate");
    assert_eq!((first.ask, first.generation), (1, 1));
    assert_eq!(first.sql, "SELECT name FROM employees");
    // While the first waits for its verdict, another ask is served to its end.
    let quiet = job(1, "list the names", settings());
    send(Input::Ask(Box::new(quiet)));
    let second = judged.recv_timeout(wait).expect("a candidate");
    assert_eq!(second.ask, 3);
    send(Input::Verdict {
        ask: 3,
        verdict: Verdict::Pass,
    });
    // The first is refused: its repair runs, and comes back to the judge.
    send(Input::Verdict {
        ask: 1,
        verdict: Verdict::Fail {
            code: "42703".into(),
            message: "column \"name\" does not exist".into(),
        },
    });
    let repair = judged.recv_timeout(wait).expect("the repair's candidate");
    assert_eq!((repair.ask, repair.generation), (1, 2));
    assert_eq!(repair.sql, "SELECT id FROM employees");
    assert!(!repair.repairable);
    send(Input::Verdict {
        ask: 1,
        verdict: Verdict::Pass,
    });
    // A verdict for nothing parked is dropped.
    send(Input::Verdict {
        ask: 99,
        verdict: Verdict::Pass,
    });
    // An ask whose asker leaves while it waits is answered as cancelled, sealed.
    let leaving = job(2, "list the names", settings());
    let cancel = leaving.cancel.clone();
    send(Input::Ask(Box::new(leaving)));
    assert_eq!(judged.recv_timeout(wait).expect("a candidate").ask, 5);
    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + wait;
    while outbox.finished().len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(inputs);
    thread
        .join()
        .expect("the pipeline's thread ends when the host hangs up");
    let (steps, done) = split(outbox.take());
    record_verifies_and_replays(&steps, &done);
    let order: Vec<u64> = done.iter().map(|f| f.ask).collect();
    assert_eq!(order, [3, 1, 5]);
    assert_eq!(generated(&done[0]).sql, "SELECT name FROM employees");
    let g = generated(&done[1]);
    assert_eq!(
        (g.sql.as_str(), g.repaired_from),
        ("SELECT id FROM employees", Some(1))
    );
    assert_eq!(g.repair_reasons, ["column \"name\" does not exist"]);
    assert_eq!(done[1].seals.len(), 2);
    assert_eq!(failed(&done[2]).kind, FailureKind::Cancelled);
    assert_eq!(done[2].seals.len(), 1, "the abandoned ask keeps its seal");
}

#[test]
fn asks_that_arrive_while_a_loop_runs_join_it_and_are_answered_first() {
    let (inputs, rx) = mpsc::channel();
    let outbox = Shared::default();
    let thread = {
        let outbox = outbox.clone();
        std::thread::spawn(move || {
            grid_ask::engine::run(rx, &outbox, &mut NoJudge, MockDefaults::default())
        })
    };
    let send = |i: Input| inputs.send(i).expect("the pipeline listens");
    let mut long = settings();
    long.max_tokens = 4000;
    send(Input::Ask(Box::new(job(0, "a long one", long))));
    // Once the long generation is under way, asks of its group arrive.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !outbox
        .0
        .lock()
        .is_ok_and(|v| v.iter().any(|o| matches!(o, Output::Steps(_))))
    {
        assert!(Instant::now() < deadline, "the long ask never began");
        std::thread::sleep(Duration::from_millis(5));
    }
    for n in 1..=3 {
        send(Input::Ask(Box::new(job(n, "list the names", settings()))));
    }
    while outbox.finished().len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(inputs);
    thread.join().expect("the pipeline's thread ends");
    let (steps, done) = split(outbox.take());
    record_verifies_and_replays(&steps, &done);
    let order: Vec<u64> = done.iter().map(|f| f.ask).collect();
    assert_eq!(order.len(), 4, "{order:?}");
    assert_eq!(
        order[3], 1,
        "the short asks waited for the long one: {order:?}"
    );
    assert!(generated(&done[3]).sql.len() > 3000);
}
