//! One event of the topic against what the table holds for its event_id: the same event
//! (whatever the spelling of its JSON), no row, or a row with other content — and which fields
//! differ.

use crate::event::EventRecord;
use crate::store::{Lookup, StoredAt};

/// What the table holds for one event of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Same,
    /// No row; `refused` when the table's column types cannot hold the event.
    Missing {
        refused: Option<String>,
    },
    Mismatched {
        fields: Vec<&'static str>,
        at: Option<StoredAt>,
    },
}

pub(crate) fn judge(event: &EventRecord, lookup: &Lookup) -> Verdict {
    let (stored, incoming, at) = match lookup {
        Lookup::Same => return Verdict::Same,
        Lookup::Absent => return Verdict::Missing { refused: None },
        Lookup::Refused(reason) => {
            return Verdict::Missing {
                refused: Some(reason.clone()),
            }
        }
        Lookup::Row {
            stored,
            incoming,
            at,
        } => (stored, incoming, at),
    };
    // On a typed column the event compares as the database rendered it.
    let theirs = incoming.as_deref().unwrap_or(event);
    if **stored == *theirs || stored.content_hash() == theirs.content_hash() {
        return Verdict::Same;
    }
    Verdict::Mismatched {
        fields: differing(stored, theirs),
        at: at.clone(),
    }
}

/// The fields whose content differs (the payload compared as JSON values).
fn differing(a: &EventRecord, b: &EventRecord) -> Vec<&'static str> {
    let mut fields = Vec::new();
    for (name, x, y) in [
        ("event_id", &a.event_id, &b.event_id),
        ("tenant_id", &a.tenant_id, &b.tenant_id),
        ("ticket_id", &a.ticket_id, &b.ticket_id),
        ("action", &a.action, &b.action),
        ("occurred_at", &a.occurred_at, &b.occurred_at),
    ] {
        if x != y {
            fields.push(name);
        }
    }
    let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).ok();
    if a.payload != b.payload && json(&a.payload).is_none_or(|v| Some(v) != json(&b.payload)) {
        fields.push("payload");
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(payload: &str) -> EventRecord {
        EventRecord {
            event_id: "e-1".into(),
            tenant_id: "t".into(),
            ticket_id: "k".into(),
            action: "a".into(),
            occurred_at: "2026-09-22T10:00:00+00:00".into(),
            payload: payload.into(),
        }
    }

    fn row(stored: EventRecord, incoming: Option<EventRecord>) -> Lookup {
        Lookup::Row {
            stored: Box::new(stored),
            incoming: incoming.map(Box::new),
            at: None,
        }
    }

    #[test]
    fn respelled_json_is_the_same_event_and_other_content_names_its_fields() {
        let e = event(r#"{"a":1,"b":[1,2]}"#);
        assert_eq!(
            judge(&e, &row(event(r#"{"b": [1, 2], "a": 1}"#), None)),
            Verdict::Same
        );
        let mut other = event(r#"{"a":2,"b":[1,2]}"#);
        other.action = "b".into();
        assert_eq!(
            judge(&e, &row(other, None)),
            Verdict::Mismatched {
                fields: vec!["action", "payload"],
                at: None
            }
        );
        assert_eq!(
            judge(&e, &Lookup::Absent),
            Verdict::Missing { refused: None }
        );
    }

    #[test]
    fn a_typed_column_compares_with_the_event_as_the_database_rendered_it() {
        let e = event(r#"{"a":1}"#);
        let mut rendered = event(r#"{"a": 1}"#);
        rendered.occurred_at = "2026-09-22 10:00:00+00".into();
        let stored = rendered.clone();
        assert_eq!(judge(&e, &row(stored, Some(rendered))), Verdict::Same);
    }
}
