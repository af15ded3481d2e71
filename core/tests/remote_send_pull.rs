//! Producing to and consuming from a broker over the remoting protocol, with a client written
//! from the spec: SEND_MESSAGE (V1 and V2 headers, JSON and ROCKETMQ header formats),
//! SEND_BATCH_MESSAGE, PULL_MESSAGE and its status codes, offsets, query and view, topic
//! creation (explicit and automatic), routes, heartbeats and consumer lists.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::metadata::TopicConfig;
use rmqha_core::remoting::{RemotingCommand, request_code};
use rmqha_core::{Broker, Message};
use serde_json::Value;

use remote_common::*;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap()
}

fn addr(b: &Broker) -> std::net::SocketAddr {
    b.remoting_addrs()[0]
}

fn create_topic(c: &rmqha_core::remoting::RemotingClient, topic: &str, queues: i32) {
    let resp = call(
        c,
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", topic)
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", queues)
            .with_ext("writeQueueNums", queues)
            .with_ext("perm", 6)
            .with_ext("topicFilterType", "SINGLE_TAG")
            .with_ext("topicSysFlag", 0)
            .with_ext("order", false),
    );
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
}

#[test]
fn v1_v2_and_batch_sends_are_pulled_back_with_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    create_topic(&c, "T", 4);
    assert_eq!(b.topic_config("T").unwrap().write_queue_nums, 4);

    let r1 = call(&c, send_v1(&Msg::new("T", b"one").tags("TagA").keys("k1 k2")));
    assert_eq!(r1.code, code::SUCCESS, "{r1:?}");
    assert_eq!((ext_i64(&r1, "queueId"), ext_i64(&r1, "queueOffset")), (0, 0));
    let r2 = call(&c, rocketmq_header(send_v2(&Msg::new("T", b"two").tags("TagB").keys("k3"))));
    assert_eq!(r2.code, code::SUCCESS, "{r2:?}");
    assert_eq!(
        r2.serialize_type,
        rmqha_core::remoting::SerializeType::RocketMq,
        "answered in the request's format"
    );
    assert_eq!((ext_i64(&r2, "queueId"), ext_i64(&r2, "queueOffset")), (0, 1));
    let batch: Vec<Msg> =
        (0..3).map(|i| Msg::new("T", format!("b{i}").as_bytes()).keys(&format!("bk{i}"))).collect();
    let rb = call(&c, send_batch("T", 1, &batch));
    assert_eq!(rb.code, code::SUCCESS, "{rb:?}");
    let ids: Vec<&str> = rb.ext("msgId").unwrap().split(',').collect();
    assert_eq!(ids.len(), 3, "one offset message id per batch message");
    assert_eq!(ext_i64(&rb, "queueOffset"), 0);

    // ConsumeQueues are built by the dispatcher, after the put returns (as in RocketMQ).
    assert!(b.store().wait_dispatched(TIMEOUT));
    let p = pull(&c, "T", 0, 0, 32);
    assert_eq!(p.code, code::SUCCESS, "{p:?}");
    assert_eq!(
        (ext_i64(&p, "nextBeginOffset"), ext_i64(&p, "minOffset"), ext_i64(&p, "maxOffset")),
        (2, 0, 2)
    );
    assert_eq!(ext_i64(&p, "suggestWhichBrokerId"), 0);
    let recs = decode_records(&p.body);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].body, b"one");
    assert_eq!(recs[0].topic, "T");
    assert_eq!(recs[0].prop("TAGS"), Some("TagA"));
    assert_eq!(recs[0].prop("KEYS"), Some("k1 k2"));
    assert_eq!(recs[0].prop("CLUSTER"), Some("DefaultCluster"));
    assert_eq!(recs[0].born_host.ip(), std::net::IpAddr::from([127, 0, 0, 1]), "born host is the producer");
    assert_eq!(recs[0].phy_offset, msg_id_offset(r1.ext("msgId").unwrap()));
    assert_eq!((recs[1].body.as_slice(), recs[1].queue_offset), (&b"two"[..], 1));

    let p = pull(&c, "T", 1, 0, 32);
    let recs = decode_records(&p.body);
    assert_eq!(
        recs.iter().map(|r| r.body.clone()).collect::<Vec<_>>(),
        vec![b"b0".to_vec(), b"b1".to_vec(), b"b2".to_vec()]
    );
    assert_eq!(recs[2].prop("UNIQ_KEY"), Some("UNIQ0002"));
    assert_eq!(recs[2].prop("KEYS"), Some("bk2"));
    for (r, id) in recs.iter().zip(&ids) {
        assert_eq!(r.phy_offset, msg_id_offset(id));
    }

    // Offsets of the queue.
    let q = |code, extra: &[(&str, i64)]| {
        let mut req = RemotingCommand::request(code).with_ext("topic", "T").with_ext("queueId", 0);
        for (k, v) in extra {
            req = req.with_ext(*k, *v);
        }
        ext_i64(&call(&c, req), "offset")
    };
    assert_eq!(q(request_code::GET_MAX_OFFSET, &[]), 2);
    assert_eq!(q(request_code::GET_MIN_OFFSET, &[]), 0);
    assert_eq!(q(request_code::SEARCH_OFFSET_BY_TIMESTAMP, &[("timestamp", 0)]), 0);
    assert_eq!(q(request_code::SEARCH_OFFSET_BY_TIMESTAMP, &[("timestamp", now_ms() + 3_600_000)]), 2);
    // RocketMQ 5's boundaryType (sent as the enum's name; read case-blind, anything but
    // "upper" is LOWER): UPPER answers the last message at or before the time.
    let by_time = |ts: i64, boundary: &str| {
        let req = RemotingCommand::request(request_code::SEARCH_OFFSET_BY_TIMESTAMP)
            .with_ext("topic", "T")
            .with_ext("queueId", 0)
            .with_ext("timestamp", ts)
            .with_ext("boundaryType", boundary);
        ext_i64(&call(&c, req), "offset")
    };
    let future = now_ms() + 3_600_000;
    assert_eq!(by_time(future, "UPPER"), 1);
    assert_eq!(by_time(future, "upper"), 1);
    assert_eq!(by_time(future, "LOWER"), 2);
    assert_eq!(by_time(future, "sideways"), 2);
    assert_eq!(by_time(0, "UPPER"), 0);

    // View by the offset in the message id, and query by key.
    let view = call(
        &c,
        RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID)
            .with_ext("offset", msg_id_offset(r1.ext("msgId").unwrap())),
    );
    assert_eq!(view.code, code::SUCCESS);
    assert_eq!(decode_records(&view.body)[0].body, b"one");
    let view = call(&c, RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", 3));
    assert_eq!(view.code, code::SYSTEM_ERROR, "an offset inside a record is not a message");
    assert!(b.store().wait_dispatched(TIMEOUT));
    let query = |key: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::QUERY_MESSAGE)
                .with_ext("topic", "T")
                .with_ext("key", key)
                .with_ext("maxNum", 32)
                .with_ext("beginTimestamp", 0)
                .with_ext("endTimestamp", i64::MAX),
        )
    };
    let found = query("k2");
    assert_eq!(found.code, code::SUCCESS, "{found:?}");
    assert_eq!(decode_records(&found.body)[0].body, b"one");
    assert_eq!(decode_records(&query("UNIQ0001").body)[0].body, b"b1");
    assert_eq!(query("nope").code, code::QUERY_NOT_FOUND);
    b.shutdown();
}

/// RocketMQ decides a batch by the header's flag, whatever the code: rocketmq-client-cpp sends
/// its batches as SEND_MESSAGE with `batch` set to `1` (C++'s rendering of `true`, which
/// Java's `Boolean.parseBoolean` reads as false, so a stock broker stores the whole batch as
/// one message of encoded bytes). Both are batches here.
#[test]
fn batches_are_known_by_the_header_flag_in_any_send_code() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    create_topic(&c, "T", 4);
    let batch: Vec<Msg> = (0..3).map(|i| Msg::new("T", format!("b{i}").as_bytes())).collect();
    let as_v2 = |flag: &str| {
        let mut r = send_batch("T", 0, &batch);
        r.code = request_code::SEND_MESSAGE_V2;
        r.with_ext("m", flag)
    };
    let as_v1 = |flag: &str| {
        let r = as_v2("true");
        let mut v1 = send_v1(&Msg::new("T", b"")).with_ext("batch", flag).with_body(r.body.clone());
        v1.code = request_code::SEND_MESSAGE;
        v1
    };
    for (req, what) in [(as_v2("true"), "SEND_MESSAGE_V2, m=true"), (as_v1("1"), "SEND_MESSAGE, batch=1")] {
        let r = call(&c, req);
        assert_eq!(r.code, code::SUCCESS, "{what}: {r:?}");
        assert_eq!(r.ext("msgId").unwrap().split(',').count(), 3, "{what}: three messages stored");
    }
    // Without the flag the body is one message, as in RocketMQ.
    let r = call(&c, as_v1("0"));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(r.ext("msgId").unwrap().split(',').count(), 1);
    assert!(b.store().wait_dispatched(TIMEOUT));
    let p = pull(&c, "T", 0, 0, 32);
    let bodies: Vec<Vec<u8>> = decode_records(&p.body).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 7, "3 + 3 + the unflagged batch as one message");
    for (i, body) in bodies[..6].iter().enumerate() {
        assert_eq!(body, format!("b{}", i % 3).as_bytes(), "message {i}");
    }
    assert_eq!(bodies[6], as_v1("0").body, "the unflagged batch's bytes as one body");
}

/// The peak memory of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// A batch of many empty messages with 32 KB of properties in its header: each message takes
/// the header's properties, and they were copied into every message (650 MB for these 20,000)
/// before the store refused the batch as too large. It is refused now from a count made
/// before anything is built; so is a batch body larger than maxMessageSize plus 64 KiB,
/// before it is decoded.
#[test]
fn an_oversized_batch_is_refused_before_its_messages_are_built() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    create_topic(&c, "T", 1);
    let mut req = send_batch("T", 0, &[]);
    req.set_ext("i", props(&[("K", &"x".repeat(32_000))]));
    req.body = (0..20_000).flat_map(|_| encode_batch_item(0, b"", "")).collect();
    let before = peak_rss();
    let r = call(&c, req);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("encodes to more than maxMessageSize"), "{r:?}");
    let grew = peak_rss().saturating_sub(before);
    assert!(grew < 100 << 20, "the refused batch took {} MB at its peak", grew >> 20);
    // A body past the limit is refused unread.
    let mut req = send_batch("T", 0, &[]);
    req.body = vec![0u8; 4 * 1024 * 1024 + 64 * 1024 + 1];
    let r = call(&c, req);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("batch body size"), "{r:?}");
    // A batch that fits is stored, the header's properties in each message.
    let mut req = send_batch("T", 0, &[Msg::new("T", b"a"), Msg::new("T", b"b")]);
    req.set_ext("i", props(&[("K", &"x".repeat(1000))]));
    assert_eq!(call(&c, req).code, code::SUCCESS);
    assert!(b.store().wait_dispatched(TIMEOUT));
    let got = b.get_messages("T", 0, 0, 8).messages();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|m| m.property("K").is_some_and(|v| v.len() == 1000)));
}

#[test]
fn pull_status_codes_follow_spec_10_and_tags_filter() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    create_topic(&c, "T", 2);
    for i in 0..6 {
        let m = Msg::new("T", format!("m{i}").as_bytes()).tags(if i % 2 == 0 { "even" } else { "odd" });
        assert_eq!(call(&c, send_v2(&m)).code, code::SUCCESS);
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    // Read exactly at the end: nothing new, nextBeginOffset stays.
    let p = pull(&c, "T", 0, 6, 32);
    assert_eq!((p.code, ext_i64(&p, "nextBeginOffset")), (code::PULL_NOT_FOUND, 6));
    // Past the end: moved; a queue that still starts at 0 restarts there (RocketMQ's rule).
    let p = pull(&c, "T", 0, 100, 32);
    assert_eq!((p.code, ext_i64(&p, "nextBeginOffset")), (code::PULL_OFFSET_MOVED, 0));
    // A queue never written: not found at offset 0, moved elsewhere.
    assert_eq!(pull(&c, "T", 1, 0, 32).code, code::PULL_NOT_FOUND);
    assert_eq!(pull(&c, "T", 1, 3, 32).code, code::PULL_OFFSET_MOVED);
    // A queue the topic does not have.
    let p = pull(&c, "T", 2, 0, 32);
    assert_eq!(p.code, code::SYSTEM_ERROR);
    assert!(p.remark.unwrap().contains("queueId[2] is illegal"));
    // No such topic.
    assert_eq!(pull(&c, "Nope", 0, 0, 32).code, code::TOPIC_NOT_EXIST);
    // maxMsgNums.
    let p = pull(&c, "T", 0, 1, 2);
    assert_eq!(decode_records(&p.body).len(), 2);
    assert_eq!(ext_i64(&p, "nextBeginOffset"), 3);
    // A tag filter keeps matching messages and still advances past the others.
    let p = call(&c, pull_req("g", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "odd"));
    let bodies: Vec<Vec<u8>> = decode_records(&p.body).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![b"m1".to_vec(), b"m3".to_vec(), b"m5".to_vec()]);
    assert_eq!(ext_i64(&p, "nextBeginOffset"), 6);
    // m0 does not match: skipped during the scan, it does not use up maxMsgNums.
    let p = call(&c, pull_req("g", "T", 0, 0, 1, FLAG_SUBSCRIPTION, 0, "odd"));
    assert_eq!((p.code, ext_i64(&p, "nextBeginOffset")), (code::SUCCESS, 2), "{p:?}");
    assert_eq!(decode_records(&p.body)[0].body, b"m1");
    let p = call(&c, pull_req("g", "T", 0, 5, 32, FLAG_SUBSCRIPTION, 0, "even"));
    assert_eq!((p.code, ext_i64(&p, "nextBeginOffset")), (code::PULL_RETRY_IMMEDIATELY, 6), "m5 is odd");
    let p = call(&c, pull_req("g", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "even || odd"));
    assert_eq!(decode_records(&p.body).len(), 6);
    // SQL92 filters are not supported.
    let p = call(
        &c,
        pull_req("g", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "a > 1").with_ext("expressionType", "SQL92"),
    );
    assert_eq!(p.code, code::SYSTEM_ERROR);
    b.shutdown();
}

#[test]
fn topics_are_created_from_the_template_and_routed() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("defaultTopicQueueNums", "8")]);
    let c = client(addr(&b));
    // The template a producer asks for when its topic has no route.
    let route = |topic: &str| {
        call(&c, RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic))
    };
    let r = route("NewTopic");
    assert_eq!(r.code, code::TOPIC_NOT_EXIST);
    let tbw = route("TBW102");
    assert_eq!(tbw.code, code::SUCCESS);
    let v: Value = serde_json::from_slice(&tbw.body).unwrap();
    assert_eq!(v["queueDatas"][0]["perm"], 7, "inherit + read + write");
    assert_eq!(v["queueDatas"][0]["writeQueueNums"], 8);

    // The first send creates the topic with min(4, 8) queues, persisted.
    let s = call(&c, send_v2(&Msg::new("NewTopic", b"x")));
    assert_eq!(s.code, code::SUCCESS, "{s:?}");
    let tc = b.topic_config("NewTopic").unwrap();
    assert_eq!((tc.read_queue_nums, tc.write_queue_nums, tc.perm), (4, 4, 6));
    let file = std::fs::read_to_string(dir.path().join("config/topics.json")).unwrap();
    assert!(file.contains("NewTopic"), "persisted: {file}");
    let r = route("NewTopic");
    assert_eq!(r.code, code::SUCCESS);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["queueDatas"][0]["brokerName"], "broker-a");
    assert_eq!(v["queueDatas"][0]["writeQueueNums"], 4);
    assert_eq!(v["brokerDatas"][0]["cluster"], "DefaultCluster");
    assert_eq!(v["brokerDatas"][0]["brokerAddrs"]["0"], addr(&b).to_string());
    // Sending to the template itself is refused, as RocketMQ does.
    assert_eq!(call(&c, send_v2(&Msg::new("TBW102", b"x"))).code, code::SYSTEM_ERROR);
    // A queue id beyond the topic's queues.
    assert_eq!(call(&c, send_v2(&Msg::new("NewTopic", b"x").queue(9))).code, code::SYSTEM_ERROR);
    // A negative queue id picks one.
    let s = call(&c, send_v2(&Msg::new("NewTopic", b"x").queue(-1)));
    assert!((0..4).contains(&ext_i64(&s, "queueId")));
    // An illegal topic name.
    assert_eq!(call(&c, send_v2(&Msg::new("bad topic", b"x"))).code, code::SYSTEM_ERROR);

    let ci = call(&c, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO));
    let v: Value = serde_json::from_slice(&ci.body).unwrap();
    assert_eq!(v["clusterAddrTable"]["DefaultCluster"][0], "broker-a");
    assert_eq!(v["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"], addr(&b).to_string());

    // A topic written through the embedded API without a config is readable and routable.
    b.put_message_sync(&Message::new("Embedded", b"e".to_vec()).with_queue(2)).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    let v: Value = serde_json::from_slice(&route("Embedded").body).unwrap();
    assert_eq!(v["queueDatas"][0]["readQueueNums"], 3);
    assert_eq!(decode_records(&pull(&c, "Embedded", 2, 0, 32).body)[0].body, b"e");
    // A write-protected topic.
    b.put_topic(TopicConfig::with_queues("RO", 1, 1, TopicConfig::PERM_READ)).unwrap();
    assert_eq!(call(&c, send_v2(&Msg::new("RO", b"x"))).code, code::NO_PERMISSION);
    b.shutdown();
}

#[test]
fn auto_creation_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let b =
        master(dir.path(), &[("autoCreateTopicEnable", "false"), ("autoCreateSubscriptionGroup", "false")]);
    let c = client(addr(&b));
    let s = call(&c, send_v2(&Msg::new("NewTopic", b"x")));
    assert_eq!(s.code, code::TOPIC_NOT_EXIST, "{s:?}");
    assert!(b.topic_config("NewTopic").is_none());
    assert_eq!(
        call(&c, RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "TBW102"))
            .code,
        code::TOPIC_NOT_EXIST
    );
    create_topic(&c, "T", 1);
    assert_eq!(call(&c, send_v2(&Msg::new("T", b"x"))).code, code::SUCCESS);
    assert!(b.store().wait_dispatched(TIMEOUT));
    let p = pull(&c, "T", 0, 0, 32);
    assert_eq!(p.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{p:?}");
    b.put_subscription_group(rmqha_core::metadata::SubscriptionGroupConfig::new("test_cg")).unwrap();
    assert_eq!(pull(&c, "T", 0, 0, 32).code, code::SUCCESS);
    b.shutdown();
}

#[test]
fn heartbeats_offsets_and_consumer_lists() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    create_topic(&c, "T", 1);
    for i in 0..4 {
        call(&c, send_v2(&Msg::new("T", format!("m{i}").as_bytes()).tags(if i < 2 { "a" } else { "b" })));
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    let list = |c: &rmqha_core::remoting::RemotingClient| {
        call(
            c,
            RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP)
                .with_ext("consumerGroup", "cg"),
        )
    };
    assert_eq!(list(&c).code, code::SYSTEM_ERROR, "no consumer yet");
    // A pull without a subscription needs the group's heartbeat.
    let no_sub = || pull_req("cg", "T", 0, 0, 32, 0, 0, "");
    assert_eq!(call(&c, no_sub()).code, code::SUBSCRIPTION_NOT_EXIST);

    // Heartbeats from two clients, on two connections.
    let c2 = client(addr(&b));
    assert_eq!(call(&c, heartbeat("10.0.0.1@1", "cg", &[("T", "b", 1)])).code, code::SUCCESS);
    assert_eq!(call(&c2, heartbeat("10.0.0.2@2", "cg", &[("T", "b", 1)])).code, code::SUCCESS);
    let l = list(&c);
    assert_eq!(l.code, code::SUCCESS);
    let v: Value = serde_json::from_slice(&l.body).unwrap();
    assert_eq!(v["consumerIdList"], serde_json::json!(["10.0.0.1@1", "10.0.0.2@2"]));
    assert!(b.topic_config("%RETRY%cg").is_some(), "the group's retry topic");
    assert!(b.subscription_group("cg").is_some(), "the group, created on first use");
    // A name no RocketMQ client sends (Validators.checkGroup) creates nothing to persist and
    // sync: it was kept however long or odd, and two 9 MiB names broke the slave's sync.
    let c3 = client(addr(&b));
    for bad in ["x".repeat(256), "a/b".to_string(), "two words".to_string()] {
        assert_eq!(call(&c3, heartbeat("10.0.0.3@3", &bad, &[("T", "*", 1)])).code, code::SUCCESS);
        assert!(b.subscription_group(&bad).is_none(), "{bad:.20}");
        assert!(b.topic_config(&format!("%RETRY%{bad}")).is_none(), "{bad:.20}");
        let p = call(&c3, pull_req(&bad, "T", 0, 0, 32, 0, 0, "*"));
        assert_eq!(p.code, 26, "SUBSCRIPTION_GROUP_NOT_EXIST for {bad:.20}: {p:?}");
        assert!(b.subscription_group(&bad).is_none());
    }
    let ok = "g".repeat(255);
    assert_eq!(call(&c3, heartbeat("10.0.0.3@3", &ok, &[("T", "*", 1)])).code, code::SUCCESS);
    assert!(b.subscription_group(&ok).is_some(), "255 characters are fine");
    c3.close();
    // The registered subscription filters.
    let p = call(&c, no_sub());
    let bodies: Vec<Vec<u8>> = decode_records(&p.body).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![b"m2".to_vec(), b"m3".to_vec()]);
    // A pull from a newer subscription than registered.
    assert_eq!(call(&c, no_sub().with_ext("subVersion", 5)).code, 25, "SUBSCRIPTION_NOT_LATEST");
    // A closed connection takes its client out of the group.
    c2.close();
    assert!(common::wait_until(TIMEOUT, || {
        let v: Value = serde_json::from_slice(&list(&c).body).unwrap_or_default();
        v["consumerIdList"] == serde_json::json!(["10.0.0.1@1"])
    }));
    // UNREGISTER_CLIENT, which counts only from the client's own connection: the ids are
    // anybody's to read (GET_CONSUMER_LIST_BY_GROUP), as RocketMQ unregisters by channel.
    let unregister = || {
        RemotingCommand::request(request_code::UNREGISTER_CLIENT)
            .with_ext("clientID", "10.0.0.1@1")
            .with_ext("consumerGroup", "cg")
    };
    let other = client(addr(&b));
    assert_eq!(call(&other, unregister()).code, code::SUCCESS);
    let v: Value = serde_json::from_slice(&list(&c).body).unwrap();
    assert_eq!(v["consumerIdList"], serde_json::json!(["10.0.0.1@1"]), "removed by another connection");
    let u = call(&c, unregister());
    assert_eq!(u.code, code::SUCCESS);
    assert_eq!(list(&c).code, code::SYSTEM_ERROR);

    // Consumer offsets: a new group on a queue starting at 0 reads from 0.
    let query = || {
        call(
            &c,
            RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET)
                .with_ext("consumerGroup", "cg")
                .with_ext("topic", "T")
                .with_ext("queueId", 0),
        )
    };
    let q = query();
    assert_eq!((q.code, ext_i64(&q, "offset")), (code::SUCCESS, 0));
    let u = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg")
        .with_ext("topic", "T")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 3);
    assert_eq!(call(&c, u).code, code::SUCCESS);
    assert_eq!(ext_i64(&query(), "offset"), 3);
    assert_eq!(b.consumer_offset("cg", "T", 0), 3);
    // A pull with the commit flag commits.
    let p = call(
        &c,
        pull_req("cg", "T", 0, 3, 32, FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET, 0, "*")
            .with_ext("commitOffset", 4),
    );
    assert_eq!(p.code, code::SUCCESS);
    assert_eq!(b.consumer_offset("cg", "T", 0), 4);
    // A oneway update (as the Java client's persist task sends it) is applied too.
    let u = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "cg2")
        .with_ext("topic", "T")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 2);
    c.invoke_oneway(u, TIMEOUT).unwrap();
    assert!(common::wait_until(TIMEOUT, || b.consumer_offset("cg2", "T", 0) == 2));
    // A commit nothing could read (a topic or queue that does not exist, a group no client
    // may have) is refused and kept nowhere: each kept one is persisted and mirrored.
    let commit = |group: &str, topic: &str, queue: i32| {
        call(
            &c,
            RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
                .with_ext("consumerGroup", group)
                .with_ext("topic", topic)
                .with_ext("queueId", queue)
                .with_ext("commitOffset", 9),
        )
    };
    assert_eq!(commit("cg", "NoSuchTopic", 0).code, code::TOPIC_NOT_EXIST);
    assert_eq!(commit("cg", "T", 1).code, code::SYSTEM_ERROR);
    assert_eq!(commit("cg", "T", -1).code, code::SYSTEM_ERROR);
    assert_eq!(commit("bad group!", "T", 0).code, code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!(commit(&"g".repeat(256), "T", 0).code, code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!((b.consumer_offset("cg", "NoSuchTopic", 0), b.consumer_offset("cg", "T", 1)), (-1, -1));
    assert_eq!((b.consumer_offset("bad group!", "T", 0), b.consumer_offset("cg", "T", 0)), (-1, 4));
    // A topic put to through the embedded API has no config but queues a pull serves: a
    // commit on it is kept, as a pull's would be.
    for i in 0..3 {
        b.put_message_sync(&common::message("Embedded", 2, i, 10)).unwrap();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert!(b.topic_config("Embedded").is_none());
    assert_eq!(pull(&c, "Embedded", 2, 0, 32).code, code::SUCCESS);
    let r = call(
        &c,
        RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", "cg")
            .with_ext("topic", "Embedded")
            .with_ext("queueId", 2)
            .with_ext("commitOffset", 3),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(b.consumer_offset("cg", "Embedded", 2), 3);
    b.shutdown();
    drop(b);
    // Offsets survive a restart.
    let b = master(dir.path(), &[]);
    assert_eq!(b.consumer_offset("cg", "T", 0), 4);
    b.shutdown();
}

#[test]
fn orderly_consumers_lock_and_unlock_queues() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(addr(&b));
    let body = |client: &str, queues: &[i32]| {
        let mqs: Vec<Value> = queues
            .iter()
            .map(|q| serde_json::json!({"brokerName": "broker-a", "queueId": q, "topic": "T"}))
            .collect();
        serde_json::json!({"clientId": client, "consumerGroup": "og", "mqSet": mqs, "onlyThisBroker": false})
            .to_string()
            .into_bytes()
    };
    let lock = |client: &str, queues: &[i32]| -> Vec<i64> {
        let r =
            call(&c, RemotingCommand::request(request_code::LOCK_BATCH_MQ).with_body(body(client, queues)));
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        let mut ids: Vec<i64> =
            v["lockOKMQSet"].as_array().unwrap().iter().map(|q| q["queueId"].as_i64().unwrap()).collect();
        ids.sort();
        ids
    };
    assert_eq!(lock("c1", &[0, 1]), vec![0, 1]);
    assert_eq!(lock("c2", &[1, 2]), vec![2], "queue 1 is c1's");
    let r = call(&c, RemotingCommand::request(request_code::UNLOCK_BATCH_MQ).with_body(body("c1", &[1])));
    assert_eq!(r.code, code::SUCCESS);
    assert_eq!(lock("c2", &[1]), vec![1]);
    let r = call(&c, RemotingCommand::request(request_code::LOCK_BATCH_MQ).with_body(b"nope".to_vec()));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    b.shutdown();
}
