//! The command lines of `replay` and `replay verify` the bench runs, and what it reads of
//! their output.

use super::TOPIC;

/// What `replay` and `replay verify` are both given: the broker, the topic, the window every
/// run reads, the database and the deadline.
pub fn window_args(servers: &str, db: &str) -> Vec<String> {
    [
        "--kafka",
        servers,
        "--topic",
        TOPIC,
        "--since",
        "2026-09-21T00:00:00Z",
        "--until",
        "2026-09-25T00:00:00Z",
        "--db",
        db,
        "--deadline",
        "1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

pub fn replay_args(
    servers: &str,
    db: &str,
    group: &str,
    partitions: Option<&str>,
    batch: Option<usize>,
    jobs: Option<usize>,
) -> Vec<String> {
    let mut args = vec!["replay".to_owned()];
    args.extend(window_args(servers, db));
    args.extend(
        [
            "--live-group",
            "bench-live",
            "--replay-group",
            group,
            "--execute",
            "--format",
            "csv",
        ]
        .map(String::from),
    );
    if let Some(batch) = batch {
        args.extend(["--batch".into(), batch.to_string()]);
    }
    if let Some(jobs) = jobs {
        args.extend(["--jobs".into(), jobs.to_string()]);
    }
    if let Some(p) = partitions {
        args.extend(["--partitions".into(), p.to_owned()]);
    }
    args
}

/// `args` reading `topic` instead of the bench's own topic.
pub fn on_topic(mut args: Vec<String>, topic: &str) -> Vec<String> {
    if let Some(at) = args.iter().position(|a| a == "--topic") {
        args[at + 1] = topic.to_owned();
    }
    args
}

/// `replay verify` of the window every (d) replays, against `db`.
pub fn verify_args(servers: &str, db: &str) -> Vec<String> {
    let mut args = vec!["replay".to_owned(), "verify".to_owned()];
    args.extend(window_args(servers, db));
    args
}

/// Records the replay reported (the csv's `records` column summed).
pub fn replayed(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("partition,records"))
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Records a dry run's plan covers (the csv's `records` column summed).
pub fn planned_records(stdout: &str) -> u64 {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with("partition,since,"));
    let Some(column) = lines
        .next()
        .and_then(|header| header.split(',').position(|c| c == "records"))
    else {
        panic!("no plan in the dry run's output:\n{stdout}");
    };
    lines
        .filter_map(|l| l.split(',').nth(column)?.parse::<u64>().ok())
        .sum()
}
