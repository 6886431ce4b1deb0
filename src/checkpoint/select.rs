//! Selection of probes by lesson and by `--select` patterns over probe ids and names.

use super::manifest::{Checkpoint, Probe};
use super::{Catalog, CatalogError};

/// The checkpoints and probes a run covers, in catalog order.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    pub checkpoints: Vec<(&'a Checkpoint, Vec<&'a Probe>)>,
}

impl<'a> Selection<'a> {
    /// `lesson`: one checkpoint, or all. `patterns`: each must match a probe's id or name
    /// (case-insensitive; `*` matches any run of characters, otherwise a substring matches).
    pub fn new(
        catalog: &'a Catalog,
        lesson: Option<u32>,
        patterns: &[String],
    ) -> Result<Self, CatalogError> {
        let chosen: Vec<&Checkpoint> = match lesson {
            Some(n) => vec![catalog.checkpoint(n)?],
            None => catalog.checkpoints.iter().collect(),
        };
        for pattern in patterns {
            if pattern.trim().is_empty() {
                return Err(CatalogError::EmptyPattern);
            }
            let hit = chosen
                .iter()
                .any(|c| c.probes.iter().any(|p| matches(pattern, p)));
            if !hit {
                return Err(CatalogError::NoMatch {
                    pattern: pattern.clone(),
                    lesson,
                });
            }
        }
        let checkpoints = chosen
            .into_iter()
            .map(|c| {
                let probes = c
                    .probes
                    .iter()
                    .filter(|p| patterns.is_empty() || patterns.iter().any(|pat| matches(pat, p)));
                (c, probes.collect::<Vec<_>>())
            })
            .filter(|(_, probes)| !probes.is_empty())
            .collect();
        Ok(Selection { checkpoints })
    }

    pub fn probe_count(&self) -> usize {
        self.checkpoints.iter().map(|(_, p)| p.len()).sum()
    }
}

/// Whether `--select pattern` selects `probe`.
pub fn matches(pattern: &str, probe: &Probe) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    [&probe.id, &probe.name].iter().any(|field| {
        let field = field.to_ascii_lowercase();
        if pattern.contains('*') {
            glob(&pattern, &field)
        } else {
            field.contains(&pattern)
        }
    })
}

/// `*`-only glob over the whole text.
fn glob(pattern: &str, text: &str) -> bool {
    crate::wildcard::matches(pattern, "*", text)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_whole_text_with_stars() {
        assert!(glob("ex-30-*", "ex-30-01"));
        assert!(glob("*dup*", "sql-duplicate"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        assert!(!glob("ex-29-*", "ex-30-01"));
        assert!(!glob("ab*ba", "aba"));
    }
}
