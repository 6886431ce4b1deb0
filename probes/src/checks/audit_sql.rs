//! Probes of the audit store and the lesson-29 consumer: idempotence on `event_id`, and no
//! commit without a durable effect.

use super::system::System;
use crate::context::{ensure, ProbeContext, ProbeError};
use ticketflow::consumer::{Commit, ConsumeError, Position};
use ticketflow::event::AuditEvent;
use ticketflow::kafka::KafkaError;
use ticketflow::store::{AuditStore, StoreError};

fn broken(doing: &str) -> impl FnOnce(StoreError) -> ProbeError + '_ {
    move |source| ProbeError::Store {
        doing: doing.to_owned(),
        source,
    }
}

/// An error from a store that was answering a moment ago: the claim did not hold (FAIL),
/// unless the connection itself went away (ERROR).
fn refused(what: &str, source: StoreError) -> ProbeError {
    match source {
        StoreError::Connect { .. } | StoreError::Lost { .. } => ProbeError::Store {
            doing: what.to_owned(),
            source,
        },
        other => ProbeError::failed(format!("{what} raised: {other}")),
    }
}

fn at(topic: &str, partition: i32, offset: i64) -> Position {
    Position {
        topic: topic.to_owned(),
        partition,
        offset,
    }
}

/// Collects the next offsets a consumer commits.
fn recorder(commits: &mut Vec<i64>) -> impl FnMut(&Commit) -> Result<(), KafkaError> + '_ {
    |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    }
}

/// EX-29-01.
pub(crate) fn failure_leaves_offset_uncommitted(
    sys: &dyn System,
    _: &ProbeContext,
) -> Result<String, ProbeError> {
    struct Unavailable;
    impl AuditStore for Unavailable {
        fn apply_once(&mut self, _: &AuditEvent) -> Result<bool, StoreError> {
            Err(StoreError::Unavailable("database unavailable".to_owned()))
        }
        fn audit_rows(&mut self) -> Result<u64, StoreError> {
            Ok(0)
        }
    }
    let mut commits = Vec::new();
    let result = sys.consume(
        &mut Unavailable,
        &mut recorder(&mut commits),
        &at("ticketflow.audit", 0, 10),
        &AuditEvent::sample(),
    );
    match result {
        Err(ConsumeError::Store(e)) => ensure(e.to_string() == "database unavailable", || {
            format!("error changed on its way out: {e:?}")
        })?,
        other => {
            return Err(ProbeError::failed(format!(
                "expected the store error, got {other:?}"
            )))
        }
    }
    ensure(commits.is_empty(), || {
        format!("offsets were committed after a failure: {commits:?}")
    })?;
    Ok("failure leaves offset uncommitted".to_owned())
}

/// The lesson's `sql_audit_probe`: one event delivered twice.
pub(crate) fn sql_audit_duplicate(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let mut store = sys.open_store(ctx)?;
    let mut commits = Vec::new();
    let event = AuditEvent::sample_with_id("evt-30-sql");
    let mut applied = Vec::new();
    for offset in [41, 42] {
        let result = sys.consume(
            store.as_mut(),
            &mut recorder(&mut commits),
            &at("ticketflow.audit", 1, offset),
            &event,
        );
        applied.push(match result {
            Ok(applied) => applied,
            Err(ConsumeError::Store(e)) if offset == 41 => {
                return Err(broken("consuming offset 41")(e))
            }
            Err(ConsumeError::Store(e)) => {
                return Err(refused("the second delivery at offset 42", e))
            }
            Err(e) => {
                return Err(ProbeError::broken(format!(
                    "consuming offset {offset}: {e}"
                )))
            }
        });
    }
    ensure(applied == [true, false], || {
        format!(
            "applied {}, then {}; expected true, then false",
            applied[0], applied[1]
        )
    })?;
    let rows = store.audit_rows().map_err(broken("counting audit rows"))?;
    ensure(rows == 1, || format!("{rows} audit rows for one event_id"))?;
    ensure(commits == [42, 43], || {
        format!("committed {commits:?}; a duplicate is persisted, so both deliveries commit: expected [42, 43]")
    })?;
    let offsets: Vec<String> = commits.iter().map(i64::to_string).collect();
    Ok(format!("audit rows={rows}; offsets={}", offsets.join(",")))
}

/// EX-30-01.
pub(crate) fn apply_once_twice(sys: &dyn System, ctx: &ProbeContext) -> Result<String, ProbeError> {
    let mut store = sys.open_store(ctx)?;
    let event = AuditEvent::sample();
    let first = store
        .apply_once(&event)
        .map_err(broken("first apply_once"))?;
    let second = store
        .apply_once(&event)
        .map_err(|e| refused("the second apply_once of the same event", e))?;
    let rows = store.audit_rows().map_err(broken("counting audit rows"))?;
    let py = |b: bool| if b { "True" } else { "False" };
    ensure(first && !second && rows == 1, || {
        format!(
            "apply_once returned {}, {} and audit_events has {rows} rows; expected True, False and 1",
            py(first),
            py(second)
        )
    })?;
    Ok(format!("{} {} {rows}", py(first), py(second)))
}

/// Another integrity error is not a duplicate: it propagates and commits nothing.
pub(crate) fn integrity_error_propagates(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let mut store = sys.open_store(ctx)?;
    let mut commits = Vec::new();
    let mut empty_tenant = AuditEvent::sample_with_id("evt-30-check");
    empty_tenant.tenant_id.clear();
    let mut null_payload = AuditEvent::sample_with_id("evt-30-null");
    null_payload.payload = serde_json::Value::Null;

    let mut kinds = Vec::new();
    for (offset, event, expected) in [(7, &empty_tenant, "check"), (8, &null_payload, "not-null")] {
        let result = sys.consume(
            store.as_mut(),
            &mut recorder(&mut commits),
            &at("ticketflow.audit", 0, offset),
            event,
        );
        match result {
            Err(ConsumeError::Store(e)) => match e.integrity_violation() {
                Some(kind) => kinds.push(kind),
                None => {
                    return Err(refused(
                        &format!("offset {offset}: instead of a {expected} violation, the store"),
                        e,
                    ))
                }
            },
            Ok(applied) => {
                return Err(ProbeError::failed(format!(
                    "offset {offset}: an event that violates {expected} returned {applied} instead of an error"
                )))
            }
            Err(e) => {
                return Err(ProbeError::failed(format!(
                    "offset {offset}: expected the store's {expected} violation, got: {e}"
                )))
            }
        }
    }
    ensure(kinds == ["check", "not-null"], || {
        format!("integrity errors {kinds:?}; expected check, then not-null")
    })?;
    let rows = store.audit_rows().map_err(broken("counting audit rows"))?;
    ensure(rows == 0, || {
        format!("{rows} rows were written by invalid events")
    })?;
    ensure(commits.is_empty(), || {
        format!("offsets were committed after integrity errors: {commits:?}")
    })?;
    Ok(format!(
        "integrity errors propagated: {}; rows={rows}; offsets=none",
        kinds.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::{assert_catches, sql_backends, sqlite, BrokenStore};
    use crate::live::LiveStore;

    type Consume = fn(
        &mut dyn AuditStore,
        &mut dyn FnMut(&Commit) -> Result<(), KafkaError>,
        &Position,
        &AuditEvent,
    ) -> Result<bool, ConsumeError>;

    /// The real system but for the lesson-29 consumer.
    struct BrokenConsumer(Consume);

    impl System for BrokenConsumer {
        fn consume(
            &self,
            store: &mut dyn AuditStore,
            commit: &mut dyn FnMut(&Commit) -> Result<(), KafkaError>,
            at: &Position,
            event: &AuditEvent,
        ) -> Result<bool, ConsumeError> {
            (self.0)(store, commit, at, event)
        }
    }

    fn next(at: &Position) -> Commit {
        Commit {
            topic: at.topic.clone(),
            partition: at.partition,
            next_offset: at.offset + 1,
        }
    }

    fn no_commit_error(e: KafkaError) -> ConsumeError {
        ConsumeError::Store(StoreError::Unavailable(e.to_string()))
    }

    /// Commits `offset + 1` as soon as the record arrives, then applies it.
    const COMMITS_FIRST: BrokenConsumer = BrokenConsumer(|store, commit, at, event| {
        commit(&next(at)).map_err(no_commit_error)?;
        Ok(store.apply_once(event)?)
    });

    /// Commits only records whose effect was new: a redelivery is never committed.
    const SKIPS_DUPLICATE_COMMITS: BrokenConsumer = BrokenConsumer(|store, commit, at, event| {
        let applied = store.apply_once(event)?;
        if applied {
            commit(&next(at)).map_err(no_commit_error)?;
        }
        Ok(applied)
    });

    /// Rewords the store's error on its way out.
    const REWORDS_ERRORS: BrokenConsumer = BrokenConsumer(|store, commit, at, event| {
        let applied = store
            .apply_once(event)
            .map_err(|e| StoreError::Unavailable(format!("audit consumer: {e}")))?;
        commit(&next(at)).map_err(no_commit_error)?;
        Ok(applied)
    });

    /// A failed effect counts as a duplicate, so the offset moves on.
    const ERRORS_AS_DUPLICATES: BrokenConsumer = BrokenConsumer(|store, commit, at, event| {
        let applied = store.apply_once(event).unwrap_or(false);
        commit(&next(at)).map_err(no_commit_error)?;
        Ok(applied)
    });

    /// A store that reports every event as new, duplicates included.
    const NEVER_DUPLICATE: BrokenStore = BrokenStore {
        apply_once: Some(|store, event| store.apply_once(event).map(|_| true)),
        unversioned: false,
    };

    /// A store that treats every integrity error as a duplicate (as `INSERT OR IGNORE` does).
    const INTEGRITY_AS_DUPLICATE: BrokenStore = BrokenStore {
        apply_once: Some(|store, event| match store.apply_once(event) {
            Err(e) if e.integrity_violation().is_some() => Ok(false),
            other => other,
        }),
        unversioned: false,
    };

    /// A store that reports an integrity error as something else.
    const INTEGRITY_REWORDED: BrokenStore = BrokenStore {
        apply_once: Some(|store, event| {
            store
                .apply_once(event)
                .map_err(|e| StoreError::Unavailable(format!("could not store the event: {e}")))
        }),
        unversioned: false,
    };

    /// A store that raises on a duplicate instead of answering false.
    const DUPLICATE_RAISES: BrokenStore = BrokenStore {
        apply_once: Some(
            |store: &mut dyn LiveStore, event| match store.apply_once(event)? {
                true => Ok(true),
                false => Err(StoreError::Unavailable(format!(
                    "duplicate key value violates unique constraint: event_id {}",
                    event.event_id
                ))),
            },
        ),
        unversioned: false,
    };

    #[test]
    fn ex_29_01_fails_when_the_consumer_commits_first_rewords_or_swallows_the_error() {
        assert_catches(
            failure_leaves_offset_uncommitted,
            sqlite,
            &[
                (&COMMITS_FIRST, "offsets were committed after a failure"),
                (&REWORDS_ERRORS, "error changed on its way out"),
                (
                    &ERRORS_AS_DUPLICATES,
                    "expected the store error, got Ok(false)",
                ),
            ],
        );
    }

    #[test]
    fn l30_01_fails_without_dedup_or_when_a_redelivery_is_not_committed() {
        for ctx in sql_backends() {
            assert_catches(
                sql_audit_duplicate,
                || ctx.clone(),
                &[
                    (&NEVER_DUPLICATE, "applied true, then true"),
                    (&DUPLICATE_RAISES, "the second delivery at offset 42 raised"),
                    (&SKIPS_DUPLICATE_COMMITS, "committed [42]"),
                ],
            );
        }
    }

    #[test]
    fn ex_30_01_fails_when_a_duplicate_is_new_or_raises() {
        for ctx in sql_backends() {
            let passed = assert_catches(
                apply_once_twice,
                || ctx.clone(),
                &[
                    (&NEVER_DUPLICATE, "apply_once returned True, True"),
                    (
                        &DUPLICATE_RAISES,
                        "the second apply_once of the same event raised",
                    ),
                ],
            );
            assert_eq!(passed, "True False 1");
        }
    }

    #[test]
    fn l30_02_fails_when_integrity_errors_pass_as_duplicates_change_or_commit() {
        for ctx in sql_backends() {
            assert_catches(
                integrity_error_propagates,
                || ctx.clone(),
                &[
                    (
                        &INTEGRITY_AS_DUPLICATE,
                        "offset 7: an event that violates check returned false",
                    ),
                    (
                        &INTEGRITY_REWORDED,
                        "instead of a check violation, the store raised: could not store the event",
                    ),
                    (&ERRORS_AS_DUPLICATES, "returned false instead of an error"),
                    (
                        &COMMITS_FIRST,
                        "offsets were committed after integrity errors: [8, 9]",
                    ),
                ],
            );
        }
    }
}
