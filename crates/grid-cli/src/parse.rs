//! `grid parse`: which gold statements fall outside their database's language, and where.

use std::io::Write;

use clap::Args;
use grid_core::{Session, StopKind};
use serde_json::json;

use crate::corpus::{CorpusArgs, Languages};
use crate::error::CliError;

#[derive(Args)]
pub struct ParseArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
}

pub fn run(a: &ParseArgs) -> Result<(), CliError> {
    let policy = a.corpus.policy()?;
    let gold = a.corpus.gold()?;
    let mut langs = Languages::new(&a.corpus.tables, policy)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (mut parsed, mut failed) = (0usize, 0usize);
    for g in &gold {
        let lang = langs.get(&g.db)?;
        let mut s = Session::new(&lang);
        match s.check(g.sql.as_bytes()) {
            Ok(()) => parsed += 1,
            Err(stop) => {
                failed += 1;
                let reason = match &stop.kind {
                    StopKind::NoLexeme => "no terminal matches here".to_string(),
                    StopKind::SplitWord => "a word would be split".to_string(),
                    StopKind::Unexpected(c) => {
                        format!("unexpected {}", lang.terms().names_of(c).join("|"))
                    }
                    StopKind::Incomplete => "statement ends early".to_string(),
                };
                let line = json!({
                    "line": g.line,
                    "db": g.db,
                    "offset": stop.offset,
                    "reason": reason,
                    "expected": lang.terms().names_of(&stop.expected),
                    "sql": g.sql,
                });
                writeln!(out, "{line}")?;
            }
        }
    }
    writeln!(
        out,
        "{}",
        json!({"total": gold.len(), "parsed": parsed, "failed": failed})
    )?;
    Ok(())
}
