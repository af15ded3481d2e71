//! Numbers that travel in a `RemotingCommand`: request codes, response codes, language codes
//! and the header serialize type (spec sections 8, 9 and 14; values from RocketMQ's
//! `RequestCode.java`, `ResponseCode.java`, `RemotingSysResponseCode.java`,
//! `LanguageCode.java` and `SerializeType.java`).
//!
//! Request and response codes are plain `i32` constants rather than enums: a peer may send any
//! code, and an unknown one must reach the handler (which answers REQUEST_CODE_NOT_SUPPORTED),
//! not fail decoding.

use std::fmt;

/// Request codes (`RequestCode.java`). Only the codes a broker, its slave or its tools use.
pub mod request_code {
    pub const SEND_MESSAGE: i32 = 10;
    pub const PULL_MESSAGE: i32 = 11;
    pub const QUERY_MESSAGE: i32 = 12;
    pub const QUERY_BROKER_OFFSET: i32 = 13;
    pub const QUERY_CONSUMER_OFFSET: i32 = 14;
    pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
    pub const UPDATE_AND_CREATE_TOPIC: i32 = 17;
    /// Config sync, step 1: the master's topic table (sent to the VIP port).
    pub const GET_ALL_TOPIC_CONFIG: i32 = 21;
    pub const GET_TOPIC_CONFIG_LIST: i32 = 22;
    pub const GET_TOPIC_NAME_LIST: i32 = 23;
    pub const UPDATE_BROKER_CONFIG: i32 = 25;
    pub const GET_BROKER_CONFIG: i32 = 26;
    pub const GET_BROKER_RUNTIME_INFO: i32 = 28;
    pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
    pub const GET_MAX_OFFSET: i32 = 30;
    pub const GET_MIN_OFFSET: i32 = 31;
    pub const GET_EARLIEST_MSG_STORETIME: i32 = 32;
    pub const VIEW_MESSAGE_BY_ID: i32 = 33;
    pub const HEART_BEAT: i32 = 34;
    pub const UNREGISTER_CLIENT: i32 = 35;
    pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
    pub const END_TRANSACTION: i32 = 37;
    /// `mqadmin updateAclConfig`: create or update an account of the ACL file.
    pub const UPDATE_AND_CREATE_ACL_CONFIG: i32 = 50;
    /// `mqadmin deleteAclConfig`: delete an account of the ACL file.
    pub const DELETE_ACL_CONFIG: i32 = 51;
    /// `mqadmin clusterAclConfigVersion`: the ACL file's data version.
    pub const GET_BROKER_CLUSTER_ACL_INFO: i32 = 52;
    /// `mqadmin updateGlobalWhiteAddr`: replace the ACL file's global white list.
    pub const UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: i32 = 53;
    /// 4.9 answers every account of the ACL file, secret keys included; not served here.
    pub const GET_BROKER_CLUSTER_ACL_CONFIG: i32 = 54;
    /// `mqadmin resumeCheckHalfMessage`: check a transaction's half message back again (one
    /// discarded after `transactionCheckMax` checks, say).
    pub const RESUME_CHECK_HALF_MESSAGE: i32 = 323;
    pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
    pub const CHECK_TRANSACTION_STATE: i32 = 39;
    pub const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
    pub const LOCK_BATCH_MQ: i32 = 41;
    pub const UNLOCK_BATCH_MQ: i32 = 42;
    /// Config sync, step 2: the master's consumer offsets.
    pub const GET_ALL_CONSUMER_OFFSET: i32 = 43;
    /// Config sync, step 3: the master's delay offsets (JSON stored verbatim).
    pub const GET_ALL_DELAY_OFFSET: i32 = 45;
    /// Whether the broker can serve a consumer's subscription (its expression type and
    /// expression); a Java push consumer asks before it starts with a SQL92 one.
    pub const CHECK_CLIENT_CONFIG: i32 = 46;
    /// 5.x config sync: the 56-byte timer checkpoint.
    pub const GET_TIMER_CHECK_POINT: i32 = 60;
    /// 5.x config sync: timer metrics.
    pub const GET_TIMER_METRICS: i32 = 61;
    pub const REGISTER_BROKER: i32 = 103;
    pub const UNREGISTER_BROKER: i32 = 104;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
    /// Config sync, step 4: the master's subscription groups.
    pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
    pub const GET_TOPIC_STATS_INFO: i32 = 202;
    pub const GET_CONSUMER_CONNECTION_LIST: i32 = 203;
    pub const GET_PRODUCER_CONNECTION_LIST: i32 = 204;
    /// A name server's list of every topic (`mqadmin topicList`).
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    /// Name server: the names the cluster's brokers reserve (cluster and broker names), which
    /// consoles mark as system topics.
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: i32 = 304;
    /// Broker: its system topics.
    pub const GET_SYSTEM_TOPIC_LIST_FROM_BROKER: i32 = 305;
    pub const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
    pub const GET_CONSUME_STATS: i32 = 208;
    pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
    /// Pushed by the broker to a consumer group's members after an offset reset.
    pub const RESET_CONSUMER_CLIENT_OFFSET: i32 = 220;
    /// `mqadmin resetOffsetByTime`: reset a group's offsets on a topic to a store time.
    pub const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;
    /// Sent by the broker to a consumer: the offsets it holds of a topic's queues.
    pub const GET_CONSUMER_STATUS_FROM_CLIENT: i32 = 221;
    /// `mqadmin getConsumerStatus`: the broker asks the group's consumers for the offsets
    /// they hold (GET_CONSUMER_STATUS_FROM_CLIENT) and answers with them all.
    pub const INVOKE_BROKER_TO_GET_CONSUMER_STATUS: i32 = 223;
    /// A consumer's running state (`mqadmin consumerStatus`): the broker asks the client.
    pub const GET_CONSUMER_RUNNING_INFO: i32 = 307;
    /// Have a consumer consume one stored message (`mqadmin consumeMessage`): the broker
    /// sends the client the message.
    pub const CONSUME_MESSAGE_DIRECTLY: i32 = 309;
    /// The consumer groups of a topic (`mqadmin topicList -c`, the dashboard).
    pub const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
    /// Per queue of a topic: the store times of its first and last messages and of the last
    /// one a group consumed (`MQAdminExt.queryConsumeTimeSpan`).
    pub const QUERY_CONSUME_TIME_SPAN: i32 = 303;
    /// The topics a group has committed offsets on (`MQAdminExt.queryTopicsByConsumer`).
    pub const QUERY_TOPICS_BY_CONSUMER: i32 = 343;
    /// A group's live subscription of a topic (`MQAdminExt.querySubscription`).
    pub const QUERY_SUBSCRIPTION_BY_CONSUMER: i32 = 345;
    pub const SEND_MESSAGE_V2: i32 = 310;
    /// Copy one group's consumer offsets to another (`mqadmin cloneGroupOffset`).
    pub const CLONE_GROUP_OFFSET: i32 = 314;
    /// A `BrokerStatsManager` item over the last minute, hour and day (`mqadmin statsAll`).
    pub const VIEW_BROKER_STATS_DATA: i32 = 315;
    /// Every subscription group's progress on every topic it committed offsets on
    /// (`mqadmin brokerConsumeStats`, rocketmq-exporter).
    pub const GET_BROKER_CONSUME_STATS: i32 = 317;
    pub const SEND_BATCH_MESSAGE: i32 = 320;
    pub const QUERY_CONSUME_QUEUE: i32 = 321;
    pub const QUERY_DATA_VERSION: i32 = 322;
    pub const GET_TOPIC_CONFIG: i32 = 351;
    pub const GET_SUBSCRIPTIONGROUP_CONFIG: i32 = 352;
    pub const LITE_PULL_MESSAGE: i32 = 361;
    /// 5.x config sync: message request modes.
    pub const GET_ALL_MESSAGE_REQUEST_MODE: i32 = 402;
    pub const EXCHANGE_BROKER_HA_INFO: i32 = 906;
    pub const GET_BROKER_HA_STATUS: i32 = 907;
    pub const CONTROLLER_ALTER_SYNC_STATE_SET: i32 = 1001;
    pub const CONTROLLER_ELECT_MASTER: i32 = 1002;
    pub const CONTROLLER_REGISTER_BROKER: i32 = 1003;
    pub const CONTROLLER_GET_REPLICA_INFO: i32 = 1004;
    pub const CONTROLLER_GET_METADATA_INFO: i32 = 1005;
    pub const CONTROLLER_GET_SYNC_STATE_DATA: i32 = 1006;
    pub const GET_BROKER_EPOCH_CACHE: i32 = 1007;
    pub const NOTIFY_BROKER_ROLE_CHANGED: i32 = 1008;
    pub const UPDATE_CONTROLLER_CONFIG: i32 = 1009;
    pub const GET_CONTROLLER_CONFIG: i32 = 1010;
    pub const CLEAN_BROKER_DATA: i32 = 1011;
    pub const CONTROLLER_GET_NEXT_BROKER_ID: i32 = 1012;
    pub const CONTROLLER_APPLY_BROKER_ID: i32 = 1013;
    pub const BROKER_CLOSE_CHANNEL_REQUEST: i32 = 1014;
    pub const CHECK_NOT_ACTIVE_BROKER_REQUEST: i32 = 1015;
    pub const GET_BROKER_LIVE_INFO_REQUEST: i32 = 1016;
    pub const GET_SYNC_STATE_DATA_REQUEST: i32 = 1017;
    pub const RAFT_BROKER_HEART_BEAT_EVENT_REQUEST: i32 = 1018;

    /// The constant's name for a known code, for logs.
    pub fn name(code: i32) -> Option<&'static str> {
        Some(match code {
            SEND_MESSAGE => "SEND_MESSAGE",
            PULL_MESSAGE => "PULL_MESSAGE",
            QUERY_MESSAGE => "QUERY_MESSAGE",
            QUERY_BROKER_OFFSET => "QUERY_BROKER_OFFSET",
            QUERY_CONSUMER_OFFSET => "QUERY_CONSUMER_OFFSET",
            UPDATE_CONSUMER_OFFSET => "UPDATE_CONSUMER_OFFSET",
            UPDATE_AND_CREATE_TOPIC => "UPDATE_AND_CREATE_TOPIC",
            GET_ALL_TOPIC_CONFIG => "GET_ALL_TOPIC_CONFIG",
            GET_TOPIC_CONFIG_LIST => "GET_TOPIC_CONFIG_LIST",
            GET_TOPIC_NAME_LIST => "GET_TOPIC_NAME_LIST",
            UPDATE_BROKER_CONFIG => "UPDATE_BROKER_CONFIG",
            GET_BROKER_CONFIG => "GET_BROKER_CONFIG",
            GET_BROKER_RUNTIME_INFO => "GET_BROKER_RUNTIME_INFO",
            SEARCH_OFFSET_BY_TIMESTAMP => "SEARCH_OFFSET_BY_TIMESTAMP",
            GET_MAX_OFFSET => "GET_MAX_OFFSET",
            GET_MIN_OFFSET => "GET_MIN_OFFSET",
            GET_EARLIEST_MSG_STORETIME => "GET_EARLIEST_MSG_STORETIME",
            VIEW_MESSAGE_BY_ID => "VIEW_MESSAGE_BY_ID",
            HEART_BEAT => "HEART_BEAT",
            UNREGISTER_CLIENT => "UNREGISTER_CLIENT",
            CONSUMER_SEND_MSG_BACK => "CONSUMER_SEND_MSG_BACK",
            END_TRANSACTION => "END_TRANSACTION",
            GET_CONSUMER_LIST_BY_GROUP => "GET_CONSUMER_LIST_BY_GROUP",
            CHECK_TRANSACTION_STATE => "CHECK_TRANSACTION_STATE",
            NOTIFY_CONSUMER_IDS_CHANGED => "NOTIFY_CONSUMER_IDS_CHANGED",
            LOCK_BATCH_MQ => "LOCK_BATCH_MQ",
            UNLOCK_BATCH_MQ => "UNLOCK_BATCH_MQ",
            GET_ALL_CONSUMER_OFFSET => "GET_ALL_CONSUMER_OFFSET",
            GET_ALL_DELAY_OFFSET => "GET_ALL_DELAY_OFFSET",
            CHECK_CLIENT_CONFIG => "CHECK_CLIENT_CONFIG",
            GET_TIMER_CHECK_POINT => "GET_TIMER_CHECK_POINT",
            GET_TIMER_METRICS => "GET_TIMER_METRICS",
            REGISTER_BROKER => "REGISTER_BROKER",
            UNREGISTER_BROKER => "UNREGISTER_BROKER",
            GET_ROUTEINFO_BY_TOPIC => "GET_ROUTEINFO_BY_TOPIC",
            GET_BROKER_CLUSTER_INFO => "GET_BROKER_CLUSTER_INFO",
            UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
            GET_ALL_SUBSCRIPTIONGROUP_CONFIG => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
            GET_TOPIC_STATS_INFO => "GET_TOPIC_STATS_INFO",
            GET_CONSUMER_CONNECTION_LIST => "GET_CONSUMER_CONNECTION_LIST",
            GET_PRODUCER_CONNECTION_LIST => "GET_PRODUCER_CONNECTION_LIST",
            GET_ALL_TOPIC_LIST_FROM_NAMESERVER => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
            GET_SYSTEM_TOPIC_LIST_FROM_NS => "GET_SYSTEM_TOPIC_LIST_FROM_NS",
            GET_SYSTEM_TOPIC_LIST_FROM_BROKER => "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
            DELETE_SUBSCRIPTIONGROUP => "DELETE_SUBSCRIPTIONGROUP",
            GET_CONSUME_STATS => "GET_CONSUME_STATS",
            DELETE_TOPIC_IN_BROKER => "DELETE_TOPIC_IN_BROKER",
            RESET_CONSUMER_CLIENT_OFFSET => "RESET_CONSUMER_CLIENT_OFFSET",
            INVOKE_BROKER_TO_RESET_OFFSET => "INVOKE_BROKER_TO_RESET_OFFSET",
            GET_CONSUMER_RUNNING_INFO => "GET_CONSUMER_RUNNING_INFO",
            CONSUME_MESSAGE_DIRECTLY => "CONSUME_MESSAGE_DIRECTLY",
            QUERY_TOPIC_CONSUME_BY_WHO => "QUERY_TOPIC_CONSUME_BY_WHO",
            QUERY_CONSUME_TIME_SPAN => "QUERY_CONSUME_TIME_SPAN",
            QUERY_TOPICS_BY_CONSUMER => "QUERY_TOPICS_BY_CONSUMER",
            QUERY_SUBSCRIPTION_BY_CONSUMER => "QUERY_SUBSCRIPTION_BY_CONSUMER",
            SEND_MESSAGE_V2 => "SEND_MESSAGE_V2",
            CLONE_GROUP_OFFSET => "CLONE_GROUP_OFFSET",
            VIEW_BROKER_STATS_DATA => "VIEW_BROKER_STATS_DATA",
            GET_BROKER_CONSUME_STATS => "GET_BROKER_CONSUME_STATS",
            SEND_BATCH_MESSAGE => "SEND_BATCH_MESSAGE",
            QUERY_CONSUME_QUEUE => "QUERY_CONSUME_QUEUE",
            QUERY_DATA_VERSION => "QUERY_DATA_VERSION",
            GET_TOPIC_CONFIG => "GET_TOPIC_CONFIG",
            GET_SUBSCRIPTIONGROUP_CONFIG => "GET_SUBSCRIPTIONGROUP_CONFIG",
            LITE_PULL_MESSAGE => "LITE_PULL_MESSAGE",
            GET_ALL_MESSAGE_REQUEST_MODE => "GET_ALL_MESSAGE_REQUEST_MODE",
            EXCHANGE_BROKER_HA_INFO => "EXCHANGE_BROKER_HA_INFO",
            GET_BROKER_HA_STATUS => "GET_BROKER_HA_STATUS",
            CONTROLLER_ALTER_SYNC_STATE_SET => "CONTROLLER_ALTER_SYNC_STATE_SET",
            CONTROLLER_ELECT_MASTER => "CONTROLLER_ELECT_MASTER",
            CONTROLLER_REGISTER_BROKER => "CONTROLLER_REGISTER_BROKER",
            CONTROLLER_GET_REPLICA_INFO => "CONTROLLER_GET_REPLICA_INFO",
            CONTROLLER_GET_METADATA_INFO => "CONTROLLER_GET_METADATA_INFO",
            CONTROLLER_GET_SYNC_STATE_DATA => "CONTROLLER_GET_SYNC_STATE_DATA",
            GET_BROKER_EPOCH_CACHE => "GET_BROKER_EPOCH_CACHE",
            NOTIFY_BROKER_ROLE_CHANGED => "NOTIFY_BROKER_ROLE_CHANGED",
            UPDATE_CONTROLLER_CONFIG => "UPDATE_CONTROLLER_CONFIG",
            GET_CONTROLLER_CONFIG => "GET_CONTROLLER_CONFIG",
            CLEAN_BROKER_DATA => "CLEAN_BROKER_DATA",
            CONTROLLER_GET_NEXT_BROKER_ID => "CONTROLLER_GET_NEXT_BROKER_ID",
            CONTROLLER_APPLY_BROKER_ID => "CONTROLLER_APPLY_BROKER_ID",
            BROKER_CLOSE_CHANNEL_REQUEST => "BROKER_CLOSE_CHANNEL_REQUEST",
            CHECK_NOT_ACTIVE_BROKER_REQUEST => "CHECK_NOT_ACTIVE_BROKER_REQUEST",
            GET_BROKER_LIVE_INFO_REQUEST => "GET_BROKER_LIVE_INFO_REQUEST",
            GET_SYNC_STATE_DATA_REQUEST => "GET_SYNC_STATE_DATA_REQUEST",
            RAFT_BROKER_HEART_BEAT_EVENT_REQUEST => "RAFT_BROKER_HEART_BEAT_EVENT_REQUEST",
            _ => return None,
        })
    }
}

/// Response codes (`RemotingSysResponseCode.java` for 0..=4, `ResponseCode.java` for the rest).
pub mod response_code {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const TRANSACTION_FAILED: i32 = 4;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const VERSION_NOT_SUPPORTED: i32 = 15;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const TOPIC_EXIST_ALREADY: i32 = 18;
    pub const PULL_NOT_FOUND: i32 = 19;
    pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
    pub const PULL_OFFSET_MOVED: i32 = 21;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
    pub const SUBSCRIPTION_NOT_EXIST: i32 = 24;
    pub const SUBSCRIPTION_NOT_LATEST: i32 = 25;
    pub const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
    pub const FILTER_DATA_NOT_EXIST: i32 = 27;
    pub const FILTER_DATA_NOT_LATEST: i32 = 28;
    pub const INVALID_PARAMETER: i32 = 29;
    pub const TRANSACTION_SHOULD_COMMIT: i32 = 200;
    pub const TRANSACTION_SHOULD_ROLLBACK: i32 = 201;
    pub const TRANSACTION_STATE_UNKNOW: i32 = 202;
    pub const TRANSACTION_STATE_GROUP_WRONG: i32 = 203;
    pub const NO_BUYER_ID: i32 = 204;
    pub const NOT_IN_CURRENT_UNIT: i32 = 205;
    pub const CONSUMER_NOT_ONLINE: i32 = 206;
    pub const CONSUME_MSG_TIMEOUT: i32 = 207;
    pub const NO_MESSAGE: i32 = 208;
    pub const POLLING_FULL: i32 = 209;
    pub const POLLING_TIMEOUT: i32 = 210;
    pub const BROKER_NOT_EXIST: i32 = 211;
    pub const BROKER_DISPATCH_NOT_COMPLETE: i32 = 212;
    pub const BROADCAST_CONSUMPTION: i32 = 213;
    pub const FLOW_CONTROL: i32 = 215;
    pub const NOT_LEADER_FOR_QUEUE: i32 = 501;
    pub const ILLEGAL_OPERATION: i32 = 604;
    /// 5.x: the peer is shutting down and asks the client to go elsewhere.
    pub const GO_AWAY: i32 = 1500;
    pub const CONTROLLER_FENCED_MASTER_EPOCH: i32 = 2000;
    pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
    pub const CONTROLLER_INVALID_MASTER: i32 = 2002;
    pub const CONTROLLER_INVALID_REPLICAS: i32 = 2003;
    pub const CONTROLLER_MASTER_NOT_AVAILABLE: i32 = 2004;
    pub const CONTROLLER_INVALID_REQUEST: i32 = 2005;
    pub const CONTROLLER_BROKER_NOT_ALIVE: i32 = 2006;
    pub const CONTROLLER_NOT_LEADER: i32 = 2007;

    /// The constant's name for a known code, for logs.
    pub fn name(code: i32) -> Option<&'static str> {
        Some(match code {
            SUCCESS => "SUCCESS",
            SYSTEM_ERROR => "SYSTEM_ERROR",
            SYSTEM_BUSY => "SYSTEM_BUSY",
            REQUEST_CODE_NOT_SUPPORTED => "REQUEST_CODE_NOT_SUPPORTED",
            TRANSACTION_FAILED => "TRANSACTION_FAILED",
            FLUSH_DISK_TIMEOUT => "FLUSH_DISK_TIMEOUT",
            SLAVE_NOT_AVAILABLE => "SLAVE_NOT_AVAILABLE",
            FLUSH_SLAVE_TIMEOUT => "FLUSH_SLAVE_TIMEOUT",
            MESSAGE_ILLEGAL => "MESSAGE_ILLEGAL",
            SERVICE_NOT_AVAILABLE => "SERVICE_NOT_AVAILABLE",
            VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
            NO_PERMISSION => "NO_PERMISSION",
            TOPIC_NOT_EXIST => "TOPIC_NOT_EXIST",
            TOPIC_EXIST_ALREADY => "TOPIC_EXIST_ALREADY",
            PULL_NOT_FOUND => "PULL_NOT_FOUND",
            PULL_RETRY_IMMEDIATELY => "PULL_RETRY_IMMEDIATELY",
            PULL_OFFSET_MOVED => "PULL_OFFSET_MOVED",
            QUERY_NOT_FOUND => "QUERY_NOT_FOUND",
            SUBSCRIPTION_PARSE_FAILED => "SUBSCRIPTION_PARSE_FAILED",
            SUBSCRIPTION_NOT_EXIST => "SUBSCRIPTION_NOT_EXIST",
            SUBSCRIPTION_NOT_LATEST => "SUBSCRIPTION_NOT_LATEST",
            SUBSCRIPTION_GROUP_NOT_EXIST => "SUBSCRIPTION_GROUP_NOT_EXIST",
            FILTER_DATA_NOT_EXIST => "FILTER_DATA_NOT_EXIST",
            FILTER_DATA_NOT_LATEST => "FILTER_DATA_NOT_LATEST",
            INVALID_PARAMETER => "INVALID_PARAMETER",
            TRANSACTION_SHOULD_COMMIT => "TRANSACTION_SHOULD_COMMIT",
            TRANSACTION_SHOULD_ROLLBACK => "TRANSACTION_SHOULD_ROLLBACK",
            TRANSACTION_STATE_UNKNOW => "TRANSACTION_STATE_UNKNOW",
            TRANSACTION_STATE_GROUP_WRONG => "TRANSACTION_STATE_GROUP_WRONG",
            NO_BUYER_ID => "NO_BUYER_ID",
            NOT_IN_CURRENT_UNIT => "NOT_IN_CURRENT_UNIT",
            CONSUMER_NOT_ONLINE => "CONSUMER_NOT_ONLINE",
            CONSUME_MSG_TIMEOUT => "CONSUME_MSG_TIMEOUT",
            NO_MESSAGE => "NO_MESSAGE",
            POLLING_FULL => "POLLING_FULL",
            POLLING_TIMEOUT => "POLLING_TIMEOUT",
            BROKER_NOT_EXIST => "BROKER_NOT_EXIST",
            BROKER_DISPATCH_NOT_COMPLETE => "BROKER_DISPATCH_NOT_COMPLETE",
            BROADCAST_CONSUMPTION => "BROADCAST_CONSUMPTION",
            FLOW_CONTROL => "FLOW_CONTROL",
            NOT_LEADER_FOR_QUEUE => "NOT_LEADER_FOR_QUEUE",
            ILLEGAL_OPERATION => "ILLEGAL_OPERATION",
            GO_AWAY => "GO_AWAY",
            CONTROLLER_FENCED_MASTER_EPOCH => "CONTROLLER_FENCED_MASTER_EPOCH",
            CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH => "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH",
            CONTROLLER_INVALID_MASTER => "CONTROLLER_INVALID_MASTER",
            CONTROLLER_INVALID_REPLICAS => "CONTROLLER_INVALID_REPLICAS",
            CONTROLLER_MASTER_NOT_AVAILABLE => "CONTROLLER_MASTER_NOT_AVAILABLE",
            CONTROLLER_INVALID_REQUEST => "CONTROLLER_INVALID_REQUEST",
            CONTROLLER_BROKER_NOT_ALIVE => "CONTROLLER_BROKER_NOT_ALIVE",
            CONTROLLER_NOT_LEADER => "CONTROLLER_NOT_LEADER",
            _ => return None,
        })
    }
}

/// The language of the peer that built a command (`LanguageCode.java`).
///
/// A newtype over the wire byte rather than an enum, so that a code this version does not
/// know (a newer client's) survives a decode/encode round trip in a ROCKETMQ header instead of
/// failing the whole frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LanguageCode(pub u8);

impl LanguageCode {
    pub const JAVA: Self = Self(0);
    pub const CPP: Self = Self(1);
    pub const DOTNET: Self = Self(2);
    pub const PYTHON: Self = Self(3);
    pub const DELPHI: Self = Self(4);
    pub const ERLANG: Self = Self(5);
    pub const RUBY: Self = Self(6);
    /// What rmqha puts in the commands it builds: every RocketMQ release knows it. RUST exists
    /// only since 4.9.4, and older brokers, name servers and tools fail to decode a JSON
    /// header naming a language they do not know (fastjson: "No enum constant ...").
    pub const OTHER: Self = Self(7);
    pub const HTTP: Self = Self(8);
    pub const GO: Self = Self(9);
    pub const PHP: Self = Self(10);
    pub const OMS: Self = Self(11);
    /// Since RocketMQ 4.9.4.
    pub const RUST: Self = Self(12);
    /// 5.x only.
    pub const NODE_JS: Self = Self(13);

    const NAMES: [&'static str; 14] = [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
        "RUST", "NODE_JS",
    ];

    /// The Java enum constant's name, as a JSON header carries it; `None` for a code this
    /// version does not know.
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES.get(usize::from(self.0)).copied()
    }

    /// The code for a Java enum constant's name (case-sensitive, as `Enum.valueOf`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().position(|n| *n == name).and_then(|i| u8::try_from(i).ok()).map(Self)
    }
}

impl fmt::Display for LanguageCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "UNKNOWN({})", self.0),
        }
    }
}

/// How a frame's header is serialized: the high byte of the header-length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// A JSON object (RocketMQ's default).
    #[default]
    Json,
    /// RocketMQ's compact binary header (`RocketMQSerializable`).
    RocketMq,
}

impl SerializeType {
    /// The byte in the header-length field's high byte.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The type for a header-length field's high byte; `None` for an unknown byte.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The Java enum constant's name (`serializeTypeCurrentRPC` in a JSON header).
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

impl fmt::Display for SerializeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_names_match_codes() {
        assert_eq!(LanguageCode::JAVA.name(), Some("JAVA"));
        assert_eq!(LanguageCode::RUST.name(), Some("RUST"));
        assert_eq!(LanguageCode::NODE_JS.name(), Some("NODE_JS"));
        assert_eq!(LanguageCode::from_name("GO"), Some(LanguageCode::GO));
        assert_eq!(LanguageCode::from_name("go"), None);
        assert_eq!(LanguageCode(200).name(), None);
        assert_eq!(LanguageCode(200).to_string(), "UNKNOWN(200)");
        for code in 0..=13u8 {
            let lang = LanguageCode(code);
            assert_eq!(LanguageCode::from_name(lang.name().unwrap()), Some(lang));
        }
    }

    #[test]
    fn serialize_type_codes() {
        assert_eq!(SerializeType::from_code(0), Some(SerializeType::Json));
        assert_eq!(SerializeType::from_code(1), Some(SerializeType::RocketMq));
        assert_eq!(SerializeType::from_code(2), None);
        assert_eq!(SerializeType::RocketMq.code(), 1);
    }

    #[test]
    fn code_names() {
        assert_eq!(request_code::name(21), Some("GET_ALL_TOPIC_CONFIG"));
        assert_eq!(request_code::name(9999), None);
        assert_eq!(response_code::name(3), Some("REQUEST_CODE_NOT_SUPPORTED"));
    }
}
