//! `lessonprobe remote`: one selector of a checkpoint on the authorized host, reported like
//! any probe. Without TICKETFLOW_REMOTE_TESTS=1 it is PENDING and nothing connects.

use std::path::PathBuf;

use super::run::{execute_and_report, new_run_id, RunBuilder};
use crate::checkpoint::{Catalog, Checkpoint, Probe, ProbeKind, Selection};
use crate::cli::RemoteArgs;
use crate::exit::{Code, Error};
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
            timeout: Some(args.timeout),
            ..Probe::new(
                "remote",
                "selector",
                format!("remote selector {} passes", args.selector),
                ProbeKind::Remote {
                    selector: args.selector.clone(),
                    script: None,
                },
            )
        }],
    };
    let selection = Selection {
        checkpoints: vec![(&checkpoint, checkpoint.probes.iter().collect())],
    };
    let junit = args
        .junit
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("reports/remote-{:02}.xml", args.checkpoint)));
    let (config, reporting) =
        RunBuilder::remote(&args.hosts, args.timeout, junit, args.format, args.strict)
            .build(&selection)?;
    execute_and_report(&selection, &config, &new_run_id(), &reporting)
}
