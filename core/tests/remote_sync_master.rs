//! A SYNC_MASTER and its slave seen by remote clients: a remote put is answered SUCCESS only
//! once the slave holds the record, and with FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE when
//! it cannot; waiting for the slave does not hold up the producer's connection; consumers read
//! from the master and from the slave (slaveReadEnable), are pointed at the slave when the
//! master suggests it, and find both through either broker's routes.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};
use serde_json::Value;

use remote_common::*;

fn sync_master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "SYNC_MASTER", extra)).unwrap();
    b.create_topic("T", 2).unwrap();
    b
}

fn slave(
    dir: &std::path::Path,
    master: &Broker,
    ha: std::net::SocketAddr,
    extra: &[(&str, &str)],
) -> Arc<Broker> {
    let ha = ha.to_string();
    let remoting = master.remoting_addrs()[0].to_string();
    let mut cfg = vec![("haMasterAddress", ha.as_str()), ("masterAddress", remoting.as_str())];
    cfg.extend_from_slice(extra);
    Broker::start_slave(common::broker_config(dir, "SLAVE", &cfg)).unwrap()
}

fn ha_addr(m: &Broker) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", m.ha_port()).parse().unwrap()
}

fn wait_slave_connected(m: &Broker) {
    assert!(
        common::wait_until(TIMEOUT, || m.offsets().slaves.iter().any(|s| s.transferring)),
        "the slave never connected"
    );
}

fn route(c: &RemotingClient, topic: &str) -> Value {
    let r = call(c, RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", topic));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn a_remote_sync_put_is_answered_only_once_the_slave_holds_it_and_both_serve_reads() {
    let dir = tempfile::tempdir().unwrap();
    let m = sync_master(&dir.path().join("m"), &[]);
    let s = slave(&dir.path().join("s"), &m, ha_addr(&m), &[("slaveReadEnable", "true")]);
    wait_slave_connected(&m);
    let c = client(m.remoting_addrs()[0]);
    let mut sent = Vec::new();
    for i in 0..50 {
        let body = format!("sync-{i}");
        let r = call(&c, send_v2(&Msg::new("T", body.as_bytes()).queue(i % 2).keys(&format!("k{i}"))));
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        let phy = msg_id_offset(r.ext("msgId").unwrap());
        let end = phy + m.store().record_at(phy).unwrap().bytes().len() as i64;
        // The answer came after the slave's ack: the slave already has every byte.
        assert!(s.max_offset() >= end, "put {i} answered with the slave at {} < {end}", s.max_offset());
        sent.push((i % 2, body));
    }
    // Consumed from the master and from the slave.
    assert!(m.store().wait_dispatched(TIMEOUT));
    assert!(
        common::wait_until(TIMEOUT, || s.queue_max_offset("T", 0) == 25 && s.queue_max_offset("T", 1) == 25)
    );
    for broker in [&m, &s] {
        let c = client(broker.remoting_addrs()[0]);
        for q in 0..2 {
            let mut got = Vec::new();
            let mut offset = 0;
            for _ in 0..25 {
                if offset >= 25 {
                    break;
                }
                let p = pull(&c, "T", q, offset, 32);
                assert_eq!(p.code, code::SUCCESS, "{p:?}");
                got.extend(decode_records(&p.body).into_iter().map(|r| String::from_utf8(r.body).unwrap()));
                offset = ext_i64(&p, "nextBeginOffset");
            }
            let want: Vec<String> = sent.iter().filter(|(qq, _)| *qq == q).map(|(_, b)| b.clone()).collect();
            assert_eq!(got, want, "queue {q} read from {:?}", broker.role());
        }
    }
    // The slave refuses writes.
    let cs = client(s.remoting_addrs()[0]);
    assert_eq!(call(&cs, send_v2(&Msg::new("T", b"x"))).code, code::SERVICE_NOT_AVAILABLE);
    s.shutdown();
    m.shutdown();
}

#[test]
fn a_slow_slave_delays_the_answer_not_the_connection_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let m = sync_master(&dir.path().join("m"), &[("slaveTimeout", "1500")]);
    let proxy = common::Proxy::start(ha_addr(&m));
    let s = slave(&dir.path().join("s"), &m, proxy.addr, &[]);
    wait_slave_connected(&m);
    let mut raw = Raw::connect(m.remoting_addrs()[0]);
    raw.send(send_v2(&Msg::new("T", b"warm")), 1);
    assert_eq!(raw.recv().code, code::SUCCESS);

    // The slave stalls: the put waits, and the next request on the connection is answered
    // meanwhile.
    proxy.stall(true);
    raw.send(send_v2(&Msg::new("T", b"waits")), 2);
    raw.send(
        RemotingCommand::request(request_code::GET_MAX_OFFSET).with_ext("topic", "T").with_ext("queueId", 0),
        3,
    );
    let first = raw.recv();
    assert_eq!(first.opaque, 3, "the put waiting for the slave held up the connection: {first:?}");
    // Stalled past slaveTimeout: stored, but FLUSH_SLAVE_TIMEOUT, with the header.
    let put = raw.recv();
    assert_eq!((put.opaque, put.code), (2, code::FLUSH_SLAVE_TIMEOUT), "{put:?}");
    assert!(put.ext("msgId").is_some() && put.ext("queueOffset").is_some());
    proxy.stall(false);
    raw.send(send_v2(&Msg::new("T", b"again")), 4);
    assert_eq!(raw.recv().code, code::SUCCESS);

    // No slave at all: SLAVE_NOT_AVAILABLE at once.
    s.shutdown();
    drop(s);
    proxy.cut();
    assert!(common::wait_until(TIMEOUT, || m.offsets().slaves.is_empty()));
    raw.send(send_v2(&Msg::new("T", b"alone")), 5);
    let r = raw.recv();
    assert_eq!((r.opaque, r.code), (5, code::SLAVE_NOT_AVAILABLE), "{r:?}");
    // A oneway send is stored without an answer. ("alone" was stored: counted in `before`.)
    assert!(m.store().wait_dispatched(TIMEOUT));
    let before = m.queue_max_offset("T", 0);
    let c = client(m.remoting_addrs()[0]);
    c.invoke_oneway(send_v2(&Msg::new("T", b"oneway")), TIMEOUT).unwrap();
    assert!(common::wait_until(TIMEOUT, || m.queue_max_offset("T", 0) > before));
    m.shutdown();
}

#[test]
fn routes_name_the_group_and_pulls_follow_slave_read_rules() {
    let dir = tempfile::tempdir().unwrap();
    // Every message counts as "not in memory" (ratio 0), so the master suggests the slave.
    let m = sync_master(
        &dir.path().join("m"),
        &[("slaveReadEnable", "true"), ("accessMessageInMemoryMaxRatio", "0")],
    );
    let s = slave(&dir.path().join("s"), &m, ha_addr(&m), &[("slaveReadEnable", "true")]);
    wait_slave_connected(&m);
    let cm = client(m.remoting_addrs()[0]);
    let cs = client(s.remoting_addrs()[0]);
    let (maddr, saddr) = (m.remoting_addrs()[0].to_string(), s.remoting_addrs()[0].to_string());

    // The master's routes list the slave once it has registered.
    assert!(
        common::wait_until(TIMEOUT, || route(&cm, "T")["brokerDatas"][0]["brokerAddrs"]["1"]
            == saddr.as_str()),
        "the master's route never named the slave: {}",
        route(&cm, "T")
    );
    let r = route(&cm, "T");
    assert_eq!(r["brokerDatas"][0]["brokerAddrs"]["0"], maddr.as_str());
    assert_eq!(r["queueDatas"][0]["writeQueueNums"], 2);
    let ci = call(&cm, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO));
    let ci: Value = serde_json::from_slice(&ci.body).unwrap();
    assert_eq!(ci["brokerAddrTable"]["broker-a"]["brokerAddrs"]["1"], saddr.as_str());
    // The slave's routes name the master and itself (its topics are the master's, mirrored).
    s.sync_config_now().unwrap();
    let r = route(&cs, "T");
    assert_eq!(r["brokerDatas"][0]["brokerAddrs"]["0"], maddr.as_str());
    assert_eq!(r["brokerDatas"][0]["brokerAddrs"]["1"], saddr.as_str());

    for i in 0..4 {
        assert_eq!(call(&cm, send_v2(&Msg::new("T", format!("m{i}").as_bytes()))).code, code::SUCCESS);
    }
    assert!(m.store().wait_dispatched(TIMEOUT));
    assert!(common::wait_until(TIMEOUT, || s.queue_max_offset("T", 0) == 4));
    // The master serves, and suggests the slave (whichBrokerWhenConsumeSlowly = 1).
    let p = pull(&cm, "T", 0, 0, 32);
    assert_eq!((p.code, ext_i64(&p, "suggestWhichBrokerId")), (code::SUCCESS, 1), "{p:?}");
    // The slave serves.
    let p = pull(&cs, "T", 0, 0, 32);
    assert_eq!(p.code, code::SUCCESS, "{p:?}");
    assert_eq!(decode_records(&p.body).len(), 4);
    // At the end of the queue, with its master alive, the slave sends the consumer back to it.
    let p = pull(&cs, "T", 0, 4, 32);
    assert_eq!((p.code, ext_i64(&p, "suggestWhichBrokerId")), (code::PULL_RETRY_IMMEDIATELY, 0), "{p:?}");

    // A topic created on the master by request reaches the slave by config sync.
    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC)
        .with_ext("topic", "Created")
        .with_ext("readQueueNums", 3)
        .with_ext("writeQueueNums", 3)
        .with_ext("perm", 6);
    assert_eq!(call(&cm, create.clone()).code, code::SUCCESS);
    assert_eq!(call(&cs, create).code, code::SYSTEM_ERROR, "a slave's topics are its master's");
    s.sync_config_now().unwrap();
    assert_eq!(s.topic_config("Created").unwrap().read_queue_nums, 3);
    assert_eq!(route(&cs, "Created")["queueDatas"][0]["readQueueNums"], 3);

    // A stopped slave unregisters and leaves the master's routes at once.
    s.shutdown();
    drop(s);
    let r = route(&cm, "T");
    assert!(r["brokerDatas"][0]["brokerAddrs"].get("1").is_none(), "{r}");
    m.shutdown();
}

#[test]
fn a_slave_without_slave_read_serves_and_points_at_the_master() {
    let dir = tempfile::tempdir().unwrap();
    let m = sync_master(&dir.path().join("m"), &[]);
    let s = slave(&dir.path().join("s"), &m, ha_addr(&m), &[]);
    wait_slave_connected(&m);
    let cm = client(m.remoting_addrs()[0]);
    assert_eq!(call(&cm, send_v2(&Msg::new("T", b"x"))).code, code::SUCCESS);
    assert!(common::wait_until(TIMEOUT, || s.queue_max_offset("T", 0) == 1));
    // The master dispatches on its own thread too: a SYNC answer does not mean it did.
    assert!(m.store().wait_dispatched(TIMEOUT));
    // The slave learns its topics from its config sync, not from the HA stream.
    assert!(common::wait_until(TIMEOUT, || s.topic_config("T").is_some()));
    let cs = client(s.remoting_addrs()[0]);
    // As 4.9: the slave answers with what it holds and points at the master. (It answered
    // PULL_RETRY_IMMEDIATELY without the messages but with the next offset past them: a
    // consumer pulling here with its master gone skipped them and committed the skip.)
    let p = pull(&cs, "T", 0, 0, 32);
    assert_eq!((p.code, ext_i64(&p, "suggestWhichBrokerId")), (code::SUCCESS, 0), "{p:?}");
    assert_eq!(decode_records(&p.body).len(), 1);
    assert_eq!(ext_i64(&p, "nextBeginOffset"), 1);
    // The master does not suggest the slave either.
    let p = pull(&cm, "T", 0, 0, 32);
    assert_eq!((p.code, ext_i64(&p, "suggestWhichBrokerId")), (code::SUCCESS, 0));
    // With its master gone, the same: the consumer goes on from the slave.
    m.shutdown();
    assert!(common::wait_until(TIMEOUT, || s.offsets().connected == Some(false)));
    let p = pull(&cs, "T", 0, 0, 32);
    assert_eq!(
        (p.code, decode_records(&p.body).len(), ext_i64(&p, "nextBeginOffset")),
        (code::SUCCESS, 1, 1)
    );
    // A slave accepts offset commits, as RocketMQ's does.
    let u = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET)
        .with_ext("consumerGroup", "g")
        .with_ext("topic", "T")
        .with_ext("queueId", 0)
        .with_ext("commitOffset", 1);
    assert_eq!(call(&cs, u).code, code::SUCCESS);
    s.shutdown();
    m.shutdown();
}

/// A client that pipelines puts to a SYNC_MASTER and never reads the answers. Each answer is
/// written by the thread that completes the put, the HA reader of the slave's connection:
/// once that client's socket buffers were full, the HA reader blocked in its write (up to
/// the 10 s write timeout, again for every answer), no ack was counted, and every other
/// producer's SYNC put timed out. Answers from shared threads never block now.
#[test]
fn a_client_that_never_reads_its_answers_holds_up_no_one_else() {
    let dir = tempfile::tempdir().unwrap();
    let m = sync_master(&dir.path().join("m"), &[]);
    let s = slave(&dir.path().join("s"), &m, ha_addr(&m), &[]);
    wait_slave_connected(&m);
    let mut flood = Raw::connect(m.remoting_addrs()[0]);
    // Far more answers than the broker's socket send buffer (4 MiB at most) holds. (Before,
    // the connection's own thread blocked on an answer it completed inline, stopped reading,
    // and closed the connection after the write timeout: later writes here fail.)
    for i in 0..40_000 {
        let mut req = send_v2(&Msg::new("T", b"f"));
        req.opaque = i;
        if std::io::Write::write_all(&mut flood.stream, &req.encode().unwrap()).is_err() {
            break;
        }
    }
    let c = client(m.remoting_addrs()[0]);
    for i in 0..5 {
        let r = call(&c, send_v2(&Msg::new("T", format!("other-{i}").as_bytes())));
        assert_eq!(r.code, code::SUCCESS, "another producer's put: {r:?}");
    }
    drop(flood);
    s.shutdown();
    m.shutdown();
}

/// A slave re-pointed at a new master at runtime (`set_master_address`,
/// `set_config_master_address`; here the master restarted elsewhere from a copy of its store)
/// registers with the new master and names it in its own routes. Before, both kept the
/// address the slave started with, so clients never found the slave through its new master
/// (found by a failover audit).
#[test]
fn a_re_pointed_slave_registers_with_its_new_master() {
    let dir = tempfile::tempdir().unwrap();
    let m1 = sync_master(&dir.path().join("m1"), &[]);
    let s = slave(&dir.path().join("s"), &m1, ha_addr(&m1), &[]);
    wait_slave_connected(&m1);
    let saddr = s.remoting_addrs()[0].to_string();
    let cm1 = client(m1.remoting_addrs()[0]);
    assert!(common::wait_until(TIMEOUT, || route(&cm1, "T")["brokerDatas"][0]["brokerAddrs"]["1"]
        == saddr.as_str()));
    m1.shutdown();
    drop(m1);
    common::copy_dir(&dir.path().join("m1"), &dir.path().join("m2"));
    let m2 = Broker::start_master(common::broker_config(&dir.path().join("m2"), "SYNC_MASTER", &[])).unwrap();
    let m2addr = m2.remoting_addrs()[0].to_string();
    s.set_master_address(&ha_addr(&m2).to_string()).unwrap();
    s.set_config_master_address(&m2addr).unwrap();
    assert_eq!(s.config_master_address(), m2addr);
    wait_slave_connected(&m2);
    let cm2 = client(m2.remoting_addrs()[0]);
    assert!(
        common::wait_until(TIMEOUT, || route(&cm2, "T")["brokerDatas"][0]["brokerAddrs"]["1"]
            == saddr.as_str()),
        "the new master's route never named the slave: {}",
        route(&cm2, "T")
    );
    let cs = client(s.remoting_addrs()[0]);
    assert_eq!(route(&cs, "T")["brokerDatas"][0]["brokerAddrs"]["0"], m2addr.as_str());
    s.shutdown();
    drop(s);
    // It unregistered from the master it was registered with last.
    assert!(route(&cm2, "T")["brokerDatas"][0]["brokerAddrs"].get("1").is_none());
    m2.shutdown();
}

/// A slave with some 100,000 topics (retry topics count) registers all the same: its
/// registration carried its whole topic table, which neither its master nor a name server
/// reads from a slave, and past the master's 16 MiB frame limit the slave fell out of its
/// routes (found by a scale audit).
#[test]
fn a_slave_with_many_topics_still_registers() {
    let dir = tempfile::tempdir().unwrap();
    let m = sync_master(&dir.path().join("m"), &[]);
    let sdir = dir.path().join("s");
    {
        let tables = rmqha_core::metadata::ConfigTables::open(&sdir).unwrap();
        let many =
            (0..100_000).map(|i| rmqha_core::metadata::TopicConfig::new(format!("%RETRY%group-{i:06}")));
        tables.topics().create_all_if_absent(many).unwrap();
        assert!(std::fs::metadata(tables.topics().path()).unwrap().len() > 16 << 20);
    }
    let s = slave(&sdir, &m, ha_addr(&m), &[]);
    wait_slave_connected(&m);
    let saddr = s.remoting_addrs()[0].to_string();
    let cm = client(m.remoting_addrs()[0]);
    assert!(
        common::wait_until(TIMEOUT, || route(&cm, "T")["brokerDatas"][0]["brokerAddrs"]["1"]
            == saddr.as_str()),
        "the master's route never named the slave: {}",
        route(&cm, "T")
    );
    s.shutdown();
    m.shutdown();
}
