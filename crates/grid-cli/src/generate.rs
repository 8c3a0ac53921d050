//! `grid generate`: runs generations through the decode loop against an endpoint and
//! checks every output independently of the mask.
//!
//! `--endpoint mock:scripted|mock:adversarial` calls the reference server's mock backend
//! in process (no sockets); the scripted mock's script is built from `dev.json` and
//! `dev_gold_pg.sql` beside `--tables` when they are there (question → PostgreSQL gold
//! SQL of `--db`). A URL is a `grid-endpoint/1` server, reached with `EndpointClient`.
//!
//! One JSON line per generation, then the summary as the last line:
//! `{"generations":N,"parsed":N,"dead_ends":N,"budget_completed":N,"forbidden_emitted":N,
//! "audit_verified":N,"replayed_identical":N,"round_trips":N}`. `parsed` re-checks each
//! output from scratch; `forbidden_emitted` counts outputs with a lexeme the role may not
//! write ([`crate::statement_check`]); `audit_verified` and `replayed_identical` count
//! generations whose chain verifies and whose every mask replays bit for bit from the
//! artefacts (read back from `--audit-out` when given). With `--audit-out F`, the
//! artefacts a replay needs are listed in `F.artefacts.json`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use grid_core::audit::{
    read_jsonl, replay, text_digest, verify, write_jsonl, AuditLog, Entry, SealMeta, StopReason,
    VerifyOptions,
};
use grid_core::decode::{DecodeError, DecodeOptions, Decoder, GenerationSpec, Model, Recomputer};
use grid_core::mask::Masker;
use grid_core::reserve::{ReserveTable, Speller};
use grid_core::trie::{TokenTrie, TrieError};
use grid_core::{Dialect, GridError, Language, Lexicon, Schema, Session};
use grid_endpoint::backend::mock::{AdversarialMock, ScriptedMock};
use grid_endpoint::backend::script::{Script, ScriptEntry};
use grid_endpoint::model::{InProcess, Remote, SamplingPlan};
use grid_endpoint::{Backend, ClientConfig, EndpointClient, EndpointSpec};
use grid_vocab::{VocabError, Vocabulary};
use serde_json::json;
use thiserror::Error;

use crate::artefacts::{Artefact, Manifest};
use crate::corpus::read_policy;
use crate::statement_check::StatementCheck;

#[derive(Args)]
pub struct GenerateArgs {
    /// `mock:scripted[:<script file>]`, `mock:adversarial`, or the URL of a grid-endpoint/1
    /// server (`grid.endpoint`'s forms; without a script file, the scripted mock's script
    /// is the Spider gold of `--db`).
    #[arg(long)]
    endpoint: String,
    /// Tokenizer: a directory or file `grid_vocab::Vocabulary::load` reads.
    #[arg(long)]
    tokenizer: PathBuf,
    /// Spider-format tables.json.
    #[arg(long)]
    tables: PathBuf,
    /// The database whose schema the role sees.
    #[arg(long)]
    db: String,
    /// Policy JSON file (default: every verb, no bans).
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
    /// Generations to run (questions are reused in turn); default one per question.
    #[arg(long)]
    n: Option<usize>,
    /// Seed of the first generation's sampling; generation i uses a hash of (seed, i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Most tokens per output (EOS not counted).
    #[arg(long, default_value_t = 96)]
    max_tokens: u32,
    /// Write the JSONL audit log here (and the artefact list to `<file>.artefacts.json`).
    #[arg(long)]
    audit_out: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum GenerateError {
    #[error(transparent)]
    Grid(#[from] GridError),
    #[error("tokenizer: {0}")]
    Vocab(#[from] VocabError),
    #[error("token trie: {0}")]
    Trie(#[from] TrieError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("database {0:?} is not in the tables file")]
    UnknownDb(String),
    #[error("no questions given")]
    NoQuestions,
    #[error("endpoint: {0}")]
    Endpoint(String),
    #[error("audit log: {0}")]
    Audit(String),
}

/// SplitMix64 step: generation seeds from `(seed, index)`.
fn mix(a: u64, b: u64) -> u64 {
    grid_endpoint::backend::mock::mix(a, b)
}

/// The sampling of every generation: a seeded draw at temperature 0.8 among the 16 best
/// allowed tokens.
const SAMPLING: SamplingPlan = SamplingPlan {
    temperature: 0.8,
    top_k: Some(16),
};

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

fn read_questions(a: &GenerateArgs) -> Result<Vec<String>, GenerateError> {
    let qs: Vec<String> = match (&a.question, &a.questions) {
        (Some(q), _) => vec![q.clone()],
        (None, Some(p)) => std::fs::read_to_string(p)
            .map_err(|e| {
                GenerateError::Io(std::io::Error::new(
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
        return Err(GenerateError::NoQuestions);
    }
    Ok(qs)
}

fn model_for(a: &GenerateArgs, vocab: &Arc<Vocabulary>) -> Result<Box<dyn Model>, GenerateError> {
    let spec: EndpointSpec = a
        .endpoint
        .parse()
        .map_err(|e| GenerateError::Endpoint(format!("--endpoint {e}")))?;
    let backend: Arc<dyn Backend> = match spec {
        EndpointSpec::Scripted(None) => Arc::new(ScriptedMock::new(
            vocab.clone(),
            spider_script(&a.tables, &a.db),
        )),
        EndpointSpec::Scripted(Some(path)) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                GenerateError::Endpoint(format!("the mock script {}: {e}", path.display()))
            })?;
            let script = Script::parse(&text).map_err(|e| {
                GenerateError::Endpoint(format!("the mock script {}: {e}", path.display()))
            })?;
            Arc::new(ScriptedMock::new(vocab.clone(), script))
        }
        EndpointSpec::Adversarial => Arc::new(AdversarialMock::new(vocab.clone())),
        EndpointSpec::Http(url) => {
            let client = EndpointClient::new(&url, vocab.fingerprint(), ClientConfig::default())
                .map_err(|e| GenerateError::Endpoint(e.to_string()))?;
            let remote = Remote::new(client, vocab.clone(), SAMPLING)?;
            remote
                .block_on(remote.client().check_vocabulary())
                .map_err(|e| GenerateError::Endpoint(e.to_string()))?;
            return Ok(Box::new(remote));
        }
    };
    Ok(Box::new(InProcess::new(backend, vocab.clone(), SAMPLING)?))
}

/// Builds the role's language for `db`: what generation, checking and replay share.
pub fn build_language(
    dialect: &Arc<Dialect>,
    tables: &Path,
    db: &str,
    policy: &grid_core::Policy,
) -> Result<(Schema, Lexicon, Language), GenerateError> {
    let reserved = |w: &str| dialect.is_reserved(w);
    let schema = grid_core::schema::load_spider(tables, &reserved)?
        .into_iter()
        .find(|s| s.db_id == db)
        .ok_or_else(|| GenerateError::UnknownDb(db.to_string()))?;
    let lexicon = Lexicon::from_schema(&schema, policy, &reserved)?;
    let lang = Language::build(dialect.clone(), policy, &lexicon)?;
    Ok((schema, lexicon, lang))
}

pub fn run(a: &GenerateArgs) -> Result<(), GenerateError> {
    let policy = read_policy(a.policy.as_deref())?;
    let dialect = Arc::new(Dialect::postgres()?);
    let (_, lexicon, lang) = build_language(&dialect, &a.tables, &a.db, &policy)?;
    let vocab = Arc::new(Vocabulary::load(&a.tokenizer)?);
    let trie = TokenTrie::shared(&vocab)?;
    let speller = Speller::of(&vocab);
    let reserve = ReserveTable::build(&lang, &speller);
    let questions = read_questions(a)?;
    let n = a.n.unwrap_or(questions.len());
    let mut model = model_for(a, &vocab)?;

    let specs: Vec<GenerationSpec<'_>> = (0..n)
        .map(|i| {
            let q = &questions[i % questions.len()];
            GenerationSpec {
                id: i as u64,
                language: &lang,
                reserve: &reserve,
                prompt: vocab.encode(q),
                max_tokens: a.max_tokens,
                seed: mix(a.seed, i as u64),
                meta: SealMeta {
                    role: None,
                    question_digest: Some(text_digest(q)),
                    sql_digest: None,
                },
                unconstrained: false,
            }
        })
        .collect();
    let mut log = AuditLog::in_memory();
    let mut decoder = Decoder::new(
        &vocab,
        Masker::new(trie.clone()),
        &speller,
        DecodeOptions::default(),
    );
    let outcomes = decoder
        .run(&specs, model.as_mut(), &mut log, &mut |_, _| false)
        .map_err(|e| GenerateError::Audit(e.to_string()))?;

    let entries: Vec<Entry> = match &a.audit_out {
        Some(path) => {
            let f = std::fs::File::create(path)?;
            let mut w = std::io::BufWriter::new(f);
            write_jsonl(&mut w, log.entries())?;
            std::io::Write::flush(&mut w)?;
            Manifest {
                artefacts: vec![Artefact {
                    tokenizer: std::path::absolute(&a.tokenizer)?,
                    tables: std::path::absolute(&a.tables)?,
                    db: a.db.clone(),
                    policy: policy.canonical_json(),
                }],
            }
            .write(&Manifest::path_for(path))?;
            let f = std::fs::File::open(path)?;
            read_jsonl(std::io::BufReader::new(f))
                .map_err(|e| GenerateError::Audit(e.to_string()))?
        }
        None => log.entries().to_vec(),
    };

    let check = StatementCheck::new(&dialect, &lexicon, &policy);
    let mut session = Session::new(&lang);
    let (mut parsed, mut dead_ends, mut completed, mut forbidden) = (0u64, 0u64, 0u64, 0u64);
    for (o, spec) in outcomes.iter().zip(&specs) {
        let text = String::from_utf8_lossy(&o.text).into_owned();
        let ok = o.stop != StopReason::Error && session.complete(&o.text);
        let bad = check.forbidden(&text);
        parsed += u64::from(ok);
        dead_ends += u64::from(matches!(o.error, Some(DecodeError::DeadEnd { .. })));
        completed += u64::from(o.stop == StopReason::BudgetCompleted);
        forbidden += u64::from(!bad.is_empty());
        let q = &questions[spec.id as usize % questions.len()];
        println!(
            "{}",
            json!({
                "generation": o.generation,
                "question": q,
                "sql": text,
                "stop": o.stop.name(),
                "tokens": o.tokens.len(),
                "completed_tokens": o.completed_tokens,
                "parsed": ok,
                "forbidden": bad,
                "error": o.error.as_ref().map(|e| e.to_string()),
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
    let mut rc = Recomputer::new(trie, &vocab);
    let replayed = match replay(&entries, &VerifyOptions::default(), &mut |ctx| {
        rc.recompute(&lang, ctx)
    }) {
        Ok(s) => s.generations,
        Err(e) => {
            eprintln!("grid generate: the audit log does not replay: {e}");
            0
        }
    };
    println!(
        "{}",
        json!({
            "generations": outcomes.len(),
            "parsed": parsed,
            "dead_ends": dead_ends,
            "budget_completed": completed,
            "forbidden_emitted": forbidden,
            "audit_verified": audit_verified,
            "replayed_identical": replayed,
            "round_trips": model.round_trips(),
        })
    );
    Ok(())
}
