//! The broker's admin requests over the remoting protocol: what a slave's config sync
//! ([`crate::sync`]) and tools such as `rmqha status` ask a broker (spec sections 8 and 14).
//!
//! [`AdminProcessor`] answers GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
//! GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG from the broker's
//! [`ConfigTables`](crate::metadata::ConfigTables), with the bodies a RocketMQ master sends, and
//! GET_BROKER_RUNTIME_INFO with a [`KvTable`] the broker supplies through a
//! [`RuntimeInfoProvider`]. It is a [`RequestHandler`](crate::remoting::RequestHandler) on its
//! own, and composes with the broker's other processors through a
//! [`Dispatch`](crate::remoting::Dispatch).
//!
//! The same processor serves the listen port and the VIP port (listen port − 2): a
//! RocketMQ slave sends its topic request to the VIP port.

mod kv_table;
mod processor;
pub(crate) mod queue_stats;

pub use kv_table::KvTable;
pub use processor::{AdminProcessor, DeletedTopicsProvider, RuntimeInfoProvider};
pub use queue_stats::{
    ConsumeStats, ConsumerStatus, OffsetWrapper, QueueKey, ResetOffsets, TopicOffset, TopicStats,
};
