//! `grid-pgref`: the differential run against PostgreSQL's parser, at any budget (the CI
//! test runs `Budget::ci()`; the long run recorded in tests/RESULTS.md is this command).
//! Prints progress on stderr, each disagreement and then the tally as JSON lines on stdout,
//! and exits 1 on any disagreement.

use clap::Parser;
use grid_pgref::{fixtures, run, Budget};

#[derive(Parser)]
#[command(about = "Differential test of the language against PostgreSQL 15's parser")]
struct Args {
    /// Random walks per role of the built-in schema.
    #[arg(long, default_value_t = Budget::ci().walks)]
    walks: u64,
    /// Spider databases walked and mocked.
    #[arg(long, default_value_t = Budget::ci().spider_dbs)]
    spider_dbs: usize,
    /// Random walks per Spider database.
    #[arg(long, default_value_t = Budget::ci().spider_walks)]
    spider_walks: u64,
    /// Questions per Spider database the scripted mock answers.
    #[arg(long, default_value_t = Budget::ci().scripted)]
    scripted: usize,
    /// Adversarial mock generations per language.
    #[arg(long, default_value_t = Budget::ci().adversarial)]
    adversarial: u64,
    /// Token budget of a generation.
    #[arg(long, default_value_t = Budget::ci().max_tokens)]
    max_tokens: u32,
    #[arg(long, default_value_t = 20)]
    seed: u64,
    /// The shared data directory (default: $GRID_DATA_DIR or ../shared/data).
    #[arg(long)]
    data: Option<std::path::PathBuf>,
    /// Instead of a run: read statements from stdin, one per line, and print for each
    /// whether PostgreSQL's parser and the checker's read it.
    #[arg(long)]
    stdin: bool,
    /// Also write every statement judged to this file, one JSON object a line: `source`,
    /// `sql`, `language` and `postgres` ("ok" or the language's or PostgreSQL 15's
    /// error). scripts/pg-parse-diff.sh has the PostgreSQL 15 and 18 servers read them
    /// again.
    #[arg(long)]
    dump: Option<std::path::PathBuf>,
    /// With --dump: also judge the statements of this file (one a line; blank lines and
    /// `--` comments skipped) in a permissive language, for the dump only
    /// (tests/pgref/version_probes.sql).
    #[arg(long, requires = "dump")]
    probes: Option<std::path::PathBuf>,
}

fn main() {
    let a = Args::parse();
    if a.stdin {
        use std::io::BufRead;
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            let pg = grid_pgref::postgres_parses(&line).err();
            let checker = grid_pgref::checker_parses(&line).err();
            println!(
                "{}",
                serde_json::json!({"sql": line, "postgres": pg.as_deref().unwrap_or("ok"), "checker": checker.as_deref().unwrap_or("ok")})
            );
        }
        return;
    }
    let budget = Budget {
        walks: a.walks,
        spider_dbs: a.spider_dbs,
        spider_walks: a.spider_walks,
        scripted: a.scripted,
        adversarial: a.adversarial,
        max_tokens: a.max_tokens,
    };
    let data = a.data.or_else(fixtures::data_dir);
    if data.is_none() {
        eprintln!("grid-pgref: no Spider data: the built-in schema only");
    }
    let probes = match &a.probes {
        None => Vec::new(),
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
                .map(|(i, l)| (i + 1, l.to_string()))
                .collect(),
            Err(e) => {
                eprintln!("grid-pgref: cannot read the probes {}: {e}", path.display());
                std::process::exit(2);
            }
        },
    };
    let start = std::time::Instant::now();
    let mut d = run(&budget, a.seed, data.as_deref(), &mut |what| {
        eprintln!(
            "grid-pgref: {what} ({:.0} s)",
            start.elapsed().as_secs_f64()
        )
    });
    grid_pgref::probes(&mut d, &probes);
    if let Some(path) = &a.dump {
        use std::io::Write;
        let written = std::fs::File::create(path).and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            let verdict =
                |r: &Result<(), String>| r.as_ref().err().map_or("ok", String::as_str).to_string();
            for j in &d.judged {
                let line = serde_json::json!({
                    "source": j.source,
                    "sql": j.sql,
                    "language": verdict(&j.language),
                    "postgres": verdict(&j.postgres),
                });
                writeln!(w, "{line}")?;
            }
            w.flush()
        });
        if let Err(e) = written {
            eprintln!("grid-pgref: cannot write {}: {e}", path.display());
            std::process::exit(2);
        }
    }
    for x in &d.disagreements {
        println!(
            "{}",
            serde_json::json!({"source": x.source, "what": x.what, "sql": x.sql, "error": x.error})
        );
    }
    let mut summary = d.summary();
    summary["seed"] = a.seed.into();
    summary["seconds"] = start.elapsed().as_secs().into();
    println!("{summary}");
    if !d.disagreements.is_empty() {
        std::process::exit(1);
    }
}
