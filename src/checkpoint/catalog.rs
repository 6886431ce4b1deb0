//! Finds the checkpoint manifests: a folder given on the command line, `./checkpoints` when
//! present, or the copies built into the binary.

use std::path::{Path, PathBuf};

use super::manifest::{self, Checkpoint};
use super::CatalogError;

/// The manifests shipped with this build, used when no folder is found.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "checkpoints/29-audit-consumer.toml",
        include_str!("../../checkpoints/29-audit-consumer.toml"),
    ),
    (
        "checkpoints/30-replay-audit.toml",
        include_str!("../../checkpoints/30-replay-audit.toml"),
    ),
];

/// Where the manifests came from, for `list` and the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogSource {
    Folder(PathBuf),
    Embedded,
}

/// Every checkpoint, ordered by lesson number.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub source: CatalogSource,
    pub checkpoints: Vec<Checkpoint>,
}

impl Catalog {
    /// Loads `folder` if given, else `./checkpoints` if it exists, else the embedded copies.
    pub fn load(folder: Option<&Path>, known_builtins: &[&str]) -> Result<Catalog, CatalogError> {
        let default = Path::new("checkpoints");
        match folder {
            Some(dir) => Self::from_folder(dir, known_builtins),
            None if default.is_dir() => Self::from_folder(default, known_builtins),
            None => Self::embedded(known_builtins),
        }
    }

    /// The checkpoint of `lesson`, or a usage error listing the known ones.
    pub fn checkpoint(&self, lesson: u32) -> Result<&Checkpoint, CatalogError> {
        self.checkpoints
            .iter()
            .find(|c| c.lesson == lesson)
            .ok_or_else(|| CatalogError::UnknownLesson {
                lesson,
                known: self.checkpoints.iter().map(|c| c.lesson).collect(),
            })
    }

    pub fn embedded(known_builtins: &[&str]) -> Result<Catalog, CatalogError> {
        let files = EMBEDDED
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        Self::from_texts(CatalogSource::Embedded, files, known_builtins)
    }

    fn from_folder(dir: &Path, known_builtins: &[&str]) -> Result<Catalog, CatalogError> {
        let unreadable = |source| CatalogError::UnreadableFolder {
            dir: dir.to_owned(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(unreadable)? {
            let path = entry.map_err(unreadable)?.path();
            if path.extension().is_some_and(|x| x == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
        if paths.is_empty() {
            return Err(CatalogError::NoManifests {
                dir: dir.to_owned(),
            });
        }
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            match std::fs::read_to_string(&path) {
                Ok(text) => files.push((path, text)),
                Err(source) => return Err(CatalogError::UnreadableManifest { path, source }),
            }
        }
        Self::from_texts(CatalogSource::Folder(dir.to_owned()), files, known_builtins)
    }

    fn from_texts(
        source: CatalogSource,
        files: Vec<(PathBuf, String)>,
        known: &[&str],
    ) -> Result<Catalog, CatalogError> {
        let mut checkpoints: Vec<Checkpoint> = Vec::with_capacity(files.len());
        for (path, text) in files {
            let cp = manifest::parse(&path, &text, known)?;
            if let Some(other) = checkpoints.iter().find(|c| c.lesson == cp.lesson) {
                return Err(CatalogError::DuplicateLesson {
                    path,
                    lesson: cp.lesson,
                    first: other.source.clone(),
                });
            }
            checkpoints.push(cp);
        }
        checkpoints.sort_by_key(|c| c.lesson);
        Ok(Catalog {
            source,
            checkpoints,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_manifests_are_valid_against_the_registry() {
        let names: Vec<&str> = lessonprobe_probes::registry::builtins()
            .iter()
            .map(|p| p.name)
            .collect();
        let catalog = Catalog::embedded(&names).unwrap();
        let lessons: Vec<u32> = catalog.checkpoints.iter().map(|c| c.lesson).collect();
        assert_eq!(lessons, vec![29, 30]);
    }
}
