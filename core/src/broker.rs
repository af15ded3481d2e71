//! `Broker`: the parts of a store wired for a role, started in order and stopped in reverse.
//!
//! A master runs the store, the HA server and the remoting server; a slave runs the store, the
//! HA client, the remoting server and the config synchronizer. `put_message_sync` returns when
//! the answer is final for the role: stored; flushed if SYNC_FLUSH; acked by a slave (or timed
//! out) if SYNC_MASTER.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::broker_admin::AdminProcessor;
use crate::config::{BrokerConfig, BrokerRole, ConfigError};
use crate::error::{Error, Result};
use crate::ha::{HaMaster, HaMasterOptions, HaSlave, HaSlaveOptions, RefusedSlave, SlaveInfo};
use crate::message::Message;
use crate::metadata::{ConfigTables, SubscriptionGroupConfig, TopicConfig};
use crate::remoting::{
    Dispatch, Handled, RemotingCommand, RemotingServer, RequestContext, RequestHandler, ServerConfig,
};
use crate::store::flush::StopSignal;
use crate::store::{
    GetMessageResult, MessageStore, PutHandle, PutResult, PutStatus, StoredMessage, TimeBoundary,
};
use crate::sync::{SlaveSyncConfig, SlaveSynchronizer, SyncReport};

/// One snapshot of a broker's offsets and replication state (API.md `offsets()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offsets {
    pub role: BrokerRole,
    pub max_offset: i64,
    pub min_offset: i64,
    pub flushed_offset: i64,
    /// Master: highest offset acked by any slave; slave: highest offset it acked.
    pub slave_ack_offset: i64,
    pub dispatch_behind_bytes: u64,
    pub listen_port: u16,
    pub ha_port: u16,
    /// Master: connected slaves.
    pub slaves: Vec<SlaveInfo>,
    /// Master: slaves refused recently, with the reason.
    pub refused_slaves: Vec<RefusedSlave>,
    /// Slave: the master's HA address.
    pub master_address: Option<String>,
    /// Slave: whether it is connected to the master.
    pub connected: Option<bool>,
    /// Slave: why its last HA connection ended.
    pub last_ha_error: Option<String>,
    /// Slave: when the last config sync from the master started (ms since the epoch).
    pub last_config_sync_ms: Option<i64>,
    /// Slave: what failed in the last config sync, if anything.
    pub last_config_sync_error: Option<String>,
}

/// Answers requests once the broker has wired its handler; until then, SYSTEM_BUSY.
struct LateHandler(OnceLock<Arc<dyn RequestHandler>>);

impl RequestHandler for LateHandler {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        match self.0.get() {
            Some(h) => h.handle(request, ctx),
            None => Handled::Respond(RemotingCommand::response_to(
                &request,
                crate::remoting::response_code::SYSTEM_BUSY,
                Some("broker starting"),
            )),
        }
    }

    fn connection_closed(&self, peer: SocketAddr) {
        if let Some(h) = self.0.get() {
            h.connection_closed(peer);
        }
    }
}

/// The settings a running broker changes (UPDATE_BROKER_CONFIG, [`Broker::update_config`]);
/// every other key takes effect only at a start. The order is that of `Broker::switches`.
pub const RUNTIME_CONFIG_KEYS: [&str; 5] = [
    "brokerPermission",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "slaveReadEnable",
    "notifyConsumerIdsChangedEnable",
];

/// A running broker.
pub struct Broker {
    config: Arc<BrokerConfig>,
    store: Arc<MessageStore>,
    tables: Arc<ConfigTables>,
    ha_master: Option<HaMaster>,
    ha_slave: Option<HaSlave>,
    synchronizer: Option<SlaveSynchronizer>,
    remoting: RemotingServer,
    /// Long polling and a slave's registration with its master (`crate::processor`).
    client_services: OnceLock<crate::processor::ClientServices>,
    /// With `aclEnable`: how often the ACL file was reloaded or a changed version refused.
    acl_reloads: OnceLock<Option<Arc<crate::acl::AclReloads>>>,
    listen_port: u16,
    ha_port: u16,
    /// `brokerPermission` now (UPDATE_BROKER_CONFIG changes it at runtime).
    permission: std::sync::atomic::AtomicI32,
    /// The switches of [`RUNTIME_CONFIG_KEYS`] now, by their index there (0 unused).
    switches: [AtomicBool; RUNTIME_CONFIG_KEYS.len()],
    /// Held through an `update_config`, so that two updates' values reach memory and the
    /// file in the same order.
    updating_config: Mutex<()>,
    stop: Arc<StopSignal>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    shut: AtomicBool,
    /// Held through `shutdown` (see there).
    stopping: Mutex<()>,
    /// What went wrong in `shutdown`.
    stop_problems: Mutex<Vec<String>>,
    /// Put and pull rates and daily totals (GET_BROKER_RUNTIME_INFO).
    stats: Arc<crate::broker_stats::BrokerStats>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("role", &self.config.broker_role)
            .field("store", &self.config.store_root())
            .field("listen_port", &self.listen_port)
            .field("ha_port", &self.ha_port)
            .finish()
    }
}

/// A master's consumer offsets past the end of their queue (recovery cut a tail a crash tore
/// or lost, or the store was cut back by hand) go back to that end: the master writes its
/// next messages there, and a consumer at the old offset would skip them (or, pulling past
/// the end, be sent back to the queue's start). Queues the store does not have are left.
fn cap_consumer_offsets(store: &MessageStore, tables: &ConfigTables) {
    let moved = tables
        .consumer_offsets()
        .cap_at(|topic, queue_id| store.existing_queue_max_offset(topic, queue_id).unwrap_or(i64::MAX));
    if moved > 0 {
        tracing::warn!(
            "{moved} consumer offsets were past the end of their queue (the log's tail was lost or cut) and \
             were moved back to it, so that consumers get the messages written there next"
        );
    }
}

/// Binds the remoting server on `listenPort` and, with `fastListenEnable`, the fast port at
/// `listenPort − 2`, where a slave's config sync (RocketMQ's too) looks for it. With
/// `listenPort=0` both are picked so that this holds: picking each freely put the fast port
/// anywhere, and a slave asked whatever else listened at port − 2 (another broker, whose
/// topics it would have mirrored).
fn bind_remoting(
    config: &BrokerConfig,
    ip: IpAddr,
    handler: Arc<LateHandler>,
    server_config: ServerConfig,
) -> Result<RemotingServer> {
    let fast_err = |e: crate::remoting::RemotingError, fast: u16| match e {
        crate::remoting::RemotingError::Bind { addr, source } if addr.port() == fast => {
            Error::Store(format!(
                "cannot bind the fast remoting port {addr} (listenPort − 2; fastListenEnable=false turns it off): {source}"
            ))
        }
        e => e.into(),
    };
    if !config.fast_listen_enable {
        let addr = SocketAddr::new(ip, config.listen_port as u16);
        return Ok(RemotingServer::bind(&[addr], handler, server_config)?);
    }
    if config.listen_port != 0 {
        let (main, fast) = (config.listen_port as u16, (config.listen_port - 2).max(0) as u16);
        let addrs = [SocketAddr::new(ip, main), SocketAddr::new(ip, fast)];
        return RemotingServer::bind(&addrs, handler, server_config).map_err(|e| fast_err(e, fast));
    }
    // A free port p whose p − 2 is free too; another process may take either between the
    // probe and the bind, so a few tries.
    let mut last = None;
    for _ in 0..64 {
        let probe = std::net::TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| Error::Store(format!("cannot bind a remoting port on {ip}: {e}")))?;
        let main = probe.local_addr().map_err(|e| Error::Store(e.to_string()))?.port();
        drop(probe);
        if main < 3 {
            continue;
        }
        let addrs = [SocketAddr::new(ip, main), SocketAddr::new(ip, main - 2)];
        match RemotingServer::bind(&addrs, handler.clone(), server_config.clone()) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Store(format!(
        "cannot find a free port p with p − 2 free for the fast port on {ip} (listenPort=0): {}",
        last.map_or_else(|| "no port above 2".to_string(), |e| e.to_string())
    )))
}

impl Broker {
    /// Starts a master (ASYNC_MASTER or SYNC_MASTER); refuses a SLAVE config.
    pub fn start_master(config: BrokerConfig) -> Result<Arc<Broker>> {
        if config.broker_role == BrokerRole::Slave {
            return Err(Error::NotMaster(
                "start_master needs brokerRole ASYNC_MASTER or SYNC_MASTER, not SLAVE".into(),
            ));
        }
        Self::start(config)
    }

    /// Starts a slave; refuses a master config.
    pub fn start_slave(config: BrokerConfig) -> Result<Arc<Broker>> {
        if config.broker_role != BrokerRole::Slave {
            return Err(Error::NotSlave(format!(
                "start_slave needs brokerRole SLAVE, not {}",
                config.broker_role
            )));
        }
        Self::start(config)
    }

    /// Starts a broker from a properties file, in the role it names.
    pub fn start_from_file(path: impl AsRef<Path>) -> Result<Arc<Broker>> {
        Self::start(BrokerConfig::from_properties_file(path)?)
    }

    /// Starts a broker in the role its config names.
    pub fn start(mut config: BrokerConfig) -> Result<Arc<Broker>> {
        config.validate()?;
        if config.broker_role == BrokerRole::Slave && config.ha_master_address.is_empty() {
            return Err(Error::Config(ConfigError::new(
                "a SLAVE needs haMasterAddress (the master's HA host:port)",
            )));
        }
        // Logged here, not by the config module: the bindings pass that module's warnings to
        // the host their own way before the start, and show only these on standard error.
        for w in config.role_warnings() {
            tracing::warn!("{w}");
            if !config.warnings.contains(&w) {
                config.warnings.push(w);
            }
        }
        let bind_ip: IpAddr = config.bind_address.parse().map_err(|_| {
            Error::Config(ConfigError::new(format!(
                "bindAddress {:?} is not an IP address",
                config.bind_address
            )))
        })?;
        // Before anything is bound or opened: a bad ACL file stops the start.
        let acl = if config.acl_enable {
            let Some(path) = config.acl_file() else {
                return Err(Error::Config(ConfigError::new(
                    "aclEnable=true needs aclFilePath, or ROCKETMQ_HOME for $ROCKETMQ_HOME/conf/plain_acl.yml",
                )));
            };
            Some(crate::acl::AclGate::load(&path)?)
        } else {
            None
        };
        // Remoting first: with listenPort=0 the real port is known before the store writes it
        // into every record as the store host.
        let handler = Arc::new(LateHandler(OnceLock::new()));
        let server_config =
            ServerConfig { max_frame: config.remoting_max_frame_size as usize, ..ServerConfig::default() };
        let remoting = bind_remoting(&config, bind_ip, handler.clone(), server_config)?;
        let listen_port = remoting.local_addrs()[0].port();
        let ha_configured = config.effective_ha_port();
        config.listen_port = listen_port as i32;
        let store = MessageStore::open(config.clone())?;
        store.start()?;
        let tables = match ConfigTables::open(config.store_root()) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                store.shutdown();
                return Err(e.into());
            }
        };
        if config.broker_role.is_master() {
            cap_consumer_offsets(&store, &tables);
        }
        let config = Arc::new(config);
        let auth_secret = (!config.ha_auth_secret.is_empty()).then(|| config.ha_auth_secret.clone());
        let (ha_master, ha_slave, ha_port) = if config.broker_role.is_master() {
            let opts = HaMasterOptions {
                heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval as u64),
                housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval as u64),
                transfer_batch_size: config.ha_transfer_batch_size as usize,
                slave_fallbehind_max: config.ha_slave_fallbehind_max,
                slave_timeout: Duration::from_millis(config.slave_timeout as u64),
                sync_slave_count: config.ha_sync_slave_count as usize,
                sync_from_last_file: config.sync_from_last_file,
                verify_slave_tail: config.ha_verify_slave_tail,
                linger: if config.broker_role == BrokerRole::SyncMaster {
                    Duration::ZERO
                } else {
                    Duration::from_micros(500)
                },
                auth_secret: auth_secret.clone(),
            };
            let addr = SocketAddr::new(bind_ip, ha_configured);
            match HaMaster::start(addr, store.commit_log().clone(), opts) {
                Ok(m) => {
                    let port = m.local_addr().port();
                    (Some(m), None, port)
                }
                Err(e) => {
                    store.shutdown();
                    return Err(Error::Store(format!(
                        "cannot listen for slaves on {addr} (haListenPort): {e}"
                    )));
                }
            }
        } else {
            let opts = HaSlaveOptions {
                heartbeat_interval: Duration::from_millis(config.ha_send_heartbeat_interval as u64),
                housekeeping_interval: Duration::from_millis(config.ha_housekeeping_interval as u64),
                connect_timeout: Duration::from_secs(3),
                max_backoff: Duration::from_secs(5),
                bind_address: config.ha_client_bind_address.parse().ok(),
                auth_secret,
                truncate_diverged: config.ha_slave_truncate_diverged,
                ack_flushed: config.flush_disk_type == crate::FlushDiskType::SyncFlush,
                on_truncated: Some(crate::ha::TruncateHook({
                    // Offsets past the cut name positions the master fills with other
                    // messages; the config sync's merge would keep them (it keeps the larger).
                    let (store, tables) = (Arc::downgrade(&store), Arc::downgrade(&tables));
                    Arc::new(move |_| {
                        if let (Some(store), Some(tables)) = (store.upgrade(), tables.upgrade()) {
                            cap_consumer_offsets(&store, &tables);
                        }
                    })
                })),
            };
            match HaSlave::start(store.clone(), &config.ha_master_address, opts) {
                Ok(s) => (None, Some(s), 0),
                Err(e) => {
                    store.shutdown();
                    return Err(Error::Store(format!("cannot start the HA client: {e}")));
                }
            }
        };
        let synchronizer = (config.broker_role == BrokerRole::Slave).then(|| {
            let own = format!("{}:{listen_port}", store.commit_log().store_host().ip());
            let sync_config = SlaveSyncConfig::from_broker_config(&config, Some(own))
                .with_vip_channel(config.vip_channel_enabled);
            let master = Some(config.master_address.as_str()).filter(|a| !a.is_empty());
            let sync = SlaveSynchronizer::new(tables.clone(), master, sync_config);
            // Weak: the store must not outlive the broker in a closure the broker owns.
            let weak = Arc::downgrade(&store);
            let offsets = tables.clone();
            sync.set_deletion_handler(Arc::new(move |deleted| match weak.upgrade() {
                Some(store) => {
                    // The master forgot the topic's consumer offsets with it; a topic made
                    // again starts its queues at 0, and the larger-offset merge of a later sync
                    // kept the old offsets here, ahead of the new queues' (found by an audit).
                    // Each as its deletion is taken, and on disk before the deletion counts as
                    // done: a deletion is taken once.
                    let mut removed = 0;
                    let taken = store.apply_master_deletions(deleted, &mut |topic| {
                        let n = offsets.consumer_offsets().remove_topic(topic);
                        if n > 0 {
                            tracing::info!(
                                topic,
                                groups = n,
                                "topic deleted on the master: its consumer offsets too"
                            );
                        }
                        removed += n;
                    });
                    let persisted = if removed > 0 { offsets.consumer_offsets().persist() } else { Ok(()) };
                    let taken = taken.map_err(|e| e.to_string())?;
                    persisted
                        .map_err(|e| format!("persisting the consumer offsets of deleted topics: {e}"))?;
                    Ok(taken)
                }
                None => Ok(0),
            }));
            sync
        });
        let broker = Arc::new(Broker {
            config: config.clone(),
            store,
            tables,
            ha_master,
            ha_slave,
            synchronizer,
            remoting,
            client_services: OnceLock::new(),
            acl_reloads: OnceLock::new(),
            listen_port,
            ha_port,
            permission: std::sync::atomic::AtomicI32::new(config.broker_permission),
            switches: std::array::from_fn(|i| {
                AtomicBool::new(config.get(RUNTIME_CONFIG_KEYS[i]).as_deref() == Some("true"))
            }),
            updating_config: Mutex::new(()),
            stop: StopSignal::new(),
            threads: Mutex::new(Vec::new()),
            shut: AtomicBool::new(false),
            stopping: Mutex::new(()),
            stop_problems: Mutex::new(Vec::new()),
            stats: Arc::new(crate::broker_stats::BrokerStats::new(crate::store::clock::now_ms())),
        });
        let mut dispatch = Dispatch::new();
        let weak = Arc::downgrade(&broker);
        let provider: crate::broker_admin::RuntimeInfoProvider =
            Arc::new(move || weak.upgrade().map(|b| b.runtime_info()).unwrap_or_default());
        let weak = Arc::downgrade(&broker.store);
        let deleted: crate::broker_admin::DeletedTopicsProvider =
            Arc::new(move || weak.upgrade().map(|s| s.deleted_topics()).unwrap_or_default());
        Arc::new(AdminProcessor::new(broker.tables.clone(), provider).with_deleted_topics(deleted))
            .register(&mut dispatch);
        let _ = broker.client_services.set(crate::processor::install(&broker, &mut dispatch)?);
        let dispatch: Arc<dyn RequestHandler> = Arc::new(dispatch);
        let _ = broker.acl_reloads.set(acl.as_ref().map(|g| g.reloads()));
        if let Some(gate) = &acl {
            let t = gate.watch(broker.stop.clone())?;
            broker.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
        let _ = handler.0.set(match acl {
            Some(gate) => Arc::new(gate.with_next(dispatch).with_identity(crate::acl::BrokerIdentity {
                cluster_name: broker.config.broker_cluster_name.clone(),
                broker_name: broker.config.broker_name.clone(),
                broker_addr: broker.store.commit_log().store_host().to_string(),
            })),
            None => dispatch,
        });
        broker.start_persist_thread()?;
        broker.start_stats_thread()?;
        if broker.config.broker_role.is_master() {
            broker.start_scheduler()?;
        }
        if let Some(s) = &broker.synchronizer {
            s.start()?;
        }
        let r = broker.store.recovery();
        if r.last_exit_ok {
            tracing::info!("recovery: the last stop was clean; the CommitLog ends at {}", r.recovered_offset);
        } else {
            tracing::warn!(
                "recovery: the last run did not stop cleanly (abort file found); CommitLog valid to {}{}, \
                 dispatch resumed from {}",
                r.recovered_offset,
                if r.torn_tail { ", a torn tail after it cut" } else { "" },
                r.dispatch_from
            );
        }
        let replicating = if config.broker_role.is_master() {
            format!("HA port {ha_port}")
        } else {
            let remoting = broker.config_master_address();
            format!(
                "replicating from {}, config from {}",
                config.ha_master_address,
                if remoting.is_empty() { "nowhere (no masterAddress)" } else { &remoting }
            )
        };
        tracing::info!(
            "broker {} started as {} on port {} ({replicating}), store {}",
            config.broker_name,
            config.broker_role,
            listen_port,
            config.store_root().display()
        );
        Ok(broker)
    }

    /// Delivers delayed messages when due (`crate::schedule`); masters only.
    fn start_scheduler(&self) -> Result<()> {
        let scheduler = crate::schedule::Scheduler::new(
            self.store.clone(),
            self.tables.clone(),
            self.sync_ack_watermark(),
        );
        let stop = self.stop.clone();
        let t = std::thread::Builder::new()
            .name("rmqha-schedule".into())
            .spawn(move || scheduler.run(stop))
            .map_err(|e| Error::Store(format!("cannot start thread rmqha-schedule: {e}")))?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        Ok(())
    }

    fn start_persist_thread(&self) -> Result<()> {
        // The tables, never the broker: a thread that held the broker, even upgraded from a
        // weak reference for one pass, could be left with the last reference when the host
        // drops its own, and the broker's drop would run there, joining that thread itself
        // and letting the store go only after the host's drop returned.
        let tables = self.tables.clone();
        let stop = self.stop.clone();
        let interval = Duration::from_millis(self.config.flush_consumer_offset_interval as u64);
        let t = std::thread::Builder::new()
            .name("rmqha-persist".into())
            .spawn(move || {
                while stop.sleep(interval) {
                    if let Err(e) = tables.persist_dirty() {
                        tracing::error!("persisting config tables failed: {e}");
                    }
                }
            })
            .map_err(|e| Error::Store(format!("cannot start thread rmqha-persist: {e}")))?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        Ok(())
    }

    /// Samples the put and pull counters every second, and the stats items every
    /// `ITEM_SAMPLE_SECS` (`crate::broker_stats`); the items' first snapshot is taken here,
    /// before the broker is handed to its host, so what the host puts next counts.
    fn start_stats_thread(&self) -> Result<()> {
        let (stats, store, stop) = (self.stats.clone(), self.store.clone(), self.stop.clone());
        let cluster = self.config.broker_cluster_name.clone();
        let sample_items = move |stats: &crate::broker_stats::BrokerStats, now: i64, counts: (u64, u64)| {
            // Each topic's messages (the sum of its queues' ends) and their bytes.
            let topics: Vec<(String, u64, u64)> = store
                .consume_queues()
                .topic_totals()
                .into_iter()
                .map(|(t, (n, bytes))| (t, n, bytes))
                .collect();
            stats.sample_items(now, &cluster, &topics, counts);
        };
        sample_items(&stats, crate::store::clock::now_ms(), self.store.stored_counts());
        let store = self.store.clone();
        let t = std::thread::Builder::new()
            .name("rmqha-stats".into())
            .spawn(move || {
                for second in 1u64.. {
                    if !stop.sleep(Duration::from_secs(1)) {
                        break;
                    }
                    let now = crate::store::clock::now_ms();
                    let counts = store.stored_counts();
                    stats.sample(now, counts.1);
                    if second % crate::broker_stats::ITEM_SAMPLE_SECS == 0 {
                        sample_items(&stats, now, counts);
                    }
                }
            })
            .map_err(|e| Error::Store(format!("cannot start thread rmqha-stats: {e}")))?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        Ok(())
    }

    /// Put and pull rates and daily totals, as GET_BROKER_RUNTIME_INFO reports them.
    pub fn stats(&self) -> &crate::broker_stats::BrokerStats {
        &self.stats
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }
    /// `brokerPermission` now: 6 read and write, 4 read only, 2 write only (RocketMQ's
    /// `PermName` bits: 4 read, 2 write).
    pub fn broker_permission(&self) -> i32 {
        self.permission.load(Ordering::Acquire)
    }

    /// Changes `brokerPermission` until the broker stops (the properties file is left as it
    /// is; [`update_config`](Self::update_config) writes it there too): 4 makes it read only
    /// (remote sends refused NO_PERMISSION, routes advertise no write), 2 write only, 6 both
    /// again. Refuses any other value.
    pub fn set_broker_permission(&self, perm: i32) -> Result<()> {
        crate::config::check_broker_permission(perm)
            .map_err(|why| Error::InvalidArgument(format!("brokerPermission {perm}: {why}")))?;
        let was = self.permission.swap(perm, Ordering::AcqRel);
        if was != perm {
            tracing::warn!("brokerPermission changed from {was} to {perm}");
        }
        Ok(())
    }

    /// Writes `key=value` pairs into the properties file the broker was started from (see
    /// `BrokerConfig::update_properties_file`), so that settings changed at run time outlive
    /// a restart, as RocketMQ's UPDATE_BROKER_CONFIG persists them. Returns the file, or
    /// `None` for a broker whose config was built in code (nothing to write to). Called only
    /// by `update_config`, under its lock, so writes never interleave.
    fn persist_config_values(&self, entries: &[(&str, &str)]) -> Result<Option<PathBuf>> {
        let Some(path) = self.config.source_file() else { return Ok(None) };
        BrokerConfig::update_properties_file(path, entries)?;
        tracing::info!(file = %path.display(), ?entries, "config file updated");
        Ok(Some(path.to_path_buf()))
    }

    /// `autoCreateTopicEnable` now.
    pub fn auto_create_topic_enable(&self) -> bool {
        self.switch(1)
    }

    /// `autoCreateSubscriptionGroup` now.
    pub fn auto_create_subscription_group(&self) -> bool {
        self.switch(2)
    }

    /// `slaveReadEnable` now.
    pub fn slave_read_enable(&self) -> bool {
        self.switch(3)
    }

    /// `notifyConsumerIdsChangedEnable` now.
    pub fn notify_consumer_ids_changed_enable(&self) -> bool {
        self.switch(4)
    }

    fn switch(&self, i: usize) -> bool {
        self.switches[i].load(Ordering::Acquire)
    }

    /// The value of a key of [`RUNTIME_CONFIG_KEYS`] now, as a properties file holds it
    /// (`None` for any other key: its value is the config's).
    pub fn runtime_config_value(&self, key: &str) -> Option<String> {
        match RUNTIME_CONFIG_KEYS.iter().position(|&k| k == key)? {
            0 => Some(self.broker_permission().to_string()),
            i => Some(self.switch(i).to_string()),
        }
    }

    /// Changes settings while the broker runs (UPDATE_BROKER_CONFIG, `rmqha config --set`):
    /// only [`RUNTIME_CONFIG_KEYS`]; all or nothing (an unknown key, one that takes effect
    /// only at a start, or a bad value changes nothing, and the error names it). The values
    /// are applied, then written into the properties file the broker was started from (see
    /// `persist_config_values`); if that write fails they
    /// hold until the broker stops, and the error says so. Returns the keys whose value
    /// changed, with their new values.
    pub fn update_config(&self, entries: &[(&str, &str)]) -> Result<Vec<(&'static str, String)>> {
        let mut check = BrokerConfig::clone(&self.config);
        let mut parsed: Vec<(usize, String)> = Vec::with_capacity(entries.len());
        for &(key, value) in entries {
            let (key, value) = (key.trim(), value.trim());
            let Some(canonical) = BrokerConfig::canonical_key(key) else {
                return Err(Error::InvalidArgument(format!("unknown config key {}", crate::clip(key, 64))));
            };
            let Some(i) = RUNTIME_CONFIG_KEYS.iter().position(|&k| k == canonical) else {
                return Err(Error::InvalidArgument(format!(
                    "{key} cannot change while the broker runs (only {} can): set it in the broker's properties \
                     file and restart",
                    RUNTIME_CONFIG_KEYS.join(", ")
                )));
            };
            check.set(canonical, value).map_err(|e| {
                Error::InvalidArgument(format!(
                    "invalid value {:?} for {key}: {}",
                    crate::clip(value, 64),
                    e.reason
                ))
            })?;
            if i == 0 {
                crate::config::check_broker_permission(check.broker_permission).map_err(|why| {
                    Error::InvalidArgument(format!(
                        "invalid value {:?} for {key}: {why}",
                        crate::clip(value, 64)
                    ))
                })?;
            }
            let value = check.get(canonical).unwrap_or_default();
            parsed.retain(|(j, _)| *j != i);
            parsed.push((i, value));
        }
        let _in_order = self.updating_config.lock().unwrap_or_else(|e| e.into_inner());
        let mut changed = Vec::new();
        for (i, value) in &parsed {
            let key = RUNTIME_CONFIG_KEYS[*i];
            if self.runtime_config_value(key).as_deref() == Some(value.as_str()) {
                continue;
            }
            if *i == 0 {
                self.set_broker_permission(check.broker_permission)?;
            } else {
                self.switches[*i].store(value == "true", Ordering::Release);
                tracing::warn!("{key} changed to {value}");
                if key == "autoCreateTopicEnable" && value == "true" {
                    crate::processor::seed_system_topics(self); // TBW102, as at a start
                }
            }
            changed.push((key, value.clone()));
        }
        // Written even when unchanged: an earlier write may have failed.
        let pairs: Vec<(&str, &str)> =
            parsed.iter().map(|(i, v)| (RUNTIME_CONFIG_KEYS[*i], v.as_str())).collect();
        self.persist_config_values(&pairs).map_err(|e| {
            let now: Vec<String> = pairs.iter().map(|(k, v)| format!("{k} is {v}")).collect();
            Error::Store(format!("{} now, but only until the broker restarts: {e}", now.join(", ")))
        })?;
        Ok(changed)
    }

    pub fn role(&self) -> BrokerRole {
        self.store.role()
    }
    pub fn store(&self) -> &Arc<MessageStore> {
        &self.store
    }
    pub fn tables(&self) -> &Arc<ConfigTables> {
        &self.tables
    }
    pub fn ha_master(&self) -> Option<&HaMaster> {
        self.ha_master.as_ref()
    }

    /// On a SYNC_MASTER, how far a slave holds the log (its ack watermark), for the threads
    /// that record progress only over records a failover cannot lose (the scheduler, the
    /// transaction checker); `None` on other roles, where the flushed offset alone decides.
    pub(crate) fn sync_ack_watermark(&self) -> Option<Arc<dyn Fn() -> i64 + Send + Sync>> {
        match (&self.ha_master, self.config.broker_role) {
            (Some(m), BrokerRole::SyncMaster) => Some(m.ack_watermark()),
            _ => None,
        }
    }
    pub fn ha_slave(&self) -> Option<&HaSlave> {
        self.ha_slave.as_ref()
    }
    /// The remoting port actually bound.
    pub fn listen_port(&self) -> u16 {
        self.listen_port
    }
    /// The HA port actually bound (0 on a slave).
    pub fn ha_port(&self) -> u16 {
        self.ha_port
    }
    /// The remoting ports bound (main, then fast/VIP).
    pub fn remoting_addrs(&self) -> &[SocketAddr] {
        self.remoting.local_addrs()
    }

    /// Puts a message; the handle completes when the answer is final for the role. An `Err`
    /// means nothing was stored.
    pub fn put_message(&self, msg: &Message) -> Result<PutHandle> {
        self.put_messages(std::slice::from_ref(msg))
    }

    /// Puts messages as one batch (contiguous, one file); see `put_message`.
    pub fn put_messages(&self, msgs: &[Message]) -> Result<PutHandle> {
        // A delayed message goes to SCHEDULE_TOPIC_XXXX, whence the scheduler delivers it.
        let scheduled =
            crate::schedule::to_schedule(msgs, self.store.delay_levels_ms().len()).inspect_err(|e| {
                if let Error::PutFailed { status, .. } = e {
                    self.store.put_metrics().refused(*status);
                }
            })?;
        self.put_as_is(scheduled.as_deref().unwrap_or(msgs))
    }

    /// Puts messages where they say, without moving a delayed one to SCHEDULE_TOPIC_XXXX (a
    /// transactional half message keeps its DELAY for the commit); on a SYNC_MASTER the
    /// handle completes once a slave holds them, as `put_messages`.
    pub(crate) fn put_as_is(&self, msgs: &[Message]) -> Result<PutHandle> {
        if self.shut.load(Ordering::Acquire) {
            self.store.put_metrics().refused(PutStatus::ServiceNotAvailable);
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: "broker shut down".into(),
            });
        }
        // A batch waits unless every message asks not to: PUT_OK must hold for each.
        let wait = msgs.iter().any(|m| m.wait_store_ok());
        let replicate = wait && self.role() == BrokerRole::SyncMaster && self.ha_master.is_some();
        let handle = self.store.put_messages_with(msgs, replicate)?;
        if replicate {
            if let (PutHandle::Pending(ticket), Some(ha)) = (&handle, &self.ha_master) {
                let end = ticket.current().end_offset();
                ha.wait_for_replica(end, ticket);
            }
        }
        Ok(handle)
    }

    /// Puts and waits for the final answer.
    pub fn put_message_sync(&self, msg: &Message) -> Result<PutResult> {
        Ok(self.put_message(msg)?.wait())
    }

    /// Puts with a callback run once the answer is final (on an rmqha thread, or at once).
    pub fn put_message_async(
        &self,
        msg: &Message,
        done: impl FnOnce(PutResult) + Send + 'static,
    ) -> Result<()> {
        self.put_message(msg)?.on_complete(done);
        Ok(())
    }

    pub fn get_messages(&self, topic: &str, queue_id: i32, offset: i64, max_msgs: i32) -> GetMessageResult {
        self.store.get_messages(topic, queue_id, offset, max_msgs)
    }
    /// [`get_messages`](Self::get_messages) keeping only the messages `selector` passes (a
    /// tag or SQL92 expression, as a consumer's subscription). The scan skips what does not
    /// pass without counting it toward `max_msgs`, up to `maxFilterMessageSize` bytes of queue
    /// entries (or `max_msgs` entries, whichever is more); `next_begin_offset` is one past the
    /// last entry scanned, and the status is `NO_MATCHED_MESSAGE` when nothing in that window
    /// passed, so reading on from `next_begin_offset` moves past it.
    pub fn get_messages_selected(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: i32,
        selector: &crate::filter::MessageSelector,
    ) -> GetMessageResult {
        let filter: Option<&dyn crate::store::MessageFilter> =
            if selector.is_all() { None } else { Some(selector) };
        self.store.get_messages_filtered(topic, queue_id, offset, max_msgs, 128 * 1024 * 1024, filter)
    }
    pub fn message_by_id(&self, msg_id: &str) -> Option<StoredMessage> {
        self.store.message_by_id(msg_id)
    }
    /// Messages of `topic` with `key` (KEYS or UNIQ_KEY), newest first, at most `max`.
    pub fn query_by_key(&self, topic: &str, key: &str, max: usize) -> Vec<StoredMessage> {
        self.query_by_key_between(topic, key, max, 0, i64::MAX)
    }
    /// `query_by_key` for messages stored from `begin` to `end` ms (both included), as
    /// RocketMQ's `queryMessage`: with `end` set below the oldest store time a query
    /// returned, the next query goes on where it stopped.
    pub fn query_by_key_between(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> Vec<StoredMessage> {
        self.store.query_by_key(topic, key, max, begin, end)
    }

    pub fn max_offset(&self) -> i64 {
        self.store.max_offset()
    }
    pub fn min_offset(&self) -> i64 {
        self.store.min_offset()
    }
    pub fn flushed_offset(&self) -> i64 {
        self.store.flushed_offset()
    }
    /// Master: highest offset acked by any slave (-1 if none); slave: highest offset it acked.
    pub fn slave_ack_offset(&self) -> i64 {
        match (&self.ha_master, &self.ha_slave) {
            (Some(m), _) => m.push_to_slave_max_offset(),
            (_, Some(s)) => s.status().acked_offset,
            _ => -1,
        }
    }
    pub fn queue_max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.store.queue_max_offset(topic, queue_id)
    }
    pub fn queue_min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.store.queue_min_offset(topic, queue_id)
    }
    /// The queue offset of a store time (ms): with `TimeBoundary::Lower` the first message
    /// stored at or after it, with `Upper` the last at or before it, as SEARCH_OFFSET_BY_TIMESTAMP
    /// answers (`MessageStore::queue_offset_by_time_bounded` has the edge cases).
    pub fn queue_offset_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: TimeBoundary,
    ) -> i64 {
        self.store.queue_offset_by_time_bounded(topic, queue_id, timestamp_ms, boundary)
    }

    /// A consumer group's committed offset of a queue (-1 if none).
    pub fn consumer_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        self.tables.consumer_offsets().query(group, topic, queue_id).unwrap_or(-1)
    }
    /// Commits a consumer group's offset (accepted on masters and slaves alike). Group and
    /// topic must be names RocketMQ accepts: the offsets are kept under `topic@group`, which
    /// a name with an `@` could make collide with another pair's.
    pub fn commit_consumer_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::InvalidArgument(format!("consumer offset {offset} is negative")));
        }
        if queue_id < 0 {
            return Err(Error::InvalidArgument(format!("queue id {queue_id} is negative")));
        }
        if !crate::message::codec::group_is_valid(group) {
            return Err(Error::InvalidArgument(format!(
                "consumer group {:?} is not a group name (1 to 255 of a-z A-Z 0-9 % | _ -)",
                crate::clip(group, 64)
            )));
        }
        if let Some(reason) = crate::processor::topic_name_error(topic) {
            return Err(Error::InvalidArgument(reason));
        }
        self.store.writable()?;
        if self.shut.load(Ordering::Acquire) {
            // Nothing persists a commit after shutdown: refuse it rather than lose it.
            return Err(Error::Store(
                "the broker is shut down: the consumer offset was not committed".into(),
            ));
        }
        // Kept, persisted and mirrored only for a queue that exists: one the topic's config
        // names (as the wire path requires) or one holding messages (a topic put to through
        // this API needs no config).
        let held = self.store.existing_queue_max_offset(topic, queue_id);
        let configured =
            self.topic_config(topic).is_some_and(|tc| queue_id < tc.read_queue_nums.max(tc.write_queue_nums));
        if held.is_none() && !configured {
            return Err(Error::InvalidArgument(format!(
                "queue {topic}:{queue_id} does not exist (no topic config names it, and it holds no message)"
            )));
        }
        // Past the queue's end the offset names messages not written yet: the consumer would
        // skip them when they come, and a pull from there is answered OFFSET_OVERFLOW_BADLY,
        // which sends a consumer of a queue starting at 0 back to its start.
        let end = held.unwrap_or(0);
        if offset > end {
            return Err(Error::InvalidArgument(format!(
                "consumer offset {offset} is past the end of queue {topic}:{queue_id} ({end})"
            )));
        }
        let offsets = self.tables.consumer_offsets();
        if self.role() == BrokerRole::Slave {
            offsets.commit(group, topic, queue_id, offset);
        } else {
            // A master's rewinds reach its slaves (see `ConsumerOffsetTable::apply_from_master`).
            offsets.commit_as_master(group, topic, queue_id, offset);
        }
        Ok(())
    }

    /// Master: moves consumer group `group`'s offsets on `topic` back (or forth) to a store
    /// time, as `mqadmin resetOffsetByTime` asks (INVOKE_BROKER_TO_RESET_OFFSET, 4.9's
    /// `Broker2Client.resetOffset`). For each queue of the topic the target is the first
    /// message stored at or after `timestamp_ms` (`TimeBoundary::Lower`; the queue's end if
    /// every message is older), or the queue's end with `timestamp_ms == -1`. With `force` every
    /// queue moves to its target; without it only a queue whose target lies before its
    /// committed offset moves (a rewind), and a queue the group has no offset on is left alone.
    /// Returns each queue's offset afterwards (moved or kept), by queue id; the table is
    /// persisted before this returns.
    ///
    /// Refused on a slave (its offsets follow its master's), for a topic this broker has no
    /// config of, and for a group with no committed offset on any queue of the topic (4.9's
    /// "consumer group not exist"; 4.9 also refuses a group missing from any one queue).
    /// Live consumers keep their own offsets in memory and must be told too: the remoting
    /// request pushes RESET_CONSUMER_CLIENT_OFFSET to them (`crate::processor`).
    pub fn reset_consumer_offsets(
        &self,
        group: &str,
        topic: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<Vec<(i32, i64)>> {
        self.require_master("reset_consumer_offsets")?;
        if timestamp_ms < -1 {
            return Err(Error::InvalidArgument(format!(
                "timestamp {timestamp_ms} is not a time (ms since the epoch) or -1 (the end of each queue)"
            )));
        }
        let Some(tc) = self.topic_config(topic) else {
            return Err(Error::InvalidArgument(format!(
                "reset offset failed, no topic in this broker. topic={topic}"
            )));
        };
        let offsets = self.tables.consumer_offsets();
        let committed = offsets.query_queues(group, topic).unwrap_or_default();
        if committed.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "the consumer group <{group}> has no committed offset on topic {topic}: nothing to reset"
            )));
        }
        let queues = tc.read_queue_nums.max(tc.write_queue_nums);
        let mut table = Vec::with_capacity(queues as usize);
        for q in 0..queues {
            let target = if timestamp_ms == -1 {
                self.queue_max_offset(topic, q)
            } else {
                self.queue_offset_by_time(topic, q, timestamp_ms, TimeBoundary::Lower)
            }
            .max(0);
            let now = match committed.get(&q) {
                Some(&current) if !force && target >= current => current,
                None if !force => continue,
                _ => {
                    self.commit_consumer_offset(group, topic, q, target)?;
                    target
                }
            };
            table.push((q, now));
        }
        offsets.persist()?;
        tracing::info!(group, topic, timestamp_ms, force, queues = table.len(), "consumer offsets reset");
        Ok(table)
    }

    /// The offsets and replication state now.
    /// The broker's offsets, slaves and put counters as Prometheus text (format 0.0.4; see
    /// `metrics::render` for the families).
    pub fn metrics(&self) -> String {
        crate::metrics::render(self)
    }

    pub fn offsets(&self) -> Offsets {
        let slave = self.ha_slave.as_ref().map(|s| s.status());
        Offsets {
            role: self.role(),
            max_offset: self.max_offset(),
            min_offset: self.min_offset(),
            flushed_offset: self.flushed_offset(),
            slave_ack_offset: self.slave_ack_offset(),
            dispatch_behind_bytes: self.store.dispatch_behind_bytes(),
            listen_port: self.listen_port,
            ha_port: self.ha_port,
            slaves: self.ha_master.as_ref().map(|m| m.slaves()).unwrap_or_default(),
            refused_slaves: self.ha_master.as_ref().map(|m| m.refused_slaves()).unwrap_or_default(),
            master_address: slave.as_ref().map(|s| s.master_address.clone()),
            connected: slave.as_ref().map(|s| s.connected),
            last_ha_error: slave.and_then(|s| s.last_error),
            last_config_sync_ms: self
                .synchronizer
                .as_ref()
                .and_then(|s| s.last_sync())
                .map(|a| a.at_millis()),
            last_config_sync_error: self
                .synchronizer
                .as_ref()
                .and_then(|s| s.last_sync())
                .and_then(|a| a.error),
        }
    }

    /// Runtime information as RocketMQ's GET_BROKER_RUNTIME_INFO KV table (RocketMQ's key
    /// names where one exists, rmqha's otherwise); `rmqha status` prints it.
    pub fn runtime_info(&self) -> std::collections::BTreeMap<String, String> {
        let o = self.offsets();
        let mut t = std::collections::BTreeMap::new();
        let mut put = |k: &str, v: String| {
            t.insert(k.to_string(), v);
        };
        // The protocol version a 4.9.4 broker reports (its MQVersion ordinal), as on every
        // command; the description names what actually runs.
        put("brokerVersion", crate::remoting::ROCKETMQ_VERSION.to_string());
        put("brokerVersionDesc", format!("rmqha {}", env!("CARGO_PKG_VERSION")));
        put("brokerName", self.config.broker_name.clone());
        put("brokerId", self.config.effective_broker_id().to_string());
        put("brokerRole", o.role.to_string());
        put("flushDiskType", self.config.flush_disk_type.to_string());
        put("commitLogMaxOffset", o.max_offset.to_string());
        put("commitLogMinOffset", o.min_offset.to_string());
        put("flushedOffset", o.flushed_offset.to_string());
        put("slaveAckOffset", o.slave_ack_offset.to_string());
        put("dispatchBehindBytes", o.dispatch_behind_bytes.to_string());
        put("listenPort", o.listen_port.to_string());
        put("haPort", o.ha_port.to_string());
        put("storePathRootDir", self.config.store_root().display().to_string());
        let now = crate::store::clock::now_ms();
        self.stats.runtime_info(now, self.store.stored_counts().1, &mut put);
        // RocketMQ's key: the store time of the oldest message in the CommitLog (0: none).
        let earliest = self.store.message_at(o.min_offset).map_or(0, |m| m.store_timestamp);
        put("earliestMessageTimeStamp", earliest.to_string());
        // RocketMQ's keys: the used fraction of each directory's file system, read now (-1 if
        // it cannot be read), as the disk guard reads it.
        let shown = |r: Option<f64>| r.map_or_else(|| "-1".to_string(), |r| r.to_string());
        let ratio = |p: &std::path::Path| shown(crate::store::retention::disk_used_ratio(p));
        // Over several CommitLog directories, RocketMQ's `commitLogDiskRatio_<dir>` for each and
        // the emptiest one's as `commitLogDiskRatio` (where new files can go).
        let cl_dirs = self.store.commit_log().queue().dirs();
        let mut least: Option<f64> = None;
        for dir in cl_dirs.writable() {
            let r = crate::store::retention::disk_used_ratio(dir);
            if cl_dirs.is_multi() {
                put(&format!("commitLogDiskRatio_{}", dir.display()), shown(r));
            }
            if let Some(r) = r {
                least = Some(least.map_or(r, |l| l.min(r)));
            }
        }
        put("commitLogDiskRatio", shown(least));
        put("consumeQueueDiskRatio", ratio(&self.config.consume_queue_dir()));
        let guard = self.store.disk_guard();
        if guard.is_full() {
            put("diskFull", guard.reason());
        }
        if let Some((why, since)) = self.store.dispatcher().failure() {
            let ago = (crate::store::commit_log::now_ms() - since).max(0) / 1000;
            put("dispatchError", format!("{why} (for {ago} s)"));
        }
        if self.role().is_master() {
            put("slaveCount", o.slaves.len().to_string());
            // Whether a SYNC put now would wait for an ack (RocketMQ's isSlaveOK) rather than
            // be answered SLAVE_NOT_AVAILABLE at once.
            if let Some(ha) = &self.ha_master {
                put("slaveOk", ha.is_slave_ok(self.store.max_offset()).to_string());
            }
            let slaves: Vec<String> = o
                .slaves
                .iter()
                .map(|s| {
                    format!(
                        "{} ack={} lag={} connectedMs={} transferring={} lastReportMs={}",
                        s.addr, s.ack_offset, s.lag_bytes, s.connected_ms, s.transferring, s.last_report_ms
                    )
                })
                .collect();
            put("slaves", slaves.join("; "));
            if let Some(r) = o.refused_slaves.last() {
                let ago = (crate::store::commit_log::now_ms() - r.at_ms).max(0) / 1000;
                put(
                    "lastRefusedSlave",
                    format!("{} at offset {}, {ago} s ago: {}", r.addr, r.requested_offset, r.reason),
                );
            }
        } else {
            put("masterAddress", self.config_master_address());
            put("haMasterAddress", o.master_address.unwrap_or_default());
            put("connected", o.connected.unwrap_or(false).to_string());
            if let Some(e) = o.last_ha_error {
                put("lastHaError", e);
            }
            if let Some(t) = o.last_config_sync_ms {
                put("lastConfigSyncMs", t.to_string());
            }
            if let Some(e) = o.last_config_sync_error {
                put("lastConfigSyncError", e);
            }
        }
        t
    }

    fn require_master(&self, what: &str) -> Result<()> {
        self.store.writable()?;
        if self.role() == BrokerRole::Slave {
            return Err(Error::NotMaster(format!(
                "{what} is refused on a SLAVE: the slave mirrors its master's configuration; change it on the master"
            )));
        }
        Ok(())
    }

    /// Master: creates or replaces a topic's config (persisted; slaves mirror it).
    /// The name must be one RocketMQ accepts (`^[%|a-zA-Z0-9_-]+$`, at most 127 bytes): no
    /// message could be put to any other.
    pub fn put_topic(&self, config: TopicConfig) -> Result<()> {
        self.require_master("put_topic")?;
        if let Some(reason) = crate::processor::topic_name_error(&config.topic_name) {
            return Err(Error::InvalidArgument(reason));
        }
        self.tables.topics().put_topic(config)?;
        Ok(())
    }

    /// Master: a topic with `queues` read and write queues and read/write permission; the name
    /// as [`Self::put_topic`] requires.
    pub fn create_topic(&self, topic: &str, queues: i32) -> Result<()> {
        let max = crate::processor::MAX_QUEUE_NUMS;
        if !(1..=max).contains(&queues) {
            return Err(Error::InvalidArgument(format!("queue count {queues} must be 1..{max}")));
        }
        self.put_topic(TopicConfig::with_queues(
            topic,
            queues,
            queues,
            TopicConfig::PERM_READ | TopicConfig::PERM_WRITE,
        ))
    }

    /// Master: deletes a topic: its config, its ConsumeQueues and every group's consumer
    /// offsets in it (RocketMQ's DELETE_TOPIC_IN_BROKER with 5.x's offset cleaning). Its
    /// messages stay in the CommitLog until retention removes them. A system topic
    /// (`TBW102`, `SCHEDULE_TOPIC_XXXX`, `RMQ_SYS_*`, ...) is refused. Slaves drop the config
    /// at their next config sync and keep their queues.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        self.require_master("delete_topic")?;
        if !crate::store::consume_queue::names_one_directory(topic) {
            return Err(Error::InvalidArgument(format!("{:?} is not a topic name", crate::clip(topic, 64))));
        }
        // An unknown name must at least be one a topic could have.
        let known = self.tables.topics().contains(topic) || !self.store.queue_ids(topic).is_empty();
        if let Some(reason) = crate::processor::topic_name_error(topic).filter(|_| !known) {
            return Err(Error::InvalidArgument(reason));
        }
        if crate::metadata::is_system_topic(topic) {
            return Err(Error::InvalidArgument(format!("the topic[{topic}] is conflict with system topic.")));
        }
        self.tables.topics().delete_topic(topic)?;
        self.store.delete_topic(topic)?;
        let offsets = self.tables.consumer_offsets();
        if offsets.remove_topic_as_master(topic) > 0 {
            offsets.persist()?;
        }
        Ok(())
    }

    /// With `aclEnable`: the changed versions of the ACL file taken so far, and those refused
    /// (the rules before them kept); `None` without ACL.
    pub fn acl_reloads(&self) -> Option<(u64, u64)> {
        let r = self.acl_reloads.get()?.as_ref()?;
        Some((r.reloaded.load(Ordering::Relaxed), r.rejected.load(Ordering::Relaxed)))
    }

    /// A topic's config, if it exists.
    pub fn topic_config(&self, topic: &str) -> Option<TopicConfig> {
        self.tables.topics().get(topic)
    }

    /// Master: creates or replaces a subscription group.
    pub fn put_subscription_group(&self, config: SubscriptionGroupConfig) -> Result<()> {
        self.require_master("put_subscription_group")?;
        self.tables.subscription_groups().put_group(config)?;
        Ok(())
    }

    /// Master: deletes a subscription group.
    pub fn delete_subscription_group(&self, group: &str) -> Result<()> {
        self.require_master("delete_subscription_group")?;
        self.tables.subscription_groups().delete_group(group)?;
        Ok(())
    }

    /// Master: forgets every consumer offset of `group` (persisted; slaves follow at their
    /// next config sync); returns how many topics it had offsets on.
    pub fn delete_consumer_offsets(&self, group: &str) -> Result<usize> {
        self.require_master("delete_consumer_offsets")?;
        let offsets = self.tables.consumer_offsets();
        let removed = offsets.remove_group_as_master(group);
        if removed > 0 {
            offsets.persist()?;
        }
        Ok(removed)
    }

    /// A subscription group, if it exists.
    pub fn subscription_group(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.tables.subscription_groups().get(group)
    }

    /// Master: sets the delay offset of a delay level (persisted with the others).
    pub fn set_delay_offset(&self, level: i32, offset: i64) -> Result<()> {
        self.require_master("set_delay_offset")?;
        if level < 1 || offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "delay level {level} / offset {offset} out of range"
            )));
        }
        self.tables.delay_offsets().update_offset(level, offset);
        self.tables.delay_offsets().persist()?;
        Ok(())
    }

    /// A delay level's offset, if set.
    pub fn delay_offset(&self, level: i32) -> Option<i64> {
        self.tables.delay_offsets().offset(level)
    }

    /// Slave: pulls the master's four config tables now and waits for the result.
    pub fn sync_config_now(&self) -> Result<SyncReport> {
        self.store.writable()?;
        match &self.synchronizer {
            Some(s) => Ok(s.sync_now()?),
            None => Err(Error::NotSlave("sync_config_now applies to a SLAVE".into())),
        }
    }

    /// How many times long polling looked at a parked pull's queue so far: a test's view of
    /// what its rounds cost.
    #[doc(hidden)]
    pub fn long_poll_queue_checks(&self) -> u64 {
        self.client_services.get().map_or(0, |c| c.long_poll_queue_checks())
    }

    /// Slave: the master's remoting address (`masterAddress`, or what
    /// `set_config_master_address` set since), which config sync, the registration and the
    /// routes use; empty if none, and on a master.
    pub fn config_master_address(&self) -> String {
        self.synchronizer.as_ref().and_then(|s| s.master_address()).unwrap_or_default()
    }

    /// Slave: the master's remoting address for config sync, the registration and the
    /// routes, changeable at runtime.
    pub fn set_config_master_address(&self, addr: &str) -> Result<()> {
        self.store.writable()?;
        match &self.synchronizer {
            Some(s) => {
                s.set_master_address(Some(addr).filter(|a| !a.is_empty()));
                if let Some(c) = self.client_services.get() {
                    c.master_address_changed();
                }
                Ok(())
            }
            None => Err(Error::NotSlave("set_config_master_address applies to a SLAVE".into())),
        }
    }

    /// Slave: replicates from another master (its HA `host:port`) from now on: the current
    /// connection is closed and the next one goes to `ha_address`. The slave reports its own
    /// max offset there as on any connection, so the new master must hold the same log (the
    /// old master restarted elsewhere, or a slave promoted after catching up); one that does
    /// not is refused, and nothing is appended: the master names the reason in its refused
    /// slaves, and this slave's `last_ha_error` says the master closed the connection before
    /// sending anything (the HA protocol carries no reason).
    pub fn set_master_address(&self, ha_address: &str) -> Result<()> {
        self.store.writable()?;
        let Some(s) = &self.ha_slave else {
            return Err(Error::NotSlave("set_master_address applies to a SLAVE".into()));
        };
        if self.shut.load(Ordering::Acquire) {
            return Err(Error::Store("the broker is shut down: it replicates from no master".into()));
        }
        if !crate::config::is_host_port(ha_address) {
            return Err(Error::InvalidArgument(format!(
                "master HA address {ha_address:?} is not host:port (a port from 1 to 65535)"
            )));
        }
        s.set_master_address(ha_address);
        Ok(())
    }

    /// Stops in reverse order of start: remoting, HA, persistence, store (flush, join, abort
    /// file removed only when fully dispatched). Idempotent. A concurrent call returns only
    /// once the first is done (the store unlocked), except from a put's callback: there it
    /// returns at once, and the running stop finishes (it joins the callback's thread, or
    /// runs the callback itself as it fails the puts still waiting).
    pub fn shutdown(&self) {
        let Some(_one) = crate::store::wait::stop_lock(&self.stopping) else {
            return;
        };
        if self.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.store.is_forked() {
            // A fork of the process that started the broker: its threads, sockets and files
            // are the parent's. Each part checks this too, as it is dropped.
            return;
        }
        if let Some(s) = &self.synchronizer {
            s.shutdown();
        }
        self.remoting.shutdown();
        if let Some(s) = self.client_services.get() {
            s.shutdown();
        }
        if let Some(s) = &self.ha_slave {
            s.shutdown();
        }
        // Puts waiting for a slave get their answer before the store goes.
        if let Some(m) = &self.ha_master {
            m.shutdown();
        }
        self.stop.stop();
        // A put's callback may shut the broker down on any thread: not waiting for itself.
        std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .for_each(crate::join_unless_current);
        let mut problems = Vec::new();
        if let Err(e) = self.tables.persist_all() {
            tracing::error!("persisting config tables at shutdown failed: {e}");
            problems.push(format!("config tables not persisted: {e}"));
        }
        self.store.shutdown();
        problems.extend(self.store.unclean_stop());
        if problems.is_empty() {
            tracing::info!("broker {} stopped", self.config.broker_name);
        } else {
            tracing::warn!("broker {} stopped uncleanly: {}", self.config.broker_name, problems.join("; "));
        }
        *self.stop_problems.lock().unwrap_or_else(|e| e.into_inner()) = problems;
    }

    /// What went wrong in `shutdown` (config tables not persisted, the store's abort file kept
    /// for a failed flush or undispatched records); empty after a clean stop, and before one.
    pub fn stop_problems(&self) -> Vec<String> {
        self.stop_problems.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `shutdown`, and an `Error::Store` naming the `stop_problems` when the stop was not
    /// clean: the broker is stopped either way, but what it was to persist may not be (the
    /// bindings' `close` and `rmqha_shutdown` report it, as `rmqha broker` exits 1).
    pub fn close(&self) -> Result<()> {
        self.shutdown();
        let problems = self.stop_problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Store(format!(
                "broker {} stopped uncleanly: {}",
                self.config.broker_name,
                problems.join("; ")
            )))
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shutdown();
    }
}
