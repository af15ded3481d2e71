//! CONSUMER_SEND_MSG_BACK (36): a message handed back by a consumer comes back in the group's
//! retry topic after its delay level, with one more reconsume time, its first topic and id;
//! past `maxReconsumeTimes` (or with a negative level) it goes to the dead-letter topic at once.

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::Duration;

use common::wait_until;
use rmqha_core::metadata::SubscriptionGroupConfig;
use rmqha_core::remoting::{RemotingCommand, request_code};
use rmqha_core::{Broker, StoredMessage};

use remote_common::*;

const TIMEOUT: Duration = Duration::from_secs(15);

fn master(dir: &std::path::Path) -> Arc<Broker> {
    // Every level a second, so that a retry (level 3 and up) comes back within the test.
    let extra = [("messageDelayLevel", "1s 1s 1s 1s 1s"), ("autoCreateSubscriptionGroup", "false")];
    Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &extra)).unwrap()
}

fn send_back(offset: i64, group: &str, delay_level: i32, max: Option<i32>) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK)
        .with_ext("offset", offset)
        .with_ext("group", group)
        .with_ext("delayLevel", delay_level)
        .with_ext("originTopic", "T")
        .with_ext("unitMode", false);
    if let Some(m) = max {
        r = r.with_ext("maxReconsumeTimes", m);
    }
    r
}

/// The messages of `topic` queue 0 once there are `n`.
fn wait_for(b: &Broker, topic: &str, n: usize) -> Vec<StoredMessage> {
    assert!(
        wait_until(TIMEOUT, || b.get_messages(topic, 0, 0, 32).messages().len() >= n),
        "{n} messages in {topic}"
    );
    b.get_messages(topic, 0, 0, 32).messages()
}

#[test]
fn a_handed_back_message_is_retried_then_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.put_subscription_group(SubscriptionGroupConfig::new("G")).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let sent = call(&c, send_v1(&Msg::new("T", b"payload").tags("TagA").keys("k1")));
    assert_eq!(sent.code, code::SUCCESS, "{sent:?}");
    let first_id = sent.ext("msgId").unwrap().to_string();
    let offset = msg_id_offset(&first_id);

    // First hand-back: level 3 (0 leaves it to the broker), into %RETRY%G.
    let r = call(&c, send_back(offset, "G", 0, Some(2)));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(b.topic_config("%RETRY%G").is_some(), "the retry topic is created");
    let retry = wait_for(&b, "%RETRY%G", 1);
    let m = &retry[0];
    assert_eq!((m.body.as_slice(), m.reconsume_times), (&b"payload"[..], 1));
    assert_eq!(m.tags.as_deref(), Some("TagA"));
    assert_eq!(m.property("RETRY_TOPIC"), Some("T"));
    assert_eq!(m.property("ORIGIN_MESSAGE_ID"), Some(first_id.as_str()));
    assert_eq!(m.property("DELAY"), None, "delivered, no longer delayed");
    let scheduled = b.message_by_id(&m.msg_id).unwrap();
    assert_eq!(scheduled.topic, "%RETRY%G");

    // Second: from the retry copy, consumed once, so once more.
    assert_eq!(call(&c, send_back(m.phy_offset, "G", 0, Some(2))).code, code::SUCCESS);
    let retry = wait_for(&b, "%RETRY%G", 2);
    let m2 = &retry[1];
    assert_eq!(m2.reconsume_times, 2);
    assert_eq!(m2.property("ORIGIN_MESSAGE_ID"), Some(first_id.as_str()), "the first id, kept");
    assert_eq!(m2.property("RETRY_TOPIC"), Some("T"));

    // Third: consumed maxReconsumeTimes (2) times: dead-lettered, undelayed.
    assert_eq!(call(&c, send_back(m2.phy_offset, "G", 0, Some(2))).code, code::SUCCESS);
    let dlq = wait_for(&b, "%DLQ%G", 1);
    assert_eq!((dlq[0].body.as_slice(), dlq[0].reconsume_times), (&b"payload"[..], 3));
    assert_eq!(dlq[0].property("ORIGIN_MESSAGE_ID"), Some(first_id.as_str()));
    assert_eq!(b.message_by_id(&dlq[0].msg_id).unwrap().topic, "%DLQ%G", "stored there directly");
    assert_eq!(b.get_messages("%RETRY%G", 0, 0, 32).messages().len(), 2);

    // A negative level dead-letters at once; without maxReconsumeTimes the group's 16 applies.
    assert_eq!(call(&c, send_back(offset, "G", -1, None)).code, code::SUCCESS);
    assert_eq!(wait_for(&b, "%DLQ%G", 2)[1].reconsume_times, 1);
    b.shutdown();
}

#[test]
fn bad_hand_backs_are_answered_with_rocketmqs_codes() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.put_subscription_group(SubscriptionGroupConfig::new("G")).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let sent = call(&c, send_v1(&Msg::new("T", b"x")));
    let offset = msg_id_offset(sent.ext("msgId").unwrap());
    let before = b.max_offset();
    let r = call(&c, send_back(offset, "Nobody", 0, None));
    assert_eq!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");
    let r = call(&c, send_back(offset + 1, "G", 0, None));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("look message by offset failed"), "{r:?}");
    let mut r = send_back(offset, "G", 0, None);
    r.ext_fields.remove("delayLevel");
    let r = call(&c, r);
    assert_eq!(r.code, code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or("").contains("delayLevel"), "{r:?}");
    assert_eq!(b.max_offset(), before, "nothing stored");
    b.shutdown();
}

/// A client's own fallback, sending to the retry topic (Java `handleRetryAndDLQ`): a message
/// consumed `maxReconsumeTimes` times goes to the dead-letter topic instead.
#[test]
fn a_retry_sent_by_the_client_past_its_limit_is_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.put_subscription_group(SubscriptionGroupConfig::new("G")).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let retry = |reconsume: i32, group: &str| {
        let mut r = send_v1(&Msg::new(&format!("%RETRY%{group}"), format!("r{reconsume}").as_bytes()));
        r.set_ext("reconsumeTimes", reconsume);
        r.set_ext("maxReconsumeTimes", 2);
        call(&c, r)
    };
    assert_eq!(retry(1, "G").code, code::SUCCESS);
    assert_eq!(retry(2, "G").code, code::SUCCESS);
    assert_eq!(wait_for(&b, "%RETRY%G", 1)[0].body, b"r1");
    let dlq = wait_for(&b, "%DLQ%G", 1);
    assert_eq!((dlq[0].body.as_slice(), dlq[0].reconsume_times), (&b"r2"[..], 2));
    assert_eq!(b.get_messages("%RETRY%G", 0, 0, 32).messages().len(), 1);
    let r = retry(0, "Nobody");
    assert_eq!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");
    b.shutdown();
}

/// A remote delayed send is answered with the queue it was sent to, as RocketMQ answers it,
/// though its record is in SCHEDULE_TOPIC_XXXX until delivered there.
#[test]
fn a_remote_delayed_send_is_answered_with_its_own_queue() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    let mut req = send_v1(&Msg::new("T", b"later").queue(3));
    req.set_ext("properties", props(&[("DELAY", "1"), ("WAIT", "true")]));
    let r = call(&c, req);
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(ext_i64(&r, "queueId"), 3);
    let scheduled = b.message_by_id(r.ext("msgId").unwrap()).unwrap();
    assert_eq!((scheduled.topic.as_str(), scheduled.queue_id), ("SCHEDULE_TOPIC_XXXX", 0));
    assert!(wait_until(TIMEOUT, || b.get_messages("T", 3, 0, 4).messages().len() == 1));
    b.shutdown();
}

/// A hand-back names the message by log offset and its topic in `originTopic`, which the ACL
/// checks: a message of another topic must not be copied into the group's retry topic, where
/// the sender could consume what it may not read (a half message, a denied topic's).
#[test]
fn a_hand_back_of_a_message_of_another_topic_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.put_subscription_group(SubscriptionGroupConfig::new("G")).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let sent = call(&c, send_v1(&Msg::new("Secret", b"not yours")));
    assert_eq!(sent.code, code::SUCCESS, "{sent:?}");
    let offset = msg_id_offset(sent.ext("msgId").unwrap());
    let before = b.max_offset();
    // `send_back` says originTopic "T".
    let r = call(&c, send_back(offset, "G", 0, None));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert_eq!(b.max_offset(), before, "a message of another topic was handed back");
    // Without originTopic (the stock C++ client 1.x sends none), a message of one of the
    // broker's own topics is never handed back: here a delayed message, still in
    // SCHEDULE_TOPIC_XXXX.
    let delayed = b
        .put_message_sync(&rmqha_core::Message::new("Secret", b"later".to_vec()).with_property("DELAY", "5"))
        .unwrap();
    let before = b.max_offset();
    let mut r = send_back(delayed.phy_offset, "G", 0, None);
    r.ext_fields.remove("originTopic");
    assert_eq!(call(&c, r).code, code::SYSTEM_ERROR);
    assert_eq!(b.max_offset(), before, "a SCHEDULE_TOPIC_XXXX record was handed back");
    // Its own topic: taken.
    let mut r = send_back(offset, "G", 0, None);
    r.set_ext("originTopic", "Secret");
    assert_eq!(call(&c, r).code, code::SUCCESS);
    b.shutdown();
}
