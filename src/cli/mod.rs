//! The command line (DESIGN §5): argument parsing, reading files, printing
//! results and mapping errors to exit codes (0 ok, 1 bad input, 2 usage).
//! The only place `anyhow` is used; everything it calls returns typed errors.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Queues and admits GPU training work under per-tenant quotas, with policy as code.
#[derive(Parser, Debug)]
#[command(name = "arbiter", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {}
}
