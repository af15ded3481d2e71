//! The bodies of GET_TOPIC_STATS_INFO, GET_CONSUME_STATS and INVOKE_BROKER_TO_RESET_OFFSET
//! (Java `TopicStatsTable`, `ConsumeStats` and `ResetOffsetBody`): maps keyed by `MessageQueue`, which fastjson writes with each key an
//! object inline (`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{…}}}`), not
//! JSON. Encoded that way by the broker (`crate::processor`), decoded here for tools
//! (`rmqha progress`); a key written as a JSON string holding the object is read too.

use serde_json::{Map, Value};

/// One queue of a broker (Java `MessageQueue`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueKey {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: i32,
}

/// A queue's offsets in a TopicStatsTable (Java `TopicOffset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicOffset {
    pub min_offset: i64,
    pub max_offset: i64,
    /// Store time of the queue's last message, ms; 0 for an empty queue.
    pub last_update_timestamp: i64,
}

/// A group's progress on one queue in a ConsumeStats (Java `OffsetWrapper`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetWrapper {
    /// The queue's max offset (the next to be written).
    pub broker_offset: i64,
    /// The group's committed offset (0 for none).
    pub consumer_offset: i64,
    /// Store time of the last message the group consumed, ms; 0 if unknown.
    pub last_timestamp: i64,
}

impl OffsetWrapper {
    /// Messages not consumed yet.
    pub fn lag(&self) -> i64 {
        (self.broker_offset - self.consumer_offset).max(0)
    }
}

/// A GET_CONSUME_STATS answer, queues sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumeStats {
    pub consume_tps: f64,
    pub offsets: Vec<(QueueKey, OffsetWrapper)>,
}

/// A GET_TOPIC_STATS_INFO answer, queues sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStats {
    pub offsets: Vec<(QueueKey, TopicOffset)>,
}

impl ConsumeStats {
    /// Decodes a body; the error says what is wrong and where.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let top = parse(body)?;
        let consume_tps = top.get("consumeTps").and_then(Value::as_f64).unwrap_or(0.0);
        let offsets = table_of(&top, "offsetTable", |v| {
            Some(OffsetWrapper {
                broker_offset: v.get("brokerOffset")?.as_i64()?,
                consumer_offset: v.get("consumerOffset")?.as_i64()?,
                last_timestamp: v.get("lastTimestamp").and_then(Value::as_i64).unwrap_or(0),
            })
        })?;
        Ok(ConsumeStats { consume_tps, offsets })
    }
}

impl TopicStats {
    /// Decodes a body; the error says what is wrong and where.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let top = parse(body)?;
        let offsets = table_of(&top, "offsetTable", |v| {
            Some(TopicOffset {
                min_offset: v.get("minOffset")?.as_i64()?,
                max_offset: v.get("maxOffset")?.as_i64()?,
                last_update_timestamp: v.get("lastUpdateTimestamp").and_then(Value::as_i64).unwrap_or(0),
            })
        })?;
        Ok(TopicStats { offsets })
    }
}

/// An INVOKE_BROKER_TO_RESET_OFFSET answer (Java `ResetOffsetBody`): each queue's offset
/// after the reset, queues sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetOffsets {
    pub offsets: Vec<(QueueKey, i64)>,
}

impl ResetOffsets {
    /// Decodes a body; the error says what is wrong and where.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let top = parse(body)?;
        Ok(ResetOffsets { offsets: table_of(&top, "offsetTable", Value::as_i64)? })
    }
}

/// An INVOKE_BROKER_TO_GET_CONSUMER_STATUS answer, or a client's GET_CONSUMER_STATUS_FROM_CLIENT
/// answer (Java `GetConsumerStatusBody`): per client id, the offset each queue of the topic
/// has in that client's memory (`consumerTable`, the broker's answer); a client answers with
/// its own in `messageQueueTable`. Queues sorted, clients sorted by id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerStatus {
    pub message_queue_table: Vec<(QueueKey, i64)>,
    pub consumer_table: Vec<(String, Vec<(QueueKey, i64)>)>,
}

impl ConsumerStatus {
    /// Decodes a body; the error says what is wrong and where.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let top = parse(body)?;
        let message_queue_table = table_of(&top, "messageQueueTable", Value::as_i64)?;
        let mut consumer_table = Vec::new();
        if let Some(clients) = top.get("consumerTable") {
            let clients = clients.as_object().ok_or("consumerTable is not an object")?;
            for (id, queues) in clients {
                let queues =
                    queues.as_object().ok_or_else(|| format!("consumerTable of {id} is not an object"))?;
                consumer_table.push((id.clone(), queues_of(queues, "consumerTable", Value::as_i64)?));
            }
        }
        consumer_table.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(ConsumerStatus { message_queue_table, consumer_table })
    }

    /// The body as fastjson writes it (fields and queue keys inline, in its alphabetical order).
    pub fn encode(&self) -> Vec<u8> {
        let table = |rows: &[(QueueKey, i64)]| {
            let entries: Vec<String> = rows
                .iter()
                .map(|(k, v)| {
                    let (name, topic) = (Value::from(k.broker_name.as_str()), Value::from(k.topic.as_str()));
                    queue_entry(&name.to_string(), k.queue_id, &topic.to_string(), v)
                })
                .collect();
            format!("{{{}}}", entries.join(","))
        };
        let clients: Vec<String> = self
            .consumer_table
            .iter()
            .map(|(id, rows)| format!("{}:{}", Value::from(id.as_str()), table(rows)))
            .collect();
        format!(
            "{{\"consumerTable\":{{{}}},\"messageQueueTable\":{}}}",
            clients.join(","),
            table(&self.message_queue_table)
        )
        .into_bytes()
    }
}

/// One entry of a `Map<MessageQueue, _>` as fastjson writes it: the queue as an object inline
/// (fields in its alphabetical order; `name_json` and `topic_json` already JSON strings) as
/// the key, `:`, the value's JSON.
pub(crate) fn queue_entry(
    name_json: &str,
    queue_id: i32,
    topic_json: &str,
    value: impl std::fmt::Display,
) -> String {
    format!("{{\"brokerName\":{name_json},\"queueId\":{queue_id},\"topic\":{topic_json}}}:{value}")
}

/// The `Map<MessageQueue, T>` in field `name` of `top` (none: empty): each key read as a
/// MessageQueue, each value by `value`.
fn table_of<T>(
    top: &Map<String, Value>,
    name: &str,
    value: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<(QueueKey, T)>, String> {
    let Some(table) = top.get(name) else { return Ok(Vec::new()) };
    let table = table.as_object().ok_or_else(|| format!("{name} is not an object"))?;
    queues_of(table, name, value)
}

fn queues_of<T>(
    table: &Map<String, Value>,
    name: &str,
    value: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<(QueueKey, T)>, String> {
    let mut out = Vec::with_capacity(table.len());
    for (k, v) in table {
        let mq: Value =
            serde_json::from_str(k).map_err(|_| format!("{name} key {k:?} is not a MessageQueue"))?;
        let key = (|| {
            Some(QueueKey {
                topic: mq.get("topic")?.as_str()?.to_string(),
                broker_name: mq.get("brokerName")?.as_str()?.to_string(),
                queue_id: i32::try_from(mq.get("queueId")?.as_i64()?).ok()?,
            })
        })()
        .ok_or_else(|| format!("{name} key {k} lacks topic, brokerName or queueId"))?;
        let v = value(v).ok_or_else(|| format!("{name} value of {k} lacks a field: {v}"))?;
        out.push((key, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Parses fastjson's output into a JSON object: an object written as a key becomes the key
/// `String` of its compact JSON, a bare number key its digits.
fn parse(body: &[u8]) -> Result<Map<String, Value>, String> {
    let mut p = Parser { b: body, pos: 0, depth: 0 };
    p.ws();
    let Value::Object(top) = p.value()? else { return Err("the body is not a JSON object".into()) };
    p.ws();
    if p.pos != body.len() {
        return Err(format!("unexpected bytes after the object at byte {}", p.pos));
    }
    Ok(top)
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
    /// Objects open: bounded, since a body may come from a client (a consumer's answer to
    /// GET_CONSUMER_STATUS_FROM_CLIENT) and each level is a call on the stack.
    depth: usize,
}

/// Deepest nesting of objects read (the bodies read here nest three deep; serde_json, which
/// reads the other values, stops at 128 on its own).
const MAX_DEPTH: usize = 32;

impl Parser<'_> {
    fn ws(&mut self) {
        while self.b.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.pos) == Some(&c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.pos))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        if self.b.get(self.pos) == Some(&b'{') {
            return self.object().map(Value::Object);
        }
        // Anything else (strings, numbers, arrays, literals) is plain JSON.
        let mut it = serde_json::Deserializer::from_slice(&self.b[self.pos..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                self.pos += it.byte_offset();
                Ok(v)
            }
            Some(Err(e)) => Err(format!("at byte {}: {e}", self.pos)),
            None => Err(format!("a value expected at byte {}", self.pos)),
        }
    }

    fn object(&mut self) -> Result<Map<String, Value>, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("objects nested deeper than {MAX_DEPTH} at byte {}", self.pos));
        }
        self.depth += 1;
        let r = self.object_inner();
        self.depth -= 1;
        r
    }

    fn object_inner(&mut self) -> Result<Map<String, Value>, String> {
        self.expect(b'{')?;
        let mut map = Map::new();
        self.ws();
        if self.b.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(map);
        }
        loop {
            self.ws();
            let key = match self.b.get(self.pos) {
                Some(b'{') => Value::Object(self.object()?).to_string(),
                Some(b'"') => match self.value()? {
                    Value::String(s) => s,
                    _ => unreachable!("a quote starts a string"),
                },
                Some(c) if c.is_ascii_digit() || *c == b'-' => match self.value()? {
                    Value::Number(n) => n.to_string(),
                    other => return Err(format!("bad key {other} at byte {}", self.pos)),
                },
                _ => return Err(format!("an object key expected at byte {}", self.pos)),
            };
            self.expect(b':')?;
            let v = self.value()?;
            map.insert(key, v);
            self.ws();
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(map);
                }
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.pos)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mq(topic: &str, q: i32) -> QueueKey {
        QueueKey { topic: topic.into(), broker_name: "broker-a".into(), queue_id: q }
    }

    /// A body from a client may nest without end, in keys or in values: refused at a bound,
    /// never a stack overflow (which would abort the broker).
    #[test]
    fn deep_nesting_is_refused_not_recursed_into() {
        for body in ["{".repeat(200_000), format!("{{\"a\":{}", "{\"a\":".repeat(200_000))] {
            let e = ConsumerStatus::decode(body.as_bytes()).unwrap_err();
            assert!(e.contains("nested deeper than"), "{e}");
        }
        let ok = br#"{"consumerTable":{"c1":{{"brokerName":"b","queueId":0,"topic":"T"}:5}},"messageQueueTable":{}}"#;
        assert_eq!(ConsumerStatus::decode(ok).unwrap().consumer_table.len(), 1);
    }

    #[test]
    fn reads_fastjsons_object_keys() {
        // As Java's JSON.toJSONString writes a TopicStatsTable and a ConsumeStats.
        let topic = br#"{"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"MyTopic"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":500,"minOffset":0}},"topicPutTps":0.0}"#;
        let t = TopicStats::decode(topic).unwrap();
        assert_eq!(
            t.offsets,
            vec![(
                mq("MyTopic", 3),
                TopicOffset { min_offset: 0, max_offset: 500, last_update_timestamp: 1700000000000 }
            )]
        );
        let consume = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"MyTopic"}:{"brokerOffset":100,"consumerOffset":40,"lastTimestamp":1700000000000,"pullOffset":41},
            {"brokerName":"broker-a","queueId":1,"topic":"MyTopic"}:{"brokerOffset":7,"consumerOffset":9}}}"#;
        let c = ConsumeStats::decode(consume).unwrap();
        assert_eq!(c.consume_tps, 1.5);
        assert_eq!(c.offsets[0].0, mq("MyTopic", 1), "sorted by queue");
        assert_eq!(c.offsets[0].1.lag(), 0, "an offset past the broker's is no negative lag");
        assert_eq!(c.offsets[1].1.lag(), 60);
        assert_eq!(c.offsets[1].1.last_timestamp, 1700000000000);
        // A key written as a JSON string holding the object (strict JSON writers).
        let strict = br#"{"offsetTable":{"{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"T\"}":{"brokerOffset":2,"consumerOffset":1,"lastTimestamp":0}}}"#;
        assert_eq!(ConsumeStats::decode(strict).unwrap().offsets[0].1.lag(), 1);
        assert_eq!(ConsumeStats::decode(br#"{"consumeTps":0.0,"offsetTable":{}}"#).unwrap().offsets, vec![]);
    }

    #[test]
    fn refuses_what_it_cannot_read_saying_where() {
        for (bad, says) in [
            (&b"[1]"[..], "not a JSON object"),
            (b"{\"offsetTable\":{{\"topic\":\"T\"}:{}}}", "lacks topic"),
            (b"{\"offsetTable\":{\"x\":{}}}", "is not a MessageQueue"),
            (b"{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}:{\"brokerOffset\":1}}}", "lacks a field"),
            (b"{\"offsetTable\":{{\"brokerName\":\"b\"}", "expected ':'"),
            (b"{\"a\":1} x", "after the object"),
        ] {
            let e = ConsumeStats::decode(bad).unwrap_err();
            assert!(e.contains(says), "{e} should say {says}");
        }
    }
}
