//! What the workspace's integration tests (and benchmarks) share: a declarative [`Test`] of
//! the built `lessonprobe`, and the real services and fixtures the tests run against.
//!
//! A run states its arguments, environment, folder, expected exit status and output in one
//! place, then hands back what it printed for further checks:
//!
//! ```no_run
//! use lessonprobe_testkit::*;
//!
//! let dir = Dir::new();
//! dir.write("checkpoints/77-deadline.toml", "…");
//! let ran = dir
//!     .lessonprobe()
//!     .args(["--lesson", "77"])
//!     .stdout_has("deadline of 1s exceeded")
//!     .within(std::time::Duration::from_secs(20))
//!     .failure();
//! let report = parse_junit(&dir.join("reports/lesson-77.xml"));
//! # let _ = (ran, report);
//! ```
//!
//! Services come from `LESSONPROBE_TEST_*` variables (`scripts/test.sh` starts them): a test
//! that cannot find one fails loudly in CI (`CI=true`) and is skipped elsewhere, saying why
//! ([`services`]).

pub mod bench;
pub mod kafka;
pub mod kills;
pub mod load;
pub mod net;
pub mod postgres;
pub mod process;
pub mod replay;
pub mod services;
pub mod sqlite;
pub mod ssh;
pub mod toxiproxy;

mod files;
mod junit;
mod manifest;
mod table;
mod test;
mod text;

pub use files::{copy_dir, copy_manifests, large_manifest, repo, snapshot, wait_for, Dir};
pub use junit::{
    attribute, case, description, message, parse_junit, validate_against, validate_junit, verdict,
    verdicts,
};
pub use kafka::{on_apache_kafka, ApacheKafka, BrokerKind, BrokerProcess};
pub use manifest::{Manifest, Probe};
pub use net::SilentListener;
pub use services::{in_ci, service, tool};
pub use table::csv_rows;
pub use test::{
    bin, git, git_first_commit, lessonprobe, on_a_terminal, outcome_ids, Ran, Running, Test,
};
pub use text::{line_of, line_of_from};
