//! A SLAVE with `flushDiskType=SYNC_FLUSH` acks only what it has synced to its disk, so a
//! SYNC_MASTER's PUT_OK means the record is on the slave's disk, not only in its page cache
//! (RocketMQ's slave acks what it wrote, whatever its flush type). A slave whose disk is slow
//! holds the master's puts back (FLUSH_SLAVE_TIMEOUT), one whose sync fails acks nothing
//! more, and an ASYNC_FLUSH slave keeps acking what it wrote.

mod common;

use std::time::Duration;

use common::{assert_same_commit_logs, broker_config, message, slave_of, wait_until};
use rmqha_core::{Broker, PutStatus};

const TIMEOUT: Duration = Duration::from_secs(10);

fn connected(master: &Broker) -> bool {
    master.offsets().slaves.iter().any(|s| s.transferring)
}

#[test]
fn a_sync_flush_slave_acks_only_what_is_on_its_disk() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let slave = slave_of(sd.path(), &master, &[("flushDiskType", "SYNC_FLUSH")]);
    assert!(wait_until(TIMEOUT, || connected(&master)));
    // 1000 records of about 400 bytes: more than four 64 KiB files, so some rounds of frames
    // end in a file after the one they began in, and the sync covers both.
    for i in 0..1000 {
        let r = master.put_message_sync(&message("T", (i % 4) as i32, i, 300)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        // Checked right after the return: the slave has synced the bytes, not only written them.
        let flushed = slave.flushed_offset();
        assert!(flushed >= r.end_offset(), "put {i}: slave synced to {flushed} < {}", r.end_offset());
        assert!(slave.slave_ack_offset() <= flushed);
    }
    assert!(master.max_offset() > 4 * 65536);
    assert!(wait_until(TIMEOUT, || slave.max_offset() == master.max_offset()));
    slave.shutdown();
    master.shutdown();
    assert_same_commit_logs(md.path(), sd.path());
}

#[test]
fn a_slow_disk_on_a_sync_flush_slave_holds_the_masters_puts_back() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let cfg = |d: &tempfile::TempDir| broker_config(d.path(), "SYNC_MASTER", &[("slaveTimeout", "300")]);
    let (m_sync, m_async) =
        (Broker::start_master(cfg(&dirs[0])).unwrap(), Broker::start_master(cfg(&dirs[1])).unwrap());
    let s_sync = slave_of(dirs[2].path(), &m_sync, &[("flushDiskType", "SYNC_FLUSH")]);
    let s_async = slave_of(dirs[3].path(), &m_async, &[("flushDiskType", "ASYNC_FLUSH")]);
    assert!(wait_until(TIMEOUT, || connected(&m_sync) && connected(&m_async)));
    assert_eq!(m_sync.put_message_sync(&message("T", 0, 0, 100)).unwrap().status, PutStatus::PutOk);
    // Every sync on both slaves now takes 1.5 s: longer than the masters' slaveTimeout.
    for s in [&s_sync, &s_async] {
        s.store().commit_log().inject_flush_delay(1500);
    }
    let r = m_sync.put_message_sync(&message("T", 0, 1, 100)).unwrap();
    assert_eq!(r.status, PutStatus::FlushSlaveTimeout);
    // Stored on the master all the same, and acked once the slave's sync returns.
    assert!(wait_until(TIMEOUT, || m_sync.slave_ack_offset() >= r.end_offset()));
    assert!(s_sync.flushed_offset() >= r.end_offset());
    // The ASYNC_FLUSH slave acks what it wrote, its sync still running.
    for i in 0..5 {
        let r = m_async.put_message_sync(&message("T", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i} to the master of the ASYNC_FLUSH slave");
    }
    for s in [&s_sync, &s_async] {
        s.store().commit_log().inject_flush_delay(0);
    }
    // A sync that started under the delay may still be sleeping: wait it out.
    assert!(wait_until(TIMEOUT, || s_sync.store().commit_log().flushes_in_injected_delay() == 0));
    let r = m_sync.put_message_sync(&message("T", 0, 2, 100)).unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    assert!(s_sync.flushed_offset() >= r.end_offset());
    for b in [&s_sync, &s_async, &m_sync, &m_async] {
        b.shutdown();
    }
}

#[test]
fn a_failed_sync_on_a_sync_flush_slave_acks_nothing_more() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "300")])).unwrap();
    let slave = slave_of(sd.path(), &master, &[("flushDiskType", "SYNC_FLUSH")]);
    assert!(wait_until(TIMEOUT, || connected(&master)));
    let ok = master.put_message_sync(&message("T", 0, 0, 100)).unwrap();
    assert_eq!(ok.status, PutStatus::PutOk);
    slave.store().commit_log().inject_flush_failure();
    for i in 1..4 {
        let r = master.put_message_sync(&message("T", 0, i, 100)).unwrap();
        assert_ne!(r.status, PutStatus::PutOk, "put {i} after the slave's disk failed");
    }
    assert_eq!(master.slave_ack_offset(), ok.end_offset());
    assert!(wait_until(TIMEOUT, || {
        slave.offsets().last_ha_error.is_some_and(|e| e.contains("cannot sync the received log"))
    }));
    slave.shutdown();
    master.shutdown();
}
