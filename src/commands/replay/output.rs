//! What `lessonprobe replay` prints: the target and the plan (a table, JSON or CSV), what this
//! run does with it, and the report of an executed run.

use std::time::Duration;

use ticketflow::replay::{Decision, PlanDocument, Prepared, ReplayReport};

use crate::exit::Error;
use crate::render::{self, TableFormat};

/// The target as found and the plan, with what this run does with it.
pub(super) fn plan(prepared: &Prepared<'_>, format: TableFormat) -> Result<(), Error> {
    let text = match format {
        TableFormat::Json => render::json_sorted(&prepared.document()),
        _ => render::rows(format, &prepared.plan.rows()),
    }?;
    if format != TableFormat::Table {
        outln!("{text}");
        return Ok(());
    }
    let Prepared {
        job, plan, view, ..
    } = prepared;
    for line in view.adoption.describe(&view.inspection) {
        outln!("{line}");
    }
    outln!("{}", PlanDocument::new(plan, job.servers()));
    outln!("{text}");
    let (total, remaining) = (plan.records(), plan.remaining());
    outln!("{total} records in the window; {remaining} to replay");
    outln!("{}", prepared.decision);
    Ok(())
}

/// Why a run that did not execute did nothing.
pub(super) fn nothing_to_do(prepared: &Prepared<'_>) -> String {
    match &prepared.decision {
        Decision::Complete(recorded) => format!(
            "plan {} is complete (finished {}): nothing to do",
            recorded.plan_id,
            recorded.finished_at.as_deref().unwrap_or("-")
        ),
        _ => "dry run: nothing was created or applied; add --execute to run this plan".to_owned(),
    }
}

/// The executed run's rows (standard output) and its rate (standard error).
pub(super) fn report(
    prepared: &Prepared<'_>,
    report: &ReplayReport,
    format: TableFormat,
    planned: Duration,
) -> Result<(), Error> {
    let text = match format {
        TableFormat::Json => render::json_sorted(&report.document(&prepared.plan)),
        _ => render::rows(format, &report.rows()),
    }?;
    if format == TableFormat::Table {
        outln!("replay result (plan {}):", report.plan_id);
    }
    outln!("{text}");
    let outages = &report.outages;
    if format == TableFormat::Table && !outages.survived.is_empty() {
        outln!(
            "outages survived: {} ({:.1} s lost)",
            outages.survived.len(),
            outages.lost().as_secs_f64()
        );
    }
    let (records, secs) = (report.records(), report.elapsed.as_secs_f64());
    let survived = match outages.survived.len() {
        0 => String::new(),
        n => format!(
            "; {n} outage(s) survived, {:.1} s lost",
            outages.lost().as_secs_f64()
        ),
    };
    errln!(
        "lessonprobe replay: {records} records in {secs:.2} s ({:.0} records/s) after planning in {:.2} s, {} partition(s) at once{survived}",
        records as f64 / secs.max(1e-9),
        planned.as_secs_f64(),
        report.lanes
    );
    Ok(())
}
