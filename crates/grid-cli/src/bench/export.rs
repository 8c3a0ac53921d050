//! `grid bench-export`: what an out-of-process peer (XGrammar, `bench/peers/xgrammar_bench.py`)
//! needs to replay exactly what `grid bench` replays.
//!
//! Writes into `--out`:
//! * `vocab.json`: `{"vocab", "eos", "special": [ids], "tokens_hex": [bytes of each id]}`;
//! * `statements.jsonl`: one `{"line", "db", "ids"}` per gold statement, the same ids;
//! * `grammars/<db>.ebnf` and `grammars/<db>.lark`: each database's peer grammar.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use grid_vocab::Vocabulary;
use serde_json::json;

use crate::bench::grammar::PeerSource;
use crate::bench::{sample, vocab_label, PeerSchemas};
use crate::corpus::CorpusArgs;
use crate::error::CliError;

#[derive(Args)]
pub struct BenchExportArgs {
    /// Tokenizer: a directory or file `grid_vocab::Vocabulary::load` reads.
    #[arg(long)]
    tokenizer: PathBuf,
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Take every K-th statement, as `grid bench --every`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    every: u64,
    /// Export only the first N statements (after `--every`), as `grid bench --limit`.
    #[arg(long)]
    limit: Option<usize>,
    /// Output directory (created).
    #[arg(long)]
    out: PathBuf,
    /// Label of the vocabulary (default: the tokenizer's file or directory name).
    #[arg(long)]
    vocab_label: Option<String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn run(a: &BenchExportArgs) -> Result<(), CliError> {
    let policy = a.corpus.policy()?;
    let gold = sample(a.corpus.gold()?, a.every, a.limit);
    let n = gold.len();
    let vocab = Vocabulary::load(&a.tokenizer)?;
    let label = a
        .vocab_label
        .clone()
        .unwrap_or_else(|| vocab_label(&a.tokenizer));
    let eos = vocab
        .eos_id()
        .ok_or_else(|| CliError::Usage("the vocabulary names no EOS token".into()))?;
    std::fs::create_dir_all(a.out.join("grammars"))?;
    let tokens: Vec<String> = vocab.iter().map(|(_, b)| hex(b)).collect();
    let v =
        json!({"vocab": label, "eos": eos, "special": vocab.special_ids(), "tokens_hex": tokens});
    std::fs::write(a.out.join("vocab.json"), v.to_string())?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(a.out.join("statements.jsonl"))?);
    let mut dbs = BTreeSet::new();
    for g in &gold {
        // The name becomes a file name.
        if !g
            .db
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(CliError::Usage(format!(
                "line {}: database name {:?} is not a plain file name",
                g.line, g.db
            )));
        }
        let ids = vocab.encode(&g.sql);
        writeln!(f, "{}", json!({"line": g.line, "db": g.db, "ids": ids}))?;
        dbs.insert(g.db.clone());
    }
    f.flush()?;
    let schemas = PeerSchemas::load(&a.corpus.tables, policy)?;
    for db in &dbs {
        let lexicon = schemas.lexicon(db)?;
        let src = PeerSource::new(&schemas.dialect, &schemas.policy, &lexicon)?;
        let dir = a.out.join("grammars");
        std::fs::write(dir.join(format!("{db}.ebnf")), src.to_ebnf()?)?;
        std::fs::write(dir.join(format!("{db}.lark")), src.to_lark()?)?;
    }
    println!(
        "{}",
        json!({"vocab": label, "statements": n, "databases": dbs.len(), "out": a.out.display().to_string()})
    );
    Ok(())
}
