//! Whether and where remote probes run, decided once per run: not at all unless
//! TICKETFLOW_REMOTE_TESTS=1 (PENDING, saying what would run where), else on the authorized
//! host, or nowhere for a reason each remote probe reports as ERROR.

use std::ffi::OsString;

use crate::remote::{AuthorizedHost, HostsError};

/// The remote probes' host for this run.
#[derive(Debug)]
pub enum RemoteHost {
    /// Remote tests are not enabled: remote probes are PENDING and nothing connects. `host`
    /// names the host they would run on, when a hosts file names one.
    Disabled {
        flag: RemoteFlag,
        host: Option<String>,
    },
    /// Enabled, but there is no host to run on.
    Unavailable(HostsError),
    Host(Box<AuthorizedHost>),
}

impl RemoteHost {
    /// Why a remote probe of `selector` is PENDING, or `None` when remote tests are enabled.
    pub fn pending_reason(&self, selector: &str) -> Option<String> {
        let RemoteHost::Disabled { flag, host } = self else {
            return None;
        };
        let place = host.as_deref().unwrap_or("an authorized host");
        Some(format!(
            "{flag}; set it to 1 to run selector {selector} on {place}"
        ))
    }

    /// Why remote probes cannot run, when they cannot.
    pub fn unavailable_reason(&self) -> Option<String> {
        match self {
            RemoteHost::Host(_) => None,
            RemoteHost::Unavailable(why) => Some(format!(
                "{} but no authorized host is configured: {why}",
                RemoteFlag::On
            )),
            RemoteHost::Disabled { flag, .. } => Some(flag.to_string()),
        }
    }
}

/// The value of TICKETFLOW_REMOTE_TESTS: only `1` lets remote probes connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteFlag {
    On,
    Unset,
    /// Set to anything but `1` (`0`, `true`, …).
    Other(String),
}

impl RemoteFlag {
    pub const VAR: &'static str = "TICKETFLOW_REMOTE_TESTS";

    pub fn from_value(value: Option<OsString>) -> RemoteFlag {
        match value {
            None => RemoteFlag::Unset,
            Some(v) if v == "1" => RemoteFlag::On,
            Some(v) => RemoteFlag::Other(v.to_string_lossy().into_owned()),
        }
    }

    pub fn from_env() -> RemoteFlag {
        Self::from_value(std::env::var_os(Self::VAR))
    }

    pub fn is_on(&self) -> bool {
        *self == RemoteFlag::On
    }
}

impl std::fmt::Display for RemoteFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let var = Self::VAR;
        match self {
            RemoteFlag::On => write!(f, "{var}=1"),
            RemoteFlag::Unset => write!(f, "{var} is not set"),
            RemoteFlag::Other(v) if v.is_empty() => write!(f, "{var} is set but empty"),
            RemoteFlag::Other(v)
                if v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.,:+-".contains(c)) =>
            {
                write!(f, "{var}={v}")
            }
            RemoteFlag::Other(v) => write!(f, "{var}={v:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disabled(value: Option<&str>, host: Option<&str>) -> RemoteHost {
        RemoteHost::Disabled {
            flag: RemoteFlag::from_value(value.map(OsString::from)),
            host: host.map(str::to_owned),
        }
    }

    #[test]
    fn pending_names_the_selector_the_host_and_the_flag_as_set() {
        assert_eq!(
            disabled(None, Some("ci (ci.example:22)")).pending_reason("tests/x.py::test_y"),
            Some(
                "TICKETFLOW_REMOTE_TESTS is not set; set it to 1 to run selector \
                 tests/x.py::test_y on ci (ci.example:22)"
                    .into()
            )
        );
        assert_eq!(
            disabled(Some("true"), None).pending_reason("t.py::a"),
            Some(
                "TICKETFLOW_REMOTE_TESTS=true; set it to 1 to run selector t.py::a on an \
                 authorized host"
                    .into()
            )
        );
        let zero = disabled(Some("0"), None).pending_reason("s").unwrap();
        assert!(
            zero.starts_with("TICKETFLOW_REMOTE_TESTS=0; set it to 1"),
            "{zero}"
        );
        let empty = disabled(Some(""), None).pending_reason("s").unwrap();
        assert!(
            empty.starts_with("TICKETFLOW_REMOTE_TESTS is set but empty;"),
            "{empty}"
        );
        let odd = disabled(Some("yes please"), None)
            .pending_reason("s")
            .unwrap();
        assert!(
            odd.starts_with("TICKETFLOW_REMOTE_TESTS=\"yes please\";"),
            "{odd}"
        );
    }

    #[test]
    fn only_one_turns_remote_tests_on() {
        assert!(RemoteFlag::from_value(Some("1".into())).is_on());
        for other in ["0", "true", "yes", " 1", ""] {
            assert!(
                !RemoteFlag::from_value(Some(other.into())).is_on(),
                "{other:?}"
            );
        }
        assert_eq!(RemoteFlag::from_value(None), RemoteFlag::Unset);
    }
}
