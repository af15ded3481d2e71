//! Consumer offsets stay within their queues: a commit past a queue's end or for a queue that
//! does not exist is refused by every API (the wire path refused the unknown ones already),
//! and a master's start moves offsets that recovery left past their queue's end back to it.
//! (From an audit of the query and offset APIs; RocketMQ 4.9 checks none of this.)

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{broker_config, message};
use rmqha_core::Broker;
use rmqha_core::store::GetMessageStatus;

fn master(dir: &std::path::Path) -> Arc<Broker> {
    Broker::start_master(broker_config(dir, "ASYNC_MASTER", &[])).unwrap()
}

/// Before, a commit of 1,000,000 on a queue ending at 10 was kept; a consumer resuming there
/// was answered OFFSET_OVERFLOW_BADLY and sent back to offset 0 (the whole queue again).
#[test]
fn a_commit_past_the_queue_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("T", 1).unwrap();
    for i in 0..10 {
        b.put_message_sync(&message("T", 0, i, 50)).unwrap();
    }
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    assert_eq!(b.queue_max_offset("T", 0), 10);
    let e = b.commit_consumer_offset("G", "T", 0, 1_000_000).unwrap_err().to_string();
    assert!(e.contains("past the end of queue T:0 (10)"), "{e}");
    assert_eq!(b.consumer_offset("G", "T", 0), -1, "nothing kept");
    // The end itself is a consumer that has taken everything.
    b.commit_consumer_offset("G", "T", 0, 10).unwrap();
    assert_eq!(b.consumer_offset("G", "T", 0), 10);
    b.shutdown();
}

/// The Rust, C, Python and Node APIs kept these; each kept offset is persisted and mirrored.
/// A queue exists when its topic's config names it or it holds messages (a topic put to
/// through the API has no config).
#[test]
fn a_commit_for_a_topic_or_queue_that_does_not_exist_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("T", 1).unwrap();
    b.commit_consumer_offset("G", "T", 0, 0).unwrap();
    b.put_message_sync(&message("NoConfig", 2, 0, 50)).unwrap();
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("G", "NoConfig", 2, 1).unwrap();
    let e = b.commit_consumer_offset("G", "NoConfig", 1, 0).unwrap_err().to_string();
    assert!(e.contains("queue NoConfig:1 does not exist"), "{e}");
    let e = b.commit_consumer_offset("G", "NoSuchTopic", 0, 0).unwrap_err().to_string();
    assert!(e.contains("queue NoSuchTopic:0 does not exist"), "{e}");
    let e = b.commit_consumer_offset("G", "T", 999, 0).unwrap_err().to_string();
    assert!(e.contains("queue T:999 does not exist"), "{e}");
    assert_eq!((b.consumer_offset("G", "NoSuchTopic", 0), b.consumer_offset("G", "T", 999)), (-1, -1));
    b.shutdown();
}

/// A recovery that drops the log's tail (a power cut with ASYNC_FLUSH, a torn or zeroed
/// tail) left committed offsets past the queue's new end. Once producers refilled the lost
/// offsets, a consumer resuming at the old offset skipped the new messages there.
#[test]
fn a_master_moves_offsets_past_a_recovered_queue_end_back_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("T", 1).unwrap();
    b.create_topic("Kept", 1).unwrap();
    let mut puts = Vec::new();
    for i in 0..10 {
        puts.push(b.put_message_sync(&message("T", 0, i, 50)).unwrap());
    }
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("G", "T", 0, 10).unwrap();
    b.commit_consumer_offset("H", "T", 0, 3).unwrap();
    b.commit_consumer_offset("G", "Kept", 0, 0).unwrap();
    b.shutdown();
    drop(b);
    // The last 5 records never reached the disk.
    let first_lost = puts[5].phy_offset;
    let end = puts[9].phy_offset + puts[9].size as i64;
    let (file, pos) = common::commit_log_file(dir.path(), first_lost as u64, 65536);
    common::patch(&file, pos, &vec![0u8; (end - first_lost) as usize]);

    let b = master(dir.path());
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    assert_eq!(b.queue_max_offset("T", 0), 5, "the tail was recovered away");
    assert_eq!(b.consumer_offset("G", "T", 0), 5, "moved back to the queue's end");
    assert_eq!(b.consumer_offset("H", "T", 0), 3, "an offset within the queue stays");
    assert_eq!(b.consumer_offset("G", "Kept", 0), 0);
    // Producers go on: offsets 5..9 hold new messages, and the consumer gets every one.
    for i in 100..105 {
        b.put_message_sync(&message("T", 0, i, 50)).unwrap();
    }
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let resumed = b.get_messages("T", 0, b.consumer_offset("G", "T", 0), 32);
    assert_eq!(resumed.status, GetMessageStatus::Found);
    assert_eq!(resumed.messages().len(), 5);
    b.shutdown();
    // Moved on disk too.
    let b = master(dir.path());
    assert_eq!(b.consumer_offset("G", "T", 0), 5);
    b.shutdown();
}
