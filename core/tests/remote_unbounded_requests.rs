//! Requests any client may send that used to leave something behind without bound (audit of
//! untrusted input, 2026-12-01): a deletion record per name asked about, a registration per
//! address, a route answer overflowing its queue count.

mod common;
mod remote_common;

use rmqha_core::remoting::{RemotingCommand, request_code};
use rmqha_core::{Broker, Message};
use serde_json::Value;

use remote_common::*;

fn delete(c: &rmqha_core::remoting::RemotingClient, topic: &str) -> RemotingCommand {
    call(c, RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic))
}

/// Deleting a topic that does not exist records nothing: before, every name (any bytes, up to
/// the 16 MiB frame) was added to `deletedTopics.json`, rewritten whole each time, kept until
/// retention, and sent to slaves inside every topic config answer.
#[test]
fn deleting_unknown_topics_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let huge = "x".repeat(4 << 20);
    for name in ["a b", "\u{e9}t\u{e9}", "back\\slash", huge.as_str()] {
        let r = delete(&c, name);
        assert_ne!(r.code, code::SUCCESS, "{:?}", &name[..name.len().min(16)]);
        assert!(r.remark.as_deref().unwrap_or("").len() < 1024, "the answer echoes the name");
    }
    // A valid name that no topic has: nothing to delete, as in RocketMQ.
    assert_eq!(delete(&c, "NeverMade").code, code::SUCCESS);
    assert!(b.delete_topic("NeverMadeEither").is_ok());
    assert!(
        b.store().deleted_topics().is_empty(),
        "{:?}",
        b.store().deleted_topics().keys().collect::<Vec<_>>()
    );
    let len = std::fs::metadata(dir.path().join("deletedTopics.json")).map(|m| m.len()).unwrap_or(0);
    assert!(len < 1024, "deletedTopics.json grew to {len} bytes");

    // A real topic's deletion is still recorded, and one that only has queue offsets (its
    // records not dispatched yet) too.
    b.put_message_sync(&Message::new("Real", b"x".to_vec())).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(delete(&c, "Real").code, code::SUCCESS);
    assert!(b.store().deleted_topics().contains_key("Real"));
}

/// A directory under the ConsumeQueue root that no queue of the topic owns (on a
/// case-insensitive file system, another topic's, found by another spelling) is left alone.
#[test]
fn deleting_a_topic_without_queues_removes_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let other = dir.path().join("consumequeue").join("Ghost");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep"), b"another topic's").unwrap();
    b.create_topic("Ghost", 1).unwrap();
    b.delete_topic("Ghost").unwrap();
    assert!(other.join("keep").exists());
}

/// An embedded put may use queue id `i32::MAX`; the route of its topic then advertised
/// `i32::MAX + 1` queues: an overflow (a panic in checked builds, a negative count in release).
#[test]
fn a_huge_queue_id_does_not_break_the_route_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("autoCreateTopicEnable", "false")],
    ))
    .unwrap();
    b.put_message_sync(&Message::new("Embedded", b"x".to_vec()).with_queue(i32::MAX)).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    let c = client(b.remoting_addrs()[0]);
    let r = call(
        &c,
        RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "Embedded"),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["queueDatas"][0]["readQueueNums"], 1024, "{body}");
}

/// Registrations from any client were kept until a route query pruned them: now at most 64
/// live ones, and an address longer than a host:port can be is refused.
#[test]
fn registrations_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let config = b.config();
    let register = |addr: &str| {
        call(
            &c,
            RemotingCommand::request(request_code::REGISTER_BROKER)
                .with_ext("brokerName", config.broker_name.as_str())
                .with_ext("clusterName", config.broker_cluster_name.as_str())
                .with_ext("brokerId", 1)
                .with_ext("brokerAddr", addr),
        )
    };
    for i in 0..64 {
        let r = register(&format!("10.0.0.{i}:10911"));
        assert_eq!(r.code, code::SUCCESS, "{i}: {r:?}");
    }
    let refused = register("10.0.1.0:10911");
    assert_ne!(refused.code, code::SUCCESS);
    assert!(refused.remark.as_deref().unwrap_or("").contains("64"), "{refused:?}");
    // One already registered may register again (every 10 s).
    assert_eq!(register("10.0.0.7:10911").code, code::SUCCESS);
    let long = format!("{}:1", "h".repeat(300));
    assert_ne!(register(&long).code, code::SUCCESS);
}
