//! The checkpoint's `physicMsgTimestamp` says how far the CommitLog is on disk: after an OS
//! crash, recovery starts at the newest file whose first record is older than it (less 3 s)
//! and trusts every file before that one. So it must never name a record that is not flushed
//! yet. RocketMQ's flushers copy the newest *appended* record's timestamp after a flush, also
//! after one that flushed nothing (fewer dirty pages than `flushCommitLogLeastPages`), and its
//! slaves set it when they dispatch a record, flushed or not.

mod common;

use std::time::{Duration, Instant};

use common::{broker_config, message, slave_of, store_config, wait_until};
use rmqha_core::{MessageStore, PutResult};

/// A flush that lags: nothing is flushed until 4 MiB are dirty or someone calls `flush`.
const LAGGING_FLUSH: [(&str, &str); 4] = [
    ("flushIntervalCommitLog", "10"),
    ("flushCommitLogLeastPages", "1024"),
    ("flushCommitLogThoroughInterval", "600000"),
    ("flushCommitLogTimed", "true"),
];

/// Every record the checkpoint's timestamp covers must lie below the flushed offset.
fn check_covered(store: &MessageStore, puts: &[PutResult]) {
    // The timestamp first: the flushed offset only grows, so a later read can only help.
    let physic = store.checkpoint().get().physic_msg_timestamp;
    let flushed = store.flushed_offset();
    for r in puts {
        if r.store_timestamp <= physic {
            assert!(
                r.phy_offset + r.size as i64 <= flushed,
                "physicMsgTimestamp {physic} covers the record at {} (stored at {}), but only {flushed} bytes are flushed",
                r.phy_offset,
                r.store_timestamp
            );
        }
    }
}

/// Checks `check_covered` every few milliseconds for `how_long` (several flush rounds).
fn keep_checking(store: &MessageStore, puts: &[PutResult], how_long: Duration) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        check_covered(store, puts);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Once every record is on disk, the timestamp moves up to the millisecond before the last
/// one's (more records of that millisecond could still come).
fn flush_and_catch_up(store: &MessageStore, puts: &[PutResult]) {
    store.flush().unwrap();
    let last = puts.last().unwrap().store_timestamp;
    assert!(
        wait_until(Duration::from_secs(10), || store.checkpoint().get().physic_msg_timestamp >= last - 1),
        "physicMsgTimestamp stays at {} after a flush of every record (last stored at {last})",
        store.checkpoint().get().physic_msg_timestamp
    );
    check_covered(store, puts);
}

/// Puts spread over a few milliseconds, so that they carry several timestamps.
fn put_some(put: impl Fn(usize) -> PutResult, n: usize) -> Vec<PutResult> {
    let mut out = Vec::new();
    let start = Instant::now();
    let mut i = 0;
    while i < n || start.elapsed() < Duration::from_millis(30) {
        out.push(put(i));
        i += 1;
    }
    out
}

#[test]
fn a_master_checkpoint_names_only_flushed_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &LAGGING_FLUSH)).unwrap();
    store.start().unwrap();
    let puts = put_some(|i| store.put_message_sync(&message("Cp", 0, i, 100)).unwrap(), 100);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    keep_checking(&store, &puts, Duration::from_millis(300));

    flush_and_catch_up(&store, &puts);
}

#[test]
fn a_slave_checkpoint_names_only_flushed_records() {
    let dir = tempfile::tempdir().unwrap();
    let master =
        rmqha_core::Broker::start_master(broker_config(&dir.path().join("m"), "ASYNC_MASTER", &[])).unwrap();
    let slave = slave_of(&dir.path().join("s"), &master, &LAGGING_FLUSH);
    let puts = put_some(|i| master.put_message_sync(&message("Cp", 0, i, 100)).unwrap(), 100);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let store = slave.store();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    keep_checking(store, &puts, Duration::from_millis(300));

    flush_and_catch_up(store, &puts);
}

/// A thorough ConsumeQueue flush (every flushConsumeQueueThoroughInterval, and at shutdown,
/// after which the checkpoint's logicsMsgTimestamp claims every dispatched unit) flushed one
/// file per queue, as RocketMQ's does: the units of a queue that had moved into its next file
/// since the last one stayed in the page cache, and an OS crash after a clean stop lost them.
#[test]
fn a_thorough_consume_queue_flush_covers_every_file_of_a_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(
        dir.path(),
        &[
            ("mappedFileSizeConsumeQueue", "200"),
            ("flushIntervalConsumeQueue", "3600000"),
            ("flushConsumeQueueThoroughInterval", "3600000"),
        ],
    ))
    .unwrap();
    store.start().unwrap();
    for i in 0..25 {
        store.put_message_sync(&message("Cq", 0, i, 100)).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    let cq = store.consume_queues().find("Cq", 0).unwrap();
    assert_eq!(cq.files().file_count(), 3);
    assert_eq!(cq.files().flushed_where(), 25 * 20, "units flushed at shutdown, in bytes");
}
