//! A slave's registration with its master (`route` explains why): REGISTER_BROKER to
//! `masterAddress` at start and every 10 s, UNREGISTER_BROKER when the slave stops.
//!
//! The request is RocketMQ's `RegisterBrokerRequestHeader` (`brokerName`, `brokerAddr`,
//! `clusterName`, `haServerAddr`, `brokerId`, `compressed`, `bodyCrc32`) with a
//! `RegisterBrokerBody` (`topicConfigSerializeWrapper`, `filterServerList`), so the same
//! request also registers the slave with a RocketMQ name server at that address.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::message::crc32_masked;
use crate::metadata::JsonStyle;
use crate::remoting::{ClientConfig, RemotingClient, RemotingCommand, request_code, response_code};

use super::route::REGISTER_INTERVAL;
use super::{Shared, broker_addr};

const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Starts the registration thread of a slave.
pub(crate) fn start(shared: Arc<Shared>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rmqha-register".into())
        .spawn(move || run(&shared))
        .map_err(|e| Error::Store(format!("cannot start thread rmqha-register: {e}")))
}

fn run(shared: &Shared) {
    // The master to register with: `masterAddress`, or the one `set_config_master_address`
    // named since (a slave re-pointed after a failover registers with its new master).
    let current = || shared.broker().map(|b| b.config_master_address());
    let mut client: Option<Arc<RemotingClient>> = None;
    let mut failing = false;
    // The masters this slave has registered with (one, unless re-pointed).
    let mut registered = std::collections::HashSet::new();
    loop {
        let Some(master) = current() else { return };
        if client.as_ref().map(|c| c.addr()) != Some(master.as_str()) {
            client = (!master.is_empty()).then(|| {
                Arc::new(RemotingClient::new(
                    master.clone(),
                    ClientConfig { connect_timeout: CALL_TIMEOUT, ..ClientConfig::default() },
                ))
            });
            *shared.register_client.lock().unwrap_or_else(|e| e.into_inner()) = client.clone();
            if shared.stop.is_stopped() {
                return; // stopped before the client could be aborted
            }
            failing = false;
        }
        if let Some(client) = &client {
            let Some(request) = shared.broker().map(|b| sign(&b, register_request(&b))) else { return };
            match client.invoke_sync(request, CALL_TIMEOUT) {
                Ok(resp) if resp.code == response_code::SUCCESS => {
                    if failing {
                        let again = if registered.contains(&master) { " again" } else { "" };
                        tracing::info!(%master, "registered with the master{again}");
                    }
                    registered.insert(master.clone());
                    failing = false;
                }
                Ok(resp) => {
                    if !failing {
                        tracing::warn!(%master, code = resp.code, remark = ?resp.remark,
                            "the master refused this slave's registration; clients will not find this slave through it");
                    }
                    failing = true;
                }
                // Cut short by the stop (`abort`): says nothing about the master.
                Err(_) if shared.stop.is_stopped() => break,
                Err(e) => {
                    if !failing {
                        tracing::info!(%master, error = %e, "cannot register with the master; retrying every 10 s");
                    }
                    failing = true;
                }
            }
        }
        // Woken early by a new address, to register with it at once.
        let changed = || current().is_some_and(|now| now != master);
        if shared.stop.sleep_until(REGISTER_INTERVAL, changed) == crate::store::flush::Woke::Stopped {
            break;
        }
    }
    // Not to a master that has not been answering, nor to one that never answered (a stop
    // that cut the first registration short waited the unregister's 500 ms for nothing). On
    // a client of its own: the registration's was aborted by the stop, and this one is short
    // (500 ms, connecting included).
    let answered = |c: &Arc<RemotingClient>| registered.contains(c.addr());
    if let (Some(b), Some(registered)) = (shared.broker().filter(|_| !failing), client.filter(answered)) {
        let master = registered.addr().to_string();
        let unregister = Duration::from_millis(500);
        let client = RemotingClient::new(
            master.clone(),
            ClientConfig { connect_timeout: unregister, ..ClientConfig::default() },
        );
        let req = RemotingCommand::request(request_code::UNREGISTER_BROKER)
            .with_ext("brokerName", &b.config().broker_name)
            .with_ext("brokerAddr", broker_addr(&b))
            .with_ext("clusterName", &b.config().broker_cluster_name)
            .with_ext("brokerId", b.config().effective_broker_id());
        let req = sign(&b, req);
        if let Err(e) = client.invoke_sync(req, unregister) {
            tracing::debug!(%master, error = %e, "unregister from the master failed");
        }
    }
}

/// `request` signed with `aclAccessKey` / `aclSecretKey` when they are set (a master with
/// `aclEnable` refuses unsigned requests from outside its white lists).
fn sign(b: &crate::broker::Broker, mut request: RemotingCommand) -> RemotingCommand {
    if let Some(c) = crate::acl::Credentials::from_config(b.config()) {
        c.sign(&mut request);
    }
    request
}

fn register_request(b: &crate::broker::Broker) -> RemotingCommand {
    let c = b.config();
    // No topics: the master reads none from a registration, and a name server takes topics
    // only from a master's (brokerId 0). With all of them, a slave of some 95,000 topics
    // (retry topics count) passed the master's 16 MiB frame limit and fell out of its routes
    // (found by a scale audit).
    let version = b.tables().topics().data_version();
    let topics = crate::metadata::TopicConfigWrapper { data_version: version, ..Default::default() }
        .encode(JsonStyle::Compact)
        .unwrap_or_else(|_| "{}".into());
    let body = format!("{{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{topics}}}").into_bytes();
    RemotingCommand::request(request_code::REGISTER_BROKER)
        .with_ext("brokerName", &c.broker_name)
        .with_ext("brokerAddr", broker_addr(b))
        .with_ext("clusterName", &c.broker_cluster_name)
        .with_ext("haServerAddr", broker_addr(b))
        .with_ext("brokerId", c.effective_broker_id())
        .with_ext("compressed", false)
        .with_ext("bodyCrc32", crc32_masked(&body))
        .with_body(body)
}
