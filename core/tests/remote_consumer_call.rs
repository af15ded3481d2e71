//! GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): the broker forwards
//! a tool's request to the consumer client the header names, on that client's connection
//! with a fresh opaque, and answers the tool with the client's response (4.9's
//! `AdminBrokerProcessor.callConsumer`); no such client, a client that does not answer in
//! time, or one whose connection closes are errors, the last at once.

mod common;
mod remote_common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rmqha_core::Broker;
use rmqha_core::remoting::{MAX_CALLS_PER_CONNECTION, RemotingCommand, request_code};

use remote_common::*;

const RUNNING_INFO: i32 = request_code::GET_CONSUMER_RUNNING_INFO;
const DIRECTLY: i32 = request_code::CONSUME_MESSAGE_DIRECTLY;
const CONSUME_MSG_TIMEOUT: i32 = 207;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap();
    b.create_topic("T", 2).unwrap();
    b
}

/// A consumer `id` of group `group` on a raw connection, its heartbeat answered.
fn consumer(b: &Broker, id: &str, group: &str, version: Option<i32>) -> Raw {
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    let mut hb = heartbeat(id, group, &[("T", "*", 1)]);
    if let Some(v) = version {
        hb = hb.with_version(v);
    }
    raw.send(hb, 7);
    let answer = raw.recv_code(0, TIMEOUT).expect("the heartbeat's answer");
    assert!(answer.is_response() && answer.opaque == 7, "{answer:?}");
    raw
}

fn running_info(group: &str, client_id: &str) -> RemotingCommand {
    RemotingCommand::request(RUNNING_INFO)
        .with_ext("consumerGroup", group)
        .with_ext("clientId", client_id)
        .with_ext("jstackEnable", false)
}

/// `req` sent by a tool on its own connection and thread, since the answer needs the
/// consumer to act meanwhile.
fn ask(b: &Broker, req: RemotingCommand) -> thread::JoinHandle<(RemotingCommand, Duration)> {
    let c = client(b.remoting_addrs()[0]);
    thread::spawn(move || {
        let t = Instant::now();
        let r = c.invoke_sync(req, Duration::from_secs(30)).expect("the tool's call");
        (r, t.elapsed())
    })
}

/// The next request forwarded to a consumer with `code`: a request awaiting an answer.
fn forwarded(raw: &mut Raw, code: i32) -> RemotingCommand {
    let f = raw.recv_code(code, TIMEOUT).unwrap_or_else(|| panic!("request code {code} forwarded"));
    assert!(!f.is_response() && !f.is_oneway(), "{f:?}");
    f
}

/// The consumer answers `request` with `response`.
fn answer(raw: &mut Raw, request: &RemotingCommand, mut response: RemotingCommand) {
    response.mark_response();
    raw.send(response, request.opaque);
}

const RUNNING_INFO_BODY: &str = r#"{"jstack":"","mqTable":{},"properties":{"PROP_CLIENT_VERSION":"V4_9_4","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}]}"#;

#[test]
fn running_info_is_the_clients_answer() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let mut c2 = consumer(&b, "c2", "G", None);

    let tool = ask(&b, running_info("G", "c1").with_ext("extra", "kept"));
    let f = forwarded(&mut c1, RUNNING_INFO);
    assert_eq!(f.ext("consumerGroup"), Some("G"));
    assert_eq!(f.ext("clientId"), Some("c1"));
    assert_eq!(f.ext("jstackEnable"), Some("false"));
    assert_eq!(f.ext("extra"), Some("kept"), "the tool's fields as it sent them: {f:?}");
    // An answer with an opaque the broker did not use is ignored; the one with the forwarded
    // request's opaque reaches the tool: the client's code, remark, fields and body.
    let mut wrong = RemotingCommand::response(0, Some("wrong opaque")).with_body(b"no".to_vec());
    wrong.mark_response();
    c1.send(wrong, f.opaque.wrapping_add(1000));
    answer(
        &mut c1,
        &f,
        RemotingCommand::response(0, Some("from the client"))
            .with_ext("answered", "yes")
            .with_body(RUNNING_INFO_BODY.as_bytes().to_vec()),
    );
    let (r, _) = tool.join().unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (0, Some("from the client")), "{r:?}");
    assert_eq!(r.ext("answered"), Some("yes"));
    assert_eq!(r.body, RUNNING_INFO_BODY.as_bytes());
    // A second answer to the same request is ignored.
    answer(&mut c1, &f, RemotingCommand::response(0, Some("twice")));

    // An error the client answers reaches the tool as it is.
    let tool = ask(&b, running_info("G", "c1"));
    let g = forwarded(&mut c1, RUNNING_INFO);
    assert_ne!(g.opaque, f.opaque, "each forwarded request has an opaque of its own");
    answer(&mut c1, &g, RemotingCommand::response(code::SYSTEM_ERROR, Some("jstack failed")));
    let (r, _) = tool.join().unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (code::SYSTEM_ERROR, Some("jstack failed")));

    // The consumer's connection still serves its own requests.
    c1.send(heartbeat("c1", "G", &[("T", "*", 1)]), 99);
    let r = c1.recv_code(0, TIMEOUT).expect("heartbeat answered");
    assert_eq!(r.opaque, 99);
    assert!(c2.recv_code(RUNNING_INFO, Duration::from_millis(200)).is_none(), "only c1 was asked");
    b.shutdown();
}

#[test]
fn a_client_not_online_or_too_old_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let mut old = consumer(&b, "old", "G", Some(61));
    let admin = client(b.remoting_addrs()[0]);
    for (group, id) in [("G", "nobody"), ("Other", "c1"), ("NoGroup", "x")] {
        let r = call(&admin, running_info(group, id));
        assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
        assert_eq!(r.remark.as_deref(), Some(format!("The Consumer <{group}> <{id}> not online").as_str()));
    }
    let r = call(&admin, running_info("G", "old"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert_eq!(
        r.remark.as_deref(),
        Some("The Consumer <old> Version <V3_1_7> too low to finish, please upgrade it to V3_1_8_SNAPSHOT")
    );
    // Nothing was forwarded to anyone.
    assert!(c1.recv_code(RUNNING_INFO, Duration::from_millis(200)).is_none());
    assert!(old.recv_code(RUNNING_INFO, Duration::from_millis(200)).is_none());
    // A closed client is gone at once.
    drop(c1);
    let gone = common::wait_until(TIMEOUT, || {
        call(&admin, running_info("G", "c1")).remark.as_deref() == Some("The Consumer <G> <c1> not online")
    });
    assert!(gone);
    b.shutdown();
}

#[test]
fn a_client_that_does_not_answer_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("consumerCallTimeoutMillis", "400")]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let tool = ask(&b, running_info("G", "c1"));
    let f = forwarded(&mut c1, RUNNING_INFO);
    let (r, took) = tool.join().unwrap();
    assert_eq!(r.code, CONSUME_MSG_TIMEOUT, "{r:?}");
    let remark = r.remark.unwrap();
    assert!(remark.starts_with("consumer <G> <c1> Timeout: "), "{remark}");
    assert!(took >= Duration::from_millis(400) && took < TIMEOUT, "{took:?}");
    // A late answer is ignored, and the connection goes on.
    answer(&mut c1, &f, RemotingCommand::response(0, Some("late")));
    let tool = ask(&b, running_info("G", "c1"));
    let g = forwarded(&mut c1, RUNNING_INFO);
    answer(&mut c1, &g, RemotingCommand::response(0, Some("in time")));
    let (r, _) = tool.join().unwrap();
    assert_eq!(r.remark.as_deref(), Some("in time"));
    b.shutdown();
}

#[test]
fn a_client_closing_fails_the_call_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // The timeout is far beyond the test's patience: only the close can end the call.
    let b = master(dir.path(), &[("consumerCallTimeoutMillis", "600000")]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let tool = ask(&b, running_info("G", "c1"));
    forwarded(&mut c1, RUNNING_INFO);
    let closed = Instant::now();
    drop(c1);
    let (r, _) = tool.join().unwrap();
    assert!(closed.elapsed() < TIMEOUT, "{:?}", closed.elapsed());
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    let remark = r.remark.unwrap();
    assert!(remark.starts_with("invoke consumer <G> <c1> Exception: "), "{remark}");
    assert!(remark.contains("closed the connection"), "{remark}");
    b.shutdown();
}

#[test]
fn consume_directly_forwards_the_stored_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let admin = client(b.remoting_addrs()[0]);
    call(&admin, send_v2(&Msg::new("T", b"before")));
    let sent = call(&admin, send_v2(&Msg::new("T", b"consume me").tags("TagA").keys("k1")));
    assert_eq!(sent.code, code::SUCCESS);
    let msg_id = sent.ext("msgId").unwrap().to_owned();
    let mut c1 = consumer(&b, "c1", "G", None);

    let req = RemotingCommand::request(DIRECTLY)
        .with_ext("consumerGroup", "G")
        .with_ext("clientId", "c1")
        .with_ext("msgId", &msg_id)
        .with_ext("brokerName", "whatever the tool says");
    let tool = ask(&b, req);
    let f = forwarded(&mut c1, DIRECTLY);
    assert_eq!(f.ext("msgId"), Some(msg_id.as_str()));
    assert_eq!(f.ext("brokerName"), Some("broker-a"), "the broker's own name, as 4.9");
    let records = decode_records(&f.body);
    assert_eq!(records.len(), 1, "{f:?}");
    assert_eq!(records[0].body, b"consume me");
    assert_eq!(records[0].topic, "T");
    assert_eq!(records[0].prop("TAGS"), Some("TagA"));
    assert_eq!(records[0].phy_offset, msg_id_offset(&msg_id));
    let result =
        r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"","spentTimeMills":3}"#;
    answer(&mut c1, &f, RemotingCommand::response(0, None).with_body(result.as_bytes().to_vec()));
    let (r, _) = tool.join().unwrap();
    assert_eq!((r.code, r.body.as_slice()), (0, result.as_bytes()), "{r:?}");

    // A message id naming no message, or no message id at all: refused, nothing forwarded.
    let past_end = format!("{}{:016X}", &msg_id[..16], b.max_offset() + 1000);
    for bad in [past_end.as_str(), "NOT_AN_ID", &msg_id[..31]] {
        let req = RemotingCommand::request(DIRECTLY)
            .with_ext("consumerGroup", "G")
            .with_ext("clientId", "c1")
            .with_ext("msgId", bad);
        let r = call(&admin, req);
        assert_eq!(r.code, code::SYSTEM_ERROR, "{bad}: {r:?}");
        assert!(r.remark.as_deref().unwrap_or("").contains(bad), "{bad}: {r:?}");
    }
    // The middle of a record is no message.
    let inside = format!("{}{:016X}", &msg_id[..16], msg_id_offset(&msg_id) + 8);
    let req = RemotingCommand::request(DIRECTLY)
        .with_ext("consumerGroup", "G")
        .with_ext("clientId", "c1")
        .with_ext("msgId", &inside);
    assert_eq!(call(&admin, req).code, code::SYSTEM_ERROR);
    assert!(c1.recv_code(DIRECTLY, Duration::from_millis(200)).is_none());
    b.shutdown();
}

/// At most MAX_CALLS_PER_CONNECTION requests await one client; the answers reach the tool's
/// requests they belong to, whatever order the client answers in.
#[test]
fn calls_to_one_client_are_bounded_and_matched() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let mut tool = Raw::connect(b.remoting_addrs()[0]);
    let n = MAX_CALLS_PER_CONNECTION as i32;
    for i in 1..=n {
        tool.send(running_info("G", "c1").with_ext("n", i), i);
    }
    let mut got: Vec<RemotingCommand> = (0..n).map(|_| forwarded(&mut c1, RUNNING_INFO)).collect();
    // One more is refused at once.
    tool.send(running_info("G", "c1"), n + 1);
    let r = tool.recv();
    assert_eq!((r.opaque, r.code), (n + 1, code::SYSTEM_ERROR), "{r:?}");
    assert!(r.remark.as_deref().unwrap().contains("already await"), "{r:?}");
    // The client answers in reverse order, each with the number its request carried.
    got.reverse();
    for f in &got {
        let i = f.ext("n").unwrap().to_owned();
        answer(&mut c1, f, RemotingCommand::response(0, Some(&i)));
    }
    let mut seen = Vec::new();
    for _ in 0..n {
        let r = tool.recv();
        assert_eq!(r.remark.as_deref(), Some(r.opaque.to_string().as_str()), "{r:?}");
        seen.push(r.opaque);
    }
    seen.sort();
    assert_eq!(seen, (1..=n).collect::<Vec<_>>());
    // The places are free again.
    tool.send(running_info("G", "c1"), 500);
    let f = forwarded(&mut c1, RUNNING_INFO);
    answer(&mut c1, &f, RemotingCommand::response(0, Some("again")));
    assert_eq!(tool.recv().remark.as_deref(), Some("again"));
    b.shutdown();
}

const STATUS: i32 = request_code::INVOKE_BROKER_TO_GET_CONSUMER_STATUS;
const FROM_CLIENT: i32 = request_code::GET_CONSUMER_STATUS_FROM_CLIENT;

fn consumer_status(group: &str, client: Option<&str>) -> RemotingCommand {
    let r = RemotingCommand::request(STATUS).with_ext("topic", "T").with_ext("group", group);
    match client {
        Some(c) => r.with_ext("clientAddr", c),
        None => r,
    }
}

/// A client's GetConsumerStatusBody, as the Java client's fastjson writes it.
fn client_status(offsets: &[(i32, i64)]) -> Vec<u8> {
    let entries: Vec<String> = offsets
        .iter()
        .map(|(q, o)| format!(r#"{{"brokerName":"broker-a","queueId":{q},"topic":"T"}}:{o}"#))
        .collect();
    format!(r#"{{"consumerTable":{{}},"messageQueueTable":{{{}}}}}"#, entries.join(",")).into_bytes()
}

fn queue(q: i32) -> rmqha_core::broker_admin::QueueKey {
    rmqha_core::broker_admin::QueueKey { topic: "T".into(), broker_name: "broker-a".into(), queue_id: q }
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (`mqadmin getConsumerStatus`): every member is asked
/// GET_CONSUMER_STATUS_FROM_CLIENT at once, and the answer holds what each that answered
/// holds; one that answers an error, or whose connection closes, is left out.
#[test]
fn consumer_status_gathers_what_each_member_holds() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let mut c1 = consumer(&b, "c1", "G", None);
    let mut c2 = consumer(&b, "c2", "G", None);
    let mut c3 = consumer(&b, "c3", "G", None);

    let tool = ask(&b, consumer_status("G", None));
    let (f1, f2, f3) =
        (forwarded(&mut c1, FROM_CLIENT), forwarded(&mut c2, FROM_CLIENT), forwarded(&mut c3, FROM_CLIENT));
    for f in [&f1, &f2, &f3] {
        assert_eq!((f.ext("topic"), f.ext("group")), (Some("T"), Some("G")), "{f:?}");
    }
    // c3 answers late, c1 with its offsets, c2 with an error; then c3's connection closes.
    answer(&mut c1, &f1, RemotingCommand::response(0, None).with_body(client_status(&[(1, 7), (0, 42)])));
    answer(&mut c2, &f2, RemotingCommand::response(code::SYSTEM_ERROR, Some("busy")));
    drop(c3);
    let (r, took) = tool.join().unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(took < Duration::from_secs(4), "a closed connection is not waited out: {took:?}");
    let body = String::from_utf8(r.body.clone()).unwrap();
    assert_eq!(
        body,
        r#"{"consumerTable":{"c1":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:42,{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}},"messageQueueTable":{}}"#
    );
    let status = rmqha_core::broker_admin::ConsumerStatus::decode(&r.body).unwrap();
    assert_eq!(status.consumer_table, vec![("c1".to_string(), vec![(queue(0), 42), (queue(1), 7)])]);

    // `clientAddr` names the one member to ask.
    let tool = ask(&b, consumer_status("G", Some("c2")));
    let f = forwarded(&mut c2, FROM_CLIENT);
    answer(&mut c2, &f, RemotingCommand::response(0, None).with_body(client_status(&[(0, 5)])));
    let (r, _) = tool.join().unwrap();
    let status = rmqha_core::broker_admin::ConsumerStatus::decode(&r.body).unwrap();
    assert_eq!(status.consumer_table, vec![("c2".to_string(), vec![(queue(0), 5)])]);
    assert!(c1.recv_code(FROM_CLIENT, Duration::from_millis(200)).is_none(), "only c2 was asked");
    b.shutdown();
}

#[test]
fn consumer_status_without_members_or_from_an_old_client_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let tool = client(b.remoting_addrs()[0]);
    let r = tool.invoke_sync(consumer_status("Nobody", None), TIMEOUT).unwrap();
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (code::SYSTEM_ERROR, Some("No Any Consumer online in the consumer group: [Nobody]"))
    );
    // MQVersion ordinal 20 is V3_0_3_SNAPSHOT, older than V3_0_7_SNAPSHOT (28): nobody is asked.
    let mut old = consumer(&b, "old", "Old", Some(20));
    let r = tool.invoke_sync(consumer_status("Old", None), TIMEOUT).unwrap();
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (code::SYSTEM_ERROR, Some("the client does not support this feature. version=V3_0_3_SNAPSHOT"))
    );
    assert!(old.recv_code(FROM_CLIENT, Duration::from_millis(200)).is_none());
    // A header without the group is refused naming it.
    let r = tool.invoke_sync(RemotingCommand::request(STATUS).with_ext("topic", "T"), TIMEOUT).unwrap();
    assert_ne!(r.code, 0);
    assert!(r.remark.as_deref().unwrap_or_default().contains("group"), "{r:?}");
    b.shutdown();
}
