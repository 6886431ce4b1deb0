//! Loopback ports for tests: one where nothing listens, and a server that accepts connections
//! and never speaks (what a hung SSH host or a black-hole database looks like to a client).

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A port of 127.0.0.1 that was free a moment ago: nothing listens there unless a test starts
/// something on it.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port of 127.0.0.1")
        .port()
}

/// A listener on 127.0.0.1 that counts connections and holds each open, silent.
pub struct SilentListener {
    pub port: u16,
    count: Arc<AtomicUsize>,
}

impl SilentListener {
    pub fn start() -> SilentListener {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in l.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        SilentListener { port, count }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits until a client has connected, at most `limit`.
    #[track_caller]
    pub fn wait_for_connection(&self, limit: std::time::Duration) {
        let started = std::time::Instant::now();
        while self.connections() == 0 {
            assert!(
                started.elapsed() < limit,
                "nothing connected to 127.0.0.1:{} within {limit:?}",
                self.port
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
