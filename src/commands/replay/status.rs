//! `lessonprobe replay status`: every plan recorded in the target and its partitions.

use std::time::Duration;

use ticketflow::replay::{PartitionStatus, ReplayJob, Shown, StatusRow};
use ticketflow::store::Timeouts;

use crate::cli::ReplayStatusArgs;
use crate::exit::{Code, Error};
use crate::render::{self, TableFormat};

/// How long each statement reading the record may take.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

pub fn status(args: ReplayStatusArgs) -> Result<Code, Error> {
    let db = crate::commands::target_db(args.db)?;
    let plans = ReplayJob::recorded(&db, Timeouts::reading(&db, STATEMENT_TIMEOUT))
        .map_err(|e| Error::Operation(e.to_string()))?;
    if args.format != TableFormat::Table {
        outln!("{}", render::rows(args.format, &StatusRow::all(&plans))?);
        return Ok(Code::Ok);
    }
    if plans.is_empty() {
        outln!("no replay recorded in {db}");
    }
    for plan in &plans {
        outln!("{}", Shown(plan));
        outln!("{}", render::table(&PartitionStatus::all(plan))?);
    }
    Ok(Code::Ok)
}
