//! More queue files than the usual soft limit on open descriptors (1024 on most systems;
//! lowered to 256 here). ConsumeQueue and index files keep no descriptor once mapped, so every
//! queue is dispatched and readable. Before, each kept one: at the limit the dispatcher could
//! not open the next queue file and stalled, while puts went on being acknowledged.
//!
//! Alone in its test binary: the limit is the whole process's.

mod common;

use std::time::Duration;

use common::{message, store_config};
use rmqha_core::MessageStore;
use rmqha_core::store::GetMessageStatus;

const QUEUES: usize = 600;

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn more_queue_files_than_descriptors_are_all_dispatched() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    let low = libc::rlimit { rlim_cur: 256, rlim_max: limit.rlim_max };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);

    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    for t in 0..QUEUES {
        store.put_message_sync(&message(&format!("Many{t}"), 0, t, 100)).unwrap();
    }
    assert!(
        store.wait_dispatched(Duration::from_secs(20)),
        "dispatch stalled {} bytes behind with {} descriptors open",
        store.dispatch_behind_bytes(),
        open_descriptors()
    );
    for t in 0..QUEUES {
        let got = store.get_messages(&format!("Many{t}"), 0, 0, 1);
        assert_eq!(got.status, GetMessageStatus::Found, "queue Many{t}");
        assert_eq!(got.messages()[0].body, message("x", 0, t, 100).body);
    }
    assert!(open_descriptors() < 100, "{} descriptors open", open_descriptors());
    store.shutdown();
    drop(store);
    // Reopened, the queues load without descriptors too.
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    assert!(open_descriptors() < 100, "{} descriptors open after reopening", open_descriptors());
    assert_eq!(store.queue_max_offset(&format!("Many{}", QUEUES - 1), 0), 1);
    store.shutdown();
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}
