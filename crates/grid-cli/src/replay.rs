//! `grid replay`: real SQL replayed token by token through the mask.
//!
//! Each gold statement is tokenized with the vocabulary's own encoder. At every step the
//! mask is computed at the configuration reached so far, and:
//! * the next gold token must be in it (else a completeness failure);
//! * EOS must be in it exactly when the text so far is a complete statement, checked from
//!   scratch with `complete` (else an EOS failure); after the last token it must be;
//! * every `--oracle-every` steps, the mask must equal the brute-force oracle bit for bit.
//!
//! A gold token the recognizer refuses ends its statement's replay; it counts as a
//! completeness failure (kind `refused`) whether or not the mask allowed it.
//!
//! Failures are JSON lines; the last line is the summary, with mask times (the mask call
//! alone, forced runs included) in microseconds. A profile of the walk (mean trie nodes
//! visited, allowed and CD ids, CD classes per step) goes to stderr. With `--cache on` the
//! summary ends with the hit rate and the times of warm steps (served from cache entries)
//! and cold ones (that built an entry).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use crate::error::CliError;
use clap::Args;
use grid_core::mask::Mask;
use grid_core::oracle::oracle_mask;
use grid_core::trie::TokenTrie;
use grid_core::Session;
use grid_vocab::Vocabulary;
use serde_json::json;

use crate::corpus::{CacheMode, CorpusArgs, Languages};

#[derive(Args)]
pub struct ReplayArgs {
    /// Tokenizer: a directory or file `grid_vocab::Vocabulary::load` reads.
    #[arg(long)]
    tokenizer: PathBuf,
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Compare with the brute-force oracle every N steps (0: never).
    #[arg(long, default_value_t = 0)]
    oracle_every: u64,
    /// Replay only the first N statements.
    #[arg(long)]
    limit: Option<usize>,
    /// Masks through the write-back mask cache (`on`) or by the trie walk alone (`off`).
    #[arg(long, value_enum, default_value_t = CacheMode::Off)]
    cache: CacheMode,
    /// Replay the statements this many times (with the cache on, later passes are warm).
    #[arg(long, default_value_t = 1)]
    passes: usize,
}

/// Counters of one replay.
#[derive(Default)]
struct Tally {
    queries: u64,
    steps: u64,
    completeness_failures: u64,
    eos_failures: u64,
    oracle_checked: u64,
    oracle_mismatches: u64,
    /// Mask times, nanoseconds.
    times: Vec<u64>,
    /// With the cache on: times of the steps served from entries only (warm), and of the
    /// steps that built an entry (cold).
    warm: Vec<u64>,
    cold: Vec<u64>,
    /// Sums over steps of what the walk did, for the stderr profile.
    visited: u64,
    allowed: u64,
    cd: u64,
    classes: u64,
    max_classes: usize,
    forced: u64,
}

impl Tally {
    fn count(&mut self, m: &Mask) {
        self.visited += u64::from(m.visited);
        self.allowed += u64::from(m.allowed);
        self.cd += u64::from(m.cd);
        self.classes += m.cd_classes.len() as u64;
        self.max_classes = self.max_classes.max(m.cd_classes.len());
        self.forced += u64::from(m.forced.is_some());
    }

    /// Means per step of the walk's work: what the cache of later work has to beat.
    fn profile(&self) -> serde_json::Value {
        let mean = |x: u64| (x as f64 / self.steps.max(1) as f64 * 10.0).round() / 10.0;
        json!({
            "profile": {
                "mean_nodes_visited": mean(self.visited),
                "mean_allowed": mean(self.allowed),
                "mean_cd": mean(self.cd),
                "mean_cd_classes": mean(self.classes),
                "max_cd_classes": self.max_classes,
                "forced_steps": self.forced,
            }
        })
    }
}

pub fn run(a: &ReplayArgs) -> Result<(), CliError> {
    let policy = a.corpus.policy()?;
    let gold = a.corpus.gold()?;
    let mut langs = Languages::new(&a.corpus.tables, policy)?;
    let vocab = Vocabulary::load(&a.tokenizer)?;
    let trie = TokenTrie::shared(&vocab)?;
    let mut masker = a.cache.masker(trie);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut t = Tally::default();
    let n = a.limit.unwrap_or(gold.len()).min(gold.len());
    let passes = a.passes.max(1);
    for (qi, g) in (0..passes).flat_map(|_| gold.iter().take(n)).enumerate() {
        let lang = langs.get(&g.db)?;
        let mut session = Session::new(&lang);
        t.queries += 1;
        let ids = vocab.encode(&g.sql);
        let mut cfg = session.start();
        let mut text: Vec<u8> = Vec::new();
        let fail = |kind: &str, step: usize, text: &[u8], extra: serde_json::Value| {
            let mut v = json!({
                "kind": kind,
                "line": g.line,
                "db": g.db,
                "step": step,
                "prefix": String::from_utf8_lossy(text),
                "sql": g.sql,
            });
            if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            v
        };
        for k in 0..=ids.len() {
            let misses = masker.cache_stats().map(|c| c.misses);
            let t0 = Instant::now();
            let m = masker.mask(&mut session, &cfg);
            let ns = t0.elapsed().as_nanos() as u64;
            t.times.push(ns);
            if let Some(before) = misses {
                let missed = masker.cache_stats().is_some_and(|c| c.misses > before);
                if missed { &mut t.cold } else { &mut t.warm }.push(ns);
            }
            t.steps += 1;
            t.count(&m);
            let complete = session.complete(&text);
            if m.eos != complete || (k == ids.len() && !m.eos) {
                t.eos_failures += 1;
                let j = fail(
                    "eos",
                    k,
                    &text,
                    json!({"mask_eos": m.eos, "complete": complete, "at_end": k == ids.len()}),
                );
                writeln!(out, "{j}")?;
            }
            if a.oracle_every > 0 && t.steps % a.oracle_every == 0 {
                t.oracle_checked += 1;
                let o = oracle_mask(&mut session, &cfg, &vocab);
                if o.bits != m.bits || o.eos != m.eos {
                    t.oracle_mismatches += 1;
                    let j = fail("oracle", k, &text, mismatch(&m, &o, &vocab));
                    writeln!(out, "{j}")?;
                }
            }
            let Some(&id) = ids.get(k) else { break };
            let bytes = vocab.token_bytes(id);
            if !m.contains(id) {
                t.completeness_failures += 1;
                let j = fail(
                    "completeness",
                    k,
                    &text,
                    json!({"token": id, "token_text": String::from_utf8_lossy(bytes)}),
                );
                writeln!(out, "{j}")?;
            }
            if let Err(stop) = session.feed(&mut cfg, bytes) {
                let j = fail(
                    "refused",
                    k,
                    &text,
                    json!({"token": id, "token_text": String::from_utf8_lossy(bytes),
                           "offset": stop.offset, "reason": format!("{:?}", stop.kind)}),
                );
                writeln!(out, "{j}")?;
                if m.contains(id) {
                    t.completeness_failures += 1;
                }
                break;
            }
            text.extend_from_slice(bytes);
        }
        if (qi + 1) % 100 == 0 {
            eprintln!(
                "replay: {} of {} statements, {} steps, {} failures",
                qi + 1,
                n * passes,
                t.steps,
                t.completeness_failures + t.eos_failures + t.oracle_mismatches
            );
        }
    }
    t.times.sort_unstable();
    t.warm.sort_unstable();
    t.cold.sort_unstable();
    let pct = |p: u64| percentile_us(&t.times, p);
    // Written by hand: the field order is part of the format.
    let mut summary = format!(
        "{{\"queries\":{},\"steps\":{},\"completeness_failures\":{},\"eos_failures\":{},\
         \"oracle_checked\":{},\"oracle_mismatches\":{},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{}}}",
        t.queries,
        t.steps,
        t.completeness_failures,
        t.eos_failures,
        t.oracle_checked,
        t.oracle_mismatches,
        pct(50),
        pct(90),
        pct(99),
    );
    if let Some(c) = masker.cache_stats() {
        let split = |v: &[u64]| {
            format!(
                "{{\"steps\":{},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{}}}",
                v.len(),
                percentile_us(v, 50),
                percentile_us(v, 90),
                percentile_us(v, 99)
            )
        };
        summary.pop();
        summary += &format!(
            ",\"cache\":{{\"hit_rate\":{:.4},\"warm\":{},\"cold\":{}}}}}",
            c.hit_rate(),
            split(&t.warm),
            split(&t.cold)
        );
    }
    eprintln!("{}", t.profile());
    writeln!(out, "{summary}")?;
    Ok(())
}

/// The ids on which the fast mask and the oracle disagree (a few of each, with spellings).
fn mismatch(fast: &Mask, oracle: &Mask, vocab: &Vocabulary) -> serde_json::Value {
    let (only_fast, only_oracle) = fast.diff(oracle);
    let show = |ids: &[u32]| -> Vec<serde_json::Value> {
        ids.iter()
            .take(8)
            .map(|&id| json!([id, String::from_utf8_lossy(vocab.token_bytes(id))]))
            .collect()
    };
    json!({
        "fast_eos": fast.eos,
        "oracle_eos": oracle.eos,
        "only_fast": only_fast.len(),
        "only_oracle": only_oracle.len(),
        "only_fast_ids": show(&only_fast),
        "only_oracle_ids": show(&only_oracle),
    })
}

/// The `p`-th percentile (nearest rank) of ascending nanosecond times, in microseconds
/// rounded to 0.1.
fn percentile_us(sorted_ns: &[u64], p: u64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted_ns.len() as u64).div_ceil(100).max(1) as usize;
    let ns = sorted_ns[rank.min(sorted_ns.len()) - 1];
    (ns as f64 / 100.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::percentile_us;

    #[test]
    fn nearest_rank_percentiles() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&ns, 50), 50.0);
        assert_eq!(percentile_us(&ns, 90), 90.0);
        assert_eq!(percentile_us(&ns, 99), 99.0);
        assert_eq!(percentile_us(&[1234], 99), 1.2);
        assert_eq!(percentile_us(&[], 50), 0.0);
    }
}
