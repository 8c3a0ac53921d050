//! `grid generate`: asks questions through the ask pipeline (`grid_ask`), the very one
//! `grid.ask()` runs in the extension's worker: the role's language from its catalog
//! snapshot, the prompt, the decode loop, the checker and its one repair, seals and
//! artifacts. There is no judge here (statements are unjudged), and nothing is written
//! to a database: the record goes to `--audit-out`.
//!
//! The role: a catalog snapshot (`--snapshot`, e.g. `grid.catalog_snapshot()` as the
//! role), or a Spider database (`--tables`, `--db`) whose every table the role may use.
//! `--policy` is its base policy (`grid.policy`'s JSON). The model: `--endpoint` (`-e`) in
//! `grid.endpoint`'s forms (a stock server too, `openai+http://…`; its key from the
//! variable `--api-key-env` names); the mocks run over `--tokenizer` (the built-in vocabulary
//! without it); `mock:scripted` without a script file writes the Spider gold of `--db`
//! (PostgreSQL spelling from `dev_gold_pg.sql` when it is beside `--tables`).
//!
//! One JSON line per ask, then the summary as the last line:
//! `{"asks":N,"answered":N,"refused":N,"declined":N,"failed":N,"generations":N,"parsed":N,
//! "dead_ends":N,"budget_completed":N,"forbidden_emitted":N,"audit_verified":N,
//! "replayed_identical":N}`. `parsed` re-checks each generation's output from scratch
//! in the role's language; `forbidden_emitted` counts outputs with a lexeme the role may
//! not write ([`grid_ask::StatementCheck`]); `audit_verified` and `replayed_identical`
//! count generations whose chain verifies and whose every mask replays bit for bit from
//! the artifacts (read back from `--audit-out` when given). With `--audit-out F`, the
//! artifacts are written to `F.artifacts.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::CliError;
use clap::Args;
use grid_ask::host::Output;
use grid_ask::replay::{replay_log, ArtifactSet};
use grid_ask::{
    ask_all, Ablation, Answer, Ask, AskSettings, AuditLevel, Finished, Job, MockDefaults, NoJudge,
    StatementCheck,
};
use grid_core::audit::{read_jsonl, verify, write_jsonl, Entry, Head, StopReason, VerifyOptions};
use grid_core::catalog::CatalogSnapshot;
use grid_core::decode::DecodeError;
use grid_core::{Dialect, Session};
use grid_endpoint::backend::script::{Script, ScriptEntry};
use grid_vocab::Vocabulary;
use serde_json::json;

use crate::corpus::read_policy;

#[derive(Args)]
pub struct GenerateArgs {
    /// `mock:scripted[:<script file>]`, `mock:adversarial`, the URL of a
    /// grid-endpoint/1 server, or a stock OpenAI-compatible server in the direct mode,
    /// `openai+http://host:port/v1?model=NAME&tokenizer=DIR` (`grid.endpoint`'s forms,
    /// `grid_endpoint::spec`).
    #[arg(long, short = 'e')]
    endpoint: String,
    /// The environment variable holding the endpoint's API key (sent as a bearer token;
    /// `grid.api_key`). A variable, not a value, so the key never shows in a process list.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The mocks' vocabulary: a directory or file `grid_vocab::Vocabulary::load` reads
    /// (the built-in vocabulary without it; a server serves its own).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// The role's catalog snapshot (JSON, as `grid.catalog_snapshot()` returns it).
    #[arg(long, conflicts_with_all = ["tables", "db"], required_unless_present = "tables")]
    snapshot: Option<PathBuf>,
    /// Spider-format tables.json: the role may use every table of `--db`.
    #[arg(long, requires = "db")]
    tables: Option<PathBuf>,
    /// The database of `--tables`.
    #[arg(long, requires = "tables")]
    db: Option<String>,
    /// The role's name (with `--tables`).
    #[arg(long, default_value = "grid")]
    role: String,
    /// The role's base policy (JSON file; default: every verb, no bans).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// One question.
    #[arg(
        long,
        conflicts_with = "questions",
        required_unless_present = "questions"
    )]
    question: Option<String>,
    /// A file of questions, one per line.
    #[arg(long)]
    questions: Option<PathBuf>,
    /// Asks to run (questions are reused in turn); default one per question.
    #[arg(long)]
    n: Option<usize>,
    /// Seeds the sampling: generation g samples with a hash of (seed, g).
    #[arg(long, default_value_t = grid_ask::SEED)]
    seed: u64,
    /// Most tokens per generation (EOS not counted; `grid.max_tokens`).
    #[arg(long, default_value_t = 96)]
    max_tokens: u32,
    /// Sampling temperature (`grid.temperature`; 0 is greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// One whole ask, end to end (`grid.timeout`), in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    timeout_ms: u64,
    /// `none`, `no_repair`, `prompt_repair` or `unconstrained` (`grid.ablation`).
    #[arg(long, default_value = "none", value_parser = ["none", "no_repair", "prompt_repair", "unconstrained"])]
    ablation: String,
    /// Teach the model to decline in the prompt (`CANNOT ANSWER 'reason'`;
    /// `grid.decline`). The grammar admits a decline with or without it.
    #[arg(long)]
    decline: bool,
    /// Write the JSONL audit log here (and its artifacts to `<file>.artifacts.json`).
    #[arg(long)]
    audit_out: Option<PathBuf>,
}

/// The scripted mock's script: each `dev.json` question of `db` targets its gold SQL
/// (the PostgreSQL spelling from `dev_gold_pg.sql`, same order, when present).
fn spider_script(tables: &Path, db: &str) -> Script {
    let dir = tables.parent().unwrap_or(Path::new("."));
    let Ok(dev) = std::fs::read_to_string(dir.join("dev.json")) else {
        return Script::default();
    };
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(&dev)
    else {
        return Script::default();
    };
    let pg: Vec<String> = std::fs::read_to_string(dir.join("dev_gold_pg.sql"))
        .map(|t| {
            t.lines()
                .map(|l| l.rsplit_once('\t').map_or(l, |x| x.0).to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut entries = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if it["db_id"].as_str() != Some(db) {
            continue;
        }
        let (Some(q), Some(sql)) = (it["question"].as_str(), it["query"].as_str()) else {
            continue;
        };
        let sql = pg
            .get(i)
            .filter(|_| pg.len() == items.len())
            .map_or(sql.to_string(), String::clone);
        entries.push(ScriptEntry {
            pattern: q.to_string(),
            sql,
        });
    }
    Script { entries }
}

fn read_questions(a: &GenerateArgs) -> Result<Vec<String>, CliError> {
    let qs: Vec<String> = match (&a.question, &a.questions) {
        (Some(q), _) => vec![q.clone()],
        (None, Some(p)) => std::fs::read_to_string(p)
            .map_err(|e| {
                CliError::Io(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", p.display()),
                ))
            })?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        (None, None) => vec![],
    };
    if qs.is_empty() {
        return Err(CliError::NoQuestions);
    }
    Ok(qs)
}

/// The role's catalog snapshot: the file, or every table of the Spider database.
fn snapshot(a: &GenerateArgs, dialect: &Dialect) -> Result<CatalogSnapshot, CliError> {
    if let Some(path) = &a.snapshot {
        let text = std::fs::read_to_string(path)?;
        return CatalogSnapshot::from_json(&text)
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())));
    }
    let (Some(tables), Some(db)) = (&a.tables, &a.db) else {
        return Err(CliError::Input(
            "give --snapshot, or --tables and --db".into(),
        ));
    };
    let reserved = |w: &str| dialect.is_reserved(w);
    let schema = grid_core::schema::load_spider(tables, &reserved)?
        .into_iter()
        .find(|s| s.db_id == *db)
        .ok_or_else(|| CliError::UnknownDb(db.clone()))?;
    Ok(CatalogSnapshot::granting_all(&schema, &a.role))
}

/// Every output of the pipeline, split: the log a host stores (seals anchored in the
/// order the asks finished) and the finished asks.
fn record(outputs: Vec<Output>) -> (Vec<Entry>, Vec<Finished>, ArtifactSet) {
    let mut log = Vec::new();
    let mut done = Vec::new();
    let mut artifacts = ArtifactSet::default();
    let mut head = Head::genesis();
    for o in outputs {
        match o {
            Output::Steps(steps) => log.extend(steps.into_iter().map(Entry::Step)),
            Output::Taken { .. } | Output::Started { .. } | Output::Warmed { .. } => {}
            Output::Finish(f) => {
                for s in &f.seals {
                    let seal = s.anchored(head);
                    head = seal.head();
                    log.push(Entry::Seal(seal));
                    for a in &s.artifacts {
                        artifacts.insert(a.artifact().clone());
                    }
                }
                done.push(*f);
            }
        }
    }
    (log, done, artifacts)
}

pub fn run(a: &GenerateArgs) -> Result<(), CliError> {
    let base = read_policy(a.policy.as_deref())?;
    let dialect = Dialect::postgres_without_comments()?;
    let snapshot = snapshot(a, &dialect)?;
    let questions = read_questions(a)?;
    let n = a.n.unwrap_or(questions.len());
    let ablation = Ablation::named(&a.ablation)
        .ok_or_else(|| CliError::Input(format!("--ablation {}", a.ablation)))?;
    let defaults = MockDefaults {
        vocabulary: match &a.tokenizer {
            Some(t) => Some(Arc::new(Vocabulary::load(t)?)),
            None => None,
        },
        script: match (&a.tables, &a.db) {
            (Some(t), Some(db)) => Some(spider_script(t, db)),
            _ => None,
        },
    };
    let settings = AskSettings {
        endpoint: Some(a.endpoint.clone()),
        model: None,
        max_tokens: a.max_tokens,
        temperature: a.temperature,
        timeout_ms: a.timeout_ms,
        audit: AuditLevel::Full,
        ablation,
        fault: None,
        judge: true,
        decline: a.decline,
    };
    let snapshot_json =
        serde_json::to_value(&snapshot).map_err(|e| CliError::Input(e.to_string()))?;
    let policy_json = a
        .policy
        .as_ref()
        .map(|_| serde_json::from_str(&base.canonical_json()))
        .transpose()
        .map_err(|e| CliError::Input(e.to_string()))?;
    let api_key = match &a.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            CliError::Input(format!("--api-key-env {var}: the variable is not set"))
        })?),
        None => None,
    };
    let jobs: Vec<Job> = (0..n)
        .map(|i| {
            let ask = Ask {
                question: questions[i % questions.len()].clone(),
                snapshot: snapshot_json.clone(),
                session_user: a.role.clone(),
                current_user: snapshot.role.clone(),
                database: a.db.clone().unwrap_or_default(),
                policy: policy_json.clone(),
                explain: false,
                examples: Vec::new(),
                offered: None,
                parsed: None,
                settings: settings.clone(),
            };
            Job {
                seed: a.seed,
                api_key: api_key.clone(),
                ..Job::new([2 * i as u64 + 1, 2 * i as u64 + 2], ask)
            }
        })
        .collect();
    let (log, done, artifacts) = record(ask_all(jobs, &mut NoJudge, defaults));

    let entries: Vec<Entry> = match &a.audit_out {
        Some(path) => {
            let f = std::fs::File::create(path)?;
            let mut w = std::io::BufWriter::new(f);
            write_jsonl(&mut w, &log)?;
            std::io::Write::flush(&mut w)?;
            std::fs::write(
                artifacts_path(path),
                serde_json::to_string(&artifacts.to_json())
                    .map_err(|e| CliError::Audit(e.to_string()))?,
            )?;
            let f = std::fs::File::open(path)?;
            read_jsonl(std::io::BufReader::new(f)).map_err(|e| CliError::Audit(e.to_string()))?
        }
        None => log,
    };

    let dialect = Arc::new(dialect);
    let language = snapshot
        .language(dialect.clone(), &base)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let check = StatementCheck::for_snapshot(&dialect, &snapshot, &base)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let mut session = Session::new(&language);
    let mut t = Tally::default();
    let mut done = done;
    done.sort_by_key(|f| f.ask);
    for f in &done {
        let mut generations = Vec::new();
        for g in &f.generations {
            let text = g.sql.clone().unwrap_or_default();
            let ran = g.stop.is_some_and(|s| s != StopReason::Error);
            let parsed = ran && session.complete(text.as_bytes());
            let bad = if ran {
                check.forbidden(&text)
            } else {
                Vec::new()
            };
            t.generations += 1;
            t.parsed += u64::from(parsed);
            t.dead_ends += u64::from(matches!(g.decode_error, Some(DecodeError::DeadEnd { .. })));
            t.completed += u64::from(g.stop == Some(StopReason::BudgetCompleted));
            t.forbidden += u64::from(!bad.is_empty());
            generations.push(json!({
                "generation": g.generation,
                "stop": g.stop.map(StopReason::name),
                "sql": g.sql,
                "tokens": g.tokens,
                "completed_tokens": g.completed_tokens,
                "parsed": parsed,
                "forbidden": bad,
                "violations": g.violations,
                "error": g.failure.as_ref().map(|e| e.to_string()),
            }));
        }
        let (sql, error) = match &f.answer {
            Answer::Generated(g) => (Some(g.sql.clone()), None),
            Answer::Failed(e) => (
                None,
                Some(json!({"kind": e.kind.name(), "message": e.message})),
            ),
        };
        match &f.answer {
            Answer::Generated(_) => t.answered += 1,
            Answer::Failed(e) if e.kind == grid_ask::FailureKind::Refused => t.refused += 1,
            Answer::Failed(e) if e.kind == grid_ask::FailureKind::Declined => t.declined += 1,
            Answer::Failed(_) => t.failed += 1,
        }
        let question = done_question(&questions, f.ask);
        println!(
            "{}",
            json!({
                "ask": f.ask,
                "question": question,
                "sql": sql,
                "error": error,
                "generations": generations,
            })
        );
    }

    let audit_verified = match verify(&entries, &VerifyOptions::default()) {
        Ok(s) => s.generations,
        Err(e) => {
            eprintln!("grid generate: the audit log does not verify: {e}");
            0
        }
    };
    let replayed = match replay_log(&entries, &artifacts, &VerifyOptions::default()) {
        Ok(s) => s.generations,
        Err(e) => {
            eprintln!("grid generate: the audit log does not replay: {e}");
            0
        }
    };
    println!(
        "{}",
        json!({
            "asks": done.len(),
            "answered": t.answered,
            "refused": t.refused,
            "declined": t.declined,
            "failed": t.failed,
            "generations": t.generations,
            "parsed": t.parsed,
            "dead_ends": t.dead_ends,
            "budget_completed": t.completed,
            "forbidden_emitted": t.forbidden,
            "audit_verified": audit_verified,
            "replayed_identical": replayed,
        })
    );
    Ok(())
}

/// The question of ask `ask` (ask i has id 2i + 1).
fn done_question(questions: &[String], ask: u64) -> &str {
    let i = (ask.saturating_sub(1) / 2) as usize;
    questions
        .get(i % questions.len().max(1))
        .map_or("", String::as_str)
}

/// Where the artifacts of the log at `log` are written (`<log>.artifacts.json`).
pub fn artifacts_path(log: &Path) -> PathBuf {
    let mut p = log.as_os_str().to_owned();
    p.push(".artifacts.json");
    PathBuf::from(p)
}

#[derive(Default)]
struct Tally {
    answered: u64,
    refused: u64,
    declined: u64,
    failed: u64,
    generations: u64,
    parsed: u64,
    dead_ends: u64,
    completed: u64,
    forbidden: u64,
}
