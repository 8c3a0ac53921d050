//! What the pipeline's test files share: the analyst's snapshot, a job for a question,
//! and the checks every recorded ask must pass (its records come before its answer; the
//! log verifies and every generation replays from its artifacts).

#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use grid_ask::host::Output;
use grid_ask::{ask_all, Ask, AskSettings, Finished, Job, MockDefaults, NoJudge};
use grid_core::audit::{verify, Entry, Head, StepRecord, VerifyOptions};

/// The analyst may read `employees`, and of `salaries` only `employee_id` (it may update
/// `amount`, so the mask offers it; the checker refuses reading it).
pub const SNAPSHOT: &str = include_str!("../fixtures/analyst_snapshot.json");

pub fn job(n: u64, question: &str, settings: AskSettings) -> Job {
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
            examples: Vec::new(),
            offered: None,
            parsed: None,
            settings,
        },
    )
}

/// The step records and the finished asks, in the order they were sent; checks that every
/// ask's records came before its answer.
pub fn split(outputs: Vec<Output>) -> (Vec<StepRecord>, Vec<Finished>) {
    let mut steps = Vec::new();
    let mut done = Vec::new();
    for o in outputs {
        match o {
            Output::Steps(mut s) => steps.append(&mut s),
            Output::Taken { .. } | Output::Started { .. } | Output::Warmed { .. } => {}
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
pub fn record_verifies_and_replays(steps: &[StepRecord], done: &[Finished]) {
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
            artifacts.insert(a.artifact().clone());
        }
    }
    // What a file beside a log holds reads back the same.
    let artifacts = grid_ask::replay::ArtifactSet::from_json(&artifacts.to_json())
        .expect("the artifact list reads back");
    let replayed = grid_ask::replay::replay_log(&log, &artifacts, &VerifyOptions::default())
        .expect("every mask replays from the artifacts");
    assert_eq!(replayed.generations, summary.generations);
}

/// One ask without a judge: its step records (checked as above) and its answer.
pub fn ask_one(question: &str, settings: AskSettings) -> (Vec<StepRecord>, Finished) {
    let (steps, mut done) = split(ask_all(
        vec![job(0, question, settings)],
        &mut NoJudge,
        MockDefaults::default(),
    ));
    record_verifies_and_replays(&steps, &done);
    assert_eq!(done.len(), 1);
    (steps, done.remove(0))
}

/// `contents()` in a file of the temporary directory named after `name` and this process,
/// written the first time `cell` is asked: the tests of a binary run in parallel threads
/// of one process, and a file rewritten under a reader reads as empty.
pub fn file_once(
    cell: &'static OnceLock<PathBuf>,
    name: &str,
    contents: impl FnOnce() -> Vec<u8>,
) -> &'static Path {
    cell.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("{name}-{}.json", std::process::id()));
        std::fs::write(&path, contents()).expect("write a test file");
        path
    })
}
