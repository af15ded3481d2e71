//! CONSUMER_SEND_MSG_BACK (36): a push consumer whose listener failed hands a message back
//! for a later retry (RocketMQ 4.9's `SendMessageProcessor.asyncConsumerSendMsgBack`).
//!
//! The message at `offset` is put again to the group's `%RETRY%<group>` topic with one more
//! reconsume time and delay level `delayLevel`, or `3 + reconsumeTimes` when the consumer
//! leaves it to the broker (level 3 is 10 s by default), so the scheduler delivers it then
//! (`crate::schedule`); consumers subscribe to their retry topic. A message consumed
//! `maxReconsumeTimes` times (the request's, else the group's `retryMaxTimes`, 16), or handed
//! back with a negative level, goes to `%DLQ%<group>` instead, undelayed. The copy keeps the
//! message's properties, with `RETRY_TOPIC` (its first topic) and `ORIGIN_MESSAGE_ID` (its
//! first message id) added once.

use std::sync::Arc;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::message::Message;
use crate::message::properties::keys;
use crate::metadata::TopicConfig;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::{PutHandle, StoredMessage};

use super::{RETRY_GROUP_TOPIC_PREFIX, Shared, bad_header, broker_gone, java_bool, reply, topic};

/// Java `MixAll.DLQ_GROUP_TOPIC_PREFIX`.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// The property naming the topic a retried message was first sent to.
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
/// The property naming a retried message's first message id.
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Java `TopicSysFlag.buildSysFlag(false, true)`: a unit-mode group's retry topic.
const FLAG_UNIT_SUB: i32 = 2;

type Answer = Result<Handled, RemotingCommand>;

/// CONSUMER_SEND_MSG_BACK.
pub struct SendBackProcessor {
    shared: Arc<Shared>,
}

impl SendBackProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::CONSUMER_SEND_MSG_BACK];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SendBackProcessor { shared }
    }

    fn send_back(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let offset = req.ext_i64("offset").map_err(h)?;
        let group = req.ext_str("group").map_err(h)?;
        let delay_level = req.ext_i32("delayLevel").map_err(h)?;
        let max_reconsume = req.ext_opt_i32("maxReconsumeTimes").map_err(h)?;
        let unit_mode = java_bool(req, "unitMode").unwrap_or(false);
        if b.role() == BrokerRole::Slave {
            return Err(reply(
                req,
                response_code::SERVICE_NOT_AVAILABLE,
                "this broker is a SLAVE and does not accept messages; send it back to its master",
            ));
        }
        // As 4.9: the client then sends the retry copy through its producer, elsewhere.
        super::broker_permits(b, req, TopicConfig::PERM_WRITE)?;
        let Some(sub) = topic::find_subscription_group(b, group) else {
            return Err(reply(
                req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {group}"),
            ));
        };
        if sub.retry_queue_nums <= 0 {
            // The group wants no retries: dropped, as in RocketMQ.
            return Ok(Handled::Respond(RemotingCommand::response_to(req, response_code::SUCCESS, None)));
        }
        let Some(msg) =
            b.store().genuine_record_at(offset).and_then(|r| r.view().map(|v| StoredMessage::from_view(&v)))
        else {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("look message by offset failed, {offset}"),
            ));
        };
        // The message must be the one the consumer was given: of `originTopic` (or a retry of
        // it). Else any offset copies any topic's message (a half message, another group's)
        // into a retry topic the sender consumes, past the ACL, which checks `originTopic`
        // only (4.9 does not compare them). The stock C++ client (1.x) sends no `originTopic`:
        // its hand-backs are taken, but never of the broker's own system topics.
        let origin = req.ext("originTopic");
        let refused = match origin {
            Some(o) => o != msg.topic && Some(o) != msg.property(RETRY_TOPIC),
            None => SYSTEM_TOPICS.contains(&msg.topic.as_str()),
        };
        if refused {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("the message at offset {offset} is not of originTopic {:?}", origin.unwrap_or("")),
            ));
        }
        let max = max_reconsume.unwrap_or(sub.retry_max_times);
        let dead = msg.reconsume_times >= max || delay_level < 0;
        let (new_topic, queues, sys_flag) = if dead {
            (format!("{DLQ_GROUP_TOPIC_PREFIX}{group}"), 1, 0)
        } else {
            (
                format!("{RETRY_GROUP_TOPIC_PREFIX}{group}"),
                sub.retry_queue_nums,
                if unit_mode { FLAG_UNIT_SUB } else { 0 },
            )
        };
        let Some(tc) = topic::create_retry_topic(b, &new_topic, queues, sys_flag) else {
            return Err(reply(req, response_code::SYSTEM_ERROR, format!("topic[{new_topic}] not exist")));
        };
        if tc.perm & TopicConfig::PERM_WRITE == 0 {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!("the topic[{new_topic}] sending message is forbidden"),
            ));
        }
        let copy = retry_copy(&msg, new_topic, super::send::random_queue(queues), dead, delay_level);
        // SNDBCK_PUT_NUMS counts it under the topic it was first consumed from (4.9's
        // `backTopic`: RETRY_TOPIC, else the message's topic).
        let back_topic = msg.property(RETRY_TOPIC).unwrap_or(&msg.topic);
        match b.put_message(&copy) {
            Ok(PutHandle::Ready(r)) if r.status.is_stored() => {
                b.stats().count_send_back(back_topic, group);
                Ok(Handled::Respond(RemotingCommand::response_to(req, response_code::SUCCESS, None)))
            }
            Ok(PutHandle::Ready(r)) => Err(reply(req, response_code::SYSTEM_ERROR, r.status.as_str())),
            // Not waited for (WAIT=false), as in RocketMQ: stored is enough.
            Ok(PutHandle::Pending(_)) => {
                b.stats().count_send_back(back_topic, group);
                Ok(Handled::Respond(RemotingCommand::response_to(req, response_code::SUCCESS, None)))
            }
            Err(e) => Err(reply(req, response_code::SYSTEM_ERROR, e.to_string())),
        }
    }
}

/// Topics whose messages are the broker's own bookkeeping: never handed back into a retry
/// topic, where a consumer would read them.
const SYSTEM_TOPICS: &[&str] = &[
    crate::message::SCHEDULE_TOPIC,
    crate::transaction::HALF_TOPIC,
    crate::transaction::OP_TOPIC,
    crate::transaction::CHECK_MAX_TIME_TOPIC,
];

/// The copy a handed-back message is put as: to `topic`'s `queue_id`, one more reconsume time,
/// delayed by `delay_level` (0: `3 + reconsume times`) unless `dead`.
fn retry_copy(msg: &StoredMessage, topic: String, queue_id: i32, dead: bool, delay_level: i32) -> Message {
    let mut copy = Message {
        topic,
        queue_id,
        reconsume_times: msg.reconsume_times.saturating_add(1),
        prepared_transaction_offset: 0,
        ..msg.to_message()
    };
    if msg.property(RETRY_TOPIC).is_none() {
        copy.set_property(RETRY_TOPIC, msg.topic.clone());
    }
    if msg.property(ORIGIN_MESSAGE_ID).is_none_or(str::is_empty) {
        copy.set_property(ORIGIN_MESSAGE_ID, msg.msg_id.clone());
    }
    copy.set_property(keys::WAIT, "false");
    let level = if dead {
        0
    } else if delay_level == 0 {
        msg.reconsume_times.saturating_add(3)
    } else {
        delay_level
    };
    copy.set_property(keys::DELAY, level.to_string());
    copy
}

impl RequestHandler for SendBackProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        self.send_back(&b, &request).unwrap_or_else(Handled::Respond)
    }
}

impl std::fmt::Debug for SendBackProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBackProcessor").finish_non_exhaustive()
    }
}
