//! What operators' tools ask a broker over the remoting port: GET_TOPIC_STATS_INFO (202,
//! `mqadmin topicStatus`), GET_CONSUME_STATS (208, `mqadmin consumerProgress`) and
//! GET_BROKER_CONFIG (26, `mqadmin getBrokerConfig`), with RocketMQ 4.9's bodies: the stats
//! keyed by MessageQueue objects written inline as fastjson writes them; and the name-server
//! request GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206, `mqadmin topicList`).

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::Duration;

use rmqha_core::broker_admin::{ConsumeStats, KvTable, TopicStats};
use rmqha_core::remoting::{RemotingCommand, request_code};
use rmqha_core::{Broker, Message};

use remote_common::*;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap()
}

/// The store time of each message put, by (queue, queue offset).
fn put(b: &Broker, topic: &str, queue: i32, n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| {
            let r = b
                .put_message_sync(&Message::new(topic, format!("m{i}").into_bytes()).with_queue(queue))
                .unwrap();
            assert_eq!(r.status, rmqha_core::PutStatus::PutOk, "{r:?}");
            r.store_timestamp
        })
        .collect()
}

#[test]
fn topic_stats_list_each_write_queue_with_its_offsets_and_last_store_time() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("Stats", 3).unwrap();
    let times = put(&b, "Stats", 0, 3);
    put(&b, "Stats", 1, 1);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let c = client(b.remoting_addrs()[0]);

    let r = call(&c, RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO).with_ext("topic", "Stats"));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let body = String::from_utf8(r.body.clone()).unwrap();
    let q1_time = b.store().queue_store_time("Stats", 1, 0).unwrap();
    let expected = format!(
        "{{\"offsetTable\":{{\
         {{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"Stats\"}}:{{\"lastUpdateTimestamp\":{},\"maxOffset\":3,\"minOffset\":0}},\
         {{\"brokerName\":\"broker-a\",\"queueId\":1,\"topic\":\"Stats\"}}:{{\"lastUpdateTimestamp\":{q1_time},\"maxOffset\":1,\"minOffset\":0}},\
         {{\"brokerName\":\"broker-a\",\"queueId\":2,\"topic\":\"Stats\"}}:{{\"lastUpdateTimestamp\":0,\"maxOffset\":0,\"minOffset\":0}}}}}}",
        times[2]
    );
    assert_eq!(body, expected);
    let maxes: Vec<i64> =
        TopicStats::decode(body.as_bytes()).unwrap().offsets.iter().map(|(_, o)| o.max_offset).collect();
    assert_eq!(maxes, [3, 1, 0]);

    let r = call(&c, RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO).with_ext("topic", "Nope"));
    assert_eq!(r.code, code::TOPIC_NOT_EXIST, "{r:?}");
    assert_eq!(r.remark.as_deref(), Some("topic[Nope] not exist"));
    let r = call(&c, RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO));
    assert_eq!(r.code, code::SYSTEM_ERROR, "a request without its topic: {r:?}");
    b.shutdown();
}

#[test]
fn consume_stats_show_the_groups_progress_on_every_topic_it_committed() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 2).unwrap();
    b.create_topic("B", 1).unwrap();
    let times = put(&b, "A", 0, 4);
    put(&b, "B", 0, 2);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("progress", "A", 0, 2).unwrap();
    b.commit_consumer_offset("progress", "B", 0, 2).unwrap();
    b.commit_consumer_offset("other", "A", 0, 4).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let stats = |topic: Option<&str>| {
        let mut req =
            RemotingCommand::request(request_code::GET_CONSUME_STATS).with_ext("consumerGroup", "progress");
        if let Some(t) = topic {
            req = req.with_ext("topic", t);
        }
        let r = call(&c, req);
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        String::from_utf8(r.body).unwrap()
    };
    let b_last = b.store().queue_store_time("B", 0, 1).unwrap();
    let a = format!(
        "{{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"A\"}}:{{\"brokerOffset\":4,\"consumerOffset\":2,\"lastTimestamp\":{}}},\
         {{\"brokerName\":\"broker-a\",\"queueId\":1,\"topic\":\"A\"}}:{{\"brokerOffset\":0,\"consumerOffset\":0,\"lastTimestamp\":0}}",
        times[1]
    );
    let bq = format!(
        "{{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"B\"}}:{{\"brokerOffset\":2,\"consumerOffset\":2,\"lastTimestamp\":{b_last}}}"
    );
    // Every topic the group committed on (4.9's `whichTopicByConsumer`), another group's not.
    assert_eq!(stats(None), format!("{{\"consumeTps\":0.0,\"offsetTable\":{{{a},{bq}}}}}"));
    assert_eq!(stats(Some("B")), format!("{{\"consumeTps\":0.0,\"offsetTable\":{{{bq}}}}}"));
    let decoded = ConsumeStats::decode(stats(None).as_bytes()).unwrap();
    let lags: Vec<(String, i32, i64)> =
        decoded.offsets.iter().map(|(q, o)| (q.topic.clone(), q.queue_id, o.lag())).collect();
    assert_eq!(lags, [("A".to_string(), 0, 2), ("A".to_string(), 1, 0), ("B".to_string(), 0, 0)]);

    // A live consumer of the group subscribing to A only: B is left out, as 4.9 does.
    assert_eq!(call(&c, heartbeat("10.0.0.1@1", "progress", &[("A", "*", 1)])).code, code::SUCCESS);
    assert_eq!(stats(None), format!("{{\"consumeTps\":0.0,\"offsetTable\":{{{a}}}}}"));
    // A group with no offsets: an empty table.
    let r =
        call(&c, RemotingCommand::request(request_code::GET_CONSUME_STATS).with_ext("consumerGroup", "idle"));
    assert_eq!(String::from_utf8(r.body).unwrap(), "{\"consumeTps\":0.0,\"offsetTable\":{}}");
    b.shutdown();
}

/// `consumeTps`: the messages per second the group pulled over the last minute (4.9's
/// GROUP_GET_NUMS), counted from pulls answered with messages, per topic asked.
#[test]
fn consume_tps_is_the_groups_pull_rate_over_the_last_minute() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 1).unwrap();
    b.create_topic("B", 1).unwrap();
    put(&b, "A", 0, 6);
    put(&b, "B", 0, 3);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("rated", "A", 0, 0).unwrap();
    b.commit_consumer_offset("rated", "B", 0, 0).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let tps = |topic: Option<&str>| {
        let mut req =
            RemotingCommand::request(request_code::GET_CONSUME_STATS).with_ext("consumerGroup", "rated");
        if let Some(t) = topic {
            req = req.with_ext("topic", t);
        }
        let r = call(&c, req);
        ConsumeStats::decode(&r.body).unwrap().consume_tps
    };
    assert_eq!(tps(None), 0.0, "nothing pulled yet");
    // Six from A in one pull, three from B; a pull that finds nothing counts nothing.
    for (topic, n) in [("A", 6), ("B", 3)] {
        let r = call(&c, pull_req("rated", topic, 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*"));
        assert_eq!((r.code, decode_records(&r.body).len()), (code::SUCCESS, n), "{r:?}");
    }
    let r = call(&c, pull_req("rated", "A", 0, 6, 32, FLAG_SUBSCRIPTION, 0, "*"));
    assert_eq!(r.code, code::PULL_NOT_FOUND);
    // The second still counting is left out: the rate shows once the clock has moved on.
    assert!(common::wait_until(Duration::from_secs(5), || tps(None) > 0.0), "no rate after a second");
    assert_eq!(tps(None), 9.0 / 60.0, "nine messages over a minute");
    assert_eq!(tps(Some("A")), 6.0 / 60.0);
    assert_eq!(tps(Some("B")), 3.0 / 60.0);
    b.shutdown();
}

#[test]
fn broker_config_lists_every_key_with_secrets_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "the-ha-secret-of-the-group";
    let b = master(dir.path(), &[("haAuthSecret", secret), ("slaveTimeout", "4321")]);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, RemotingCommand::request(request_code::GET_BROKER_CONFIG));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let text = String::from_utf8(r.body.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"brokerName=broker-a"), "{text}");
    assert!(lines.contains(&"slaveTimeout=4321"), "{text}");
    assert!(lines.contains(&"brokerRole=ASYNC_MASTER"), "{text}");
    assert!(lines.contains(&"haAuthSecret=<hidden>"), "{text}");
    assert!(!text.contains(secret));
    assert_eq!(lines.len(), rmqha_core::BrokerConfig::KEYS.len(), "one line per key");
    let version: serde_json::Value = serde_json::from_str(r.ext("version").unwrap()).unwrap();
    assert!(version["counter"].is_i64() && version["timestamp"].as_i64().unwrap() > 0, "{version}");
    b.shutdown();
}

#[test]
fn the_topic_list_names_every_topic_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("Listed", 1).unwrap();
    b.create_topic("AlsoListed", 2).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let names: Vec<&str> = v["topicList"].as_array().unwrap().iter().filter_map(|t| t.as_str()).collect();
    let table = b.tables().topics().all();
    assert_eq!(names, table.keys().map(String::as_str).collect::<Vec<_>>());
    assert!(names.contains(&"Listed") && names.contains(&"AlsoListed"), "{names:?}");

    // The system topics: as a name server lists them (the cluster's and the broker's names,
    // which the Dashboard marks as system) and as the broker does (its table's system topics).
    let r = call(&c, RemotingCommand::request(request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let cfg = b.config();
    assert_eq!(v["topicList"], serde_json::json!([cfg.broker_cluster_name, cfg.broker_name]));
    assert_eq!(v["brokerAddr"].as_str().unwrap(), b.remoting_addrs()[0].to_string());
    let r = call(&c, RemotingCommand::request(request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let names: Vec<&str> = v["topicList"].as_array().unwrap().iter().filter_map(|t| t.as_str()).collect();
    assert!(names.contains(&"TBW102"), "the template topic: {names:?}");
    assert!(!names.contains(&"Listed") && !names.contains(&"AlsoListed"), "{names:?}");
    assert!(names.iter().all(|t| rmqha_core::metadata::is_system_topic(t)), "{names:?}");
    b.shutdown();
}

/// GET_EARLIEST_MSG_STORETIME (32): the store time of a queue's first message (-1 for none);
/// QUERY_TOPIC_CONSUME_BY_WHO (300, `mqadmin topicList -c`): the groups with a live member
/// subscribing to the topic or with offsets committed on it.
#[test]
fn earliest_store_time_and_the_groups_consuming_a_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 2).unwrap();
    let times = put(&b, "A", 0, 3);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let c = client(b.remoting_addrs()[0]);
    let earliest = |topic: &str, queue: i32| {
        let r = call(
            &c,
            RemotingCommand::request(request_code::GET_EARLIEST_MSG_STORETIME)
                .with_ext("topic", topic)
                .with_ext("queueId", queue),
        );
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        r.ext("timestamp").unwrap().parse::<i64>().unwrap()
    };
    assert_eq!(earliest("A", 0), times[0]);
    assert_eq!(earliest("A", 1), -1, "an empty queue");
    assert_eq!(earliest("Nope", 0), -1, "no such topic");

    let by_who = |topic: &str| {
        let r = call(
            &c,
            RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", topic),
        );
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        String::from_utf8(r.body).unwrap()
    };
    assert_eq!(by_who("A"), r#"{"groupList":[]}"#);
    b.commit_consumer_offset("committed_cg", "A", 0, 1).unwrap();
    b.commit_consumer_offset("elsewhere_cg", "A", 0, 1).unwrap();
    b.create_topic("A2", 1).unwrap();
    put(&b, "A2", 0, 1);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("other_topic_cg", "A2", 0, 1).unwrap();
    let mut member = Raw::connect(b.remoting_addrs()[0]);
    member.send(heartbeat("c1", "live_cg", &[("A", "*", 1)]), 1);
    assert_eq!(member.recv().code, code::SUCCESS);
    assert_eq!(by_who("A"), r#"{"groupList":["committed_cg","elsewhere_cg","live_cg"]}"#);
    assert_eq!(by_who("A2"), r#"{"groupList":["other_topic_cg"]}"#);
    let r = call(&c, RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO));
    assert_eq!(r.code, code::SYSTEM_ERROR, "the topic is required: {r:?}");
    b.shutdown();
}

/// QUERY_TOPICS_BY_CONSUMER (343), QUERY_SUBSCRIPTION_BY_CONSUMER (345) and
/// QUERY_CONSUME_TIME_SPAN (303): what `MQAdminExt` asks about one consumer group.
#[test]
fn a_groups_topics_subscription_and_consume_time_span() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 2).unwrap();
    b.create_topic("B", 1).unwrap();
    let times = put(&b, "A", 0, 4);
    put(&b, "B", 0, 1);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("cg", "A", 0, 2).unwrap();
    b.commit_consumer_offset("cg", "B", 0, 1).unwrap();
    b.commit_consumer_offset("other", "B", 0, 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let json = |req: RemotingCommand| {
        let r = call(&c, req);
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()
    };

    let topics = |group: &str| {
        json(RemotingCommand::request(request_code::QUERY_TOPICS_BY_CONSUMER).with_ext("group", group))
    };
    let v = topics("cg");
    assert_eq!(v["topicList"], serde_json::json!(["A", "B"]));
    assert_eq!(v["brokerAddr"].as_str().unwrap(), b.remoting_addrs()[0].to_string());
    assert_eq!(topics("nobody")["topicList"], serde_json::json!([]));

    let sub = |group: &str, topic: &str| {
        json(
            RemotingCommand::request(request_code::QUERY_SUBSCRIPTION_BY_CONSUMER)
                .with_ext("group", group)
                .with_ext("topic", topic),
        )
    };
    assert_eq!(sub("cg", "A"), serde_json::json!({"group": "cg", "topic": "A"}), "no live consumer");
    let mut member = Raw::connect(b.remoting_addrs()[0]);
    member.send(heartbeat("c1", "cg", &[("A", "TagX || TagY", 3)]), 1);
    assert_eq!(member.recv().code, code::SUCCESS);
    let v = sub("cg", "A");
    assert_eq!((v["group"].as_str(), v["topic"].as_str()), (Some("cg"), Some("A")));
    let data = &v["subscriptionData"];
    assert_eq!(data["subString"], "TagX || TagY");
    assert_eq!(data["subVersion"], 3);
    assert_eq!(data["tagsSet"], serde_json::json!(["TagX", "TagY"]));
    assert!(sub("cg", "B").get("subscriptionData").is_none(), "the member does not subscribe to B");

    let span = |topic: &str, group: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::QUERY_CONSUME_TIME_SPAN)
                .with_ext("topic", topic)
                .with_ext("group", group),
        )
    };
    let r = span("A", "cg");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let set = v["consumeTimeSpanSet"].as_array().unwrap();
    assert_eq!(set.len(), 2, "one per write queue: {v}");
    let q0 = &set[0];
    assert_eq!(
        q0["messageQueue"],
        serde_json::json!({"brokerName": b.config().broker_name, "queueId": 0, "topic": "A"})
    );
    assert_eq!(q0["minTimeStamp"], times[0]);
    assert_eq!(q0["maxTimeStamp"], times[3]);
    assert_eq!(q0["consumeTimeStamp"], times[1], "the last message consumed (offset 2 committed)");
    let delay = q0["delayTime"].as_i64().unwrap();
    assert!(delay >= 0 && delay <= rmqha_core::store::clock::now_ms() - times[2], "{delay}");
    let q1 = &set[1];
    assert_eq!(
        (q1["minTimeStamp"].as_i64(), q1["maxTimeStamp"].as_i64()),
        (Some(-1), Some(-1)),
        "an empty queue"
    );
    assert_eq!(q1["delayTime"], 0);
    // A group that consumed everything is not delayed; one with no offset is measured from
    // the first message.
    let v: serde_json::Value = serde_json::from_slice(&span("B", "cg").body).unwrap();
    assert_eq!(v["consumeTimeSpanSet"][0]["delayTime"], 0);
    let v: serde_json::Value = serde_json::from_slice(&span("A", "nobody").body).unwrap();
    assert_eq!(v["consumeTimeSpanSet"][0]["consumeTimeStamp"], times[0]);
    assert!(v["consumeTimeSpanSet"][0]["delayTime"].as_i64().unwrap() >= 0);
    assert_eq!(span("Nope", "cg").code, code::TOPIC_NOT_EXIST);
    for req in [
        RemotingCommand::request(request_code::QUERY_CONSUME_TIME_SPAN).with_ext("topic", "A"),
        RemotingCommand::request(request_code::QUERY_SUBSCRIPTION_BY_CONSUMER).with_ext("group", "cg"),
        RemotingCommand::request(request_code::QUERY_TOPICS_BY_CONSUMER),
    ] {
        assert_eq!(call(&c, req).code, code::SYSTEM_ERROR, "a required field missing");
    }
    b.shutdown();
}

/// GET_BROKER_RUNTIME_INFO carries what `mqadmin clusterList` reads (RocketMQ's keys): the
/// put and pull rates over 10 s / 1 min / 10 min, and the messages stored and pulled today.
#[test]
fn runtime_info_has_the_rates_and_daily_totals_cluster_list_reads() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("Rates", 1).unwrap();
    let times = put(&b, "Rates", 0, 5);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let c = client(b.remoting_addrs()[0]);
    let r = pull(&c, "Rates", 0, 0, 3);
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(decode_records(&r.body).len(), 3);
    let r = pull(&c, "Rates", 0, 5, 3);
    assert_eq!(r.code, code::PULL_NOT_FOUND, "{r:?}");

    let info = || {
        let r = call(&c, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO));
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        KvTable::decode(&r.body, "runtime info").unwrap().table
    };
    let rates = |t: &std::collections::BTreeMap<String, String>, key: &str| -> Vec<f64> {
        t[key].split(' ').map(|x| x.parse().unwrap_or_else(|_| panic!("{key}: {}", t[key]))).collect()
    };
    let t = info();
    assert_eq!(t["msgPutTotalTodayNow"], "5");
    assert_eq!(t["putMessageTimesTotal"], "5");
    assert_eq!(t["msgPutTotalTodayMorning"], "0");
    assert_eq!(t["msgPutTotalYesterdayMorning"], "0");
    assert_eq!(t["msgGetTotalTodayNow"], "3");
    assert_eq!(
        (t["msgGetTotalTodayMorning"].as_str(), t["msgGetTotalYesterdayMorning"].as_str()),
        ("0", "0")
    );
    assert_eq!(t["earliestMessageTimeStamp"], times[0].to_string());
    assert!(t["runtime"].starts_with("[ 0 days, 0 hours, "), "{}", t["runtime"]);
    assert!(t["bootTimestamp"].parse::<i64>().unwrap() <= times[0]);
    for key in ["putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"] {
        assert_eq!(rates(&t, key).len(), 3, "{key}: {}", t[key]);
    }
    // Sampled every second: the puts and pulls show in the rates once a sample after them is.
    assert!(
        common::wait_until(Duration::from_secs(10), || {
            let t = info();
            rates(&t, "putTps")[0] > 0.0
                && rates(&t, "getTransferedTps")[0] > 0.0
                && rates(&t, "getMissTps")[0] > 0.0
        }),
        "no rates: {:?}",
        info()
    );
    let metrics = b.metrics();
    assert!(metrics.contains("rmqha_pull_messages_total 3\n"), "{metrics}");
    assert!(metrics.contains("rmqha_pulls_total{result=\"found\"} 1\n"), "{metrics}");
    assert!(metrics.contains("rmqha_pulls_total{result=\"miss\"} 1\n"), "{metrics}");
    b.shutdown();
}

/// VIEW_BROKER_STATS_DATA (`mqadmin statsAll`): a topic's puts and a group's pulls over the
/// last minute, hour and day, as RocketMQ's `BrokerStatsData`; an item not kept is
/// SYSTEM_ERROR naming it.
#[test]
fn view_broker_stats_data_counts_a_topics_puts_and_a_groups_pulls() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(b.remoting_addrs()[0]);
    let view = |name: &str, key: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::VIEW_BROKER_STATS_DATA)
                .with_ext("statsName", name)
                .with_ext("statsKey", key),
        )
    };
    // Sampled at the start: the broker-wide items exist at once.
    let r = view("BROKER_PUT_NUMS", "DefaultCluster");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["statsMinute"]["sum"], 0, "{v}");
    for window in ["statsMinute", "statsHour", "statsDay"] {
        for field in ["sum", "tps", "avgpt"] {
            assert!(v[window][field].is_number(), "{window}.{field}: {v}");
        }
    }
    let r = view("TOPIC_PUT_NUMS", "Counted");
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("The stats <TOPIC_PUT_NUMS> <Counted> not exist"));
    let r =
        call(&c, RemotingCommand::request(request_code::VIEW_BROKER_STATS_DATA).with_ext("statsName", "X"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "no statsKey: {r:?}");

    b.create_topic("Counted", 1).unwrap();
    put(&b, "Counted", 0, 7);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let r = pull(&c, "Counted", 0, 0, 4);
    let records = decode_records(&r.body);
    assert_eq!(records.len(), 4);
    // test_cg hands the first message back (a failed consume): SNDBCK_PUT_NUMS.
    b.put_subscription_group(rmqha_core::metadata::SubscriptionGroupConfig::new("test_cg")).unwrap();
    let back = RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK)
        .with_ext("offset", records[0].phy_offset)
        .with_ext("group", "test_cg")
        .with_ext("delayLevel", 0)
        .with_ext("originTopic", "Counted")
        .with_ext("unitMode", false);
    let r = call(&c, back);
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // A new topic and group show at the next snapshot (every 10 s), counted from zero.
    let sum = |name: &str, key: &str, window: &str| {
        let r = view(name, key);
        (r.code == code::SUCCESS).then(|| {
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()[window]["sum"].as_u64().unwrap()
        })
    };
    assert!(
        common::wait_until(Duration::from_secs(25), || sum(
            "GROUP_GET_NUMS",
            "Counted@test_cg",
            "statsMinute"
        )
        .is_some()),
        "no item for the group"
    );
    for window in ["statsMinute", "statsHour", "statsDay"] {
        assert_eq!(sum("TOPIC_PUT_NUMS", "Counted", window), Some(7), "{window}");
        assert_eq!(sum("GROUP_GET_NUMS", "Counted@test_cg", window), Some(4), "{window}");
    }
    let size = sum("GROUP_GET_SIZE", "Counted@test_cg", "statsMinute").unwrap();
    let four: u64 = records.iter().map(|r| r.total_size as u64).sum();
    assert_eq!(size, four, "the bytes of the 4 records pulled");
    // The bytes of the 7 records put (as the dispatcher indexed them).
    let put_size = sum("TOPIC_PUT_SIZE", "Counted", "statsMinute").unwrap();
    let seven: u64 = b.get_messages("Counted", 0, 0, 32).buffer_total_size() as u64;
    assert_eq!(put_size, seven);
    assert_eq!(sum("SNDBCK_PUT_NUMS", "Counted@test_cg", "statsMinute"), Some(1));
    assert_eq!(sum("BROKER_GET_NUMS", "DefaultCluster", "statsMinute"), Some(4));
    b.shutdown();
}

/// GET_BROKER_CONSUME_STATS (`mqadmin brokerConsumeStats`, rocketmq-exporter): every
/// subscription group's progress, one ConsumeStats per topic it committed on, and the
/// broker's total lag, as 4.9's `ConsumeStatsList`.
#[test]
fn broker_consume_stats_list_every_groups_progress_and_the_total_lag() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 2).unwrap();
    b.create_topic("B", 1).unwrap();
    put(&b, "A", 0, 4);
    put(&b, "A", 1, 1);
    put(&b, "B", 0, 3);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    for g in ["g1", "g2"] {
        b.put_subscription_group(rmqha_core::metadata::SubscriptionGroupConfig::new(g)).unwrap();
    }
    b.commit_consumer_offset("g1", "A", 0, 3).unwrap();
    b.commit_consumer_offset("g1", "B", 0, 3).unwrap();
    b.commit_consumer_offset("g2", "A", 1, 1).unwrap();
    // Offsets of a group with no subscription group config: not listed (4.9 walks the
    // subscription groups).
    b.commit_consumer_offset("unlisted", "B", 0, 0).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let r = call(
        &c,
        RemotingCommand::request(request_code::GET_BROKER_CONSUME_STATS).with_ext("isOrder", "false"),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let body = String::from_utf8(r.body.clone()).unwrap();
    let addr = format!("127.0.0.1:{}", b.remoting_addrs()[0].port());
    assert!(body.starts_with(&format!("{{\"brokerAddr\":\"{addr}\",\"consumeStatsList\":[")), "{body}");
    // g1: A lags 1 (queue 0) + 1 (queue 1, no offset); B none. g2: A queue 0 lags 4.
    assert!(body.ends_with("],\"totalDiff\":6}"), "{body}");
    let g1 = body.find("{\"g1\":[").unwrap_or_else(|| panic!("no g1: {body}"));
    let g2 = body.find("{\"g2\":[").unwrap_or_else(|| panic!("no g2: {body}"));
    assert!(!body.contains("unlisted"), "{body}");
    // Each ConsumeStats of g1 decodes as GET_CONSUME_STATS's body does.
    let a_stats = &body[g1 + 7..];
    let a_stats = &a_stats[..a_stats.find(",{\"consumeTps\"").unwrap()];
    let decoded = ConsumeStats::decode(a_stats.as_bytes()).unwrap();
    let lags: Vec<(String, i32, i64)> =
        decoded.offsets.iter().map(|(q, o)| (q.topic.clone(), q.queue_id, o.lag())).collect();
    assert_eq!(lags, [("A".to_string(), 0, 1), ("A".to_string(), 1, 1)]);
    assert!(body[g2..].contains("\"topic\":\"A\"}:{\"brokerOffset\":4,\"consumerOffset\":0"), "{body}");
    // Only orderly topics with isOrder=true: none here.
    let r = call(
        &c,
        RemotingCommand::request(request_code::GET_BROKER_CONSUME_STATS).with_ext("isOrder", "true"),
    );
    let body = String::from_utf8(r.body).unwrap();
    assert!(body.contains("{\"g1\":[]}") && body.ends_with("\"totalDiff\":0}"), "{body}");
    b.shutdown();
}

/// CLONE_GROUP_OFFSET (`mqadmin cloneGroupOffset`): a group's offsets copied to another, on
/// one topic or every topic it committed on, as commits (a move backwards stamped for the
/// slaves); a topic its live consumers do not subscribe to is skipped unless offline.
#[test]
fn clone_group_offset_copies_a_groups_offsets_to_another() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    b.create_topic("A", 2).unwrap();
    b.create_topic("B", 1).unwrap();
    put(&b, "A", 0, 6);
    put(&b, "A", 1, 2);
    put(&b, "B", 0, 3);
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    for (topic, q, o) in [("A", 0, 3), ("A", 1, 1), ("B", 0, 2)] {
        b.commit_consumer_offset("src", topic, q, o).unwrap();
    }
    b.commit_consumer_offset("dest", "A", 0, 5).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let clone = |topic: Option<&str>, offline: bool| {
        let mut req = RemotingCommand::request(request_code::CLONE_GROUP_OFFSET)
            .with_ext("srcGroup", "src")
            .with_ext("destGroup", "dest")
            .with_ext("offline", offline);
        if let Some(t) = topic {
            req = req.with_ext("topic", t);
        }
        call(&c, req)
    };
    let dest = |topic: &str, q: i32| b.consumer_offset("dest", topic, q);

    assert_eq!(clone(Some("A"), false).code, code::SUCCESS);
    assert_eq!((dest("A", 0), dest("A", 1), dest("B", 0)), (3, 1, -1), "A only, 5 moved back to 3");
    assert!(b.tables().consumer_offsets().rewound_at("dest", "A").is_some(), "stamped for the slaves");
    // src's live consumers subscribe to A only: B is skipped, unless offline.
    assert_eq!(call(&c, heartbeat("10.0.0.1@1", "src", &[("A", "*", 1)])).code, code::SUCCESS);
    assert_eq!(clone(None, false).code, code::SUCCESS);
    assert_eq!(dest("B", 0), -1);
    assert_eq!(clone(None, true).code, code::SUCCESS);
    assert_eq!(dest("B", 0), 2);
    // A topic not configured: nothing cloned, still SUCCESS (4.9 skips it).
    assert_eq!(clone(Some("Nope"), true).code, code::SUCCESS);
    let r = call(&c, RemotingCommand::request(request_code::CLONE_GROUP_OFFSET).with_ext("destGroup", "d"));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("srcGroup"));
    // A destination that is not a group name: refused, naming it.
    let r = call(
        &c,
        RemotingCommand::request(request_code::CLONE_GROUP_OFFSET)
            .with_ext("srcGroup", "src")
            .with_ext("destGroup", "bad group!")
            .with_ext("topic", "A"),
    );
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.unwrap().contains("not a group name"));
    // A slave refuses: its offsets follow its master's.
    let sdir = tempfile::tempdir().unwrap();
    let ha = format!("127.0.0.1:{}", b.ha_port());
    let s =
        Broker::start_slave(common::broker_config(sdir.path(), "SLAVE", &[("haMasterAddress", ha.as_str())]))
            .unwrap();
    let sc = client(s.remoting_addrs()[0]);
    let r = call(
        &sc,
        RemotingCommand::request(request_code::CLONE_GROUP_OFFSET)
            .with_ext("srcGroup", "src")
            .with_ext("destGroup", "dest"),
    );
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.unwrap().contains("slave"));
    s.shutdown();
    b.shutdown();
}
