//! Pulls with a SQL92 subscription (`MessageSelector.bySql`, `enablePropertyFilter=true`):
//! each record's properties are evaluated during the store's scan, only the messages the
//! expression is TRUE for are sent, the others do not use up `maxMsgNums`, and
//! `nextBeginOffset` moves past every unit scanned. CHECK_CLIENT_CONFIG tells a consumer
//! before it starts whether its expression will be served; without `enablePropertyFilter`
//! SQL92 consumers are refused as RocketMQ refuses them.

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};
use rmqha_core::{Broker, Message};

use remote_common::*;

const N: i64 = 120;
const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
const FILTER_DATA_NOT_EXIST: i32 = 27;

fn master(dir: &std::path::Path, property_filter: bool) -> Arc<Broker> {
    let on = if property_filter { "true" } else { "false" };
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[("enablePropertyFilter", on)]))
        .unwrap();
    b.create_topic("T", 1).unwrap();
    b
}

/// Message `i`: property `a` = i, `color` red / blue / none in turn, every 10th tagged `A`
/// (the rest `B`).
fn message(i: i64) -> Message {
    let mut m = Message::new("T", format!("m{i}").into_bytes())
        .with_tags(if i % 10 == 0 { "A" } else { "B" })
        .with_property("a", i.to_string());
    match i % 3 {
        0 => m = m.with_property("color", "red"),
        1 => m = m.with_property("color", "blue"),
        _ => {}
    }
    m
}

fn fill(b: &Broker, range: std::ops::Range<i64>) {
    let msgs: Vec<Message> = range.map(message).collect();
    for chunk in msgs.chunks(40) {
        b.put_messages(chunk).unwrap().wait();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
}

fn sql_pull(offset: i64, max: i32, expr: &str) -> RemotingCommand {
    pull_req("cg", "T", 0, offset, max, FLAG_SUBSCRIPTION, 0, expr).with_ext("expressionType", "SQL92")
}

/// (code, nextBeginOffset, queue offsets of the records).
fn pulled(c: &RemotingClient, req: RemotingCommand) -> (i32, i64, Vec<i64>) {
    let p = call(c, req);
    let offsets: Vec<i64> = decode_records(&p.body)
        .into_iter()
        .map(|r| {
            assert_eq!(r.body, format!("m{}", r.queue_offset).into_bytes(), "a record's body is its own");
            r.queue_offset
        })
        .collect();
    let next = if p.ext_fields.contains_key("nextBeginOffset") { ext_i64(&p, "nextBeginOffset") } else { -1 };
    (p.code, next, offsets)
}

/// Pulls the whole queue with `expr`, `max` at a time: every offset sent.
fn drain(c: &RemotingClient, expr: &str, max: i32) -> Vec<i64> {
    let (mut offset, mut all) = (0, Vec::new());
    while offset < N {
        let (code, next, got) = pulled(c, sql_pull(offset, max, expr));
        assert!(code == code::SUCCESS || code == code::PULL_RETRY_IMMEDIATELY, "{expr}: code {code}");
        assert!(got.len() <= max as usize && next > offset, "{expr}: {got:?} next {next}");
        all.extend(got);
        offset = next;
    }
    all
}

fn check_body(expression_type: &str, expr: &str) -> Vec<u8> {
    serde_json::json!({
        "clientId": "127.0.0.1@1",
        "group": "cg",
        "subscriptionData": {
            "classFilterMode": false, "codeSet": [], "expressionType": expression_type,
            "subString": expr, "subVersion": 1, "tagsSet": [], "topic": "T"
        }
    })
    .to_string()
    .into_bytes()
}

fn check_client_config(c: &RemotingClient, body: Vec<u8>) -> RemotingCommand {
    call(c, RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG).with_body(body))
}

/// A consumer HEART_BEAT registering group cg on T with `expr` of `expression_type`.
fn heartbeat_with(expression_type: &str, expr: &str, version: i64) -> RemotingCommand {
    heartbeat_typed("127.0.0.1@1", "cg", &[("T", expression_type, expr, version)])
}

#[test]
fn sql92_pulls_send_only_the_messages_the_expression_is_true_for() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), true);
    fill(&b, 0..N);
    let c = client(b.remoting_addrs()[0]);
    let cases: &[(&str, &dyn Fn(i64) -> bool)] = &[
        ("a > 100", &|i| i > 100),
        ("a BETWEEN 10 AND 19 AND color = 'red'", &|i| (10..=19).contains(&i) && i % 3 == 0),
        ("color IN ('red', 'blue') AND NOT (a < 110)", &|i| i % 3 != 2 && i >= 110),
        ("color IS NULL OR TAGS = 'A'", &|i| i % 3 == 2 || i % 10 == 0),
        ("color <> 'red'", &|i| i % 3 == 1),
        ("nothere = 1 OR a = 7", &|i| i == 7),
        ("TRUE", &|_| true),
    ];
    for (expr, want) in cases {
        let expected: Vec<i64> = (0..N).filter(|&i| want(i)).collect();
        for max in [1, 4, 32] {
            assert_eq!(drain(&c, expr, max), expected, "{expr} with maxMsgNums {max}");
        }
    }
    // Messages that do not match do not use up maxMsgNums: the first two reds from 1 are 3, 6.
    assert_eq!(pulled(&c, sql_pull(1, 2, "color = 'red'")), (code::SUCCESS, 7, vec![3, 6]));
    let (code, next, got) = pulled(&c, sql_pull(0, 3, "a >= 2 AND color = 'red'"));
    assert_eq!((code, got), (code::SUCCESS, vec![3, 6, 9]));
    assert_eq!(next, 10);
    // Nothing in the scan window matches: PULL_RETRY_IMMEDIATELY past what was scanned.
    let (code, next, got) = pulled(&c, sql_pull(0, 32, "a > 1000"));
    assert_eq!((code, got.len()), (code::PULL_RETRY_IMMEDIATELY, 0));
    assert!(next > 0 && next <= N, "{next}");
    b.shutdown();
}

#[test]
fn sql92_is_refused_without_enable_property_filter() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), false);
    fill(&b, 0..10);
    let c = client(b.remoting_addrs()[0]);
    let r = check_client_config(&c, check_body("SQL92", "a > 1"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert_eq!(r.remark.as_deref(), Some("The broker does not support consumer to filter message by SQL92"));
    assert_eq!(check_client_config(&c, check_body("TAG", "A || B")).code, code::SUCCESS);
    let r = call(&c, sql_pull(0, 32, "a > 1"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.unwrap().contains("filter message by SQL92"));
    // A consumer registered by its heartbeat, pulling without a subscription in the header.
    assert_eq!(call(&c, heartbeat_with("SQL92", "a > 1", 1)).code, code::SUCCESS);
    let r = call(&c, pull_req("cg", "T", 0, 0, 32, 0, 0, "").with_ext("subVersion", 1));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    // Tag pulls are served as ever.
    assert_eq!(pulled(&c, pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION, 0, "A")).2, vec![0]);
    b.shutdown();
}

#[test]
fn check_client_config_compiles_the_expression() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), true);
    let c = client(b.remoting_addrs()[0]);
    for expr in ["a > 1", "color IN ('red') AND a BETWEEN 1 AND 5", "TAGS IS NOT NULL"] {
        let r = check_client_config(&c, check_body("SQL92", expr));
        assert_eq!((r.code, r.remark.as_deref()), (code::SUCCESS, None), "{expr}");
    }
    assert_eq!(check_client_config(&c, check_body("TAG", "*")).code, code::SUCCESS);
    // A body without a subscription asks nothing (4.9 answers SUCCESS).
    let r = check_client_config(&c, br#"{"clientId":"x","group":"cg"}"#.to_vec());
    assert_eq!(r.code, code::SUCCESS);
    for bad in ["a >", "a > 1 AND", "(a = 1", "a = 'open", "a IN ()", "= 3"] {
        let r = check_client_config(&c, check_body("SQL92", bad));
        assert_eq!(r.code, SUBSCRIPTION_PARSE_FAILED, "{bad}: {r:?}");
        assert!(r.remark.as_deref().is_some_and(|m| !m.is_empty()), "{bad}: the reason is given");
    }
    let r = check_client_config(&c, check_body("CLASS", "x"));
    assert_eq!(r.code, SUBSCRIPTION_PARSE_FAILED, "{r:?}");
    assert!(r.remark.unwrap().contains("CLASS"));
    for garbage in [&b""[..], b"not json", b"[1]"] {
        let r = check_client_config(&c, garbage.to_vec());
        assert_eq!(r.code, code::SYSTEM_ERROR, "{garbage:?}: {r:?}");
    }
    // A header expression that does not compile is refused, saying why (4.9 filters nothing out).
    let r = call(&c, sql_pull(0, 32, "a >> 1"));
    assert_eq!(r.code, SUBSCRIPTION_PARSE_FAILED, "{r:?}");
    assert!(r.remark.unwrap().starts_with("parse the consumer's subscription failed"));
    // A type nobody filters by.
    let r = call(&c, sql_pull(0, 32, "x").with_ext("expressionType", "CLASS"));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    b.shutdown();
}

#[test]
fn a_heartbeat_registers_the_expression_pulls_without_one_use() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), true);
    fill(&b, 0..N);
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(call(&c, heartbeat_with("SQL92", "a >= 110 OR TAGS = 'A'", 1)).code, code::SUCCESS);
    let registered =
        |offset: i64| pulled(&c, pull_req("cg", "T", 0, offset, 32, 0, 0, "").with_ext("subVersion", 1));
    let expected: Vec<i64> = (0..N).filter(|&i| i >= 110 || i % 10 == 0).collect();
    let (mut offset, mut all) = (0, Vec::new());
    while offset < N {
        let (code, next, got) = registered(offset);
        assert!(code == code::SUCCESS || code == code::PULL_RETRY_IMMEDIATELY, "{code}");
        all.extend(got);
        offset = next;
    }
    assert_eq!(all, expected);
    // The group's consumers as the tools show them: a SQL92 subscription has no tag sets.
    let conn = call(
        &c,
        RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST).with_ext("consumerGroup", "cg"),
    );
    assert_eq!(conn.code, code::SUCCESS, "{conn:?}");
    let v: serde_json::Value = serde_json::from_slice(&conn.body).unwrap();
    let sub = &v["subscriptionTable"]["T"];
    assert_eq!(
        (sub["expressionType"].as_str(), sub["tagsSet"].as_array().map(Vec::len)),
        (Some("SQL92"), Some(0))
    );

    // A newer subscription that does not compile: its pulls are FILTER_DATA_NOT_EXIST, naming why.
    assert_eq!(call(&c, heartbeat_with("SQL92", "a >= ", 2)).code, code::SUCCESS);
    let r = call(&c, pull_req("cg", "T", 0, 0, 32, 0, 0, "").with_ext("subVersion", 2));
    assert_eq!(r.code, FILTER_DATA_NOT_EXIST, "{r:?}");
    assert!(r.remark.unwrap().contains("Your expression may be wrong"));
    // Fixed by the next one.
    assert_eq!(call(&c, heartbeat_with("SQL92", "a = 5", 3)).code, code::SUCCESS);
    assert_eq!(registered(0).2, vec![5]);
    b.shutdown();
}

/// A held SQL92 pull stays held while only messages it does not want arrive, and wakes as
/// soon as one it wants does (the long-poll thread evaluates each new record).
#[test]
fn a_held_sql92_pull_wakes_only_for_a_matching_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), true);
    let mut raw = Raw::connect(b.remoting_addrs()[0]);
    let held = pull_req("cg", "T", 0, 0, 32, FLAG_SUBSCRIPTION | FLAG_SUSPEND, 20_000, "a = 42")
        .with_ext("expressionType", "SQL92");
    raw.send(held, 1);
    // Parked: nothing is answered while nothing is there.
    assert!(raw.try_recv(Duration::from_millis(300)).is_none(), "answered with nothing in the queue");
    fill(&b, 0..5);
    assert!(
        raw.try_recv(Duration::from_millis(700)).is_none(),
        "the SQL92 pull was woken by messages it does not want"
    );
    let put_at = Instant::now();
    b.put_message_sync(&message(42)).unwrap();
    let resp = raw.recv();
    assert!(put_at.elapsed() < Duration::from_secs(5), "answered {:?} after the put", put_at.elapsed());
    assert_eq!((resp.opaque, resp.code), (1, code::SUCCESS), "{resp:?}");
    let records = decode_records(&resp.body);
    assert_eq!(records.len(), 1);
    assert_eq!((records[0].queue_offset, records[0].body.as_slice()), (5, &b"m42"[..]));
    assert_eq!(ext_i64(&resp, "nextBeginOffset"), 6);
    b.shutdown();
}

/// An embedding application reads with a compiled expression straight from the store, as a
/// broker's SQL92 pull does: the same messages, none counted against the limit unless kept.
#[test]
fn an_embedded_reader_filters_the_store_with_a_compiled_expression() {
    let dir = tempfile::tempdir().unwrap();
    // The store's own reads need no enablePropertyFilter: that key is about remote consumers.
    let b = master(dir.path(), false);
    fill(&b, 0..N);
    let red = rmqha_core::filter::SqlExpression::compile("color = 'red' AND a >= 60").unwrap();
    let r = b.store().get_messages_filtered("T", 0, 0, 5, 1 << 20, Some(&red));
    let offsets: Vec<i64> = r.messages().iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, vec![60, 63, 66, 69, 72]);
    assert_eq!(r.next_begin_offset, 73);
    let none = rmqha_core::filter::SqlExpression::compile("a = 'x'").unwrap();
    let r = b.store().get_messages_filtered("T", 0, 0, 5, 1 << 20, Some(&none));
    assert!(r.messages().is_empty());
    assert_eq!(r.status, rmqha_core::store::GetMessageStatus::NoMatchedMessage);
    b.shutdown();
}
