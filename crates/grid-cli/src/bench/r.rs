//! `grid bench-r`: does a mask cost the same at token 16,000 as at token 10?
//!
//! No model: for each nesting depth `d` the stream is the vocabulary's encoding of
//! `SELECT ((…(1 IN (1, 1, 1, …` with `d` opening parentheses, cut to `n` tokens; it never
//! closes, so every step is inside the same `d + 1` open groups and the parser's stack
//! stays `d`-deep while the input grows. Each step masks the current configuration (timed)
//! and feeds the next token, which must be admitted.
//!
//! Repetition 0 warms the caches (the mask cache too, with `--cache on`, the default) and is
//! dropped; the series is the per-position minimum over the later repetitions (the least
//! disturbed sample on a shared host). Reported per
//! depth: the least squares slope of step time against position with its 95% confidence
//! interval, and R² of cumulative cost against position (1 when the cost is linear, that
//! is, when a step costs the same everywhere). The last line is JSON.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use grid_core::mask::Mask;
use grid_core::schema::{Schema, Table};
use grid_core::trie::TokenTrie;
use grid_core::{Dialect, Language, Lexicon, Policy, Session};
use grid_vocab::Vocabulary;
use serde_json::json;

use crate::bench::stats::fit_by_position;
use crate::bench::vocab_label;
use crate::corpus::CacheMode;
use crate::error::CliError;

#[derive(Args)]
pub struct BenchRArgs {
    /// Tokenizer: a directory or file `grid_vocab::Vocabulary::load` reads.
    #[arg(long)]
    tokenizer: PathBuf,
    /// Tokens per stream.
    #[arg(long, default_value_t = 16000, value_parser = clap::value_parser!(u32).range(3..))]
    n: u32,
    /// Comma-separated nesting depths.
    #[arg(long, default_value = "0,4,8,16", value_delimiter = ',')]
    depths: Vec<u32>,
    /// Repetitions per depth; the first only warms up.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    reps: u32,
    /// Label of the vocabulary in the output (default: the tokenizer's file or directory name).
    #[arg(long)]
    vocab_label: Option<String>,
    /// The mask cache, as in `grid bench`.
    #[arg(long, value_enum, default_value_t = CacheMode::On)]
    cache: CacheMode,
}

/// The text of a depth-`depth` stream with at least `items` list items.
pub fn stream_text(depth: u32, items: usize) -> String {
    let mut s = String::from("SELECT ");
    s.extend(std::iter::repeat_n('(', depth as usize));
    s.push_str("1 IN (1");
    for _ in 1..items {
        s.push_str(", 1");
    }
    s
}

/// The first `n` ids of the encoded stream of `depth`, or an error when the tokenizer packs
/// the text so tightly that it falls short.
fn stream_ids(vocab: &Vocabulary, depth: u32, n: usize) -> Result<Vec<u32>, CliError> {
    let mut ids = vocab.encode(&stream_text(depth, n + 8));
    if ids.len() < n {
        return Err(CliError::Usage(format!(
            "the depth-{depth} stream encodes to {} tokens, fewer than {n}",
            ids.len()
        )));
    }
    ids.truncate(n);
    Ok(ids)
}

pub fn run(a: &BenchRArgs) -> Result<(), CliError> {
    if a.depths.is_empty() {
        return Err(CliError::Usage("--depths names no depth".into()));
    }
    let vocab = Vocabulary::load(&a.tokenizer)?;
    let label = a
        .vocab_label
        .clone()
        .unwrap_or_else(|| vocab_label(&a.tokenizer));
    let dialect = Arc::new(Dialect::postgres()?);
    let schema = Schema {
        db_id: "bench_r".into(),
        tables: vec![Table::with_columns("t", &["a"])],
    };
    let policy = Policy::default();
    let lexicon = Lexicon::from_schema(&schema, &policy, &|w| dialect.is_reserved(w))?;
    let lang = Language::build(dialect.clone(), &policy, &lexicon)?;
    let mut masker = a.cache.masker(TokenTrie::shared(&vocab)?);
    let n = a.n as usize;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "{:>5} {:>7} {:>9} {:>14} {:>12} {:>10}  ({label}; µs, slope in µs per position)",
        "depth", "steps", "mean_us", "slope", "ci95", "r2_cum"
    )?;
    let mut rows = Vec::new();
    for &depth in &a.depths {
        let ids = stream_ids(&vocab, depth, n)?;
        let mut best = vec![u64::MAX; n];
        for rep in 0..a.reps {
            let mut session = Session::new(&lang);
            let mut cfg = session.start();
            let mut m = Mask::empty(vocab.len(), 0);
            for (pos, &id) in ids.iter().enumerate() {
                let t = Instant::now();
                masker.mask_into(&mut session, &cfg, &mut m);
                let ns = t.elapsed().as_nanos() as u64;
                if rep > 0 {
                    best[pos] = best[pos].min(ns);
                }
                if !m.contains(id) || session.feed(&mut cfg, vocab.token_bytes(id)).is_err() {
                    return Err(CliError::Usage(format!(
                        "depth {depth}: the engine refused stream token {pos} ({:?})",
                        String::from_utf8_lossy(vocab.token_bytes(id))
                    )));
                }
            }
        }
        let us: Vec<f64> = best.iter().map(|&ns| ns as f64 / 1e3).collect();
        let cumulative: Vec<f64> = us
            .iter()
            .scan(0.0, |acc, &x| {
                *acc += x;
                Some(*acc)
            })
            .collect();
        let (Some(step), Some(cum)) = (fit_by_position(&us), fit_by_position(&cumulative)) else {
            return Err(CliError::Usage("a stream needs at least 3 tokens".into()));
        };
        let mean = us.iter().sum::<f64>() / n as f64;
        writeln!(
            out,
            "{depth:>5} {n:>7} {mean:>9.2} {:>14.3e} {:>12.3e} {:>10.6}",
            step.slope, step.slope_ci95, cum.r2
        )?;
        rows.push(json!({
            "depth": depth,
            "steps": n,
            "mean_us": (mean * 100.0).round() / 100.0,
            "slope_us_per_pos": step.slope,
            "slope_ci95": [step.slope - step.slope_ci95, step.slope + step.slope_ci95],
            "r2_cumulative": cum.r2,
        }));
    }
    writeln!(
        out,
        "{}",
        json!({"vocab": label, "n": n, "reps": a.reps, "depths": rows})
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::stream_text;

    #[test]
    fn streams_nest_and_list() {
        assert_eq!(stream_text(0, 3), "SELECT 1 IN (1, 1, 1");
        assert_eq!(stream_text(2, 1), "SELECT ((1 IN (1");
    }
}
