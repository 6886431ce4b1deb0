//! A plan's identity: the id of a request (topic, replay group, window, partitions), what the
//! target has recorded of it and of other plans of its replay group, and so what this run may
//! do — start it, resume it from the SQL checkpoints, or report it complete.

use std::fmt;

use sha2::{Digest, Sha256};

use super::window::{DayPlan, Lost, LostWhy, Refusal, Window};
use crate::event::hex;
use crate::store::{
    Adoption, Counters, Inspection, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
};

/// What the target holds, found before anything is read from Kafka.
#[derive(Debug, Clone)]
pub struct TargetView {
    pub inspection: Inspection,
    pub adoption: Adoption,
    pub plans: Vec<RecordedPlan>,
}

/// A partition whose replay-group offset in Kafka is behind its SQL checkpoint (a run stopped
/// between the two commits): the SQL checkpoint is where the run continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behind {
    pub partition: i32,
    pub kafka: Option<i64>,
    pub sql: i64,
}

/// What this run does with its plan.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Not recorded yet: it is recorded, then replayed from each partition's start.
    New(RecordedPlan),
    /// Recorded and unfinished: continued from each partition's SQL checkpoint.
    Resume {
        plan: RecordedPlan,
        behind: Vec<Behind>,
    },
    /// Recorded and complete: nothing to do.
    Complete(RecordedPlan),
}

impl Decision {
    pub fn plan(&self) -> &RecordedPlan {
        match self {
            Decision::New(plan) | Decision::Complete(plan) => plan,
            Decision::Resume { plan, .. } => plan,
        }
    }
}

/// What this run does with the plan, in words (a resumed plan: a line more per partition whose
/// replay group Kafka has behind its SQL checkpoint).
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::New(plan) => write!(
                f,
                "plan {}: new; it is recorded in the target when executed",
                plan.plan_id
            ),
            Decision::Resume { plan, behind } => {
                write!(
                    f,
                    "plan {}: recorded {} by {} ({}); continues from its SQL checkpoints",
                    plan.plan_id,
                    plan.created_at,
                    plan.created_by,
                    plan.status.as_str()
                )?;
                for b in behind {
                    write!(
                        f,
                        "\n  partition {}: the replay group's committed offset in Kafka ({}) is behind the SQL checkpoint {}: the SQL checkpoint is used, and Kafka is brought up to it",
                        b.partition,
                        b.kafka.map_or_else(|| "none".to_owned(), |k| k.to_string()),
                        b.sql
                    )?;
                }
                Ok(())
            }
            Decision::Complete(plan) => write!(f, "{}", Shown(plan)),
        }
    }
}

/// A run that must not go on; nothing was read from the topic or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityRefusal {
    #[error("replay group {group} already belongs to another plan recorded in {place}:\n  recorded: {theirs}\n  this run: {ours}\na different window needs a replay group of its own: choose a new --replay-group")]
    OtherPlan {
        group: String,
        place: String,
        theirs: String,
        ours: String,
    },
    #[error("this plan was started before and did not finish:\n  recorded: {recorded}\nrerun with --resume to continue from its SQL checkpoints")]
    NotResumed { recorded: String },
    #[error("replay group {group} has committed offset {kafka} on partition {partition}, ahead of the SQL checkpoint {sql} in {place}: the database does not hold what Kafka says was done (a replay into another database, or a restored backup?)")]
    KafkaAhead {
        group: String,
        partition: i32,
        kafka: i64,
        sql: i64,
        place: String,
    },
    #[error("replay group {group} has committed offsets ({offsets}) but {place} records no plan of it: it belongs to a replay into another database or by an earlier lessonprobe; choose a new --replay-group (audit rows are idempotent on event_id, so replaying again loses and doubles nothing)")]
    ForeignGroup {
        group: String,
        place: String,
        offsets: String,
    },
    /// What the topic holds now rules the plan out: retention removed offsets it still needs,
    /// or (a new plan) the window is empty.
    #[error(transparent)]
    Topic(Refusal),
}

/// The id of a plan: a stable hash of topic, replay group, window and partition list.
pub fn plan_id(topic: &str, replay_group: &str, window: &Window, partitions: &[i32]) -> String {
    let mut sorted = partitions.to_vec();
    sorted.sort_unstable();
    let list: Vec<String> = sorted.iter().map(i32::to_string).collect();
    let spec = match window {
        Window::Time { since_ms, until_ms } => format!("time:{since_ms}:{until_ms}"),
        Window::Offsets { start, stop } => format!("offsets:{start}:{stop}"),
    };
    let text = format!(
        "topic={topic}\nreplay_group={replay_group}\nwindow={spec}\npartitions={}",
        list.join(",")
    );
    format!("p-{}", &hex(&Sha256::digest(text.as_bytes()))[..16])
}

impl From<&Window> for PlanWindow {
    fn from(w: &Window) -> Self {
        match *w {
            Window::Time { since_ms, until_ms } => PlanWindow::Time { since_ms, until_ms },
            Window::Offsets { start, stop } => PlanWindow::Offsets { start, stop },
        }
    }
}

impl From<PlanWindow> for Window {
    fn from(w: PlanWindow) -> Self {
        match w {
            PlanWindow::Time { since_ms, until_ms } => Window::Time { since_ms, until_ms },
            PlanWindow::Offsets { start, stop } => Window::Offsets { start, stop },
        }
    }
}

/// One line naming a recorded plan: id, what, when and by whom, and how far it got.
pub struct Shown<'a>(pub &'a RecordedPlan);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0;
        let ranges: Vec<String> = p
            .partitions
            .iter()
            .map(|q| format!("{}:[{},{})@{}", q.partition, q.start, q.stop, q.next_offset))
            .collect();
        write!(
            f,
            "plan {} — topic {}, window {}, partitions {}; recorded {} by {}; {}; partition:[start,stop)@checkpoint {}",
            p.plan_id,
            p.topic,
            Window::from(p.window),
            p.partition_list(),
            p.created_at,
            p.created_by,
            p.status.as_str(),
            ranges.join(" ")
        )
    }
}

/// The plan this run would record for `plan`, each checkpoint at its partition's start.
pub fn to_record(plan: &DayPlan, created_at: &str, created_by: &str) -> RecordedPlan {
    let r = &plan.request;
    let numbers: Vec<i32> = plan.partitions.iter().map(|p| p.partition).collect();
    RecordedPlan {
        plan_id: plan_id(&r.topic, &r.replay_group, &r.window, &numbers),
        topic: r.topic.clone(),
        replay_group: r.replay_group.clone(),
        live_group: r.live_group.clone(),
        window: PlanWindow::from(&r.window),
        created_at: created_at.to_owned(),
        created_by: created_by.to_owned(),
        status: PlanStatus::Running,
        finished_at: None,
        partitions: plan
            .partitions
            .iter()
            .map(|p| PartitionProgress {
                partition: p.partition,
                start: p.start,
                stop: p.stop,
                captured_end: p.found.end,
                next_offset: p.start,
                owner: None,
                counters: Counters::default(),
                updated_at: created_at.to_owned(),
            })
            .collect(),
    }
}

/// Decides what this run does with `plan` given what the target recorded, and sets each
/// partition's range and resume point to the recorded ones when the plan is recorded.
pub fn decide(
    plan: &mut DayPlan,
    view: &TargetView,
    created_at: &str,
    created_by: &str,
) -> Result<Decision, IdentityRefusal> {
    let ours = to_record(plan, created_at, created_by);
    let place = view.inspection.place.clone();
    let group = plan.request.replay_group.clone();
    let recorded = view.plans.iter().find(|p| p.plan_id == ours.plan_id);
    let Some(recorded) = recorded else {
        if let Some(refusal) = plan.unless_recorded.take() {
            return Err(IdentityRefusal::Topic(refusal));
        }
        if let Some(theirs) = view.plans.iter().find(|p| p.replay_group == group) {
            return Err(IdentityRefusal::OtherPlan {
                group,
                place,
                theirs: Shown(theirs).to_string(),
                ours: Shown(&ours).to_string(),
            });
        }
        let committed: Vec<String> = plan
            .partitions
            .iter()
            .filter_map(|p| p.replay_committed.map(|c| format!("{}@{c}", p.partition)))
            .collect();
        if !committed.is_empty() {
            return Err(IdentityRefusal::ForeignGroup {
                group,
                place,
                offsets: committed.join(", "),
            });
        }
        return Ok(Decision::New(ours));
    };
    for p in &mut plan.partitions {
        if let Some(r) = recorded.partition(p.partition) {
            p.start = r.start;
            p.stop = r.stop;
            p.resume_from = r.next_offset.min(r.stop);
        }
    }
    if recorded.status == PlanStatus::Complete {
        return Ok(Decision::Complete(recorded.clone()));
    }
    let mut behind = Vec::new();
    for p in &plan.partitions {
        let Some(r) = recorded.partition(p.partition) else {
            continue;
        };
        match p.replay_committed {
            Some(kafka) if kafka > r.next_offset => {
                return Err(IdentityRefusal::KafkaAhead {
                    group,
                    partition: p.partition,
                    kafka,
                    sql: r.next_offset,
                    place,
                })
            }
            Some(kafka) if kafka == r.next_offset => {}
            None if r.next_offset == r.start => {}
            kafka => behind.push(Behind {
                partition: p.partition,
                kafka,
                sql: r.next_offset,
            }),
        }
    }
    let started = recorded.partitions.iter().any(|r| r.next_offset > r.start);
    if started && !plan.request.resume {
        return Err(IdentityRefusal::NotResumed {
            recorded: Shown(recorded).to_string(),
        });
    }
    // Retention may have passed the offsets replayed already, not those still to replay.
    let lost: Vec<Lost> = plan
        .partitions
        .iter()
        .filter(|p| p.resume_from < p.stop && p.found.log_start > p.resume_from)
        .map(|p| Lost {
            partition: p.partition,
            from: p.resume_from,
            to: p.found.log_start.min(p.stop),
            why: LostWhy::InRange,
        })
        .collect();
    if !lost.is_empty() {
        return Err(IdentityRefusal::Topic(Refusal::RetentionRemoved { lost }));
    }
    plan.unless_recorded = None;
    Ok(Decision::Resume {
        plan: recorded.clone(),
        behind,
    })
}

/// `user@host`, for the record of who ran a plan.
pub fn who() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{user}@{host}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::TimeWindow;
    use crate::replay::{DayReplayRequest, PartitionPlan};
    use crate::store::Backend;

    fn day(since: i64, until: i64, committed: Option<i64>, resume: bool) -> DayPlan {
        DayPlan {
            request: DayReplayRequest {
                topic: "t".into(),
                live_group: "live".into(),
                replay_group: "replay".into(),
                window: Window::Time {
                    since_ms: since,
                    until_ms: until,
                },
                partitions: None,
                resume,
            },
            partitions: vec![PartitionPlan {
                partition: 0,
                found: TimeWindow {
                    since: Some(10),
                    until: Some(20),
                    log_start: 0,
                    end: 30,
                },
                start: 10,
                stop: 20,
                live_committed: None,
                replay_committed: committed,
                resume_from: 10,
            }],
            unless_recorded: None,
        }
    }

    fn view(plans: Vec<RecordedPlan>) -> TargetView {
        TargetView {
            inspection: Inspection {
                backend: Backend::Sqlite,
                place: "sqlite a.db".into(),
                schema: None,
                exists: true,
                audit_events: None,
                bookkeeping: Vec::new(),
                legacy: Vec::new(),
            },
            adoption: Inspection {
                backend: Backend::Sqlite,
                place: String::new(),
                schema: None,
                exists: false,
                audit_events: None,
                bookkeeping: Vec::new(),
                legacy: Vec::new(),
            }
            .adopt()
            .unwrap(),
            plans,
        }
    }

    #[test]
    fn ids_are_stable_and_differ_by_window_group_and_partitions() {
        let w = Window::Time {
            since_ms: 1,
            until_ms: 2,
        };
        let a = plan_id("t", "g", &w, &[2, 0, 1]);
        assert_eq!(a, plan_id("t", "g", &w, &[0, 1, 2]));
        assert_ne!(a, plan_id("t", "g2", &w, &[0, 1, 2]));
        assert_ne!(a, plan_id("t", "g", &w, &[0, 1]));
        assert_ne!(
            a,
            plan_id(
                "t",
                "g",
                &Window::Time {
                    since_ms: 0,
                    until_ms: 2
                },
                &[0, 1, 2]
            )
        );
    }

    #[test]
    fn new_resumed_complete_and_refused_plans() {
        let mut fresh = day(1, 2, None, false);
        assert!(matches!(
            decide(&mut fresh, &view(vec![]), "now", "me@h"),
            Ok(Decision::New(_))
        ));
        let mut recorded = to_record(&day(1, 2, None, false), "then", "you@h");
        recorded.partitions[0].next_offset = 15;
        // Started, not resumed: refused; resumed with Kafka behind: continues at 15.
        let mut again = day(1, 2, Some(12), false);
        assert!(matches!(
            decide(&mut again, &view(vec![recorded.clone()]), "now", "me@h"),
            Err(IdentityRefusal::NotResumed { .. })
        ));
        let mut resumed = day(1, 2, Some(12), true);
        match decide(&mut resumed, &view(vec![recorded.clone()]), "now", "me@h") {
            Ok(Decision::Resume { behind, .. }) => assert_eq!(
                behind,
                vec![Behind {
                    partition: 0,
                    kafka: Some(12),
                    sql: 15
                }]
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(resumed.partitions[0].resume_from, 15);
        let mut ahead = day(1, 2, Some(18), true);
        assert!(matches!(
            decide(&mut ahead, &view(vec![recorded.clone()]), "now", "me@h"),
            Err(IdentityRefusal::KafkaAhead {
                kafka: 18,
                sql: 15,
                ..
            })
        ));
        // Another window with the same group: refused, both plans shown.
        let mut wider = day(0, 2, None, true);
        let err = decide(&mut wider, &view(vec![recorded.clone()]), "now", "me@h").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&recorded.plan_id) && text.matches("plan p-").count() == 2,
            "{text}"
        );
        // Complete: nothing to do, with or without --resume.
        recorded.status = PlanStatus::Complete;
        let mut done = day(1, 2, Some(20), false);
        assert!(matches!(
            decide(&mut done, &view(vec![recorded]), "now", "me@h"),
            Ok(Decision::Complete(_))
        ));
        // A replay group with offsets and no plan here belongs elsewhere.
        let mut foreign = day(1, 2, Some(11), true);
        assert!(matches!(
            decide(&mut foreign, &view(vec![]), "now", "me@h"),
            Err(IdentityRefusal::ForeignGroup { .. })
        ));
    }

    #[test]
    fn retention_is_judged_on_the_recorded_ranges_when_resuming() {
        let mut recorded = to_record(&day(1, 2, None, false), "then", "you@h");
        recorded.partitions[0].next_offset = 15;
        // Planned again after retention removed [0, 12): as a new plan the window's start
        // would be gone, but the recorded plan needs only [15, 20).
        let trimmed = |log_start: i64| {
            let mut plan = day(1, 2, Some(15), true);
            let p = &mut plan.partitions[0];
            (p.found.log_start, p.start, p.found.since) = (log_start, log_start, Some(log_start));
            plan.unless_recorded = Some(Refusal::RetentionRemoved {
                lost: vec![Lost {
                    partition: 0,
                    from: 0,
                    to: log_start,
                    why: LostWhy::WindowStart,
                }],
            });
            plan
        };
        let mut resumed = trimmed(12);
        assert!(matches!(
            decide(&mut resumed, &view(vec![recorded.clone()]), "now", "me@h"),
            Ok(Decision::Resume { .. })
        ));
        assert_eq!(
            (
                resumed.partitions[0].start,
                resumed.partitions[0].resume_from
            ),
            (10, 15)
        );
        // Past the checkpoint: the offsets still to replay are named.
        let mut past = trimmed(17);
        let err = decide(&mut past, &view(vec![recorded]), "now", "me@h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "retention removed offsets the replay needs: partition 0: offsets [15, 17) are gone"
        );
        // Nothing recorded: refused as planning would refuse a new plan.
        let mut fresh = trimmed(12);
        let err = decide(&mut fresh, &view(vec![]), "now", "me@h").unwrap_err();
        assert!(
            matches!(
                &err,
                IdentityRefusal::Topic(Refusal::RetentionRemoved { lost }) if lost[0].to == 12
            ),
            "{err}"
        );
    }
}
