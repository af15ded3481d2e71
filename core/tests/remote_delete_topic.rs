//! Deleting a topic (DELETE_TOPIC_IN_BROKER, as `mqadmin deleteTopic` sends it, and
//! `Broker::delete_topic`): its config, its ConsumeQueues and every group's offsets in it go,
//! so producers and consumers see the topic gone. Before, only the config went, and the
//! broker judged the topic by its remaining ConsumeQueues: sends and pulls went on as if
//! nothing had happened, and its queue files stayed on disk for good.

mod common;
mod remote_common;

use std::path::Path;
use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};
use serde_json::Value;

use remote_common::*;

fn master(dir: &Path) -> Arc<Broker> {
    // Without auto-creation, a send to a topic that does not exist is refused.
    Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", &[("autoCreateTopicEnable", "false")]))
        .unwrap()
}

fn delete(c: &RemotingClient, topic: &str) -> RemotingCommand {
    call(c, RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER).with_ext("topic", topic))
}

fn commit(c: &RemotingClient, group: &str, topic: &str, offset: i64) {
    let r = call(
        c,
        RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
            .with_ext("consumerGroup", group)
            .with_ext("topic", topic)
            .with_ext("queueId", 0)
            .with_ext("commitOffset", offset),
    );
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
}

fn offsets_on_disk(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("config").join("consumerOffset.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["offsetTable"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn a_deleted_topic_is_gone_for_producers_consumers_and_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    for t in ["Gone", "Kept"] {
        b.create_topic(t, 2).unwrap();
        for i in 0..3 {
            let r = call(&c, send_v2(&Msg::new(t, format!("{t}{i}").as_bytes())));
            assert_eq!(r.code, code::SUCCESS, "{r:?}");
        }
    }
    assert!(b.store().wait_dispatched(TIMEOUT));
    commit(&c, "cg", "Gone", 2);
    commit(&c, "cg", "Kept", 1);
    let queues = dir.path().join("consumequeue").join("Gone");
    assert!(queues.is_dir());

    let r = delete(&c, "Gone");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(!queues.exists(), "the topic's ConsumeQueue directory is deleted");
    assert!(b.topic_config("Gone").is_none());
    assert!(b.store().queue_ids("Gone").is_empty());
    assert_eq!(b.consumer_offset("cg", "Gone", 0), -1);
    assert_eq!(offsets_on_disk(dir.path()), vec!["Kept@cg".to_string()]);
    // Producers and consumers find no topic.
    let r = call(&c, send_v2(&Msg::new("Gone", b"late")));
    assert_eq!(r.code, code::TOPIC_NOT_EXIST, "{r:?}");
    let p = pull(&c, "Gone", 0, 0, 32);
    assert_eq!(p.code, code::TOPIC_NOT_EXIST, "{p:?}");
    // The other topic is untouched.
    assert_eq!(pull(&c, "Kept", 0, 0, 32).code, code::SUCCESS);
    assert_eq!(b.consumer_offset("cg", "Kept", 0), 1);

    // Made again, the topic takes messages and serves them.
    b.create_topic("Gone", 2).unwrap();
    let r = call(&c, send_v2(&Msg::new("Gone", b"again").queue(0)));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let at = ext_i64(&r, "queueOffset");
    assert_eq!(at, 0, "a deleted topic's queues start again at 0, as in RocketMQ");
    assert!(b.store().wait_dispatched(TIMEOUT));
    let got = b.store().get_messages("Gone", 0, at, 4);
    assert_eq!(got.messages().len(), 1);
    assert_eq!(got.messages()[0].body, b"again");
    // Deleting again, or a topic that never was, succeeds and changes nothing else.
    assert_eq!(delete(&c, "Gone").code, code::SUCCESS);
    assert_eq!(delete(&c, "Never").code, code::SUCCESS);
    assert!(b.topic_config("Kept").is_some());
    assert!(!queues.exists(), "deleted again");
    b.shutdown();
    assert!(!queues.exists(), "not made again at shutdown");
    drop(b);
    // Nothing comes back at restart.
    let b = master(dir.path());
    assert!(b.topic_config("Gone").is_none());
    assert!(b.store().queue_ids("Gone").is_empty());
    assert_eq!(b.store().queue_ids("Kept"), vec![0]);
    b.shutdown();
    drop(b);
    // Nor after a crash, when recovery walks the log and rebuilds what queues lack.
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    let b = master(dir.path());
    assert!(!b.store().recovery().last_exit_ok, "recovered as after a crash");
    assert!(b.store().queue_ids("Gone").is_empty());
    assert_eq!(b.store().get_messages("Kept", 0, 0, 8).messages().len(), 3);
    b.shutdown();
}

#[test]
fn system_topics_and_slaves_refuse_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    let c = client(b.remoting_addrs()[0]);
    for t in ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_anything"] {
        let r = delete(&c, t);
        assert_eq!(r.code, code::SYSTEM_ERROR, "{t}: {r:?}");
        assert!(r.remark.as_deref().unwrap_or("").contains("conflict with system topic"), "{r:?}");
    }
    assert!(b.topic_config("TBW102").is_some());
    assert_eq!(delete(&c, "").code, code::SYSTEM_ERROR);

    let sdir = tempfile::tempdir().unwrap();
    let s = Broker::start_slave(common::broker_config(
        sdir.path(),
        "SLAVE",
        &[("haMasterAddress", "127.0.0.1:1"), ("masterAddress", "")],
    ))
    .unwrap();
    let sc = client(s.remoting_addrs()[0]);
    let r = delete(&sc, "Any");
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("SLAVE"), "{r:?}");
    s.shutdown();
    b.shutdown();
}

/// A crash between recording a deletion and removing the queue files: the next start
/// finishes the deletion (a queue made again after the deletion would hold units past it,
/// and stays).
#[test]
fn a_deletion_cut_short_by_a_crash_is_finished_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::store_config(dir.path(), &[]);
    let store = rmqha_core::MessageStore::open(cfg.clone()).unwrap();
    store.start().unwrap();
    for i in 0..3 {
        store.put_message_sync(&common::message("Half", 0, i, 10)).unwrap();
    }
    let end = store.max_offset();
    // A topic deleted at the same point and made again since: its queue stays.
    for i in 0..2 {
        store.put_message_sync(&common::message("Again", 0, i, 10)).unwrap();
    }
    // More log than recovery walks (64 KiB files), so that a wrongly removed queue would not
    // be rebuilt from it.
    for i in 0..400 {
        store.put_message_sync(&common::message("Filler", 0, i, 1000)).unwrap();
    }
    assert!(store.wait_dispatched(TIMEOUT));
    store.shutdown();
    drop(store);
    let deleted = format!("{{\"Half\": {end}, \"Again\": {end}}}");
    std::fs::write(dir.path().join("deletedTopics.json"), deleted).unwrap();
    let store = rmqha_core::MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert!(store.queue_ids("Half").is_empty());
    assert!(!dir.path().join("consumequeue").join("Half").exists());
    assert_eq!(store.get_messages("Again", 0, 0, 4).messages().len(), 2, "units past its deletion stay");
    store.shutdown();
}

fn bodies(b: &Broker, topic: &str) -> Vec<String> {
    b.store()
        .get_messages(topic, 0, 0, 32)
        .messages()
        .into_iter()
        .map(|m| String::from_utf8(m.body).unwrap())
        .collect()
}

/// A slave deletes what its master deleted (the master's topic answer carries its deletions).
/// Before, the slave kept the deleted topic's queues, and when the master made the topic
/// again, its new records (queue offsets from 0 again) fell behind the old queue's end and
/// got no units on the slave: consumers reading from it never saw them.
#[test]
fn a_slave_deletes_what_its_master_deleted_and_queues_the_topic_made_again() {
    let mdir = tempfile::tempdir().unwrap();
    let m = Broker::start_master(common::broker_config(mdir.path(), "ASYNC_MASTER", &[])).unwrap();
    let sdir = tempfile::tempdir().unwrap();
    let master_addr = format!("127.0.0.1:{}", m.listen_port());
    let s = common::slave_of(sdir.path(), &m, &[("masterAddress", &master_addr)]);
    let put = |topic: &str, body: String| {
        let r =
            m.put_message_sync(&rmqha_core::Message::new(topic, body.into_bytes()).with_queue(0)).unwrap();
        assert_eq!(r.status, rmqha_core::PutStatus::PutOk);
    };
    for t in ["Again", "Kept"] {
        m.create_topic(t, 1).unwrap();
    }
    for i in 0..5 {
        put("Again", format!("old{i}"));
    }
    for i in 0..2 {
        put("Kept", format!("kept{i}"));
    }
    let caught_up = || s.store().max_offset() == m.store().max_offset() && s.store().wait_dispatched(TIMEOUT);
    assert!(common::wait_until(TIMEOUT, caught_up));
    assert_eq!(s.store().queue_max_offset("Again", 0), 5);
    // A group's offsets, mirrored by the slave.
    assert!(common::wait_until(TIMEOUT, || m.queue_max_offset("Again", 0) == 5
        && m.queue_max_offset("Kept", 0) == 2));
    m.commit_consumer_offset("G", "Again", 0, 5).unwrap();
    m.commit_consumer_offset("G", "Kept", 0, 2).unwrap();
    s.sync_config_now().unwrap();
    assert_eq!(s.consumer_offset("G", "Again", 0), 5);

    m.delete_topic("Again").unwrap();
    m.create_topic("Again", 1).unwrap();
    for i in 0..3 {
        put("Again", format!("new{i}"));
    }
    let expected = ["new0", "new1", "new2"];
    assert!(common::wait_until(TIMEOUT, || bodies(&m, "Again") == expected));
    assert!(common::wait_until(TIMEOUT, caught_up));
    // The group reads the topic made again from its start, on the master.
    m.commit_consumer_offset("G", "Again", 0, 1).unwrap();

    s.sync_config_now().unwrap();
    // Its offset on the slave follows: the old offset went with the deletion, and the larger
    // of the two (the old 5) did not stay ahead of the new queue.
    assert_eq!(s.consumer_offset("G", "Again", 0), 1);
    assert_eq!(s.consumer_offset("G", "Kept", 0), 2, "another topic's offset stays");
    assert!(
        common::wait_until(TIMEOUT, || s.store().wait_dispatched(TIMEOUT) && bodies(&s, "Again") == expected),
        "the slave's queue of the topic made again holds {:?}",
        bodies(&s, "Again")
    );
    assert_eq!(s.store().queue_max_offset("Again", 0), 3);
    assert_eq!(bodies(&s, "Kept"), ["kept0", "kept1"]);
    let deleted = std::fs::read_to_string(sdir.path().join("deletedTopics.json")).unwrap();
    assert!(deleted.contains("\"Again\""), "{deleted}");
    // Taken once: the next sync changes nothing.
    s.sync_config_now().unwrap();
    assert_eq!(bodies(&s, "Again"), expected);
    s.shutdown();
    m.shutdown();
}

/// A topic name that is a path step (`..`, `.`, with a `/`) names no topic: deleting it over
/// the wire, or through the API, must not remove anything. Before, DELETE_TOPIC_IN_BROKER
/// with topic `..` removed `consumequeue/..`: the whole store directory, CommitLog and all.
#[test]
fn a_topic_name_that_is_a_path_step_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    let b = master(&root);
    let c = client(b.remoting_addrs()[0]);
    b.create_topic("Kept", 1).unwrap();
    let r = call(&c, send_v2(&Msg::new("Kept", b"payload")));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(b.store().wait_dispatched(TIMEOUT));
    // The files there now (the allocator may add the next one meanwhile).
    let log_files: Vec<_> =
        std::fs::read_dir(root.join("commitlog")).unwrap().map(|e| e.unwrap().path()).collect();
    let intact = || log_files.iter().all(|f| f.is_file());
    for topic in ["..", ".", "../consumequeue", "Kept/..", "/"] {
        let r = delete(&c, topic);
        assert_ne!(r.code, code::SUCCESS, "DELETE_TOPIC_IN_BROKER {topic:?} answered {r:?}");
        let deleted = b.delete_topic(topic);
        assert!(intact(), "after {topic:?}");
        assert!(deleted.is_err(), "delete_topic({topic:?})");
        // The store refuses it too, and a master's deletion of it is not taken.
        assert!(b.store().delete_topic(topic).is_err(), "MessageStore::delete_topic({topic:?})");
        let taken =
            b.store().apply_master_deletions(&[(topic.to_string(), 0u64)].into(), &mut |_| {}).unwrap();
        assert_eq!(taken, 0, "{topic:?}");
        assert!(intact(), "after {topic:?}");
        assert!(root.join("consumequeue").join("Kept").is_dir(), "after {topic:?}");
    }
    assert_eq!(pull(&c, "Kept", 0, 0, 32).code, code::SUCCESS);
    assert_eq!(b.store().get_messages("Kept", 0, 0, 32).messages().len(), 1);
    // Nor is such a name, or any other no message could be put to, made a topic.
    for topic in ["../x", "a b", "", &"x".repeat(128)] {
        let err = b.create_topic(topic, 1).unwrap_err().to_string();
        assert!(err.contains("topic"), "{topic:?}: {err}");
        assert!(b.topic_config(topic).is_none());
    }
}

/// A master's deletion below an offset past `i64::MAX` (from a sync answer) read as a negative
/// offset: it was taken and hid every record of the topic, at any offset, for good. It is
/// not taken now, and later records of the topic get their units.
#[test]
fn a_deletion_offset_past_the_largest_offset_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.put_message_sync(&rmqha_core::Message::new("T", b"before".to_vec())).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    let taken = b.store().apply_master_deletions(&[("T".to_string(), u64::MAX)].into(), &mut |_| {}).unwrap();
    assert_eq!(taken, 0);
    b.put_message_sync(&rmqha_core::Message::new("T", b"after".to_vec())).unwrap();
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(b.store().get_messages("T", 0, 0, 32).messages().len(), 2);
    assert!(b.store().deleted_topics().is_empty());
}
