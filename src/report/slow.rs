//! The slow notice (as nextest's SLOW lines): a line for a case still running after the
//! threshold (`--slow-after`), and again after each further threshold, whether or not the
//! output is a terminal. A watcher thread keeps the clock; the run's events tell it which
//! cases run.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ReportError, Reporter};
use crate::run::RunEvent;

/// A running case: its name, when it started, how many notices it had.
struct Running {
    name: String,
    started: Instant,
    notices: u32,
}

#[derive(Default)]
struct State {
    running: BTreeMap<usize, Running>,
    done: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct Slow {
    shared: Shared,
    watcher: Option<JoinHandle<()>>,
}

impl Slow {
    /// Writes a notice to `out` for each case running longer than a multiple of `after`. On a
    /// terminal, each notice first clears the line, where the status line is drawn; the status
    /// line is drawn again below it.
    pub fn new(after: Duration, out: impl Write + Send + 'static, terminal: bool) -> Slow {
        let shared: Shared = Arc::default();
        let watched = shared.clone();
        let clear = if terminal { "\r\x1b[2K" } else { "" };
        let watcher = std::thread::Builder::new()
            .name("slow-notices".into())
            .spawn(move || watch(&watched, after, out, clear))
            .ok();
        Slow { shared, watcher }
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let (state, wake) = &*self.shared;
        change(&mut state.lock().unwrap_or_else(PoisonError::into_inner));
        wake.notify_all();
    }

    fn stop(&mut self) {
        self.update(|s| s.done = true);
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
    }
}

/// Sleeps until the next case reaches its next multiple of `after`, writes its notice, until
/// told the run is done.
fn watch(shared: &Shared, after: Duration, mut out: impl Write, clear: &str) {
    let (state, wake) = &**shared;
    let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
    while !guard.done {
        let now = Instant::now();
        for (_, case) in guard.running.iter_mut() {
            let due = after * (case.notices + 1);
            let ran = now.duration_since(case.started);
            if ran >= due {
                case.notices = ran.as_nanos().div_euclid(after.as_nanos().max(1)) as u32;
                let _ = writeln!(
                    out,
                    "{clear}SLOW    [>{:>7.3}s] {}",
                    due.as_secs_f64(),
                    case.name
                );
                let _ = out.flush();
            }
        }
        let next = guard
            .running
            .values()
            .map(|c| c.started + after * (c.notices + 1))
            .min();
        guard = match next {
            Some(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                wake.wait_timeout(guard, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => wake.wait(guard).unwrap_or_else(PoisonError::into_inner),
        };
    }
}

impl Reporter for Slow {
    fn event(&mut self, event: &RunEvent<'_>) {
        match event {
            RunEvent::CaseStarted { index, case } => {
                let name = format!("lesson {} {}", case.checkpoint.lesson, case.display_name());
                self.update(|s| {
                    s.running.insert(
                        *index,
                        Running {
                            name,
                            started: Instant::now(),
                            notices: 0,
                        },
                    );
                });
            }
            RunEvent::CaseFinished { index, .. } => self.update(|s| {
                s.running.remove(index);
            }),
            RunEvent::RunFinished { .. } => self.stop(),
            RunEvent::RunStarted { .. } | RunEvent::RunInterrupted { .. } => {}
        }
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        self.stop();
        Ok(())
    }
}

impl Drop for Slow {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_notice_per_threshold_for_a_case_still_running_and_none_after_it_ends() {
        let out = Lines::default();
        let mut slow = Slow::new(Duration::from_millis(100), out.clone(), false);
        slow.update(|s| {
            s.running.insert(
                3,
                Running {
                    name: "lesson 31 EX-31-01 exercise".into(),
                    started: Instant::now(),
                    notices: 0,
                },
            );
        });
        std::thread::sleep(Duration::from_millis(250));
        slow.update(|s| {
            s.running.remove(&3);
        });
        std::thread::sleep(Duration::from_millis(150));
        slow.stop();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "SLOW    [>  0.100s] lesson 31 EX-31-01 exercise\nSLOW    [>  0.200s] lesson 31 EX-31-01 exercise\n"
        );
    }
}
