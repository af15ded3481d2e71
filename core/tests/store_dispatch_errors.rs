//! A dispatch that cannot write says where: the ConsumeQueue (topic, queue id, directory) or
//! the index directory, not a bare OS error ("No space left on device") that leaves the
//! operator to guess which of thousands of files failed.

mod common;

use common::{message, store_config};
use rmqha_core::MessageStore;

#[test]
fn a_failing_dispatch_names_the_queue_and_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[]);
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    store.put_message_sync(&message("Blocked", 3, 0, 10)).unwrap();
    assert!(store.wait_dispatched(std::time::Duration::from_secs(10)));
    store.shutdown();
    drop(store);
    // The queue's directory is gone and a file stands where it must be made again: recovery
    // re-dispatches the record at start, and the queue cannot be created.
    let topic_dir = dir.path().join("consumequeue").join("Blocked");
    std::fs::remove_dir_all(&topic_dir).unwrap();
    std::fs::write(&topic_dir, b"not a directory").unwrap();
    let store = MessageStore::open(cfg).unwrap();
    let err = store.start().unwrap_err().to_string();
    assert!(err.contains("ConsumeQueue Blocked/3"), "{err}");
    assert!(err.contains(&topic_dir.join("3").display().to_string()), "{err}");
    // Stopping does not wait out its 5 s for a dispatch that cannot move.
    let stopping = std::time::Instant::now();
    store.shutdown();
    assert!(stopping.elapsed() < std::time::Duration::from_secs(4), "{:?}", stopping.elapsed());
}

/// A failed ConsumeQueue flush: the kernel marks the pages of a failed writeback clean, so a
/// later flush "succeeds" without having written them. The checkpoint then claimed every
/// unit flushed, and a clean stop removed the abort file, so the next start trusted queues
/// that may lack units. Now the checkpoint's queue fields stay where they were before the
/// failure, and the abort file stays: the next start recovers and repairs the queues.
#[test]
fn a_failed_queue_flush_is_never_claimed_by_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[("flushConsumeQueueThoroughInterval", "50")]);
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    for i in 0..5 {
        store.put_message_sync(&message("Q", 0, i, 10)).unwrap();
    }
    let before = store.max_offset();
    // Thorough rounds write the checkpoint's logics offset (rmqha's field at byte 40).
    assert!(common::wait_until(std::time::Duration::from_secs(10), || {
        store.checkpoint().get().logics_offset == before
    }));
    store.consume_queues().inject_flush_failure();
    assert!(common::wait_until(std::time::Duration::from_secs(10), || store.consume_queues().flush_failed()));
    for i in 5..10 {
        store.put_message_sync(&message("Q", 0, i, 10)).unwrap();
    }
    assert!(store.wait_dispatched(std::time::Duration::from_secs(10)));
    store.shutdown();
    assert_eq!(
        common::checkpoint_field(dir.path(), 40),
        before,
        "the last offset flushed before the failure"
    );
    assert!(dir.path().join("abort").exists(), "the next start recovers");
    drop(store);
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert_eq!(store.get_messages("Q", 0, 0, 32).messages().len(), 10);
    store.shutdown();
}
