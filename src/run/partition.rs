//! `--partition K/N`: the selected probes split into N shards by their place in the selection
//! (probe i goes to shard i mod N + 1, as nextest's `count:K/N`), so that N jobs of a CI
//! matrix run every probe exactly once. A probe's backends stay together in its shard, and the
//! steps of a lesson chain (`Continues:`) in the shard of its first step.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;

use crate::checkpoint::{ProbeKind, Selection};
use crate::lesson::DocBody;

/// Shard `shard` of `count`, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub shard: u32,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--partition {given:?}: {why} (write K/N with 1 <= K <= N, e.g. 2/3)")]
pub struct PartitionError {
    given: String,
    why: &'static str,
}

impl FromStr for Partition {
    type Err = PartitionError;

    /// `K/N`, or `count:K/N` as nextest writes it.
    fn from_str(given: &str) -> Result<Partition, PartitionError> {
        let error = |why| PartitionError {
            given: given.to_owned(),
            why,
        };
        let text = given.strip_prefix("count:").unwrap_or(given);
        let (shard, count) = text
            .split_once('/')
            .ok_or_else(|| error("not of the form K/N"))?;
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| error("K and N must be whole numbers"))
        };
        let (shard, count) = (number(shard)?, number(count)?);
        if count == 0 {
            return Err(error("N must be at least 1"));
        }
        if shard == 0 || shard > count {
            return Err(error("K must be from 1 to N"));
        }
        Ok(Partition { shard, count })
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.shard, self.count)
    }
}

/// What keeps probes of a checkpoint in one shard: a chain's step (by id), or a document's
/// session blocks (by file).
#[derive(Debug, PartialEq, Eq, Hash)]
enum Together {
    Step(String),
    Sessions(PathBuf),
}

impl Partition {
    /// Keeps only this shard's probes; checkpoints left with none are dropped. A lesson step
    /// that continues another goes to the shard of the step it continues (which comes before
    /// it), and a session block to the shard of its document's first selected block, so that a
    /// chain and a document's sessions each run whole in one shard.
    pub fn keep(&self, selection: &mut Selection<'_>) {
        let mut place = 0u64;
        for (_, probes) in &mut selection.checkpoints {
            let mut went: HashMap<Together, bool> = HashMap::new();
            probes.retain(|probe| {
                let ProbeKind::Document(doc) = &probe.kind else {
                    return self.next(&mut place);
                };
                let (follows, leads) = match &doc.body {
                    DocBody::Code(code) => (
                        code.continues
                            .as_ref()
                            .map(|c| Together::Step(c.id.clone())),
                        Together::Step(doc.id.clone()),
                    ),
                    DocBody::Session(_) => (
                        Some(Together::Sessions(doc.file.clone())),
                        Together::Sessions(doc.file.clone()),
                    ),
                    _ => (None, Together::Step(doc.id.clone())),
                };
                let mine = match follows.and_then(|f| went.get(&f).copied()) {
                    Some(mine) => mine,
                    None => self.next(&mut place),
                };
                went.entry(leads).or_insert(mine);
                mine
            });
        }
        selection
            .checkpoints
            .retain(|(_, probes)| !probes.is_empty());
    }

    /// Whether the probe at `place` in the selection is this shard's; moves `place` on.
    fn next(&self, place: &mut u64) -> bool {
        let mine = *place % u64::from(self.count) + 1 == u64::from(self.shard);
        *place += 1;
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Catalog;

    #[test]
    fn shards_are_parsed_and_nonsense_refused_in_one_line() {
        assert_eq!(
            "2/3".parse::<Partition>(),
            Ok(Partition { shard: 2, count: 3 })
        );
        assert_eq!(
            "count:3/3".parse::<Partition>(),
            Ok(Partition { shard: 3, count: 3 })
        );
        for (bad, why) in [
            ("0/3", "K must be from 1 to N"),
            ("4/3", "K must be from 1 to N"),
            ("1/0", "N must be at least 1"),
            ("x", "not of the form K/N"),
            ("a/b", "K and N must be whole numbers"),
            ("-1/3", "K and N must be whole numbers"),
        ] {
            let e = bad.parse::<Partition>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("--partition {bad:?}: {why}")), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }

    #[test]
    fn the_shards_cover_every_probe_once() {
        let dir = tempfile::tempdir().unwrap();
        for lesson in [91, 92] {
            let mut text = format!("[checkpoint]\nlesson = {lesson}\ntitle = \"t\"\n");
            for i in 0..4 {
                text.push_str(&format!("[[probe]]\nid = \"p{i}\"\nname = \"n\"\nclaim = \"c\"\nkind = \"prose\"\nquestion = \"q\"\n"));
            }
            std::fs::write(dir.path().join(format!("{lesson}.toml")), text).unwrap();
        }
        let catalog = Catalog::load(Some(dir.path()), &[]).unwrap();
        let names = |selection: &Selection<'_>| -> Vec<String> {
            selection
                .checkpoints
                .iter()
                .flat_map(|(c, probes)| probes.iter().map(|p| format!("{}/{}", c.lesson, p.id)))
                .collect()
        };
        let all = names(&Selection::new(&catalog, None, &[]).unwrap());
        let mut union = Vec::new();
        for shard in 1..=3 {
            let mut selection = Selection::new(&catalog, None, &[]).unwrap();
            Partition { shard, count: 3 }.keep(&mut selection);
            let mine = names(&selection);
            assert!(mine.len() == 2 || mine.len() == 3, "{mine:?}");
            union.extend(mine);
        }
        union.sort();
        let mut expected = all.clone();
        expected.sort();
        assert_eq!(union, expected);
    }
}
