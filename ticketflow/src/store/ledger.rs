//! The replay's bookkeeping as values: a recorded plan, each partition's progress (its
//! checkpoint, owner and counters), and one batch as the writer receives it.

use serde::Serialize;

use crate::event::EventRecord;

/// What a plan replays: a time window, or explicit offsets of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanWindow {
    Time { since_ms: i64, until_ms: i64 },
    Offsets { start: i64, stop: i64 },
}

impl PlanWindow {
    /// The plan table's columns for the window: its kind, then `since_ms`, `until_ms`,
    /// `start_offset` and `stop_offset`, each set only for its kind.
    pub(crate) fn columns(&self) -> (&'static str, [Option<i64>; 4]) {
        match *self {
            PlanWindow::Time { since_ms, until_ms } => {
                ("time", [Some(since_ms), Some(until_ms), None, None])
            }
            PlanWindow::Offsets { start, stop } => {
                ("offsets", [None, None, Some(start), Some(stop)])
            }
        }
    }

    /// The window read back from [its columns](Self::columns).
    pub(crate) fn from_columns(kind: &str, v: [Option<i64>; 4]) -> PlanWindow {
        match kind {
            "time" => PlanWindow::Time {
                since_ms: v[0].unwrap_or_default(),
                until_ms: v[1].unwrap_or_default(),
            },
            _ => PlanWindow::Offsets {
                start: v[2].unwrap_or_default(),
                stop: v[3].unwrap_or_default(),
            },
        }
    }
}

/// Now, as the bookkeeping writes it.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Where a recorded plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Running,
    Complete,
    Failed,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Running => "running",
            PlanStatus::Complete => "complete",
            PlanStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> PlanStatus {
        match text {
            "complete" => PlanStatus::Complete,
            "failed" => PlanStatus::Failed,
            _ => PlanStatus::Running,
        }
    }
}

/// What each partition did so far, as counted in the batches made durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub records: u64,
    pub inserted: u64,
    pub duplicates: u64,
    pub conflicts: u64,
    pub quarantined: u64,
    pub markers: u64,
    pub aborted: u64,
}

impl std::ops::AddAssign for Counters {
    fn add_assign(&mut self, o: Counters) {
        self.records += o.records;
        self.inserted += o.inserted;
        self.duplicates += o.duplicates;
        self.conflicts += o.conflicts;
        self.quarantined += o.quarantined;
        self.markers += o.markers;
        self.aborted += o.aborted;
    }
}

/// One partition of a recorded plan and its progress: `next_offset` is the checkpoint (every
/// offset below it is durable in the target).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionProgress {
    pub partition: i32,
    pub start: i64,
    pub stop: i64,
    pub captured_end: i64,
    pub next_offset: i64,
    pub owner: Option<String>,
    #[serde(flatten)]
    pub counters: Counters,
    pub updated_at: String,
}

impl PartitionProgress {
    pub fn complete(&self) -> bool {
        self.next_offset >= self.stop
    }
}

/// A plan as recorded in the target: what was asked, the ranges planned, who and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordedPlan {
    /// A stable hash of topic, replay group, window and partition list.
    pub plan_id: String,
    pub topic: String,
    pub replay_group: String,
    pub live_group: String,
    pub window: PlanWindow,
    pub created_at: String,
    pub created_by: String,
    pub status: PlanStatus,
    pub finished_at: Option<String>,
    pub partitions: Vec<PartitionProgress>,
}

impl RecordedPlan {
    pub fn partition(&self, partition: i32) -> Option<&PartitionProgress> {
        self.partitions.iter().find(|p| p.partition == partition)
    }

    pub fn partition_list(&self) -> String {
        let list: Vec<String> = self
            .partitions
            .iter()
            .map(|p| p.partition.to_string())
            .collect();
        list.join(",")
    }
}

/// What recording a plan found, decided atomically against other runs recording at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recording {
    /// This run recorded it.
    Recorded,
    /// It was recorded already (another worker of the same plan was first).
    Present,
    /// Another plan of the same replay group is recorded: nothing was written.
    OtherPlan { plan_id: String },
}

/// A partition claimed by a worker: its checkpoint and stop as the claim found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub next_offset: i64,
    pub stop: i64,
}

/// One record of a batch as the writer receives it: where it sits, its bytes, and either the
/// event it decodes to or why it is not one.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub raw: &'a [u8],
    pub decoded: Result<EventRecord, String>,
}

/// A contiguous run of one partition's records `[first, next)` (entries may be fewer when
/// markers or aborted records fill offsets), made durable together with the checkpoint.
#[derive(Debug, Clone)]
pub struct Batch<'a> {
    pub partition: i32,
    /// The checkpoint before the batch: the writer advances it only from here.
    pub first: i64,
    /// The checkpoint after the batch.
    pub next: i64,
    pub entries: Vec<Entry<'a>>,
    /// Offsets in the range that hold control markers / aborted records (counted only).
    pub markers: u64,
    pub aborted: u64,
}

/// Why the writer did not make a batch durable.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The database refused a record on its data (with `--on-bad-record fail`); nothing of the
    /// batch was written.
    #[error("record at offset {offset} refused by the database: {reason}")]
    Refused { offset: i64, reason: String },
    /// The checkpoint is not where this writer left it: another writer moved it.
    #[error("checkpoint of partition {partition} moved under this run (expected {expected}, found {found:?}): another replay of this plan is writing; nothing of the batch was written")]
    CheckpointMoved {
        partition: i32,
        expected: i64,
        found: Option<i64>,
    },
    #[error(transparent)]
    Store(#[from] super::error::StoreError),
}
