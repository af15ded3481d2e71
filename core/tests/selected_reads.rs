//! Reads through `Broker::get_messages_selected` with a `MessageSelector`, the embedders'
//! (and the bindings') filtered read: tag and SQL92 expressions, what is skipped not counting
//! toward `max_msgs`, the scan window's NO_MATCHED_MESSAGE, tags with the same hash code told
//! apart, and the same answers on a slave that replicated the queue.

mod common;

use std::sync::Arc;
use std::time::Duration;

use rmqha_core::filter::MessageSelector;
use rmqha_core::store::GetMessageStatus;
use rmqha_core::{Broker, Message};

const N: i64 = 2000;
const TIMEOUT: Duration = Duration::from_secs(20);

/// Message `i`: tagged `red`, `blue` or `green` in turn (every 100th `Aa`, whose Java hash
/// code is that of `BB`), with the property `price` = `i`.
fn tag_of(i: i64) -> &'static str {
    if i % 100 == 99 { "Aa" } else { ["red", "blue", "green"][(i % 3) as usize] }
}

fn master(dir: &std::path::Path) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[])).unwrap();
    b.create_topic("T", 1).unwrap();
    let msgs: Vec<Message> = (0..N)
        .map(|i| {
            Message::new("T", format!("m{i}").into_bytes())
                .with_tags(tag_of(i))
                .with_property("price", i.to_string())
        })
        .collect();
    for chunk in msgs.chunks(100) {
        b.put_messages(chunk).unwrap().wait();
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(b.queue_max_offset("T", 0), N);
    b
}

/// (status, next begin offset, queue offsets of the messages) of one read.
fn read(b: &Broker, offset: i64, max: i32, sel: &MessageSelector) -> (GetMessageStatus, i64, Vec<i64>) {
    let r = b.get_messages_selected("T", 0, offset, max, sel);
    let msgs = r.messages();
    for m in &msgs {
        assert_eq!(m.body, format!("m{}", m.queue_offset).into_bytes());
    }
    (r.status, r.next_begin_offset, msgs.iter().map(|m| m.queue_offset).collect())
}

/// Every queue offset a selector passes, read from the start in reads of `max` messages.
fn read_all(b: &Broker, max: i32, sel: &MessageSelector) -> Vec<i64> {
    let (mut offset, mut all) = (0, Vec::new());
    while offset < N {
        let (status, next, got) = read(b, offset, max, sel);
        assert!(got.len() <= max as usize, "{} > {max}", got.len());
        assert!(
            matches!(status, GetMessageStatus::Found | GetMessageStatus::NoMatchedMessage),
            "{status:?} at {offset}"
        );
        assert!(next > offset, "no progress at {offset}");
        all.extend(got);
        offset = next;
    }
    all
}

#[test]
fn tag_and_sql92_selectors_keep_only_what_they_pass() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());

    let red_or_green = MessageSelector::by_tag("red || green");
    let want: Vec<i64> = (0..N).filter(|&i| matches!(tag_of(i), "red" | "green")).collect();
    assert_eq!(read_all(&b, 32, &red_or_green), want);
    // A read fills `max_msgs` with matching messages: the skipped ones do not count.
    let (status, next, got) = read(&b, 0, 10, &red_or_green);
    assert_eq!(status, GetMessageStatus::Found);
    assert_eq!(got, want[..10]);
    assert_eq!(next, want[9] + 1);

    let sql = MessageSelector::by_sql("TAGS = 'blue' AND price BETWEEN 100 AND 400").unwrap();
    assert_eq!(sql.expression_type(), "SQL92");
    let want: Vec<i64> = (100..=400).filter(|&i| tag_of(i) == "blue").collect();
    assert_eq!(read_all(&b, 32, &sql), want);

    // `*` and an empty tag expression are the unfiltered read.
    let plain: Vec<i64> = (0..N).collect();
    assert_eq!(read_all(&b, 32, &MessageSelector::by_tag("*")), plain);
    assert_eq!(read_all(&b, 32, &MessageSelector::by_tag("")), plain);
}

#[test]
fn tags_with_the_same_hash_code_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    assert_eq!(rmqha_core::message::java_string_hash("Aa"), rmqha_core::message::java_string_hash("BB"));
    let want: Vec<i64> = (0..N).filter(|&i| tag_of(i) == "Aa").collect();
    assert_eq!(want.len(), 20);
    assert_eq!(read_all(&b, 32, &MessageSelector::by_tag("Aa")), want);
    assert!(read_all(&b, 32, &MessageSelector::by_tag("BB")).is_empty());
}

#[test]
fn a_window_without_a_match_answers_no_matched_message_and_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    // maxFilterMessageSize (16000 bytes) is 800 queue entries of 20 bytes.
    let nothing = MessageSelector::by_sql("price > 1999").unwrap();
    let (status, next, got) = read(&b, 0, 32, &nothing);
    assert_eq!((status, next, got), (GetMessageStatus::NoMatchedMessage, 800, vec![]));
    let (status, next, got) = read(&b, 800, 32, &nothing);
    assert_eq!((status, next, got), (GetMessageStatus::NoMatchedMessage, 1600, vec![]));
    // A property the messages lack makes the expression unknown: nothing passes.
    assert!(read_all(&b, 32, &MessageSelector::by_sql("color = 'red'").unwrap()).is_empty());
    // Past the end, the unfiltered read's answer.
    let (status, next, _) = read(&b, N, 32, &nothing);
    assert_eq!((status, next), (GetMessageStatus::OffsetOverflowOne, N));
}

#[test]
fn a_sql92_expression_that_does_not_compile_says_where() {
    let e = MessageSelector::by_sql("price >").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("price >"), "{text}");
    assert!(MessageSelector::by_sql("a = 1 b").is_err());
    assert!(MessageSelector::by_sql("").is_err());
}

#[test]
fn a_slave_answers_the_same_selected_reads() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"));
    let ha = format!("127.0.0.1:{}", m.ha_port());
    let s = Broker::start_slave(common::broker_config(
        &dir.path().join("s"),
        "SLAVE",
        &[("haMasterAddress", ha.as_str())],
    ))
    .unwrap();
    assert!(common::wait_until(TIMEOUT, || s.queue_max_offset("T", 0) == N));
    for sel in [
        MessageSelector::by_tag("green || Aa"),
        MessageSelector::by_sql("price < 500").unwrap(),
        MessageSelector::by_sql("TAGS IN ('red', 'blue') AND price >= 1500").unwrap(),
    ] {
        assert_eq!(read_all(&s, 16, &sel), read_all(&m, 16, &sel), "{}", sel.expression());
    }
    s.shutdown();
    m.shutdown();
}

#[test]
fn the_bindings_arguments_build_at_most_one_selector() {
    let all = MessageSelector::from_tags_or_sql(None, None).unwrap();
    assert!(all.is_all() && all.expression_type() == "TAG");
    let t = MessageSelector::from_tags_or_sql(Some("a || b"), None).unwrap();
    assert_eq!((t.expression_type(), t.expression()), ("TAG", "a || b"));
    let q = MessageSelector::from_tags_or_sql(None, Some("a > 1")).unwrap();
    assert_eq!((q.expression_type(), q.expression()), ("SQL92", "a > 1"));
    let both = MessageSelector::from_tags_or_sql(Some("a"), Some("a > 1")).unwrap_err();
    assert!(matches!(&both, rmqha_core::Error::InvalidArgument(m) if m.contains("not both")), "{both}");
    let bad = MessageSelector::from_tags_or_sql(None, Some("a >")).unwrap_err();
    assert!(matches!(&bad, rmqha_core::Error::InvalidArgument(m) if m.contains("'a >'")), "{bad}");
}
