//! `lessonprobe list`: checkpoints and probes with their kind and where each runs.

use crate::checkpoint::{Catalog, ProbeKind, Selection};
use crate::cli::ListArgs;
use crate::exit::{Code, Error};

pub fn list(args: ListArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    if let Some(course) = super::course::OpenCourse::find(&args.course, None)? {
        course.attach(&mut catalog, false)?;
    }
    let selection = Selection::new(&catalog, args.lesson, &[])?;
    for (checkpoint, probes) in &selection.checkpoints {
        println!(
            "lesson {}: {} ({})",
            checkpoint.lesson,
            checkpoint.title,
            checkpoint.source.display()
        );
        for probe in probes {
            let runs_on = match &probe.kind {
                ProbeKind::Prose { .. } => "-".to_owned(),
                ProbeKind::Remote { .. } => "remote host".to_owned(),
                ProbeKind::Command { .. } => "local command".to_owned(),
                ProbeKind::Document(doc) => format!("{}:{}", doc.file.display(), doc.line),
                ProbeKind::Builtin { .. } if probe.backends.is_empty() => "in process".to_owned(),
                ProbeKind::Builtin { .. } => probe
                    .backends
                    .iter()
                    .map(|b| b.label())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            println!(
                "  {:<24} {:<66} {:<8} {}",
                probe.id,
                probe.name,
                probe.kind.label(),
                runs_on
            );
        }
    }
    Ok(Code::Ok)
}
