//! `replay verify`: compares a window of the topic with the audit table, reading both and
//! writing neither — the topic through a consumer that never commits, the table read-only —
//! and reports per partition what is missing, mismatched, duplicated or undecodable, with the
//! recorded replay plans and the live group's lag beside it. The table is either scanned whole
//! and merged with the window by event_id, or looked up batch by batch (`Compare`). Memory does
//! not grow with the window: records stream through in batches and whole-window counts come
//! from sorted runs.

mod compare;
mod findings;
mod report;
mod runs;
mod scan;
mod sorted;
mod stream;

use findings::{mismatch_detail, quarantine_reason, undecodable_finding};
pub use findings::{Discrepancy, Findings, Kind};
pub use report::{Counts, LiveOffsets, PartitionCounts, PlanCoverage, VerifyReport};
pub use stream::READ_GROUP;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use compare::Verdict;
use runs::{FactEntry, IdEntry, Runs, UndecodableEntry};
use scan::Scanner;
use stream::Digested;

use crate::event::EventRecord;
use crate::kafka::{Broker, BrokerAddress, KafkaError, KafkaTarget};
use crate::replay::{
    plan_day, DayPlan, DayPlanError, DayReplayRequest, Down, OutageNews, ReplayError,
    ReplayErrorKind, ReplayLimits, RetryBudget, Window,
};
use crate::store::{Adoption, AuditDb, Scannable, Snapshot, StoreError, Timeouts};

/// What to verify.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    pub topic: String,
    pub window: Window,
    /// `None`: all of the topic's partitions.
    pub partitions: Option<Vec<i32>>,
    /// The live consumer group whose committed offsets and lag are reported.
    pub live_group: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct VerifyOptions {
    /// Records read and looked up together.
    pub batch: usize,
    /// Examples kept per kind of discrepancy.
    pub limit: usize,
    /// Wall-clock bound of reading the window.
    pub deadline: Duration,
    /// A partition that delivers nothing for this long before its range ends fails.
    pub idle_timeout: Duration,
    /// How the table is compared with the window.
    pub compare: Compare,
}

/// How the table is compared with the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compare {
    /// Scan when the table holds at most [`SCAN_FACTOR`] rows per record of the window (or
    /// at most [`SCAN_ALWAYS`] rows), look up otherwise.
    #[default]
    Auto,
    /// Read the table whole, once, and merge it with the window by event_id; a table that
    /// cannot be compared this way (typed columns, an event_id collation that is not byte for
    /// byte) is looked up instead.
    Scan,
    /// Look up each batch's event_ids.
    Lookup,
}

/// How a verification compared the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    Scan,
    Lookup,
}

/// [`Compare::Auto`] scans a table of up to this many rows per record of the window: a scan
/// reads, hashes and sorts a row in about a third of what a lookup costs a record.
pub const SCAN_FACTOR: u64 = 2;

/// [`Compare::Auto`] scans a table this small whatever the window.
pub const SCAN_ALWAYS: u64 = 100_000;

/// Why a verification could not be done (its findings are in the report, not here).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("{db}: {source}")]
    Target { db: String, source: StoreError },
    #[error("{db}: there is no audit_events table to verify")]
    NoAuditTable { db: String },
    #[error(transparent)]
    Plan(#[from] DayPlanError),
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error("{topic}[{partition}]: {kind}")]
    Read {
        topic: String,
        partition: i32,
        kind: ReplayErrorKind,
    },
    #[error("keeping sorted runs and findings in temporary files: {0}")]
    Spill(#[from] std::io::Error),
}

impl From<ReplayError> for VerifyError {
    fn from(e: ReplayError) -> Self {
        VerifyError::Read {
            topic: e.topic,
            partition: e.partition,
            kind: e.kind,
        }
    }
}

impl VerifyError {
    /// The peer away for a while, when that is why the verification could not be done: the
    /// broker `kafka` (failing as an outage does, or silent past the idle timeout) or the
    /// database.
    pub fn down(&self, kafka: &KafkaTarget) -> Option<Down> {
        let broker = || match kafka {
            KafkaTarget::Bootstrap { servers, .. } => format!("kafka {servers}"),
            KafkaTarget::Embedded => "kafka (embedded)".to_owned(),
        };
        let (peer, reason) = match self {
            VerifyError::Target { db, source } if source.is_outage() => {
                (db.clone(), source.to_string())
            }
            VerifyError::Kafka(e) | VerifyError::Plan(DayPlanError::Kafka(e)) if e.is_outage() => {
                (broker(), e.to_string())
            }
            VerifyError::Read { kind, .. } => match kind {
                ReplayErrorKind::Consumer(c) if c.is_outage() => (broker(), self.to_string()),
                ReplayErrorKind::Idle { .. } => (broker(), self.to_string()),
                _ => return None,
            },
            _ => return None,
        };
        Some(Down {
            peer,
            phase: "verification",
            reason,
        })
    }
}

/// [`verify`], made again from the start while the broker or the database is away, until
/// `budget` has passed since the outage's first failure (a verification writes nothing, so it
/// has nothing to resume from); `told` hears when an outage begins and ends.
pub fn verify_riding_outages(
    kafka: &KafkaTarget,
    db: &AuditDb,
    timeouts: Timeouts,
    request: &VerifyRequest,
    options: VerifyOptions,
    (budget, told): (&RetryBudget, &dyn Fn(&OutageNews<'_>)),
) -> Result<VerifyReport, VerifyError> {
    budget.ride(
        "the verification from the start",
        told,
        |e: &VerifyError| e.down(kafka),
        || verify(kafka, db, timeouts, request, options),
    )
}

/// Database sessions that look batches up side by side, where they can share one snapshot.
const LOOKUP_SESSIONS: usize = 2;

/// Consumers reading the window side by side while the table is scanned (the order in which
/// batches arrive decides nothing then: every count is settled from sorted runs).
const READERS: usize = 4;

/// A live group name for planning when none is given: its offsets are read and ignored.
const NO_LIVE_GROUP: &str = "lessonprobe-verify-no-live-group";

/// The target, opened to read only and found fit: the same check a replay makes.
struct Table {
    snapshot: Snapshot,
    adoption: Adoption,
    place: String,
}

fn open_table(db: &AuditDb, timeouts: Timeouts) -> Result<Table, VerifyError> {
    let fail = |source| VerifyError::Target {
        db: db.to_string(),
        source,
    };
    let mut snapshot = Snapshot::open(db, timeouts).map_err(fail)?;
    let inspection = snapshot.inspect().map_err(fail)?;
    if inspection.audit_events.is_none() {
        return Err(VerifyError::NoAuditTable {
            db: inspection.place,
        });
    }
    let adoption = inspection.adopt().map_err(|e| fail(e.into()))?;
    Ok(Table {
        snapshot,
        adoption,
        place: inspection.place,
    })
}

/// The session on the table: idle, or scanning it on a thread of its own.
enum Session {
    Idle(Box<Snapshot>),
    Scanning(Scanner),
}

impl Session {
    /// The session, its scan abandoned if it was scanning.
    fn into_snapshot(self) -> Snapshot {
        match self {
            Session::Idle(snapshot) => *snapshot,
            Session::Scanning(scanner) => scanner.abandon(),
        }
    }
}

/// Verifies `request`'s window of the topic on `kafka` against the audit table in `db`.
pub fn verify(
    kafka: &KafkaTarget,
    db: &AuditDb,
    timeouts: Timeouts,
    request: &VerifyRequest,
    options: VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    // The table first: one that cannot be compared stops before anything is read.
    let Table {
        mut snapshot,
        adoption,
        place,
    } = open_table(db, timeouts)?;
    let fail = |source| VerifyError::Target {
        db: db.to_string(),
        source,
    };
    let plans = snapshot.plans().map_err(fail)?;
    let scannable = match options.compare {
        Compare::Lookup => None,
        Compare::Scan | Compare::Auto => snapshot.scannable(&adoption).map_err(fail)?,
    };
    if scannable.is_none() && options.compare == Compare::Scan {
        tracing::warn!("{place}: audit_events has typed columns or an event_id collation that is not byte for byte, so it cannot be compared by a scan: each event_id is looked up");
    }
    // A table that can be scanned is scanned while the window is planned; when the plan shows
    // the window too small for the table, the scan is abandoned.
    let session = match scannable {
        Some(_) => Session::Scanning(Scanner::start(snapshot, place.clone())),
        None => Session::Idle(Box::new(snapshot)),
    };
    let planned = plan_window(kafka, request);
    let (broker, plan) = match planned {
        Ok(planned) => planned,
        Err(e) => {
            session.into_snapshot();
            return Err(e);
        }
    };
    let scan = scans(options.compare, scannable, &plan);
    let started = Instant::now();
    let mut tally = Tally::new(&plan, options.limit)?;
    let address = broker.address();
    let on = Reading {
        kafka: &address,
        plan: &plan,
        topic: &request.topic,
        limits: ReplayLimits {
            deadline: options.deadline,
            idle_timeout: options.idle_timeout,
        },
        batch: options.batch.max(1),
    };
    let compared = match session {
        Session::Scanning(scanner) if scan => {
            scanned(scanner, &adoption, &place, &on, &mut tally)?;
            Compared::Scan
        }
        session => {
            let mut snapshot = session.into_snapshot();
            lookups(
                &mut snapshot,
                &adoption,
                &place,
                db,
                timeouts,
                &on,
                &mut tally,
            )?;
            let looked_up_in = started.elapsed();
            tally.settle(None)?;
            tracing::debug!(
                ?looked_up_in,
                settled_in = ?started.elapsed(),
                "the window read and looked up, the runs settled"
            );
            Compared::Lookup
        }
    };
    let Tally {
        counts,
        total,
        findings,
        ..
    } = tally;
    Ok(VerifyReport {
        topic: request.topic.clone(),
        servers: broker.servers().to_owned(),
        target: place,
        window: request.window.to_string(),
        partitions: partition_counts(&plan, &counts),
        total,
        plans: PlanCoverage::of(&plans, &request.topic, &plan.partitions),
        live_group: request.live_group.clone(),
        live: match request.live_group {
            Some(_) => plan.partitions.iter().map(LiveOffsets::of).collect(),
            None => Vec::new(),
        },
        findings,
        compared,
        elapsed: started.elapsed(),
    })
}

/// Whether the table is compared by a scan: when asked to, or when `Compare::Auto` finds the
/// table small enough beside the records the window `plan` covers.
fn scans(compare: Compare, scannable: Option<Scannable>, plan: &DayPlan) -> bool {
    let records: u64 = plan
        .partitions
        .iter()
        .map(|p| p.records().max(0) as u64)
        .sum();
    let scan = compare == Compare::Scan
        || scannable
            .is_some_and(|s| s.rows <= records.saturating_mul(SCAN_FACTOR).max(SCAN_ALWAYS));
    tracing::debug!(scan, ?scannable, records, "comparing the table");
    scan
}

/// Each partition of the plan, its range and what was counted of it.
fn partition_counts(plan: &DayPlan, counts: &BTreeMap<i32, Counts>) -> Vec<PartitionCounts> {
    plan.partitions
        .iter()
        .map(|p| PartitionCounts {
            partition: p.partition,
            start: p.start,
            stop: p.stop,
            counts: counts.get(&p.partition).cloned().unwrap_or_default(),
        })
        .collect()
}

/// Plans the window as a replay would, with groups of its own that never commit.
fn plan_window(
    kafka: &KafkaTarget,
    request: &VerifyRequest,
) -> Result<(Broker, DayPlan), VerifyError> {
    let broker = Broker::for_target(kafka, Duration::from_secs(10))?;
    let plan = plan_day(
        &broker,
        &DayReplayRequest {
            topic: request.topic.clone(),
            live_group: request
                .live_group
                .clone()
                .unwrap_or_else(|| NO_LIVE_GROUP.to_owned()),
            replay_group: READ_GROUP.to_owned(),
            window: request.window.clone(),
            partitions: request.partitions.clone(),
            resume: false,
        },
    )?;
    Ok((broker, plan))
}

/// The planned window and how to read it.
struct Reading<'a> {
    kafka: &'a BrokerAddress,
    plan: &'a DayPlan,
    topic: &'a str,
    limits: ReplayLimits,
    /// Records per batch.
    batch: usize,
}

/// What the window adds up to while it is read: counts per partition and in total, the
/// findings, and the sorted runs settled at the end.
struct Tally {
    counts: BTreeMap<i32, Counts>,
    total: Counts,
    findings: Findings,
    runs: Runs,
}

/// Reads the window and looks each batch up in the table, in as many sessions as can share
/// one snapshot.
fn lookups(
    snapshot: &mut Snapshot,
    adoption: &Adoption,
    place: &str,
    db: &AuditDb,
    timeouts: Timeouts,
    on: &Reading<'_>,
    tally: &mut Tally,
) -> Result<(), VerifyError> {
    let (kafka, plan, topic, limits, batch) = (on.kafka, on.plan, on.topic, on.limits, on.batch);
    // More sessions look batches up in parallel where they can share one snapshot.
    let mut helpers: Vec<Snapshot> = (1..LOOKUP_SESSIONS)
        .map_while(|_| snapshot.beside(db, timeouts))
        .collect();
    let sessions: Vec<&mut Snapshot> = std::iter::once(snapshot)
        .chain(helpers.iter_mut())
        .collect();
    std::thread::scope(|scope| -> Result<(), VerifyError> {
        // The reader hands batch after batch to each session in turn; the results are taken
        // in the same turn, so the window is accounted for in its order. Every receiver lives
        // in this closure: an early return drops them, which stops the threads feeding them.
        let mut sends = Vec::new();
        let mut results = Vec::new();
        for snapshot in sessions {
            let (send, receive) = std::sync::mpsc::sync_channel::<Result<stream::Batch, _>>(2);
            let (done, result) = std::sync::mpsc::sync_channel(2);
            sends.push(send);
            results.push(result);
            scope.spawn(move || {
                for batch in receive {
                    let looked = batch.and_then(|b| look_up(snapshot, adoption, place, topic, b));
                    let failed = looked.is_err();
                    if done.send(looked).is_err() || failed {
                        return;
                    }
                }
            });
        }
        scope.spawn(move || stream::read_window(kafka, plan, limits, batch, &sends));
        for result in results.iter().cycle() {
            let Ok(looked) = result.recv() else { break };
            tally.account(looked?)?;
        }
        Ok(())
    })
}

/// Reads the window while `scanner` scans and sorts the table, then settles the window against
/// the sorted table.
fn scanned(
    scanner: Scanner,
    adoption: &Adoption,
    place: &str,
    on: &Reading<'_>,
    tally: &mut Tally,
) -> Result<(), VerifyError> {
    let (kafka, plan, limits, batch) = (on.kafka, on.plan, on.limits, on.batch);
    let started = Instant::now();
    let read = std::thread::scope(|scope| {
        let (send, receive) = std::sync::mpsc::sync_channel(READERS);
        scope.spawn(move || {
            stream::read_window_side_by_side(kafka, plan, limits, (batch, READERS), &send)
        });
        // Undecodable records wait for the quarantine until the scan is done with the session.
        receive.iter().try_for_each(|batch| {
            let batch: stream::Batch = batch?;
            tally.account(LookedUp {
                judged: vec![None; batch.records.len()],
                batch,
                quarantine: None,
            })
        })
    });
    if let Err(e) = read {
        scanner.abandon();
        return Err(e);
    }
    let read_in = started.elapsed();
    let (mut snapshot, sorted) = scanner.finish();
    let scanned_in = started.elapsed();
    let mut side = scan::ScannedTable {
        rows: sorted?.peekable(),
        snapshot: &mut snapshot,
        adoption,
        topic: on.topic,
        place,
    };
    tally.settle(Some(&mut side))?;
    tracing::debug!(
        ?read_in,
        ?scanned_in,
        settled_in = ?started.elapsed(),
        "the window read, the table scanned, the two settled"
    );
    Ok(())
}

/// One batch with what the table holds for it: a verdict for each decodable record, and the
/// quarantined offsets among its suspects (sorted, each with its reason).
struct LookedUp {
    batch: stream::Batch,
    judged: Vec<Option<Verdict>>,
    /// `None` when the quarantine is looked up at the end instead (the table is being scanned).
    quarantine: Option<Vec<(i64, String)>>,
}

/// Compares one batch with the table: each event with its row, each undecodable record (and
/// each missing event) with the quarantine.
fn look_up(
    snapshot: &mut Snapshot,
    adoption: &Adoption,
    place: &str,
    topic: &str,
    batch: stream::Batch,
) -> Result<LookedUp, VerifyError> {
    let fail = |source| VerifyError::Target {
        db: place.to_owned(),
        source,
    };
    let events: Vec<&EventRecord> = batch
        .records
        .iter()
        .filter_map(|r| r.event.as_ref().ok())
        .collect();
    let lookups = snapshot.stored(adoption, &events).map_err(fail)?;
    let mut verdicts = lookups
        .iter()
        .zip(&events)
        .map(|(l, e)| compare::judge(e, l));
    let mut judged: Vec<Option<Verdict>> = Vec::with_capacity(batch.records.len());
    for r in &batch.records {
        judged.push(r.event.as_ref().ok().and_then(|_| verdicts.next()));
    }
    // Records a replay may have quarantined: the undecodable ones and those with no row.
    let suspects: Vec<i64> = batch
        .records
        .iter()
        .zip(&judged)
        .filter(|(r, v)| r.event.is_err() || matches!(v, Some(Verdict::Missing { .. })))
        .map(|(r, _)| r.offset)
        .collect();
    let quarantine = snapshot
        .quarantined(topic, batch.partition, &suspects)
        .map_err(fail)?;
    Ok(LookedUp {
        batch,
        judged,
        quarantine: Some(quarantine),
    })
}

impl Tally {
    /// Nothing counted yet of `plan`'s partitions; `limit` examples kept per kind of finding.
    fn new(plan: &DayPlan, limit: usize) -> Result<Tally, VerifyError> {
        Ok(Tally {
            counts: plan
                .partitions
                .iter()
                .map(|p| (p.partition, Counts::default()))
                .collect(),
            total: Counts::default(),
            findings: Findings::new(limit)?,
            runs: Runs::new(),
        })
    }

    /// Counts one compared batch, records its findings and pushes its run entries.
    fn account(&mut self, looked: LookedUp) -> Result<(), VerifyError> {
        let LookedUp {
            batch,
            judged,
            quarantine,
        } = looked;
        let partition = batch.partition;
        let counts = self.counts.entry(partition).or_default();
        let total = &mut self.total;
        // Without a quarantine the table is being scanned: the records are compared with it by
        // their hashes when the window is settled.
        let scanning = quarantine.is_none();
        let quarantined =
            |offset: i64| quarantine_reason(quarantine.as_deref().unwrap_or_default(), offset);
        for (record, verdict) in batch.records.into_iter().zip(judged) {
            counts.records += 1;
            total.records += 1;
            let event = match record.event {
                Err(reason) => {
                    counts.undecodable += 1;
                    total.undecodable += 1;
                    if scanning {
                        // Looked up in the quarantine when the window is settled.
                        self.runs.push_undecodable(UndecodableEntry {
                            partition,
                            offset: record.offset,
                            reason,
                        })?;
                        continue;
                    }
                    let q = quarantined(record.offset);
                    counts.quarantined += u64::from(q.is_some());
                    total.quarantined += u64::from(q.is_some());
                    self.findings.push(undecodable_finding(
                        partition,
                        record.offset,
                        &reason,
                        q,
                    ))?;
                    continue;
                }
                Ok(decoded) => decoded,
            };
            counts.decodable += 1;
            total.decodable += 1;
            // Digested here unless the readers did: of the threads looking up, this one has the
            // least else to do.
            let digested = record
                .digested
                .unwrap_or_else(|| Digested::of(&event, scanning));
            let mut id = IdEntry {
                event_id: event.event_id.clone(),
                partition,
                offset: record.offset,
                missing: false,
                quarantined: false,
                refused: String::new(),
                fields: digested.fields,
                payload: digested.payload,
            };
            match verdict {
                Some(Verdict::Missing { refused }) => {
                    id.missing = true;
                    id.quarantined = quarantined(record.offset).is_some();
                    id.refused = refused.unwrap_or_default();
                }
                Some(Verdict::Mismatched { fields, at }) => {
                    counts.mismatched += 1;
                    total.mismatched += 1;
                    self.findings.push(Discrepancy {
                        kind: Kind::Mismatched,
                        partition,
                        offset: record.offset,
                        event_id: Some(event.event_id.clone()),
                        quarantined: None,
                        detail: mismatch_detail(&fields, at.as_ref()),
                    })?;
                }
                Some(Verdict::Same) | None => {}
            }
            let facts = FactEntry {
                facts: digested.facts,
                event_id: event.event_id,
                partition,
                offset: record.offset,
            };
            self.runs.push(id, facts)?;
        }
        Ok(())
    }

    /// Settles the sorted runs (against the scanned `table`, when there is one).
    fn settle(&mut self, table: Option<&mut dyn runs::TableSide>) -> Result<(), VerifyError> {
        std::mem::replace(&mut self.runs, Runs::new()).settle(
            &mut self.counts,
            &mut self.total,
            &mut self.findings,
            table,
        )
    }
}
