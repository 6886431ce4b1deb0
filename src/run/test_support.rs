//! A small real run for unit tests of the runner and its reporters: four command and prose
//! cases of a checkpoint written to a temporary folder, run with one worker.

use std::path::PathBuf;
use std::time::Duration;

use lessonprobe_testkit::{Manifest, Probe};

use super::RunConfig;
use super::{execute, FailurePolicy, Interrupt, Interruption, Plan, RemoteFlag, RemoteHost};
use super::{RunEvent, RunSummary};
use crate::checkpoint::{Catalog, Selection};

/// Lesson 90's four cases: two that print what they expect, a prose exercise, and one that
/// fails (its id on line 29 of `90.toml`).
fn manifest() -> String {
    Manifest::lesson(90, "events")
        .probe(
            Probe::command("first", ["echo", "one"])
                .name("prints")
                .expect("one"),
        )
        .probe(
            Probe::command("second", ["echo", "two"])
                .name("prints-too")
                .expect("two"),
        )
        .probe(Probe::prose("prose", "why?").name("answered-in-writing"))
        .probe(Probe::script("third", "exit 3").name("fails"))
        .to_string()
}

/// Runs the four cases as run `t` (PASS, PASS, SKIP, FAIL), handing every event to `sink`;
/// with `interrupt_at`, Ctrl-C is requested as that case starts.
pub(crate) fn run(interrupt_at: Option<usize>, sink: impl FnMut(&RunEvent<'_>)) -> RunSummary {
    run_manifest(&manifest(), FailurePolicy::default(), interrupt_at, sink)
}

/// Runs lesson 90 of `manifest` as run `t` under `failure`, as [`run`] does.
pub(crate) fn run_manifest(
    manifest: &str,
    failure: FailurePolicy,
    interrupt_at: Option<usize>,
    mut sink: impl FnMut(&RunEvent<'_>),
) -> RunSummary {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("90.toml"), manifest).unwrap();
    let catalog = Catalog::load(Some(dir.path()), &[]).unwrap();
    let selection = Selection::new(&catalog, Some(90), &[]).unwrap();
    let config = RunConfig {
        jobs: 1,
        default_timeout: Duration::from_secs(10),
        course_root: PathBuf::from("."),
        sql: Vec::new(),
        kafka: lessonprobe_probes::KafkaTarget::Embedded,
        remote: RemoteHost::Disabled {
            flag: RemoteFlag::Unset,
            host: None,
        },
        failure,
        preflight: Vec::new(),
        services: std::sync::Arc::new(crate::services::Running::in_folder(dir.path())),
        first: Default::default(),
    };
    let plan = Plan::new(&selection, &config);
    let interrupt = Interrupt::new();
    execute(&plan, &config, "t", &interrupt, |event| {
        if let (RunEvent::CaseStarted { index, .. }, Some(at)) = (event, interrupt_at) {
            if *index == at {
                interrupt.request(Interruption::Interrupt);
            }
        }
        sink(event);
    })
}

/// `line` with the temporary folder before `90.toml` removed, so messages that name where a
/// probe is written compare equal across runs.
pub(crate) fn without_temp_dir(line: &str) -> String {
    match line.find("/90.toml") {
        Some(i) => {
            let start = line[..i].rfind(' ').map_or(0, |s| s + 1);
            format!("{}{}", &line[..start], &line[i + 1..])
        }
        None => line.to_owned(),
    }
}

/// An outcome of a case `id` of `lesson` with `verdict`, for tests of what reporters write.
pub(crate) fn outcome(lesson: u32, id: &str, verdict: super::Verdict) -> super::Outcome {
    super::Outcome {
        lesson,
        checkpoint: format!("lesson {lesson}"),
        id: id.to_owned(),
        name: "case".into(),
        claim: "c".into(),
        kind: "command",
        backend: None,
        verdict,
        message: None,
        diff: None,
        output: String::new(),
        expected: None,
        answer: None,
        duration: Duration::ZERO,
        host: None,
        remote_case: None,
        properties: Vec::new(),
        file: None,
        line: None,
        cell: None,
        code: None,
        checkpoint_file: format!("checkpoints/{lesson}.toml"),
        attempts: 1,
        failed_attempts: Vec::new(),
        rewrites: None,
    }
}
