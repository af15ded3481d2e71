//! NOTIFY_CONSUMER_IDS_CHANGED: when a consumer group changes (a member joins, leaves by
//! UNREGISTER_CLIENT or by closing its connection, or a heartbeat adds or drops a topic) the
//! broker pushes it to each live member, so they rebalance at once (4.9's
//! `DefaultConsumerIdsChangeListener`); `notifyConsumerIdsChangedEnable=false` turns it off.
//! A member whose heartbeats stop on an open connection is dropped after
//! `channelExpiredTimeout`, its connection closed and its group told (RocketMQ 5).

mod common;
mod remote_common;

use std::time::Duration;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingCommand, request_code};

use remote_common::*;

const NOTIFY: i32 = request_code::NOTIFY_CONSUMER_IDS_CHANGED;
/// Long enough for a push the broker would send to arrive on loopback.
const QUIET: Duration = Duration::from_millis(300);

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> std::sync::Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap();
    b.create_topic("T", 4).unwrap();
    b.create_topic("U", 4).unwrap();
    b
}

/// A member of `group` on a connection of its own: its heartbeat's answer comes first.
fn join(b: &Broker, id: &str, group: &str, topics: &[&str]) -> Raw {
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    beat(&mut raw, id, group, topics);
    raw
}

fn beat(raw: &mut Raw, id: &str, group: &str, topics: &[&str]) {
    let subs: Vec<(&str, &str, i64)> = topics.iter().map(|t| (*t, "*", 1)).collect();
    raw.send(heartbeat(id, group, &subs), 7);
    let answer = raw.recv();
    assert!(answer.is_response() && answer.opaque == 7, "the heartbeat's answer first: {answer:?}");
    assert_eq!(answer.code, code::SUCCESS, "{answer:?}");
}

/// The next push is a NOTIFY_CONSUMER_IDS_CHANGED for `group`, oneway.
fn told(raw: &mut Raw, group: &str) {
    let p = raw.try_recv(TIMEOUT).expect("a NOTIFY_CONSUMER_IDS_CHANGED");
    assert_eq!(p.code, NOTIFY, "{p:?}");
    assert!(!p.is_response() && p.is_oneway(), "{p:?}");
    assert_eq!(p.ext("consumerGroup"), Some(group));
}

fn not_told(raw: &mut Raw) {
    assert!(raw.recv_code(NOTIFY, QUIET).is_none(), "nothing changed: no push");
}

#[test]
fn members_are_told_when_their_group_changes() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    // The first member is told of itself (4.9 tells every channel of the group).
    let mut a = join(&b, "a", "G", &["T"]);
    told(&mut a, "G");
    // The same heartbeat again changes nothing.
    beat(&mut a, "a", "G", &["T"]);
    not_told(&mut a);

    // A second member: both are told; a member of another group is not.
    let mut other = join(&b, "o", "Other", &["T"]);
    told(&mut other, "Other");
    let mut c = join(&b, "c", "G", &["T"]);
    told(&mut a, "G");
    told(&mut c, "G");
    not_told(&mut other);

    // A heartbeat adding a topic, then one dropping it: a change each; a newer subVersion
    // of the same topics is none (4.9 counts topics added or removed).
    beat(&mut c, "c", "G", &["T", "U"]);
    told(&mut a, "G");
    told(&mut c, "G");
    beat(&mut c, "c", "G", &["T"]);
    told(&mut a, "G");
    told(&mut c, "G");
    c.send(heartbeat("c", "G", &[("T", "*", 2)]), 8);
    assert_eq!(c.recv().code, code::SUCCESS);
    not_told(&mut a);

    // UNREGISTER_CLIENT: the rest are told.
    let unregister = RemotingCommand::request(request_code::UNREGISTER_CLIENT)
        .with_ext("clientID", "c")
        .with_ext("consumerGroup", "G");
    c.send(unregister, 9);
    let r = c.recv();
    assert!(r.is_response() && r.opaque == 9 && r.code == code::SUCCESS, "{r:?}");
    told(&mut a, "G");

    // A member whose connection closes: the rest are told.
    let d = join(&b, "d", "G", &["T"]);
    told(&mut a, "G");
    drop(d);
    told(&mut a, "G");
    let ids = call(
        &client(b.remoting_addrs()[0]),
        RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP).with_ext("consumerGroup", "G"),
    );
    let body: serde_json::Value = serde_json::from_slice(&ids.body).unwrap();
    assert_eq!(body["consumerIdList"], serde_json::json!(["a"]), "the closed member is gone at once");
    not_told(&mut other);
    b.shutdown();
}

#[test]
fn no_pushes_with_notify_consumer_ids_changed_off() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("notifyConsumerIdsChangedEnable", "false")]);
    let mut a = join(&b, "a", "G", &["T"]);
    let c = join(&b, "c", "G", &["T", "U"]);
    drop(c);
    not_told(&mut a);
    b.shutdown();
}

#[test]
fn a_member_whose_heartbeats_stop_is_dropped_its_connection_closed_and_its_group_told() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("channelExpiredTimeout", "2000")]);
    let mut a = join(&b, "a", "G", &["T"]);
    told(&mut a, "G");
    let mut hung = join(&b, "hung", "G", &["T"]);
    told(&mut a, "G");
    told(&mut hung, "G");
    let c = client(b.remoting_addrs()[0]);
    let members = || {
        let r = call(&c, RemotingCommand::request(38).with_ext("consumerGroup", "G"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let mut ids: Vec<String> =
            v["consumerIdList"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
        ids.sort();
        ids
    };
    assert_eq!(members(), ["a", "hung"]);

    // `a` keeps beating (every 250 ms, well inside the 2 s); `hung` says nothing.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut notified = false;
    while !notified {
        assert!(std::time::Instant::now() < deadline, "a was never told that hung left");
        a.send(heartbeat("a", "G", &[("T", "*", 1)]), 9);
        loop {
            let m = a.try_recv(TIMEOUT).expect("the heartbeat's answer");
            if m.is_response() {
                assert_eq!((m.opaque, m.code), (9, code::SUCCESS), "{m:?}");
                break;
            }
            assert_eq!((m.code, m.ext("consumerGroup")), (NOTIFY, Some("G")), "{m:?}");
            notified = true;
        }
        if !notified {
            notified = a.recv_code(NOTIFY, Duration::from_millis(250)).is_some();
        }
    }
    assert_eq!(members(), ["a"], "hung is gone; a, beating, stays");
    assert!(hung.closed_by_server(), "the hung member's connection is closed");
    b.shutdown();
}
