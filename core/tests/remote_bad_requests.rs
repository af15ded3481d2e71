//! What a broker does with requests no correct client sends: a malformed header, a missing or
//! unparsable field, a huge declared length, an unknown code, a garbage body. Each gets an
//! error response or a closed connection; the broker never crashes and keeps serving.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::processor::{
    ClientManageProcessor, ConsumerCallProcessor, ConsumerManageProcessor, LockProcessor, PullProcessor,
    QueryProcessor, QueueQueryProcessor, RouteProcessor, SendProcessor, StatsProcessor, TopicProcessor,
};
use rmqha_core::remoting::{RemotingCommand, request_code};

use remote_common::*;

fn master(dir: &std::path::Path) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[("maxMessageSize", "1024")]))
        .unwrap();
    b.create_topic("T", 2).unwrap();
    b
}

/// The broker still answers a correct request on a new connection.
fn still_serving(b: &Broker) {
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, send_v2(&Msg::new("T", b"alive")));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
}

#[test]
fn unknown_codes_are_not_supported_and_the_connection_stays() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    for (i, code) in [9999, -1, 0, 306, 308].into_iter().enumerate() {
        raw.send(RemotingCommand::request(code), i as i32);
        let r = raw.recv();
        assert_eq!((r.opaque, r.code), (i as i32, code::REQUEST_CODE_NOT_SUPPORTED), "code {code}");
    }
    raw.send(send_v2(&Msg::new("T", b"x")), 50);
    assert_eq!(raw.recv().code, code::SUCCESS);
    b.shutdown();
}

#[test]
fn missing_and_unparsable_fields_are_system_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    let mut send = send_v2(&Msg::new("T", b"x"));
    send.remove_ext("b");
    send.remove_ext("topic");
    let r = call(&c, send);
    assert_eq!(r.code, code::SYSTEM_ERROR);
    // SEND_MESSAGE_V2 is read by its V2 names: the topic's, `b`, is the one missing.
    assert!(r.remark.as_deref().unwrap().contains("\"b\""), "{r:?}");
    let r = call(&c, send_v2(&Msg::new("T", b"x")).with_ext("e", "zero"));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("\"e\""));
    let mut p = pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*");
    p.remove_ext("queueOffset");
    let r = call(&c, p);
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("queueOffset"));
    let r =
        call(&c, pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "*").with_ext("queueId", "99999999999"));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    // Every code of every processor, with no fields at all: an error response, no panic.
    let all = [
        SendProcessor::CODES,
        PullProcessor::CODES,
        ConsumerManageProcessor::CODES,
        ClientManageProcessor::CODES,
        LockProcessor::CODES,
        QueryProcessor::CODES,
        TopicProcessor::CODES,
        RouteProcessor::CODES,
        StatsProcessor::CODES,
        QueueQueryProcessor::CODES,
        ConsumerCallProcessor::CODES,
    ];
    for &code in all.iter().flat_map(|c| c.iter()) {
        if [
            request_code::GET_BROKER_CLUSTER_INFO,
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            request_code::GET_BROKER_CONFIG,
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS,
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
        ]
        .contains(&code)
        {
            continue; // have no request fields
        }
        let r = call(&c, RemotingCommand::request(code));
        assert_ne!(r.code, code::SUCCESS, "request code {code} with no fields: {r:?}");
        assert!(r.remark.is_some(), "request code {code}: {r:?}");
        assert!(!r.remark.unwrap().contains("panicked"), "request code {code}");
    }
    // And with every field set to garbage.
    let names = [
        "a",
        "b",
        "c",
        "d",
        "e",
        "f",
        "g",
        "h",
        "i",
        "j",
        "k",
        "m",
        "topic",
        "queueId",
        "queueOffset",
        "maxMsgNums",
        "sysFlag",
        "commitOffset",
        "suspendTimeoutMillis",
        "subVersion",
        "consumerGroup",
        "producerGroup",
        "key",
        "maxNum",
        "beginTimestamp",
        "endTimestamp",
        "offset",
        "timestamp",
        "clientID",
        "clientId",
        "msgId",
        "brokerName",
        "brokerAddr",
        "clusterName",
        "brokerId",
        "readQueueNums",
        "writeQueueNums",
        "perm",
        "defaultTopic",
        "groupName",
        "index",
        "count",
    ];
    for &code in all.iter().flat_map(|c| c.iter()) {
        for garbage in ["", "-1", "\u{1}\u{2}", "99999999999999999999", "%RETRY%", &"x".repeat(300)] {
            let mut req = RemotingCommand::request(code).with_body(garbage.as_bytes().to_vec());
            for n in names {
                req.set_ext(n, garbage);
            }
            let r = call(&c, req);
            assert!(!r.remark.unwrap_or_default().contains("panicked"), "request code {code}, {garbage:?}");
        }
    }
    still_serving(&b);
    b.shutdown();
}

#[test]
fn garbage_bodies_and_oversized_messages_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    let mut batch = send_batch("T", 0, &[Msg::new("T", b"x")]);
    batch.body = b"\x00\x00\x00\x30not a batch".to_vec();
    assert_eq!(call(&c, batch).code, code::MESSAGE_ILLEGAL);
    let mut batch = send_batch("T", 0, &[Msg::new("T", b"x")]);
    batch.body.clear();
    assert_eq!(call(&c, batch).code, code::MESSAGE_ILLEGAL);
    let mut batch = send_batch("T", 0, &[Msg::new("T", b"x")]);
    batch.body.truncate(batch.body.len() - 1);
    assert_eq!(call(&c, batch).code, code::MESSAGE_ILLEGAL);
    let hb = RemotingCommand::request(request_code::HEART_BEAT).with_body(b"{not json".to_vec());
    assert_eq!(call(&c, hb).code, code::SYSTEM_ERROR);
    let hb = RemotingCommand::request(request_code::HEART_BEAT).with_body(b"[1,2]".to_vec());
    assert_eq!(call(&c, hb).code, code::SYSTEM_ERROR);
    // maxMessageSize is 1024 here.
    assert_eq!(call(&c, send_v2(&Msg::new("T", &[7u8; 2000]))).code, code::MESSAGE_ILLEGAL);
    let big_batch: Vec<Msg> = (0..4).map(|_| Msg::new("T", &[1u8; 600])).collect();
    assert_eq!(
        call(&c, send_batch("T", 0, &big_batch)).code,
        code::SUCCESS,
        "each message is within the limit"
    );
    // Properties with separators in a topic name, a delay that is no level, a delayed
    // message in a batch (RocketMQ refuses it too), a timer message, a transactional batch.
    let mut m = send_v2(&Msg::new("T", b"x"));
    m.set_ext("i", props(&[("DELAY", "soon")]));
    let r = call(&c, m);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("soon"), "{r:?}");
    // The same as a transaction's half message: stored, its commit could never succeed.
    let stored = b.max_offset();
    let mut m = send_v2(&Msg::new("T", b"x"));
    m.set_ext("i", props(&[("TRAN_MSG", "true"), ("PGROUP", "pg"), ("DELAY", "soon")]));
    let r = call(&c, m);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("soon"), "{r:?}");
    assert_eq!(b.max_offset(), stored, "no half message stored");
    let mut m = send_batch("T", 0, &[Msg::new("T", b"a"), Msg::new("T", b"b")]);
    m.set_ext("i", props(&[("WAIT", "true"), ("DELAY", "1")]));
    let r = call(&c, m);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    for timer in ["TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"] {
        let mut m = send_v2(&Msg::new("T", b"x"));
        m.set_ext("i", props(&[(timer, "5000")]));
        let r = call(&c, m);
        assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{timer}: {r:?}");
    }
    // A transaction is one message: a batch with TRAN_MSG is refused.
    let mut m = send_batch("T", 0, &[Msg::new("T", b"a"), Msg::new("T", b"b")]);
    m.set_ext("i", props(&[("TRAN_MSG", "true")]));
    assert_eq!(call(&c, m).code, code::MESSAGE_ILLEGAL);
    // A new topic created with defaultTopicQueueNums 0 has no queue to put into.
    let before = b.max_offset();
    let mut m = send_v2(&Msg::new("NoQueues", b"x").queue(-1));
    m.set_ext("d", 0);
    let r = call(&c, m);
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert_eq!(b.max_offset(), before, "nothing stored");
    // A view at an offset past the end.
    let r = call(&c, RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", i64::MAX));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    let r = call(&c, RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", -5));
    assert_eq!(r.code, code::SYSTEM_ERROR);
    still_serving(&b);
    b.shutdown();
}

#[test]
fn malformed_frames_and_huge_lengths_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let addr = b.remoting_addrs()[0];
    let frame = |len: i32, hlt: u32, rest: &[u8]| {
        let mut v = len.to_be_bytes().to_vec();
        v.extend_from_slice(&hlt.to_be_bytes());
        v.extend_from_slice(rest);
        v
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("JSON header that is not JSON", frame(4 + 9, 9, b"{\"code\":1")),
        ("JSON header that is not an object", frame(4 + 2, 2, b"[]")),
        ("ROCKETMQ header cut short", frame(4 + 5, 0x0100_0005, &[0, 10, 0, 0, 1])),
        ("ROCKETMQ header with a huge remark length", {
            let mut h = vec![0, 10, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
            h.extend_from_slice(&i32::MAX.to_be_bytes());
            frame(4 + h.len() as i32, 0x0100_0000 | h.len() as u32, &h)
        }),
        ("unknown serialize type", frame(4 + 2, 0x0700_0002, b"{}")),
        ("header longer than the frame", frame(8, 1000, b"{}{}")),
        ("negative length", frame(-1, 0, b"")),
        ("a 2 GiB body declared", frame(i32::MAX, 2, b"{}")),
        ("a 17 MiB body declared", frame(17 << 20, 2, b"{}")),
    ];
    for (what, bytes) in cases {
        let mut raw = Raw::connect(addr);
        raw.send_bytes(&bytes);
        assert!(raw.closed_by_server(), "{what}: the connection should be closed");
    }
    // A huge declared body that never arrives does not stall other connections.
    let mut hanging = Raw::connect(addr);
    hanging.send_bytes(&frame(15 << 20, 2, b"{}partial"));
    still_serving(&b);
    drop(hanging);
    still_serving(&b);
    b.shutdown();
}
