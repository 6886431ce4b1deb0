//! `lessonprobe replay`: the audit-only replay of a window of a real topic, as a replay job.
//! Looks at the target first, plans, decides from the plan's record in the target what this
//! run does, prints it (a dry run by default) or executes it with progress bars, renders the
//! report and maps it to an exit code; with `--worker` the process is one of several sharing
//! the plan; `replay status` lists the recorded plans. The job
//! itself lives in `ticketflow::replay`.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::time::{Duration, Instant};

use ticketflow::replay::{
    BadRecords, ConnectError, DayPlan, DayPlanError, DayReplayRequest, Decision, ExecuteOptions,
    JoinError, PlanDocument, Refusal, ReplayJob, ReplayOptions, Shown, StatusRow, TargetView,
    Window, CONNECT_TIMEOUT,
};
use ticketflow::store::{AuditDb, Timeouts};
use ticketflow::KafkaTarget;

use crate::cli::{OnBadRecord, OnConflict, ReplayArgs, ReplayStatusArgs, WindowArgs};
use crate::config::db::replay_target;
use crate::exit::{Code, Error};
use crate::progress::PartitionBars;
use crate::render::{self, TableFormat};

/// How long past `--deadline` a run that is still waiting (a database or broker that stopped
/// answering in a way no timeout saw) is given before the process ends itself.
const DEADLINE_GRACE: Duration = Duration::from_secs(5);

/// `lessonprobe replay` itself: plans a window and, with `--execute`, replays it.
pub fn replay(args: ReplayArgs) -> Result<Code, Error> {
    let started = Instant::now();
    arm_deadline(args.deadline);
    let kafka = super::kafka_target(&args.kafka)?;
    if kafka == KafkaTarget::Embedded {
        return Err(Error::Usage("lessonprobe replay works on real data: give --kafka HOST:PORT (the embedded broker is refused here)".into()));
    }
    let db = replay_target(args.db, std::env::var_os("LESSONPROBE_DB").is_some())
        .map_err(|e| Error::Usage(e.to_string()))?;
    let window = window(&args.window)?;
    let required = |v: Option<String>, flag: &str| {
        v.ok_or_else(|| Error::Usage(format!("{flag} is required")))
    };
    let request = DayReplayRequest {
        topic: required(args.topic, "--topic")?,
        live_group: required(args.live_group, "--live-group")?,
        replay_group: required(args.replay_group, "--replay-group")?,
        window,
        partitions: args.partitions,
        // A worker joins the plan however far the others got.
        resume: args.resume || args.worker,
    };
    let op = |e: &dyn Display| Error::Operation(e.to_string());
    // The target first: one that must not be written to stops the run before anything is read.
    let timeouts = timeouts(&db, args.deadline);
    let view = ReplayJob::inspect(&db, timeouts)
        .map_err(|e| Error::Operation(format!("replay refused: {e}")))?;
    let job =
        ReplayJob::connect(&kafka, request, Duration::from_secs(10)).map_err(|e| match e {
            ConnectError::OwnedProperty { .. } => Error::Usage(e.to_string()),
            ConnectError::Kafka(e) => op(&e),
        })?;
    let mut plan = job.plan().map_err(refused)?;
    // Workers look again after planning read the replay group's offsets in Kafka: the plan and
    // SQL checkpoints other workers recorded meanwhile explain them.
    let view = if args.worker {
        ReplayJob::inspect(&db, timeouts)
            .map_err(|e| Error::Operation(format!("replay refused: {e}")))?
    } else {
        view
    };
    let mut decision = ReplayJob::decide(&mut plan, &view)
        .map_err(|e| Error::Operation(format!("replay refused: {e}")))?;
    if args.worker && !matches!(decision, Decision::Complete(_)) {
        decision = ReplayJob::join(&db, timeouts, &mut plan, decision, &view).map_err(|e| {
            Error::Operation(match e {
                JoinError::Refused(e) => format!("replay refused: {e}"),
                e => e.to_string(),
            })
        })?;
    }
    let format = args.format;
    if !args.execute || format == TableFormat::Table || matches!(decision, Decision::Complete(_)) {
        print_plan(&job, &plan, &view, &decision, format)?;
    }
    if let Decision::Complete(recorded) = &decision {
        if format == TableFormat::Table {
            println!(
                "plan {} is complete (finished {}): nothing to do",
                recorded.plan_id,
                recorded.finished_at.as_deref().unwrap_or("-")
            );
        }
        return Ok(Code::Ok);
    }
    if !args.execute {
        if format == TableFormat::Table {
            println!("dry run: nothing was created or applied; add --execute to run this plan");
        }
        return Ok(Code::Ok);
    }
    let planned = started.elapsed();
    let options = ExecuteOptions {
        replay: ReplayOptions {
            batch: args.batch as usize,
            batch_bytes: args.batch_bytes,
            bad_records: match args.on_bad_record {
                OnBadRecord::Quarantine => BadRecords::Quarantine,
                OnBadRecord::Fail => BadRecords::Fail,
            },
            skew: args.skew,
        },
        // The deadline bounds the whole command: planning took part of it.
        deadline: args.deadline,
        since: started,
        idle_timeout: args.idle_timeout,
        jobs: args.jobs as usize,
    };
    let bars = PartitionBars::new(&plan);
    let report = if args.worker {
        job.work(&plan, &decision, &view, &db, options, &bars)
    } else {
        job.execute(&plan, &decision, &view, &db, options, &bars)
    }
    .map_err(|e| op(&e))?;
    bars.finish();
    let rows = report.rows();
    let text = match format {
        TableFormat::Json => render::json(&serde_json::json!({
            "plan_id": report.plan_id,
            "plan": plan.partitions,
            "results": rows,
            "conflicts": report.conflicts(),
            "quarantined": report.quarantined(),
        })),
        _ => render::rows(format, &rows),
    };
    let text = text.map_err(|e| op(&e))?;
    if format == TableFormat::Table {
        println!("replay result (plan {}):", report.plan_id);
    }
    println!("{text}");
    let (records, secs) = (report.records(), report.elapsed.as_secs_f64());
    eprintln!(
        "lessonprobe replay: {records} records in {secs:.2} s ({:.0} records/s) after planning in {:.2} s",
        records as f64 / secs.max(1e-9),
        planned.as_secs_f64()
    );
    for notice in report.notices() {
        eprintln!("lessonprobe replay: {notice}");
    }
    let failures = report.failures();
    let mut findings = false;
    let (conflicts, quarantined) = (report.conflicts(), report.quarantined());
    if conflicts > 0 {
        let fail = args.on_conflict == OnConflict::Fail;
        findings |= fail;
        eprintln!(
            "lessonprobe replay: {conflicts} CONFLICT(S): the same event_id arrived with different content; the first stored version was kept and both are named in lessonprobe_replay_conflicts (plan {}){}",
            report.plan_id,
            if fail { "; --on-conflict warn only reports them" } else { "" }
        );
    }
    if quarantined > 0 {
        findings |= !args.allow_quarantine;
        eprintln!(
            "lessonprobe replay: {quarantined} RECORD(S) QUARANTINED: not audit events, kept with the reason in lessonprobe_replay_quarantine (plan {}){}",
            report.plan_id,
            if args.allow_quarantine { "" } else { "; --allow-quarantine accepts them" }
        );
    }
    if failures.is_empty() {
        return Ok(if findings { Code::Findings } else { Code::Ok });
    }
    for failure in &failures {
        eprintln!("lessonprobe replay: {failure}");
    }
    let partitions: BTreeSet<i32> = failures.iter().filter_map(|f| f.partition()).collect();
    Err(Error::Operation(match partitions.len() {
        0 => "the replay reached every stop, but the live group's offsets after it are unknown: look at the live group before trusting the run".to_owned(),
        n => format!(
            "replay incomplete on {n} partition(s); fix the cause and rerun with --resume to continue from the last durable offsets"
        ),
    }))
}

/// The window of `--since`/`--until` or `--start`/`--stop`.
pub(super) fn window(w: &WindowArgs) -> Result<Window, Error> {
    match (w.since, w.until, w.start, w.stop) {
        (Some(since_ms), Some(until_ms), None, None) if until_ms <= since_ms => Err(Error::Usage(
            "empty window: --until must be later than --since".into(),
        )),
        (Some(since_ms), Some(until_ms), None, None) => Ok(Window::Time { since_ms, until_ms }),
        (None, None, Some(start), Some(stop)) if stop <= start => Err(Error::Usage(format!(
            "empty window: --stop {stop} must be greater than --start {start}"
        ))),
        (None, None, Some(start), Some(stop)) => Ok(Window::Offsets { start, stop }),
        _ => Err(Error::Usage(
            "give --since and --until, or --start and --stop".into(),
        )),
    }
}

/// The database's bounds under `--deadline`: connecting within the URL's `connect_timeout` (or
/// the default) and the deadline, every statement within the deadline.
pub(super) fn timeouts(db: &AuditDb, deadline: Duration) -> Timeouts {
    Timeouts {
        connect: db
            .connect_timeout()
            .unwrap_or(CONNECT_TIMEOUT)
            .min(deadline),
        statement: deadline,
    }
}

/// Ends the process at `deadline` plus a grace period if it is still running: every wait has
/// a timeout of its own, and this bounds the ones a server can still stretch (one that stops
/// answering mid-statement). A batch is durable with its checkpoint or not at all, so ending
/// here loses nothing.
fn arm_deadline(deadline: Duration) {
    let spawned = std::thread::Builder::new()
        .name("replay-deadline".into())
        .spawn(move || {
            std::thread::sleep(deadline + DEADLINE_GRACE);
            eprintln!(
                "lessonprobe replay: the deadline of {} s passed {} s ago and the run is still waiting for the database or the broker; stopping. Every batch is durable with its checkpoint or not applied: rerun with --resume",
                deadline.as_secs_f64(),
                DEADLINE_GRACE.as_secs()
            );
            std::process::exit(Code::Operation as i32);
        });
    if let Err(e) = spawned {
        tracing::warn!("no deadline watchdog: {e}");
    }
}

/// A refusal in the words of this command: the flag that fixes it, where one does.
fn refused(e: DayPlanError) -> Error {
    let hint = match &e {
        DayPlanError::Refused(Refusal::OffsetsNeedOnePartition { .. }) => {
            ": give exactly one with --partitions"
        }
        DayPlanError::Refused(Refusal::WindowBackwards) => " (--until must be later than --since)",
        _ => "",
    };
    match e {
        DayPlanError::Refused(
            why @ (Refusal::DuplicatePartition { .. } | Refusal::NegativeOffset { .. }),
        ) => Error::Usage(format!("--partitions/--start/--stop: {why}")),
        DayPlanError::Refused(why) => Error::Operation(format!("replay refused: {why}{hint}")),
        DayPlanError::Kafka(e) => Error::Operation(e.to_string()),
    }
}

/// What this run would do with the plan, in words.
fn identity_line(decision: &Decision) -> String {
    match decision {
        Decision::New(plan) => format!(
            "plan {}: new; it is recorded in the target when executed",
            plan.plan_id
        ),
        Decision::Resume { plan, behind } => {
            let mut line = format!(
                "plan {}: recorded {} by {} ({}); continues from its SQL checkpoints",
                plan.plan_id,
                plan.created_at,
                plan.created_by,
                plan.status.as_str()
            );
            for b in behind {
                line.push_str(&format!(
                    "\n  partition {}: the replay group's committed offset in Kafka ({}) is behind the SQL checkpoint {}: the SQL checkpoint is used, and Kafka is brought up to it",
                    b.partition,
                    b.kafka.map_or_else(|| "none".to_owned(), |k| k.to_string()),
                    b.sql
                ));
            }
            line
        }
        Decision::Complete(plan) => format!("{}", Shown(plan)),
    }
}

fn print_plan(
    job: &ReplayJob,
    plan: &DayPlan,
    view: &TargetView,
    decision: &Decision,
    format: TableFormat,
) -> Result<(), Error> {
    let r = &plan.request;
    let target_lines = view.adoption.describe(&view.inspection);
    let text = match format {
        TableFormat::Json => render::json(&serde_json::json!({
            "plan": PlanDocument::new(plan, job.servers()),
            "plan_id": decision.plan().plan_id,
            "decision": match decision {
                Decision::New(_) => "new",
                Decision::Resume { .. } => "resume",
                Decision::Complete(_) => "complete",
            },
            "target": {
                "found": view.inspection,
                "adoption": view.adoption,
                "summary": target_lines,
            },
        })),
        _ => render::rows(format, &plan.rows()),
    };
    let text = text.map_err(|e| Error::Operation(e.to_string()))?;
    if format != TableFormat::Table {
        println!("{text}");
        return Ok(());
    }
    for line in &target_lines {
        println!("{line}");
    }
    println!(
        "replay plan: topic {} on {}; live group {} (read only); replay group {}; window {}",
        r.topic,
        job.servers(),
        r.live_group,
        r.replay_group,
        r.window
    );
    println!("{text}");
    let (total, remaining) = (plan.records(), plan.remaining());
    println!("{total} records in the window; {remaining} to replay");
    println!("{}", identity_line(decision));
    Ok(())
}

/// `lessonprobe replay status`: every plan recorded in the target and its partitions.
pub fn status(args: ReplayStatusArgs) -> Result<Code, Error> {
    let db = replay_target(args.db, std::env::var_os("LESSONPROBE_DB").is_some())
        .map_err(|e| Error::Usage(e.to_string()))?;
    let timeouts = Timeouts {
        connect: db.connect_timeout().unwrap_or(CONNECT_TIMEOUT),
        statement: Duration::from_secs(60),
    };
    let plans = ReplayJob::recorded(&db, timeouts).map_err(|e| Error::Operation(e.to_string()))?;
    let rows: Vec<StatusRow> = plans
        .iter()
        .flat_map(|plan| plan.partitions.iter().map(move |p| StatusRow::new(plan, p)))
        .collect();
    if args.format == TableFormat::Table {
        if plans.is_empty() {
            println!("no replay recorded in {db}");
        }
        for plan in &plans {
            println!("{}", Shown(plan));
            let partitions: Vec<PartitionLine> = plan
                .partitions
                .iter()
                .map(|p| PartitionLine::from(&StatusRow::new(plan, p)))
                .collect();
            println!(
                "{}",
                render::table(&partitions).map_err(|e| Error::Operation(e.to_string()))?
            );
        }
        return Ok(Code::Ok);
    }
    let text = render::rows(args.format, &rows).map_err(|e| Error::Operation(e.to_string()))?;
    println!("{text}");
    Ok(Code::Ok)
}

/// A partition of a plan as `replay status` prints it under the plan's line.
#[derive(serde::Serialize)]
struct PartitionLine {
    partition: i32,
    start: i64,
    stop: i64,
    checkpoint: i64,
    remaining: i64,
    owner: Option<String>,
    records: u64,
    inserted: u64,
    duplicates: u64,
    conflicts: u64,
    quarantined: u64,
    markers: u64,
    aborted: u64,
    updated_at: String,
}

impl From<&StatusRow> for PartitionLine {
    fn from(r: &StatusRow) -> Self {
        PartitionLine {
            partition: r.partition,
            start: r.start,
            stop: r.stop,
            checkpoint: r.checkpoint,
            remaining: r.remaining,
            owner: r.owner.clone(),
            records: r.records,
            inserted: r.inserted,
            duplicates: r.duplicates,
            conflicts: r.conflicts,
            quarantined: r.quarantined,
            markers: r.markers,
            aborted: r.aborted,
            updated_at: r.updated_at.clone(),
        }
    }
}
