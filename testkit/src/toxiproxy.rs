//! Faults on real links: a proxy of the test Toxiproxy server (`LESSONPROBE_TEST_TOXIPROXY`,
//! started by `scripts/test.sh`) between a run and a service, and the toxics a test puts on it
//! (latency, a bandwidth limit, a reset, silence, a link cut after N bytes). Spoken over its
//! HTTP API with plain std TCP: a handful of JSON requests need no HTTP client crate.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::kafka::{ApacheKafka, BrokerProcess};
use crate::net::free_port;

/// The test Toxiproxy server's API address, or `None` (skipped outside CI, failed in it).
#[track_caller]
pub fn server() -> Option<String> {
    crate::services::service(
        "LESSONPROBE_TEST_TOXIPROXY",
        "a Toxiproxy server (scripts/test.sh installs and starts it)",
    )
}

/// A throwaway Apache Kafka node that only a proxy reaches, with a sample day of `events` over
/// `partitions` in `topic`: the node advertises the proxy's port, so every connection of every
/// client (bootstrap and after) goes through the proxy. The broker's `servers` is the proxy's
/// address.
#[track_caller]
pub fn apache_kafka_behind_proxy(
    api: &str,
    topic: &str,
    events: usize,
    partitions: i32,
) -> (BrokerProcess, Proxy) {
    let port = free_port();
    let advertised = format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}");
    let kafka = ApacheKafka::start_with(1, &[&advertised]);
    let proxy = Proxy::start_on(api, "kafka", &kafka.servers, port);
    let broker = BrokerProcess::apache_kafka_via(kafka, &proxy.listen, topic, events, partitions);
    (broker, proxy)
}

/// A fault on one direction of a link. `Up` is client to service, `Down` service to client.
#[derive(Debug, Clone, Copy)]
pub enum Toxic {
    /// Every chunk held back this long.
    Latency { ms: u64 },
    /// At most this many KB/s.
    Bandwidth { kb_per_s: u64 },
    /// The connection reset (TCP RST) after this long.
    ResetPeer { after_ms: u64 },
    /// Nothing forwarded any more, the socket left open (a silent peer): `ms` 0 for ever.
    Timeout { ms: u64 },
    /// The connection closed once this many bytes went through.
    LimitData { bytes: u64 },
}

/// Which way a toxic acts.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Up,
    Down,
}

impl Toxic {
    fn kind_and_attributes(self) -> (&'static str, String) {
        match self {
            Toxic::Latency { ms } => ("latency", format!(r#"{{"latency":{ms},"jitter":0}}"#)),
            Toxic::Bandwidth { kb_per_s } => ("bandwidth", format!(r#"{{"rate":{kb_per_s}}}"#)),
            Toxic::ResetPeer { after_ms } => ("reset_peer", format!(r#"{{"timeout":{after_ms}}}"#)),
            Toxic::Timeout { ms } => ("timeout", format!(r#"{{"timeout":{ms}}}"#)),
            Toxic::LimitData { bytes } => ("limit_data", format!(r#"{{"bytes":{bytes}}}"#)),
        }
    }
}

/// One proxy on a free loopback port in front of `upstream`; deleted when dropped.
pub struct Proxy {
    api: String,
    name: String,
    /// Where clients connect instead of the service: `127.0.0.1:PORT`.
    pub listen: String,
    toxics: std::cell::Cell<u32>,
}

impl Proxy {
    /// A proxy named `name` (made unique) forwarding to `upstream` (`host:port`).
    #[track_caller]
    pub fn start(api: &str, name: &str, upstream: &str) -> Proxy {
        Proxy::start_on(api, name, upstream, free_port())
    }

    /// The same, listening on a given port (a Kafka broker must advertise it before it starts).
    #[track_caller]
    pub fn start_on(api: &str, name: &str, upstream: &str, port: u16) -> Proxy {
        let name = format!("{name}-{}-{port}", std::process::id());
        let listen = format!("127.0.0.1:{port}");
        let body = format!(
            r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#
        );
        request(api, "POST", "/proxies", Some(&body));
        Proxy {
            api: api.to_owned(),
            name,
            listen,
            toxics: std::cell::Cell::new(0),
        }
    }

    /// Puts `toxic` on `stream` of every connection, current and new; returns its name.
    #[track_caller]
    pub fn add(&self, toxic: Toxic, stream: Stream) -> String {
        let n = self.toxics.get() + 1;
        self.toxics.set(n);
        let (kind, attributes) = toxic.kind_and_attributes();
        let toxic_name = format!("{kind}-{n}");
        let stream = match stream {
            Stream::Up => "upstream",
            Stream::Down => "downstream",
        };
        let body = format!(
            r#"{{"name":"{toxic_name}","type":"{kind}","stream":"{stream}","toxicity":1.0,"attributes":{attributes}}}"#
        );
        request(
            &self.api,
            "POST",
            &format!("/proxies/{}/toxics", self.name),
            Some(&body),
        );
        toxic_name
    }

    /// Takes a toxic off again: the link heals (connections a toxic closed stay closed).
    #[track_caller]
    pub fn remove(&self, toxic: &str) {
        request(
            &self.api,
            "DELETE",
            &format!("/proxies/{}/toxics/{toxic}", self.name),
            None,
        );
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = try_request(
            &self.api,
            "DELETE",
            &format!("/proxies/{}", self.name),
            None,
        );
    }
}

#[track_caller]
fn request(api: &str, method: &str, path: &str, body: Option<&str>) -> String {
    match try_request(api, method, path, body) {
        Ok((status, text)) if (200..300).contains(&status) => text,
        Ok((status, text)) => {
            panic!("Toxiproxy at {api}: {method} {path} answered {status}: {text}")
        }
        Err(e) => panic!("Toxiproxy at {api}: {method} {path}: {e}"),
    }
}

fn try_request(
    api: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(api)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {api}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let text = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, text))
}
