//! Steps that build on each other (`Continues: EX-31-01`): a step runs in a copy of the folder
//! the step it continues left, after it; a step whose predecessor did not pass is not run, and
//! says which one failed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use lessonprobe_probes::Cancel;

use super::document::{CodeProbe, DocBody, DocProbe};
use super::scratch::{run_step, DocRun, DocVerdict, Workspace};

/// What a step left for the steps that continue it.
#[derive(Debug)]
pub enum Left {
    /// It passed: the folder as it left it.
    Passed(Workspace),
    /// It did not pass, or did not run: why, as the next step's ERROR says it.
    NotPassed(String),
}

/// Runs `probe` after what the step it continues `left` (nothing for a first step) and says
/// what it leaves in turn.
pub fn run_after(
    probe: &DocProbe,
    code: &CodeProbe,
    left: Option<&Left>,
    deadline: Duration,
    cancel: &Cancel,
) -> (DocRun, Left) {
    let after = match left {
        Some(Left::NotPassed(why)) => {
            let run = DocRun::not_run(&format!("not run: {why}"));
            let next = Left::NotPassed(format!("{} was not run ({why})", probe.id));
            return (run, next);
        }
        Some(Left::Passed(workspace)) => Some(workspace),
        None => None,
    };
    let (run, workspace) = run_step(probe, code, after, deadline, cancel);
    let left = match (run.verdict, workspace) {
        (DocVerdict::Pass, Some(workspace)) => Left::Passed(workspace),
        _ => Left::NotPassed(format!("{} failed", probe.id)),
    };
    (run, left)
}

/// The code steps of `steps` (one lesson's document probes, in document order), one after
/// another, each continuing step after its predecessor; results in the steps' order. A step
/// whose predecessor is not among `steps` is not run.
pub fn run_in_order(
    steps: &[(&DocProbe, &CodeProbe)],
    default_timeout: Duration,
    cancel: &Cancel,
) -> Vec<DocRun> {
    let continued: HashSet<&str> = steps
        .iter()
        .filter_map(|(_, code)| code.continues.as_ref().map(|c| c.id.as_str()))
        .collect();
    let mut left: HashMap<&str, Arc<Left>> = HashMap::new();
    let mut runs = Vec::with_capacity(steps.len());
    for (probe, code) in steps {
        let before = code.continues.as_ref().map(|c| {
            left.get(c.id.as_str()).cloned().unwrap_or_else(|| {
                Arc::new(Left::NotPassed(format!("{} is not part of this run", c.id)))
            })
        });
        let deadline = code.timeout.unwrap_or(default_timeout);
        let (run, after) = run_after(probe, code, before.as_deref(), deadline, cancel);
        if continued.contains(probe.id.as_str()) {
            left.insert(probe.id.as_str(), Arc::new(after));
        }
        runs.push(run);
    }
    runs
}

/// `wanted` (of one lesson) with every step they continue, directly or not, taken from `all`
/// (the lesson's document probes in document order); in document order.
pub fn with_predecessors<'a>(all: &[&'a DocProbe], wanted: &[&DocProbe]) -> Vec<&'a DocProbe> {
    let mut needed: HashSet<&str> = wanted.iter().map(|p| p.id.as_str()).collect();
    // A step continues one before it, so one pass from the end finds every predecessor.
    for probe in all.iter().rev() {
        if !needed.contains(probe.id.as_str()) {
            continue;
        }
        if let DocBody::Code(code) = &probe.body {
            if let Some(c) = &code.continues {
                needed.insert(c.id.as_str());
            }
        }
    }
    all.iter()
        .copied()
        .filter(|p| needed.contains(p.id.as_str()))
        .collect()
}

/// Groups of `steps` (indices) that a chain joins: each step with every step it continues or
/// is continued by; each group in document order, steps without a chain alone.
pub fn groups(steps: &[(&DocProbe, &CodeProbe)]) -> Vec<Vec<usize>> {
    let mut group_of: Vec<usize> = (0..steps.len()).collect();
    for (i, (_, code)) in steps.iter().enumerate() {
        let Some(c) = &code.continues else { continue };
        if let Some(j) = steps
            .iter()
            .position(|(p, _)| p.id == c.id && p.lesson == steps[i].0.lesson)
        {
            group_of[i] = group_of[j];
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    for (i, g) in group_of.iter().enumerate() {
        match index.get(g) {
            Some(&k) => groups[k].push(i),
            None => {
                index.insert(*g, groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn doc(text: &str) -> super::super::LessonDoc {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(dir.path().join("project/seed.txt"), "seed\n").unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        let doc = super::super::document::parse(
            &course.settings,
            31,
            Path::new("lessons/31.md"),
            text.as_bytes(),
        )
        .unwrap();
        // The run-from folder must outlive the parse for the runs below.
        std::mem::forget(dir);
        doc
    }

    const CHAIN: &str = "### Answer EX-31-01 [code]\n\nRun:\n\n```sh\necho one > step.txt\n```\n\n### Answer EX-31-02 [code]\n\nContinues: EX-31-01\n\nRun:\n\n```sh\ncat seed.txt step.txt; echo two >> step.txt\n```\n\nExpected output:\n\n```text\nseed\none\n```\n\n### Answer EX-31-03 [code]\n\n接续：EX-31-02\n\nRun:\n\n```sh\ncat step.txt\n```\n\nExpected output:\n\n```text\none\ntwo\n```\n\n### Answer EX-31-04 [code]\n\nRun:\n\n```sh\ntest ! -e step.txt\n```\n";

    fn steps(d: &super::super::LessonDoc) -> Vec<(&DocProbe, &CodeProbe)> {
        d.probes
            .iter()
            .filter_map(|p| match &p.body {
                DocBody::Code(c) => Some((p, c.as_ref())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn each_step_sees_what_the_one_it_continues_left_and_others_start_fresh() {
        let d = doc(CHAIN);
        let runs = run_in_order(&steps(&d), Duration::from_secs(10), &Cancel::new());
        crate::lesson::isolation::release_all();
        let verdicts: Vec<_> = runs
            .iter()
            .map(|r| (r.verdict, r.message.clone()))
            .collect();
        assert!(
            verdicts.iter().all(|(v, _)| *v == DocVerdict::Pass),
            "{verdicts:?}"
        );
        assert_eq!(groups(&steps(&d)), vec![vec![0, 1, 2], vec![3]]);
    }

    #[test]
    fn a_failed_predecessor_leaves_its_successors_not_run() {
        let d = doc(&CHAIN.replace("echo one > step.txt", "exit 4"));
        let runs = run_in_order(&steps(&d), Duration::from_secs(10), &Cancel::new());
        crate::lesson::isolation::release_all();
        assert_eq!(runs[0].verdict, DocVerdict::Fail);
        assert_eq!(runs[1].verdict, DocVerdict::Error);
        assert_eq!(runs[1].message.as_deref(), Some("not run: EX-31-01 failed"));
        assert_eq!(
            runs[2].message.as_deref(),
            Some("not run: EX-31-02 was not run (EX-31-01 failed)")
        );
        assert_eq!(runs[3].verdict, DocVerdict::Pass);
    }

    #[test]
    fn predecessors_are_found_transitively_in_document_order() {
        let d = doc(CHAIN);
        let all: Vec<&DocProbe> = d.probes.iter().collect();
        let picked = with_predecessors(&all, &[&d.probes[2]]);
        let ids: Vec<&str> = picked.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["EX-31-01", "EX-31-02", "EX-31-03"]);
        let picked = with_predecessors(&all, &[&d.probes[3]]);
        assert_eq!(picked.len(), 1);
    }
}
