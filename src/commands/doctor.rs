//! `lessonprobe doctor`: every preflight check a run with these options would make, made now,
//! as a table (check, result, the fix) or JSON; exit 1 when one fails.

use serde::Serialize;

use crate::cli::DoctorArgs;
use crate::environment::provision::{self, Making};
use crate::exit::{Code, Error};
use crate::render;
use crate::run::preflight;

use super::course::OpenCourse;

#[derive(Serialize)]
struct Row {
    check: String,
    result: &'static str,
    problem: Option<String>,
    fix: Option<String>,
}

pub fn doctor(args: DoctorArgs) -> Result<Code, Error> {
    let mut course = OpenCourse::find(&args.course, None)?;
    let mut rows = Vec::new();
    if let Some(open) = course.as_mut() {
        let settings = &mut open.course.settings;
        let given = args.course.python.is_some();
        let declared = settings.environment.as_ref();
        // What a run would use: the cached environment, made or not.
        match provision::cached(declared, given, &settings.python, Making::Never) {
            Ok(None) => {}
            Ok(Some(cached)) if cached.complete => {
                settings.python = cached.python.display().to_string();
            }
            Ok(Some(cached)) => rows.push(Row {
                check: "environment".into(),
                result: "not made",
                problem: Some(format!(
                    "the environment of {} is not made yet ({})",
                    declared.map_or_else(Default::default, |d| d.shown.display().to_string()),
                    cached.dir.display()
                )),
                fix: Some("run lessonprobe env (a run makes it too)".into()),
            }),
            Err(e) => rows.push(Row {
                check: "environment".into(),
                result: "FAILED",
                problem: Some(e.to_string()),
                fix: Some("give --python an interpreter to build it from".into()),
            }),
        }
    }
    let sql = super::run::sql_targets(&args.db)?;
    let kafka = super::kafka_target(&args.kafka)?;
    let remote = super::remote_host(&args.hosts, false)?;
    // A declared service's check starts it: doctor tells whether each can start, then stops it.
    let services = std::sync::Arc::new(crate::services::Running::in_folder(std::path::Path::new(
        ".",
    )));
    let checks = super::run::preflight::checks(
        course.as_ref().map(|c| &c.course),
        &sql,
        &kafka,
        &remote,
        &services,
    );
    let wanted: Vec<&crate::run::Check> = checks.iter().collect();
    let mut failed = rows.iter().any(|r| r.result == "FAILED");
    let answers = preflight::run_all(&wanted);
    services.stop_all();
    for (check, problem) in answers {
        failed |= problem.is_some();
        rows.push(Row {
            check: check.name.clone(),
            result: if problem.is_some() { "FAILED" } else { "ok" },
            problem: problem.as_ref().map(|p| p.what.clone()),
            fix: problem.map(|p| p.fix),
        });
    }
    if rows.is_empty() && args.format == render::TableFormat::Table {
        outln!("nothing to check: no course, the embedded broker, no PostgreSQL, no remote host");
        return Ok(Code::Ok);
    }
    let text = render::rows(args.format, &rows).map_err(|e| Error::Operation(e.to_string()))?;
    outln!("{text}");
    Ok(if failed { Code::ProbesFailed } else { Code::Ok })
}
