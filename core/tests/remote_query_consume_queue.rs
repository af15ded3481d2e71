//! QUERY_CONSUME_QUEUE (321, `mqadmin queryCq`) over a real connection: the units of a
//! queue as the store holds them (CommitLog offset, size, tags code), cut at the end of the
//! ConsumeQueue file holding the first one as RocketMQ's `getIndexBuffer` cuts them, with a
//! consumer group's live subscription and which units it selects; and RocketMQ 4.9's errors
//! for a queue that does not exist and an index outside the queue.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::message::java_string_hash;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};
use rmqha_core::{Broker, Message, PutResult};
use serde_json::{Value, json};

use remote_common::*;

/// Units per ConsumeQueue file in these tests.
const UNITS_PER_FILE: i64 = 5;

fn master(dir: &std::path::Path) -> Arc<Broker> {
    let file = (UNITS_PER_FILE * 20).to_string();
    Broker::start_master(common::broker_config(
        dir,
        "ASYNC_MASTER",
        &[("mappedFileSizeConsumeQueue", file.as_str())],
    ))
    .unwrap()
}

fn query(topic: &str, queue_id: i32, index: i64, count: i32) -> RemotingCommand {
    RemotingCommand::request(request_code::QUERY_CONSUME_QUEUE)
        .with_ext("topic", topic)
        .with_ext("queueId", queue_id)
        .with_ext("index", index)
        .with_ext("count", count)
}

fn body(r: &RemotingCommand) -> Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.body)))
}

/// The tags of message `i` put to queue 0.
fn tags(i: usize) -> Option<&'static str> {
    [Some("TagA"), Some("TagB"), None][i % 3]
}

/// Puts seven messages to queue 0 of `Cq` (two ConsumeQueue files' worth, the second
/// partial) and waits for their units.
fn put_seven(b: &Broker) -> Vec<PutResult> {
    b.create_topic("Cq", 2).unwrap();
    let puts: Vec<PutResult> = (0..7)
        .map(|i| {
            let mut m = Message::new("Cq", format!("body {i}").repeat(i + 1).into_bytes()).with_queue(0);
            if let Some(t) = tags(i) {
                m = m.with_tags(t);
            }
            let r = b.put_message_sync(&m).unwrap();
            assert_eq!(r.status, rmqha_core::PutStatus::PutOk, "{r:?}");
            assert_eq!(r.queue_offset, i as i64);
            r
        })
        .collect();
    assert!(b.store().wait_dispatched(TIMEOUT));
    puts
}

/// The `queueData` rows the store's units `from..to` of `Cq`/0 make, `eval` as given.
fn rows(b: &Broker, from: i64, to: i64, eval: impl Fn(i64) -> bool) -> Value {
    let cq = b.store().consume_queues().find("Cq", 0).expect("the queue");
    Value::Array(
        (from..to)
            .map(|i| {
                let u = cq.get(i).expect("a unit");
                json!({"eval": eval(i), "physicOffset": u.phy_offset, "physicSize": u.size, "tagsCode": u.tags_code})
            })
            .collect(),
    )
}

#[test]
fn units_are_answered_as_the_store_holds_them_up_to_the_file_end() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let puts = put_seven(&b);
    let c = client(b.remoting_addrs()[0]);

    let r = call(&c, query("Cq", 0, 0, 3));
    assert_eq!((r.code, r.remark.as_deref()), (code::SUCCESS, None), "{r:?}");
    // fastjson's field order, no nulls (no subscription or filter data without a group).
    let text = String::from_utf8(r.body.clone()).unwrap();
    let first = &puts[0];
    let prefix = format!(
        "{{\"maxQueueIndex\":7,\"minQueueIndex\":0,\"queueData\":[{{\"eval\":false,\"physicOffset\":{},\"physicSize\":{},\"tagsCode\":{}}},",
        first.phy_offset,
        first.size,
        java_string_hash("TagA")
    );
    assert!(text.starts_with(&prefix), "{text}\nwanted it to start with {prefix}");
    let got = body(&r);
    assert_eq!(got["queueData"], rows(&b, 0, 3, |_| false));
    // Against what the puts wrote, not only the store's own reading: offsets, sizes, and the
    // Java hash code of the TAGS (0 without).
    for (i, (row, put)) in got["queueData"].as_array().unwrap().iter().zip(&puts).enumerate() {
        assert_eq!(row["physicOffset"], put.phy_offset, "unit {i}");
        assert_eq!(row["physicSize"], put.size, "unit {i}");
        assert_eq!(row["tagsCode"], tags(i).map_or(0, |t| java_string_hash(t) as i64), "unit {i}");
    }
    assert_eq!(got.as_object().unwrap().len(), 3, "{got}");

    // From the fourth unit: only to the end of the first file, whatever the count.
    let got = body(&call(&c, query("Cq", 0, 3, 100)));
    assert_eq!(got["queueData"], rows(&b, 3, UNITS_PER_FILE, |_| false));
    // From the second file: its two units.
    let got = body(&call(&c, query("Cq", 0, 5, i32::MAX)));
    assert_eq!(got["queueData"], rows(&b, 5, 7, |_| false));
    assert_eq!(got["queueData"][1]["physicOffset"], puts[6].phy_offset);
    // A count of 0 or less: none.
    for count in [0, -1, i32::MIN] {
        let r = call(&c, query("Cq", 0, 1, count));
        assert_eq!((r.code, r.remark.as_deref()), (code::SUCCESS, None), "count {count}: {r:?}");
        assert_eq!(body(&r)["queueData"], json!([]), "count {count}");
    }

    // An index outside the queue: SUCCESS with the bounds, no units, and 4.9's remark.
    for index in [7, 8, -1, i64::MAX, i64::MIN] {
        let r = call(&c, query("Cq", 0, index, 10));
        assert_eq!(r.code, code::SUCCESS, "index {index}: {r:?}");
        let want = format!("Index {index} of 0@Cq is not exist!");
        assert_eq!(r.remark.as_deref(), Some(want.as_str()));
        assert_eq!(body(&r), json!({"maxQueueIndex": 7, "minQueueIndex": 0}), "index {index}");
    }
    b.shutdown();
}

#[test]
fn queues_the_store_does_not_have_and_bad_headers_are_system_errors() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    put_seven(&b);
    let c = client(b.remoting_addrs()[0]);

    // Queue 1 of the topic never held a message; queue 0 of an unknown topic; a queue id
    // the topic does not have.
    for (topic, q) in [("Cq", 1), ("Nope", 0), ("Cq", 9), ("Cq", -1)] {
        let r = call(&c, query(topic, q, 0, 1));
        assert_eq!(r.code, code::SYSTEM_ERROR, "{topic}/{q}: {r:?}");
        assert_eq!(r.remark.unwrap(), format!("{q}@{topic} is not exist!"));
        assert!(r.body.is_empty());
    }
    // A name any client chose is echoed clipped.
    let long = "L".repeat(100_000);
    let r = call(&c, query(&long, 0, 0, 1));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().len() < 300);

    let mut no_topic = query("Cq", 0, 0, 1);
    no_topic.remove_ext("topic");
    let r = call(&c, no_topic);
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.unwrap().contains("\"topic\""));
    for field in ["queueId", "index", "count"] {
        let r = call(&c, query("Cq", 0, 0, 1).with_ext(field, "seven"));
        assert_eq!(r.code, code::SYSTEM_ERROR, "{field}: {r:?}");
        assert!(r.remark.unwrap().contains(field));
    }
    let r = call(&c, query("Cq", 0, 0, 1).with_ext("queueId", "99999999999"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    // As in Java, whose header marks no number required, a missing number is 0: queue 0
    // from index 0, and no units for count 0.
    let mut bare = RemotingCommand::request(request_code::QUERY_CONSUME_QUEUE).with_ext("topic", "Cq");
    let r = call(&c, bare.clone());
    assert_eq!((r.code, r.remark.as_deref()), (code::SUCCESS, None), "{r:?}");
    assert_eq!(body(&r)["queueData"], json!([]));
    bare.set_ext("count", 2);
    assert_eq!(body(&call(&c, bare))["queueData"], rows(&b, 0, 2, |_| false));
    b.shutdown();
}

/// Registers `group` consuming `Cq` with `expr` on `c` (a connection kept open).
fn subscribe(c: &RemotingClient, client_id: &str, group: &str, expr: &str) {
    let r = call(c, heartbeat(client_id, group, &[("Cq", expr, 42)]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
}

#[test]
fn a_consumer_group_shows_its_subscription_and_the_units_it_selects() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    put_seven(&b);
    let c = client(b.remoting_addrs()[0]);
    subscribe(&c, "client-a", "tagged", "TagA || TagC");
    let other = client(b.remoting_addrs()[0]);
    subscribe(&other, "client-b", "everything", "*");

    let r = call(&c, query("Cq", 0, 0, 5).with_ext("consumerGroup", "tagged"));
    assert_eq!((r.code, r.remark.as_deref()), (code::SUCCESS, None), "{r:?}");
    let got = body(&r);
    assert_eq!(got["filterData"], "null", "what 4.9 writes for a tag subscription");
    let (a, tag_c) = (java_string_hash("TagA"), java_string_hash("TagC"));
    assert_eq!(
        got["subscriptionData"],
        json!({
            "classFilterMode": false, "codeSet": [a, tag_c], "expressionType": "TAG",
            "subString": "TagA || TagC", "subVersion": 42, "tagsSet": ["TagA", "TagC"], "topic": "Cq"
        })
    );
    // Units 0 and 3 carry TagA.
    assert_eq!(got["queueData"], rows(&b, 0, 5, |i| i % 3 == 0));
    let text = String::from_utf8(r.body.clone()).unwrap();
    assert!(text.starts_with("{\"filterData\":\"null\",\"maxQueueIndex\":7,"), "{text}");
    assert!(text.ends_with("\"topic\":\"Cq\"}}"), "subscriptionData last: {text}");

    let got = body(&call(&c, query("Cq", 0, 5, 5).with_ext("consumerGroup", "everything")));
    assert_eq!(got["subscriptionData"]["subString"], "*");
    assert_eq!(got["subscriptionData"]["tagsSet"], json!([]));
    assert_eq!(got["queueData"], rows(&b, 5, 7, |_| true));

    // A group with no live consumer of the topic.
    let got = body(&call(&c, query("Cq", 0, 0, 2).with_ext("consumerGroup", "ghost")));
    assert_eq!(got["filterData"], "ghost@Cq is not online!");
    assert!(got.get("subscriptionData").is_none(), "{got}");
    assert_eq!(got["queueData"], rows(&b, 0, 2, |_| false));

    // Its only consumer unregistered, "everything" is no longer online.
    let r = call(
        &other,
        RemotingCommand::request(request_code::UNREGISTER_CLIENT)
            .with_ext("clientID", "client-b")
            .with_ext("consumerGroup", "everything"),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let got = body(&call(&c, query("Cq", 0, 0, 1).with_ext("consumerGroup", "everything")));
    assert_eq!(got["filterData"], "everything@Cq is not online!");
    assert_eq!(got["queueData"], rows(&b, 0, 1, |_| false));
    b.shutdown();
}
