//! rmqha-core: Apache RocketMQ's broker storage and master/slave high availability,
//! as an embeddable library.
//!
//! The CommitLog (`store`) is an append-only byte stream split into fixed-size memory-mapped
//! segment files, byte-compatible with RocketMQ. ConsumeQueues and IndexFiles are derived
//! from it by a dispatcher thread. A master streams CommitLog bytes to its slaves over
//! RocketMQ's HA wire protocol (`ha`); a SYNC_MASTER put waits for a slave ack. A slave
//! mirrors the master's configuration tables (`metadata`) over the remoting protocol
//! (`remoting`, `sync`), answered by the master's `broker_admin` processor. Producers and
//! consumers in other processes send and pull over the same protocol (`processor`), and find
//! the broker group by asking a broker for routes. `Broker` wires the parts for a role.
//!
//! Threads, not an async runtime: the library embeds into C, Python and Node hosts.

pub mod acl;
pub mod broker;
pub mod broker_admin;
pub mod broker_stats;
pub mod config;
pub mod error;
pub mod filter;
pub mod fork;
pub mod ha;
pub mod logging;
pub mod message;
pub mod metadata;
pub mod metrics;
pub mod net;
pub mod processor;
pub mod remoting;
pub mod schedule;
pub mod store;
pub mod sync;
pub mod transaction;

pub use broker::{Broker, Offsets};

/// Joins `handle` unless it is the calling thread: a put's callback runs on the thread that
/// completes the put (group commit, an HA reader, a deadline thread, a remoting handler) and
/// may shut the broker down there, which must not wait for itself.
pub(crate) fn join_unless_current(handle: std::thread::JoinHandle<()>) {
    if handle.thread().id() != std::thread::current().id() {
        let _ = handle.join();
    }
}

/// `timeout` from now, for a timeout a caller passes in: `Instant + Duration` panics on
/// overflow (`Duration::MAX`, or `rmqha put --timeout 1e19`), so anything beyond ten years
/// waits ten years, which is to say without a deadline.
pub(crate) fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    const FAR: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);
    std::time::Instant::now() + timeout.min(FAR)
}
pub use config::{BrokerConfig, BrokerRole, FlushDiskType};
pub use error::{Error, Result};
pub use message::Message;
pub use store::{
    GetMessageResult, GetMessageStatus, MessageStore, PutResult, PutStatus, StoredMessage, TimeBoundary,
};

/// The message a panic carried (`panic!`'s text), for the places that catch one and go on:
/// a request's handler, a put's callback, a binding's entry point.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// At most the first `max` bytes of `s` (whole characters): for names a peer chose, which can
/// be megabytes long, in logs and answers.
pub(crate) fn clip(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
