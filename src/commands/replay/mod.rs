//! `lessonprobe replay`: parses the arguments into a `ticketflow::replay` request, prepares
//! it, prints the plan (a dry run by default) or executes it with progress bars, renders the
//! report and maps its verdict to an exit code. `replay status` lists the recorded plans.

mod output;
mod status;

use std::time::{Duration, Instant};

use ticketflow::replay::{
    BadRecords, ConnectError, DayPlanError, DayReplayRequest, ExecuteOptions, FindingsPolicy,
    PrepareError, Refusal, ReplayJob, ReplayOptions, ReplayRequest, Verdict,
};
use ticketflow::store::{unanswered, ANSWER_TIMEOUT};

use crate::cli::{OnBadRecord, OnConflict, ReplayArgs};
use crate::exit::{Code, Error};
use crate::progress::PartitionBars;
use crate::render::TableFormat;

pub use status::status;

/// How long past `--deadline`, or past [`ANSWER_TIMEOUT`] for one call to the database, a run
/// still waiting (on a peer that stopped answering in a way no timeout saw) is given before
/// the process ends itself.
const GRACE: Duration = Duration::from_secs(5);

/// How often the watchdog looks.
const WATCHDOG_POLL: Duration = Duration::from_millis(250);

/// `lessonprobe replay` itself: plans a window and, with `--execute`, replays it.
pub fn replay(args: ReplayArgs) -> Result<Code, Error> {
    let started = Instant::now();
    arm_watchdog(args.deadline);
    let kafka = super::real_kafka(&args.kafka, "lessonprobe replay")?;
    let db = super::target_db(args.db)?;
    let required = |v: Option<String>, flag: &str| {
        v.ok_or_else(|| Error::Usage(format!("{flag} is required")))
    };
    let day = DayReplayRequest {
        topic: required(args.topic, "--topic")?,
        live_group: required(args.live_group, "--live-group")?,
        replay_group: required(args.replay_group, "--replay-group")?,
        window: super::window(&args.window)?,
        partitions: args.partitions,
        resume: args.resume,
    };
    let prepared = ReplayJob::prepare(ReplayRequest {
        kafka: &kafka,
        db: &db,
        day,
        worker: args.worker,
        deadline: args.deadline,
    })
    .map_err(refused)?;
    let format = args.format;
    if !args.execute || format == TableFormat::Table || prepared.is_complete() {
        output::plan(&prepared, format)?;
    }
    if prepared.is_complete() || !args.execute {
        if format == TableFormat::Table {
            println!("{}", output::nothing_to_do(&prepared));
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
        jobs: args.jobs.map(usize::from),
    };
    let bars = PartitionBars::new(&prepared.plan);
    let report = prepared
        .run(options, &bars)
        .map_err(|e| Error::Operation(e.to_string()))?;
    bars.finish();
    output::report(&prepared, &report, format, planned)?;
    let judgement = report.verdict(FindingsPolicy {
        fail_on_conflict: args.on_conflict == OnConflict::Fail,
        allow_quarantine: args.allow_quarantine,
    });
    for line in &judgement.lines {
        eprintln!("lessonprobe replay: {line}");
    }
    match judgement.verdict {
        Verdict::Clean => Ok(Code::Ok),
        Verdict::Findings => Ok(Code::Findings),
        failed => Err(Error::Operation(failed.to_string())),
    }
}

/// Ends the process, exit 4, when the run still waits past `deadline` plus a grace period, or
/// when a call to the database has waited past [`ANSWER_TIMEOUT`] plus the grace: every wait
/// has a timeout of its own and the server bounds each statement and lock wait by
/// `ANSWER_TIMEOUT`, so this only bounds what a silent peer stretches (a link that forwards
/// nothing while its socket stays open). A batch is durable with its checkpoint or not at
/// all, so ending here loses nothing.
fn arm_watchdog(deadline: Duration) {
    let started = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("replay-watchdog".into())
        .spawn(move || loop {
            std::thread::sleep(WATCHDOG_POLL);
            let stop = if started.elapsed() > deadline + GRACE {
                format!(
                    "the deadline of {} s passed {} s ago and the run is still waiting for the database or the broker",
                    deadline.as_secs_f64(),
                    GRACE.as_secs()
                )
            } else {
                match unanswered::longest() {
                    Some((waited, call)) if waited > ANSWER_TIMEOUT + GRACE => format!(
                        "{call} has not answered for {} s, though the server ends any statement or lock wait after {} s: the link to it has gone silent",
                        waited.as_secs(),
                        ANSWER_TIMEOUT.as_secs()
                    ),
                    _ => continue,
                }
            };
            eprintln!(
                "lessonprobe replay: {stop}; stopping. Every batch is durable with its checkpoint or not applied: rerun with --resume"
            );
            std::process::exit(Code::Operation as i32);
        });
    if let Err(e) = spawned {
        tracing::warn!("no watchdog for the deadline and silent peers: {e}");
    }
}

/// A refusal in the words of this command: the flag that fixes it, where one does, and usage
/// errors told from refusals of the data.
fn refused(e: PrepareError) -> Error {
    match e {
        PrepareError::Connect(e @ ConnectError::OwnedProperty { .. }) => {
            Error::Usage(e.to_string())
        }
        PrepareError::Plan(DayPlanError::Refused(
            why @ (Refusal::DuplicatePartition { .. } | Refusal::NegativeOffset { .. }),
        )) => Error::Usage(format!("--partitions/--start/--stop: {why}")),
        PrepareError::Plan(DayPlanError::Refused(why)) => {
            let hint = match &why {
                Refusal::OffsetsNeedOnePartition { .. } => ": give exactly one with --partitions",
                Refusal::WindowBackwards => " (--until must be later than --since)",
                _ => "",
            };
            Error::Operation(format!("replay refused: {why}{hint}"))
        }
        e => Error::Operation(e.to_string()),
    }
}
