//! `grid generate` end to end: on a catalog snapshot with the built-in vocabulary (no
//! data needed: the checker's repair, the ablations, the record), and on two Spider dev
//! schemas (a small slice of `bench/generate.sh`): scripted and adversarial mocks, tiny
//! budgets among them; every output parses, nothing forbidden, and `grid audit verify` /
//! `grid audit replay` accept the logs. The Spider part skips without `../shared/data`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("GRID_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    dir.join("spider/dev.json").exists().then_some(dir)
}

fn grid(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_grid"))
        .args(args)
        .output()
        .expect("grid runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn questions(data: &Path, db: &str, out: &Path) {
    let dev: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("spider/dev.json")).expect("dev.json"),
    )
    .expect("dev.json is JSON");
    let qs: Vec<String> = dev
        .as_array()
        .expect("an array")
        .iter()
        .filter(|it| it["db_id"] == db)
        .filter_map(|it| it["question"].as_str().map(str::to_string))
        .collect();
    assert!(!qs.is_empty(), "{db} has questions");
    std::fs::write(out, qs.join("\n") + "\n").expect("write questions");
}

#[test]
fn mock_generations_parse_verify_and_replay() {
    let Some(data) = data_dir() else {
        eprintln!("SKIP mock_generations_parse_verify_and_replay: ../shared/data is absent (set GRID_DATA_DIR to run it)");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("grid-generate-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let policy = tmp.join("policy.json");
    std::fs::write(&policy, r#"{"verbs":["select"]}"#).expect("policy");
    let tables = data.join("spider/tables.json");
    let tok = data.join("tokenizers/gpt2");
    let mut total = 0;
    for (db, endpoint, budget, seed) in [
        ("concert_singer", "mock:scripted", "96", "11"),
        ("pets_1", "mock:scripted", "10", "12"),
        ("concert_singer", "mock:adversarial", "9", "13"),
        ("pets_1", "mock:adversarial", "40", "14"),
    ] {
        let qfile = tmp.join(format!("{db}.txt"));
        questions(&data, db, &qfile);
        let log = tmp.join(format!("{db}-{budget}.jsonl"));
        let (ok, out, err) = grid(&[
            "generate",
            "--endpoint",
            endpoint,
            "--tokenizer",
            tok.to_str().unwrap_or_default(),
            "--tables",
            tables.to_str().unwrap_or_default(),
            "--db",
            db,
            "--policy",
            policy.to_str().unwrap_or_default(),
            "--questions",
            qfile.to_str().unwrap_or_default(),
            "--n",
            "6",
            "--seed",
            seed,
            "--max-tokens",
            budget,
            "--audit-out",
            log.to_str().unwrap_or_default(),
        ]);
        assert!(ok, "grid generate failed: {err}");
        let last: serde_json::Value =
            serde_json::from_str(out.lines().last().unwrap_or_default()).expect("summary line");
        let n = |k: &str| last[k].as_u64().unwrap_or(u64::MAX);
        assert_eq!(n("asks"), 6, "{last}");
        let generations = n("generations");
        assert!((6..=12).contains(&generations), "{last}");
        for k in ["parsed", "audit_verified", "replayed_identical"] {
            assert_eq!(n(k), generations, "{db} {endpoint} {budget}: {k} in {last}");
        }
        assert_eq!((n("dead_ends"), n("forbidden_emitted")), (0, 0), "{last}");
        assert_eq!(n("answered") + n("refused") + n("failed"), 6, "{last}");
        if endpoint == "mock:adversarial" && budget == "9" {
            assert_eq!(
                n("budget_completed"),
                generations,
                "the adversary never ends on its own: {last}"
            );
        }
        let budget_n: usize = budget.parse().unwrap_or(0);
        for line in out.lines().take(6) {
            let ask: serde_json::Value = serde_json::from_str(line).expect("ask line");
            for g in ask["generations"].as_array().expect("generations") {
                assert!(
                    g["tokens"].as_u64().unwrap_or(u64::MAX) as usize <= budget_n,
                    "{line}"
                );
            }
        }
        let log_s = log.to_str().unwrap_or_default();
        let (ok, _, err) = grid(&["audit", "verify", log_s]);
        assert!(ok, "grid audit verify: {err}");
        let (ok, out, err) = grid(&["audit", "replay", log_s]);
        assert!(
            ok && out.contains("recomputed identical"),
            "grid audit replay: {out}{err}"
        );
        total += generations;
    }
    // A changed token breaks the chain; a changed blocked count with a recomputed hash
    // chain would still fail the replay, but the chain catches it first.
    let log = tmp.join("pets_1-40.jsonl");
    let text = std::fs::read_to_string(&log).expect("log");
    let tampered = text.replacen("\"blocked_count\":", "\"blocked_count\":1", 1);
    let bad = tmp.join("tampered.jsonl");
    std::fs::write(&bad, tampered).expect("write");
    let (ok, _, _) = grid(&["audit", "verify", bad.to_str().unwrap_or_default()]);
    assert!(!ok, "a tampered log verifies");
    assert!(total >= 24);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The analyst of grid-ask's tests (it may read `employees`, and of `salaries` only
/// `employee_id`), and what its scripted "model" writes.
const SNAPSHOT: &str = include_str!("../../grid-ask/tests/fixtures/analyst_snapshot.json");
const SCRIPT: &str = include_str!("../../grid-ask/tests/fixtures/analyst_script.json");

/// The pipeline grid.ask runs, from the command line: the checker's repair, the
/// ablations sealed as such, a log that verifies and replays from its artifacts, and
/// the forbidden-output check on what was written.
#[test]
fn generate_runs_the_ask_pipeline_on_a_snapshot() {
    let tmp = std::env::temp_dir().join(format!("grid-generate-snap-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("snapshot.json");
    std::fs::write(&snapshot, SNAPSHOT).expect("snapshot");
    let script = tmp.join("script.json");
    std::fs::write(&script, SCRIPT).expect("script");
    let questions = tmp.join("questions.txt");
    std::fs::write(
        &questions,
        "list the names\nwho earns what\nthe secret table\n",
    )
    .expect("questions");
    let endpoint = format!("mock:scripted:{}", script.display());
    let run = |ablation: &str| {
        let log = tmp.join(format!("{ablation}.jsonl"));
        let (ok, out, err) = grid(&[
            "generate",
            "--endpoint",
            &endpoint,
            "--snapshot",
            snapshot.to_str().unwrap_or_default(),
            "--questions",
            questions.to_str().unwrap_or_default(),
            "--max-tokens",
            "40",
            "--ablation",
            ablation,
            "--audit-out",
            log.to_str().unwrap_or_default(),
        ]);
        assert!(ok, "grid generate --ablation {ablation}: {err}");
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        let log_s = log.to_str().unwrap_or_default().to_string();
        let (ok, out, err) = grid(&["audit", "replay", &log_s]);
        assert!(ok && out.contains("recomputed identical"), "{out}{err}");
        (lines, std::fs::read_to_string(&log).expect("log"))
    };

    let (lines, log) = run("none");
    assert_eq!(lines[0]["sql"], "SELECT name FROM employees");
    // The refused reference is rewound (the scripted model, which spells its script, does
    // not find another way): two generations, the second replaying the first's tokens.
    assert_eq!(lines[1]["generations"].as_array().map(Vec::len), Some(2));
    assert!(log.contains("\"kind\":\"replayed\""), "{log}");
    assert!(log.contains("\"kind\":\"banned\""), "{log}");
    assert_eq!(lines[2]["sql"], serde_json::Value::Null, "{}", lines[2]);
    let last = &lines[3];
    assert_eq!(last["asks"], 3);
    assert_eq!(last["answered"], 1);
    assert_eq!(
        last["forbidden_emitted"], 0,
        "the mask kept payroll out: {last}"
    );
    assert_eq!(last["replayed_identical"], last["generations"]);
    assert!(!log.contains("unconstrained"));

    let (lines, log) = run("prompt_repair");
    assert_eq!(
        lines[1]["sql"], "SELECT employee_id FROM salaries",
        "repaired by asking again"
    );
    assert_eq!(lines[1]["generations"].as_array().map(Vec::len), Some(2));
    assert!(!log.contains("\"kind\":\"replayed\""), "{log}");

    let (lines, log) = run("no_repair");
    assert_eq!(lines[1]["error"]["kind"], "refused");
    assert_eq!(lines[1]["generations"].as_array().map(Vec::len), Some(1));
    assert_eq!(lines[3]["generations"], 3);
    assert!(!log.contains("unconstrained"));

    let (lines, log) = run("unconstrained");
    assert_eq!(lines[0]["sql"], "SELECT name FROM employees");
    assert_eq!(
        lines[2]["error"]["kind"], "refused",
        "the checker still refuses"
    );
    assert_eq!(
        lines[2]["generations"][0]["sql"], "SELECT secret FROM payroll",
        "without the mask the model wrote it"
    );
    // `amount` is a word of the role's language (it may update it), payroll is not.
    assert_eq!(lines[3]["forbidden_emitted"], 1, "{}", lines[3]);
    assert_eq!(
        log.matches("\"decode\":\"unconstrained\"").count(),
        3,
        "{log}"
    );

    // The check the fault suite calls, on what was written.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_grid"))
        .args([
            "check-output",
            "--snapshot",
            snapshot.to_str().unwrap_or_default(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("grid check-output runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "\"SELECT name FROM employees\"").expect("write");
        writeln!(stdin, "\"SELECT secret FROM payroll\"").expect("write");
    }
    let out = child.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(1));
    let verdicts: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(verdicts[0]["forbidden"], serde_json::json!([]));
    assert!(verdicts[1]["forbidden"]
        .as_array()
        .is_some_and(|v| !v.is_empty()));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `grid generate` is the pipeline: its log holds, seal for seal, what `grid_ask::ask_all`
/// gives for the same ask (the extension's pgrx test shows the same of `grid.ask`).
#[test]
fn generate_seals_what_the_pipeline_seals() {
    let tmp = std::env::temp_dir().join(format!("grid-generate-same-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("snapshot.json");
    std::fs::write(&snapshot, SNAPSHOT).expect("snapshot");
    let script = tmp.join("script.json");
    std::fs::write(&script, SCRIPT).expect("script");
    let endpoint = format!("mock:scripted:{}", script.display());
    let log = tmp.join("log.jsonl");
    let (ok, _, err) = grid(&[
        "generate",
        "--endpoint",
        &endpoint,
        "--snapshot",
        snapshot.to_str().unwrap_or_default(),
        "--question",
        "who earns what",
        "--max-tokens",
        "40",
        "--audit-out",
        log.to_str().unwrap_or_default(),
    ]);
    assert!(ok, "{err}");
    let file = std::fs::File::open(&log).expect("log");
    let written: Vec<grid_core::audit::Seal> =
        grid_core::audit::read_jsonl(std::io::BufReader::new(file))
            .expect("log reads")
            .into_iter()
            .filter_map(|e| match e {
                grid_core::audit::Entry::Seal(s) => Some(s),
                grid_core::audit::Entry::Step(_) => None,
            })
            .collect();
    let job = grid_ask::Job::new(
        [1, 2],
        grid_ask::Ask {
            question: "who earns what".into(),
            snapshot: serde_json::from_str(SNAPSHOT).expect("snapshot"),
            session_user: "grid".into(),
            current_user: "analyst".into(),
            database: String::new(),
            policy: None,
            explain: false,
            examples: Vec::new(),
            offered: None,
            parsed: None,
            settings: grid_ask::AskSettings {
                endpoint: Some(endpoint.clone()),
                model: None,
                max_tokens: 40,
                temperature: 0.0,
                timeout_ms: 60_000,
                audit: grid_ask::AuditLevel::Full,
                ablation: grid_ask::Ablation::default(),
                fault: None,
                judge: true,
                decline: false,
            },
        },
    );
    let sealed: Vec<grid_core::audit::Seal> = grid_ask::ask_all(
        vec![job],
        &mut grid_ask::NoJudge,
        grid_ask::MockDefaults::default(),
    )
    .into_iter()
    .filter_map(|o| match o {
        grid_ask::Output::Finish(f) => Some(f),
        grid_ask::Output::Steps(_)
        | grid_ask::Output::Taken { .. }
        | grid_ask::Output::Started { .. }
        | grid_ask::Output::Warmed { .. } => None,
    })
    .flat_map(|f| f.seals.into_iter().map(|s| s.seal))
    .collect();
    assert_eq!(written.len(), 2, "a first attempt and its repair");
    assert_eq!(sealed.len(), written.len());
    for (a, b) in sealed.iter().zip(&written) {
        assert_eq!(
            (a.generation, a.stop, a.steps, a.last_step_hash),
            (b.generation, b.stop, b.steps, b.last_step_hash)
        );
        assert_eq!(
            (a.fingerprints, a.mode, &a.meta),
            (b.fingerprints, b.mode, &b.meta)
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `-e openai+http://…` reaches the direct mode through the same pipeline: with nothing
/// listening, the ask fails as `endpoint_unreachable`; a form without its tokenizer is
/// refused with what to add; a key variable that is not set is an input error.
#[test]
fn generate_reaches_a_stock_server_through_the_direct_mode() {
    let tmp = std::env::temp_dir().join(format!("grid-generate-direct-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("snapshot.json");
    std::fs::write(&snapshot, SNAPSHOT).expect("snapshot");
    let tok = tmp.join("tokenizer.json");
    let vocab = grid_endpoint::backend::builtin::builtin_vocabulary().expect("vocabulary");
    std::fs::write(&tok, vocab.to_served_json()).expect("tokenizer");
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let snap = snapshot.to_str().unwrap_or_default();
    let run = |endpoint: &str, extra: &[&str]| {
        let mut args = vec![
            "generate",
            "-e",
            endpoint,
            "--snapshot",
            snap,
            "--question",
            "list the names",
        ];
        args.extend_from_slice(extra);
        grid(&args)
    };
    let down = format!(
        "openai+http://127.0.0.1:{port}/v1?model=m&tokenizer={}",
        tok.display()
    );
    let (_, out, err) = run(&down, &[]);
    assert!(out.contains("endpoint_unreachable"), "{out}{err}");
    let (_, out, err) = run(&format!("openai+http://127.0.0.1:{port}/v1?model=m"), &[]);
    assert!(
        out.contains("invalid_value") && out.contains("tokenizer= is missing"),
        "{out}{err}"
    );
    let (ok, out, err) = run(&down, &["--api-key-env", "GRID_TEST_UNSET_VARIABLE_17"]);
    assert!(
        !ok && err.contains("GRID_TEST_UNSET_VARIABLE_17"),
        "{out}{err}"
    );
}

/// A scripted model that declines, through `grid generate` with and without the decline
/// taught (`--decline`): the ask fails as `declined` with the model's reason, counted
/// apart; its one generation is written, parses in the role's language, holds nothing
/// forbidden (`grid check-output` passes it), and `grid audit verify` and `grid audit
/// replay` accept the log, its masks recomputed identical.
#[test]
fn a_declining_model_is_recorded_verified_and_replayed() {
    let tmp = std::env::temp_dir().join(format!("grid-generate-decline-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("snapshot.json");
    std::fs::write(&snapshot, SNAPSHOT).expect("snapshot");
    let script = tmp.join("script.json");
    std::fs::write(&script, SCRIPT).expect("script");
    let questions = tmp.join("questions.txt");
    std::fs::write(
        &questions,
        "what is the phase of the moon\nlist the names\n",
    )
    .expect("questions");
    let endpoint = format!("mock:scripted:{}", script.display());
    let decline = "CANNOT ANSWER 'no moon data'";
    for taught in [false, true] {
        let log = tmp.join(format!("decline-{taught}.jsonl"));
        let mut args = vec![
            "generate",
            "--endpoint",
            &endpoint,
            "--snapshot",
            snapshot.to_str().unwrap_or_default(),
            "--questions",
            questions.to_str().unwrap_or_default(),
            "--max-tokens",
            "40",
            "--audit-out",
            log.to_str().unwrap_or_default(),
        ];
        if taught {
            args.push("--decline");
        }
        let (ok, out, err) = grid(&args);
        assert!(ok, "grid generate: {err}");
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(lines[0]["error"]["kind"], "declined", "{}", lines[0]);
        assert!(
            lines[0]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("the model declined: no moon data")),
            "{}",
            lines[0]
        );
        let g = &lines[0]["generations"];
        assert_eq!(g.as_array().map(Vec::len), Some(1), "no repair: {g}");
        assert_eq!(g[0]["sql"], decline);
        assert_eq!(g[0]["parsed"], true);
        assert_eq!(g[0]["forbidden"], serde_json::json!([]));
        assert_eq!(lines[1]["sql"], "SELECT name FROM employees");
        let last = &lines[2];
        assert_eq!(
            (
                &last["answered"],
                &last["declined"],
                &last["refused"],
                &last["failed"]
            ),
            (&1.into(), &1.into(), &0.into(), &0.into()),
            "{last}"
        );
        assert_eq!(last["audit_verified"], last["generations"], "{last}");
        assert_eq!(last["replayed_identical"], last["generations"], "{last}");
        let log_s = log.to_str().unwrap_or_default();
        let (ok, _, err) = grid(&["audit", "verify", log_s]);
        assert!(ok, "grid audit verify: {err}");
        let (ok, out, err) = grid(&["audit", "replay", log_s]);
        assert!(ok && out.contains("recomputed identical"), "{out}{err}");
        let text = std::fs::read_to_string(&log).expect("log");
        let artifacts =
            std::fs::read_to_string(tmp.join(format!("decline-{taught}.jsonl.artifacts.json")))
                .expect("artifacts");
        assert_eq!(
            artifacts.contains("\"decline\":true"),
            taught,
            "the prompt artifact says whether it taught the decline"
        );
        assert!(!text.is_empty());
    }
    // The check the fault suite calls passes a decline: it writes nothing but its reason.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_grid"))
        .args([
            "check-output",
            "--snapshot",
            snapshot.to_str().unwrap_or_default(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("grid check-output runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{}", serde_json::json!(decline)).expect("write");
    }
    let out = child.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let _ = std::fs::remove_dir_all(&tmp);
}
