//! The one place where errors become exit codes (the codes themselves: `exit_code`).

use std::path::PathBuf;

use crate::checkpoint::CatalogError;
pub use crate::exit_code::Code;
use crate::lesson::CourseError;
use crate::remote::HostsError;
use crate::report::ReportError;

/// An error that stops the program before or outside the probes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line value that makes no sense.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Hosts(#[from] HostsError),
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A course or one of its lessons that cannot be used.
    #[error(transparent)]
    Course(#[from] CourseError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{0}")]
    Operation(String),
}

impl Error {
    pub fn exit_code(&self) -> Code {
        match self {
            Error::Usage(_) => Code::Usage,
            Error::Catalog(
                CatalogError::UnreadableFolder { .. } | CatalogError::UnreadableManifest { .. },
            ) => Code::Io,
            Error::Catalog(_) => Code::Usage,
            Error::Hosts(HostsError::Unreadable { .. }) => Code::Io,
            Error::Hosts(_) => Code::Usage,
            Error::Course(CourseError::Io { .. }) => Code::Io,
            Error::Course(_) => Code::Usage,
            Error::Report(_) | Error::Io { .. } => Code::Io,
            Error::Operation(_) => Code::Operation,
        }
    }

    pub fn io(path: impl Into<PathBuf>, err: impl std::fmt::Display) -> Self {
        Error::Io {
            path: path.into(),
            message: err.to_string(),
        }
    }
}
