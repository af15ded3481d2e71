//! A CommitLog over several directories (RocketMQ 4.9.2's `storePathCommitLog` with `;`, and
//! `readOnlyCommitLogStorePaths`): new files take turns across the sorted directories by their
//! index, every directory's files make one log through restarts, crashes, torn tails,
//! retention and replication, a read-only directory is read and gets no new file, and a full
//! disk's new file goes to another directory.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Tmpfs, broker_config, message, slave_of, store_config, wait_until};
use rmqha_core::store::retention::ManualClock;
use rmqha_core::{Broker, MessageStore, PutResult, PutStatus};

const FILE: u64 = 65536;

fn joined(dirs: &[&Path]) -> String {
    dirs.iter().map(|d| d.to_str().unwrap()).collect::<Vec<_>>().join(";")
}

/// Every CommitLog file in `dirs`: name → (directory, bytes).
fn files_in(dirs: &[&Path]) -> BTreeMap<String, (PathBuf, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let prev = out.insert(name.clone(), (d.to_path_buf(), std::fs::read(e.path()).unwrap()));
            assert!(prev.is_none(), "{name} is in two directories");
        }
    }
    out
}

fn put_many(store: &MessageStore, from: usize, n: usize) -> Vec<(PutResult, Vec<u8>)> {
    (from..from + n)
        .map(|i| {
            let m = message("Multi", (i % 4) as i32, i, 100 + i % 300);
            let r = store.put_message_sync(&m).unwrap();
            assert_eq!(r.status, PutStatus::PutOk);
            (r, m.body)
        })
        .collect()
}

fn assert_all_back(store: &MessageStore, acked: &[(PutResult, Vec<u8>)]) {
    for (r, body) in acked {
        let m = store.message_at(r.phy_offset).unwrap_or_else(|| panic!("message at {} lost", r.phy_offset));
        assert_eq!(&m.body, body, "message at {}", r.phy_offset);
        assert_eq!(m.queue_offset, r.queue_offset);
    }
}

/// Each file in the directory RocketMQ's placement gives it: sorted directories, by index.
fn assert_placed(store: &MessageStore, sorted: &[&Path]) {
    let files = store.commit_log().queue().files();
    assert!(files.len() > sorted.len(), "only {} files", files.len());
    for f in files {
        let want = sorted[((f.start_offset() / FILE) as usize) % sorted.len()];
        assert_eq!(f.path().parent().unwrap(), want, "{}", f.path().display());
    }
}

#[test]
fn files_take_turns_across_directories_and_come_back_after_restarts_and_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let (c, a, b) =
        (tmp.path().join("disk-c/cl"), tmp.path().join("disk-a/cl"), tmp.path().join("disk-b/cl"));
    let root = tmp.path().join("store");
    let cfg = store_config(&root, &[("storePathCommitLog", &joined(&[&c, &a, &b]))]);
    let sorted = [a.as_path(), b.as_path(), c.as_path()];
    let mut acked = Vec::new();
    {
        let store = MessageStore::open(cfg.clone()).unwrap();
        store.start().unwrap();
        acked.extend(put_many(&store, 0, 2000));
        assert_placed(&store, &sorted);
        assert!(!root.join("commitlog").exists(), "nothing in the default directory");
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
    }
    let store = MessageStore::open(cfg.clone()).unwrap();
    assert!(store.recovery().last_exit_ok);
    assert_eq!(store.recovery().recovered_offset as i64, acked.last().unwrap().0.end_offset());
    store.start().unwrap();
    assert_all_back(&store, &acked);
    acked.extend(put_many(&store, 2000, 500));
    // A killed process: recovery checks the records of the last files, wherever they are.
    store.crash();
    drop(store);
    let store = MessageStore::open(cfg.clone()).unwrap();
    assert!(!store.recovery().last_exit_ok);
    assert_eq!(store.recovery().recovered_offset as i64, acked.last().unwrap().0.end_offset());
    store.start().unwrap();
    assert_all_back(&store, &acked);
    assert_placed(&store, &sorted);
    // Reads through the queues give every message once.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let in_queues: i64 = (0..4).map(|q| store.queue_max_offset("Multi", q)).sum();
    assert_eq!(in_queues, acked.len() as i64);

    // A torn last record, in whichever directory its file is: cut, the rest kept.
    let (last, _) = acked.pop().unwrap();
    store.crash();
    drop(store);
    let file = files_in(&sorted)
        .into_iter()
        .find(|(name, _)| name.parse::<u64>().unwrap() == last.phy_offset as u64 / FILE * FILE)
        .map(|(name, (dir, _))| dir.join(name))
        .unwrap();
    // A byte of its body (88 bytes into a record with IPv4 hosts), which its CRC covers.
    let at = last.phy_offset as u64 % FILE + 88 + 10;
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[at as usize] ^= 0xFF;
    std::fs::write(&file, &bytes).unwrap();
    let store = MessageStore::open(cfg).unwrap();
    assert_eq!(store.recovery().recovered_offset as i64, last.phy_offset, "cut at the torn record");
    store.start().unwrap();
    assert_all_back(&store, &acked);
    assert_eq!(store.max_offset(), last.phy_offset);
    store.shutdown();
}

/// A disk being retired: its directory, listed in readOnlyCommitLogStorePaths, is read (old
/// messages come back) and loses files to retention, but every new file goes elsewhere.
#[test]
fn a_read_only_directory_is_read_and_gets_no_new_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
    let root = tmp.path().join("store");
    let mut acked = {
        let store = MessageStore::open(store_config(&root, &[("storePathCommitLog", old.to_str().unwrap())]))
            .unwrap();
        store.start().unwrap();
        let acked = put_many(&store, 0, 1000);
        store.shutdown();
        acked
    };
    let old_files = files_in(&[&old]);
    // A listed directory that does not exist beside one that holds the log's files: its disk
    // may be unmounted, so the store does not open until it is made by hand.
    let keys = [("storePathCommitLog", joined(&[&old, &new]))];
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let err = MessageStore::open(store_config(&root, &keys)).err().expect("a missing directory").to_string();
    assert!(err.contains("does not exist") && err.contains(new.to_str().unwrap()), "{err}");
    std::fs::create_dir_all(&new).unwrap();
    let keys = [
        ("storePathCommitLog", joined(&[&old, &new])),
        ("readOnlyCommitLogStorePaths", joined(&[&old])),
        // The background pass would use the manual clock too: keep it out of the way.
        ("cleanResourceInterval", "3600000".into()),
    ];
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let clock = ManualClock::new(10, 0.10);
    let store = MessageStore::open_with_clock(store_config(&root, &keys), clock.clone()).unwrap();
    store.start().unwrap();
    assert_all_back(&store, &acked);
    acked.extend(put_many(&store, 1000, 2000));
    assert_all_back(&store, &acked);
    // The old directory's last file was filled up; no file was made there.
    let now_old = files_in(&[&old]);
    assert_eq!(now_old.keys().collect::<Vec<_>>(), old_files.keys().collect::<Vec<_>>());
    assert!(files_in(&[&new]).len() >= 5);
    // Retention takes the read-only directory's files first (they are the oldest).
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.flush().unwrap();
    clock.set_used_ratio(0.86);
    let mut deleted = 0;
    while store.run_retention().unwrap().commit_log_files > 0 {
        deleted += 1;
    }
    assert!(files_in(&[&old]).is_empty(), "{deleted} deleted");
    assert_eq!(store.commit_log().queue().file_count(), 1, "only the last file is kept");
    let first = store.min_offset();
    assert!(first > 0);
    let kept: Vec<_> = acked.iter().filter(|(r, _)| r.phy_offset >= first).cloned().collect();
    assert_all_back(&store, &kept);
    store.shutdown();
}

/// One offset's file in two directories (two brokers' directories mixed up, a copy by hand):
/// the store does not open, and the error names both files.
#[test]
fn one_file_in_two_directories_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("d1"), tmp.path().join("d2"));
    let root = tmp.path().join("store");
    let cfg = store_config(&root, &[("storePathCommitLog", &joined(&[&d1, &d2]))]);
    {
        let store = MessageStore::open(cfg.clone()).unwrap();
        store.start().unwrap();
        put_many(&store, 0, 200);
        store.shutdown();
    }
    let name = format!("{:020}", 0);
    std::fs::copy(d1.join(&name), d2.join(&name)).unwrap();
    let err = MessageStore::open(cfg).err().expect("a duplicate file must be refused").to_string();
    assert!(
        err.contains(d1.join(&name).to_str().unwrap()) && err.contains(d2.join(&name).to_str().unwrap()),
        "{err}"
    );
    assert!(err.contains("both hold the file at offset 0"), "{err}");
}

/// The same directory under two names (a symlink) would load its files twice; a directory
/// another broker's CommitLog uses is locked.
#[test]
fn a_directory_named_twice_or_used_by_another_broker_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("d1"), tmp.path().join("d2"));
    std::fs::create_dir_all(&d1).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&d1, &link).unwrap();
    let cfg = store_config(&tmp.path().join("s0"), &[("storePathCommitLog", &joined(&[&d1, &link]))]);
    let err = MessageStore::open(cfg).err().expect("one directory twice").to_string();
    assert!(err.contains("twice") && err.contains(link.to_str().unwrap()), "{err}");

    let first = MessageStore::open(store_config(
        &tmp.path().join("s1"),
        &[("storePathCommitLog", &joined(&[&d1, &d2]))],
    ))
    .unwrap();
    let second = store_config(&tmp.path().join("s2"), &[("storePathCommitLog", d2.to_str().unwrap())]);
    let err = MessageStore::open(second).err().expect("a directory in use").to_string();
    assert!(err.contains("is locked") && err.contains("d2"), "{err}");
    first.shutdown();
}

/// A master and a slave that spread their logs over different directories: the slave's files
/// are byte-identical to the master's, file by file, wherever each store put them.
#[test]
fn a_slave_over_three_directories_replicates_a_master_over_two() {
    let tmp = tempfile::tempdir().unwrap();
    let m_dirs = [tmp.path().join("m1"), tmp.path().join("m2")];
    let s_dirs = [tmp.path().join("s1"), tmp.path().join("s2"), tmp.path().join("s3")];
    let m_refs: Vec<&Path> = m_dirs.iter().map(PathBuf::as_path).collect();
    let s_refs: Vec<&Path> = s_dirs.iter().map(PathBuf::as_path).collect();
    let master = Broker::start_master(broker_config(
        &tmp.path().join("master"),
        "SYNC_MASTER",
        &[("storePathCommitLog", &joined(&m_refs))],
    ))
    .unwrap();
    let slave = slave_of(&tmp.path().join("slave"), &master, &[("storePathCommitLog", &joined(&s_refs))]);
    assert!(
        wait_until(Duration::from_secs(30), || !master.offsets().slaves.is_empty()),
        "slave never connected"
    );
    for i in 0..1500 {
        let r = master.put_message_sync(&message("Rep", (i % 3) as i32, i, 100 + i % 400)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
    }
    let target = master.max_offset();
    assert!(
        wait_until(Duration::from_secs(30), || slave.max_offset() == target),
        "slave at {}",
        slave.max_offset()
    );
    assert!(master.store().commit_log().queue().file_count() >= 6);
    slave.shutdown();
    master.shutdown();
    let (m, s) = (files_in(&m_refs), files_in(&s_refs));
    for (name, (dir, bytes)) in &s {
        let idx = name.parse::<u64>().unwrap() / FILE;
        assert_eq!(dir, &s_dirs[(idx % 3) as usize], "{name}");
        match m.get(name) {
            Some((_, mb)) => assert!(mb == bytes, "{name} differs"),
            None => assert!(bytes.iter().all(|&b| b == 0), "{name} only on the slave, with data"),
        }
    }
    for (name, (dir, bytes)) in &m {
        let idx = name.parse::<u64>().unwrap() / FILE;
        assert_eq!(dir, &m_dirs[(idx % 2) as usize], "{name}");
        if !s.contains_key(name) {
            assert!(bytes.iter().all(|&b| b == 0), "{name} only on the master, with data");
        }
    }
}

/// A directory on a full disk: the new file that would go there is made in another
/// directory at once (RocketMQ fails puts until its next disk check marks the disk full), and
/// the disk check then keeps new files off it. Needs root to mount a tmpfs.
#[test]
fn a_full_directory_sends_new_files_to_another() {
    let tmp = tempfile::tempdir().unwrap();
    let small = tmp.path().join("a-small");
    std::fs::create_dir_all(&small).unwrap();
    let Ok(_mount) = Tmpfs::mount(&small, 3 * 1048576 + 65536).map_err(|e| {
        eprintln!("not run: cannot mount a tmpfs ({e}); this test needs root");
    }) else {
        return;
    };
    let big = tmp.path().join("b-big");
    let root = tmp.path().join("store");
    let cfg = store_config(
        &root,
        &[
            ("storePathCommitLog", &joined(&[&small, &big])),
            ("mappedFileSizeCommitLog", "1048576"),
            ("cleanResourceInterval", "50"),
        ],
    );
    let store = MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    let mut acked = Vec::new();
    for i in 0..40_000 {
        let m = message("Full", 0, i, 300);
        let r = store.put_message_sync(&m).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        acked.push((r, m.body));
    }
    // The disk check (every 50 ms here) marks the small disk full: new files keep off it
    // without trying it first.
    let dirs = store.commit_log().queue().dirs().clone();
    assert!(
        wait_until(Duration::from_secs(10), || (0..4).all(|i| dirs.for_file(i * 1048576, 1048576) == big)),
        "the small disk was never marked full"
    );
    let (on_small, on_big) = (files_in(&[&small]), files_in(&[&big]));
    assert!(on_small.len() <= 3, "{} files on the 3 MiB disk", on_small.len());
    assert!(on_big.len() >= 10, "{} files elsewhere", on_big.len());
    assert_all_back(&store, &acked);
    store.shutdown();
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert_all_back(&store, &acked);
    store.shutdown();
}
