//! Lesson probes on an Apache Kafka that applies time retention, as a real one does by default:
//! the records they load carry the sample days' dated timestamps, which such a broker deletes.

use lessonprobe_testkit::*;

#[test]
fn lesson_30_passes_on_a_broker_with_seven_day_retention() {
    on_apache_kafka(|_| {
        // Kafka's default retention, checked from the start and every 100 ms (instead of after
        // 30 s and every 5 minutes), so that a record older than 7 days is deleted while the
        // probe still needs it.
        let kafka = ApacheKafka::start_with(
            1,
            &[
                "log.retention.ms=604800000",
                "log.retention.check.interval.ms=100",
                "log.initial.task.delay.ms=0",
            ],
        );
        let dir = Dir::new();
        dir.lessonprobe()
            .args(["--lesson", "30", "--kafka", &kafka.servers, "--no-junit"])
            .args(["--select", "EX-30-02", "--select", "L30-12", "--select", "L30-13"])
            .args(["--select", "L30-14"])
            .stdout_has("4 passed, 0 failed, 0 errors")
            .within(std::time::Duration::from_secs(120))
            .success();
    });
}
