//! Riding through a brief outage: a peer (the broker or the database) away for a while, the
//! budget of time a run waits for it (`--retry-for`), the backoff between its attempts, and
//! what the run tells its front end: one line when an outage begins, one when it ends.

use std::fmt;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

/// The first wait between two attempts; each next one doubles, up to [`BACKOFF_CAP`].
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// A peer found away: named as its errors name it, what the run was doing, and the error that
/// showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Down {
    /// `kafka HOST:PORT` or the database (`postgres HOST:PORT/DB`).
    pub peer: String,
    /// What the run was doing when it lost the peer: `execution`, `verification`.
    pub phase: &'static str,
    pub reason: String,
}

/// An outage a run is in.
#[derive(Debug, Clone)]
pub struct Outage {
    pub down: Down,
    /// When its first failure came (for the operator's clock).
    pub since: SystemTime,
    began: Instant,
    /// Attempts failed since it began.
    attempts: u32,
}

impl Outage {
    /// How long it has lasted.
    pub fn lasted(&self) -> Duration {
        self.began.elapsed()
    }
}

/// An outage a run rode through: the peer, the phase, and the time it cost (from its first
/// failure to the first durable batch, or the attempt that completed, after it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Survived {
    pub peer: String,
    pub phase: &'static str,
    #[serde(rename = "seconds_lost", serialize_with = "seconds")]
    pub lost: Duration,
}

/// An outage that outlasted the budget: the run ended on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outlasted {
    pub peer: String,
    pub phase: &'static str,
    #[serde(rename = "seconds_down", serialize_with = "seconds")]
    pub lasted: Duration,
    #[serde(rename = "retry_for_seconds", serialize_with = "seconds")]
    pub budget: Duration,
    pub reason: String,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 10.0).round() / 10.0)
}

impl fmt::Display for Outlasted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} did not come back during {} within the retry budget of {} s (--retry-for): down for {:.1} s, last: {}",
            self.peer,
            self.phase,
            self.budget.as_secs_f64(),
            self.lasted.as_secs_f64(),
            self.reason
        )
    }
}

/// The outages of one run: those it rode through, and the one it ended on, if any.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Outages {
    pub survived: Vec<Survived>,
    pub outlasted: Option<Outlasted>,
}

impl Outages {
    /// The time the survived outages cost, together.
    pub fn lost(&self) -> Duration {
        self.survived.iter().map(|s| s.lost).sum()
    }
}

/// What a run tells its front end about an outage: once when it begins, once when it ends.
#[derive(Debug)]
pub enum OutageNews<'a> {
    /// `outage` began: `retrying` is begun again until `budget` has passed since then.
    Down {
        outage: &'a Outage,
        budget: Duration,
        retrying: &'a str,
    },
    Back(&'a Survived),
}

impl fmt::Display for OutageNews<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutageNews::Down {
                outage,
                budget,
                retrying,
            } => {
                let since =
                    chrono::DateTime::<chrono::Utc>::from(outage.since).format("%H:%M:%S UTC");
                let d = &outage.down;
                write!(
                    f,
                    "{} is down during {} since {since} ({}); retrying {retrying} from the durable checkpoints for up to {} s (--retry-for)",
                    d.peer,
                    d.phase,
                    d.reason,
                    budget.as_secs_f64()
                )
            }
            OutageNews::Back(s) => write!(
                f,
                "{} is back after {:.1} s; {} goes on",
                s.peer,
                s.lost.as_secs_f64(),
                s.phase
            ),
        }
    }
}

/// The time a run may wait for a peer to come back, counted from an outage's first failure;
/// shared by the threads of a run (a durable batch anywhere ends the outage).
#[derive(Debug)]
pub struct RetryBudget {
    budget: Duration,
    state: Mutex<(Option<Outage>, Outages)>,
}

impl RetryBudget {
    /// A budget of `budget` per outage; zero retries nothing.
    pub fn new(budget: Duration) -> RetryBudget {
        RetryBudget {
            budget,
            state: Mutex::new((None, Outages::default())),
        }
    }

    fn state(&self) -> MutexGuard<'_, (Option<Outage>, Outages)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An attempt failed because `down`: how long to wait before the next attempt, or `None`
    /// when the budget since the outage began is spent (recorded as outlasted unless the
    /// budget is zero: then the run ends as it would without one). The outage's first failure
    /// is told, later ones are not.
    pub fn failed(
        &self,
        down: Down,
        retrying: &str,
        told: &dyn Fn(&OutageNews<'_>),
    ) -> Option<Duration> {
        if self.budget.is_zero() {
            return None;
        }
        let mut state = self.state();
        let (open, outages) = &mut *state;
        let outage = match open {
            Some(outage) => {
                outage.down = down;
                outage
            }
            None => {
                let outage = open.insert(Outage {
                    down,
                    since: SystemTime::now(),
                    began: Instant::now(),
                    attempts: 0,
                });
                told(&OutageNews::Down {
                    outage,
                    budget: self.budget,
                    retrying,
                });
                outage
            }
        };
        outage.attempts += 1;
        let left = self.budget.saturating_sub(outage.lasted());
        if left.is_zero() {
            outages.outlasted = Some(Outlasted {
                peer: outage.down.peer.clone(),
                phase: outage.down.phase,
                lasted: outage.lasted(),
                budget: self.budget,
                reason: outage.down.reason.clone(),
            });
            *open = None;
            return None;
        }
        Some(backoff(outage.attempts).min(left))
    }

    /// The peer answered again (a batch became durable, or an attempt completed): the open
    /// outage, if any, is over, and told.
    pub fn back(&self, told: &dyn Fn(&OutageNews<'_>)) {
        let mut state = self.state();
        let (open, outages) = &mut *state;
        if let Some(outage) = open.take() {
            let survived = Survived {
                peer: outage.down.peer,
                phase: outage.down.phase,
                lost: outage.began.elapsed(),
            };
            told(&OutageNews::Back(&survived));
            outages.survived.push(survived);
        }
    }

    /// The outages so far.
    pub fn outages(&self) -> Outages {
        self.state().1.clone()
    }

    /// Runs `attempt` again after each failure `down_of` calls an outage, with backoff, until it
    /// succeeds, fails otherwise, or the outage outlasts the budget; `retrying` says what is
    /// begun again. For work that begins from nothing each time (a verification reads and
    /// writes nothing it would resume from).
    pub fn ride<T, E>(
        &self,
        retrying: &str,
        told: &dyn Fn(&OutageNews<'_>),
        down_of: impl Fn(&E) -> Option<Down>,
        mut attempt: impl FnMut() -> Result<T, E>,
    ) -> Result<T, E> {
        loop {
            match attempt() {
                Ok(done) => {
                    self.back(told);
                    return Ok(done);
                }
                Err(e) => match down_of(&e).and_then(|down| self.failed(down, retrying, told)) {
                    Some(wait) => std::thread::sleep(wait),
                    None => return Err(e),
                },
            }
        }
    }
}

/// The wait after the `attempt`th failed attempt of an outage: 0.5 s, doubling, at most 5 s.
fn backoff(attempt: u32) -> Duration {
    BACKOFF_FIRST
        .saturating_mul(1 << attempt.saturating_sub(1).min(10))
        .min(BACKOFF_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn down(reason: &str) -> Down {
        Down {
            peer: "kafka 127.0.0.1:9092".into(),
            phase: "execution",
            reason: reason.into(),
        }
    }

    #[test]
    fn the_backoff_doubles_from_half_a_second_up_to_five() {
        let waits: Vec<u128> = (1..=7).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
    }

    #[test]
    fn an_outage_is_told_once_when_it_begins_and_once_when_it_ends() {
        let budget = RetryBudget::new(Duration::from_secs(60));
        let said = RefCell::new(Vec::new());
        let told = |news: &OutageNews<'_>| said.borrow_mut().push(news.to_string());
        assert_eq!(
            budget.failed(down("Local: Broker transport failure"), "the rest", &told),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            budget.failed(
                down("Local: All broker connections are down"),
                "the rest",
                &told
            ),
            Some(Duration::from_secs(1))
        );
        budget.back(&told);
        budget.back(&told);
        let said = said.into_inner();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("kafka 127.0.0.1:9092 is down during execution since "));
        assert!(said[0].contains("(Local: Broker transport failure); retrying the rest from the durable checkpoints for up to 60 s (--retry-for)"));
        assert!(said[1].starts_with("kafka 127.0.0.1:9092 is back after "));
        let outages = budget.outages();
        assert_eq!(outages.survived.len(), 1);
        assert_eq!(outages.outlasted, None);
    }

    #[test]
    fn a_zero_budget_retries_nothing_and_records_nothing() {
        let budget = RetryBudget::new(Duration::ZERO);
        assert_eq!(
            budget.failed(down("reset"), "it", &|_| panic!("told")),
            None
        );
        assert_eq!(budget.outages(), Outages::default());
    }

    #[test]
    fn an_outage_past_the_budget_ends_the_run_and_is_recorded_as_outlasted() {
        let budget = RetryBudget::new(Duration::from_millis(30));
        let mut attempts = 0;
        let ended: Result<(), &str> = budget.ride(
            "it",
            &|_| {},
            |e: &&str| Some(down(e)),
            || {
                attempts += 1;
                Err("Local: Timed out")
            },
        );
        assert_eq!(ended, Err("Local: Timed out"));
        assert_eq!(
            attempts, 2,
            "one wait of at most the 30 ms left, then the end"
        );
        let outlasted = budget.outages().outlasted.expect("outlasted");
        assert_eq!(outlasted.peer, "kafka 127.0.0.1:9092");
        assert!(outlasted
            .to_string()
            .starts_with("kafka 127.0.0.1:9092 did not come back during execution within the retry budget of 0.03 s (--retry-for)"));
    }

    #[test]
    fn riding_ends_at_an_error_that_is_no_outage() {
        let budget = RetryBudget::new(Duration::from_secs(60));
        let mut attempts = 0;
        let ended: Result<(), &str> = budget.ride(
            "it",
            &|_| {},
            |_| None,
            || {
                attempts += 1;
                Err("refused")
            },
        );
        assert_eq!((ended, attempts), (Err("refused"), 1));
    }
}
