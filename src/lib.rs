//! lessonprobe turns a course's lesson claims into numbered checkpoint probes, runs them on
//! embedded or real services, and reports PASS, FAIL, ERROR, SKIP or PENDING.

pub mod checkpoint;
pub mod clean;
pub mod cli;
pub mod commands;
pub mod config;
pub mod diagnostics;
pub mod exit;
pub mod lesson;
pub mod process;
pub mod progress;
pub mod remote;
pub mod render;
pub mod report;
pub mod run;
pub mod scratch_key;
pub mod selector;
pub mod signals;
pub mod wildcard;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the subcommand, prints any error on one line and maps the
/// result to the process exit code.
pub fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_logging();
    match commands::dispatch(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("lessonprobe: {err}");
            err.exit_code().into()
        }
    }
}

/// Logs go to stderr at `warn` unless RUST_LOG says otherwise, coloured only on a terminal.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(report::terminal::colour(std::io::stderr().is_terminal()))
        .try_init();
}
