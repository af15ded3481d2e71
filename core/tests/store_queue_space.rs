//! A ConsumeQueue file is 300,000 units (6 MB) long, as RocketMQ's. rmqha reserves its blocks
//! as units reach them, 64 KiB at a time, instead of all at creation: a broker with thousands
//! of queues holding a few messages each took 6 MB of disk per queue (RocketMQ's files are
//! sparse; rmqha reserves rather than leaving holes, since a store through the mapping into a
//! hole of a full disk raises SIGBUS).
//!
//! Index files likewise: their header and hash slots are reserved at creation, their entries
//! as they come (at the defaults a file is 420 MB, 20 MB of it slots).

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::{message, store_config};
use rmqha_core::MessageStore;

fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn queue_file(root: &Path, topic: &str) -> std::path::PathBuf {
    root.join("consumequeue").join(topic).join("0").join("00000000000000000000")
}

#[test]
fn consume_queue_files_take_disk_space_as_they_fill() {
    let dir = tempfile::tempdir().unwrap();
    // The default ConsumeQueue file size (common's store_config makes them tiny).
    let cfg = store_config(dir.path(), &[("mappedFileSizeConsumeQueue", "6000000")]);
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    for t in 0..20 {
        store.put_message_sync(&message(&format!("Few{t}"), 0, t, 100)).unwrap();
    }
    for i in 0..10_000 {
        store.put_message_sync(&message("Many", 0, i, 10)).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    for t in 0..20 {
        let f = queue_file(dir.path(), &format!("Few{t}"));
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 6_000_000, "full length, as RocketMQ's");
        assert!(allocated(&f) <= 128 * 1024, "{}: {} bytes allocated", f.display(), allocated(&f));
    }
    let many = queue_file(dir.path(), "Many");
    assert!((200_000..=400_000).contains(&allocated(&many)), "{} bytes", allocated(&many));
    store.shutdown();
    drop(store);
    // Reopened, the queues read back and grow on.
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert_eq!(store.get_messages("Many", 0, 9_999, 1).messages().len(), 1);
    assert_eq!(store.put_message_sync(&message("Few3", 0, 99, 100)).unwrap().queue_offset, 1);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.get_messages("Few3", 0, 0, 4).messages().len(), 2);
}

fn index_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root.join("index")).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn index_files_take_disk_space_as_they_fill() {
    let dir = tempfile::tempdir().unwrap();
    // RocketMQ's default index geometry (common's store_config makes it tiny).
    let cfg = store_config(dir.path(), &[("maxHashSlotNum", "5000000"), ("maxIndexNum", "20000000")]);
    let size = 40 + 5_000_000 * 4 + 20_000_000 * 20;
    let slots_end = 40 + 5_000_000 * 4;
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    for i in 0..10 {
        store.put_message_sync(&message("Keyed", 0, i, 10)).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let files = index_files(dir.path());
    assert_eq!(files.len(), 1);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), size, "full length, as RocketMQ's");
    let first = allocated(&files[0]);
    assert!((slots_end..=slots_end + 256 * 1024).contains(&first), "{first} bytes allocated of {size}");
    // Past the first reservation (64 KiB of entries is 3,276 of them): more is reserved.
    for i in 10..10_000 {
        store.put_message_sync(&message("Keyed", 0, i, 10)).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let grown = allocated(&files[0]);
    assert!(grown >= slots_end + 10_000 * 20 && grown < size / 4, "{grown} bytes allocated");
    store.shutdown();
    drop(store);
    // Reopened (nothing counted as reserved), the file takes more keys and finds them all.
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    store.put_message_sync(&message("Keyed", 0, 10_000, 10)).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    for i in [0, 5_000, 9_999, 10_000] {
        let found = store.query_by_key("Keyed", &format!("key-{i}"), 4, 0, i64::MAX);
        assert_eq!(found.len(), 1, "key-{i}");
    }
    assert_eq!(index_files(dir.path()).len(), 1);
    store.shutdown();
}

/// On tmpfs, reading a hole through a mapping allocates it. Opening a store checks that
/// each ConsumeQueue is zero past its units, and that check read the whole 6 MB file: every
/// reopen gave each queue its full size in memory (and on a full tmpfs raised SIGBUS). Holes
/// are now skipped unread.
#[test]
fn reopening_leaves_queue_files_sparse_on_tmpfs() {
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "this test needs /dev/shm (tmpfs)");
    let dir = tempfile::tempdir_in(shm).unwrap();
    let cfg = store_config(dir.path(), &[("mappedFileSizeConsumeQueue", "6000000")]);
    for round in 0..2 {
        let store = MessageStore::open(cfg.clone()).unwrap();
        store.start().unwrap();
        store.put_message_sync(&message("Few", 0, round, 100)).unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
    }
    let f = queue_file(dir.path(), "Few");
    assert!(allocated(&f) <= 128 * 1024, "{}: {} bytes allocated", f.display(), allocated(&f));
}

/// A store whose last CommitLog file has holes (written by RocketMQ, whose files are sparse,
/// or copied with `cp --sparse=always`): appends write into that file through its mapping,
/// and into a hole of a full disk that raised SIGBUS. Opening the store reserves the file's
/// blocks, so a full disk is an error instead.
#[test]
fn a_sparse_last_commit_log_file_is_reserved_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[]);
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    store.put_message_sync(&message("T", 0, 0, 100)).unwrap();
    let end = store.max_offset() as usize;
    store.shutdown();
    drop(store);
    // The file again, with only its records' block written: the rest is a hole.
    let file = dir.path().join("commitlog").join("00000000000000000000");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let f = std::fs::File::create(&file).unwrap();
    f.set_len(bytes.len() as u64).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &bytes[..end], 0).unwrap();
    drop(f);
    let size = bytes.len() as u64;
    assert!(allocated(&file) < size, "the copy is sparse: {}", allocated(&file));
    let store = MessageStore::open(cfg).unwrap();
    assert!(allocated(&file) >= size, "reserved at open: {}", allocated(&file));
    store.start().unwrap();
    assert_eq!(store.put_message_sync(&message("T", 0, 1, 100)).unwrap().queue_offset, 1);
    store.shutdown();
}
