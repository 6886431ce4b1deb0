//! The preflight checks of a run, each with its fix text from the component that owns what it
//! checks: the course's interpreter and requirements (`environment`), the broker and PostgreSQL
//! (`ticketflow`), the authorized host (`remote`), the course's declared services (`services`,
//! whose check starts the service). This only gathers them; the runner schedules
//! them.

use std::sync::Arc;
use std::time::Duration;

use lessonprobe_probes::DbTarget;
use ticketflow::kafka::Broker;
use ticketflow::store::preflight as postgres;
use ticketflow::KafkaTarget;

use crate::lesson::Course;
use crate::run::{Check, Need, Problem, RemoteHost, SqlTarget};
use crate::services::Running;

/// Every check a run with this course, these databases, broker and remote host may need; the
/// runner makes only those some case needs.
pub(in crate::commands) fn checks(
    course: Option<&Course>,
    sql: &[SqlTarget],
    kafka: &KafkaTarget,
    remote: &RemoteHost,
    services: &Arc<Running>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    if let Some(course) = course {
        let python = course.settings.python.clone();
        let declared = course.settings.environment.clone();
        if course.has_notebooks() {
            let (python, declared) = (python.clone(), declared.clone());
            checks.push(check(Need::Kernel, "jupyter kernel".into(), move |limit| {
                crate::environment::check_kernel(&python, declared.as_ref(), limit).map_err(|e| {
                    Problem {
                        what: e.to_string(),
                        fix: e.fix(),
                    }
                })
            }));
        }
        checks.push(check(Need::Interpreter, "python".into(), move |limit| {
            crate::environment::check(&python, declared.as_ref(), limit).map_err(|e| Problem {
                what: e.to_string(),
                fix: e.fix(),
            })
        }));
        for service in course.settings.services.values() {
            let (running, declared) = (services.clone(), service.clone());
            let mut check = check(
                Need::Service(service.name.clone()),
                format!("service {}", service.name),
                move |_| {
                    running.start(&declared).map_err(|e| Problem {
                        what: e.to_string(),
                        fix: e.fix(),
                    })
                },
            );
            // Its own deadline is its ready_timeout; this leaves it the time to say so.
            check.limit = service.ready_timeout + Duration::from_secs(3);
            checks.push(check);
        }
    }
    if let KafkaTarget::Bootstrap { servers, .. } = kafka {
        let target = kafka.clone();
        checks.push(check(
            Need::Kafka,
            format!("kafka {servers}"),
            move |limit| {
                Broker::answers(&target, limit).map_err(|e| Problem {
                    what: e.to_string(),
                    fix: Broker::unanswered_fix("--kafka"),
                })
            },
        ));
    }
    for target in sql {
        let DbTarget::Postgres(url) = &target.target else {
            continue;
        };
        let (need, url) = (Need::Postgres(url.clone()), url.clone());
        checks.push(check(need, postgres::place_of(&url), move |limit| {
            postgres::answers(&url, limit).map_err(|e| Problem {
                what: e.to_string(),
                fix: postgres::fix("--db"),
            })
        }));
    }
    if let RemoteHost::Host(host) = remote {
        let name = format!("host {}", host.name);
        let host = host.clone();
        checks.push(check(Need::RemoteHost, name, move |limit| {
            crate::remote::answers(&host, limit).map_err(|e| Problem {
                what: e.to_string(),
                fix: crate::remote::UNANSWERED_FIX.into(),
            })
        }));
    }
    checks
}

fn check(
    need: Need,
    name: String,
    run: impl Fn(Duration) -> Result<(), Problem> + Send + Sync + 'static,
) -> Check {
    Check {
        need,
        name,
        limit: crate::run::preflight::CHECK_LIMIT,
        run: Arc::new(run),
    }
}
