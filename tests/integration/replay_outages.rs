//! The replay rides through brief outages on real links and real restarts: PostgreSQL restarted
//! (`pg_ctl restart -m fast`) and Apache Kafka killed (SIGKILL) and started again on its port
//! while the plan executes, a 3 s reset on each link (Toxiproxy), a `--worker` through a broker
//! bounce, `replay verify` through a PostgreSQL restart. Each ends with exit 0, every event of
//! the window once, every checkpoint at its stop, the live group's committed offsets untouched,
//! and the outage in the report; the same fault with `--retry-for 0` ends with exit 4, and one
//! held past a short budget ends with exit 4 within it and the silence bound, naming the peer.
//! Every case has a PostgreSQL cluster and a broker of its own. The outcomes are in
//! docs/replay-design.md's fault table.

use std::time::{Duration, Instant};

use lessonprobe_testkit::postgres::OwnCluster;
use lessonprobe_testkit::replay::{replay_args, SAMPLE_DAYS};
use lessonprobe_testkit::toxiproxy::{Stream, Toxic};
use lessonprobe_testkit::*;

use crate::replay_faults::{
    live_group_at_the_ends, Link, ReadBack, Setup, EVENTS, GROUP, LIVE, PARTITIONS, TOPIC,
};

/// Rows a run has made durable before a fault is put on: execution is under way, and a
/// transaction per five records leaves most of the window still to do.
const DURABLE_BEFORE_FAULT: i64 = 100;

/// A broker and a PostgreSQL cluster of the test's own, the sample day on the broker and the
/// live group committed at the ends.
struct Own {
    broker: BrokerProcess,
    cluster: OwnCluster,
    live: Vec<Option<i64>>,
}

impl Own {
    /// `None` when PostgreSQL's binaries are missing outside CI (skipped, saying why).
    fn start(kind: BrokerKind) -> Option<Own> {
        let pg_ctl = services::pg_ctl()?;
        let cluster = OwnCluster::start(&pg_ctl);
        let broker = kind.sample_day(TOPIC, EVENTS, PARTITIONS);
        Some(Own {
            live: live_group_at_the_ends(&broker.servers),
            broker,
            cluster,
        })
    }

    /// The replay of the sample days into the cluster, its report as JSON.
    fn replay(&self, extra: &[&str]) -> Test {
        let url = self.cluster.url();
        lessonprobe()
            .args(replay_args(&self.broker.servers, TOPIC, LIVE, GROUP, &url))
            .args(SAMPLE_DAYS)
            .args(["--execute", "--allow-quarantine", "--format", "json"])
            .args(["--batch", "5", "--deadline", "300s"])
            .args(extra)
            .within(Duration::from_secs(320))
    }

    /// `replay verify` of the sample days against the cluster, as JSON.
    fn verify(&self, extra: &[&str]) -> Test {
        lessonprobe()
            .args(["replay", "verify", "--kafka", &self.broker.servers])
            .args(["--topic", TOPIC, "--db", &self.cluster.url()])
            .args(SAMPLE_DAYS)
            .args(["--format", "json"])
            .args(extra)
            .within(Duration::from_secs(120))
    }

    /// Waits until the run made [`DURABLE_BEFORE_FAULT`] rows durable: the fault lands
    /// mid-execution.
    #[track_caller]
    fn wait_for_rows(&self, running: &mut Running) {
        let since = Instant::now();
        while self.count("SELECT COUNT(*) FROM audit_events") < DURABLE_BEFORE_FAULT {
            assert!(running.is_running(), "the replay ended before the fault");
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "no durable rows in 60 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kafka_peer(&self) -> String {
        format!("kafka {}", self.broker.servers)
    }

    fn postgres_peer(&self) -> String {
        format!("postgres 127.0.0.1:{}/postgres", self.cluster.port)
    }

    /// `--resume` after a run that ended on a fault (healed now) completes the window exactly.
    #[track_caller]
    fn resume_completes_exactly(&self) {
        self.replay(&["--resume"]).success();
        self.assert_exact();
    }
}

impl ReadBack for Own {
    fn count(&self, sql: &str) -> i64 {
        ::postgres::Client::connect(&self.cluster.url(), ::postgres::NoTls)
            .and_then(|mut c| c.query_one(sql, &[]))
            .map(|r| r.get(0))
            .unwrap_or(0)
    }

    fn broker_and_live(&self) -> (&str, &[Option<i64>]) {
        (&self.broker.servers, &self.live)
    }
}

/// The run rode through outages of `peer` (named as the run names it, e.g. with its database):
/// each began and ended on stderr, one line each, and the report counts each with the time it
/// cost.
#[track_caller]
fn rode_through(ran: &Ran, peer: &str, phase: &str) {
    let report = ran.json();
    let survived = report["outages"]["survived"]
        .as_array()
        .unwrap_or_else(|| panic!("no outages in the report: {report}"));
    assert!(!survived.is_empty(), "{}", ran.text());
    let began = ran.stderr.matches(" is down during ").count();
    let ended = ran.stderr.matches(" is back after ").count();
    assert_eq!(
        (began, ended),
        (survived.len(), survived.len()),
        "one line when each outage began and one when it ended: {}",
        ran.text()
    );
    assert!(
        ran.stderr
            .contains(&format!(" is down during {phase} since ")),
        "{}",
        ran.text()
    );
    for outage in survived {
        let named = outage["peer"].as_str().unwrap_or_default();
        assert!(named.starts_with(peer), "{peer:?}: {report}");
        assert_eq!(outage["phase"], phase, "{report}");
        assert!(outage["seconds_lost"].as_f64().is_some(), "{report}");
    }
    assert!(report["outages"]["outlasted"].is_null(), "{report}");
    // For docs/replay-design.md's table (shown with --nocapture).
    eprintln!(
        "rode through {phase}: {} in {:.1} s",
        report["outages"]["survived"],
        ran.elapsed.as_secs_f64()
    );
}

/// A run that lost `peer` ended with exit 4 within `bound` after the fault, naming it.
#[track_caller]
fn ended_naming(ran: &Ran, peer: &str, faulted: Instant, bound: Duration) {
    assert_eq!(ran.code, Some(4), "exit 4: {}", ran.text());
    assert!(ran.stderr.contains(peer), "no {peer:?} in:\n{}", ran.text());
    let took = faulted.elapsed();
    assert!(
        took < bound,
        "ended {took:?} after the fault, past {bound:?}"
    );
    eprintln!("ended with exit 4 {took:.1?} after the fault");
}

/// PostgreSQL restarted (`pg_ctl restart -m fast`: every session ended with 57P01) once rows
/// are durable: with the default budget the run rides through it; with `--retry-for 0` it ends
/// with exit 4 and `--resume` completes it.
fn postgres_restarted_mid_execution(retry_for: Option<&str>) {
    on_apache_kafka(|kind| {
        let Some(own) = Own::start(kind) else {
            return;
        };
        let flags: Vec<&str> = retry_for.map_or(vec![], |r| vec!["--retry-for", r]);
        let mut running = own.replay(&flags).spawn();
        own.wait_for_rows(&mut running);
        let faulted = Instant::now();
        own.cluster.restart_fast();
        if retry_for.is_some() {
            let ran = running.status(4);
            ended_naming(&ran, "postgres", faulted, Duration::from_secs(30));
            own.resume_completes_exactly();
            return;
        }
        let ran = running.success();
        rode_through(&ran, &own.postgres_peer(), "execution");
        own.assert_exact();
    });
}

#[test]
fn postgres_restarted_mid_execution_is_ridden_through_exactly() {
    postgres_restarted_mid_execution(None);
}

#[test]
fn postgres_restarted_mid_execution_with_no_retries_ends_with_exit_4() {
    postgres_restarted_mid_execution(Some("0"));
}

/// What a case does to a peer of [`Own`]: take it down, or bring it back.
type Step = fn(&Own);

/// `peer` taken down (`down`) once rows are durable, and left down past a budget of 5 s: exit 4
/// within the budget and `bound` (the last attempts' own waits), naming the peer and the phase;
/// once it is back (`up`), `--resume` completes the window exactly.
fn down_past_a_short_budget(peer: fn(&Own) -> String, (down, up): (Step, Step), bound: Duration) {
    on_apache_kafka(|kind| {
        let Some(own) = Own::start(kind) else {
            return;
        };
        let mut running = own.replay(&["--retry-for", "5s"]).spawn();
        own.wait_for_rows(&mut running);
        let faulted = Instant::now();
        down(&own);
        let ran = running.status(4);
        let said = format!(
            "{} did not come back during execution within the retry budget of 5 s",
            peer(&own)
        );
        ended_naming(&ran, &said, faulted, Duration::from_secs(5) + bound);
        up(&own);
        own.resume_completes_exactly();
    });
}

/// PostgreSQL stopped: every attempt is refused at once.
#[test]
fn postgres_down_past_a_short_budget_ends_with_exit_4_naming_it() {
    down_past_a_short_budget(
        Own::postgres_peer,
        (|own| own.cluster.stop(), |own| own.cluster.restart()),
        Duration::from_secs(30),
    );
}

/// Apache Kafka killed (SIGKILL) once rows are durable, and started again on its port once the
/// run says it lost it: the run rides through; with `--retry-for 0` it ends with exit 4 and
/// `--resume` completes it. `flags` may make the run a `--worker`.
fn apache_kafka_bounced_mid_execution(flags: &[&str], retry_for: Option<&str>) {
    on_apache_kafka(|kind| {
        let Some(own) = Own::start(kind) else {
            return;
        };
        let retry: Vec<&str> = retry_for.map_or(vec![], |r| vec!["--retry-for", r]);
        let mut running = own.replay(&[flags, &retry].concat()).spawn();
        own.wait_for_rows(&mut running);
        let kafka = own.broker.apache_kafka();
        let faulted = Instant::now();
        kafka.kill();
        if retry_for.is_some() {
            let ran = running.status(4);
            ended_naming(&ran, &own.kafka_peer(), faulted, Duration::from_secs(60));
            kafka.restart();
            own.resume_completes_exactly();
            return;
        }
        // A worker whose member lost its partitions with the group's session looks at the
        // group's offsets for 30 s before it calls the broker gone.
        let down = format!("{} is down during execution", own.kafka_peer());
        running.wait_for_stderr(&down, Duration::from_secs(120), |s| s.contains(&down));
        kafka.restart();
        let ran = running.success();
        rode_through(&ran, &own.kafka_peer(), "execution");
        own.assert_exact();
    });
}

#[test]
fn apache_kafka_killed_and_restarted_mid_execution_is_ridden_through_exactly() {
    apache_kafka_bounced_mid_execution(&[], None);
}

#[test]
fn apache_kafka_killed_mid_execution_with_no_retries_ends_with_exit_4() {
    apache_kafka_bounced_mid_execution(&[], Some("0"));
}

#[test]
fn a_worker_rides_through_a_broker_bounce_exactly() {
    apache_kafka_bounced_mid_execution(&["--worker"], None);
}

/// Apache Kafka killed: an attempt meets it at a broker call's 10 s bound or the idle timeout,
/// and each reads the live group's offsets (10 s more) before it ends.
#[test]
fn apache_kafka_down_past_a_short_budget_ends_with_exit_4_naming_it() {
    down_past_a_short_budget(
        Own::kafka_peer,
        (
            |own| own.broker.apache_kafka().kill(),
            |own| own.broker.apache_kafka().restart(),
        ),
        Duration::from_secs(50),
    );
}

/// A 3 s reset of every connection on `link` (Toxiproxy) mid-execution: the run rides through
/// it and lands the window exactly. The same fault without retries ends with exit 4
/// (replay_faults.rs pins that on each link).
fn reset_for_3_s_mid_execution_is_ridden_through(link: Link) {
    on_apache_kafka(|kind| {
        let Some(setup) = Setup::start(kind, link) else {
            return;
        };
        let slow = setup.proxy.add(Toxic::Latency { ms: 20 }, Stream::Down);
        let running = setup
            .replay_as("json", &["--batch", "20"])
            .within(Duration::from_secs(150))
            .spawn();
        setup.wait_for_execution();
        std::thread::sleep(Duration::from_millis(500));
        let reset = setup
            .proxy
            .add(Toxic::ResetPeer { after_ms: 0 }, Stream::Up);
        std::thread::sleep(Duration::from_secs(3));
        setup.proxy.remove(&reset);
        setup.proxy.remove(&slow);
        let ran = running.success();
        let peer = match link {
            Link::Postgres => format!("postgres {}", setup.proxy.listen),
            Link::Kafka => format!("kafka {}", setup.broker.servers),
        };
        rode_through(&ran, &peer, "execution");
        setup.assert_exact();
    });
}

#[test]
fn postgres_link_reset_for_3_s_mid_execution_is_ridden_through_exactly() {
    reset_for_3_s_mid_execution_is_ridden_through(Link::Postgres);
}

#[test]
fn kafka_link_reset_for_3_s_mid_execution_is_ridden_through_exactly() {
    reset_for_3_s_mid_execution_is_ridden_through(Link::Kafka);
}

/// `replay verify` with PostgreSQL down when it starts, and started again once the
/// verification says so: it rides through and finds the window clean; with `--retry-for 0` it
/// ends with exit 4 naming the database.
#[test]
fn replay_verify_rides_through_a_postgres_restart() {
    on_apache_kafka(|kind| {
        let Some(own) = Own::start(kind) else {
            return;
        };
        own.replay(&[]).success();
        own.cluster.stop();
        let faulted = Instant::now();
        let ran = own.verify(&["--retry-for", "0"]).status(4);
        ended_naming(&ran, &own.postgres_peer(), faulted, Duration::from_secs(30));
        let mut running = own.verify(&[]).spawn();
        let down = format!("{} is down during verification", own.postgres_peer());
        running.wait_for_stderr(&down, Duration::from_secs(60), |s| s.contains(&down));
        own.cluster.restart();
        let ran = running.success();
        rode_through(&ran, &own.postgres_peer(), "verification");
        assert_eq!(ran.json()["clean"], true, "{}", ran.text());
    });
}
