//! A RocketMQ client written from the spec for the remote tests: request headers with
//! RocketMQ's field names (SendMessageRequestHeader/V2, PullMessageRequestHeader, ...), the
//! batch body of `MessageDecoder.encodeMessages`, and a decoder of CommitLog records (spec
//! section 1) for pull, query and view bodies. It uses the crate only for framing.
#![allow(dead_code)]

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmqha_core::remoting::{
    ClientConfig, DEFAULT_MAX_FRAME, RemotingClient, RemotingCommand, SerializeType, read_frame, request_code,
};

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// RocketMQ's response codes used by the tests.
pub mod code {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const PULL_NOT_FOUND: i32 = 19;
    pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
    pub const PULL_OFFSET_MOVED: i32 = 21;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const SUBSCRIPTION_NOT_EXIST: i32 = 24;
    pub const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
}

/// PullSysFlag bits.
pub const FLAG_COMMIT_OFFSET: i32 = 1;
pub const FLAG_SUSPEND: i32 = 2;
pub const FLAG_SUBSCRIPTION: i32 = 4;

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn client(addr: SocketAddr) -> RemotingClient {
    RemotingClient::new(addr.to_string(), ClientConfig::default())
}

pub fn call(c: &RemotingClient, req: RemotingCommand) -> RemotingCommand {
    c.invoke_sync(req, TIMEOUT).expect("call")
}

/// `key 0x01 value 0x02` properties (MessageDecoder.messageProperties2String).
pub fn props(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}\u{1}{v}\u{2}")).collect()
}

/// A message as the tests send it.
#[derive(Debug, Clone)]
pub struct Msg {
    pub topic: String,
    pub body: Vec<u8>,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub queue_id: i32,
}

impl Msg {
    pub fn new(topic: &str, body: &[u8]) -> Self {
        Msg { topic: topic.into(), body: body.to_vec(), tags: None, keys: None, queue_id: 0 }
    }
    pub fn tags(mut self, t: &str) -> Self {
        self.tags = Some(t.into());
        self
    }
    pub fn keys(mut self, k: &str) -> Self {
        self.keys = Some(k.into());
        self
    }
    pub fn queue(mut self, q: i32) -> Self {
        self.queue_id = q;
        self
    }
    fn properties(&self) -> String {
        let mut p: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &self.tags {
            p.push(("TAGS", t));
        }
        if let Some(k) = &self.keys {
            p.push(("KEYS", k));
        }
        p.push(("WAIT", "true"));
        props(&p)
    }
}

/// SEND_MESSAGE with the V1 header (SendMessageRequestHeader's field names).
pub fn send_v1(m: &Msg) -> RemotingCommand {
    RemotingCommand::request(request_code::SEND_MESSAGE)
        .with_ext("producerGroup", "test_pg")
        .with_ext("topic", &m.topic)
        .with_ext("defaultTopic", "TBW102")
        .with_ext("defaultTopicQueueNums", 4)
        .with_ext("queueId", m.queue_id)
        .with_ext("sysFlag", 0)
        .with_ext("bornTimestamp", now_ms())
        .with_ext("flag", 0)
        .with_ext("properties", m.properties())
        .with_ext("reconsumeTimes", 0)
        .with_ext("unitMode", false)
        .with_ext("batch", false)
        .with_body(m.body.clone())
}

/// SEND_MESSAGE_V2 (SendMessageRequestHeaderV2: a producerGroup, b topic, c defaultTopic,
/// d defaultTopicQueueNums, e queueId, f sysFlag, g bornTimestamp, h flag, i properties,
/// j reconsumeTimes, k unitMode, m batch).
pub fn send_v2(m: &Msg) -> RemotingCommand {
    RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", "test_pg")
        .with_ext("b", &m.topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", m.queue_id)
        .with_ext("f", 0)
        .with_ext("g", now_ms())
        .with_ext("h", 0)
        .with_ext("i", m.properties())
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(m.body.clone())
}

/// One message of a batch body: MessageDecoder.encodeMessage.
pub fn encode_batch_item(flag: i32, body: &[u8], properties: &str) -> Vec<u8> {
    let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + properties.len();
    let mut v = Vec::with_capacity(total);
    v.extend_from_slice(&(total as i32).to_be_bytes());
    v.extend_from_slice(&0i32.to_be_bytes()); // magic
    v.extend_from_slice(&0i32.to_be_bytes()); // body CRC
    v.extend_from_slice(&flag.to_be_bytes());
    v.extend_from_slice(&(body.len() as i32).to_be_bytes());
    v.extend_from_slice(body);
    v.extend_from_slice(&(properties.len() as i16).to_be_bytes());
    v.extend_from_slice(properties.as_bytes());
    v
}

/// SEND_BATCH_MESSAGE (V2 header, batch = true) of `msgs`, all to `topic` queue `queue_id`.
pub fn send_batch(topic: &str, queue_id: i32, msgs: &[Msg]) -> RemotingCommand {
    let mut body = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut p = m.properties();
        p.push_str(&props(&[("UNIQ_KEY", &format!("UNIQ{i:04}"))]));
        body.extend(encode_batch_item(0, &m.body, &p));
    }
    RemotingCommand::request(request_code::SEND_BATCH_MESSAGE)
        .with_ext("a", "test_pg")
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", queue_id)
        .with_ext("f", 0)
        .with_ext("g", now_ms())
        .with_ext("h", 0)
        .with_ext("i", props(&[("WAIT", "true")]))
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", true)
        .with_body(body)
}

/// PULL_MESSAGE (PullMessageRequestHeader).
#[allow(clippy::too_many_arguments)]
pub fn pull_req(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max: i32,
    sys_flag: i32,
    suspend_ms: i64,
    subscription: &str,
) -> RemotingCommand {
    RemotingCommand::request(request_code::PULL_MESSAGE)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id)
        .with_ext("queueOffset", offset)
        .with_ext("maxMsgNums", max)
        .with_ext("sysFlag", sys_flag)
        .with_ext("commitOffset", 0)
        .with_ext("suspendTimeoutMillis", suspend_ms)
        .with_ext("subscription", subscription)
        .with_ext("subVersion", 0)
        .with_ext("expressionType", "TAG")
}

/// A pull of everything from `offset` with the subscription in the header, no suspension.
pub fn pull(c: &RemotingClient, topic: &str, queue_id: i32, offset: i64, max: i32) -> RemotingCommand {
    call(c, pull_req("test_cg", topic, queue_id, offset, max, FLAG_SUBSCRIPTION, 0, "*"))
}

pub fn ext_i64(cmd: &RemotingCommand, key: &str) -> i64 {
    cmd.ext(key).unwrap_or_else(|| panic!("no {key} in {cmd:?}")).parse().unwrap()
}

/// A CommitLog record decoded per spec section 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub total_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub phy_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub body: Vec<u8>,
    pub topic: String,
    pub properties: Vec<(String, String)>,
}

impl Record {
    pub fn prop(&self, k: &str) -> Option<&str> {
        self.properties.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }
}

struct Cursor<'a>(&'a [u8], usize);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        s
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
    fn host(&mut self, v6: bool) -> SocketAddr {
        let ip: std::net::IpAddr = if v6 {
            <[u8; 16]>::try_from(self.take(16)).unwrap().into()
        } else {
            <[u8; 4]>::try_from(self.take(4)).unwrap().into()
        };
        SocketAddr::new(ip, self.i32() as u16)
    }
}

/// Decodes concatenated records (a pull, query or view body).
pub fn decode_records(body: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let mut c = Cursor(body, pos);
        let total_size = c.i32();
        let magic = c.i32();
        assert!(magic == 0xDAA320A7_u32 as i32 || magic == 0xDAA320AB_u32 as i32, "magic {magic:#x}");
        let body_crc = c.i32();
        let queue_id = c.i32();
        let flag = c.i32();
        let queue_offset = c.i64();
        let phy_offset = c.i64();
        let sys_flag = c.i32();
        let born_timestamp = c.i64();
        let born_host = c.host(sys_flag & 0x10 != 0);
        let store_timestamp = c.i64();
        let store_host = c.host(sys_flag & 0x20 != 0);
        let reconsume_times = c.i32();
        let _prepared = c.i64();
        let body_len = c.i32() as usize;
        let msg_body = c.take(body_len).to_vec();
        let topic_len = if magic == 0xDAA320A7_u32 as i32 { c.take(1)[0] as usize } else { c.i16() as usize };
        let topic = String::from_utf8(c.take(topic_len).to_vec()).unwrap();
        let props_len = c.i16() as usize;
        let props_raw = c.take(props_len).to_vec();
        assert_eq!(c.1 - pos, total_size as usize, "record size");
        let properties = String::from_utf8(props_raw)
            .unwrap()
            .split('\u{2}')
            .filter_map(|kv| kv.split_once('\u{1}').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        out.push(Record {
            total_size,
            magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            phy_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            body: msg_body,
            topic,
            properties,
        });
        pos += total_size as usize;
    }
    out
}

/// The physical offset in an offset message id (store host IPv4 + port + offset, hex).
pub fn msg_id_offset(id: &str) -> i64 {
    assert_eq!(id.len(), 32, "{id}");
    i64::from_str_radix(&id[16..], 16).unwrap()
}

/// A raw connection for pipelined requests and for bytes no client would send.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        Raw { stream }
    }
    pub fn send(&mut self, mut cmd: RemotingCommand, opaque: i32) {
        cmd.opaque = opaque;
        self.stream.write_all(&cmd.encode().unwrap()).unwrap();
    }
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }
    pub fn recv(&mut self) -> RemotingCommand {
        read_frame(&mut self.stream, DEFAULT_MAX_FRAME).unwrap().expect("a response, not EOF")
    }
    /// The next response within `timeout`, or `None` if none arrives.
    pub fn try_recv(&mut self, timeout: Duration) -> Option<RemotingCommand> {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let mut peek = [0u8; 1];
        let r = match self.stream.peek(&mut peek) {
            Ok(0) => panic!("connection closed"),
            Ok(_) => {
                self.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
                Some(self.recv())
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                None
            }
            Err(e) => panic!("{e}"),
        };
        self.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        r
    }
    /// The next frame with `code` within `timeout`, skipping frames with other codes (the
    /// NOTIFY_CONSUMER_IDS_CHANGED pushes a consumer's connection gets, ...); `None` if none
    /// arrives.
    pub fn recv_code(&mut self, code: i32, timeout: Duration) -> Option<RemotingCommand> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero())?;
            let frame = self.try_recv(left)?;
            if frame.code == code {
                return Some(frame);
            }
        }
    }
    /// Whether the server closed the connection (EOF or reset) within the timeout.
    pub fn closed_by_server(&mut self) -> bool {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

/// A JSON-header request, re-encoded with the binary ROCKETMQ header.
pub fn rocketmq_header(cmd: RemotingCommand) -> RemotingCommand {
    cmd.with_serialize_type(SerializeType::RocketMq)
}

/// A consumer's HEART_BEAT as Java clients send it: one clustering consumer `group` with TAG
/// subscriptions `(topic, expression, subVersion)`, and the client's inner producer.
pub fn heartbeat(client_id: &str, group: &str, subs: &[(&str, &str, i64)]) -> RemotingCommand {
    let subs: Vec<(&str, &str, &str, i64)> = subs.iter().map(|&(t, e, v)| (t, "TAG", e, v)).collect();
    heartbeat_typed(client_id, group, &subs)
}

/// [`heartbeat`] with each subscription's expression type: `(topic, expressionType,
/// expression, subVersion)`.
pub fn heartbeat_typed(client_id: &str, group: &str, subs: &[(&str, &str, &str, i64)]) -> RemotingCommand {
    let subs: Vec<serde_json::Value> = subs
        .iter()
        .map(|(topic, kind, expr, version)| {
            serde_json::json!({
                "classFilterMode": false, "codeSet": [], "expressionType": kind,
                "subString": expr, "subVersion": version, "tagsSet": [], "topic": topic
            })
        })
        .collect();
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": subs,
            "unitMode": false
        }],
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}]
    });
    RemotingCommand::request(request_code::HEART_BEAT).with_body(body.to_string().into_bytes())
}
