//! What a broker holds and its deletion: the names of every topic and consumer group, and
//! DeleteTopics / DeleteGroups answered name by name, each bounded by a timeout. A broker with no
//! admin API (librdkafka's mock cluster hosted elsewhere) is an error within that timeout.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaResult;
use rdkafka::types::RDKafkaErrorCode;

use super::{Broker, KafkaError};

/// A name the broker was asked to delete, and its refusal (`None`: deleted).
pub type Deletion = (String, Option<String>);

impl Broker {
    /// The name of every topic the broker's metadata lists.
    pub fn topic_names(&self, timeout: Duration) -> Result<Vec<String>, KafkaError> {
        let admin = self.admin()?;
        let metadata = admin
            .inner()
            .fetch_metadata(None, timeout)
            .map_err(|e| self.error("listing topics", e))?;
        Ok(metadata
            .topics()
            .iter()
            .map(|t| t.name().to_owned())
            .collect())
    }

    /// The name of every consumer group the broker lists.
    pub fn group_names(&self, timeout: Duration) -> Result<Vec<String>, KafkaError> {
        let admin = self.admin()?;
        let groups = admin
            .inner()
            .fetch_group_list(None, timeout)
            .map_err(|e| self.error("listing consumer groups", e))?;
        Ok(groups
            .groups()
            .iter()
            .map(|g| g.name().to_owned())
            .collect())
    }

    /// Deletes `topics`: each with the broker's refusal, if any. `Err` when the broker did not
    /// answer within `timeout` (or has no admin API).
    pub fn delete_topics(
        &self,
        topics: &[&str],
        timeout: Duration,
    ) -> Result<Vec<Deletion>, KafkaError> {
        let admin = self.admin()?;
        let options = AdminOptions::new().request_timeout(Some(timeout));
        let answer = futures_executor::block_on(admin.delete_topics(topics, &options));
        self.deletions("DeleteTopics", topics, answer)
    }

    /// Deletes consumer `groups` (their committed offsets with them): each with the broker's
    /// refusal, if any.
    pub fn delete_groups(
        &self,
        groups: &[&str],
        timeout: Duration,
    ) -> Result<Vec<Deletion>, KafkaError> {
        let admin = self.admin()?;
        let options = AdminOptions::new().request_timeout(Some(timeout));
        let answer = futures_executor::block_on(admin.delete_groups(groups, &options));
        self.deletions("DeleteGroups", groups, answer)
    }

    pub(crate) fn admin(&self) -> Result<AdminClient<DefaultClientContext>, KafkaError> {
        let admin: AdminClient<DefaultClientContext> = self
            .config()
            .create()
            .map_err(|e| self.error("creating an admin client", e))?;
        super::broker::opened(admin.inner().native_ptr(), "admin");
        Ok(admin)
    }

    fn deletions(
        &self,
        request: &str,
        names: &[&str],
        answer: KafkaResult<Vec<Result<String, (String, RDKafkaErrorCode)>>>,
    ) -> Result<Vec<Deletion>, KafkaError> {
        let answers = answer.map_err(|e| self.error(request, e))?;
        Ok(names
            .iter()
            .map(|&name| {
                let refused = answers.iter().find_map(|a| match a {
                    Err((n, code)) if n == name => Some(format!("{request} refused: {code}")),
                    _ => None,
                });
                (name.to_owned(), refused)
            })
            .collect())
    }
}
