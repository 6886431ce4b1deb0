//! The run plan: every selected probe becomes one case per backend, each decided up front as
//! Run, SKIP(reason) or PENDING(reason). Nothing selected ever disappears from the plan. It
//! carries which services each chain of lesson steps holds.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use lessonprobe_probes::DbTarget;

use super::RunConfig;
use crate::checkpoint::{Backend, Checkpoint, Probe, ProbeKind, Selection};
use crate::lesson::{DocBody, Hold};

/// One SQL backend chosen with `--db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlTarget {
    pub backend: Backend,
    pub target: DbTarget,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    Skip(String),
    Pending(String),
    /// The course's own verifier is absent: the verdicts of the lesson document's probes
    /// answer this probe, once they are known.
    FromDocument,
    /// A preflight check this case needs failed: NOT RUN, with its message.
    NotRun(String),
    /// This case is a failed preflight check: ERROR, with what is wrong and the fix.
    Broken(String),
}

#[derive(Debug, Clone)]
pub struct PlannedCase<'a> {
    pub checkpoint: &'a Checkpoint,
    pub probe: &'a Probe,
    /// The SQL backend of this case, for probes that run on SQL.
    pub sql: Option<SqlTarget>,
    pub decision: Decision,
}

impl PlannedCase<'_> {
    /// The SQL backend's label, for a case that runs on one.
    pub fn backend(&self) -> Option<&'static str> {
        self.sql.as_ref().map(|s| s.backend.label())
    }

    /// The case's name in reports, as its outcomes carry it.
    pub fn display_name(&self) -> String {
        super::outcome::display_name(&self.probe.id, &self.probe.name, self.backend(), None)
    }

    /// The key this case's names on shared services carry in run `run_id`: topics, groups,
    /// schemas and database files of the same probe id in two lessons never meet.
    pub fn case_key(&self, run_id: &str) -> String {
        crate::case_key::case_key(
            run_id,
            self.checkpoint.lesson,
            &self.probe.id,
            self.backend(),
        )
    }
}

#[derive(Debug, Clone)]
pub struct Plan<'a> {
    pub cases: Vec<PlannedCase<'a>>,
    /// The services the chain of each lesson step holds, by (lesson, step id), for the steps
    /// whose chain faults some.
    pub holds: HashMap<(u32, String), Hold>,
}

impl<'a> Plan<'a> {
    pub fn new(selection: &Selection<'a>, config: &RunConfig) -> Plan<'a> {
        let mut cases = Vec::new();
        for (checkpoint, probes) in &selection.checkpoints {
            // A selected lesson step runs after the steps it continues, which run and report too.
            for probe in checkpoint.with_predecessors(probes) {
                for (sql, mut decision) in decide(probe, config) {
                    if matches!(decision, Decision::Skip(_))
                        && super::document::answers_for_document(checkpoint, probe)
                    {
                        decision = Decision::FromDocument;
                    }
                    cases.push(PlannedCase {
                        checkpoint,
                        probe,
                        sql,
                        decision,
                    });
                }
            }
        }
        let holds = crate::lesson::holds(cases.iter().filter_map(|c| match &c.probe.kind {
            ProbeKind::Document(doc) => Some(doc.as_ref()),
            _ => None,
        }));
        let mut plan = Plan { cases, holds };
        plan.put_first(&config.first);
        plan
    }

    /// The services the chain of `case` holds, when it is a lesson step whose chain faults some.
    pub fn hold(&self, case: &PlannedCase<'_>) -> Option<&Hold> {
        match &case.probe.kind {
            ProbeKind::Document(doc) => self.holds.get(&(doc.lesson, doc.id.clone())),
            _ => None,
        }
    }

    /// Moves the cases of the probes in `first` to the front, each with what runs beside it:
    /// a probe of a lesson document brings all of that lesson's document probes, so a step
    /// still follows the steps it continues and its document's sessions keep their order.
    /// The order within both parts stays the plan's.
    fn put_first(&mut self, first: &BTreeSet<(u32, String)>) {
        if first.is_empty() {
            return;
        }
        let group = |case: &PlannedCase<'_>| match case.probe.kind {
            ProbeKind::Document(_) => (case.checkpoint.lesson, None),
            _ => (case.checkpoint.lesson, Some(case.probe.id.clone())),
        };
        let leading: BTreeSet<_> = self
            .cases
            .iter()
            .filter(|c| first.contains(&(c.checkpoint.lesson, c.probe.id.clone())))
            .map(group)
            .collect();
        // A stable sort: false (leading) before true.
        self.cases.sort_by_key(|c| !leading.contains(&group(c)));
    }
}

fn decide(probe: &Probe, config: &RunConfig) -> Vec<(Option<SqlTarget>, Decision)> {
    let static_decision = match &probe.kind {
        ProbeKind::Prose { .. } => Some(Decision::Skip(
            "prose exercise: answered in writing, no executable form".into(),
        )),
        ProbeKind::Document(doc) if matches!(doc.body, DocBody::Prose { .. }) => Some(
            Decision::Skip("prose exercise: answered in writing, no executable form".into()),
        ),
        ProbeKind::Remote { selector, .. } => config
            .remote
            .pending_reason(selector)
            .map(Decision::Pending),
        ProbeKind::Command { requires, cwd, .. } => {
            missing_requirement(requires, cwd.as_deref(), &config.course_root)
        }
        _ => None,
    };
    let supported: Vec<Backend> = probe
        .backends
        .iter()
        .copied()
        .filter(|b| b.is_sql())
        .collect();
    if supported.is_empty() {
        return vec![(None, static_decision.unwrap_or(Decision::Run))];
    }
    let mut cases: Vec<(Option<SqlTarget>, Decision)> = config
        .sql
        .iter()
        .filter(|t| supported.contains(&t.backend))
        .map(|t| {
            (
                Some(t.clone()),
                static_decision.clone().unwrap_or(Decision::Run),
            )
        })
        .collect();
    if cases.is_empty() {
        let needs: Vec<&str> = supported.iter().map(|b| b.label()).collect();
        let chosen: Vec<&str> = config.sql.iter().map(|t| t.backend.label()).collect();
        cases.push((
            None,
            Decision::Skip(format!(
                "needs SQL backend {}; --db selected {}",
                needs.join(" or "),
                chosen.join(", ")
            )),
        ));
    }
    cases
}

fn missing_requirement(
    requires: &[std::path::PathBuf],
    cwd: Option<&Path>,
    root: &Path,
) -> Option<Decision> {
    let base = cwd.map_or_else(|| root.to_owned(), |c| root.join(c));
    requires.iter().find(|r| !base.join(r).exists()).map(|r| {
        Decision::Skip(format!(
            "needs {} in the course checkout; not found under {} (point --course at the checkout)",
            r.display(),
            base.display()
        ))
    })
}
