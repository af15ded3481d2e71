//! Config files written exactly as RocketMQ's fastjson writes them (tabs, bare integer keys,
//! alphabetical fields, 4.x without `stateVersion`, 5.x with extra wrapper fields) decode,
//! and a broker opened on such a `config/` directory sees every entry.

use rmqha_core::metadata::{
    ConfigTables, ConsumerOffsetWrapper, DataVersion, DelayOffsetWrapper, SubscriptionGroupConfig,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigWrapper, TopicFilterType,
};
use std::fs;

mod common;
mod remote_common;

const TOPICS_4X: &str = "{\n\t\"dataVersion\":{\n\t\t\"counter\":2,\n\t\t\"timestamp\":1561099384127\n\t},\n\t\"topicConfigTable\":{\n\t\t\"SCHEDULE_TOPIC_XXXX\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":18,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"SCHEDULE_TOPIC_XXXX\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":18\n\t\t},\n\t\t\"TBW102\":{\n\t\t\t\"order\":false,\n\t\t\t\"perm\":7,\n\t\t\t\"readQueueNums\":8,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"TBW102\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":8\n\t\t}\n\t}\n}";

const TOPICS_5X: &str = r#"{
	"dataVersion":{
		"counter":5,
		"stateVersion":0,
		"timestamp":1700000000123
	},
	"mappingDataVersion":{
		"counter":0,
		"stateVersion":0,
		"timestamp":1700000000000
	},
	"topicConfigTable":{
		"TopicTest":{
			"attributes":{
				"+message.type":"NORMAL"
			},
			"order":false,
			"perm":6,
			"readQueueNums":4,
			"topicFilterType":"MULTI_TAG",
			"topicName":"TopicTest",
			"topicSysFlag":0,
			"writeQueueNums":4
		}
	},
	"topicQueueMappingDetailMap":{},
	"topicQueueMappingInfoMap":{
		"TopicTest":{
			"bname":"broker-a",
			"currIdMap":{0:0,1:1},
			"dirty":false,
			"epoch":1,
			"scope":"__global__",
			"topic":"TopicTest",
			"totalQueues":4
		}
	}
}"#;

// fastjson's pretty printer puts the closing brace of an Integer-keyed map on its own line.
const CONSUMER_OFFSET_4X: &str = "{\n\t\"offsetTable\":{\n\t\t\"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4\":{0:0\n\t\t},\n\t\t\"TopicTest@please_rename_unique_group_name_4\":{0:250,1:251,2:249,3:250\n\t\t}\n\t}\n}";

const CONSUMER_OFFSET_5X: &str = r#"{"dataVersion":{"counter":12,"stateVersion":0,"timestamp":1700000001000},"offsetTable":{"TopicTest@G":{0:1000,1:2000,10:3000}},"pullOffsetTable":{"TopicTest@G":{0:1000}}}"#;

const DELAY_OFFSET_4X: &str = "{\n\t\"offsetTable\":{1:3,2:1,3:10,18:0\n\t}\n}";

const GROUPS_4X: &str = r#"{"dataVersion":{"counter":1,"timestamp":1561099384127},"subscriptionGroupTable":{"SELF_TEST_C_GROUP":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"groupName":"SELF_TEST_C_GROUP","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#;

const GROUPS_5X: &str = r#"{
	"dataVersion":{
		"counter":3,
		"stateVersion":0,
		"timestamp":1700000000000
	},
	"forbiddenTable":{
		"G":{
			"TopicTest":1
		}
	},
	"subscriptionGroupTable":{
		"G":{
			"attributes":{},
			"brokerId":0,
			"consumeBroadcastEnable":false,
			"consumeEnable":true,
			"consumeFromMinEnable":true,
			"consumeMessageOrderly":true,
			"consumeTimeoutMinute":30,
			"groupName":"G",
			"groupRetryPolicy":{
				"customizedRetryPolicy":{
					"next":[1000,5000]
				},
				"type":"CUSTOMIZED"
			},
			"groupSysFlag":0,
			"notifyConsumerIdsChangedEnable":true,
			"retryMaxTimes":3,
			"retryQueueNums":1,
			"whichBrokerWhenConsumeSlowly":1
		}
	}
}"#;

#[test]
fn topics_4x_without_state_version() {
    let w = TopicConfigWrapper::decode(TOPICS_4X.as_bytes(), "topics.json").unwrap();
    assert_eq!(w.data_version, DataVersion { counter: 2, state_version: 0, timestamp: 1561099384127 });
    let tbw = &w.topic_config_table["TBW102"];
    assert_eq!(tbw.perm, 7);
    assert_eq!((tbw.read_queue_nums, tbw.write_queue_nums), (8, 8));
    assert!(tbw.attributes.is_empty());
    assert_eq!(w.topic_config_table["SCHEDULE_TOPIC_XXXX"].read_queue_nums, 18);
}

#[test]
fn topics_5x_with_mapping_fields_and_attributes() {
    let w = TopicConfigWrapper::decode(TOPICS_5X.as_bytes(), "GET_ALL_TOPIC_CONFIG body").unwrap();
    assert_eq!(w.data_version.counter, 5);
    let t = &w.topic_config_table["TopicTest"];
    assert_eq!(t.attributes["+message.type"], "NORMAL");
    assert_eq!(t.topic_filter_type, TopicFilterType::MultiTag);
    let expected = TopicConfig {
        attributes: [("+message.type".to_string(), "NORMAL".to_string())].into(),
        topic_filter_type: TopicFilterType::MultiTag,
        ..TopicConfig::with_queues("TopicTest", 4, 4, 6)
    };
    assert_eq!(t, &expected);
}

#[test]
fn consumer_offsets_with_bare_integer_keys() {
    let w = ConsumerOffsetWrapper::decode(CONSUMER_OFFSET_4X.as_bytes(), "f").unwrap();
    assert_eq!(w.data_version, None);
    let q = &w.offset_table["TopicTest@please_rename_unique_group_name_4"];
    assert_eq!(q.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(), [(0, 250), (1, 251), (2, 249), (3, 250)]);

    let w = ConsumerOffsetWrapper::decode(CONSUMER_OFFSET_5X.as_bytes(), "f").unwrap();
    assert_eq!(w.data_version.unwrap().counter, 12);
    assert_eq!(w.offset_table["TopicTest@G"][&10], 3000);
}

#[test]
fn delay_offsets_with_bare_integer_keys() {
    let w = DelayOffsetWrapper::decode(DELAY_OFFSET_4X.as_bytes(), "f").unwrap();
    assert_eq!(w.offset_table.len(), 4);
    assert_eq!(w.offset_table[&3], 10);
}

#[test]
fn subscription_groups_4x_and_5x() {
    let w = SubscriptionGroupWrapper::decode(GROUPS_4X.as_bytes(), "f").unwrap();
    assert_eq!(w.forbidden_table, None);
    assert_eq!(
        w.subscription_group_table["SELF_TEST_C_GROUP"],
        SubscriptionGroupConfig::new("SELF_TEST_C_GROUP")
    );

    let w = SubscriptionGroupWrapper::decode(GROUPS_5X.as_bytes(), "f").unwrap();
    let g = &w.subscription_group_table["G"];
    assert!(g.consume_message_orderly && !g.consume_broadcast_enable);
    assert_eq!((g.consume_timeout_minute, g.retry_max_times), (30, 3));
    assert_eq!(g.group_retry_policy["customizedRetryPolicy"]["next"][1], 5000);
    assert_eq!(w.forbidden_table.unwrap()["G"]["TopicTest"], 1);
}

#[test]
fn broker_opens_a_rocketmq_config_dir() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("config");
    fs::create_dir(&config).unwrap();
    fs::write(config.join("topics.json"), TOPICS_5X).unwrap();
    fs::write(config.join("consumerOffset.json"), CONSUMER_OFFSET_4X).unwrap();
    fs::write(config.join("delayOffset.json"), DELAY_OFFSET_4X).unwrap();
    fs::write(config.join("subscriptionGroup.json"), GROUPS_5X).unwrap();

    let tables = ConfigTables::open(root.path()).unwrap();
    assert_eq!(tables.topics().get("TopicTest").unwrap().read_queue_nums, 4);
    assert_eq!(
        tables.consumer_offsets().query("please_rename_unique_group_name_4", "TopicTest", 1),
        Some(251)
    );
    assert_eq!(tables.delay_offsets().offset(1), Some(3));
    assert_eq!(tables.delay_offsets().verbatim().as_deref(), Some(DELAY_OFFSET_4X));
    assert!(tables.subscription_groups().get("G").unwrap().consume_message_orderly);

    // Written back as strict JSON, and read back the same.
    tables.persist_all().unwrap();
    let text = fs::read_to_string(config.join("consumerOffset.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).expect("strict JSON");
    let again = ConfigTables::open(root.path()).unwrap();
    assert_eq!(again.topics().all(), tables.topics().all());
    assert_eq!(again.consumer_offsets().all(), tables.consumer_offsets().all());
    assert_eq!(again.subscription_groups().wrapper(), tables.subscription_groups().wrapper());
}

/// UPDATE_AND_CREATE_TOPIC on a topic a RocketMQ 5 broker created: a queue-count change keeps
/// its attributes and the fields this version does not model; an `attributes` modification
/// sets and removes attributes; a malformed one changes nothing.
#[test]
fn update_and_create_topic_keeps_5x_attributes_and_unknown_fields() {
    use remote_common::{call, client, code};
    use rmqha_core::remoting::{RemotingCommand, request_code};

    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("config");
    fs::create_dir(&config).unwrap();
    let sample =
        TOPICS_5X.replacen("\"order\":false,", "\"order\":false,\"topicMessageKind\":{\"a\":[1]},", 1);
    assert_ne!(sample, TOPICS_5X);
    fs::write(config.join("topics.json"), &sample).unwrap();
    let topics_file = config.join("topics.json");
    let entry_on_disk = || -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&topics_file).unwrap()).unwrap();
        v["topicConfigTable"]["TopicTest"].clone()
    };

    let b =
        rmqha_core::Broker::start_master(common::broker_config(root.path(), "ASYNC_MASTER", &[])).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let update = |queues: i32, attributes: Option<&str>| {
        let mut req = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC)
            .with_ext("topic", "TopicTest")
            .with_ext("defaultTopic", "TBW102")
            .with_ext("readQueueNums", queues)
            .with_ext("writeQueueNums", queues)
            .with_ext("perm", 6)
            .with_ext("topicFilterType", "MULTI_TAG")
            .with_ext("topicSysFlag", 0)
            .with_ext("order", false);
        if let Some(a) = attributes {
            req = req.with_ext("attributes", a);
        }
        call(&c, req)
    };
    let attrs = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };

    // A 4.x-style request (no attributes): queue counts change, everything else stays.
    let resp = update(8, None);
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
    let t = b.topic_config("TopicTest").unwrap();
    assert_eq!((t.read_queue_nums, t.write_queue_nums), (8, 8));
    assert_eq!(t.attributes, attrs(&[("+message.type", "NORMAL")]));
    assert_eq!(t.extra["topicMessageKind"], serde_json::json!({"a": [1]}));
    let e = entry_on_disk();
    assert_eq!(e["readQueueNums"], 8);
    assert_eq!(e["attributes"], serde_json::json!({"+message.type": "NORMAL"}));
    assert_eq!(e["topicMessageKind"], serde_json::json!({"a": [1]}));

    // A 5.x request carrying a modification: added, then removed, the rest kept.
    let resp = update(8, Some("+cleanup.policy=COMPACTION"));
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
    let both = attrs(&[("+message.type", "NORMAL"), ("cleanup.policy", "COMPACTION")]);
    assert_eq!(b.topic_config("TopicTest").unwrap().attributes, both);
    assert_eq!(entry_on_disk()["attributes"]["cleanup.policy"], "COMPACTION");
    let resp = update(4, Some("-cleanup.policy"));
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
    assert_eq!(b.topic_config("TopicTest").unwrap().attributes, attrs(&[("+message.type", "NORMAL")]));
    assert_eq!(entry_on_disk()["attributes"], serde_json::json!({"+message.type": "NORMAL"}));

    // A malformed modification is refused and changes nothing.
    let before = fs::read(&topics_file).unwrap();
    for bad in ["cleanup.policy=COMPACTION", "-nope", "+k=1,+k=2"] {
        let resp = update(16, Some(bad));
        assert_eq!(resp.code, code::SYSTEM_ERROR, "{bad}: {resp:?}");
    }
    assert_eq!(fs::read(&topics_file).unwrap(), before);
    assert_eq!(b.topic_config("TopicTest").unwrap().read_queue_nums, 4);

    b.shutdown();
    drop(b);
    let again = ConfigTables::open(root.path()).unwrap();
    let t = again.topics().get("TopicTest").unwrap();
    assert_eq!((t.read_queue_nums, t.topic_filter_type), (4, TopicFilterType::MultiTag));
    assert_eq!(t.attributes, attrs(&[("+message.type", "NORMAL")]));
    assert_eq!(t.extra["topicMessageKind"], serde_json::json!({"a": [1]}));
}

mod decoders_never_panic {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(bytes: &[u8]) {
        let _ = TopicConfigWrapper::decode(bytes, "p");
        let _ = ConsumerOffsetWrapper::decode(bytes, "p");
        let _ = DelayOffsetWrapper::decode(bytes, "p");
        let _ = SubscriptionGroupWrapper::decode(bytes, "p");
    }

    proptest! {
        #[test]
        fn on_arbitrary_text(s in "\\PC*") {
            decode_all(s.as_bytes());
        }

        #[test]
        fn on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..128)) {
            decode_all(&b);
        }

        #[test]
        fn on_mangled_samples(cut in 0usize..2000, byte in any::<u8>()) {
            for sample in [TOPICS_5X, CONSUMER_OFFSET_4X, GROUPS_5X, DELAY_OFFSET_4X] {
                let mut b = sample.as_bytes().to_vec();
                let at = cut % b.len();
                b[at] = byte;
                decode_all(&b);
                decode_all(&sample.as_bytes()[..at]);
            }
        }
    }
}
