//! `lessonprobe replay`: the audit-only replay of a window of a real topic, as a replay job.
//! Parses, prints the plan (a dry run by default) or executes it with progress bars, renders
//! the report and maps it to an exit code; the job itself lives in `ticketflow::replay`.

use std::fmt::Display;
use std::time::{Duration, Instant};

use ticketflow::replay::{
    BadRecords, ConnectError, DayPlan, DayPlanError, DayReplayRequest, ExecuteOptions,
    PlanDocument, Refusal, ReplayJob, ReplayOptions, Window,
};
use ticketflow::KafkaTarget;

use crate::cli::{OnBadRecord, ReplayArgs};
use crate::config::db::replay_target;
use crate::exit::{Code, Error};
use crate::progress::PartitionBars;
use crate::render::{self, TableFormat};

pub fn replay(args: ReplayArgs) -> Result<Code, Error> {
    let started = Instant::now();
    let kafka = super::kafka_target(&args.kafka)?;
    if kafka == KafkaTarget::Embedded {
        return Err(Error::Usage("lessonprobe replay works on real data: give --kafka HOST:PORT (the embedded broker is refused here)".into()));
    }
    let db = replay_target(args.db, std::env::var_os("LESSONPROBE_DB").is_some())
        .map_err(|e| Error::Usage(e.to_string()))?;
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
        topic: args.topic,
        live_group: args.live_group,
        replay_group: args.replay_group,
        window,
        partitions: args.partitions,
        resume: args.resume,
    };
    let op = |e: &dyn Display| Error::Operation(e.to_string());
    let job =
        ReplayJob::connect(&kafka, request, Duration::from_secs(10)).map_err(|e| match e {
            ConnectError::OwnedProperty { .. } => Error::Usage(e.to_string()),
            ConnectError::Kafka(e) => op(&e),
        })?;
    let plan = job.plan().map_err(refused)?;
    let format = args.format;
    if !args.execute || format == TableFormat::Table {
        print_plan(&job, &plan, format)?;
    }
    if !args.execute {
        if format == TableFormat::Table {
            println!("dry run: nothing was applied; add --execute to run this plan");
        }
        return Ok(Code::Ok);
    }
    let planned = started.elapsed();
    let options = ExecuteOptions {
        replay: ReplayOptions {
            batch: args.batch as usize,
            bad_records: match args.on_bad_record {
                OnBadRecord::Quarantine => BadRecords::Quarantine,
                OnBadRecord::Fail => BadRecords::Fail,
            },
            skew: args.skew,
        },
        // The deadline bounds the whole command: planning took part of it.
        deadline: args.deadline.saturating_sub(planned),
        idle_timeout: args.idle_timeout,
        jobs: args.jobs as usize,
    };
    let bars = PartitionBars::new(&plan);
    let report = job
        .execute(&plan, &db, options, &bars)
        .map_err(|e| op(&e))?;
    bars.finish();
    let rows = report.rows();
    let text = match format {
        TableFormat::Json => {
            render::json(&serde_json::json!({ "plan": plan.partitions, "results": rows }))
        }
        _ => render::rows(format, &rows),
    };
    let text = text.map_err(|e| op(&e))?;
    if format == TableFormat::Table {
        println!("replay result:");
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
    if failures.is_empty() {
        return Ok(Code::Ok);
    }
    for failure in &failures {
        eprintln!("lessonprobe replay: {failure}");
    }
    Err(Error::Operation(format!(
        "replay incomplete on {} partition(s); fix the cause and rerun with --resume to continue from the last durable offsets",
        failures.len()
    )))
}

/// A refusal in the words of this command: the flag that fixes it, where one does.
fn refused(e: DayPlanError) -> Error {
    let hint = match &e {
        DayPlanError::Refused(Refusal::AlreadyStarted { .. }) => {
            ": rerun with --resume to continue from there"
        }
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

fn print_plan(job: &ReplayJob, plan: &DayPlan, format: TableFormat) -> Result<(), Error> {
    let r = &plan.request;
    let text = match format {
        TableFormat::Json => {
            render::json(&serde_json::json!({ "plan": PlanDocument::new(plan, job.servers()) }))
        }
        _ => render::rows(format, &plan.rows()),
    };
    let text = text.map_err(|e| Error::Operation(e.to_string()))?;
    if format != TableFormat::Table {
        println!("{text}");
        return Ok(());
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
    Ok(())
}
