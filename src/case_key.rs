//! The names a run's probe cases put on shared services: one key per case,
//! `lp-<run id>.<lesson>.<case>`, that ends every Kafka topic and group name a probe makes and
//! names SQLite files; and how such names are recognised again, by `clean` and after an
//! interruption.

use std::sync::OnceLock;

use lessonprobe_probes::case_schema::lower_alphanumeric;
use regex::Regex;

/// What every key starts with, so that names of other systems are never taken for ours.
const PREFIX: &str = "lp-";

/// The key of one probe case: unique per run, lesson, probe and backend. A run id holds only
/// lower-case letters, digits and `-`, so the `.` after it ends it unambiguously.
pub fn case_key(run_id: &str, lesson: u32, probe_id: &str, backend: Option<&str>) -> String {
    let case = match backend {
        Some(backend) => format!("{probe_id}-{backend}"),
        None => probe_id.to_owned(),
    };
    let case = lower_alphanumeric(&case, '-');
    format!("{PREFIX}{run_id}.{lesson}.{case}")
}

/// The run id of a name that ends with a case key (`ticketflow.audit.v1.accept.lp-r1.30.l30-12`,
/// `lp-r1.30.ex-30-01-sqlite`), if it ends with one.
pub fn run_of(name: &str) -> Option<&str> {
    static KEY: OnceLock<Regex> = OnceLock::new();
    let key = KEY.get_or_init(|| {
        Regex::new(r"(?:^|\.)lp-([a-z0-9-]{1,40})\.[0-9]+\.[a-z0-9-]+$")
            .unwrap_or_else(|e| unreachable!("the key pattern is a valid regular expression: {e}"))
    });
    key.captures(name)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// Whether `name` ends with a case key of run `run`, or of any run when `run` is `None`.
pub fn is_of(name: &str, run: Option<&str>) -> bool {
    match (run_of(name), run) {
        (Some(found), Some(run)) => found == run,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_run_lesson_and_case_and_are_recognised_at_the_end_of_names() {
        let key = case_key("fixed", 30, "EX-30-01", Some("postgres"));
        assert_eq!(key, "lp-fixed.30.ex-30-01-postgres");
        assert_ne!(key, case_key("fixed", 31, "EX-30-01", Some("postgres")));
        assert_eq!(run_of(&key), Some("fixed"));
        assert_eq!(
            run_of(&format!("ticketflow.audit.v1.accept.{key}")),
            Some("fixed")
        );
        assert_eq!(
            run_of(&format!(
                "ordering-reader.{}",
                case_key("a-l3", 29, "EX-29-02", None)
            )),
            Some("a-l3")
        );
        assert!(is_of(&key, Some("fixed")) && is_of(&key, None));
        assert!(
            !is_of(&key, Some("fix")),
            "a prefix of a run id is another run"
        );
    }

    #[test]
    fn names_of_other_systems_are_not_taken_for_keys() {
        for name in [
            "ticketflow.audit.v1",
            "orders.v2.2024.eu-west",
            "help-lp-x.30.y",
            "lp-x.30",
            "lp-UPPER.30.x",
            "__consumer_offsets",
        ] {
            assert_eq!(run_of(name), None, "{name}");
        }
    }
}
