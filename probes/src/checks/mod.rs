//! The built-in probe functions, grouped by what they exercise, each run on the real ticketflow.

mod audit_sql;
mod kafka_replay;
mod ordering;
mod replay_contract;
mod system;
#[cfg(test)]
mod testing;

use crate::context::BuiltinProbe;
use system::Ticketflow;

pub(crate) static ALL: &[BuiltinProbe] = &[
    BuiltinProbe {
        name: "failure_leaves_offset_uncommitted",
        summary: "a failing store surfaces its error and nothing is committed",
        run: |ctx| audit_sql::failure_leaves_offset_uncommitted(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "sql_audit_duplicate",
        summary: "the same event at offsets 41 and 42: one row, commits 42 and 43",
        run: |ctx| audit_sql::sql_audit_duplicate(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "apply_once_twice",
        summary: "apply_once of one event twice returns True then False, one row",
        run: |ctx| audit_sql::apply_once_twice(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "integrity_error_propagates",
        summary: "a CHECK or NOT NULL violation is an error, not a duplicate, and commits nothing",
        run: |ctx| audit_sql::integrity_error_propagates(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_plan_validation",
        summary: "same group, empty and negative ranges are refused",
        run: |ctx| replay_contract::plan_validation(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_stop_beyond_end",
        summary: "stop beyond the captured end fails before any seek",
        run: |ctx| replay_contract::stop_beyond_end(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_gap",
        summary: "a missing offset fails at that offset",
        run: |ctx| replay_contract::gap(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_foreign_partition",
        summary: "a record of another partition fails",
        run: |ctx| replay_contract::foreign_partition(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_idle_before_stop",
        summary: "going idle before stop is an error carrying the committed offset",
        run: |ctx| replay_contract::idle_before_stop(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_deadline",
        summary: "the wall-clock deadline ends a slow replay as an error",
        run: |ctx| replay_contract::deadline(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "replay_commit_after_apply",
        summary: "each commit follows its effect, and the last commit equals stop",
        run: |ctx| replay_contract::commit_after_apply(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "kafka_bounded_replay_preserves_live_offsets",
        summary: "over Kafka: a replay group repairs yesterday's audit rows; live offsets and business effects stay",
        run: |ctx| kafka_replay::bounded_replay_preserves_live_offsets(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "kafka_earliest_does_not_rewind",
        summary: "over Kafka: earliest does not rewind a committed group; a replay group reads [100, 200)",
        run: |ctx| kafka_replay::earliest_does_not_rewind(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "kafka_stop_beyond_end",
        summary: "over Kafka: stop beyond the end offset is refused and the replay group commits nothing",
        run: |ctx| kafka_replay::stop_beyond_end(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "kafka_failure_leaves_offset_uncommitted",
        summary: "over Kafka: a failed effect leaves the broker at the last success; a rerun completes",
        run: |ctx| kafka_replay::failure_mid_range(&Ticketflow, ctx),
    },
    BuiltinProbe {
        name: "kafka_same_key_same_partition",
        summary: "over Kafka: one key, one partition, offset order; a late old version is refused",
        run: |ctx| ordering::same_key_same_partition(&Ticketflow, ctx),
    },
];
