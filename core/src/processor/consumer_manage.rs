//! Offsets and group membership as consumers ask for them: QUERY_CONSUMER_OFFSET (14),
//! UPDATE_CONSUMER_OFFSET (15), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
//! SEARCH_OFFSET_BY_TIMESTAMP (29), GET_CONSUMER_LIST_BY_GROUP (38),
//! GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
//! INVOKE_BROKER_TO_RESET_OFFSET (222) and CLONE_GROUP_OFFSET (314) (RocketMQ's
//! `ConsumerManageProcessor` and the offset part of `AdminBrokerProcessor`).
//!
//! Every offset request carries `topic` and `queueId`; each response carries `offset`.

use std::sync::Arc;

use serde_json::json;

use crate::broker::Broker;
use crate::remoting::{
    Handled, LanguageCode, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::TimeBoundary;

use super::{Shared, bad_header, broker_gone, java_bool, reply};

/// The consumer-offset, queue-offset and consumer-list requests.
pub struct ConsumerManageProcessor {
    shared: Arc<Shared>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

impl ConsumerManageProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::QUERY_CONSUMER_OFFSET,
        request_code::UPDATE_CONSUMER_OFFSET,
        request_code::SEARCH_OFFSET_BY_TIMESTAMP,
        request_code::GET_MAX_OFFSET,
        request_code::GET_MIN_OFFSET,
        request_code::GET_CONSUMER_LIST_BY_GROUP,
        request_code::GET_CONSUMER_CONNECTION_LIST,
        request_code::GET_PRODUCER_CONNECTION_LIST,
        request_code::INVOKE_BROKER_TO_RESET_OFFSET,
        request_code::CLONE_GROUP_OFFSET,
    ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ConsumerManageProcessor { shared }
    }

    fn offset_answer(req: &RemotingCommand, offset: i64) -> RemotingCommand {
        RemotingCommand::response_to(req, response_code::SUCCESS, None).with_ext("offset", offset)
    }

    /// The committed offset; with none, 0 if the queue still starts at offset 0 in memory
    /// (a new group reads from the beginning), else QUERY_NOT_FOUND so the client applies its
    /// `consumeFromWhere` (RocketMQ 4.9's rule).
    fn query_consumer_offset(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let group = req.ext_str("consumerGroup").map_err(h)?;
        let topic = req.ext_str("topic").map_err(h)?;
        let queue_id = req.ext_i32("queueId").map_err(h)?;
        let set_zero = java_bool(req, "setZeroIfNotFound").unwrap_or(true);
        let offset = b.consumer_offset(group, topic, queue_id);
        if offset >= 0 {
            return Ok(Self::offset_answer(req, offset));
        }
        if set_zero && b.queue_min_offset(topic, queue_id) <= 0 {
            let in_disk = b.store().get_messages(topic, queue_id, 0, 1).suggest_pulling_from_slave;
            if !in_disk {
                return Ok(Self::offset_answer(req, 0));
            }
        }
        Err(reply(
            req,
            response_code::QUERY_NOT_FOUND,
            format!(
                "Not found, maybe this group consumer boot first (group {group}, topic {topic}, queue {queue_id})"
            ),
        ))
    }

    fn update_consumer_offset(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let group = req.ext_str("consumerGroup").map_err(h)?;
        let topic = req.ext_str("topic").map_err(h)?;
        let queue_id = req.ext_i32("queueId").map_err(h)?;
        let offset = req.ext_i64("commitOffset").map_err(h)?;
        // Every commit is kept and persisted (and mirrored to slaves): only one for a group a
        // client could have, on a queue that exists, so a peer cannot grow the table with
        // names and queue ids nothing will ever read (RocketMQ 5 checks the same).
        if !crate::message::codec::group_is_valid(group) {
            return Err(reply(
                req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("the consumer group {group:?} is not a valid group name"),
            ));
        }
        // As a pull judges the topic: one put to through the embedded API has queues and no
        // config, and its consumers' commits were refused (a lite-pull consumer, which commits
        // only this way, then restarted from the queue's start).
        let Some(tc) = super::topic::effective_topic(b, topic) else {
            return Err(reply(req, response_code::TOPIC_NOT_EXIST, format!("topic {topic} not exist")));
        };
        let queues = tc.read_queue_nums.max(tc.write_queue_nums);
        if queue_id < 0 || queue_id >= queues {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("queueId {queue_id} is invalid: topic {topic} has {queues} queues"),
            ));
        }
        b.commit_consumer_offset(group, topic, queue_id, offset)
            .map_err(|e| reply(req, response_code::SYSTEM_ERROR, e.to_string()))?;
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    }

    fn queue_offset(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let queue_id = req.ext_i32("queueId").map_err(h)?;
        let offset = match req.code {
            request_code::GET_MAX_OFFSET => b.queue_max_offset(topic, queue_id),
            request_code::GET_MIN_OFFSET => b.queue_min_offset(topic, queue_id),
            _ => {
                let ts = req.ext_i64("timestamp").map_err(h)?;
                let boundary = TimeBoundary::from_name(req.ext("boundaryType"));
                b.queue_offset_by_time(topic, queue_id, ts, boundary)
            }
        };
        Ok(Self::offset_answer(req, offset))
    }

    fn consumer_list(&self, req: &RemotingCommand) -> Answer {
        let group = req.ext_str("consumerGroup").map_err(|e| bad_header(req, e))?;
        let ids = self.shared.clients.consumer_ids(group);
        if ids.is_empty() {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("no consumer for this group, {group}"),
            ));
        }
        let body = json!({ "consumerIdList": ids }).to_string();
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }
}

impl ConsumerManageProcessor {
    /// GET_CONSUMER_CONNECTION_LIST (203, `mqadmin consumerConnection`): the group's live
    /// members (client id, address, language, version), its subscriptions and how it
    /// consumes; CONSUMER_NOT_ONLINE when no member is connected. GET_PRODUCER_CONNECTION_LIST
    /// (204, `mqadmin producerConnection`): the producer group's live connections;
    /// SYSTEM_ERROR when none is connected. As 4.9's `getConsumerConnectionList` and
    /// `getProducerConnectionList`.
    fn connection_list(&self, req: &RemotingCommand) -> Answer {
        let consumer = req.code == request_code::GET_CONSUMER_CONNECTION_LIST;
        let key = if consumer { "consumerGroup" } else { "producerGroup" };
        let group = req.ext_str(key).map_err(|e| bad_header(req, e))?;
        let clients = &self.shared.clients;
        let found =
            if consumer { clients.consumer_connection(group) } else { clients.producer_connection(group) };
        let Some(body) = found else {
            return Err(if consumer {
                reply(
                    req,
                    response_code::CONSUMER_NOT_ONLINE,
                    format!("the consumer group[{group}] not online"),
                )
            } else {
                reply(req, response_code::SYSTEM_ERROR, format!("the producer group[{group}] not exist"))
            });
        };
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(body.to_string().into_bytes()))
    }
}

impl ConsumerManageProcessor {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222, `mqadmin resetOffsetByTime`): header `topic`,
    /// `group`, `timestamp` (ms; -1 for the end of each queue) and `isForce`. The broker
    /// moves the group's committed offsets ([`Broker::reset_consumer_offsets`]: persisted, so
    /// a consumer that starts or rebalances later reads from there) and pushes
    /// RESET_CONSUMER_CLIENT_OFFSET (220) with the new offsets to each live member of the
    /// group, whose client drops what it holds of those queues and pulls from the new
    /// offsets. The answer is the offset table (Java `ResetOffsetBody`).
    ///
    /// Beyond 4.9: 4.9 only tells the live members (a member that misses the oneway push,
    /// or a group with none online, keeps its old offsets: it answers CONSUMER_NOT_ONLINE and
    /// `mqadmin` falls back to committing them itself); here the broker's own table moves
    /// first, and with nobody online the answer is SUCCESS, with a remark saying so. 4.9
    /// writes the pushed table for every member in the form the tool's language asks
    /// (C++'s list when the tool is a C++ one); here each member gets the form its client
    /// reads: a C++ client (language CPP: rocketmq-client-cpp, and the Python client built on
    /// it) the list, the others (Java, Go, ...) the map.
    /// 4.9 `cloneGroupOffset` (`mqadmin cloneGroupOffset -s SRC -d DEST [-t TOPIC] [-o]`):
    /// `destGroup`'s offsets on `topic` (or every topic `srcGroup` committed offsets on) set
    /// to `srcGroup`'s, queue by queue, as commits (so a slave follows, a move backwards
    /// included). A topic not configured is skipped, and unless `offline`, so is one the
    /// source group's live consumers do not subscribe to while they subscribe to others.
    /// Beyond 4.9, which puts the source's table in place without a check: the names are
    /// checked as a commit's are, a commit that fails is an error naming it, and a slave
    /// refuses (its offsets follow its master's by config sync, which keeps the larger).
    fn clone_group_offset(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let src = req.ext_str("srcGroup").map_err(h)?;
        let dest = req.ext_str("destGroup").map_err(h)?;
        if b.role() == crate::config::BrokerRole::Slave {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                "this broker is a slave: its consumer offsets follow its master's; clone them on the master",
            ));
        }
        let offline = java_bool(req, "offline").unwrap_or(false);
        let offsets = b.tables().consumer_offsets();
        let topics = match req.ext("topic").map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) => vec![t.to_string()],
            None => offsets.topics_of_group(src),
        };
        let mut cloned = 0usize;
        for topic in topics {
            if b.topic_config(&topic).is_none() {
                tracing::warn!(src, dest, topic, "clone group offset: the topic is not configured; skipped");
                continue;
            }
            if !offline
                && matches!(
                    self.shared.clients.subscription(src, &topic),
                    super::clients::SubscriptionLookup::NoTopic
                )
            {
                tracing::warn!(
                    src,
                    dest,
                    topic,
                    "clone group offset: the group's consumers do not subscribe to it; skipped"
                );
                continue;
            }
            for (queue_id, offset) in offsets.query_queues(src, &topic).unwrap_or_default() {
                b.commit_consumer_offset(dest, &topic, queue_id, offset).map_err(|e| {
                    reply(req, response_code::SYSTEM_ERROR, format!("cloning {topic} queue {queue_id}: {e}"))
                })?;
                cloned += 1;
            }
        }
        tracing::info!(src, dest, queues = cloned, "consumer offsets cloned");
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    }

    fn reset_offset(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let group = req.ext_str("group").map_err(h)?;
        let timestamp = req.ext_i64("timestamp").map_err(h)?;
        let force = java_bool(req, "isForce").unwrap_or(false);
        let table = b
            .reset_consumer_offsets(group, topic, timestamp, force)
            .map_err(|e| reply(req, response_code::SYSTEM_ERROR, format!("[reset-offset] {e}")))?;
        let broker_name = &b.config().broker_name;
        let mut entries = Vec::with_capacity(table.len());
        super::stats::queue_entries(
            &mut entries,
            broker_name,
            topic,
            table.iter().map(|&(q, o)| (q, o.to_string())),
        );
        let java_body = format!("{{\"offsetTable\":{{{}}}}}", entries.join(",")).into_bytes();
        // `ResetOffsetBodyForC`, made once if a C++ member needs it.
        let mut cpp_body: Option<Vec<u8>> = None;
        let mut pushed = 0usize;
        for (client, member) in self.shared.clients.consumer_channels(group) {
            let body = if member.language == LanguageCode::CPP {
                cpp_body
                    .get_or_insert_with(|| {
                        let list: Vec<_> = table
                            .iter()
                            .map(|&(q, o)| {
                                json!({"brokerName": broker_name, "offset": o, "queueId": q, "topic": topic})
                            })
                            .collect();
                        json!({ "offsetTable": list }).to_string().into_bytes()
                    })
                    .clone()
            } else {
                java_body.clone()
            };
            let push = RemotingCommand::request(request_code::RESET_CONSUMER_CLIENT_OFFSET)
                .with_ext("topic", topic)
                .with_ext("group", group)
                .with_ext("timestamp", timestamp)
                .with_ext("isForce", force)
                .with_body(body);
            match member.responder.push_oneway(push) {
                Ok(()) => pushed += 1,
                Err(e) => tracing::warn!(group, topic, client, "[reset-offset] cannot tell a consumer: {e}"),
            }
        }
        tracing::info!(group, topic, timestamp, force, consumers = pushed, "[reset-offset] consumers told");
        let mut resp = RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(java_body);
        if pushed == 0 {
            resp.remark = Some(format!(
                "no consumer of group {group} is online: the offsets are reset on the broker, where its consumers will start from"
            ));
        }
        Ok(resp)
    }
}

impl RequestHandler for ConsumerManageProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let answer = match request.code {
            request_code::QUERY_CONSUMER_OFFSET => self.query_consumer_offset(&b, &request),
            request_code::UPDATE_CONSUMER_OFFSET => self.update_consumer_offset(&b, &request),
            request_code::GET_MAX_OFFSET
            | request_code::GET_MIN_OFFSET
            | request_code::SEARCH_OFFSET_BY_TIMESTAMP => self.queue_offset(&b, &request),
            request_code::GET_CONSUMER_LIST_BY_GROUP => self.consumer_list(&request),
            request_code::GET_CONSUMER_CONNECTION_LIST | request_code::GET_PRODUCER_CONNECTION_LIST => {
                self.connection_list(&request)
            }
            request_code::INVOKE_BROKER_TO_RESET_OFFSET => self.reset_offset(&b, &request),
            request_code::CLONE_GROUP_OFFSET => self.clone_group_offset(&b, &request),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(answer.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for ConsumerManageProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerManageProcessor").finish_non_exhaustive()
    }
}
