//! What an operator reads in the log when a pair is unhealthy: every failure shows once when
//! it starts, and a failure that repeats (a slave retrying every few seconds, a peer sending
//! the same bad request thousands of times a second) does not flood the log.

mod common;
mod peer_common;
mod remote_common;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{broker_config, wait_until};
use peer_common::{logged_lines_with, logs};
use rmqha_core::Broker;

/// A slave whose master cannot be reached says so at once (it logged nothing at the default
/// level), once while it keeps retrying, and again when it connects. A "master" that takes
/// the connection and closes it every time is reported once, not at every retry.
#[test]
fn a_slave_reports_an_unreachable_or_refusing_master_once() {
    logs();
    // A "master" that accepts and closes at once, counting the slave's attempts.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let closer = std::thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
            if counter.fetch_add(1, Ordering::SeqCst) + 1 >= 4 {
                return; // the listener closes with the thread
            }
        }
    });
    let sd = tempfile::tempdir().unwrap();
    let slave =
        Broker::start_slave(broker_config(sd.path(), "SLAVE", &[("haMasterAddress", &addr.to_string())]))
            .unwrap();
    assert!(wait_until(Duration::from_secs(20), || accepted.load(Ordering::SeqCst) >= 4));
    closer.join().unwrap();
    let ended = logged_lines_with(&["WARN", &format!("HA connection to master {addr} ended")]);
    assert_eq!(ended.len(), 1, "one line for four sessions ended the same way: {ended:#?}");

    // Now nothing listens there: refused connections.
    assert!(wait_until(Duration::from_secs(20), || {
        slave.offsets().last_ha_error.is_some_and(|e| e.contains("cannot connect"))
    }));
    let unreachable = logged_lines_with(&["WARN", &format!("cannot connect to master {addr}")]);
    assert_eq!(unreachable.len(), 1, "{unreachable:#?}");

    // A master comes up at that address: the slave connects and says after how many tries.
    // (It sends nothing for a minute: an empty log and no heartbeat yet.)
    let md = tempfile::tempdir().unwrap();
    let master = Broker::start_master(broker_config(
        md.path(),
        "ASYNC_MASTER",
        &[("haListenPort", &addr.port().to_string()), ("haSendHeartbeatInterval", "60000")],
    ))
    .unwrap();
    assert!(wait_until(Duration::from_secs(20), || slave.offsets().connected == Some(true)));
    // Connected, so "cannot connect" is no longer true: it showed until the first frame.
    assert_eq!(slave.offsets().last_ha_error, None);
    let back = logged_lines_with(&["INFO", &format!("HA connected to master {addr} after")]);
    assert_eq!(back.len(), 1, "{back:#?}");
    let unreachable = logged_lines_with(&["WARN", &format!("cannot connect to master {addr}")]);
    assert_eq!(unreachable.len(), 1, "retries within 5 minutes are not logged again: {unreachable:#?}");
    slave.shutdown();
    master.shutdown();
}

/// A start after a crash says so, with where the log was recovered to and where dispatch
/// resumed; the recovery report had it, and only the chaos harness read it.
#[test]
fn a_start_after_a_crash_says_what_recovery_did() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let store = rmqha_core::MessageStore::open(common::store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    for i in 0..10 {
        store.put_message(&common::message("Crash", 0, i, 100)).unwrap();
    }
    let end = store.max_offset();
    store.crash();
    drop(store);
    let broker = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let lines = logged_lines_with(&["WARN", "recovery: the last run did not stop cleanly"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains(&format!("CommitLog valid to {end}")), "{}", lines[0]);
    broker.shutdown();
    drop(broker);
    let broker = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let clean = logged_lines_with(&[
        "INFO",
        &format!("recovery: the last stop was clean; the CommitLog ends at {end}"),
    ]);
    assert_eq!(clean.len(), 1, "{clean:#?}");
    broker.shutdown();
}

/// Peers repeating the same mistake thousands of times a second got a log line each: a
/// producer sending to a missing topic (16,000 INFO lines a second in the audit), garbage on
/// the remoting port, a remoting client on the HA port (reported as a slave whose log
/// "diverged", which sends an operator to wipe a store). Each is one line now, the HA case
/// named for what it is.
#[test]
fn repeated_bad_requests_are_logged_once_and_a_remoting_client_on_the_ha_port_is_named() {
    use std::io::{Read, Write};
    logs();
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("autoCreateTopicEnable", "false")],
    ))
    .unwrap();
    let c = remote_common::client(b.remoting_addrs()[0]);
    for _ in 0..50 {
        let r =
            remote_common::call(&c, remote_common::send_v2(&remote_common::Msg::new("NoSuchTopic", b"x")));
        assert_eq!(r.code, remote_common::code::TOPIC_NOT_EXIST, "{r:?}");
    }
    let missing = logged_lines_with(&["send to a topic that does not exist", "NoSuchTopic"]);
    assert_eq!(missing.len(), 1, "{missing:#?}");

    let remoting = b.remoting_addrs()[0];
    for _ in 0..30 {
        let mut s = std::net::TcpStream::connect(remoting).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(peer_common::closed_by_server(&mut s, Duration::from_secs(10)));
    }
    let bad = logged_lines_with(&["closing connection after a bad frame", &format!("local={remoting}")]);
    assert_eq!(bad.len(), 1, "{bad:#?}");

    // A remoting request (as `rmqha status` sends it) on the HA port, 20 times.
    let ha = std::net::SocketAddr::from(([127, 0, 0, 1], b.ha_port()));
    let request = rmqha_core::remoting::RemotingCommand::request(28).encode().unwrap();
    for _ in 0..20 {
        let mut s = std::net::TcpStream::connect(ha).unwrap();
        s.write_all(&request).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read(&mut [0u8; 64]); // closed by the master
    }
    assert!(wait_until(Duration::from_secs(10), || b.offsets().refused_slaves.len() >= 16));
    let refused = b.offsets().refused_slaves;
    assert!(
        refused.iter().all(|r| r.reason.contains("not an HA slave") && r.reason.contains("remoting")),
        "{refused:?}"
    );
    assert!(!refused.iter().any(|r| r.reason.contains("diverged")), "{refused:?}");
    let lines = logged_lines_with(&["refusing HA slave"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(logged_lines_with(&["HA slave connected"]).is_empty());
    assert!(logged_lines_with(&["INFO", "HA connection from slave"]).is_empty());
    b.shutdown();
}

/// A SYNC_MASTER whose puts go unconfirmed said nothing: 357,580 SLAVE_NOT_AVAILABLE answers
/// without a line in the audit. Each state is a WARN when it begins (once a minute after),
/// and its end an INFO.
#[test]
fn a_sync_master_says_when_its_puts_go_unconfirmed_and_when_they_are_confirmed_again() {
    logs();
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master =
        Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[("slaveTimeout", "300")])).unwrap();
    for i in 0..200 {
        let r = master.put_message_sync(&common::message("Sync", 0, i, 100)).unwrap();
        assert_eq!(r.status, rmqha_core::PutStatus::SlaveNotAvailable);
    }
    let lines = logged_lines_with(&["WARN", "SLAVE_NOT_AVAILABLE: no slave is streaming from this master"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(master.runtime_info()["slaveOk"], "false");

    // A slave through a proxy: confirmed again, said once.
    let proxy = common::Proxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], master.ha_port())));
    let slave = Broker::start_slave(broker_config(
        sd.path(),
        "SLAVE",
        &[("haMasterAddress", &proxy.addr.to_string())],
    ))
    .unwrap();
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    assert_eq!(
        master.put_message_sync(&common::message("Sync", 0, 200, 100)).unwrap().status,
        rmqha_core::PutStatus::PutOk
    );
    assert_eq!(master.runtime_info()["slaveOk"], "true");
    let again = logged_lines_with(&["INFO", "a slave can confirm SYNC_MASTER puts again (200 were answered"]);
    assert_eq!(again.len(), 1, "{again:#?}");

    // Its acks stall: timeouts, said once; the acks return: said once.
    proxy.stall_up(true);
    for i in 201..204 {
        let r = master.put_message_sync(&common::message("Sync", 0, i, 100)).unwrap();
        assert_eq!(r.status, rmqha_core::PutStatus::FlushSlaveTimeout);
    }
    assert!(wait_until(Duration::from_secs(5), || !logged_lines_with(&["FLUSH_SLAVE_TIMEOUT"]).is_empty()));
    let timeouts = logged_lines_with(&[
        "WARN",
        "answered FLUSH_SLAVE_TIMEOUT: no slave acked them within slaveTimeout (300 ms)",
    ]);
    assert_eq!(timeouts.len(), 1, "{timeouts:#?}");
    // Its lag stays small while its silence grows: what `status` shows of a frozen slave.
    let silent = || master.offsets().slaves.first().map_or(0, |s| s.last_report_ms);
    assert!(wait_until(Duration::from_secs(5), || silent() >= 500), "{:?}", master.offsets().slaves);
    assert!(master.runtime_info()["slaves"].contains("lastReportMs="));
    proxy.stall_up(false);
    assert!(wait_until(Duration::from_secs(10), || {
        master.put_message_sync(&common::message("Sync", 0, 300, 100)).unwrap().status
            == rmqha_core::PutStatus::PutOk
    }));
    // Logged by the HA reader after the ack completed the put: possibly after it returned.
    let back = || logged_lines_with(&["INFO", "slave acks confirm SYNC_MASTER puts again"]);
    assert!(wait_until(Duration::from_secs(5), || !back().is_empty()));
    assert_eq!(back().len(), 1, "{:#?}", back());
    assert!(wait_until(Duration::from_secs(5), || silent() < 500), "{:?}", master.offsets().slaves);
    slave.shutdown();
    master.shutdown();
}

/// A disk slower than `syncFlushTimeout` answered SYNC_FLUSH puts FLUSH_DISK_TIMEOUT without a
/// line in the log; now the first round says so, and later ones only once a minute.
#[test]
fn flush_timeouts_are_logged_once() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let store = rmqha_core::MessageStore::open(common::store_config(
        dir.path(),
        &[("flushDiskType", "SYNC_FLUSH"), ("syncFlushTimeout", "100")],
    ))
    .unwrap();
    store.start().unwrap();
    store.commit_log().inject_flush_delay(1000);
    for i in 0..2 {
        let r = store.put_message_sync(&common::message("Slow", 0, i, 100)).unwrap();
        assert_eq!(r.status, rmqha_core::PutStatus::FlushDiskTimeout);
    }
    let lines = || logged_lines_with(&["WARN", "answered FLUSH_DISK_TIMEOUT: not flushed to", "(100 ms)"]);
    assert!(wait_until(Duration::from_secs(5), || !lines().is_empty()));
    assert_eq!(lines().len(), 1, "{:#?}", lines());
    store.shutdown();
}

/// Puts failing because the next CommitLog file cannot be made (a full disk below the disk
/// guard's level, a directory gone) were answered CREATE_MAPPED_FILE_FAILED without a line in
/// the log. The first is an ERROR naming the file and the cause; the next ones within a minute
/// are counted, not logged.
#[test]
fn puts_that_cannot_make_the_next_file_are_logged_once() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let store = rmqha_core::MessageStore::open(common::store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    store.put_message_sync(&common::message("Full", 0, 0, 1000)).unwrap();
    // The CommitLog directory replaced by a file: the files made so far stay mapped, and no
    // new one can be made (ENOTDIR).
    std::fs::rename(dir.path().join("commitlog"), dir.path().join("commitlog.moved")).unwrap();
    std::fs::write(dir.path().join("commitlog"), b"not a directory").unwrap();
    let mut failed = 0;
    for i in 1..2000 {
        match store.put_message_sync(&common::message("Full", 0, i, 1000)) {
            Ok(_) => assert_eq!(failed, 0, "a put succeeded after one failed"),
            Err(rmqha_core::Error::PutFailed { status, .. }) => {
                assert_eq!(status, rmqha_core::PutStatus::CreateMappedFileFailed);
                failed += 1;
                if failed == 20 {
                    break;
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(failed, 20, "the puts never reached the end of the files made before");
    let lines = logged_lines_with(&[
        "ERROR",
        "puts fail with CREATE_MAPPED_FILE_FAILED: cannot create CommitLog file",
    ]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("Not a directory"), "{}", lines[0]);
    store.shutdown();
}

/// A dispatcher that cannot write its queues logged one ERROR and then nothing, while
/// producers got SEND_OK and consumers nothing, with only a growing "dispatch-behind" in the
/// status. The runtime info (and `rmqha status`) now names the cause and how long it lasts, and
/// the log says when dispatch resumes.
#[test]
fn a_stalled_dispatcher_shows_in_the_status_and_its_resumption_in_the_log() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let cq = dir.path().join("consumequeue");
    std::fs::remove_dir_all(&cq).unwrap();
    std::fs::write(&cq, b"not a directory").unwrap();
    b.put_message_sync(&common::message("Stalled", 0, 0, 100)).unwrap();
    assert!(wait_until(Duration::from_secs(10), || b.runtime_info().contains_key("dispatchError")));
    let why = b.runtime_info()["dispatchError"].clone();
    assert!(why.contains("Stalled") || why.contains("consumequeue"), "{why}");
    assert_eq!(logged_lines_with(&["ERROR", "dispatch failed, retrying every 100 ms"]).len(), 1);
    std::fs::remove_file(&cq).unwrap();
    std::fs::create_dir(&cq).unwrap();
    assert!(wait_until(Duration::from_secs(10), || b.queue_max_offset("Stalled", 0) == 1));
    // The round that wrote the unit clears the failure once it returns: a moment later.
    assert!(wait_until(Duration::from_secs(10), || !b.runtime_info().contains_key("dispatchError")));
    let resumed = || logged_lines_with(&["INFO", "dispatch resumed after"]);
    assert!(wait_until(Duration::from_secs(10), || !resumed().is_empty()));
    assert_eq!(resumed().len(), 1);
    b.shutdown();
}

/// Delayed messages of a level `messageDelayLevel` no longer has are not delivered (as in
/// RocketMQ), and each start says so, naming the level and how many wait.
#[test]
fn delayed_messages_of_a_dropped_level_are_reported_at_start() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let levels = |l: &str| broker_config(dir.path(), "ASYNC_MASTER", &[("messageDelayLevel", l)]);
    let b = Broker::start_master(levels("1s 2s 60s")).unwrap();
    let m = rmqha_core::Message::new("Stranded", b"s".to_vec()).with_property("DELAY", "3");
    b.put_message_sync(&m).unwrap();
    b.shutdown();
    let b = Broker::start_master(levels("1s")).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || !logged_lines_with(&["level=3", "levels=1", "waiting=1"])
            .is_empty()),
        "no warning about the stranded level"
    );
    assert_eq!(b.queue_max_offset("Stranded", 0), 0);
    b.shutdown();
}

/// A consumer whose SQL92 subscription does not compile is named once per subscription it
/// brings (a new topic, a newer version), not at every heartbeat repeating it (every 30 s per
/// client).
#[test]
fn an_unusable_subscription_is_logged_once_per_version() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let b =
        Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[("enablePropertyFilter", "true")]))
            .unwrap();
    let c = remote_common::client(b.remoting_addrs()[0]);
    let heartbeat = |expr: &str, version: i64| {
        let hb = remote_common::heartbeat_typed(
            "127.0.0.1@sqllog",
            "sql_log_cg",
            &[("SqlLogTopic", "SQL92", expr, version)],
        );
        let r = remote_common::call(&c, hb);
        assert_eq!(r.code, 0, "{r:?}");
    };
    let lines = || logged_lines_with(&["WARN", "sql_log_cg", "cannot be used"]);
    for _ in 0..3 {
        heartbeat("a >", 1);
    }
    assert_eq!(lines().len(), 1, "{:#?}", lines());
    assert!(lines()[0].contains("SqlLogTopic"), "{:#?}", lines());
    heartbeat("a >>", 2);
    heartbeat("a >>", 2);
    assert_eq!(lines().len(), 2, "a newer version is named again: {:#?}", lines());
    // A newer version that compiles says nothing.
    heartbeat("a > 1", 3);
    assert_eq!(lines().len(), 2, "{:#?}", lines());
    b.shutdown();
}
