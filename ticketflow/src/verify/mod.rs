//! `replay verify`: compares a window of the topic with the audit table, reading both and
//! writing neither — the topic through a consumer that never commits, the table read-only —
//! and reports per partition what is missing, mismatched, duplicated or undecodable, with the
//! recorded replay plans and the live group's lag beside it. Memory does not grow with the
//! window: records stream through in batches and whole-window counts come from sorted runs.

mod compare;
mod findings;
mod report;
mod runs;
mod stream;

pub use findings::{Discrepancy, Findings, Kind};
pub use report::{Counts, LiveOffsets, PartitionCounts, PlanCoverage, VerifyReport};
pub use stream::READ_GROUP;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use compare::Verdict;
use runs::{FactEntry, IdEntry, Runs};

use crate::event::EventRecord;
use crate::kafka::{Broker, KafkaError, KafkaTarget};
use crate::replay::{
    plan_day, DayPlanError, DayReplayRequest, ReplayError, ReplayErrorKind, ReplayLimits, Window,
};
use crate::store::{Adoption, AuditDb, Snapshot, StoreError, Timeouts};

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
}

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

/// Database sessions that look batches up side by side, where they can share one snapshot.
const LOOKUP_SESSIONS: usize = 2;

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

/// Verifies `request`'s window of the topic on `kafka` against the audit table in `db`.
pub fn verify(
    kafka: &KafkaTarget,
    db: &AuditDb,
    timeouts: Timeouts,
    request: &VerifyRequest,
    options: VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    // The table first: one that cannot be compared stops before anything is read.
    let mut table = open_table(db, timeouts)?;
    let fail = |source| VerifyError::Target {
        db: db.to_string(),
        source,
    };
    let plans = table.snapshot.plans().map_err(fail)?;
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
    let started = Instant::now();
    let mut counts: BTreeMap<i32, Counts> = plan
        .partitions
        .iter()
        .map(|p| (p.partition, Counts::default()))
        .collect();
    let mut total = Counts::default();
    let mut findings = Findings::new(options.limit)?;
    let mut runs = Runs::new();
    let limits = ReplayLimits {
        deadline: options.deadline,
        idle_timeout: options.idle_timeout,
    };
    // More sessions look batches up in parallel where they can share one snapshot.
    let mut helpers: Vec<Snapshot> = (1..LOOKUP_SESSIONS)
        .map_while(|_| table.snapshot.beside(db, timeouts))
        .collect();
    let (adoption, place) = (&table.adoption, table.place.as_str());
    let sessions: Vec<&mut Snapshot> = std::iter::once(&mut table.snapshot)
        .chain(helpers.iter_mut())
        .collect();
    std::thread::scope(|scope| -> Result<(), VerifyError> {
        let plan = &plan;
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
            let topic = request.topic.as_str();
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
        scope.spawn(move || stream::read_window(kafka, plan, limits, options.batch.max(1), &sends));
        for result in results.iter().cycle() {
            let Ok(looked) = result.recv() else { break };
            let looked = looked?;
            let c = counts.entry(looked.batch.partition).or_default();
            account(looked, c, &mut total, &mut findings, &mut runs)?;
        }
        Ok(())
    })?;
    runs.settle(&mut counts, &mut total, &mut findings)?;
    Ok(VerifyReport {
        topic: request.topic.clone(),
        servers: broker.servers().to_owned(),
        target: table.place,
        window: request.window.to_string(),
        partitions: plan
            .partitions
            .iter()
            .map(|p| PartitionCounts {
                partition: p.partition,
                start: p.start,
                stop: p.stop,
                counts: counts.get(&p.partition).cloned().unwrap_or_default(),
            })
            .collect(),
        total,
        plans: PlanCoverage::of(&plans, &request.topic, &plan.partitions),
        live_group: request.live_group.clone(),
        live: match request.live_group {
            Some(_) => plan.partitions.iter().map(LiveOffsets::of).collect(),
            None => Vec::new(),
        },
        findings,
        elapsed: started.elapsed(),
    })
}

/// One batch with what the table holds for it: a verdict for each decodable record, and the
/// quarantined offsets among its suspects (sorted, each with its reason).
struct LookedUp {
    batch: stream::Batch,
    judged: Vec<Option<Verdict>>,
    quarantine: Vec<(i64, String)>,
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
        quarantine,
    })
}

/// Counts one compared batch, records its findings and pushes its run entries.
fn account(
    looked: LookedUp,
    counts: &mut Counts,
    total: &mut Counts,
    findings: &mut Findings,
    runs: &mut Runs,
) -> Result<(), VerifyError> {
    let LookedUp {
        batch,
        judged,
        quarantine,
    } = looked;
    let partition = batch.partition;
    let quarantined = |offset: i64| {
        quarantine
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()
            .map(|i| quarantine[i].1.as_str())
    };
    for (record, verdict) in batch.records.into_iter().zip(judged) {
        counts.records += 1;
        total.records += 1;
        let event = match record.event {
            Err(reason) => {
                let q = quarantined(record.offset);
                counts.undecodable += 1;
                total.undecodable += 1;
                counts.quarantined += u64::from(q.is_some());
                total.quarantined += u64::from(q.is_some());
                findings.push(Discrepancy {
                    kind: Kind::Undecodable,
                    partition,
                    offset: record.offset,
                    event_id: None,
                    quarantined: Some(q.is_some()),
                    detail: match q {
                        Some(why) if why == reason => format!("{reason}; quarantined"),
                        Some(why) => format!("{reason}; quarantined as: {why}"),
                        None => format!("{reason}; not in the quarantine table"),
                    },
                })?;
                continue;
            }
            Ok(decoded) => decoded,
        };
        counts.decodable += 1;
        total.decodable += 1;
        let mut id = IdEntry {
            event_id: event.event_id.clone(),
            partition,
            offset: record.offset,
            missing: false,
            quarantined: false,
            refused: String::new(),
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
                let mut detail = format!("the stored row differs in {}", fields.join(", "));
                if let Some(at) = at {
                    detail.push_str(&format!(
                        " (stored from {}[{}]@{})",
                        at.topic, at.partition, at.offset
                    ));
                }
                findings.push(Discrepancy {
                    kind: Kind::Mismatched,
                    partition,
                    offset: record.offset,
                    event_id: Some(event.event_id.clone()),
                    quarantined: None,
                    detail,
                })?;
            }
            Some(Verdict::Same) | None => {}
        }
        // Digested here rather than by the reader: of the three threads this one has the
        // least else to do.
        let facts = FactEntry {
            facts: stream::facts(&event),
            event_id: event.event_id,
            partition,
            offset: record.offset,
        };
        runs.push(id, facts)?;
    }
    Ok(())
}
