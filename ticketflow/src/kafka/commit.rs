//! Committing a group's explicit offsets with a bound on the wait. librdkafka's synchronous
//! commit has none: with the group's coordinator gone (a broker that died mid-replay) it waits
//! until one answers, which held a replay until its deadline (and a `--worker`, whose member of
//! the group commits, for ever). Here a client of the group, on a thread of its own, commits;
//! its answer is awaited at most a timeout, and after a commit that got none every later one
//! fails at once. librdkafka cannot close a client while a commit of it waits for an answer, so
//! a committer whose commit went unanswered waits, when dropped, at most its linger for that
//! answer and leaves its thread (and the client) to librdkafka's answer past it.

use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::TopicPartitionList;

use super::{Broker, KafkaError};

/// A client of one group that only commits, each commit answered within `timeout` or failed.
pub(crate) struct Committer {
    asks: Option<SyncSender<TopicPartitionList>>,
    answers: Receiver<Result<(), String>>,
    timeout: Duration,
    /// How long a drop waits for an unanswered commit's thread to end.
    linger: Duration,
    /// Set once a commit went unanswered: its thread is still waiting in librdkafka.
    stuck: bool,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// A committer for `group` on `broker`, its answers awaited at most the broker's operation
    /// timeout.
    pub fn new(broker: &Broker, group: &str) -> Result<Committer, KafkaError> {
        // The broker's client of the group: the one that read its offsets while planning, shared
        // by every lane's committer.
        let consumer = broker.group_client(group)?;
        // A client that never joins the group has nothing to leave: no wait for its close.
        Committer::through(consumer, broker.op_timeout, Duration::ZERO)
            .map_err(|e| broker.error(format!("starting a committer for group {group}"), e))
    }

    /// A committer through `consumer` (a member of the group, whose commits the broker takes
    /// while its generation lasts), each answer awaited at most `timeout`, an unanswered one at
    /// most `linger` more when the committer is dropped.
    pub fn through<C: ConsumerContext + 'static>(
        consumer: Arc<BaseConsumer<C>>,
        timeout: Duration,
        linger: Duration,
    ) -> std::io::Result<Committer> {
        let (asks, asked) = sync_channel::<TopicPartitionList>(0);
        let (answer, answers) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("kafka-commit".into())
            .spawn(move || {
                for offsets in asked {
                    let result = consumer
                        .commit(&offsets, CommitMode::Sync)
                        .map_err(|e| e.to_string());
                    if answer.send(result).is_err() {
                        break;
                    }
                }
                // Asked nothing more: every commit was answered. The client is closed with the
                // broker's last handle.
                drop(consumer);
            })?;
        Ok(Committer {
            asks: Some(asks),
            answers,
            timeout,
            linger,
            stuck: false,
            thread: Some(thread),
        })
    }

    /// Commits `offsets` and waits for the coordinator's answer: its error, or a timeout when
    /// none came (the commit may still be applied later: it is of offsets already durable).
    pub fn commit(&mut self, offsets: &TopicPartitionList) -> Result<(), String> {
        let unanswered = || {
            format!(
                "no answer from the group's coordinator within {} s",
                self.timeout.as_secs_f64()
            )
        };
        if self.stuck {
            return Err(format!("an earlier commit got {}", unanswered()));
        }
        // `asks` is `None` only once dropping has begun.
        let sent = self.asks.as_ref().map(|asks| asks.send(offsets.clone()));
        if !matches!(sent, Some(Ok(()))) {
            return Err("the committer's thread is gone".into());
        }
        match self.answers.recv_timeout(self.timeout) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout) => {
                self.stuck = true;
                Err(unanswered())
            }
            Err(RecvTimeoutError::Disconnected) => Err("the committer's thread is gone".into()),
        }
    }
}

impl Drop for Committer {
    /// Ends its thread, which lets its client close, and waits for it. A thread whose commit is
    /// still unanswered is waited for at most the linger (the coordinator may answer again
    /// meanwhile: the client then closes cleanly) and left past it: it ends, and the client
    /// closes, once librdkafka answers.
    fn drop(&mut self) {
        self.asks = None;
        let Some(thread) = self.thread.take() else {
            return;
        };
        if self.stuck {
            let until = Instant::now() + self.linger;
            while !thread.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !thread.is_finished() {
                return;
            }
        }
        let _ = thread.join();
    }
}
