//! Delayed messages and retries at their edges: a delay offset ahead of its queue, a
//! delayed message addressed to SCHEDULE_TOPIC_XXXX itself, a client's retry past its limit.

mod common;
mod remote_common;

use std::time::Duration;

use common::{broker_config, wait_until};
use rmqha_core::message::SCHEDULE_TOPIC;
use rmqha_core::metadata::SubscriptionGroupConfig;
use rmqha_core::schedule::{REAL_QID, REAL_TOPIC};
use rmqha_core::{Broker, BrokerConfig, Message};

use remote_common::*;

const WAIT: Duration = Duration::from_secs(15);

fn config(dir: &std::path::Path) -> BrokerConfig {
    broker_config(
        dir,
        "ASYNC_MASTER",
        &[
            ("messageDelayLevel", "1s 1s 1s 1s 1s"),
            ("flushCommitLogThoroughInterval", "200"),
            ("autoCreateSubscriptionGroup", "false"),
        ],
    )
}

fn delayed(body: &str) -> Message {
    Message::new("Orders", body.as_bytes().to_vec()).with_queue(0).with_property("DELAY", "1")
}

/// A delay offset past the end of its level's queue (a slave promoted with the master's synced
/// offsets but a shorter log, a store whose queues were rebuilt or copied): RocketMQ's
/// scheduler starts again from the queue's end; messages delayed since must not be skipped.
#[test]
fn a_delay_offset_ahead_of_its_queue_strands_no_new_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path())).unwrap();
    let path = b.tables().delay_offsets().path();
    b.shutdown();
    std::fs::write(&path, r#"{"offsetTable":{1:3}}"#).unwrap();

    let b = Broker::start_master(config(dir.path())).unwrap();
    assert!(
        wait_until(WAIT, || b.delay_offset(1) == Some(0)),
        "the offset is brought back to the queue's end"
    );
    b.put_message_sync(&delayed("after-promotion")).unwrap();
    assert!(
        wait_until(WAIT, || b.get_messages("Orders", 0, 0, 8).messages().len() == 1),
        "a message delayed after the restart was never delivered"
    );
    b.shutdown();
}

/// A delayed message sent to SCHEDULE_TOPIC_XXXX itself: RocketMQ forbids sending there
/// (`TopicValidator.isNotAllowedSendTopic`). Delivered back into the schedule topic without
/// `DELAY`, its copy was due at once and delivered again, for ever, filling the disk.
#[test]
fn a_delayed_message_to_the_schedule_topic_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path())).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let mut req = send_v1(&Msg::new(SCHEDULE_TOPIC, b"loop").queue(0));
    req.set_ext("properties", props(&[("DELAY", "1")]));
    let r = call(&c, req);
    assert_eq!(r.code, code::NO_PERMISSION, "a send to SCHEDULE_TOPIC_XXXX: {r:?}");
    let e = b.put_message(&Message::new(SCHEDULE_TOPIC, b"loop".to_vec()).with_property("DELAY", "1"));
    assert!(e.is_err(), "a delayed put to SCHEDULE_TOPIC_XXXX was stored");
    assert_eq!(b.max_offset(), 0, "nothing stored");
    b.shutdown();
}

/// A scheduled record already in a store whose real topic is SCHEDULE_TOPIC_XXXX (stored by
/// an earlier version): the scheduler skips it rather than delivering it into its own queue
/// again and again.
#[test]
fn a_scheduled_record_for_the_schedule_topic_is_not_delivered_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path())).unwrap();
    let looping = Message::new(SCHEDULE_TOPIC, b"loop".to_vec())
        .with_queue(0)
        .with_property("DELAY", "1")
        .with_property(REAL_TOPIC, SCHEDULE_TOPIC)
        .with_property(REAL_QID, "0");
    b.store().put_message_sync(&looping).unwrap();
    b.put_message_sync(&delayed("after")).unwrap();
    assert!(wait_until(WAIT, || b.get_messages("Orders", 0, 0, 8).messages().len() == 1));
    assert!(wait_until(WAIT, || b.delay_offset(1) == Some(2)), "both passed");
    assert_eq!(b.queue_max_offset(SCHEDULE_TOPIC, 0), 2, "no copy delivered into the schedule topic");
    b.shutdown();
}

/// A client's own retry (its fallback when CONSUMER_SEND_MSG_BACK fails) carries
/// `DELAY = 3 + reconsumeTimes`; past its limit RocketMQ's handleRetryAndDLQ sends it to the
/// dead-letter topic with the delay cleared (`setDelayTimeLevel(0)`): there at once.
#[test]
fn a_retry_dead_lettered_by_the_send_path_is_not_delayed() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("messageDelayLevel", "1s 1s 1s 1s 20s"), ("autoCreateSubscriptionGroup", "false")],
    ))
    .unwrap();
    b.put_subscription_group(SubscriptionGroupConfig::new("G")).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let mut r = send_v1(&Msg::new("%RETRY%G", b"dead"));
    r.set_ext("reconsumeTimes", 2);
    r.set_ext("maxReconsumeTimes", 2);
    r.set_ext("properties", props(&[("DELAY", "5")]));
    let r = call(&c, r);
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let stored = b.message_by_id(r.ext("msgId").unwrap()).unwrap();
    assert_eq!(stored.topic, "%DLQ%G", "stored in the dead-letter topic at once, not {}", stored.topic);
    assert!(wait_until(WAIT, || b.get_messages("%DLQ%G", 0, 0, 4).messages().len() == 1));
    b.shutdown();
}

/// `Broker::set_delay_offset` on a master (an operator skipping a level's backlog, say) is
/// what the scheduler goes on from, and what the table holds after a restart: the running
/// scheduler ignored it, and wrote its own offsets over it at the stop.
#[test]
fn a_delay_offset_set_on_a_running_master_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("messageDelayLevel", "1s 2s"), ("flushCommitLogThoroughInterval", "200")],
    );
    let level2 = |body: &str| delayed(body).with_property("DELAY", "2");
    let b = Broker::start_master(cfg.clone()).unwrap();
    for i in 0..2 {
        b.put_message_sync(&level2(&format!("skipped-{i}"))).unwrap();
    }
    b.set_delay_offset(2, 2).unwrap();
    b.put_message_sync(&level2("delivered")).unwrap();
    // Due after the two skipped ones: once it is delivered, they would have been.
    assert!(wait_until(WAIT, || !b.get_messages("Orders", 0, 0, 8).messages().is_empty()));
    let bodies: Vec<Vec<u8>> =
        b.get_messages("Orders", 0, 0, 8).messages().into_iter().map(|m| m.body).collect();
    assert_eq!(bodies, vec![b"delivered".to_vec()], "the skipped messages were delivered");
    b.shutdown();
    let b = Broker::start_master(cfg).unwrap();
    assert_eq!(b.delay_offset(2), Some(3), "the offset set was overwritten at the stop");
    b.shutdown();
}

/// A batch whose header carries `DELAY`: RocketMQ 4.9's `putMessages` refuses it
/// (MESSAGE_ILLEGAL) whatever its size; a batch of one was stored delayed and answered with its
/// SCHEDULE_TOPIC_XXXX queue (the level's) rather than the queue it was sent to.
#[test]
fn a_delayed_batch_of_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(config(dir.path())).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let mut req = send_batch("Orders", 3, &[Msg::new("Orders", b"one")]);
    req.set_ext("i", props(&[("WAIT", "true"), ("DELAY", "2")]));
    let r = call(&c, req);
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert_eq!(b.max_offset(), 0, "nothing stored");
    b.shutdown();
}

/// A clean stop of a SYNC_MASTER whose delivery no slave holds yet: the scheduler recorded
/// every level's progress at the stop, before the store's final flush and whatever the
/// slaves held, so a failover to the slave (or a failed flush) lost a delivery the table
/// claimed. It is now made again after the restart, and recorded once a slave holds it.
#[test]
fn a_clean_stop_records_no_delivery_a_slave_does_not_hold() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let levels = ("messageDelayLevel", "1s");
    let cfg = broker_config(md.path(), "SYNC_MASTER", &[levels, ("flushCommitLogThoroughInterval", "200")]);
    let orders = |b: &Broker| b.get_messages("Orders", 0, 0, 8).messages();
    let m = Broker::start_master(cfg.clone()).unwrap();
    let r = m.put_message_sync(&delayed("unheld")).unwrap();
    assert_eq!(r.status, rmqha_core::PutStatus::SlaveNotAvailable);
    assert!(wait_until(WAIT, || orders(&m).len() == 1), "delivered");
    m.shutdown();
    assert!(m.stop_problems().is_empty(), "{:?}", m.stop_problems());

    let m = Broker::start_master(cfg).unwrap();
    assert_eq!(m.delay_offset(1), None, "recorded at the stop though no slave held the delivery");
    let slave = common::slave_of(sd.path(), &m, &[levels]);
    assert!(wait_until(WAIT, || m.delay_offset(1) == Some(1)), "recorded once a slave holds it");
    // Recorded once held by the slave; its ConsumeQueue entry comes from the dispatcher.
    assert!(wait_until(WAIT, || orders(&m).len() == 2), "the second copy dispatched");
    let bodies: Vec<Vec<u8>> = orders(&m).into_iter().map(|x| x.body).collect();
    assert_eq!(bodies, vec![b"unheld".to_vec(), b"unheld".to_vec()], "delivered again after the restart");
    assert!(wait_until(WAIT, || orders(&slave).len() == 2), "both copies on the slave");
    slave.shutdown();
    m.shutdown();
}

/// A backlog on one level (here after a stop) held up every later level: a round spent its
/// whole budget on the first level with messages due and started again from it, so level 2's
/// message waited for all of level 1's. The messages are stored as a broker stores them, by a
/// store with no scheduler, so that none is delivered before the restart.
#[test]
fn a_backlog_on_one_level_holds_up_no_other() {
    const BACKLOG: i64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let cfg = broker_config(
        dir.path(),
        "ASYNC_MASTER",
        &[("messageDelayLevel", "1s 1s"), ("flushCommitLogThoroughInterval", "200")],
    );
    let store = rmqha_core::MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    let scheduled = |m: Message| rmqha_core::schedule::to_schedule(&[m], 2).unwrap().unwrap().remove(0);
    let mut last_stored = 0;
    for i in 0..BACKLOG {
        let r = store.put_message_sync(&scheduled(delayed(&format!("level 1 #{i}")))).unwrap();
        last_stored = r.store_timestamp;
    }
    let level2 = Message::new("Orders", b"level 2".to_vec()).with_queue(1).with_property("DELAY", "2");
    let r = store.put_message_sync(&scheduled(level2)).unwrap();
    assert_eq!(
        (r.status, last_stored.max(r.store_timestamp)),
        (rmqha_core::PutStatus::PutOk, r.store_timestamp)
    );
    last_stored = r.store_timestamp;
    store.shutdown();
    drop(store);
    // Started once all of them are due: a backlog on level 1, one message on level 2.
    let now_ms =
        || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(wait_until(WAIT, || now_ms() > last_stored + 1100));
    let b = Broker::start_master(cfg).unwrap();
    assert!(
        wait_until(Duration::from_secs(60), || b.store().queue_max_offset("Orders", 0) == BACKLOG
            && b.store().queue_max_offset("Orders", 1) == 1),
        "everything delivered"
    );
    let level2 = b.get_messages("Orders", 1, 0, 1).messages()[0].phy_offset;
    let last_level1 = b.get_messages("Orders", 0, BACKLOG - 1, 1).messages()[0].phy_offset;
    assert!(level2 < last_level1, "level 2's message was delivered after all of level 1's backlog");
    b.shutdown();
}
