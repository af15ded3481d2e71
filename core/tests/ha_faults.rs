//! Replication under faults: two slaves, K distinct acks, a cut and a stalled link (through a
//! proxy), rogue clients on the HA port, refused offsets, and a master address changed at
//! runtime.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{
    Proxy, assert_same_commit_logs, broker_config, commit_log_files, message, slave_of, wait_until,
};
use rmqha_core::{Broker, Error, PutStatus};

fn ha_addr(b: &Broker) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", b.ha_port()).parse().unwrap()
}

/// Whether the slave's last HA error mentions `needle` within 10 s.
fn ha_error_says(slave: &Broker, needle: &str) -> bool {
    wait_until(Duration::from_secs(10), || slave.offsets().last_ha_error.is_some_and(|e| e.contains(needle)))
}

/// A slave on `dir` replicating from `master` through a fault-injecting proxy.
fn slave_through_proxy(dir: &std::path::Path, master: &Broker) -> (Proxy, std::sync::Arc<Broker>) {
    let proxy = Proxy::start(ha_addr(master));
    let addr = proxy.addr.to_string();
    let slave = Broker::start_slave(broker_config(dir, "SLAVE", &[("haMasterAddress", &addr)])).unwrap();
    (proxy, slave)
}

fn transferring(b: &Broker) -> usize {
    b.offsets().slaves.iter().filter(|s| s.transferring).count()
}

#[test]
fn two_slaves_both_byte_identical() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let master = Broker::start_master(broker_config(dirs[0].path(), "SYNC_MASTER", &[])).unwrap();
    let addr = ha_addr(&master).to_string();
    let slaves: Vec<_> = (1..3)
        .map(|i| {
            Broker::start_slave(broker_config(dirs[i].path(), "SLAVE", &[("haMasterAddress", &addr)]))
                .unwrap()
        })
        .collect();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 2));
    for i in 0..1000 {
        assert_eq!(master.put_message_sync(&message("Two", 0, i, 300)).unwrap().status, PutStatus::PutOk);
    }
    let end = master.max_offset();
    for s in &slaves {
        assert!(wait_until(Duration::from_secs(10), || s.max_offset() == end));
        s.shutdown();
    }
    master.shutdown();
    for d in &dirs[1..] {
        assert_same_commit_logs(dirs[0].path(), d.path());
    }
}

#[test]
fn k_distinct_slave_hosts_must_ack() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let master = Broker::start_master(broker_config(
        dirs[0].path(),
        "SYNC_MASTER",
        &[("haSyncSlaveCount", "2"), ("slaveTimeout", "300")],
    ))
    .unwrap();
    let addr = ha_addr(&master).to_string();
    // One slave from 127.0.0.2: fewer than K hosts, so not available.
    let s1 = Broker::start_slave(broker_config(
        dirs[1].path(),
        "SLAVE",
        &[("haMasterAddress", &addr), ("haClientBindAddress", "127.0.0.2")],
    ))
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    assert_eq!(
        master.put_message_sync(&message("K", 0, 0, 10)).unwrap().status,
        PutStatus::SlaveNotAvailable
    );
    // A second connection from the same host does not make two slaves.
    let s1b = Broker::start_slave(broker_config(
        dirs[2].path(),
        "SLAVE",
        &[("haMasterAddress", &addr), ("haClientBindAddress", "127.0.0.2")],
    ))
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 2));
    assert_eq!(
        master.put_message_sync(&message("K", 0, 1, 10)).unwrap().status,
        PutStatus::SlaveNotAvailable
    );
    s1b.shutdown();
    drop(s1b);
    // A slave on a second host: both must ack, and then PUT_OK.
    let d3 = tempfile::tempdir().unwrap();
    let s2 = Broker::start_slave(broker_config(
        d3.path(),
        "SLAVE",
        &[("haMasterAddress", &addr), ("haClientBindAddress", "127.0.0.3")],
    ))
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 2));
    for i in 2..50 {
        let r = master.put_message_sync(&message("K", 0, i, 10)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        assert!(s1.max_offset() >= r.end_offset() && s2.max_offset() >= r.end_offset());
    }
    s2.shutdown();
    s1.shutdown();
    master.shutdown();
}

#[test]
fn cut_and_stalled_link_through_a_proxy() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "400")])).unwrap();
    let (proxy, slave) = slave_through_proxy(sd.path(), &master);
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    for i in 0..100 {
        assert_eq!(master.put_message_sync(&message("P", 0, i, 100)).unwrap().status, PutStatus::PutOk);
    }
    // Stalled: puts time out after slaveTimeout, stored on the master.
    proxy.stall(true);
    let t0 = Instant::now();
    let r = master.put_message_sync(&message("P", 0, 100, 100)).unwrap();
    assert_eq!(r.status, PutStatus::FlushSlaveTimeout);
    assert!(t0.elapsed() >= Duration::from_millis(350) && t0.elapsed() < Duration::from_secs(3));
    assert!(master.store().message_at(r.phy_offset).is_some());
    proxy.stall(false);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    assert_eq!(master.put_message_sync(&message("P", 0, 101, 100)).unwrap().status, PutStatus::PutOk);
    // Cut: the slave reconnects through the proxy and catches up what was put meanwhile.
    proxy.cut();
    for i in 102..300 {
        master.put_message_sync(&message("P", 0, i, 100)).unwrap();
    }
    assert!(wait_until(Duration::from_secs(20), || slave.max_offset() == master.max_offset()));
    assert!(wait_until(Duration::from_secs(10), || master
        .put_message_sync(&message("P", 0, 300, 100))
        .unwrap()
        .status
        == PutStatus::PutOk));
    slave.shutdown();
    master.shutdown();
    assert_same_commit_logs(md.path(), sd.path());
}

#[test]
fn rogue_clients_affect_only_their_connection() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(
        md.path(),
        "SYNC_MASTER",
        &[("slaveTimeout", "300"), ("haHousekeepingInterval", "1000")],
    ))
    .unwrap();
    let ha = ha_addr(&master);
    for i in 0..10 {
        master.put_message_sync(&message("R", 0, i, 100)).unwrap();
    }
    // A "slave" that claims everything: its first report is taken as where it starts, and its
    // next ack is beyond the master's max, so the connection is closed and nothing counts.
    let mut liar = TcpStream::connect(ha).unwrap();
    liar.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || transferring(&master) == 1));
    liar.write_all(&i64::MAX.to_be_bytes()).unwrap();
    let r = master.put_message_sync(&message("R", 0, 10, 100)).unwrap();
    assert_ne!(r.status, PutStatus::PutOk, "an ack beyond max must never release a put");
    assert!(wait_until(Duration::from_secs(5), || transferring(&master) == 0));
    assert!(master.slave_ack_offset() < i64::MAX);
    // The closed connection reads EOF.
    liar.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sink = Vec::new();
    let _ = liar.read_to_end(&mut sink);

    // Random bytes, a half report, and silence, all at once, beside a real slave.
    let mut garbage = TcpStream::connect(ha).unwrap();
    garbage.write_all(&[0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0xff, 0xee]).unwrap();
    let mut half = TcpStream::connect(ha).unwrap();
    half.write_all(&[0, 0, 0]).unwrap();
    let silent = TcpStream::connect(ha).unwrap();
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &ha.to_string())]))
            .unwrap();
    assert!(wait_until(Duration::from_secs(10), || master
        .put_message_sync(&message("R", 0, 11, 100))
        .unwrap()
        .status
        == PutStatus::PutOk));
    for i in 12..200 {
        let r = master.put_message_sync(&message("R", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    }
    // Silent and half-report connections are closed by housekeeping; the slave stays.
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.len() == 1));
    assert!(!master.offsets().refused_slaves.is_empty(), "the garbage offset was refused and recorded");
    drop((garbage, half, silent));
    slave.shutdown();
    master.shutdown();
}

/// A flood of silent connections cannot hold the HA port: with 16 that have not reported,
/// each new one takes the place of the oldest (before, each held two threads until the
/// housekeeping interval), and a real slave still connects and replicates.
#[test]
fn silent_connections_make_room_for_new_ones() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "5000")])).unwrap();
    let ha = ha_addr(&master);
    let mut silent: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(ha).unwrap()).collect();
    // The master accepts in order: once the real slave streams, it has seen all 40.
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &ha.to_string())]))
            .unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    let open = master.offsets().slaves.len();
    assert!(open <= 17, "{open} HA connections open");
    // The oldest were closed by the master: they read EOF at once.
    for s in &mut silent[..20] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        let r = s.read(&mut b);
        let closed = match &r {
            Ok(0) => true,
            Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            Ok(_) => false,
        };
        assert!(closed, "an old silent connection is still open: {r:?}");
    }
    for i in 0..20 {
        let r = master.put_message_sync(&message("S", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    }
    drop(silent);
    slave.shutdown();
    master.shutdown();
}

/// A flood of silent connections from one host cannot push out another host's connection
/// that has not reported yet (a slave in its `haAuthSecret` handshake, or just connecting):
/// before, the oldest silent connection went first, whichever host it came from.
#[test]
fn a_flood_from_one_host_spares_another_hosts_connection() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let ha = ha_addr(&master);
    // The other host: 127.0.0.2, also loopback. It connects and has not reported yet.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    other.bind(&"127.0.0.2:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    other.connect(&ha.into()).unwrap();
    let mut other: TcpStream = other.into();
    let mut flood: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(ha).unwrap()).collect();
    // The master accepts in order: once a slave connected after the flood streams, it has
    // seen all of it.
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &ha.to_string())]))
            .unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    let closed = |s: &mut TcpStream| {
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut b = [0u8; 1];
        !matches!(s.read(&mut b), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
    };
    assert!(flood[..30].iter_mut().all(closed), "the flood's oldest connections were kept");
    assert!(!closed(&mut other), "the other host's connection was closed to make room for the flood");
    // It reports now and is a slave like any other.
    other.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || master
        .offsets()
        .slaves
        .iter()
        .any(|s| s.addr.ip() == std::net::IpAddr::from([127, 0, 0, 2]))));
    drop(flood);
    slave.shutdown();
    master.shutdown();
}

/// A slave pointed at a master whose log has the same length but other bytes (another store,
/// or one that lost records in a crash and wrote new ones up to the slave's offset) must not
/// take new bytes onto its diverged log. The master resends the records before the slave's
/// offset, the slave finds they differ and closes the connection; it never acks, so a
/// SYNC_MASTER put there is not PUT_OK. RocketMQ (and rmqha before) accepted such a slave
/// because the offset fits.
#[test]
fn a_slave_whose_log_differs_at_the_same_offset_is_not_fed() {
    let (m1d, m2d, sd) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m1 = Broker::start_master(broker_config(m1d.path(), "ASYNC_MASTER", &[])).unwrap();
    let m2 =
        Broker::start_master(broker_config(m2d.path(), "SYNC_MASTER", &[("slaveTimeout", "500")])).unwrap();
    // The same sizes on both, other bytes (topic, store timestamps): the logs end alike.
    for i in 0..300 {
        m1.put_message_sync(&message("A", 0, i, 300)).unwrap();
        m2.put_message_sync(&message("B", 0, i, 300)).unwrap();
    }
    assert_eq!(m1.max_offset(), m2.max_offset());
    let slave = slave_of(sd.path(), &m1, &[]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == m1.max_offset()));
    let before = commit_log_files(sd.path());
    let end = slave.max_offset();

    slave.set_master_address(&ha_addr(&m2).to_string()).unwrap();
    assert!(ha_error_says(&slave, "diverged"), "{:?}", slave.offsets().last_ha_error);
    for i in 300..310 {
        let r = m2.put_message_sync(&message("B", 0, i, 300)).unwrap();
        assert_ne!(r.status, PutStatus::PutOk, "put {i} released by a diverged slave");
    }
    assert_eq!(slave.max_offset(), end, "the diverged slave took bytes");
    slave.shutdown();
    // Its files hold what they held (a file made ahead and still empty may come or go).
    let after = commit_log_files(sd.path());
    for (name, bytes) in before.iter().chain(after.iter()) {
        let (b, a) = (before.get(name), after.get(name));
        let empty = |f: Option<&Vec<u8>>| f.is_none_or(|f| f.iter().all(|&x| x == 0));
        assert!(a == b || (empty(a) && empty(b)), "CommitLog file {name} changed ({} bytes)", bytes.len());
    }
    m1.shutdown();
    m2.shutdown();
}

/// The same divergence while a SYNC_MASTER put waits: the diverged slave's first report
/// (an offset that fits, claimed before the master has checked a byte) must not release it.
/// Until 2026-11-30 the master counted that report as an ack at once and the put answered
/// PUT_OK, with the only slave holding it stalled, before the diverged slave had compared
/// the resent records and hung up.
#[test]
fn a_diverged_slave_releases_no_waiting_put_with_its_first_report() {
    let (md, hd, dd) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "30000")])).unwrap();
    let (proxy, healthy) = slave_through_proxy(hd.path(), &master);
    // Another store with records of the same sizes, one more than the master has yet: it
    // ends where the master's waiting put will end, with other bytes.
    let other = Broker::start_master(broker_config(dd.path(), "ASYNC_MASTER", &[])).unwrap();
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    for i in 0..300 {
        assert_eq!(master.put_message_sync(&message("A", 0, i, 300)).unwrap().status, PutStatus::PutOk);
        other.put_message_sync(&message("B", 0, i, 300)).unwrap();
    }
    let other_end = other.put_message_sync(&message("B", 0, 300, 300)).unwrap().end_offset();
    other.shutdown();
    drop(other);

    proxy.stall(true);
    let m = master.clone();
    let waiting = std::thread::spawn(move || m.put_message_sync(&message("A", 0, 300, 300)).unwrap());
    assert!(wait_until(Duration::from_secs(10), || master.max_offset() == other_end));
    let diverged = Broker::start_slave(broker_config(
        dd.path(),
        "SLAVE",
        &[("haMasterAddress", &ha_addr(&master).to_string())],
    ))
    .unwrap();
    assert!(ha_error_says(&diverged, "diverged"), "{:?}", diverged.offsets().last_ha_error);
    assert!(!waiting.is_finished(), "the waiting put was answered by the diverged slave's report");

    // The healthy slave, let through again, acks it.
    proxy.stall(false);
    assert_eq!(waiting.join().unwrap().status, PutStatus::PutOk);
    diverged.shutdown();
    healthy.shutdown();
    master.shutdown();
}

/// A slave wrote a SYNC_MASTER put's record, then its link reset before the ack arrived. It
/// reconnects reporting the put's end: that first report does not count (it is unchecked),
/// and the slave used to repeat the same offset only at its next heartbeat (5 s), after the
/// put had timed out though both machines held it. Once it compared the resent records it
/// now confirms at once, and the put is PUT_OK.
#[test]
fn a_slave_that_lost_its_ack_in_a_reset_confirms_the_put_after_reconnecting() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let (proxy, slave) = slave_through_proxy(sd.path(), &master);
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
    for i in 0..50 {
        assert_eq!(master.put_message_sync(&message("L", 0, i, 200)).unwrap().status, PutStatus::PutOk);
    }
    // The slave's acks stop at the proxy; the master's bytes still reach it.
    proxy.stall_up(true);
    let before = master.max_offset();
    let m = master.clone();
    let t0 = Instant::now();
    let waiting = std::thread::spawn(move || m.put_message_sync(&message("L", 0, 50, 200)).unwrap());
    assert!(wait_until(Duration::from_secs(10), || master.max_offset() > before
        && slave.max_offset() == master.max_offset()));
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    assert!(!waiting.is_finished(), "answered without an ack");
    // The link resets; the ack in flight is lost. The reconnection flows both ways.
    proxy.cut();
    proxy.stall_up(false);
    let r = waiting.join().unwrap();
    assert_eq!(r.status, PutStatus::PutOk, "after {:?}", t0.elapsed());
    assert!(slave.max_offset() >= r.end_offset());
    slave.shutdown();
    master.shutdown();
}

/// A slave whose mappedFileSizeCommitLog differs from the master's cannot lay the master's
/// bytes out in its files (the master's end-of-file filler lands mid-file, or a record runs
/// past the slave's file end). It says so, naming the key, and stops acking, so SYNC puts are
/// not PUT_OK for records it cannot serve. Before, it acked everything and left a third to
/// two thirds of the messages unreadable on the slave.
#[test]
fn a_slave_with_another_file_size_says_so_and_stops_acking() {
    for slave_file in ["131072", "32768"] {
        let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master =
            Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "500")]))
                .unwrap();
        let slave = Broker::start_slave(broker_config(
            sd.path(),
            "SLAVE",
            &[("haMasterAddress", &ha_addr(&master).to_string()), ("mappedFileSizeCommitLog", slave_file)],
        ))
        .unwrap();
        assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 1));
        // 3 of the master's 64 KiB files. Larger slave files: no record of the master's second
        // file is acked, not even the first ones (the slave found the filler only when its
        // dispatcher read it, after it had acked the frames that followed).
        let mut i = 0;
        let mut released = Vec::new();
        while master.max_offset() < 3 * 65536 {
            let r = master.put_message_sync(&message("F", 0, i, 300)).unwrap();
            if r.status == PutStatus::PutOk && r.phy_offset >= 65536 && slave_file == "131072" {
                released.push(r.phy_offset);
            }
            i += 1;
        }
        assert_eq!(released, Vec::<i64>::new(), "PUT_OK past the master's first file end");
        assert!(
            ha_error_says(&slave, "mappedFileSizeCommitLog"),
            "slave files of {slave_file}: {:?}",
            slave.offsets().last_ha_error
        );
        for j in 0..5 {
            let r = master.put_message_sync(&message("F", 0, i + j, 300)).unwrap();
            assert_ne!(r.status, PutStatus::PutOk, "slave files of {slave_file}: put released");
        }
        slave.shutdown();
        master.shutdown();
    }
}

#[test]
fn refused_offsets_and_new_master_address() {
    let (m1d, m2d, sd) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m1 = Broker::start_master(broker_config(m1d.path(), "ASYNC_MASTER", &[])).unwrap();
    let m2 = Broker::start_master(broker_config(m2d.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..200 {
        m1.put_message_sync(&message("A", 0, i, 500)).unwrap();
    }
    for i in 0..20 {
        m2.put_message_sync(&message("B", 0, i, 50)).unwrap();
    }
    // A slave that is not on a record boundary of the master is refused, with the reason.
    let mut probe = TcpStream::connect(ha_addr(&m1)).unwrap();
    probe.write_all(&7i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || !m1.offsets().refused_slaves.is_empty()));
    assert!(m1.offsets().refused_slaves[0].reason.contains("record boundary"));

    let slave = slave_of(sd.path(), &m1, &[]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == m1.max_offset()));
    // Switched to a master that is behind it: refused as diverged, and the log is untouched.
    let before = slave.max_offset();
    slave.set_master_address(&ha_addr(&m2).to_string()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || m2
        .offsets()
        .refused_slaves
        .iter()
        .any(|r| r.reason.contains("ahead"))));
    // The master says where its log ends before it closes (an empty frame there): the slave
    // names that, and the way out.
    assert!(ha_error_says(&slave, "is ahead of it"), "{:?}", slave.offsets().last_ha_error);
    let e = slave.offsets().last_ha_error.unwrap();
    assert!(e.contains(&format!("lines up to {} at most", m2.max_offset())), "{e}");
    assert!(e.contains("rmqha truncate --offset") && e.contains("haSlaveTruncateDiverged"), "{e}");
    assert_eq!(slave.max_offset(), before);
    assert_eq!(slave.offsets().master_address.as_deref(), Some(ha_addr(&m2).to_string().as_str()));
    // Back to the first master: it catches up what was put meanwhile.
    for i in 200..300 {
        m1.put_message_sync(&message("A", 0, i, 500)).unwrap();
    }
    assert!(slave.offsets().last_ha_error.is_some(), "m2's refusal shows on the slave");
    slave.set_master_address(&ha_addr(&m1).to_string()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == m1.max_offset()));
    assert_eq!(slave.offsets().connected, Some(true));
    // Streaming again, the earlier session's error is history: status does not show it.
    assert!(wait_until(Duration::from_secs(10), || slave.offsets().last_ha_error.is_none()));
    // An address that is not host:port is refused, naming it, and the slave stays where it is.
    for bad in ["", "nonsense", "127.0.0.1", ":10912", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:x"] {
        match slave.set_master_address(bad) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains(&format!("{bad:?}")), "{why}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(slave.offsets().master_address.as_deref(), Some(ha_addr(&m1).to_string().as_str()));
    assert!(matches!(m1.set_master_address(&ha_addr(&m2).to_string()), Err(Error::NotSlave(_))));
    slave.shutdown();
    m1.shutdown();
    m2.shutdown();
}

/// The master sends frame bodies with `sendfile`, which has no MSG_NOSIGNAL: a slave that
/// goes away mid-stream must close its connection, not raise SIGPIPE, whose default action
/// ends the process (a C host need not ignore it, as Rust, Python and Node programs do). This
/// test process puts SIGPIPE back to its default first, so a leaked signal would kill it.
#[cfg(target_os = "linux")]
#[test]
fn a_slave_vanishing_mid_stream_raises_no_sigpipe() {
    // SAFETY: nextest runs each test in its own process; nothing else here handles SIGPIPE.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let md = tempfile::tempdir().unwrap();
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..2000 {
        master.put_message_sync(&message("Pipe", 0, i, 1000)).unwrap();
    }
    let ha = ha_addr(&master);
    for round in 0..10 {
        // A slave that asks for everything and reads a little, while the master is still
        // sending megabytes; then it goes away (a reset), or acks beyond the master's end, so
        // that the master shuts the connection down under its writer (EPIPE).
        let mut s = TcpStream::connect(ha).unwrap();
        s.write_all(&0i64.to_be_bytes()).unwrap();
        let mut buf = [0u8; 4096];
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.read_exact(&mut buf).unwrap();
        if round % 2 == 1 {
            s.write_all(&i64::MAX.to_be_bytes()).unwrap();
            assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.is_empty()));
        }
        drop(s);
        assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.is_empty()));
    }
    // Still alive, and still serving a real slave.
    let sd = tempfile::tempdir().unwrap();
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &ha.to_string())]))
            .unwrap();
    let end = master.max_offset();
    assert!(wait_until(Duration::from_secs(20), || slave.max_offset() == end));
    assert_same_commit_logs(md.path(), sd.path());
    slave.shutdown();
    master.shutdown();
}

/// Retention deletes the files a connected slave still needs while it catches up. The master
/// refuses that slave, naming the offset, and closes the connection: RocketMQ's writer waits
/// for the deleted bytes forever, sending heartbeats that tell the slave all is well.
#[test]
fn a_slave_whose_next_bytes_retention_deleted_is_refused() {
    let md = tempfile::tempdir().unwrap();
    let every_hour = (0..24).map(|h| format!("{h:02}")).collect::<Vec<_>>().join(";");
    let master = Broker::start_master(broker_config(
        md.path(),
        "ASYNC_MASTER",
        &[("fileReservedTime", "0"), ("deleteWhen", &every_hour), ("cleanResourceInterval", "3600000")],
    ))
    .unwrap();
    // More than loopback's socket buffers hold, so the slave below is far from the end.
    for i in 0..30_000 {
        master.put_message_sync(&message("Gone", (i % 2) as i32, i, 1000)).unwrap();
    }
    let end = master.max_offset();
    // A slave that reports offset 0 and does not read for now.
    let mut slave = TcpStream::connect(ha_addr(&master)).unwrap();
    slave.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || transferring(&master) == 1));
    assert!(master.store().wait_dispatched(Duration::from_secs(20)));
    // Every file but the last is older than fileReservedTime (0 h) and may go once on disk.
    master.store().flush().unwrap();
    assert!(wait_until(Duration::from_secs(10), || {
        master.store().run_retention().unwrap();
        master.min_offset() > end - 65536
    }));
    // Reading on, the slave gets what was in flight, then the end of the stream.
    slave.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match slave.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received += n,
            Err(e) => panic!("the master kept the connection open after {received} bytes: {e}"),
        }
    }
    assert!((received as i64) < end, "received {received} of {end}");
    let refused = master.offsets().refused_slaves;
    assert!(
        refused.iter().any(|r| r.reason.contains("deleted by retention before this slave received it")),
        "{refused:?}"
    );
    master.shutdown();
}

/// A slave whose first file starts after the master's first offset (it started with
/// `syncFromLastFile`, or its own retention went further) and whose log was cut back to that
/// file's start. The master resends the records before the reported offset for the
/// divergence check; they lie wholly below anything this slave holds, and it ended every
/// session on them ("master sent offset .. but this slave's log ends at .."): it never
/// replicated again.
#[test]
fn a_slave_cut_back_to_its_first_files_start_replicates_again() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_past_two_files(md.path());
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let first = slave.min_offset();
    assert!(first > master.min_offset() && first % 65536 == 0, "slave starts at {first}");
    slave.shutdown();
    drop(slave);
    {
        let store = rmqha_core::MessageStore::open(broker_config(sd.path(), "SLAVE", &[])).unwrap();
        store.start().unwrap();
        // Past the end is refused (it claimed bytes past the last file's end as written).
        let past = store.max_offset() as u64 + (64 << 20);
        let err = store.truncate(past).unwrap_err().to_string();
        assert!(err.contains("beyond the CommitLog's end"), "{err}");
        store.truncate(first as u64).unwrap();
        assert_eq!(store.max_offset(), first);
        store.shutdown();
    }
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(
        wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()),
        "the slave stays at {}: {:?}",
        slave.max_offset(),
        slave.offsets().last_ha_error
    );
    // Every file the slave holds is byte-identical to the master's.
    let (m, s) = (commit_log_files(md.path()), commit_log_files(sd.path()));
    assert!(!s.is_empty());
    for (name, bytes) in &s {
        // A next file made ahead by the slave's allocator may not be on the master yet.
        let made_ahead = !m.contains_key(name) && bytes.iter().all(|&b| b == 0);
        assert!(made_ahead || m.get(name) == Some(bytes), "{name} differs from the master's");
    }
    master.shutdown();
    slave.shutdown();
}

/// An ASYNC_MASTER with `syncFromLastFile` whose log fills two files and starts a third, so
/// that an empty slave of it starts at its last file.
fn master_past_two_files(dir: &std::path::Path) -> std::sync::Arc<Broker> {
    let master =
        Broker::start_master(broker_config(dir, "ASYNC_MASTER", &[("syncFromLastFile", "true")])).unwrap();
    let mut i = 0;
    while master.max_offset() < 2 * 65536 + 1000 {
        master.put_message_sync(&message("Cut", 0, i, 300)).unwrap();
        i += 1;
    }
    master
}

fn read_frame(s: &mut TcpStream) -> (i64, Vec<u8>) {
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    let offset = i64::from_be_bytes(head[..8].try_into().unwrap());
    let size = i32::from_be_bytes(head[8..].try_into().unwrap());
    let mut body = vec![0u8; size as usize];
    s.read_exact(&mut body).unwrap();
    (offset, body)
}

/// A fake master's side of a slave's connection: accepts it and reads its first report.
fn accept_slave(fake: &std::net::TcpListener) -> (TcpStream, i64) {
    let (mut conn, _) = fake.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut report = [0u8; 8];
    conn.read_exact(&mut report).unwrap();
    (conn, i64::from_be_bytes(report))
}

/// Sends one HA frame: `[i64 offset][i32 size][body]`.
fn send_frame(conn: &mut TcpStream, offset: i64, body: &[u8]) {
    let mut frame = offset.to_be_bytes().to_vec();
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(body);
    conn.write_all(&frame).unwrap();
}

/// A stock RocketMQ slave reports wherever its last frame ended, often inside a record, and
/// closes a connection whose first frame does not start exactly there. With
/// `haVerifySlaveTail=false` the master serves it as RocketMQ does; by default an rmqha
/// master refuses the offset inside a record and resends the records before a boundary.
#[test]
fn with_tail_verification_off_a_rocketmq_slave_is_served_from_exactly_its_offset() {
    let md = tempfile::tempdir().unwrap();
    let master =
        Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[("haVerifySlaveTail", "false")]))
            .unwrap();
    for i in 0..50 {
        master.put_message_sync(&message("J", 0, i, 300)).unwrap();
    }
    let max = master.max_offset();
    let log = commit_log_files(md.path()).into_values().next().unwrap();
    for report in [max - 7, max - 1000, 1] {
        let mut s = TcpStream::connect(ha_addr(&master)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&report.to_be_bytes()).unwrap();
        let (offset, body) = read_frame(&mut s);
        assert_eq!(offset, report, "the first frame starts at the reported offset");
        assert!(!body.is_empty());
        assert_eq!(body[..], log[report as usize..report as usize + body.len()]);
    }
    assert!(master.offsets().refused_slaves.is_empty(), "{:?}", master.offsets().refused_slaves);
    master.shutdown();

    // The default, for rmqha slaves: an offset inside a record is refused, and a boundary gets
    // the records before it resent first.
    let dd = tempfile::tempdir().unwrap();
    let master = Broker::start_master(broker_config(dd.path(), "ASYNC_MASTER", &[])).unwrap();
    let fs = master.store().commit_log().file_size() as i64;
    for i in 0.. {
        master.put_message_sync(&message("J", 0, i, 300)).unwrap();
        if master.max_offset() % fs > 40_000 {
            break;
        }
    }
    let max = master.max_offset();
    let mut s = TcpStream::connect(ha_addr(&master)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&max.to_be_bytes()).unwrap();
    let (offset, _) = read_frame(&mut s);
    // The last 32 KiB, from wherever they start (the slave compares bytes, not records): no
    // walk over the file's record headers to find a record start.
    assert_eq!(offset, max - 32 * 1024, "resent from {offset}, before {max}");
    // A stock slave closes on that frame (it starts before the slave's end). The master
    // names both causes (a diverged log, or a stock slave) and the setting stock slaves need.
    drop(s);
    let refused_with = |what: &str| {
        master
            .offsets()
            .refused_slaves
            .iter()
            .any(|r| r.reason.contains(what) && r.reason.contains("haVerifySlaveTail=false"))
    };
    assert!(
        wait_until(Duration::from_secs(5), || refused_with(
            "before acking the bytes resent before its offset"
        )),
        "{:?}",
        master.offsets().refused_slaves
    );
    let mut probe = TcpStream::connect(ha_addr(&master)).unwrap();
    probe.write_all(&(max - 7).to_be_bytes()).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || refused_with("not a record boundary")),
        "{:?}",
        master.offsets().refused_slaves
    );
    master.shutdown();
}

/// A connection that has not reported (a port probe, a health check) is not listed as a
/// slave: before, each showed in `offsets().slaves` (and `slaveCount`) as a slave all behind.
#[test]
fn a_connection_that_never_reported_is_no_slave() {
    let md = tempfile::tempdir().unwrap();
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    master.put_message_sync(&message("P", 0, 0, 100)).unwrap();
    let mut probe = TcpStream::connect(ha_addr(&master)).unwrap();
    // One port accepts in order: once the reporting connection is listed, the probe (which
    // connected first) has been accepted too.
    let mut reporter = TcpStream::connect(ha_addr(&master)).unwrap();
    reporter.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || !master.offsets().slaves.is_empty()));
    let listed: Vec<_> = master.offsets().slaves.iter().map(|s| s.addr).collect();
    assert_eq!(listed, vec![reporter.local_addr().unwrap()]);
    probe.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(wait_until(Duration::from_secs(5), || master.offsets().slaves.len() == 2));
    master.shutdown();
}

/// A reconnecting slave whose dispatcher lags reports the end of its complete records, not
/// where dispatch stands: from there the master would resend up to a whole file for it to
/// compare before it could ack anything new. A partial record at its tail is reported from
/// where that record starts, the nearest offset the master serves.
#[test]
fn a_slave_with_a_lagging_dispatcher_reports_its_last_record_boundary() {
    let (md, sd, master, slave) = async_master_and_slave();
    master.put_message_sync(&message("L", 0, 0, 100)).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    let held = slave.store().dispatcher().exclusive(); // no dispatch round from here on
    for i in 1..40 {
        master.put_message_sync(&message("L", 0, i, 300)).unwrap();
    }
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let end = slave.max_offset();
    assert!(slave.store().dispatcher().reput_from() < end as u64);

    // A fake master: the slave's first report on connecting is what this test checks.
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    slave.set_master_address(&fake.local_addr().unwrap().to_string()).unwrap();
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "complete records up to its end");

    // Feed it the first 60 bytes of the master's next record, then cut: a partial record.
    master.put_message_sync(&message("L", 0, 40, 300)).unwrap();
    let log = commit_log_files(md.path()).into_values().next().unwrap();
    let part = &log[end as usize..end as usize + 60];
    send_frame(&mut conn, end, part);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == end + 60));
    drop(conn);
    let (conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "where the partial record starts");
    drop(conn);
    drop(held);

    // Back on the real master, it completes the record and goes on.
    slave.set_master_address(&ha_addr(&master).to_string()).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    // (The master may have made its next file already; the slave makes it when needed.)
    let first = "00000000000000000000";
    assert!(
        commit_log_files(md.path())[first] == commit_log_files(sd.path())[first],
        "the first file differs"
    );
    slave.shutdown();
    master.shutdown();
}

/// An ASYNC_MASTER and a slave of it, each on a directory of its own (`md`, `sd`).
fn async_master_and_slave()
-> (tempfile::TempDir, tempfile::TempDir, std::sync::Arc<Broker>, std::sync::Arc<Broker>) {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    let slave = slave_of(sd.path(), &master, &[]);
    (md, sd, master, slave)
}

/// A slave whose fake master (`fake`, where it is connected now) fed it the first 60 bytes
/// of its real master's next record, altered by `alter`: a partial record at `end` that the
/// master does not have. `real` is the master's record there.
struct Partial {
    md: tempfile::TempDir,
    sd: tempfile::TempDir,
    master: std::sync::Arc<Broker>,
    slave: std::sync::Arc<Broker>,
    fake: std::net::TcpListener,
    end: i64,
    real: Vec<u8>,
}

fn slave_holding_a_partial_record(alter: impl FnOnce(&mut [u8])) -> Partial {
    let (md, sd, master, slave) = async_master_and_slave();
    for i in 0..10 {
        master.put_message_sync(&message("T", 0, i, 200)).unwrap();
    }
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let end = slave.max_offset();
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    slave.set_master_address(&fake.local_addr().unwrap().to_string()).unwrap();
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end);
    master.put_message_sync(&message("T", 0, 10, 200)).unwrap();
    let log = commit_log_files(md.path()).into_values().next().unwrap();
    let len = i32::from_be_bytes(log[end as usize..end as usize + 4].try_into().unwrap()) as usize;
    let real = log[end as usize..end as usize + len].to_vec();
    let mut other = real[..60].to_vec();
    alter(&mut other);
    send_frame(&mut conn, end, &other);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == end + 60));
    drop(conn);
    Partial { md, sd, master, slave, fake, end, real }
}

/// A slave holding part of a record that its master lost (in a crash, say) and then wrote
/// other bytes over: only that partial record differs. No put's record ends inside it, so
/// dropping it loses nothing acknowledged; before, the slave found "the logs diverged" on
/// every reconnect and never replicated again.
#[test]
fn a_partial_record_the_master_no_longer_has_is_dropped_and_replaced() {
    // A record the real master never wrote: its next record with another born timestamp.
    let Partial { md, sd, master, slave, fake, end, real } =
        slave_holding_a_partial_record(|bytes| bytes[40..48].copy_from_slice(&7i64.to_be_bytes()));
    let len = real.len();

    // Again through the fake master, now sending the real record in two frames, the first
    // ending before the difference (it matches the slave's bytes): the slave keeps what
    // matched and takes the rest from the second frame. (Dropping from the partial record's
    // start needed bytes the first frame had already taken, and panicked the client.)
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "where the partial record starts");
    for (at, bytes) in [(end, &real[..30]), (end + 30, &real[30..])] {
        send_frame(&mut conn, at, bytes);
    }
    assert!(
        wait_until(Duration::from_secs(10), || slave.max_offset() == end + len as i64),
        "{:?}",
        slave.offsets().last_ha_error
    );
    let held = commit_log_files(sd.path()).into_values().next().unwrap();
    assert!(held[end as usize..end as usize + len] == real[..], "the slave holds the master's record");
    drop(conn);

    // Once more a partial record the master does not have (the first 60 bytes of its next
    // record, altered), this time resolved by the real master's resend.
    let end = end + len as i64;
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end);
    master.put_message_sync(&message("T", 0, 11, 200)).unwrap();
    let log = commit_log_files(md.path()).into_values().next().unwrap();
    let mut other = log[end as usize..end as usize + 60].to_vec();
    other[40..48].copy_from_slice(&7i64.to_be_bytes());
    send_frame(&mut conn, end, &other);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == end + 60));
    drop(conn);

    // Back on the real master: its resent bytes match up to the partial record, which is
    // dropped for the master's; then the slave goes on, byte-identical.
    slave.set_master_address(&ha_addr(&master).to_string()).unwrap();
    for i in 12..20 {
        master.put_message_sync(&message("T", 0, i, 200)).unwrap();
    }
    assert!(
        wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()),
        "{:?}",
        slave.offsets().last_ha_error
    );
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    let first = "00000000000000000000";
    assert!(
        commit_log_files(md.path())[first] == commit_log_files(sd.path())[first],
        "the first file differs"
    );
    assert_eq!(slave.queue_max_offset("T", 0), 20);
    slave.shutdown();
    master.shutdown();
}

/// After a partial record is dropped for the master's, the slave's check for the master's
/// end-of-file filler reads on from the master's record, not from where the dropped one's size
/// field said it ended: there it read zeros, stopped checking, and acked the bytes behind a
/// filler that ends mid-file (a master with smaller files), releasing puts it cannot serve.
#[test]
fn the_filler_check_follows_the_record_that_replaced_a_partial_one() {
    // Another record, longer than the master's next one by 64 bytes.
    let Partial { md: _md, sd, master, slave, fake, end, real } = slave_holding_a_partial_record(|bytes| {
        let len = i32::from_be_bytes(bytes[..4].try_into().unwrap());
        bytes[..4].copy_from_slice(&(len + 64).to_be_bytes());
    });
    let len = real.len();

    // Then the real record, and after it a filler that says the file ends 1000 bytes on,
    // mid-way through this slave's file.
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "where the partial record starts");
    // A heartbeat frame first: the slave reads its log's headers (the partial record's too)
    // before the replacing record arrives, and acks where it stands.
    send_frame(&mut conn, end, &[]);
    let mut ack = [0u8; 8];
    conn.read_exact(&mut ack).unwrap();
    assert_eq!(i64::from_be_bytes(ack), end);
    let mut bytes = real.clone();
    bytes.extend_from_slice(&1000i32.to_be_bytes());
    bytes.extend_from_slice(&0xCBD4_3194u32.to_be_bytes());
    bytes.resize(len + 1000, 0);
    send_frame(&mut conn, end, &bytes);
    // Every ack until the slave drops the connection covers the record at most.
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut acked = Vec::new();
    while conn.read_exact(&mut ack).is_ok() {
        acked.push(i64::from_be_bytes(ack));
    }
    assert!(acked.iter().all(|a| *a <= end + len as i64), "acked past the filler's start: {acked:?}");
    assert!(ha_error_says(&slave, "end-of-file filler"), "{:?}", slave.offsets().last_ha_error);
    let held = commit_log_files(sd.path()).into_values().next().unwrap();
    assert!(held[end as usize..end as usize + len] == real[..], "the slave holds the master's record");
    slave.shutdown();
    master.shutdown();
}

/// A cut at a served master's end while puts go on: the end it names is checked again under
/// the put lock, so a record appended between the caller's check and the cut is never cut.
/// (Checked only before, the cut took records already streamed and acknowledged, and the
/// HA writer went on from past the new end, in the middle of what was written next.)
#[test]
fn a_cut_at_a_served_masters_end_never_takes_records_appended_meanwhile() {
    let (_md, _sd, master, slave) = async_master_and_slave();
    master.put_message_sync(&message("X", 0, 0, 100)).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    // Puts go on until 100 cuts were tried (at most 20,000 puts: each index file of the test
    // config holds 255 keys, and every file stays mapped).
    let cuts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let putter = {
        let (m, cuts) = (master.clone(), cuts.clone());
        std::thread::spawn(move || {
            let mut acked = Vec::new();
            for i in 1..20_000 {
                if cuts.load(std::sync::atomic::Ordering::Acquire) >= 100 {
                    break;
                }
                let msg = message("X", 0, i, 100);
                let r = m.put_message_sync(&msg).unwrap();
                acked.push((r.phy_offset, msg.body));
            }
            acked
        })
    };
    while !putter.is_finished() {
        let _ = master.store().truncate(master.max_offset() as u64);
        cuts.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
    let acked = putter.join().unwrap();
    for (offset, body) in &acked {
        let m = master.store().message_at(*offset).expect("an acknowledged record was cut");
        assert_eq!(&m.body, body, "the record at {offset} was cut and written over");
    }
    slave.shutdown();
    master.shutdown();
}

/// A master serving slaves refuses to cut its log: its slaves would keep what was cut (and
/// puts acked on their word), and its writers would go on from their old positions, in the
/// middle of whatever is written next.
#[test]
fn a_master_serving_slaves_refuses_to_truncate() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..5 {
        master.put_message_sync(&message("X", 0, i, 100)).unwrap();
    }
    let max = master.max_offset();
    match master.store().truncate(0) {
        Err(Error::Store(why)) => assert!(why.contains("serves its CommitLog to slaves"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(master.max_offset(), max);
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == max));
    slave.shutdown();
    master.shutdown();
}

/// Split brain behind a file's end filler: masters A and B on copies of one store each write
/// other records and then one that does not fit file 0, so both file 0s end in filler that
/// starts more than 32 KiB before the boundary. A slave holding A's file 0 whole, switched to
/// B, reports the boundary; the bytes B resent for it to compare were filler zeros on both
/// sides, so the slave took B's file 1 onto A's file 0 and acked B's puts (found by a
/// failover audit). The comparison now reaches back to the last bytes before the filler.
#[test]
fn a_divergence_hidden_behind_end_of_file_filler_is_found() {
    let (ad, bd, sd) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let seed = Broker::start_master(broker_config(ad.path(), "SYNC_MASTER", &[])).unwrap();
    for i in 0..5 {
        seed.put_message_sync(&message("T", 0, i, 1000)).unwrap();
    }
    seed.shutdown();
    drop(seed);
    common::copy_dir(ad.path(), bd.path());
    let a = Broker::start_master(broker_config(ad.path(), "SYNC_MASTER", &[])).unwrap();
    let b =
        Broker::start_master(broker_config(bd.path(), "SYNC_MASTER", &[("slaveTimeout", "1000")])).unwrap();
    let s = slave_of(sd.path(), &a, &[]);
    assert!(wait_until(Duration::from_secs(10), || transferring(&a) == 1));
    for i in 0..3 {
        assert_eq!(a.put_message_sync(&message("T", 0, 100 + i, 1000)).unwrap().status, PutStatus::PutOk);
    }
    let a_big = a.put_message_sync(&message("T", 0, 199, 60_000)).unwrap();
    // B, without a slave: other records, stored all the same.
    for i in 0..2 {
        b.put_message_sync(&message("T", 0, 300 + i, 1500)).unwrap();
    }
    let b_big = b.put_message_sync(&message("T", 0, 399, 60_000)).unwrap();
    assert_eq!((a_big.phy_offset, b_big.phy_offset), (65536, 65536), "both big records roll to file 1");
    assert!(wait_until(Duration::from_secs(10), || s.max_offset() == a.max_offset()));
    let a_file0 = commit_log_files(ad.path())["00000000000000000000"].clone();
    assert_ne!(a_file0, commit_log_files(bd.path())["00000000000000000000"]);
    // A dies after sending file 0 whole and before anything of file 1 reached the slave.
    a.shutdown();
    assert!(wait_until(Duration::from_secs(10), || s.offsets().connected == Some(false)));
    s.store().truncate(65536).unwrap();
    s.set_master_address(&ha_addr(&b).to_string()).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || ha_error_says(&s, "diverged")),
        "the slave took B's log: {:?}, slave at {} of {}",
        s.offsets().last_ha_error,
        s.max_offset(),
        b.max_offset()
    );
    let r = b.put_message_sync(&message("T", 0, 500, 500)).unwrap();
    assert_ne!(r.status, PutStatus::PutOk);
    assert_eq!(s.max_offset(), 65536, "nothing of B's appended");
    assert_eq!(commit_log_files(sd.path())["00000000000000000000"], a_file0);
    s.shutdown();
    b.shutdown();
}

/// Manual failover, then the old master rejoins as a slave of the new one with a tail the new
/// master never got (ASYNC_MASTER puts made while its slave was away). The slave's error says
/// where to cut (found by a failover audit: it named an offset inside a record, which
/// `truncate` took, and the master then refused the slave as "not a record boundary"); a
/// cut inside a record is refused; a cut where the error says lets it follow.
#[test]
fn an_old_master_with_a_lost_tail_is_told_where_to_cut_and_then_follows() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let m = Broker::start_master(broker_config(md.path(), "ASYNC_MASTER", &[])).unwrap();
    let s = slave_of(sd.path(), &m, &[]);
    for i in 0..100 {
        m.put_message_sync(&message("T", 0, i, 300)).unwrap();
    }
    assert!(wait_until(Duration::from_secs(10), || s.max_offset() == m.max_offset()));
    let common_end = s.max_offset();
    s.shutdown();
    drop(s);
    // The tail only the old master has.
    for i in 100..120 {
        m.put_message_sync(&message("T", 0, i, 300)).unwrap();
    }
    m.shutdown();
    drop(m);
    // The slave's store becomes the master and takes other puts.
    let n = Broker::start_master(broker_config(sd.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 500..540 {
        n.put_message_sync(&message("T", 0, i, 300)).unwrap();
    }
    let old = slave_of(md.path(), &n, &[]);
    assert!(wait_until(Duration::from_secs(10), || ha_error_says(&old, "diverged")), "{:?}", old.offsets());
    let err = old.offsets().last_ha_error.unwrap();
    let cut: u64 = err
        .split("this slave's record at ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no cut point in {err:?}"));
    assert_eq!(cut, common_end as u64, "{err}");
    assert!(err.contains("rmqha truncate"), "{err}");
    old.shutdown();
    drop(old);
    {
        let store = rmqha_core::MessageStore::open(broker_config(md.path(), "SLAVE", &[])).unwrap();
        store.start().unwrap();
        let inside = store.truncate(cut + 8).unwrap_err().to_string();
        assert!(
            inside.contains("not where a record starts") && inside.contains(&cut.to_string()),
            "{inside}"
        );
        store.truncate(cut).unwrap();
        store.shutdown();
    }
    let old = slave_of(md.path(), &n, &[]);
    assert!(
        wait_until(Duration::from_secs(10), || old.max_offset() == n.max_offset()),
        "{:?}",
        old.offsets().last_ha_error
    );
    old.shutdown();
    n.shutdown();
    assert_same_commit_logs(md.path(), sd.path());
}

/// A frame whose end lies past `i64::MAX` (anything at `haMasterAddress` may send one): the
/// slave's `offset + size` overflowed, which killed its HA thread in checked builds (still
/// "connected", never reconnecting) and skipped the frame as "below" in release builds. Now
/// the frame is refused, the connection closed with a reason, and the slave reconnects.
#[test]
fn a_frame_ending_past_the_largest_offset_is_refused_and_the_slave_reconnects() {
    let sd = tempfile::tempdir().unwrap();
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &addr)])).unwrap();
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, 0);
    send_frame(&mut conn, i64::MAX, b"x");
    fake.set_nonblocking(true).unwrap();
    let reconnected = wait_until(Duration::from_secs(10), || fake.accept().is_ok());
    let err = slave.offsets().last_ha_error;
    drop(conn);
    slave.shutdown();
    assert!(reconnected, "the slave never reconnected; last HA error: {err:?}");
    assert!(err.is_some_and(|e| e.contains("largest offset")), "the reason is shown");
    assert_eq!(slave.max_offset(), 0);
}

/// A manual failover and the old master back as a slave: it holds a tail the new master
/// never got (ASYNC puts while its slave was away), then the new master's writes. With
/// `haSlaveTruncateDiverged=true` it cuts its log back to where the logs agree, round by
/// round, and follows: byte-identical CommitLogs, and its queues hold the new master's
/// messages. Both ways the logs part: the new master's log shorter than the old one's (the
/// master says where it ends) and longer (the resent bytes differ).
#[test]
fn with_truncate_diverged_an_old_master_cuts_its_tail_back_and_follows_the_new_one() {
    for (tail, new) in [(60, 20), (5, 200)] {
        let (ad, bd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = Broker::start_master(broker_config(ad.path(), "ASYNC_MASTER", &[])).unwrap();
        let b = slave_of(bd.path(), &a, &[]);
        for i in 0..100 {
            a.put_message_sync(&message("Common", 0, i, 300)).unwrap();
        }
        assert!(wait_until(Duration::from_secs(10), || b.max_offset() == a.max_offset()));
        let common_end = a.max_offset();
        b.shutdown();
        drop(b);
        // Puts the slave never gets, then the old master stops.
        for i in 0..tail {
            a.put_message_sync(&message("OldTail", 0, i, 300)).unwrap();
        }
        assert!(a.store().wait_dispatched(Duration::from_secs(10)));
        // A consumer of the old master read its tail.
        a.commit_consumer_offset("G", "OldTail", 0, tail as i64).unwrap();
        a.commit_consumer_offset("G", "Common", 0, 100).unwrap();
        let old_end = a.max_offset();
        a.shutdown();
        drop(a);

        // The slave's store becomes the master and takes new puts.
        let b = Broker::start_master(broker_config(bd.path(), "ASYNC_MASTER", &[])).unwrap();
        for i in 0..new {
            b.put_message_sync(&message("NewMaster", 0, i, 300)).unwrap();
        }
        assert_eq!(b.max_offset() < old_end, tail > new / 10, "case {tail}/{new}");
        // The old master comes back as its slave.
        let a = slave_of(ad.path(), &b, &[("haSlaveTruncateDiverged", "true")]);
        assert!(
            wait_until(Duration::from_secs(20), || a.max_offset() == b.max_offset()
                && a.offsets().last_ha_error.is_none()),
            "case {tail}/{new}: old master at {} of {}: {:?}",
            a.max_offset(),
            b.max_offset(),
            a.offsets().last_ha_error
        );
        assert!(a.store().wait_dispatched(Duration::from_secs(10)));
        assert_eq!(a.queue_max_offset("Common", 0), 100);
        assert_eq!(a.queue_max_offset("OldTail", 0), 0, "the old tail was cut (queue included)");
        assert_eq!(a.queue_max_offset("NewMaster", 0), new as i64);
        assert!(a.max_offset() > common_end);
        // Its offsets past the cut moved back with it; those before it stay.
        assert_eq!(a.consumer_offset("G", "OldTail", 0), 0, "case {tail}/{new}");
        assert_eq!(a.consumer_offset("G", "Common", 0), 100);
        a.shutdown();
        b.shutdown();
        assert_same_commit_logs(ad.path(), bd.path());
    }
}

/// A slave whose dispatcher lags by more than a file (catching up a backlog) and whose link
/// breaks inside a record: it reports where that partial record starts, as it does with a
/// dispatcher in its last file. Before, it reported its end inside the record, the master
/// refused that as no record boundary, and the slave took its log for diverged (found by an
/// audit).
#[test]
fn a_slave_with_a_dispatcher_a_file_behind_reports_its_last_record_boundary() {
    let (md, _sd, master, slave) = async_master_and_slave();
    master.put_message_sync(&message("L", 0, 0, 100)).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    assert!(slave.store().wait_dispatched(Duration::from_secs(10)));
    let held = slave.store().dispatcher().exclusive(); // no dispatch round from here on
    let mut i = 1;
    while master.max_offset() < 65536 + 2000 {
        master.put_message_sync(&message("L", 0, i, 300)).unwrap();
        i += 1;
    }
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let end = slave.max_offset();
    assert!(slave.store().dispatcher().reput_from() < 65536, "the dispatcher is a file behind");

    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    slave.set_master_address(&fake.local_addr().unwrap().to_string()).unwrap();
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "complete records up to its end");
    // The first 60 bytes of the master's next record, then the link breaks.
    master.put_message_sync(&message("L", 0, i, 300)).unwrap();
    let file = &commit_log_files(md.path())["00000000000000065536"];
    let at = (end - 65536) as usize;
    send_frame(&mut conn, end, &file[at..at + 60]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == end + 60));
    drop(conn);
    let (conn, report) = accept_slave(&fake);
    assert_eq!(report, end, "where the partial record starts, not inside it");
    drop(conn);
    drop(held);
    slave.set_master_address(&ha_addr(&master).to_string()).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()),
        "{:?}",
        slave.offsets().last_ha_error
    );
    slave.shutdown();
    master.shutdown();
}

/// `haSlaveTruncateDiverged=true` and a master whose log ends below this slave's first file
/// (the slave started from the master's last file, or its retention took its first ones):
/// the slave cuts back to its first file's start once, and then, with nothing left to cut,
/// says so and waits as after any refusal. Before, it "cut" from there to there and
/// reconnected at once, without end (found by an audit).
#[test]
fn with_truncate_diverged_nothing_left_to_cut_is_an_error_not_a_loop() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_past_two_files(md.path());
    let slave = slave_of(sd.path(), &master, &[("haSlaveTruncateDiverged", "true")]);
    assert!(wait_until(Duration::from_secs(10), || slave.max_offset() == master.max_offset()));
    let first = slave.min_offset();
    assert!(first > 0, "the slave starts at the master's last file");

    // A master whose log ends at 0: it says so with an empty frame at 0.
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    slave.set_master_address(&fake.local_addr().unwrap().to_string()).unwrap();
    let (mut conn, report) = accept_slave(&fake);
    assert_eq!(report, master.max_offset());
    send_frame(&mut conn, 0, &[]);
    let (mut conn2, report) = accept_slave(&fake);
    assert_eq!(report, first, "cut back to its first file's start");
    assert_eq!(slave.max_offset(), first);
    send_frame(&mut conn2, 0, &[]);
    assert!(ha_error_says(&slave, "nothing to cut"), "{:?}", slave.offsets().last_ha_error);
    assert_eq!(slave.max_offset(), first, "nothing more was cut");
    drop((conn, conn2));
    slave.shutdown();
    master.shutdown();
}
