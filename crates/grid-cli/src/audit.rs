//! `grid audit verify|replay <file>`: check a JSONL audit log (`grid generate
//! --audit-out`, or an export of `grid.audit_log`).
//!
//! `replay` then recomputes every step's configuration hash, mask entry id and blocked
//! count from the archived artifacts (`<file>.artifacts.json`, or `--artifacts`: what
//! `grid generate` wrote beside the log, as `grid.artifacts` holds them in the
//! extension), rebuilding each generation's language from the artifacts its seal names,
//! and compares them bit for bit.
//!
//! Exit codes: 0 verified (and, for `replay`, every mask identical); 1 the log does not
//! verify (tampering, or an unsealed generation without `--allow-incomplete`) or a mask
//! differs; 2 the file cannot be read or a line is malformed; 3 (`replay` only) the
//! artifacts cannot be loaded or none matches a seal.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use grid_ask::replay::{replay_log, ArtifactSet};
use grid_core::audit::{
    to_hex, Entry, Head, JsonlReader, ReplayError, Seal, StepKind, Summary, Verifier, VerifyError,
    VerifyOptions,
};

use crate::generate::artifacts_path;

#[derive(Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Recompute every step chain and the seal chain; report the first error, located.
    Verify(CheckArgs),
    /// Verify, then recompute every mask from the archived artifacts and compare it bit
    /// for bit with the log.
    Replay(ReplayArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// The JSONL audit log.
    file: PathBuf,
    /// The external anchor exported earlier, `<seals>:<64 hex>` (as printed by `verify`):
    /// without it a dropped tail of the log cannot be detected.
    #[arg(long)]
    head: Option<Head>,
    /// Report generations without a seal (in flight, or cut by a crash) as incomplete
    /// instead of failing.
    #[arg(long)]
    allow_incomplete: bool,
}

#[derive(Args)]
struct ReplayArgs {
    #[command(flatten)]
    check: CheckArgs,
    /// The artifact list (default: `<file>.artifacts.json`).
    #[arg(long)]
    artifacts: Option<PathBuf>,
}

/// Why the command stopped before a verdict.
enum Failure {
    Read(String),
    Verify(VerifyError),
}

fn options(a: &CheckArgs) -> VerifyOptions {
    VerifyOptions {
        allow_incomplete: a.allow_incomplete,
        expected_head: a.head,
    }
}

/// Streams the file through the verifier; with `keep`, also returns the entries.
fn check(path: &Path, opts: VerifyOptions, keep: bool) -> Result<(Summary, Vec<Entry>), Failure> {
    let file = File::open(path).map_err(|e| Failure::Read(format!("{}: {e}", path.display())))?;
    let mut v = Verifier::new(opts);
    let mut kept = Vec::new();
    for item in JsonlReader::new(BufReader::new(file)) {
        let (_, entry) = item.map_err(|e| Failure::Read(format!("{}: {e}", path.display())))?;
        v.push(&entry).map_err(Failure::Verify)?;
        if keep {
            kept.push(entry);
        }
    }
    let summary = v.finish().map_err(Failure::Verify)?;
    Ok((summary, kept))
}

fn report_failure(f: Failure) -> ExitCode {
    match f {
        Failure::Read(msg) => {
            eprintln!("grid audit: cannot read the log: {msg}");
            ExitCode::from(2)
        }
        Failure::Verify(e) => {
            let verdict = if e.reason.is_tampering() {
                "TAMPERED"
            } else {
                "INCOMPLETE"
            };
            eprintln!("grid audit: {verdict}: {e}");
            if !e.reason.is_tampering() {
                eprintln!(
                    "grid audit: (rerun with --allow-incomplete to accept in-flight generations)"
                );
            }
            ExitCode::from(1)
        }
    }
}

fn print_summary(s: &Summary, anchored: bool) {
    println!(
        "verified: {} sealed generations, {} steps, {} seals ({} entries)",
        s.generations, s.steps, s.seals, s.entries
    );
    for i in &s.incomplete {
        println!(
            "incomplete (not sealed): generation {} with {} step(s), first at line {}",
            i.generation,
            i.steps,
            i.first_entry + 1
        );
    }
    if !anchored {
        println!(
            "note: no --head given, so a dropped tail cannot be detected; keep this head outside the database and pass it next time"
        );
    }
    println!("head: {}", s.head);
}

pub fn run(a: &AuditArgs) -> ExitCode {
    match &a.command {
        AuditCommand::Verify(c) => match check(&c.file, options(c), false) {
            Ok((s, _)) => {
                print_summary(&s, c.head.is_some());
                ExitCode::SUCCESS
            }
            Err(f) => report_failure(f),
        },
        AuditCommand::Replay(r) => {
            let c = &r.check;
            match check(&c.file, options(c), true) {
                Ok((s, entries)) => {
                    print_summary(&s, c.head.is_some());
                    print_replay_plan(&entries);
                    let artifacts = r
                        .artifacts
                        .clone()
                        .unwrap_or_else(|| artifacts_path(&c.file));
                    replay_masks(&entries, &options(c), &artifacts)
                }
                Err(f) => report_failure(f),
            }
        }
    }
}

fn replay_masks(entries: &[Entry], opts: &VerifyOptions, artifacts: &Path) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("grid audit: cannot replay: {msg}");
        ExitCode::from(3)
    };
    let set = match std::fs::read_to_string(artifacts)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .and_then(|doc| ArtifactSet::from_json(&doc))
    {
        Ok(s) => s,
        Err(e) => return fail(format!("{}: {e}", artifacts.display())),
    };
    match replay_log(entries, &set, opts) {
        Ok(s) => {
            println!(
                "replayed: {} generations, {} steps: every configuration hash, mask entry id and blocked count recomputed identical",
                s.generations, s.steps
            );
            ExitCode::SUCCESS
        }
        Err(ReplayError::Recompute {
            generation,
            step,
            source,
        }) => fail(format!("generation {generation}, step {step}: {source}")),
        Err(e) => {
            eprintln!("grid audit: REPLAY DIFFERS: {e}");
            ExitCode::from(1)
        }
    }
}

/// Per sealed generation, what a mask replay would load and walk.
fn print_replay_plan(entries: &[Entry]) {
    let mut kinds: BTreeMap<u64, [u64; 6]> = BTreeMap::new();
    for e in entries {
        if let Entry::Step(r) = e {
            let k = match r.kind {
                StepKind::Sampled => 0,
                StepKind::Forced => 1,
                StepKind::BudgetCompleted => 2,
                StepKind::Eos => 3,
                StepKind::Replayed => 4,
                StepKind::Banned => 5,
            };
            kinds.entry(r.generation).or_default()[k] += 1;
        }
    }
    for e in entries {
        if let Entry::Seal(s) = e {
            let [sampled, forced, completed, eos, replayed, banned] =
                kinds.get(&s.generation).copied().unwrap_or_default();
            let rewind = if replayed + banned > 0 {
                format!(", a rewind: {replayed} replayed, {banned} banned")
            } else {
                String::new()
            };
            println!(
                "generation {} (seal {}): stop {}, {} steps ({sampled} sampled, {forced} forced, {completed} budget-completed, {eos} eos{rewind}), {}; artifacts {}",
                s.generation,
                s.index,
                s.stop.name(),
                s.steps,
                mode(s),
                artifacts(s)
            );
        }
    }
}

fn mode(s: &Seal) -> String {
    format!(
        "{}, cache {}",
        s.mode.decode.name(),
        if s.mode.cache { "on" } else { "off" }
    )
}

fn artifacts(s: &Seal) -> String {
    let f = &s.fingerprints;
    format!(
        "grammar {} lexicons {} policy {} vocabulary {} prompt {}",
        to_hex(&f.grammar),
        to_hex(&f.lexicons),
        to_hex(&f.policy),
        to_hex(&f.vocabulary),
        s.meta
            .prompt_digest
            .map_or("none".to_string(), |d| to_hex(&d))
    )
}
