//! `haAuthSecret`: a master and slaves that share a secret replicate as before; a client
//! without it (or with another) is refused before anything it says counts, so it cannot
//! release a SYNC_MASTER put; each side says why.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{assert_same_commit_logs, broker_config, message, slave_of, wait_until};
use rmqha_core::{Broker, BrokerConfig, PutStatus};

const SECRET: &str = "correct horse battery staple";

fn ha_addr(b: &Broker) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", b.ha_port()).parse().unwrap()
}

fn transferring(b: &Broker) -> usize {
    b.offsets().slaves.iter().filter(|s| s.transferring).count()
}

fn master_with(dir: &std::path::Path, secret: Option<&str>) -> std::sync::Arc<Broker> {
    let mut kv = vec![("slaveTimeout", "500"), ("haHousekeepingInterval", "2000")];
    if let Some(s) = secret {
        kv.push(("haAuthSecret", s));
    }
    Broker::start_master(broker_config(dir, "SYNC_MASTER", &kv)).unwrap()
}

fn refused_for(master: &Broker, needle: &str) -> bool {
    wait_until(Duration::from_secs(10), || {
        master.offsets().refused_slaves.iter().any(|r| r.reason.contains(needle))
    })
}

fn slave_error_says(slave: &Broker, needle: &str) -> bool {
    wait_until(Duration::from_secs(10), || slave.offsets().last_ha_error.is_some_and(|e| e.contains(needle)))
}

#[test]
fn slaves_with_the_secret_replicate_byte_for_byte() {
    let (md, s1, s2) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with(md.path(), Some(SECRET));
    let a = slave_of(s1.path(), &master, &[("haAuthSecret", SECRET)]);
    let b = slave_of(s2.path(), &master, &[("haAuthSecret", SECRET)]);
    assert!(wait_until(Duration::from_secs(10), || transferring(&master) == 2));
    for i in 0..300 {
        let r = master.put_message_sync(&message("Auth", 0, i, 200)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        let end = r.phy_offset + r.size as i64;
        assert!(a.max_offset() >= end || b.max_offset() >= end, "PUT_OK before a slave held put {i}");
    }
    let end = master.max_offset();
    for s in [&a, &b] {
        assert!(wait_until(Duration::from_secs(10), || s.max_offset() == end));
        s.shutdown();
    }
    assert!(master.offsets().refused_slaves.is_empty(), "{:?}", master.offsets().refused_slaves);
    master.shutdown();
    assert_same_commit_logs(md.path(), s1.path());
    assert_same_commit_logs(md.path(), s2.path());
}

/// The rogue client of `ha_faults::rogue_clients_affect_only_their_connection`, which can
/// release a put on a master without a secret, releases none here.
#[test]
fn a_client_without_the_secret_releases_no_put() {
    let md = tempfile::tempdir().unwrap();
    let master = master_with(md.path(), Some(SECRET));
    let r = master.put_message_sync(&message("Auth", 0, 0, 100)).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable);
    let end = master.max_offset() as i64;
    // Reports the log's start, then acks its end, as a slave would.
    let mut rogue = TcpStream::connect(ha_addr(&master)).unwrap();
    rogue.write_all(&0i64.to_be_bytes()).unwrap();
    assert!(refused_for(&master, "did not authenticate"));
    let _ = rogue.write_all(&end.to_be_bytes());
    assert_eq!(transferring(&master), 0);
    let r = master.put_message_sync(&message("Auth", 0, 1, 100)).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable, "a client without the secret is no slave");
    assert!(master.slave_ack_offset() < end, "the rogue's ack counted");
    // It was sent nothing: the stream ends without a byte.
    rogue.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let _ = rogue.read_to_end(&mut got);
    assert!(got.is_empty(), "the master sent {} bytes to an unauthenticated client", got.len());
    // A hello followed by a forged proof fails too. Such a client gets the master's nonce and
    // nothing else: no value derived from the secret to test guesses against offline.
    let mut forger = TcpStream::connect(ha_addr(&master)).unwrap();
    forger.write_all(b"RMQHAUT1").unwrap();
    forger.write_all(&[7u8; 32]).unwrap();
    let mut challenge = [0u8; 40];
    forger.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    forger.read_exact(&mut challenge).unwrap();
    assert_eq!(&challenge[..8], b"RMQHAUT1");
    forger.write_all(&[0u8; 32]).unwrap();
    let _ = forger.write_all(&0i64.to_be_bytes());
    assert!(refused_for(&master, "does not match this master's haAuthSecret"));
    let mut rest = Vec::new();
    let _ = forger.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the master sent {} more bytes to a client that failed its proof", rest.len());
    assert_eq!(transferring(&master), 0);
    master.shutdown();
}

#[test]
fn a_slave_without_the_secret_is_refused_and_told_nothing() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with(md.path(), Some(SECRET));
    let slave = slave_of(sd.path(), &master, &[]);
    assert!(refused_for(&master, "did not authenticate"));
    let r = master.put_message_sync(&message("Auth", 0, 0, 100)).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable);
    assert_eq!(slave.max_offset(), 0, "the slave was sent no byte");
    slave.shutdown();
    master.shutdown();
}

#[test]
fn different_secrets_are_refused_on_both_sides() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with(md.path(), Some(SECRET));
    master.put_message_sync(&message("Auth", 0, 0, 100)).unwrap();
    let slave = slave_of(sd.path(), &master, &[("haAuthSecret", "another secret of some length")]);
    assert!(slave_error_says(&slave, "the two haAuthSecret values differ"));
    assert!(refused_for(&master, "does not match this master's haAuthSecret: the two secrets differ"));
    assert_eq!(transferring(&master), 0);
    assert_eq!(slave.max_offset(), 0);
    slave.shutdown();
    master.shutdown();
}

#[test]
fn a_slave_with_a_secret_and_a_master_without_one_say_so() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = master_with(md.path(), None);
    master.put_message_sync(&message("Auth", 0, 0, 100)).unwrap();
    let slave = slave_of(sd.path(), &master, &[("haAuthSecret", SECRET)]);
    assert!(refused_for(&master, "this master has no haAuthSecret"));
    assert!(slave_error_says(&slave, "most likely has no haAuthSecret"));
    assert_eq!(slave.max_offset(), 0);
    slave.shutdown();
    master.shutdown();
}

#[test]
fn the_secret_is_checked_and_never_printed() {
    let mut c = BrokerConfig::default();
    let e = c.set("haAuthSecret", "short-secret").unwrap_err().to_string();
    assert!(e.contains("haAuthSecret") && e.contains("at least 16 characters"), "{e}");
    assert!(!e.contains("short-secret"), "the error repeats the secret: {e}");
    c.set("haAuthSecret", SECRET).unwrap();
    c.validate().unwrap();
    // From a file, too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.properties");
    std::fs::write(&path, "brokerRole=SLAVE\nhaAuthSecret = tooshort\n").unwrap();
    let e = BrokerConfig::from_properties_file(&path).unwrap_err().to_string();
    assert!(e.contains("haAuthSecret") && !e.contains("tooshort") && e.contains(":2"), "{e}");
    let shown = format!("{c:?}");
    assert!(!shown.contains(SECRET), "Debug shows the secret");
    assert!(shown.contains("Secret(hidden)"));
    // Empty is "no authentication".
    c.set("haAuthSecret", "").unwrap();
    c.validate().unwrap();
}

/// A client that sends its hello a byte at a time, each within the socket's read timeout, is
/// held to the handshake's deadline (`haHousekeepingInterval`, 2 s here) all the same: before,
/// each byte restarted the wait, and 40 bytes at 200 ms kept the handshake open for 8 s.
#[test]
fn a_trickling_client_is_held_to_the_deadline() {
    let md = tempfile::tempdir().unwrap();
    let master = master_with(md.path(), Some(SECRET));
    let mut client = TcpStream::connect(ha_addr(&master)).unwrap();
    let mut hello = b"RMQHAUT1".to_vec();
    hello.extend_from_slice(&[1u8; 32]);
    let mut sent = 0;
    for b in &hello {
        if client.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(refused_for(&master, "within the time allowed"));
    assert!(sent < hello.len(), "the whole hello went through, a byte every 200 ms");
    master.shutdown();
}
