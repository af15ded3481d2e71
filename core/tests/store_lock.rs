//! One store per directory: a second open fails, in this process or in another, with an
//! error that names the lock file; the lock goes with the store that held it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{store_config, wait_until};
use rmqha_core::MessageStore;

const CHILD_DIR: &str = "RMQHA_LOCK_TEST_DIR";
const CHILD_OUT: &str = "RMQHA_LOCK_TEST_OUT";

#[test]
fn second_open_in_the_same_process_fails() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[]);
    let first = MessageStore::open(cfg.clone()).unwrap();
    first.start().unwrap();
    let err = MessageStore::open(cfg.clone()).err().expect("second open must fail").to_string();
    let lock = dir.path().join("lock");
    assert!(err.contains(&lock.display().to_string()), "{err}");
    assert!(err.contains("locked"), "{err}");
    // The failed open touched nothing: the first store still works.
    let r = first.put_message_sync(&common::message("L", 0, 0, 10)).unwrap();
    assert!(r.status.is_stored());
    drop(first);
    // (Read only now: closing any descriptor of the file drops this process's record lock.)
    assert_eq!(std::fs::read(&lock).unwrap(), b"lock");
    let again = MessageStore::open(cfg).unwrap();
    assert_eq!(again.max_offset(), r.end_offset());
}

/// The child side of `second_open_in_another_process_fails`, which re-runs this test binary
/// with `--ignored` and the variables set (ignored otherwise: listed as skipped, not as a
/// passing test).
#[test]
#[ignore = "the child process of second_open_in_another_process_fails, which runs it"]
fn child_opens_the_store() {
    let (Some(dir), Some(out)) = (std::env::var_os(CHILD_DIR), std::env::var_os(CHILD_OUT)) else {
        panic!("run by second_open_in_another_process_fails, with {CHILD_DIR} and {CHILD_OUT} set")
    };
    let result = match MessageStore::open(store_config(Path::new(&dir), &[])) {
        Ok(_) => "opened".to_string(),
        Err(e) => format!("error: {e}"),
    };
    std::fs::write(out, result).unwrap();
}

fn run_child(dir: &Path) -> String {
    let out = dir.with_extension("child-out");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_the_store", "--ignored", "--test-threads", "1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_OUT, &out)
        .spawn()
        .unwrap();
    // Bounded: a lock that blocked instead of failing would hang the child.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the child did not finish within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success());
    std::fs::read_to_string(&out).expect("the child reports")
}

#[test]
fn second_open_in_another_process_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let store = MessageStore::open(store_config(&dir, &[])).unwrap();
    store.start().unwrap();
    let got = run_child(&dir);
    assert!(got.starts_with("error: "), "{got}");
    assert!(got.contains(&dir.join("lock").display().to_string()), "{got}");
    // Released when the store is gone (even without a clean shutdown the kernel drops a
    // process's locks, which is what makes a crashed broker restartable).
    drop(store);
    assert!(wait_until(Duration::from_secs(5), || run_child(&dir) == "opened"));
}

/// Two stores with different roots but the same CommitLog directory (the same
/// `storePathCommitLog`, or one naming the other's default directory) would append to the
/// same files: the second is refused, naming the directory, also through a symlink; the lock
/// file sits beside the directory (RocketMQ's loader refuses foreign files inside it).
#[test]
fn two_roots_cannot_share_a_commit_log_directory() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared-commitlog");
    let link = dir.path().join("link-to-commitlog");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, &link).unwrap();
    let with_log = |root: &str, log: &Path| {
        store_config(&dir.path().join(root), &[("storePathCommitLog", log.to_str().unwrap())])
    };
    let first = MessageStore::open(with_log("a", &shared)).unwrap();
    first.start().unwrap();
    let r = first.put_message_sync(&common::message("L", 0, 0, 10)).unwrap();
    for (root, log) in [("b", &shared), ("c", &link)] {
        let err = MessageStore::open(with_log(root, log))
            .err()
            .expect("a second broker on the same log")
            .to_string();
        assert!(err.contains(&std::fs::canonicalize(&shared).unwrap().display().to_string()), "{err}");
        assert!(err.contains("storePathCommitLog"), "{err}");
    }
    for name in common::list_files(&shared) {
        // A CommitLog file, or the allocator's next one while it is being made.
        let stem = name.strip_suffix(".creating").unwrap_or(&name);
        assert!(
            stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()),
            "{name} in the CommitLog directory"
        );
    }
    assert!(dir.path().join(".shared-commitlog.lock").exists());
    drop(first);
    // Released with the store that held it.
    let again = MessageStore::open(with_log("b", &link)).unwrap();
    assert_eq!(again.max_offset(), r.end_offset());

    // A storePathCommitLog that names another store's own (default) CommitLog directory.
    let own = MessageStore::open(store_config(&dir.path().join("d"), &[])).unwrap();
    let err = MessageStore::open(with_log("e", &dir.path().join("d").join("commitlog")))
        .err()
        .expect("a broker on another store's CommitLog")
        .to_string();
    assert!(err.contains("storePathCommitLog"), "{err}");
    drop(own);
}

/// A shutdown lets go of the store even while the broker object lives on (a binding's call in
/// flight holds it), and a shutdown racing another returns only once the store is unlocked:
/// a second `close()` returned at once, and opening the store again then failed as locked.
/// The stopped broker's handle writes nothing more.
#[test]
fn a_shutdown_unlocks_the_store_and_a_concurrent_one_waits_for_it() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let cfg = common::broker_config(dir.path(), "ASYNC_MASTER", &[]);
        let broker = rmqha_core::Broker::start_master(cfg.clone()).unwrap();
        let mut last = None;
        for i in 0..2000 {
            last = Some(broker.put_message_sync(&common::message("Stop", 0, i, 200)).unwrap());
        }
        let racing = {
            let b = broker.clone();
            std::thread::spawn(move || b.shutdown())
        };
        // Once the other shutdown has begun (commits are refused from its first step), this
        // one must wait for it.
        assert!(wait_until(Duration::from_secs(10), || broker
            .commit_consumer_offset("G", "Stop", 0, 1)
            .is_err()));
        broker.shutdown();
        let again = MessageStore::open(store_config(dir.path(), &[])).unwrap_or_else(|e| {
            panic!("round {round}: the store is still locked after shutdown returned: {e}")
        });
        assert_eq!(again.max_offset(), last.unwrap().end_offset());
        racing.join().unwrap();
        assert!(broker.store().flush().is_err(), "a stopped store flushes no more");
        assert!(broker.store().run_retention().is_err(), "nor deletes files");
        assert!(broker.create_topic("Late", 4).is_err(), "nor writes config");
        drop(again);
    }
}
