//! Finds the checkpoint manifests: a folder given on the command line, `./checkpoints` when
//! present, or the copies built into the binary.

use std::path::{Path, PathBuf};

use super::manifest::{self, Checkpoint};
use super::CatalogError;
use crate::diagnostics::Source;

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

    /// Reads every manifest of `dir`: its `*.toml` files, leaving out hidden ones (editor lock
    /// files such as `.#30-replay-audit.toml`) and symbolic links that lead nowhere.
    fn from_folder(dir: &Path, known_builtins: &[&str]) -> Result<Catalog, CatalogError> {
        let unreadable = |source| CatalogError::UnreadableFolder {
            dir: dir.to_owned(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(unreadable)? {
            let path = entry.map_err(unreadable)?.path();
            if is_manifest(&path) {
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
            let text = match std::fs::read(&path) {
                Ok(bytes) => Source::decode(&path, bytes)?,
                Err(source) => return Err(CatalogError::UnreadableManifest { path, source }),
            };
            files.push((path, text));
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

/// A visible `*.toml` file, or a link to one; a link that leads nowhere is named and left out.
fn is_manifest(path: &Path) -> bool {
    let visible_toml = path.extension().is_some_and(|x| x == "toml")
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'));
    if visible_toml && !path.exists() {
        tracing::warn!(
            "{}: a link that leads nowhere; not read as a manifest",
            path.display()
        );
        return false;
    }
    visible_toml && path.is_file()
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

    #[test]
    fn lock_files_hidden_files_dead_links_and_other_files_are_not_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("30-replay-audit.toml"), "").unwrap();
        std::fs::write(d.join(".hidden.toml"), "").unwrap();
        std::fs::write(d.join("notes.md"), "").unwrap();
        std::fs::create_dir(d.join("folder.toml")).unwrap();
        std::os::unix::fs::symlink("root@vm.1234:1700000000", d.join(".#30-replay-audit.toml"))
            .unwrap();
        std::os::unix::fs::symlink("nowhere.toml", d.join("31-dead.toml")).unwrap();
        std::os::unix::fs::symlink("30-replay-audit.toml", d.join("32-link.toml")).unwrap();
        let mut kept: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| is_manifest(p))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        kept.sort();
        assert_eq!(kept, ["30-replay-audit.toml", "32-link.toml"]);
    }
}
