//! The simulated live service against the embedded mock cluster: its consumer commits after
//! each effect and resumes from its group's committed offsets.

use std::time::Duration;

use lessonprobe_probes::live::{run_live_consumer, LiveSqlite};
use ticketflow::day::{self, DaySpec};
use ticketflow::kafka::{committed_offsets, Broker};
use ticketflow::store::AuditStore;

#[test]
fn the_live_consumer_commits_after_effects_and_resumes_from_its_committed_offsets() {
    let mut broker = Broker::embedded(1).unwrap();
    broker.create_topic("live", 3).unwrap();
    let records = day::generate(&DaySpec {
        events: 300,
        ..DaySpec::default()
    });
    broker.produce_day("live", 3, &records).unwrap();
    let mut store = LiveSqlite::in_memory().unwrap();
    let parts = [0, 1, 2];
    // The live service's run over the three partitions, as a deployment starts it each time.
    let run = |store: &mut LiveSqlite| {
        run_live_consumer(
            &broker,
            "live-group",
            "live",
            &parts,
            store,
            Duration::from_secs(20),
        )
        .unwrap()
    };
    let first = run(&mut store);
    assert_eq!(first.records as usize, records.len());
    let highs: Vec<Option<i64>> = parts
        .iter()
        .map(|&p| Some(broker.watermarks("live", p).unwrap().1))
        .collect();
    assert_eq!(
        committed_offsets(&broker, "live-group", "live", &parts).unwrap(),
        highs
    );
    // A second run has nothing left to read: the group's offsets, not "earliest", decide.
    let again = run(&mut store);
    assert_eq!(again.records, 0);
    let distinct: std::collections::HashSet<_> =
        records.iter().map(|r| &r.event.event_id).collect();
    assert_eq!(store.audit_rows().unwrap(), distinct.len() as u64);
}
