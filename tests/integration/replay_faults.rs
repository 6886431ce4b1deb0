//! The replay under network faults on real links: a Toxiproxy proxy between `lessonprobe
//! replay` and PostgreSQL, or between it and Apache Kafka (the broker advertising the proxy's
//! address, so every client goes through it), with latency, a bandwidth limit, a reset, silence
//! and a link cut after N bytes put on it while the window is planned or while the plan
//! executes (its fetches and its offset commits). Each case ends within its bound — exit 0, or
//! exit 4 naming the peer — and a rerun through the healed link lands exactly the window's
//! rows (none lost, none twice), every checkpoint at its stop, the live group's committed
//! offsets untouched. Also `--worker` and `replay verify` on a broken Kafka link. A run that
//! breaks here runs with `--retry-for 0`, so each fault's bound is its own (`replay_outages.rs`
//! rides through outages instead). The table of cases is in docs/replay-design.md.

use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{commit, committed, watermarks};
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::replay::{replay_args, SAMPLE_DAYS};
use lessonprobe_testkit::toxiproxy::{self, Proxy, Stream, Toxic};
use lessonprobe_testkit::*;

pub(super) const TOPIC: &str = "faults";
pub(super) const LIVE: &str = "live-faults";
pub(super) const GROUP: &str = "replay-faults";
pub(super) const EVENTS: usize = 3_000;
pub(super) const PARTITIONS: i32 = 8;

/// Which link the proxy stands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Link {
    /// Between the replay and PostgreSQL.
    Postgres,
    /// Between every Kafka client of the run and the broker (Apache Kafka, advertising the
    /// proxy's address).
    Kafka,
}

/// A broker with the sample day and the live group committed at the ends, a database of the
/// test's own, and a proxy on `link`.
pub(super) struct Setup {
    pub(super) broker: BrokerProcess,
    pub(super) db: OwnDatabase,
    pub(super) proxy: Proxy,
    link: Link,
    live: Vec<Option<i64>>,
}

impl Setup {
    /// `None` when PostgreSQL or Toxiproxy is missing outside CI (skipped, saying why).
    pub(super) fn start(kind: BrokerKind, link: Link) -> Option<Setup> {
        let admin = services::postgres()?;
        let api = toxiproxy::server()?;
        let db = OwnDatabase::create(&admin, "faults");
        let (broker, proxy) = match link {
            Link::Postgres => (
                kind.sample_day(TOPIC, EVENTS, PARTITIONS),
                Proxy::start(&api, "postgres", &host_port(&db.url())),
            ),
            Link::Kafka => toxiproxy::apache_kafka_behind_proxy(&api, TOPIC, EVENTS, PARTITIONS),
        };
        Some(Setup {
            live: live_group_at_the_ends(&broker.servers),
            broker,
            db,
            proxy,
            link,
        })
    }

    /// The database's URL the run is given: through the proxy when it stands on that link.
    fn db_url(&self) -> String {
        match self.link {
            Link::Postgres => {
                self.db
                    .url()
                    .replacen(&host_port(&self.db.url()), &self.proxy.listen, 1)
            }
            Link::Kafka => self.db.url(),
        }
    }

    fn replay(&self, extra: &[&str]) -> Test {
        self.replay_as("csv", extra)
    }

    /// The replay of the sample days through the link, its report as `format`.
    pub(super) fn replay_as(&self, format: &str, extra: &[&str]) -> Test {
        let db = self.db_url();
        lessonprobe()
            .args(replay_args(&self.broker.servers, TOPIC, LIVE, GROUP, &db))
            .args(SAMPLE_DAYS)
            .args(["--execute", "--allow-quarantine", "--format", format])
            .args(extra)
    }

    /// Waits until the run recorded its plan: execution has begun.
    pub(super) fn wait_for_execution(&self) {
        let since = Instant::now();
        while self.count("SELECT COUNT(*) FROM lessonprobe_replay_plans") < 1 {
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "the plan was not recorded"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl ReadBack for Setup {
    fn count(&self, sql: &str) -> i64 {
        self.db
            .client()
            .query_one(sql, &[])
            .map(|r| r.get(0))
            .unwrap_or(0)
    }

    fn broker_and_live(&self) -> (&str, &[Option<i64>]) {
        (&self.broker.servers, &self.live)
    }
}

/// The live group committed at the ends of the sample day on `servers`: its offsets.
pub(super) fn live_group_at_the_ends(servers: &str) -> Vec<Option<i64>> {
    let ends: Vec<i64> = watermarks(servers, TOPIC).iter().map(|w| w.1).collect();
    commit(servers, LIVE, TOPIC, &ends);
    ends.into_iter().map(Some).collect()
}

/// What a case reads back after a run: the database's rows, the broker's offsets.
pub(super) trait ReadBack {
    /// What `sql` counts in the run's database, or 0 while it cannot be asked.
    fn count(&self, sql: &str) -> i64;
    /// The broker's address, and the live group's committed offsets before the run.
    fn broker_and_live(&self) -> (&str, &[Option<i64>]);

    /// Every event of the window once, every checkpoint at its stop, the live group untouched.
    #[track_caller]
    fn assert_exact(&self) {
        let (servers, live) = self.broker_and_live();
        assert_exact_in(&|sql| self.count(sql), servers, (EVENTS, PARTITIONS), live);
    }
}

/// Every one of `events` of the window once in the database `count` asks, every checkpoint of
/// the `partitions` at its stop, and the live group's offsets still `live`.
#[track_caller]
fn assert_exact_in(
    count: &dyn Fn(&str) -> i64,
    servers: &str,
    (events, partitions): (usize, i32),
    live: &[Option<i64>],
) {
    assert_eq!(
        count("SELECT COUNT(*) FROM audit_events"),
        events as i64,
        "rows"
    );
    assert_eq!(
        count("SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        events as i64,
        "distinct rows"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM lessonprobe_replay_partitions WHERE next_offset = stop_offset"),
        partitions as i64,
        "checkpoints at their stops"
    );
    assert_eq!(
        committed(servers, LIVE, TOPIC, partitions),
        live,
        "the live group's offsets untouched"
    );
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once('@').map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// When the fault is put on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the run starts: planning meets it first.
    Planning,
    /// Once the plan is recorded: fetches, batches and offset commits meet it.
    Execution,
}

/// How long a run a fault broke may go on, and counted from when.
#[derive(Clone, Copy, Debug)]
enum Within {
    /// From the moment the fault was put on.
    AfterFault(Duration),
    /// From the start of the run.
    AfterStart(Duration),
}

/// What a run under a fault ended with, and how to heal the link after it.
struct Faulted {
    setup: Setup,
    ran: Ran,
    /// How long the run went on after the fault was put on.
    after: Duration,
    toxics: Vec<String>,
}

impl Faulted {
    /// Runs a replay with `flags` and puts `toxic` on `stream` of `link` at `phase`, the link
    /// slowed by 20 ms on every answer so that execution lasts long enough for a fault to land
    /// inside it; the run must end with one of `codes` within 150 s. `None`: skipped.
    fn run(
        kind: BrokerKind,
        (link, phase): (Link, Phase),
        (toxic, streams): (Toxic, &[Stream]),
        flags: &[&str],
        codes: &[i32],
    ) -> Option<Faulted> {
        let setup = Setup::start(kind, link)?;
        let mut toxics = vec![setup.proxy.add(Toxic::Latency { ms: 20 }, Stream::Down)];
        let fault = |toxics: &mut Vec<String>| {
            for stream in streams {
                toxics.push(setup.proxy.add(toxic, *stream));
            }
            Instant::now()
        };
        let mut faulted = (phase == Phase::Planning).then(|| fault(&mut toxics));
        let running = setup.replay(flags).within(Duration::from_secs(150)).spawn();
        if phase == Phase::Execution {
            setup.wait_for_execution();
            std::thread::sleep(Duration::from_millis(500));
            faulted = Some(fault(&mut toxics));
        }
        let ran = running.status_among(codes);
        Some(Faulted {
            after: faulted.map_or(Duration::ZERO, |t| t.elapsed()),
            setup,
            ran,
            toxics,
        })
    }

    /// The peer behind the faulty link, as the run names it.
    fn peer(&self) -> String {
        match self.setup.link {
            Link::Postgres => "postgres".to_owned(),
            Link::Kafka => format!("kafka {}", self.setup.proxy.listen),
        }
    }

    /// The run ended with exit 4 `within` its bound, naming the peer and holding each of
    /// `says` (`{proxy}`: the proxy's address), before the whole window was written.
    fn ended_naming_the_peer(&self, within: Within, says: &[&str]) {
        assert_eq!(self.ran.code, Some(4), "exit 4: {}", self.ran.text());
        let (took, bound) = match within {
            Within::AfterFault(bound) => (self.after, bound),
            Within::AfterStart(bound) => (self.ran.elapsed, bound),
        };
        assert!(
            took < bound,
            "ended {took:?} {within:?}, past its bound: {}",
            self.ran.text()
        );
        let says = says
            .iter()
            .map(|said| said.replace("{proxy}", &self.setup.proxy.listen));
        for said in [self.peer()].into_iter().chain(says) {
            assert!(
                self.ran.stderr.contains(&said),
                "no {said:?} in:\n{}",
                self.ran.text()
            );
        }
        assert!(
            self.setup.count("SELECT COUNT(*) FROM audit_events") < EVENTS as i64,
            "the fault came before the end: {}",
            self.ran.text()
        );
    }

    /// Heals the link and runs the replay again with `flags`: it completes, exactly.
    fn rerun_completes_exactly(self, flags: &[&str]) {
        for toxic in &self.toxics {
            self.setup.proxy.remove(toxic);
        }
        self.setup
            .replay(flags)
            .within(Duration::from_secs(150))
            .success();
        self.setup.assert_exact();
    }
}

/// A slow link (200 ms on every answer) or a thin one (128 KB/s each way): the run is slower
/// and ends with exit 0, exactly.
fn slow_link_completes(at: (Link, Phase), toxic: Toxic, streams: &[Stream]) {
    on_apache_kafka(|kind| {
        let flags = ["--deadline", "120s", "--batch", "1000"];
        let Some(run) = Faulted::run(kind, at, (toxic, streams), &flags, &[0]) else {
            return;
        };
        run.setup.assert_exact();
    });
}

#[test]
fn postgres_link_with_200ms_latency_during_execution_completes_exactly() {
    slow_link_completes(
        (Link::Postgres, Phase::Execution),
        Toxic::Latency { ms: 200 },
        &[Stream::Down],
    );
}

#[test]
fn postgres_link_limited_to_128_kb_per_s_during_execution_completes_exactly() {
    slow_link_completes(
        (Link::Postgres, Phase::Execution),
        Toxic::Bandwidth { kb_per_s: 128 },
        &[Stream::Up, Stream::Down],
    );
}

#[test]
fn kafka_link_with_200ms_latency_from_planning_on_completes_exactly() {
    slow_link_completes(
        (Link::Kafka, Phase::Planning),
        Toxic::Latency { ms: 200 },
        &[Stream::Down],
    );
}

#[test]
fn kafka_link_limited_to_128_kb_per_s_during_execution_completes_exactly() {
    slow_link_completes(
        (Link::Kafka, Phase::Execution),
        Toxic::Bandwidth { kb_per_s: 128 },
        &[Stream::Up, Stream::Down],
    );
}

/// A link that breaks (a reset, silence, or a cut after N more bytes) at `phase`: the run ends
/// `within` its bound with exit 4 naming the peer and each of `says`; a rerun through the
/// healed link (`--resume` once the plan was recorded) completes it exactly.
fn broken_link_ends_and_a_rerun_completes(
    at: (Link, Phase),
    (toxic, stream): (Toxic, Stream),
    extra: &[&str],
    (within, says): (Within, &[&str]),
) {
    on_apache_kafka(|kind| {
        // Without retries: an outage that a retry would wait out ends the run at once.
        let flags = [&["--batch", "20", "--retry-for", "0"], extra].concat();
        let Some(run) = Faulted::run(kind, at, (toxic, &[stream]), &flags, &[4]) else {
            return;
        };
        run.ended_naming_the_peer(within, says);
        let rerun: &[&str] = match at.1 {
            Phase::Planning => extra,
            Phase::Execution => &["--resume"],
        };
        run.rerun_completes_exactly(rerun);
    });
}

#[test]
fn postgres_link_reset_mid_batch_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Postgres, Phase::Execution),
        (Toxic::ResetPeer { after_ms: 0 }, Stream::Up),
        &["--deadline", "120s"],
        (Within::AfterFault(Duration::from_secs(30)), &[]),
    );
}

#[test]
fn postgres_link_cut_after_n_bytes_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Postgres, Phase::Execution),
        (Toxic::LimitData { bytes: 20_000 }, Stream::Up),
        &["--deadline", "120s"],
        (Within::AfterFault(Duration::from_secs(30)), &[]),
    );
}

/// A broker that resets every connection while the window is planned: exit 4 naming the
/// broker and the phase, nothing written.
#[test]
fn kafka_link_reset_during_planning_ends_with_exit_4_naming_planning() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Planning),
        (Toxic::ResetPeer { after_ms: 0 }, Stream::Up),
        &[],
        (Within::AfterFault(Duration::from_secs(30)), &["planning: "]),
    );
}

/// A broker that accepts connections and never answers, from the start, with no flags: the
/// first call's 10 s bound ends the run, naming planning.
#[test]
fn kafka_link_silent_during_planning_with_no_flags_ends_within_seconds() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Planning),
        (Toxic::Timeout { ms: 0 }, Stream::Down),
        &[],
        (Within::AfterFault(Duration::from_secs(30)), &["planning: "]),
    );
}

#[test]
fn kafka_link_reset_mid_execution_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Execution),
        (Toxic::ResetPeer { after_ms: 0 }, Stream::Up),
        &[],
        (
            Within::AfterFault(Duration::from_secs(40)),
            &["last durable offset"],
        ),
    );
}

/// Fetch answers cut after 20,000 bytes: no fetch ever arrives whole.
#[test]
fn kafka_link_cut_after_n_bytes_mid_execution_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Execution),
        (Toxic::LimitData { bytes: 20_000 }, Stream::Down),
        &[],
        (
            Within::AfterFault(Duration::from_secs(40)),
            &["last durable offset"],
        ),
    );
}

/// The broker goes silent mid-execution (its fetches and offset commits unanswered), with no
/// flags: each lane's call ends at its 10 s bound, no partition starts after one lost the
/// broker (8 partitions over 2 lanes would otherwise wait 10 s each in turn), and the run ends
/// about 20 s after the silence (the live group's offsets looked at last, also bounded).
#[test]
fn kafka_link_silent_mid_execution_with_no_flags_ends_within_seconds_starting_nothing_more() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Execution),
        (Toxic::Timeout { ms: 0 }, Stream::Down),
        &[],
        (
            Within::AfterFault(Duration::from_secs(40)),
            &["not started", "last durable offset"],
        ),
    );
}

/// A `--worker` whose broker resets every connection mid-run: it ends with exit 4 naming the
/// broker — its member's commits are bounded too (librdkafka's own synchronous commit waits
/// for a coordinator for ever) — and a rerun completes the plan exactly.
#[test]
fn kafka_link_reset_under_a_worker_ends_with_exit_4_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Kafka, Phase::Execution),
        (Toxic::ResetPeer { after_ms: 0 }, Stream::Up),
        &["--worker"],
        (Within::AfterFault(Duration::from_secs(60)), &[]),
    );
}

/// `replay verify` against a broker that stopped answering: exit 4 naming it within seconds.
#[test]
fn replay_verify_on_a_silent_kafka_link_ends_with_exit_4_naming_the_broker() {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind, Link::Kafka) else {
            return;
        };
        setup.replay(&[]).success();
        let silent = setup.proxy.add(Toxic::Timeout { ms: 0 }, Stream::Down);
        let verify = || {
            lessonprobe()
                .args(["replay", "verify", "--kafka", &setup.broker.servers])
                .args(["--topic", TOPIC, "--db", &setup.db.url()])
                .args(SAMPLE_DAYS)
                .args(["--retry-for", "0"])
                .within(Duration::from_secs(60))
        };
        let ran = verify().status(4);
        let peer = format!("kafka {}", setup.proxy.listen);
        assert!(
            ran.stderr.contains(&peer),
            "no {peer:?} in:\n{}",
            ran.text()
        );
        assert!(
            ran.elapsed < Duration::from_secs(30),
            "took {:?}",
            ran.elapsed
        );
        setup.proxy.remove(&silent);
        verify().success();
    });
}

/// PostgreSQL stops answering mid-execution while the socket stays open (nothing forwarded,
/// nothing closed). The server's own statement timeout cannot help, since its answer is lost
/// too: the run's deadline ends the run (exit 4, at most a 5 s grace after it), naming the call
/// still waiting.
#[test]
fn postgres_silent_mid_execution_ends_at_the_deadline_and_a_rerun_completes_exactly() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Postgres, Phase::Execution),
        (Toxic::Timeout { ms: 0 }, Stream::Down),
        &["--deadline", "15s"],
        (
            Within::AfterStart(Duration::from_secs(15 + 5 + 5)),
            &["deadline", "still waiting for postgres {proxy}"],
        ),
    );
}

/// With no `--deadline` (ten minutes by default): the server bounds every statement and lock
/// wait by 30 s, so a live link answers within it, if only with an error; 5 s past it the
/// run ends by itself, naming the database and the call it waits on (the bound below leaves
/// room for a loaded machine).
#[test]
fn postgres_silent_mid_execution_with_no_deadline_given_ends_within_the_answer_bound() {
    broken_link_ends_and_a_rerun_completes(
        (Link::Postgres, Phase::Execution),
        (Toxic::Timeout { ms: 0 }, Stream::Down),
        &[],
        (
            Within::AfterFault(Duration::from_secs(30 + 5 + 15)),
            &["has not answered", "{proxy}"],
        ),
    );
}

/// Contention longer than the bound on one statement is waiting, not failure: another session
/// holds `audit_events` locked for 40 s (past the 30 s a replay's statement may take) while a
/// default replay starts; each of its lock waits ends at 15 s as contention and is made again,
/// and once the lock is released the run completes exactly.
#[test]
fn a_lock_held_past_the_statement_bound_is_waited_for_not_failed() {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind, Link::Postgres) else {
            return;
        };
        setup.db.foreign_audit_table(true);
        let mut holder = setup.db.client();
        let mut lock = holder.transaction().unwrap();
        lock.batch_execute("LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
            .unwrap();
        let mut running = setup.replay(&[]).within(Duration::from_secs(150)).spawn();
        std::thread::sleep(Duration::from_secs(40));
        assert!(
            running.is_running(),
            "the replay ended while the lock was held"
        );
        lock.commit().unwrap();
        running.success();
        setup.assert_exact();
    });
}
