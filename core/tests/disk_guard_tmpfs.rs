//! The disk guard on a real file system: a 16 MiB tmpfs mounted for the test (it needs root,
//! as the chaos harness does; elsewhere it says why it did not run). A filler file takes the
//! file system above diskSpaceWarningLevelRatio; the retention thread reads it with statvfs,
//! puts are refused with a reason naming the mount and its usage, what was acknowledged reads
//! back; once the filler is gone, puts are accepted again.

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use common::{Tmpfs, message, store_config, wait_until};
use rmqha_core::store::retention::{disk_available_bytes, disk_used_ratio};
use rmqha_core::{Error, MessageStore, PutStatus};

/// The size of the test's file system.
const TMPFS_BYTES: u64 = 16 << 20;

#[test]
fn a_nearly_full_file_system_refuses_puts_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let Ok(_mount) = Tmpfs::mount(dir.path(), TMPFS_BYTES).map_err(|e| {
        eprintln!("not run: cannot mount a tmpfs ({e}); this test needs root");
    }) else {
        return;
    };
    let root = dir.path().join("store");
    let cfg = store_config(
        &root,
        &[
            ("mappedFileSizeCommitLog", "1048576"),
            ("mappedFileSizeConsumeQueue", "6000"),
            ("maxHashSlotNum", "64"),
            ("maxIndexNum", "256"),
            ("cleanResourceInterval", "50"),
        ],
    );
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    let acked: Vec<_> = (0..100)
        .map(|i| {
            let m = message("Full", 0, i, 200);
            let r = store.put_message_sync(&m).unwrap();
            assert_eq!(r.status, PutStatus::PutOk);
            (r.phy_offset, m.body)
        })
        .collect();

    // The allocator makes the next CommitLog file in the background and pre-touches it, which
    // takes its 1 MiB from the tmpfs: wait until it has, or the filler below races it.
    let commit_log = root.join("commitlog");
    let settled = || {
        let files: Vec<_> =
            std::fs::read_dir(&commit_log).unwrap().map(|e| e.unwrap().metadata().unwrap()).collect();
        files.len() >= 2 && files.iter().all(|m| m.blocks() * 512 >= m.len())
    };
    assert!(wait_until(Duration::from_secs(20), settled), "the next CommitLog file was not made");
    // Fill the file system to 95% (tmpfs reserves nothing, so this is df's Use% too).
    let free = disk_available_bytes(dir.path()).unwrap();
    let filler = dir.path().join("filler");
    std::fs::write(&filler, vec![7u8; (free - TMPFS_BYTES / 20) as usize]).unwrap();
    let used = disk_used_ratio(dir.path()).unwrap();
    assert!(used > 0.90, "filled to {used}");

    // Within a few retention passes the guard refuses puts, with a reason naming the mount.
    let mut reason = String::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            match store.put_message_sync(&message("Full", 0, 1000, 200)) {
                Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason: r }) => {
                    reason = r;
                    true
                }
                _ => false,
            }
        }),
        "puts were never refused at {used}"
    );
    let pct = format!("{:.1}% used", store.disk_guard().used_ratio() * 100.0);
    for needle in
        [root.join("commitlog").display().to_string(), pct, "diskSpaceWarningLevelRatio (90%)".into()]
    {
        assert!(reason.contains(&needle), "{needle:?} not in {reason:?}");
    }
    let max = store.max_offset();
    assert!(matches!(
        store.put_message_sync(&message("Full", 0, 1001, 200)),
        Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, .. })
    ));
    assert_eq!(store.max_offset(), max, "a refused put stored nothing");
    for (phy, body) in &acked {
        assert_eq!(&store.message_at(*phy).unwrap().body, body);
    }

    // Space returns: puts are accepted again within a few passes.
    std::fs::remove_file(&filler).unwrap();
    assert!(wait_until(Duration::from_secs(10), || store
        .put_message_sync(&message("Full", 0, 2000, 200))
        .is_ok_and(|r| r.status == PutStatus::PutOk)));
    assert!(!store.disk_guard().is_full());
    store.shutdown();
}
