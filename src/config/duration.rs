//! The one duration grammar of the command line, manifests and hosts files: a bare number of
//! seconds (`30`) or units (`30s`, `2m`, `1h 30m`); always positive, but for a budget zero
//! turns off.

use std::time::Duration;

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{text:?} is not a duration: {reason} (write e.g. 30, 30s or 2m)")]
    Invalid { text: String, reason: String },
    #[error("{text:?}: a duration must be positive")]
    Zero { text: String },
}

/// Parses `text` as a positive duration.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    let duration = match trimmed.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(trimmed).map_err(|e| DurationError::Invalid {
            text: text.to_owned(),
            reason: e.to_string(),
        })?,
    };
    if duration.is_zero() {
        return Err(DurationError::Zero {
            text: text.to_owned(),
        });
    }
    Ok(duration)
}

/// Parses `text` as a budget, which zero (`0`, `0s`) turns off.
pub fn parse_budget(text: &str) -> Result<Duration, DurationError> {
    match parse(text) {
        Err(DurationError::Zero { .. }) => Ok(Duration::ZERO),
        other => other,
    }
}

/// Whole seconds, as a manifest or hosts file may also write them (`timeout = 30`).
pub fn from_seconds(secs: u64) -> Result<Duration, DurationError> {
    parse(&secs.to_string())
}

/// A duration as a TOML file writes it: a string in the grammar above (`"30s"`, `"30"`) or an
/// integer of seconds (`30`). Parsed by [`TomlDuration::duration`], so the caller can place and
/// word the error.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(
    untagged,
    expecting = "a duration: a string such as \"30s\" or \"2m\", or an integer of seconds"
)]
pub enum TomlDuration {
    Text(String),
    Seconds(i64),
}

impl TomlDuration {
    pub fn duration(&self) -> Result<Duration, DurationError> {
        match self {
            TomlDuration::Text(text) => parse(text),
            TomlDuration::Seconds(secs) => match u64::try_from(*secs) {
                Ok(secs) => from_seconds(secs),
                Err(_) => parse(&secs.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_seconds_and_units_parse_and_zero_or_words_do_not() {
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(from_seconds(5), Ok(Duration::from_secs(5)));
        assert!(matches!(parse("0"), Err(DurationError::Zero { .. })));
        assert!(matches!(parse("0s"), Err(DurationError::Zero { .. })));
        let soon = parse("soon").unwrap_err().to_string();
        assert!(soon.starts_with("\"soon\" is not a duration"), "{soon}");
        assert!(soon.ends_with("(write e.g. 30, 30s or 2m)"), "{soon}");
        assert!(parse("-5").is_err());
    }

    #[test]
    fn a_budget_may_be_zero() {
        assert_eq!(parse_budget("0"), Ok(Duration::ZERO));
        assert_eq!(parse_budget("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_budget("60s"), Ok(Duration::from_secs(60)));
        assert!(matches!(
            parse_budget("soon"),
            Err(DurationError::Invalid { .. })
        ));
    }

    #[test]
    fn toml_takes_a_string_or_an_integer_of_seconds() {
        #[derive(serde::Deserialize)]
        struct T {
            t: TomlDuration,
        }
        let read = |text: &str| toml::from_str::<T>(text).map(|t| t.t.duration());
        assert_eq!(read("t = 30").unwrap(), Ok(Duration::from_secs(30)));
        assert_eq!(read("t = \"30\"").unwrap(), Ok(Duration::from_secs(30)));
        assert_eq!(read("t = \"2m\"").unwrap(), Ok(Duration::from_secs(120)));
        assert!(matches!(
            read("t = 0").unwrap(),
            Err(DurationError::Zero { .. })
        ));
        assert!(matches!(
            read("t = -5").unwrap(),
            Err(DurationError::Invalid { .. })
        ));
        let wrong = read("t = true").err().unwrap().message().to_owned();
        assert!(wrong.contains("an integer of seconds"), "{wrong}");
    }
}
