//! Database files of `sqlite:DIR` runs: `<case key>.db` and its journal, WAL and shared-memory
//! companions.

use std::path::Path;

use super::{CleanError, Dropped, Kind, Leftover, Runs};
use crate::case_key;

pub fn find(dir: &Path, runs: &Runs) -> Result<Vec<Leftover>, CleanError> {
    let place = dir.display().to_string();
    let unlisted = |e: std::io::Error| CleanError::Unlisted {
        place: place.clone(),
        reason: e.to_string(),
    };
    let run = match runs {
        Runs::All => None,
        Runs::One { run_id, .. } => Some(run_id.as_str()),
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unlisted)? {
        let name = entry.map_err(unlisted)?.file_name();
        let Some(name) = name.to_str() else { continue };
        let stem = ["-journal", "-wal", "-shm", ""]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix)?.strip_suffix(".db"));
        if stem.is_some_and(|stem| case_key::is_of(stem, run)) {
            found.push(Leftover {
                kind: Kind::File,
                name: dir.join(name).display().to_string(),
                place: place.clone(),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

pub fn remove_all(leftovers: &[Leftover]) -> Vec<Dropped> {
    leftovers
        .iter()
        .map(|leftover| match std::fs::remove_file(&leftover.name) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(CleanError::not_dropped(leftover, e))
            }
            _ => Ok(leftover.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_database_files_named_by_a_case_key_of_the_run_are_found() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "lp-r1.30.ex-30-01-sqlite.db",
            "lp-r1.30.ex-30-01-sqlite.db-wal",
            "lp-r2.30.ex-30-01-sqlite.db",
            "audit.db",
            "lp-r1.30.notes.txt",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let names = |runs: &Runs| -> Vec<String> {
            find(dir.path(), runs)
                .unwrap()
                .into_iter()
                .map(|l| l.name.rsplit('/').next().unwrap().to_owned())
                .collect()
        };
        let one = Runs::One {
            run_id: "r1".into(),
            schemas: Vec::new(),
        };
        assert_eq!(
            names(&one),
            [
                "lp-r1.30.ex-30-01-sqlite.db",
                "lp-r1.30.ex-30-01-sqlite.db-wal"
            ]
        );
        assert_eq!(names(&Runs::All).len(), 3);
        let found = find(dir.path(), &one).unwrap();
        assert!(remove_all(&found).iter().all(Result::is_ok));
        assert_eq!(names(&Runs::All), ["lp-r2.30.ex-30-01-sqlite.db"]);
    }
}
