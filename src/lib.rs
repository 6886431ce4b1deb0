//! lessonprobe turns a course's lesson claims into numbered checkpoint probes, runs them on
//! embedded or real services, and reports PASS, FAIL, ERROR, SKIP or PENDING.

// First: its macros serve every module after it.
#[macro_use]
mod console;

pub mod case_key;
pub mod changes;
pub mod checkpoint;
pub mod clean;
pub mod cli;
pub mod commands;
pub mod config;
pub mod course_files;
pub mod diagnostics;
pub mod environment;
pub mod exit;
pub mod exit_code;
pub mod history;
pub mod lesson;
pub mod logging;
pub mod process;
pub mod progress;
pub mod remote;
pub mod render;
pub mod report;
pub mod run;
pub mod selector;
pub mod services;
pub mod signals;
pub mod wildcard;

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the subcommand, prints any error on one line (and standard
/// output that could not be written) and maps the result to the process exit code.
pub fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    logging::init();
    let result = commands::dispatch(cli);
    // The working copies kept for reuse are temp folders: none may outlive the process.
    lesson::isolation::release_all();
    let unwritten = console::unwritten();
    if let Some(why) = unwritten {
        errln!("lessonprobe: standard output: {why}");
    }
    match result {
        Ok(exit_code::Code::Ok) if unwritten.is_some() => exit_code::Code::Io.into(),
        Ok(code) => code.into(),
        Err(err) => {
            errln!("lessonprobe: {err}");
            err.exit_code().into()
        }
    }
}
