//! The CommitLog record codec (spec 1): writes v1 records, reads v1 and v2, validates records
//! as RocketMQ's `checkMessageAndReturnSize` does.
//!
//! Writing is split in two so the put lock is held as briefly as possible: [`PreparedMessage`]
//! computes the body CRC and every length outside the lock; [`PreparedMessage::write`] then
//! fills the fields known only under the lock (offsets, store time) while copying the message
//! straight into its place in the mapped file: one copy, no allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::hash::java_string_hash_bytes;
use super::properties::{self, keys};
use super::sysflag;

/// Magic of a v1 record (1-byte topic length).
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic of a v2 record (2-byte topic length; written by RocketMQ 5.x for long topics).
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic of the filler record at the end of every full CommitLog file.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// Bytes of the filler record header `[i32 size][i32 magic]`.
pub const BLANK_HEADER_LEN: usize = 8;
/// Longest topic rmqha writes, in UTF-8 bytes (the v1 length byte is signed).
pub const MAX_TOPIC_LEN: usize = 127;

/// Whether a topic name is one RocketMQ's `TopicValidator` accepts: 1 to 127 characters from
/// `a-z A-Z 0-9 % | _ -`. The name becomes a ConsumeQueue directory, so anything else (a `/`,
/// `..`, a NUL, which is also what a torn write looks like) must never reach the store.
pub fn topic_is_valid(topic: &str) -> bool {
    let bytes = topic.as_bytes();
    !bytes.is_empty() && bytes.len() <= MAX_TOPIC_LEN && bytes.iter().all(|&b| TOPIC_BYTES[b as usize])
}

/// Longest consumer or producer group name RocketMQ's clients accept (`Validators`).
pub const MAX_GROUP_LEN: usize = 255;

/// Whether a group name is one RocketMQ's client-side `Validators.checkGroup` accepts: 1 to
/// 255 characters from `a-z A-Z 0-9 % | _ -`. A broker creates a subscription group (and its
/// `%RETRY%` topic) for any name a peer sends, and persists it: only these.
pub fn group_is_valid(group: &str) -> bool {
    let bytes = group.as_bytes();
    !bytes.is_empty() && bytes.len() <= MAX_GROUP_LEN && bytes.iter().all(|&b| TOPIC_BYTES[b as usize])
}

/// The bytes `topic_is_valid` allows, as a table: one load per byte on the put path.
static TOPIC_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'%' || c == b'|' || c == b'_' || c == b'-';
        b += 1;
    }
    table
};
/// Longest encoded properties (a signed short).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Offset of the QUEUEOFFSET field.
pub const QUEUE_OFFSET_POS: usize = 20;
/// Offset of the PHYSICALOFFSET field.
pub const PHYSICAL_OFFSET_POS: usize = 28;
/// Offset of the SYSFLAG field.
pub const SYSFLAG_POS: usize = 36;
/// Offset of the BORNTIMESTAMP field.
pub const BORN_TIMESTAMP_POS: usize = 40;
/// Offset of the BORNHOST field.
pub const BORN_HOST_POS: usize = 48;

/// Why `key` cannot be one key of a message, if it cannot: RocketMQ stores KEYS as one
/// string with the keys separated by spaces (`MessageConst.KEY_SEPARATOR`), so a key holding
/// a space would be indexed, and read back, as several keys, and an empty key as none.
pub fn key_error(key: &str) -> Option<String> {
    if key.is_empty() {
        Some("a key is empty: RocketMQ's index skips empty keys, so it could never be found".into())
    } else if key.contains(' ') {
        Some(format!(
            "key {key:?} contains a space: RocketMQ stores KEYS separated by spaces, so it would be indexed \
             and read back as several keys"
        ))
    } else {
        None
    }
}

/// CRC-32 (IEEE) of `data`, masked to 31 bits as RocketMQ's `UtilAll.crc32`.
pub fn crc32_masked(data: &[u8]) -> u32 {
    crc32fast::hash(data) & 0x7FFF_FFFF
}

fn host_len(v6: bool) -> usize {
    if v6 { 20 } else { 8 }
}

/// The length of a v1 record: spec 1.2's formula.
pub fn record_len(
    body_len: usize,
    topic_len: usize,
    props_len: usize,
    born_v6: bool,
    store_v6: bool,
) -> usize {
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_len(born_v6)
        + 8
        + host_len(store_v6)
        + 4
        + 8
        + 4
        + body_len
        + 1
        + topic_len
        + 2
        + props_len
}

/// A message as a producer hands it to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub queue_id: i32,
    pub body: Vec<u8>,
    /// User flag (Message.flag).
    pub flag: i32,
    /// Properties in order; TAGS and KEYS are properties too.
    pub properties: Vec<(String, String)>,
    /// Producer's clock, ms since the epoch; 0 means "now" at put time.
    pub born_timestamp: i64,
    /// Producer's address; `None` uses the store host.
    pub born_host: Option<SocketAddr>,
    /// SYSFLAG bits other than the host-kind bits, which the encoder sets.
    pub sys_flag: i32,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
}

impl Message {
    /// A message for `topic`, queue 0, with `body`.
    pub fn new(topic: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Message {
            topic: topic.into(),
            queue_id: 0,
            body: body.into(),
            flag: 0,
            properties: Vec::new(),
            born_timestamp: 0,
            born_host: None,
            sys_flag: 0,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }

    pub fn with_queue(mut self, queue_id: i32) -> Self {
        self.queue_id = queue_id;
        self
    }

    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.set_property(keys::TAGS, tags);
        self
    }

    /// Sets KEYS to the keys joined by spaces, as RocketMQ stores them. A key with a space in
    /// it becomes several keys (see [`key_error`]).
    pub fn with_keys<S: AsRef<str>>(mut self, ks: &[S]) -> Self {
        let joined = ks.iter().map(|k| k.as_ref()).collect::<Vec<_>>().join(" ");
        self.set_property(keys::KEYS, joined);
        self
    }

    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_property(key, value);
        self
    }

    /// Sets or replaces a property.
    pub fn set_property(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.properties.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.properties.push((key, value));
        }
    }

    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn tags(&self) -> Option<&str> {
        self.property(keys::TAGS)
    }

    /// Whether the producer waits for the store's final answer: the WAIT property read as
    /// Java's `Boolean.parseBoolean` (only `true`, in any case, is true), true when absent.
    pub fn wait_store_ok(&self) -> bool {
        self.property(keys::WAIT).is_none_or(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// Why a message cannot be stored at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidMessage {
    /// Topic empty, longer than 127 bytes, or containing separator or NUL bytes.
    Topic,
    /// Body larger than `maxMessageSize`.
    BodyTooLarge,
    /// Encoded properties longer than 32767 bytes.
    PropertiesTooLarge,
    /// A property key or value contains a 0x01 or 0x02 byte.
    PropertyCharacters,
}

/// A message whose CRC and lengths are computed, ready to be written under the put lock.
#[derive(Debug, Clone, Copy)]
pub struct PreparedMessage<'a> {
    pub msg: &'a Message,
    pub body_crc: u32,
    /// The encoded properties' length, the whole-record CRC's 20 bytes included.
    pub props_len: usize,
    pub total_len: usize,
    pub sys_flag: i32,
    pub born_host: SocketAddr,
    pub born_timestamp: i64,
    pub tags_code: i64,
    /// Whether the properties end with RocketMQ 5's whole-record CRC (see
    /// [`with_record_crc`](Self::with_record_crc)).
    pub record_crc: bool,
}

/// The bytes RocketMQ 5's whole-record CRC takes at the end of a record's properties
/// (`CommitLog.CRC32_RESERVED_LEN`): `__CRC32#`, 0x01, ten digits, 0x02.
pub const RECORD_CRC_LEN: usize = keys::CRC32.len() + 1 + 10 + 1;

impl<'a> PreparedMessage<'a> {
    /// Validates `msg` and computes everything that does not depend on its position.
    pub fn prepare(
        msg: &'a Message,
        store_host: &SocketAddr,
        max_body: usize,
        now_ms: i64,
    ) -> Result<Self, InvalidMessage> {
        if !topic_is_valid(&msg.topic) {
            return Err(InvalidMessage::Topic);
        }
        if msg.body.len() > max_body {
            return Err(InvalidMessage::BodyTooLarge);
        }
        if msg.properties.iter().any(|(k, v)| !properties::is_encodable(k) || !properties::is_encodable(v)) {
            return Err(InvalidMessage::PropertyCharacters);
        }
        let props_len = properties::encoded_len(&msg.properties);
        if props_len > MAX_PROPERTIES_LEN {
            return Err(InvalidMessage::PropertiesTooLarge);
        }
        let born_host = msg.born_host.unwrap_or(*store_host);
        let mut sys_flag = msg.sys_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOSTADDRESS_V6);
        if born_host.is_ipv6() {
            sys_flag |= sysflag::BORNHOST_V6;
        }
        if store_host.is_ipv6() {
            sys_flag |= sysflag::STOREHOSTADDRESS_V6;
        }
        let total_len =
            record_len(msg.body.len(), msg.topic.len(), props_len, born_host.is_ipv6(), store_host.is_ipv6());
        let tags_code = msg.tags().map(|t| java_string_hash_bytes(t.as_bytes()) as i64).unwrap_or(0);
        Ok(PreparedMessage {
            msg,
            body_crc: crc32_masked(&msg.body),
            props_len,
            total_len,
            sys_flag,
            born_host,
            born_timestamp: if msg.born_timestamp == 0 { now_ms } else { msg.born_timestamp },
            tags_code,
            record_crc: false,
        })
    }

    /// With `on`, the record's properties end with RocketMQ 5's `__CRC32#` property
    /// (`enabledAppendPropCRC`): the CRC-32 (masked as the body's) of every byte of the record
    /// before it, header fields included, as ten decimal digits, least significant first.
    /// Recovery then finds a flipped byte anywhere in the record, not only in its body.
    pub fn with_record_crc(mut self, on: bool) -> Result<Self, InvalidMessage> {
        if on && !self.record_crc {
            if self.props_len + RECORD_CRC_LEN > MAX_PROPERTIES_LEN {
                return Err(InvalidMessage::PropertiesTooLarge);
            }
            self.props_len += RECORD_CRC_LEN;
            self.total_len += RECORD_CRC_LEN;
            self.record_crc = true;
        }
        Ok(self)
    }

    /// Writes the record into `dst` (exactly `total_len` bytes).
    pub fn write(
        &self,
        dst: &mut [u8],
        queue_offset: i64,
        phy_offset: i64,
        store_timestamp: i64,
        store_host: &SocketAddr,
    ) {
        debug_assert_eq!(dst.len(), self.total_len);
        let m = self.msg;
        let mut w = Writer { buf: dst, pos: 0 };
        w.i32(self.total_len as i32);
        w.i32(MESSAGE_MAGIC_CODE);
        w.i32(self.body_crc as i32);
        w.i32(m.queue_id);
        w.i32(m.flag);
        w.i64(queue_offset);
        w.i64(phy_offset);
        w.i32(self.sys_flag);
        w.i64(self.born_timestamp);
        w.host(&self.born_host);
        w.i64(store_timestamp);
        w.host(store_host);
        w.i32(m.reconsume_times);
        w.i64(m.prepared_transaction_offset);
        w.i32(m.body.len() as i32);
        w.bytes(&m.body);
        w.buf[w.pos] = m.topic.len() as u8;
        w.pos += 1;
        w.bytes(m.topic.as_bytes());
        w.i16(self.props_len as i16);
        let own = self.props_len - if self.record_crc { RECORD_CRC_LEN } else { 0 };
        properties::encode_into(&m.properties, &mut w.buf[w.pos..w.pos + own]);
        w.pos += own;
        if self.record_crc {
            // RocketMQ 5's `MessageDecoder.createCrc32`, over everything before it.
            let crc = crc32_masked(&w.buf[..w.pos]);
            w.bytes(keys::CRC32.as_bytes());
            w.buf[w.pos] = properties::NAME_VALUE_SEPARATOR;
            w.pos += 1;
            let mut rest = crc;
            for _ in 0..10 {
                w.buf[w.pos] = b'0' + (rest % 10) as u8;
                rest /= 10;
                w.pos += 1;
            }
            w.buf[w.pos] = properties::PROPERTY_SEPARATOR;
            w.pos += 1;
        }
        debug_assert_eq!(w.pos, self.total_len);
    }
}

/// Writes the 8-byte BLANK record that fills the rest of a file of which `max_blank` bytes
/// remain.
pub fn write_blank(dst: &mut [u8], max_blank: usize) {
    dst[..4].copy_from_slice(&(max_blank as i32).to_be_bytes());
    dst[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
}

struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    fn i16(&mut self, v: i16) {
        self.bytes(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }
    fn host(&mut self, h: &SocketAddr) {
        match h.ip() {
            IpAddr::V4(ip) => self.bytes(&ip.octets()),
            IpAddr::V6(ip) => self.bytes(&ip.octets()),
        }
        self.i32(h.port() as i32);
    }
}

/// A bounds-checked big-endian reader: every read returns `None` past the end, so no input
/// can make decoding panic.
struct Reader<'b> {
    buf: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn host(&mut self, v6: bool) -> Option<SocketAddr> {
        let ip = if v6 {
            let o: [u8; 16] = self.take(16)?.try_into().ok()?;
            IpAddr::V6(Ipv6Addr::from(o))
        } else {
            let o: [u8; 4] = self.take(4)?.try_into().ok()?;
            IpAddr::V4(Ipv4Addr::from(o))
        };
        let port = self.i32()?;
        Some(SocketAddr::new(ip, port as u16))
    }
}

/// A record decoded in place: every field, borrowing body, topic and properties from the
/// buffer it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub total_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

impl<'a> RecordView<'a> {
    pub fn topic_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.topic).ok()
    }
    pub fn property(&self, key: &str) -> Option<&'a [u8]> {
        properties::get(self.properties, key)
    }
}

/// Outcome of reading one record at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends before the record does (a slave's partial tail, or a torn write).
    Incomplete,
    /// The bytes are not a record: bad magic, bad lengths.
    Corrupt,
}

/// Decodes the record at the start of `buf` (which may hold more bytes after it). Never
/// panics, whatever the bytes.
pub fn decode_record(buf: &[u8]) -> Result<RecordView<'_>, DecodeError> {
    if buf.len() < 8 {
        return Err(DecodeError::Incomplete);
    }
    let mut r = Reader { buf, pos: 0 };
    let total_size = r.i32().ok_or(DecodeError::Incomplete)?;
    let magic = r.i32().ok_or(DecodeError::Incomplete)?;
    if magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2 {
        return Err(DecodeError::Corrupt);
    }
    if total_size < 0 {
        return Err(DecodeError::Corrupt);
    }
    if (total_size as usize) > buf.len() {
        return Err(DecodeError::Incomplete);
    }
    let rec = &buf[..total_size as usize];
    let mut r = Reader { buf: rec, pos: 8 };
    let mut inner = || -> Option<RecordView<'_>> {
        let body_crc = r.i32()?;
        let queue_id = r.i32()?;
        let flag = r.i32()?;
        let queue_offset = r.i64()?;
        let physical_offset = r.i64()?;
        let sys_flag = r.i32()?;
        let born_timestamp = r.i64()?;
        let born_host = r.host(sys_flag & sysflag::BORNHOST_V6 != 0)?;
        let store_timestamp = r.i64()?;
        let store_host = r.host(sys_flag & sysflag::STOREHOSTADDRESS_V6 != 0)?;
        let reconsume_times = r.i32()?;
        let prepared_transaction_offset = r.i64()?;
        let body_len = r.i32()?;
        let body = r.take(usize::try_from(body_len).ok()?)?;
        let topic_len = if magic == MESSAGE_MAGIC_CODE {
            // Read as a signed byte, as Java does: a length over 127 is corrupt.
            usize::try_from(r.take(1)?[0] as i8).ok()?
        } else {
            usize::try_from(r.i16()?).ok()?
        };
        let topic = r.take(topic_len)?;
        let props_len = usize::try_from(r.i16()?).ok()?;
        let properties = r.take(props_len)?;
        if r.pos != rec.len() {
            return None;
        }
        Some(RecordView {
            total_size,
            magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            topic,
            properties,
        })
    };
    inner().ok_or(DecodeError::Corrupt)
}

/// Who a record belongs to, read from the few fields that say it without decoding the rest
/// (a read checks each record it serves against its queue unit with these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordIdentity<'a> {
    pub total_size: i32,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub topic: &'a [u8],
}

/// The [`RecordIdentity`] of the record at the start of `buf`; `None` if the bytes there
/// are no record (bad magic, lengths past `buf`). Never panics.
pub fn record_identity(buf: &[u8]) -> Option<RecordIdentity<'_>> {
    let bytes = |at: usize, n: usize| buf.get(at..at.checked_add(n)?);
    let i32_at = |at: usize| Some(i32::from_be_bytes(bytes(at, 4)?.try_into().ok()?));
    let magic = i32_at(4)?;
    if magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2 {
        return None;
    }
    let sys_flag = i32_at(SYSFLAG_POS)?;
    let host = |v6: bool| if v6 { 20 } else { 8 };
    // bornHost, storeTimestamp, storeHost, reconsumeTimes, preparedTransactionOffset.
    let body_len_at: usize = BORN_HOST_POS
        + host(sys_flag & sysflag::BORNHOST_V6 != 0)
        + 8
        + host(sys_flag & sysflag::STOREHOSTADDRESS_V6 != 0)
        + 4
        + 8;
    let topic_len_at = (body_len_at + 4).checked_add(usize::try_from(i32_at(body_len_at)?).ok()?)?;
    let (topic_len, topic_at) = if magic == MESSAGE_MAGIC_CODE {
        (usize::try_from(bytes(topic_len_at, 1)?[0] as i8).ok()?, topic_len_at + 1)
    } else {
        (
            usize::try_from(i16::from_be_bytes(bytes(topic_len_at, 2)?.try_into().ok()?)).ok()?,
            topic_len_at + 2,
        )
    };
    Some(RecordIdentity {
        total_size: i32_at(0)?,
        queue_id: i32_at(12)?,
        queue_offset: i64::from_be_bytes(bytes(QUEUE_OFFSET_POS, 8)?.try_into().ok()?),
        topic: bytes(topic_at, topic_len)?,
    })
}

/// What the dispatcher needs of a record (spec 1.8), borrowed from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub commit_log_offset: i64,
    pub msg_size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub consume_queue_offset: i64,
    pub keys: Option<&'a str>,
    pub uniq_key: Option<&'a str>,
    pub sys_flag: i32,
    pub prepared_transaction_offset: i64,
}

/// Result of `check_record` (RocketMQ's `checkMessageAndReturnSize`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckResult<'a> {
    /// A valid record.
    Message(DispatchRequest<'a>),
    /// The BLANK filler: the rest of this file is empty.
    Blank,
    /// Fewer bytes than the record needs: at a slave's tail, wait for more.
    Incomplete,
    /// Not a valid record. `skip` is `Some(size)` when the header is sound but the content is
    /// not (RocketMQ skips such a record as a bug); `None` when nothing can be trusted.
    Invalid { skip: Option<i32> },
}

/// Options of record validation.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions<'c> {
    /// Verify the body CRC (`checkCRCOnRecover`).
    pub check_crc: bool,
    /// Delay of each level in ms (level 1 first), for SCHEDULE_TOPIC_XXXX tags codes.
    pub delay_levels_ms: &'c [i64],
}

/// The topic of scheduled (delayed) messages, whose tags code is the delivery time.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// Validates the record at the start of `buf` and extracts its dispatch information.
pub fn check_record<'a>(buf: &'a [u8], opts: &CheckOptions<'_>) -> CheckResult<'a> {
    if buf.len() >= 8 {
        let magic = i32::from_be_bytes(buf[4..8].try_into().unwrap_or_default());
        if magic == BLANK_MAGIC_CODE {
            return CheckResult::Blank;
        }
    }
    let rec = match decode_record(buf) {
        Ok(r) => r,
        Err(DecodeError::Incomplete) => {
            // Zeros at a torn tail read as a zero size and zero magic: that is corruption,
            // not a partial record.
            if buf.len() >= 8 {
                let magic = i32::from_be_bytes(buf[4..8].try_into().unwrap_or_default());
                if magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2 {
                    return CheckResult::Invalid { skip: None };
                }
            }
            return CheckResult::Incomplete;
        }
        Err(DecodeError::Corrupt) => {
            let size = i32::from_be_bytes(buf[..4].try_into().unwrap_or_default());
            let magic = i32::from_be_bytes(buf[4..8].try_into().unwrap_or_default());
            // A record whose magic is right and whose size fits, but whose fields do not add
            // up to that size: RocketMQ skips it (a bug, not a torn tail).
            let sound_header = (magic == MESSAGE_MAGIC_CODE || magic == MESSAGE_MAGIC_CODE_V2)
                && size > 8
                && size as usize <= buf.len();
            return CheckResult::Invalid { skip: sound_header.then_some(size) };
        }
    };
    if opts.check_crc && crc32_masked(rec.body) as i32 != rec.body_crc {
        return CheckResult::Invalid { skip: None };
    }
    if opts.check_crc {
        if let Some(expected) = record_crc(rec.properties) {
            let covered = rec.total_size as usize - RECORD_CRC_LEN;
            if crc32_masked(&buf[..covered]) != expected {
                return CheckResult::Invalid { skip: None };
            }
        }
    }
    // Only the body has a checksum, and a torn write ends in a record's last bytes: its topic
    // and properties. Their shape gives a tear away: no writer puts a NUL in a topic
    // (RocketMQ's topic validator forbids it), and RocketMQ and rmqha both write properties as
    // UTF-8 ending in 0x02 (a RocketMQ broker re-encodes what clients send), so a tail torn
    // there (zeros or garbage) is not kept as a record.
    if rec.topic.contains(&0) {
        return CheckResult::Invalid { skip: None };
    }
    if !rec.properties.is_empty()
        && (rec.properties.last() != Some(&super::properties::PROPERTY_SEPARATOR)
            || std::str::from_utf8(rec.properties).is_err())
    {
        return CheckResult::Invalid { skip: Some(rec.total_size) };
    }
    let Some(topic) = rec.topic_str() else {
        return CheckResult::Invalid { skip: Some(rec.total_size) };
    };
    let str_prop = |k: &str| rec.property(k).and_then(|v| std::str::from_utf8(v).ok());
    let mut tags_code = rec.property(keys::TAGS).map(|t| java_string_hash_bytes(t) as i64).unwrap_or(0);
    if topic == SCHEDULE_TOPIC {
        if let Some(level) = str_prop(keys::DELAY).and_then(|d| d.parse::<usize>().ok()) {
            if level > 0 && !opts.delay_levels_ms.is_empty() {
                let level = level.min(opts.delay_levels_ms.len());
                tags_code = rec.store_timestamp.saturating_add(opts.delay_levels_ms[level - 1]);
            }
        }
    }
    CheckResult::Message(DispatchRequest {
        topic,
        queue_id: rec.queue_id,
        commit_log_offset: rec.physical_offset,
        msg_size: rec.total_size,
        tags_code,
        store_timestamp: rec.store_timestamp,
        consume_queue_offset: rec.queue_offset,
        keys: str_prop(keys::KEYS),
        uniq_key: str_prop(keys::UNIQ_KEY),
        sys_flag: rec.sys_flag,
        prepared_transaction_offset: rec.prepared_transaction_offset,
    })
}

/// The whole-record CRC a record's properties end with (RocketMQ 5's `__CRC32#` property, see
/// [`PreparedMessage::with_record_crc`]), if they end with one in exactly that shape.
pub fn record_crc(properties: &[u8]) -> Option<u32> {
    let start = properties.len().checked_sub(RECORD_CRC_LEN)?;
    let (before, tail) = properties.split_at(start);
    if !(before.is_empty() || before.last() == Some(&properties::PROPERTY_SEPARATOR)) {
        return None;
    }
    let name = keys::CRC32.as_bytes();
    let digits = tail.strip_prefix(name)?.strip_prefix(&[properties::NAME_VALUE_SEPARATOR])?;
    let digits = digits.strip_suffix(&[properties::PROPERTY_SEPARATOR])?;
    if digits.len() != 10 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Least significant digit first.
    let value = digits.iter().rev().fold(0u64, |v, d| v * 10 + u64::from(d - b'0'));
    u32::try_from(value).ok()
}

/// Parses RocketMQ's `messageDelayLevel` ("1s 5s 10s 30s 1m ... 2h") into milliseconds.
pub fn parse_delay_levels(s: &str) -> Option<Vec<i64>> {
    s.split_whitespace()
        .map(|lvl| {
            // The unit is the last character, which need not be one byte in a bad value.
            let unit = lvl.chars().next_back()?;
            let num = &lvl[..lvl.len() - unit.len_utf8()];
            let n: i64 = num.parse().ok()?;
            let mult = match unit {
                's' => 1000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => return None,
            };
            n.checked_mul(mult)
        })
        .collect()
}
