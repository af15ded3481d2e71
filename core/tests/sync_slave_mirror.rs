//! A slave mirrors its master's four tables over the remoting protocol: everything after one
//! sync, persisted under the slave's `config/`; later changes on the next periodic sync; the
//! topic request on the VIP port (main port − 2) with a fallback to the main port; unchanged
//! tables not rewritten; consumer offsets never moved back by a master restarted with stale
//! ones; the mirror surviving a slave restart; the master address changing at run time.

mod sync_common;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqha_core::metadata::{
    ConfigTables, ConsumerOffsetWrapper, DelayOffsetWrapper, SubscriptionGroupConfig,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigWrapper,
};
use rmqha_core::sync::{SkipReason, SlaveSynchronizer, SyncTable, TableOutcome};
use sync_common::{Master, sync_config, wait_until};

const WAIT: Duration = Duration::from_secs(10);

/// Fills a master's tables with something in each.
fn populate(tables: &ConfigTables) {
    tables.topics().put_topic(TopicConfig::with_queues("OrderTopic", 8, 8, 6)).unwrap();
    let mut ordered = TopicConfig::new("FifoTopic");
    ordered.order = true;
    ordered.attributes.insert("+message.type".into(), "FIFO".into());
    tables.topics().put_topic(ordered).unwrap();

    let mut group = SubscriptionGroupConfig::new("billing");
    group.retry_max_times = 3;
    group.consume_message_orderly = true;
    tables.subscription_groups().put_group(group).unwrap();
    tables.subscription_groups().put_group(SubscriptionGroupConfig::new("audit")).unwrap();

    let offsets = tables.consumer_offsets();
    offsets.commit("billing", "OrderTopic", 0, 120);
    offsets.commit("billing", "OrderTopic", 1, 95);
    offsets.commit("audit", "FifoTopic", 0, 7);

    tables.delay_offsets().update_offset(1, 42);
    tables.delay_offsets().update_offset(3, 9);
}

fn assert_mirrors(slave: &ConfigTables, master: &ConfigTables) {
    assert_eq!(slave.topics().wrapper(), master.topics().wrapper(), "topics and their version");
    // Compared field by field: a file always carries `forbiddenTable`, a body may not.
    let (s, m) = (slave.subscription_groups(), master.subscription_groups());
    assert_eq!((s.data_version(), s.all()), (m.data_version(), m.all()), "groups and their version");
    assert_eq!(slave.consumer_offsets().all(), master.consumer_offsets().all());
    assert_eq!(slave.delay_offsets().all(), master.delay_offsets().all());
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn one_sync_mirrors_all_four_tables_and_writes_them_to_disk() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)),
    );

    let report = sync.sync_all().unwrap();
    assert!(report.is_complete());
    assert_eq!(report.written(), 4, "{report:?}");
    assert_eq!(
        report.topics_answered_by.as_deref(),
        Some(master.vip.unwrap().to_string().as_str()),
        "the topic request goes to the VIP port"
    );
    assert_mirrors(&slave, &master.tables);

    // On disk under the slave's config dir, as RocketMQ names the files.
    let dir = dirs.1.path().join("config");
    let topics = TopicConfigWrapper::decode(&read(&dir.join("topics.json")), "file").unwrap();
    assert_eq!(topics, master.tables.topics().wrapper());
    let groups =
        SubscriptionGroupWrapper::decode(&read(&dir.join("subscriptionGroup.json")), "file").unwrap();
    assert_eq!(groups.subscription_group_table, master.tables.subscription_groups().all());
    let offsets = ConsumerOffsetWrapper::decode(&read(&dir.join("consumerOffset.json")), "file").unwrap();
    assert_eq!(offsets.offset_table, master.tables.consumer_offsets().all());
    let delay = DelayOffsetWrapper::decode(&read(&dir.join("delayOffset.json")), "file").unwrap();
    assert_eq!(delay.offset_table, master.tables.delay_offsets().all());

    let last = sync.last_sync().unwrap();
    assert!(last.is_ok());
    assert_eq!(last.master_address, master.addr());
    assert_eq!(last.tables_written, 4);
    let status = sync.status();
    assert_eq!((status.successes, status.failures), (1, 0));
    assert_eq!(status.master_address, Some(master.addr()));
}

#[test]
fn unchanged_tables_are_not_rewritten() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)),
    );
    assert_eq!(sync.sync_all().unwrap().written(), 4);

    let dir = dirs.1.path().join("config");
    let files = ["topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"];
    let mtimes: Vec<_> =
        files.iter().map(|f| fs::metadata(dir.join(f)).unwrap().modified().unwrap()).collect();

    let report = sync.sync_all().unwrap();
    assert_eq!(report.written(), 0, "{report:?}");
    for table in SyncTable::ALL {
        assert!(matches!(report.outcome(table), TableOutcome::Unchanged), "{table}: {report:?}");
    }
    for (f, before) in files.iter().zip(&mtimes) {
        assert_eq!(fs::metadata(dir.join(f)).unwrap().modified().unwrap(), *before, "{f} was rewritten");
        // A rewrite would have copied the first version to .bak.
        assert!(!dir.join(format!("{f}.bak")).exists(), "{f} was rewritten");
    }

    // One change on the master rewrites only that table.
    master.tables.topics().put_topic(TopicConfig::new("NewTopic")).unwrap();
    let report = sync.sync_all().unwrap();
    assert!(report.topics.is_applied());
    assert_eq!(report.written(), 1, "{report:?}");
    assert!(slave.topics().contains("NewTopic"));
    assert_eq!(sync.status().successes, 3);
}

#[test]
fn the_background_thread_mirrors_changes_on_the_next_interval() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_millis(100)),
    );
    sync.start().unwrap();
    assert!(sync.is_running());
    assert!(wait_until(WAIT, || slave.topics().contains("OrderTopic")), "first sync at once");

    master.tables.topics().put_topic(TopicConfig::with_queues("Later", 2, 2, 6)).unwrap();
    master.tables.topics().delete_topic("FifoTopic").unwrap();
    master.tables.subscription_groups().put_group(SubscriptionGroupConfig::new("late-group")).unwrap();
    master.tables.consumer_offsets().commit("billing", "OrderTopic", 0, 500);
    master.tables.delay_offsets().update_offset(2, 77);
    assert!(
        wait_until(WAIT, || {
            slave.topics().contains("Later")
                && !slave.topics().contains("FifoTopic")
                && slave.subscription_groups().contains("late-group")
                && slave.consumer_offsets().query("billing", "OrderTopic", 0) == Some(500)
                && slave.delay_offsets().offset(2) == Some(77)
        }),
        "changes mirrored by a periodic sync"
    );
    assert_mirrors(&slave, &master.tables);

    // Shutdown interrupts the wait for the next interval instead of sleeping it out.
    let long = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(3600)),
    );
    long.start().unwrap();
    assert!(wait_until(WAIT, || long.last_sync().is_some()));
    let t = Instant::now();
    long.shutdown();
    // Not the hour-long interval (a loaded machine may take a while, never that long).
    assert!(t.elapsed() < Duration::from_secs(10), "shutdown took {:?}", t.elapsed());
    assert!(!long.is_running());

    sync.shutdown();
    assert!(!sync.is_running());
    assert_eq!(sync.sync_all().unwrap().skipped, Some(SkipReason::ShutDown));
}

#[test]
fn request_sync_and_a_new_master_address_sync_at_once() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    // An hour between syncs: anything that happens within the test was asked for.
    let sync = SlaveSynchronizer::new(Arc::clone(&slave), None, sync_config(Duration::from_secs(3600)));
    sync.start().unwrap();
    assert_eq!(sync.sync_all().unwrap().skipped, Some(SkipReason::NoMasterAddress));
    assert!(sync.last_sync().is_none(), "without a master nothing is attempted");

    sync.set_master_address(Some(&master.addr()));
    assert!(wait_until(WAIT, || slave.topics().contains("OrderTopic")), "learning the master syncs at once");

    master.tables.topics().put_topic(TopicConfig::new("Requested")).unwrap();
    sync.request_sync();
    assert!(wait_until(WAIT, || slave.topics().contains("Requested")), "request_sync wakes the thread");

    // Another master (e.g. after a failover): its tables replace the first one's.
    let other = Master::start(dirs.2.path(), false);
    other.tables.topics().put_topic(TopicConfig::new("OtherMastersTopic")).unwrap();
    sync.set_master_address(Some(&other.addr()));
    assert!(wait_until(WAIT, || slave.topics().contains("OtherMastersTopic")));
    assert!(!slave.topics().contains("OrderTopic"));
    assert!(wait_until(WAIT, || sync.last_sync().is_some_and(|s| s.master_address == other.addr())));
    assert_eq!(sync.master_address(), Some(other.addr()));
    sync.shutdown();
}

#[test]
fn topic_request_falls_back_to_the_main_port_without_a_vip_listener() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), false);
    populate(&master.tables);
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)),
    );
    let report = sync.sync_all().unwrap();
    assert_eq!(report.topics_answered_by, Some(master.addr()));
    assert_eq!(report.written(), 4);
    assert_mirrors(&slave, &master.tables);

    // With the VIP channel off, the main port answers without trying port − 2.
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)).with_vip_channel(false),
    );
    master.tables.topics().put_topic(TopicConfig::new("X")).unwrap();
    let report = sync.sync_all().unwrap();
    assert_eq!(report.topics_answered_by, Some(master.addr()));
    assert!(slave.topics().contains("X"));
}

#[test]
fn a_master_restarted_with_stale_offsets_does_not_move_the_slave_back() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    // What the master's disk holds before its consumers move on: the stale state it will
    // come back with (its flush lagged, or its disk was restored from a backup).
    master.tables.persist_all().unwrap();
    copy_files(&dirs.0.path().join("config"), &dirs.2.path().join("config"));

    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)),
    );
    master.tables.consumer_offsets().commit("billing", "OrderTopic", 0, 900);
    sync.sync_all().unwrap();
    assert_eq!(slave.consumer_offsets().query("billing", "OrderTopic", 0), Some(900));
    // While the master is away, consumers commit their progress to the slave.
    slave.consumer_offsets().commit("audit", "FifoTopic", 0, 60);

    // The master restarts on the same ports with its stale files, then a consumer it still
    // serves commits a new queue, and moves another one forward.
    let master = master.restart_on(dirs.2.path());
    assert_eq!(master.tables.consumer_offsets().query("billing", "OrderTopic", 0), Some(120));
    master.tables.consumer_offsets().commit("billing", "OrderTopic", 1, 300);
    master.tables.consumer_offsets().commit("billing", "OrderTopic", 2, 5);

    let report = sync.sync_all().unwrap();
    assert!(report.consumer_offsets.is_applied());
    let offsets = slave.consumer_offsets();
    assert_eq!(offsets.query("billing", "OrderTopic", 0), Some(900), "not moved back to 120");
    assert_eq!(offsets.query("audit", "FifoTopic", 0), Some(60), "not moved back to 7");
    assert_eq!(offsets.query("billing", "OrderTopic", 1), Some(300), "moved forward");
    assert_eq!(offsets.query("billing", "OrderTopic", 2), Some(5), "new queue added");

    // And what is on disk agrees.
    let reopened = ConfigTables::open(dirs.1.path()).unwrap();
    assert_eq!(reopened.consumer_offsets().all(), offsets.all());
}

#[test]
fn the_mirror_survives_a_slave_restart() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Master::start(dirs.0.path(), true);
    populate(&master.tables);
    {
        let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
        let sync = SlaveSynchronizer::new(
            Arc::clone(&slave),
            Some(&master.addr()),
            sync_config(Duration::from_millis(100)),
        );
        sync.start().unwrap();
        assert!(wait_until(WAIT, || sync.status().successes > 0));
        sync.shutdown();
    }

    // A new process: new tables on the same directory, before any sync.
    let slave = Arc::new(ConfigTables::open(dirs.1.path()).unwrap());
    assert_mirrors(&slave, &master.tables);
    assert_eq!(
        slave.delay_offsets().verbatim().as_deref().map(str::as_bytes),
        Some(read(&dirs.1.path().join("config/delayOffset.json")).as_slice())
    );

    // Its first sync finds nothing to do.
    let sync = SlaveSynchronizer::new(
        Arc::clone(&slave),
        Some(&master.addr()),
        sync_config(Duration::from_secs(60)),
    );
    let report = sync.sync_all().unwrap();
    assert_eq!(report.written(), 0, "{report:?}");
}

/// Copies the files of one directory into another (created).
fn copy_files(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
