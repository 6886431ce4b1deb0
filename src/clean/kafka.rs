//! Topics and consumer groups on a real broker whose names end with a case key. Brokers that
//! do not answer an admin request (librdkafka's mock cluster has no DeleteTopics, ListGroups
//! or DeleteGroups) are reported as such within the timeout, never waited on longer.

use std::time::Duration;

use ticketflow::kafka::{Broker, Deletion, KafkaError};
use ticketflow::KafkaTarget;

use super::{CleanError, Dropped, Found, Kind, Leftover, Runs};
use crate::case_key;

pub fn find(target: &KafkaTarget, runs: &Runs, timeout: Duration) -> Result<Found, CleanError> {
    let (broker, place) = connect(target, timeout)?;
    let run = match runs {
        Runs::All => None,
        Runs::One { run_id, .. } => Some(run_id.as_str()),
    };
    let unlisted = |e: KafkaError| CleanError::Unlisted {
        place: place.clone(),
        reason: format!("{}: {}", e.what, e.reason),
    };
    let leftovers = |kind: Kind, names: Vec<String>| {
        names
            .into_iter()
            .filter(|name| case_key::is_of(name, run))
            .map(|name| Leftover {
                kind,
                name,
                place: place.clone(),
            })
            .collect::<Vec<_>>()
    };
    let mut found = leftovers(Kind::Topic, broker.topic_names(timeout).map_err(unlisted)?);
    let mut not_listed = Vec::new();
    match broker.group_names(timeout) {
        Ok(groups) => found.extend(leftovers(Kind::Group, groups)),
        Err(e) => not_listed.push(unlisted(e)),
    }
    found.sort_by(|a, b| (a.kind as u8, &a.name).cmp(&(b.kind as u8, &b.name)));
    Ok(Found {
        leftovers: found,
        unlisted: not_listed,
    })
}

pub fn drop_all(target: &KafkaTarget, leftovers: &[Leftover], timeout: Duration) -> Vec<Dropped> {
    let broker = match connect(target, timeout) {
        Ok((broker, _)) => broker,
        Err(e) => {
            return leftovers
                .iter()
                .map(|l| Err(CleanError::not_dropped(l, &e)))
                .collect()
        }
    };
    let mut results = Vec::new();
    // Groups first: a group's committed offsets name the topic.
    for kind in [Kind::Group, Kind::Topic] {
        let of_kind: Vec<&Leftover> = leftovers.iter().filter(|l| l.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let names: Vec<&str> = of_kind.iter().map(|l| l.name.as_str()).collect();
        let answer = match kind {
            Kind::Group => broker.delete_groups(&names, timeout),
            _ => broker.delete_topics(&names, timeout),
        };
        match answer {
            Ok(answers) => results.extend(of_kind.iter().map(|l| dropped(l, &answers))),
            Err(e) => results.extend(of_kind.iter().map(|l| {
                Err(CleanError::not_dropped(
                    l,
                    format!(
                        "the broker did not do it within {}: {}",
                        humantime::format_duration(timeout),
                        e.reason
                    ),
                ))
            })),
        }
    }
    results
}

/// What the broker answered for `leftover`.
fn dropped(leftover: &Leftover, answers: &[Deletion]) -> Dropped {
    match answers.iter().find(|(name, _)| *name == leftover.name) {
        Some((_, Some(refused))) => Err(CleanError::not_dropped(leftover, refused)),
        _ => Ok(leftover.clone()),
    }
}

/// The broker of `target` (its address and `-X` properties), checked to answer.
fn connect(target: &KafkaTarget, timeout: Duration) -> Result<(Broker, String), CleanError> {
    let broker = Broker::for_target(target, timeout).map_err(|e| CleanError::Unlisted {
        place: "kafka".into(),
        reason: e.to_string(),
    })?;
    let place = format!("kafka {}", broker.servers());
    Ok((broker, place))
}
