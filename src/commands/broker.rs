//! `lessonprobe broker`: the embedded mock cluster as a standalone broker process, optionally
//! preloaded with a generated day, until SIGINT or SIGTERM.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ticketflow::day;
use ticketflow::kafka::Broker;

use crate::cli::BrokerArgs;
use crate::exit::{Code, Error};

pub fn broker(args: BrokerArgs) -> Result<Code, Error> {
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
    eprintln!(
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

fn load_sample_day(
    broker: &mut Broker,
    topic: &str,
    partitions: i32,
    events: u32,
) -> Result<(), Error> {
    let op = |e: ticketflow::kafka::KafkaError| Error::Operation(e.to_string());
    broker.create_topic(topic, partitions).map_err(op)?;
    let records = day::generate(&day::sample_day(events as usize));
    let sent = broker
        .produce_day(topic, partitions, &records)
        .map_err(op)?;
    eprintln!("lessonprobe broker: loaded {sent} records into {topic} ({partitions} partitions, 2026-09-21 to 2026-09-23)");
    Ok(())
}
