//! `grid check-output --snapshot F [--policy P]`: the forbidden-output check
//! ([`grid_ask::StatementCheck`]) for the tools that cannot link it (the fault suite).
//! Reads statements from stdin, one JSON string per line, and writes one JSON line per
//! statement: `{"sql": …, "forbidden": [why, …]}` (empty when the role may write it).
//! Exit 0 when every statement passes, 1 when one does not, 2 on bad input.

use std::io::BufRead;
use std::path::PathBuf;

use clap::Args;
use grid_ask::StatementCheck;
use grid_core::catalog::CatalogSnapshot;
use grid_core::Dialect;

use crate::corpus::read_policy;
use crate::error::CliError;

#[derive(Args)]
pub struct CheckOutputArgs {
    /// The role's catalog snapshot (JSON, as `grid.catalog_snapshot()` returns it).
    #[arg(long)]
    snapshot: PathBuf,
    /// The role's base policy (JSON file; default: every verb, no bans).
    #[arg(long)]
    policy: Option<PathBuf>,
}

pub fn run(a: &CheckOutputArgs) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&a.snapshot)
        .map_err(|e| CliError::Input(format!("{}: {e}", a.snapshot.display())))?;
    let snapshot = CatalogSnapshot::from_json(&text)
        .map_err(|e| CliError::Input(format!("{}: {e}", a.snapshot.display())))?;
    let base = read_policy(a.policy.as_deref())?;
    let dialect = Dialect::postgres_without_comments()?;
    let check = StatementCheck::for_snapshot(&dialect, &snapshot, &base)?;
    let mut bad = 0usize;
    for (i, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let sql: String = serde_json::from_str(&line)
            .map_err(|e| CliError::Input(format!("stdin line {}: {e}", i + 1)))?;
        let forbidden = check.forbidden(&sql);
        bad += usize::from(!forbidden.is_empty());
        println!(
            "{}",
            serde_json::json!({ "sql": sql, "forbidden": forbidden })
        );
    }
    if bad > 0 {
        eprintln!("grid check-output: {bad} statement(s) hold what the role may not write");
        std::process::exit(1);
    }
    Ok(())
}
