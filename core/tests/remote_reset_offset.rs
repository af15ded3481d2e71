//! INVOKE_BROKER_TO_RESET_OFFSET (`mqadmin resetOffsetByTime`): the broker moves a group's
//! committed offsets to a store time, persists them, pushes RESET_CONSUMER_CLIENT_OFFSET to
//! each live member in the form its client reads, and answers the offset table.

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::Duration;

use rmqha_core::Broker;
use rmqha_core::broker_admin::ResetOffsets;
use rmqha_core::remoting::{LanguageCode, RemotingCommand, request_code};

use remote_common::*;

fn reset_req(topic: &str, group: &str, timestamp: i64, force: bool) -> RemotingCommand {
    RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET)
        .with_ext("topic", topic)
        .with_ext("group", group)
        .with_ext("timestamp", timestamp)
        .with_ext("isForce", force)
}

/// Waits (bounded) until the clock has passed `t` ms, so that what is stored next has a
/// later store time than what was stored before.
fn clock_past(t: i64) -> i64 {
    assert!(common::wait_until(TIMEOUT, || now_ms() > t), "the clock did not pass {t}");
    now_ms()
}

/// Five messages into each of T's two queues before `mid`, five after: queue offsets 0..5
/// are older than `mid`, 5..10 newer.
fn master_with_history(dir: &std::path::Path) -> (Arc<Broker>, i64) {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[])).unwrap();
    b.create_topic("T", 2).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let put = |n: usize| {
        for i in 0..n {
            for q in 0..2 {
                let r = call(&c, send_v2(&Msg::new("T", format!("m{i}").as_bytes()).queue(q)));
                assert_eq!(r.code, code::SUCCESS, "{r:?}");
            }
        }
    };
    put(5);
    let mid = clock_past(now_ms());
    clock_past(mid);
    put(5);
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!((b.queue_max_offset("T", 0), b.queue_max_offset("T", 1)), (10, 10));
    (b, mid)
}

/// A consumer connection of `group` whose heartbeat names `language`.
fn member(b: &Broker, id: &str, group: &str, language: LanguageCode) -> Raw {
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    let mut hb = heartbeat(id, group, &[("T", "*", 1)]);
    hb.language = language;
    raw.send(hb, 1);
    assert_eq!(raw.recv().code, code::SUCCESS);
    raw
}

fn offsets(b: &Broker, group: &str) -> (i64, i64) {
    (b.consumer_offset(group, "T", 0), b.consumer_offset(group, "T", 1))
}

fn table(resp: &RemotingCommand) -> Vec<(i32, i64)> {
    assert_eq!(resp.code, code::SUCCESS, "{resp:?}");
    let t = ResetOffsets::decode(&resp.body).unwrap();
    t.offsets
        .iter()
        .map(|(q, o)| {
            assert_eq!((q.topic.as_str(), q.broker_name.as_str()), ("T", "broker-a"));
            (q.queue_id, *o)
        })
        .collect()
}

#[test]
fn a_reset_moves_the_broker_offsets_and_tells_each_member_in_its_clients_form() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mid) = master_with_history(dir.path());
    b.commit_consumer_offset("G", "T", 0, 10).unwrap();
    b.commit_consumer_offset("G", "T", 1, 3).unwrap();
    let mut java = member(&b, "java-1", "G", LanguageCode::JAVA);
    let mut cpp = member(&b, "cpp-1", "G", LanguageCode::CPP);
    let c = client(b.remoting_addrs()[0]);

    // Forced, to `mid`: both queues to their first message stored at or after it.
    let r = call(&c, reset_req("T", "G", mid, true));
    assert_eq!(table(&r), vec![(0, 5), (1, 5)]);
    assert_eq!(r.remark, None, "members were online");
    assert_eq!(offsets(&b, "G"), (5, 5));
    // Persisted at once, in RocketMQ's JSON.
    let file = std::fs::read_to_string(dir.path().join("config/consumerOffset.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(json["offsetTable"]["T@G"], serde_json::json!({"0": 5, "1": 5}), "{file}");

    // Each member was pushed the table: oneway requests, the header as 4.9 sends it.
    let reset_code = request_code::RESET_CONSUMER_CLIENT_OFFSET;
    let push = java.recv_code(reset_code, TIMEOUT).expect("the Java member is told");
    let cpp_push = cpp.recv_code(reset_code, TIMEOUT).expect("the C++ member is told");
    for p in [&push, &cpp_push] {
        assert_eq!(p.code, request_code::RESET_CONSUMER_CLIENT_OFFSET);
        assert_eq!(p.flag & 1, 0, "a request, not a response");
        assert_eq!(p.flag & 2, 2, "oneway");
        assert_eq!(p.ext("topic"), Some("T"));
        assert_eq!(p.ext("group"), Some("G"));
        assert_eq!(p.ext("timestamp"), Some(mid.to_string().as_str()));
        assert_eq!(p.ext("isForce"), Some("true"));
    }
    // Java (and Go) clients read fastjson's map with MessageQueue keys inline; the C++
    // client reads a list (`ResetOffsetBodyForC`).
    assert_eq!(
        String::from_utf8(push.body.clone()).unwrap(),
        r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,{"brokerName":"broker-a","queueId":1,"topic":"T"}:5}}"#
    );
    assert_eq!(push.body, r.body, "the answer carries the same table");
    assert_eq!(
        String::from_utf8(cpp_push.body.clone()).unwrap(),
        r#"{"offsetTable":[{"brokerName":"broker-a","offset":5,"queueId":0,"topic":"T"},{"brokerName":"broker-a","offset":5,"queueId":1,"topic":"T"}]}"#
    );

    // Rewind only (isForce=false): a queue whose target lies past its offset keeps it.
    b.commit_consumer_offset("G", "T", 0, 2).unwrap();
    b.commit_consumer_offset("G", "T", 1, 8).unwrap();
    let r = call(&c, reset_req("T", "G", mid, false));
    assert_eq!(table(&r), vec![(0, 2), (1, 5)]);
    assert_eq!(offsets(&b, "G"), (2, 5));
    let push = java.recv_code(reset_code, TIMEOUT).unwrap();
    assert_eq!(push.ext("isForce"), Some("false"));
    assert!(cpp.recv_code(reset_code, TIMEOUT).is_some());

    // -1: the end of each queue (skip the backlog); a time before everything: the start.
    assert_eq!(table(&call(&c, reset_req("T", "G", -1, true))), vec![(0, 10), (1, 10)]);
    assert_eq!(table(&call(&c, reset_req("T", "G", 0, true))), vec![(0, 0), (1, 0)]);
    // A time after everything: the end.
    assert_eq!(table(&call(&c, reset_req("T", "G", now_ms() + 60_000, true))), vec![(0, 10), (1, 10)]);
    assert_eq!(offsets(&b, "G"), (10, 10));
    b.shutdown();
}

#[test]
fn a_group_with_nobody_online_is_reset_on_the_broker_and_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mid) = master_with_history(dir.path());
    // Offsets on queue 0 only: a forced reset sets both, a rewind leaves queue 1 alone.
    b.commit_consumer_offset("G2", "T", 0, 9).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, reset_req("T", "G2", mid, false));
    assert_eq!(table(&r), vec![(0, 5)]);
    assert_eq!(offsets(&b, "G2"), (5, -1));
    let remark = r.remark.unwrap();
    assert!(remark.contains("no consumer of group G2 is online"), "{remark}");
    assert_eq!(table(&call(&c, reset_req("T", "G2", 0, true))), vec![(0, 0), (1, 0)]);
    assert_eq!(offsets(&b, "G2"), (0, 0));
    b.shutdown();
}

#[test]
fn bad_resets_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mid) = master_with_history(dir.path());
    b.commit_consumer_offset("G", "T", 0, 7).unwrap();
    let mut java = member(&b, "java-1", "G", LanguageCode::JAVA);
    let c = client(b.remoting_addrs()[0]);
    let refused = |req: RemotingCommand, why: &str| {
        let r = call(&c, req);
        assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains(why), "{remark:?} should say {why:?}");
    };
    refused(reset_req("Nope", "G", mid, true), "no topic in this broker. topic=Nope");
    refused(reset_req("T", "Stranger", mid, true), "the consumer group <Stranger> has no committed offset");
    refused(reset_req("T", "G", -2, true), "timestamp -2");
    let mut no_group = reset_req("T", "G", mid, true);
    no_group.remove_ext("group");
    refused(no_group, "\"group\"");
    let mut bad_ts = reset_req("T", "G", mid, true);
    bad_ts.set_ext("timestamp", "yesterday");
    refused(bad_ts, "\"timestamp\"");
    assert_eq!(offsets(&b, "G"), (7, -1));
    let reset_code = request_code::RESET_CONSUMER_CLIENT_OFFSET;
    assert!(
        java.recv_code(reset_code, Duration::from_millis(300)).is_none(),
        "nobody is told of a refused reset"
    );

    // A slave's offsets follow its master's: refused.
    let slave = common::slave_of(&dir.path().join("slave"), &b, &[]);
    let e = slave.reset_consumer_offsets("G", "T", mid, true).unwrap_err();
    assert!(matches!(e, rmqha_core::Error::NotMaster(_)), "{e}");
    slave.shutdown();
    b.shutdown();
}

/// A reset on the master reaches a slave at its next config sync, even though the slave
/// keeps the larger offset of the two otherwise; progress made on the slave afterwards is
/// not undone by the next sync.
#[test]
fn a_reset_on_the_master_reaches_its_slave() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mid) = master_with_history(dir.path());
    b.commit_consumer_offset("G", "T", 0, 9).unwrap();
    b.commit_consumer_offset("G", "T", 1, 8).unwrap();
    let master_addr = format!("127.0.0.1:{}", b.listen_port());
    let slave = common::slave_of(&dir.path().join("slave"), &b, &[("masterAddress", &master_addr)]);
    slave.sync_config_now().unwrap();
    assert_eq!(offsets(&slave, "G"), (9, 8));

    let c = client(b.remoting_addrs()[0]);
    assert_eq!(table(&call(&c, reset_req("T", "G", mid, false))), vec![(0, 5), (1, 5)]);
    // (Applied by this sync or by the slave's own at start, if that ran late.)
    slave.sync_config_now().unwrap();
    assert_eq!(offsets(&slave, "G"), (5, 5), "the rewind reached the slave");

    // A consumer reading from the slave moves on there; the next sync keeps that. (A commit
    // is checked against the slave's own queue: wait for it to replicate and dispatch.)
    assert!(common::wait_until(TIMEOUT, || slave.queue_max_offset("T", 0) == 10));
    slave.commit_consumer_offset("G", "T", 0, 7).unwrap();
    slave.sync_config_now().unwrap();
    assert_eq!(offsets(&slave, "G"), (7, 5));
    slave.shutdown();
    b.shutdown();
}
