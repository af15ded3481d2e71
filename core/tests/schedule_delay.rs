//! Delayed messages (`DELAY`): stored in SCHEDULE_TOPIC_XXXX with their delivery time as the
//! unit's tags code, delivered by the master's scheduler to their own topic and queue once
//! due, exactly once across a clean restart, and replicated (not delivered again) by a slave.

mod common;

use std::time::Duration;

use common::{broker_config, slave_of, wait_until};
use rmqha_core::message::SCHEDULE_TOPIC;
use rmqha_core::schedule::{REAL_QID, REAL_TOPIC};
use rmqha_core::{Broker, BrokerConfig, Message, PutStatus, StoredMessage};

const TIMEOUT: Duration = Duration::from_secs(15);
/// Short levels, so that a test waits a second or two.
const LEVELS: (&str, &str) = ("messageDelayLevel", "1s 2s 3s");

/// A level's offset is recorded once the delivery is flushed: with ASYNC_FLUSH and little
/// traffic, at the next thorough flush (10 s by default).
fn config(dir: &std::path::Path, role: &str) -> BrokerConfig {
    broker_config(dir, role, &[LEVELS, ("flushCommitLogThoroughInterval", "200")])
}

fn delayed(body: &str, level: &str) -> Message {
    Message::new("Orders", body.as_bytes().to_vec())
        .with_queue(2)
        .with_tags("TagA")
        .with_keys(&[format!("key-{body}")])
        .with_property("UNIQ_KEY", format!("UNIQ-{body}"))
        .with_property("DELAY", level)
}

/// Every message of Orders queue 2.
fn delivered(b: &Broker) -> Vec<StoredMessage> {
    b.get_messages("Orders", 2, 0, 32).messages()
}

#[test]
fn a_delayed_message_reaches_its_queue_once_due() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    let r = b.put_message_sync(&delayed("d1", "1")).unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    // Stored in level 1's queue, with its real topic and queue, and dispatched there with its
    // delivery time as tags code.
    let scheduled = b.message_by_id(&r.msg_id()).unwrap();
    assert_eq!((scheduled.topic.as_str(), scheduled.queue_id), (SCHEDULE_TOPIC, 0));
    assert_eq!(scheduled.property(REAL_TOPIC), Some("Orders"));
    assert_eq!(scheduled.property(REAL_QID), Some("2"));
    assert!(b.store().wait_dispatched(TIMEOUT));
    let unit = b.store().consume_queues().find(SCHEDULE_TOPIC, 0).unwrap().get(0).unwrap();
    assert_eq!(unit.tags_code, scheduled.store_timestamp + 1000);

    assert!(wait_until(TIMEOUT, || delivered(&b).len() == 1), "delivered");
    let got = &delivered(&b)[0];
    assert!(
        got.store_timestamp >= scheduled.store_timestamp + 1000,
        "not before its delay: stored {} then delivered {}",
        scheduled.store_timestamp,
        got.store_timestamp
    );
    assert_eq!((got.body.as_slice(), got.queue_offset), (&b"d1"[..], 0));
    assert_eq!(got.tags.as_deref(), Some("TagA"));
    assert_eq!(got.keys, vec!["key-d1".to_string()]);
    assert_eq!(got.property("UNIQ_KEY"), Some("UNIQ-d1"), "consumers can tell a copy by its id");
    assert_eq!(got.property("DELAY"), None);
    assert_eq!(got.property(REAL_TOPIC), Some("Orders"), "kept, as RocketMQ keeps it");
    // Found by key in its own topic.
    assert!(wait_until(TIMEOUT, || !b.query_by_key("Orders", "key-d1", 4).is_empty()));
    // Level 1's offset is recorded once the delivery is flushed.
    assert!(wait_until(TIMEOUT, || b.tables().delay_offsets().offset(1) == Some(1)));

    // A level above the last counts as the last; 0 is no delay.
    let r = b.put_message_sync(&delayed("d9", "9")).unwrap();
    let s = b.message_by_id(&r.msg_id()).unwrap();
    assert_eq!((s.topic.as_str(), s.queue_id, s.property("DELAY")), (SCHEDULE_TOPIC, 2, Some("3")));
    let r = b.put_message_sync(&delayed("d0", "0")).unwrap();
    assert_eq!(b.message_by_id(&r.msg_id()).unwrap().topic, "Orders");
    // A delay that is no number, or a delayed message in a batch, is refused.
    let e = b.put_message(&delayed("bad", "later")).unwrap_err();
    assert!(e.to_string().contains("later"), "{e}");
    let e = b.put_messages(&[delayed("b1", "1"), Message::new("Orders", b"b2".to_vec())]).unwrap_err();
    assert!(e.to_string().contains("batch"), "{e}");
    b.shutdown();
}

#[test]
fn a_clean_restart_neither_loses_nor_repeats_a_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    b.put_message_sync(&delayed("first", "1")).unwrap();
    assert!(wait_until(TIMEOUT, || delivered(&b).len() == 1));
    // Stopped before the second is due.
    b.put_message_sync(&delayed("second", "2")).unwrap();
    b.shutdown();
    assert!(b.stop_problems().is_empty(), "{:?}", b.stop_problems());

    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    assert_eq!(b.tables().delay_offsets().offset(1), Some(1), "level 1 recorded at the stop");
    assert!(wait_until(TIMEOUT, || delivered(&b).len() >= 2), "the second is delivered after the restart");
    // A third, after the restart: once it is in, the scheduler has passed level 1 again.
    b.put_message_sync(&delayed("third", "1")).unwrap();
    assert!(wait_until(TIMEOUT, || delivered(&b).len() >= 3));
    let bodies: Vec<String> =
        delivered(&b).iter().map(|m| String::from_utf8(m.body.clone()).unwrap()).collect();
    assert_eq!(bodies, ["first", "second", "third"], "each exactly once");
    b.shutdown();
}

#[test]
fn a_slave_replicates_the_delivery_and_makes_none_itself() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(config(md.path(), "SYNC_MASTER")).unwrap();
    // Before any slave: stored, answered SLAVE_NOT_AVAILABLE, and delivered once (RocketMQ
    // 4.9 puts such a delivery again every 10 s).
    let r = master.put_message_sync(&delayed("replicated", "1")).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable);
    assert!(wait_until(TIMEOUT, || delivered(&master).len() == 1));
    let end = master.max_offset();
    assert!(wait_until(TIMEOUT, || master.store().flushed_offset() >= end));
    // Flushed, but no slave holds it: a failover now would lose it, so level 1 is not
    // recorded as delivered.
    assert!(
        !wait_until(Duration::from_secs(1), || master.tables().delay_offsets().offset(1).is_some()),
        "recorded before a slave held the delivery"
    );
    let slave = slave_of(sd.path(), &master, &[LEVELS]);
    assert!(wait_until(TIMEOUT, || master.offsets().slaves.iter().any(|s| s.transferring)));
    assert!(wait_until(TIMEOUT, || delivered(&slave).len() == 1), "the delivery reaches the slave");
    // The slave's copy is the master's record, byte for byte; its own scheduler does not run.
    let (m, s) = (&delivered(&master)[0], &delivered(&slave)[0]);
    assert_eq!(m.phy_offset, s.phy_offset);
    assert_eq!(
        master.store().record_at(m.phy_offset).unwrap().bytes(),
        slave.store().record_at(s.phy_offset).unwrap().bytes()
    );
    // The master records level 1 once its slave holds the delivery.
    assert!(wait_until(TIMEOUT, || master.tables().delay_offsets().offset(1) == Some(1)));
    assert!(wait_until(TIMEOUT, || slave.max_offset() == end));
    assert_eq!(delivered(&slave).len(), 1);
    assert_eq!(delivered(&master).len(), 1, "delivered once");
    slave.shutdown();
    master.shutdown();
}

#[test]
fn a_delayed_message_that_cannot_be_delivered_holds_up_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    // Written straight into level 1's queue (as a RocketMQ store or a damaged record might
    // hold it): its real topic is no valid topic name, so no put can deliver it.
    let bad = Message::new(SCHEDULE_TOPIC, b"nowhere".to_vec())
        .with_property("DELAY", "1")
        .with_property(REAL_TOPIC, "no such topic!")
        .with_property(REAL_QID, "0");
    b.store().put_message_sync(&bad).unwrap();
    b.put_message_sync(&delayed("after", "1")).unwrap();
    assert!(wait_until(TIMEOUT, || delivered(&b).len() == 1), "the next one is delivered");
    assert!(wait_until(TIMEOUT, || b.tables().delay_offsets().offset(1) == Some(2)), "both passed");
    b.shutdown();
}

#[test]
fn the_metrics_count_the_delayed_messages_of_each_level() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    b.put_message_sync(&delayed("slow", "3")).unwrap();
    b.put_message_sync(&delayed("fast", "1")).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    let gauge = |level: i32| {
        let text = b.metrics();
        let key = format!("rmqha_delayed_messages{{level=\"{level}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(key.as_str()).map(|v| v.parse::<i64>().unwrap()))
    };
    assert_eq!(gauge(3), Some(1));
    assert_eq!(gauge(2), None, "a level never used has no queue and no sample");
    assert!(wait_until(TIMEOUT, || gauge(1) == Some(0)), "the level 1 message delivered and recorded");
    assert_eq!(gauge(3), Some(1), "the level 3 message still waits");
    assert!(wait_until(TIMEOUT, || gauge(3) == Some(0)));
    b.shutdown();
}

/// A delayed message is checked as an undelayed one is, before it is moved into
/// SCHEDULE_TOPIC_XXXX: to a topic no put could take, or a negative queue, it is refused
/// MESSAGE_ILLEGAL and nothing is stored. Before, it was answered PUT_OK and dropped with a
/// warning when due (found by an audit).
#[test]
fn a_delayed_message_to_an_invalid_topic_or_queue_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path(), "ASYNC_MASTER")).unwrap();
    let before = b.max_offset();
    for m in [
        Message::new("bad topic", b"x".to_vec()).with_property("DELAY", "1"),
        Message::new("x".repeat(128), b"x".to_vec()).with_property("DELAY", "1"),
        Message::new("Orders", b"x".to_vec()).with_queue(-3).with_property("DELAY", "1"),
    ] {
        match b.put_message_sync(&m) {
            Err(rmqha_core::Error::PutFailed { status, reason }) => {
                assert_eq!(status, PutStatus::MessageIllegal, "{reason}")
            }
            other => panic!("{:?} to {:?}: {other:?}", m.queue_id, &m.topic[..m.topic.len().min(20)]),
        }
    }
    assert_eq!(b.max_offset(), before, "nothing stored");
    b.shutdown();
}
