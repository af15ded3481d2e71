//! The plain objects Node receives and passes. Offsets, sizes and timestamps are JS
//! `number`s everywhere (exact below 2^53, i.e. 8 PiB of CommitLog).

use std::collections::BTreeMap;

use crate::error::{Failure, Outcome, int_in};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use rmqha_core::ha::{RefusedSlave as CoreRefusedSlave, SlaveInfo as CoreSlaveInfo};
use rmqha_core::{
    GetMessageResult, Message, Offsets as CoreOffsets, PutResult as CorePutResult,
    StoredMessage as CoreStoredMessage,
};

/// Optional parts of a message for `putMessage` / `putMessageSync`.
#[napi(object)]
#[derive(Default)]
pub struct PutOptions {
    /// The queue to put into (default 0).
    pub queue_id: Option<f64>,
    /// The TAGS property.
    pub tags: Option<String>,
    /// The KEYS property (stored space-separated, indexed for `queryByKey`).
    pub keys: Option<Vec<String>>,
    /// More user properties.
    pub properties: Option<BTreeMap<String, String>>,
    /// The user flag (Message.flag).
    pub flag: Option<f64>,
}

/// Builds the core message from JS arguments (INVALID_ARGUMENT for a queue id or flag that
/// is not an integer in range).
pub(crate) fn message(topic: String, body: Vec<u8>, opts: Option<PutOptions>) -> Outcome<Message> {
    let opts = opts.unwrap_or_default();
    let queue = opts.queue_id.map(|q| int_in("queueId", q, 0, i32::MAX as i64)).transpose()?.unwrap_or(0);
    let mut msg = Message::new(topic, body).with_queue(queue as i32);
    // Properties first, so that `tags` and `keys` win over a TAGS or KEYS among them (as in
    // Python); no keys is no KEYS property (as in C and Python).
    for (k, v) in opts.properties.unwrap_or_default() {
        msg.set_property(k, v);
    }
    if let Some(tags) = opts.tags {
        msg = msg.with_tags(tags);
    }
    if let Some(keys) = opts.keys.filter(|k| !k.is_empty()) {
        if let Some(why) = keys.iter().find_map(|k| rmqha_core::message::key_error(k)) {
            return Err(Failure::invalid(why));
        }
        msg = msg.with_keys(&keys);
    }
    if let Some(flag) = opts.flag {
        msg.flag = int_in("flag", flag, i32::MIN as i64, i32::MAX as i64)? as i32;
    }
    Ok(msg)
}

/// What `getMessages` keeps (RocketMQ's `MessageSelector`): give at most one.
#[napi(object)]
#[derive(Default)]
pub struct GetOptions {
    /// A tag expression: tags separated by `||` (`"red || blue"`); `"*"` passes every message.
    pub tags: Option<String>,
    /// A SQL92 expression over the message's properties (`"price > 10 AND TAGS = 'red'"`).
    pub sql: Option<String>,
}

/// The store's answer to a put. A non-OK `status` of a stored message is a result, not an
/// error (e.g. FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE).
#[napi(object)]
pub struct PutResult {
    /// PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, ...
    pub status: String,
    /// RocketMQ's offset message id (hex).
    pub msg_id: String,
    pub phy_offset: i64,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// Bytes written.
    pub size: i32,
    pub store_timestamp: i64,
}

impl From<CorePutResult> for PutResult {
    fn from(r: CorePutResult) -> Self {
        PutResult {
            status: r.status.as_str().to_string(),
            msg_id: r.msg_id(),
            phy_offset: r.phy_offset,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            size: r.size,
            store_timestamp: r.store_timestamp,
        }
    }
}

/// A stored message, decoded.
#[napi(object)]
pub struct StoredMessage {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub body: Buffer,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    /// Every property, TAGS and KEYS included.
    pub properties: BTreeMap<String, String>,
    pub store_timestamp: i64,
    pub born_timestamp: i64,
    /// RocketMQ's offset message id (hex).
    pub msg_id: String,
    /// The record's size in the CommitLog.
    pub store_size: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub reconsume_times: i32,
    /// `host:port`
    pub born_host: String,
    /// `host:port`
    pub store_host: String,
}

impl From<CoreStoredMessage> for StoredMessage {
    fn from(m: CoreStoredMessage) -> Self {
        StoredMessage {
            topic: m.topic,
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            phy_offset: m.phy_offset,
            body: m.body.into(),
            tags: m.tags,
            keys: m.keys,
            properties: m.properties.into_iter().collect(),
            store_timestamp: m.store_timestamp,
            born_timestamp: m.born_timestamp,
            msg_id: m.msg_id,
            store_size: m.store_size,
            flag: m.flag,
            sys_flag: m.sys_flag,
            reconsume_times: m.reconsume_times,
            born_host: m.born_host.to_string(),
            store_host: m.store_host.to_string(),
        }
    }
}

/// The answer of `getMessages`.
#[napi(object)]
pub struct GetMessagesResult {
    /// FOUND, NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE, ... (RocketMQ's GetMessageStatus)
    pub status: String,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub suggest_pulling_from_slave: bool,
    pub messages: Vec<StoredMessage>,
}

impl From<GetMessageResult> for GetMessagesResult {
    fn from(r: GetMessageResult) -> Self {
        GetMessagesResult {
            status: r.status.as_str().to_string(),
            next_begin_offset: r.next_begin_offset,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            suggest_pulling_from_slave: r.suggest_pulling_from_slave,
            messages: r.messages().into_iter().map(StoredMessage::from).collect(),
        }
    }
}

/// A slave connected to a master.
#[napi(object)]
pub struct SlaveInfo {
    /// `host:port`
    pub addr: String,
    /// Highest offset the slave acked (-1 before its first report).
    pub ack_offset: i64,
    pub lag_bytes: i64,
    /// Milliseconds since the connection was accepted.
    pub connected_ms: i64,
    /// Whether the master streams to it.
    pub transferring: bool,
    /// Milliseconds since the slave last sent anything (a report, an ack or a heartbeat):
    /// grows while a frozen slave's `lagBytes` stays small.
    pub last_report_ms: i64,
}

impl From<CoreSlaveInfo> for SlaveInfo {
    fn from(s: CoreSlaveInfo) -> Self {
        SlaveInfo {
            addr: s.addr.to_string(),
            ack_offset: s.ack_offset,
            lag_bytes: s.lag_bytes,
            connected_ms: s.connected_ms as i64,
            transferring: s.transferring,
            last_report_ms: s.last_report_ms as i64,
        }
    }
}

/// A slave the master refused recently, and why.
#[napi(object)]
pub struct RefusedSlave {
    pub addr: String,
    pub requested_offset: i64,
    pub reason: String,
    pub at_ms: i64,
}

impl From<CoreRefusedSlave> for RefusedSlave {
    fn from(s: CoreRefusedSlave) -> Self {
        RefusedSlave {
            addr: s.addr.to_string(),
            requested_offset: s.requested_offset,
            reason: s.reason,
            at_ms: s.at_ms,
        }
    }
}

/// One snapshot of a broker's offsets and replication state.
#[napi(object)]
pub struct Offsets {
    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    pub role: String,
    pub max_offset: i64,
    pub min_offset: i64,
    pub flushed_offset: i64,
    /// Master: highest offset acked by any slave (-1 if none); slave: highest it acked.
    pub slave_ack_offset: i64,
    pub dispatch_behind_bytes: i64,
    pub listen_port: u32,
    pub ha_port: u32,
    /// Master: connected slaves (empty on a slave).
    pub slaves: Vec<SlaveInfo>,
    /// Master: slaves refused recently.
    pub refused_slaves: Vec<RefusedSlave>,
    /// Slave: the master's HA address.
    pub master_address: Option<String>,
    /// Slave: whether it is connected to its master.
    pub connected: Option<bool>,
    /// Slave: why its last HA connection ended.
    pub last_ha_error: Option<String>,
}

impl From<CoreOffsets> for Offsets {
    fn from(o: CoreOffsets) -> Self {
        Offsets {
            role: o.role.as_str().to_string(),
            max_offset: o.max_offset,
            min_offset: o.min_offset,
            flushed_offset: o.flushed_offset,
            slave_ack_offset: o.slave_ack_offset,
            dispatch_behind_bytes: o.dispatch_behind_bytes.min(i64::MAX as u64) as i64,
            listen_port: o.listen_port.into(),
            ha_port: o.ha_port.into(),
            slaves: o.slaves.into_iter().map(SlaveInfo::from).collect(),
            refused_slaves: o.refused_slaves.into_iter().map(RefusedSlave::from).collect(),
            master_address: o.master_address,
            connected: o.connected,
            last_ha_error: o.last_ha_error,
        }
    }
}
