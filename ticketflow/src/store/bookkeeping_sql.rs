//! The replay's bookkeeping statements (plans, partitions and their checkpoints, claims,
//! batches, conflicts, quarantine), written once for both backends: a parameter is written
//! `$N`, rendered `$N` on PostgreSQL and `?N` on SQLite. Where the dialects really differ,
//! both forms stand side by side here.

use std::sync::LazyLock;

use super::backend::Backend;

/// A plan; its partitions follow with [`INSERT_PARTITION`].
const INSERT_PLAN: &str = "INSERT INTO lessonprobe_replay_plans (plan_id, topic, replay_group,
        live_group, window_kind, since_ms, until_ms, start_offset, stop_offset, partitions,
        created_at, created_by, status, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL)";

/// A partition of a plan, with its checkpoint at its start.
const INSERT_PARTITION: &str = "INSERT INTO lessonprobe_replay_partitions (plan_id, partition,
        start_offset, stop_offset, captured_end, next_offset, owner, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// Every plan, oldest first.
const PLANS: &str =
    "SELECT plan_id, topic, replay_group, live_group, window_kind, since_ms, until_ms,
            start_offset, stop_offset, created_at, created_by, status, finished_at
     FROM lessonprobe_replay_plans ORDER BY created_at, plan_id";

/// A plan's partitions with their checkpoints and counters.
const PARTITIONS: &str =
    "SELECT partition, start_offset, stop_offset, captured_end, next_offset, owner,
            records, inserted, duplicates, conflicts, quarantined, markers, aborted, updated_at
     FROM lessonprobe_replay_partitions WHERE plan_id = $1 ORDER BY partition";

/// The plan of this id, or else another plan of its replay group.
const PLAN_OR_GROUP: &str =
    "SELECT plan_id FROM lessonprobe_replay_plans WHERE plan_id = $1 OR replay_group = $2
     ORDER BY plan_id = $1 DESC LIMIT 1";

/// Every partition of a plan to one owner.
const CLAIM_ALL: &str =
    "UPDATE lessonprobe_replay_partitions SET owner = $2, updated_at = $3 WHERE plan_id = $1";

const RUNNING: &str =
    "UPDATE lessonprobe_replay_plans SET status = 'running', finished_at = NULL WHERE plan_id = $1";

/// A finished partition keeps the owner that finished it; an unfinished one gets the claimer.
const CLAIM_PARTITION: &str = "UPDATE lessonprobe_replay_partitions
     SET owner = CASE WHEN next_offset < stop_offset THEN $3 ELSE owner END,
         updated_at = CASE WHEN next_offset < stop_offset THEN $4 ELSE updated_at END
     WHERE plan_id = $1 AND partition = $2
     RETURNING next_offset, stop_offset";

const RELEASE_PARTITION: &str =
    "UPDATE lessonprobe_replay_partitions SET owner = NULL, updated_at = $4
     WHERE plan_id = $1 AND partition = $2 AND owner = $3 AND next_offset < stop_offset";

const FINISH: &str =
    "UPDATE lessonprobe_replay_plans SET status = $2, finished_at = $3 WHERE plan_id = $1";

const CONFLICTS_BY_PARTITION: &str =
    "SELECT incoming_partition, COUNT(*) FROM lessonprobe_replay_conflicts
     WHERE plan_id = $1 GROUP BY incoming_partition ORDER BY 1";

/// A conflict, once.
const INSERT_CONFLICT: &str = "INSERT INTO lessonprobe_replay_conflicts (plan_id, event_id,
        stored_topic, stored_partition, stored_offset, stored_hash, incoming_topic,
        incoming_partition, incoming_offset, incoming_hash, found_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT DO NOTHING";

/// A partition's checkpoint is where a batch starts: still at `$3` and, with an owner `$13`,
/// belonging to it. `{owner}` is `$13` as the dialect tests a parameter for NULL (see
/// [`owner_param`]). The one rule of [`ADVANCE`] and [`IN_PLACE`].
const STARTS_HERE: &str = "next_offset = $3 AND ({owner} IS NULL OR owner = $13)";

/// The checkpoint moved from `$3` to `$4` with the batch's counters added, only where the batch
/// starts ([`STARTS_HERE`]).
const ADVANCE: &str =
    "UPDATE lessonprobe_replay_partitions SET next_offset = $4, records = records + $5,
        inserted = inserted + $6, duplicates = duplicates + $7, conflicts = conflicts + $8,
        quarantined = quarantined + $9, markers = markers + $10, aborted = aborted + $11,
        updated_at = $12
     WHERE plan_id = $1 AND partition = $2 AND {starts_here}";

/// Where a partition's checkpoint is, and whether the batch starts there ([`STARTS_HERE`]),
/// asked before a batch goes in where nothing can undo it alone. Bound as [`ADVANCE`] is.
const IN_PLACE: &str = "SELECT next_offset, {starts_here} FROM lessonprobe_replay_partitions
     WHERE plan_id = $1 AND partition = $2";

/// Where a partition's checkpoint is.
const CHECKPOINT: &str =
    "SELECT next_offset FROM lessonprobe_replay_partitions WHERE plan_id = $1 AND partition = $2";

const INSERT_BATCH: &str = "INSERT INTO lessonprobe_replay_batches (plan_id, partition,
        first_offset, next_offset, records, owner, applied_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Quarantined records: on PostgreSQL all of a batch's in one statement, as arrays
/// (`$2`…`$6`: topics, partitions, offsets, records, reasons) …
const QUARANTINE_ARRAYS: &str = "INSERT INTO lessonprobe_replay_quarantine (plan_id, topic,
        partition, record_offset, record, reason, quarantined_at)
     SELECT $1::text, u.*, $7::text
     FROM unnest($2::text[], $3::int4[], $4::int8[], $5::bytea[], $6::text[]) AS u";

/// … on SQLite one record a statement.
const QUARANTINE_ROW: &str = "INSERT INTO lessonprobe_replay_quarantine (plan_id, topic,
        partition, record_offset, record, reason, quarantined_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// The owner parameter of [`STARTS_HERE`]: PostgreSQL cannot tell the type of a parameter that is
/// only tested for NULL, so it is cast there.
fn owner_param(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "$13::text",
        Backend::Sqlite => "$13",
    }
}

/// The bookkeeping statements in one dialect.
pub(crate) struct BookkeepingSql {
    pub insert_plan: String,
    pub insert_partition: String,
    pub plans: String,
    pub partitions: String,
    pub plan_or_group: String,
    pub claim_all: String,
    pub running: String,
    pub claim_partition: String,
    pub release_partition: String,
    pub finish: String,
    pub conflicts_by_partition: String,
    pub insert_conflict: String,
    pub advance: String,
    pub in_place: String,
    pub checkpoint: String,
    pub insert_batch: String,
    pub quarantine: String,
}

/// The statements as PostgreSQL writes them.
pub(crate) static POSTGRES: LazyLock<BookkeepingSql> =
    LazyLock::new(|| BookkeepingSql::render(Backend::Postgres));

/// The statements as SQLite writes them.
pub(crate) static SQLITE: LazyLock<BookkeepingSql> =
    LazyLock::new(|| BookkeepingSql::render(Backend::Sqlite));

impl BookkeepingSql {
    fn render(backend: Backend) -> BookkeepingSql {
        let sql = |template: &str| parameters(template, backend);
        let starts_here = STARTS_HERE.replace("{owner}", owner_param(backend));
        BookkeepingSql {
            insert_plan: sql(INSERT_PLAN),
            insert_partition: sql(INSERT_PARTITION),
            plans: sql(PLANS),
            partitions: sql(PARTITIONS),
            plan_or_group: sql(PLAN_OR_GROUP),
            claim_all: sql(CLAIM_ALL),
            running: sql(RUNNING),
            claim_partition: sql(CLAIM_PARTITION),
            release_partition: sql(RELEASE_PARTITION),
            finish: sql(FINISH),
            conflicts_by_partition: sql(CONFLICTS_BY_PARTITION),
            insert_conflict: sql(INSERT_CONFLICT),
            advance: sql(&ADVANCE.replace("{starts_here}", &starts_here)),
            in_place: sql(&IN_PLACE.replace("{starts_here}", &starts_here)),
            checkpoint: sql(CHECKPOINT),
            insert_batch: sql(INSERT_BATCH),
            quarantine: match backend {
                Backend::Postgres => sql(QUARANTINE_ARRAYS),
                Backend::Sqlite => sql(QUARANTINE_ROW),
            },
        }
    }
}

/// `template` with each parameter `$N` written as `backend` writes it: `$N` on PostgreSQL,
/// `?N` on SQLite. No statement here holds a `$` but in a parameter.
fn parameters(template: &str, backend: Backend) -> String {
    match backend {
        Backend::Postgres => template.to_owned(),
        Backend::Sqlite => template.replace('$', "?"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::{self, BOOKKEEPING};

    fn all(sql: &BookkeepingSql) -> [&str; 17] {
        [
            &sql.insert_plan,
            &sql.insert_partition,
            &sql.plans,
            &sql.partitions,
            &sql.plan_or_group,
            &sql.claim_all,
            &sql.running,
            &sql.claim_partition,
            &sql.release_partition,
            &sql.finish,
            &sql.conflicts_by_partition,
            &sql.insert_conflict,
            &sql.advance,
            &sql.checkpoint,
            &sql.insert_batch,
            &sql.quarantine,
            &sql.in_place,
        ]
    }

    /// The parameter numbers a statement names, in order, whichever sign marks them.
    fn numbers(statement: &str, sign: char) -> Vec<u32> {
        statement
            .split(sign)
            .skip(1)
            .map(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap()
            })
            .collect()
    }

    #[test]
    fn every_sqlite_statement_prepares_against_the_bookkeeping_tables() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for table in BOOKKEEPING {
            conn.execute_batch(&schema::bookkeeping(table, Backend::Sqlite))
                .unwrap();
        }
        for statement in all(&SQLITE) {
            assert!(!statement.contains('$'), "{statement}");
            let prepared = conn.prepare(statement);
            assert!(prepared.is_ok(), "{statement}: {prepared:?}");
        }
    }

    #[test]
    fn both_dialects_name_the_same_parameters_and_differ_only_where_said() {
        let pg = all(&POSTGRES);
        let lite = all(&SQLITE);
        for (p, s) in pg.iter().zip(lite) {
            assert!(!p.contains('?'), "{p}");
            if p.contains("unnest(") {
                continue;
            }
            assert_eq!(numbers(p, '$'), numbers(s, '?'), "{p}");
            assert_eq!(p.replace("::text", "").replace('$', "?"), s);
        }
        let advance = &POSTGRES.advance;
        assert!(advance.contains("AND ($13::text IS NULL OR owner = $13)"));
        assert!(lite[12].contains("AND (?13 IS NULL OR owner = ?13)"));
    }
}
