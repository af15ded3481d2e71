//! Each table survives a reopen; a corrupt or empty file falls back to its `.bak`; a write
//! that fails midway leaves the previous file intact.

use rmqha_core::metadata::{
    ConfigTables, ConsumerOffsetTable, DelayOffsetTable, JsonStyle, MetadataError, SubscriptionGroupConfig,
    SubscriptionGroupTable, TopicConfig, TopicConfigTable,
};
use std::fs;
use std::path::{Path, PathBuf};

fn bak(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".bak");
    s.into()
}

fn tmp(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    s.into()
}

#[test]
fn every_table_round_trips_through_its_file() {
    let root = tempfile::tempdir().unwrap();
    let (topic_version, group_version) = {
        let t = ConfigTables::open(root.path()).unwrap();
        assert!(t.config_dir().is_dir(), "config/ is created");
        let mut topic = TopicConfig::with_queues("T", 8, 4, TopicConfig::PERM_READ);
        topic.order = true;
        topic.attributes.insert("+message.type".into(), "FIFO".into());
        t.topics().put_topic(topic).unwrap();
        t.topics().put_topic(TopicConfig::new("U")).unwrap();
        let mut group = SubscriptionGroupConfig::new("G");
        group.retry_max_times = 3;
        t.subscription_groups().put_group(group).unwrap();
        t.consumer_offsets().commit("G", "T", 0, 11);
        t.consumer_offsets().commit("G", "T", 3, 33);
        t.delay_offsets().update_offset(1, 5);
        t.delay_offsets().update_offset(18, 7);
        t.persist_all().unwrap();
        (t.topics().data_version(), t.subscription_groups().data_version())
    };
    let t = ConfigTables::open(root.path()).unwrap();
    let topic = t.topics().get("T").unwrap();
    assert_eq!((topic.read_queue_nums, topic.write_queue_nums, topic.perm), (8, 4, 4));
    assert!(topic.order);
    assert_eq!(topic.attributes["+message.type"], "FIFO");
    assert_eq!(t.topics().len(), 2);
    assert_eq!(t.topics().data_version(), topic_version);
    assert_eq!(t.subscription_groups().get("G").unwrap().retry_max_times, 3);
    assert_eq!(t.subscription_groups().data_version(), group_version);
    assert_eq!(t.consumer_offsets().query("G", "T", 3), Some(33));
    assert_eq!(t.consumer_offsets().query("G", "T", 1), None);
    assert_eq!(t.delay_offsets().all(), [(1, 5), (18, 7)].into());
}

#[test]
fn topic_changes_bump_the_version_and_persist_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    let v0 = t.data_version();
    assert_eq!(t.put_topic(TopicConfig::new("T")).unwrap(), None);
    let v1 = t.data_version();
    assert_eq!(v1.counter, v0.counter + 1);
    assert!(!t.is_dirty());
    assert!(TopicConfigTable::open(&path).unwrap().contains("T"));

    // Putting the same config again is not a change.
    t.put_topic(TopicConfig::new("T")).unwrap();
    assert_eq!(t.data_version(), v1);

    let (existing, created) = t.create_if_absent(TopicConfig::with_queues("T", 1, 1, 6)).unwrap();
    assert!(!created);
    assert_eq!(existing.read_queue_nums, 16);

    assert!(t.delete_topic("T").unwrap().is_some());
    assert_eq!(t.data_version().counter, v1.counter + 1);
    assert!(t.delete_topic("T").unwrap().is_none());
    assert_eq!(t.data_version().counter, v1.counter + 1);
    assert!(!TopicConfigTable::open(&path).unwrap().contains("T"));

    let err = t.put_topic(TopicConfig::new("")).unwrap_err();
    assert!(matches!(err, MetadataError::Invalid { .. }), "{err}");
}

#[test]
fn seeded_topics_yield_to_existing_ones_and_are_not_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    t.put_topic(TopicConfig::with_queues("SCHEDULE_TOPIC_XXXX", 4, 4, 6)).unwrap();
    let v = t.data_version();
    let added = t.seed_if_absent([
        TopicConfig::with_queues("SCHEDULE_TOPIC_XXXX", 18, 18, 6),
        TopicConfig::with_queues("SELF_TEST_TOPIC", 1, 1, 6),
    ]);
    assert_eq!(added, 1);
    assert_eq!(t.get("SCHEDULE_TOPIC_XXXX").unwrap().read_queue_nums, 4);
    assert_eq!(t.data_version(), v);
    assert!(!TopicConfigTable::open(&path).unwrap().contains("SELF_TEST_TOPIC"));
}

#[test]
fn corrupt_main_file_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subscriptionGroup.json");
    {
        let t = SubscriptionGroupTable::open(&path).unwrap();
        t.put_group(SubscriptionGroupConfig::new("A")).unwrap();
        t.put_group(SubscriptionGroupConfig::new("B")).unwrap();
    }
    // The .bak holds the state before the last write: only A.
    fs::write(&path, "{\"subscriptionGroupTable\":{\"A\":{").unwrap();
    let t = SubscriptionGroupTable::open(&path).unwrap();
    assert!(t.contains("A"));
    assert!(!t.contains("B"));

    // The next write replaces the corrupt file but keeps the good backup.
    t.put_group(SubscriptionGroupConfig::new("C")).unwrap();
    let from_bak: serde_json::Value = serde_json::from_str(&fs::read_to_string(bak(&path)).unwrap()).unwrap();
    assert!(from_bak["subscriptionGroupTable"]["A"].is_object());
    assert!(SubscriptionGroupTable::open(&path).unwrap().contains("C"));
}

#[test]
fn empty_main_file_falls_back_to_bak() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("consumerOffset.json");
    {
        let t = ConsumerOffsetTable::open(&path).unwrap();
        t.commit("G", "T", 0, 1);
        t.persist().unwrap();
        t.commit("G", "T", 0, 2);
        t.persist().unwrap();
    }
    fs::write(&path, "").unwrap();
    let t = ConsumerOffsetTable::open(&path).unwrap();
    assert_eq!(t.query("G", "T", 0), Some(1));
}

#[test]
fn both_files_corrupt_is_an_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    fs::write(&path, "{not json").unwrap();
    fs::write(bak(&path), "[]").unwrap();
    let err = TopicConfigTable::open(&path).unwrap_err();
    match &err {
        MetadataError::Unloadable { path: p, bak_path, reason, .. } => {
            assert_eq!(p, &path);
            assert_eq!(bak_path, &bak(&path));
            assert!(reason.contains("line 1"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // And the error reaches the crate-level error type.
    let top: rmqha_core::Error = err.into();
    assert!(top.to_string().contains("topics.json.bak"));
}

#[test]
fn failed_write_leaves_the_old_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    t.put_topic(TopicConfig::new("A")).unwrap();
    let before = fs::read(&path).unwrap();

    fs::create_dir(tmp(&path)).unwrap();
    let err = t.put_topic(TopicConfig::new("B")).unwrap_err();
    assert!(matches!(err, MetadataError::Io { .. }), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before, "old file untouched");
    assert!(t.contains("B"), "the change is kept in memory");
    assert!(t.is_dirty(), "and waits to be written");

    fs::remove_dir(tmp(&path)).unwrap();
    assert!(t.persist_if_dirty().unwrap());
    assert!(TopicConfigTable::open(&path).unwrap().contains("B"));
}

#[test]
fn offsets_persist_only_when_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delayOffset.json");
    let t = DelayOffsetTable::open(&path).unwrap();
    assert!(!t.persist_if_dirty().unwrap());
    assert!(!path.exists());
    t.update_offset(2, 9);
    t.update_offset(2, 9);
    assert!(t.is_dirty());
    assert!(t.persist_if_dirty().unwrap());
    assert!(!t.persist_if_dirty().unwrap());
    assert_eq!(DelayOffsetTable::open(&path).unwrap().offset(2), Some(9));
}

#[test]
fn files_are_pretty_and_bodies_compact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    t.put_topic(TopicConfig::new("T")).unwrap();
    assert!(fs::read_to_string(&path).unwrap().contains("\n  \"topicConfigTable\""));
    let body = t.encode(JsonStyle::Compact).unwrap();
    assert!(!body.contains('\n'));
    assert!(body.starts_with("{\"dataVersion\":{\"counter\":"), "{body}");
}

#[test]
fn concurrent_writers_all_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let table = TopicConfigTable::open(&path).unwrap();
    let start = table.data_version().counter;
    std::thread::scope(|s| {
        for t in 0..4 {
            let table = &table;
            s.spawn(move || {
                for i in 0..3 {
                    table.put_topic(TopicConfig::new(format!("T{t}-{i}"))).unwrap();
                }
            });
        }
    });
    assert_eq!(table.data_version().counter, start + 12);
    let reopened = TopicConfigTable::open(&path).unwrap();
    assert_eq!(reopened.len(), 12);
    assert_eq!(reopened.data_version(), table.data_version());
}
