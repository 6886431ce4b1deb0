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
    mut start: impl FnMut() -> Running,
    mut progress: impl FnMut() -> i64,
    mut after_kill: impl FnMut(usize),
) -> Campaign {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut killed, mut runs) = (0, 0);
    loop {
        runs += 1;
        let mut run = start();
        if killed == kills {
            eprintln!("run {runs}, after {killed} kills, must complete");
            return Campaign {
                kills: killed,
                runs,
                last: run.success(),
            };
        }
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
