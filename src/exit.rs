//! The one place where errors become exit codes (the codes themselves: `exit_code`).

use std::path::PathBuf;

use crate::checkpoint::CatalogError;
pub use crate::exit_code::Code;
use crate::lesson::CourseError;
use crate::remote::HostsError;
use crate::report::ReportError;
use ticketflow::replay::{ConnectError, DayPlanError, PrepareError, Refusal};

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

/// A table, CSV or JSON document that could not be rendered.
impl From<crate::render::RenderError> for Error {
    fn from(e: crate::render::RenderError) -> Error {
        Error::Operation(e.to_string())
    }
}

/// A replay that could not be prepared, in the words of `lessonprobe replay`: the flag that
/// fixes it, where one does, and usage errors told from refusals of the data.
impl From<PrepareError> for Error {
    fn from(e: PrepareError) -> Error {
        match e {
            PrepareError::Connect(e @ ConnectError::OwnedProperty { .. }) => {
                Error::Usage(e.to_string())
            }
            PrepareError::Plan(DayPlanError::Refused(
                why @ (Refusal::DuplicatePartition { .. } | Refusal::NegativeOffset { .. }),
            )) => Error::Usage(format!("--partitions/--start/--stop: {why}")),
            PrepareError::Plan(DayPlanError::Refused(why)) => {
                let hint = match &why {
                    Refusal::OffsetsNeedOnePartition { .. } => {
                        ": give exactly one with --partitions"
                    }
                    Refusal::WindowBackwards => " (--until must be later than --since)",
                    _ => "",
                };
                Error::Operation(format!("replay refused: {why}{hint}"))
            }
            e => Error::Operation(e.to_string()),
        }
    }
}
