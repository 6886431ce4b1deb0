//! The day job built on the per-partition core: planning a window of a real topic
//! (`window`, a plan's `identity`, `prepare`), executing it alone (`execute`) or as one of
//! several workers (`worker`) through `run`, riding through brief outages of the broker or
//! the database (`outage`), and reporting (`report`, `rows`, `documents`), with the
//! `watchdog` a front end runs beside it.

mod documents;
mod execute;
mod identity;
mod outage;
mod prepare;
mod report;
mod rows;
mod run;
mod watchdog;
mod window;
mod worker;

pub use documents::{PreparedDocument, ReportDocument, TargetDocument};
pub use identity::{plan_id, Behind, Decision, IdentityRefusal, Shown, TargetView};

pub use execute::{
    default_lanes, transaction_size, ExecuteOptions, PartitionError, Progress, SetupError,
    DEFAULT_BATCH, DEFAULT_BATCH_BYTES,
};
pub use outage::{Down, Outage, OutageNews, Outages, Outlasted, RetryBudget, Survived};
pub use prepare::{
    ConnectError, DatabaseError, JoinError, PrepareError, Prepared, ReplayJob, ReplayRequest,
    TargetError,
};
pub use report::{
    Failure, FindingsPolicy, Judgement, LiveMovement, PartitionOutcome, PartitionReport,
    ReplayReport, Verdict,
};
pub use rows::{PartitionStatus, PlanDocument, PlanRow, ReportRow, StatusRow};
pub use run::ExecuteError;
pub use watchdog::{watch_for_stalls, Stall};
pub use window::{
    plan_day, DayPlan, DayPlanError, DayReplayRequest, Lost, LostWhy, PartitionPlan, Refusal,
    Window,
};
