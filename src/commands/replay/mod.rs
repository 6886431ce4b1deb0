//! `lessonprobe replay`: parses the arguments into a `ticketflow::replay` request, prepares
//! it, prints the plan (a dry run by default) or executes it with progress bars, renders the
//! report and maps its verdict to an exit code. `replay status` lists the recorded plans; `replay verify` compares a window with its table.

mod output;
mod status;
pub mod verify;

use std::time::Instant;

use ticketflow::replay::{
    transaction_size, DayReplayRequest, ExecuteOptions, FindingsPolicy, OutageNews, Progress,
    ReplayJob, ReplayOptions, ReplayRequest, ReplaySummary, Verdict,
};

use crate::cli::{OnConflict, ReplayArgs};
use crate::exit::{Code, Error};
use crate::progress::PartitionBars;
use crate::render::TableFormat;

pub use status::status;

/// `lessonprobe replay` itself: plans a window and, with `--execute`, replays it.
pub fn replay(args: ReplayArgs) -> Result<Code, Error> {
    let started = Instant::now();
    let watched = ticketflow::replay::watch_for_stalls(args.deadline, |stall| {
        errln!("lessonprobe replay: {stall}");
        std::process::exit(Code::Operation as i32);
    });
    if let Err(e) = watched {
        tracing::warn!("no watchdog for the deadline and silent peers: {e}");
    }
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
    let mut prepared = ReplayJob::prepare(ReplayRequest {
        kafka: &kafka,
        db: &db,
        day,
        worker: args.worker,
        deadline: args.deadline,
    })?;
    if !args.execute || args.format == TableFormat::Table || prepared.is_complete() {
        output::plan(&prepared, args.format)?;
    }
    if prepared.is_complete() || !args.execute {
        if args.format == TableFormat::Table {
            outln!("{}", output::nothing_to_do(&prepared));
        }
        return Ok(Code::Ok);
    }
    let planned = started.elapsed();
    let (batch, batch_bytes) = transaction_size(
        &db,
        prepared.plan.records(),
        (args.batch.map(|b| b as usize), args.batch_bytes),
    );
    let options = ExecuteOptions {
        replay: ReplayOptions {
            batch,
            batch_bytes,
            bad_records: args.on_bad_record.into(),
            skew: args.skew,
        },
        // The deadline bounds the whole command: planning took part of it.
        deadline: args.deadline,
        since: started,
        idle_timeout: args.idle_timeout,
        retry_for: args.retry.retry_for,
        jobs: args.jobs.map(usize::from),
    };
    let bars = PartitionBars::new(&prepared.plan);
    let report = prepared
        .run(options, &Told(&bars))
        .map_err(|e| Error::Operation(e.to_string()))?;
    bars.finish();
    output::report(&prepared, &report, args.format, planned)?;
    let judgement = report.verdict(FindingsPolicy {
        fail_on_conflict: args.on_conflict == OnConflict::Fail,
        allow_quarantine: args.allow_quarantine,
    });
    for line in &judgement.lines {
        errln!("lessonprobe replay: {line}");
    }
    match judgement.verdict {
        Verdict::Clean => Ok(Code::Ok),
        Verdict::Findings => Ok(Code::Findings),
        failed => Err(Error::Operation(failed.to_string())),
    }
}

/// The bars, and each outage's beginning and end told on stderr, one line each.
struct Told<'a>(&'a PartitionBars);

impl Progress for Told<'_> {
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary) {
        self.0.batch_done(partition, so_far);
    }

    fn outage(&self, news: &OutageNews<'_>) {
        errln!("lessonprobe replay: {news}");
    }
}
