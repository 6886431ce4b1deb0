//! Why the checkpoint catalog could not be loaded or a selection made of it.

use std::path::PathBuf;

use crate::diagnostics::Diagnostic;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A manifest is malformed or invalid, at file:line:column.
    #[error(transparent)]
    Invalid(#[from] Diagnostic),
    #[error("{}: cannot read checkpoint folder: {source}", dir.display())]
    UnreadableFolder {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    UnreadableManifest {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: no checkpoint manifests (*.toml) found", dir.display())]
    NoManifests { dir: PathBuf },
    #[error("{}: lesson {lesson} is already defined by {}", path.display(), first.display())]
    DuplicateLesson {
        path: PathBuf,
        lesson: u32,
        first: PathBuf,
    },
    #[error("no checkpoint for lesson {lesson} (known: {})", list(known))]
    UnknownLesson { lesson: u32, known: Vec<u32> },
    #[error("--select needs a non-empty pattern")]
    EmptyPattern,
    #[error("--select {pattern:?} matches no probe{}", lesson.map(|n| format!(" of lesson {n}")).unwrap_or_default())]
    NoMatch {
        pattern: String,
        lesson: Option<u32>,
    },
}

fn list(lessons: &[u32]) -> String {
    lessons
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
