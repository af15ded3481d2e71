//! The read path (spec 10): messages of a queue from an offset, by physical offset, by id.

use std::net::SocketAddr;
use std::sync::Arc;

use super::mapped_file::MappedFile;
use crate::message::properties::{self, keys};
use crate::message::{RecordView, decode_record, offset_msg_id};

/// Which end a search by store time answers (RocketMQ 5's `BoundaryType`), see
/// `MessageStore::queue_offset_by_time_bounded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimeBoundary {
    /// The first message stored at or after the time.
    #[default]
    Lower,
    /// The last message stored at or before the time.
    Upper,
}

impl TimeBoundary {
    /// Reads a `boundaryType` as RocketMQ's `BoundaryType.getType` does: `upper` in any case
    /// is `Upper`, anything else (absent, empty, `LOWER`, unknown) is `Lower`.
    pub fn from_name(name: Option<&str>) -> TimeBoundary {
        match name {
            Some(n) if n.eq_ignore_ascii_case("upper") => TimeBoundary::Upper,
            _ => TimeBoundary::Lower,
        }
    }
}

/// `lower` or `upper`, in any case; anything else is an error naming it (the bindings' reading,
/// stricter than the wire's `from_name`).
impl std::str::FromStr for TimeBoundary {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<TimeBoundary> {
        if s.eq_ignore_ascii_case("lower") {
            Ok(TimeBoundary::Lower)
        } else if s.eq_ignore_ascii_case("upper") {
            Ok(TimeBoundary::Upper)
        } else {
            Err(crate::Error::InvalidArgument(format!(
                "boundary {:?} is neither \"lower\" nor \"upper\"",
                crate::clip(s, 64)
            )))
        }
    }
}

/// What a filtered read keeps (RocketMQ's `MessageFilter`), in two stages: by the
/// ConsumeQueue unit, before the CommitLog is read, then by the record itself. A unit or
/// record that fails either stage is skipped: it counts toward neither the message nor the
/// byte limits of the read, only toward its scan window.
pub trait MessageFilter {
    /// By the unit's tags code (RocketMQ's `isMatchedByConsumeQueue`).
    fn matches_unit(&self, tags_code: i64) -> bool;
    /// By the record's bytes, which hold one whole record (`isMatchedByCommitLog`).
    fn matches_record(&self, record: &[u8]) -> bool;
}

/// Outcome of `get_messages`, with RocketMQ's names and order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GetMessageStatus {
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

impl GetMessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

impl std::fmt::Display for GetMessageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record still in the mapped file: no copy until someone needs the bytes.
#[derive(Clone)]
pub struct RawRecord {
    file: Arc<MappedFile>,
    pos: usize,
    size: usize,
    pub phy_offset: i64,
    pub queue_offset: i64,
}

impl RawRecord {
    pub(crate) fn new(
        file: Arc<MappedFile>,
        pos: usize,
        size: usize,
        phy_offset: i64,
        queue_offset: i64,
    ) -> Self {
        RawRecord { file, pos, size, phy_offset, queue_offset }
    }
    /// The record's bytes, exactly as in the CommitLog.
    pub fn bytes(&self) -> &[u8] {
        self.file.read(self.pos, self.size).unwrap_or(&[])
    }
    pub fn view(&self) -> Option<RecordView<'_>> {
        decode_record(self.bytes()).ok()
    }
}

impl std::fmt::Debug for RawRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRecord").field("phy_offset", &self.phy_offset).field("size", &self.size).finish()
    }
}

/// A stored message, decoded and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub store_size: i32,
    pub body: Vec<u8>,
    pub body_crc: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    pub properties: Vec<(String, String)>,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    /// RocketMQ's offset message id.
    pub msg_id: String,
}

impl StoredMessage {
    /// Decodes a record view.
    pub fn from_view(v: &RecordView<'_>) -> Self {
        let props = properties::decode(v.properties);
        let tags = props.iter().find(|(k, _)| k == keys::TAGS).map(|(_, v)| v.clone());
        let keys_list = props
            .iter()
            .find(|(k, _)| k == keys::KEYS)
            .map(|(_, v)| v.split(' ').filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        StoredMessage {
            topic: String::from_utf8_lossy(v.topic).into_owned(),
            queue_id: v.queue_id,
            queue_offset: v.queue_offset,
            phy_offset: v.physical_offset,
            store_size: v.total_size,
            body: v.body.to_vec(),
            body_crc: v.body_crc,
            flag: v.flag,
            sys_flag: v.sys_flag,
            tags,
            keys: keys_list,
            properties: props,
            born_timestamp: v.born_timestamp,
            born_host: v.born_host,
            store_timestamp: v.store_timestamp,
            store_host: v.store_host,
            reconsume_times: v.reconsume_times,
            prepared_transaction_offset: v.prepared_transaction_offset,
            msg_id: offset_msg_id(&v.store_host, v.physical_offset),
        }
    }

    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The message as a put would store it again: same topic, queue, body, flag,
    /// properties, birth, sysflag, reconsume times and prepared-transaction offset (the
    /// broker's own copies: delayed deliveries, retries, transactions). The caller changes
    /// what differs.
    pub fn to_message(&self) -> crate::message::Message {
        crate::message::Message {
            topic: self.topic.clone(),
            queue_id: self.queue_id,
            body: self.body.clone(),
            flag: self.flag,
            properties: self.properties.clone(),
            born_timestamp: self.born_timestamp,
            born_host: Some(self.born_host),
            sys_flag: self.sys_flag,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
        }
    }
}

/// The result of `get_messages`.
#[derive(Debug, Clone)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub suggest_pulling_from_slave: bool,
    pub records: Vec<RawRecord>,
}

impl GetMessageResult {
    /// The messages, decoded.
    pub fn messages(&self) -> Vec<StoredMessage> {
        self.records.iter().filter_map(|r| r.view().map(|v| StoredMessage::from_view(&v))).collect()
    }
    /// Total bytes of the records.
    pub fn buffer_total_size(&self) -> usize {
        self.records.iter().map(|r| r.size).sum()
    }
}

/// Physical memory of the machine, for the "in memory" estimate.
pub fn total_physical_memory() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages > 0 && page > 0 { pages as u64 * page as u64 } else { 8 << 30 }
}
