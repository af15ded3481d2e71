//! Reads: `rmqha_get_messages`, `rmqha_message_by_id`, `rmqha_query_by_key`, and the one
//! heap result they share, `rmqha_get_result_t`.

use std::ffi::{CStr, CString, c_char};

use rmqha_core::message::properties::keys;
use rmqha_core::{GetMessageStatus, StoredMessage};

use crate::RMQHA_MSG_ID_SIZE;
use crate::args;
use crate::broker::{broker_arg, rmqha_broker};
use crate::status::{Failure, guard, rmqha_status};

/// The outcome of `rmqha_get_messages`, with RocketMQ's names (`RMQHA_GET_STATUS_FOUND`, ...).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmqha_get_status {
    Found = 0,
    NoMatchedMessage = 1,
    MessageWasRemoving = 2,
    OffsetFoundNull = 3,
    OffsetOverflowBadly = 4,
    OffsetOverflowOne = 5,
    OffsetTooSmall = 6,
    NoMatchedLogicQueue = 7,
    NoMessageInQueue = 8,
}

impl From<GetMessageStatus> for rmqha_get_status {
    fn from(s: GetMessageStatus) -> Self {
        match s {
            GetMessageStatus::Found => rmqha_get_status::Found,
            GetMessageStatus::NoMatchedMessage => rmqha_get_status::NoMatchedMessage,
            GetMessageStatus::MessageWasRemoving => rmqha_get_status::MessageWasRemoving,
            GetMessageStatus::OffsetFoundNull => rmqha_get_status::OffsetFoundNull,
            GetMessageStatus::OffsetOverflowBadly => rmqha_get_status::OffsetOverflowBadly,
            GetMessageStatus::OffsetOverflowOne => rmqha_get_status::OffsetOverflowOne,
            GetMessageStatus::OffsetTooSmall => rmqha_get_status::OffsetTooSmall,
            GetMessageStatus::NoMatchedLogicQueue => rmqha_get_status::NoMatchedLogicQueue,
            GetMessageStatus::NoMessageInQueue => rmqha_get_status::NoMessageInQueue,
        }
    }
}

impl rmqha_get_status {
    const ALL: [GetMessageStatus; 9] = [
        GetMessageStatus::Found,
        GetMessageStatus::NoMatchedMessage,
        GetMessageStatus::MessageWasRemoving,
        GetMessageStatus::OffsetFoundNull,
        GetMessageStatus::OffsetOverflowBadly,
        GetMessageStatus::OffsetOverflowOne,
        GetMessageStatus::OffsetTooSmall,
        GetMessageStatus::NoMatchedLogicQueue,
        GetMessageStatus::NoMessageInQueue,
    ];

    fn name(self) -> &'static CStr {
        match self {
            rmqha_get_status::Found => c"FOUND",
            rmqha_get_status::NoMatchedMessage => c"NO_MATCHED_MESSAGE",
            rmqha_get_status::MessageWasRemoving => c"MESSAGE_WAS_REMOVING",
            rmqha_get_status::OffsetFoundNull => c"OFFSET_FOUND_NULL",
            rmqha_get_status::OffsetOverflowBadly => c"OFFSET_OVERFLOW_BADLY",
            rmqha_get_status::OffsetOverflowOne => c"OFFSET_OVERFLOW_ONE",
            rmqha_get_status::OffsetTooSmall => c"OFFSET_TOO_SMALL",
            rmqha_get_status::NoMatchedLogicQueue => c"NO_MATCHED_LOGIC_QUEUE",
            rmqha_get_status::NoMessageInQueue => c"NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// One message property, `key` = `value`. In a read result both strings belong to the result
/// holding it; given to `rmqha_put_message_sync_with_properties` they are the caller's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rmqha_property_t {
    pub key: *const c_char,
    pub value: *const c_char,
}

/// A stored message. Every pointer in it belongs to the `rmqha_get_result_t` holding it and
/// is valid until that result is freed. Strings are NUL-terminated UTF-8 (a value holding a
/// NUL byte, which rmqha never writes, is cut at it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rmqha_message_t {
    pub topic: *const c_char,
    pub queue_id: i32,
    pub queue_offset: i64,
    /// Physical offset of the record in the CommitLog.
    pub phy_offset: i64,
    /// Bytes of the whole record.
    pub store_size: i32,
    /// The body, `body_len` bytes (not NUL-terminated; never NULL, even when empty).
    pub body: *const u8,
    pub body_len: usize,
    /// The TAGS property, NULL if none.
    pub tags: *const c_char,
    /// The KEYS property (keys separated by spaces), NULL if none.
    pub keys: *const c_char,
    /// Every property in stored order, TAGS and KEYS included; NULL when `property_count` is 0.
    pub properties: *const rmqha_property_t,
    pub property_count: usize,
    /// When the store wrote it, ms since the epoch.
    pub store_timestamp: i64,
    /// When the producer made it, ms since the epoch.
    pub born_timestamp: i64,
    /// RocketMQ's offset message id (hex, NUL-terminated).
    pub msg_id: [c_char; RMQHA_MSG_ID_SIZE],
}

/// The answer of `rmqha_get_messages` (also used by `rmqha_message_by_id` and
/// `rmqha_query_by_key`): a status, the queue's offsets, and the messages. Allocated by rmqha;
/// read it, then free it with `rmqha_get_result_free`, which frees every message and string in
/// it. Do not write to it.
#[repr(C)]
#[derive(Debug)]
pub struct rmqha_get_result_t {
    pub status: rmqha_get_status,
    /// The queue offset to ask for next.
    pub next_begin_offset: i64,
    /// The queue's first readable offset.
    pub min_offset: i64,
    /// The queue offset one past its last message.
    pub max_offset: i64,
    /// Whether the master suggests reading from a slave (the data is no longer in memory).
    pub suggest_pulling_from_slave: bool,
    /// The messages, `message_count` of them; NULL when `message_count` is 0.
    pub messages: *const rmqha_message_t,
    pub message_count: usize,
}

/// A result and everything its pointers point into. `repr(C)` with the public part first, so
/// a pointer to the box is a pointer to the `rmqha_get_result_t` the caller sees.
#[repr(C)]
struct OwnedGetResult {
    public: rmqha_get_result_t,
    // Heap buffers: moving these into the box does not move what the pointers point at.
    _messages: Vec<rmqha_message_t>,
    _properties: Vec<Vec<rmqha_property_t>>,
    _strings: Vec<CString>,
    _bodies: Vec<Vec<u8>>,
}

/// Never NULL, even for an empty body, so `memcpy(dst, m->body, 0)` is well-defined in C.
static EMPTY_BODY: [u8; 1] = [0];

fn into_raw(
    status: GetMessageStatus,
    next_begin_offset: i64,
    min_offset: i64,
    max_offset: i64,
    suggest_pulling_from_slave: bool,
    msgs: Vec<StoredMessage>,
) -> *mut rmqha_get_result_t {
    let mut strings = Vec::new();
    let mut keep = |s: &str| {
        let c = args::c_string(s);
        let p = c.as_ptr();
        strings.push(c);
        p
    };
    let mut bodies = Vec::with_capacity(msgs.len());
    let mut properties = Vec::with_capacity(msgs.len());
    let mut messages = Vec::with_capacity(msgs.len());
    for m in msgs {
        let props: Vec<rmqha_property_t> =
            m.properties.iter().map(|(k, v)| rmqha_property_t { key: keep(k), value: keep(v) }).collect();
        let body = if m.body.is_empty() { EMPTY_BODY.as_ptr() } else { m.body.as_ptr() };
        messages.push(rmqha_message_t {
            topic: keep(&m.topic),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            phy_offset: m.phy_offset,
            store_size: m.store_size,
            body,
            body_len: m.body.len(),
            tags: m.tags.as_deref().map_or(std::ptr::null(), &mut keep),
            keys: m.property(keys::KEYS).map_or(std::ptr::null(), &mut keep),
            properties: if props.is_empty() { std::ptr::null() } else { props.as_ptr() },
            property_count: props.len(),
            store_timestamp: m.store_timestamp,
            born_timestamp: m.born_timestamp,
            msg_id: args::fixed(&m.msg_id),
        });
        properties.push(props);
        bodies.push(m.body);
    }
    let owned = Box::new(OwnedGetResult {
        public: rmqha_get_result_t {
            status: status.into(),
            next_begin_offset,
            min_offset,
            max_offset,
            suggest_pulling_from_slave,
            messages: if messages.is_empty() { std::ptr::null() } else { messages.as_ptr() },
            message_count: messages.len(),
        },
        _messages: messages,
        _properties: properties,
        _strings: strings,
        _bodies: bodies,
    });
    // `public` is the first field of a repr(C) struct: same address.
    Box::into_raw(owned).cast::<rmqha_get_result_t>()
}

/// Reads up to `max_msgs` messages of queue `queue_id` of `topic`, from queue offset `offset`
/// (RocketMQ's getMessage), into a new result in `*out`.
///
/// Returns `RMQHA_STATUS_OK` whenever the read happened: `(*out)->status` says what was found
/// (FOUND, or e.g. OFFSET_OVERFLOW_ONE when `offset` is the queue's end, NO_MATCHED_LOGIC_QUEUE
/// for an unknown queue) and `next_begin_offset` where to read next. Works on masters and
/// slaves. `RMQHA_STATUS_INVALID_ARGUMENT` when `max_msgs` < 1. On any failure `*out` is set
/// to NULL (as by every read), so freeing it is always safe.
///
/// Ownership: the caller owns `*out` and frees it with `rmqha_get_result_free`; `topic` is
/// borrowed for the call. Thread safety: callable from any thread; the result may be read
/// from any thread and outlives the broker.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_get_messages(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    offset: i64,
    max_msgs: i32,
    out: *mut *mut rmqha_get_result_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: checked non-NULL above; set first so a failure leaves NULL.
        unsafe { args::write(out, std::ptr::null_mut()) };
        // SAFETY: the caller passes a live handle and a C string.
        let (b, topic) = unsafe { (broker_arg(broker)?, args::str(topic, "topic")?) };
        if max_msgs < 1 {
            return Err(Failure::new(
                rmqha_status::InvalidArgument,
                format!("max_msgs {max_msgs} is below 1"),
            ));
        }
        let r = b.get_messages(topic, queue_id, offset, max_msgs);
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, get_result_into_raw(r)) };
        Ok(())
    })
}

fn get_result_into_raw(r: rmqha_core::store::GetMessageResult) -> *mut rmqha_get_result_t {
    let msgs = r.messages();
    into_raw(r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.suggest_pulling_from_slave, msgs)
}

/// `rmqha_get_messages` keeping only the messages a tag or a SQL92 expression passes, as a
/// consumer's subscription (RocketMQ's `MessageSelector.byTag` / `bySql`).
///
/// `tags` is a tag expression, tags separated by `||` (`"red || blue"`; `"*"` or `""` pass
/// every message), matched against each message's TAGS. `sql` is a SQL92 expression over the
/// message's properties (`"price > 10 AND TAGS IN ('red', 'blue')"`), compiled for the call.
/// Give at most one of them; both NULL is `rmqha_get_messages`.
///
/// The read skips what does not pass without counting it toward `max_msgs`, scanning up to
/// `maxFilterMessageSize` bytes of queue entries (or `max_msgs` entries if more):
/// `next_begin_offset` is one past the last entry scanned, and the status is
/// `RMQHA_GET_STATUS_NO_MATCHED_MESSAGE` when nothing in that window passed, so reading on
/// from `next_begin_offset` moves past it.
///
/// Returns `RMQHA_STATUS_INVALID_ARGUMENT` (with the reason in `rmqha_last_error_message`)
/// when both are given, when `sql` does not compile (the message names the column), or when
/// `max_msgs` < 1; `*out` is then NULL.
///
/// Ownership: as `rmqha_get_messages`; `tags` and `sql` are borrowed for the call. Thread
/// safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_get_messages_selected(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    offset: i64,
    max_msgs: i32,
    tags: *const c_char,
    sql: *const c_char,
    out: *mut *mut rmqha_get_result_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: checked non-NULL above; set first so a failure leaves NULL.
        unsafe { args::write(out, std::ptr::null_mut()) };
        // SAFETY: the caller passes a live handle and C strings (or NULL for tags and sql).
        let (b, topic, tags, sql) = unsafe {
            (
                broker_arg(broker)?,
                args::str(topic, "topic")?,
                args::opt_str(tags, "tags")?,
                args::opt_str(sql, "sql")?,
            )
        };
        if max_msgs < 1 {
            return Err(Failure::new(
                rmqha_status::InvalidArgument,
                format!("max_msgs {max_msgs} is below 1"),
            ));
        }
        let selector = rmqha_core::filter::MessageSelector::from_tags_or_sql(tags, sql)?;
        let r = b.get_messages_selected(topic, queue_id, offset, max_msgs, &selector);
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, get_result_into_raw(r)) };
        Ok(())
    })
}

/// Looks a message up by its offset message id (`msg_id` of a put result or message) into a
/// new result in `*out` holding that one message (status FOUND; the offsets are -1).
/// `RMQHA_STATUS_NOT_FOUND` when there is no such message (`*out` is then set to NULL).
///
/// Ownership: as `rmqha_get_messages`. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_message_by_id(
    broker: *const rmqha_broker,
    msg_id: *const c_char,
    out: *mut *mut rmqha_get_result_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: checked non-NULL above; set first so a failure leaves NULL.
        unsafe { args::write(out, std::ptr::null_mut()) };
        // SAFETY: the caller passes a live handle and a C string.
        let (b, id) = unsafe { (broker_arg(broker)?, args::str(msg_id, "msg_id")?) };
        let m = b
            .message_by_id(id)
            .ok_or_else(|| Failure::new(rmqha_status::NotFound, format!("no message with id {id}")))?;
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, into_raw(GetMessageStatus::Found, -1, -1, -1, false, vec![m])) };
        Ok(())
    })
}

/// Finds up to `max` messages of `topic` whose KEYS (or unique key) include `key`, newest
/// first, through the IndexFile, into a new result in `*out`: status FOUND with the messages,
/// or NO_MATCHED_MESSAGE with none; the offsets are -1. `max` is capped by the config's
/// `maxMsgsNumBatch` (64 by default), as RocketMQ's queryMessage is.
///
/// Ownership: as `rmqha_get_messages`. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_query_by_key(
    broker: *const rmqha_broker,
    topic: *const c_char,
    key: *const c_char,
    max: usize,
    out: *mut *mut rmqha_get_result_t,
) -> rmqha_status {
    // SAFETY: the caller's pointers, passed on as they came.
    unsafe { rmqha_query_by_key_between(broker, topic, key, max, 0, i64::MAX, out) }
}

/// `rmqha_query_by_key` for messages stored from `begin_ms` to `end_ms` (both included,
/// milliseconds since the epoch), as RocketMQ's `queryMessage`: with `end_ms` set below the
/// oldest store time a query returned, the next one goes on where it stopped.
/// `RMQHA_STATUS_INVALID_ARGUMENT` when `begin_ms` > `end_ms`.
///
/// Ownership: as `rmqha_get_messages`. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_query_by_key_between(
    broker: *const rmqha_broker,
    topic: *const c_char,
    key: *const c_char,
    max: usize,
    begin_ms: i64,
    end_ms: i64,
    out: *mut *mut rmqha_get_result_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: checked non-NULL above; set first so a failure leaves NULL.
        unsafe { args::write(out, std::ptr::null_mut()) };
        // SAFETY: the caller passes a live handle and C strings.
        let (b, topic, key) =
            unsafe { (broker_arg(broker)?, args::str(topic, "topic")?, args::str(key, "key")?) };
        if begin_ms > end_ms {
            return Err(Failure::new(
                rmqha_status::InvalidArgument,
                format!("begin_ms {begin_ms} is after end_ms {end_ms}"),
            ));
        }
        let msgs = b.query_by_key_between(topic, key, max, begin_ms, end_ms);
        let status =
            if msgs.is_empty() { GetMessageStatus::NoMatchedMessage } else { GetMessageStatus::Found };
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, into_raw(status, -1, -1, -1, false, msgs)) };
        Ok(())
    })
}

/// Frees a result and every message, body and string in it. NULL is allowed and does nothing.
///
/// Ownership: takes back what `rmqha_get_messages`, `rmqha_get_messages_selected`,
/// `rmqha_message_by_id`, `rmqha_query_by_key` or `rmqha_query_by_key_between` gave; no
/// pointer into the result may be used afterwards. Thread
/// safety: no other call may be using the result.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_get_result_free(result: *mut rmqha_get_result_t) {
    crate::status::guard_value((), || {
        if !result.is_null() {
            // SAFETY: `result` came from Box::into_raw of an OwnedGetResult in `into_raw` (same
            // address as its first field) and is freed once.
            drop(unsafe { Box::from_raw(result.cast::<OwnedGetResult>()) });
        }
    })
}

/// The name of a get status, e.g. "FOUND" (RocketMQ's spelling); "UNKNOWN" for a number this
/// library does not define.
///
/// Ownership: a static string; never free it. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn rmqha_get_status_name(status: u32) -> *const c_char {
    crate::status::guard_value(std::ptr::null(), || {
        rmqha_get_status::ALL
            .iter()
            .map(|s| rmqha_get_status::from(*s))
            .find(|s| *s as u32 == status)
            .map_or(c"UNKNOWN", |s| s.name())
            .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_statuses_have_core_numbers_and_names() {
        for core in rmqha_get_status::ALL {
            let ours = rmqha_get_status::from(core);
            assert_eq!(ours as u32, core as u32);
            assert_eq!(ours.name().to_str().unwrap(), core.as_str());
        }
    }
}
