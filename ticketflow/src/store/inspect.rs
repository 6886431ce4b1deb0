//! What a replay target holds before anything is written, and whether the replay may adopt it:
//! an `audit_events` whose columns can hold an event and whose unique key covers exactly
//! `event_id`, or none (then it is created). Refusals carry the SQL that fixes them.

use std::fmt;

use serde::Serialize;

use super::backend::Backend;
use super::schema::{self, AUDIT_TABLE, BOOKKEEPING, RECORD_COLUMNS, REQUIRED_COLUMNS};

/// One column of an existing table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    pub name: String,
    /// The declared type as the database spells it (`text`, `character varying(64)`, `jsonb`).
    pub sql_type: String,
    pub not_null: bool,
    /// A default, identity or generated value fills it when an insert leaves it out.
    pub filled: bool,
}

/// An existing `audit_events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditTable {
    pub columns: Vec<Column>,
    /// The columns of every unique constraint or unique index usable by ON CONFLICT (not
    /// partial, not on expressions, not deferrable), with its name.
    pub unique_keys: Vec<(String, Vec<String>)>,
}

/// What the target holds, found without writing anything.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    #[serde(skip)]
    pub backend: Backend,
    /// The database, without a password.
    pub place: String,
    /// PostgreSQL: the schema new tables go to. SQLite: none.
    pub schema: Option<String>,
    /// False for a SQLite file that does not exist yet.
    pub exists: bool,
    pub audit_events: Option<AuditTable>,
    /// The bookkeeping tables already there.
    pub bookkeeping: Vec<String>,
    /// Tables an earlier lessonprobe left (`schema_migrations`, `quarantined_records`).
    pub legacy: Vec<String>,
}

/// How the replay will use an adoptable target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Adoption {
    /// `audit_events` is absent and will be created.
    pub create_audit_events: bool,
    /// Bookkeeping tables that will be created.
    pub create_bookkeeping: Vec<&'static str>,
    /// Record columns that will be written (all of them in a table the replay creates).
    pub record_columns: Vec<&'static str>,
    /// Record columns the adopted table lacks (or has with a type that cannot hold them).
    pub missing_record_columns: Vec<&'static str>,
    /// The unique key ON CONFLICT (event_id) will use.
    pub unique_key: String,
    /// PostgreSQL: the declared type of each required column that is not a text type, so
    /// inserts can convert to it (`jsonb`, `uuid`, `timestamp with time zone`).
    pub casts: Vec<(String, String)>,
}

/// A target the replay must not write to; nothing was read from Kafka or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("audit_events in {place} has no unique constraint or unique index on exactly (event_id){found}: without it every replayed event is recorded again as a new row (the lesson: \"without a unique key, replaying a day records every event twice\"). Add the key (remove duplicate rows first if it fails), then rerun:\n  {sql}", found = found_keys(.found))]
    NoUniqueKey {
        place: String,
        found: Vec<Vec<String>>,
        sql: &'static str,
    },
    #[error("audit_events in {place} has no column {column}: an audit row needs event_id, tenant_id, ticket_id, action, occurred_at and payload")]
    MissingColumn { place: String, column: &'static str },
    #[error("audit_events.{column} in {place} is {sql_type}, which cannot hold {what}")]
    ColumnType {
        place: String,
        column: &'static str,
        sql_type: String,
        what: &'static str,
    },
    #[error("audit_events.{column} in {place} is NOT NULL without a default: a replay cannot fill it (give it a default or allow NULL)")]
    UnfilledColumn { place: String, column: String },
}

fn found_keys(found: &[Vec<String>]) -> String {
    if found.is_empty() {
        return String::new();
    }
    let keys: Vec<String> = found
        .iter()
        .map(|k| format!("({})", k.join(", ")))
        .collect();
    format!(" (its unique keys: {})", keys.join(", "))
}

fn is_text(sql_type: &str) -> bool {
    let t = sql_type.to_ascii_lowercase();
    t == "text"
        || t.starts_with("character")
        || t.starts_with("varchar")
        || t.starts_with("char")
        || t == "citext"
        || t == "name"
}

/// Whether a required column of type `sql_type` can hold its value (PostgreSQL; SQLite stores
/// text in any column), and what it must hold, for the refusal.
fn fits_required(column: &str, sql_type: &str) -> Result<(), &'static str> {
    let t = sql_type.to_ascii_lowercase();
    if is_text(&t) {
        return Ok(());
    }
    match column {
        "payload" if t == "json" || t == "jsonb" => Ok(()),
        "payload" => Err("the payload's JSON text (use text, json or jsonb)"),
        "occurred_at" if t.starts_with("timestamp") => Ok(()),
        "occurred_at" => Err("an RFC 3339 time (use text or a timestamp type)"),
        "event_id" | "tenant_id" | "ticket_id" if t == "uuid" => Ok(()),
        _ => Err("text (use text, varchar or uuid)"),
    }
}

/// Whether a record column of type `sql_type` holds what the replay writes there (PostgreSQL).
fn fits_record(column: &str, sql_type: &str) -> bool {
    let t = sql_type.to_ascii_lowercase();
    match column {
        "record" => t == "bytea",
        "topic" => is_text(&t),
        "partition" => matches!(t.as_str(), "integer" | "bigint" | "numeric"),
        _ => matches!(t.as_str(), "bigint" | "numeric"),
    }
}

impl Inspection {
    /// Whether the replay may adopt this target, and how it will use it.
    pub fn adopt(&self) -> Result<Adoption, Unfit> {
        let create_bookkeeping: Vec<&'static str> = BOOKKEEPING
            .iter()
            .copied()
            .filter(|t| !self.bookkeeping.iter().any(|have| have == t))
            .collect();
        let Some(table) = &self.audit_events else {
            return Ok(Adoption {
                create_audit_events: true,
                create_bookkeeping,
                record_columns: RECORD_COLUMNS.to_vec(),
                missing_record_columns: Vec::new(),
                unique_key: "audit_events_event_id_key".into(),
                casts: Vec::new(),
            });
        };
        let place = || self.place.clone();
        let postgres = self.backend == Backend::Postgres;
        let column = |name: &str| table.columns.iter().find(|c| c.name == name);
        let mut casts = Vec::new();
        for name in REQUIRED_COLUMNS {
            let Some(c) = column(name) else {
                return Err(Unfit::MissingColumn {
                    place: place(),
                    column: name,
                });
            };
            if postgres {
                fits_required(name, &c.sql_type).map_err(|what| Unfit::ColumnType {
                    place: place(),
                    column: name,
                    sql_type: c.sql_type.clone(),
                    what,
                })?;
                if !is_text(&c.sql_type) {
                    casts.push((name.to_owned(), c.sql_type.clone()));
                }
            }
        }
        let Some((unique_key, _)) = table
            .unique_keys
            .iter()
            .find(|(_, columns)| columns.len() == 1 && columns[0] == "event_id")
        else {
            return Err(Unfit::NoUniqueKey {
                place: place(),
                found: table.unique_keys.iter().map(|(_, c)| c.clone()).collect(),
                sql: schema::add_unique_key(self.backend),
            });
        };
        if let Some(c) = table.columns.iter().find(|c| {
            c.not_null
                && !c.filled
                && !REQUIRED_COLUMNS.contains(&c.name.as_str())
                && !RECORD_COLUMNS.contains(&c.name.as_str())
        }) {
            return Err(Unfit::UnfilledColumn {
                place: place(),
                column: c.name.clone(),
            });
        }
        let (mut record_columns, mut missing_record_columns) = (Vec::new(), Vec::new());
        for name in RECORD_COLUMNS {
            match column(name) {
                Some(c) if !postgres || fits_record(name, &c.sql_type) => record_columns.push(name),
                _ => missing_record_columns.push(name),
            }
        }
        Ok(Adoption {
            create_audit_events: false,
            create_bookkeeping,
            record_columns,
            missing_record_columns,
            unique_key: unique_key.clone(),
            casts,
        })
    }
}

impl Adoption {
    /// The columns of `audit_events` a replay writes: the required ones, then the adopted
    /// record columns.
    pub(crate) fn written_columns(&self) -> Vec<&'static str> {
        let mut columns = REQUIRED_COLUMNS.to_vec();
        columns.extend(self.record_columns.iter().copied());
        columns
    }

    /// What the replay found and what it will create, line by line, for the dry run.
    pub fn describe(&self, inspection: &Inspection) -> Vec<String> {
        let mut lines = Vec::new();
        let place = match &inspection.schema {
            Some(schema) => format!("{} (schema {schema})", inspection.place),
            None => inspection.place.clone(),
        };
        if !inspection.exists {
            lines.push(format!(
                "target {place}: does not exist yet; it will be created"
            ));
        } else {
            lines.push(format!("target {place}"));
        }
        if self.create_audit_events {
            lines.push(format!(
                "{AUDIT_TABLE}: absent; will be created (unique key audit_events_event_id_key on event_id, record columns {})",
                self.record_columns.join(", ")
            ));
        } else {
            lines.push(format!(
                "{AUDIT_TABLE}: found; adopted as it is (unique key {} covers exactly event_id)",
                self.unique_key
            ));
            if !self.missing_record_columns.is_empty() {
                lines.push(format!(
                    "{AUDIT_TABLE}: lacks {} (the raw record and its place in the log are not stored); to keep them, add:",
                    self.missing_record_columns.join(", ")
                ));
                for sql in
                    schema::add_record_columns(inspection.backend, &self.missing_record_columns)
                {
                    lines.push(format!("  {sql}"));
                }
            }
        }
        if self.create_bookkeeping.is_empty() {
            lines.push("bookkeeping: lessonprobe_replay_* tables found".into());
        } else {
            lines.push(format!(
                "bookkeeping: will create {}",
                self.create_bookkeeping.join(", ")
            ));
        }
        if !inspection.legacy.is_empty() {
            lines.push(format!(
                "{}: left by an earlier lessonprobe; no longer used or written (drop them once their rows are not needed)",
                inspection.legacy.join(", ")
            ));
        }
        lines
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, sql_type: &str, not_null: bool, filled: bool) -> Column {
        Column {
            name: name.into(),
            sql_type: sql_type.into(),
            not_null,
            filled,
        }
    }

    fn inspection(columns: Vec<Column>, keys: Vec<Vec<&str>>) -> Inspection {
        Inspection {
            backend: Backend::Postgres,
            place: "postgres h:5432/audit".into(),
            schema: Some("public".into()),
            exists: true,
            audit_events: Some(AuditTable {
                columns,
                unique_keys: keys
                    .into_iter()
                    .enumerate()
                    .map(|(i, k)| (format!("k{i}"), k.into_iter().map(String::from).collect()))
                    .collect(),
            }),
            bookkeeping: Vec::new(),
            legacy: Vec::new(),
        }
    }

    fn lesson_columns() -> Vec<Column> {
        REQUIRED_COLUMNS
            .iter()
            .map(|c| {
                col(
                    c,
                    if *c == "payload" { "jsonb" } else { "text" },
                    true,
                    false,
                )
            })
            .collect()
    }

    #[test]
    fn a_table_with_a_unique_key_on_event_id_and_filled_extras_is_adopted() {
        let mut columns = lesson_columns();
        columns.push(col("id", "bigint", true, true));
        columns.push(col("note", "text", false, false));
        columns.push(col("topic", "text", false, false));
        columns.push(col(
            "record_timestamp",
            "timestamp with time zone",
            false,
            false,
        ));
        let adopted = inspection(columns, vec![vec!["id"], vec!["event_id"]])
            .adopt()
            .unwrap();
        assert!(!adopted.create_audit_events);
        assert_eq!(adopted.unique_key, "k1");
        assert_eq!(adopted.record_columns, vec!["topic"]);
        assert!(adopted.missing_record_columns.contains(&"record_timestamp"));
        assert_eq!(
            adopted.casts,
            vec![("payload".to_owned(), "jsonb".to_owned())]
        );
    }

    #[test]
    fn no_key_on_exactly_event_id_is_refused_with_the_sql_that_adds_it() {
        let err = inspection(lesson_columns(), vec![vec!["event_id", "tenant_id"]])
            .adopt()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("(event_id, tenant_id)"), "{text}");
        assert!(text.contains("records every event twice"), "{text}");
        assert!(
            text.contains("ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_id_key UNIQUE (event_id);"),
            "{text}"
        );
    }

    #[test]
    fn missing_columns_unfit_types_and_unfillable_extras_are_refused() {
        let mut columns = lesson_columns();
        columns.retain(|c| c.name != "action");
        assert!(matches!(
            inspection(columns, vec![vec!["event_id"]]).adopt(),
            Err(Unfit::MissingColumn {
                column: "action",
                ..
            })
        ));
        let mut columns = lesson_columns();
        columns[1] = col("tenant_id", "integer", true, false);
        assert!(matches!(
            inspection(columns, vec![vec!["event_id"]]).adopt(),
            Err(Unfit::ColumnType {
                column: "tenant_id",
                ..
            })
        ));
        let mut columns = lesson_columns();
        columns.push(col("reviewer", "text", true, false));
        assert!(matches!(
            inspection(columns, vec![vec!["event_id"]]).adopt(),
            Err(Unfit::UnfilledColumn { .. })
        ));
    }
}
