//! A slave whose master accepts connections but never answers (hung, or a black hole behind
//! a load balancer) stops at once: its config sync and its registration each waited out
//! their 3 s request timeout first, and the registration then tried to unregister.

mod common;

use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rmqha_core::Broker;
use rmqha_core::remoting::{DEFAULT_MAX_FRAME, read_frame, request_code};

/// A server that reads requests, reports their codes, and answers none.
fn silent_master() -> (String, mpsc::Receiver<i32>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                while let Ok(Some(req)) = read_frame(&mut conn, DEFAULT_MAX_FRAME) {
                    if tx.send(req.code).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}

#[test]
fn a_slave_stops_at_once_while_its_master_does_not_answer() {
    let (master, requests) = silent_master();
    // The HA port: accepts, holds, sends nothing.
    let ha = TcpListener::bind("127.0.0.1:0").unwrap();
    let ha_addr = ha.local_addr().unwrap().to_string();
    let _held: std::thread::JoinHandle<Vec<TcpStream>> =
        std::thread::spawn(move || ha.incoming().take(1).filter_map(Result::ok).collect());
    let dir = tempfile::tempdir().unwrap();
    let slave = Broker::start_slave(common::broker_config(
        dir.path(),
        "SLAVE",
        &[("haMasterAddress", &ha_addr), ("masterAddress", &master), ("vipChannelEnabled", "false")],
    ))
    .unwrap();
    // Both the registration and the config sync are waiting for an answer.
    let (mut registering, mut syncing) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(registering && syncing) {
        let left = deadline.checked_duration_since(Instant::now()).expect("both requests reached the master");
        match requests.recv_timeout(left).expect("both requests reached the master") {
            request_code::REGISTER_BROKER => registering = true,
            request_code::GET_ALL_TOPIC_CONFIG => syncing = true,
            _ => {}
        }
    }
    let stopping = Instant::now();
    slave.shutdown();
    let took = stopping.elapsed();
    // Each waits 3 s for its answer; the stop ends both calls instead.
    assert!(took < Duration::from_millis(1500), "the stop took {took:?}");
}

/// Sockets of this host in SYN_SENT towards `port` (`/proc/net/tcp`): connections being made.
fn connecting_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let remote_port = f[2].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            remote_port == Some(port) && f[3] == "02"
        })
        .count()
}

#[test]
fn a_slave_stops_at_once_while_its_master_drops_connection_attempts() {
    // A listener whose accept queue is full: the kernel drops further SYNs, as for a host
    // that is down or firewalled, and a connect waits out its whole timeout.
    let listener = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let _queued = TcpStream::connect(addr).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = addr.to_string();
    let slave = Broker::start_slave(common::broker_config(
        dir.path(),
        "SLAVE",
        &[("haMasterAddress", &a), ("masterAddress", &a), ("vipChannelEnabled", "false")],
    ))
    .unwrap();
    // The HA client, the config sync and the registration are all connecting.
    assert!(
        common::wait_until(Duration::from_secs(20), || connecting_to(addr.port()) >= 3),
        "three connections in progress, found {}",
        connecting_to(addr.port())
    );
    let stopping = Instant::now();
    slave.shutdown();
    let took = stopping.elapsed();
    // Each connect waits up to 3 s; the stop gives them up instead.
    assert!(took < Duration::from_millis(1500), "the stop took {took:?}");
}
