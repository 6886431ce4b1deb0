//! `lessonprobe replay`: the operational, audit-only replay of a window of a real topic into
//! SQL. A dry run (the plan) by default; `--execute` runs it with progress bars on a terminal
//! and ends with a per-partition report and a check that the live group did not move.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use ticketflow::kafka::{committed_offsets, Broker};
use ticketflow::replay::{
    execute_day, plan_day, BadRecords, DayPlan, DayPlanError, DayReplayRequest, ExecuteOptions,
    PartitionPlan, ReplayOptions, ReplaySummary, Window,
};
use ticketflow::store::{AuditStore, PostgresAuditStore, SqliteAuditStore, StoreError};
use ticketflow::KafkaTarget;

use crate::cli::{OnBadRecord, ReplayArgs, TableFormat};
use crate::exit::{Code, Error};

/// Where the audit rows go.
enum Target {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Target {
    fn parse(db: &str) -> Result<Target, Error> {
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            Ok(Target::Postgres(db.to_owned()))
        } else if let Some(path) = db.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
            Ok(Target::Sqlite(PathBuf::from(path)))
        } else {
            Err(Error::Usage(format!(
                "--db {db:?}: expected sqlite:PATH or postgres://URL"
            )))
        }
    }

    /// For messages; a PostgreSQL error names host, port and database itself, never the password.
    fn describe(&self) -> String {
        match self {
            Target::Sqlite(path) => format!("sqlite {}", path.display()),
            Target::Postgres(_) => "PostgreSQL".to_owned(),
        }
    }

    fn open(&self) -> Result<Box<dyn AuditStore>, StoreError> {
        match self {
            Target::Sqlite(path) => Ok(Box::new(SqliteAuditStore::open(path)?)),
            Target::Postgres(url) => Ok(Box::new(PostgresAuditStore::open(
                url,
                Duration::from_secs(10),
            )?)),
        }
    }
}

pub fn replay(args: ReplayArgs) -> Result<Code, Error> {
    let started = std::time::Instant::now();
    let kafka = super::kafka_target(&args.kafka)?;
    let KafkaTarget::Bootstrap { servers, .. } = &kafka else {
        return Err(Error::Usage(
            "lessonprobe replay works on real data: give --kafka HOST:PORT (the embedded broker is refused here)".into(),
        ));
    };
    let target = Target::parse(&args.db)?;
    let window = match (args.since, args.until, args.start, args.stop) {
        (Some(since_ms), Some(until_ms), None, None) => Window::Time { since_ms, until_ms },
        (None, None, Some(start), Some(stop)) => Window::Offsets { start, stop },
        _ => {
            return Err(Error::Usage(
                "give --since and --until, or --start and --stop".into(),
            ))
        }
    };
    let request = DayReplayRequest {
        topic: args.topic.clone(),
        live_group: args.live_group.clone(),
        replay_group: args.replay_group.clone(),
        window,
        partitions: args.partitions.clone(),
        resume: args.resume,
    };
    let op = |e: String| Error::Operation(e);
    let broker =
        Broker::for_target(&kafka, Duration::from_secs(10)).map_err(|e| op(e.to_string()))?;
    let plan = plan_day(&broker, &request).map_err(|e| match e {
        DayPlanError::Refused(why) => Error::Operation(format!("replay refused: {why}")),
        DayPlanError::Kafka(e) => Error::Operation(e.to_string()),
    })?;
    if !args.execute {
        print_plan(&plan, args.format, servers);
        if args.format == TableFormat::Table {
            println!("dry run: nothing was applied; add --execute to run this plan");
        }
        return Ok(Code::Ok);
    }
    // Open the store once up front, so a bad --db fails before any record is read.
    drop(
        target
            .open()
            .map_err(|e| op(format!("{}: {e}", target.describe())))?,
    );
    if args.format == TableFormat::Table {
        print_plan(&plan, args.format, servers);
    }

    let planned = started.elapsed();
    let bars = Bars::new(&plan);
    let options = ExecuteOptions {
        replay: ReplayOptions {
            batch: args.batch as usize,
            bad_records: match args.on_bad_record {
                OnBadRecord::Quarantine => BadRecords::Quarantine,
                OnBadRecord::Fail => BadRecords::Fail,
            },
        },
        deadline: args.deadline,
        idle_timeout: args.idle_timeout,
        jobs: args.jobs as usize,
    };
    let executing = std::time::Instant::now();
    let results = execute_day(&kafka, &plan, options, &|| target.open(), &|p, s| {
        bars.update(p, s)
    });
    bars.finish();
    let executed = executing.elapsed();

    let partitions: Vec<i32> = plan.partitions.iter().map(|p| p.partition).collect();
    let live_after = committed_offsets(&broker, &request.live_group, &request.topic, &partitions)
        .map_err(|e| op(e.to_string()))?;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (p, after) in plan.partitions.iter().zip(&live_after) {
        let result = results.iter().find(|r| r.partition == p.partition);
        let (summary, status) = match result.map(|r| &r.result) {
            None => (
                ReplaySummary {
                    final_offset: p.resume_from,
                    ..ReplaySummary::default()
                },
                "complete before this run".to_owned(),
            ),
            Some(Ok(s)) => (s.clone(), "ok".to_owned()),
            Some(Err(e)) => {
                let durable = e.committed().unwrap_or(p.resume_from);
                failures.push(format!(
                    "partition {}: {e}; last durable offset {durable}",
                    p.partition
                ));
                (
                    ReplaySummary {
                        final_offset: durable,
                        ..ReplaySummary::default()
                    },
                    format!("error: {e}"),
                )
            }
        };
        if *after != p.live_committed {
            failures.push(format!(
                "partition {}: THE LIVE GROUP {} MOVED from {} to {} during the replay",
                p.partition,
                request.live_group,
                opt(p.live_committed),
                opt(*after)
            ));
        }
        rows.push(ResultRow {
            partition: p.partition,
            records: summary.records,
            inserted: summary.inserted,
            duplicates: summary.duplicates,
            quarantined: summary.quarantined,
            replay_offset: summary.final_offset,
            stop: p.stop,
            live_before: p.live_committed,
            live_after: *after,
            status,
        });
    }
    print_results(&plan, &rows, args.format);
    let records: u64 = rows.iter().map(|r| r.records).sum();
    eprintln!(
        "lessonprobe replay: {records} records in {:.2} s ({:.0} records/s) after planning in {:.2} s",
        executed.as_secs_f64(),
        records as f64 / executed.as_secs_f64().max(1e-9),
        planned.as_secs_f64()
    );
    if failures.is_empty() {
        Ok(Code::Ok)
    } else {
        for f in &failures {
            eprintln!("lessonprobe replay: {f}");
        }
        Err(Error::Operation(format!(
            "replay incomplete on {} partition(s); fix the cause and rerun with --resume to continue from the last durable offsets",
            failures.len()
        )))
    }
}

/// One progress bar per partition on a terminal; nothing otherwise.
struct Bars {
    bars: Mutex<BTreeMap<i32, ProgressBar>>,
    _multi: MultiProgress,
}

impl Bars {
    fn new(plan: &DayPlan) -> Bars {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "partition {prefix:>3} {bar:30} {pos}/{len} records {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        let mut bars = BTreeMap::new();
        for p in plan.partitions.iter().filter(|p| p.remaining() > 0) {
            let bar = multi.add(ProgressBar::new(p.remaining() as u64));
            bar.set_style(style.clone());
            bar.set_prefix(p.partition.to_string());
            bars.insert(p.partition, bar);
        }
        Bars {
            bars: Mutex::new(bars),
            _multi: multi,
        }
    }

    fn update(&self, partition: i32, summary: &ReplaySummary) {
        if let Some(bar) = self
            .bars
            .lock()
            .ok()
            .as_ref()
            .and_then(|b| b.get(&partition))
        {
            bar.set_position(summary.records);
        }
    }

    fn finish(&self) {
        if let Ok(bars) = self.bars.lock() {
            bars.values().for_each(ProgressBar::finish);
        }
    }
}

#[derive(Serialize)]
struct ResultRow {
    partition: i32,
    records: u64,
    inserted: u64,
    duplicates: u64,
    quarantined: u64,
    replay_offset: i64,
    stop: i64,
    live_before: Option<i64>,
    live_after: Option<i64>,
    status: String,
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn window_text(plan: &DayPlan) -> String {
    match plan.request.window {
        Window::Time { since_ms, until_ms } => {
            let t = |ms| {
                chrono::DateTime::from_timestamp_millis(ms)
                    .map_or_else(|| ms.to_string(), |t| t.to_rfc3339())
            };
            format!("[{}, {})", t(since_ms), t(until_ms))
        }
        Window::Offsets { start, stop } => format!("offsets [{start}, {stop})"),
    }
}

const PLAN_HEADER: [&str; 11] = [
    "partition",
    "since",
    "until",
    "log_start",
    "end",
    "start",
    "stop",
    "records",
    "live",
    "replay",
    "resume_from",
];

fn plan_cells(p: &PartitionPlan) -> [String; 11] {
    [
        p.partition.to_string(),
        opt(p.since_offset),
        opt(p.until_offset),
        p.log_start.to_string(),
        p.end.to_string(),
        p.start.to_string(),
        p.stop.to_string(),
        p.records().to_string(),
        opt(p.live_committed),
        opt(p.replay_committed),
        p.resume_from.to_string(),
    ]
}

fn print_plan(plan: &DayPlan, format: TableFormat, servers: &str) {
    let r = &plan.request;
    match format {
        TableFormat::Json => {
            #[derive(Serialize)]
            struct Doc<'a> {
                brokers: &'a str,
                topic: &'a str,
                live_group: &'a str,
                replay_group: &'a str,
                window: String,
                partitions: &'a [PartitionPlan],
            }
            let doc = Doc {
                brokers: servers,
                topic: &r.topic,
                live_group: &r.live_group,
                replay_group: &r.replay_group,
                window: window_text(plan),
                partitions: &plan.partitions,
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "plan": doc }))
                    .unwrap_or_default()
            );
        }
        TableFormat::Csv => {
            println!("{}", PLAN_HEADER.join(","));
            for p in &plan.partitions {
                println!("{}", plan_cells(p).join(","));
            }
        }
        TableFormat::Table => {
            println!(
                "replay plan: topic {} on {servers}; live group {} (read only); replay group {}; window {}",
                r.topic,
                r.live_group,
                r.replay_group,
                window_text(plan)
            );
            let rows: Vec<[String; 11]> = plan.partitions.iter().map(plan_cells).collect();
            print_table(&PLAN_HEADER, &rows);
            let total: i64 = plan.partitions.iter().map(PartitionPlan::records).sum();
            let remaining: i64 = plan.partitions.iter().map(PartitionPlan::remaining).sum();
            println!("{total} records in the window; {remaining} to replay");
        }
    }
}

const RESULT_HEADER: [&str; 10] = [
    "partition",
    "records",
    "inserted",
    "duplicates",
    "quarantined",
    "replay_offset",
    "stop",
    "live_before",
    "live_after",
    "status",
];

fn print_results(plan: &DayPlan, rows: &[ResultRow], format: TableFormat) {
    let cells = |r: &ResultRow| {
        [
            r.partition.to_string(),
            r.records.to_string(),
            r.inserted.to_string(),
            r.duplicates.to_string(),
            r.quarantined.to_string(),
            r.replay_offset.to_string(),
            r.stop.to_string(),
            opt(r.live_before),
            opt(r.live_after),
            r.status.clone(),
        ]
    };
    match format {
        TableFormat::Json => {
            let doc = serde_json::json!({ "plan": plan.partitions, "results": rows });
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        TableFormat::Csv => {
            println!("{}", RESULT_HEADER.join(","));
            for r in rows {
                println!(
                    "{}",
                    cells(r)
                        .map(|c| if c.contains(',') {
                            format!("\"{}\"", c.replace('"', "\"\""))
                        } else {
                            c
                        })
                        .join(",")
                );
            }
        }
        TableFormat::Table => {
            println!("replay result:");
            let table: Vec<[String; 10]> = rows.iter().map(cells).collect();
            print_table(&RESULT_HEADER, &table);
        }
    }
}

fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(header.to_vec()));
    for row in rows {
        println!("{}", line(row.iter().map(String::as_str).collect()));
    }
}
