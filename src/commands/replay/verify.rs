//! `lessonprobe replay verify`: compares a window of the topic with the audit table through
//! `ticketflow::verify`, prints the counts, plans, live lag and discrepancies (examples in the
//! table, the full list in JSON or CSV) and maps the result to an exit code.

use std::cell::RefCell;
use std::io::Write;

use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};
use ticketflow::replay::{DayPlanError, OutageNews, Outages, RetryBudget};
use ticketflow::store::Timeouts;
use ticketflow::verify::{
    self, Compare, Compared, Counts, Discrepancy, Findings, VerifyError, VerifyOptions,
    VerifyReport, VerifyRequest,
};

use crate::cli::{CompareArg, ReplayVerifyArgs};
use crate::exit::{Code, Error};
use crate::render::{self, TableFormat};

pub fn verify(args: ReplayVerifyArgs) -> Result<Code, Error> {
    let kafka = super::super::real_kafka(&args.kafka, "lessonprobe replay verify")?;
    let db = super::super::target_db(args.db)?;
    let window = super::super::window(&args.window)?;
    let request = VerifyRequest {
        topic: args.topic,
        window,
        partitions: args.partitions,
        live_group: args.live_group,
    };
    let timeouts = Timeouts::reading(&db, args.deadline);
    let options = VerifyOptions {
        batch: args.batch as usize,
        limit: args.limit,
        deadline: args.deadline,
        idle_timeout: args.idle_timeout,
        compare: match args.compare {
            CompareArg::Auto => Compare::Auto,
            CompareArg::Scan => Compare::Scan,
            CompareArg::Lookup => Compare::Lookup,
        },
    };
    let budget = RetryBudget::new(args.retry.retry_for);
    let told = |news: &OutageNews<'_>| errln!("lessonprobe replay verify: {news}");
    let report =
        verify::verify_riding_outages(&kafka, &db, timeouts, &request, options, (&budget, &told))
            .map_err(|e| match budget.outages().outlasted {
            Some(outlasted) => Error::Operation(outlasted.to_string()),
            None => failed(e),
        })?;
    let outages = budget.outages();
    let clean = report.clean();
    let (records, secs) = (report.total.records, report.elapsed.as_secs_f64());
    let compared = match report.compared {
        Compared::Scan => "the table scanned whole",
        Compared::Lookup => "each event_id looked up",
    };
    let rate = records as f64 / secs.max(1e-9);
    match args.format {
        TableFormat::Table => print_table(&report)?,
        TableFormat::Json => print_json(report, &outages)?,
        TableFormat::Csv => {
            errln!("{}", summary_table(&report)?);
            print_csv(report.findings)?;
        }
    }
    let survived = match outages.survived.len() {
        0 => String::new(),
        n => format!(
            "; {n} outage(s) survived, {:.1} s lost",
            outages.lost().as_secs_f64()
        ),
    };
    errln!("lessonprobe replay verify: {records} records in {secs:.2} s ({rate:.0} records/s), {compared}{survived}");
    Ok(if clean { Code::Ok } else { Code::Discrepancies })
}

fn failed(e: VerifyError) -> Error {
    let text = match &e {
        VerifyError::Plan(DayPlanError::Refused(why)) => format!("verify refused: {why}"),
        _ => e.to_string(),
    };
    Error::Operation(text)
}

fn op(e: impl std::fmt::Display) -> Error {
    Error::Operation(e.to_string())
}

/// A partition (or the total) as one flat row.
#[derive(Serialize)]
struct CountsRow<'a> {
    partition: String,
    start: Option<i64>,
    stop: Option<i64>,
    #[serde(flatten)]
    counts: &'a Counts,
}

impl<'a> CountsRow<'a> {
    fn new(partition: String, range: Option<(i64, i64)>, counts: &'a Counts) -> Self {
        CountsRow {
            partition,
            start: range.map(|r| r.0),
            stop: range.map(|r| r.1),
            counts,
        }
    }
}

fn summary_table(report: &VerifyReport) -> Result<String, Error> {
    let mut rows: Vec<CountsRow> = report
        .partitions
        .iter()
        .map(|p| CountsRow::new(p.partition.to_string(), Some((p.start, p.stop)), &p.counts))
        .collect();
    rows.push(CountsRow::new("total".into(), None, &report.total));
    render::table(&rows).map_err(op)
}

/// The verdict in words: what a reader acts on.
fn verdict(report: &VerifyReport) -> String {
    let t = &report.total;
    if report.clean() {
        format!(
            "CLEAN: every one of the {} distinct events of the window is in the table as the topic carries it",
            t.distinct_event_ids
        )
    } else {
        format!(
            "DISCREPANCIES: {} event(s) of the window missing from the table, {} record(s) stored with other content",
            t.missing, t.mismatched
        )
    }
}

fn print_table(report: &VerifyReport) -> Result<(), Error> {
    outln!(
        "verify: topic {} on {} against {}; window {}",
        report.topic,
        report.servers,
        report.target,
        report.window
    );
    outln!("{}", summary_table(report)?);
    if report.plans.is_empty() {
        outln!("replay plans: none recorded in the target covers the window");
    } else {
        outln!("replay plans covering the window:");
        outln!("{}", render::table(&report.plans).map_err(op)?);
    }
    if let Some(group) = &report.live_group {
        outln!("live group {group} (read only):");
        outln!("{}", render::table(&report.live).map_err(op)?);
    }
    for (kind, n) in report.found() {
        let examples = report.findings.examples(kind);
        outln!(
            "{}: {n}{}",
            kind.as_str(),
            if (examples.len() as u64) < n {
                format!(
                    " (the first {}; --format json or csv lists all)",
                    examples.len()
                )
            } else {
                String::new()
            }
        );
        if !examples.is_empty() {
            outln!("{}", render::table(examples).map_err(op)?);
        }
    }
    outln!("{}", verdict(report));
    Ok(())
}

/// The findings as a JSON array written while they are read back, never held whole.
struct Streamed(RefCell<Option<Findings>>);

impl Serialize for Streamed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let findings = self
            .0
            .borrow_mut()
            .take()
            .ok_or_else(|| S::Error::custom("the findings were already written"))?;
        let mut seq = serializer.serialize_seq(None)?;
        for d in findings.read_back().map_err(S::Error::custom)? {
            seq.serialize_element(&d.map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    topic: &'a str,
    servers: &'a str,
    target: &'a str,
    window: &'a str,
    clean: bool,
    partitions: &'a [verify::PartitionCounts],
    total: &'a Counts,
    plans: &'a [verify::PlanCoverage],
    live_group: Option<&'a str>,
    live: &'a [verify::LiveOffsets],
    compared: Compared,
    outages: &'a Outages,
    discrepancies: Streamed,
}

fn print_json(report: VerifyReport, outages: &Outages) -> Result<(), Error> {
    let VerifyReport {
        topic,
        servers,
        target,
        window,
        partitions,
        total,
        plans,
        live_group,
        live,
        findings,
        compared,
        elapsed: _,
    } = report;
    let clean = total.clean();
    let doc = JsonReport {
        topic: &topic,
        servers: &servers,
        target: &target,
        window: &window,
        clean,
        partitions: &partitions,
        total: &total,
        plans: &plans,
        live_group: live_group.as_deref(),
        live: &live,
        compared,
        outages,
        discrepancies: Streamed(RefCell::new(Some(findings))),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, &doc).map_err(op)?;
    writeln!(out).and_then(|()| out.flush()).map_err(op)
}

/// One CSV row per discrepancy, written as they are read back.
fn print_csv(findings: Findings) -> Result<(), Error> {
    let mut out = csv::Writer::from_writer(std::io::BufWriter::new(std::io::stdout().lock()));
    // The header comes from the first row; an empty list still gets one.
    let mut any = false;
    for d in findings.read_back().map_err(op)? {
        let d: Discrepancy = d.map_err(op)?;
        out.serialize(&d).map_err(op)?;
        any = true;
    }
    if !any {
        out.write_record([
            "kind",
            "partition",
            "offset",
            "event_id",
            "quarantined",
            "detail",
        ])
        .map_err(op)?;
    }
    out.flush().map_err(op)
}
