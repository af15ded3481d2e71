//! The store keeps a descriptor per CommitLog file (for `pwrite`, `sendfile` to slaves and
//! syncs). Under the usual soft limit of 1024 open files a broker keeping more CommitLog files
//! than that failed every put; opening a store raises the soft limit to the hard one, as the
//! JVM does for RocketMQ. (Its own test binary: the limit is the process's.)

mod common;

use common::{message, store_config};
use rmqha_core::{MessageStore, PutStatus};

fn limits() -> libc::rlimit {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only the struct we pass.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

#[test]
fn more_commit_log_files_than_the_soft_descriptor_limit() {
    let hard = limits().rlim_max;
    if hard < 1024 {
        eprintln!("skipped: the hard open-file limit is {hard}");
        return;
    }
    let low = libc::rlimit { rlim_cur: 256, rlim_max: hard };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    assert_eq!(limits().rlim_cur, hard.min(1 << 20), "raised to the hard limit");
    let mut i = 0;
    while store.commit_log().queue().file_count() <= 300 {
        let r = store.put_message_sync(&message("Fds", 0, i, 2000)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        i += 1;
    }
    store.shutdown();
}
