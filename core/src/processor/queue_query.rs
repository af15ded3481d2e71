//! QUERY_CONSUME_QUEUE (321, `mqadmin queryCq`): the ConsumeQueue units of one queue, as
//! RocketMQ 4.9's `AdminBrokerProcessor.queryConsumeQueue` reads them.
//!
//! **Header** (`QueryConsumeQueueRequestHeader`): `topic`, `queueId`, `index` (the first
//! queue offset), `count`, and optionally `consumerGroup`. Java marks no field required, so
//! a missing number reads as 0 there and here; a missing topic makes 4.9 fail with a
//! NullPointerException (SYSTEM_ERROR), here SYSTEM_ERROR naming the field. An unparsable
//! number is SYSTEM_ERROR naming it.
//!
//! **Answer.**
//! - A queue the store does not have (it never held a message): SYSTEM_ERROR
//!   `"{queueId}@{topic} is not exist!"`.
//! - Otherwise SUCCESS with a `QueryConsumeQueueResponseBody` (fastjson's alphabetical field
//!   order, nulls left out): `maxQueueIndex` and `minQueueIndex` (the queue's offsets), and
//!   `queueData`, a `ConsumeQueueData` per unit from `index`: `physicOffset`, `physicSize`,
//!   `tagsCode` as the unit holds them, and `eval`. Like Java's `getIndexBuffer` the units
//!   stop at the end of the ConsumeQueue file that holds `index`, and at `count` (none for 0
//!   or less), and at most [`QueueQueryProcessor::MAX_UNITS`] (Java has no cap; 4.9's
//!   `count * 20` overflows an int for counts over ~107 million, answering none).
//! - `index` below the queue's minimum or at or past its maximum: SUCCESS, no `queueData`,
//!   remark `"Index {index} of {queueId}@{topic} is not exist!"`.
//! - With `consumerGroup`: `subscriptionData` is the group's live subscription of the topic
//!   (as GET_CONSUMER_CONNECTION_LIST shows it) and `filterData` is `"null"`, what 4.9 writes
//!   for a tag subscription (its `ConsumerFilterManager` keeps data only for SQL92), or for
//!   a SQL92 one its expression as pretty JSON (`consumerGroup`, `topic`, `expression`,
//!   `expressionType`, `clientVersion`; 4.9's bloom-filter and lifetime fields are not kept);
//!   a group with no live consumer of the topic gets no `subscriptionData` and `filterData`
//!   `"{group}@{topic} is not online!"`.
//!
//! **`eval`, `bitMap`, `extendDataJson`, `msg`.** 4.9 fills these only from a ConsumeQueue
//! extension unit (`enableConsumeQueueExt`, off by default, with SQL92 bloom-filter bitmaps);
//! rmqha keeps no extension, so `bitMap`, `extendDataJson` and `msg` are never written. `eval`
//! here says whether the group's tag subscription selects the unit by its tags code, as
//! `ExpressionMessageFilter.isMatchedByConsumeQueue` and a pull's scan decide (`*` selects
//! all; a hash collision passes here and is told apart by the client on the TAGS text);
//! true for a SQL92 subscription (its ConsumeQueue stage passes every unit, as 4.9's without
//! a bloom filter; the pull then evaluates each record), false without a consumer group, for
//! a group not online, and for an expression the heartbeat could not register. With
//! extensions off 4.9 leaves it false.
//!
//! **Where 4.9 differs.** 4.9 encodes the body before filling it (`response.setBody
//! (body.encode())` comes first), so a 4.9 broker's SUCCESS body is always
//! `{"maxQueueIndex":0,"minQueueIndex":0}`; rmqha answers the filled body, the one
//! `QueryConsumeQueueCommand` is written to print. The codes and remarks are 4.9's.
//!
//! **ACL.** Like GET_TOPIC_STATS_INFO and GET_CONSUME_STATS (and as in 4.9's
//! `PlainAccessResource.parse`, which names no resource for any of them), the request needs
//! an account that passes the gate and no per-topic permission: see `crate::acl`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::broker::Broker;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::consume_queue::CqUnit;

use super::clients::{ConsumerFilter, SubscriptionLookup};
use super::{Shared, bad_header, broker_gone, reply};
use crate::store::MessageFilter;

/// Longest name echoed in a remark or `filterData` (a name any client chose).
const ECHO_MAX: usize = 255;

/// QUERY_CONSUME_QUEUE.
pub struct QueueQueryProcessor {
    shared: Arc<Shared>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

impl QueueQueryProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::QUERY_CONSUME_QUEUE];

    /// Most units one answer holds (about 80 bytes of JSON each: ~2.6 MB). One ConsumeQueue
    /// file holds 300,000 by default, whose JSON would pass the 16 MiB frame limit.
    pub const MAX_UNITS: usize = 32_768;

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        QueueQueryProcessor { shared }
    }

    fn query(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let queue_id = req.ext_opt_i32("queueId").map_err(h)?.unwrap_or(0);
        let index = req.ext_opt_i64("index").map_err(h)?.unwrap_or(0);
        let count = req.ext_opt_i32("count").map_err(h)?.unwrap_or(0);
        let group = req.ext("consumerGroup");
        let shown = crate::clip(topic, ECHO_MAX);

        let Some(cq) = b.store().consume_queues().find(topic, queue_id) else {
            return Err(reply(req, response_code::SYSTEM_ERROR, format!("{queue_id}@{shown} is not exist!")));
        };
        let mut body = Map::new();
        body.insert("maxQueueIndex".into(), cq.max_offset_in_queue().into());
        body.insert("minQueueIndex".into(), cq.min_offset_in_queue().into());

        let mut filter = None;
        if let Some(group) = group {
            match self.shared.clients.subscription(group, topic) {
                SubscriptionLookup::Found { subscription, .. } => {
                    body.insert("subscriptionData".into(), subscription.java_json());
                    // Java's `JSON.toJSONString(filterData, true)`: null for tags and for an
                    // expression the heartbeat could not register.
                    let filter_data = match &subscription.filter {
                        ConsumerFilter::Sql(e) => serde_json::to_string_pretty(&json!({
                            "clientVersion": subscription.sub_version,
                            "consumerGroup": group,
                            "expression": e.text(),
                            "expressionType": subscription.expression_type,
                            "topic": topic,
                        }))
                        .unwrap_or_default(),
                        _ => "null".into(),
                    };
                    body.insert("filterData".into(), filter_data.into());
                    filter = Some(subscription.filter);
                }
                SubscriptionLookup::NoGroup | SubscriptionLookup::NoTopic => {
                    let online = format!("{}@{shown} is not online!", crate::clip(group, ECHO_MAX));
                    body.insert("filterData".into(), online.into());
                }
            }
        }

        let max = usize::try_from(count).unwrap_or(0).min(Self::MAX_UNITS);
        let remark = match cq.units_in_file_from(index, max) {
            Some(units) => {
                let rows = units.iter().map(|u| unit_data(u, filter.as_ref())).collect();
                body.insert("queueData".into(), Value::Array(rows));
                None
            }
            None => Some(format!("Index {index} of {queue_id}@{shown} is not exist!")),
        };
        let body = Value::Object(body).to_string();
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, remark.as_deref())
            .with_body(body.into_bytes()))
    }
}

/// One unit as Java's `ConsumeQueueData` (fields in fastjson's order; the extension's fields
/// are null and left out).
/// `eval` is the ConsumeQueue stage of the group's filter: its tags codes, and true for a
/// SQL92 one (RocketMQ's without a bloom filter).
fn unit_data(u: &CqUnit, filter: Option<&ConsumerFilter>) -> Value {
    json!({
        "eval": filter.is_some_and(|f| f.matches_unit(u.tags_code)),
        "physicOffset": u.phy_offset,
        "physicSize": u.size,
        "tagsCode": u.tags_code,
    })
}

impl RequestHandler for QueueQueryProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let answer = match request.code {
            request_code::QUERY_CONSUME_QUEUE => self.query(&b, &request),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(answer.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for QueueQueryProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueQueryProcessor").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processor::clients::{Subscription, TagFilter};

    #[test]
    fn units_and_subscriptions_as_fastjson_writes_them() {
        let u = CqUnit { phy_offset: 1234, size: 99, tags_code: -5 };
        assert_eq!(
            unit_data(&u, None).to_string(),
            r#"{"eval":false,"physicOffset":1234,"physicSize":99,"tagsCode":-5}"#
        );
        let tag_a = ConsumerFilter::Tag(TagFilter::parse(Some("TagA || TagB")));
        let code_a = crate::message::java_string_hash("TagA") as i64;
        assert!(unit_data(&CqUnit { tags_code: code_a, ..u }, Some(&tag_a))["eval"].as_bool().unwrap());
        assert!(!unit_data(&u, Some(&tag_a))["eval"].as_bool().unwrap());
        assert!(unit_data(&u, Some(&ConsumerFilter::Tag(TagFilter::all())))["eval"].as_bool().unwrap());
        let sql = ConsumerFilter::build(Some("SQL92"), Some("a > 1")).unwrap();
        assert!(unit_data(&u, Some(&sql))["eval"].as_bool().unwrap());

        let s = Subscription {
            topic: "T".into(),
            sub_string: "TagB || TagA".into(),
            sub_version: 7,
            expression_type: "TAG".into(),
            filter: ConsumerFilter::Tag(TagFilter::parse(Some("TagB || TagA"))),
        };
        assert_eq!(
            s.java_json().to_string(),
            format!(
                r#"{{"classFilterMode":false,"codeSet":[{},{}],"expressionType":"TAG","subString":"TagB || TagA","subVersion":7,"tagsSet":["TagA","TagB"],"topic":"T"}}"#,
                crate::message::java_string_hash("TagA"),
                crate::message::java_string_hash("TagB")
            )
        );
        let all = Subscription {
            sub_string: "*".into(),
            filter: ConsumerFilter::Tag(TagFilter::all()),
            ..s.clone()
        };
        assert_eq!(all.java_json()["tagsSet"], json!([]));
        // `FilterAPI.build` fills no sets for SQL92.
        let sql = Subscription {
            sub_string: "TagA = 'x'".into(),
            expression_type: "SQL92".into(),
            filter: ConsumerFilter::build(Some("SQL92"), Some("TagA = 'x'")).unwrap(),
            ..s
        };
        assert_eq!((&sql.java_json()["tagsSet"], &sql.java_json()["codeSet"]), (&json!([]), &json!([])));
    }
}
