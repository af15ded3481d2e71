//! Transactional messages as RocketMQ 4.9 serves them: a TRAN_MSG send is stored as a half
//! message and is not consumable; END_TRANSACTION commits it into its real topic (with the
//! COMMIT type, on a SYNC_MASTER held by the slave) or rolls it back, each recorded by an op
//! message; an END_TRANSACTION that names no half message of its producer group changes
//! nothing; a slave refuses it. A master checks undecided half messages back with a live
//! producer of their group (CHECK_TRANSACTION_STATE on the producer's connection), discards
//! them past `transactionCheckMax`, and keeps them across a restart.

mod common;
mod remote_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wait_until;
use rmqha_core::remoting::{FLAG_ONEWAY, RemotingClient, RemotingCommand, request_code};
use rmqha_core::{Broker, StoredMessage};

use remote_common::*;

const HALF: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
const OP: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
const COMMIT: i32 = 8;
const ROLLBACK: i32 = 12;
const RESUME: i32 = request_code::RESUME_CHECK_HALF_MESSAGE;

/// Checks every 200 ms, of transactions older than 300 ms; every flush writes what is there,
/// so the check cursors are recorded soon after each round.
const CHECK_SOON: &[(&str, &str)] =
    &[("transactionCheckInterval", "200"), ("transactionTimeOut", "300"), ("flushCommitLogLeastPages", "0")];

fn master(dir: &std::path::Path, role: &str, extra: &[(&str, &str)]) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, role, extra)).unwrap();
    if b.topic_config("T").is_none() {
        b.create_topic("T", 2).unwrap();
    }
    b
}

/// A transactional SEND_MESSAGE_V2 of producer group `group`, as the Java client sends it.
fn send_tx(group: &str, queue: i32, body: &[u8], uniq: &str, extra: &[(&str, &str)]) -> RemotingCommand {
    let mut p =
        vec![("TRAN_MSG", "true"), ("PGROUP", group), ("UNIQ_KEY", uniq), ("TAGS", "TagT"), ("WAIT", "true")];
    p.extend_from_slice(extra);
    RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", group)
        .with_ext("b", "T")
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", queue)
        .with_ext("f", 4) // TRANSACTION_PREPARED_TYPE, as the Java client sets it
        .with_ext("g", now_ms())
        .with_ext("h", 0)
        .with_ext("i", props(&p))
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(body.to_vec())
}

fn end_tx(
    group: &str,
    queue_offset: i64,
    log_offset: i64,
    decision: i32,
    from_check: bool,
) -> RemotingCommand {
    RemotingCommand::request(request_code::END_TRANSACTION)
        .with_ext("producerGroup", group)
        .with_ext("tranStateTableOffset", queue_offset)
        .with_ext("commitLogOffset", log_offset)
        .with_ext("commitOrRollback", decision)
        .with_ext("fromTransactionCheck", from_check)
        .with_ext("msgId", "ignored")
}

fn oneway(c: &rmqha_core::remoting::RemotingClient, req: RemotingCommand) {
    c.invoke_oneway(req, TIMEOUT).expect("oneway");
}

fn messages(b: &Broker, topic: &str, q: i32) -> Vec<StoredMessage> {
    b.get_messages(topic, q, 0, 64).messages()
}

/// A producer's HEART_BEAT: producer group `group` only.
fn producer_heartbeat(client_id: &str, group: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [],
        "producerDataSet": [{"groupName": group}]
    });
    RemotingCommand::request(request_code::HEART_BEAT).with_body(body.to_string().into_bytes())
}

/// A producer on one raw connection: it heartbeats, sends, and sees what the broker pushes.
struct Producer {
    raw: Raw,
    opaque: i32,
}

impl Producer {
    fn connect(b: &Broker, group: &str) -> Producer {
        let mut p = Producer { raw: Raw::connect(b.remoting_addrs()[0]), opaque: 100 };
        let r = p.call(producer_heartbeat("client-1", group));
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        p
    }

    /// Sends `req` and returns its response; requests pushed meanwhile are kept in `pushed`.
    fn call(&mut self, req: RemotingCommand) -> RemotingCommand {
        self.opaque += 1;
        self.raw.send(req, self.opaque);
        loop {
            let f = self.raw.recv();
            if f.is_response() && f.opaque == self.opaque {
                return f;
            }
            assert!(f.is_response(), "a request pushed during a call: {f:?}");
        }
    }

    /// The next CHECK_TRANSACTION_STATE pushed within `timeout`.
    fn next_check(&mut self, timeout: Duration) -> Option<RemotingCommand> {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.raw.try_recv(left) {
                Some(f) if !f.is_response() => {
                    assert_eq!(f.code, request_code::CHECK_TRANSACTION_STATE, "{f:?}");
                    assert!(f.is_oneway(), "pushed oneway, as 4.9's invokeOneway: {f:?}");
                    return Some(f);
                }
                Some(_) => continue,
                None => return None,
            }
        }
        None
    }

    fn oneway(&mut self, mut req: RemotingCommand) {
        self.opaque += 1;
        req.flag |= FLAG_ONEWAY;
        self.raw.send(req, self.opaque);
    }
}

#[test]
fn a_half_message_is_hidden_until_committed_and_a_rolled_back_one_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[("transactionCheckInterval", "600000")]);
    let c = client(b.remoting_addrs()[0]);

    // Prepare: answered with the queue sent to and the half queue's offset.
    let r = call(&c, send_tx("pg", 1, b"tx-body", "UNIQ1", &[("KEYS", "k1")]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(ext_i64(&r, "queueId"), 1);
    assert_eq!(ext_i64(&r, "queueOffset"), 0);
    let half_phy = msg_id_offset(r.ext("msgId").unwrap());
    let half = b.store().message_at(half_phy).unwrap();
    assert_eq!((half.topic.as_str(), half.queue_id, half.queue_offset), (HALF, 0, 0));
    assert_eq!(half.property("REAL_TOPIC"), Some("T"));
    assert_eq!(half.property("REAL_QID"), Some("1"));
    assert_eq!(half.sys_flag & 0xC, 0, "the half message's transaction type is reset to NOT_TYPE");
    assert!(b.topic_config(HALF).is_some() && b.topic_config(OP).is_some(), "system topics created");
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert_eq!(messages(&b, HALF, 0).len(), 1, "the half topic has a ConsumeQueue unit");

    // Not consumable.
    let p = pull(&c, "T", 1, 0, 32);
    assert_eq!(p.code, code::PULL_NOT_FOUND, "{p:?}");

    // A wrong producer group, a wrong queue offset or log offset, or no decision: ignored.
    for bad in [
        end_tx("other", 0, half_phy, COMMIT, false),
        end_tx("pg", 5, half_phy, COMMIT, false),
        end_tx("pg", 0, half_phy + 1, COMMIT, false),
    ] {
        let r = call(&c, bad);
        assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    }
    oneway(&c, end_tx("pg", 0, half_phy, 0, false));

    // A second half message, rolled back.
    let r2 = call(&c, send_tx("pg", 0, b"rolled-back", "UNIQ2", &[]));
    assert_eq!(r2.code, code::SUCCESS, "{r2:?}");
    assert_eq!(ext_i64(&r2, "queueOffset"), 1);
    let half2_phy = msg_id_offset(r2.ext("msgId").unwrap());
    oneway(&c, end_tx("pg", 1, half2_phy, ROLLBACK, false));
    assert!(wait_until(TIMEOUT, || messages(&b, OP, 0).len() == 1), "the rollback's op message");
    let op = &messages(&b, OP, 0)[0];
    assert_eq!((op.body.as_slice(), op.tags.as_deref()), (&b"1"[..], Some("d")));
    assert!(
        messages(&b, "T", 1).is_empty() && messages(&b, "T", 0).is_empty(),
        "nothing ignored took effect"
    );

    // Commit, oneway as clients send it.
    oneway(&c, end_tx("pg", 0, half_phy, COMMIT, false));
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1), "the committed message");
    let m = &messages(&b, "T", 1)[0];
    assert_eq!(m.body, b"tx-body");
    assert_eq!(m.sys_flag & 0xC, COMMIT, "COMMIT type");
    assert_eq!(m.prepared_transaction_offset, half_phy);
    assert_eq!(m.tags.as_deref(), Some("TagT"));
    assert_eq!(m.keys, vec!["k1".to_string()]);
    assert_eq!(m.property("UNIQ_KEY"), Some("UNIQ1"));
    assert_eq!(m.property("PGROUP"), Some("pg"));
    for gone in ["REAL_TOPIC", "REAL_QID", "TRAN_MSG"] {
        assert_eq!(m.property(gone), None, "{gone} cleared");
    }
    let p = pull(&c, "T", 1, 0, 32);
    assert_eq!(p.code, code::SUCCESS, "{p:?}");
    let recs = decode_records(&p.body);
    assert_eq!((recs.len(), recs[0].body.as_slice()), (1, &b"tx-body"[..]));
    assert!(wait_until(TIMEOUT, || messages(&b, OP, 0).len() == 2), "the commit's op message");
    assert_eq!(messages(&b, OP, 0)[1].body, b"0");

    // The rolled-back one never shows, and nothing else reached the real topic.
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert!(messages(&b, "T", 0).is_empty());
    assert_eq!(messages(&b, "T", 1).len(), 1);
}

#[test]
fn batches_with_tran_msg_and_rejecting_brokers_refuse_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[("rejectTransactionMessage", "true")]);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, send_tx("pg", 0, b"x", "U", &[]));
    assert_eq!(r.code, code::NO_PERMISSION, "{r:?}");
    b.shutdown();

    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[]);
    let c = client(b.remoting_addrs()[0]);
    let item = encode_batch_item(0, b"x", &props(&[("TRAN_MSG", "true"), ("PGROUP", "pg")]));
    let r = call(&c, send_batch("T", 0, &[Msg::new("T", b"y")]).with_body(item));
    assert_eq!(r.code, code::MESSAGE_ILLEGAL, "{r:?}");
    assert!(b.store().wait_dispatched(TIMEOUT));
    assert!(messages(&b, "T", 0).is_empty());
}

#[test]
fn a_sync_master_commits_to_its_slave_and_a_slave_refuses_end_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(&dir.path().join("m"), "SYNC_MASTER", &[("transactionCheckInterval", "600000")]);
    let ha = format!("127.0.0.1:{}", m.ha_port());
    let remoting = m.remoting_addrs()[0].to_string();
    let s = Broker::start_slave(common::broker_config(
        &dir.path().join("s"),
        "SLAVE",
        &[("haMasterAddress", ha.as_str()), ("masterAddress", remoting.as_str())],
    ))
    .unwrap();
    assert!(wait_until(TIMEOUT, || m.offsets().slaves.iter().any(|x| x.transferring)), "slave connected");
    let c = client(m.remoting_addrs()[0]);
    let r = call(&c, send_tx("pg", 0, b"replicated", "U1", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let half_phy = msg_id_offset(r.ext("msgId").unwrap());

    let sc = client(s.remoting_addrs()[0]);
    let refused = call(&sc, end_tx("pg", 0, half_phy, COMMIT, false));
    assert_eq!(refused.code, code::SLAVE_NOT_AVAILABLE, "{refused:?}");

    // Answered only once the committed message and its op message are written.
    let done = call(&c, end_tx("pg", 0, half_phy, COMMIT, false));
    assert_eq!(done.code, code::SUCCESS, "{done:?}");
    let slave_end = s.max_offset();
    assert!(m.store().wait_dispatched(TIMEOUT));
    let committed = messages(&m, "T", 0);
    assert_eq!(committed.len(), 1);
    let end = committed[0].phy_offset + committed[0].store_size as i64;
    assert!(slave_end >= end, "the slave held the committed message before the answer");
    assert!(wait_until(TIMEOUT, || messages(&s, "T", 0).len() == 1), "the committed message on the slave");
    let on_slave = &messages(&s, "T", 0)[0];
    assert_eq!((on_slave.body.as_slice(), on_slave.sys_flag & 0xC), (&b"replicated"[..], COMMIT));
}

/// Waits for a check of the half message `uniq`, checking its header and body.
fn expect_check(p: &mut Producer, uniq: &str, body: &[u8]) -> (i64, i64) {
    let check = p.next_check(TIMEOUT).expect("a CHECK_TRANSACTION_STATE");
    assert_eq!(check.ext("msgId"), Some(uniq), "{check:?}");
    assert_eq!(check.ext("transactionId"), Some(uniq), "{check:?}");
    let log_offset = ext_i64(&check, "commitLogOffset");
    let queue_offset = ext_i64(&check, "tranStateTableOffset");
    assert_eq!(msg_id_offset(check.ext("offsetMsgId").unwrap()), log_offset);
    let recs = decode_records(&check.body);
    assert_eq!(recs.len(), 1, "{check:?}");
    assert_eq!((recs[0].topic.as_str(), recs[0].queue_id, recs[0].body.as_slice()), ("T", 1, body));
    assert_eq!((recs[0].phy_offset, recs[0].queue_offset), (log_offset, queue_offset));
    assert_eq!(recs[0].prop("UNIQ_KEY"), Some(uniq));
    (queue_offset, log_offset)
}

#[test]
fn an_undecided_transaction_is_checked_back_and_committed_from_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"checked", "UC", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let half_phy = msg_id_offset(r.ext("msgId").unwrap());
    let (queue_offset, log_offset) = expect_check(&mut p, "UC", b"checked");
    assert_ne!(log_offset, half_phy, "the check names the half message put back");
    let copy = b.store().message_at(log_offset).unwrap();
    assert_eq!(copy.property("TRANSACTION_CHECK_TIMES"), Some("1"));
    assert!(messages(&b, "T", 1).is_empty());

    p.oneway(end_tx("pg", queue_offset, log_offset, COMMIT, true));
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1), "committed from the check");
    let m = &messages(&b, "T", 1)[0];
    assert_eq!((m.body.as_slice(), m.sys_flag & 0xC), (&b"checked"[..], COMMIT));
    // Decided: no further check (several rounds pass).
    assert!(p.next_check(Duration::from_millis(1500)).is_none(), "checked again after the commit");
    // The cursor passed it and is recorded once flushed.
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) > queue_offset),
        "the half cursor recorded"
    );
}

#[test]
fn a_transaction_checked_transaction_check_max_times_is_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(
        dir.path(),
        "ASYNC_MASTER",
        &[
            ("transactionCheckInterval", "200"),
            ("transactionTimeOut", "0"),
            ("transactionCheckMax", "2"),
            ("flushCommitLogLeastPages", "0"),
        ],
    );
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"never-decided", "UD", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (qo, phy) = (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()));
    expect_check(&mut p, "UD", b"never-decided");
    expect_check(&mut p, "UD", b"never-decided");
    assert!(
        wait_until(TIMEOUT, || messages(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0).len() == 1),
        "moved to TRANS_CHECK_MAX_TIME_TOPIC"
    );
    let d = &messages(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0)[0];
    assert_eq!(d.body, b"never-decided");
    assert_eq!(d.property("TRANSACTION_CHECK_TIMES"), Some("2"));
    assert!(p.next_check(Duration::from_millis(1500)).is_none(), "checked past transactionCheckMax");
    assert!(messages(&b, "T", 1).is_empty());
    // Discarded for good: once the recorded cursor has passed every copy, a late commit is
    // refused and stores nothing.
    let copies = messages(&b, HALF, 0).len() as i64;
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) >= copies),
        "the half cursor recorded past every copy"
    );
    let late = p.call(end_tx("pg", qo, phy, COMMIT, false));
    answered(&late, code::SYSTEM_ERROR, "no longer pending");
    settled(&b);
    assert!(messages(&b, "T", 1).is_empty(), "a discarded transaction committed");
}

/// RESUME_CHECK_HALF_MESSAGE (`mqadmin resumeCheckHalfMessage`): a discarded half message is
/// put back in the half queue with no checks counted, checked back again, and a commit from
/// that check delivers it once. Other messages are refused.
#[test]
fn a_discarded_transaction_is_checked_again_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(
        dir.path(),
        "ASYNC_MASTER",
        &[("transactionCheckInterval", "200"), ("transactionTimeOut", "0"), ("transactionCheckMax", "1")],
    );
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"resumed", "UR", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    expect_check(&mut p, "UR", b"resumed");
    assert!(
        wait_until(TIMEOUT, || messages(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0).len() == 1),
        "moved to TRANS_CHECK_MAX_TIME_TOPIC"
    );
    let discarded = messages(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0).remove(0);
    assert!(p.next_check(Duration::from_millis(800)).is_none(), "checked past transactionCheckMax");

    let tool = client(b.remoting_addrs()[0]);
    let resume = |id: &str| RemotingCommand::request(RESUME).with_ext("msgId", id);
    let r = tool.invoke_sync(resume(&discarded.msg_id), TIMEOUT).unwrap();
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (queue_offset, log_offset) = expect_check(&mut p, "UR", b"resumed");
    let copy = b.store().message_at(log_offset).unwrap();
    assert_eq!(copy.property("TRANSACTION_CHECK_TIMES"), Some("1"), "counted from 0 again");
    p.oneway(end_tx("pg", queue_offset, log_offset, COMMIT, true));
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1), "committed from the resumed check");
    assert_eq!(messages(&b, "T", 1)[0].body, b"resumed");
    assert!(p.next_check(Duration::from_millis(800)).is_none(), "checked again after the commit");

    // A message that is no half message, an id of nothing, and a missing header are refused.
    let plain = b.put_message_sync(&rmqha_core::Message::new("T", b"plain".to_vec())).unwrap();
    let r = tool.invoke_sync(resume(&plain.msg_id()), TIMEOUT).unwrap();
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(remark(&r).contains("not a transaction's half message"), "{r:?}");
    let r = tool.invoke_sync(resume("0A0A0A0A00002A9F00000000FFFFFFFF"), TIMEOUT).unwrap();
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(remark(&r).contains("no message of this broker"), "{r:?}");
    let r = tool.invoke_sync(RemotingCommand::request(RESUME), TIMEOUT).unwrap();
    assert_ne!(r.code, code::SUCCESS);
    assert!(remark(&r).contains("msgId"), "{r:?}");
    assert_eq!(messages(&b, "T", 1).len(), 1);
}

/// A transaction decided already is not resumed: it is refused, naming the decision, and
/// no copy is put back nor checked. A commit naming the half message again stores nothing.
#[test]
fn a_decided_transaction_is_not_checked_again_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"decided", "UX", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (qo, phy) = (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()));
    let half_id = r.ext("msgId").unwrap().to_string();
    let done = p.call(end_tx("pg", qo, phy, COMMIT, false));
    assert_eq!(done.code, code::SUCCESS, "{done:?}");
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1));
    let tool = client(b.remoting_addrs()[0]);
    let halves = messages(&b, HALF, 0).len();
    let r = tool.invoke_sync(RemotingCommand::request(RESUME).with_ext("msgId", &half_id), TIMEOUT).unwrap();
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(remark(&r).contains("decided already (COMMIT)"), "{r:?}");
    assert!(p.next_check(Duration::from_millis(1500)).is_none(), "a decided transaction checked again");
    assert_eq!(messages(&b, HALF, 0).len(), halves, "a copy was put back");
    let again = p.call(end_tx("pg", qo, phy, COMMIT, false));
    assert_eq!(again.code, code::SUCCESS, "{again:?}");
    assert!(remark(&again).contains("already committed"), "{again:?}");
    settled(&b);
    assert_eq!(messages(&b, "T", 1).len(), 1);
}

/// A rolled-back transaction whose decision this broker no longer holds in memory (the
/// check cursors passed its op message, and the broker restarted): a resume finds the
/// decision in the op queue and refuses. Before, the copy was checked again, and a producer
/// answering COMMIT committed a transaction rolled back.
#[test]
fn a_rolled_back_transaction_resumed_after_a_restart_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"rolled back", "UB", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (qo, phy) = (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()));
    let half_id = r.ext("msgId").unwrap().to_string();
    let done = p.call(end_tx("pg", qo, phy, ROLLBACK, false));
    assert_eq!(done.code, code::SUCCESS, "{done:?}");
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", OP, 0) >= 1
            && b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) > qo),
        "the check cursors recorded past the decision"
    );
    drop(p);
    b.shutdown();
    drop(b);

    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let tool = client(b.remoting_addrs()[0]);
    let r = tool.invoke_sync(RemotingCommand::request(RESUME).with_ext("msgId", &half_id), TIMEOUT).unwrap();
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(remark(&r).contains("decided already (ROLLBACK)"), "{r:?}");
    assert!(p.next_check(Duration::from_millis(1500)).is_none(), "a rolled-back transaction checked again");
    assert!(messages(&b, "T", 1).is_empty());
}

#[test]
fn a_restart_keeps_an_undecided_half_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, send_tx("pg", 1, b"survives", "UR", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // A round with no producer online puts it back and moves the cursor past the original.
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) >= 1),
        "a check round recorded its cursor"
    );
    b.shutdown();
    drop(c);
    drop(b);

    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let (queue_offset, log_offset) = expect_check(&mut p, "UR", b"survives");
    p.oneway(end_tx("pg", queue_offset, log_offset, COMMIT, true));
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1), "committed after the restart");
    assert_eq!(messages(&b, "T", 1)[0].body, b"survives");
    assert!(p.next_check(Duration::from_millis(1500)).is_none(), "checked again after the commit");
}

#[test]
fn check_cursors_are_recorded_only_once_durable() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing is flushed while the test runs: the copies the rounds put back stay unflushed.
    let b = master(
        dir.path(),
        "ASYNC_MASTER",
        &[
            ("transactionCheckInterval", "200"),
            ("transactionTimeOut", "0"),
            ("flushCommitLogLeastPages", "100000"),
            ("flushCommitLogThoroughInterval", "600000"),
        ],
    );
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, send_tx("pg", 1, b"unflushed", "UF", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // Rounds ran: copies were put back past the original.
    assert!(wait_until(TIMEOUT, || b.queue_max_offset(HALF, 0) >= 3), "check rounds put copies back");
    assert!(b.flushed_offset() < b.max_offset());
    assert_eq!(
        b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0),
        -1,
        "a cursor recorded past half messages whose copies are not flushed"
    );
}

#[test]
fn a_transaction_check_max_of_zero_still_checks_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(
        dir.path(),
        "ASYNC_MASTER",
        &[("transactionCheckInterval", "200"), ("transactionTimeOut", "0"), ("transactionCheckMax", "0")],
    );
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"once", "U0", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // As 4.9's needDiscard: a message never checked is checked, then discarded.
    expect_check(&mut p, "U0", b"once");
    assert!(
        wait_until(TIMEOUT, || messages(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0).len() == 1),
        "discarded after its one check"
    );
}

#[test]
fn a_long_check_immunity_does_not_hold_back_later_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(
        dir.path(),
        "ASYNC_MASTER",
        &[("transactionCheckInterval", "200"), ("transactionTimeOut", "300")],
    );
    let mut p = Producer::connect(&b, "pg");
    // The first transaction asks not to be checked for an hour.
    let r = p.call(send_tx("pg", 1, b"immune", "UI", &[("CHECK_IMMUNITY_TIME_IN_SECONDS", "3600")]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let r = p.call(send_tx("pg", 1, b"due", "UN", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    // The second one is due after transactionTimeOut, whatever the first one's immunity.
    let (queue_offset, log_offset) = expect_check(&mut p, "UN", b"due");
    p.oneway(end_tx("pg", queue_offset, log_offset, ROLLBACK, true));
    // The immune one is not checked meanwhile.
    assert!(p.next_check(Duration::from_millis(1000)).is_none(), "a transaction checked within its immunity");
    assert!(messages(&b, "T", 1).is_empty());
}

/// A body can hold bytes shaped like a half message, whose offset field names where the
/// body lies: END_TRANSACTION naming it must not commit it (it would put whatever the
/// forger wrote, to whatever `REAL_TOPIC` they chose, past the ACL of that topic).
#[test]
fn end_transaction_refuses_a_half_message_forged_inside_a_body() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[]);
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, send_tx("pg", 1, b"forged", "UX", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let half_phy = msg_id_offset(r.ext("msgId").unwrap());
    let half = b.store().message_at(half_phy).unwrap();
    let mut forged = b.store().record_at(half_phy).unwrap().bytes().to_vec();
    // The record carrying it follows the half message; its body starts 88 bytes in.
    let carrier_phy = half_phy + forged.len() as i64;
    let forged_at = carrier_phy + 88;
    forged[28..36].copy_from_slice(&forged_at.to_be_bytes());
    let carrier = b.put_message_sync(&rmqha_core::Message::new("Attacker", forged)).unwrap();
    assert_eq!(carrier.phy_offset, carrier_phy);
    assert!(b.store().wait_dispatched(TIMEOUT));
    // The forgery is well formed where it lies (that is the attack).
    assert_eq!(b.store().message_at(forged_at).map(|m| m.topic), Some(HALF.to_string()));

    let r = call(&c, end_tx("pg", half.queue_offset, forged_at, COMMIT, false));
    assert_eq!(r.code, code::SYSTEM_ERROR, "a forged half message was accepted: {r:?}");
    assert!(messages(&b, "T", 1).is_empty(), "a forged half message was committed");
    // The genuine one still commits.
    let r = call(&c, end_tx("pg", half.queue_offset, half_phy, COMMIT, false));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(wait_until(TIMEOUT, || messages(&b, "T", 1).len() == 1));
}

/// Sends a transactional message and returns (half-queue offset, log offset) of its half.
fn prepare(c: &rmqha_core::remoting::RemotingClient, queue: i32, body: &[u8], uniq: &str) -> (i64, i64) {
    let r = call(c, send_tx("pg", queue, body, uniq, &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()))
}

/// What a commit of the half message at `phy` does before it writes its op message (as a
/// crash or a full disk between the two puts would leave it).
fn store_commit_without_op(b: &Broker, phy: i64) {
    let half = b.store().message_at(phy).unwrap();
    let msg = rmqha_core::transaction::committed(&half).unwrap();
    assert!(b.put_message(&msg).unwrap().wait().status.is_stored());
    settled(b);
}

/// Stops the ASYNC_MASTER `b` and starts it again on its store, with a new client.
fn restart(
    b: Arc<Broker>,
    c: RemotingClient,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> (Arc<Broker>, RemotingClient) {
    b.shutdown();
    drop(c);
    drop(b);
    let b = master(dir, "ASYNC_MASTER", extra);
    let c = client(b.remoting_addrs()[0]);
    (b, c)
}

/// Everything written is in the queues (so counting them counts every put).
fn settled(b: &Broker) {
    assert!(b.store().wait_dispatched(TIMEOUT), "dispatch never caught up");
}

fn remark(r: &RemotingCommand) -> &str {
    r.remark.as_deref().unwrap_or("")
}

/// `r` has response code `code` and a remark that says `says`.
fn answered(r: &RemotingCommand, code: i32, says: &str) {
    assert_eq!(r.code, code, "{r:?}");
    assert!(remark(r).contains(says), "remark should say {says:?}: {r:?}");
}

#[test]
fn a_transaction_is_committed_once_whatever_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[("transactionCheckInterval", "600000")]);
    let c = client(b.remoting_addrs()[0]);

    // Committed twice (a producer retrying): one message, one op message.
    let (qo, phy) = prepare(&c, 1, b"twice", "U-TWICE");
    let first = call(&c, end_tx("pg", qo, phy, COMMIT, false));
    assert_eq!(first.code, code::SUCCESS, "{first:?}");
    let again = call(&c, end_tx("pg", qo, phy, COMMIT, true));
    answered(&again, code::SUCCESS, "already committed");
    oneway(&c, end_tx("pg", qo, phy, COMMIT, false));
    // The oneway one is handled before a later request on the same connection is answered.
    let rollback = call(&c, end_tx("pg", qo, phy, ROLLBACK, false));
    answered(&rollback, code::SYSTEM_ERROR, "already committed: a ROLLBACK is refused");
    settled(&b);
    let committed = messages(&b, "T", 1);
    assert_eq!(committed.len(), 1, "committed more than once");
    assert_eq!(committed[0].body, b"twice");
    assert_eq!(messages(&b, OP, 0).len(), 1, "one op message");
    assert_eq!(messages(&b, OP, 0)[0].property("TRAN_DECISION"), Some("COMMIT"));

    // Rolled back, then committed: nothing reaches the real topic.
    let (qo, phy) = prepare(&c, 0, b"rolled-back", "U-RB");
    assert_eq!(call(&c, end_tx("pg", qo, phy, ROLLBACK, false)).code, code::SUCCESS);
    let commit = call(&c, end_tx("pg", qo, phy, COMMIT, false));
    answered(&commit, code::SYSTEM_ERROR, "already rolled back: a COMMIT is refused");
    let again = call(&c, end_tx("pg", qo, phy, ROLLBACK, false));
    assert_eq!(again.code, code::SUCCESS, "{again:?}");
    settled(&b);
    assert!(messages(&b, "T", 0).is_empty(), "a rolled-back transaction was committed");
    assert_eq!(messages(&b, OP, 0).len(), 2, "one op message per transaction");
    assert_eq!(messages(&b, OP, 0)[1].property("TRAN_DECISION"), Some("ROLLBACK"));
}

#[test]
fn concurrent_commits_of_one_transaction_store_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", &[("transactionCheckInterval", "600000")]);
    let c = client(b.remoting_addrs()[0]);
    let rounds = 8;
    let mut succeeded = Vec::new();
    for i in 0..rounds {
        let (qo, phy) = prepare(&c, 1, format!("race-{i}").as_bytes(), &format!("U-RACE-{i}"));
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let barrier = barrier.clone();
                let c = client(b.remoting_addrs()[0]);
                std::thread::spawn(move || {
                    barrier.wait();
                    call(&c, end_tx("pg", qo, phy, COMMIT, false))
                })
            })
            .collect();
        let answers: Vec<RemotingCommand> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for a in &answers {
            assert!(
                a.code == code::SUCCESS
                    || (a.code == code::SYSTEM_ERROR && remark(a).contains("being decided (COMMIT)")),
                "{a:?}"
            );
        }
        succeeded.push(answers.iter().filter(|a| a.code == code::SUCCESS).count());
    }
    assert!(succeeded.iter().all(|&n| n >= 1), "a transaction nobody committed: {succeeded:?}");
    settled(&b);
    let bodies: Vec<Vec<u8>> = messages(&b, "T", 1).into_iter().map(|m| m.body).collect();
    let expected: Vec<Vec<u8>> = (0..rounds).map(|i| format!("race-{i}").into_bytes()).collect();
    assert_eq!(bodies, expected, "each transaction committed exactly once");
    assert_eq!(messages(&b, OP, 0).len(), rounds, "one op message per transaction");
}

#[test]
fn a_decision_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [("transactionCheckInterval", "600000")];
    let b = master(dir.path(), "ASYNC_MASTER", &extra);
    let c = client(b.remoting_addrs()[0]);
    let (qo, phy) = prepare(&c, 1, b"before-restart", "U-RS");
    assert_eq!(call(&c, end_tx("pg", qo, phy, COMMIT, false)).code, code::SUCCESS);
    let (qo2, phy2) = prepare(&c, 0, b"rolled-back", "U-RS2");
    assert_eq!(call(&c, end_tx("pg", qo2, phy2, ROLLBACK, false)).code, code::SUCCESS);
    settled(&b);
    let (b, c) = restart(b, c, dir.path(), &extra);
    let again = call(&c, end_tx("pg", qo, phy, COMMIT, false));
    answered(&again, code::SUCCESS, "already committed");
    let refused = call(&c, end_tx("pg", qo2, phy2, COMMIT, false));
    answered(&refused, code::SYSTEM_ERROR, "already rolled back");
    settled(&b);
    assert_eq!(messages(&b, "T", 1).len(), 1, "committed again after the restart");
    assert!(messages(&b, "T", 0).is_empty(), "a rolled-back transaction committed after the restart");
    assert_eq!(messages(&b, OP, 0).len(), 2, "an op message written again");
}

#[test]
fn a_commit_by_the_first_offsets_and_one_by_a_copy_put_back_are_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), "ASYNC_MASTER", CHECK_SOON);
    let mut p = Producer::connect(&b, "pg");
    let r = p.call(send_tx("pg", 1, b"put-back", "U-PB", &[]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (first_qo, first_phy) = (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()));
    // The Checker puts the half message back and asks.
    let (copy_qo, copy_phy) = expect_check(&mut p, "U-PB", b"put-back");
    assert_ne!((copy_qo, copy_phy), (first_qo, first_phy));
    // Its cursor is recorded past the first half message: the commit naming it still goes.
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) > first_qo),
        "the half cursor recorded"
    );
    // The producer's own commit (the first offsets), then its answer to the check (the copy's),
    // on another connection: the producer's is pushed a check every round until then.
    let c = client(b.remoting_addrs()[0]);
    let own = call(&c, end_tx("pg", first_qo, first_phy, COMMIT, false));
    assert_eq!(own.code, code::SUCCESS, "{own:?}");
    let answer = call(&c, end_tx("pg", copy_qo, copy_phy, COMMIT, true));
    answered(&answer, code::SUCCESS, "already committed");
    let rollback = call(&c, end_tx("pg", copy_qo, copy_phy, ROLLBACK, true));
    assert_eq!(rollback.code, code::SYSTEM_ERROR, "{rollback:?}");
    settled(&b);
    let committed = messages(&b, "T", 1);
    assert_eq!(committed.len(), 1, "committed once per copy");
    assert_eq!(committed[0].body, b"put-back");
    assert_eq!(messages(&b, OP, 0).len(), 1, "one op message");

    // Once the Checker's recorded cursors pass the transaction, and across a restart, it is
    // still not committed again, by either offsets.
    assert!(
        wait_until(TIMEOUT, || b.consumer_offset("CID_RMQ_SYS_TRANS", OP, 0) >= 1
            && b.consumer_offset("CID_RMQ_SYS_TRANS", HALF, 0) > copy_qo),
        "the cursors recorded past the op message"
    );
    // The checks pushed before the commit was seen, then none.
    let mut drained = 0;
    while p.next_check(Duration::from_millis(600)).is_some() {
        drained += 1;
        assert!(drained < 30, "checked again and again after the commit");
    }
    b.shutdown();
    drop(c);
    drop(p);
    drop(b);
    let b = master(dir.path(), "ASYNC_MASTER", &[("transactionCheckInterval", "600000")]);
    let c = client(b.remoting_addrs()[0]);
    // Its committed message is found (by the index), so it is answered as committed.
    for (qo, phy) in [(first_qo, first_phy), (copy_qo, copy_phy)] {
        let r = call(&c, end_tx("pg", qo, phy, COMMIT, false));
        answered(&r, code::SUCCESS, "already committed");
        let r = call(&c, end_tx("pg", qo, phy, ROLLBACK, false));
        answered(&r, code::SYSTEM_ERROR, "already committed");
    }
    settled(&b);
    assert_eq!(messages(&b, "T", 1).len(), 1, "committed again once the Checker passed it");
    assert_eq!(messages(&b, OP, 0).len(), 1, "a second op message once the Checker passed it");
}

/// A commit on a SYNC_MASTER waits for its slave: until its op message is written, another
/// END_TRANSACTION of the transaction (either way) is refused and changes nothing.
#[test]
fn a_commit_holds_its_transaction_until_its_op_message_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // A slave timeout far beyond the test's steps: the first commit must still be waiting
    // when the others ask, however loaded the machine.
    let m = master(
        &dir.path().join("m"),
        "SYNC_MASTER",
        &[("transactionCheckInterval", "600000"), ("slaveTimeout", "60000")],
    );
    let proxy = common::Proxy::start(format!("127.0.0.1:{}", m.ha_port()).parse().unwrap());
    let via = proxy.addr.to_string();
    let _s = Broker::start_slave(common::broker_config(
        &dir.path().join("s"),
        "SLAVE",
        &[("haMasterAddress", via.as_str())],
    ))
    .unwrap();
    assert!(wait_until(TIMEOUT, || m.offsets().slaves.iter().any(|x| x.transferring)), "slave connected");
    let c = client(m.remoting_addrs()[0]);
    let (qo, phy) = prepare(&c, 0, b"held", "U-HELD");

    // The slave's acks stop: the commit's put is written but not final.
    proxy.stall_up(true);
    let written = m.max_offset();
    let first = {
        let c = client(m.remoting_addrs()[0]);
        std::thread::spawn(move || call(&c, end_tx("pg", qo, phy, COMMIT, false)))
    };
    assert!(wait_until(TIMEOUT, || m.max_offset() > written), "the committed message never written");
    for decision in [COMMIT, ROLLBACK] {
        let r = call(&c, end_tx("pg", qo, phy, decision, false));
        answered(&r, code::SYSTEM_ERROR, "being decided (COMMIT)");
    }
    assert!(!first.is_finished(), "the commit did not wait for the slave");
    proxy.stall_up(false);
    let first = first.join().unwrap();
    assert_eq!(first.code, code::SUCCESS, "{first:?}");
    assert!(remark(&first).is_empty(), "{first:?}");
    let again = call(&c, end_tx("pg", qo, phy, COMMIT, false));
    answered(&again, code::SUCCESS, "already committed");
    settled(&m);
    assert_eq!(messages(&m, "T", 0).len(), 1, "committed more than once");
    assert_eq!(messages(&m, OP, 0).len(), 1, "one op message");
}

#[test]
fn a_commit_whose_op_message_was_lost_is_not_stored_again() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [("transactionCheckInterval", "600000")];
    let b = master(dir.path(), "ASYNC_MASTER", &extra);
    let c = client(b.remoting_addrs()[0]);
    let (qo, phy) = prepare(&c, 1, b"op-lost", "U-OL");
    store_commit_without_op(&b, phy);
    let (b, c) = restart(b, c, dir.path(), &extra);
    let rollback = call(&c, end_tx("pg", qo, phy, ROLLBACK, false));
    answered(&rollback, code::SYSTEM_ERROR, "already committed");
    // The producer's answer to a check-back: the op message is written, the message not again.
    let commit = call(&c, end_tx("pg", qo, phy, COMMIT, true));
    assert_eq!(commit.code, code::SUCCESS, "{commit:?}");
    settled(&b);
    assert_eq!(messages(&b, "T", 1).len(), 1, "committed twice");
    assert_eq!(messages(&b, OP, 0).len(), 1, "the missing op message");
    let again = call(&c, end_tx("pg", qo, phy, COMMIT, false));
    assert!(remark(&again).contains("already committed"), "{again:?}");
    settled(&b);
    assert_eq!(messages(&b, OP, 0).len(), 1, "a second op message");
}

/// A delayed transaction's committed message waits in SCHEDULE_TOPIC_XXXX until its level is
/// due: a stop between its put and its op message's must not let the answer to the check-back
/// store it a second time (it would be delivered twice).
#[test]
fn a_delayed_commit_whose_op_message_was_lost_is_not_stored_again() {
    const SCHEDULE: &str = "SCHEDULE_TOPIC_XXXX";
    let dir = tempfile::tempdir().unwrap();
    let extra = [("transactionCheckInterval", "600000")];
    let b = master(dir.path(), "ASYNC_MASTER", &extra);
    let c = client(b.remoting_addrs()[0]);
    // Level 6: two minutes, longer than the test.
    let r = call(&c, send_tx("pg", 1, b"delayed-op-lost", "U-DOL", &[("DELAY", "6")]));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let (qo, phy) = (ext_i64(&r, "queueOffset"), msg_id_offset(r.ext("msgId").unwrap()));
    store_commit_without_op(&b, phy);
    assert_eq!(messages(&b, SCHEDULE, 5).len(), 1, "the committed message waits for its level");
    let (b, c) = restart(b, c, dir.path(), &extra);
    let rollback = call(&c, end_tx("pg", qo, phy, ROLLBACK, false));
    answered(&rollback, code::SYSTEM_ERROR, "already committed");
    let commit = call(&c, end_tx("pg", qo, phy, COMMIT, true));
    assert_eq!(commit.code, code::SUCCESS, "{commit:?}");
    settled(&b);
    assert_eq!(messages(&b, SCHEDULE, 5).len(), 1, "committed twice");
    assert!(messages(&b, "T", 1).is_empty());
    assert_eq!(messages(&b, OP, 0).len(), 1, "the missing op message");
}

/// Retention deletes the file of a transaction's first half message (and of a copy a check
/// put back soon after) while a later copy, and the op message of its rollback, are in later
/// files. After a restart the rollback must still hold for the copy left: a commit naming it
/// is refused, and it is not checked back again. The rollback names the first half message
/// (the producer's own end) or the deleted copy (its answer to that copy's check).
#[test]
fn a_decision_naming_a_half_message_retention_deleted_still_holds_for_its_copies() {
    for name_first in [true, false] {
        decision_after_retention(name_first);
    }
}

fn decision_after_retention(name_first: bool) {
    let dir = tempfile::tempdir().unwrap();
    let small = [("mappedFileSizeCommitLog", "4096"), ("transactionCheckInterval", "600000")];
    let b = master(dir.path(), "ASYNC_MASTER", &small);
    let c = client(b.remoting_addrs()[0]);
    let (qo, phy) = prepare(&c, 1, b"first-file", "U-RET");
    assert_eq!((qo, phy), (0, 0), "the first half message opens the first file");
    let half = b.store().message_at(phy).unwrap();
    // A copy put back as a check puts it.
    let put_copy = |times: &str| {
        let mut copy = half.to_message();
        copy.set_property("TRAN_PREPARED_QUEUE_OFFSET", "0");
        copy.set_property("TRANSACTION_CHECK_TIMES", times);
        let r = b.put_message_sync(&copy).unwrap();
        assert!(r.status.is_stored(), "{r:?}");
        r
    };
    let early = put_copy("1");
    assert!(early.phy_offset < 4096);
    while b.max_offset() < 4096 {
        b.put_message_sync(&rmqha_core::Message::new("T", vec![b'f'; 500]).with_queue(0)).unwrap();
    }
    let copy = put_copy("2");
    assert!(copy.phy_offset >= 4096, "{copy:?}");
    let named = if name_first { (qo, phy) } else { (early.queue_offset, early.phy_offset) };
    let rollback = call(&c, end_tx("pg", named.0, named.1, ROLLBACK, !name_first));
    assert_eq!(rollback.code, code::SUCCESS, "{rollback:?}");
    settled(&b);
    b.shutdown();
    drop(c);
    drop(b);
    // Retention's work on the first file, while the broker is stopped.
    std::fs::remove_file(dir.path().join("commitlog").join(format!("{:020}", 0))).unwrap();

    let b = master(dir.path(), "ASYNC_MASTER", &small);
    assert!(b.store().message_at(named.1).is_none(), "the half message named is gone");
    let c = client(b.remoting_addrs()[0]);
    let commit = call(&c, end_tx("pg", copy.queue_offset, copy.phy_offset, COMMIT, true));
    answered(&commit, code::SYSTEM_ERROR, "already rolled back");
    settled(&b);
    assert!(messages(&b, "T", 1).is_empty(), "a rolled-back transaction committed");
    b.shutdown();
    drop(c);
    drop(b);

    // The Checker knows it decided too: its copy is not checked back.
    let mut soon = vec![("mappedFileSizeCommitLog", "4096")];
    soon.extend_from_slice(CHECK_SOON);
    let b = master(dir.path(), "ASYNC_MASTER", &soon);
    let mut p = Producer::connect(&b, "pg");
    assert!(
        p.next_check(Duration::from_millis(1500)).is_none(),
        "name_first={name_first}: a rolled-back transaction checked back"
    );
}
