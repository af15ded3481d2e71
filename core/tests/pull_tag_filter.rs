//! Pulls with a tag subscription: the store skips the ConsumeQueue units whose tags code is
//! not the subscription's during its scan (RocketMQ's `isMatchedByConsumeQueue`), so a
//! selective consumer gets up to `maxMsgNums` matching messages per pull out of a scan of up
//! to `maxFilterMessageSize / 20` units, and `nextBeginOffset` moves past every unit scanned.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::remoting::RemotingClient;
use rmqha_core::{Broker, Message};

use remote_common::*;

const N: i64 = 200;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap();
    b.create_topic("T", 1).unwrap();
    b
}

/// Message `i` of the queue: every 50th is tagged `A`, every 7th of the rest has no TAGS,
/// the others are tagged `B`.
fn tag_of(i: i64) -> Option<&'static str> {
    if i % 50 == 0 {
        Some("A")
    } else if i % 7 == 3 {
        None
    } else {
        Some("B")
    }
}

fn fill(b: &Broker) {
    let msgs: Vec<Message> = (0..N)
        .map(|i| {
            let m = Message::new("T", format!("m{i}").into_bytes());
            match tag_of(i) {
                Some(t) => m.with_tags(t),
                None => m,
            }
        })
        .collect();
    for chunk in msgs.chunks(50) {
        b.put_messages(chunk).unwrap().wait();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(b.queue_max_offset("T", 0), N);
}

/// What a pull came to: code, nextBeginOffset, and the (queue offset, body) of each record.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    code: i32,
    next: i64,
    records: Vec<(i64, String)>,
}

fn pull_tag(c: &RemotingClient, offset: i64, max: i32, sub: &str) -> Got {
    let p = call(c, pull_req("cg", "T", 0, offset, max, FLAG_SUBSCRIPTION, 0, sub));
    assert_eq!((ext_i64(&p, "minOffset"), ext_i64(&p, "maxOffset")), (0, N), "{p:?}");
    let records = decode_records(&p.body)
        .into_iter()
        .map(|r| (r.queue_offset, String::from_utf8(r.body).unwrap()))
        .collect();
    Got { code: p.code, next: ext_i64(&p, "nextBeginOffset"), records }
}

fn got(code: i32, next: i64, offsets: &[i64]) -> Got {
    Got { code, next, records: offsets.iter().map(|&o| (o, format!("m{o}"))).collect() }
}

/// Pulls the whole queue with `sub`, `max` at a time; returns the offsets and the pulls made.
fn drain(c: &RemotingClient, sub: &str, max: i32) -> (Vec<i64>, usize) {
    let (mut offset, mut pulls, mut all) = (0, 0, Vec::new());
    while offset < N {
        let g = pull_tag(c, offset, max, sub);
        pulls += 1;
        assert!(
            g.code == code::SUCCESS || g.code == code::PULL_RETRY_IMMEDIATELY,
            "pull {pulls} at {offset}: {g:?}"
        );
        assert!(g.next > offset, "pull at {offset} made no progress: {g:?}");
        all.extend(g.records.iter().map(|r| r.0));
        offset = g.next;
        assert!(pulls < 1000);
    }
    (all, pulls)
}

#[test]
fn a_selective_pull_skips_non_matching_units_during_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    fill(&b);
    let c = client(b.remoting_addrs()[0]);
    // The default window is maxFilterMessageSize 16000 / 20 = 800 units, the whole queue: one
    // pull gets every matching message and moves to the end.
    assert_eq!(pull_tag(&c, 0, 32, "A"), got(code::SUCCESS, N, &[0, 50, 100, 150]));
    // maxMsgNums counts only matching messages: the batch stops at the third match, which
    // is not read, and the next pull starts there.
    assert_eq!(pull_tag(&c, 1, 2, "A"), got(code::SUCCESS, 101, &[50, 100]));
    assert_eq!(pull_tag(&c, 101, 2, "A"), got(code::SUCCESS, N, &[150]));
    // Nothing matches in the rest of the queue: retry at once, from its end.
    assert_eq!(pull_tag(&c, 151, 32, "A"), got(code::PULL_RETRY_IMMEDIATELY, N, &[]));
    assert_eq!(pull_tag(&c, N, 32, "A"), got(code::PULL_NOT_FOUND, N, &[]));
    // A subscription of two tags; one of no tag the queue has.
    let (offsets, pulls) = drain(&c, "A || B", 32);
    let want: Vec<i64> = (0..N).filter(|&i| tag_of(i).is_some()).collect();
    assert_eq!((offsets, pulls), (want.clone(), want.len().div_ceil(32)));
    assert_eq!(pull_tag(&c, 0, 32, "C"), got(code::PULL_RETRY_IMMEDIATELY, N, &[]));
    // Everything, untagged messages included: 32 per pull, as before.
    let (offsets, pulls) = drain(&c, "*", 32);
    assert_eq!((offsets, pulls), ((0..N).collect(), (N as usize).div_ceil(32)));
    assert_eq!(drain(&c, "A", 32), (vec![0, 50, 100, 150], 1));
    b.shutdown();
}

#[test]
fn the_scan_is_bounded_by_max_filter_message_size() {
    let dir = tempfile::tempdir().unwrap();
    // 1000 bytes: 50 units per pull (maxMsgNums 32 would be 640 bytes, less).
    let b = master(dir.path(), &[("maxFilterMessageSize", "1000")]);
    fill(&b);
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(pull_tag(&c, 0, 32, "A"), got(code::SUCCESS, 50, &[0]));
    assert_eq!(pull_tag(&c, 1, 32, "A"), got(code::SUCCESS, 51, &[50]));
    assert_eq!(pull_tag(&c, 151, 32, "A"), got(code::PULL_RETRY_IMMEDIATELY, N, &[]));
    assert_eq!(drain(&c, "A", 32), (vec![0, 50, 100, 150], 4));
    // maxMsgNums 64 widens the window to 64 units (RocketMQ's max(maxFilterMessageSize,
    // maxMsgNums * 20)).
    assert_eq!(pull_tag(&c, 1, 64, "A"), got(code::SUCCESS, 65, &[50]));
    b.shutdown();
}

/// Two tags with the same Java hash code pass the ConsumeQueue filter alike; the TAGS text
/// tells them apart during the scan, and a scan left empty by that still moves the consumer on.
#[test]
fn tags_with_the_same_hash_code_are_told_apart_by_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    // "Aa" and "BB" hash alike in Java.
    for (i, t) in ["BB", "BB", "Aa", "C", "BB"].iter().enumerate() {
        b.put_message_sync(&Message::new("T", format!("m{i}").into_bytes()).with_tags(*t)).unwrap();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    let c = client(b.remoting_addrs()[0]);
    let p = |offset, max| {
        let p = call(&c, pull_req("cg", "T", 0, offset, max, FLAG_SUBSCRIPTION, 0, "Aa"));
        let bodies: Vec<String> =
            decode_records(&p.body).into_iter().map(|r| String::from_utf8(r.body).unwrap()).collect();
        (p.code, ext_i64(&p, "nextBeginOffset"), bodies)
    };
    assert_eq!(p(0, 32), (code::SUCCESS, 5, vec!["m2".to_string()]));
    // One record a pull: a BB is read and skipped within the scan, without using up
    // maxMsgNums, as a unit with another tags code is.
    assert_eq!(p(0, 1), (code::SUCCESS, 3, vec!["m2".to_string()]));
    assert_eq!(p(1, 1), (code::SUCCESS, 3, vec!["m2".to_string()]));
    assert_eq!(p(2, 1), (code::SUCCESS, 3, vec!["m2".to_string()]));
    // Nothing left that matches: the pull says so and moves past what it scanned.
    assert_eq!(p(3, 1), (code::PULL_RETRY_IMMEDIATELY, 5, vec![]));
    assert_eq!(p(5, 1), (code::PULL_NOT_FOUND, 5, vec![]));
    b.shutdown();
}

/// The subscription a heartbeat registered filters the same way.
#[test]
fn a_heartbeat_subscription_filters_during_the_scan() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    fill(&b);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, heartbeat("10.0.0.1@1", "cg", &[("T", "A", 1)]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let p = call(&c, pull_req("cg", "T", 0, 0, 32, 0, 0, ""));
    assert_eq!((p.code, ext_i64(&p, "nextBeginOffset")), (code::SUCCESS, N), "{p:?}");
    let offsets: Vec<i64> = decode_records(&p.body).iter().map(|r| r.queue_offset).collect();
    assert_eq!(offsets, vec![0, 50, 100, 150]);
    b.shutdown();
}

/// A slave filters alike, and its own rules (offsetCheckInSlave off: an offset past the end
/// is not corrected but retried) still hold.
#[test]
fn a_slave_filters_during_the_scan_too() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"), &[]);
    fill(&m);
    let ha = format!("127.0.0.1:{}", m.ha_port());
    let remoting = m.remoting_addrs()[0].to_string();
    let s = Broker::start_slave(common::broker_config(
        &dir.path().join("s"),
        "SLAVE",
        &[
            ("haMasterAddress", ha.as_str()),
            ("masterAddress", remoting.as_str()),
            ("slaveReadEnable", "true"),
        ],
    ))
    .unwrap();
    assert!(common::wait_until(TIMEOUT, || s.topic_config("T").is_some() && s.queue_max_offset("T", 0) == N));
    let c = client(s.remoting_addrs()[0]);
    assert_eq!(pull_tag(&c, 0, 32, "A"), got(code::SUCCESS, N, &[0, 50, 100, 150]));
    assert_eq!(pull_tag(&c, 151, 32, "A"), got(code::PULL_RETRY_IMMEDIATELY, N, &[]));
    assert_eq!(pull_tag(&c, N + 100, 32, "A"), got(code::PULL_RETRY_IMMEDIATELY, N + 100, &[]));
    s.shutdown();
    m.shutdown();
}

/// Any client may ask for 2^31 messages: with a filter nothing matches, that one pull read
/// the whole queue. The window is `maxFilterMessageSize` bytes of units or one file's worth
/// of units, whichever is more (RocketMQ stops at the file's end).
#[test]
fn a_pull_for_two_billion_messages_scans_a_bounded_window() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    for i in 0..3000 {
        b.put_message_sync(&common::message("F", 0, i, 10)).unwrap();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    struct Nothing;
    impl rmqha_core::store::MessageFilter for Nothing {
        fn matches_unit(&self, _: i64) -> bool {
            false
        }
        fn matches_record(&self, _: &[u8]) -> bool {
            false
        }
    }
    let r = b.store().get_messages_filtered("F", 0, 0, i32::MAX, 128 << 20, Some(&Nothing));
    assert!(r.messages().is_empty());
    assert!((1..=800).contains(&r.next_begin_offset), "one pull scanned {} units", r.next_begin_offset);
}
