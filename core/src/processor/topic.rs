//! Topics and subscription groups as clients meet them: UPDATE_AND_CREATE_TOPIC, and the
//! rules RocketMQ's `TopicConfigManager` and `SubscriptionGroupManager` apply when a send,
//! pull or heartbeat names a topic or group that does not exist yet
//! (`autoCreateTopicEnable`, `autoCreateSubscriptionGroup`).
//!
//! Topics created here go through the broker's [`ConfigTables`](crate::metadata::ConfigTables),
//! so they are persisted before the request is answered and a slave mirrors them at its next
//! config sync. A slave never creates anything: its tables are its master's.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::metadata::{SubscriptionGroupConfig, TopicConfig, TopicFilterType};
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::{AUTO_CREATE_TOPIC_KEY_TOPIC, Shared, bad_header, broker_gone, java_bool, reply};

/// Java `TopicValidator.TOPIC_MAX_LENGTH`.
const TOPIC_MAX_LENGTH: usize = 127;

/// Puts the template topic TBW102 in the table of a master with `autoCreateTopicEnable`, as
/// RocketMQ's `TopicConfigManager` does at start (`defaultTopicQueueNums` queues, inherit +
/// read + write): producers ask for its route when their topic has none, and the broker
/// creates their topic from it on the first send. An existing entry (from `topics.json`) wins.
pub(crate) fn seed_system_topics(broker: &Broker) {
    let config = broker.config();
    if broker.role() == BrokerRole::Slave || !broker.auto_create_topic_enable() {
        return;
    }
    let queues = config.default_topic_queue_nums.max(1);
    let perm = TopicConfig::PERM_INHERIT | TopicConfig::PERM_READ | TopicConfig::PERM_WRITE;
    broker.tables().topics().seed_if_absent([TopicConfig::with_queues(
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        queues,
        queues,
        perm,
    )]);
}

/// The subscription groups a RocketMQ 4.9 broker starts with (`SubscriptionGroupManager.init`):
/// its own tools' groups (`mqadmin` pulls as TOOLS_CONSUMER, for one) and Alibaba ONS's.
pub(crate) const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

/// Adds RocketMQ's built-in subscription groups the table lacks, in memory (persisted with
/// the table's next change, as in RocketMQ): with `autoCreateSubscriptionGroup=false` a
/// tool pulling as TOOLS_CONSUMER is otherwise refused SUBSCRIPTION_GROUP_NOT_EXIST. A slave
/// seeds them too, until its first sync brings the master's table.
pub(crate) fn seed_system_groups(broker: &Broker) {
    broker
        .tables()
        .subscription_groups()
        .seed_if_absent(SYSTEM_GROUPS.iter().map(|g| SubscriptionGroupConfig::new(*g)));
}

/// Why a topic name is refused (Java `TopicValidator.validateTopic`), or `None` if it is valid.
/// The most queues a topic is created with or advertised with (UPDATE_AND_CREATE_TOPIC).
pub(crate) const MAX_QUEUE_NUMS: i32 = 1024;

pub(crate) fn topic_name_error(topic: &str) -> Option<String> {
    if topic.trim().is_empty() {
        return Some("The specified topic is blank.".into());
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')) {
        return Some(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return Some("The specified topic is longer than topic max length.".into());
    }
    None
}

/// The config a request for `topic` is judged by: the table's entry, or, for a topic that has
/// ConsumeQueues but no entry (written through the embedded API, which needs no topic
/// config), a read/write config with as many queues as it has. Not persisted.
pub(crate) fn effective_topic(broker: &Broker, topic: &str) -> Option<TopicConfig> {
    if let Some(c) = broker.tables().topics().get(topic) {
        return Some(c);
    }
    let ids = broker.store().queue_ids(topic);
    // Embedded puts may use any queue id; clients build one entry per queue, so at most as
    // many as UPDATE_AND_CREATE_TOPIC allows (and `i32::MAX + 1` would overflow).
    let queues = ids.iter().copied().max()?.saturating_add(1).min(MAX_QUEUE_NUMS);
    Some(TopicConfig::with_queues(topic, queues, queues, TopicConfig::PERM_READ | TopicConfig::PERM_WRITE))
}

/// Java `createTopicInSendMessageMethod`: `topic` created from the template `default_topic`
/// if the template exists and may be inherited (TBW102 only while `autoCreateTopicEnable`),
/// with `min(client_queue_nums, template write queues)` queues and the template's perm minus
/// inherit. Persisted. `None` if no topic could be created.
pub(crate) fn create_in_send(
    broker: &Broker,
    topic: &str,
    default_topic: &str,
    client_queue_nums: i32,
    topic_sys_flag: i32,
) -> Option<TopicConfig> {
    if broker.role() == BrokerRole::Slave {
        return None;
    }
    let template = broker.tables().topics().get(default_topic)?;
    let mut perm = template.perm;
    if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC && !broker.auto_create_topic_enable() {
        perm = TopicConfig::PERM_READ | TopicConfig::PERM_WRITE;
    }
    if perm & TopicConfig::PERM_INHERIT == 0 {
        tracing::warn!(topic, default_topic, "cannot create topic: the default topic may not be inherited");
        return None;
    }
    let queues = client_queue_nums.min(template.write_queue_nums).max(0);
    let mut config = TopicConfig::with_queues(topic, queues, queues, perm & !TopicConfig::PERM_INHERIT);
    config.topic_sys_flag = topic_sys_flag;
    config.topic_filter_type = template.topic_filter_type;
    create(broker, config)
}

/// Java `createTopicInSendMessageBackMethod`: a retry topic with `queues` queues and `perm`.
pub(crate) fn create_retry_topic(
    broker: &Broker,
    topic: &str,
    queues: i32,
    topic_sys_flag: i32,
) -> Option<TopicConfig> {
    create_retry_topics(broker, [(topic, queues, topic_sys_flag)]).pop().flatten()
}

/// `create_retry_topic` for many `(topic, queues, topic_sys_flag)`, in one write of the table.
pub(crate) fn create_retry_topics<'a>(
    broker: &Broker,
    topics: impl IntoIterator<Item = (&'a str, i32, i32)>,
) -> Vec<Option<TopicConfig>> {
    if broker.role() == BrokerRole::Slave {
        return topics.into_iter().map(|(topic, _, _)| broker.tables().topics().get(topic)).collect();
    }
    create_all(
        broker,
        topics.into_iter().map(|(topic, queues, topic_sys_flag)| {
            let mut config = TopicConfig::with_queues(
                topic,
                queues,
                queues,
                TopicConfig::PERM_READ | TopicConfig::PERM_WRITE,
            );
            config.topic_sys_flag = topic_sys_flag;
            config
        }),
    )
}

fn create(broker: &Broker, config: TopicConfig) -> Option<TopicConfig> {
    create_all(broker, [config]).pop().flatten()
}

fn create_all(broker: &Broker, configs: impl IntoIterator<Item = TopicConfig>) -> Vec<Option<TopicConfig>> {
    let configs: Vec<TopicConfig> = configs.into_iter().collect();
    let n = configs.len();
    match broker.tables().topics().create_all_if_absent(configs) {
        Ok(done) => done
            .into_iter()
            .map(|(config, created)| {
                if created {
                    tracing::info!(topic = %config.topic_name, queues = config.write_queue_nums,
                        perm = config.perm, "topic created on first use");
                }
                Some(config)
            })
            .collect(),
        Err(e) => {
            tracing::error!(topics = n, error = %e, "cannot create topics");
            vec![None; n]
        }
    }
}

/// Java `findSubscriptionGroupConfig`: the group's config; if absent and
/// `autoCreateSubscriptionGroup` is on, one with RocketMQ's defaults, persisted on a master and
/// kept in memory only on a slave (whose table is its master's).
pub(crate) fn find_subscription_group(broker: &Broker, group: &str) -> Option<SubscriptionGroupConfig> {
    find_subscription_groups(broker, &[group]).pop().flatten()
}

/// `find_subscription_group` for many groups, creating the missing ones in one write of the
/// table (a heartbeat names every group of its client).
pub(crate) fn find_subscription_groups(
    broker: &Broker,
    names: &[&str],
) -> Vec<Option<SubscriptionGroupConfig>> {
    let groups = broker.tables().subscription_groups();
    let mut out: Vec<Option<SubscriptionGroupConfig>> = names.iter().map(|g| groups.get(g)).collect();
    if !broker.auto_create_subscription_group() {
        return out;
    }
    let mut missing = Vec::new();
    for (i, &group) in names.iter().enumerate() {
        if out[i].is_some() || group.is_empty() {
            continue;
        }
        if !crate::message::codec::group_is_valid(group) {
            // Persisted and synced to slaves for good: never for a name no RocketMQ client
            // sends (a 9 MiB name pushed the config-sync answers past the slave's frame limit).
            // A client repeats it with every pull: logged once a minute, with a count.
            static INVALID: crate::logging::Throttle =
                crate::logging::Throttle::new(std::time::Duration::from_secs(60));
            let shown: String = group.chars().take(64).collect();
            if let Some(n) = INVALID.note("invalid group") {
                tracing::warn!(
                    group = ?shown,
                    group_len = group.len(),
                    repeated = n,
                    "not creating a subscription group whose name is not 1 to 255 characters from a-z A-Z 0-9 % | _ -"
                );
            }
            continue;
        }
        if broker.role() == BrokerRole::Slave {
            out[i] = Some(SubscriptionGroupConfig::new(group));
        } else {
            missing.push(i);
        }
    }
    if missing.is_empty() {
        return out;
    }
    match groups.create_all_if_absent(missing.iter().map(|&i| SubscriptionGroupConfig::new(names[i]))) {
        Ok(done) => {
            for (&i, (g, created)) in missing.iter().zip(done) {
                if created {
                    tracing::info!(group = names[i], "subscription group created on first use");
                }
                out[i] = Some(g);
            }
        }
        Err(e) => {
            tracing::error!(groups = missing.len(), error = %e, "cannot create subscription groups");
        }
    }
    out
}

/// A topic's attributes after the modification a 5.x UPDATE_AND_CREATE_TOPIC carries in its
/// `attributes` field, as RocketMQ's `AttributeParser.parseToMap` and
/// `AttributeUtil.alterCurrentAttributes` compute them: `+key=value` adds or sets `key`,
/// `-key` removes it, comma-separated (`+message.type=NORMAL,-k`). Keys are stored without the
/// sign. Refused like Java: a part without a sign, a `+key` without a value, an empty key or
/// one holding `+` or `-`, a key named twice, a removal when the topic is being created or
/// of a key it does not have. Unlike Java, keys and values are not checked against the
/// attributes RocketMQ knows (`message.type`, `queue.type`, ...): they are kept as sent.
pub(crate) fn alter_attributes(
    current: &BTreeMap<String, String>,
    modification: &str,
    creating: bool,
) -> Result<BTreeMap<String, String>, String> {
    let mut result = current.clone();
    // Java's `String.split` drops trailing empty parts: "+k=v," is "+k=v".
    let modification = modification.trim_end_matches(',');
    if modification.is_empty() {
        return Ok(result);
    }
    let mut seen = std::collections::BTreeSet::new();
    for part in modification.split(',') {
        let (signed, value) = match part.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (part, None),
        };
        let (add, key) = if let Some(k) = signed.strip_prefix('+') {
            (true, k)
        } else if let Some(k) = signed.strip_prefix('-') {
            (false, k)
        } else {
            return Err(format!("wrong format attribute: {part:?} (expected +key=value or -key)"));
        };
        if key.is_empty() || key.contains(['+', '-']) {
            return Err(format!("wrong format attribute key: {key:?}"));
        }
        if !seen.insert(key) {
            return Err(format!("alter duplication key. key: {key}"));
        }
        match (add, value) {
            (true, Some(v)) if !v.is_empty() => {
                result.insert(key.to_string(), v.to_string());
            }
            (true, _) => return Err(format!("add/alter attribute requires a value: {key}")),
            (false, Some(_)) => return Err(format!("delete attribute format is wrong: {part:?}")),
            (false, None) if creating => {
                return Err(format!("only add attribute is supported while creating topic. key: {key}"));
            }
            (false, None) => {
                if result.remove(key).is_none() {
                    return Err(format!("attempt to delete a nonexistent key: {key}"));
                }
            }
        }
    }
    Ok(result)
}

/// UPDATE_AND_CREATE_TOPIC (17), as `mqadmin updateTopic` sends it to a broker: creates or
/// replaces the topic's config (RocketMQ's `AdminBrokerProcessor.updateAndCreateTopic`).
/// Masters only: a slave's topics are its master's.
///
/// An update keeps what the request cannot carry: the stored 5.x attributes (altered by the
/// request's `attributes` modification, if any, see [`alter_attributes`]) and the fields a
/// newer RocketMQ wrote that this version does not model. Queue counts, perm, filter type,
/// sys flag and order are the request's. (The stored config is read and then replaced, not
/// under one lock: of two updates racing on one topic, the later put wins whole, as in Java.)
pub struct TopicProcessor {
    shared: Arc<Shared>,
}

impl TopicProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::UPDATE_AND_CREATE_TOPIC,
        request_code::DELETE_TOPIC_IN_BROKER,
        request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        request_code::DELETE_SUBSCRIPTIONGROUP,
    ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        TopicProcessor { shared }
    }

    fn update_and_create(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, RemotingCommand> {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let read = req.ext_i32("readQueueNums").map_err(h)?;
        let write = req.ext_i32("writeQueueNums").map_err(h)?;
        let perm = req.ext_i32("perm").map_err(h)?;
        let filter = match req.ext("topicFilterType") {
            None | Some("SINGLE_TAG") => TopicFilterType::SingleTag,
            Some("MULTI_TAG") => TopicFilterType::MultiTag,
            Some(other) => {
                return Err(reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!("unknown topicFilterType {other:?}"),
                ));
            }
        };
        let sys_flag = req.ext_opt_i32("topicSysFlag").map_err(h)?.unwrap_or(0);
        let order = java_bool(req, "order").unwrap_or(false);
        if topic == broker.config().broker_cluster_name {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("the topic[{topic}] is conflict with system reserved words."),
            ));
        }
        if let Some(reason) = topic_name_error(topic) {
            return Err(reply(req, response_code::SYSTEM_ERROR, reason));
        }
        if !(0..=MAX_QUEUE_NUMS).contains(&read) || !(0..=MAX_QUEUE_NUMS).contains(&write) {
            return Err(reply(
                req,
                response_code::INVALID_PARAMETER,
                format!("queue counts read={read} write={write} must be within 0..=1024"),
            ));
        }
        let existing = broker.tables().topics().get(topic);
        let mut config = TopicConfig::with_queues(topic, read, write, perm);
        config.topic_filter_type = filter;
        config.topic_sys_flag = sys_flag;
        config.order = order;
        if let Some(existing) = existing.as_ref() {
            config.attributes.clone_from(&existing.attributes);
            config.extra.clone_from(&existing.extra);
        }
        if let Some(modification) = req.ext("attributes") {
            config.attributes = alter_attributes(&config.attributes, modification, existing.is_none())
                .map_err(|reason| reply(req, response_code::SYSTEM_ERROR, reason))?;
        }
        match broker.put_topic(config) {
            Ok(()) => {
                tracing::info!(topic, read, write, perm, "topic updated by request");
                Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
            }
            Err(e) => Err(reply(req, response_code::SYSTEM_ERROR, e.to_string())),
        }
    }

    /// DELETE_TOPIC_IN_BROKER (215), as `mqadmin deleteTopic` sends it to each broker: the
    /// topic's config, ConsumeQueues and consumer offsets go (see [`Broker::delete_topic`]).
    /// A system topic is refused as in Java; an unknown topic is not an error.
    fn delete(&self, broker: &Broker, req: &RemotingCommand) -> Result<RemotingCommand, RemotingCommand> {
        let topic = req.ext_str("topic").map_err(|e| bad_header(req, e))?;
        if topic.trim().is_empty() {
            return Err(reply(req, response_code::SYSTEM_ERROR, "The specified topic is blank."));
        }
        match broker.delete_topic(topic) {
            Ok(()) => {
                tracing::info!(topic, "topic deleted by request");
                Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
            }
            Err(e) => Err(reply(req, response_code::SYSTEM_ERROR, e.to_string())),
        }
    }
}

impl TopicProcessor {
    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), as `mqadmin updateSubGroup` sends it: the
    /// body is the group's SubscriptionGroupConfig (fields it lacks take Java's defaults),
    /// which creates or replaces the group (4.9 `updateAndCreateSubscriptionGroup`). Refused,
    /// where 4.9 stores whatever it is sent: a body that does not decode, and a group name no
    /// RocketMQ client could use (it would be persisted and synced to slaves for good).
    fn update_group(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, RemotingCommand> {
        let config = SubscriptionGroupConfig::decode(&req.body, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body")
            .map_err(|e| reply(req, response_code::SYSTEM_ERROR, e.to_string()))?;
        let group = config.group_name.clone();
        if !crate::message::codec::group_is_valid(&group) {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "the group name {:?} is not 1 to 255 characters from a-z A-Z 0-9 % | _ -",
                    crate::clip(&group, 64)
                ),
            ));
        }
        match broker.put_subscription_group(config) {
            Ok(()) => {
                tracing::info!(group = group.as_str(), "subscription group updated by request");
                Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
            }
            Err(e) => Err(reply(req, response_code::SYSTEM_ERROR, e.to_string())),
        }
    }

    /// DELETE_SUBSCRIPTIONGROUP (207), as `mqadmin deleteSubGroup` sends it: the group's
    /// config goes, and with `removeOffset=true` (4.9; 5.x says `cleanOffset`) its consumer
    /// offsets too. An unknown group is not an error.
    fn delete_group(
        &self,
        broker: &Broker,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, RemotingCommand> {
        let group = req.ext_str("groupName").map_err(|e| bad_header(req, e))?;
        let offsets_too =
            java_bool(req, "removeOffset").unwrap_or(false) || java_bool(req, "cleanOffset").unwrap_or(false);
        let failed = |e: crate::error::Error| reply(req, response_code::SYSTEM_ERROR, e.to_string());
        broker.delete_subscription_group(group).map_err(failed)?;
        let removed = if offsets_too { broker.delete_consumer_offsets(group).map_err(failed)? } else { 0 };
        tracing::info!(group, offsets_removed = removed, "subscription group deleted by request");
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    }
}

impl RequestHandler for TopicProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let resp = match request.code {
            request_code::UPDATE_AND_CREATE_TOPIC => self.update_and_create(&broker, &request),
            request_code::DELETE_TOPIC_IN_BROKER => self.delete(&broker, &request),
            request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => self.update_group(&broker, &request),
            request_code::DELETE_SUBSCRIPTIONGROUP => self.delete_group(&broker, &request),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(resp.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for TopicProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicProcessor").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn attribute_modifications_as_rocketmq_applies_them() {
        let current = attrs(&[("+message.type", "NORMAL"), ("queue.type", "BatchCQ")]);
        assert_eq!(alter_attributes(&current, "", false).unwrap(), current);
        assert_eq!(alter_attributes(&current, "+k=v,", false).unwrap()["k"], "v");
        assert_eq!(
            alter_attributes(&current, "+message.type=FIFO,-queue.type,+a.b=x=y", false).unwrap(),
            attrs(&[("+message.type", "NORMAL"), ("a.b", "x=y"), ("message.type", "FIFO")])
        );
        assert_eq!(
            alter_attributes(&BTreeMap::new(), "+message.type=NORMAL", true).unwrap(),
            attrs(&[("message.type", "NORMAL")])
        );
        for (bad, creating, why) in [
            ("message.type=FIFO", false, "wrong format"),
            ("+message.type", false, "requires a value"),
            ("+message.type=", false, "requires a value"),
            ("+=x", false, "wrong format attribute key"),
            ("++k=x", false, "wrong format attribute key"),
            ("+k=x,-k", false, "duplication"),
            ("-queue.type=1", false, "delete attribute format"),
            ("-nope", false, "nonexistent"),
            ("-queue.type", true, "while creating"),
            (",+k=x", false, "wrong format"),
        ] {
            let err = alter_attributes(&current, bad, creating).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn topic_names_as_rocketmq_validates_them() {
        assert!(topic_name_error("TopicTest").is_none());
        assert!(topic_name_error("%RETRY%group_1-a|b").is_none());
        assert!(topic_name_error("").unwrap().contains("blank"));
        assert!(topic_name_error("a b").unwrap().contains("illegal characters"));
        assert!(topic_name_error("t\u{1}").unwrap().contains("illegal characters"));
        assert!(topic_name_error(&"x".repeat(128)).unwrap().contains("longer"));
        assert!(topic_name_error(&"x".repeat(127)).is_none());
    }
}
