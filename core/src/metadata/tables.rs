//! `ConfigTables`: the four tables of one broker, under `<storePathRootDir>/config/`.

use super::{ConsumerOffsetTable, DelayOffsetTable, MetadataError, SubscriptionGroupTable, TopicConfigTable};
use std::fs;
use std::path::{Path, PathBuf};

/// RocketMQ's file names under `config/` (`BrokerPathConfigHelper`).
pub const TOPICS_FILE: &str = "topics.json";
/// See [`TOPICS_FILE`].
pub const CONSUMER_OFFSET_FILE: &str = "consumerOffset.json";
/// See [`TOPICS_FILE`].
pub const DELAY_OFFSET_FILE: &str = "delayOffset.json";
/// See [`TOPICS_FILE`].
pub const SUBSCRIPTION_GROUP_FILE: &str = "subscriptionGroup.json";

/// The topic, consumer offset, delay offset and subscription group tables of one broker.
#[derive(Debug)]
pub struct ConfigTables {
    config_dir: PathBuf,
    topics: TopicConfigTable,
    consumer_offsets: ConsumerOffsetTable,
    delay_offsets: DelayOffsetTable,
    subscription_groups: SubscriptionGroupTable,
}

impl ConfigTables {
    /// Opens (creating `config/` if needed) the four tables under `<store_root>/config/`.
    /// Fails if any file and its `.bak` are both unreadable: a broker must not come up
    /// having forgotten its topics.
    pub fn open(store_root: impl AsRef<Path>) -> Result<Self, MetadataError> {
        let config_dir = store_root.as_ref().join("config");
        if !config_dir.is_dir() {
            fs::create_dir_all(&config_dir)
                .map_err(|e| MetadataError::io(&config_dir, "create directory", e))?;
            // The root's entry for the new directory: the tables' writes sync `config/` itself,
            // never its parent, so a power loss could lose the directory with every table in it.
            let root = store_root.as_ref();
            fs::File::open(root)
                .and_then(|d| d.sync_all())
                .map_err(|e| MetadataError::io(root, "sync directory", e))?;
        }
        Ok(ConfigTables {
            topics: TopicConfigTable::open(config_dir.join(TOPICS_FILE))?,
            consumer_offsets: ConsumerOffsetTable::open(config_dir.join(CONSUMER_OFFSET_FILE))?,
            delay_offsets: DelayOffsetTable::open(config_dir.join(DELAY_OFFSET_FILE))?,
            subscription_groups: SubscriptionGroupTable::open(config_dir.join(SUBSCRIPTION_GROUP_FILE))?,
            config_dir,
        })
    }

    /// `<store_root>/config`.
    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    /// Topic configs (`topics.json`).
    pub fn topics(&self) -> &TopicConfigTable {
        &self.topics
    }

    /// Consumer offsets (`consumerOffset.json`).
    pub fn consumer_offsets(&self) -> &ConsumerOffsetTable {
        &self.consumer_offsets
    }

    /// Delay offsets (`delayOffset.json`).
    pub fn delay_offsets(&self) -> &DelayOffsetTable {
        &self.delay_offsets
    }

    /// Subscription groups (`subscriptionGroup.json`).
    pub fn subscription_groups(&self) -> &SubscriptionGroupTable {
        &self.subscription_groups
    }

    /// Writes all four tables, as on shutdown. Every table is attempted even if an earlier
    /// one fails; the first error is returned.
    pub fn persist_all(&self) -> Result<(), MetadataError> {
        let results = [
            self.topics.persist(),
            self.consumer_offsets.persist(),
            self.delay_offsets.persist(),
            self.subscription_groups.persist(),
        ];
        results.into_iter().collect()
    }

    /// Writes the tables that hold unwritten changes; returns how many were written. The
    /// first error is returned after every table was attempted.
    pub fn persist_dirty(&self) -> Result<usize, MetadataError> {
        let results = [
            self.topics.persist_if_dirty(),
            self.consumer_offsets.persist_if_dirty(),
            self.delay_offsets.persist_if_dirty(),
            self.subscription_groups.persist_if_dirty(),
        ];
        let mut written = 0;
        let mut first_error = None;
        for r in results {
            match r {
                Ok(w) => written += usize::from(w),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(written), Err)
    }
}
