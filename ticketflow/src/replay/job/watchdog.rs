//! The replay's watchdog: a thread that tells its front end when a run still waits past its
//! deadline, or on a database call past the server's own bound, so that a peer gone silent
//! (a link that forwards nothing while its socket stays open) cannot hold the run for ever.

use std::fmt;
use std::time::{Duration, Instant};

use crate::store::{unanswered, ANSWER_TIMEOUT};

/// How long past the deadline, or past [`ANSWER_TIMEOUT`] for one call to the database, a run
/// still waiting (on a peer that stopped answering in a way no timeout saw) is given before
/// the watchdog speaks.
const GRACE: Duration = Duration::from_secs(5);

/// How often the watchdog looks.
const POLL: Duration = Duration::from_millis(250);

/// Why a run is stuck: what the watchdog found still waiting, and that the run stops (and
/// loses nothing: `--resume` continues it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stall {
    /// The run's deadline passed [`GRACE`] ago, with the database call still waiting, if one
    /// is (a broker's calls have bounds of their own).
    Deadline {
        deadline: Duration,
        waiting: Option<String>,
    },
    /// A call to the database (named with what it asked) has waited this long.
    Unanswered { call: String, waited: Duration },
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stall::Deadline { deadline, waiting } => write!(
                f,
                "the deadline of {} s passed {} s ago and the run is still waiting for {}",
                deadline.as_secs_f64(),
                GRACE.as_secs(),
                waiting.as_deref().unwrap_or("the database or the broker")
            ),
            Stall::Unanswered { call, waited } => write!(
                f,
                "{call} has not answered for {} s, though the server ends any statement or lock wait after {} s: the link to it has gone silent",
                waited.as_secs(),
                ANSWER_TIMEOUT.as_secs()
            ),
        }?;
        write!(
            f,
            "; stopping. Every batch is durable with its checkpoint or not applied: rerun with --resume"
        )
    }
}

/// Starts a thread that calls `stalled` once, and then stops looking, when the run begun now
/// still waits past `deadline` plus [`GRACE`], or when a call to the database has waited past
/// [`ANSWER_TIMEOUT`] plus the grace. Every wait has a timeout of its own and the server bounds
/// each statement and lock wait by `ANSWER_TIMEOUT`, so this only bounds what a silent peer
/// stretches. A batch is durable with its checkpoint or not at all, so a front end may end the
/// process from `stalled` and lose nothing.
pub fn watch_for_stalls(
    deadline: Duration,
    stalled: impl FnOnce(Stall) + Send + 'static,
) -> std::io::Result<()> {
    let started = Instant::now();
    std::thread::Builder::new()
        .name("replay-watchdog".into())
        .spawn(move || {
            let stall = loop {
                std::thread::sleep(POLL);
                let longest = unanswered::longest();
                if started.elapsed() > deadline + GRACE {
                    break Stall::Deadline {
                        deadline,
                        waiting: longest.map(|(_, call)| call),
                    };
                }
                match longest {
                    Some((waited, call)) if waited > ANSWER_TIMEOUT + GRACE => {
                        break Stall::Unanswered { call, waited }
                    }
                    _ => {}
                }
            };
            stalled(stall);
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_stall_names_the_call_still_waiting_when_there_is_one() {
        let waiting = Stall::Deadline {
            deadline: Duration::from_secs(15),
            waiting: Some("postgres 127.0.0.1:5432/audit (asked to write a batch)".into()),
        };
        assert!(waiting.to_string().starts_with(
            "the deadline of 15 s passed 5 s ago and the run is still waiting for postgres 127.0.0.1:5432/audit (asked to write a batch); stopping."
        ));
        let unknown = Stall::Deadline {
            deadline: Duration::from_secs(15),
            waiting: None,
        };
        assert!(unknown
            .to_string()
            .contains("still waiting for the database or the broker; stopping."));
    }
}
