//! A deterministic day of ticket audit events: several tenants, hundreds of tickets, rising
//! versions per ticket, message timestamps over three days (so "yesterday" is a strict inner
//! range of every partition), and redeliveries of the same `event_id`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::event::AuditEvent;

/// 2026-09-21T00:00:00Z in milliseconds; the three days are the 21st, 22nd and 23rd.
pub const FIRST_DAY_MS: i64 = 1_789_948_800_000;
pub const DAY_MS: i64 = 86_400_000;
/// The window of "yesterday" (2026-09-22), half-open, in milliseconds.
pub const YESTERDAY: (i64, i64) = (FIRST_DAY_MS + DAY_MS, FIRST_DAY_MS + 2 * DAY_MS);

/// One record to produce: the event, its key, its message timestamp, and whether it repeats an
/// earlier record's `event_id`.
#[derive(Debug, Clone)]
pub struct DayRecord {
    pub key: String,
    pub timestamp_ms: i64,
    pub event: AuditEvent,
    pub redelivery: bool,
    /// Raw bytes to send instead of the event's JSON: an undecodable record.
    pub garbage: Option<Vec<u8>>,
}

impl DayRecord {
    pub fn payload(&self) -> Vec<u8> {
        self.garbage.clone().unwrap_or_else(|| self.event.to_json())
    }
}

#[derive(Debug, Clone, Copy)]
pub struct DaySpec {
    pub seed: u64,
    /// Distinct events (redeliveries come on top).
    pub events: usize,
    pub tenants: usize,
    pub tickets: usize,
    /// Per mille of events delivered a second time.
    pub redelivery_per_mille: u32,
    /// Per mille of extra records whose bytes are not an audit event.
    pub garbage_per_mille: u32,
    /// Bytes of padding in each payload, to reach realistic record sizes.
    pub padding: usize,
}

impl Default for DaySpec {
    fn default() -> Self {
        DaySpec {
            seed: 30,
            events: 900,
            tenants: 4,
            tickets: 300,
            redelivery_per_mille: 40,
            garbage_per_mille: 0,
            padding: 0,
        }
    }
}

/// The day `lessonprobe broker --sample-day` loads: `events` distinct events with the default
/// redeliveries and two undecodable records per thousand.
pub fn sample_day(events: usize) -> DaySpec {
    DaySpec {
        events,
        garbage_per_mille: 2,
        ..DaySpec::default()
    }
}

/// The records in timestamp order.
pub fn generate(spec: &DaySpec) -> Vec<DayRecord> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut versions = vec![0i64; spec.tickets.max(1)];
    let span = 3 * DAY_MS;
    let mut records = Vec::with_capacity(spec.events + spec.events / 10);
    let padding = "x".repeat(spec.padding);
    for i in 0..spec.events {
        // Evenly spread with jitter, so timestamps rise and every day has events.
        let base = FIRST_DAY_MS + (i as i64 * span) / spec.events.max(1) as i64;
        let ts = base + rng.random_range(0..(span / spec.events.max(1) as i64).max(1));
        let ticket = rng.random_range(0..spec.tickets.max(1));
        let tenant = ticket % spec.tenants.max(1);
        versions[ticket] += 1;
        let mut payload = serde_json::json!({ "version": versions[ticket] });
        if !padding.is_empty() {
            payload["note"] = serde_json::Value::String(padding.clone());
        }
        let event = AuditEvent {
            event_id: format!("evt-{:016x}-{i}", spec.seed),
            tenant_id: format!("tenant-{}", (b'a' + tenant as u8 % 26) as char),
            ticket_id: format!("ticket-{ticket}"),
            action: if versions[ticket] == 1 {
                "ticket.created"
            } else {
                "ticket.updated"
            }
            .to_owned(),
            occurred_at: rfc3339(ts),
            payload,
        };
        let key = event.key();
        let redeliver = rng.random_range(0..1000) < spec.redelivery_per_mille;
        let garbage = rng.random_range(0..1000) < spec.garbage_per_mille;
        records.push(DayRecord {
            key: key.clone(),
            timestamp_ms: ts,
            event: event.clone(),
            redelivery: false,
            garbage: None,
        });
        if redeliver {
            records.push(DayRecord {
                key: key.clone(),
                timestamp_ms: ts + 1,
                event: event.clone(),
                redelivery: true,
                garbage: None,
            });
        }
        if garbage {
            let mut bad = event;
            bad.event_id = format!("bad-{:016x}-{i}", spec.seed);
            records.push(DayRecord {
                key,
                timestamp_ms: ts + 2,
                event: bad,
                redelivery: false,
                garbage: Some(b"{\"event_id\": truncated".to_vec()),
            });
        }
    }
    records
}

/// The partition of a key among `partitions`: FNV-1a, so every client and every run agrees.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % partitions.max(1) as u32) as i32
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3f+00:00").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_day() {
        let spec = DaySpec::default();
        let (a, b) = (generate(&spec), generate(&spec));
        assert_eq!(a.len(), b.len());
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.event == y.event && x.timestamp_ms == y.timestamp_ms));
    }

    #[test]
    fn three_days_with_redeliveries_and_rising_versions() {
        let records = generate(&DaySpec {
            garbage_per_mille: 20,
            ..DaySpec::default()
        });
        let days: std::collections::BTreeSet<i64> = records
            .iter()
            .map(|r| (r.timestamp_ms - FIRST_DAY_MS) / DAY_MS)
            .collect();
        assert_eq!(days.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(records.iter().any(|r| r.redelivery));
        assert!(records.iter().any(|r| r.garbage.is_some()));
        assert!(records
            .windows(2)
            .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
        let mut last = std::collections::HashMap::new();
        for r in records
            .iter()
            .filter(|r| !r.redelivery && r.garbage.is_none())
        {
            let v = r.event.version().unwrap();
            let prev = last.insert(r.key.clone(), v).unwrap_or(0);
            assert!(v > prev, "{} went from {prev} to {v}", r.key);
        }
    }

    #[test]
    fn partitioning_is_stable() {
        assert_eq!(
            partition_for("tenant-a:ticket-7", 3),
            partition_for("tenant-a:ticket-7", 3)
        );
        assert!((0..3).contains(&partition_for("x", 3)));
    }
}
