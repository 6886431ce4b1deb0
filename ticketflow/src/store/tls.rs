//! TLS to PostgreSQL as libpq understands it: `sslmode=disable|prefer|require|verify-ca|
//! verify-full` and `sslrootcert=FILE|system` in the URL, turned into an OpenSSL connector.

use std::path::PathBuf;
use std::sync::Mutex;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use postgres::config::SslMode as WireMode;
use postgres::Config;
use postgres_openssl::MakeTlsConnector;

/// libpq's `sslmode` values that the replay supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Where the CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    File(PathBuf),
    /// The system's trust store (`sslrootcert=system`).
    System,
}

/// A PostgreSQL URL split into what the client library reads and the TLS settings it does not.
#[derive(Debug, Clone)]
pub struct ConnectSpec {
    pub config: Config,
    pub mode: SslMode,
    pub root_cert: Option<RootCert>,
}

/// Why a URL's TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(
        "sslmode={0} is not supported: use disable, prefer, require, verify-ca or verify-full"
    )]
    Mode(String),
    #[error("{0}")]
    Url(String),
    #[error("sslmode={mode} needs the CA that signed the server's certificate: add sslrootcert=FILE to the URL (or sslrootcert=system for the system's CAs)")]
    NoRootCert { mode: &'static str },
    #[error("sslrootcert {path}: {reason}")]
    RootCert { path: String, reason: String },
    #[error("TLS setup: {0}")]
    OpenSsl(#[from] openssl::error::ErrorStack),
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl ConnectSpec {
    /// Reads `url`; `sslmode` and `sslrootcert` are taken out before the client library sees
    /// the rest (it knows neither `verify-*` nor `sslrootcert`). Without `sslmode`, libpq's
    /// default `prefer` applies.
    pub fn parse(url: &str) -> Result<ConnectSpec, TlsError> {
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url, ""),
        };
        let (mut mode, mut root_cert) = (SslMode::Prefer, None);
        let mut kept: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    mode = match percent_decode(value).as_str() {
                        "disable" => SslMode::Disable,
                        "prefer" => SslMode::Prefer,
                        "require" => SslMode::Require,
                        "verify-ca" => SslMode::VerifyCa,
                        "verify-full" => SslMode::VerifyFull,
                        other => return Err(TlsError::Mode(other.to_owned())),
                    }
                }
                "sslrootcert" => {
                    root_cert = Some(match percent_decode(value).as_str() {
                        "system" => RootCert::System,
                        path => RootCert::File(PathBuf::from(path)),
                    })
                }
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config: Config = rest
            .parse()
            .map_err(|e: postgres::Error| TlsError::Url(e.to_string()))?;
        config.ssl_mode(match mode {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            _ => WireMode::Require,
        });
        Ok(ConnectSpec {
            config,
            mode,
            root_cert,
        })
    }

    /// The connector for this mode; `None` for `disable`. `require` verifies the chain too
    /// when a CA file is given, as libpq does; only `verify-full` checks the host name.
    /// Built once per process for each mode and root certificate: building one reads the
    /// system's CA store (OpenSSL does for every connector), which took a twentieth of a
    /// replay's CPU when each connection built its own.
    pub fn connector(&self) -> Result<Option<MakeTlsConnector>, TlsError> {
        type Built = (
            (SslMode, Option<RootCert>, Option<PathBuf>),
            MakeTlsConnector,
        );
        static BUILT: Mutex<Vec<Built>> = Mutex::new(Vec::new());
        let key = (self.mode, self.root_cert.clone(), home_root_cert());
        let mut built = BUILT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, connector)) = built.iter().find(|(k, _)| *k == key) {
            return Ok(Some(connector.clone()));
        }
        let connector = self.build_connector()?;
        if let Some(connector) = &connector {
            built.push((key, connector.clone()));
        }
        Ok(connector)
    }

    fn build_connector(&self) -> Result<Option<MakeTlsConnector>, TlsError> {
        let verify_chain = match self.mode {
            SslMode::Disable => return Ok(None),
            SslMode::Prefer => false,
            SslMode::Require => self.root_cert.is_some(),
            SslMode::VerifyCa | SslMode::VerifyFull => true,
        };
        let mut builder = SslConnector::builder(SslMethod::tls())?;
        if verify_chain {
            let root = match (&self.root_cert, home_root_cert()) {
                (Some(root), _) => root.clone(),
                (None, Some(home)) => RootCert::File(home),
                (None, None) => {
                    return Err(TlsError::NoRootCert {
                        mode: if self.mode == SslMode::VerifyCa {
                            "verify-ca"
                        } else {
                            "verify-full"
                        },
                    })
                }
            };
            match root {
                RootCert::System => builder.set_default_verify_paths()?,
                RootCert::File(path) => {
                    let shown = path.display().to_string();
                    if let Err(e) = std::fs::metadata(&path) {
                        return Err(TlsError::RootCert {
                            path: shown,
                            reason: e.to_string(),
                        });
                    }
                    builder.set_ca_file(&path).map_err(|e| TlsError::RootCert {
                        path: shown,
                        reason: format!("not a PEM certificate file ({e})"),
                    })?;
                }
            }
            builder.set_verify(SslVerifyMode::PEER);
        } else {
            builder.set_verify(SslVerifyMode::NONE);
        }
        let check_host = self.mode == SslMode::VerifyFull;
        let mut connector = MakeTlsConnector::new(builder.build());
        connector.set_callback(move |config, _| {
            config.set_verify_hostname(check_host);
            Ok(())
        });
        Ok(Some(connector))
    }
}

/// libpq's default CA file, when it exists.
fn home_root_cert() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("HOME")?).join(".postgresql/root.crt");
    path.exists().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_modes_and_the_root_cert_are_read_and_the_rest_reaches_the_client() {
        let spec = ConnectSpec::parse(
            "postgres://u:pw@db:5433/audit?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=4",
        )
        .unwrap();
        assert_eq!(spec.mode, SslMode::VerifyFull);
        assert_eq!(spec.root_cert, Some(RootCert::File("/tmp/ca.pem".into())));
        assert_eq!(spec.config.get_ssl_mode(), WireMode::Require);
        assert_eq!(spec.config.get_dbname(), Some("audit"));
        assert_eq!(
            spec.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(4))
        );
        assert_eq!(
            ConnectSpec::parse("postgres://u@db/a").unwrap().mode,
            SslMode::Prefer
        );
        assert!(matches!(
            ConnectSpec::parse("postgres://u@db/a?sslmode=allow"),
            Err(TlsError::Mode(_))
        ));
        let missing =
            ConnectSpec::parse("postgres://u@db/a?sslmode=verify-ca&sslrootcert=/no/such.pem")
                .unwrap()
                .connector()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(
            missing.starts_with("sslrootcert /no/such.pem:"),
            "{missing}"
        );
        assert!(ConnectSpec::parse("postgres://u@db/a?sslmode=disable")
            .unwrap()
            .connector()
            .unwrap()
            .is_none());
    }
}
