//! What a slave does with the tables its master sends: topics and groups replaced whole only
//! when the DataVersion differs, consumer offsets merged without ever moving backwards,
//! delay offsets stored verbatim.

use proptest::prelude::*;
use rmqha_core::metadata::{
    ConfigTables, ConsumerOffsetTable, ConsumerOffsetWrapper, DataVersion, DelayOffsetTable, JsonStyle,
    MetadataError, QueueOffsets, SubscriptionGroupConfig, SubscriptionGroupTable, SubscriptionGroupWrapper,
    TopicConfig, TopicConfigTable, TopicConfigWrapper,
};
use std::collections::BTreeMap;
use std::fs;

fn version(counter: i64) -> DataVersion {
    DataVersion { counter, state_version: 0, timestamp: 1_700_000_000_000 + counter }
}

fn topics(v: DataVersion, names: &[&str]) -> TopicConfigWrapper {
    TopicConfigWrapper {
        data_version: v,
        topic_config_table: names.iter().map(|n| (n.to_string(), TopicConfig::new(*n))).collect(),
    }
}

#[test]
fn topic_apply_replaces_the_table_when_versions_differ() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let slave = TopicConfigTable::open(&path).unwrap();
    slave.put_topic(TopicConfig::new("LocalOnly")).unwrap();

    assert!(slave.apply_from_master(topics(version(7), &["A", "B"])).unwrap());
    assert_eq!(slave.data_version(), version(7), "copied, not bumped");
    assert_eq!(slave.all().keys().collect::<Vec<_>>(), ["A", "B"]);

    // Persisted at once, with the master's version.
    let reopened = TopicConfigTable::open(&path).unwrap();
    assert_eq!(reopened.data_version(), version(7));
    assert!(reopened.contains("A") && !reopened.contains("LocalOnly"));
}

#[test]
fn topic_apply_is_skipped_when_versions_are_equal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let slave = TopicConfigTable::open(&path).unwrap();
    assert!(slave.apply_from_master(topics(version(7), &["A"])).unwrap());
    let written = fs::metadata(&path).unwrap().modified().unwrap();

    // Same version, different content: the version is the contract, so nothing happens.
    assert!(!slave.apply_from_master(topics(version(7), &["X"])).unwrap());
    assert!(slave.contains("A") && !slave.contains("X"));
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), written);

    // Any difference in the version (here only the state version) applies.
    let mut v = version(7);
    v.state_version = 1;
    assert!(slave.apply_from_master(topics(v, &["X"])).unwrap());
    assert!(slave.contains("X"));
}

#[test]
fn topic_apply_from_a_decoded_master_body() {
    let master_dir = tempfile::tempdir().unwrap();
    let slave_dir = tempfile::tempdir().unwrap();
    let master = ConfigTables::open(master_dir.path()).unwrap();
    let slave = ConfigTables::open(slave_dir.path()).unwrap();
    master.topics().put_topic(TopicConfig::with_queues("T", 4, 4, 6)).unwrap();

    let body = master.topics().encode(JsonStyle::Compact).unwrap();
    let decoded = TopicConfigWrapper::decode(body.as_bytes(), "GET_ALL_TOPIC_CONFIG").unwrap();
    assert!(slave.topics().apply_from_master(decoded.clone()).unwrap());
    assert!(!slave.topics().apply_from_master(decoded).unwrap());
    assert_eq!(slave.topics().wrapper(), master.topics().wrapper());
}

#[test]
fn group_apply_follows_the_same_rule_and_keeps_the_forbidden_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subscriptionGroup.json");
    fs::write(
        &path,
        r#"{"forbiddenTable":{"G":{"T":1}},"subscriptionGroupTable":{"Old":{"groupName":"Old"}}}"#,
    )
    .unwrap();
    let slave = SubscriptionGroupTable::open(&path).unwrap();
    let master = SubscriptionGroupWrapper {
        data_version: version(3),
        forbidden_table: None,
        subscription_group_table: [("G".to_string(), SubscriptionGroupConfig::new("G"))].into(),
    };
    assert!(slave.apply_from_master(master.clone()).unwrap());
    assert!(!slave.apply_from_master(master).unwrap());
    assert!(slave.contains("G") && !slave.contains("Old"));
    assert_eq!(slave.data_version(), version(3));
    let reopened = SubscriptionGroupTable::open(&path).unwrap().wrapper();
    assert_eq!(reopened.forbidden_table.unwrap()["G"]["T"], 1);
}

fn offsets(entries: &[(&str, &[(i32, i64)])]) -> ConsumerOffsetWrapper {
    ConsumerOffsetWrapper {
        data_version: Some(version(40)),
        offset_table: entries.iter().map(|(k, qs)| (k.to_string(), qs.iter().copied().collect())).collect(),
        rewind_table: Default::default(),
    }
}

#[test]
fn stale_master_offsets_never_move_the_slave_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("consumerOffset.json");
    let slave = ConsumerOffsetTable::open(&path).unwrap();
    // Consumers progressed on the slave while the master was down...
    slave.commit("G", "T", 0, 500);
    slave.commit("G", "T", 1, 80);
    slave.commit("SlaveOnly", "T", 0, 9);
    slave.persist().unwrap();

    // ...then the master came back with what it had before (RocketMQ issue #1094).
    let master = offsets(&[("T@G", &[(0, 100), (1, 120), (2, 7)]), ("T@Other", &[(0, 1)])]);
    assert!(slave.apply_from_master(&master).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(500), "never backwards");
    assert_eq!(slave.query("G", "T", 1), Some(120), "forwards is taken");
    assert_eq!(slave.query("G", "T", 2), Some(7), "new queue is taken");
    assert_eq!(slave.query("Other", "T", 0), Some(1), "new key is taken");
    assert_eq!(slave.query("SlaveOnly", "T", 0), Some(9), "slave-only key is kept");
    assert_eq!(slave.data_version(), version(40));
    assert!(!slave.is_dirty(), "persisted");
    assert_eq!(ConsumerOffsetTable::open(&path).unwrap().all(), slave.all());

    // Nothing new: nothing changes, nothing is written.
    assert!(!slave.apply_from_master(&master).unwrap());
}

#[test]
fn a_rewind_stamped_by_the_master_reaches_the_slave_once() {
    let dir = tempfile::tempdir().unwrap();
    let (master_path, path) = (dir.path().join("master.json"), dir.path().join("consumerOffset.json"));
    let master = ConsumerOffsetTable::open(&master_path).unwrap();
    let slave = ConsumerOffsetTable::open(&path).unwrap();
    assert!(!master.commit_as_master("G", "T", 0, 900), "a first commit is no rewind");
    master.commit_as_master("G", "T", 1, 40);
    master.commit_as_master("H", "T", 0, 70);
    assert!(slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!(master.rewound_at("G", "T"), None);

    // An operator resets G on the master: queue 0 back, queue 1 forward.
    assert!(master.commit_as_master("G", "T", 0, 100));
    assert!(!master.commit_as_master("G", "T", 1, 50));
    let stamp = master.rewound_at("G", "T").expect("stamped");
    let body = master.encode(rmqha_core::metadata::JsonStyle::Compact).unwrap();
    assert!(body.contains(&format!("\"rmqhaRewindTable\":{{\"T@G\":{stamp}}}")), "{body}");
    let sent = ConsumerOffsetWrapper::decode(body.as_bytes(), "GET_ALL_CONSUMER_OFFSET").unwrap();
    assert!(slave.apply_from_master(&sent).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(100), "the rewind is taken");
    assert_eq!(slave.query("G", "T", 1), Some(50));
    assert_eq!(slave.rewound_at("G", "T"), Some(stamp));

    // Consumers then commit on the slave while the master is away, and the master comes
    // back with what it had: the rewind is not taken again, and the merge keeps the slave's.
    slave.commit("G", "T", 0, 300);
    assert!(!slave.apply_from_master(&sent).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(300));
    // ...nor after the slave restarts: the stamp it took is on disk.
    let slave = ConsumerOffsetTable::open(&path).unwrap();
    assert_eq!((slave.query("G", "T", 0), slave.rewound_at("G", "T")), (Some(300), Some(stamp)));
    assert!(!slave.apply_from_master(&sent).unwrap());

    // A second rewind is taken, every queue as the master has it; other keys still merge.
    slave.commit("H", "T", 0, 90);
    assert!(master.commit_as_master("G", "T", 0, 20));
    let again = master.rewound_at("G", "T").unwrap();
    assert!(again > stamp, "stamps only grow ({again} after {stamp})");
    assert!(slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!((slave.query("G", "T", 0), slave.query("G", "T", 1)), (Some(20), Some(50)));
    assert_eq!(slave.query("H", "T", 0), Some(90), "an unstamped key is merged");

    // A plain commit (a slave's, or one the table is told is not a master's) stamps nothing.
    assert!(slave.commit("H", "T", 0, 10));
    assert_eq!(slave.rewound_at("H", "T"), None);
    // Removing a group forgets its stamps with its offsets.
    master.remove_group("G");
    assert_eq!(master.rewound_at("G", "T"), None);
    assert!(!master.encode(rmqha_core::metadata::JsonStyle::Compact).unwrap().contains("rmqhaRewindTable"));
}

/// A master deleting a group's offsets (DELETE_SUBSCRIPTIONGROUP with removeOffset, a topic's
/// deletion) stamps each key it removes; its slaves remove the key too, and take the offsets
/// the group commits afterwards as the master has them. Before, the slave kept the old
/// offsets, and its larger-offset merge kept them over the new, lower ones of a group
/// consuming again from the start.
#[test]
fn a_deletion_on_the_master_reaches_the_slave() {
    let dir = tempfile::tempdir().unwrap();
    let (master_path, path) = (dir.path().join("master.json"), dir.path().join("consumerOffset.json"));
    let master = ConsumerOffsetTable::open(&master_path).unwrap();
    let slave = ConsumerOffsetTable::open(&path).unwrap();
    master.commit_as_master("G", "T", 0, 100_000);
    master.commit_as_master("G", "U", 0, 7);
    master.commit_as_master("H", "T", 0, 70);
    assert!(slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(100_000));

    // Deleted on the master: gone from the slave at its next sync.
    assert_eq!(master.remove_group_as_master("G"), 2);
    assert!(master.rewound_at("G", "T").is_some(), "a tombstone");
    let body = master.encode(rmqha_core::metadata::JsonStyle::Compact).unwrap();
    let sent = ConsumerOffsetWrapper::decode(body.as_bytes(), "GET_ALL_CONSUMER_OFFSET").unwrap();
    assert!(slave.apply_from_master(&sent).unwrap());
    assert_eq!((slave.query("G", "T", 0), slave.query("G", "U", 0)), (None, None));
    assert_eq!(slave.query("H", "T", 0), Some(70));
    assert!(!slave.apply_from_master(&sent).unwrap(), "taken once");

    // The group consumes again from the start, on the master: the slave takes its offsets as
    // they are, not the larger ones it had.
    master.commit_as_master("G", "T", 0, 5);
    assert!(slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(5));
    // Then progress merges as ever.
    slave.commit("G", "T", 0, 9);
    assert!(!slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!(slave.query("G", "T", 0), Some(9));

    // A slave that missed the deletion (away while the group was deleted and consumed again)
    // takes the master's offsets too; the tombstone survives the master's restart.
    let late = ConsumerOffsetTable::open(dir.path().join("late.json")).unwrap();
    late.commit("G", "T", 0, 100_000);
    master.persist().unwrap();
    let master = ConsumerOffsetTable::open(&master_path).unwrap();
    assert!(late.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!(late.query("G", "T", 0), Some(5));

    // A topic's deletion stamps its keys the same way.
    assert_eq!(master.remove_topic_as_master("T"), 2);
    assert!(slave.apply_from_master(&master.wrapper()).unwrap());
    assert_eq!((slave.query("G", "T", 0), slave.query("H", "T", 0)), (None, None));
}

#[test]
fn offsets_from_a_4x_master_body_merge_too() {
    let dir = tempfile::tempdir().unwrap();
    let slave = ConsumerOffsetTable::open(dir.path().join("consumerOffset.json")).unwrap();
    let body = br#"{"offsetTable":{"T@G":{0:12,1:13}}}"#;
    let master = ConsumerOffsetWrapper::decode(body, "GET_ALL_CONSUMER_OFFSET").unwrap();
    let before = slave.data_version();
    assert!(slave.apply_from_master(&master).unwrap());
    assert_eq!(slave.query("G", "T", 1), Some(13));
    assert!(slave.data_version().counter > before.counter);
}

#[test]
fn delay_offsets_are_stored_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delayOffset.json");
    let slave = DelayOffsetTable::open(&path).unwrap();
    let body = "{\"offsetTable\":{1:3,2:1,18:0}}";
    assert!(slave.apply_from_master(body).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), body);
    assert_eq!(slave.offset(2), Some(1));
    assert!(!slave.apply_from_master(body).unwrap(), "same text: nothing to do");

    let reopened = DelayOffsetTable::open(&path).unwrap();
    assert_eq!(reopened.verbatim().as_deref(), Some(body));
    assert!(!reopened.apply_from_master(body).unwrap());

    // A body that does not decode changes nothing.
    let err = slave.apply_from_master("{\"offsetTable\":{1:").unwrap_err();
    assert!(matches!(err, MetadataError::Json { .. }), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), body);
    assert_eq!(slave.offset(1), Some(3));
}

fn offset_table() -> impl Strategy<Value = BTreeMap<String, QueueOffsets>> {
    proptest::collection::btree_map(
        "[ab]@[gh]",
        proptest::collection::btree_map(0..4i32, 0..1000i64, 0..4),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn merge_is_the_per_queue_maximum(local in offset_table(), master in offset_table()) {
        let dir = tempfile::tempdir().unwrap();
        let slave = ConsumerOffsetTable::open(dir.path().join("c.json")).unwrap();
        for (key, queues) in &local {
            let (topic, group) = key.split_once('@').unwrap();
            for (&q, &o) in queues {
                slave.commit(group, topic, q, o);
            }
        }
        let wrapper =
            ConsumerOffsetWrapper { data_version: None, offset_table: master.clone(), rewind_table: Default::default() };
        slave.apply_from_master(&wrapper).unwrap();
        let merged = slave.all();
        for (key, queues) in local.iter().chain(master.iter()) {
            for (q, o) in queues {
                prop_assert!(merged[key][q] >= *o);
            }
        }
        for (key, queues) in &merged {
            for (q, o) in queues {
                let l = local.get(key).and_then(|m| m.get(q));
                let m = master.get(key).and_then(|m| m.get(q));
                prop_assert_eq!(Some(o), l.max(m));
            }
        }
    }
}
