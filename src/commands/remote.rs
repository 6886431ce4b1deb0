//! `lessonprobe remote`: one selector of a checkpoint on the authorized host, reported like
//! any probe. Without TICKETFLOW_REMOTE_TESTS=1 it is PENDING and nothing connects.

use std::path::PathBuf;

use super::run::{execute_and_report, new_run_id, Reporting};
use crate::checkpoint::{Catalog, Checkpoint, Probe, ProbeKind, Selection};
use crate::cli::RemoteArgs;
use crate::exit::{Code, Error};
use crate::run::RunConfig;
use crate::selector::validate_selector;

pub fn remote(args: RemoteArgs) -> Result<Code, Error> {
    validate_selector(&args.selector).map_err(|e| Error::Usage(format!("--selector: {e}")))?;
    let catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let title = catalog.checkpoint(args.checkpoint)?.title.clone();
    let checkpoint = Checkpoint {
        lesson: args.checkpoint,
        title,
        source: PathBuf::from("--selector"),
        document: None,
        probes: vec![Probe {
            id: "remote".into(),
            name: "selector".into(),
            claim: format!("remote selector {} passes", args.selector),
            kind: ProbeKind::Remote {
                selector: args.selector.clone(),
                script: None,
            },
            backends: Vec::new(),
            timeout: Some(args.timeout),
            expect: None,
            line: None,
            doc: None,
            drift: None,
            retries: None,
        }],
    };
    let selection = Selection {
        checkpoints: vec![(&checkpoint, checkpoint.probes.iter().collect())],
    };
    let config = RunConfig {
        jobs: 1,
        default_timeout: args.timeout,
        course_root: PathBuf::from("."),
        sql: Vec::new(),
        kafka: lessonprobe_probes::KafkaTarget::Embedded,
        remote: super::remote_host(&args.hosts, true)?,
        failure: crate::run::FailurePolicy::default(),
        preflight: Vec::new(),
        first: Default::default(),
    };
    let reporting = Reporting {
        junit: Some(args.junit.clone().unwrap_or_else(|| {
            PathBuf::from(format!("reports/remote-{:02}.xml", args.checkpoint))
        })),
        format: args.format,
        verbose: false,
        strict: args.strict,
        junit_family: crate::report::junit::Family::default(),
        extras: Default::default(),
    };
    execute_and_report(&selection, &config, &new_run_id(), &reporting)
}
