//! Committing a group's explicit offsets with a bound on the wait. librdkafka's synchronous
//! commit has none: with the group's coordinator gone (a broker that died mid-replay) it waits
//! until one answers, which held a replay until its deadline (and a `--worker`, whose member of
//! the group commits, for ever). Here a client of the group, on a thread of its own, commits;
//! its answer is awaited at most a timeout, and after a commit that got none every later one
//! fails at once.

use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::TopicPartitionList;

use super::{Broker, KafkaError};

/// A client of one group that only commits, each commit answered within `timeout` or failed.
pub(crate) struct Committer {
    asks: Option<SyncSender<TopicPartitionList>>,
    answers: Receiver<Result<(), String>>,
    timeout: Duration,
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
        Committer::through(consumer, broker.op_timeout)
            .map_err(|e| broker.error(format!("starting a committer for group {group}"), e))
    }

    /// A committer through `consumer` (a member of the group, whose commits the broker takes
    /// while its generation lasts), each answer awaited at most `timeout`.
    pub fn through<C: ConsumerContext + 'static>(
        consumer: Arc<BaseConsumer<C>>,
        timeout: Duration,
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
    /// Ends its thread, which closes its client, and waits for it, unless a commit is still
    /// waiting there: that thread is left to the process's end rather than waited for.
    fn drop(&mut self) {
        self.asks = None;
        if let Some(thread) = self.thread.take().filter(|_| !self.stuck) {
            let _ = thread.join();
        }
    }
}
