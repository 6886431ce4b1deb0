//! Probes of the audit store and the lesson-29 consumer: idempotence on `event_id`, and no
//! commit without a durable effect.

use crate::context::{ensure, ProbeContext, ProbeError};
use ticketflow::consumer::{AuditConsumer, Commit, ConsumeError, Position};
use ticketflow::event::AuditEvent;
use ticketflow::store::{AuditStore, StoreError};

fn broken(doing: &str) -> impl FnOnce(StoreError) -> ProbeError + '_ {
    move |source| ProbeError::Store {
        doing: doing.to_owned(),
        source,
    }
}

fn at(topic: &str, partition: i32, offset: i64) -> Position {
    Position {
        topic: topic.to_owned(),
        partition,
        offset,
    }
}

/// EX-29-01.
pub fn failure_leaves_offset_uncommitted(_: &ProbeContext) -> Result<String, ProbeError> {
    struct Unavailable;
    impl AuditStore for Unavailable {
        fn apply_once(&mut self, _: &AuditEvent) -> Result<bool, StoreError> {
            Err(StoreError::Unavailable("database unavailable".to_owned()))
        }
        fn audit_rows(&mut self) -> Result<u64, StoreError> {
            Ok(0)
        }
    }
    let mut commits: Vec<Commit> = Vec::new();
    let result = AuditConsumer::new(Unavailable, |c: &Commit| {
        commits.push(c.clone());
        Ok(())
    })
    .consume(&at("ticketflow.audit", 0, 10), &AuditEvent::sample());
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
pub fn sql_audit_duplicate(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let store = ctx.open_store()?;
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    let event = AuditEvent::sample_with_id("evt-30-sql");
    let consume = |consumer: &mut AuditConsumer<_, _>, offset| {
        consumer
            .consume(&at("ticketflow.audit", 1, offset), &event)
            .map_err(|e| ProbeError::broken(format!("consuming offset {offset}: {e}")))
    };
    let first = consume(&mut consumer, 41)?;
    let second = consume(&mut consumer, 42)?;
    ensure(first && !second, || {
        format!("applied {first}, then {second}; expected true, then false")
    })?;
    let rows = consumer
        .store_mut()
        .audit_rows()
        .map_err(broken("counting audit rows"))?;
    drop(consumer);
    let offsets: Vec<String> = commits.iter().map(i64::to_string).collect();
    Ok(format!("audit rows={rows}; offsets={}", offsets.join(",")))
}

/// EX-30-01.
pub fn apply_once_twice(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let mut store = ctx.open_store()?;
    let event = AuditEvent::sample();
    let first = store
        .apply_once(&event)
        .map_err(broken("first apply_once"))?;
    let second = store
        .apply_once(&event)
        .map_err(broken("second apply_once"))?;
    let rows = store.audit_rows().map_err(broken("counting audit rows"))?;
    let py = |b: bool| if b { "True" } else { "False" };
    Ok(format!("{} {} {rows}", py(first), py(second)))
}

/// Another integrity error is not a duplicate: it propagates and commits nothing.
pub fn integrity_error_propagates(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let store = ctx.open_store()?;
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    let mut empty_tenant = AuditEvent::sample_with_id("evt-30-check");
    empty_tenant.tenant_id.clear();
    let mut null_payload = AuditEvent::sample_with_id("evt-30-null");
    null_payload.payload = serde_json::Value::Null;

    let mut kinds = Vec::new();
    for (offset, event) in [(7, &empty_tenant), (8, &null_payload)] {
        match consumer.consume(&at("ticketflow.audit", 0, offset), event) {
            Err(ConsumeError::Store(e)) => match e.integrity_violation() {
                Some(kind) => kinds.push(kind),
                None => {
                    return Err(ProbeError::broken(format!(
                        "offset {offset}: not an integrity error: {e}"
                    )))
                }
            },
            Ok(applied) => {
                return Err(ProbeError::failed(format!(
                    "offset {offset}: an invalid event returned {applied} instead of an error"
                )))
            }
            Err(e) => return Err(ProbeError::broken(format!("offset {offset}: {e}"))),
        }
    }
    let rows = consumer
        .store_mut()
        .audit_rows()
        .map_err(broken("counting audit rows"))?;
    drop(consumer);
    ensure(commits.is_empty(), || {
        format!("offsets were committed after integrity errors: {commits:?}")
    })?;
    Ok(format!(
        "integrity errors propagated: {}; rows={rows}; offsets=none",
        kinds.join(", ")
    ))
}
