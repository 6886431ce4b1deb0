//! The arguments of a `lessonprobe replay` run, written once for the tests and benchmarks: the
//! broker, the topic, both groups and the target, and the window of the sample days.

/// `--since`/`--until` of the whole sample days (2026-09-21 to 2026-09-24).
pub const SAMPLE_DAYS: [&str; 4] = [
    "--since",
    "2026-09-21T00:00:00Z",
    "--until",
    "2026-09-24T00:00:00Z",
];

/// `replay --kafka SERVERS --topic TOPIC --live-group LIVE --replay-group GROUP --db DB`.
pub fn replay_args<'a>(
    servers: &'a str,
    topic: &'a str,
    live: &'a str,
    group: &'a str,
    db: &'a str,
) -> [&'a str; 11] {
    [
        "replay",
        "--kafka",
        servers,
        "--topic",
        topic,
        "--live-group",
        live,
        "--replay-group",
        group,
        "--db",
        db,
    ]
}

/// The run's closing line on stderr says the replay is incomplete on `unfinished` partitions.
#[track_caller]
pub fn assert_incomplete_on(ran: &crate::Ran, unfinished: usize) {
    assert!(
        ran.stderr
            .contains(&format!("replay incomplete on {unfinished} partition(s)")),
        "{}",
        ran.stderr
    );
}
