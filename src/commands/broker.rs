//! `lessonprobe broker`: the embedded mock cluster as a standalone broker process, optionally
//! preloaded with a generated day, until SIGINT or SIGTERM; or, with `--kafka`, a generated day
//! loaded into a broker that runs elsewhere.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ticketflow::day;
use ticketflow::kafka::{check_topic_name, Broker, KafkaError};
use ticketflow::KafkaTarget;

use crate::cli::BrokerArgs;
use crate::exit::{Code, Error};

pub fn broker(args: BrokerArgs) -> Result<Code, Error> {
    if let Some(topic) = &args.sample_day {
        check_topic_name(topic).map_err(|e| Error::Usage(format!("--sample-day: {e}")))?;
    }
    if let Some(target) = &args.kafka {
        return load_into(target, &args);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Error::Operation(format!("cannot handle signal {signal}: {e}")))?;
    }
    let mut broker = Broker::embedded(args.brokers).map_err(|e| Error::Operation(e.to_string()))?;
    if let Some(topic) = &args.sample_day {
        load_sample_day(&mut broker, topic, args.partitions, args.events)?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", broker.servers())
        .and_then(|()| out.flush())
        .map_err(|e| Error::Operation(format!("stdout: {e}")))?;
    drop(out);
    errln!(
        "lessonprobe broker: {} brokers at {}; Ctrl-C or SIGTERM stops it",
        args.brokers,
        broker.servers()
    );
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(broker);
    Ok(Code::Ok)
}

/// `--kafka`: loads the sample day into a broker that runs elsewhere and leaves it there.
fn load_into(target: &KafkaTarget, args: &BrokerArgs) -> Result<Code, Error> {
    let Some(topic) = &args.sample_day else {
        return Err(Error::Usage(
            "--kafka loads a sample day into a running broker: name its topic with --sample-day"
                .into(),
        ));
    };
    if matches!(target, KafkaTarget::Embedded) {
        return Err(Error::Usage(
            "--kafka embedded: without --kafka this command hosts the embedded broker itself"
                .into(),
        ));
    }
    let target = target
        .clone()
        .with_properties(args.property.clone())
        .map_err(|e| Error::Usage(e.to_string()))?;
    let mut broker = Broker::for_target(&target, Duration::from_secs(10))
        .map_err(|e| Error::Operation(e.to_string()))?;
    load_sample_day(&mut broker, topic, args.partitions, args.events)?;
    Ok(Code::Ok)
}

/// Produces a generated day into `topic`, then says what the broker holds afterwards: the mock
/// cluster silently deletes the oldest records of a partition beyond its retention.
fn load_sample_day(
    broker: &mut Broker,
    topic: &str,
    partitions: i32,
    events: u32,
) -> Result<(), Error> {
    let op = |e: KafkaError| Error::Operation(e.to_string());
    broker.create_topic(topic, partitions).map_err(op)?;
    // The topic is the user's from now on, also when loading it fails half way or what is
    // said of it cannot be written.
    broker.keep_created_topics();
    let records = day::generate(&day::sample_day(events as usize));
    let sent = broker
        .produce_day(topic, partitions, &records)
        .map_err(op)?;
    let held = Holdings::read(broker, topic, partitions).map_err(op)?;
    let plural = if partitions == 1 { "" } else { "s" };
    errln!(
        "lessonprobe broker: produced {sent} records to {topic} ({partitions} partition{plural}, 2026-09-21 to 2026-09-23); the broker holds {}:",
        held.held()
    );
    for (p, (low, high)) in held.watermarks.iter().enumerate() {
        errln!(
            "  partition {p}: offsets [{low}, {high}), {} records",
            high - low
        );
    }
    for warning in held.loss_warnings(sent) {
        errln!("lessonprobe broker: warning: {warning}");
    }
    Ok(())
}

/// A topic's `(low, high)` watermarks per partition, read back after loading it.
struct Holdings {
    watermarks: Vec<(i64, i64)>,
}

impl Holdings {
    fn read(broker: &Broker, topic: &str, partitions: i32) -> Result<Holdings, KafkaError> {
        let watermarks = (0..partitions)
            .map(|p| broker.watermarks(topic, p))
            .collect::<Result<_, _>>()?;
        Ok(Holdings { watermarks })
    }

    fn held(&self) -> i64 {
        self.watermarks.iter().map(|(low, high)| high - low).sum()
    }

    /// What the broker no longer holds of the `sent` records: those the mock cluster deleted
    /// (below the low watermarks) and any it never stored (the high watermarks fall short).
    fn loss_warnings(&self, sent: u64) -> Vec<String> {
        let mut warnings = Vec::new();
        let dropped: i64 = self.watermarks.iter().map(|(low, _)| low).sum();
        if dropped > 0 {
            let partitions: Vec<String> = self
                .watermarks
                .iter()
                .enumerate()
                .filter(|(_, (low, _))| *low > 0)
                .map(|(p, (low, _))| format!("partition {p} lost offsets [0, {low})"))
                .collect();
            warnings.push(format!(
                "the mock cluster dropped {dropped} of {sent} records ({}): it keeps only about the newest 5 MiB or 100,000 message sets of each partition; spread the day over more --partitions",
                partitions.join(", ")
            ));
        }
        let stored: i64 = self.watermarks.iter().map(|(_, high)| high).sum();
        let sent = i64::try_from(sent).unwrap_or(i64::MAX);
        if stored < sent {
            warnings.push(format!(
                "the broker stored {stored} of the {sent} records produced"
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_is_named_per_partition_with_the_numbers() {
        let held = Holdings {
            watermarks: vec![(82_688, 104_187)],
        };
        assert_eq!(held.held(), 21_499);
        let warnings = held.loss_warnings(104_187);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "the mock cluster dropped 82688 of 104187 records (partition 0 lost offsets [0, 82688))"
            ),
            "{warnings:?}"
        );
        let whole = Holdings {
            watermarks: vec![(0, 10), (0, 5)],
        };
        assert!(whole.loss_warnings(15).is_empty());
        assert_eq!(
            whole.loss_warnings(16),
            ["the broker stored 15 of the 16 records produced"]
        );
    }
}
