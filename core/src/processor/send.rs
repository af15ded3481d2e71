//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): RocketMQ's
//! `SendMessageProcessor`.
//!
//! A put goes through [`Broker::put_messages`], the path of the embedded `put_message_sync`:
//! on a SYNC_MASTER the answer is sent when a slave has acked the record (or
//! `slaveTimeout` passed), from the put's completion callback, so the connection's thread
//! is free meanwhile. The response code is the put status's RocketMQ code
//! ([`PutStatus::response_code`]) and a stored message's response carries
//! `SendMessageResponseHeader`: `msgId` (the offset message id; comma-separated ids for a
//! batch), `queueId`, `queueOffset`.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::Error;
use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::message::properties;
use crate::message::{Message, offset_msg_id, sysflag};
use crate::metadata::TopicConfig;
use crate::remoting::{
    Handled, RemotingCommand, RemotingError, RequestContext, RequestHandler, SerializeType, request_code,
    response_code,
};
use crate::store::commit_log::BATCH_ENCODING_HEADROOM;
use crate::store::{MessageStore, PutHandle, PutResult, PutStatus};

use super::topic::{self, create_in_send, create_retry_topic, effective_topic, topic_name_error};
use super::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX, Shared, bad_header, broker_gone, java_bool, reply,
};

/// Java `MessageConst.PROPERTY_CLUSTER`: the broker adds its cluster name to every message.
const PROPERTY_CLUSTER: &str = "CLUSTER";
/// Java `MessageConst.PROPERTY_MSG_REGION` / `PROPERTY_TRACE_SWITCH`: response ext fields.
const PROPERTY_MSG_REGION: &str = "MSG_REGION";
const PROPERTY_TRACE_SWITCH: &str = "TRACE_ON";
/// Java `MixAll.DEFAULT_TRACE_REGION_ID` (BrokerConfig.regionId's default).
const DEFAULT_REGION: &str = "DefaultRegion";

/// `SendMessageRequestHeader`, read from either spelling: the V1 names, or V2's one-letter
/// names (`a` producerGroup … `n` brokerName). As RocketMQ, SEND_MESSAGE is read by the V1
/// names and SEND_MESSAGE_V2 by the V2 names; clients differ in what they send with
/// SEND_BATCH_MESSAGE, so its spelling is taken from the fields present
/// ([`SendHeader::names`]). The ACL gate reads the topic through the same names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendHeader {
    pub producer_group: String,
    pub topic: String,
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    pub properties: Option<String>,
    pub reconsume_times: i32,
    pub unit_mode: bool,
    pub max_reconsume_times: Option<i32>,
    pub batch: bool,
}

impl SendHeader {
    const V1: [&'static str; 13] = [
        "producerGroup",
        "topic",
        "defaultTopic",
        "defaultTopicQueueNums",
        "queueId",
        "sysFlag",
        "bornTimestamp",
        "flag",
        "properties",
        "reconsumeTimes",
        "unitMode",
        "maxReconsumeTimes",
        "batch",
    ];
    const V2: [&'static str; 13] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"];

    /// The field names of a send request: by its code, and for SEND_BATCH_MESSAGE by the
    /// fields present. A header carrying both spellings was read by one here and by the
    /// other at the ACL gate once: one function answers both now.
    fn names(req: &RemotingCommand) -> &'static [&'static str; 13] {
        match req.code {
            request_code::SEND_MESSAGE => &Self::V1,
            request_code::SEND_MESSAGE_V2 => &Self::V2,
            _ if req.ext("b").is_some() && req.ext("topic").is_none() => &Self::V2,
            _ => &Self::V1,
        }
    }

    /// The topic a send request writes to, read as [`SendHeader::parse`] reads it.
    pub(crate) fn topic_of(req: &RemotingCommand) -> Option<&str> {
        req.ext(Self::names(req)[1])
    }

    pub(crate) fn parse(req: &RemotingCommand) -> Result<Self, RemotingError> {
        let n = Self::names(req);
        Ok(SendHeader {
            producer_group: req.ext_str(n[0])?.to_owned(),
            topic: req.ext_str(n[1])?.to_owned(),
            default_topic: req.ext_str(n[2])?.to_owned(),
            default_topic_queue_nums: req.ext_i32(n[3])?,
            queue_id: req.ext_i32(n[4])?,
            sys_flag: req.ext_i32(n[5])?,
            born_timestamp: req.ext_i64(n[6])?,
            flag: req.ext_i32(n[7])?,
            properties: req.ext(n[8]).map(str::to_owned),
            reconsume_times: req.ext_opt_i32(n[9])?.unwrap_or(0),
            unit_mode: java_bool(req, n[10]).unwrap_or(false),
            max_reconsume_times: req.ext_opt_i32(n[11])?,
            // `true` in any case as Java reads it, and `1`, as rocketmq-client-cpp writes it.
            batch: req.ext(n[12]).is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1"),
        })
    }
}

/// One message of a SEND_BATCH_MESSAGE body (Java `MessageDecoder.encodeMessage`):
/// `[i32 totalSize][i32 magic = 0][i32 bodyCRC = 0][i32 flag][i32 bodyLen][body]
/// [i16 propertiesLen][properties]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchItem {
    pub flag: i32,
    pub body: Vec<u8>,
    pub properties: Vec<(String, String)>,
}

/// Decodes a batch body into its messages; never panics. An empty body, a size that does not
/// add up, or trailing bytes is an error naming the message and its position.
pub(crate) fn decode_batch(mut buf: &[u8]) -> Result<Vec<BatchItem>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while !buf.is_empty() {
        let i = out.len();
        let err = |what: &str| format!("batch message {i} at byte {pos}: {what}");
        let be_i32 =
            |b: &[u8], at: usize| b.get(at..at + 4).map(|s| i32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        let total = be_i32(buf, 0).ok_or_else(|| err("truncated size"))?;
        if total < 22 || total as usize > buf.len() {
            return Err(err(&format!("size {total} does not fit the {} bytes left", buf.len())));
        }
        let rec = &buf[..total as usize];
        let flag = be_i32(rec, 12).ok_or_else(|| err("truncated flag"))?;
        let body_len = be_i32(rec, 16).ok_or_else(|| err("truncated body length"))?;
        let body_end = usize::try_from(body_len)
            .ok()
            .and_then(|l| 20usize.checked_add(l))
            .filter(|&e| e + 2 <= rec.len())
            .ok_or_else(|| err(&format!("body length {body_len} does not fit size {total}")))?;
        let props_len = i16::from_be_bytes([rec[body_end], rec[body_end + 1]]);
        let props_end = usize::try_from(props_len)
            .ok()
            .map(|l| body_end + 2 + l)
            .filter(|&e| e == rec.len())
            .ok_or_else(|| err(&format!("properties length {props_len} does not match size {total}")))?;
        out.push(BatchItem {
            flag,
            body: rec[20..body_end].to_vec(),
            properties: properties::decode(&rec[body_end + 2..props_end]),
        });
        pos += total as usize;
        buf = &buf[total as usize..];
    }
    if out.is_empty() {
        return Err("empty batch".into());
    }
    Ok(out)
}

/// SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.
pub struct SendProcessor {
    shared: Arc<Shared>,
}

impl SendProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] =
        &[request_code::SEND_MESSAGE, request_code::SEND_MESSAGE_V2, request_code::SEND_BATCH_MESSAGE];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SendProcessor { shared }
    }

    fn process(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Result<Handled, RemotingCommand> {
        let peer = ctx.peer();
        let h = SendHeader::parse(req).map_err(|e| bad_header(req, e))?;
        // RocketMQ decides by the header's batch flag (`requestHeader.isBatch()`), whatever the
        // code: rocketmq-client-cpp sends its batches as SEND_MESSAGE with `batch=1`, which a
        // Java broker reads as false and stores as one message of encoded bytes.
        let batch = h.batch || req.code == request_code::SEND_BATCH_MESSAGE;
        if broker.role() == BrokerRole::Slave {
            return Err(reply(
                req,
                response_code::SERVICE_NOT_AVAILABLE,
                "this broker is a SLAVE and does not accept messages; send to its master",
            ));
        }
        super::broker_permits(broker, req, crate::metadata::TopicConfig::PERM_WRITE)?;
        self.content_check(broker, req, &h, batch)?;
        let topic_config = self.topic_check(broker, req, &h, peer)?;
        if !topic_config.is_writeable() {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!("the topic[{}] sending message is forbidden", h.topic),
            ));
        }
        let queue_id = if h.queue_id < 0 { random_queue(topic_config.write_queue_nums) } else { h.queue_id };
        let (topic, queue_id) = retry_or_dead_letter(broker, req, &h, queue_id)?;

        let mut header_props =
            h.properties.as_deref().map(|p| properties::decode(p.as_bytes())).unwrap_or_default();
        if topic != h.topic {
            // Dead-lettered: at once, as 4.9's `msg.setDelayTimeLevel(0)`, whatever delay the
            // client's retry asked for (3 + reconsumeTimes).
            set_prop(&mut header_props, properties::keys::DELAY, "0");
        }
        set_prop(&mut header_props, PROPERTY_CLUSTER, &broker.config().broker_cluster_name);
        let prepared =
            prop(&header_props, crate::transaction::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if prepared && broker.config().reject_transaction_message {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!(
                    "the broker[{}] sending transaction message is forbidden",
                    broker.store().commit_log().store_host().ip()
                ),
            ));
        }
        let base = Message {
            topic,
            queue_id,
            body: Vec::new(),
            flag: h.flag,
            properties: Vec::new(),
            born_timestamp: h.born_timestamp,
            born_host: Some(peer),
            sys_flag: h.sys_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOSTADDRESS_V6),
            reconsume_times: h.reconsume_times,
            prepared_transaction_offset: 0,
        };
        let msgs = if batch {
            let items = decode_batch(&req.body).map_err(|e| reply(req, response_code::MESSAGE_ILLEGAL, e))?;
            batch_fits(broker, &base.topic, &items, &header_props).map_err(|e| {
                broker.store().put_metrics().refused(PutStatus::MessageIllegal);
                reply(req, response_code::MESSAGE_ILLEGAL, e)
            })?;
            items
                .into_iter()
                .map(|it| {
                    let mut props = it.properties;
                    for (k, v) in &header_props {
                        if prop(&props, k).is_none() {
                            props.push((k.clone(), v.clone()));
                        }
                    }
                    Message { body: it.body, flag: it.flag, properties: props, ..base.clone() }
                })
                .collect::<Vec<_>>()
        } else {
            vec![Message { body: req.body.clone(), properties: header_props, ..base }]
        };
        // A delayed message (DELAY) is stored in SCHEDULE_TOPIC_XXXX by the broker's put and
        // answered, as in RocketMQ, with the queue it was sent to.
        let levels = broker.store().delay_levels_ms().len();
        // A DELAY that is no number is refused here, as 4.9 refuses it at the send: the half
        // message of a transaction was stored with it, and its commit then always failed.
        if let Some(Err(e)) =
            msgs.iter().map(|m| crate::schedule::delay_level(m, levels)).find(|r| r.is_err())
        {
            broker.store().put_metrics().refused(PutStatus::MessageIllegal);
            return Err(reply(req, response_code::MESSAGE_ILLEGAL, e.to_string()));
        }
        let delayed = msgs.iter().any(|m| matches!(crate::schedule::delay_level(m, levels), Ok(Some(_))));
        if batch && delayed {
            // 4.9's putMessages refuses a batch with a delay level, even a batch of one.
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                "a batch cannot hold a delayed message (DELAY)",
            ));
        }
        let transactional = prepared || msgs.iter().any(crate::transaction::is_prepared);
        if batch && transactional {
            // A transaction has one message; 4.9 would store such a batch as ordinary messages,
            // consumable at once.
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                "a batch cannot hold a transactional message (TRAN_MSG)",
            ));
        }
        let answer_queue = (delayed || transactional).then_some(queue_id);
        for m in &msgs {
            // RocketMQ 5's timer messages: delivered at once here, which is not what was asked.
            if let Some(k) = TIMER_KEYS.iter().find(|k| m.property(k).is_some()) {
                return Err(reply(
                    req,
                    response_code::MESSAGE_ILLEGAL,
                    format!("timer messages ({k} property) are not supported by rmqha"),
                ));
            }
        }
        let put = if transactional {
            // The half message (4.9 `prepareMessage`), answered with the queue it was sent to
            // and its offset in the half queue, which END_TRANSACTION names. A DELAY stays on
            // it and applies from the commit.
            crate::transaction::seed_topics(broker.tables());
            let half: Vec<Message> = msgs.iter().map(crate::transaction::to_half).collect();
            broker.put_as_is(&half)
        } else {
            broker.put_messages(&msgs)
        };
        let handle = match put {
            Ok(handle) => handle,
            Err(Error::PutFailed { status: status @ PutStatus::OsPageCacheBusy, reason }) => {
                // The remark 4.9 sends, which clients and operators grep for.
                return Err(reply(
                    req,
                    status.response_code(),
                    format!("{}: {reason}", failure_remark(status)),
                ));
            }
            Err(Error::PutFailed { status, reason }) => {
                return Err(reply(req, status.response_code(), format!("{status}: {reason}")));
            }
            Err(e) => return Err(reply(req, response_code::SYSTEM_ERROR, e.to_string())),
        };
        let st = req.serialize_type;
        let store = broker.store().clone();
        match handle {
            PutHandle::Ready(result) => {
                Ok(Handled::Respond(put_response(st, &store, &result, batch, answer_queue)))
            }
            pending @ PutHandle::Pending(_) => {
                let responder = ctx.responder();
                pending.on_complete(move |result| {
                    if let Err(e) = responder.send(put_response(st, &store, &result, batch, answer_queue)) {
                        tracing::debug!(error = %e, "send response not delivered");
                    }
                });
                Ok(Handled::Deferred)
            }
        }
    }

    /// Java `msgContentCheck` (before the store's own checks, so the client gets RocketMQ's
    /// early answers).
    fn content_check(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
        h: &SendHeader,
        batch: bool,
    ) -> Result<(), RemotingCommand> {
        if h.topic.len() > i8::MAX as usize {
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("topic length {} exceeds 127", h.topic.len()),
            ));
        }
        if h.properties.as_ref().is_some_and(|p| p.len() > i16::MAX as usize) {
            return Err(reply(req, response_code::MESSAGE_ILLEGAL, "properties longer than 32767 bytes"));
        }
        let max = broker.config().max_message_size.max(0) as usize;
        if req.body.len() > max && !batch {
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("the message body size {} exceeds maxMessageSize {max}", req.body.len()),
            ));
        }
        // A batch's records take more than its body: one that could not fit the store's
        // batch limit is refused before it is decoded.
        let batch_max = max.saturating_add(BATCH_ENCODING_HEADROOM);
        if batch && req.body.len() > batch_max {
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("the batch body size {} exceeds maxMessageSize {max} plus 64 KiB", req.body.len()),
            ));
        }
        if batch && h.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(reply(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("batch request does not support retry group {}", h.topic),
            ));
        }
        Ok(())
    }

    /// Java `msgCheck`: the topic exists or is created from the template, and the queue id is
    /// within its queues.
    fn topic_check(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
        h: &SendHeader,
        peer: SocketAddr,
    ) -> Result<TopicConfig, RemotingCommand> {
        if h.topic == AUTO_CREATE_TOPIC_KEY_TOPIC {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("the topic[{}] is conflict with system reserved words.", h.topic),
            ));
        }
        if let Some(reason) = topic_name_error(&h.topic) {
            return Err(reply(req, response_code::SYSTEM_ERROR, reason));
        }
        // Java `TopicValidator.isNotAllowedSendTopic`: a message sent to SCHEDULE_TOPIC_XXXX
        // would be delivered by the scheduler into that topic again, for ever.
        if NOT_ALLOWED_SEND_TOPICS.contains(&h.topic.as_str()) {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!("Sending message to topic[{}] is forbidden.", h.topic),
            ));
        }
        let config = match effective_topic(broker, &h.topic) {
            Some(c) => c,
            None => {
                let retry = h.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
                // Java `TopicSysFlag.buildSysFlag(unit, unitSub)`: unit = 1, unitSub = 2.
                let sys_flag = match (h.unit_mode, retry) {
                    (false, _) => 0,
                    (true, true) => 2,
                    (true, false) => 1,
                };
                // A producer repeats it with every send: each topic once a minute, with a count.
                static MISSING: crate::logging::Throttle =
                    crate::logging::Throttle::new(std::time::Duration::from_secs(60));
                if let Some(n) = MISSING.note(&h.topic) {
                    tracing::info!(topic = %h.topic, %peer, repeated = n, "send to a topic that does not exist");
                }
                create_in_send(broker, &h.topic, &h.default_topic, h.default_topic_queue_nums, sys_flag)
                    .or_else(|| retry.then(|| create_retry_topic(broker, &h.topic, 1, sys_flag)).flatten())
                    .ok_or_else(|| {
                        reply(
                            req,
                            response_code::TOPIC_NOT_EXIST,
                            format!("topic[{}] not exist, apply first please!", h.topic),
                        )
                    })?
            }
        };
        if h.queue_id < 0 && config.write_queue_nums <= 0 {
            // No queue to pick (a topic created with defaultTopicQueueNums 0): stored, the
            // message could never be pulled. RocketMQ's randomQueueId fails on it too.
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("topic {} has no write queues, Producer: {peer}", h.topic),
            ));
        }
        let valid = config.write_queue_nums.max(config.read_queue_nums);
        if h.queue_id >= valid {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "request queueId[{}] is illegal, topic {} has {valid} queues, Producer: {peer}",
                    h.queue_id, h.topic
                ),
            ));
        }
        Ok(config)
    }
}

impl RequestHandler for SendProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        self.process(&broker, &request, ctx).unwrap_or_else(Handled::Respond)
    }
}

impl std::fmt::Debug for SendProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendProcessor").finish_non_exhaustive()
    }
}

/// The response to a put: the status's code, and for a stored message the
/// `SendMessageResponseHeader` fields.
/// Java `handleRetryAndDLQ`: a message a client sends to a group's retry topic itself (its
/// fallback when CONSUMER_SEND_MSG_BACK fails) goes to the group's dead-letter topic once
/// consumed `maxReconsumeTimes` times (the header's, else the group's `retryMaxTimes`).
fn retry_or_dead_letter(
    broker: &Broker,
    req: &RemotingCommand,
    h: &SendHeader,
    queue_id: i32,
) -> Result<(String, i32), RemotingCommand> {
    let Some(group) = h.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return Ok((h.topic.clone(), queue_id));
    };
    let Some(sub) = topic::find_subscription_group(broker, group) else {
        return Err(reply(
            req,
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group not exist, {group}"),
        ));
    };
    if h.reconsume_times < h.max_reconsume_times.unwrap_or(sub.retry_max_times) {
        return Ok((h.topic.clone(), queue_id));
    }
    let dlq = format!("{}{group}", super::send_back::DLQ_GROUP_TOPIC_PREFIX);
    match topic::create_retry_topic(broker, &dlq, 1, 0) {
        Some(_) => Ok((dlq, 0)),
        None => Err(reply(req, response_code::SYSTEM_ERROR, format!("topic[{dlq}] not exist"))),
    }
}

/// `answer_queue` replaces the stored queue id (a delayed message's, in SCHEDULE_TOPIC_XXXX).
fn put_response(
    st: SerializeType,
    store: &MessageStore,
    r: &PutResult,
    batch: bool,
    answer_queue: Option<i32>,
) -> RemotingCommand {
    let code = r.status.response_code();
    if !r.status.is_stored() {
        return RemotingCommand::response(code, Some(&failure_remark(r.status))).with_serialize_type(st);
    }
    let msg_id = if batch && r.msg_num > 1 { batch_msg_ids(store, r) } else { r.msg_id() };
    let remark = (r.status != PutStatus::PutOk).then(|| r.status.as_str());
    RemotingCommand::response(code, remark)
        .with_serialize_type(st)
        .with_ext("msgId", msg_id)
        .with_ext("queueId", answer_queue.unwrap_or(r.queue_id))
        .with_ext("queueOffset", r.queue_offset)
        .with_ext(PROPERTY_MSG_REGION, DEFAULT_REGION)
        .with_ext(PROPERTY_TRACE_SWITCH, true)
}

/// The offset message ids of a batch's records, comma-separated as RocketMQ's
/// `AppendMessageResult.msgId` for a batch.
fn batch_msg_ids(store: &MessageStore, r: &PutResult) -> String {
    let mut ids = Vec::with_capacity(r.msg_num.max(0) as usize);
    let mut phy = r.phy_offset;
    let end = r.end_offset();
    while phy < end && ids.len() < r.msg_num as usize {
        let Some(rec) = store.record_at(phy) else { break };
        ids.push(offset_msg_id(&r.store_host, phy));
        phy += rec.bytes().len().max(1) as i64;
    }
    if ids.is_empty() {
        return r.msg_id();
    }
    ids.join(",")
}

/// RocketMQ's remark for a put that stored nothing.
fn failure_remark(status: PutStatus) -> String {
    match status {
        PutStatus::ServiceNotAvailable => {
            "service not available now: the store is shut down, poisoned, or this broker is a slave".into()
        }
        PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => format!(
            "the message is illegal ({status}): check the body size against maxMessageSize and the properties (at most 32767 bytes)"
        ),
        PutStatus::OsPageCacheBusy => "[PC_SYNCHRONIZED]broker busy, start flow control for a while".into(),
        PutStatus::CreateMappedFileFailed => "create mapped file failed, server is busy or broken.".into(),
        other => other.as_str().into(),
    }
}

/// Whether a batch's records can fit the store's batch limit (`maxMessageSize` plus 64 KiB),
/// counted before they are built: each message takes the header's properties it does not
/// set itself, and building them first made one request of many small messages and a header
/// of 32 KiB of properties copy those into every one (gigabytes) before the store refused
/// the batch. The count is a lower bound of what the store counts (IPv4 hosts, no property
/// the store adds), so nothing the store would take is refused.
fn batch_fits(
    broker: &Broker,
    topic: &str,
    items: &[BatchItem],
    header_props: &[(String, String)],
) -> Result<(), String> {
    if items.len() < 2 {
        return Ok(());
    }
    let max = broker.config().max_message_size.max(0) as usize;
    let limit = max.saturating_add(BATCH_ENCODING_HEADROOM);
    let encoded = |(k, v): &(String, String)| k.len() + v.len() + 2;
    let header_len: usize = header_props.iter().map(encoded).sum();
    let header: std::collections::HashMap<&str, usize> =
        header_props.iter().map(|p| (p.0.as_str(), encoded(p))).collect();
    let mut total = 0usize;
    for it in items {
        let own: usize = it.properties.iter().map(encoded).sum();
        let overridden: usize = it.properties.iter().filter_map(|(k, _)| header.get(k.as_str())).sum();
        let props = own + header_len.saturating_sub(overridden);
        total = total.saturating_add(crate::message::codec::record_len(
            it.body.len(),
            topic.len(),
            props,
            false,
            false,
        ));
        if total > limit {
            return Err(format!(
                "a batch of {} messages encodes to more than maxMessageSize ({max}) plus 64 KiB",
                items.len()
            ));
        }
    }
    Ok(())
}

fn prop<'a>(props: &'a [(String, String)], key: &str) -> Option<&'a str> {
    props.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn set_prop(props: &mut Vec<(String, String)>, key: &str, value: &str) {
    match props.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_owned(),
        None => props.push((key.to_owned(), value.to_owned())),
    }
}

/// Java `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`.
const NOT_ALLOWED_SEND_TOPICS: [&str; 4] = [
    crate::message::SCHEDULE_TOPIC,
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
];

/// RocketMQ 5's timer-message properties (`MessageConst.PROPERTY_TIMER_*`).
const TIMER_KEYS: [&str; 3] = ["TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"];

/// A queue for a send with queueId < 0 (RocketMQ's `randomQueueId`).
pub(crate) fn random_queue(write_queue_nums: i32) -> i32 {
    if write_queue_nums <= 0 {
        return 0;
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    (h.finish() % write_queue_nums as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_item(flag: i32, body: &[u8], props: &str) -> Vec<u8> {
        let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + props.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(total as i32).to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&flag.to_be_bytes());
        v.extend_from_slice(&(body.len() as i32).to_be_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(&(props.len() as i16).to_be_bytes());
        v.extend_from_slice(props.as_bytes());
        v
    }

    #[test]
    fn batch_bodies_decode_as_java_encodes_them() {
        let mut body = encode_item(3, b"first", "KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}u1\u{2}");
        body.extend(encode_item(0, b"", ""));
        let items = decode_batch(&body).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].flag, 3);
        assert_eq!(items[0].body, b"first");
        assert_eq!(items[0].properties, vec![("KEYS".into(), "k1".into()), ("UNIQ_KEY".into(), "u1".into())]);
        assert!(items[1].body.is_empty() && items[1].properties.is_empty());
    }

    #[test]
    fn malformed_batches_are_errors_not_panics() {
        assert!(decode_batch(b"").unwrap_err().contains("empty"));
        let good = encode_item(0, b"abc", "A\u{1}B\u{2}");
        for cut in 0..good.len() {
            assert!(decode_batch(&good[..cut]).is_err() || cut == 0, "cut {cut}");
        }
        let mut bad = good.clone();
        bad[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_batch(&bad).unwrap_err().contains("body length -1"));
        let mut bad = good.clone();
        bad[16..20].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_batch(&bad).is_err());
        let mut bad = good.clone();
        bad[0..4].copy_from_slice(&1000i32.to_be_bytes());
        assert!(decode_batch(&bad).unwrap_err().contains("size 1000"));
        let mut bad = good;
        bad.push(0);
        assert!(decode_batch(&bad).is_err());
    }

    #[test]
    fn v1_and_v2_headers_read_the_same() {
        let v1 = RemotingCommand::request(10)
            .with_ext("producerGroup", "pg")
            .with_ext("topic", "T")
            .with_ext("defaultTopic", "TBW102")
            .with_ext("defaultTopicQueueNums", 4)
            .with_ext("queueId", 2)
            .with_ext("sysFlag", 0)
            .with_ext("bornTimestamp", 123)
            .with_ext("flag", 0)
            .with_ext("properties", "TAGS\u{1}a\u{2}")
            .with_ext("reconsumeTimes", 0)
            // The C++ client's spelling of false; Java reads anything but "true" as false.
            .with_ext("unitMode", 0);
        let v2 = RemotingCommand::request(310)
            .with_ext("a", "pg")
            .with_ext("b", "T")
            .with_ext("c", "TBW102")
            .with_ext("d", 4)
            .with_ext("e", 2)
            .with_ext("f", 0)
            .with_ext("g", 123)
            .with_ext("h", 0)
            .with_ext("i", "TAGS\u{1}a\u{2}")
            .with_ext("j", 0)
            .with_ext("k", false);
        assert_eq!(SendHeader::parse(&v1).unwrap(), SendHeader::parse(&v2).unwrap());
        let missing = RemotingCommand::request(310).with_ext("b", "T");
        assert!(SendHeader::parse(&missing).unwrap_err().to_string().contains("\"a\""));
        // By the code: SEND_MESSAGE_V2 with V1 names has no topic; SEND_MESSAGE with V2
        // names neither; a batch with both spellings is read by the V1 names.
        let mut v1_as_v2 = v1.clone();
        v1_as_v2.code = 310;
        assert!(SendHeader::parse(&v1_as_v2).unwrap_err().to_string().contains("\"a\""));
        assert_eq!(SendHeader::topic_of(&v1_as_v2), None);
        let mut v2_as_v1 = v2.clone();
        v2_as_v1.code = 10;
        assert_eq!(SendHeader::topic_of(&v2_as_v1), None);
        let mut both = v1.clone().with_ext("b", "Other");
        both.code = 320;
        assert_eq!(SendHeader::topic_of(&both), Some("T"));
        assert_eq!(SendHeader::parse(&both).unwrap().topic, "T");
    }
}
