//! The broker's metadata tables (spec section 8): topic configs, consumer offsets, delay
//! offsets and subscription groups, persisted as RocketMQ does under
//! `<storePathRootDir>/config/` and mirrored by a slave from its master.
//!
//! **Tables.** Each table is thread-safe (`&self` methods over an interior lock) and knows its
//! file. Topics and subscription groups carry a [`DataVersion`] that every create, update or
//! delete bumps, and are written to disk before the call returns. Consumer and delay offsets
//! change on every commit, so they only mark themselves dirty; the broker persists them on a
//! timer (`persist_if_dirty`) and on shutdown. [`ConfigTables`] owns all four.
//!
//! **JSON.** Files and remoting bodies use RocketMQ's wrappers and field names
//! (`TopicConfigSerializeWrapper`, `SubscriptionGroupWrapper`, …). Reading accepts what
//! fastjson writes, including bare integer map keys (`{0:123}`), any field order and unknown
//! fields ([`json`]). Writing is strict JSON, fields in alphabetical order like fastjson:
//! pretty on disk, compact as a response body ([`JsonStyle`]).
//!
//! **Files.** A write goes to `<f>.tmp`, is fsynced, the previous good `<f>` is copied to
//! `<f>.bak`, the tmp is renamed over `<f>` and the directory fsynced, so `<f>` is always a
//! whole document. Loading skips a UTF-8 byte order mark (as fastjson does) and falls back to
//! `<f>.bak` when `<f>` is missing, empty or corrupt; a corrupt `<f>` is first renamed to
//! `<f>.corrupt-<unix millis>` so no later write destroys it. A `<f>` the OS refuses to read
//! (EACCES, EIO) is an error, not a fallback. Both absent is an empty table; both unusable is
//! an error, never a silently empty table.
//!
//! A call that finds nothing to change (the same config put again, a name to create that
//! exists, one to delete that does not, a master table already taken) still answers only once
//! the table is on disk: it waits for a write in progress and writes a dirty table, so a
//! request retried after a failed write never succeeds while its change is in memory only.
//!
//! **Slave sync.** Each table has `apply_from_master`. Topics and groups are replaced whole
//! when the master's DataVersion differs and skipped when equal; the master's version is
//! copied and not bumped afterwards (RocketMQ 5.x bumps it, so it rewrites the table on every
//! sync). Consumer offsets merge per queue keeping the larger offset, so a master that comes
//! back with stale offsets cannot roll a slave's consumers back (RocketMQ issue #1094), except
//! for the keys a master stamped as rewound since the slave last looked (`rmqhaRewindTable`). Delay
//! offsets are stored as the master's text, verbatim, after checking that it decodes.
//!
//! Who may write (masters only, for configs) is decided by the broker API, not here.

mod consumer_offset;
mod data_version;
mod delay_offset;
mod error;
pub mod json;
mod named_table;
pub(crate) mod persist;
mod subscription;
mod tables;
mod topic;

pub use consumer_offset::{
    ConsumerOffsetTable, ConsumerOffsetWrapper, QueueOffsets, TOPIC_GROUP_SEPARATOR, offset_key,
};
pub use data_version::DataVersion;
pub use delay_offset::{DelayOffsetTable, DelayOffsetWrapper};
pub use error::MetadataError;
pub use json::JsonStyle;
pub use subscription::{SubscriptionGroupConfig, SubscriptionGroupTable, SubscriptionGroupWrapper};
pub use tables::{
    CONSUMER_OFFSET_FILE, ConfigTables, DELAY_OFFSET_FILE, SUBSCRIPTION_GROUP_FILE, TOPICS_FILE,
};
pub use topic::{
    DELETED_TOPICS_FIELD, TopicConfig, TopicConfigTable, TopicConfigWrapper, TopicFilterType,
    deleted_topics_in, is_system_topic, with_deleted_topics,
};
