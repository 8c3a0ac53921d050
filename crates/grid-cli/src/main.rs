//! `grid`: command-line tools over the grid_pg engine.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit;
mod bench;
mod check_output;
mod corpus;
mod error;
mod generate;
mod parse;
mod replay;

#[derive(Parser)]
#[command(name = "grid", version, about = "grid_pg engine tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Verify or replay a JSONL audit log (exit 0 verified, 1 fails, 2 unreadable).
    Audit(audit::AuditArgs),
    /// Time per-step masks of GRID and llguidance over the same gold token sequences.
    Bench(bench::BenchArgs),
    /// Write the vocabulary, gold ids and peer grammars for an out-of-process peer engine.
    BenchExport(bench::export::BenchExportArgs),
    /// Time the mask along n-token streams at fixed nesting depths: is the cost flat?
    BenchR(bench::r::BenchRArgs),
    /// Check statements for what a role may not write (the forbidden-output check).
    CheckOutput(check_output::CheckOutputArgs),
    /// Ask questions through the ask pipeline grid.ask runs, against an endpoint or a mock.
    Generate(generate::GenerateArgs),
    /// Check every gold statement against its database's language (L1 + L2 + L3).
    Parse(parse::ParseArgs),
    /// Replay gold statements token by token through the mask: completeness, EOS, oracle.
    Replay(replay::ReplayArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Audit(a) => return audit::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::BenchExport(a) => bench::export::run(&a),
        Command::BenchR(a) => bench::r::run(&a),
        Command::CheckOutput(a) => check_output::run(&a),
        Command::Generate(a) => generate::run(&a),
        Command::Parse(a) => parse::run(&a),
        Command::Replay(a) => replay::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grid: {e}");
            ExitCode::from(2)
        }
    }
}
