//! Puts: `rmqha_put_message_sync` and `rmqha_put_message_sync_to_queue`.

use std::ffi::{CStr, c_char};

use rmqha_core::{Error, Message, PutResult, PutStatus};

use crate::RMQHA_MSG_ID_SIZE;
use crate::args;
use crate::broker::{broker_arg, rmqha_broker};
use crate::read::rmqha_property_t;
use crate::status::{Failure, guard, rmqha_status};

/// The store's answer to a put, with RocketMQ's names (`RMQHA_PUT_STATUS_PUT_OK`, ...).
///
/// PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE mean the message is
/// stored (the status says how durable it is) and come with `RMQHA_STATUS_OK`; the others
/// mean nothing was stored and come with `RMQHA_STATUS_PUT_FAILED`.
///
/// The numbers are rmqha's own (stable, 0-9), not the order of Java's `PutMessageStatus` nor
/// the remoting response codes; compare with the names.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmqha_put_status {
    /// Stored, and flushed (SYNC_FLUSH) and acked by a slave (SYNC_MASTER) as the role requires.
    PutOk = 0,
    /// Stored, but SYNC_FLUSH did not reach the disk within `syncFlushTimeout`.
    FlushDiskTimeout = 1,
    /// Stored, but no slave acked within `slaveTimeout`.
    FlushSlaveTimeout = 2,
    /// Stored, but no slave is connected or in sync, so none will ack.
    SlaveNotAvailable = 3,
    /// Not stored: the broker is shut down, its store is poisoned by an I/O failure, its disk is
    /// above `diskSpaceWarningLevelRatio`, or it is a slave.
    ServiceNotAvailable = 4,
    /// Not stored: body too large, bad topic or property characters.
    MessageIllegal = 5,
    /// Not stored: encoded properties longer than 32767 bytes.
    PropertiesSizeExceeded = 6,
    /// Not stored: the put lock was held longer than `osPageCacheBusyTimeOutMills`.
    OsPageCacheBusy = 7,
    /// Not stored: a new CommitLog file could not be created (disk full?).
    CreateMappedFileFailed = 8,
    /// Not stored: anything else.
    UnknownError = 9,
}

impl From<PutStatus> for rmqha_put_status {
    fn from(s: PutStatus) -> Self {
        match s {
            PutStatus::PutOk => rmqha_put_status::PutOk,
            PutStatus::FlushDiskTimeout => rmqha_put_status::FlushDiskTimeout,
            PutStatus::FlushSlaveTimeout => rmqha_put_status::FlushSlaveTimeout,
            PutStatus::SlaveNotAvailable => rmqha_put_status::SlaveNotAvailable,
            PutStatus::ServiceNotAvailable => rmqha_put_status::ServiceNotAvailable,
            PutStatus::MessageIllegal => rmqha_put_status::MessageIllegal,
            PutStatus::PropertiesSizeExceeded => rmqha_put_status::PropertiesSizeExceeded,
            PutStatus::OsPageCacheBusy => rmqha_put_status::OsPageCacheBusy,
            PutStatus::CreateMappedFileFailed => rmqha_put_status::CreateMappedFileFailed,
            PutStatus::UnknownError => rmqha_put_status::UnknownError,
        }
    }
}

/// Where a put went and how durable it is. A plain value: no pointers, nothing to free.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rmqha_put_result_t {
    pub status: rmqha_put_status,
    /// RocketMQ's offset message id (hex, NUL-terminated); "" when nothing was stored.
    pub msg_id: [c_char; RMQHA_MSG_ID_SIZE],
    /// Physical offset of the record in the CommitLog; -1 when nothing was stored.
    pub phy_offset: i64,
    /// The queue the message went to. A delayed message (`DELAY`) goes first to
    /// SCHEDULE_TOPIC_XXXX, queue `level - 1`, as in RocketMQ, and this is that queue.
    pub queue_id: i32,
    /// The message's ConsumeQueue offset in that queue (for a delayed message, in
    /// SCHEDULE_TOPIC_XXXX's); -1 when nothing was stored.
    pub queue_offset: i64,
    /// Bytes of the record; 0 when nothing was stored. `phy_offset + size` is what a slave
    /// must hold for the put to be replicated.
    pub size: i32,
    /// The store's clock when the record was written, ms since the epoch; 0 when nothing was
    /// stored.
    pub store_timestamp: i64,
}

impl rmqha_put_result_t {
    fn stored(r: &PutResult) -> Self {
        rmqha_put_result_t {
            status: r.status.into(),
            msg_id: args::fixed(&r.msg_id()),
            phy_offset: r.phy_offset,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            size: r.size,
            store_timestamp: r.store_timestamp,
        }
    }

    fn not_stored(status: PutStatus, queue_id: i32) -> Self {
        rmqha_put_result_t {
            status: status.into(),
            msg_id: [0; RMQHA_MSG_ID_SIZE],
            phy_offset: -1,
            queue_id,
            queue_offset: -1,
            size: 0,
            store_timestamp: 0,
        }
    }
}

/// Puts one message into queue 0 of `topic` and waits until the answer is final for the
/// broker's role: stored; flushed if SYNC_FLUSH; acked by a slave (or timed out) if
/// SYNC_MASTER. Queue 0, as a RocketMQ `Message` without a queue; use
/// `rmqha_put_message_sync_to_queue` to choose the queue (a producer spreading load picks
/// queues round-robin itself).
///
/// `body` may be NULL when `body_len` is 0. `tags` (the TAGS property) and `keys` (KEYS: one
/// string, keys separated by spaces, as RocketMQ stores them) may be NULL or "" for none.
///
/// Returns `RMQHA_STATUS_OK` whenever the message was stored, and `result->status` says how
/// durable it is: PUT_OK, or FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE.
/// Returns `RMQHA_STATUS_PUT_FAILED` when nothing was stored, with the reason in
/// `result->status` (e.g. MESSAGE_ILLEGAL, or SERVICE_NOT_AVAILABLE on a slave, on a full
/// disk or after `rmqha_shutdown`) and the last error message, as every binding answers.
/// `*result` is written exactly when the status is OK or PUT_FAILED.
///
/// Ownership: every argument is borrowed for the call; `*result` is the caller's and holds no
/// pointers. Thread safety: callable from many threads at once on one broker; each call blocks
/// its own thread only, and concurrent SYNC_MASTER puts share slave acks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_put_message_sync(
    broker: *const rmqha_broker,
    topic: *const c_char,
    body: *const u8,
    body_len: usize,
    tags: *const c_char,
    keys: *const c_char,
    result: *mut rmqha_put_result_t,
) -> rmqha_status {
    // SAFETY: the same contract, with queue 0.
    unsafe { rmqha_put_message_sync_to_queue(broker, topic, 0, body, body_len, tags, keys, result) }
}

/// As `rmqha_put_message_sync`, into queue `queue_id` of `topic` (0 or more; the queue is
/// created on first use).
///
/// Ownership and thread safety: as `rmqha_put_message_sync`.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_put_message_sync_to_queue(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    body: *const u8,
    body_len: usize,
    tags: *const c_char,
    keys: *const c_char,
    result: *mut rmqha_put_result_t,
) -> rmqha_status {
    // SAFETY: the same contract, with no properties.
    unsafe {
        rmqha_put_message_sync_with_properties(
            broker,
            topic,
            queue_id,
            body,
            body_len,
            tags,
            keys,
            std::ptr::null(),
            0,
            result,
        )
    }
}

/// The most properties one put may give: more could not fit the 32767 bytes RocketMQ's
/// format leaves them.
const MAX_PUT_PROPERTIES: usize = 16_384;

/// As `rmqha_put_message_sync_to_queue`, with `property_count` more properties from the
/// array `properties` (NULL when the count is 0): a user's own (`key` = `value`), or
/// RocketMQ's, such as `DELAY` = a delay level (1 to the number of `messageDelayLevel`
/// entries) for a message delivered that long after it is stored. A key given twice keeps its
/// last value; `tags` and `keys`, when given, win over a `TAGS` or `KEYS` in the array; an empty value leaves the key out, as RocketMQ's encoder does. A key or value
/// holding the separator bytes 0x01 or 0x02 is not stored (MESSAGE_ILLEGAL). `WAIT` =
/// `false` is RocketMQ's `waitStoreMsgOK=false`: the put is answered PUT_OK once stored,
/// without waiting for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER), so it does not carry
/// the durability a PUT_OK otherwise means; leave it out for that.
///
/// Ownership: every argument, the array and its strings included, is borrowed for the call.
/// Thread safety: as `rmqha_put_message_sync`.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_put_message_sync_with_properties(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    body: *const u8,
    body_len: usize,
    tags: *const c_char,
    keys: *const c_char,
    properties: *const rmqha_property_t,
    property_count: usize,
    result: *mut rmqha_put_result_t,
) -> rmqha_status {
    guard(|| {
        args::out(result, "result")?;
        // SAFETY: the caller passes a live handle, C strings and `body_len` readable bytes.
        let (b, topic, body, tags, keys) = unsafe {
            (
                broker_arg(broker)?,
                args::str(topic, "topic")?,
                args::bytes(body, body_len, "body")?,
                args::opt_str(tags, "tags")?,
                args::opt_str(keys, "keys")?,
            )
        };
        if queue_id < 0 {
            return Err(Failure::new(
                rmqha_status::InvalidArgument,
                format!("queue_id {queue_id} is negative"),
            ));
        }
        let mut msg = Message::new(topic, body).with_queue(queue_id);
        if property_count > MAX_PUT_PROPERTIES {
            return Err(Failure::new(
                rmqha_status::InvalidArgument,
                format!(
                    "property_count {property_count} is more than a message can hold ({MAX_PUT_PROPERTIES})"
                ),
            ));
        }
        if property_count > 0 {
            if properties.is_null() {
                return Err(Failure::new(
                    rmqha_status::NullArgument,
                    format!("properties is NULL but property_count is {property_count}"),
                ));
            }
            // SAFETY: non-NULL with `property_count` readable entries by the caller's contract.
            let given = unsafe { std::slice::from_raw_parts(properties, property_count) };
            for (i, p) in given.iter().enumerate() {
                // SAFETY: each entry's strings are C strings by the caller's contract.
                let (k, v) = unsafe {
                    (
                        args::str(p.key, &format!("properties[{i}].key"))?,
                        args::str(p.value, &format!("properties[{i}].value"))?,
                    )
                };
                msg.set_property(k, v);
            }
        }
        // After the properties, so that `tags` and `keys` win over a TAGS or KEYS among them,
        // as in the Python and Node bindings.
        if let Some(tags) = tags {
            msg = msg.with_tags(tags);
        }
        let keys: Vec<&str> = keys.map(|k| k.split_whitespace().collect()).unwrap_or_default();
        if !keys.is_empty() {
            msg = msg.with_keys(&keys);
        }
        match b.put_message_sync(&msg) {
            Ok(r) => {
                // SAFETY: checked non-NULL above.
                unsafe { args::write(result, rmqha_put_result_t::stored(&r)) };
                Ok(())
            }
            Err(e) => {
                let status = match &e {
                    Error::PutFailed { status, .. } => *status,
                    _ => PutStatus::UnknownError,
                };
                // SAFETY: checked non-NULL above.
                unsafe { args::write(result, rmqha_put_result_t::not_stored(status, queue_id)) };
                Err(Failure::new(rmqha_status::PutFailed, e.to_string()))
            }
        }
    })
}

/// The name of a put status, e.g. "PUT_OK" (RocketMQ's spelling); "UNKNOWN" for a number this
/// library does not define.
///
/// Ownership: a static string; never free it. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn rmqha_put_status_name(status: u32) -> *const c_char {
    crate::status::guard_value(std::ptr::null(), || {
        rmqha_put_status::ALL.iter().find(|s| **s as u32 == status).map_or(c"UNKNOWN", |s| s.name()).as_ptr()
    })
}

impl rmqha_put_status {
    const ALL: [rmqha_put_status; 10] = [
        rmqha_put_status::PutOk,
        rmqha_put_status::FlushDiskTimeout,
        rmqha_put_status::FlushSlaveTimeout,
        rmqha_put_status::SlaveNotAvailable,
        rmqha_put_status::ServiceNotAvailable,
        rmqha_put_status::MessageIllegal,
        rmqha_put_status::PropertiesSizeExceeded,
        rmqha_put_status::OsPageCacheBusy,
        rmqha_put_status::CreateMappedFileFailed,
        rmqha_put_status::UnknownError,
    ];

    fn name(self) -> &'static CStr {
        match self {
            rmqha_put_status::PutOk => c"PUT_OK",
            rmqha_put_status::FlushDiskTimeout => c"FLUSH_DISK_TIMEOUT",
            rmqha_put_status::FlushSlaveTimeout => c"FLUSH_SLAVE_TIMEOUT",
            rmqha_put_status::SlaveNotAvailable => c"SLAVE_NOT_AVAILABLE",
            rmqha_put_status::ServiceNotAvailable => c"SERVICE_NOT_AVAILABLE",
            rmqha_put_status::MessageIllegal => c"MESSAGE_ILLEGAL",
            rmqha_put_status::PropertiesSizeExceeded => c"PROPERTIES_SIZE_EXCEEDED",
            rmqha_put_status::OsPageCacheBusy => c"OS_PAGE_CACHE_BUSY",
            rmqha_put_status::CreateMappedFileFailed => c"CREATE_MAPPED_FILE_FAILED",
            rmqha_put_status::UnknownError => c"UNKNOWN_ERROR",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_statuses_have_core_numbers_and_names() {
        for (i, s) in rmqha_put_status::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32);
        }
        for core in PutStatus::ALL {
            let ours = rmqha_put_status::from(core);
            assert_eq!(ours as u32, core as u32);
            assert_eq!(ours.name().to_str().unwrap(), core.as_str());
        }
    }
}
