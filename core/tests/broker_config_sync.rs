//! A slave broker mirrors its master's topics, subscription groups, consumer offsets and delay
//! offsets over remoting; config writes on the slave are refused, consumer offsets accepted.

mod common;

use std::time::Duration;

use common::{broker_config, wait_until};
use rmqha_core::metadata::SubscriptionGroupConfig;
use rmqha_core::{Broker, Error};

/// A slave replicating from `master` and syncing its config every 100 ms.
fn slave_of(master: &Broker, dir: &std::path::Path) -> std::sync::Arc<Broker> {
    Broker::start_slave(broker_config(
        dir,
        "SLAVE",
        &[
            ("haMasterAddress", &format!("127.0.0.1:{}", master.ha_port())),
            ("masterAddress", &format!("127.0.0.1:{}", master.listen_port())),
            ("slaveSyncIntervalMs", "100"),
        ],
    ))
    .unwrap()
}

#[test]
fn slave_mirrors_the_masters_config_tables() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    master.create_topic("OrderTopic", 8).unwrap();
    master.put_subscription_group(SubscriptionGroupConfig::new("order-consumers")).unwrap();
    // Offsets up to 80 in queue 3 (a commit past a queue's end is refused).
    for i in 0..80 {
        master.put_message_sync(&common::message("OrderTopic", 3, i, 50)).unwrap();
    }
    assert!(master.store().wait_dispatched(Duration::from_secs(10)));
    master.commit_consumer_offset("order-consumers", "OrderTopic", 3, 42).unwrap();
    master.set_delay_offset(2, 17).unwrap();
    let slave = slave_of(&master, sd.path());
    // The first sync runs at start.
    assert!(wait_until(Duration::from_secs(10), || slave.topic_config("OrderTopic").is_some()));
    assert_eq!(slave.topic_config("OrderTopic").unwrap().write_queue_nums, 8);
    assert!(wait_until(Duration::from_secs(10), || slave.consumer_offset(
        "order-consumers",
        "OrderTopic",
        3
    ) == 42));
    assert!(wait_until(Duration::from_secs(10), || slave.subscription_group("order-consumers").is_some()
        && slave.delay_offset(2) == Some(17)));
    // Persisted under the slave's config/ directory.
    let topics = std::fs::read_to_string(sd.path().join("config/topics.json")).unwrap();
    assert!(topics.contains("OrderTopic"));

    // Changes on the master arrive within an interval.
    master.create_topic("PayTopic", 4).unwrap();
    master.commit_consumer_offset("order-consumers", "OrderTopic", 3, 50).unwrap();
    assert!(wait_until(Duration::from_secs(10), || slave.topic_config("PayTopic").is_some()
        && slave.consumer_offset("order-consumers", "OrderTopic", 3) == 50));

    // The slave refuses config writes, accepts consumer offsets, and a newer slave offset is
    // not moved back by a stale master (RocketMQ issue 1094).
    assert!(matches!(slave.create_topic("X", 1), Err(Error::NotMaster(_))));
    assert!(matches!(slave.set_delay_offset(1, 1), Err(Error::NotMaster(_))));
    assert!(wait_until(Duration::from_secs(10), || slave.queue_max_offset("OrderTopic", 3) == 80));
    slave.commit_consumer_offset("order-consumers", "OrderTopic", 3, 70).unwrap();
    let report = slave.sync_config_now().unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(slave.consumer_offset("order-consumers", "OrderTopic", 3), 70);
    assert!(slave.offsets().last_config_sync_ms.is_some());
    assert_eq!(slave.offsets().last_config_sync_error, None);
    assert!(matches!(master.sync_config_now(), Err(Error::NotSlave(_))));

    // After a slave restart the mirrored tables are still there.
    slave.shutdown();
    drop(slave);
    master.shutdown();
    let slave = Broker::start_slave(broker_config(
        sd.path(),
        "SLAVE",
        &[("haMasterAddress", "127.0.0.1:1"), ("masterAddress", "")],
    ))
    .unwrap();
    assert!(slave.topic_config("PayTopic").is_some());
    assert_eq!(slave.consumer_offset("order-consumers", "OrderTopic", 3), 70);
    slave.shutdown();
}

/// A table whose answer passes remoting's usual 16 MiB frame limit (here 40,000 groups, some
/// 20 MB) still reaches the slave: before, the slave's client refused the frame on every sync
/// and the table was never mirrored (RocketMQ's slave fails the same way).
#[test]
fn a_table_larger_than_a_usual_frame_is_mirrored() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Broker::start_master(broker_config(md.path(), "SYNC_MASTER", &[])).unwrap();
    let pad = "x".repeat(200);
    let groups = (0..40_000).map(|i| SubscriptionGroupConfig::new(format!("g{i}-{pad}")));
    master.tables().subscription_groups().create_all_if_absent(groups).unwrap();
    let on_disk = std::fs::metadata(md.path().join("config").join("subscriptionGroup.json")).unwrap().len();
    assert!(on_disk > 16 << 20, "{on_disk} bytes");
    let slave = slave_of(&master, sd.path());
    let last = format!("g39999-{pad}");
    assert!(wait_until(Duration::from_secs(60), || slave.subscription_group(&last).is_some()));
    slave.shutdown();
    master.shutdown();
}

/// With listenPort=0 the fast port was picked on its own, anywhere, while slaves look for it
/// at the master's port − 2 and take whatever answers there as final: another broker's
/// topics, say. Both ports are now picked so that fast = port − 2.
#[test]
fn a_master_on_port_zero_puts_its_fast_port_at_port_minus_two() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let m = Broker::start_master(broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
        let addrs = m.remoting_addrs();
        assert_eq!(addrs.len(), 2, "{addrs:?}");
        assert_eq!(addrs[1].port(), addrs[0].port() - 2, "{addrs:?}");
        m.shutdown();
    }
}

/// Consumer offsets are kept under `topic@group`: an `@` in either name could make two pairs
/// share one entry (`A@B` + `C` and `A` + `B@C`), so names RocketMQ would refuse are refused.
#[test]
fn consumer_offsets_take_only_valid_names() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_master(common::broker_config(dir.path(), "ASYNC_MASTER", &[])).unwrap();
    for i in 0..3 {
        b.put_message_sync(&common::message("A", 0, i, 50)).unwrap();
    }
    assert!(b.store().wait_dispatched(Duration::from_secs(10)));
    b.commit_consumer_offset("B@C", "A", 0, 5).unwrap_err();
    b.commit_consumer_offset("C", "A@B", 0, 9).unwrap_err();
    b.commit_consumer_offset("", "A", 0, 9).unwrap_err();
    b.commit_consumer_offset("g", "A", -1, 9).unwrap_err();
    b.commit_consumer_offset("%RETRY%g_1-a|b", "A", 0, 3).unwrap();
    assert_eq!(b.consumer_offset("%RETRY%g_1-a|b", "A", 0), 3);
    assert_eq!(b.consumer_offset("C", "A@B", 0), -1);
}
