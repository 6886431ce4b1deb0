//! `lessonprobe --watch`: the selection runs, then again after each change to the lessons, the
//! course's project or the current folder, the probes that failed first. A change during a run
//! stops it (its probes killed, as by Ctrl-C) and starts the next; Ctrl-C ends the loop. The
//! course's services stay up between runs; one is started anew only when its declaration
//! changed, and all stop when the loop ends.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::changes::Changes;
use crate::checkpoint::CatalogError;
use crate::cli::RunArgs;
use crate::exit::{Code, Error};
use crate::lesson::CourseError;
use crate::run::{Interrupt, Interruption};

use super::run::{junit_path, run_keeping, KeptServices, Order};

/// How often a running or waiting loop looks at Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// Runs the selection of `args` until `signals` (Ctrl-C, SIGTERM) is requested; the exit code is
/// that of the interruption.
pub fn watch(args: &RunArgs, signals: &Interrupt) -> Result<Code, Error> {
    given_folders_exist(args)?;
    let changes = Changes::watch(&folders(args), &own_files(args))
        .map_err(|e| Error::Operation(e.to_string()))?;
    // Dropped when the loop ends, stopping them.
    let services = KeptServices::new();
    let mut cause: Option<Vec<PathBuf>> = None;
    let mut round = 0_u64;
    loop {
        round += 1;
        clear_screen();
        errln!(
            "lessonprobe --watch: run {round}{}",
            because(cause.as_deref())
        );
        let interrupt = Interrupt::new();
        let (result, restarted) = std::thread::scope(|scope| {
            let run =
                scope.spawn(|| run_keeping(args, &interrupt, Order::FailedFirst, Some(&services)));
            let restarted = forward(signals, &interrupt, &changes, || run.is_finished());
            let result = run
                .join()
                .unwrap_or_else(|_| Err(Error::Operation("the run panicked".into())));
            (result, restarted)
        });
        // The working copies stay: the next run brings them up to what changed.
        crate::lesson::isolation::between_runs();
        if let Err(e) = result {
            errln!("lessonprobe: {e}");
        }
        if let Some(why) = signals.requested() {
            return Ok(ended_by(why));
        }
        cause = match restarted {
            Some(paths) => Some(paths),
            None => {
                errln!(
                    "lessonprobe --watch: waiting for a change in {} (Ctrl-C to stop)",
                    list(changes.roots())
                );
                match wait(signals, &changes) {
                    Ok(paths) => Some(paths),
                    Err(why) => return Ok(ended_by(why)),
                }
            }
        };
    }
}

/// The folders watched: the current folder (the student's own files, and the course when it
/// is one), the course given (its lessons and project) and the checkpoint manifests given. A
/// course whose settings are broken is watched all the same: each run says what is wrong.
fn folders(args: &RunArgs) -> Vec<PathBuf> {
    std::iter::once(PathBuf::from("."))
        .chain(args.course.course.clone())
        .chain(args.catalog.checkpoints.clone())
        .collect()
}

/// A `--course` or `--checkpoints` folder that does not exist ends the watch before it starts,
/// with the error and exit code a run gives (a broken folder's contents are each run's to say).
fn given_folders_exist(args: &RunArgs) -> Result<(), Error> {
    if let Some(dir) = args.course.course.as_ref().filter(|dir| !dir.is_dir()) {
        return Err(CourseError::Missing(dir.clone()).into());
    }
    if let Some(dir) = &args.catalog.checkpoints {
        std::fs::read_dir(dir).map_err(|source| CatalogError::UnreadableFolder {
            dir: dir.clone(),
            source,
        })?;
    }
    Ok(())
}

/// What a run writes in the folders it watches: its reports, its last-failed state, its
/// services' logs (in the course's state folder) and the working copies kept in the user's
/// cache (which may be inside the course).
fn own_files(args: &RunArgs) -> Vec<PathBuf> {
    junit_path(args)
        .into_iter()
        .chain(args.html.clone())
        .chain(
            args.course
                .course
                .as_ref()
                .map(|course| course.join(crate::history::FOLDER)),
        )
        .chain([
            PathBuf::from(crate::history::FOLDER),
            crate::lesson::isolation::kept_root(),
        ])
        .collect()
}

/// While the run goes on: Ctrl-C or SIGTERM stops it as such, a change stops it to start the
/// next (whose cause it returns).
fn forward(
    signals: &Interrupt,
    run: &Interrupt,
    changes: &Changes,
    finished: impl Fn() -> bool,
) -> Option<Vec<PathBuf>> {
    while !finished() {
        if let Some(why) = signals.requested() {
            run.request(why);
            return None;
        }
        if let Some(paths) = changes.next(POLL) {
            run.request(Interruption::Restart);
            return Some(paths);
        }
    }
    None
}

/// Between runs: the next change, or the interruption that ends the loop.
fn wait(signals: &Interrupt, changes: &Changes) -> Result<Vec<PathBuf>, Interruption> {
    loop {
        if let Some(why) = signals.requested() {
            return Err(why);
        }
        if let Some(paths) = changes.next(POLL) {
            return Ok(paths);
        }
    }
}

fn ended_by(why: Interruption) -> Code {
    match why {
        Interruption::Terminate => Code::Terminated,
        Interruption::Interrupt | Interruption::Restart => Code::Interrupted,
    }
}

/// ", after a change to PATH (and N more)", or nothing for the first run.
fn because(paths: Option<&[PathBuf]>) -> String {
    let Some([first, rest @ ..]) = paths else {
        return String::new();
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let shown = first.strip_prefix(&cwd).unwrap_or(first).display();
    match rest.len() {
        0 => format!(", after a change to {shown}"),
        n => format!(", after a change to {shown} and {n} more"),
    }
}

fn list(folders: &[PathBuf]) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    folders
        .iter()
        .map(|f| match f.strip_prefix(&cwd) {
            Ok(rel) if rel == Path::new("") => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => f.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Clears a terminal between runs, as cargo-watch and bacon do; output that is not a terminal
/// keeps every run.
fn clear_screen() {
    let mut out = std::io::stdout();
    if out.is_terminal() {
        // Erase the screen and its scrollback, cursor home.
        let _ = out.write_all(b"\x1b[2J\x1b[3J\x1b[H");
        let _ = out.flush();
    }
}
