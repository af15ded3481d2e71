//! Master and slave in one process on 127.0.0.1: SYNC_MASTER puts are on the slave when they
//! return PUT_OK; an empty slave catches up byte for byte; a stopped slave gives
//! FLUSH_SLAVE_TIMEOUT, then SLAVE_NOT_AVAILABLE; a restarted one catches up.

mod common;

use std::time::{Duration, Instant};

use common::{assert_same_commit_logs, broker_config, message, slave_of, wait_until};
use rmqha_core::{Broker, PutStatus};

#[test]
fn sync_master_put_ok_means_the_slave_holds_the_record() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    for i in 0..500 {
        let r = master.put_message_sync(&message("T", (i % 4) as i32, i, 200)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        // Checked right after the return: the slave already has the bytes.
        assert!(
            slave.max_offset() >= r.end_offset(),
            "put {i}: slave at {} < {}",
            slave.max_offset(),
            r.end_offset()
        );
        let on_slave = slave.store().record_at(r.phy_offset).expect("record on slave");
        let on_master = master.store().record_at(r.phy_offset).unwrap();
        assert_eq!(on_slave.bytes(), on_master.bytes());
    }
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    assert_eq!(slave.queue_max_offset("T", 1), 125);
    let got = slave.get_messages("T", 2, 0, 32).messages();
    assert_eq!(got[0].body, message("T", 2, 2, 200).body);
    let off = master.offsets();
    assert_eq!(off.slaves.len(), 1);
    assert_eq!(off.slave_ack_offset, master.max_offset());
    let so = slave.offsets();
    assert_eq!(so.connected, Some(true));
    assert_eq!(so.master_address.as_deref(), Some(format!("127.0.0.1:{}", master.ha_port()).as_str()));
    slave.shutdown();
    master.shutdown();
}

#[test]
fn empty_slave_catches_up_byte_identical_across_many_files() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..3000 {
        let r = master.put_message_sync(&message("Catch", (i % 3) as i32, i, 50 + i % 400)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    }
    assert!(master.store().commit_log().queue().file_count() >= 10);
    let slave = slave_of(sd.path(), &master, &[]);
    let target = master.max_offset();
    assert!(
        wait_until(Duration::from_secs(30), || slave.max_offset() == target),
        "slave at {}",
        slave.max_offset()
    );
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    assert!(master.store().wait_dispatched(Duration::from_secs(10)));
    for q in 0..3 {
        assert_eq!(slave.queue_max_offset("Catch", q), master.queue_max_offset("Catch", q));
    }
    slave.shutdown();
    master.shutdown();
    assert_same_commit_logs(md.path(), sd.path());
}

#[test]
fn slave_down_gives_timeout_then_not_available_then_recovers() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "300")])).unwrap();
    // No slave at all: SLAVE_NOT_AVAILABLE at once, and the message is stored.
    let r = master.put_message_sync(&message("T", 0, 0, 10)).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable);
    assert!(master.store().message_at(r.phy_offset).is_some());

    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    assert_eq!(master.put_message_sync(&message("T", 0, 1, 10)).unwrap().status, PutStatus::PutOk);
    slave.shutdown();
    drop(slave);
    // The master may not have noticed yet: the put waits for an ack that never comes.
    let mut saw_timeout = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t0 = Instant::now();
        let r = master.put_message_sync(&message("T", 0, 2, 10)).unwrap();
        match r.status {
            PutStatus::FlushSlaveTimeout => {
                saw_timeout = true;
                assert!(t0.elapsed() >= Duration::from_millis(250));
                assert!(t0.elapsed() < Duration::from_secs(3));
            }
            PutStatus::SlaveNotAvailable => break,
            s => panic!("unexpected {s}"),
        }
        assert!(Instant::now() < deadline);
    }
    let _ = saw_timeout; // the disconnect may be seen before the first put
    // Restarted slave catches up and puts are PUT_OK again.
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    assert!(wait_until(Duration::from_secs(10), || master
        .put_message_sync(&message("T", 0, 3, 10))
        .unwrap()
        .status
        == PutStatus::PutOk));
    slave.shutdown();
    master.shutdown();
}

/// Retention deleted the master's oldest CommitLog files. An empty slave receives what the
/// master kept, from its first offset, into files named and filled as the master's, and reads
/// the same messages at the same queue offsets. A slave whose log ends below that first
/// offset is refused, with the reason on both sides, and its log is left as it was.
#[test]
fn after_retention_an_empty_slave_gets_what_was_kept_and_a_lagging_one_is_refused() {
    use rmqha_core::MessageStore;
    use rmqha_core::store::GetMessageStatus;
    use rmqha_core::store::retention::ManualClock;

    let (md, fresh_d, lag_d) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..300 {
        master.put_message_sync(&message("Ret", (i % 2) as i32, i, 300)).unwrap();
    }
    let lagging = slave_of(lag_d.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || lagging.max_offset() == master.max_offset()));
    let lag_end = lagging.max_offset();
    lagging.shutdown();
    drop(lagging);
    for i in 300..3000 {
        master.put_message_sync(&message("Ret", (i % 2) as i32, i, 300)).unwrap();
    }
    master.shutdown();
    drop(master);

    // Retention on the master's store, its clock two hours on at the delete hour.
    let retention = [("fileReservedTime", "1"), ("deleteWhen", "04"), ("cleanResourceInterval", "3600000")];
    let clock = ManualClock::new(4, 0.10);
    let store =
        MessageStore::open_with_clock(broker_config(md.path(), "ASYNC_MASTER", &retention), clock.clone())
            .unwrap();
    store.start().unwrap();
    clock.advance_ms(2 * 3_600_000);
    while store.run_retention().unwrap().commit_log_files > 0 {}
    store.shutdown();
    drop(store);

    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    let min = master.min_offset();
    assert!(min > lag_end, "retention kept the lagging slave's end: min {min}, slave end {lag_end}");
    let fresh = slave_of(fresh_d.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(20), || fresh.max_offset() == master.max_offset()));
    assert_eq!(fresh.min_offset(), min);
    assert!(fresh.store().wait_dispatched(Duration::from_secs(10)));
    assert!(master.store().wait_dispatched(Duration::from_secs(10)));
    for q in 0..2 {
        let (first, end) = (master.queue_min_offset("Ret", q), master.queue_max_offset("Ret", q));
        assert!(first > 0 && end == 1500, "queue {q}: {first}..{end}");
        assert_eq!(
            (fresh.queue_min_offset("Ret", q), fresh.queue_max_offset("Ret", q)),
            (first, end),
            "queue {q}"
        );
        let (on_master, on_slave) =
            (master.get_messages("Ret", q, first, 8), fresh.get_messages("Ret", q, first, 8));
        assert_eq!((on_master.status, on_slave.status), (GetMessageStatus::Found, GetMessageStatus::Found));
        let bodies =
            |r: &rmqha_core::GetMessageResult| r.messages().into_iter().map(|m| m.body).collect::<Vec<_>>();
        assert_eq!(bodies(&on_slave), bodies(&on_master));
        assert_eq!(on_slave.messages()[0].queue_offset, first);
        // Below the kept range: OFFSET_TOO_SMALL with the queue's real minimum (a slave, with
        // RocketMQ's default offsetCheckInSlave=false, leaves the consumer's offset as it was).
        let below = fresh.get_messages("Ret", q, 0, 8);
        assert_eq!((below.status, below.min_offset), (GetMessageStatus::OffsetTooSmall, first));
    }

    // The lagging slave asks for bytes retention deleted: refused, and its log stays as it was.
    let lagging = slave_of(lag_d.path(), &master, &[]);
    assert!(
        wait_until(Duration::from_secs(10), || master
            .offsets()
            .refused_slaves
            .iter()
            .any(|r| r.requested_offset == lag_end && r.reason.contains("below this master's first offset"))),
        "{:?}",
        master.offsets().refused_slaves
    );
    assert!(wait_until(Duration::from_secs(10), || lagging.offsets().last_ha_error.is_some()));
    assert_eq!(lagging.max_offset(), lag_end);

    // New puts still reach the slave that was served.
    for i in 3000..3100 {
        master.put_message_sync(&message("Ret", (i % 2) as i32, i, 300)).unwrap();
    }
    assert!(wait_until(Duration::from_secs(10), || fresh.max_offset() == master.max_offset()));
    lagging.shutdown();
    fresh.shutdown();
    master.shutdown();
    assert_same_commit_logs(md.path(), fresh_d.path());
}

/// Manual failover, as an operator does it with classic master/slave: the slave's store is
/// restarted as the master, and the old master's store as its slave. Queue offsets go on
/// where they were, consumer offsets the slave mirrored are there, and the old master takes
/// the new master's records into byte-identical files.
#[test]
fn a_promoted_slave_continues_and_the_old_master_follows_it() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let remoting = format!("127.0.0.1:{}", master.listen_port());
    let slave = slave_of(sd.path(), &master, &[("masterAddress", &remoting)]);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    for i in 0..600 {
        let r = master.put_message_sync(&message("Fail", (i % 3) as i32, i, 200)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    }
    // The slave's runtime info names both of its master's addresses.
    let info = slave.runtime_info();
    assert_eq!(info["masterAddress"], remoting);
    assert_eq!(info["haMasterAddress"], format!("127.0.0.1:{}", master.ha_port()));
    assert_eq!(info["brokerVersion"], "401", "MQVersion V4_9_4, as a 4.9.4 broker reports");
    assert!(master.store().wait_dispatched(Duration::from_secs(10)));
    master.commit_consumer_offset("group-a", "Fail", 1, 150).unwrap();
    slave.sync_config_now().unwrap();
    assert_eq!(slave.consumer_offset("group-a", "Fail", 1), 150);
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    slave.shutdown();
    master.shutdown();
    drop((slave, master));

    // The slave's store as the new master, from the slave's config with only the role
    // changed: the master addresses left in it are ignored, with a warning naming each.
    let stale = [("haMasterAddress", "127.0.0.1:1"), ("masterAddress", remoting.as_str())];
    let promoted = Broker::start_master(broker_config(sd.path(), "SYNC_MASTER", &stale)).unwrap();
    for key in ["haMasterAddress=127.0.0.1:1 is ignored", &format!("masterAddress={remoting} is ignored")] {
        assert!(
            promoted.config().warnings.iter().any(|w| w.contains(key)),
            "{:?}",
            promoted.config().warnings
        );
    }
    let follower = slave_of(md.path(), &promoted, &[]);
    assert!(wait_until(Duration::from_secs(10), || promoted.offsets().slaves.iter().any(|s| s.transferring)));
    assert_eq!(promoted.consumer_offset("group-a", "Fail", 1), 150, "the mirrored consumer offset survived");
    for i in 600..900 {
        let r = promoted.put_message_sync(&message("Fail", (i % 3) as i32, i, 200)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i} on the promoted slave");
        assert_eq!(r.queue_offset, (i / 3) as i64, "queue offsets go on where they were");
    }
    assert!(promoted.store().wait_dispatched(Duration::from_secs(10)));
    assert!(follower.store().wait_dispatched(Duration::from_secs(10)));
    for q in 0..3 {
        assert_eq!(promoted.queue_max_offset("Fail", q), 300);
        assert_eq!(follower.queue_max_offset("Fail", q), 300);
        let first = promoted.get_messages("Fail", q, 0, 1).messages();
        assert_eq!(first[0].body, message("Fail", q, q as usize, 200).body);
        let last = follower.get_messages("Fail", q, 299, 1).messages();
        assert_eq!(last[0].body, message("Fail", q, 897 + q as usize, 200).body);
    }
    follower.shutdown();
    promoted.shutdown();
    assert_same_commit_logs(md.path(), sd.path());
}

/// Records far larger than a frame (`haTransferBatchSize`, 32 KiB) reach the slave in many
/// frames, each acked with the slave's end inside the record: a SYNC_MASTER put still answers
/// PUT_OK only once the whole record is there, and the slave's dispatcher waits for the rest
/// of a record instead of taking its first frame for damage.
#[test]
fn records_larger_than_a_frame_replicate_whole() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let big = [("mappedFileSizeCommitLog", "16777216")];
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &big)).unwrap();
    let slave = slave_of(sd.path(), &master, &big);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    let sizes = [40_000usize, 300_000, 1 << 20, 4_000_000, 10, 70_000];
    for (i, &len) in sizes.iter().enumerate() {
        let m = message("Big", 0, i, len);
        let r = master.put_message_sync(&m).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "{len} bytes");
        assert!(slave.max_offset() >= r.end_offset(), "{len} bytes: slave at {}", slave.max_offset());
        let on_slave = slave.store().record_at(r.phy_offset).expect("whole record on the slave");
        assert_eq!(on_slave.bytes(), master.store().record_at(r.phy_offset).unwrap().bytes());
    }
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    assert_eq!(slave.queue_max_offset("Big", 0), sizes.len() as i64);
    for (i, &len) in sizes.iter().enumerate() {
        let got = slave.get_messages("Big", 0, i as i64, 1).messages();
        assert_eq!(got[0].body, message("Big", 0, i, len).body, "{len} bytes, read on the slave");
    }
    assert_same_commit_logs(md.path(), sd.path());
}

#[test]
fn a_slave_finds_its_master_by_host_name() {
    // A host name is looked up off the slave's thread (so a hung resolver cannot hold a
    // shutdown); the answer must still reach the connect.
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let addr = format!("localhost:{}", master.ha_port());
    let slave = Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", addr.as_str())]))
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)),
        "slave never connected: {:?}",
        slave.offsets().last_ha_error
    );
    let r = master.put_message_sync(&message("T", 0, 1, 100)).unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    assert!(slave.store().record_at(r.phy_offset).is_some());
    slave.shutdown();
    master.shutdown();
}
