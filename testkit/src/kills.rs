//! SIGKILL campaigns: a resumable command started again and again and killed at random moments,
//! as crashes and impatient operators do, until one run is let complete.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Ran, Running};

/// What a campaign did.
pub struct Campaign {
    pub kills: usize,
    pub runs: usize,
    /// The run that was let complete.
    pub last: Ran,
}

/// Which run [`kill_campaign`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// One to be killed: work made small (a batch of a record or two) so that many kills land
    /// inside it.
    ToKill,
    /// The one let complete after the kills: what is left at the size an operator's rerun
    /// would use, since thousands of one-record transactions outlast a deadline on a busy
    /// machine.
    ToComplete,
}

impl Run {
    /// The `--batch` of this run: `small` for one to be killed, 1,000 records for the one let
    /// complete (its batches still many, so a check that they tile each range still counts).
    pub fn batch(self, small: &'static str) -> &'static str {
        match self {
            Run::ToKill => small,
            Run::ToComplete => "1000",
        }
    }
}

/// Kills `kills` runs of `start` and then lets one complete (it must exit 0).
///
/// Every fourth kill lands anywhere in a run's first 600 ms, start-up and planning included; the
/// others a random moment (up to `after_progress`) after `progress` has moved during that run,
/// so that they hit work being made durable. `after_kill` is called with the kill's number once
/// the killed run is reaped, to check what must hold after a crash. Panics if a run completes
/// before all `kills` kills: the work was too small to interrupt that often.
#[track_caller]
pub fn kill_campaign(
    seed: u64,
    kills: usize,
    after_progress: Duration,
    mut start: impl FnMut(Run) -> Running,
    mut progress: impl FnMut() -> i64,
    mut after_kill: impl FnMut(usize),
) -> Campaign {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut killed, mut runs) = (0, 0);
    loop {
        runs += 1;
        if killed == kills {
            eprintln!("run {runs}, after {killed} kills, must complete");
            return Campaign {
                kills: killed,
                runs,
                last: start(Run::ToComplete).success(),
            };
        }
        let mut run = start(Run::ToKill);
        if killed % 4 == 0 {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..600)));
        } else {
            let before = progress();
            let waiting = Instant::now();
            while progress() == before
                && run.is_running()
                && waiting.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let later = rng.random_range(0..after_progress.as_millis().max(1) as u64);
            std::thread::sleep(Duration::from_millis(later));
        }
        if !run.is_running() {
            let ran = run.success();
            panic!(
                "run {runs} completed after only {killed} of {kills} kills: the work is too \
                 small to interrupt that often\n{}",
                ran.text()
            );
        }
        run.kill();
        killed += 1;
        after_kill(killed);
    }
}
