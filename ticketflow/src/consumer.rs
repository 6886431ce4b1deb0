//! The lesson-29 audit consumer: apply the effect, and only once it is durable commit `offset + 1`.

use crate::event::AuditEvent;
use crate::kafka::KafkaError;
use crate::store::{AuditStore, StoreError};

/// Where a record sits in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl Position {
    /// `offset` on partition 1 of the lesson's topic `ticketflow.audit`, where the sample events
    /// of the tests sit.
    pub fn sample(offset: i64) -> Self {
        Position {
            topic: "ticketflow.audit".into(),
            partition: 1,
            offset,
        }
    }
}

/// The offset a group should read next on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub topic: String,
    pub partition: i32,
    pub next_offset: i64,
}

/// Why a record was not consumed. A store error passes through unchanged.
#[derive(Debug, thiserror::Error)]
pub enum ConsumeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("commit of {topic}[{partition}]@{next_offset} failed: {source}")]
    Commit {
        topic: String,
        partition: i32,
        next_offset: i64,
        source: KafkaError,
    },
}

/// Applies each event through the store, then commits through `commit`.
pub struct AuditConsumer<S, C> {
    store: S,
    commit: C,
}

impl<S, C> AuditConsumer<S, C>
where
    S: AuditStore,
    C: FnMut(&Commit) -> Result<(), KafkaError>,
{
    pub fn new(store: S, commit: C) -> Self {
        AuditConsumer { store, commit }
    }

    /// Consumes one record; returns whether the effect was new. A duplicate (`false`) was
    /// persisted earlier, so its offset may be committed; any error commits nothing.
    pub fn consume(&mut self, at: &Position, event: &AuditEvent) -> Result<bool, ConsumeError> {
        let applied = self.store.apply_once(event)?;
        let commit = Commit {
            topic: at.topic.clone(),
            partition: at.partition,
            next_offset: at.offset + 1,
        };
        (self.commit)(&commit).map_err(|source| ConsumeError::Commit {
            topic: commit.topic.clone(),
            partition: commit.partition,
            next_offset: commit.next_offset,
            source,
        })?;
        Ok(applied)
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteAuditStore;

    #[test]
    fn commits_next_offset_after_each_effect_including_duplicates() {
        let mut commits = Vec::new();
        let store = SqliteAuditStore::in_memory().unwrap();
        let mut consumer = AuditConsumer::new(store, |c: &Commit| {
            commits.push(c.next_offset);
            Ok(())
        });
        assert!(consumer
            .consume(&Position::sample(41), &AuditEvent::sample())
            .unwrap());
        assert!(!consumer
            .consume(&Position::sample(42), &AuditEvent::sample())
            .unwrap());
        assert_eq!(consumer.store_mut().audit_rows().unwrap(), 1);
        drop(consumer);
        assert_eq!(commits, vec![42, 43]);
    }

    #[test]
    fn a_store_error_commits_nothing_and_surfaces_unchanged() {
        struct Down;
        impl AuditStore for Down {
            fn apply_once(&mut self, _: &AuditEvent) -> Result<bool, StoreError> {
                Err(StoreError::Unavailable("database unavailable".into()))
            }
            fn audit_rows(&mut self) -> Result<u64, StoreError> {
                Ok(0)
            }
        }
        let mut commits = 0;
        let mut consumer = AuditConsumer::new(Down, |_: &Commit| {
            commits += 1;
            Ok(())
        });
        let err = consumer
            .consume(&Position::sample(10), &AuditEvent::sample())
            .unwrap_err();
        assert_eq!(err.to_string(), "database unavailable");
        assert_eq!(commits, 0);
    }
}
