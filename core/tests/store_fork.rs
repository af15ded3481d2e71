//! A process forked while a broker runs (Python's `os.fork`, `multiprocessing`, a C host's
//! `fork`) shares the store's mapped files but none of its threads. Before, a put in the child
//! overwrote a record the parent had acknowledged since the fork, and dropping the broker at
//! the child's exit aborted it after touching the parent's files and sockets. The child is
//! now refused every write and leaves everything alone; the parent goes on undisturbed.

mod common;

use std::time::Duration;

use common::{broker_config, message, slave_of, wait_until};
use rmqha_core::{Broker, Error, PutStatus};

/// What the child found, as its exit code: 0 when every check held, else the failed check.
fn in_child(master: std::sync::Arc<Broker>, slave: std::sync::Arc<Broker>) -> i32 {
    match master.put_message(&message("Fork", 0, 999, 100)) {
        Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason })
            if reason.contains("fork") => {}
        _ => return 1,
    }
    if master.commit_consumer_offset("g", "Fork", 0, 5).is_err_and(|e| e.to_string().contains("fork")) {
    } else {
        return 2;
    }
    if slave.set_master_address("127.0.0.1:1").is_ok() {
        return 3;
    }
    if master.store().run_retention().is_ok() || master.store().flush().is_ok() {
        return 4;
    }
    // Reads work: the mapping is shared.
    if master.get_messages("Fork", 0, 0, 32).messages().len() < 10 {
        return 5;
    }
    // Dropping both runs their shutdown, which must not join the parent's threads (absent
    // here), close its sockets or write its checkpoint and abort file.
    drop((master, slave));
    0
}

#[test]
fn a_forked_child_cannot_write_and_leaves_the_parent_alone() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    let mut acked = Vec::new();
    for i in 0..10 {
        let r = master.put_message_sync(&message("Fork", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        acked.push((i, r.phy_offset));
    }
    assert!(master.store().wait_dispatched(Duration::from_secs(10)));

    // SAFETY: the child runs the checks above and leaves with _exit, running no destructor of
    // the test harness; glibc's fork keeps malloc usable in the child.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = in_child(master, slave);
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child died of a signal: status {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "check {} failed in the child", libc::WEXITSTATUS(status));

    // The parent's files, sockets and threads are as they were: the abort file is still
    // there (it is running), and the slave is still connected, so a SYNC_MASTER put is PUT_OK.
    assert!(md.path().join("abort").exists());
    for i in 10..20 {
        let r = master.put_message_sync(&message("Fork", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i} after the fork");
        acked.push((i, r.phy_offset));
    }
    for (i, phy) in &acked {
        assert_eq!(master.store().message_at(*phy).unwrap().body, message("Fork", 0, *i, 100).body);
        assert!(wait_until(Duration::from_secs(5), || slave.store().message_at(*phy).is_some()));
    }
    slave.shutdown();
    master.shutdown();
}
