//! The command line's small value grammars, each parsed once as a clap value parser: run ids,
//! topic and group names, RFC 3339 times, client properties and byte sizes.

/// A run id: 1 to 40 lower-case letters, digits and `-` (it names topics, schemas and files).
pub fn parse_run_id(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 40
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(s.to_owned())
    } else {
        Err("use 1 to 40 lower-case letters, digits and '-'".into())
    }
}

/// A topic or group name: Kafka has none that is empty or blank.
pub fn named(s: &str) -> Result<String, String> {
    match s.trim().is_empty() {
        true => Err("a topic or group name must not be empty".into()),
        false => Ok(s.to_owned()),
    }
}

pub fn parse_time(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{e} (write RFC 3339, e.g. 2026-09-22T00:00:00Z)"))
}

pub fn parse_property(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        // The text may be a value on its own: never echo it.
        _ => Err("expected KEY=VALUE (the text given is not shown: it may hold a secret)".into()),
    }
}

/// A size in bytes: `1048576`, `512KiB`, `16MiB`, `1GiB` (also `K`, `M`, `G`).
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (write e.g. 16MiB or 1048576)"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => return Err(format!("{other:?} is not a unit: use KiB, MiB or GiB")),
    };
    match n.checked_mul(scale) {
        Some(0) | None => Err(format!(
            "{s:?}: the size must be positive and fit in memory"
        )),
        Some(bytes) => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_properties_and_run_ids_parse() {
        assert_eq!(
            parse_time("2026-09-22T00:00:00Z"),
            Ok(1_789_948_800_000 + 86_400_000)
        );
        assert!(parse_time("yesterday").is_err());
        assert_eq!(
            parse_property("sasl.username=a=b"),
            Ok(("sasl.username".into(), "a=b".into()))
        );
        assert!(parse_property("=x").is_err());
        assert!(!parse_property("hunter2").unwrap_err().contains("hunter2"));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("0").is_err() && parse_bytes("3 parsecs").is_err());
        assert!(parse_run_id("Upper").is_err() && parse_run_id("run-1").is_ok());
    }
}
