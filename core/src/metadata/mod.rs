//! The broker's metadata tables (spec section 8): topic configs, consumer offsets, delay
//! offsets and subscription groups, persisted under `<storePathRootDir>/config/`.
//!
//! So far: the [`DataVersion`] change stamp, JSON that reads what fastjson writes, atomic
//! config files with a `.bak`, and the four tables.

mod consumer_offset;
mod data_version;
mod delay_offset;
mod error;
pub mod json;
mod named_table;
mod persist;
mod subscription;
mod topic;

pub use consumer_offset::{
    ConsumerOffsetTable, ConsumerOffsetWrapper, QueueOffsets, TOPIC_GROUP_SEPARATOR, offset_key,
};
pub use data_version::DataVersion;
pub use delay_offset::{DelayOffsetTable, DelayOffsetWrapper};
pub use error::MetadataError;
pub use json::JsonStyle;
pub use subscription::{SubscriptionGroupConfig, SubscriptionGroupTable, SubscriptionGroupWrapper};
pub use topic::{TopicConfig, TopicConfigTable, TopicConfigWrapper, TopicFilterType};
