//! Topics and consumer groups on a real broker whose names end with a case key. Brokers that
//! do not answer an admin request (librdkafka's mock cluster has no DeleteTopics, ListGroups
//! or DeleteGroups) are reported as such within the timeout, never waited on longer.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use ticketflow::kafka::Broker;
use ticketflow::KafkaTarget;

use super::{CleanError, Dropped, Found, Kind, Leftover, Runs};
use crate::scratch_key;

pub fn find(target: &KafkaTarget, runs: &Runs, timeout: Duration) -> Result<Found, CleanError> {
    let (admin, place) = admin(target, timeout)?;
    let run = match runs {
        Runs::All => None,
        Runs::One { run_id, .. } => Some(run_id.as_str()),
    };
    let unlisted_because = |what: &str, e: rdkafka::error::KafkaError| CleanError::Unlisted {
        place: place.clone(),
        reason: format!("listing {what}: {e}"),
    };
    let metadata = admin
        .inner()
        .fetch_metadata(None, timeout)
        .map_err(|e| unlisted_because("topics", e))?;
    let mut found: Vec<Leftover> = metadata
        .topics()
        .iter()
        .map(|t| t.name())
        .filter(|name| scratch_key::is_of(name, run))
        .map(|name| Leftover {
            kind: Kind::Topic,
            name: name.to_owned(),
            place: place.clone(),
        })
        .collect();
    let mut unlisted = Vec::new();
    match admin.inner().fetch_group_list(None, timeout) {
        Ok(groups) => found.extend(
            groups
                .groups()
                .iter()
                .map(|g| g.name())
                .filter(|name| scratch_key::is_of(name, run))
                .map(|name| Leftover {
                    kind: Kind::Group,
                    name: name.to_owned(),
                    place: place.clone(),
                }),
        ),
        Err(e) => unlisted.push(unlisted_because("consumer groups", e)),
    }
    found.sort_by(|a, b| (a.kind as u8, &a.name).cmp(&(b.kind as u8, &b.name)));
    Ok(Found {
        leftovers: found,
        unlisted,
    })
}

pub fn drop_all(target: &KafkaTarget, leftovers: &[Leftover], timeout: Duration) -> Vec<Dropped> {
    let admin = match admin(target, timeout) {
        Ok((admin, _)) => admin,
        Err(e) => {
            return leftovers
                .iter()
                .map(|l| Err(CleanError::not_dropped(l, &e)))
                .collect()
        }
    };
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let mut results = Vec::new();
    // Groups first: a group's committed offsets name the topic.
    for kind in [Kind::Group, Kind::Topic] {
        let of_kind: Vec<&Leftover> = leftovers.iter().filter(|l| l.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let names: Vec<&str> = of_kind.iter().map(|l| l.name.as_str()).collect();
        let answer = match kind {
            Kind::Group => futures_executor::block_on(admin.delete_groups(&names, &options)),
            _ => futures_executor::block_on(admin.delete_topics(&names, &options)),
        };
        match answer {
            Ok(answers) => {
                for leftover in &of_kind {
                    let refused = answers.iter().find_map(|a| match a {
                        Err((name, code)) if *name == leftover.name => Some(code),
                        _ => None,
                    });
                    results.push(match refused {
                        Some(code) => Err(CleanError::not_dropped(leftover, code)),
                        None => Ok((*leftover).clone()),
                    });
                }
            }
            Err(e) => results.extend(of_kind.iter().map(|l| {
                Err(CleanError::not_dropped(
                    l,
                    format!(
                        "the broker did not do it within {}: {e}",
                        humantime::format_duration(timeout)
                    ),
                ))
            })),
        }
    }
    results
}

/// An admin client for `target` (its address and `-X` properties), the broker checked first.
fn admin(
    target: &KafkaTarget,
    timeout: Duration,
) -> Result<(AdminClient<DefaultClientContext>, String), CleanError> {
    let broker = Broker::for_target(target, timeout).map_err(|e| CleanError::Unlisted {
        place: "kafka".into(),
        reason: e.to_string(),
    })?;
    let place = format!("kafka {}", broker.servers());
    let admin = broker.config().create().map_err(|e| CleanError::Unlisted {
        place: place.clone(),
        reason: format!("creating an admin client: {e}"),
    })?;
    Ok((admin, place))
}
