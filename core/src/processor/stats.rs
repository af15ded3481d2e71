//! What operators' tools ask a broker (`mqadmin topicStatus`, `consumerProgress`,
//! `getBrokerConfig`, `updateBrokerConfig`, `topicList -c`, RocketMQ Dashboard):
//! GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208), GET_BROKER_CONFIG (26),
//! UPDATE_BROKER_CONFIG (25, `Broker::update_config`'s keys only), GET_EARLIEST_MSG_STORETIME (32),
//! QUERY_TOPIC_CONSUME_BY_WHO (300), QUERY_CONSUME_TIME_SPAN (303), QUERY_TOPICS_BY_CONSUMER
//! (343), QUERY_SUBSCRIPTION_BY_CONSUMER (345), VIEW_BROKER_STATS_DATA (315, `mqadmin statsAll`) and
//! GET_BROKER_CONSUME_STATS (317, `mqadmin brokerConsumeStats`), as RocketMQ 4.9's
//! `AdminBrokerProcessor` answers them.
//!
//! The two stats bodies are maps keyed by `MessageQueue`, which RocketMQ's fastjson writes
//! with each key an object inline (`{"offsetTable":{{"brokerName":"b","queueId":0,
//! "topic":"T"}:{…}}}`): not JSON, but what every RocketMQ admin client parses, so written
//! the same way here ([`queue_entries`]).

use std::fmt::Write as _;
use std::sync::Arc;

use crate::broker::Broker;
use crate::metadata::DataVersion;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::clients::SubscriptionLookup;
use super::{Shared, bad_header, broker_gone, reply};

/// The operators' requests of the module doc.
pub struct StatsProcessor {
    shared: Arc<Shared>,
    /// The config's version (GET_BROKER_CONFIG's `version` header field, RocketMQ's
    /// `Configuration.getDataVersionJson`): set at the broker's start, moved by each
    /// UPDATE_BROKER_CONFIG that changes something.
    config_version: std::sync::Mutex<DataVersion>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

impl StatsProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::GET_TOPIC_STATS_INFO,
        request_code::GET_CONSUME_STATS,
        request_code::GET_BROKER_CONFIG,
        request_code::UPDATE_BROKER_CONFIG,
        request_code::GET_EARLIEST_MSG_STORETIME,
        request_code::QUERY_TOPIC_CONSUME_BY_WHO,
        request_code::QUERY_TOPICS_BY_CONSUMER,
        request_code::QUERY_SUBSCRIPTION_BY_CONSUMER,
        request_code::QUERY_CONSUME_TIME_SPAN,
        request_code::VIEW_BROKER_STATS_DATA,
        request_code::GET_BROKER_CONSUME_STATS,
    ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        StatsProcessor { shared, config_version: std::sync::Mutex::new(DataVersion::new()) }
    }

    /// 4.9 `getTopicStatsInfo`: each write queue's min and max offset and the store time of
    /// its last message (0 for an empty queue); TOPIC_NOT_EXIST for a topic not configured.
    fn topic_stats(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let topic = req.ext_str("topic").map_err(|e| bad_header(req, e))?;
        let Some(tc) = b.topic_config(topic) else {
            return Err(reply(req, response_code::TOPIC_NOT_EXIST, format!("topic[{topic}] not exist")));
        };
        let store = b.store();
        let rows = (0..tc.write_queue_nums).map(|q| {
            let min = store.queue_min_offset(topic, q).max(0);
            let max = store.queue_max_offset(topic, q).max(0);
            let last = if max > 0 { store.queue_store_time(topic, q, max - 1).unwrap_or(-1) } else { 0 };
            (q, format!("{{\"lastUpdateTimestamp\":{last},\"maxOffset\":{max},\"minOffset\":{min}}}"))
        });
        let mut entries = Vec::new();
        queue_entries(&mut entries, &b.config().broker_name, topic, rows);
        let body = format!("{{\"offsetTable\":{{{}}}}}", entries.join(","));
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// 4.9 `getConsumeStats`: for the topic asked, or every topic the group has committed
    /// offsets on, each read queue's max offset, the group's committed offset (0 for none)
    /// and the store time of the last message consumed. A topic no longer configured is
    /// skipped, and so is one the group's live consumers do not subscribe to while they
    /// subscribe to others. `consumeTps`: the messages per second the group pulled from those
    /// topics over the last minute (as 4.9's GROUP_GET_NUMS per-minute TPS).
    fn consume_stats(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let group = req.ext_str("consumerGroup").map_err(h)?;
        let topics: Vec<String> = match req.ext("topic").map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) => vec![t.to_string()],
            None => b.tables().consumer_offsets().topics_of_group(group),
        };
        // One offsetTable for every topic.
        let mut entries = Vec::new();
        let mut pulled = 0u64;
        for topic in &topics {
            if let Some(t) = self.group_on_topic(b, group, topic, false) {
                entries.extend(t.entries);
                pulled += t.pulled;
            }
        }
        let body = consume_stats_json(pulled, &entries);
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// `group`'s progress on `topic`, queue by queue (`offsetTable` entries), if the topic is
    /// configured (and orderly, with `order_only`) and the group's live consumers, if any,
    /// subscribe to it.
    fn group_on_topic(&self, b: &Broker, group: &str, topic: &str, order_only: bool) -> Option<GroupOnTopic> {
        let Some(tc) = b.topic_config(topic) else {
            tracing::debug!(group, topic, "consume stats: the topic is not configured");
            return None;
        };
        if (order_only && !tc.order)
            || matches!(self.shared.clients.subscription(group, topic), SubscriptionLookup::NoTopic)
        {
            return None;
        }
        let store = b.store();
        let mut diff = 0i64;
        let rows = (0..tc.read_queue_nums).map(|q| {
            let broker_offset = store.queue_max_offset(topic, q).max(0);
            let consumer_offset = b.consumer_offset(group, topic, q).max(0);
            diff += broker_offset - consumer_offset;
            let last = if consumer_offset > 0 {
                store.queue_store_time(topic, q, consumer_offset - 1).filter(|&t| t > 0).unwrap_or(0)
            } else {
                0
            };
            (
                q,
                format!(
                    "{{\"brokerOffset\":{broker_offset},\"consumerOffset\":{consumer_offset},\"lastTimestamp\":{last}}}"
                ),
            )
        });
        let mut entries = Vec::new();
        queue_entries(&mut entries, &b.config().broker_name, topic, rows);
        Some(GroupOnTopic { entries, diff, pulled: self.shared.rates.last_minute(topic, group) })
    }

    /// 4.9 `fetchAllConsumeStatsInBroker`: for every subscription group, one ConsumeStats
    /// per topic it committed offsets on (as GET_CONSUME_STATS, with the `consumeTps` of that
    /// topic), only orderly topics with the header's `isOrder=true`, and the broker's total
    /// lag (`totalDiff`); `ConsumeStatsList`'s body.
    fn broker_consume_stats(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        // Required, as 4.9's `@CFNotNull`.
        let order_only = req.ext_bool("isOrder").map_err(|e| bad_header(req, e))?;
        let mut groups = Vec::new();
        let mut total_diff = 0i64;
        for group in b.tables().subscription_groups().all().into_keys() {
            let mut stats = Vec::new();
            for topic in b.tables().consumer_offsets().topics_of_group(&group) {
                let Some(t) = self.group_on_topic(b, &group, &topic, order_only) else { continue };
                total_diff += t.diff;
                stats.push(consume_stats_json(t.pulled, &t.entries));
            }
            groups.push(format!("{{{}:[{}]}}", json_string(&group), stats.join(",")));
        }
        let body = format!(
            "{{\"brokerAddr\":{},\"consumeStatsList\":[{}],\"totalDiff\":{total_diff}}}",
            json_string(&super::broker_addr(b)),
            groups.join(",")
        );
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// 4.9 `getBrokerConfig`: every key as `key=value` lines, secrets shown as
    /// [`REDACTED`](crate::config::REDACTED); the config's version in the `version` header field.
    fn broker_config(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let mut body = String::new();
        for (k, v) in b.config().to_map_redacted() {
            // What changes at runtime, as it is now.
            let v = b.runtime_config_value(&k).unwrap_or(v);
            let _ = writeln!(body, "{k}={v}");
        }
        let version = serde_json::to_string(&*self.config_version.lock().unwrap_or_else(|e| e.into_inner()))
            .map_err(|e| reply(req, response_code::SYSTEM_ERROR, e.to_string()))?;
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_ext("version", version)
            .with_body(body.into_bytes()))
    }
}

impl StatsProcessor {
    /// 4.9 `getEarliestMsgStoretime`: the store time of the first message a queue still holds,
    /// in the `timestamp` header field; -1 for a queue that holds none.
    fn earliest_store_time(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let queue_id = req.ext_i32("queueId").map_err(h)?;
        let store = b.store();
        let min = store.queue_min_offset(topic, queue_id);
        let ts = if min < store.queue_max_offset(topic, queue_id) {
            store.queue_store_time(topic, queue_id, min).unwrap_or(-1)
        } else {
            -1
        };
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_ext("timestamp", ts))
    }

    /// 4.9 `queryTopicConsumeByWho`: the groups consuming `topic`, those with a live member
    /// subscribing to it and those with committed offsets on it, as `{"groupList":[...]}`
    /// (sorted here; 4.9 writes a HashSet's order).
    fn topic_consumed_by(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let topic = req.ext_str("topic").map_err(|e| bad_header(req, e))?;
        let mut groups: std::collections::BTreeSet<String> =
            self.shared.clients.groups_subscribing(topic).into_iter().collect();
        groups.extend(b.tables().consumer_offsets().groups_of_topic(topic));
        let body = serde_json::json!({ "groupList": groups }).to_string();
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// 4.9 `queryTopicsByConsumer` (`MQAdminExt.queryTopicsByConsumer`, `mqadmin
    /// consumerProgress` without a topic): the topics `group` has committed offsets on, as
    /// `TopicList` (`{"brokerAddr":..,"topicList":[..]}`).
    fn topics_by_consumer(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let group = req.ext_str("group").map_err(|e| bad_header(req, e))?;
        let topics = b.tables().consumer_offsets().topics_of_group(group);
        let body =
            serde_json::json!({ "brokerAddr": super::broker_addr(b), "topicList": topics }).to_string();
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// 4.9 `querySubscriptionByConsumer` (`MQAdminExt.querySubscription`): the group's live
    /// subscription of the topic as `QuerySubscriptionResponseBody` (`group`,
    /// `subscriptionData` as GET_CONSUMER_CONNECTION_LIST shows it, `topic`); without a live
    /// consumer of the group subscribing to it, no `subscriptionData` (4.9's null).
    fn subscription_by_consumer(&self, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let (group, topic) = (req.ext_str("group").map_err(h)?, req.ext_str("topic").map_err(h)?);
        let mut body = serde_json::json!({ "group": group, "topic": topic });
        if let SubscriptionLookup::Found { subscription, .. } = self.shared.clients.subscription(group, topic)
        {
            body["subscriptionData"] = subscription.java_json();
        }
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(body.to_string().into_bytes()))
    }

    /// 4.9 `queryConsumeTimeSpan` (`MQAdminExt.queryConsumeTimeSpan`): for each write queue of
    /// the topic, the store times of its first and last messages, of the last message the
    /// group consumed (its first message's while it has consumed none), and `delayTime`, how
    /// long ago the first message it has not consumed was stored (0 when it is at the end).
    /// A time that cannot be read is -1, as 4.9's; where the group has no offset 4.9 reads
    /// the store time at offset -1 and answers a delay of "now + 1 ms", here it is measured
    /// from the queue's first message. TOPIC_NOT_EXIST for a topic not configured.
    fn consume_time_span(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let (topic, group) = (req.ext_str("topic").map_err(h)?, req.ext_str("group").map_err(h)?);
        let Some(tc) = b.topic_config(topic) else {
            return Err(reply(req, response_code::TOPIC_NOT_EXIST, format!("topic[{topic}] not exist")));
        };
        let store = b.store();
        let offsets = b.tables().consumer_offsets();
        let now = crate::store::clock::now_ms();
        let spans: Vec<serde_json::Value> = (0..tc.write_queue_nums)
            .map(|q| {
                let time = |offset: i64| store.queue_store_time(topic, q, offset).unwrap_or(-1);
                let (min, max) =
                    (store.queue_min_offset(topic, q).max(0), store.queue_max_offset(topic, q).max(0));
                let min_time = if min < max { time(min) } else { -1 };
                let max_time = if max > 0 { time(max - 1) } else { -1 };
                let consumed = offsets.query(group, topic, q).unwrap_or(-1);
                let consume_time = if consumed > 0 { time(consumed - 1) } else { min_time };
                let next = consumed.max(min);
                let delay =
                    if next < max { Some(time(next)).filter(|&t| t >= 0).map_or(0, |t| now - t) } else { 0 };
                serde_json::json!({
                    "consumeTimeStamp": consume_time,
                    "delayTime": delay,
                    "maxTimeStamp": max_time,
                    "messageQueue": { "brokerName": b.config().broker_name, "queueId": q, "topic": topic },
                    "minTimeStamp": min_time,
                })
            })
            .collect();
        let body = serde_json::json!({ "consumeTimeSpanSet": spans }).to_string();
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    }

    /// 4.9 `updateBrokerConfig` (`mqadmin updateBrokerConfig -k KEY -v VALUE`): the body a
    /// properties text of keys to change, applied by [`Broker::update_config`] (the keys of
    /// `RUNTIME_CONFIG_KEYS` at once, written into the broker's properties file; any other
    /// refused, naming it, as it takes effect only at a start, where 4.9 stores whatever it is
    /// sent; all or nothing). A file that cannot be written is SYSTEM_ERROR saying that the
    /// values hold until the broker restarts (they are applied first: a read-only file, as a
    /// mounted Kubernetes ConfigMap is, must not stop an operator draining a broker).
    fn update_broker_config(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let refuse = |why: String| reply(req, response_code::SYSTEM_ERROR, why);
        let text = std::str::from_utf8(&req.body)
            .map_err(|_| refuse("UPDATE_BROKER_CONFIG body is not text (key=value lines)".into()))?;
        let entries = crate::config::parse_properties(text)
            .map_err(|e| refuse(format!("UPDATE_BROKER_CONFIG body: {e}")))?;
        if entries.is_empty() {
            return Err(refuse("UPDATE_BROKER_CONFIG names no key (a body of key=value lines)".into()));
        }
        let pairs: Vec<(&str, &str)> = entries.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect();
        let changed = b.update_config(&pairs).map_err(|e| refuse(e.to_string()))?;
        if !changed.is_empty() {
            self.config_version.lock().unwrap_or_else(|e| e.into_inner()).next_version();
        }
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    }
}

/// A `ConsumeStats` body: `pulled` messages over the last minute as `consumeTps`, and the
/// `offsetTable` entries.
fn consume_stats_json(pulled: u64, entries: &[String]) -> String {
    let tps = pulled as f64 / super::rates::WINDOW as f64;
    // `{:?}` writes a double as Java does at these magnitudes (0.0, 2.5).
    format!("{{\"consumeTps\":{tps:?},\"offsetTable\":{{{}}}}}", entries.join(","))
}

/// One group's progress on one topic (see `StatsProcessor::group_on_topic`).
struct GroupOnTopic {
    /// `offsetTable` entries, one per read queue.
    entries: Vec<String>,
    /// The messages in those queues past the group's offsets.
    diff: i64,
    /// Messages the group pulled from the topic over the last minute.
    pulled: u64,
}

/// 4.9 `ViewBrokerStatsData`: the item `statsName` of `statsKey` over the last minute, hour
/// and day (`crate::broker_stats`); SYSTEM_ERROR `The stats <name> <key> not exist` for an
/// item not kept (a name not served, a topic never put to, a group that never pulled).
fn view_stats(b: &Broker, req: &RemotingCommand) -> Answer {
    let name = req.ext_str("statsName").map_err(|e| bad_header(req, e))?;
    let key = req.ext_str("statsKey").map_err(|e| bad_header(req, e))?;
    let Some(item) = b.stats().item(name, key) else {
        let (name, key) = (crate::clip(name, 128), crate::clip(key, 256));
        return Err(reply(req, response_code::SYSTEM_ERROR, format!("The stats <{name}> <{key}> not exist")));
    };
    Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(item.to_json().into_bytes()))
}

/// Entries of a `Map<MessageQueue, _>` as fastjson writes them (joined with `,` inside
/// `{}`): per queue, the queue as an object (fields in fastjson's alphabetical order) as the
/// key, `:`, the value's JSON.
pub(super) fn queue_entries(
    out: &mut Vec<String>,
    broker_name: &str,
    topic: &str,
    rows: impl Iterator<Item = (i32, String)>,
) {
    let (name, topic) = (json_string(broker_name), json_string(topic));
    out.extend(rows.map(|(q, value)| crate::broker_admin::queue_stats::queue_entry(&name, q, &topic, value)));
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

impl RequestHandler for StatsProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let answer = match request.code {
            request_code::GET_TOPIC_STATS_INFO => self.topic_stats(&b, &request),
            request_code::GET_CONSUME_STATS => self.consume_stats(&b, &request),
            request_code::GET_BROKER_CONFIG => self.broker_config(&b, &request),
            request_code::UPDATE_BROKER_CONFIG => self.update_broker_config(&b, &request),
            request_code::GET_EARLIEST_MSG_STORETIME => self.earliest_store_time(&b, &request),
            request_code::QUERY_TOPIC_CONSUME_BY_WHO => self.topic_consumed_by(&b, &request),
            request_code::QUERY_TOPICS_BY_CONSUMER => self.topics_by_consumer(&b, &request),
            request_code::QUERY_SUBSCRIPTION_BY_CONSUMER => self.subscription_by_consumer(&request),
            request_code::QUERY_CONSUME_TIME_SPAN => self.consume_time_span(&b, &request),
            request_code::VIEW_BROKER_STATS_DATA => view_stats(&b, &request),
            request_code::GET_BROKER_CONSUME_STATS => self.broker_consume_stats(&b, &request),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(answer.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for StatsProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsProcessor").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_keys_inline_as_fastjson_writes_them() {
        // The shape of a Java `JSON.toJSONString(topicStatsTable)` (fields sorted, object keys).
        let mut t = Vec::new();
        queue_entries(&mut t, "broker-a", "MyTopic", [(3, "{\"maxOffset\":500}".to_string())].into_iter());
        assert_eq!(t, [r#"{"brokerName":"broker-a","queueId":3,"topic":"MyTopic"}:{"maxOffset":500}"#]);
        queue_entries(&mut t, "b", "T", std::iter::empty());
        assert_eq!(t.len(), 1);
        assert_eq!(json_string("a\"b"), r#""a\"b""#);
    }
}
