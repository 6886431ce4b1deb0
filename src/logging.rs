//! Log lines on stderr: coloured only on a terminal (and never under NO_COLOR), and librdkafka's own lines (configuration
//! warnings, connection failures, client-wide errors such as all brokers down, …) once per kind
//! per run, however many clients repeat them;
//! rdkafka's note that a consumer closed ahead of its drop is closed already, never.

use std::collections::HashSet;
use std::fmt;
use std::io::IsTerminal;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Installs the process's log output; `RUST_LOG` filters it (warnings by default).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::registry()
        .with(OncePerKind::default())
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(crate::report::terminal::colour(
                    std::io::stderr().is_terminal(),
                )),
        )
        .try_init();
}

/// Lets through the first librdkafka line of each kind (its facility, e.g. `CONFWARN`, at its
/// level) and drops the repeats; every other event passes.
#[derive(Default)]
struct OncePerKind {
    seen: Mutex<HashSet<(tracing::Level, String)>>,
}

impl<S: Subscriber> Layer<S> for OncePerKind {
    fn event_enabled(&self, event: &Event<'_>, _: Context<'_, S>) -> bool {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields
            .message
            .starts_with(ticketflow::kafka::CLOSED_ON_DROP)
        {
            return false;
        }
        // rdkafka's report of a client's error callback comes from its own module, its
        // message prefixed as librdkafka's lines are.
        let from_librdkafka = event.metadata().target() == "librdkafka"
            || fields.log_target == "librdkafka"
            || fields.message.starts_with("librdkafka: ");
        if !from_librdkafka {
            return true;
        }
        let kind = kind_of(&fields.message).to_owned();
        self.seen
            .lock()
            .map(|mut seen| seen.insert((*event.metadata().level(), kind)))
            .unwrap_or(true)
    }
}

/// The facility of a librdkafka line: `librdkafka: CONFWARN [thrd:app]: …` → `CONFWARN`; of a
/// client-wide error, its name: `librdkafka: Global error: AllBrokersDown (…): 1/1 brokers are
/// down` → `Global error: AllBrokersDown`.
fn kind_of(message: &str) -> &str {
    let line = message.strip_prefix("librdkafka: ").unwrap_or(message);
    let words = if line.starts_with("Global error: ") {
        3
    } else {
        1
    };
    let end = line
        .match_indices(' ')
        .nth(words - 1)
        .map_or(line.len(), |(i, _)| i);
    &line[..end]
}

/// The message and, for lines bridged from the `log` crate, their original target.
#[derive(Default)]
struct Fields {
    message: String,
    log_target: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "log.target" => self.log_target = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "log.target" => self.log_target = format!("{value:?}"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_of_a_librdkafka_line_is_its_facility() {
        assert_eq!(
            kind_of("librdkafka: CONFWARN [thrd:app]: Configuration property `x`"),
            "CONFWARN"
        );
        assert_eq!(kind_of("FAIL [thrd:1]: down"), "FAIL");
        assert_eq!(kind_of("FAIL"), "FAIL");
    }

    #[test]
    fn a_client_wide_error_is_of_the_kind_its_name_says_whatever_its_counts() {
        let one = "librdkafka: Global error: AllBrokersDown (Local: All broker connections are down): 1/1 brokers are down";
        let two = "librdkafka: Global error: AllBrokersDown (Local: All broker connections are down): 2/2 brokers are down";
        assert_eq!(kind_of(one), "Global error: AllBrokersDown");
        assert_eq!(kind_of(one), kind_of(two));
        assert_ne!(
            kind_of("librdkafka: Global error: Authentication (SASL failed)"),
            kind_of(one)
        );
    }
}
