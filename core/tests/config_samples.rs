//! RocketMQ's own sample configs load as RocketMQ reads them, every key of spec section 11
//! lands in the right field, and a bad value is refused with its key, value, file and line.

use std::path::PathBuf;

use rmqha_core::{BrokerConfig, BrokerRole, FlushDiskType};

/// `distribution/conf/broker.conf` as apache/rocketmq ships it (develop, commit 377262b),
/// license header included because comment handling is part of what is tested.
const BROKER_CONF: &str = "\
# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the \"License\"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an \"AS IS\" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.

brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
enableAcl=true
namesrvAddr=127.0.0.1:9876
";

const LICENSE: &str = "\
# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the \"License\"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an \"AS IS\" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
";

/// `distribution/conf/2m-2s-sync/broker-a.properties` (no blank line after the header, no
/// spaces around `=`).
fn broker_a() -> String {
    format!(
        "{LICENSE}brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\ndeleteWhen=04\n\
         fileReservedTime=48\nbrokerRole=SYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n"
    )
}

/// `distribution/conf/2m-2s-sync/broker-a-s.properties`.
fn broker_a_s() -> String {
    format!(
        "{LICENSE}brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\ndeleteWhen=04\n\
         fileReservedTime=48\nbrokerRole=SLAVE\nflushDiskType=ASYNC_FLUSH\n"
    )
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn distribution_broker_conf() {
    let dir = tempfile::tempdir().unwrap();
    let c = BrokerConfig::from_properties_file(write(&dir, "broker.conf", BROKER_CONF)).unwrap();
    assert_eq!(c.broker_cluster_name, "DefaultCluster");
    assert_eq!(c.broker_name, "broker-a");
    assert_eq!(c.broker_id, 0);
    assert_eq!(c.delete_when, "04");
    assert_eq!(c.delete_when_hours(), vec![4]);
    assert_eq!(c.file_reserved_time, 48);
    assert_eq!(c.broker_role, BrokerRole::AsyncMaster);
    assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
    assert_eq!(c.namesrv_addr, "127.0.0.1:9876");
    // enableAcl is RocketMQ's, not ours: loaded with a warning that names it, nothing else.
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("enableAcl"), "{:?}", c.warnings);
    // Everything not in the file keeps RocketMQ's default.
    assert_eq!(c.listen_port, 10911);
    assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
    assert!(!c.is_explicit("listenPort"));
    assert!(c.is_explicit("fileReservedTime"));
}

#[test]
fn two_master_two_slave_sync_sample() {
    let dir = tempfile::tempdir().unwrap();
    let m = BrokerConfig::from_properties_file(write(&dir, "broker-a.properties", &broker_a())).unwrap();
    assert_eq!(m.broker_role, BrokerRole::SyncMaster);
    assert_eq!(m.flush_disk_type, FlushDiskType::AsyncFlush);
    assert_eq!((m.broker_name.as_str(), m.broker_id, m.effective_broker_id()), ("broker-a", 0, 0));
    assert_eq!(m.file_reserved_time, 48);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    let s = BrokerConfig::from_properties_file(write(&dir, "broker-a-s.properties", &broker_a_s())).unwrap();
    assert_eq!(s.broker_role, BrokerRole::Slave);
    assert_eq!((s.broker_name.as_str(), s.broker_id, s.effective_broker_id()), ("broker-a", 1, 1));
    assert_eq!(s.broker_cluster_name, m.broker_cluster_name);
    assert_eq!(s.delete_when_hours(), vec![4]);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    // Both default to the same ports: RocketMQ's samples are meant for separate machines.
    assert_eq!((s.listen_port, s.effective_ha_port()), (10911, 10912));

    // Some forks of the sample add diskMaxUsedSpaceRatio=99 to the slave; RocketMQ clamps the
    // ratio to 10..95 in its getter rather than refusing the file.
    let forked = broker_a_s() + "diskMaxUsedSpaceRatio=99\n";
    let s = BrokerConfig::from_properties_str(&forked).unwrap();
    assert_eq!(s.disk_max_used_space_ratio, 95);
    assert!(
        s.warnings.iter().any(|w| w.contains("diskMaxUsedSpaceRatio") && w.contains("99")),
        "{:?}",
        s.warnings
    );
    let low = BrokerConfig::from_properties_str("diskMaxUsedSpaceRatio=5").unwrap();
    assert_eq!(low.disk_max_used_space_ratio, 10);

    // The disk guard's ratios (RocketMQ 5's MessageStoreConfig keys) are clamped the same way,
    // to 30..85 and 35..90, in the getters of RocketMQ's CleanCommitLogService.
    let d = BrokerConfig::default();
    assert_eq!(
        (d.disk_space_clean_forcibly_ratio, d.disk_space_warning_level_ratio, d.clean_file_forcibly_enable),
        (85, 90, true)
    );
    let c = BrokerConfig::from_properties_str(
        "diskSpaceWarningLevelRatio=95\ndiskSpaceCleanForciblyRatio=20\ncleanFileForciblyEnable=false\n",
    )
    .unwrap();
    assert_eq!(
        (c.disk_space_warning_level_ratio, c.disk_space_clean_forcibly_ratio, c.clean_file_forcibly_enable),
        (90, 30, false)
    );
    for key in [
        "diskSpaceWarningLevelRatio=95 is outside 35..90",
        "diskSpaceCleanForciblyRatio=20 is outside 30..85",
    ] {
        assert!(c.warnings.iter().any(|w| w.contains(key)), "{key}: {:?}", c.warnings);
    }
    let e = BrokerConfig::from_properties_str("diskSpaceWarningLevelRatio=ninety").unwrap_err();
    assert!(e.to_string().contains("diskSpaceWarningLevelRatio"), "{e}");
}

/// Every key of spec section 11's table, set to something other than its default.
const SPEC_11_SAMPLE: &str = "\
brokerClusterName=ProdCluster
brokerName=broker-b
brokerId=2
brokerRole=SLAVE
flushDiskType=SYNC_FLUSH
namesrvAddr=10.0.0.1:9876;10.0.0.2:9876
listenPort=30911
brokerIP1=10.0.0.5
brokerIP2=10.0.0.6
haListenPort=30915
haMasterAddress=10.0.0.7:30912
haSendHeartbeatInterval=1000
haHousekeepingInterval=9000
haTransferBatchSize=65536
haMaxGapNotInSync=1048576
syncFlushTimeout=2500
slaveTimeout=1500
storePathRootDir=/data/rmq
storePathCommitLog=/data/rmq-cl
mapedFileSizeCommitLog=1048576
mapedFileSizeConsumeQueue=6000
deleteWhen=01;13
fileReservedTime=12
diskMaxUsedSpaceRatio=85
maxMessageSize=1048576
flushIntervalCommitLog=200
flushCommitLogLeastPages=8
flushCommitLogThoroughInterval=20000
flushCommitLogTimed=false
commitIntervalCommitLog=100
commitCommitLogLeastPages=2
commitCommitLogThoroughInterval=100
flushIntervalConsumeQueue=2000
flushConsumeQueueLeastPages=3
flushConsumeQueueThoroughInterval=30000
transientStorePoolEnable=false
transientStorePoolSize=5
checkCRCOnRecover=false
messageIndexEnable=false
messageIndexSafe=true
maxHashSlotNum=1000
maxIndexNum=4000
maxMsgsNumBatch=32
accessMessageInMemoryMaxRatio=30
slaveReadEnable=true
offsetCheckInSlave=true
cleanResourceInterval=5000
deleteCommitLogFilesInterval=50
destroyMapedFileIntervalForcibly=60000
redeleteHangedFileInterval=60000
osPageCacheBusyTimeOutMills=2000
duplicationEnable=false
warmMapedFileEnable=true
messageDelayLevel=1s 10s 1m 1h
flushDelayOffsetInterval=20000
flushConsumerOffsetInterval=3000
registerNameServerPeriod=30000
totalReplicas=1
inSyncReplicas=1
minInSyncReplicas=1
allAckInSyncStateSet=false
enableAutoInSyncReplicas=false
haFlowControlEnable=false
maxHaTransferByteInSecond=104857600
haMaxTimeSlaveNotCatchup=15000
enableControllerMode=false
controllerAddr=
syncFromLastFile=true
asyncLearner=false
enableSlaveActingMaster=false
autoMessageVersionOnTopicLen=true
enabledAppendPropCRC=false
forceVerifyPropCRC=false
readUnCommitted=false
";

#[test]
fn spec_section_11_keys_land_in_their_fields() {
    let c = BrokerConfig::from_properties_str(SPEC_11_SAMPLE).unwrap();
    assert_eq!(c.broker_cluster_name, "ProdCluster");
    assert_eq!(c.broker_name, "broker-b");
    assert_eq!((c.broker_id, c.broker_role, c.effective_broker_id()), (2, BrokerRole::Slave, 2));
    assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(c.namesrv_addr, "10.0.0.1:9876;10.0.0.2:9876");
    assert_eq!((c.listen_port, c.ha_listen_port, c.effective_ha_port()), (30911, 30915, 30915));
    assert_eq!((c.broker_ip1.as_str(), c.broker_ip2.as_str()), ("10.0.0.5", "10.0.0.6"));
    assert_eq!(c.ha_master_address, "10.0.0.7:30912");
    assert_eq!((c.ha_send_heartbeat_interval, c.ha_housekeeping_interval), (1000, 9000));
    assert_eq!(c.ha_transfer_batch_size, 65536);
    assert_eq!(c.ha_slave_fallbehind_max, 1_048_576, "5.x spelling haMaxGapNotInSync");
    assert_eq!((c.sync_flush_timeout, c.slave_timeout), (2500, 1500));
    assert_eq!(c.store_root(), PathBuf::from("/data/rmq"));
    assert_eq!(c.commit_log_dir(), PathBuf::from("/data/rmq-cl"));
    assert_eq!(c.mapped_file_size_commit_log, 1_048_576, "old spelling mapedFileSizeCommitLog");
    assert_eq!(c.consume_queue_file_size(), 6000, "old spelling mapedFileSizeConsumeQueue");
    assert_eq!(c.delete_when_hours(), vec![1, 13]);
    assert_eq!((c.file_reserved_time, c.disk_max_used_space_ratio), (12, 85));
    assert_eq!(c.max_message_size, 1_048_576);
    assert_eq!(
        (c.flush_interval_commit_log, c.flush_commit_log_least_pages, c.flush_commit_log_thorough_interval),
        (200, 8, 20000)
    );
    assert!(!c.flush_commit_log_timed);
    assert_eq!(
        (
            c.flush_interval_consume_queue,
            c.flush_consume_queue_least_pages,
            c.flush_consume_queue_thorough_interval
        ),
        (2000, 3, 30000)
    );
    assert!(!c.check_crc_on_recover && !c.message_index_enable && c.message_index_safe);
    assert_eq!((c.max_hash_slot_num, c.max_index_num, c.max_msgs_num_batch), (1000, 4000, 32));
    assert_eq!(c.access_message_in_memory_max_ratio, 30);
    assert!(c.slave_read_enable && c.offset_check_in_slave);
    assert_eq!((c.clean_resource_interval, c.delete_commit_log_files_interval), (5000, 50));
    assert_eq!((c.destroy_maped_file_interval_forcibly, c.redelete_hanged_file_interval), (60000, 60000));
    assert_eq!(c.os_page_cache_busy_time_out_mills, 2000);
    assert!(c.warm_maped_file_enable);
    assert_eq!(c.message_delay_level, "1s 10s 1m 1h");
    assert_eq!((c.flush_delay_offset_interval, c.flush_consumer_offset_interval), (20000, 3000));
    assert!(c.sync_from_last_file);
    // The RocketMQ keys rmqha does not implement load, each with a warning that says so.
    for key in [
        "commitIntervalCommitLog",
        "transientStorePoolEnable",
        "duplicationEnable",
        "registerNameServerPeriod",
        "totalReplicas",
        "enableControllerMode",
        "controllerAddr",
        "readUnCommitted",
    ] {
        assert!(
            c.warnings.iter().any(|w| w.contains(key) && w.contains("does not implement")),
            "{key}: {:?}",
            c.warnings
        );
    }
    assert!(c.warnings.iter().all(|w| !w.contains("unknown")), "{:?}", c.warnings);
    // What was read writes back and reads again the same.
    let again = BrokerConfig::from_properties_str(&c.to_properties(false)).unwrap();
    assert_eq!(again.to_map(), c.to_map());
}

#[test]
fn defaults_are_spec_section_11s() {
    let c = BrokerConfig::default();
    let want: &[(&str, &str)] = &[
        ("brokerClusterName", "DefaultCluster"),
        ("brokerId", "0"),
        ("brokerRole", "ASYNC_MASTER"),
        ("flushDiskType", "ASYNC_FLUSH"),
        ("listenPort", "10911"),
        ("haSendHeartbeatInterval", "5000"),
        ("haHousekeepingInterval", "20000"),
        ("haTransferBatchSize", "32768"),
        ("haSlaveFallbehindMax", "268435456"),
        ("syncFlushTimeout", "5000"),
        ("slaveTimeout", "3000"),
        ("storePathRootDir", "~/store"),
        ("mappedFileSizeCommitLog", "1073741824"),
        ("mappedFileSizeConsumeQueue", "6000000"),
        ("deleteWhen", "04"),
        ("fileReservedTime", "72"),
        ("diskMaxUsedSpaceRatio", "75"),
        ("maxMessageSize", "4194304"),
        ("flushIntervalCommitLog", "500"),
        ("flushCommitLogLeastPages", "4"),
        ("flushCommitLogThoroughInterval", "10000"),
        ("flushCommitLogTimed", "true"),
        ("flushIntervalConsumeQueue", "1000"),
        ("flushConsumeQueueLeastPages", "2"),
        ("flushConsumeQueueThoroughInterval", "60000"),
        ("checkCRCOnRecover", "true"),
        ("messageIndexEnable", "true"),
        ("messageIndexSafe", "false"),
        ("maxHashSlotNum", "5000000"),
        ("maxIndexNum", "20000000"),
        ("maxMsgsNumBatch", "64"),
        ("accessMessageInMemoryMaxRatio", "40"),
        ("slaveReadEnable", "false"),
        ("offsetCheckInSlave", "false"),
        ("cleanResourceInterval", "10000"),
        ("deleteCommitLogFilesInterval", "100"),
        ("destroyMapedFileIntervalForcibly", "120000"),
        ("redeleteHangedFileInterval", "120000"),
        ("osPageCacheBusyTimeOutMills", "1000"),
        ("warmMapedFileEnable", "false"),
        ("messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"),
        ("flushDelayOffsetInterval", "10000"),
        ("flushConsumerOffsetInterval", "5000"),
        ("syncFromLastFile", "false"),
    ];
    for (k, v) in want {
        assert_eq!(c.get(k).as_deref(), Some(*v), "default of {k}");
    }
    assert_eq!(c.effective_ha_port(), 10912, "listenPort + 1");
}

#[test]
fn errors_name_the_key_the_value_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str, usize)] = &[
        ("# c\nbrokerName=a\n\nlistenPort = ninety\n", "listenPort", "ninety", 4),
        ("brokerRole=MASTER\n", "brokerRole", "MASTER", 1),
        ("a=1\nflushDiskType=SYNC\n", "flushDiskType", "SYNC", 2),
        ("slaveReadEnable=yes\n", "slaveReadEnable", "yes", 1),
        ("deleteWhen=4am\n", "deleteWhen", "4am", 1),
        ("deleteWhen=04;25\n", "deleteWhen", "04;25", 1),
        ("mappedFileSizeCommitLog=1024\n", "mappedFileSizeCommitLog", "1024", 1),
        ("x=1\ny=2\nmapedFileSizeCommitLog=-1\n", "mapedFileSizeCommitLog", "-1", 3),
        ("haTransferBatchSize=0\n", "haTransferBatchSize", "0", 1),
        ("syncFlushTimeout=0\n", "syncFlushTimeout", "0", 1),
        // A value continued over two lines is reported at the line where its entry starts.
        ("brokerName=a\nfileReservedTime=4\\\n  8h\n", "fileReservedTime", "48h", 2),
    ];
    for (i, (text, key, value, line)) in cases.iter().enumerate() {
        let path = write(&dir, &format!("bad-{i}.properties"), text);
        let err = BrokerConfig::from_properties_file(&path).unwrap_err();
        assert_eq!(err.key.as_deref(), Some(*key), "{text:?}");
        assert_eq!(err.value.as_deref(), Some(*value), "{text:?}");
        assert_eq!(err.line, Some(*line), "{text:?}");
        let shown = err.to_string();
        for part in [key.to_string(), format!("{value:?}"), format!("{}:{line}", path.display())] {
            assert!(shown.contains(&part), "{shown:?} lacks {part:?}");
        }
    }
    // A SLAVE may not be broker 0 (the relation is checked once the file is read).
    let err = BrokerConfig::from_properties_str("brokerRole=SLAVE\nbrokerId=0\n").unwrap_err();
    assert_eq!(err.key.as_deref(), Some("brokerId"));
    // Syntax errors carry the line too.
    let err = BrokerConfig::from_properties_str("a=1\nb=\\u12\n").unwrap_err();
    assert_eq!(err.line, Some(2));
    // A missing file names the path.
    let missing = dir.path().join("nope.conf");
    let err = BrokerConfig::from_properties_file(&missing).unwrap_err();
    assert!(err.to_string().contains("nope.conf"), "{err}");
}

#[test]
fn java_properties_syntax_as_rocketmq_reads_it() {
    // Separators '=', ':' and white space; escapes; continuation; CRLF; '!' comments; the last
    // duplicate wins, as with java.util.Properties.
    let text = "! comment\r\nbrokerName : broker\\u002Dx\r\nbrokerClusterName\tc1\r\n\
                messageDelayLevel=1s \\\r\n    5s\r\nbrokerName=broker-y\r\n";
    let c = BrokerConfig::from_properties_str(text).unwrap();
    assert_eq!(c.broker_name, "broker-y");
    assert_eq!(c.broker_cluster_name, "c1");
    assert_eq!(c.message_delay_level, "1s 5s");
    // Booleans are case-insensitive like Boolean.parseBoolean (but a typo is an error).
    let c = BrokerConfig::from_properties_str("slaveReadEnable=TRUE\ncheckCRCOnRecover=False\n").unwrap();
    assert!(c.slave_read_enable && !c.check_crc_on_recover);
}
