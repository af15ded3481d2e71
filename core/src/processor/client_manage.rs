//! HEART_BEAT (34) and UNREGISTER_CLIENT (35): RocketMQ's `ClientManageProcessor`.
//!
//! A heartbeat's body is `HeartbeatData` JSON (`clientID`, `producerDataSet`,
//! `consumerDataSet` with each group's `subscriptionDataSet`). For each consumer group the
//! broker finds (or, with `autoCreateSubscriptionGroup`, creates) the subscription group,
//! creates the group's retry topic `%RETRY%<group>` on a master, and records the member and
//! its subscriptions, which pulls without a subscription in their header and
//! GET_CONSUMER_LIST_BY_GROUP read. The subscriptions of a heartbeat replace the group's, as
//! RocketMQ's `ConsumerGroupInfo.updateSubscription` (see `clients`), up to 4096 topics; a
//! group name RocketMQ clients refuse, and a subscription to a topic name no topic can have,
//! are ignored.
//!
//! When a group changes (a member joins, leaves by UNREGISTER_CLIENT or by closing its
//! connection, or a heartbeat adds or drops a topic) the broker pushes
//! NOTIFY_CONSUMER_IDS_CHANGED (40, oneway, header `consumerGroup`) to each of its live
//! members, with `notifyConsumerIdsChangedEnable` (default true), as 4.9's
//! `DefaultConsumerIdsChangeListener`: they rebalance at once instead of at their next
//! periodic rebalance (every 20 s in the Java client), so a joining member does not share
//! its queues with their old owner meanwhile, and a leaving member's queues are not left
//! unread. A member whose heartbeats stop while its connection stays open (a hung client) is
//! dropped after `channelExpiredTimeout` (120 s), its connection closed and its group told,
//! as RocketMQ 5 does ([`expire_clients`]; 4.9 drops it without a push).

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::broker::Broker;
use crate::message::codec::topic_is_valid;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::clients::{Channel, ConsumerFilter, ConsumerKind, Subscription, is_tag_type};
use super::topic::{create_retry_topics, find_subscription_groups};
use super::{RETRY_GROUP_TOPIC_PREFIX, Shared, bad_header, broker_gone, reply};

/// HEART_BEAT and UNREGISTER_CLIENT.
pub struct ClientManageProcessor {
    shared: Arc<Shared>,
}

impl ClientManageProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] =
        &[request_code::HEART_BEAT, request_code::UNREGISTER_CLIENT, request_code::CHECK_CLIENT_CONFIG];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ClientManageProcessor { shared }
    }

    /// The answer; the consumer groups that changed go to `changed` (to notify once the
    /// answer is sent).
    fn heartbeat(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
        ctx: &RequestContext,
        changed: &mut Vec<String>,
    ) -> RemotingCommand {
        let data: Value = match std::str::from_utf8(&req.body).map_err(|e| e.to_string()).and_then(|t| {
            crate::metadata::json::from_str_lenient(t, "heartbeat body").map_err(|e| e.to_string())
        }) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    "heartbeat body is not a HeartbeatData object",
                );
            }
            Err(e) => {
                return reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!("heartbeat body is not HeartbeatData JSON: {e}"),
                );
            }
        };
        let Some(client_id) = data.get("clientID").and_then(Value::as_str).filter(|s| !s.is_empty()) else {
            return reply(req, response_code::SYSTEM_ERROR, "heartbeat without clientID");
        };
        let channel = Channel {
            responder: ctx.responder(),
            peer: ctx.peer(),
            language: req.language,
            version: req.version,
            last_update: Instant::now(),
            acl: ctx.acl.clone(),
        };
        let mut consumers = Vec::new();
        for c in data.get("consumerDataSet").and_then(Value::as_array).into_iter().flatten() {
            let Some(group) = c.get("groupName").and_then(Value::as_str).filter(|g| !g.is_empty()) else {
                continue;
            };
            if !crate::message::codec::group_is_valid(group) {
                // No RocketMQ client sends such a name (`Validators.checkGroup`), and nothing
                // could use it: a pull or lock for it is refused.
                tracing::debug!(
                    group_len = group.len(),
                    "heartbeat for an invalid consumer group name ignored"
                );
                continue;
            }
            consumers.push((group, c));
        }
        // The groups and their retry topics, those missing created in one write of each table.
        let names: Vec<&str> = consumers.iter().map(|(g, _)| *g).collect();
        let retry: Vec<(String, i32, i32)> = find_subscription_groups(broker, &names)
            .into_iter()
            .zip(&consumers)
            .filter_map(|(g, (group, c))| {
                let unit_mode = c.get("unitMode").and_then(Value::as_bool).unwrap_or(false);
                g.map(|g| {
                    (
                        format!("{RETRY_GROUP_TOPIC_PREFIX}{group}"),
                        g.retry_queue_nums.max(1),
                        if unit_mode { 2 } else { 0 },
                    )
                })
            })
            .collect();
        create_retry_topics(broker, retry.iter().map(|(t, q, f)| (t.as_str(), *q, *f)));
        for (group, c) in consumers {
            let subs = c
                .get("subscriptionDataSet")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| {
                    // A topic that cannot exist (no pull for it gets as far as the lookup) is
                    // not kept.
                    let topic = s.get("topic").and_then(Value::as_str).filter(|t| topic_is_valid(t))?;
                    let sub_string = s.get("subString").and_then(Value::as_str).unwrap_or("*");
                    let expression_type = s.get("expressionType").and_then(Value::as_str).unwrap_or("TAG");
                    let filter = ConsumerFilter::registered(Some(expression_type), sub_string);
                    Some(Subscription {
                        topic: topic.to_owned(),
                        sub_string: sub_string.to_owned(),
                        sub_version: s.get("subVersion").and_then(Value::as_i64).unwrap_or(0),
                        expression_type: expression_type.to_owned(),
                        filter,
                    })
                })
                .collect();
            let field =
                |k: &str, default: &str| c.get(k).and_then(Value::as_str).unwrap_or(default).to_owned();
            let kind = ConsumerKind {
                message_model: field("messageModel", "CLUSTERING"),
                consume_type: field("consumeType", "CONSUME_PASSIVELY"),
                consume_from_where: field("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
            };
            if self.shared.clients.register_consumer(group, client_id, channel.clone(), &kind, subs) {
                changed.push(group.to_string());
            }
        }
        for p in data.get("producerDataSet").and_then(Value::as_array).into_iter().flatten() {
            if let Some(group) = p.get("groupName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                self.shared.clients.register_producer(group, client_id, channel.clone());
            }
        }
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
    }

    fn unregister(&self, broker: &Broker, req: &RemotingCommand, ctx: &RequestContext) -> RemotingCommand {
        let client_id = match req.ext_str("clientID") {
            Ok(id) => id,
            Err(e) => return bad_header(req, e),
        };
        let consumer_group = req.ext("consumerGroup");
        let left =
            self.shared.clients.unregister(client_id, ctx.peer(), req.ext("producerGroup"), consumer_group);
        if let (true, Some(group)) = (left, consumer_group) {
            self.notify_members(broker, group);
        }
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
    }

    fn notify_members(&self, broker: &Broker, group: &str) {
        notify_members(&self.shared, broker, group);
    }

    /// CHECK_CLIENT_CONFIG, as 4.9's `checkClientConfig`: a tag subscription (or a body
    /// without one) is SUCCESS; any other type is SYSTEM_ERROR without
    /// `enablePropertyFilter`; with it, a SQL92 expression that compiles is SUCCESS and one
    /// that does not is SUBSCRIPTION_PARSE_FAILED saying why (a type other than SQL92 too,
    /// where 4.9 fails on a null filter). A body that is not a JSON object is SYSTEM_ERROR,
    /// as 4.9's decoder failing on it.
    fn check_client_config(&self, broker: &Broker, req: &RemotingCommand) -> RemotingCommand {
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    "CHECK_CLIENT_CONFIG needs a CheckClientRequestBody (a JSON object with subscriptionData)",
                );
            }
        };
        let Some(sub) = body.get("subscriptionData").filter(|s| s.is_object()) else {
            return RemotingCommand::response_to(req, response_code::SUCCESS, None);
        };
        let expression_type = sub.get("expressionType").and_then(Value::as_str);
        if is_tag_type(expression_type) {
            return RemotingCommand::response_to(req, response_code::SUCCESS, None);
        }
        if !broker.config().enable_property_filter {
            return reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "The broker does not support consumer to filter message by {}",
                    crate::clip(expression_type.unwrap_or_default(), 64)
                ),
            );
        }
        match ConsumerFilter::build(expression_type, sub.get("subString").and_then(Value::as_str)) {
            Ok(_) => RemotingCommand::response_to(req, response_code::SUCCESS, None),
            Err(e) => reply(req, response_code::SUBSCRIPTION_PARSE_FAILED, e.to_string()),
        }
    }
}

/// NOTIFY_CONSUMER_IDS_CHANGED to each live member of `group` (see the module doc).
fn notify_members(shared: &Shared, broker: &Broker, group: &str) {
    if !broker.notify_consumer_ids_changed_enable() {
        return;
    }
    for (client, member) in shared.clients.consumer_channels(group) {
        let push = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED)
            .with_ext("consumerGroup", group);
        if let Err(e) = member.responder.push_oneway(push) {
            tracing::debug!(group, client, "cannot tell a consumer its group changed: {e}");
        }
    }
}

/// The `rmqha-client-expiry` thread: every tenth of `channelExpiredTimeout` (at most 10 s,
/// RocketMQ's `ClientHousekeepingService` period), drops the clients whose heartbeats stopped
/// on an open connection, closes those connections and tells the rest of each group they
/// left, as RocketMQ 5's `scanNotActiveChannel` does, until the services stop.
pub(super) fn expire_clients(shared: &Shared) {
    let every = shared.clients.expiry_scan_interval();
    while shared.stop.sleep(every) {
        let (groups, connections) = shared.clients.expire();
        for c in &connections {
            tracing::info!(peer = %c.peer(), "closing a client's connection: its heartbeats stopped");
            c.close_connection();
        }
        let Some(broker) = shared.broker() else { return };
        for group in &groups {
            notify_members(shared, &broker, group);
        }
    }
}

impl RequestHandler for ClientManageProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        Handled::Respond(match request.code {
            request_code::HEART_BEAT => {
                let mut changed = Vec::new();
                let answer = self.heartbeat(&broker, &request, ctx, &mut changed);
                if changed.is_empty() {
                    answer
                } else {
                    // The answer first: a member's heartbeat is answered before it is told
                    // of the change it made.
                    if let Err(e) = ctx.responder().send(answer) {
                        tracing::debug!(peer = %ctx.peer(), "heartbeat answer not sent: {e}");
                    }
                    for group in &changed {
                        self.notify_members(&broker, group);
                    }
                    return Handled::Deferred;
                }
            }
            request_code::UNREGISTER_CLIENT => self.unregister(&broker, &request, ctx),
            request_code::CHECK_CLIENT_CONFIG => self.check_client_config(&broker, &request),
            _ => RemotingCommand::not_supported(&request),
        })
    }

    fn connection_closed(&self, peer: std::net::SocketAddr) {
        let groups = self.shared.clients.connection_closed(peer);
        if groups.is_empty() {
            return;
        }
        let Some(broker) = self.shared.broker() else { return };
        for group in &groups {
            self.notify_members(&broker, group);
        }
    }
}

impl std::fmt::Debug for ClientManageProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientManageProcessor").finish_non_exhaustive()
    }
}
