//! The client tables a broker keeps from requests, over a long uptime: what LOCK_BATCH_MQ and
//! HEART_BEAT may add, and what they take away. Each holds only what a RocketMQ client could
//! use and stays bounded whatever a peer sends: a lock is only for a queue this broker has,
//! a group holds at most 4096, and a heartbeat's subscriptions replace the group's instead of
//! adding to them. (Lapsed locks leaving the table are in `processor::lock`'s unit tests,
//! which need not wait 60 s.)
//!
//! The groups a heartbeat creates (`autoCreateSubscriptionGroup`) and their `%RETRY%` topics
//! are written once per heartbeat, not once per group.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};
use serde_json::{Value, json};

use remote_common::*;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap()
}

/// LOCK_BATCH_MQ for `queues` (topic, brokerName, queueId): the answer's code and the locked
/// queues, sorted.
fn lock(
    c: &RemotingClient,
    group: &str,
    client: &str,
    queues: &[(&str, &str, i64)],
) -> (i32, Vec<(String, i64)>) {
    let mqs: Vec<Value> =
        queues.iter().map(|(t, b, q)| json!({"brokerName": b, "queueId": q, "topic": t})).collect();
    let body = json!({"clientId": client, "consumerGroup": group, "mqSet": mqs, "onlyThisBroker": false});
    let r = call(
        c,
        RemotingCommand::request(request_code::LOCK_BATCH_MQ).with_body(body.to_string().into_bytes()),
    );
    if r.code != code::SUCCESS {
        return (r.code, vec![]);
    }
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let mut ok: Vec<(String, i64)> = v["lockOKMQSet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            assert_eq!(q["brokerName"], "broker-a");
            (q["topic"].as_str().unwrap().to_owned(), q["queueId"].as_i64().unwrap())
        })
        .collect();
    ok.sort();
    (r.code, ok)
}

fn held(topic: &str, ids: impl IntoIterator<Item = i64>) -> Vec<(String, i64)> {
    ids.into_iter().map(|q| (topic.to_owned(), q)).collect()
}

#[test]
fn lock_batch_mq_locks_only_queues_this_broker_has() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("autoCreateTopicEnable", "false")]);
    b.create_topic("T", 4).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let mut asked: Vec<(&str, &str, i64)> = (-1..8).map(|q| ("T", "broker-a", q)).collect();
    asked.extend([("T", "broker-b", 1), ("NoSuchTopic", "broker-a", 0), ("bad topic", "broker-a", 0)]);
    assert_eq!(lock(&c, "og", "c1", &asked), (code::SUCCESS, held("T", 0..4)));
    assert_eq!(lock(&c, "og", "c2", &asked), (code::SUCCESS, vec![]), "all four are c1's");
    // Group names no RocketMQ client sends (Validators.checkGroup).
    for bad in ["bad group!".to_owned(), "g".repeat(256), "a/b".to_owned()] {
        let (code, ok) = lock(&c, &bad, "c1", &asked);
        assert_eq!(code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{bad:.20}");
        assert!(ok.is_empty());
    }
    assert_eq!(lock(&c, &"g".repeat(255), "c1", &asked), (code::SUCCESS, held("T", 0..4)));
    // A topic dropped from the broker: its queues are not locked any more.
    b.delete_topic("T").unwrap();
    assert_eq!(lock(&c, "og", "c1", &asked), (code::SUCCESS, vec![]));
    b.shutdown();

    // With autoCreateTopicEnable, a topic the first send would create from TBW102 counts as
    // having TBW102's queues (defaultTopicQueueNums).
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("defaultTopicQueueNums", "4")]);
    let c = client(b.remoting_addrs()[0]);
    let asked: Vec<(&str, &str, i64)> =
        (0..6).map(|q| ("Later", "broker-a", q)).chain([("bad topic", "broker-a", 0)]).collect();
    assert_eq!(lock(&c, "og", "c1", &asked), (code::SUCCESS, held("Later", 0..4)));
    b.shutdown();
}

/// One request naming five topics of 1024 queues each locks 4096 of them; the group takes
/// no more until it holds fewer, and other groups are not held back.
#[test]
fn a_group_holds_at_most_4096_locks() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let topics = ["T0", "T1", "T2", "T3", "T4"];
    for t in topics {
        b.create_topic(t, 1024).unwrap();
    }
    let c = client(b.remoting_addrs()[0]);
    let all: Vec<(&str, &str, i64)> =
        topics.iter().flat_map(|&t| (0..1024).map(move |q| (t, "broker-a", q))).collect();
    let (code, ok) = lock(&c, "og", "c1", &all);
    assert_eq!((code, ok.len()), (code::SUCCESS, 4096));
    let free: Vec<(&str, &str, i64)> =
        all.iter().filter(|(t, _, q)| !ok.contains(&(t.to_string(), *q))).copied().collect();
    assert_eq!(free.len(), 1024);
    let (code, more) = lock(&c, "og", "c2", &free);
    assert_eq!((code, more.len()), (code::SUCCESS, 0), "the group is full");
    assert!(lock(&c, "og", "c1", &all).1 == ok, "renewals go on");
    assert_eq!(lock(&c, "other", "c2", &free).1.len(), 1024);
    // Unlocking makes room.
    let some: Vec<Value> =
        ok[..10].iter().map(|(t, q)| json!({"brokerName": "broker-a", "queueId": q, "topic": t})).collect();
    let body = json!({"clientId": "c1", "consumerGroup": "og", "mqSet": some});
    let r = call(
        &c,
        RemotingCommand::request(request_code::UNLOCK_BATCH_MQ).with_body(body.to_string().into_bytes()),
    );
    assert_eq!(r.code, code::SUCCESS);
    assert_eq!(lock(&c, "og", "c2", &free).1.len(), 10);
    b.shutdown();
}

/// A pull without a subscription in its header, which uses the group's from its heartbeats:
/// the code and the bodies pulled.
fn pull_by_heartbeat(c: &RemotingClient, group: &str, topic: &str) -> (i32, Vec<String>) {
    let p = call(c, pull_req(group, topic, 0, 0, 32, 0, 0, ""));
    let bodies = decode_records(&p.body).into_iter().map(|r| String::from_utf8(r.body).unwrap()).collect();
    (p.code, bodies)
}

/// As RocketMQ's `ConsumerGroupInfo.updateSubscription`: a topic a group's heartbeat no
/// longer names is dropped from its subscriptions (its pulls without a subscription are
/// answered SUBSCRIPTION_NOT_EXIST), and per topic the newer subVersion stays.
#[test]
fn a_heartbeat_replaces_the_groups_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(b.remoting_addrs()[0]);
    for t in ["A", "B"] {
        b.create_topic(t, 1).unwrap();
        for tag in ["x", "y"] {
            let r = call(&c, send_v2(&Msg::new(t, format!("{t}{tag}").as_bytes()).tags(tag)));
            assert_eq!(r.code, code::SUCCESS, "{r:?}");
        }
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    let ok = |r: RemotingCommand| assert_eq!(r.code, code::SUCCESS, "{r:?}");

    ok(call(&c, heartbeat("10.0.0.1@1", "cg", &[("A", "*", 1), ("B", "x", 1)])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "A"), (code::SUCCESS, vec!["Ax".into(), "Ay".into()]));
    assert_eq!(pull_by_heartbeat(&c, "cg", "B"), (code::SUCCESS, vec!["Bx".into()]));
    // The group moves off A.
    ok(call(&c, heartbeat("10.0.0.1@1", "cg", &[("B", "x", 1)])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "A").0, code::SUBSCRIPTION_NOT_EXIST);
    assert_eq!(pull_by_heartbeat(&c, "cg", "B"), (code::SUCCESS, vec!["Bx".into()]));
    // A newer subscription of B replaces the group's; an older one does not roll it back.
    ok(call(&c, heartbeat("10.0.0.1@1", "cg", &[("B", "y", 2)])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "B"), (code::SUCCESS, vec!["By".into()]));
    // Another member, on a connection of its own (a connection holds one member of a group).
    let c2 = client(b.remoting_addrs()[0]);
    ok(call(&c2, heartbeat("10.0.0.2@2", "cg", &[("B", "x", 1)])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "B"), (code::SUCCESS, vec!["By".into()]));
    // Both members are in the group all along; a heartbeat naming no topic leaves it none.
    let list = call(
        &c,
        RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "cg"),
    );
    let v: Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(v["consumerIdList"], json!(["10.0.0.1@1", "10.0.0.2@2"]));
    ok(call(&c, heartbeat("10.0.0.1@1", "cg", &[])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "B").0, code::SUBSCRIPTION_NOT_EXIST);
    // A subscription naming a topic no topic can have is not kept; the rest are.
    ok(call(&c, heartbeat("10.0.0.1@1", "cg", &[(&"A".repeat(128), "*", 3), ("A", "*", 3)])));
    assert_eq!(pull_by_heartbeat(&c, "cg", "A").0, code::SUCCESS);
    // A group name no RocketMQ client sends is not registered.
    ok(call(&c, heartbeat("10.0.0.1@1", "bad group!", &[("A", "*", 1)])));
    let list = call(
        &c,
        RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP)
            .with_ext("consumerGroup", "bad group!"),
    );
    assert_eq!(list.code, code::SYSTEM_ERROR, "no consumer: {list:?}");
    b.shutdown();
}

/// The `dataVersion.counter` and the names in a table file of `dir/config`.
fn table_on_disk(dir: &std::path::Path, file: &str, key: &str) -> (i64, Vec<String>) {
    let text = std::fs::read_to_string(dir.join("config").join(file)).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let names = v[key].as_object().unwrap().keys().cloned().collect();
    (v["dataVersion"]["counter"].as_i64().unwrap(), names)
}

/// One heartbeat naming 500 new groups: every group and retry topic is on disk when it is
/// answered, each table took one version step (one write; it took 500, 12 s at 3,500 groups),
/// and the next heartbeat, creating nothing, changes nothing.
#[test]
fn a_heartbeat_creates_its_groups_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(b.remoting_addrs()[0]);
    ok_heartbeat(&c, &["warm"]);
    let (groups_before, _) = table_on_disk(dir.path(), "subscriptionGroup.json", "subscriptionGroupTable");
    let (topics_before, _) = table_on_disk(dir.path(), "topics.json", "topicConfigTable");
    let names: Vec<String> = (0..500).map(|i| format!("cg{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    ok_heartbeat(&c, &refs);
    let (groups_after, groups) =
        table_on_disk(dir.path(), "subscriptionGroup.json", "subscriptionGroupTable");
    let (topics_after, topics) = table_on_disk(dir.path(), "topics.json", "topicConfigTable");
    for n in &names {
        assert!(groups.contains(n), "group {n} on disk");
        assert!(topics.contains(&format!("%RETRY%{n}")), "retry topic of {n} on disk");
    }
    assert_eq!(groups_after, groups_before + 1, "one write of the group table");
    assert_eq!(topics_after, topics_before + 1, "one write of the topic table");
    ok_heartbeat(&c, &refs);
    assert_eq!(table_on_disk(dir.path(), "subscriptionGroup.json", "subscriptionGroupTable").0, groups_after);
    assert_eq!(table_on_disk(dir.path(), "topics.json", "topicConfigTable").0, topics_after);
    // Every member is registered.
    let list = call(
        &c,
        RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "cg499"),
    );
    let v: Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(v["consumerIdList"], json!(["10.0.0.9@9"]));
    b.shutdown();
}

/// A HEART_BEAT from client 10.0.0.9@9 with one clustering consumer per group, answered SUCCESS.
fn ok_heartbeat(c: &RemotingClient, groups: &[&str]) {
    let consumers: Vec<Value> = groups
        .iter()
        .map(|g| {
            json!({
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                "groupName": g, "messageModel": "CLUSTERING", "subscriptionDataSet": [], "unitMode": false
            })
        })
        .collect();
    let body = json!({"clientID": "10.0.0.9@9", "consumerDataSet": consumers, "producerDataSet": []});
    // Sent as a client of another version: the answer carries the broker's own.
    let r = call(
        c,
        RemotingCommand::request(request_code::HEART_BEAT)
            .with_version(0)
            .with_body(body.to_string().into_bytes()),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // MQVersion V4_9_4: the Java client keeps a heartbeat answer's version as the broker's.
    assert_eq!(r.version, 401, "{r:?}");
}

/// GET_CONSUMER_CONNECTION_LIST (`mqadmin consumerConnection`): the group's members as their
/// heartbeats named them, its subscriptions with their tags and tag codes, how it consumes;
/// and GET_PRODUCER_CONNECTION_LIST for the heartbeat's producer group.
#[test]
fn the_consumer_connection_lists_members_and_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("T", 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let mut hb = heartbeat("10.0.0.1@1", "conn_g", &[("T", "TagB || TagA", 5)]).with_version(399);
    hb.language = rmqha_core::remoting::LanguageCode::JAVA;
    assert_eq!(call(&c, hb).code, code::SUCCESS);
    let ask = |g: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST).with_ext("consumerGroup", g),
        )
    };
    let r = ask("conn_g");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let conn = &v["connectionSet"][0];
    assert_eq!(
        (conn["clientId"].as_str(), conn["language"].as_str(), conn["version"].as_i64()),
        (Some("10.0.0.1@1"), Some("JAVA"), Some(399))
    );
    assert!(conn["clientAddr"].as_str().unwrap().starts_with("127.0.0.1:"), "{v}");
    assert_eq!(
        (v["consumeType"].as_str(), v["messageModel"].as_str()),
        (Some("CONSUME_PASSIVELY"), Some("CLUSTERING"))
    );
    assert_eq!(v["consumeFromWhere"], "CONSUME_FROM_LAST_OFFSET");
    let sub = &v["subscriptionTable"]["T"];
    assert_eq!(sub["tagsSet"], json!(["TagA", "TagB"]));
    // Java's "TagA".hashCode() and "TagB".hashCode().
    assert_eq!(sub["codeSet"], json!([2598919, 2598920]));
    assert_eq!((sub["subString"].as_str(), sub["subVersion"].as_i64()), (Some("TagB || TagA"), Some(5)));
    // No member connected: CONSUMER_NOT_ONLINE (206), as 4.9 answers.
    let r = ask("nobody");
    assert_eq!((r.code, r.remark.as_deref()), (206, Some("the consumer group[nobody] not online")));

    // GET_PRODUCER_CONNECTION_LIST (`mqadmin producerConnection`): the heartbeat's producer.
    let producers = |g: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::GET_PRODUCER_CONNECTION_LIST).with_ext("producerGroup", g),
        )
    };
    let r = producers("CLIENT_INNER_PRODUCER");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["connectionSet"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        (v["connectionSet"][0]["clientId"].as_str(), v["connectionSet"][0]["version"].as_i64()),
        (Some("10.0.0.1@1"), Some(399))
    );
    let r = producers("nobody");
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (code::SYSTEM_ERROR, Some("the producer group[nobody] not exist"))
    );
    b.shutdown();
}
