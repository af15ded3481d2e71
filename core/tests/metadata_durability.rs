//! What reaches the disk, and what a reopen finds, when the config files meet real-world
//! trouble: a byte order mark, a file the OS will not read, a corrupt file with a good
//! backup, and writes that fail and are retried.

use rmqha_core::metadata::{
    ConfigTables, MetadataError, SubscriptionGroupConfig, SubscriptionGroupTable, TopicConfig,
    TopicConfigTable, TopicConfigWrapper,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    s.into()
}

fn on_disk(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

fn topics_on_disk(path: &Path) -> Vec<String> {
    on_disk(path)["topicConfigTable"].as_object().unwrap().keys().cloned().collect()
}

/// The files beside `path` named `<name>.corrupt-<digits>`.
fn corrupt_copies(path: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}.corrupt-", path.file_name().unwrap().to_str().unwrap());
    let mut found: Vec<PathBuf> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    found.sort();
    found
}

const BOM: &str = "\u{feff}";

#[test]
fn a_byte_order_mark_is_skipped_in_every_file() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("config");
    fs::create_dir(&config).unwrap();
    // As a Windows editor saves fastjson's files: a BOM, then the document. The .bak files
    // hold something else, so a fallback to them would show.
    fs::write(
        config.join("topics.json"),
        format!("{BOM}{{\"dataVersion\":{{\"counter\":3,\"timestamp\":1}},\"topicConfigTable\":{{\"T\":{{\"topicName\":\"T\",\"readQueueNums\":3,\"writeQueueNums\":3}}}}}}"),
    )
    .unwrap();
    fs::write(config.join("topics.json.bak"), r#"{"topicConfigTable":{"OLD":{}}}"#).unwrap();
    fs::write(
        config.join("consumerOffset.json"),
        format!("{BOM}{{\"offsetTable\":{{\"T@G\":{{0:250,1:251\n}}}}}}"),
    )
    .unwrap();
    fs::write(config.join("delayOffset.json"), format!("{BOM}{{\"offsetTable\":{{1:3,2:1}}}}")).unwrap();
    fs::write(
        config.join("subscriptionGroup.json"),
        format!("{BOM}{{\"subscriptionGroupTable\":{{\"G\":{{\"groupName\":\"G\",\"retryMaxTimes\":3}}}}}}"),
    )
    .unwrap();

    let tables = ConfigTables::open(root.path()).unwrap();
    assert_eq!(tables.topics().get("T").unwrap().read_queue_nums, 3);
    assert!(!tables.topics().contains("OLD"), "loaded from the main file, not the .bak");
    assert_eq!(tables.topics().data_version().counter, 3);
    assert_eq!(tables.consumer_offsets().query("G", "T", 1), Some(251));
    assert_eq!(tables.delay_offsets().offset(1), Some(3));
    assert_eq!(tables.subscription_groups().get("G").unwrap().retry_max_times, 3);
    assert!(corrupt_copies(&config.join("topics.json")).is_empty(), "nothing was taken for corrupt");

    // Written back without the mark, and read back the same. (Delay offsets keep the text
    // they were loaded from, fastjson's bare keys included.)
    tables.persist_all().unwrap();
    for f in ["topics.json", "consumerOffset.json", "subscriptionGroup.json"] {
        let text = fs::read_to_string(config.join(f)).unwrap();
        assert!(!text.starts_with(BOM), "{f}");
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    assert_eq!(fs::read_to_string(config.join("delayOffset.json")).unwrap(), "{\"offsetTable\":{1:3,2:1}}");
    drop(tables);
    let again = ConfigTables::open(root.path()).unwrap();
    assert_eq!(again.topics().get("T").unwrap().read_queue_nums, 3);
    assert_eq!(again.consumer_offsets().query("G", "T", 0), Some(250));
    assert_eq!(again.delay_offsets().offset(2), Some(1));
    assert!(again.subscription_groups().contains("G"));
}

#[test]
fn an_unreadable_main_file_is_an_error_not_a_fallback_to_the_older_bak() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    {
        let t = TopicConfigTable::open(&path).unwrap();
        t.put_topic(TopicConfig::new("A")).unwrap();
        t.put_topic(TopicConfig::new("B")).unwrap();
    }
    // The OS refuses to read topics.json (tests run as root, where a mode of 000 does not
    // stop a read; a directory in its place fails the read with EISDIR): its content is not
    // known to be bad, so the older .bak (A only) must not be loaded in its place.
    let main = fs::read(&path).unwrap();
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    let bak_before = fs::read(sibling(&path, ".bak")).unwrap();

    let err = TopicConfigTable::open(&path).unwrap_err();
    match &err {
        MetadataError::Io { path: p, source, .. } => {
            assert_eq!(p, &path);
            assert_eq!(source.kind(), std::io::ErrorKind::IsADirectory, "{source}");
        }
        other => panic!("expected a read error, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("topics.json") && msg.contains("os error"), "{msg}");
    assert!(!msg.contains(".bak"), "the error is about the main file: {msg}");
    // Nothing was moved or rewritten.
    assert!(path.is_dir());
    assert_eq!(fs::read(sibling(&path, ".bak")).unwrap(), bak_before);
    assert!(corrupt_copies(&path).is_empty());

    // Once readable again, the newer content loads.
    fs::remove_dir(&path).unwrap();
    fs::write(&path, main).unwrap();
    let t = TopicConfigTable::open(&path).unwrap();
    assert!(t.contains("A") && t.contains("B"));
}

#[test]
fn a_corrupt_main_file_is_kept_aside_when_the_bak_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subscriptionGroup.json");
    {
        let t = SubscriptionGroupTable::open(&path).unwrap();
        t.put_group(SubscriptionGroupConfig::new("A")).unwrap();
        t.put_group(SubscriptionGroupConfig::new("B")).unwrap();
    }
    // A damaged main file: the .bak (A only) is older than what it held (A and B).
    let mut corrupt = fs::read(&path).unwrap();
    corrupt.truncate(corrupt.len() - 10);
    fs::write(&path, &corrupt).unwrap();

    let t = SubscriptionGroupTable::open(&path).unwrap();
    assert!(t.contains("A") && !t.contains("B"), "loaded from the .bak");
    let kept = corrupt_copies(&path);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(fs::read(&kept[0]).unwrap(), corrupt, "the corrupt bytes, untouched");
    assert!(!path.exists(), "moved, not copied");

    // Writes go on as before, and never touch the kept file.
    t.put_group(SubscriptionGroupConfig::new("C")).unwrap();
    t.put_group(SubscriptionGroupConfig::new("D")).unwrap();
    assert_eq!(fs::read(&kept[0]).unwrap(), corrupt);
    assert_eq!(corrupt_copies(&path), kept);
    drop(t);
    let again = SubscriptionGroupTable::open(&path).unwrap();
    assert!(again.contains("A") && again.contains("C") && again.contains("D") && !again.contains("B"));

    // A second corruption is kept under its own name.
    fs::write(&path, "{\"subscriptionGroupTable\":").unwrap();
    SubscriptionGroupTable::open(&path).unwrap();
    assert_eq!(corrupt_copies(&path).len(), 2);

    // An empty or blank main file holds nothing to keep.
    for blank in ["", " \n\t"] {
        fs::write(&path, blank).unwrap();
        SubscriptionGroupTable::open(&path).unwrap();
        assert_eq!(corrupt_copies(&path).len(), 2, "{blank:?}");
    }
}

#[test]
fn a_corrupt_main_file_without_a_usable_bak_is_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    fs::write(&path, "{\"topicConfigTable\":{").unwrap();
    assert!(matches!(TopicConfigTable::open(&path), Err(MetadataError::Unloadable { .. })));
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"topicConfigTable\":{");
    assert!(corrupt_copies(&path).is_empty());
}

/// A directory where `<file>.tmp` goes makes every write fail, before any rename.
fn break_writes(path: &Path) {
    fs::create_dir(sibling(path, ".tmp")).unwrap();
}

fn mend_writes(path: &Path) {
    fs::remove_dir(sibling(path, ".tmp")).unwrap();
}

#[test]
fn a_retried_topic_change_is_acknowledged_only_once_it_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    t.put_topic(TopicConfig::new("A")).unwrap();
    t.put_topic(TopicConfig::new("D")).unwrap();

    break_writes(&path);
    // put: the first attempt fails; the retry finds B already in memory, but B is not on
    // disk, so it must not be acknowledged.
    assert!(t.put_topic(TopicConfig::new("B")).is_err());
    assert!(t.put_topic(TopicConfig::new("B")).is_err(), "B is not on disk");
    // create_if_absent and delete likewise.
    assert!(t.create_if_absent(TopicConfig::new("C")).is_err());
    assert!(t.create_if_absent(TopicConfig::new("C")).is_err(), "C is not on disk");
    assert!(t.delete_topic("D").is_err());
    assert!(t.delete_topic("D").is_err(), "D is still on disk");
    assert_eq!(topics_on_disk(&path), ["A", "D"]);

    mend_writes(&path);
    assert_eq!(t.put_topic(TopicConfig::new("B")).unwrap(), Some(TopicConfig::new("B")));
    assert_eq!(topics_on_disk(&path), ["A", "B", "C"], "the retry wrote what memory holds");
    assert_eq!(t.create_if_absent(TopicConfig::new("C")).unwrap(), (TopicConfig::new("C"), false));
    assert_eq!(t.delete_topic("D").unwrap(), None);
    assert!(!t.is_dirty());
    drop(t);
    let again = TopicConfigTable::open(&path).unwrap();
    assert_eq!(again.all().keys().collect::<Vec<_>>(), ["A", "B", "C"]);
}

#[test]
fn each_retry_kind_writes_the_table_once_writes_work_again() {
    // The same three retries, each the first call after the disk recovers.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subscriptionGroup.json");
    let t = SubscriptionGroupTable::open(&path).unwrap();
    t.put_group(SubscriptionGroupConfig::new("A")).unwrap();
    let groups_on_disk =
        || on_disk(&path)["subscriptionGroupTable"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();

    break_writes(&path);
    assert!(t.create_if_absent(SubscriptionGroupConfig::new("B")).is_err());
    mend_writes(&path);
    assert!(!t.create_if_absent(SubscriptionGroupConfig::new("B")).unwrap().1);
    assert_eq!(groups_on_disk(), ["A", "B"]);

    break_writes(&path);
    assert!(t.delete_group("A").is_err());
    mend_writes(&path);
    assert_eq!(t.delete_group("A").unwrap(), None);
    assert_eq!(groups_on_disk(), ["B"]);

    let mut c = SubscriptionGroupConfig::new("C");
    c.retry_max_times = 5;
    break_writes(&path);
    assert!(t.put_group(c.clone()).is_err());
    mend_writes(&path);
    t.put_group(c).unwrap();
    assert_eq!(on_disk(&path)["subscriptionGroupTable"]["C"]["retryMaxTimes"], 5);
    assert!(!t.is_dirty());
}

#[test]
fn a_repeated_sync_from_the_master_is_done_only_once_it_is_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    let t = TopicConfigTable::open(&path).unwrap();
    t.put_topic(TopicConfig::new("LOCAL")).unwrap();
    let master = TopicConfigWrapper::decode(
        br#"{"dataVersion":{"counter":9,"timestamp":5},"topicConfigTable":{"M":{}}}"#,
        "master",
    )
    .unwrap();

    break_writes(&path);
    assert!(t.apply_from_master(master.clone()).is_err());
    assert!(t.apply_from_master(master.clone()).is_err(), "the master's table is not on disk");
    assert_eq!(topics_on_disk(&path), ["LOCAL"]);
    mend_writes(&path);
    assert!(!t.apply_from_master(master).unwrap(), "nothing new");
    assert_eq!(topics_on_disk(&path), ["M"]);
    assert_eq!(on_disk(&path)["dataVersion"]["counter"], 9);
}
