//! Lesson 30 against Apache Kafka: every Kafka probe of the checkpoint passes on the broker the
//! test command starts for lesson runs, on SQLite and PostgreSQL, and the broker agrees.

use std::time::Duration;

use lessonprobe_testkit::kafka::reader;
use lessonprobe_testkit::*;
use rdkafka::consumer::Consumer;

const T: Duration = Duration::from_secs(10);

/// The probes of lesson 30 that run against a broker.
const KAFKA_PROBES: [&str; 4] = ["EX-30-02", "L30-12", "L30-13", "L30-14"];

#[test]
fn every_kafka_probe_of_lesson_30_passes_on_apache_kafka_and_the_broker_agrees() {
    let Some(kafka) = service(
        "LESSONPROBE_TEST_KAFKA",
        "Apache Kafka (scripts/test.sh starts one for lesson runs)",
    ) else {
        return;
    };
    let dir = Dir::new();
    let xml = dir.join("l30.xml");
    // The broker is shared: the run id keeps this run's topics and groups apart.
    let run_id = format!("lk{}", std::process::id());
    let mut backends = vec!["sqlite"];
    let mut run = lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--kafka", &kafka, "--run-id", &run_id])
        .arg(format!("--db=sqlite:{}", dir.display()));
    if let Some(postgres) = services::postgres() {
        run = run.args(["--db", &postgres]);
        backends.push("postgres");
    }
    run.arg("--junit").arg(&xml).success();
    validate_junit(&xml);
    let cases = verdicts(&parse_junit(&xml));
    for id in KAFKA_PROBES {
        for backend in &backends {
            let found: Vec<&(String, String)> = cases
                .iter()
                .filter(|(n, _)| {
                    n.starts_with(&format!("{id} ")) && n.ends_with(&format!("[{backend}]"))
                })
                .collect();
            assert_eq!(found.len(), 1, "{id} on {backend}: {cases:?}");
            assert_eq!(found[0].1, "PASS", "{id} on {backend}: {cases:?}");
        }
    }
    let broken: Vec<_> = cases
        .iter()
        .filter(|(_, v)| v == "FAIL" || v == "ERROR")
        .collect();
    assert!(broken.is_empty(), "{broken:?}");

    // The broker's own answers. On a real broker each probe deletes the topics it made, and
    // their committed offsets go with them; the groups stay, listed by the coordinator: the
    // live and replay groups that committed, and no group for L30-13's refused replay.
    let consumer = reader(&kafka, "test-metadata");
    let metadata = consumer.fetch_metadata(None, T).unwrap();
    let key = format!(".lp-{run_id}.30.");
    let left: Vec<&str> = metadata
        .topics()
        .iter()
        .map(|t| t.name())
        .filter(|t| t.contains(&key))
        .collect();
    assert!(left.is_empty(), "topics left behind: {left:?}");
    let list = consumer.fetch_group_list(None, T).unwrap();
    let mut groups: Vec<String> = list
        .groups()
        .iter()
        .map(|g| g.name().to_owned())
        .filter(|g| g.contains(&key))
        .collect();
    groups.sort();
    let mut expected = Vec::new();
    for backend in &backends {
        let of = |group: &str, story: &str, probe: &str| {
            format!("{group}.{story}.lp-{run_id}.30.{probe}-{backend}")
        };
        expected.extend([
            of("ticketflow-audit-v1", "accept", "l30-12"),
            of("ticketflow-audit-v1", "earliest", "ex-30-02"),
            of("ticketflow-replay-20260922", "accept", "l30-12"),
            of("ticketflow-replay-20260922", "earliest", "ex-30-02"),
            of("ticketflow-replay-20260922", "midfail", "l30-14"),
        ]);
    }
    expected.sort();
    assert_eq!(groups, expected);
    // The lists must go before their consumer (a consumer dropped first can hang).
    drop(list);
    drop(metadata);
}
