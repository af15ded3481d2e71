//! `BrokerConfig`: every setting rmqha reads, under RocketMQ's own property keys and with
//! RocketMQ's defaults (spec section 11), so a `broker.conf` written for RocketMQ works here.
//!
//! Where RocketMQ silently ignores a key it does not know and swallows bad values, rmqha
//! warns about unknown keys by name and refuses a bad value with the key, the value and the
//! line. Keys that RocketMQ knows but rmqha does not implement are accepted with a warning
//! that says so, rather than pretending to honour them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::properties::parse_properties;

/// The broker's part in its replica group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BrokerRole {
    AsyncMaster,
    SyncMaster,
    Slave,
}

impl BrokerRole {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
    }
    pub fn is_master(self) -> bool {
        !matches!(self, BrokerRole::Slave)
    }
}

impl fmt::Display for BrokerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a put is considered written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushDiskType {
    AsyncFlush,
    SyncFlush,
}

impl FlushDiskType {
    pub fn as_str(self) -> &'static str {
        match self {
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
        }
    }
}

impl fmt::Display for FlushDiskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A configuration problem: which key, which value, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: Option<String>,
    pub value: Option<String>,
    pub path: Option<PathBuf>,
    pub line: Option<usize>,
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        ConfigError { key: None, value: None, path: None, line: None, reason: reason.into() }
    }
    fn for_key(key: &str, value: &str, reason: impl Into<String>) -> Self {
        ConfigError {
            key: Some(key.to_string()),
            value: Some(value.to_string()),
            path: None,
            line: None,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}", p.display())?;
            if let Some(l) = self.line {
                write!(f, ":{l}")?;
            }
            f.write_str(": ")?;
        } else if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        match (&self.key, &self.value) {
            (Some(k), Some(v)) => write!(f, "invalid value {v:?} for {k}: {}", self.reason),
            (Some(k), None) => write!(f, "{k}: {}", self.reason),
            _ => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for ConfigError {}

trait ConfigValue: Sized {
    fn parse_value(s: &str) -> Result<Self, String>;
    fn format_value(&self) -> String;
}

impl ConfigValue for String {
    fn parse_value(s: &str) -> Result<Self, String> {
        // RocketMQ's `MixAll.properties2Object` trims every value: a trailing space after an
        // address, a path or a name is an editing slip, not part of the value.
        Ok(s.trim().to_string())
    }
    fn format_value(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for bool {
    fn parse_value(s: &str) -> Result<Self, String> {
        // Java's Boolean.parseBoolean turns any typo into `false`; a typo here is an error.
        match s.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
    fn format_value(&self) -> String {
        self.to_string()
    }
}

/// What [`BrokerConfig::to_map_redacted`] shows for a secret that is set; refused as a value.
pub const REDACTED: &str = "<hidden>";

/// A setting that is never printed: `Debug` says whether it is set, not what it is, and an
/// error about it does not repeat it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "Secret(unset)" } else { "Secret(hidden)" })
    }
}

impl ConfigValue for Secret {
    fn parse_value(s: &str) -> Result<Self, String> {
        // Trimmed as every value is (RocketMQ's `properties2Object`).
        let s = s.trim();
        if s == REDACTED {
            // A config read back from a running broker (`to_map_redacted`) and passed on:
            // without this the placeholder would become the secret.
            return Err(format!(
                "{REDACTED} is the placeholder a running broker's config shows in place of a secret; \
                 set the secret itself"
            ));
        }
        Ok(Secret(s.to_string()))
    }
    fn format_value(&self) -> String {
        self.0.clone()
    }
}

macro_rules! int_value {
    ($t:ty) => {
        impl ConfigValue for $t {
            fn parse_value(s: &str) -> Result<Self, String> {
                s.trim().parse::<$t>().map_err(|e| format!("expected an integer ({e})"))
            }
            fn format_value(&self) -> String {
                self.to_string()
            }
        }
    };
}
int_value!(i32);
int_value!(i64);

impl ConfigValue for BrokerRole {
    fn parse_value(s: &str) -> Result<Self, String> {
        match s.trim() {
            "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
            "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
            "SLAVE" => Ok(BrokerRole::Slave),
            _ => Err("expected ASYNC_MASTER, SYNC_MASTER or SLAVE".into()),
        }
    }
    fn format_value(&self) -> String {
        self.as_str().into()
    }
}

impl ConfigValue for FlushDiskType {
    fn parse_value(s: &str) -> Result<Self, String> {
        match s.trim() {
            "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
            _ => Err("expected ASYNC_FLUSH or SYNC_FLUSH".into()),
        }
    }
    fn format_value(&self) -> String {
        self.as_str().into()
    }
}

macro_rules! broker_config {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $default:expr, $key:literal $(| $alias:literal)* ;)*) => {
        /// Every setting of a broker, under RocketMQ's property keys (see the field docs for
        /// each key). Build one with [`BrokerConfig::default`], [`BrokerConfig::from_map`] or
        /// [`BrokerConfig::from_properties_file`], then [`BrokerConfig::set`] individual keys.
        #[derive(Debug, Clone)]
        pub struct BrokerConfig {
            $( $(#[doc = $doc])* #[doc = concat!("\n\nProperty key `", $key, "`.")] pub $field: $ty, )*
            /// Keys whose values were given explicitly (by canonical key name).
            explicit: std::collections::BTreeSet<&'static str>,
            /// Renamed keys set under their current spelling, which an old spelling given
            /// later does not override (RocketMQ reads only the current one).
            spelled_current: std::collections::BTreeSet<&'static str>,
            /// Renamed keys set under an old spelling only so far (`key=value` as given), for
            /// the warning when the current spelling comes later and replaces it.
            spelled_old: std::collections::BTreeMap<&'static str, String>,
            /// Warnings collected while loading (unknown or unsupported keys).
            pub warnings: Vec<String>,
            /// The line of the properties file being read, for warnings.
            reading_line: Option<usize>,
            /// The properties file the config was read from, if any.
            source: Option<PathBuf>,
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                BrokerConfig {
                    $( $field: $default, )*
                    explicit: Default::default(),
                    spelled_current: Default::default(),
                    spelled_old: Default::default(),
                    warnings: Vec::new(),
                    reading_line: None,
                    source: None,
                }
            }
        }

        impl BrokerConfig {
            /// Every key rmqha understands, in canonical spelling.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// The canonical spelling of a key rmqha knows (`mapedFileSizeCommitLog` gives
            /// `mappedFileSizeCommitLog`); `None` for any other.
            pub fn canonical_key(key: &str) -> Option<&'static str> {
                match key {
                    $( $key $(| $alias)* => Some($key), )*
                    _ => None,
                }
            }

            fn set_known(&mut self, canonical: &'static str, value: &str) -> Result<(), String> {
                match canonical {
                    $( $key => { self.$field = <$ty as ConfigValue>::parse_value(value)?; } )*
                    _ => unreachable!("canonical key"),
                }
                self.explicit.insert(canonical);
                Ok(())
            }

            /// The current value of a key (either spelling), as the string a properties file
            /// would hold; `None` for a key rmqha does not know.
            pub fn get(&self, key: &str) -> Option<String> {
                match Self::canonical_key(key)? {
                    $( $key => Some(<$ty as ConfigValue>::format_value(&self.$field)), )*
                    _ => None,
                }
            }
        }
    };
}

broker_config! {
    /// Name of the cluster the broker belongs to.
    broker_cluster_name: String = "DefaultCluster".into(), "brokerClusterName";
    /// Name of the replica group (master and its slaves share it).
    broker_name: String = default_broker_name(), "brokerName";
    /// 0 for a master; a slave's id is greater than 0.
    broker_id: i64 = 0, "brokerId";
    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    broker_role: BrokerRole = BrokerRole::AsyncMaster, "brokerRole";
    /// ASYNC_FLUSH or SYNC_FLUSH (group commit).
    flush_disk_type: FlushDiskType = FlushDiskType::AsyncFlush, "flushDiskType";
    /// Name server addresses (accepted for compatibility; rmqha needs no name server).
    namesrv_addr: String = String::new(), "namesrvAddr";
    /// Remoting port; 0 picks a free port.
    listen_port: i32 = 10911, "listenPort";
    /// Address the remoting and HA servers bind (rmqha; RocketMQ binds every interface).
    bind_address: String = "0.0.0.0".into(), "bindAddress";
    /// Serve the "fast" (VIP) remoting port listenPort-2 too, as RocketMQ does.
    fast_listen_enable: bool = true, "fastListenEnable";
    /// Address stored as the store host of every record and published to clients.
    broker_ip1: String = String::new(), "brokerIP1";
    /// Address published to slaves for HA.
    broker_ip2: String = String::new(), "brokerIP2";
    /// HA port; 0 picks a free port; unset means listenPort+1 (or 0 when listenPort is 0).
    ha_listen_port: i32 = -1, "haListenPort";
    /// Slave: the master's HA address `host:port`.
    ha_master_address: String = String::new(), "haMasterAddress";
    /// Slave: local address the HA client binds before connecting (rmqha; empty lets the OS
    /// choose). Masters count distinct slave hosts by address for `haSyncSlaveCount`.
    ha_client_bind_address: String = String::new(), "haClientBindAddress";
    /// Slave: the master's remoting address `host:port`, for config sync.
    master_address: String = String::new(), "masterAddress" | "masterAddr";
    /// Milliseconds of silence after which an HA heartbeat is sent.
    ha_send_heartbeat_interval: i64 = 5000, "haSendHeartbeatInterval";
    /// Milliseconds without traffic after which an HA connection is closed.
    ha_housekeeping_interval: i64 = 20000, "haHousekeepingInterval";
    /// Maximum bytes per HA transfer frame (at most 4 MiB less the 12-byte frame header).
    ha_transfer_batch_size: i32 = 32768, "haTransferBatchSize";
    /// A slave this many bytes or more behind is not "available" for SYNC_MASTER puts.
    ha_slave_fallbehind_max: i64 = 268_435_456, "haSlaveFallbehindMax" | "haMaxGapNotInSync";
    /// How many distinct slaves must ack a SYNC_MASTER put (rmqha; RocketMQ 4.x waits for 1).
    ha_sync_slave_count: i32 = 1, "haSyncSlaveCount";
    /// true: an empty slave receives only the master's last CommitLog file (RocketMQ's
    /// classic behaviour); false (default): the whole retained CommitLog.
    sync_from_last_file: bool = false, "syncFromLastFile";
    /// true (default): a reconnecting slave must report a record boundary, and the master
    /// resends up to 32 KiB before it for the slave to compare, so a slave whose log diverged
    /// never takes new bytes (rmqha slaves). false: stream from exactly the reported offset,
    /// anywhere within the log, as RocketMQ's master does; needed by stock RocketMQ slaves,
    /// which report offsets inside records and close a connection whose first frame starts
    /// before their end (rmqha).
    ha_verify_slave_tail: bool = true, "haVerifySlaveTail";
    /// Slave (rmqha): when its log diverged from its master's (found by the check above), cut
    /// it back to the record the divergence was found at or before, and reconnect to compare
    /// again, until the logs agree; the records cut are lost (logged with the range). false
    /// (default): refuse to follow, saying where to cut by hand (`rmqha truncate`).
    ha_slave_truncate_diverged: bool = false, "haSlaveTruncateDiverged";
    /// A secret shared by a master and its slaves (rmqha; at least 16 characters): each HA
    /// connection then starts with a challenge and response proving both sides know it, and
    /// a client without it cannot pose as a slave. Empty (default): no authentication, as
    /// RocketMQ. Master and slaves must agree; a stock RocketMQ slave cannot authenticate.
    ha_auth_secret: Secret = Secret::default(), "haAuthSecret";
    /// Milliseconds a SYNC_FLUSH put waits for the flush.
    sync_flush_timeout: i64 = 5000, "syncFlushTimeout";
    /// Milliseconds a SYNC_MASTER put waits for a slave ack.
    slave_timeout: i64 = 3000, "slaveTimeout";
    /// Root of the store (`~` expands to $HOME).
    store_path_root_dir: String = "~/store".into(), "storePathRootDir";
    /// CommitLog directory; empty means `<storePathRootDir>/commitlog`. Several directories
    /// separated by `;` (RocketMQ 4.9.2's multi-directory CommitLog, say one per disk): the
    /// files of all of them make one log, and new files take turns across them.
    store_path_commit_log: String = String::new(), "storePathCommitLog";
    /// CommitLog directories (`;`-separated) whose files are read, and deleted by retention,
    /// but which get no new file (a disk being retired); they may also be listed in
    /// `storePathCommitLog`.
    read_only_commit_log_store_paths: String = String::new(), "readOnlyCommitLogStorePaths";
    /// Size of each CommitLog file in bytes.
    mapped_file_size_commit_log: i64 = 1_073_741_824, "mappedFileSizeCommitLog" | "mapedFileSizeCommitLog";
    /// Size of each ConsumeQueue file in bytes (rounded up to a multiple of 20).
    mapped_file_size_consume_queue: i64 = 6_000_000, "mappedFileSizeConsumeQueue" | "mapedFileSizeConsumeQueue";
    /// Hours of the day (`;`-separated) at which expired CommitLog files are deleted.
    delete_when: String = "04".into(), "deleteWhen";
    /// Hours a CommitLog file is kept.
    file_reserved_time: i64 = 72, "fileReservedTime";
    /// Disk usage percentage above which a retention pass runs at once, outside `deleteWhen`
    /// (it still deletes only files older than `fileReservedTime`); RocketMQ clamps it to 10..95.
    disk_max_used_space_ratio: i32 = 75, "diskMaxUsedSpaceRatio";
    /// Disk usage percentage above which CommitLog files are deleted whatever their age, when
    /// `cleanFileForciblyEnable`; RocketMQ clamps it to 30..85.
    disk_space_clean_forcibly_ratio: i32 = 85, "diskSpaceCleanForciblyRatio";
    /// Disk usage percentage above which the store is marked full and refuses puts
    /// (SERVICE_NOT_AVAILABLE) until usage is back at or below `diskSpaceCleanForciblyRatio`;
    /// RocketMQ clamps it to 35..90.
    disk_space_warning_level_ratio: i32 = 90, "diskSpaceWarningLevelRatio";
    /// Whether a disk above `diskSpaceCleanForciblyRatio` deletes files before they expire.
    clean_file_forcibly_enable: bool = true, "cleanFileForciblyEnable";
    /// Largest body accepted, in bytes.
    max_message_size: i32 = 4_194_304, "maxMessageSize";
    /// ASYNC_FLUSH: milliseconds between flushes.
    flush_interval_commit_log: i64 = 500, "flushIntervalCommitLog";
    /// ASYNC_FLUSH: pages (4 KiB) of new data needed before a flush.
    flush_commit_log_least_pages: i32 = 4, "flushCommitLogLeastPages";
    /// ASYNC_FLUSH: milliseconds after which everything is flushed regardless of pages.
    flush_commit_log_thorough_interval: i64 = 10000, "flushCommitLogThoroughInterval";
    /// ASYNC_FLUSH: sleep between flushes rather than waiting to be woken.
    flush_commit_log_timed: bool = true, "flushCommitLogTimed";
    /// Milliseconds between ConsumeQueue flushes.
    flush_interval_consume_queue: i64 = 1000, "flushIntervalConsumeQueue";
    /// Pages of new ConsumeQueue data needed before a flush.
    flush_consume_queue_least_pages: i32 = 2, "flushConsumeQueueLeastPages";
    /// Milliseconds after which the ConsumeQueues and the checkpoint are flushed regardless.
    flush_consume_queue_thorough_interval: i64 = 60000, "flushConsumeQueueThoroughInterval";
    /// Verify body CRCs while recovering (and the whole-record CRC of a record that has one,
    /// see `enabledAppendPropCRC`).
    check_crc_on_recover: bool = true, "checkCRCOnRecover";
    /// End each record's properties with RocketMQ 5's `__CRC32#` property: a CRC-32 of all of
    /// the record's bytes before it, so recovery finds a flipped byte in a header field (a
    /// queue offset, a timestamp, a length), which the body CRC does not cover. 20 bytes more
    /// per record, and a CRC over the whole record under the put lock.
    enabled_append_prop_crc: bool = false, "enabledAppendPropCRC";
    /// RocketMQ 5 checks a record's `__CRC32#` only with this key; rmqha checks it whenever
    /// `checkCRCOnRecover` is on, so it is read and kept but changes nothing.
    force_verify_prop_crc: bool = false, "forceVerifyPropCRC";
    /// Build IndexFiles for message keys.
    message_index_enable: bool = true, "messageIndexEnable";
    /// Recover the index conservatively after a crash.
    message_index_safe: bool = false, "messageIndexSafe";
    /// Hash slots per IndexFile.
    max_hash_slot_num: i32 = 5_000_000, "maxHashSlotNum";
    /// Entries per IndexFile.
    max_index_num: i32 = 20_000_000, "maxIndexNum";
    /// Most results of one key query.
    max_msgs_num_batch: i32 = 64, "maxMsgsNumBatch";
    /// Percentage of RAM within which CommitLog data counts as "in memory".
    access_message_in_memory_max_ratio: i32 = 40, "accessMessageInMemoryMaxRatio";
    /// A slave serves reads.
    slave_read_enable: bool = false, "slaveReadEnable";
    /// A slave corrects pull offsets like a master.
    offset_check_in_slave: bool = false, "offsetCheckInSlave";
    /// Milliseconds between retention passes.
    clean_resource_interval: i64 = 10000, "cleanResourceInterval";
    /// Milliseconds between deletions of two CommitLog files in one pass.
    delete_commit_log_files_interval: i64 = 100, "deleteCommitLogFilesInterval";
    /// Milliseconds after which a file still in use is deleted anyway.
    destroy_maped_file_interval_forcibly: i64 = 120000, "destroyMapedFileIntervalForcibly";
    /// Milliseconds between retries of a file whose deletion hung.
    redelete_hanged_file_interval: i64 = 120000, "redeleteHangedFileInterval";
    /// Milliseconds the put lock may be held before puts get OS_PAGE_CACHE_BUSY.
    os_page_cache_busy_time_out_mills: i64 = 1000, "osPageCacheBusyTimeOutMills";
    /// Pre-touch (fault in) every page of each CommitLog file made ahead, in the background,
    /// and the unwritten part of the current one at start. Off by default as in RocketMQ:
    /// pre-touching dirties the whole file, so its zeros reach the disk before the data that
    /// overwrites them, and it takes a core from the writers while it runs.
    warm_maped_file_enable: bool = false, "warmMapedFileEnable";
    /// Delay levels of scheduled messages.
    message_delay_level: String = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".into(), "messageDelayLevel";
    /// Milliseconds between persists of the delay offsets.
    flush_delay_offset_interval: i64 = 10000, "flushDelayOffsetInterval";
    /// Milliseconds between persists of the consumer offsets.
    flush_consumer_offset_interval: i64 = 5000, "flushConsumerOffsetInterval";
    /// Refuse transactional half messages (TRAN_MSG) with NO_PERMISSION.
    reject_transaction_message: bool = false, "rejectTransactionMessage";
    /// Milliseconds after its birth before an undecided half message is checked back with
    /// its producer (a `CHECK_IMMUNITY_TIME_IN_SECONDS` property overrides it).
    transaction_time_out: i64 = 6000, "transactionTimeOut";
    /// Check-backs of one half message before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: i32 = 15, "transactionCheckMax";
    /// Milliseconds between two rounds of transaction check-back (masters).
    transaction_check_interval: i64 = 60000, "transactionCheckInterval";
    /// Slave: milliseconds between config syncs from the master.
    slave_sync_interval_ms: i64 = 60000, "slaveSyncIntervalMs";
    /// Slave: send the topic-config request to the master's fast port (port − 2) first, as
    /// RocketMQ does; the main port is tried when it fails.
    vip_channel_enabled: bool = true, "vipChannelEnabled";
    /// Most bytes of one pull when the data is in memory.
    max_transfer_bytes_on_message_in_memory: i32 = 262_144, "maxTransferBytesOnMessageInMemory";
    /// Most messages of one pull when the data is in memory.
    max_transfer_count_on_message_in_memory: i32 = 32, "maxTransferCountOnMessageInMemory";
    /// Most bytes of one pull when the data is on disk.
    max_transfer_bytes_on_message_in_disk: i32 = 65_536, "maxTransferBytesOnMessageInDisk";
    /// Most messages of one pull when the data is on disk.
    max_transfer_count_on_message_in_disk: i32 = 8, "maxTransferCountOnMessageInDisk";
    /// ConsumeQueue bytes scanned by one pull at least.
    max_filter_message_size: i32 = 16000, "maxFilterMessageSize";
    /// Serve consumers that filter by SQL92 expressions over message properties
    /// (`MessageSelector.bySql`): CHECK_CLIENT_CONFIG accepts them and pulls evaluate them.
    /// Off, as in RocketMQ: such consumers are refused with SYSTEM_ERROR.
    enable_property_filter: bool = false, "enablePropertyFilter";
    /// Create topics on first send.
    auto_create_topic_enable: bool = true, "autoCreateTopicEnable";
    /// Create subscription groups on first use.
    auto_create_subscription_group: bool = true, "autoCreateSubscriptionGroup";
    /// What the broker lets clients do (RocketMQ's `PermName`): 6 read and write, 4 read only
    /// (sends refused, consumers drain it), 2 write only (pulls refused). Routes advertise each
    /// topic's permission with this one's bits removed. Changeable at runtime
    /// (UPDATE_BROKER_CONFIG, `mqadmin updateBrokerConfig -k brokerPermission`).
    broker_permission: i32 = 6, "brokerPermission";
    /// Push NOTIFY_CONSUMER_IDS_CHANGED to a consumer group's members when one joins or
    /// leaves or the group's topics change, so that they rebalance at once rather than at
    /// their next periodic rebalance (every 20 s in the Java client).
    notify_consumer_ids_changed_enable: bool = true, "notifyConsumerIdsChangedEnable";
    /// Milliseconds without a heartbeat after which a client is dropped (RocketMQ's
    /// `channelExpiredTimeout`): a consumer whose connection is still open then has it
    /// closed, and its group is told (NOTIFY_CONSUMER_IDS_CHANGED), as RocketMQ 5 does. The
    /// broker looks every tenth of it, at most every 10 s.
    channel_expired_timeout: i64 = 120_000, "channelExpiredTimeout";
    /// Milliseconds the broker waits for a consumer's answer to a request it forwards
    /// (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY) before answering the tool
    /// CONSUME_MSG_TIMEOUT (rmqha; RocketMQ's `Broker2Client.callClient` waits 10 s, the
    /// default).
    consumer_call_timeout_millis: i64 = 10_000, "consumerCallTimeoutMillis";
    /// Queues of an auto-created topic.
    default_topic_queue_nums: i32 = 8, "defaultTopicQueueNums";
    /// Largest remoting frame accepted, in bytes.
    remoting_max_frame_size: i32 = 16 * 1024 * 1024, "remotingMaxFrameSize";
    /// Check every request on the remoting port against RocketMQ's plain ACL file
    /// (`aclFilePath`). Off by default, as in RocketMQ.
    acl_enable: bool = false, "aclEnable";
    /// The plain ACL file (rmqha; RocketMQ reads `$ROCKETMQ_HOME/conf/plain_acl.yml`, or the
    /// `rocketmq.acl.plain.file` system property relative to it). Empty (default):
    /// `$ROCKETMQ_HOME/conf/plain_acl.yml`, and with `aclEnable` and no `ROCKETMQ_HOME` the
    /// broker refuses to start. `~` expands to $HOME.
    acl_file_path: String = String::new(), "aclFilePath";
    /// The access key this broker signs its own requests to another broker with (rmqha): a
    /// slave's config sync and registration with a master that has `aclEnable`. Set together
    /// with `aclSecretKey`; empty (default): unsigned, as RocketMQ 4.9's slaves, which the
    /// master must then white-list.
    acl_access_key: String = String::new(), "aclAccessKey";
    /// The secret key of `aclAccessKey` (rmqha). Never printed.
    acl_secret_key: Secret = Secret::default(), "aclSecretKey";
}

/// The known key an unknown `key` most likely misspells: the same but for case, or at most
/// two edits away (`masterAdress`, `brokerrole`).
fn closest_key(key: &str) -> Option<&'static str> {
    fn distance(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.iter().enumerate() {
            let mut cur = vec![i + 1];
            for (j, cb) in b.iter().enumerate() {
                cur.push((prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
            }
            prev = cur;
        }
        prev[b.len()]
    }
    let lower = key.to_ascii_lowercase();
    BrokerConfig::KEYS
        .iter()
        .map(|k| (distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Whether `perm` is a `brokerPermission` (from the file, or changed at runtime), or why not.
pub fn check_broker_permission(perm: i32) -> Result<(), &'static str> {
    match perm {
        2 | 4 | 6 => Ok(()),
        _ => Err("must be 6 (read and write), 4 (read only) or 2 (write only)"),
    }
}

/// RocketMQ keys that rmqha reads without acting on them; loading them warns once, by name.
const UNSUPPORTED_KEYS: &[&str] = &[
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "queryMessageThreadPoolNums",
    "adminBrokerThreadPoolNums",
    "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums",
    "transientStorePoolEnable",
    "transientStorePoolSize",
    "commitIntervalCommitLog",
    "commitCommitLogLeastPages",
    "commitCommitLogThoroughInterval",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
    "enableAcl",
    "enableDLegerCommitLog",
    "enableControllerMode",
    "controllerAddr",
    "fetchNamesrvAddrByAddressServer",
    "useEpollNativeSelector",
    "serverWorkerThreads",
    "serverSelectorThreads",
    "clientWorkerThreads",
    "waitTimeMillsInSendQueue",
    "duplicationEnable",
    "totalReplicas",
    "inSyncReplicas",
    "minInSyncReplicas",
    "allAckInSyncStateSet",
    "enableAutoInSyncReplicas",
    "haFlowControlEnable",
    "maxHaTransferByteInSecond",
    "haMaxTimeSlaveNotCatchup",
    "asyncLearner",
    "enableSlaveActingMaster",
    "autoMessageVersionOnTopicLen",
    "readUnCommitted",
    "registerNameServerPeriod",
    "flushCommitLogLeastPages_",
];

/// RocketMQ keys that rmqha parses and keeps (they read back, and round-trip through
/// `to_properties`) but that have nothing to act on here; setting one warns once, saying why.
const NO_EFFECT_KEYS: &[(&str, &str)] = &[
    ("forceVerifyPropCRC", "a record's __CRC32# property is verified whenever checkCRCOnRecover is on"),
    (
        "destroyMapedFileIntervalForcibly",
        "a deleted CommitLog file is unlinked at once and unmapped when its last reader lets go, so no deletion waits on a reader",
    ),
    (
        "redeleteHangedFileInterval",
        "a deleted CommitLog file is unlinked at once and unmapped when its last reader lets go, so no deletion hangs",
    ),
    ("flushDelayOffsetInterval", "delay offsets are written to disk at every change"),
];

/// The largest millisecond value a config key takes (Java's `int` range, 24.8 days).
const MAX_MS: i64 = i32::MAX as i64;

/// Whether `s` is `host:port` with a non-empty host and a port 1..65535 (the form of
/// `haMasterAddress` and `masterAddress`; IPv6 hosts in brackets).
pub(crate) fn is_host_port(s: &str) -> bool {
    s.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0))
}

fn default_broker_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        if let Ok(s) = std::str::from_utf8(&buf[..end]) {
            if !s.is_empty() {
                return s.to_string();
            }
        }
    }
    "broker-a".into()
}

impl BrokerConfig {
    /// Whether `key` (trimmed) is neither a key rmqha reads (either spelling) nor a RocketMQ
    /// key it accepts with a warning; then the known key it most likely misspells, if any.
    /// For a command line, where a typo is not a key of another RocketMQ component.
    pub fn unknown_key(key: &str) -> Option<Option<&'static str>> {
        let key = key.trim();
        if Self::canonical_key(key).is_some() || UNSUPPORTED_KEYS.contains(&key) {
            None
        } else {
            Some(closest_key(key))
        }
    }

    /// Sets one key (either spelling of the renamed keys). An unknown key is not an error: it
    /// is recorded in [`BrokerConfig::warnings`] and logged, since RocketMQ configs carry many
    /// keys that do not concern storage or HA.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let key = key.trim();
        if let Some(canonical) = Self::canonical_key(key) {
            if key != canonical && self.spelled_current.contains(canonical) {
                // Whatever the order in the file: RocketMQ since 4.5.2 reads only the current
                // spelling, and master and slave must agree on file sizes.
                self.warn(format!(
                    "{key}={value} ignored: {canonical} is set too, and RocketMQ reads only {canonical}"
                ));
                return Ok(());
            }
            // A value that parses but is out of range is rejected after it was stored: put
            // the config back as it was (warnings included), so a refused value never stays.
            let before = self.clone();
            self.set_known(canonical, value).map_err(|reason| ConfigError::for_key(key, value, reason))?;
            // RocketMQ's getters clamp the disk ratios, and sample configs in the wild say
            // diskMaxUsedSpaceRatio=99: take the file as RocketMQ would, and say so.
            let ratio = match canonical {
                "diskMaxUsedSpaceRatio" => Some((&mut self.disk_max_used_space_ratio, 10, 95)),
                "diskSpaceCleanForciblyRatio" => Some((&mut self.disk_space_clean_forcibly_ratio, 30, 85)),
                "diskSpaceWarningLevelRatio" => Some((&mut self.disk_space_warning_level_ratio, 35, 90)),
                _ => None,
            };
            if let Some((ratio, lo, hi)) = ratio {
                if !(lo..=hi).contains(ratio) {
                    let clamped = (*ratio).clamp(lo, hi);
                    let msg =
                        format!("{key}={value} is outside {lo}..{hi}; using {clamped} as RocketMQ does");
                    tracing::warn!("{msg}");
                    self.warnings.push(msg);
                    *ratio = clamped;
                }
            }
            if let Some((_, why)) = NO_EFFECT_KEYS.iter().find(|(k, _)| *k == canonical) {
                self.warn(format!("config key {key} has no effect in rmqha: {why}"));
            }
            // Errors name the key as the file spells it (old spellings included).
            self.validate_key(canonical, value.trim()).map_err(|mut e| {
                *self = before;
                e.key = Some(key.to_string());
                e
            })?;
            if key == canonical {
                self.spelled_current.insert(canonical);
                if let Some(old) = self.spelled_old.remove(canonical) {
                    self.warn(format!(
                        "{old} ignored: {canonical} is set too, and RocketMQ reads only {canonical}"
                    ));
                }
            } else {
                self.spelled_old.insert(canonical, format!("{key}={}", value.trim()));
            }
            Ok(())
        } else {
            let msg = if UNSUPPORTED_KEYS.contains(&key) {
                format!("config key {key} is a RocketMQ setting rmqha does not implement; ignored")
            } else {
                match closest_key(key) {
                    Some(k) => format!("unknown config key {key}; ignored (did you mean {k}?)"),
                    None => format!("unknown config key {key}; ignored"),
                }
            };
            self.warn(msg);
            Ok(())
        }
    }

    /// The role's master addresses that look wrong, as warnings: a master replicates from no
    /// one, so `haMasterAddress` or `masterAddress` on one is most often a slave's file
    /// promoted by hand with only `brokerRole` changed; a slave without `masterAddress` syncs
    /// no config and is not in its master's routes, and one whose two addresses are the same
    /// points one of them at the wrong port. [`crate::Broker::start`] logs them and adds them
    /// to `warnings`.
    pub fn role_warnings(&self) -> Vec<String> {
        if !self.broker_role.is_master() {
            let (ha, remoting) = (&self.ha_master_address, &self.master_address);
            return if remoting.is_empty() {
                vec![
                    "no masterAddress: this slave mirrors none of its master's topics, consumer offsets, delay \
                     offsets or subscription groups, and clients do not find it through its master (set it to \
                     the master's listenPort address)"
                        .to_string(),
                ]
            } else if ha == remoting {
                vec![format!(
                    "haMasterAddress and masterAddress are both {ha}: one is the master's HA port (haListenPort, \
                     listenPort + 1 by default), the other its remoting port (listenPort)"
                )]
            } else {
                Vec::new()
            };
        }
        [("haMasterAddress", &self.ha_master_address), ("masterAddress", &self.master_address)]
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(key, value)| {
                format!(
                    "{key}={value} is ignored: brokerRole is {}, and a master replicates from no one \
                     (remove the key, or set brokerRole=SLAVE to follow {value})",
                    self.broker_role
                )
            })
            .collect()
    }

    /// Logs a warning and records it in `warnings`, once: a key set twice warns once. Read
    /// from a properties file, it names the line.
    fn warn(&mut self, msg: String) {
        let seen = self.warnings.iter().any(|w| {
            w == &msg || w.split_once(": ").is_some_and(|(at, rest)| at.starts_with("line ") && rest == msg)
        });
        if seen {
            return;
        }
        let msg = match self.reading_line {
            Some(line) => format!("line {line}: {msg}"),
            None => msg,
        };
        tracing::warn!("{msg}");
        self.warnings.push(msg);
    }

    /// A config from key/value pairs, like a properties file without lines.
    pub fn from_map<K: AsRef<str>, V: AsRef<str>>(
        map: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        let mut cfg = BrokerConfig::default();
        for (k, v) in map {
            cfg.set(k.as_ref(), v.as_ref())?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a RocketMQ-style `broker.properties` file.
    pub fn from_properties_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let cfg = Self::read_properties_file(path)?;
        cfg.validate().map_err(|mut e| {
            e.path = Some(path.to_path_buf());
            e
        })?;
        Ok(cfg)
    }

    /// Reads a `broker.properties` file, checking each value but not yet the rules between
    /// keys, so more keys can be set (command-line overrides, say) before
    /// [`BrokerConfig::validate`]: a file with `brokerRole=SLAVE` and `brokerId=0` is fixed by
    /// setting `brokerId` afterwards.
    pub fn read_properties_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ConfigError {
            path: Some(path.to_path_buf()),
            ..ConfigError::new(format!("cannot read config file: {e}"))
        })?;
        // Java's Properties.load(InputStream), which RocketMQ uses, reads ISO-8859-1: a file
        // that is not UTF-8 (a Latin-1 comment, say) is read that way rather than refused.
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
        };
        let mut cfg = Self::read_properties_str(&text).map_err(|mut e| {
            e.path = Some(path.to_path_buf());
            e
        })?;
        cfg.source = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// The properties file this config was read from (`None`: built in code).
    pub fn source_file(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Writes `key=value` pairs into the properties file at `path`, as a broker does when
    /// settings change at run time (RocketMQ's `Configuration.persist`), but keeping the
    /// file's comments, order and other lines (see [`set_property`](super::set_property);
    /// RocketMQ rewrites the whole file from memory). Replaces the file atomically and
    /// durably (a temporary file beside it, fsync, rename, fsync of the directory), with its
    /// permissions, and keeps the previous content as `<file>.bak`, as RocketMQ's
    /// `MixAll.string2File` does. A symbolic link is followed: the file it names is replaced,
    /// and the link kept. Each key must be one rmqha knows (either spelling).
    pub fn update_properties_file(path: &Path, entries: &[(&str, &str)]) -> Result<(), ConfigError> {
        let fail = |what: &str, e: std::io::Error| ConfigError {
            path: Some(path.to_path_buf()),
            ..ConfigError::new(format!("cannot {what}: {e}"))
        };
        let real = std::fs::canonicalize(path).map_err(|e| fail("find config file", e))?;
        let path = real.as_path();
        let old = std::fs::read(path).map_err(|e| fail("read config file", e))?;
        let (text, latin1) = match std::str::from_utf8(&old) {
            Ok(t) => (t.to_owned(), false),
            Err(_) => (old.iter().map(|&b| char::from(b)).collect::<String>(), true),
        };
        let mut updated = text;
        for &(key, value) in entries {
            let canonical = Self::canonical_key(key)
                .ok_or_else(|| ConfigError::new(format!("unknown config key {}", crate::clip(key, 64))))?;
            let is_key = |k: &str| Self::canonical_key(k) == Some(canonical);
            updated = super::set_property(&updated, is_key, canonical, value).map_err(|e| ConfigError {
                path: Some(path.to_path_buf()),
                line: Some(e.line),
                ..ConfigError::new(format!(
                    "cannot update {canonical} in a file that does not parse: {}",
                    e.reason
                ))
            })?;
        }
        // The new line is ASCII (escaped); the rest goes back as it came.
        let out: Vec<u8> =
            if latin1 { updated.chars().map(|c| c as u8).collect() } else { updated.into_bytes() };
        let sibling = |suffix: &str| {
            let mut s = path.as_os_str().to_owned();
            s.push(suffix);
            PathBuf::from(s)
        };
        let write = |to: &Path, bytes: &[u8]| -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(to)?;
            f.write_all(bytes)?;
            f.sync_all()
        };
        let bak = sibling(".bak");
        write(&bak, &old).map_err(|e| fail(&format!("write {}", bak.display()), e))?;
        let tmp = sibling(".tmp");
        let placed = write(&tmp, &out)
            .and_then(|()| std::fs::set_permissions(&tmp, std::fs::metadata(path)?.permissions()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(&format!("replace the config file through {}", tmp.display()), e));
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| fail("fsync its directory", e))?;
        Ok(())
    }

    /// Reads properties text (see [`BrokerConfig::from_properties_file`]).
    pub fn from_properties_str(text: &str) -> Result<Self, ConfigError> {
        let cfg = Self::read_properties_str(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn read_properties_str(text: &str) -> Result<Self, ConfigError> {
        // A byte-order mark written by an editor is not part of the first key.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let entries = parse_properties(text)
            .map_err(|e| ConfigError { line: Some(e.line), ..ConfigError::new(e.reason) })?;
        let mut cfg = BrokerConfig::default();
        for e in &entries {
            cfg.reading_line = Some(e.line);
            let set = cfg.set(&e.key, &e.value);
            cfg.reading_line = None;
            set.map_err(|mut err| {
                err.line = Some(e.line);
                err
            })?;
        }
        if cfg.explicit.is_empty() {
            // An empty, truncated or wrong file would start a master with every default.
            cfg.warn(format!(
                "the config sets none of rmqha's keys ({} entries): running as {} with every default, store {}",
                entries.len(),
                cfg.broker_role,
                cfg.store_root().display()
            ));
        }
        Ok(cfg)
    }

    /// The config as `key=value` properties text (canonical keys, explicit values only unless
    /// `all` is set).
    pub fn to_properties(&self, all: bool) -> String {
        let mut out = String::new();
        for key in Self::KEYS {
            if all || self.explicit.contains(key) {
                let mut v = self.get(key).unwrap_or_default();
                if *key == "brokerId" && !self.explicit.contains(key) {
                    // A SLAVE left at the default 0 is broker 1; writing 0 out would make the
                    // text unreadable ("a SLAVE needs a brokerId greater than 0").
                    v = self.effective_broker_id().to_string();
                }
                out.push_str(key);
                out.push('=');
                out.push_str(&escape_value(&v));
                out.push('\n');
            }
        }
        out
    }

    /// Every key with its value, explicit or default, secrets included (to build the same
    /// config again).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        Self::KEYS.iter().map(|k| (k.to_string(), self.get(k).unwrap_or_default())).collect()
    }

    /// The keys whose values are secrets (`haAuthSecret`, `aclSecretKey`).
    pub const SECRET_KEYS: &'static [&'static str] = &["haAuthSecret", "aclSecretKey"];

    /// Like [`to_map`](Self::to_map), for showing a running broker's config: a secret that is
    /// set reads [`REDACTED`], one that is not reads empty.
    pub fn to_map_redacted(&self) -> BTreeMap<String, String> {
        let mut map = self.to_map();
        for key in Self::SECRET_KEYS {
            if let Some(v) = map.get_mut(*key) {
                if !v.is_empty() {
                    *v = REDACTED.to_string();
                }
            }
        }
        map
    }

    /// Whether a key was set explicitly (not left at its default).
    pub fn is_explicit(&self, key: &str) -> bool {
        Self::canonical_key(key).is_some_and(|k| self.explicit.contains(k))
    }

    /// A numeric key's value (0 for a key that is not numeric).
    fn number(&self, key: &str) -> i64 {
        self.get(key).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
    }

    fn validate_key(&self, key: &'static str, value: &str) -> Result<(), ConfigError> {
        let bad = |reason: &str| Err(ConfigError::for_key(key, value, reason));
        match key {
            "listenPort" if !(0..=65535).contains(&self.listen_port) => bad("must be 0..65535"),
            "channelExpiredTimeout" if !(1000..=86_400_000).contains(&self.channel_expired_timeout) => {
                bad("must be between 1000 and 86400000 ms")
            }
            "haListenPort" if !(-1..=65535).contains(&self.ha_listen_port) => {
                bad("must be 0..65535 (or -1 for listenPort+1)")
            }
            "mappedFileSizeCommitLog"
                if self.mapped_file_size_commit_log < 4096
                    || self.mapped_file_size_commit_log > i32::MAX as i64 =>
            {
                bad("must be between 4096 and 2147483647 bytes")
            }
            "mappedFileSizeConsumeQueue"
                if self.mapped_file_size_consume_queue < 20
                    || self.mapped_file_size_consume_queue > i32::MAX as i64 =>
            {
                bad("must be between 20 and 2147483647 bytes")
            }
            // A RocketMQ slave reads frames into a 4 MiB buffer: a larger frame (its 12-byte
            // header included) never fits, and that slave stalls without a word.
            "haTransferBatchSize" if !(1..=4 * 1024 * 1024 - 12).contains(&self.ha_transfer_batch_size) => {
                bad(
                    "must be between 1 and 4194292 bytes (a RocketMQ slave's 4 MiB read buffer holds a frame and its 12-byte header)",
                )
            }
            "haSyncSlaveCount" if self.ha_sync_slave_count < 1 => bad("must be at least 1"),
            "brokerPermission" => check_broker_permission(self.broker_permission)
                .map_err(|reason| ConfigError::for_key(key, value, reason)),
            "maxMessageSize" if self.max_message_size <= 0 => bad("must be positive"),
            "transactionCheckInterval" if self.transaction_check_interval <= 0 => bad("must be positive"),
            "transactionTimeOut" if self.transaction_time_out < 0 => bad("must not be negative"),
            "accessMessageInMemoryMaxRatio"
                if !(0..=100).contains(&self.access_message_in_memory_max_ratio) =>
            {
                bad("must be between 0 and 100")
            }
            // Milliseconds become deadlines (now + d): keep them where that cannot overflow.
            "haSendHeartbeatInterval"
            | "haHousekeepingInterval"
            | "syncFlushTimeout"
            | "slaveTimeout"
            | "flushIntervalCommitLog"
            | "flushIntervalConsumeQueue"
            | "slaveSyncIntervalMs"
            | "cleanResourceInterval"
            | "flushConsumerOffsetInterval"
            | "flushDelayOffsetInterval"
            | "osPageCacheBusyTimeOutMills"
            | "consumerCallTimeoutMillis"
                if !(1..=MAX_MS).contains(&self.number(key)) =>
            {
                bad("must be a positive number of milliseconds, at most 2147483647 (24.8 days)")
            }
            "flushCommitLogThoroughInterval"
            | "flushConsumeQueueThoroughInterval"
            | "deleteCommitLogFilesInterval"
            | "destroyMapedFileIntervalForcibly"
            | "redeleteHangedFileInterval"
                if !(0..=MAX_MS).contains(&self.number(key)) =>
            {
                bad("must be a number of milliseconds from 0 to 2147483647 (24.8 days)")
            }
            "fileReservedTime" if !(0..=876_000).contains(&self.file_reserved_time) => {
                bad("must be a number of hours from 0 to 876000 (100 years)")
            }
            "flushCommitLogLeastPages" | "flushConsumeQueueLeastPages" | "haSlaveFallbehindMax"
                if self.number(key) < 0 =>
            {
                bad("must not be negative")
            }
            "maxMsgsNumBatch"
            | "maxTransferBytesOnMessageInMemory"
            | "maxTransferCountOnMessageInMemory"
            | "maxTransferBytesOnMessageInDisk"
            | "maxTransferCountOnMessageInDisk"
            | "maxFilterMessageSize"
                if self.number(key) <= 0 =>
            {
                bad("must be positive")
            }
            "defaultTopicQueueNums" if !(1..=1024).contains(&self.default_topic_queue_nums) => {
                bad("must be between 1 and 1024")
            }
            "maxHashSlotNum" if self.max_hash_slot_num <= 0 => bad("must be positive"),
            "maxIndexNum" if self.max_index_num <= 1 => bad("must be greater than 1"),
            "deleteWhen" if parse_delete_when(&self.delete_when).is_none() => {
                bad("expected hours of the day 00..23 separated by ';'")
            }
            "brokerId" if self.broker_id < 0 => bad("must not be negative"),
            "storePathRootDir" if self.store_path_root_dir.trim().is_empty() => {
                bad("must name a directory (an empty path would put the store in the working directory)")
            }
            "storePathRootDir" | "storePathCommitLog" | "readOnlyCommitLogStorePaths"
                if value.split(';').map(str::trim).any(|v| v == "~" || v.starts_with("~/"))
                    && home_dir().is_none() =>
            {
                bad(
                    "~ needs a home directory, and HOME is unset and the user has none: give an absolute path",
                )
            }
            "brokerIP1" if !value.is_empty() && value.parse::<std::net::IpAddr>().is_err() => {
                bad("expected an IP address: message ids and routes carry its bytes")
            }
            "haMasterAddress" | "masterAddress"
                if !value.trim().is_empty() && !is_host_port(value.trim()) =>
            {
                bad("expected host:port with a port from 1 to 65535")
            }
            "haClientBindAddress"
                if !self.ha_client_bind_address.is_empty()
                    && self.ha_client_bind_address.parse::<std::net::IpAddr>().is_err() =>
            {
                bad("expected an IP address")
            }
            "bindAddress" if self.bind_address.parse::<std::net::IpAddr>().is_err() => {
                bad("expected an IP address such as 0.0.0.0 or 127.0.0.1")
            }
            "remotingMaxFrameSize" if self.remoting_max_frame_size < 1024 => bad("must be at least 1024"),
            "haAuthSecret"
                if !self.ha_auth_secret.is_empty() && self.ha_auth_secret.expose().chars().count() < 16 =>
            {
                // Not `bad`: the error must not repeat the secret.
                Err(ConfigError {
                    key: Some(key.to_string()),
                    value: None,
                    path: None,
                    line: None,
                    reason: format!(
                        "must be at least 16 characters (this one has {}), or empty for no authentication",
                        self.ha_auth_secret.expose().chars().count()
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// The plain ACL file: `aclFilePath`, else `$ROCKETMQ_HOME/conf/plain_acl.yml`, else
    /// `None`.
    pub fn acl_file(&self) -> Option<PathBuf> {
        let p = self.acl_file_path.trim();
        if !p.is_empty() {
            return Some(expand_home(p));
        }
        std::env::var_os("ROCKETMQ_HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join("conf").join("plain_acl.yml"))
    }

    /// Checks every key's range (a field assigned directly skips `set`'s check) and the
    /// relations between keys once all are set.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for key in Self::KEYS {
            let value = self.get(key).unwrap_or_default();
            self.validate_key(key, &value)?;
        }
        if self.broker_role == BrokerRole::Slave && self.broker_id == 0 && self.is_explicit("brokerId") {
            return Err(ConfigError::for_key("brokerId", "0", "a SLAVE needs a brokerId greater than 0"));
        }
        if self.acl_access_key.trim().is_empty() != self.acl_secret_key.is_empty() {
            // Not `for_key`: the error must not repeat the secret.
            return Err(ConfigError::new("aclAccessKey and aclSecretKey go together: set both, or neither"));
        }
        let read_only = self.read_only_commit_log_dirs();
        if self.commit_log_dirs().iter().all(|d| read_only.contains(d)) {
            return Err(if self.store_path_commit_log.trim().is_empty() {
                ConfigError::for_key(
                    "readOnlyCommitLogStorePaths",
                    &self.read_only_commit_log_store_paths,
                    format!(
                        "names the CommitLog directory {} (storePathCommitLog is unset): new CommitLog files \
                         would have nowhere to go",
                        self.commit_log_dir().display()
                    ),
                )
            } else {
                ConfigError::for_key(
                    "storePathCommitLog",
                    &self.store_path_commit_log,
                    "every directory is also in readOnlyCommitLogStorePaths: new CommitLog files would have nowhere to go",
                )
            });
        }
        if self.ha_listen_port < 0 && self.listen_port == 65535 {
            return Err(ConfigError::for_key(
                "listenPort",
                "65535",
                "leaves no port for the default haListenPort (listenPort+1); set haListenPort",
            ));
        }
        Ok(())
    }

    /// The broker id in effect: 0 for a master; a slave left at 0 becomes 1.
    pub fn effective_broker_id(&self) -> i64 {
        match self.broker_role {
            BrokerRole::Slave if self.broker_id == 0 => 1,
            BrokerRole::Slave => self.broker_id,
            _ => 0,
        }
    }

    /// `storePathRootDir` with `~` expanded.
    pub fn store_root(&self) -> PathBuf {
        expand_home(&self.store_path_root_dir)
    }

    /// The CommitLog directory (`storePathCommitLog`, or `<root>/commitlog`); of several, the
    /// first named (see `commit_log_dirs`).
    pub fn commit_log_dir(&self) -> PathBuf {
        self.commit_log_dirs().swap_remove(0)
    }

    /// Every directory of `storePathCommitLog` (`;`-separated, empty entries skipped, each
    /// named once), or `<root>/commitlog` when it names none.
    pub fn commit_log_dirs(&self) -> Vec<PathBuf> {
        let dirs = split_dirs(&self.store_path_commit_log);
        if dirs.is_empty() { vec![self.store_root().join("commitlog")] } else { dirs }
    }

    /// The directories of `readOnlyCommitLogStorePaths`.
    pub fn read_only_commit_log_dirs(&self) -> Vec<PathBuf> {
        split_dirs(&self.read_only_commit_log_store_paths)
    }

    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_root().join("consumequeue")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.store_root().join("index")
    }
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_root().join("checkpoint")
    }
    pub fn abort_path(&self) -> PathBuf {
        self.store_root().join("abort")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.store_root().join("lock")
    }
    pub fn config_dir(&self) -> PathBuf {
        self.store_root().join("config")
    }

    /// ConsumeQueue file size rounded up to whole 20-byte units, as RocketMQ does.
    pub fn consume_queue_file_size(&self) -> u64 {
        let s = self.mapped_file_size_consume_queue.max(20) as u64;
        s.div_ceil(20) * 20
    }

    /// The HA port to bind: explicit `haListenPort`, else listenPort+1 (0 stays 0).
    pub fn effective_ha_port(&self) -> u16 {
        if self.ha_listen_port >= 0 {
            self.ha_listen_port as u16
        } else if self.listen_port == 0 {
            0
        } else {
            (self.listen_port as u16).saturating_add(1)
        }
    }

    /// The hours of `deleteWhen`.
    pub fn delete_when_hours(&self) -> Vec<u8> {
        parse_delete_when(&self.delete_when).unwrap_or_else(|| vec![4])
    }
}

fn parse_delete_when(s: &str) -> Option<Vec<u8>> {
    let mut hours = Vec::new();
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let h: u8 = part.parse().ok()?;
        if h > 23 {
            return None;
        }
        hours.push(h);
    }
    if hours.is_empty() { None } else { Some(hours) }
}

/// `;`-separated directories, trimmed, `~` expanded, empty entries skipped, each once.
fn split_dirs(value: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in value.split(';').map(str::trim).filter(|d| !d.is_empty()).map(expand_home) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

fn expand_home(p: &str) -> PathBuf {
    if p == "~" || p.starts_with("~/") {
        if let Some(home) = home_dir() {
            return home.join(p.trim_start_matches('~').trim_start_matches('/'));
        }
    }
    PathBuf::from(p)
}

/// `$HOME`, else the user's home directory from the password database, as Java's
/// `user.home` is (services started without `HOME` are common).
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or_else(passwd_home)
}

#[cfg(unix)]
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwuid_r fills `pw` with pointers into `buf`, which outlives their use here;
    // `result` is non-null only when an entry was found.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(libc::getuid(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc != 0 || result.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pw.pw_dir).to_bytes();
        (!dir.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    }
}

#[cfg(not(unix))]
fn passwd_home() -> Option<PathBuf> {
    None
}

fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' ' if i == 0 => out.push_str("\\ "),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_properties_file_update_keeps_latin1_bytes_and_takes_either_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        // A Latin-1 comment (0xE9), as Java's Properties files may hold; an old spelling.
        let original = b"# caf\xE9\nbrokerName=a\nmapedFileSizeCommitLog=1048576\n".to_vec();
        std::fs::write(&path, &original).unwrap();
        BrokerConfig::update_properties_file(
            &path,
            &[("brokerPermission", "4"), ("mappedFileSizeCommitLog", "2097152")],
        )
        .unwrap();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after, b"# caf\xE9\nbrokerName=a\nmappedFileSizeCommitLog=2097152\nbrokerPermission=4\n");
        assert_eq!(std::fs::read(dir.path().join("broker.conf.bak")).unwrap(), original);
        let c = BrokerConfig::from_properties_file(&path).unwrap();
        assert_eq!((c.broker_permission, c.mapped_file_size_commit_log), (4, 2_097_152));
        assert_eq!(c.source_file(), Some(path.as_path()));

        // An unknown key, or a file that is gone, changes nothing and says why.
        let e = BrokerConfig::update_properties_file(&path, &[("noSuchKey", "1")]).unwrap_err();
        assert!(e.to_string().contains("unknown config key noSuchKey"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), after);
        let gone = dir.path().join("gone.conf");
        let e = BrokerConfig::update_properties_file(&gone, &[("brokerPermission", "6")]).unwrap_err();
        assert!(e.to_string().contains("gone.conf"), "{e}");
        assert!(!dir.path().join("gone.conf.tmp").exists());
    }

    #[test]
    fn defaults_follow_rocketmq() {
        let c = BrokerConfig::default();
        assert_eq!(c.broker_role, BrokerRole::AsyncMaster);
        assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.listen_port, 10911);
        assert_eq!(c.effective_ha_port(), 10912);
        assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
        assert_eq!(c.consume_queue_file_size(), 6_000_000);
        assert_eq!(c.ha_transfer_batch_size, 32768);
        assert_eq!(c.slave_timeout, 3000);
        assert_eq!(c.sync_flush_timeout, 5000);
        assert_eq!(c.file_reserved_time, 72);
        assert_eq!(c.delete_when_hours(), vec![4]);
    }

    #[test]
    fn the_current_spelling_wins_whatever_the_order() {
        for text in [
            "mappedFileSizeCommitLog=1048576\nmapedFileSizeCommitLog=67108864\n",
            "mapedFileSizeCommitLog=67108864\nmappedFileSizeCommitLog=1048576\n",
        ] {
            let c = BrokerConfig::from_properties_str(text).unwrap();
            assert_eq!(c.mapped_file_size_commit_log, 1_048_576, "{text}");
            // Either order says which line was ignored.
            assert!(
                c.warnings.iter().any(|w| w.contains("mapedFileSizeCommitLog=67108864 ignored")),
                "{text}: {:?}",
                c.warnings
            );
        }
        let c = BrokerConfig::from_properties_str("haSlaveFallbehindMax=100\nhaMaxGapNotInSync=5\n").unwrap();
        assert_eq!(c.ha_slave_fallbehind_max, 100);
        assert!(c.warnings.iter().any(|w| w.contains("haMaxGapNotInSync=5 ignored")), "{:?}", c.warnings);
    }

    #[test]
    fn text_values_are_trimmed_as_rocketmq_does() {
        let c = BrokerConfig::from_properties_str(
            "brokerRole=SLAVE\nhaMasterAddress=127.0.0.1:10912 \nmasterAddress=127.0.0.1:10911\t\n\
             storePathRootDir=/tmp/rmqha-trim   \nbrokerName=broker-a \nbrokerIP1=10.0.0.1 \n",
        )
        .unwrap();
        assert_eq!(c.ha_master_address, "127.0.0.1:10912");
        assert_eq!(c.master_address, "127.0.0.1:10911");
        assert_eq!(c.store_root(), PathBuf::from("/tmp/rmqha-trim"));
        assert_eq!(c.broker_name, "broker-a");
        assert_eq!(c.broker_ip1, "10.0.0.1");
    }

    #[test]
    fn broker_ip1_must_be_an_ip_address() {
        for bad in ["localhost", "10.0.0", "host:10911"] {
            let e = BrokerConfig::from_map([("brokerIP1", bad)]).unwrap_err();
            assert_eq!(e.key.as_deref(), Some("brokerIP1"), "{bad}");
            assert!(e.to_string().contains("IP address"), "{e}");
        }
        assert!(BrokerConfig::from_map([("brokerIP1", "::1")]).is_ok());
        assert!(BrokerConfig::from_map([("brokerIP1", "")]).is_ok());
    }

    #[test]
    fn home_falls_back_to_the_password_database() {
        // The user running the tests has a passwd entry (containers included), whose home
        // is what `~` means when HOME is unset, as Java's user.home.
        let home = passwd_home().expect("a passwd entry for this user");
        assert!(home.is_absolute(), "{}", home.display());
    }

    #[test]
    fn both_spellings_of_renamed_keys() {
        let a = BrokerConfig::from_map([("mapedFileSizeCommitLog", "65536")]).unwrap();
        let b = BrokerConfig::from_map([("mappedFileSizeCommitLog", "65536")]).unwrap();
        assert_eq!(a.mapped_file_size_commit_log, 65536);
        assert_eq!(b.mapped_file_size_commit_log, 65536);
        let c = BrokerConfig::from_map([("mapedFileSizeConsumeQueue", "30")]).unwrap();
        assert_eq!(c.consume_queue_file_size(), 40);
        assert!(a.is_explicit("mapedFileSizeCommitLog"));
    }

    #[test]
    fn bad_value_names_key_value_and_line() {
        let err = BrokerConfig::from_properties_str("brokerName=a\nlistenPort = nine\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("listenPort"));
        assert_eq!(err.value.as_deref(), Some("nine"));
        assert_eq!(err.line, Some(2));
        let text = err.to_string();
        assert!(text.contains("line 2") && text.contains("listenPort") && text.contains("nine"), "{text}");
        let err = BrokerConfig::from_properties_str("brokerRole=MASTER").unwrap_err();
        assert!(err.to_string().contains("SYNC_MASTER"));
        let err = BrokerConfig::from_properties_str("slaveReadEnable=yes").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("slaveReadEnable"));
    }

    #[test]
    fn unknown_key_is_a_named_warning() {
        let c = BrokerConfig::from_properties_str(
            "brokerNmae=x\nsendMessageThreadPoolNums=6\nbrokerRole=SLAVE\n",
        )
        .unwrap();
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        // The line, and the key it most likely misspells.
        assert!(
            c.warnings[0]
                .starts_with("line 1: unknown config key brokerNmae; ignored (did you mean brokerName?)")
        );
        assert!(
            c.warnings[1].contains("sendMessageThreadPoolNums")
                && c.warnings[1].contains("does not implement")
        );
        assert!(c.warnings[1].starts_with("line 2: "));
        let c = BrokerConfig::from_properties_str("masterAdress=1.2.3.4:10911\nBROKERROLE=SLAVE\nzzz=1\n")
            .unwrap();
        assert!(c.warnings[0].contains("did you mean masterAddress?"), "{:?}", c.warnings);
        assert!(c.warnings[1].contains("did you mean brokerRole?"), "{:?}", c.warnings);
        assert!(c.warnings[2].ends_with("unknown config key zzz; ignored"), "{:?}", c.warnings);
        // A file that sets nothing rmqha knows (empty, truncated, the wrong file) says so.
        for text in ["", "# only a comment\n", "zzz=1\n"] {
            let c = BrokerConfig::from_properties_str(text).unwrap();
            assert!(
                c.warnings
                    .last()
                    .is_some_and(|w| w.contains("sets none of rmqha's keys") && w.contains("ASYNC_MASTER")),
                "{text:?}: {:?}",
                c.warnings
            );
        }
    }

    #[test]
    fn paths_derive_from_root() {
        let c = BrokerConfig::from_map([("storePathRootDir", "/data/rmq")]).unwrap();
        assert_eq!(c.commit_log_dir(), PathBuf::from("/data/rmq/commitlog"));
        assert_eq!(c.consume_queue_dir(), PathBuf::from("/data/rmq/consumequeue"));
        assert_eq!(c.checkpoint_path(), PathBuf::from("/data/rmq/checkpoint"));
        assert_eq!(c.config_dir(), PathBuf::from("/data/rmq/config"));
        let c =
            BrokerConfig::from_map([("storePathRootDir", "/r"), ("storePathCommitLog", "/cl;/cl2")]).unwrap();
        assert_eq!(c.commit_log_dir(), PathBuf::from("/cl"));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // RocketMQ 4.9.2's multi-directory CommitLog: each entry trimmed, empty and repeated
        // ones skipped, and read-only directories beside them.
        let c = BrokerConfig::from_map([
            ("storePathRootDir", "/r"),
            ("storePathCommitLog", " /d2/cl ; /d1/cl;;/d2/cl"),
            ("readOnlyCommitLogStorePaths", "/old/cl"),
        ])
        .unwrap();
        assert_eq!(c.commit_log_dirs(), [PathBuf::from("/d2/cl"), PathBuf::from("/d1/cl")]);
        assert_eq!(c.read_only_commit_log_dirs(), [PathBuf::from("/old/cl")]);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert!(
            BrokerConfig::from_map([("storePathRootDir", "/r")])
                .unwrap()
                .read_only_commit_log_dirs()
                .is_empty()
        );
        // No directory left to write new files to.
        let e = BrokerConfig::from_map([
            ("storePathCommitLog", "/a;/b"),
            ("readOnlyCommitLogStorePaths", "/b;/a"),
        ])
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("storePathCommitLog"), "{e}");
        assert!(e.to_string().contains("readOnlyCommitLogStorePaths"), "{e}");
        let e = BrokerConfig::from_map([
            ("storePathRootDir", "/r"),
            ("readOnlyCommitLogStorePaths", "/r/commitlog"),
        ])
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("readOnlyCommitLogStorePaths"), "{e}");
        assert!(e.to_string().contains("/r/commitlog (storePathCommitLog is unset)"), "{e}");
        let e = BrokerConfig::from_map([("storePathRootDir", " ")]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("storePathRootDir"), "{e}");
    }

    #[test]
    fn keys_without_effect_warn_once_and_keep_their_values() {
        let c = BrokerConfig::from_properties_str(
            "destroyMapedFileIntervalForcibly=1\nredeleteHangedFileInterval=2\nflushDelayOffsetInterval=3\n\
             flushDelayOffsetInterval=4\n",
        )
        .unwrap();
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings.iter().all(|w| w.contains("has no effect in rmqha")), "{:?}", c.warnings);
        assert_eq!(c.flush_delay_offset_interval, 4);
        assert_eq!(c.get("redeleteHangedFileInterval").as_deref(), Some("2"));
    }

    #[test]
    fn numbers_out_of_range_are_errors_naming_the_key() {
        for (key, value) in [
            ("slaveTimeout", "0"),
            ("slaveTimeout", "9223372036854775807"),
            ("syncFlushTimeout", "2147483648"),
            ("osPageCacheBusyTimeOutMills", "-1"),
            ("flushCommitLogThoroughInterval", "-5"),
            ("deleteCommitLogFilesInterval", "-1"),
            ("fileReservedTime", "-1"),
            ("fileReservedTime", "9999999999"),
            ("flushCommitLogLeastPages", "-1"),
            ("haSlaveFallbehindMax", "-1"),
            ("maxMsgsNumBatch", "0"),
            ("maxTransferCountOnMessageInDisk", "-3"),
            ("defaultTopicQueueNums", "0"),
            ("defaultTopicQueueNums", "5000"),
        ] {
            let e = BrokerConfig::from_map([(key, value)]).unwrap_err();
            assert_eq!((e.key.as_deref(), e.value.as_deref()), (Some(key), Some(value)), "{e}");
        }
        for (key, value) in [
            ("slaveTimeout", "2147483647"),
            ("flushCommitLogThoroughInterval", "0"),
            ("fileReservedTime", "0"),
            ("haSlaveFallbehindMax", "0"),
            ("defaultTopicQueueNums", "1024"),
        ] {
            assert!(BrokerConfig::from_map([(key, value)]).is_ok(), "{key}={value}");
        }
    }

    #[test]
    fn a_refused_value_leaves_the_config_as_it_was() {
        let mut c = BrokerConfig::default();
        c.set("listenPort", "10999").unwrap();
        c.set("diskMaxUsedSpaceRatio", "80").unwrap();
        let warnings = c.warnings.len();
        for (key, value) in [
            ("listenPort", "70000"),
            ("haTransferBatchSize", "0"),
            ("haTransferBatchSize", "4194293"),
            ("slaveTimeout", "0"),
        ] {
            let before = c.get(key);
            assert!(c.set(key, value).is_err(), "{key}={value}");
            assert_eq!(c.get(key), before, "{key} kept its value");
            assert!(!c.is_explicit(key) || key == "listenPort", "{key} not marked as given");
        }
        assert_eq!(c.get("listenPort").as_deref(), Some("10999"));
        assert_eq!(c.warnings.len(), warnings, "no warning from a refused value");
        c.set("haTransferBatchSize", "4194292").unwrap();
        c.validate().unwrap();
    }

    #[test]
    fn acl_keys() {
        let c = BrokerConfig::default();
        assert!(!c.acl_enable, "off by default, as in RocketMQ");
        let mut c = BrokerConfig::default();
        c.set("aclFilePath", "/etc/rmqha/plain_acl.yml").unwrap();
        assert_eq!(c.acl_file(), Some(PathBuf::from("/etc/rmqha/plain_acl.yml")));
        // One of the slave's two keys without the other.
        c.set("aclSecretKey", "slave-secret-1").unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.reason.contains("aclAccessKey and aclSecretKey go together"), "{e:?}");
        assert!(!format!("{e:?} {c:?}").contains("slave-secret-1"));
        c.set("aclAccessKey", "slaveAK01").unwrap();
        c.validate().unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn secrets_redacted_for_showing() {
        // Every key whose value Debug hides (a `Secret`) is one of SECRET_KEYS.
        const PROBE: &str = "probe-secret-value-0123";
        for key in BrokerConfig::KEYS {
            let mut c = BrokerConfig::default();
            if c.set(key, PROBE).is_ok() && !format!("{c:?}").contains(PROBE) {
                assert!(BrokerConfig::SECRET_KEYS.contains(key), "{key} is a secret not in SECRET_KEYS");
            }
        }
        let mut c = BrokerConfig::default();
        assert_eq!(
            c.to_map_redacted().get("haAuthSecret").map(String::as_str),
            Some(""),
            "unset shows empty"
        );
        c.set("haAuthSecret", "ha-secret-of-16-chars").unwrap();
        c.set("aclAccessKey", "slaveAK01").unwrap();
        c.set("aclSecretKey", "slave-secret-1").unwrap();
        let shown = c.to_map_redacted();
        assert_eq!(shown["haAuthSecret"], REDACTED);
        assert_eq!(shown["aclSecretKey"], REDACTED);
        assert_eq!(shown["aclAccessKey"], "slaveAK01", "only secrets are hidden");
        assert!(
            !format!("{shown:?}").contains("ha-secret-of-16")
                && !format!("{shown:?}").contains("slave-secret")
        );
        assert_eq!(
            c.to_map()["aclSecretKey"],
            "slave-secret-1",
            "to_map keeps them, to build the config again"
        );
        // The placeholder passed back as a config is refused, not taken as the secret.
        let e = BrokerConfig::from_map(shown.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_err();
        assert!(e.to_string().contains("placeholder"), "{e}");
    }

    #[test]
    fn validate_checks_fields_assigned_directly() {
        let c = BrokerConfig { listen_port: 70000, ..Default::default() };
        let e = c.validate().unwrap_err();
        assert_eq!((e.key.as_deref(), e.value.as_deref()), (Some("listenPort"), Some("70000")), "{e}");
        let c = BrokerConfig { slave_timeout: 0, ..Default::default() };
        assert_eq!(c.validate().unwrap_err().key.as_deref(), Some("slaveTimeout"));
        BrokerConfig::default().validate().unwrap();
    }

    #[test]
    fn master_addresses_must_be_host_port() {
        for good in ["10.0.0.7:10912", "broker-a:10912", "[::1]:10912"] {
            let c = BrokerConfig::from_map([("haMasterAddress", good), ("masterAddress", good)]).unwrap();
            assert_eq!(c.ha_master_address, good);
        }
        for bad in ["not a host:port:x", "10.0.0.7", ":10912", "10.0.0.7:0", "10.0.0.7:65536"] {
            for key in ["haMasterAddress", "masterAddress"] {
                let e = BrokerConfig::from_map([(key, bad)]).unwrap_err();
                assert_eq!((e.key.as_deref(), e.value.as_deref()), (Some(key), Some(bad)), "{e}");
            }
        }
        // Empty is allowed here (a slave without one is refused at start, naming the key).
        assert!(BrokerConfig::from_map([("haMasterAddress", "")]).is_ok());
    }

    #[test]
    fn a_byte_order_mark_and_latin1_files_read_as_java_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let bom = dir.path().join("bom.properties");
        std::fs::write(&bom, "\u{feff}listenPort=10999\n").unwrap();
        let c = BrokerConfig::from_properties_file(&bom).unwrap();
        assert_eq!(c.listen_port, 10999);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let bom_bad = dir.path().join("bom-bad.properties");
        std::fs::write(&bom_bad, "\u{feff}listenPort=abc\n").unwrap();
        let e = BrokerConfig::from_properties_file(&bom_bad).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("listenPort"), Some(1)), "{e}");
        // ISO-8859-1, as Java's Properties.load reads a stream: 0xE9 is 'é'.
        let latin1 = dir.path().join("latin1.properties");
        std::fs::write(&latin1, b"# broker d\xe9mo\nbrokerName=caf\xe9\nlistenPort=10998\n").unwrap();
        let c = BrokerConfig::from_properties_file(&latin1).unwrap();
        assert_eq!((c.broker_name.as_str(), c.listen_port), ("caf\u{e9}", 10998));
    }

    #[test]
    fn ha_port_rules() {
        let c = BrokerConfig::from_map([("listenPort", "0")]).unwrap();
        assert_eq!(c.effective_ha_port(), 0);
        let c = BrokerConfig::from_map([("listenPort", "30911")]).unwrap();
        assert_eq!(c.effective_ha_port(), 30912);
        let c = BrokerConfig::from_map([("listenPort", "30911"), ("haListenPort", "0")]).unwrap();
        assert_eq!(c.effective_ha_port(), 0);
        // 65535 leaves no room for listenPort+1: an error naming listenPort, not haListenPort.
        let e = BrokerConfig::from_map([("listenPort", "65535")]).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("listenPort"), "{e}");
        let c = BrokerConfig::from_map([("listenPort", "65535"), ("haListenPort", "65534")]).unwrap();
        assert_eq!(c.effective_ha_port(), 65534);
    }

    #[test]
    fn properties_round_trip() {
        let c = BrokerConfig::from_map([("brokerName", "a=b:c #1"), ("deleteWhen", "01;13")]).unwrap();
        let again = BrokerConfig::from_properties_str(&c.to_properties(false)).unwrap();
        assert_eq!(again.broker_name, "a=b:c #1");
        assert_eq!(again.delete_when_hours(), vec![1, 13]);
        let all = BrokerConfig::from_properties_str(&c.to_properties(true)).unwrap();
        assert_eq!(all.to_map(), c.to_map());
    }
}
