//! The calls to replay targets still waiting for their answer, for a watchdog that ends a run
//! whose database went silent: a link that forwards nothing while its socket stays open is
//! seen by no timeout of the client (the peer's kernel acknowledges every byte), and the
//! server's own statement timeout is an answer that never arrives.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The calls of this process.
static CALLS: Calls = Calls::new();

/// Calls waiting: each one's number, when it was made, the database and what it asked.
struct Calls {
    waiting: Mutex<Vec<(u64, Instant, String)>>,
    next: AtomicU64,
}

/// A call waiting for its answer, for as long as this lives.
#[must_use = "the call counts as waiting only while this lives"]
pub struct Waiting {
    calls: &'static Calls,
    id: u64,
}

/// Marks a call to `place` (a database, without its password) asking for `what` as waiting.
pub(crate) fn asking(place: &str, what: &str) -> Waiting {
    CALLS.asking(place, what)
}

/// The call of this process that has waited longest, with how long: `None` when none waits.
pub fn longest() -> Option<(Duration, String)> {
    CALLS.longest()
}

impl Calls {
    const fn new() -> Calls {
        Calls {
            waiting: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
        }
    }

    fn asking(&'static self, place: &str, what: &str) -> Waiting {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.push((id, Instant::now(), format!("{place} (asked to {what})")));
        Waiting { calls: self, id }
    }

    fn longest(&self) -> Option<(Duration, String)> {
        let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting
            .iter()
            .min_by_key(|(_, since, _)| *since)
            .map(|(_, since, what)| (since.elapsed(), what.clone()))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = self.calls.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.retain(|(id, _, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_waits_until_its_answer_and_the_oldest_is_told() {
        let calls: &'static Calls = Box::leak(Box::new(Calls::new()));
        assert!(calls.longest().is_none());
        let first = calls.asking("postgres db:1/a", "write a batch");
        std::thread::sleep(Duration::from_millis(20));
        let second = calls.asking("postgres db:2/b", "commit");
        let (waited, what) = calls.longest().unwrap();
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        assert_eq!(what, "postgres db:1/a (asked to write a batch)");
        drop(first);
        assert_eq!(
            calls.longest().unwrap().1,
            "postgres db:2/b (asked to commit)"
        );
        drop(second);
        assert!(calls.longest().is_none());
    }
}
