//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): RocketMQ's `PullMessageProcessor`, with
//! the read path and status mapping of spec section 10 and long polling (`long_poll`).
//!
//! Request header (`PullMessageRequestHeader`): `consumerGroup`, `topic`, `queueId`,
//! `queueOffset`, `maxMsgNums`, `sysFlag` (1 commit offset, 2 suspend, 4 subscription in the
//! header), `commitOffset`, `suspendTimeoutMillis`, `subVersion`; optional `subscription`,
//! `expressionType` (TAG, or SQL92 with `enablePropertyFilter`) and 5.x `maxMsgBytes`. Response header
//! (`PullMessageResponseHeader`, on every status): `suggestWhichBrokerId`,
//! `nextBeginOffset`, `minOffset`, `maxOffset`. A SUCCESS body is the raw CommitLog records,
//! concatenated.
//!
//! Tag filtering happens during the store's ConsumeQueue scan, as RocketMQ's
//! `getMessage(…, messageFilter)`: a unit whose tags code (the Java hash code of the
//! message's TAGS) is not the subscription's is skipped without being read and without
//! counting toward `maxMsgNums` or the byte limits, so a batch holds up to `maxMsgNums`
//! matching messages out of a scan of up to `maxFilterMessageSize / 20` units, and
//! `nextBeginOffset` moves past every unit scanned. If none matched the status is
//! NO_MATCHED_MESSAGE (PULL_RETRY_IMMEDIATELY). Each record read is then checked by its TAGS
//! text, which tells apart tags with the same hash code (RocketMQ's clients do that), and a
//! record that fails is skipped the same way, within the scan.
//!
//! **SQL92** (`MessageSelector.bySql`, with `enablePropertyFilter=true`): as RocketMQ's
//! `ExpressionMessageFilter` without a ConsumeQueue extension, every unit passes the
//! ConsumeQueue stage and each record's properties are evaluated during the scan
//! ([`crate::filter`]); only a record for which the expression is TRUE is sent, and the others
//! do not use up `maxMsgNums`. The expression is the header's (a lite-pull consumer sends it
//! with each pull; one that does not compile is SUBSCRIPTION_PARSE_FAILED, where 4.9 would
//! filter nothing out) or the one the group's heartbeat registered (one that did not compile
//! is FILTER_DATA_NOT_EXIST, as 4.9). Without `enablePropertyFilter` such pulls are
//! SYSTEM_ERROR "The broker does not support consumer to filter message by SQL92", as 4.9.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::remoting::{
    Handled, RemotingCommand, RemotingError, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::{GetMessageResult, GetMessageStatus, MessageFilter};

use super::clients::{ConsumerFilter, SQL92, SubscriptionLookup, is_tag_type};
use super::long_poll::{Held, LongPoll, MAX_SUSPEND};
use super::topic::{effective_topic, find_subscription_group};
use super::{MASTER_ID, Shared, bad_header, broker_gone, reply};

/// Java `PullSysFlag`.
pub mod sys_flag {
    /// Commit `commitOffset` for the group (masters only).
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Long-poll when nothing is found.
    pub const SUSPEND: i32 = 0x2;
    /// `subscription` in the header is the filter (else the heartbeat's subscription).
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Class filter (not supported; read as a tag filter).
    pub const CLASS_FILTER: i32 = 0x8;
    /// 5.x lite pull.
    pub const LITE_PULL_MESSAGE: i32 = 0x10;
}

/// Largest pull body when the client names no `maxMsgBytes` (the store's default).
const DEFAULT_MAX_BYTES: usize = 128 * 1024 * 1024;

/// `PullMessageRequestHeader`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PullHeader {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub max_msg_nums: i32,
    pub sys_flag: i32,
    pub commit_offset: i64,
    pub suspend_timeout_ms: i64,
    pub subscription: Option<String>,
    pub sub_version: i64,
    pub expression_type: Option<String>,
    pub max_msg_bytes: Option<i32>,
}

impl PullHeader {
    pub(crate) fn parse(req: &RemotingCommand) -> Result<Self, RemotingError> {
        Ok(PullHeader {
            group: req.ext_str("consumerGroup")?.to_owned(),
            topic: req.ext_str("topic")?.to_owned(),
            queue_id: req.ext_i32("queueId")?,
            queue_offset: req.ext_i64("queueOffset")?,
            max_msg_nums: req.ext_i32("maxMsgNums")?,
            sys_flag: req.ext_i32("sysFlag")?,
            commit_offset: req.ext_i64("commitOffset")?,
            suspend_timeout_ms: req.ext_i64("suspendTimeoutMillis")?,
            subscription: req.ext("subscription").map(str::to_owned),
            sub_version: req.ext_i64("subVersion")?,
            expression_type: req.ext("expressionType").map(str::to_owned),
            max_msg_bytes: req.ext_opt_i32("maxMsgBytes")?,
        })
    }
}

/// What a pull comes to: an answer now, or parking until its queue has a unit past `offset`
/// that `filter` may want (or its time runs out).
pub(crate) enum PullOutcome {
    Respond(RemotingCommand),
    Suspend { topic: String, queue_id: i32, offset: i64, timeout: Duration, filter: ConsumerFilter },
}

/// The RocketMQ response code for a read status (spec 10); `offset` is the request's.
pub(crate) fn status_code(status: GetMessageStatus, offset: i64) -> i32 {
    use GetMessageStatus::*;
    match status {
        Found => response_code::SUCCESS,
        MessageWasRemoving | NoMatchedMessage => response_code::PULL_RETRY_IMMEDIATELY,
        NoMatchedLogicQueue | NoMessageInQueue if offset != 0 => response_code::PULL_OFFSET_MOVED,
        NoMatchedLogicQueue | NoMessageInQueue | OffsetFoundNull | OffsetOverflowOne => {
            response_code::PULL_NOT_FOUND
        }
        OffsetOverflowBadly | OffsetTooSmall => response_code::PULL_OFFSET_MOVED,
    }
}

/// PULL_MESSAGE and LITE_PULL_MESSAGE.
pub struct PullProcessor {
    shared: Arc<Shared>,
}

impl PullProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::PULL_MESSAGE, request_code::LITE_PULL_MESSAGE];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        PullProcessor { shared }
    }

    pub(crate) fn long_poll(&self) -> &LongPoll {
        &self.shared.long_poll
    }

    /// Answers a parked pull now (its queue grew, its time ran out).
    pub(crate) fn answer_held(&self, h: Held) {
        let resp = match self.shared.broker() {
            Some(b) => match self.process(&b, &h.request, false) {
                PullOutcome::Respond(r) => r,
                // Suspension is disallowed on this path; answer as a timeout would.
                PullOutcome::Suspend { .. } => {
                    reply(&h.request, response_code::PULL_NOT_FOUND, "suspended twice")
                }
            },
            None => broker_gone(&h.request),
        };
        if let Err(e) = h.responder.send(resp) {
            tracing::debug!(error = %e, "held pull's response not delivered");
        }
    }

    /// One pull, as RocketMQ's `processRequest(request, brokerAllowSuspend)`.
    pub(crate) fn process(&self, b: &Broker, req: &RemotingCommand, allow_suspend: bool) -> PullOutcome {
        match self.try_process(b, req, allow_suspend) {
            Ok(o) => o,
            Err(resp) => PullOutcome::Respond(resp),
        }
    }

    fn try_process(
        &self,
        b: &Broker,
        req: &RemotingCommand,
        allow_suspend: bool,
    ) -> Result<PullOutcome, RemotingCommand> {
        let h = PullHeader::parse(req).map_err(|e| bad_header(req, e))?;
        super::broker_permits(b, req, crate::metadata::TopicConfig::PERM_READ)?;
        let group = find_subscription_group(b, &h.group).ok_or_else(|| {
            reply(
                req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group [{}] does not exist", h.group),
            )
        })?;
        if !group.consume_enable {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!("subscription group no permission, {}", h.group),
            ));
        }
        let topic = effective_topic(b, &h.topic).ok_or_else(|| {
            reply(
                req,
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist, apply first please!", h.topic),
            )
        })?;
        if !topic.is_readable() {
            return Err(reply(
                req,
                response_code::NO_PERMISSION,
                format!("the topic[{}] pulling message is forbidden", h.topic),
            ));
        }
        if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                    h.queue_id, h.topic, topic.read_queue_nums, h.group
                ),
            ));
        }
        let filter = self.filter(b, req, &h, group.consume_broadcast_enable)?;

        let max_bytes = h.max_msg_bytes.filter(|&m| m > 0).map_or(DEFAULT_MAX_BYTES, |m| m as usize);
        let store_filter: Option<&dyn MessageFilter> = (!filter.is_all()).then_some(&filter);
        let r = b.store().get_messages_filtered(
            &h.topic,
            h.queue_id,
            h.queue_offset,
            h.max_msg_nums,
            max_bytes,
            store_filter,
        );
        let mut code = status_code(r.status, h.queue_offset);
        let role = b.role();
        let slave_read = b.slave_read_enable();
        let mut suggest = if slave_read {
            if r.suggest_pulling_from_slave {
                group.which_broker_when_consume_slowly
            } else {
                group.broker_id
            }
        } else {
            MASTER_ID
        };
        if role == BrokerRole::Slave {
            if !slave_read {
                // 4.9: the answer is the store's (its status switch overrides the role
                // switch's PULL_RETRY_IMMEDIATELY), pointing at the master. A consumer pulls
                // here when its master is gone (or when told to), and must get the messages:
                // PULL_RETRY_IMMEDIATELY without them, but with the next offset past them,
                // made consumers skip them, and commit the skip.
                suggest = MASTER_ID;
            } else if !r.suggest_pulling_from_slave && master_alive(b) {
                // 5.x: a slave not asked to serve slow consumers sends them back to a live
                // master, and does not long-poll for them.
                suggest = MASTER_ID;
                if r.status != GetMessageStatus::Found {
                    code = response_code::PULL_RETRY_IMMEDIATELY;
                }
            }
            if code == response_code::PULL_OFFSET_MOVED && !b.config().offset_check_in_slave {
                code = response_code::PULL_RETRY_IMMEDIATELY;
                suggest = group.broker_id;
            }
        }

        let commit = allow_suspend && h.sys_flag & sys_flag::COMMIT_OFFSET != 0 && role != BrokerRole::Slave;
        if commit && h.commit_offset >= 0 {
            if let Err(e) = b.commit_consumer_offset(&h.group, &h.topic, h.queue_id, h.commit_offset) {
                tracing::debug!(error = %e, "commit offset in pull ignored");
            }
        }
        if code == response_code::PULL_NOT_FOUND
            && allow_suspend
            && h.sys_flag & sys_flag::SUSPEND != 0
            && h.suspend_timeout_ms > 0
        {
            return Ok(PullOutcome::Suspend {
                topic: h.topic,
                queue_id: h.queue_id,
                offset: h.queue_offset,
                timeout: Duration::from_millis(h.suspend_timeout_ms as u64).min(MAX_SUSPEND),
                filter,
            });
        }
        if code == response_code::SUCCESS {
            self.shared.rates.add(&h.topic, &h.group, r.records.len());
            b.stats().count_pull(&h.topic, &h.group, r.records.len(), r.buffer_total_size());
        } else {
            b.stats().count_pull(&h.topic, &h.group, 0, 0);
        }
        Ok(PullOutcome::Respond(pull_response(req, code, &r, suggest, h.queue_offset)))
    }

    /// The filter: the header's subscription, or the one the group's heartbeat registered.
    fn filter(
        &self,
        b: &Broker,
        req: &RemotingCommand,
        h: &PullHeader,
        broadcast_enable: bool,
    ) -> Result<ConsumerFilter, RemotingCommand> {
        let unsupported = |t: &str| {
            reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("The broker does not support consumer to filter message by {}", crate::clip(t, 64)),
            )
        };
        let property_filter = b.config().enable_property_filter;
        if h.sys_flag & sys_flag::SUBSCRIPTION != 0 {
            let t = h.expression_type.as_deref();
            // RocketMQ compiles the header's expression too, but a SQL92 one that does not
            // compile then filters nothing out; here it is refused, saying why.
            if !is_tag_type(t) && (!property_filter || t != Some(SQL92)) {
                return Err(unsupported(t.unwrap_or_default()));
            }
            return ConsumerFilter::build(t, h.subscription.as_deref()).map_err(|e| {
                reply(
                    req,
                    response_code::SUBSCRIPTION_PARSE_FAILED,
                    format!("parse the consumer's subscription failed: {e}"),
                )
            });
        }
        match self.shared.clients.subscription(&h.group, &h.topic) {
            SubscriptionLookup::NoGroup => {
                Err(reply(req, response_code::SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"))
            }
            SubscriptionLookup::NoTopic => Err(reply(
                req,
                response_code::SUBSCRIPTION_NOT_EXIST,
                "the consumer's subscription not exist",
            )),
            SubscriptionLookup::Found { subscription, broadcasting } => {
                if broadcasting && !broadcast_enable {
                    return Err(reply(
                        req,
                        response_code::NO_PERMISSION,
                        format!("the consumer group[{}] can not consume by broadcast way", h.group),
                    ));
                }
                if subscription.sub_version < h.sub_version {
                    return Err(reply(
                        req,
                        response_code::SUBSCRIPTION_NOT_LATEST,
                        "the consumer's subscription not latest",
                    ));
                }
                // As 4.9: an expression its heartbeat could not register first, then whether
                // this broker filters by properties at all.
                if let ConsumerFilter::Invalid(why) = &subscription.filter {
                    return Err(reply(
                        req,
                        response_code::FILTER_DATA_NOT_EXIST,
                        format!(
                            "The broker's consumer filter data is not exist!Your expression may be wrong! ({why})"
                        ),
                    ));
                }
                if subscription.filter.needs_record() && !property_filter {
                    return Err(unsupported(&subscription.expression_type));
                }
                Ok(subscription.filter)
            }
        }
    }
}

/// Whether a slave's master is alive, as far as it can tell: its HA connection is up.
fn master_alive(b: &Broker) -> bool {
    b.ha_slave().is_some_and(|s| s.status().connected)
}

/// The response with `PullMessageResponseHeader` and, for SUCCESS, the records.
/// An answer that carries no records never moves the consumer past records the store found:
/// its next offset is then the one asked for.
fn pull_response(
    req: &RemotingCommand,
    code: i32,
    r: &GetMessageResult,
    suggest: i64,
    asked: i64,
) -> RemotingCommand {
    let next =
        if code != response_code::SUCCESS && !r.records.is_empty() { asked } else { r.next_begin_offset };
    let mut resp = RemotingCommand::response_to(
        req,
        code,
        (code != response_code::SUCCESS).then_some(r.status.as_str()),
    )
    .with_ext("suggestWhichBrokerId", suggest)
    .with_ext("nextBeginOffset", next)
    .with_ext("minOffset", r.min_offset)
    .with_ext("maxOffset", r.max_offset);
    if code == response_code::SUCCESS {
        let mut body = Vec::with_capacity(r.buffer_total_size());
        for rec in &r.records {
            body.extend_from_slice(rec.bytes());
        }
        resp.body = body;
    }
    resp
}

impl RequestHandler for PullProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        match self.process(&b, &request, true) {
            PullOutcome::Respond(r) => Handled::Respond(r),
            PullOutcome::Suspend { topic, queue_id, offset, timeout, filter } => {
                // A pull has no body (RocketMQ's clients send none, and answering it reads
                // none): what a peer put there is not kept for the whole suspension.
                let mut request = request;
                request.body = Vec::new();
                let held = Held {
                    request,
                    responder: ctx.responder(),
                    topic,
                    queue_id,
                    offset,
                    deadline: Instant::now() + timeout,
                    filter,
                };
                match self.shared.long_poll.hold(held) {
                    Ok(()) => Handled::Deferred,
                    // Full or stopping: answer now, as a suspension that timed out would.
                    Err(held) => match self.process(&b, &held.request, false) {
                        PullOutcome::Respond(r) => Handled::Respond(r),
                        PullOutcome::Suspend { .. } => {
                            Handled::Respond(reply(&held.request, response_code::PULL_NOT_FOUND, ""))
                        }
                    },
                }
            }
        }
    }
}

impl std::fmt::Debug for PullProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullProcessor").field("held", &self.shared.long_poll.len()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GetMessageStatus::*;

    #[test]
    fn status_mapping_follows_spec_10() {
        assert_eq!(status_code(Found, 5), response_code::SUCCESS);
        assert_eq!(status_code(NoMatchedMessage, 5), response_code::PULL_RETRY_IMMEDIATELY);
        assert_eq!(status_code(MessageWasRemoving, 5), response_code::PULL_RETRY_IMMEDIATELY);
        assert_eq!(status_code(NoMatchedLogicQueue, 5), response_code::PULL_OFFSET_MOVED);
        assert_eq!(status_code(NoMatchedLogicQueue, 0), response_code::PULL_NOT_FOUND);
        assert_eq!(status_code(NoMessageInQueue, 3), response_code::PULL_OFFSET_MOVED);
        assert_eq!(status_code(NoMessageInQueue, 0), response_code::PULL_NOT_FOUND);
        assert_eq!(status_code(OffsetFoundNull, 5), response_code::PULL_NOT_FOUND);
        assert_eq!(status_code(OffsetOverflowOne, 5), response_code::PULL_NOT_FOUND);
        assert_eq!(status_code(OffsetOverflowBadly, 5), response_code::PULL_OFFSET_MOVED);
        assert_eq!(status_code(OffsetTooSmall, 5), response_code::PULL_OFFSET_MOVED);
    }
}
