//! The preflight checks of a run, each from the component that owns what it checks: the
//! course's interpreter and requirements (`environment`), the broker and PostgreSQL
//! (`ticketflow`), the authorized host (`remote`). The runner schedules them.

use std::sync::Arc;

use lessonprobe_probes::DbTarget;
use ticketflow::kafka::Broker;
use ticketflow::KafkaTarget;

use crate::run::{Check, Need, Problem, RemoteHost, SqlTarget};

/// Every check a run with this course, these databases, broker and remote host may need; the
/// runner makes only those some case needs.
pub(in crate::commands) fn checks(
    course: Option<&crate::lesson::Course>,
    sql: &[SqlTarget],
    kafka: &KafkaTarget,
    remote: &RemoteHost,
) -> Vec<Check> {
    let mut checks = Vec::new();
    if let Some(course) = course {
        let python = course.settings.python.clone();
        let declared = course.settings.environment.clone();
        checks.push(Check {
            need: Need::Interpreter,
            name: "python".into(),
            run: Arc::new(move |limit| {
                crate::environment::check(&python, declared.as_ref(), limit).map_err(|e| Problem {
                    what: e.to_string(),
                    fix: e.fix(),
                })
            }),
        });
    }
    if let KafkaTarget::Bootstrap { servers, .. } = kafka {
        let target = kafka.clone();
        checks.push(Check {
            need: Need::Kafka,
            name: format!("kafka {servers}"),
            run: Arc::new(move |limit| {
                Broker::answers(&target, limit).map_err(|e| Problem {
                    what: e.to_string(),
                    fix: "start the broker, or give --kafka the address of one that is up \
                          (without --kafka the probes use the embedded broker)"
                        .into(),
                })
            }),
        });
    }
    for target in sql {
        let DbTarget::Postgres(url) = &target.target else {
            continue;
        };
        let url = url.clone();
        checks.push(Check {
            need: Need::Postgres(url.clone()),
            name: ticketflow::store::preflight::place_of(&url),
            run: Arc::new(move |limit| {
                ticketflow::store::preflight::answers(&url, limit).map_err(|e| Problem {
                    what: e.to_string(),
                    fix: "start the server, or give --db the URL of one that accepts this \
                          user (host, port, database, password)"
                        .into(),
                })
            }),
        });
    }
    if let RemoteHost::Host(host) = remote {
        let host = host.clone();
        checks.push(Check {
            need: Need::RemoteHost,
            name: format!("host {}", host.name),
            run: Arc::new(move |limit| {
                let mut host = (*host).clone();
                host.connect_timeout = host.connect_timeout.min(limit);
                crate::remote::check_host(&host)
                    .map(drop)
                    .map_err(|e| Problem {
                        what: e.to_string(),
                        fix: "check the host is up and its key is the one in known_hosts \
                              (lessonprobe hosts check says more)"
                            .into(),
                    })
            }),
        });
    }
    checks
}
