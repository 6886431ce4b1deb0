//! Busy cores for tests of contention: a run under load sees the scheduling that an idle
//! machine hides (a lock held longer, a writer preempted mid-transaction).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Threads spinning on every core until dropped (they die with the test process too).
pub struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl CpuHog {
    /// One spinning thread per core the machine has.
    pub fn on_every_core() -> CpuHog {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for i in 0..100_000u64 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(i),
                            );
                        }
                    }
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
