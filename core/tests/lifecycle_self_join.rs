//! A broker's stop running on one of its own threads: the last handle dropped while an
//! internal thread held the broker, or `shutdown` called from a put's completion callback.
//! Each join of the stop used to include the thread running it, and joining oneself panics
//! ("failed to join thread: Resource deadlock avoided").
//!
//! Panics are counted on every thread by a panic hook, so the tests of this binary run one
//! at a time.

mod common;

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{Proxy, broker_config, message, wait_until};
use rmqha_core::{Broker, PutStatus};

static SERIAL: Mutex<()> = Mutex::new(());

/// Counts panics on any thread (the default hook still prints them), from zero. Returns the
/// guard that keeps the other tests of this binary out.
fn count_panics() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::panic_count().store(0, Ordering::SeqCst);
    guard
}

/// The persist thread held the broker for each pass; dropped on it, the broker's stop joined
/// that thread itself, and the host's drop returned before the store was let go, so a start
/// right after it found the store locked.
#[test]
fn dropping_the_last_handle_stops_the_broker_on_the_callers_thread() {
    let _serial = count_panics();
    let dir = tempfile::tempdir().unwrap();
    let config = || broker_config(dir.path(), "ASYNC_MASTER", &[("flushConsumerOffsetInterval", "1")]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut refused = Vec::new();
    let json = dir.path().join("config/consumerOffset.json");
    let tmp = dir.path().join("config/consumerOffset.json.tmp");
    let inode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    for i in 0..50 {
        let broker = loop {
            match Broker::start_master(config()) {
                Ok(b) => break b,
                Err(e) => {
                    refused.push(format!("start {i}: {e}"));
                    assert!(Instant::now() < deadline, "the store stayed locked: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        // A dirty table makes the persist thread write it on its next pass (each millisecond);
        // drop while that write is under way, when the thread held the broker.
        let before = inode(&json);
        // Offset i needs i messages in the queue.
        broker.put_message_sync(&rmqha_core::Message::new("T", vec![1])).unwrap();
        assert!(broker.store().wait_dispatched(Duration::from_secs(10)));
        broker.commit_consumer_offset("G", "T", 0, i).unwrap();
        // The write's `.tmp` exists until it is renamed over the file (a new inode); catching
        // neither within 1 s only makes this round less likely to drop on that thread.
        let writing = Instant::now() + Duration::from_secs(1);
        while !tmp.exists() && inode(&json) == before && Instant::now() < writing {
            std::thread::yield_now();
        }
        drop(broker);
    }
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    assert!(
        refused.is_empty(),
        "{} starts right after a drop found the store locked, first: {:?}",
        refused.len(),
        refused.first()
    );
    let last = Broker::start_master(config()).unwrap();
    assert_eq!(last.consumer_offset("G", "T", 0), 49);
    last.shutdown();
}

fn ha_addr(b: &Broker) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", b.ha_port()).parse().unwrap()
}

/// A SYNC_MASTER and a slave replicating through a proxy, the slave streaming and acking.
fn sync_pair(
    master_dir: &std::path::Path,
    slave_dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> (Arc<Broker>, Proxy, Arc<Broker>) {
    let master = Broker::start_master(broker_config(master_dir, "SYNC_MASTER", extra)).unwrap();
    let proxy = Proxy::start(ha_addr(&master));
    let addr = proxy.addr.to_string();
    let slave =
        Broker::start_slave(broker_config(slave_dir, "SLAVE", &[("haMasterAddress", &addr)])).unwrap();
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    assert_eq!(master.put_message_sync(&message("S", 0, 0, 100)).unwrap().status, PutStatus::PutOk);
    (master, proxy, slave)
}

/// Puts a message whose callback shuts `master` down, and returns the callback's thread name
/// and status once it ran (within 10 s). `release` lets the put complete.
fn shutdown_from_callback(master: &Arc<Broker>, release: impl FnOnce()) -> (String, PutStatus) {
    let (tx, rx) = mpsc::channel();
    let m = master.clone();
    master
        .put_message_async(&message("S", 0, 1, 100), move |r| {
            m.shutdown();
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            let _ = tx.send((name, r.status));
        })
        .unwrap();
    release();
    rx.recv_timeout(Duration::from_secs(10)).expect("the callback's shutdown did not return within 10 s")
}

/// A SYNC_MASTER put completes on the HA reader of the slave's connection, whose stop the
/// callback's shutdown joins.
#[test]
fn shutdown_from_a_put_acked_by_a_slave() {
    let _serial = count_panics();
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, proxy, slave) = sync_pair(md.path(), sd.path(), &[]);
    // The slave's acks wait in the proxy until the callback is in place.
    proxy.stall_up(true);
    let (thread, status) = shutdown_from_callback(&master, || proxy.stall_up(false));
    assert_eq!(status, PutStatus::PutOk);
    assert!(thread.starts_with("rmqha-ha-read"), "completed on {thread}");
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    slave.shutdown();
    drop(master);
    // The store was let go before the callback returned.
    Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap().shutdown();
}

/// A SYNC_MASTER put whose ack does not come in time completes on the HA deadline thread,
/// which the callback's shutdown joins.
#[test]
fn shutdown_from_a_put_that_timed_out_waiting_for_a_slave() {
    let _serial = count_panics();
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, proxy, slave) = sync_pair(md.path(), sd.path(), &[("slaveTimeout", "200")]);
    proxy.stall_up(true);
    let (thread, status) = shutdown_from_callback(&master, || {});
    assert_eq!(status, PutStatus::FlushSlaveTimeout);
    assert_eq!(thread, "rmqha-ha-timeout");
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    proxy.stall_up(false);
    slave.shutdown();
    drop(master);
    Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap().shutdown();
}

/// A SYNC_FLUSH put completes on the group-commit thread, which the store's stop joins.
#[test]
fn shutdown_from_a_put_completed_by_group_commit() {
    let _serial = count_panics();
    let dir = tempfile::tempdir().unwrap();
    let config = || broker_config(dir.path(), "ASYNC_MASTER", &[("flushDiskType", "SYNC_FLUSH")]);
    let master = Broker::start_master(config()).unwrap();
    // A callback may also run at once, on this thread, if the flush beat its registration:
    // put again until one completes on the group-commit thread, and shut down there.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (tx, rx) = mpsc::channel();
    for i in 0.. {
        assert!(Instant::now() < deadline, "no put completed on the group-commit thread");
        let (m, tx) = (master.clone(), tx.clone());
        master
            .put_message_async(&message("F", 0, i, 100), move |r| {
                let name = std::thread::current().name().unwrap_or_default().to_owned();
                if name == "rmqha-group-commit" {
                    m.shutdown();
                }
                let _ = tx.send((name, r.status));
            })
            .unwrap();
        let (thread, status) =
            rx.recv_timeout(Duration::from_secs(10)).expect("the callback did not run within 10 s");
        assert_eq!(status, PutStatus::PutOk);
        if thread == "rmqha-group-commit" {
            break;
        }
    }
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    drop(master);
    Broker::start_master(config()).unwrap().shutdown();
}

/// Runs `broker.shutdown()` on a thread of its own; whether it returned within 15 s.
fn host_shutdown_returns(broker: &Arc<Broker>) -> bool {
    let (tx, rx) = mpsc::channel();
    let b = broker.clone();
    std::thread::spawn(move || {
        b.shutdown();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(15)).is_ok()
}

/// The host stops the broker while a put's callback, run by a thread that stop joins (group
/// commit, finishing a slow flush), stops it too. The callback waited for the host's stop,
/// which waited for the callback's thread: both hung (found by a lock audit).
#[test]
fn a_callback_stopping_the_broker_while_the_host_stops_it_returns() {
    let _serial = count_panics();
    let dir = tempfile::tempdir().unwrap();
    let master =
        Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[("flushDiskType", "SYNC_FLUSH")]))
            .unwrap();
    // A slow disk: the put is still waiting for its flush when the host's stop begins.
    master.store().commit_log().inject_flush_delay(500);
    let (tx, rx) = mpsc::channel();
    let m = master.clone();
    master
        .put_message_async(&message("F", 0, 1, 100), move |r| {
            m.shutdown(); // "stop the broker once this put is answered"
            let _ = tx.send((std::thread::current().name().unwrap_or_default().to_owned(), r.status));
        })
        .unwrap();
    assert!(host_shutdown_returns(&master), "the host's stop hung");
    let (thread, status) = rx.recv_timeout(Duration::from_secs(5)).expect("the callback's stop hung");
    assert_eq!((thread.as_str(), status), ("rmqha-group-commit", PutStatus::PutOk));
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    // Stopped for good: the store is let go.
    Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap().shutdown();
}

/// The host's stop fails the puts still waiting for a slave (FLUSH_SLAVE_TIMEOUT) and runs
/// their callbacks on its own thread; a callback that stops the broker locked the stop's lock
/// a second time on that thread and hung it for good.
#[test]
fn a_callback_stopping_the_broker_from_inside_the_hosts_stop_returns() {
    let _serial = count_panics();
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, proxy, slave) = sync_pair(md.path(), sd.path(), &[("slaveTimeout", "30000")]);
    proxy.stall_up(true); // acks held back: the next put waits
    let (tx, rx) = mpsc::channel();
    let m = master.clone();
    master
        .put_message_async(&message("S", 0, 1, 100), move |r| {
            if r.status != PutStatus::PutOk {
                m.shutdown(); // "stop on any put that is not confirmed"
            }
            let _ = tx.send((std::thread::current().name().unwrap_or_default().to_owned(), r.status));
        })
        .unwrap();
    let stopped = host_shutdown_returns(&master);
    proxy.stall_up(false);
    slave.shutdown();
    assert!(stopped, "the host's stop hung");
    let (_, status) = rx.recv_timeout(Duration::from_secs(5)).expect("the callback did not run");
    assert_eq!(status, PutStatus::FlushSlaveTimeout);
    assert_eq!(common::panic_count().load(Ordering::SeqCst), 0, "threads panicked");
    Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap().shutdown();
}
