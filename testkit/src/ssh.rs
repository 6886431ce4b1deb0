//! The throwaway sshd that `scripts/test.sh` starts on loopback: its address, keys and
//! known_hosts.

use crate::services::service;

/// The test sshd and the files to reach it, from `LESSONPROBE_TEST_SSH_*`.
pub struct Ssh {
    pub host: String,
    pub port: u16,
    pub user: String,
    /// The client key the server authorizes.
    pub key: String,
    /// A key the server does not authorize (its `.pub` beside it).
    pub other_key: String,
    pub known_hosts: String,
    /// sshd's log, where it names refused users.
    pub log: Option<String>,
}

impl Ssh {
    /// The test sshd, or `None` outside CI when it is not there (in CI that fails the test).
    #[track_caller]
    pub fn from_env() -> Option<Ssh> {
        let addr = service("LESSONPROBE_TEST_SSH_ADDR", "a throwaway sshd")?;
        let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
        let var = |v: &str| {
            std::env::var(v)
                .unwrap_or_else(|_| panic!("{v} must be set with LESSONPROBE_TEST_SSH_ADDR"))
        };
        Some(Ssh {
            host: host.to_owned(),
            port: port.parse().expect("a port number"),
            user: var("LESSONPROBE_TEST_SSH_USER"),
            key: var("LESSONPROBE_TEST_SSH_KEY"),
            other_key: var("LESSONPROBE_TEST_SSH_OTHER_KEY"),
            known_hosts: var("LESSONPROBE_TEST_SSH_KNOWN_HOSTS"),
            log: std::env::var("LESSONPROBE_TEST_SSH_LOG").ok(),
        })
    }

    /// Whether sshd logged an authentication attempt for `user` (after a moment for the log).
    pub fn auth_attempted(&self, user: &str) -> bool {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let Some(log) = &self.log else { return false };
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(&format!("Invalid user {user}"))
    }
}

/// The `ID` of this machine's /etc/os-release: what the loopback "remote" host reports.
pub fn os_id() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("ID="))
        .unwrap()
        .trim_matches('"')
        .to_owned()
}
