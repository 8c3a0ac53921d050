//! `grid bench`: per-step mask time of GRID and of llguidance (in process) over the same
//! gold token sequences.
//!
//! Every gold statement is encoded with the tokenizer, and each engine replays the ids from
//! the empty prefix: at each step it computes the mask (the only timed call), checks that
//! the next gold id is in it, and consumes it; after the last id the mask must admit EOS.
//! An engine that refuses a gold id stops that statement there and counts a rejection.
//!
//! Repetition 0 is cold: each engine's caches start empty (grammars are compiled before the
//! first step of their database, and that time is `compile_ms`, not a step). Later
//! repetitions are warm, and the headline figures are theirs. Statements are interleaved
//! across engines, so that a noisy neighbour on the host hits every engine alike.
//!
//! Output: one table line per engine, rejections as JSON lines on stderr, then the summary
//! as the last line of stdout:
//! `{"vocab":…,"steps":N,"engines":{"grid":{"p50_us":…,"p90_us":…,"p99_us":…,"max_us":…,
//! "compile_ms":…,"hit_rate":…,…},…}}`.
//!
//! The other benchmark commands live beside it: `export` (`grid bench-export`), `r`
//! (`grid bench-r`), `grammar` (the peers' grammars), `stats` (percentiles, fits).

pub mod export;
pub mod grammar;
pub mod r;
pub mod stats;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CliError;
use clap::{Args, ValueEnum};
use grid_core::mask::{Mask, Masker};
use grid_core::schema::load_spider;
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, GridError, Lexicon, Policy, Schema, Session};
use grid_vocab::Vocabulary;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::json;

use crate::corpus::{CacheMode, CorpusArgs, GoldLine, Languages};
use grammar::PeerSource;
use stats::Percentiles;

#[derive(Args)]
pub struct BenchArgs {
    /// Tokenizer: a directory or file `grid_vocab::Vocabulary::load` reads.
    #[arg(long)]
    tokenizer: PathBuf,
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Comma-separated engines: grid, llguidance.
    #[arg(long, default_value = "grid,llguidance", value_delimiter = ',')]
    engines: Vec<EngineKind>,
    /// Repetitions over the statements; the first is cold, the others warm.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    reps: u32,
    /// Start every repetition cold: the engines are built afresh, so each database is met
    /// cold once per repetition and warm across its own statements (what a new schema's
    /// first questions cost), and every step counts as cold.
    #[arg(long)]
    cold_every_rep: bool,
    /// Take every K-th statement (a sample that still spans every database).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    every: u64,
    /// Replay only the first N statements (after `--every`).
    #[arg(long)]
    limit: Option<usize>,
    /// GRID's mask cache.
    #[arg(long, value_enum, default_value_t = CacheMode::On)]
    cache: CacheMode,
    /// Label of the vocabulary in the output (default: the tokenizer's file or directory name).
    #[arg(long)]
    vocab_label: Option<String>,
    /// Leave out GRID's warm-up when a database's language is built (the tails every
    /// statement meets, walked ahead; see `MaskCache::warm`), to measure what it saves.
    #[arg(long)]
    no_warm_up: bool,
    /// Print every GRID step slower than this many µs on stderr, as a JSON line with the
    /// statement prefix and the walk's size: where cold time goes.
    #[arg(long)]
    slow_us: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    Grid,
    Llguidance,
}

/// How one replay of one statement ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every gold id was admitted and consumed, and EOS was admitted at the end.
    Accepted,
    /// The gold id at `step` (or EOS, at `step == ids.len()`) was not admitted.
    Rejected { step: usize },
}

/// A mask engine under test.
trait Engine {
    fn name(&self) -> &'static str;
    /// Replays `ids` in database `db`, pushing each mask's time (ns) onto `times`.
    fn replay(&mut self, db: &str, ids: &[u32], times: &mut Vec<u64>) -> Result<Outcome, CliError>;
    /// Per-database grammar compile times so far.
    fn compiles(&self) -> &[Duration];
    /// Share of masks served from a cache, when the engine has one to report.
    fn hit_rate(&self) -> Option<f64>;
}

/// GRID: the engine's masker over per-database languages.
struct GridEngine {
    langs: Languages,
    vocab: Arc<Vocabulary>,
    masker: Masker,
    /// Databases whose language is built.
    built: HashSet<String>,
    compiles: Vec<Duration>,
    /// `--slow-us`.
    slow_us: Option<u64>,
    /// Walk a language's common tails ahead when it is built (not `--no-warm-up`).
    warm: bool,
}

impl GridEngine {
    fn new(
        tables: &Path,
        policy: Policy,
        vocab: Arc<Vocabulary>,
        cache: CacheMode,
        slow_us: Option<u64>,
        warm: bool,
    ) -> Result<GridEngine, CliError> {
        let trie = TokenTrie::shared(&vocab)?;
        Ok(GridEngine {
            langs: Languages::new(tables, policy)?,
            vocab,
            masker: cache.masker(trie),
            built: HashSet::new(),
            compiles: Vec::new(),
            slow_us,
            warm,
        })
    }
}

impl Engine for GridEngine {
    fn name(&self) -> &'static str {
        "grid"
    }

    fn replay(&mut self, db: &str, ids: &[u32], times: &mut Vec<u64>) -> Result<Outcome, CliError> {
        let t0 = Instant::now();
        let lang = self.langs.get(db)?;
        if self.built.insert(db.to_string()) {
            // A language's first use walks its common tails ahead, as grid.ask does when it
            // compiles one: counted in its compile time.
            if self.warm {
                self.masker.warm(&lang);
            }
            self.compiles.push(t0.elapsed());
        }
        let mut session = Session::new(&lang);
        let mut cfg = session.start();
        // One mask for the whole statement, as the hot path uses it (`mask_into`).
        let mut m = Mask::empty(self.vocab.len(), 0);
        for step in 0..=ids.len() {
            let t = Instant::now();
            self.masker.mask_into(&mut session, &cfg, &mut m);
            times.push(t.elapsed().as_nanos() as u64);
            if let Some(slow_us) = self.slow_us {
                let us = t.elapsed().as_micros();
                if us >= u128::from(slow_us) {
                    let prefix: Vec<u8> = ids[..step]
                        .iter()
                        .flat_map(|&i| self.vocab.token_bytes(i).iter().copied())
                        .collect();
                    let j = json!({"kind": "slow", "db": db, "step": step, "us": us as u64,
                                   "visited": m.visited, "allowed": m.allowed,
                                   "cd_classes": m.cd_classes.len(),
                                   "prefix": String::from_utf8_lossy(&prefix)});
                    eprintln!("{j}");
                }
            }
            let Some(&id) = ids.get(step) else {
                return Ok(if m.eos {
                    Outcome::Accepted
                } else {
                    Outcome::Rejected { step }
                });
            };
            if !m.contains(id) || session.feed(&mut cfg, self.vocab.token_bytes(id)).is_err() {
                return Ok(Outcome::Rejected { step });
            }
        }
        Ok(Outcome::Rejected { step: ids.len() })
    }

    fn compiles(&self) -> &[Duration] {
        &self.compiles
    }

    fn hit_rate(&self) -> Option<f64> {
        self.masker.cache_stats().map(|s| s.hit_rate())
    }
}

/// The vocabulary as llguidance's token environment: the same ids and bytes; special ids
/// get toktrie's `0xFF` marker so that no grammar can admit them, EOS excepted.
struct LlgTokens {
    trie: TokTrie,
}

impl TokenizerEnv for LlgTokens {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }
}

pub fn llg_tok_env(vocab: &Vocabulary) -> Result<TokEnv, CliError> {
    let eos = vocab
        .eos_id()
        .ok_or_else(|| CliError::Usage("the vocabulary names no EOS token".into()))?;
    let words: Vec<Vec<u8>> = vocab
        .iter()
        .map(|(id, b)| {
            if vocab.is_special(id) {
                let mut w = vec![0xFF];
                w.extend_from_slice(b);
                w
            } else {
                b.to_vec()
            }
        })
        .collect();
    let info = TokRxInfo::new(vocab.len() as u32, eos);
    Ok(Arc::new(LlgTokens {
        trie: TokTrie::from(&info, &words),
    }))
}

/// Spider schemas and their lexicons, for the peer grammars.
pub struct PeerSchemas {
    pub dialect: Arc<Dialect>,
    pub policy: Policy,
    schemas: HashMap<String, Schema>,
}

impl PeerSchemas {
    pub fn load(tables: &Path, policy: Policy) -> Result<PeerSchemas, CliError> {
        let dialect = Arc::new(Dialect::postgres()?);
        let reserved = |w: &str| dialect.is_reserved(w);
        let schemas = load_spider(tables, &reserved)?
            .into_iter()
            .map(|s| (s.db_id.clone(), s))
            .collect();
        Ok(PeerSchemas {
            dialect,
            policy,
            schemas,
        })
    }

    pub fn lexicon(&self, db: &str) -> Result<Lexicon, CliError> {
        let schema = self.schemas.get(db).ok_or_else(|| {
            GridError::Schema(format!("database {db:?} is not in the tables file"))
        })?;
        let d = &self.dialect;
        Ok(Lexicon::from_schema(schema, &self.policy, &|w| {
            d.is_reserved(w)
        })?)
    }
}

/// llguidance: one compiled matcher per database, cloned for each statement.
struct LlgEngine {
    factory: ParserFactory,
    schemas: PeerSchemas,
    compiled: HashMap<String, Matcher>,
    compiles: Vec<Duration>,
    eos: u32,
}

impl LlgEngine {
    fn new(tables: &Path, policy: Policy, vocab: &Vocabulary) -> Result<LlgEngine, CliError> {
        let env = llg_tok_env(vocab)?;
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| CliError::Llguidance(e.to_string()))?;
        factory.quiet();
        Ok(LlgEngine {
            factory,
            schemas: PeerSchemas::load(tables, policy)?,
            compiled: HashMap::new(),
            compiles: Vec::new(),
            eos: vocab.eos_id().unwrap_or_default(),
        })
    }

    fn matcher(&mut self, db: &str) -> Result<Matcher, CliError> {
        if let Some(m) = self.compiled.get(db) {
            return Ok(m.deep_clone());
        }
        let lexicon = self.schemas.lexicon(db)?;
        let lark =
            PeerSource::new(&self.schemas.dialect, &self.schemas.policy, &lexicon)?.to_lark()?;
        let t0 = Instant::now();
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(lark))
            .map_err(|e| CliError::Llguidance(format!("grammar of {db}: {e}")))?;
        let m = Matcher::new(Ok(parser));
        self.compiles.push(t0.elapsed());
        if let Some(e) = m.get_error() {
            return Err(CliError::Llguidance(format!("grammar of {db}: {e}")));
        }
        let out = m.deep_clone();
        self.compiled.insert(db.to_string(), m);
        Ok(out)
    }
}

impl Engine for LlgEngine {
    fn name(&self) -> &'static str {
        "llguidance"
    }

    fn replay(&mut self, db: &str, ids: &[u32], times: &mut Vec<u64>) -> Result<Outcome, CliError> {
        let mut m = self.matcher(db)?;
        for step in 0..=ids.len() {
            let t = Instant::now();
            let mask = m.compute_mask();
            times.push(t.elapsed().as_nanos() as u64);
            let want = ids.get(step).copied().unwrap_or(self.eos);
            let admitted = match &mask {
                Ok(v) => v.is_allowed(want),
                // A stopped parser admits EOS only.
                Err(_) => m.is_stopped() && want == self.eos,
            };
            if !admitted {
                return Ok(Outcome::Rejected { step });
            }
            if step == ids.len() {
                return Ok(Outcome::Accepted);
            }
            if m.consume_token(want).is_err() {
                return Ok(Outcome::Rejected { step });
            }
        }
        Ok(Outcome::Rejected { step: ids.len() })
    }

    fn compiles(&self) -> &[Duration] {
        &self.compiles
    }

    fn hit_rate(&self) -> Option<f64> {
        None
    }
}

/// An engine and its setup time (ms).
type Built = (Box<dyn Engine>, f64);

/// Step times and rejections of one engine.
#[derive(Default)]
struct Record {
    cold: Vec<u64>,
    warm: Vec<u64>,
    rejected: u64,
    accepted: u64,
}

/// Every `every`-th statement, at most `limit` of them: the sample both `grid bench` and
/// `grid bench-export` replay, so that in-process and out-of-process peers see the same one.
pub fn sample(gold: Vec<GoldLine>, every: u64, limit: Option<usize>) -> Vec<GoldLine> {
    let every = every.max(1) as usize;
    gold.into_iter()
        .enumerate()
        .filter(|(i, _)| i % every == 0)
        .map(|(_, g)| g)
        .take(limit.unwrap_or(usize::MAX))
        .collect()
}

/// The file or directory name of the tokenizer path.
pub fn vocab_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

pub fn run(a: &BenchArgs) -> Result<(), CliError> {
    if a.engines.is_empty() {
        return Err(CliError::Usage("--engines names no engine".into()));
    }
    let policy = a.corpus.policy()?;
    let gold = sample(a.corpus.gold()?, a.every, a.limit);
    let n = gold.len();
    let t0 = Instant::now();
    let vocab = Arc::new(Vocabulary::load(&a.tokenizer)?);
    let label = a
        .vocab_label
        .clone()
        .unwrap_or_else(|| vocab_label(&a.tokenizer));
    let encoded: Vec<Vec<u32>> = gold.iter().map(|g| vocab.encode(&g.sql)).collect();
    let steps: usize = encoded.iter().map(|ids| ids.len() + 1).sum();
    eprintln!(
        "bench: {label}: {} tokens, {n} statements, {steps} steps per repetition ({:.1} s to load)",
        vocab.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut kinds = Vec::new();
    for &kind in &a.engines {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let build = || -> Result<Vec<Built>, CliError> {
        let mut engines: Vec<Built> = Vec::new();
        for &kind in &kinds {
            let t = Instant::now();
            let e: Box<dyn Engine> = match kind {
                EngineKind::Grid => Box::new(GridEngine::new(
                    &a.corpus.tables,
                    policy.clone(),
                    vocab.clone(),
                    a.cache,
                    a.slow_us,
                    !a.no_warm_up,
                )?),
                EngineKind::Llguidance => {
                    Box::new(LlgEngine::new(&a.corpus.tables, policy.clone(), &vocab)?)
                }
            };
            engines.push((e, t.elapsed().as_secs_f64() * 1e3));
        }
        Ok(engines)
    };
    let mut engines = build()?;
    let mut records: Vec<Record> = engines.iter().map(|_| Record::default()).collect();
    let stderr = std::io::stderr();
    for rep in 0..a.reps {
        if rep > 0 && a.cold_every_rep {
            engines = build()?;
        }
        let cold = rep == 0 || a.cold_every_rep;
        for (g, ids) in gold.iter().zip(&encoded) {
            for ((e, _), r) in engines.iter_mut().zip(records.iter_mut()) {
                let times = if cold { &mut r.cold } else { &mut r.warm };
                match e.replay(&g.db, ids, times)? {
                    Outcome::Accepted => r.accepted += 1,
                    Outcome::Rejected { step } => {
                        r.rejected += 1;
                        if rep == 0 {
                            let text = ids
                                .get(step)
                                .map(|&id| String::from_utf8_lossy(vocab.token_bytes(id)))
                                .unwrap_or("<eos>".into());
                            let j = json!({"kind": "rejected", "engine": e.name(), "line": g.line,
                                           "db": g.db, "step": step, "token": text, "sql": g.sql});
                            writeln!(stderr.lock(), "{j}")?;
                        }
                    }
                }
            }
        }
        eprintln!("bench: {label}: repetition {} of {} done", rep + 1, a.reps);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "{:<11} {:>9} {:>9} {:>9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>10} {:>9}  (µs; {label}, {})",
        "engine",
        "p50",
        "p90",
        "p99",
        "max",
        "compile_ms",
        "cold_p50",
        "cold_p90",
        "cold_p99",
        "cold_max",
        "rejected",
        if a.cold_every_rep {
            format!(
                "every one of {} reps cold per database: no warm steps",
                a.reps
            )
        } else {
            format!("warm of {} reps, cold of the first", a.reps)
        }
    )?;
    let mut summary: Vec<String> = Vec::new();
    for ((e, setup_ms), r) in engines.iter().zip(records) {
        let warm = Percentiles::of(r.warm);
        let cold = Percentiles::of(r.cold);
        let compiles = e.compiles();
        let compile_ms = if compiles.is_empty() {
            0.0
        } else {
            compiles.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / compiles.len() as f64
        };
        let compile_ms = (compile_ms * 100.0).round() / 100.0;
        writeln!(
            out,
            "{:<11} {:>9} {:>9} {:>9} {:>10} {:>11} {:>9} {:>9} {:>9} {:>10} {:>9}",
            e.name(),
            warm.p50_us,
            warm.p90_us,
            warm.p99_us,
            warm.max_us,
            compile_ms,
            cold.p50_us,
            cold.p90_us,
            cold.p99_us,
            cold.max_us,
            r.rejected / u64::from(a.reps)
        )?;
        let rejected = r.rejected / u64::from(a.reps);
        let hit_rate = e
            .hit_rate()
            .map_or("null".to_string(), |h| format!("{h:.4}"));
        // Written by hand: the field order is part of the format.
        summary.push(format!(
            "{}:{{\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"max_us\":{},\"compile_ms\":{compile_ms},\
             \"hit_rate\":{hit_rate},\"steps\":{},\"rejected\":{rejected},\"grammars\":{},\
             \"setup_ms\":{},\"cold\":{}}}",
            json!(e.name()),
            warm.p50_us,
            warm.p90_us,
            warm.p99_us,
            warm.max_us,
            warm.n,
            compiles.len(),
            setup_ms.round(),
            cold.to_json()
        ));
    }
    let last = format!(
        "{{\"vocab\":{},\"steps\":{steps},\"engines\":{{{}}}}}",
        json!(label),
        summary.join(",")
    );
    writeln!(out, "{last}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte, a few words, and a special EOS.
    fn vocab() -> Arc<Vocabulary> {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for w in ["SELECT", " FROM", " orders", " id", " WHERE", "<eos>"] {
            tokens.push(w.as_bytes().to_vec());
        }
        let eos = tokens.len() as u32 - 1;
        Arc::new(Vocabulary::from_served(tokens, &[eos], Some(eos)).unwrap())
    }

    fn tables() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("grid-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tables.json");
        let db = json!([{"db_id": "shop", "table_names_original": ["orders"],
            "column_names_original": [[-1, "*"], [0, "id"], [0, "total"]],
            "column_types": ["text", "number", "number"], "primary_keys": [1], "foreign_keys": []}]);
        std::fs::write(&path, db.to_string()).unwrap();
        path
    }

    #[test]
    fn grid_and_llguidance_agree_on_what_they_admit() {
        let tables = tables();
        let vocab = vocab();
        let mut grid = GridEngine::new(
            &tables,
            Policy::default(),
            vocab.clone(),
            CacheMode::On,
            None,
            true,
        )
        .unwrap();
        let mut llg = LlgEngine::new(&tables, Policy::default(), &vocab).unwrap();
        let mut times = Vec::new();
        for (sql, accepted) in [
            ("SELECT id FROM orders", true),
            (
                "select TOTAL from orders where id = 1 order by total desc",
                true,
            ),
            ("SELECT o.id FROM orders AS o WHERE o.total > 2.5", true),
            ("SELECT price FROM orders", false),
            ("SELECT id FROM customers", false),
            ("SELECT id FROM orders WHERE", false),
            ("SELECT id FROM orders AS select", false),
        ] {
            let ids = vocab.encode(sql);
            let g = grid.replay("shop", &ids, &mut times).unwrap();
            let l = llg.replay("shop", &ids, &mut times).unwrap();
            assert_eq!(g == Outcome::Accepted, accepted, "{sql}: grid says {g:?}");
            assert_eq!(g, l, "{sql}: grid and llguidance disagree");
        }
        // One compile each; a mask timed per step, up to each refusal.
        assert_eq!((grid.compiles().len(), llg.compiles().len()), (1, 1));
        assert!(times.len() >= 2 * vocab.encode("SELECT id FROM orders").len());
        assert!(grid.replay("nowhere", &[], &mut times).is_err());
        let _ = std::fs::remove_dir_all(tables.parent().unwrap());
    }

    #[test]
    fn samples_take_every_kth_then_limit() {
        let gold: Vec<GoldLine> = (0..10)
            .map(|i| GoldLine {
                line: i + 1,
                sql: String::new(),
                db: String::new(),
            })
            .collect();
        let lines = |v: Vec<GoldLine>| v.iter().map(|g| g.line).collect::<Vec<_>>();
        let every3 = sample(gold, 3, None);
        assert_eq!(lines(every3), vec![1, 4, 7, 10]);
    }
}
