//! The replay under network faults on real links: a Toxiproxy proxy between `lessonprobe
//! replay` and PostgreSQL, with latency, a bandwidth limit, a reset and a link cut after N
//! bytes put on it while the plan executes. Each case ends within its bound — exit 0, or exit 4
//! naming PostgreSQL — and a rerun of the same plan through the healed link lands exactly the
//! window's rows (none lost, none twice), every checkpoint at its stop, the live group's
//! committed offsets untouched. On Apache Kafka; the table of cases is in docs/replay-design.md.

use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{commit, committed, watermarks};
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::replay::{replay_args, SAMPLE_DAYS};
use lessonprobe_testkit::toxiproxy::{self, Proxy, Stream, Toxic};
use lessonprobe_testkit::*;

const TOPIC: &str = "faults";
const LIVE: &str = "live-faults";
const GROUP: &str = "replay-faults";
const EVENTS: usize = 3_000;
const PARTITIONS: i32 = 3;

/// A broker with the sample day and the live group committed at the ends, a database of the
/// test's own, and a proxy in front of PostgreSQL.
struct Setup {
    broker: BrokerProcess,
    db: OwnDatabase,
    proxy: Proxy,
    live: Vec<Option<i64>>,
}

impl Setup {
    /// `None` when PostgreSQL or Toxiproxy is missing outside CI (skipped, saying why).
    fn start(kind: BrokerKind) -> Option<Setup> {
        let admin = services::postgres()?;
        let api = toxiproxy::server()?;
        let broker = kind.sample_day(TOPIC, EVENTS, PARTITIONS);
        let ends: Vec<i64> = watermarks(&broker.servers, TOPIC)
            .iter()
            .map(|w| w.1)
            .collect();
        commit(&broker.servers, LIVE, TOPIC, &ends);
        let db = OwnDatabase::create(&admin, "faults");
        let upstream = host_port(&db.url());
        let proxy = Proxy::start(&api, "postgres", &upstream);
        Some(Setup {
            live: ends.into_iter().map(Some).collect(),
            broker,
            db,
            proxy,
        })
    }

    /// The database's URL through the proxy.
    fn via_proxy(&self) -> String {
        self.db
            .url()
            .replacen(&host_port(&self.db.url()), &self.proxy.listen, 1)
    }

    fn replay(&self, extra: &[&str]) -> Test {
        let db = self.via_proxy();
        lessonprobe()
            .args(replay_args(&self.broker.servers, TOPIC, LIVE, GROUP, &db))
            .args(SAMPLE_DAYS)
            .args(["--execute", "--allow-quarantine", "--format", "csv"])
            .args(extra)
    }

    fn count(&self, sql: &str) -> i64 {
        self.db
            .client()
            .query_one(sql, &[])
            .map(|r| r.get(0))
            .unwrap_or(0)
    }

    /// Waits until the run recorded its plan: execution has begun.
    fn wait_for_execution(&self) {
        let since = Instant::now();
        while self.count("SELECT COUNT(*) FROM lessonprobe_replay_plans") < 1 {
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "the plan was not recorded"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every event of the window once, every checkpoint at its stop, the live group untouched.
    fn assert_exact(&self) {
        assert_eq!(
            self.count("SELECT COUNT(*) FROM audit_events"),
            EVENTS as i64,
            "rows"
        );
        assert_eq!(
            self.count("SELECT COUNT(DISTINCT event_id) FROM audit_events"),
            EVENTS as i64,
            "distinct rows"
        );
        assert_eq!(
            self.count(
                "SELECT COUNT(*) FROM lessonprobe_replay_partitions WHERE next_offset = stop_offset"
            ),
            PARTITIONS as i64,
            "checkpoints at their stops"
        );
        assert_eq!(
            committed(&self.broker.servers, LIVE, TOPIC, PARTITIONS),
            self.live,
            "the live group's offsets untouched"
        );
    }
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once('@').map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// A slow link (200 ms on every answer) or a thin one (128 KB/s each way): the run is slower
/// and ends with exit 0, exactly.
fn slow_link_completes(toxic: Toxic, streams: &[Stream]) {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind) else {
            return;
        };
        for stream in streams {
            setup.proxy.add(toxic, *stream);
        }
        setup
            .replay(&["--deadline", "120s", "--batch", "1000"])
            .within(Duration::from_secs(150))
            .success();
        setup.assert_exact();
    });
}

#[test]
fn postgres_link_with_200ms_latency_during_execution_completes_exactly() {
    slow_link_completes(Toxic::Latency { ms: 200 }, &[Stream::Down]);
}

#[test]
fn postgres_link_limited_to_128_kb_per_s_during_execution_completes_exactly() {
    slow_link_completes(
        Toxic::Bandwidth { kb_per_s: 128 },
        &[Stream::Up, Stream::Down],
    );
}

/// A link that breaks mid-execution (a reset, or a cut after N more bytes): the run ends at once
/// with exit 4 naming PostgreSQL; a rerun of the same plan through the healed link completes it
/// exactly.
fn broken_link_ends_and_a_rerun_completes(toxic: Toxic, stream: Stream) {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind) else {
            return;
        };
        // 20 ms on every answer: execution lasts long enough for the fault to land inside it.
        let slow = setup.proxy.add(Toxic::Latency { ms: 20 }, Stream::Down);
        let running = setup
            .replay(&["--deadline", "120s", "--batch", "20"])
            .within(Duration::from_secs(60))
            .spawn();
        setup.wait_for_execution();
        std::thread::sleep(Duration::from_millis(500));
        let name = setup.proxy.add(toxic, stream);
        let broken = Instant::now();
        let ran = running.status(4);
        assert!(
            broken.elapsed() < Duration::from_secs(30),
            "ended {:?} after the fault",
            broken.elapsed()
        );
        assert!(
            ran.stderr.contains("postgres"),
            "names PostgreSQL: {}",
            ran.text()
        );
        assert!(
            setup.count("SELECT COUNT(*) FROM audit_events") < EVENTS as i64,
            "the fault came before the end: {}",
            ran.text()
        );
        setup.proxy.remove(&name);
        setup.proxy.remove(&slow);
        setup
            .replay(&["--deadline", "120s", "--resume"])
            .within(Duration::from_secs(150))
            .success();
        setup.assert_exact();
    });
}

#[test]
fn postgres_link_reset_mid_batch_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(Toxic::ResetPeer { after_ms: 0 }, Stream::Up);
}

#[test]
fn postgres_link_cut_after_n_bytes_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(Toxic::LimitData { bytes: 20_000 }, Stream::Up);
}

/// When a bound is counted from.
#[derive(Clone, Copy, Debug)]
enum Counted {
    /// The start of the run.
    FromStart,
    /// The moment the link went silent.
    FromSilence,
}

/// PostgreSQL stops answering mid-execution of a replay run with `flags` while the socket
/// stays open (nothing forwarded, nothing closed): the run must end with exit 4 within `bound`
/// counted `from`, its stderr holding each of `says` (`{db}`: the proxy's address), and a
/// rerun of the same plan with `rerun` through the healed link completes it exactly.
fn silent_mid_execution(
    flags: &[&str],
    (bound, from): (Duration, Counted),
    says: &[&str],
    rerun: &[&str],
) {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind) else {
            return;
        };
        let slow = setup.proxy.add(Toxic::Latency { ms: 20 }, Stream::Down);
        let started = Instant::now();
        let running = setup
            .replay(flags)
            .within(Duration::from_secs(120))
            .spawn();
        setup.wait_for_execution();
        std::thread::sleep(Duration::from_millis(500));
        let silent_since = Instant::now();
        let silent = setup.proxy.add(Toxic::Timeout { ms: 0 }, Stream::Down);
        let ran = running.status(4);
        let since = match from {
            Counted::FromStart => started,
            Counted::FromSilence => silent_since,
        };
        assert!(
            since.elapsed() < bound,
            "ended {:?} after the {from:?}, past {bound:?}",
            since.elapsed()
        );
        for said in says {
            let said = said.replace("{db}", &setup.proxy.listen);
            assert!(ran.stderr.contains(&said), "no {said:?} in:\n{}", ran.text());
        }
        setup.proxy.remove(&silent);
        setup.proxy.remove(&slow);
        setup
            .replay(rerun)
            .within(Duration::from_secs(150))
            .success();
        setup.assert_exact();
    });
}

/// The server's own statement timeout cannot help a silent link, since its answer is lost
/// too: the run's deadline ends the run (exit 4, at most a 5 s grace after it).
#[test]
fn postgres_silent_mid_execution_ends_at_the_deadline_and_a_rerun_completes_exactly() {
    silent_mid_execution(
        &["--deadline", "15s", "--batch", "20"],
        (Duration::from_secs(15 + 5 + 5), Counted::FromStart),
        &["deadline"],
        &["--deadline", "120s", "--resume"],
    );
}

/// With no `--deadline` (ten minutes by default): the server bounds every statement and lock
/// wait by 30 s, so a live link answers within it, if only with an error; 5 s past it the
/// run ends by itself, naming the database and the call it waits on (the bound below leaves
/// room for a loaded machine).
#[test]
fn postgres_silent_mid_execution_with_no_deadline_given_ends_within_the_answer_bound() {
    silent_mid_execution(
        &["--batch", "20"],
        (Duration::from_secs(30 + 5 + 15), Counted::FromSilence),
        &["has not answered", "{db}"],
        &["--resume"],
    );
}

/// Contention longer than the bound on one statement is waiting, not failure: another session
/// holds `audit_events` locked for 40 s (past the 30 s a replay's statement may take) while a
/// default replay starts; each of its lock waits ends at 15 s as contention and is made again,
/// and once the lock is released the run completes exactly.
#[test]
fn a_lock_held_past_the_statement_bound_is_waited_for_not_failed() {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind) else {
            return;
        };
        setup.db.foreign_audit_table(true);
        let mut holder = setup.db.client();
        let mut lock = holder.transaction().unwrap();
        lock.batch_execute("LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        let mut running = setup.replay(&[]).within(Duration::from_secs(150)).spawn();
        std::thread::sleep(Duration::from_secs(40));
        assert!(running.is_running(), "the replay ended while the lock was held");
        lock.commit().unwrap();
        running.success();
        setup.assert_exact();
    });
}
