//! What producers, consumers and tools send a broker over the remoting protocol (spec
//! sections 9, 10 and 14): the broker side of RocketMQ's `SendMessageProcessor`,
//! `PullMessageProcessor` (with long polling), `ConsumerManageProcessor`,
//! `ClientManageProcessor`, `QueryMessageProcessor`, part of `AdminBrokerProcessor`, and the
//! two name-server requests a client needs to find a broker group.
//!
//! **Files.** One per request family, each a [`RequestHandler`](crate::remoting::RequestHandler) registered into the broker's
//! [`Dispatch`] for its codes:
//!
//! | file | codes |
//! |---|---|
//! | `send` | SEND_MESSAGE 10, SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320 |
//! | `end_transaction` | END_TRANSACTION 37 (commit or roll back a half message) |
//! | `send_back` | CONSUMER_SEND_MSG_BACK 36 (a failed message to the group's retry or dead-letter topic) |
//! | `pull` (+ `long_poll`) | PULL_MESSAGE 11, LITE_PULL_MESSAGE 361 |
//! | `consumer_manage` | QUERY_CONSUMER_OFFSET 14, UPDATE_CONSUMER_OFFSET 15, GET_MAX_OFFSET 30, GET_MIN_OFFSET 31, SEARCH_OFFSET_BY_TIMESTAMP 29, GET_CONSUMER_LIST_BY_GROUP 38, GET_CONSUMER_CONNECTION_LIST 203, GET_PRODUCER_CONNECTION_LIST 204, INVOKE_BROKER_TO_RESET_OFFSET 222 (pushes RESET_CONSUMER_CLIENT_OFFSET 220 to the group's members) |
//! | `client_manage` (+ `clients`) | HEART_BEAT 34, UNREGISTER_CLIENT 35, CHECK_CLIENT_CONFIG 46 (can this broker serve a SQL92 subscription) |
//! | `lock` | LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42 (orderly consumers) |
//! | `query` | QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33 |
//! | `topic` | UPDATE_AND_CREATE_TOPIC 17, DELETE_TOPIC_IN_BROKER 215, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, DELETE_SUBSCRIPTIONGROUP 207 (and the auto-creation rules used by send and pull) |
//! | `route` (+ `registrar` on a slave) | GET_ROUTEINFO_BY_TOPIC 105, GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206, GET_SYSTEM_TOPIC_LIST_FROM_NS 304, GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305, REGISTER_BROKER 103, UNREGISTER_BROKER 104 |
//! | `stats` (+ `rates`) | GET_TOPIC_STATS_INFO 202, GET_CONSUME_STATS 208, GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25 (`RUNTIME_CONFIG_KEYS` only), GET_EARLIEST_MSG_STORETIME 32, QUERY_TOPIC_CONSUME_BY_WHO 300, QUERY_CONSUME_TIME_SPAN 303, QUERY_TOPICS_BY_CONSUMER 343, QUERY_SUBSCRIPTION_BY_CONSUMER 345, VIEW_BROKER_STATS_DATA 315, GET_BROKER_CONSUME_STATS 317 (operators' tools) |
//! | `queue_query` | QUERY_CONSUME_QUEUE 321 (a queue's ConsumeQueue units, `mqadmin queryCq`) |
//! | `consumer_call` | GET_CONSUMER_RUNNING_INFO 307, CONSUME_MESSAGE_DIRECTLY 309 (forwarded to one consumer client, answered with its response: `mqadmin consumerStatus`, `consumeMessage`), INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223 (asks the group's members for the offsets they hold: `mqadmin getConsumerStatus`) |
//!
//! GET_BROKER_RUNTIME_INFO (28) and the config-sync codes stay with the
//! [`AdminProcessor`](crate::broker_admin::AdminProcessor).
//!
//! **Headers.** Request fields are read from the command's ext fields under RocketMQ's names
//! (`SendMessageRequestHeaderV2`'s `a`..`n` included); a missing or unparsable required field
//! is answered SYSTEM_ERROR naming the field, as RocketMQ's `decodeCommandCustomHeader`
//! exception is; booleans read as Java reads them (anything but "true" is false: the C++
//! client sends `0`). Responses carry RocketMQ's response-header fields as ext fields.
//!
//! **Waiting without blocking a connection.** A put on a SYNC_MASTER (or SYNC_FLUSH) answers
//! from the [`PutHandle`](crate::store::PutHandle)'s completion, and a pull with the suspend
//! flag that finds nothing is parked in the long-poll service: both return
//! [`Handled::Deferred`](crate::remoting::Handled::Deferred), so the connection's thread goes
//! on reading the client's next requests.
//!
//! **Routing without a name server.** A client whose `namesrvAddr` is a broker's listen port
//! finds that broker's group: the master lists itself (id 0) and each slave that registered
//! with it (REGISTER_BROKER, sent by an rmqha slave to its `masterAddress` every 10 s, or by a
//! RocketMQ slave whose `namesrvAddr` is the master) while that slave's registration is fresh
//! and an HA connection comes from the same host; a slave lists its master (`masterAddress`,
//! while the HA connection is up) and itself. See `route`.
//!
//! **Not served.** RocketMQ 5's timer messages are refused MESSAGE_ILLEGAL. Delayed messages
//! (DELAY) are served (`crate::schedule`), and transactional ones (TRAN_MSG, END_TRANSACTION,
//! CHECK_TRANSACTION_STATE pushed to producers: `crate::transaction`). Filters are tags only
//! (no SQL92). The requests the broker sends clients: CHECK_TRANSACTION_STATE,
//! RESET_CONSUMER_CLIENT_OFFSET and NOTIFY_CONSUMER_IDS_CHANGED oneway (see `client_manage`),
//! and GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY awaiting the client's answer,
//! which the tool that asked gets (see `consumer_call`).

mod client_manage;
pub(crate) mod clients;
mod consumer_call;
mod consumer_manage;
mod end_transaction;
mod lock;
mod long_poll;
mod pull;
mod query;
mod queue_query;
mod rates;
mod registrar;
mod route;
pub(crate) mod send;
mod send_back;
mod stats;
mod topic;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::error::{Error, Result};
use crate::remoting::{Dispatch, RemotingCommand, RemotingError, response_code};
use crate::store::flush::StopSignal;

pub use client_manage::ClientManageProcessor;
pub use consumer_call::ConsumerCallProcessor;
pub use consumer_manage::ConsumerManageProcessor;
pub use end_transaction::EndTransactionProcessor;
pub use lock::LockProcessor;
pub use pull::{PullProcessor, sys_flag as pull_sys_flag};
pub use query::QueryProcessor;
pub use queue_query::QueueQueryProcessor;
pub use route::RouteProcessor;
pub use send::SendProcessor;
pub use send_back::SendBackProcessor;
pub use stats::StatsProcessor;
pub use topic::TopicProcessor;
pub(crate) use topic::{MAX_QUEUE_NUMS, seed_system_topics, topic_name_error};

/// Java `MixAll.MASTER_ID`.
pub const MASTER_ID: i64 = 0;
/// Java `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`: the template topic producers name as
/// `defaultTopic` when they send to a topic that does not exist yet.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Java `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// State the processors share: the broker (weakly: the broker owns the processors through its
/// remoting server), the client table, the slave registrations and the long-poll service.
pub(crate) struct Shared {
    broker: Weak<Broker>,
    clients: clients::ClientTable,
    locks: lock::LockTable,
    group: route::GroupTable,
    long_poll: long_poll::LongPoll,
    /// Messages each group pulled from each topic in the last minute (`consumeTps`).
    rates: rates::GroupRates,
    /// The transactions decided, so that END_TRANSACTION decides each at most once.
    decisions: Arc<crate::transaction::Decisions>,
    stop: Arc<StopSignal>,
    /// A slave's client of its master's registration, aborted at shutdown.
    register_client: Mutex<Option<Arc<crate::remoting::RemotingClient>>>,
}

impl Shared {
    /// The broker, unless it is being dropped.
    fn broker(&self) -> Option<Arc<Broker>> {
        self.broker.upgrade()
    }
}

/// The threads behind the client-facing processors: the long-poll service on every broker,
/// and on a slave with a `masterAddress` the registration with its master. Stopped by
/// [`shutdown`](Self::shutdown).
pub struct ClientServices {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    shut: AtomicBool,
    /// The process that made it; a fork of that process leaves it alone (`crate::fork`).
    fork: crate::fork::ForkGuard,
}

impl ClientServices {
    /// How many times long polling looked at a parked pull's queue so far (tests).
    pub(crate) fn long_poll_queue_checks(&self) -> u64 {
        self.shared.long_poll.queue_checks()
    }

    /// The slave's master address changed (`set_config_master_address`): the registration
    /// moves to the new master at once rather than at its next round.
    pub(crate) fn master_address_changed(&self) {
        self.shared.stop.notify_only();
    }

    /// Stops the threads and joins them (a held pull is dropped; its connection is about to
    /// close). A slave tells its master it is leaving. Idempotent.
    ///
    /// The broker calls this after closing its remoting server, so a long-poll answer blocked
    /// on a client that stopped reading fails at once instead of delaying the stop.
    pub fn shutdown(&self) {
        // In a fork, its threads are the parent's.
        if self.fork.forked() || self.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shared.stop.stop();
        if let Some(c) = self.shared.register_client.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            // A master that does not answer would hold the stop for the call's 3 s, then the
            // unregistration's.
            c.abort();
        }
        self.shared.long_poll.stop();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        // The last reference to the broker may be dropped on one of these threads, whose drop
        // then calls this: it must not wait for itself.
        threads.into_iter().for_each(crate::join_unless_current);
    }
}

impl Drop for ClientServices {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for ClientServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientServices").field("shut", &self.shut.load(Ordering::Relaxed)).finish()
    }
}

/// Registers the send, pull, consumer-management, client-management, query, topic and route
/// processors of `broker` into `dispatch`, seeds the auto-create template topic on a master
/// with `autoCreateTopicEnable`, and starts the long-poll thread (and, on a slave with a
/// `masterAddress`, its registration with the master).
pub fn install(broker: &Arc<Broker>, dispatch: &mut Dispatch) -> Result<ClientServices> {
    let shared = Arc::new(Shared {
        broker: Arc::downgrade(broker),
        clients: clients::ClientTable::new(std::time::Duration::from_millis(
            broker.config().channel_expired_timeout.max(1000) as u64,
        )),
        locks: lock::LockTable::default(),
        group: route::GroupTable::default(),
        long_poll: long_poll::LongPoll::new(broker.store().clone()),
        rates: rates::GroupRates::default(),
        decisions: Arc::default(),
        stop: StopSignal::new(),
        register_client: Mutex::new(None),
    });
    topic::seed_system_topics(broker);
    topic::seed_system_groups(broker);
    let pull = Arc::new(PullProcessor::new(shared.clone()));
    dispatch.register_all(SendProcessor::CODES, Arc::new(SendProcessor::new(shared.clone())));
    dispatch.register_all(SendBackProcessor::CODES, Arc::new(SendBackProcessor::new(shared.clone())));
    dispatch.register_all(PullProcessor::CODES, pull.clone());
    dispatch
        .register_all(ConsumerManageProcessor::CODES, Arc::new(ConsumerManageProcessor::new(shared.clone())));
    let client_manage = Arc::new(ClientManageProcessor::new(shared.clone()));
    dispatch.register_all(ClientManageProcessor::CODES, client_manage.clone());
    dispatch.on_close(client_manage);
    dispatch.register_all(LockProcessor::CODES, Arc::new(LockProcessor::new(shared.clone())));
    dispatch.register_all(QueryProcessor::CODES, Arc::new(QueryProcessor::new(shared.clone())));
    dispatch.register_all(TopicProcessor::CODES, Arc::new(TopicProcessor::new(shared.clone())));
    dispatch.register_all(RouteProcessor::CODES, Arc::new(RouteProcessor::new(shared.clone())));
    dispatch.register_all(StatsProcessor::CODES, Arc::new(StatsProcessor::new(shared.clone())));
    dispatch.register_all(QueueQueryProcessor::CODES, Arc::new(QueueQueryProcessor::new(shared.clone())));
    dispatch.register_all(ConsumerCallProcessor::CODES, Arc::new(ConsumerCallProcessor::new(shared.clone())));
    dispatch
        .register_all(EndTransactionProcessor::CODES, Arc::new(EndTransactionProcessor::new(shared.clone())));

    let services = ClientServices {
        shared: shared.clone(),
        threads: Mutex::new(Vec::new()),
        shut: false.into(),
        fork: crate::fork::ForkGuard::new(),
    };
    let store = broker.store().clone();
    let t = std::thread::Builder::new()
        .name("rmqha-long-poll".into())
        .spawn(move || long_poll::run(&pull, &store))
        .map_err(|e| Error::Store(format!("cannot start thread rmqha-long-poll: {e}")))?;
    services.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    let expiry = shared.clone();
    let t = std::thread::Builder::new()
        .name("rmqha-client-expiry".into())
        .spawn(move || client_manage::expire_clients(&expiry))
        .map_err(|e| Error::Store(format!("cannot start thread rmqha-client-expiry: {e}")))?;
    services.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    if broker.role().is_master() {
        let t = start_transaction_checker(broker, &shared)?;
        services.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    }
    if broker.role() == BrokerRole::Slave {
        let t = registrar::start(shared)?;
        services.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    }
    Ok(services)
}

/// The transaction check-back thread of a master (`crate::transaction::Checker`), with the
/// producer table to reach a half message's producer group.
fn start_transaction_checker(broker: &Arc<Broker>, shared: &Arc<Shared>) -> Result<JoinHandle<()>> {
    let config = broker.config();
    let settings = crate::transaction::CheckSettings {
        interval: std::time::Duration::from_millis(config.transaction_check_interval.max(1) as u64),
        timeout_ms: config.transaction_time_out.max(0),
        check_max: config.transaction_check_max,
        file_reserved_ms: config.file_reserved_time.saturating_mul(3_600_000),
    };
    let acked = broker.sync_ack_watermark();
    let weak = Arc::downgrade(shared);
    let producers: crate::transaction::ProducerLookup =
        Arc::new(move |group, topic| weak.upgrade().and_then(|s| s.clients.producer_channel(group, topic)));
    let checker = crate::transaction::Checker::new(
        broker.store().clone(),
        broker.tables().clone(),
        producers,
        acked,
        settings,
        shared.decisions.clone(),
    );
    let stop = shared.stop.clone();
    std::thread::Builder::new()
        .name("rmqha-transaction-check".into())
        .spawn(move || checker.run(stop))
        .map_err(|e| Error::Store(format!("cannot start thread rmqha-transaction-check: {e}")))
}

/// A response to `request` with `code` and `remark`.
/// NO_PERMISSION when `brokerPermission` lacks `bit` (`TopicConfig::PERM_WRITE` for sends
/// and send-backs, `PERM_READ` for pulls): `the broker[ip] sending message is forbidden`, as
/// 4.9 words it. 4.9 checks sends only for orderly topics (routes steer the others away);
/// here every send, so a client with an old route does not write to a drained broker.
fn broker_permits(b: &Broker, request: &RemotingCommand, bit: i32) -> Result<(), RemotingCommand> {
    let perm = b.broker_permission();
    if perm & bit != 0 {
        return Ok(());
    }
    let what = if bit == crate::metadata::TopicConfig::PERM_READ { "pulling" } else { "sending" };
    Err(reply(
        request,
        response_code::NO_PERMISSION,
        format!(
            "the broker[{}] {what} message is forbidden (brokerPermission={perm})",
            b.store().commit_log().store_host().ip()
        ),
    ))
}

fn reply(request: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response_to(request, code, Some(&remark.into()))
}

/// The answer to a request whose header does not decode: SYSTEM_ERROR with the reason, as
/// RocketMQ answers a `RemotingCommandException` from `decodeCommandCustomHeader`.
fn bad_header(request: &RemotingCommand, e: RemotingError) -> RemotingCommand {
    tracing::debug!(code = request.code, error = %e, "bad request header");
    RemotingCommand::response_to(request, response_code::SYSTEM_ERROR, Some(&e.to_string()))
}

/// A boolean header field read as Java's `decodeCommandCustomHeader` reads it
/// (`Boolean.parseBoolean`): "true" in any case is true, anything else false; absent is `None`.
/// Clients differ (the C++ client sends `unitMode=0`), and RocketMQ accepts them all.
fn java_bool(request: &RemotingCommand, key: &str) -> Option<bool> {
    request.ext(key).map(|v| v.eq_ignore_ascii_case("true"))
}

/// The answer when the broker is being dropped under a request.
fn broker_gone(request: &RemotingCommand) -> RemotingCommand {
    reply(request, response_code::SERVICE_NOT_AVAILABLE, "broker shutting down")
}

/// This broker's remoting address as clients reach it: the store host (`brokerIP1` and the
/// bound listen port), the address also encoded in every message id.
fn broker_addr(broker: &Broker) -> String {
    broker.store().commit_log().store_host().to_string()
}

/// The address published to slaves for HA: `brokerIP2` (else the store host's IP) and the
/// bound HA port.
fn ha_addr(broker: &Broker) -> String {
    let ip2 = &broker.config().broker_ip2;
    let host =
        if ip2.is_empty() { broker.store().commit_log().store_host().ip().to_string() } else { ip2.clone() };
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, broker.ha_port()).to_string(),
        Err(_) => format!("{host}:{}", broker.ha_port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_header_is_system_error_naming_the_field() {
        let mut req = RemotingCommand::request(10);
        req.opaque = 7;
        let e = req.ext_str("topic").unwrap_err();
        let resp = bad_header(&req, e);
        assert_eq!(resp.code, response_code::SYSTEM_ERROR);
        assert_eq!(resp.opaque, 7);
        assert!(resp.remark.unwrap().contains("\"topic\""));
    }
}
