//! The built-in probe functions, grouped by what they exercise.

mod audit_sql;
mod kafka_replay;
mod ordering;
mod replay_contract;

use crate::context::BuiltinProbe;

pub(crate) static ALL: &[BuiltinProbe] = &[
    BuiltinProbe {
        name: "failure_leaves_offset_uncommitted",
        summary: "a failing store surfaces its error and nothing is committed",
        run: audit_sql::failure_leaves_offset_uncommitted,
    },
    BuiltinProbe {
        name: "sql_audit_duplicate",
        summary: "the same event at offsets 41 and 42: one row, commits 42 and 43",
        run: audit_sql::sql_audit_duplicate,
    },
    BuiltinProbe {
        name: "apply_once_twice",
        summary: "apply_once of one event twice returns True then False, one row",
        run: audit_sql::apply_once_twice,
    },
    BuiltinProbe {
        name: "integrity_error_propagates",
        summary: "a CHECK or NOT NULL violation is an error, not a duplicate, and commits nothing",
        run: audit_sql::integrity_error_propagates,
    },
    BuiltinProbe {
        name: "replay_plan_validation",
        summary: "same group, empty and negative ranges are refused",
        run: replay_contract::plan_validation,
    },
    BuiltinProbe {
        name: "replay_stop_beyond_end",
        summary: "stop beyond the captured end fails before any seek",
        run: replay_contract::stop_beyond_end,
    },
    BuiltinProbe {
        name: "replay_gap",
        summary: "a missing offset fails at that offset",
        run: replay_contract::gap,
    },
    BuiltinProbe {
        name: "replay_foreign_partition",
        summary: "a record of another partition fails",
        run: replay_contract::foreign_partition,
    },
    BuiltinProbe {
        name: "replay_idle_before_stop",
        summary: "going idle before stop is an error carrying the committed offset",
        run: replay_contract::idle_before_stop,
    },
    BuiltinProbe {
        name: "replay_deadline",
        summary: "the wall-clock deadline ends a slow replay as an error",
        run: replay_contract::deadline,
    },
    BuiltinProbe {
        name: "replay_commit_after_apply",
        summary: "each commit follows its effect, and the last commit equals stop",
        run: replay_contract::commit_after_apply,
    },
    BuiltinProbe {
        name: "kafka_bounded_replay_preserves_live_offsets",
        summary: "over Kafka: a replay group repairs yesterday's audit rows; live offsets and business effects stay",
        run: kafka_replay::bounded_replay_preserves_live_offsets,
    },
    BuiltinProbe {
        name: "kafka_earliest_does_not_rewind",
        summary: "over Kafka: earliest does not rewind a committed group; a replay group reads [100, 200)",
        run: kafka_replay::earliest_does_not_rewind,
    },
    BuiltinProbe {
        name: "kafka_stop_beyond_end",
        summary: "over Kafka: stop beyond the end offset is refused and the replay group commits nothing",
        run: kafka_replay::stop_beyond_end,
    },
    BuiltinProbe {
        name: "kafka_failure_leaves_offset_uncommitted",
        summary: "over Kafka: a failed effect leaves the broker at the last success; a rerun completes",
        run: kafka_replay::failure_mid_range,
    },
    BuiltinProbe {
        name: "kafka_same_key_same_partition",
        summary: "over Kafka: one key, one partition, offset order; a late old version is refused",
        run: ordering::same_key_same_partition,
    },
];
