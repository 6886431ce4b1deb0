//! A member of the replay group whose commit got no answer (its broker stopped with SIGSTOP):
//! the commit is reported unanswered within its bound, the member's drop waits at most a
//! session timeout for the answer, and a broker that answers again meanwhile sees the member
//! leave, its client closed and no thread of it left in the process.

use std::process::Command;
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{on_apache_kafka, ApacheKafka};
use ticketflow::kafka::{Broker, GroupEvent, GroupMember, KafkaTarget, ReplayGroup};

/// The member's session timeout (`GroupMember::join`'s default): the longest a drop waits.
const SESSION: Duration = Duration::from_secs(6);

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

fn signal(kafka: &ApacheKafka, sig: &str) {
    for pid in kafka.pids() {
        let sent = Command::new("kill").args([sig, &pid.to_string()]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill {sig} {pid}");
    }
}

/// A member of `group` holding partition 0 of `topic`, whose broker is stopped once it has
/// committed, and whose next commit went unanswered within the operation timeout.
fn member_with_a_commit_unanswered(
    broker: &Broker,
    kafka: &ApacheKafka,
    group: &ReplayGroup,
) -> GroupMember {
    let member = GroupMember::join(broker, group, "held").unwrap();
    let joined = Instant::now();
    while !member
        .poll(Duration::from_millis(100))
        .iter()
        .any(|e| matches!(e, GroupEvent::Assigned(p) if p.contains(&0)))
    {
        assert!(joined.elapsed() < Duration::from_secs(60), "never assigned");
    }
    member.commit(0, 0).unwrap();
    signal(kafka, "-STOP");
    let asked = Instant::now();
    let err = member.commit(0, 0).unwrap_err().to_string();
    let answered = asked.elapsed();
    assert!(err.contains("no answer"), "{err}");
    assert!(
        answered < Duration::from_secs(12),
        "unanswered after {answered:?}"
    );
    member
}

#[test]
fn a_member_whose_commit_got_no_answer_closes_once_the_broker_answers_or_gives_up_in_bound() {
    on_apache_kafka(|_| {
        let kafka = ApacheKafka::start(1);
        let target: KafkaTarget = kafka.servers.parse().unwrap();
        let mut broker = Broker::for_target(&target, Duration::from_secs(10)).unwrap();
        broker.create_topic("held", 1).unwrap();
        let group = ReplayGroup::new("held-replay", "held-live").unwrap();
        let before = threads();

        // The broker answers again 2 s into the drop: the member leaves, nothing of it stays.
        let member = member_with_a_commit_unanswered(&broker, &kafka, &group);
        let dropping = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_secs(2));
                signal(&kafka, "-CONT");
            });
            drop(member);
        });
        let took = dropping.elapsed();
        assert!(
            took < SESSION + Duration::from_secs(1),
            "dropped in {took:?}"
        );
        let after = threads();
        assert!(
            after <= before,
            "{after} threads after the drop, {before} before it"
        );

        // The broker stays stopped: the drop gives up after the session timeout.
        let member = member_with_a_commit_unanswered(&broker, &kafka, &group);
        let dropping = Instant::now();
        drop(member);
        let took = dropping.elapsed();
        signal(&kafka, "-CONT");
        assert!(
            (SESSION..SESSION + Duration::from_secs(1)).contains(&took),
            "dropped in {took:?}"
        );
    });
}
