//! `Broker::metrics`: the Prometheus text a scrape gets. Its counters follow what the
//! puts were answered (stored, waited with their final status, refused), its gauges follow
//! the offsets, and every line is in the exposition format.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use rmqha_core::store::PutStatus;
use rmqha_core::{Broker, Message};

const TIMEOUT: Duration = Duration::from_secs(20);

/// The samples of a scrape (`name{labels}` to value), checking the format on the way: every
/// sample belongs to a family declared by a `# TYPE` line before it, and every value parses.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut families = Vec::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("a TYPE line names a family and its type");
            assert!(["gauge", "counter", "histogram"].contains(&kind), "{line}");
            families.push(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (key, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let name = key.split('{').next().unwrap();
        assert!(
            families
                .iter()
                .any(|f| name == f || name.strip_prefix(f.as_str()).is_some_and(|s| s.starts_with('_'))),
            "{name} has no TYPE line before it"
        );
        let value: f64 = value.parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert!(out.insert(key.to_string(), value).is_none(), "{key} twice");
    }
    out
}

fn get(s: &BTreeMap<String, f64>, key: &str) -> f64 {
    *s.get(key).unwrap_or_else(|| panic!("no {key} in {s:#?}"))
}

#[test]
fn a_sync_masters_counters_follow_its_puts_answers() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start_master(common::broker_config(
        &dir.path().join("m"),
        "SYNC_MASTER",
        &[("slaveTimeout", "400")],
    ))
    .unwrap();
    // Through a proxy, so that the slave can be stalled while connected.
    let proxy = common::Proxy::start(format!("127.0.0.1:{}", master.ha_port()).parse().unwrap());
    let proxied = proxy.addr.to_string();
    let slave = Broker::start_slave(common::broker_config(
        &dir.path().join("s"),
        "SLAVE",
        &[("haMasterAddress", proxied.as_str())],
    ))
    .unwrap();
    assert!(common::wait_until(TIMEOUT, || master.offsets().slaves.iter().any(|s| s.transferring)));

    for i in 0..20 {
        let r = master.put_message_sync(&common::message("T", 0, i, 100)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
    }
    let batch: Vec<Message> = (0..3).map(|i| common::message("T", 1, i, 50)).collect();
    assert_eq!(master.put_messages(&batch).unwrap().wait().status, PutStatus::PutOk);
    // Refused: nothing stored.
    assert!(master.put_message_sync(&Message::new("bad topic", b"x".to_vec())).is_err());

    let max = master.max_offset();
    assert!(common::wait_until(TIMEOUT, || get(&samples(&master.metrics()), "rmqha_slave_ack_offset_bytes")
        == max as f64));
    let text = master.metrics();
    let s = samples(&text);
    assert_eq!(get(&s, "rmqha_info{broker_name=\"broker-a\",role=\"SYNC_MASTER\",version=\"0.1.0\"}"), 1.0);
    assert_eq!(get(&s, "rmqha_commitlog_max_offset_bytes"), max as f64);
    assert_eq!(get(&s, "rmqha_puts_stored_total"), 21.0);
    assert_eq!(get(&s, "rmqha_put_messages_stored_total"), 23.0);
    assert_eq!(get(&s, "rmqha_puts_waited_total{status=\"PUT_OK\"}"), 21.0);
    assert_eq!(get(&s, "rmqha_puts_waited_total{status=\"FLUSH_SLAVE_TIMEOUT\"}"), 0.0);
    assert_eq!(get(&s, "rmqha_puts_refused_total{status=\"MESSAGE_ILLEGAL\"}"), 1.0);
    assert_eq!(get(&s, "rmqha_puts_refused_total{status=\"SERVICE_NOT_AVAILABLE\"}"), 0.0);
    assert_eq!(get(&s, "rmqha_ha_slaves"), 1.0);
    let addr = master.offsets().slaves[0].addr;
    assert_eq!(get(&s, &format!("rmqha_ha_slave_ack_offset_bytes{{slave=\"{addr}\"}}")), max as f64);
    assert_eq!(get(&s, &format!("rmqha_ha_slave_lag_bytes{{slave=\"{addr}\"}}")), 0.0);
    // The histogram: cumulative buckets ending in the count, every wait within 400 ms.
    let buckets: Vec<f64> =
        s.iter().filter(|(k, _)| k.starts_with("rmqha_put_wait_seconds_bucket")).map(|(_, v)| *v).collect();
    assert_eq!(buckets.len(), 17, "{text}");
    assert_eq!(get(&s, "rmqha_put_wait_seconds_bucket{le=\"+Inf\"}"), 21.0);
    assert_eq!(get(&s, "rmqha_put_wait_seconds_bucket{le=\"0.5\"}"), 21.0);
    assert_eq!(get(&s, "rmqha_put_wait_seconds_count"), 21.0);
    assert!(get(&s, "rmqha_put_wait_seconds_sum") > 0.0);

    let st = samples(&slave.metrics());
    assert_eq!(get(&st, "rmqha_info{broker_name=\"broker-a\",role=\"SLAVE\",version=\"0.1.0\"}"), 1.0);
    assert_eq!(get(&st, "rmqha_ha_master_connected"), 1.0);
    assert_eq!(get(&st, "rmqha_puts_stored_total"), 0.0);
    assert!(common::wait_until(TIMEOUT, || get(
        &samples(&slave.metrics()),
        "rmqha_commitlog_max_offset_bytes"
    ) == max as f64));

    // The slave stalled: the next put times out waiting for it; gone: the one after finds none.
    proxy.stall(true);
    let r = master.put_message_sync(&common::message("T", 0, 99, 100)).unwrap();
    assert_eq!(r.status, PutStatus::FlushSlaveTimeout);
    slave.shutdown();
    drop(slave);
    proxy.stall(false);
    proxy.cut();
    assert!(common::wait_until(TIMEOUT, || master.offsets().slaves.is_empty()));
    let r = master.put_message_sync(&common::message("T", 0, 100, 100)).unwrap();
    assert_eq!(r.status, PutStatus::SlaveNotAvailable);
    let s = samples(&master.metrics());
    assert_eq!(get(&s, "rmqha_puts_stored_total"), 23.0);
    assert_eq!(get(&s, "rmqha_puts_waited_total{status=\"FLUSH_SLAVE_TIMEOUT\"}"), 1.0);
    assert_eq!(get(&s, "rmqha_puts_waited_total{status=\"SLAVE_NOT_AVAILABLE\"}"), 1.0);
    assert_eq!(get(&s, "rmqha_put_wait_seconds_count"), 23.0);
    // The timed-out wait took the 400 ms slaveTimeout: above the 0.25 s bound.
    assert_eq!(get(&s, "rmqha_put_wait_seconds_bucket{le=\"0.25\"}"), 22.0);
    assert_eq!(get(&s, "rmqha_ha_slaves"), 0.0);

    master.shutdown();
    assert!(master.put_message_sync(&common::message("T", 0, 101, 100)).is_err());
    let s = samples(&master.metrics());
    assert_eq!(get(&s, "rmqha_puts_refused_total{status=\"SERVICE_NOT_AVAILABLE\"}"), 1.0);
}

#[test]
fn an_async_masters_puts_are_counted_without_waits() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..50 {
        assert_eq!(
            master.put_message_sync(&common::message("T", i as i32 % 4, i, 64)).unwrap().status,
            PutStatus::PutOk
        );
    }
    let s = samples(&master.metrics());
    assert_eq!(get(&s, "rmqha_puts_stored_total"), 50.0);
    assert_eq!(get(&s, "rmqha_put_wait_seconds_count"), 0.0);
    assert_eq!(get(&s, "rmqha_puts_waited_total{status=\"PUT_OK\"}"), 0.0);
    assert_eq!(get(&s, "rmqha_ha_slaves"), 0.0);
}
