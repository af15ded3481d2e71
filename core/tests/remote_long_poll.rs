//! Long polling: a pull with the suspend flag that finds nothing is held, answered as soon as
//! a message reaches its queue, or PULL_NOT_FOUND when its suspend timeout passes, and never
//! holds up the other requests of its connection.

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqha_core::remoting::{RemotingCommand, request_code};
use rmqha_core::{Broker, Message};

use remote_common::*;

fn master(dir: &std::path::Path) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[])).unwrap();
    b.create_topic("T", 4).unwrap();
    b
}

fn suspended_pull(queue: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    pull_req("cg", "T", queue, offset, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, suspend_ms, "*")
}

#[test]
fn a_held_pull_returns_as_soon_as_a_message_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    raw.send(suspended_pull(0, 0, 20_000), 1);
    // Held: no answer while the queue is empty.
    assert!(raw.try_recv(Duration::from_millis(300)).is_none(), "answered before any message");
    let put_at = Instant::now();
    b.put_message_sync(&Message::new("T", b"late".to_vec())).unwrap();
    let resp = raw.recv();
    let waited = put_at.elapsed();
    assert_eq!((resp.opaque, resp.code), (1, code::SUCCESS), "{resp:?}");
    assert_eq!(decode_records(&resp.body)[0].body, b"late");
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 1);
    // Woken by the dispatch of the message, not by the 20 s timeout.
    assert!(waited < Duration::from_secs(5), "answered {waited:?} after the put");
    b.shutdown();
}

#[test]
fn a_held_pull_times_out_with_pull_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    let t0 = Instant::now();
    let resp = call(&c, suspended_pull(0, 0, 400));
    let took = t0.elapsed();
    assert_eq!(resp.code, code::PULL_NOT_FOUND, "{resp:?}");
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 0);
    assert!(took >= Duration::from_millis(400), "returned after {took:?}, before its suspend timeout");
    assert!(took < Duration::from_secs(5), "returned after {took:?}");
    // Without the suspend flag the same pull is answered at once.
    let t0 = Instant::now();
    let resp = call(&c, pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 10_000, "*"));
    assert_eq!(resp.code, code::PULL_NOT_FOUND);
    assert!(t0.elapsed() < Duration::from_secs(5), "not held for its 10 s suspend timeout");
    b.shutdown();
}

#[test]
fn held_pulls_do_not_block_their_connection_and_wake_per_queue() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    // Three held pulls on three queues, then a plain request on the same connection.
    for q in 0..3 {
        raw.send(suspended_pull(q, 0, 20_000), 10 + q);
    }
    raw.send(
        RemotingCommand::request(request_code::GET_MAX_OFFSET).with_ext("topic", "T").with_ext("queueId", 0),
        99,
    );
    let resp = raw.recv();
    assert_eq!(resp.opaque, 99, "the held pulls must not delay the next request");
    // A message on queue 1 wakes only the pull of queue 1.
    b.put_message_sync(&Message::new("T", b"q1".to_vec()).with_queue(1)).unwrap();
    let resp = raw.recv();
    assert_eq!((resp.opaque, resp.code), (11, code::SUCCESS));
    assert!(raw.try_recv(Duration::from_millis(200)).is_none(), "the other queues' pulls stay held");
    b.put_message_sync(&Message::new("T", b"q2".to_vec()).with_queue(2)).unwrap();
    b.put_message_sync(&Message::new("T", b"q0".to_vec()).with_queue(0)).unwrap();
    let mut got: Vec<i32> = (0..2).map(|_| raw.recv().opaque).collect();
    got.sort();
    assert_eq!(got, vec![10, 12]);
    b.shutdown();
}

#[test]
fn a_closed_connection_drops_its_held_pull_and_shutdown_is_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    raw.send(suspended_pull(0, 0, 60_000), 1);
    assert!(raw.try_recv(Duration::from_millis(100)).is_none());
    drop(raw);
    // The broker keeps serving; a message for the dropped pull goes nowhere.
    b.put_message_sync(&Message::new("T", b"x".to_vec())).unwrap();
    let c = client(b.remoting_addrs()[0]);
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(call(&c, pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*")).code, code::SUCCESS);
    // A pull still held when the broker stops does not delay the stop.
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    raw.send(suspended_pull(1, 0, 60_000), 2);
    assert!(raw.try_recv(Duration::from_millis(100)).is_none());
    let t0 = Instant::now();
    b.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(5), "shutdown took {:?}", t0.elapsed());
    assert!(raw.closed_by_server());
}

/// Parked pulls keep their request for the whole suspension. A client that pads them (a
/// frame may carry 16 MiB of header fields or body) cannot make the broker keep more than a
/// bounded amount: a body is dropped when the pull is parked, and past 8 MiB of one
/// connection's parked requests (64 MiB of all) a suspended pull is answered at once, as a
/// full service answers. Another connection's pulls are still parked: one connection could
/// fill the whole service before, and every other consumer then re-pulled in a busy loop.
#[test]
fn padded_held_pulls_cannot_exhaust_memory() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    // A body of 8 MiB on each of 20 pulls: dropped, so all of them are held.
    for i in 0..20 {
        let mut req = suspended_pull(0, 0, 60_000);
        req.body = vec![7u8; 8 << 20];
        raw.send(req, i);
    }
    assert!(raw.try_recv(Duration::from_millis(500)).is_none(), "pulls with bodies are held");
    // 1 MiB of header fields on each of 100 pulls: at most 8 MiB of them are held.
    for i in 100..200 {
        let mut req = suspended_pull(1, 0, 60_000);
        req.ext_fields.insert("padding".into(), "p".repeat(1 << 20));
        raw.send(req, i);
    }
    let mut answered = Vec::new();
    while let Some(resp) = raw.try_recv(Duration::from_millis(1000)) {
        assert_eq!(resp.code, code::PULL_NOT_FOUND, "{resp:?}");
        answered.push(resp.opaque);
    }
    assert!((90..=96).contains(&answered.len()), "{} of 100 padded pulls answered at once", answered.len());
    assert!(answered.iter().all(|&o| o >= 100), "a pull with a body was answered: {answered:?}");
    // Another consumer's pull is parked as usual, and wakes with its message.
    let mut other = Raw::connect(b.remoting_addrs()[0]);
    other.send(suspended_pull(2, 0, 60_000), 1);
    assert!(other.try_recv(Duration::from_millis(500)).is_none(), "another connection's pull is held");
    b.put_message_sync(&Message::new("T", b"for-queue-2".to_vec()).with_queue(2)).unwrap();
    assert_eq!(other.recv().code, code::SUCCESS);
    // The held ones still wake when their queue grows.
    b.put_message_sync(&Message::new("T", b"for-queue-1".to_vec()).with_queue(1)).unwrap();
    let resp = raw.recv();
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
    b.shutdown();
}

/// Waits until the requests sent so far on `raw` have been handled, and checks none of them
/// was answered: a connection's requests are handled in order, so once a later request is
/// answered the pulls before it are held.
fn assert_held(raw: &mut Raw) {
    raw.send(
        RemotingCommand::request(request_code::GET_MAX_OFFSET).with_ext("topic", "T").with_ext("queueId", 0),
        999,
    );
    let resp = raw.recv();
    assert_eq!(resp.opaque, 999, "a pull was answered instead of held: {resp:?}");
}

fn tagged(tags: Option<&str>, body: &str) -> Message {
    let m = Message::new("T", body.as_bytes().to_vec());
    match tags {
        Some(t) => m.with_tags(t),
        None => m,
    }
}

/// As RocketMQ's `notifyMessageArriving` checks the new message against a held request's
/// filter: a pull held for tag A stays held while only other messages arrive, and wakes as
/// soon as an A does; a pull of everything on the same queue wakes for anything.
#[test]
fn a_held_pull_with_a_tag_wakes_only_for_a_matching_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    raw.send(pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 20_000, "A"), 1);
    raw.send(suspended_pull(0, 0, 20_000), 2);
    assert_held(&mut raw);
    // Messages the tag pull does not want: the pull of everything wakes, the other does not.
    b.put_message_sync(&tagged(Some("B"), "b0")).unwrap();
    let resp = raw.recv();
    assert_eq!((resp.opaque, resp.code), (2, code::SUCCESS), "{resp:?}");
    for i in 1..5 {
        b.put_message_sync(&tagged(Some("B"), &format!("b{i}"))).unwrap();
    }
    b.put_message_sync(&tagged(None, "untagged")).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert!(
        raw.try_recv(Duration::from_millis(700)).is_none(),
        "the pull for tag A was woken by messages it does not want"
    );
    // A matching one wakes it at once, with only its message, past all the others.
    let put_at = Instant::now();
    b.put_message_sync(&tagged(Some("A"), "a")).unwrap();
    let resp = raw.recv();
    let waited = put_at.elapsed();
    assert_eq!((resp.opaque, resp.code), (1, code::SUCCESS), "{resp:?}");
    let bodies: Vec<Vec<u8>> = decode_records(&resp.body).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, vec![b"a".to_vec()]);
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 7);
    assert!(waited < Duration::from_secs(5), "answered {waited:?} after the put");
    b.shutdown();
}

/// A held tag pull that only non-matching messages reach is answered when its suspend
/// timeout passes, as before, with PULL_RETRY_IMMEDIATELY past them.
#[test]
fn a_held_pull_with_a_tag_times_out_past_non_matching_messages() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    let sent = Instant::now();
    raw.send(pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 1_500, "A"), 1);
    assert_held(&mut raw);
    for i in 0..3 {
        b.put_message_sync(&tagged(Some("B"), &format!("b{i}"))).unwrap();
    }
    let resp = raw.try_recv(Duration::from_secs(10)).expect("answered by its timeout");
    let took = sent.elapsed();
    assert_eq!((resp.opaque, resp.code), (1, code::PULL_RETRY_IMMEDIATELY), "{resp:?}");
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 3);
    assert!(took >= Duration::from_millis(1_500), "answered after {took:?}, before its suspend timeout");
    b.shutdown();
}

/// Non-matching messages beyond the window a pull scans (maxFilterMessageSize / 20 units)
/// wake it: its answer moves the consumer past them instead of leaving it behind.
#[test]
fn a_held_pull_with_a_tag_wakes_when_its_scan_window_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("maxFilterMessageSize", "1000")],
    ))
    .unwrap();
    b.create_topic("T", 4).unwrap();
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    raw.send(pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 20_000, "A"), 1);
    assert_held(&mut raw);
    let msgs: Vec<Message> = (0..50).map(|i| tagged(Some("B"), &format!("b{i}"))).collect();
    b.put_messages(&msgs).unwrap().wait();
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert!(raw.try_recv(Duration::from_millis(500)).is_none(), "50 units fill no more than the window");
    let put_at = Instant::now();
    b.put_message_sync(&tagged(Some("B"), "b50")).unwrap();
    let resp = raw.recv();
    assert!(put_at.elapsed() < Duration::from_secs(5), "answered {:?} after the put", put_at.elapsed());
    assert_eq!((resp.opaque, resp.code), (1, code::PULL_RETRY_IMMEDIATELY), "{resp:?}");
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 50);
    b.shutdown();
}

/// Many pulls parked on idle queues while messages flow to another topic: each dispatch
/// round looked at every queue a pull waited on (a ConsumeQueue lookup each), so 20,000
/// parked pulls kept a core busy and answered late (found by a scale audit). Now a round
/// looks only at the queues the dispatcher put units into, and every queue once a second.
#[test]
fn parked_pulls_on_idle_queues_cost_nothing_per_dispatch_round() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("Idle", 16).unwrap();
    b.create_topic("Busy", 1).unwrap();
    const PARKED: usize = 2000;
    let mut conns: Vec<Raw> = (0..2).map(|_| Raw::connect(b.remoting_addrs()[0])).collect();
    for i in 0..PARKED {
        let (group, queue) = (format!("cg{}", i / 16), (i % 16) as i32);
        let req = pull_req(&group, "Idle", queue, 0, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 60_000, "*");
        conns[i % 2].send(req, i as i32);
    }
    for raw in &mut conns {
        raw.send(
            RemotingCommand::request(request_code::GET_MAX_OFFSET)
                .with_ext("topic", "T")
                .with_ext("queueId", 0),
            999_999,
        );
        assert_eq!(raw.recv().opaque, 999_999, "a pull was answered instead of held");
    }
    let started = Instant::now();
    let before = b.long_poll_queue_checks();
    // Each put dispatched before the next: one dispatch round per message at least.
    const PUTS: usize = 300;
    for i in 0..PUTS {
        b.put_message_sync(&Message::new("Busy", format!("m{i}").into_bytes()).with_queue(0)).unwrap();
        assert!(b.store().wait_dispatched(TIMEOUT));
    }
    let checks = b.long_poll_queue_checks() - before;
    // The 16 parked queues once a second, and the rounds right after parking; before, 16
    // per round: at least 16 × 300.
    let seconds = started.elapsed().as_secs() + 2;
    assert!(checks <= 16 * seconds + 64, "{checks} queue checks in {seconds} s for {PUTS} rounds");
    // A message to a parked queue still wakes its pulls at once.
    b.put_message_sync(&Message::new("Idle", b"wake".to_vec()).with_queue(3)).unwrap();
    let resp = conns[1].recv();
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
}
