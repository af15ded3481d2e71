//! Recovery from a torn or corrupt CommitLog tail (spec 3.6, 3.7).
//!
//! How an unclean exit is made: a store runs, takes puts, is flushed, and its whole directory
//! is copied *while it is still running*. The copy is what a power cut right after that flush
//! leaves: every acknowledged byte in the CommitLog files, the `abort` file present, a stale
//! checkpoint, ConsumeQueues and index as far as they were dispatched. (Dropping a store is no
//! crash: `Drop` shuts it down cleanly.) The last record of the copy is then damaged the way a
//! torn write damages it, by zeroing it from some byte on, at every byte of the record, or by
//! flipping bytes in the fields the format can check. Each damaged copy is opened on its own.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{checkpoint_field, commit_log_file, copy_dir, message, patch, store_config};
use rmqha_core::store::GetMessageStatus;
use rmqha_core::{BrokerConfig, Message, MessageStore, PutResult, PutStatus};

const TOPIC: &str = "Rec";
const FILE: u64 = 65536;
const QUEUES: i32 = 3;

struct Snapshot {
    dir: tempfile::TempDir,
    /// Every put before the last one: result and body.
    before: Vec<(PutResult, Vec<u8>)>,
    last: PutResult,
    last_len: usize,
    /// Written with `enabledAppendPropCRC`.
    crc: bool,
}

fn config(dir: &Path) -> BrokerConfig {
    config_crc(dir, false)
}

fn config_crc(dir: &Path, crc: bool) -> BrokerConfig {
    store_config(dir, if crc { &[("enabledAppendPropCRC", "true")] } else { &[] })
}

fn record_len_crc(msg: &Message, crc: bool) -> usize {
    let host: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let p = rmqha_core::message::PreparedMessage::prepare(msg, &host, 1 << 22, 1).unwrap();
    p.with_record_crc(crc).unwrap().total_len
}

/// The small record that ends every snapshot (tags but no keys: every byte matters).
fn last_message() -> Message {
    Message::new(TOPIC, &b"last-record-body"[..]).with_queue(1).with_tags("A")
}

/// Puts ~1.1 files of messages and a small last record, then copies the running store.
/// With `last_opens_a_file` the last record is the first one of a new file.
fn snapshot(last_opens_a_file: bool, clean_exit: bool) -> Snapshot {
    snapshot_with(last_opens_a_file, clean_exit, false)
}

fn snapshot_with(last_opens_a_file: bool, clean_exit: bool, crc: bool) -> Snapshot {
    let src = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config_crc(src.path(), crc)).unwrap();
    store.start().unwrap();
    let mut before = Vec::new();
    let last_len = record_len_crc(&last_message(), crc);
    let mut i = 0usize;
    while store.max_offset() < (FILE + 8_000) as i64 {
        let m = message(TOPIC, (i % QUEUES as usize) as i32, i, 300);
        let r = store.put_message_sync(&m).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        before.push((r, m.body));
        i += 1;
    }
    if last_opens_a_file {
        // Fill the file so that exactly last_len + 4 bytes remain: the last record then needs
        // a BLANK and a new file.
        let remaining = FILE - store.max_offset() as u64 % FILE;
        let overhead = record_len_crc(&Message::new(TOPIC, Vec::new()), crc);
        let body = remaining as usize - (last_len + 4) - overhead;
        let m = Message::new(TOPIC, vec![b'f'; body]).with_queue(2);
        let r = store.put_message_sync(&m).unwrap();
        assert_eq!(r.end_offset() as u64 % FILE, FILE - (last_len + 4) as u64);
        before.push((r, m.body));
    }
    let last = store.put_message_sync(&last_message()).unwrap();
    assert_eq!(last.size as usize, last_len);
    if last_opens_a_file {
        assert_eq!(last.phy_offset as u64 % FILE, 0, "the last record opens a file");
    } else {
        assert_ne!(last.phy_offset as u64 % FILE, 0);
    }
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset(TOPIC, 1), last.queue_offset + 1);
    let dir = tempfile::tempdir().unwrap();
    if clean_exit {
        store.shutdown();
        drop(store);
        copy_dir(src.path(), dir.path());
        assert!(!dir.path().join("abort").exists());
    } else {
        copy_dir(src.path(), dir.path()); // the store is running: a crash image
        assert!(dir.path().join("abort").exists());
        drop(store);
    }
    Snapshot { dir, before, last, last_len, crc }
}

fn expected_queue_len(s: &Snapshot, q: i32) -> i64 {
    s.before.iter().filter(|(r, _)| r.queue_id == q).count() as i64
}

/// Copies the snapshot, lets `damage` change the last record (given the CommitLog file and the
/// record's position in it), opens the copy and checks what recovery did.
fn recover_damaged(s: &Snapshot, what: &str, full: bool, damage: impl FnOnce(&Path, usize)) {
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    let last = &s.last;
    let (file, pos) = commit_log_file(work.path(), last.phy_offset as u64, FILE);
    damage(&file, pos);
    let damaged_tail = std::fs::read(&file).unwrap()[pos..].iter().any(|&b| b != 0);

    let store = MessageStore::open(config_crc(work.path(), s.crc)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let rec = store.recovery().clone();
    assert_eq!(rec.last_exit_ok, !s.dir.path().join("abort").exists(), "{what}");
    assert_eq!(
        rec.recovered_offset, last.phy_offset as u64,
        "{what}: the log ends after the last good record"
    );
    assert_eq!(rec.torn_tail, damaged_tail, "{what}");
    assert_eq!(store.max_offset(), last.phy_offset, "{what}");
    // The damaged bytes are gone from the disk, not just from memory.
    let on_disk = std::fs::read(&file).unwrap();
    assert_eq!(on_disk.len() as u64, FILE, "{what}: files keep their size");
    assert!(on_disk[pos..].iter().all(|&b| b == 0), "{what}: bytes after the last good record are zeroed");
    assert_eq!(checkpoint_field(work.path(), 32), last.phy_offset, "{what}: checkpoint confirm offset");
    // The ConsumeQueue that held the damaged record shrinks; the others keep every unit.
    for q in 0..QUEUES {
        assert_eq!(store.queue_max_offset(TOPIC, q), expected_queue_len(s, q), "{what}: queue {q}");
    }
    if !full {
        return;
    }
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    // Every record before the damaged one is intact, by offset and through its queue.
    for (r, body) in &s.before {
        let m =
            store.message_at(r.phy_offset).unwrap_or_else(|| panic!("{what}: record at {}", r.phy_offset));
        assert_eq!((&m.body, m.queue_offset), (body, r.queue_offset), "{what}");
    }
    for q in 0..QUEUES {
        let want: Vec<&(PutResult, Vec<u8>)> = s.before.iter().filter(|(r, _)| r.queue_id == q).collect();
        let mut off = 0i64;
        while (off as usize) < want.len() {
            let got = store.get_messages(TOPIC, q, off, 32);
            assert_eq!(got.status, GetMessageStatus::Found, "{what}: queue {q} at {off}");
            for m in got.messages() {
                assert_eq!(m.body, want[off as usize].1, "{what}: queue {q} at {off}");
                off += 1;
            }
        }
        assert_eq!(store.get_messages(TOPIC, q, off, 32).status, GetMessageStatus::OffsetOverflowOne);
    }
    // The index was rebuilt for what survived.
    let k = s.before.len() / 2;
    let found = store.query_by_key(TOPIC, &format!("key-{k}"), 10, 0, i64::MAX);
    assert_eq!(found.len(), 1, "{what}: query by key after recovery");
    assert_eq!(found[0].phy_offset, s.before[k].0.phy_offset);
    // New puts continue where the good data ends, in the log and in the queue.
    let again = store.put_message_sync(&last_message()).unwrap();
    assert_eq!(again.status, PutStatus::PutOk);
    assert_eq!((again.phy_offset, again.queue_offset), (last.phy_offset, last.queue_offset), "{what}");
    let cfg = store.config().clone();
    store.shutdown();
    drop(store);
    let reopened = MessageStore::open(cfg).unwrap();
    assert!(reopened.recovery().last_exit_ok);
    assert_eq!(reopened.max_offset(), again.end_offset(), "{what}: the new record survives a restart");
}

/// Zeroes the last record from each of `cuts` on.
fn cut_at(s: &Snapshot, label: &str, cuts: impl IntoIterator<Item = usize>) {
    for cut in cuts {
        let what = format!("{label}: zeroed from byte {cut} of {}", s.last_len);
        // A full restart-and-put check on a sample, the on-disk checks at every byte.
        let full = cut % 17 == 0 || cut + 1 == s.last_len;
        recover_damaged(s, &what, full, |file, pos| {
            patch(file, pos + cut, &vec![0u8; s.last_len - cut]);
        });
    }
}

#[test]
fn torn_last_record_is_cut_at_every_byte_of_its_tail() {
    // Every byte from the body length on (body, topic, properties: where a cut is hardest to
    // see), and every 8th byte of the fixed header (a cut there zeroes the body length too).
    let s = snapshot(false, false);
    cut_at(&s, "crash", (0..84).step_by(8).chain(84..s.last_len));
}

#[test]
fn torn_first_record_of_a_file_is_cut() {
    // The damaged record is alone in the newest file, after the previous file's BLANK.
    let s = snapshot(true, false);
    cut_at(&s, "crash, record opening a file", (0..s.last_len).step_by(6).chain([s.last_len - 1]));
}

#[test]
fn corrupt_checked_fields_of_the_last_record_are_cut() {
    let s = snapshot(false, false);
    let body_len = b"last-record-body".len();
    let topic_at = 84 + 4 + body_len + 1;
    let mut positions: Vec<(usize, &str)> = Vec::new();
    positions.extend((0..4).map(|i| (i, "TOTALSIZE")));
    positions.extend((4..8).map(|i| (i, "MAGICCODE")));
    positions.extend((8..12).map(|i| (i, "BODYCRC")));
    positions.extend((28..36).map(|i| (i, "PHYSICALOFFSET")));
    positions.extend((84..88).map(|i| (i, "BODYLENGTH")));
    positions.extend((88..88 + body_len).map(|i| (i, "BODY")));
    positions.push((88 + body_len, "TOPICLENGTH"));
    positions.extend((topic_at..topic_at + TOPIC.len()).map(|i| (i, "TOPIC")));
    positions.extend((topic_at + TOPIC.len()..topic_at + TOPIC.len() + 2).map(|i| (i, "PROPERTIESLENGTH")));
    // Fields outside the CRC and the lengths (timestamps, hosts, flags, queue id, property
    // text) cannot be checked by RocketMQ's format: a flipped byte there goes unnoticed, with
    // or without rmqha. (Zeros there, a torn write's signature, are caught: see above.)
    for (n, (at, field)) in positions.into_iter().enumerate() {
        let what = format!("byte {at} ({field}) flipped");
        recover_damaged(&s, &what, n % 9 == 0, |file, pos| {
            let mut b = common::read_range(file, pos + at, pos + at + 1);
            b[0] ^= 0xFF;
            patch(file, pos + at, &b);
        });
    }
}

/// With `enabledAppendPropCRC` (RocketMQ 5's `__CRC32#` property) a flipped byte anywhere in
/// the last record is found, the fields the body CRC leaves out (queue id, offsets, flags,
/// timestamps, hosts, property text) included.
#[test]
fn with_record_crcs_a_flipped_byte_anywhere_in_the_last_record_is_cut() {
    let s = snapshot_with(false, false, true);
    for at in 0..s.last_len {
        let what = format!("record CRC: byte {at} of {} flipped", s.last_len);
        recover_damaged(&s, &what, at % 23 == 0, |file, pos| {
            let mut b = common::read_range(file, pos + at, pos + at + 1);
            b[0] ^= 0xFF;
            patch(file, pos + at, &b);
        });
    }
}

#[test]
fn clean_exit_with_a_damaged_tail_is_cut_too() {
    // No abort file: normal recovery walks the last files with the same checks.
    let s = snapshot(false, true);
    for cut in [0, 3, 40, 90, s.last_len - 1] {
        recover_damaged(&s, &format!("clean exit, zeroed from byte {cut}"), true, |file, pos| {
            patch(file, pos + cut, &vec![0u8; s.last_len - cut]);
        });
    }
}

#[test]
fn crash_image_without_damage_keeps_everything() {
    let s = snapshot(false, false);
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    let store: Arc<MessageStore> = MessageStore::open(config(work.path())).unwrap();
    let rec = store.recovery().clone();
    assert!(!rec.last_exit_ok && !rec.torn_tail);
    assert_eq!(rec.recovered_offset as i64, s.last.end_offset());
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset(TOPIC, 1), s.last.queue_offset + 1);
    assert_eq!(store.message_at(s.last.phy_offset).unwrap().body, b"last-record-body");
    let r = store.put_message_sync(&last_message()).unwrap();
    assert_eq!((r.phy_offset, r.queue_offset), (s.last.end_offset(), s.last.queue_offset + 1));
}

/// After a clean stop nothing can be torn: a record that fails its checks with valid records
/// after it is damage inside the log. RocketMQ cuts the log there, deleting every later
/// record; rmqha refuses to open, names the offset, and leaves the CommitLog unchanged. An
/// operator who accepts the loss creates the abort file, and recovery then cuts as RocketMQ
/// does.
#[test]
fn damage_inside_the_log_after_a_clean_stop_is_refused_not_cut() {
    let s = snapshot(false, true);
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    // A body byte of a record in the middle of the second file: its CRC fails.
    let victim = s.before.iter().find(|(r, _)| r.phy_offset as u64 > FILE + 1000).unwrap().0.clone();
    let (file, pos) = commit_log_file(work.path(), victim.phy_offset as u64, FILE);
    let body_at = pos + victim.size as usize - 40;
    let byte = std::fs::read(&file).unwrap()[body_at];
    patch(&file, body_at, &[byte ^ 0xFF]);
    let files_before: Vec<Vec<u8>> = common::list_files(&work.path().join("commitlog"))
        .iter()
        .map(|n| std::fs::read(work.path().join("commitlog").join(n)).unwrap())
        .collect();

    let err = match MessageStore::open(config(work.path())) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("opened a store whose log is damaged inside"),
    };
    assert!(err.contains(&format!("offset {}", victim.phy_offset)), "{err}");
    assert!(err.contains(&format!("up to offset {}", s.last.end_offset())), "{err}");
    assert!(err.contains("abort"), "{err}");
    let files_after: Vec<Vec<u8>> = common::list_files(&work.path().join("commitlog"))
        .iter()
        .map(|n| std::fs::read(work.path().join("commitlog").join(n)).unwrap())
        .collect();
    assert!(files_before == files_after, "the CommitLog was changed");

    // Accepting the loss: without the checkpoint and with the abort file, recovery cuts at
    // the damaged record.
    assert!(err.contains("checkpoint"), "{err}");
    std::fs::write(work.path().join("abort"), b"").unwrap();
    assert!(MessageStore::open(config(work.path())).is_err(), "the abort file alone overrides nothing");
    std::fs::remove_file(work.path().join("checkpoint")).unwrap();
    let store = MessageStore::open(config(work.path())).unwrap();
    assert_eq!(store.recovery().recovered_offset, victim.phy_offset as u64);
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    for (r, body) in s.before.iter().filter(|(r, _)| r.phy_offset < victim.phy_offset) {
        assert_eq!(&store.message_at(r.phy_offset).unwrap().body, body);
    }
    assert!(store.message_at(victim.phy_offset).is_none());
}

/// After a crash too, a record that fails its checks below where the checkpoint says the log
/// was synced, with valid records after it, is damage inside the log, not a torn tail:
/// recovery refuses, as after a clean stop. (It cut the log there, and one bad byte in a
/// synced record deleted every acknowledged record after it.)
#[test]
fn damage_inside_the_synced_log_after_a_crash_is_refused_not_cut() {
    let s = snapshot(false, false);
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    // The checkpoint as the next flush round would have written it: the whole log synced
    // (the snapshot's flush synced it; its checkpoint file is written once a second).
    let cp_path = work.path().join("checkpoint");
    let mut cp_bytes = std::fs::read(&cp_path).unwrap();
    let mut cp = rmqha_core::store::checkpoint::CheckpointData::decode(&cp_bytes);
    cp.master_flushed_offset = s.last.end_offset();
    let encoded = cp.encode();
    cp_bytes[..encoded.len()].copy_from_slice(&encoded);
    std::fs::write(&cp_path, &cp_bytes).unwrap();
    let victim = s.before.iter().find(|(r, _)| r.phy_offset as u64 > FILE + 1000).unwrap().0.clone();
    let (file, pos) = commit_log_file(work.path(), victim.phy_offset as u64, FILE);
    let body_at = pos + victim.size as usize - 40;
    let byte = std::fs::read(&file).unwrap()[body_at];
    patch(&file, body_at, &[byte ^ 0xFF]);
    let err = match MessageStore::open(config(work.path())) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a crash recovery cut a synced log at damage inside it"),
    };
    assert!(err.contains(&format!("offset {}", victim.phy_offset)), "{err}");
    assert!(err.contains("synced up to offset"), "{err}");
    // Untouched, and the operator's way out is the same as after a clean stop.
    assert_eq!(std::fs::read(&file).unwrap()[body_at], byte ^ 0xFF);
    // A slave cuts there as before: its master holds the rest and sends it again.
    let slave_copy = tempfile::tempdir().unwrap();
    copy_dir(work.path(), slave_copy.path());
    let slave = MessageStore::open(store_config(slave_copy.path(), &[("brokerRole", "SLAVE")])).unwrap();
    assert_eq!(slave.recovery().recovered_offset, victim.phy_offset as u64);
    drop(slave);
    std::fs::remove_file(work.path().join("checkpoint")).unwrap();
    let store = MessageStore::open(config(work.path())).unwrap();
    assert_eq!(store.recovery().recovered_offset, victim.phy_offset as u64);
}

/// A ConsumeQueue that lacks records the CommitLog holds after a clean stop (its directory
/// deleted, its file cut short) is rebuilt from the log at the next start: every message is
/// reachable by its queue offset again, and the next put gets the next offset, not one that an
/// earlier message holds. RocketMQ resumes dispatch at the highest offset any queue holds, so
/// it would leave such a queue short and hand its offsets out a second time.
#[test]
fn consume_queues_missing_records_after_a_clean_stop_are_rebuilt() {
    let s = snapshot(false, true);
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    let cq = work.path().join("consumequeue").join(TOPIC);
    std::fs::remove_dir_all(cq.join("2")).unwrap();
    let cq1 = cq.join("1").join(format!("{:020}", 0));
    let len = std::fs::metadata(&cq1).unwrap().len() as usize;
    patch(&cq1, 20 * 20, &vec![0u8; len - 20 * 20]); // units from queue offset 20 on gone
    assert!(expected_queue_len(&s, 1) > 25 && expected_queue_len(&s, 2) > 5);

    let store = MessageStore::open(config(work.path())).unwrap();
    assert!(store.recovery().last_exit_ok);
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let last = (s.last.clone(), b"last-record-body".to_vec());
    for q in 0..QUEUES {
        let want: Vec<&(PutResult, Vec<u8>)> = s
            .before
            .iter()
            .filter(|(r, _)| r.queue_id == q)
            .chain(std::iter::once(&last).filter(|_| q == 1))
            .collect();
        assert_queue_reads(&store, q, &want);
    }
    let r = store.put_message_sync(&last_message()).unwrap();
    assert_eq!(r.queue_offset, s.last.queue_offset + 1, "queue 1's next offset is a new one");
    let r = store.put_message_sync(&message(TOPIC, 2, 99_999, 10)).unwrap();
    assert_eq!(r.queue_offset, expected_queue_len(&s, 2), "queue 2's next offset is a new one");
}

/// Queue `q` of `TOPIC` holds exactly `want`, in order, each read back by its queue offset.
fn assert_queue_reads(store: &MessageStore, q: i32, want: &[&(PutResult, Vec<u8>)]) {
    assert_eq!(store.queue_max_offset(TOPIC, q), want.len() as i64, "queue {q}");
    for (i, (r, body)) in want.iter().enumerate() {
        let got = store.get_messages(TOPIC, q, i as i64, 1);
        assert_eq!(got.status, GetMessageStatus::Found, "queue {q} offset {i}");
        let m = &got.messages()[0];
        assert_eq!((m.phy_offset, &m.body), (r.phy_offset, body), "queue {q} offset {i}");
    }
}

/// Prepared and rolled-back transactional records have no ConsumeQueue unit (queue offset 0):
/// recovery's check for short queues must not take them for missing units and re-dispatch.
#[test]
fn transactional_records_without_queue_units_trigger_no_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    store.start().unwrap();
    for i in 0..50 {
        let mut m = message("Tx", 0, i, 100);
        if i % 5 == 0 {
            m.sys_flag = rmqha_core::message::sysflag::TRANSACTION_PREPARED_TYPE;
        }
        store.put_message_sync(&m).unwrap();
    }
    // A prepared record alone in a queue no ConsumeQueue holds, with a queued one after it.
    let mut m = message("TxOnly", 3, 99, 100);
    m.sys_flag = rmqha_core::message::sysflag::TRANSACTION_PREPARED_TYPE;
    store.put_message_sync(&m).unwrap();
    store.put_message_sync(&message("Tx", 0, 100, 100)).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("Tx", 0), 41);
    assert_eq!(store.queue_max_offset("TxOnly", 3), 0);
    let end = store.max_offset() as u64;
    store.shutdown();
    drop(store);

    let store = MessageStore::open(config(dir.path())).unwrap();
    let rec = store.recovery().clone();
    assert!(rec.last_exit_ok);
    assert_eq!((rec.recovered_offset, rec.dispatch_from), (end, end), "nothing to re-dispatch");
}

/// A tail zeroed after a clean stop holds no damaged record to refuse at, but the
/// ConsumeQueues indexed those records: recovery reports how many it lost (and logs it as an
/// error) instead of starting shorter without a word.
#[test]
fn indexed_records_missing_from_the_tail_are_reported_lost() {
    let s = snapshot(false, true);
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    let first = &s.before[s.before.len() - 4].0;
    assert_eq!(first.phy_offset as u64 / FILE, s.last.phy_offset as u64 / FILE, "the 5 records share a file");
    let (file, pos) = commit_log_file(work.path(), first.phy_offset as u64, FILE);
    patch(&file, pos, &vec![0u8; (s.last.end_offset() - first.phy_offset) as usize]);

    let store = MessageStore::open(config(work.path())).unwrap();
    let rec = store.recovery().clone();
    assert_eq!(rec.recovered_offset, first.phy_offset as u64);
    assert_eq!(rec.indexed_records_lost, 5);
    drop(store);
    // Undamaged, nothing is reported.
    let work = tempfile::tempdir().unwrap();
    copy_dir(s.dir.path(), work.path());
    let store = MessageStore::open(config(work.path())).unwrap();
    assert_eq!(store.recovery().indexed_records_lost, 0);
}

/// A `storePathCommitLog` that names the wrong directory (a typo, a wrong mount) meets an
/// empty log beside queues that index records. RocketMQ deletes the queues and starts an empty
/// log; once the path is right again, the queues built meanwhile point into the other log, and
/// most of the real log's messages can no longer be read through their queues. rmqha refuses
/// to start, names both directories and deletes nothing. If the operator deletes the queues
/// anyway and writes to the other log, the queues built from it are found at the next start on
/// the right log (their last unit points at another record) and rebuilt from that log.
#[test]
fn a_commit_log_path_that_names_another_directory_loses_no_queue() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let other = root.join("comitlog");
    let with_other = |r: &Path| store_config(r, &[("storePathCommitLog", other.to_str().unwrap())]);
    let mut put = Vec::new();
    {
        let store = MessageStore::open(config(root)).unwrap();
        store.start().unwrap();
        for i in 0..200 {
            let m = message(TOPIC, (i % 2) as i32, i, 300);
            let r = store.put_message_sync(&m).unwrap();
            assert_eq!(r.status, PutStatus::PutOk);
            put.push((r, m.body));
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
    }
    let cq_before = common::list_files(&root.join("consumequeue").join(TOPIC).join("0"));

    let err =
        MessageStore::open(with_other(root)).err().expect("an empty log beside indexed queues is refused");
    let text = err.to_string();
    for want in [
        other.display().to_string(),
        root.join("consumequeue").display().to_string(),
        "storePathCommitLog".into(),
    ] {
        assert!(text.contains(&want), "{text:?} names {want:?}");
    }
    assert_eq!(
        common::list_files(&root.join("consumequeue").join(TOPIC).join("0")),
        cq_before,
        "queues kept"
    );

    // Told that this is what they want, an operator deletes the queues and runs on the other
    // log for a while.
    std::fs::remove_dir_all(root.join("consumequeue")).unwrap();
    std::fs::remove_dir_all(root.join("index")).unwrap();
    {
        let store = MessageStore::open(with_other(root)).unwrap();
        store.start().unwrap();
        for i in 0..20 {
            let r = store.put_message_sync(&message(TOPIC, (i % 2) as i32, 1000 + i, 300)).unwrap();
            assert_eq!((r.status, r.queue_offset), (PutStatus::PutOk, (i / 2) as i64));
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
    }

    // The right path again: every message of the real log is read through its queue.
    let store = MessageStore::open(config(root)).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    for q in 0..2 {
        let want: Vec<_> = put.iter().filter(|(r, _)| r.queue_id == q).collect();
        assert_queue_reads(&store, q, &want);
    }
    let r = store.put_message_sync(&message(TOPIC, 0, 5000, 10)).unwrap();
    assert_eq!(r.queue_offset, 100, "queue 0's next offset follows the real log's");
}

/// RocketMQ 5's light message queues (`%LMQ%…`) index records of other topics, so recovery's
/// check that a queue's last unit points at its own record must leave them alone: a store
/// RocketMQ 5 wrote keeps them.
#[test]
fn light_message_queues_are_not_taken_for_foreign_queues() {
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    {
        let store = MessageStore::open(config(dir.path())).unwrap();
        store.start().unwrap();
        for i in 0..10 {
            let r = store.put_message_sync(&message(TOPIC, 0, i, 100)).unwrap();
            units.extend_from_slice(&r.phy_offset.to_be_bytes());
            units.extend_from_slice(&r.size.to_be_bytes());
            units.extend_from_slice(&0i64.to_be_bytes());
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
    }
    let lmq = dir.path().join("consumequeue").join("%LMQ%orders").join("0");
    std::fs::create_dir_all(&lmq).unwrap();
    let mut file = units.clone();
    file.resize(
        std::fs::metadata(dir.path().join("consumequeue").join(TOPIC).join("0").join(format!("{:020}", 0)))
            .unwrap()
            .len() as usize,
        0,
    );
    std::fs::write(lmq.join(format!("{:020}", 0)), &file).unwrap();

    let store = MessageStore::open(config(dir.path())).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("%LMQ%orders", 0), 10);
    assert_eq!(store.queue_max_offset(TOPIC, 0), 10);
    let lmq_file = std::fs::read(lmq.join(format!("{:020}", 0))).unwrap();
    assert_eq!(&lmq_file[..units.len()], &units[..], "the light queue's units are kept");
}

/// A record's queue offset and physical offset fields lie outside the body's checksum, so a
/// damaged header (or a master that lies) can carry any value. Recovery checks the offset
/// field of the records it walks (the last three files), but dispatch also reads older ones,
/// and a slave's replicated bytes. A queue offset no queue can hold (here -1, the first record
/// of its queue) once overflowed in the dispatcher: a panic on every start. Now that record
/// gets no queue unit and dispatch goes on; a record whose offset field is wrong is indexed
/// where it really is.
#[test]
fn header_fields_outside_the_checksum_cannot_stop_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let (bad_queue, bad_phy, after);
    let mut count = 0i64;
    {
        let store = MessageStore::open(config(dir.path())).unwrap();
        store.start().unwrap();
        store.put_message_sync(&message("A", 0, 0, 50)).unwrap();
        bad_queue = store.put_message_sync(&message("B", 0, 100, 50)).unwrap();
        bad_phy = store.put_message_sync(&message("A", 0, 1, 50)).unwrap();
        after = store.put_message_sync(&message("A", 0, 2, 50)).unwrap();
        count += 3;
        // Four more files, so that recovery's walk starts after the damaged records.
        while store.max_offset() < (5 * FILE) as i64 {
            store.put_message_sync(&message("A", 0, count as usize, 50)).unwrap();
            count += 1;
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
    }
    let (file, pos) = commit_log_file(dir.path(), bad_queue.phy_offset as u64, FILE);
    patch(&file, pos + 20, &(-1i64).to_be_bytes()); // QUEUEOFFSET
    let (file, pos) = commit_log_file(dir.path(), bad_phy.phy_offset as u64, FILE);
    patch(&file, pos + 28, &(i64::MAX - 10).to_be_bytes()); // PHYSICALOFFSET
    // The queues are rebuilt from the whole log at the next start.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();

    let store = MessageStore::open(config(dir.path())).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("B", 0), 0, "no unit for the record whose queue offset is -1");
    assert_eq!(store.queue_max_offset("A", 0), count);
    let got = store.get_messages("A", 0, 1, 2).messages();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].body,
        message("A", 0, 1, 50).body,
        "the record with the wrong offset field, found where it is"
    );
    assert_eq!((got[1].phy_offset, &got[1].body), (after.phy_offset, &message("A", 0, 2, 50).body));
    // The store goes on: a put to the queue that got no unit takes its first offset.
    let r = store.put_message_sync(&message("B", 0, 101, 50)).unwrap();
    assert_eq!((r.status, r.queue_offset), (PutStatus::PutOk, 0));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("B", 0), 1);
}

/// A ConsumeQueue that lost units from before the last three CommitLog files (its later files
/// deleted or cut short) after a clean stop. The walk over those files finds the queue short,
/// but its first record there has a queue offset past the queue's end: re-dispatching from
/// that record wrote each unit at the queue's end, so queue offset 100 served the record
/// whose header says 158, records 100 to 157 could not be reached, and the next put got a
/// queue offset that records already carried. The repair starts where the queue's own units
/// end.
#[test]
fn a_queue_missing_units_before_the_walk_is_rebuilt_in_order() {
    let src = tempfile::tempdir().unwrap();
    let mut puts = Vec::new();
    {
        let store = MessageStore::open(store_config(src.path(), &[])).unwrap();
        store.start().unwrap();
        let mut i = 0;
        while store.max_offset() < 4 * 65536 + 8000 {
            let m = message("Gap", (i % 2) as i32, i, 300);
            let r = store.put_message_sync(&m).unwrap();
            puts.push((r, m.body));
            i += 1;
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
    }
    let dir = tempfile::tempdir().unwrap();
    common::copy_dir(src.path(), dir.path());
    // Queue 0 keeps only its first ConsumeQueue file (100 units).
    let q0 = dir.path().join("consumequeue/Gap/0");
    for e in std::fs::read_dir(&q0).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "00000000000000000000" {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let mine: Vec<_> = puts.iter().filter(|(r, _)| r.queue_id == 0).collect();
    assert!(mine.len() > 200);
    assert_eq!(store.queue_max_offset("Gap", 0), mine.len() as i64);
    for (r, body) in &mine {
        let got = store.get_messages("Gap", 0, r.queue_offset, 1);
        let m = &got.messages()[0];
        assert_eq!((m.queue_offset, m.phy_offset), (r.queue_offset, r.phy_offset));
        assert_eq!(&m.body, body);
    }
    let next = store.put_message_sync(&message("Gap", 0, 1_000_000, 10)).unwrap();
    assert_eq!(next.queue_offset, mine.len() as i64, "a queue offset no record carries");
}

/// Re-dispatch after a repair passes over the last record the index holds: its keys went in
/// a second time (the index kept the start of that record as its end and skipped only what
/// lies before it), so a key query returned the message twice.
#[test]
fn a_repair_indexes_no_key_twice() {
    let src = tempfile::tempdir().unwrap();
    let mut n = 0;
    {
        let store = MessageStore::open(store_config(src.path(), &[])).unwrap();
        store.start().unwrap();
        while store.max_offset() < 65536 + 8000 {
            store.put_message_sync(&message("Twice", (n % 2) as i32, n, 300)).unwrap();
            n += 1;
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
    }
    let dir = tempfile::tempdir().unwrap();
    common::copy_dir(src.path(), dir.path());
    std::fs::remove_dir_all(dir.path().join("consumequeue/Twice/1")).unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("Twice", 1), (n / 2) as i64, "queue 1 rebuilt");
    for i in 0..n {
        let found = store.query_by_key("Twice", &format!("key-{i}"), 32, 0, i64::MAX);
        assert_eq!(found.len(), 1, "key-{i}");
    }
}

/// Store timestamps go back with the clock, so after a step back the files made since carry
/// earlier timestamps than the checkpoint's and pass for safe: recovery after a crash
/// started at the newest of them, and a quiet queue whose units in an earlier file never
/// reached the disk was neither re-dispatched nor repaired (its offsets were handed out
/// again). The checkpoint now also holds the offset below which every unit was flushed, and
/// recovery starts no later than its file.
#[test]
fn recovery_after_a_crash_starts_no_later_than_the_checkpoints_offsets() {
    let src = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(src.path())).unwrap();
    store.start().unwrap();
    let mut quiet = Vec::new();
    let mut i = 0;
    // Busy traffic over several files; the quiet queue's messages all in the second file.
    while store.commit_log().queue().file_count() < 4 {
        let files = store.commit_log().queue().file_count();
        if files == 2 && quiet.len() < 5 {
            quiet.push(store.put_message_sync(&message("Quiet", 0, i, 100)).unwrap());
        }
        store.put_message_sync(&message("Busy", 0, i, 500)).unwrap();
        i += 1;
    }
    assert_eq!(quiet.len(), 5);
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let crash = tempfile::tempdir().unwrap();
    copy_dir(src.path(), crash.path()); // while running: the abort file is there
    drop(store);
    // The checkpoint as after a clock step back: its timestamps ahead of every file's first
    // record, while its ConsumeQueue offset says units were flushed only below the second
    // file; the quiet queue's units never reached the disk.
    let later = rmqha_core::store::commit_log::now_ms() + 5000;
    let cp = crash.path().join("checkpoint");
    patch(&cp, 0, &later.to_be_bytes());
    patch(&cp, 8, &later.to_be_bytes());
    patch(&cp, 24, &0i64.to_be_bytes());
    let second_file = quiet[0].phy_offset - quiet[0].phy_offset % 65536;
    patch(&cp, 40, &second_file.to_be_bytes());
    std::fs::remove_dir_all(crash.path().join("consumequeue").join("Quiet")).unwrap();

    let store = MessageStore::open(config(crash.path())).unwrap();
    store.start().unwrap();
    assert!(!store.recovery().last_exit_ok);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.queue_max_offset("Quiet", 0), 5);
    let got = store.get_messages("Quiet", 0, 0, 32);
    assert_eq!(
        got.messages().iter().map(|m| m.phy_offset).collect::<Vec<_>>(),
        quiet.iter().map(|r| r.phy_offset).collect::<Vec<_>>()
    );
    assert_eq!(store.put_message_sync(&message("Quiet", 0, 999, 100)).unwrap().queue_offset, 5);
    // A thorough ConsumeQueue flush (here the one at shutdown) records that offset.
    let end = store.max_offset();
    store.shutdown();
    assert_eq!(checkpoint_field(crash.path(), 40), end);
}

/// A topic deleted while the log's tail was not yet flushed, and then a power cut: the
/// deletion (flushed at once) names an offset past the recovered end, and every record of
/// the topic written there after the restart was hidden by it: PUT_OK, and never served
/// (found by an audit of damaged files). The same for a store whose log files were removed
/// while `deletedTopics.json` stayed. A master now lowers such deletions to the log's end.
#[test]
fn a_deletion_past_the_recovered_end_hides_no_new_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    let puts: Vec<_> = (0..20).map(|i| store.put_message_sync(&message("T", 0, i, 300)).unwrap()).collect();
    assert!(puts.iter().all(|r| r.status == PutStatus::PutOk));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.delete_topic("T").unwrap();
    store.crash();
    drop(store);
    // The power cut: the last ten records never reached the disk.
    let cut = puts[10].phy_offset as u64;
    let end = (puts[19].phy_offset + puts[19].size as i64) as u64;
    let (file, pos) = commit_log_file(dir.path(), cut, FILE);
    patch(&file, pos, &vec![0u8; (end - cut) as usize]);
    let reopened = || {
        let s = MessageStore::open(store_config(dir.path(), &[])).unwrap();
        s.start().unwrap();
        s
    };
    let store = reopened();
    assert_eq!(store.max_offset(), cut as i64);
    let r = store.put_message_sync(&message("T", 0, 100, 300)).unwrap();
    assert_eq!((r.status, r.phy_offset, r.queue_offset), (PutStatus::PutOk, cut as i64, 0));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let got = store.get_messages("T", 0, 0, 32);
    let served: Vec<_> = got.messages().iter().map(|m| m.phy_offset).collect();
    assert_eq!(served, vec![cut as i64], "{:?}", got.status);
    store.shutdown();
    drop(store);

    // The log's files removed (an operator starting afresh) and the deletion file kept.
    for d in ["commitlog", "consumequeue", "index"] {
        std::fs::remove_dir_all(dir.path().join(d)).unwrap();
    }
    let store = reopened();
    let r = store.put_message_sync(&message("T", 0, 101, 300)).unwrap();
    assert_eq!((r.status, r.phy_offset), (PutStatus::PutOk, 0));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.get_messages("T", 0, 0, 32).messages().len(), 1);
    store.shutdown();
}
