//! The audit event of the course's sample system and its JSON wire form.

use serde::{Deserialize, Serialize};

/// One ticket change as the audit topic carries it. `event_id` is the idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    pub event_id: String,
    pub tenant_id: String,
    pub ticket_id: String,
    pub action: String,
    pub occurred_at: String,
    pub payload: serde_json::Value,
}

/// Why a record's bytes are not an audit event the audit schema accepts.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not an audit event: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not an audit event: {field} is empty")]
    EmptyField { field: &'static str },
    #[error("not an audit event: payload is not an object")]
    PayloadNotObject,
}

impl AuditEvent {
    /// The lesson's sample event (`evt-30`, tenant-a, ticket-7, version 3).
    pub fn sample() -> Self {
        Self::sample_with_id("evt-30")
    }

    /// The sample event under another `event_id`.
    pub fn sample_with_id(event_id: &str) -> Self {
        AuditEvent {
            event_id: event_id.to_owned(),
            tenant_id: "tenant-a".to_owned(),
            ticket_id: "ticket-7".to_owned(),
            action: "ticket.updated".to_owned(),
            occurred_at: "2026-09-22T10:00:00+00:00".to_owned(),
            payload: serde_json::json!({ "version": 3 }),
        }
    }

    /// The partition key: events of one ticket share it, so they share a partition.
    pub fn key(&self) -> String {
        format!("{}:{}", self.tenant_id, self.ticket_id)
    }

    /// The business version carried in the payload, when there is one.
    pub fn version(&self) -> Option<i64> {
        self.payload
            .get("version")
            .and_then(serde_json::Value::as_i64)
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Serialising a struct of strings and a JSON value cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    /// Decodes a record into an event that the audit schema accepts: JSON of the right shape,
    /// non-empty ids and action, a payload object. Anything else is a bad record, with why.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let event = Self::from_json(bytes)?;
        for (field, value) in [
            ("event_id", &event.event_id),
            ("tenant_id", &event.tenant_id),
            ("ticket_id", &event.ticket_id),
            ("action", &event.action),
            ("occurred_at", &event.occurred_at),
        ] {
            if value.trim().is_empty() {
                return Err(DecodeError::EmptyField { field });
            }
        }
        if !event.payload.is_object() {
            return Err(DecodeError::PayloadNotObject);
        }
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_every_field() {
        let event = AuditEvent::sample();
        assert_eq!(AuditEvent::from_json(&event.to_json()).unwrap(), event);
        assert_eq!(event.key(), "tenant-a:ticket-7");
        assert_eq!(event.version(), Some(3));
    }

    #[test]
    fn garbage_and_missing_fields_are_decode_errors() {
        assert!(AuditEvent::from_json(b"{not json").is_err());
        assert!(AuditEvent::from_json(br#"{"event_id":"e"}"#).is_err());
        let mut empty = AuditEvent::sample();
        empty.tenant_id.clear();
        assert_eq!(
            AuditEvent::decode(&empty.to_json())
                .unwrap_err()
                .to_string(),
            "not an audit event: tenant_id is empty"
        );
        let mut null = AuditEvent::sample();
        null.payload = serde_json::Value::Null;
        assert!(matches!(
            AuditEvent::decode(&null.to_json()),
            Err(DecodeError::PayloadNotObject)
        ));
        assert_eq!(
            AuditEvent::decode(&AuditEvent::sample().to_json()).unwrap(),
            AuditEvent::sample()
        );
    }
}
