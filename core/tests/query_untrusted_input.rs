//! Queries take what anyone sends: a message id, a key. (From an audit of the query and
//! offset APIs.)
//!
//! A message id names a store host and a CommitLog offset, and anyone can make one up. A
//! producer's body can hold bytes shaped like a record, topic, keys and checksum included,
//! whose offset field names where the body lies: before, `message_by_id` and
//! VIEW_MESSAGE_BY_ID served that as a message the broker stored (RocketMQ's
//! `lookMessageByOffset` does the same). Only offsets where a record starts are served now.

mod common;
mod remote_common;

use std::time::Duration;

use common::{broker_config, store_config};
use remote_common::{call, client};
use rmqha_core::message::offset_msg_id;
use rmqha_core::remoting::{RemotingCommand, request_code, response_code};
use rmqha_core::{Broker, Message, MessageStore, PutStatus};

/// Puts a genuine record on `topic`, then a record on "Attacker" whose body is a copy of it
/// with the offset field naming the body's own position; returns (genuine, forged offset).
fn forge(
    put: impl Fn(&Message) -> rmqha_core::PutResult,
    read: impl Fn(i64) -> Vec<u8>,
) -> (rmqha_core::PutResult, i64) {
    let a = put(&Message::new("Victim", b"transfer 1000000 to mallory".to_vec()).with_keys(&["order-1"]));
    let mut forged = read(a.phy_offset);
    // The attacker's record follows A; its body starts 88 bytes in (IPv4 hosts, no topic
    // longer than "Attacker", as the codec lays it out).
    let b_phy = a.phy_offset + a.size as i64;
    let forged_at = b_phy + 88;
    forged[28..36].copy_from_slice(&forged_at.to_be_bytes());
    let b = put(&Message::new("Attacker", forged));
    assert_eq!(b.phy_offset, b_phy);
    (a, forged_at)
}

#[test]
fn a_record_forged_inside_a_body_is_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    let put = |m: &Message| {
        let r = store.put_message_sync(m).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        r
    };
    let (a, forged_at) = forge(put, |phy| store.record_at(phy).unwrap().bytes().to_vec());
    // The forgery is a well-formed record where it lies (that is the attack).
    assert_eq!(store.record_at(forged_at).unwrap().view().unwrap().topic_str(), Some("Victim"));
    let id = offset_msg_id(&a.store_host, forged_at);
    // Before dispatch reaches it and after.
    assert!(store.message_by_id(&id).is_none(), "served a forged record before dispatch");
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let got = store.message_by_id(&id);
    assert!(got.is_none(), "served a forged record: {:?}", got.map(|m| m.topic));
    // The genuine ones are served.
    assert_eq!(store.message_by_id(&a.msg_id()).unwrap().body, b"transfer 1000000 to mallory");
    store.shutdown();
}

/// Ids of records just put are found whether dispatch has reached them or not.
#[test]
fn every_genuine_record_is_found_by_its_id_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(store_config(dir.path(), &[])).unwrap();
    store.start().unwrap();
    for i in 0..500 {
        let m = Message::new("Found", format!("message {i}").into_bytes()).with_queue(i % 4);
        let r = store.put_message_sync(&m).unwrap();
        let got = store.message_by_id(&r.msg_id()).unwrap_or_else(|| panic!("message {i} not found by id"));
        assert_eq!(got.body, format!("message {i}").into_bytes());
    }
    // Across files (small files in tests), after dispatch.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let r = store.put_message_sync(&Message::new("Found", b"last".to_vec())).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.message_by_id(&r.msg_id()).unwrap().body, b"last");
    store.shutdown();
}

#[test]
fn view_message_by_id_refuses_a_forged_offset() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let (a, forged_at) =
        forge(|m| b.put_message_sync(m).unwrap(), |phy| b.store().record_at(phy).unwrap().bytes().to_vec());
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    let c = client(format!("127.0.0.1:{}", b.listen_port()).parse().unwrap());
    let view = |offset: i64| {
        call(&c, RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_ext("offset", offset))
    };
    assert_eq!(view(forged_at).code, response_code::SYSTEM_ERROR, "a forged record was served");
    let genuine = view(a.phy_offset);
    assert_eq!(genuine.code, response_code::SUCCESS);
    assert_eq!(genuine.body, b.store().record_at(a.phy_offset).unwrap().bytes());
    b.shutdown();
}

/// Keys with the same Java hash code are easy to make ("Aa" and "BB"). A query for one read
/// every message of the other before: about a microsecond each, so a hot key of 20 million
/// messages held the answering thread for some 20 s. It now reads at most
/// `KEY_QUERY_CANDIDATES` records, so a match older than that many colliding ones is not
/// returned (RocketMQ stops after `maxNum` hash matches, returning messages of other keys).
#[test]
fn a_key_query_reads_a_bounded_number_of_colliding_messages() {
    use rmqha_core::store::message_store::KEY_QUERY_CANDIDATES;
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[("maxIndexNum", "100000"), ("maxHashSlotNum", "5000")]);
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    let put = |key: &str, body: String| {
        let r = store.put_message_sync(&Message::new("T", body.into_bytes()).with_keys(&[key])).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    };
    put("BB", "old BB".into());
    for i in 0..KEY_QUERY_CANDIDATES - 2 {
        put("Aa", format!("Aa {i}"));
    }
    assert!(store.wait_dispatched(Duration::from_secs(30)));
    let bb = |store: &MessageStore| store.query_by_key("T", "BB", 1, 0, i64::MAX);
    assert_eq!(bb(&store).len(), 1, "found behind fewer colliding messages than the bound");
    put("Aa", "one more".into());
    put("Aa", "and another".into());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(bb(&store).is_empty(), "the query read past the bound");
    assert_eq!(store.query_by_key("T", "Aa", 1, 0, i64::MAX)[0].body, b"and another");
    store.shutdown();
}
