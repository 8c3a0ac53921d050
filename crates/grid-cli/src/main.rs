//! `grid`: command-line tools over the grid_pg engine.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod artefacts;
mod audit;
mod corpus;
mod generate;
mod parse;
mod replay;
mod statement_check;

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
    /// Run generations through the decode loop against an endpoint or a mock.
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
        Command::Generate(a) => generate::run(&a).map_err(|e| e.to_string()),
        Command::Parse(a) => parse::run(&a).map_err(|e| e.to_string()),
        Command::Replay(a) => replay::run(&a).map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grid: {e}");
            ExitCode::from(2)
        }
    }
}
