//! A slave syncing from a master that answers the way a Java RocketMQ broker does: bodies as
//! fastjson writes them (bare integer map keys, alphabetical fields, 4.x without
//! `stateVersion`, 5.x with extra wrapper fields), the delay offsets as the pretty file text,
//! response headers in either format, and error codes with remarks for a table it lacks.

mod sync_common;

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmqha_core::metadata::{ConfigTables, DataVersion, TopicFilterType};
use rmqha_core::remoting::{
    Handled, LanguageCode, RemotingCommand, RequestContext, SerializeType, request_code, response_code,
};
use rmqha_core::sync::{SlaveSynchronizer, SyncError, SyncTable, TableError, TableOutcome};
use sync_common::{bind_main_and_vip, sync_config};

/// GET_ALL_TOPIC_CONFIG from a 4.9 master: `TopicConfigSerializeWrapper`, compact.
const TOPICS_4X: &str = r#"{"dataVersion":{"counter":2,"timestamp":1561099384127},"topicConfigTable":{"SCHEDULE_TOPIC_XXXX":{"order":false,"perm":6,"readQueueNums":18,"topicFilterType":"SINGLE_TAG","topicName":"SCHEDULE_TOPIC_XXXX","topicSysFlag":0,"writeQueueNums":18},"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}"#;

/// GET_ALL_CONSUMER_OFFSET from a 4.9 master: no dataVersion, bare queue ids.
const OFFSETS_4X: &str = r#"{"offsetTable":{"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0},"TopicTest@please_rename_unique_group_name_4":{0:250,1:251,2:249,3:250}}}"#;

/// GET_ALL_DELAY_OFFSET: the `delayOffset.json` file text, fastjson's pretty form.
const DELAY_4X: &str = "{\n\t\"offsetTable\":{1:3,2:1,3:10,18:0\n\t}\n}";

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG from a 4.9 master.
const GROUPS_4X: &str = r#"{"dataVersion":{"counter":1,"timestamp":1561099384127},"subscriptionGroupTable":{"please_rename_unique_group_name_4":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"groupName":"please_rename_unique_group_name_4","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#;

/// 5.x bodies: stateVersion, the mapping wrapper fields, attributes, pullOffsetTable,
/// forbiddenTable, group retry policy.
const TOPICS_5X: &str = r#"{"dataVersion":{"counter":5,"stateVersion":0,"timestamp":1700000000123},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"attributes":{"+message.type":"NORMAL"},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"MULTI_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}"#;
const OFFSETS_5X: &str = r#"{"dataVersion":{"counter":12,"stateVersion":0,"timestamp":1700000001000},"offsetTable":{"TopicTest@G":{0:1000,1:2000,10:3000}},"pullOffsetTable":{"TopicTest@G":{0:1000}}}"#;
const DELAY_5X: &str = "{\n\t\"dataVersion\":{\n\t\t\"counter\":4,\n\t\t\"stateVersion\":0,\n\t\t\"timestamp\":1700000002000\n\t},\n\t\"offsetTable\":{1:30,2:11\n\t}\n}";
const GROUPS_5X: &str = r#"{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"forbiddenTable":{"G":{"TopicTest":1}},"subscriptionGroupTable":{"G":{"attributes":{},"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":true,"consumeTimeoutMinute":30,"groupName":"G","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":5,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#;

/// Bodies a fake Java master serves, changeable while it runs.
#[derive(Clone)]
struct Bodies {
    topics: Result<&'static str, (i32, &'static str)>,
    offsets: &'static str,
    delay: &'static str,
    groups: &'static str,
}

/// A fake Java master: answers with `bodies`, headers in the ROCKETMQ format when
/// `rocketmq_headers` is set (5.x answers in its own configured format), language JAVA.
fn fake_master(
    bodies: Arc<Mutex<Bodies>>,
    rocketmq_headers: Arc<AtomicBool>,
) -> rmqha_core::remoting::RemotingServer {
    let handler = move |req: RemotingCommand, _: &RequestContext| {
        let b = bodies.lock().unwrap().clone();
        let body = match req.code {
            request_code::GET_ALL_TOPIC_CONFIG => b.topics,
            request_code::GET_ALL_CONSUMER_OFFSET => Ok(b.offsets),
            request_code::GET_ALL_DELAY_OFFSET => Ok(b.delay),
            request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => Ok(b.groups),
            _ => return Handled::Respond(RemotingCommand::not_supported(&req)),
        };
        let mut resp = match body {
            Ok(body) => {
                RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(body.as_bytes())
            }
            Err((code, remark)) => RemotingCommand::response_to(&req, code, Some(remark)),
        };
        resp.language = LanguageCode::JAVA;
        resp.version = 453; // V4_9_8's ordinal, as a Java peer sends it
        if rocketmq_headers.load(Ordering::Relaxed) {
            resp.serialize_type = SerializeType::RocketMq;
        }
        Handled::Respond(resp)
    };
    bind_main_and_vip(Arc::new(handler), true)
}

fn version(counter: i64, timestamp: i64) -> DataVersion {
    DataVersion { counter, state_version: 0, timestamp }
}

#[test]
fn bodies_written_the_way_rocketmq_writes_them_are_mirrored() {
    let bodies = Arc::new(Mutex::new(Bodies {
        topics: Ok(TOPICS_4X),
        offsets: OFFSETS_4X,
        delay: DELAY_4X,
        groups: GROUPS_4X,
    }));
    let rocketmq_headers = Arc::new(AtomicBool::new(false));
    let master = fake_master(Arc::clone(&bodies), Arc::clone(&rocketmq_headers));
    let dir = tempfile::tempdir().unwrap();
    let slave = Arc::new(ConfigTables::open(dir.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.local_addrs()[0].to_string()),
        sync_config(Duration::from_secs(60)),
    );

    // 4.9: JSON headers, no stateVersion, no dataVersion on the offsets.
    assert_eq!(sync.sync_all().unwrap().written(), 4);
    let topics = slave.topics();
    assert_eq!(topics.data_version(), version(2, 1561099384127));
    assert_eq!(topics.get("SCHEDULE_TOPIC_XXXX").unwrap().read_queue_nums, 18);
    assert_eq!(topics.get("TopicTest").unwrap().write_queue_nums, 4);
    let offsets = slave.consumer_offsets();
    assert_eq!(offsets.query("please_rename_unique_group_name_4", "TopicTest", 2), Some(249));
    assert_eq!(
        offsets.query("please_rename_unique_group_name_4", "%RETRY%please_rename_unique_group_name_4", 0),
        Some(0)
    );
    assert_eq!(slave.delay_offsets().offset(18), Some(0));
    assert_eq!(slave.delay_offsets().offset(3), Some(10));
    assert_eq!(fs::read_to_string(slave.delay_offsets().path()).unwrap(), DELAY_4X, "stored verbatim");
    let group = slave.subscription_groups().get("please_rename_unique_group_name_4").unwrap();
    assert_eq!((group.retry_max_times, group.which_broker_when_consume_slowly), (16, 1));

    // The master is upgraded to 5.x and answers with ROCKETMQ headers.
    *bodies.lock().unwrap() =
        Bodies { topics: Ok(TOPICS_5X), offsets: OFFSETS_5X, delay: DELAY_5X, groups: GROUPS_5X };
    rocketmq_headers.store(true, Ordering::Relaxed);
    assert_eq!(sync.sync_all().unwrap().written(), 4);
    let topic = topics.get("TopicTest").unwrap();
    assert_eq!(topic.topic_filter_type, TopicFilterType::MultiTag);
    assert_eq!(topic.attributes["+message.type"], "NORMAL");
    assert!(!topics.contains("SCHEDULE_TOPIC_XXXX"), "the table is replaced whole");
    assert_eq!(topics.data_version(), version(5, 1700000000123));
    assert_eq!(offsets.query("G", "TopicTest", 10), Some(3000));
    assert_eq!(offsets.data_version(), version(12, 1700000001000));
    assert_eq!(offsets.query("please_rename_unique_group_name_4", "TopicTest", 2), Some(249), "kept");
    assert_eq!(slave.delay_offsets().offset(1), Some(30));
    assert_eq!(fs::read_to_string(slave.delay_offsets().path()).unwrap(), DELAY_5X);
    let group = slave.subscription_groups().get("G").unwrap();
    assert_eq!((group.consume_timeout_minute, group.retry_max_times), (30, 5));
    assert!(group.consume_message_orderly);
    let on_disk = fs::read_to_string(dir.path().join("config/subscriptionGroup.json")).unwrap();
    assert!(on_disk.contains("forbiddenTable"), "the forbidden table is kept: {on_disk}");

    // Same bodies again: nothing is rewritten.
    assert_eq!(sync.sync_all().unwrap().written(), 0);
}

#[test]
fn a_table_the_master_refuses_fails_alone_naming_table_and_address() {
    let bodies = Arc::new(Mutex::new(Bodies {
        topics: Err((response_code::SYSTEM_ERROR, "No topic in this broker")),
        offsets: OFFSETS_4X,
        delay: "not json at all",
        groups: GROUPS_4X,
    }));
    let master = fake_master(Arc::clone(&bodies), Arc::new(AtomicBool::new(false)));
    let addr = master.local_addrs()[0].to_string();
    let vip = master.local_addrs()[1].to_string();
    let dir = tempfile::tempdir().unwrap();
    let slave = Arc::new(ConfigTables::open(dir.path()).unwrap());
    let sync = SlaveSynchronizer::new(Arc::clone(&slave), Some(&addr), sync_config(Duration::from_secs(60)));

    let err = sync.sync_all().unwrap_err();
    let report = err.report().unwrap();
    assert!(matches!(err, SyncError::Incomplete { ref master, .. } if *master == addr));
    // The VIP port answered the topic request with an error code: final, no fallback.
    let topics = report.topics.failure().unwrap();
    assert_eq!(topics.addr, vip);
    assert!(
        matches!(&topics.error, TableError::Refused { code: response_code::SYSTEM_ERROR, remark: Some(r) } if r == "No topic in this broker")
    );
    let delay = report.delay_offsets.failure().unwrap();
    assert!(matches!(delay.error, TableError::Decode(_)), "{delay}");
    // The others synced regardless.
    assert!(report.consumer_offsets.is_applied() && report.subscription_groups.is_applied());
    assert_eq!(report.written(), 2);

    let text = err.to_string();
    for needle in [
        addr.as_str(),
        vip.as_str(),
        "topic config",
        "SYSTEM_ERROR",
        "No topic in this broker",
        "delay offsets",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
    let last = sync.last_sync().unwrap();
    assert_eq!(last.error.as_deref(), Some(report.failure_summary().as_str()));
    assert_eq!(sync.status().failures, 1);
    assert!(!slave.delay_offsets().path().exists(), "garbage is not stored");

    // Fixed on the master: the next sync takes what failed, and only that.
    *bodies.lock().unwrap() =
        Bodies { topics: Ok(TOPICS_4X), offsets: OFFSETS_4X, delay: DELAY_4X, groups: GROUPS_4X };
    let report = sync.sync_all().unwrap();
    assert!(report.topics.is_applied() && report.delay_offsets.is_applied());
    for t in [SyncTable::ConsumerOffsets, SyncTable::SubscriptionGroups] {
        assert!(matches!(report.outcome(t), TableOutcome::Unchanged), "{t}");
    }
    assert!(sync.last_sync().unwrap().is_ok());
}
