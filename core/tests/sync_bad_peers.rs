//! Config sync next to misbehaving peers: garbage, truncated frames and a 2 GiB declared length
//! on the master's ports close only those connections while the slave keeps syncing; a
//! "master" that answers garbage, or is unreachable, fails the sync with the address and the
//! table in the error and the log, and the slave recovers once a good master is set; a master
//! that never answers cannot hold up shutdown beyond one request timeout.

mod peer_common;
mod sync_common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use peer_common::{closed_by_server, logged_lines_with, logs};
use rmqha_core::metadata::{ConfigTables, SubscriptionGroupConfig, TopicConfig};
use rmqha_core::remoting::{
    FrameError, Handled, RemotingCommand, RemotingError, RemotingServer, RequestContext, ServerConfig,
    response_code,
};
use rmqha_core::sync::{SlaveSynchronizer, SyncTable, TableError};
use sync_common::{Master, sync_config, wait_until};

const WAIT: Duration = Duration::from_secs(10);

/// A port nothing listens on (it was free a moment ago).
fn refused_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn garbage_on_the_masters_ports_closes_only_those_connections() {
    logs();
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    master.tables.topics().put_topic(TopicConfig::new("Before")).unwrap();
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_millis(20)),
    );
    sync.start().unwrap();
    assert!(wait_until(WAIT, || slave.topics().contains("Before")));

    let two_gib = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    let negative = [0xff, 0xff, 0xff, 0xf0];
    let http = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".as_slice();
    let mut truncated = 100i32.to_be_bytes().to_vec();
    truncated.extend_from_slice(&[0, 0, 0, 20, b'{', b'"']);
    for port in [master.main, master.vip.unwrap()] {
        for garbage in [two_gib.as_slice(), negative.as_slice(), http, truncated.as_slice()] {
            let mut s = TcpStream::connect(port).unwrap();
            s.write_all(garbage).unwrap();
            if garbage == truncated.as_slice() {
                // The rest of the frame never comes.
                s.shutdown(Shutdown::Write).unwrap();
            }
            assert!(closed_by_server(&mut s, WAIT), "{port}: {garbage:?} did not close the connection");
        }
    }

    // The slave's own connections were not among those closed: syncs keep succeeding and
    // keep mirroring changes.
    let successes = sync.status().successes;
    master.tables.topics().put_topic(TopicConfig::new("After")).unwrap();
    assert!(wait_until(WAIT, || slave.topics().contains("After")));
    assert!(wait_until(WAIT, || sync.status().successes >= successes + 3));
    assert_eq!(sync.status().failures, 0, "{:?}", sync.last_sync());
    // Only the slave's two connections (main and VIP) remain.
    assert!(
        wait_until(WAIT, || master.server.connection_count() == 2),
        "{}",
        master.server.connection_count()
    );
    sync.shutdown();
}

/// How a fake master misbehaves once it has read a request.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// Declares a 2 GiB response.
    TwoGib,
    /// Sends half a frame, then closes.
    TruncatedThenClose,
    /// Sends bytes that are no frame at all.
    Garbage,
}

/// A fake master that misbehaves on every connection; counts connections.
fn misbehaving_master(how: Misbehaviour) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    let reply: Vec<u8> = match how {
                        Misbehaviour::TwoGib => vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
                        Misbehaviour::TruncatedThenClose => {
                            [&64i32.to_be_bytes()[..], &[0, 0, 0, 2, b'{']].concat()
                        }
                        Misbehaviour::Garbage => {
                            b"\x00\x00\x00\x10\x07\x00\x00\x02{}garbage-garbage".to_vec()
                        }
                    };
                    let _ = stream.write_all(&reply);
                    if matches!(how, Misbehaviour::TruncatedThenClose) {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[test]
fn a_master_answering_garbage_fails_the_sync_and_the_slave_recovers() {
    logs();
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let good = Master::start(dirs.0.path(), true);
    good.tables.topics().put_topic(TopicConfig::new("Good")).unwrap();
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let config = sync_config(Duration::from_secs(60)).with_vip_channel(false);

    for how in [Misbehaviour::TwoGib, Misbehaviour::TruncatedThenClose, Misbehaviour::Garbage] {
        let (bad, _) = misbehaving_master(how);
        let bad = bad.to_string();
        let sync = SlaveSynchronizer::new(Arc::clone(&slave), Some(&bad), config.clone());
        let err = sync.sync_all().unwrap_err();
        let report = err.report().unwrap();
        for table in SyncTable::ALL {
            let failure =
                report.outcome(table).failure().unwrap_or_else(|| panic!("{how:?} {table}: {report:?}"));
            assert_eq!(failure.addr, bad);
            assert!(matches!(failure.error, TableError::Request(_)), "{how:?}: {failure}");
        }
        if let TableError::Request(RemotingError::Frame { source, .. }) =
            &report.topics.failure().unwrap().error
        {
            if matches!(how, Misbehaviour::TwoGib) {
                assert!(matches!(source, FrameError::TooLarge { .. }), "{source}");
            }
        }
        assert_eq!(slave.topics().len(), 0, "{how:?}: nothing applied");
        assert!(!logged_lines_with(&["config sync failed", &bad, "topic config"]).is_empty());

        // Pointed at a good master, the same synchronizer recovers.
        sync.set_master_address(Some(&good.addr()));
        let report = sync.sync_all().unwrap();
        assert!(report.is_complete() && report.topics.is_applied(), "{report:?}");
        assert!(slave.topics().contains("Good"));
        assert_eq!((sync.status().successes, sync.status().failures), (1, 1));
        // Reset for the next round.
        slave.topics().apply_from_master(Default::default()).unwrap();
    }
}

#[test]
fn an_unreachable_master_fails_every_table_with_its_address_logged() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let slave = Arc::new(ConfigTables::open(dir.path()).unwrap());
    let addr = refused_addr();
    let sync = SlaveSynchronizer::new(Arc::clone(&slave), Some(&addr), sync_config(Duration::from_secs(60)));
    let err = sync.sync_all().unwrap_err();
    let report = err.report().unwrap();
    assert_eq!(report.failures().count(), 4);
    for table in SyncTable::ALL {
        let lines = logged_lines_with(&["config sync failed", &addr, table.name()]);
        assert!(!lines.is_empty(), "no log line for {table} from {addr}");
        assert!(lines[0].contains("WARN"), "{}", lines[0]);
    }
    let last = sync.last_sync().unwrap();
    assert!(!last.is_ok());
    assert!(last.error.as_deref().unwrap().contains(&addr));
    // Refused at once: not worded as a timeout ("within 3.0 s").
    assert!(!last.error.as_deref().unwrap().contains("within"), "{:?}", last.error);
    assert!(last.at_millis() > 1_600_000_000_000);
    assert_eq!(sync.status().last_success_at, None);
}

#[test]
fn shutdown_does_not_wait_out_a_master_that_never_answers() {
    // Accepts and reads, never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || while matches!(stream.read(&mut [0u8; 1024]), Ok(n) if n > 0) {});
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let slave = Arc::new(ConfigTables::open(dir.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&addr),
        sync_config(Duration::from_secs(60))
            .with_request_timeout(Duration::from_secs(5))
            .with_vip_channel(false),
    );
    sync.start().unwrap();
    assert!(wait_until(WAIT, || accepted.load(Ordering::SeqCst) > 0), "the sync is under way");
    let t = Instant::now();
    sync.shutdown();
    let took = t.elapsed();
    // The topic request in flight is aborted rather than waited out (5 s); the three other
    // tables are skipped.
    assert!(took < Duration::from_millis(2500), "shutdown took {took:?}");
    let last = sync.last_sync().unwrap();
    let error = last.error.unwrap();
    assert!(error.contains("closed the connection") && error.contains("cancelled by shutdown"), "{error}");
    assert!(!sync.is_running());
}

/// A master that answers every request SUCCESS with `body`.
fn master_answering(body: &'static str) -> (RemotingServer, String) {
    let handler = |req: RemotingCommand, _: &RequestContext| {
        Handled::Respond(
            RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                .with_body(body.as_bytes().to_vec()),
        )
    };
    let server =
        RemotingServer::bind(&["127.0.0.1:0".parse().unwrap()], Arc::new(handler), ServerConfig::default())
            .unwrap();
    let addr = server.local_addrs()[0].to_string();
    (server, addr)
}

/// A SUCCESS whose body lacks the table (`{}`, a null, another table's JSON) is a broken
/// answer, not an empty table: it decoded as one, with a missing DataVersion read as "now",
/// so the slave replaced its topics, groups and delay offsets with nothing and persisted that.
#[test]
fn a_success_without_the_table_leaves_the_slaves_tables_as_they_are() {
    logs();
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let good = Master::start(dirs.0.path(), false);
    good.tables.topics().put_topic(TopicConfig::new("Kept")).unwrap();
    good.tables.subscription_groups().put_group(SubscriptionGroupConfig::new("KeptGroup")).unwrap();
    good.tables.delay_offsets().update_offset(3, 42);
    good.tables.delay_offsets().persist().unwrap();
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let config = sync_config(Duration::from_secs(60)).with_vip_channel(false);
    let sync = SlaveSynchronizer::new(Arc::clone(&slave), Some(&good.addr()), config);
    assert!(sync.sync_all().unwrap().is_complete());
    let kept = |slave: &ConfigTables| {
        assert!(slave.topics().contains("Kept"));
        assert!(slave.subscription_groups().contains("KeptGroup"));
        assert_eq!(slave.delay_offsets().offset(3), Some(42));
    };
    kept(&slave);

    for body in [
        "{}",
        r#"{"topicConfigTable":null,"subscriptionGroupTable":null,"offsetTable":null}"#,
        r#"{"dataVersion":{"counter":99,"timestamp":1},"unrelated":{}}"#,
    ] {
        let (_server, bad) = master_answering(body);
        sync.set_master_address(Some(&bad));
        let err = sync.sync_all().unwrap_err();
        let report = err.report().unwrap();
        for table in [SyncTable::Topics, SyncTable::SubscriptionGroups, SyncTable::DelayOffsets] {
            let failure =
                report.outcome(table).failure().unwrap_or_else(|| panic!("{body} {table}: {report:?}"));
            assert!(matches!(failure.error, TableError::Decode(_)), "{body}: {failure}");
            assert!(failure.to_string().contains("table"), "{failure}");
        }
        kept(&slave);
    }
    drop(sync);
    drop(slave);
    kept(&ConfigTables::open(dirs.1.path()).unwrap());
}
