//! Routing without a name server: GET_ROUTEINFO_BY_TOPIC (105) and GET_BROKER_CLUSTER_INFO
//! (106) answered by the broker for its own group, and REGISTER_BROKER (103) /
//! UNREGISTER_BROKER (104) by which a master learns its slaves' remoting addresses.
//!
//! **Who is in the group.** The master lists itself as broker id 0 at its store host
//! (`brokerIP1` and the bound listen port). A slave's IP is known to the master from the HA
//! connection, but its remoting port is not in the HA protocol, so a slave registers: an rmqha
//! slave with a `masterAddress` sends REGISTER_BROKER to it at start and every 10 s (and
//! UNREGISTER_BROKER when it stops), and a RocketMQ slave whose `namesrvAddr` names the
//! master does the same every 30 s. The master lists a registered slave while (a) its last
//! registration is less than 40 s old and (b) an HA connection comes from the host its
//! registration came from. A slave that stops replicating thus leaves the routes at once,
//! unless another slave on the same host still replicates (connections are matched by host,
//! since the HA protocol carries no broker id); then its registration lapsing removes it,
//! and an rmqha slave that stops cleanly unregisters anyway. The answer to a slave's registration names the master's HA address and
//! remoting address (`haServerAddr`, `masterAddr`), which a RocketMQ slave without a fixed
//! `haMasterAddress` follows.
//!
//! A slave answers for the group too: its master at `masterAddress` (while its HA connection
//! is up) and itself.
//!
//! **Bodies.** TopicRouteData and ClusterInfo JSON with RocketMQ's field names and strict
//! JSON (quoted broker-id keys), which is what a 5.x name server sends to clients from 4.9.4
//! on and what every client reads.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::topic::effective_topic;
use super::{MASTER_ID, Shared, bad_header, broker_addr, broker_gone, ha_addr, reply};

/// How often an rmqha slave registers with its master.
pub(crate) const REGISTER_INTERVAL: Duration = Duration::from_secs(10);
/// A registration older than this no longer counts (four of rmqha's intervals; RocketMQ's
/// name server allows 120 s against its brokers' 30 s).
pub(crate) const REGISTRATION_EXPIRY: Duration = Duration::from_secs(40);
/// The most live registrations kept: far more slaves than a group has.
const MAX_REGISTRATIONS: usize = 64;

#[derive(Debug, Clone)]
struct Registration {
    broker_id: i64,
    cluster: String,
    /// The registering connection's peer IP: the host the HA connection should come from.
    peer_ip: IpAddr,
    at: Instant,
}

/// The slaves registered with this master, by remoting address.
#[derive(Debug, Default)]
pub(crate) struct GroupTable {
    regs: Mutex<HashMap<String, Registration>>,
}

impl GroupTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Registration>> {
        self.regs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The group as clients should see it now: broker id → remoting address.
    pub(crate) fn members(&self, b: &Broker) -> BTreeMap<i64, String> {
        let mut addrs = BTreeMap::new();
        let config = b.config();
        if b.role() == BrokerRole::Slave {
            let connected = b.ha_slave().is_some_and(|s| s.status().connected);
            let master = b.config_master_address();
            if connected && !master.is_empty() {
                addrs.insert(MASTER_ID, master);
            }
            addrs.insert(config.effective_broker_id(), broker_addr(b));
            return addrs;
        }
        addrs.insert(MASTER_ID, broker_addr(b));
        let ha_ips: Vec<IpAddr> =
            b.ha_master().map(|m| m.slaves().iter().map(|s| s.addr.ip()).collect()).unwrap_or_default();
        let mut regs = self.lock();
        regs.retain(|_, r| r.at.elapsed() < REGISTRATION_EXPIRY);
        for (addr, r) in regs.iter() {
            if r.cluster == config.broker_cluster_name && ha_ips.contains(&r.peer_ip) {
                addrs.insert(r.broker_id, addr.clone());
            }
        }
        addrs
    }

    /// Records a registration; `None` when the table is full of live ones, or when a live
    /// registration of `addr` came from another host (another client could otherwise take a
    /// slave's entry, and with it the slave out of the routes). Expired ones are dropped here
    /// too: route queries alone did that, so without them every registration (any client
    /// may send one) stayed in memory.
    fn register(&self, addr: &str, r: Registration) -> Option<bool> {
        let mut regs = self.lock();
        regs.retain(|_, r| r.at.elapsed() < REGISTRATION_EXPIRY);
        match regs.get(addr) {
            Some(held) if held.peer_ip != r.peer_ip => return None,
            None if regs.len() >= MAX_REGISTRATIONS => return None,
            _ => {}
        }
        Some(regs.insert(addr.to_owned(), r).is_none())
    }

    /// Removes the registration of `addr`, only as made from the same host (`peer`): any
    /// client could otherwise take a slave out of the routes.
    fn unregister(&self, addr: &str, peer: IpAddr) -> bool {
        let mut regs = self.lock();
        if regs.get(addr).is_some_and(|r| r.peer_ip == peer) {
            regs.remove(addr);
            return true;
        }
        false
    }
}

/// GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO, REGISTER_BROKER and UNREGISTER_BROKER.
pub struct RouteProcessor {
    shared: Arc<Shared>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

impl RouteProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::GET_ROUTEINFO_BY_TOPIC,
        request_code::GET_BROKER_CLUSTER_INFO,
        request_code::REGISTER_BROKER,
        request_code::UNREGISTER_BROKER,
        request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS,
        request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RouteProcessor { shared }
    }

    fn broker_data(&self, b: &Broker) -> Value {
        let addrs: serde_json::Map<String, Value> = self
            .shared
            .group
            .members(b)
            .into_iter()
            .map(|(id, a)| (id.to_string(), Value::String(a)))
            .collect();
        json!({
            "brokerAddrs": addrs,
            "brokerName": b.config().broker_name,
            "cluster": b.config().broker_cluster_name,
        })
    }

    /// TopicRouteData: one QueueData (this group's queues of the topic) and one BrokerData.
    fn route_info(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let topic = req.ext_str("topic").map_err(|e| bad_header(req, e))?;
        let Some(tc) = effective_topic(b, topic) else {
            return Err(reply(
                req,
                response_code::TOPIC_NOT_EXIST,
                format!("No topic route info in name server for the topic: {topic}"),
            ));
        };
        let body = json!({
            "brokerDatas": [self.broker_data(b)],
            "filterServerTable": {},
            "queueDatas": [{
                "brokerName": b.config().broker_name,
                "perm": advertised_perm(tc.perm, b.broker_permission()),
                "readQueueNums": tc.read_queue_nums,
                "topicSysFlag": tc.topic_sys_flag,
                "writeQueueNums": tc.write_queue_nums,
            }],
        });
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(body.to_string().into_bytes()))
    }

    /// ClusterInfo: `brokerAddrTable` (this group) and `clusterAddrTable` (its cluster).
    fn cluster_info(&self, b: &Broker, req: &RemotingCommand) -> RemotingCommand {
        let name = b.config().broker_name.clone();
        let body = json!({
            "brokerAddrTable": { name.clone(): self.broker_data(b) },
            "clusterAddrTable": { b.config().broker_cluster_name.clone(): [name] },
        });
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(body.to_string().into_bytes())
    }

    /// A slave of this group announcing its remoting address.
    fn register(&self, b: &Broker, req: &RemotingCommand, peer: SocketAddr) -> Answer {
        let h = |e| bad_header(req, e);
        let name = req.ext_str("brokerName").map_err(h)?;
        let addr = req.ext_str("brokerAddr").map_err(h)?;
        let cluster = req.ext_str("clusterName").map_err(h)?;
        let broker_id = req.ext_i64("brokerId").map_err(h)?;
        let config = b.config();
        if b.role() == BrokerRole::Slave {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                "this broker is a SLAVE; register with the master",
            ));
        }
        if name != config.broker_name || cluster != config.broker_cluster_name {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "this broker routes only its own group {}/{}, not {cluster}/{name}",
                    config.broker_cluster_name, config.broker_name
                ),
            ));
        }
        if broker_id == MASTER_ID {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("{name} already has a master: this broker"),
            ));
        }
        if addr.len() > 255 || (addr.parse::<SocketAddr>().is_err() && !addr.contains(':')) {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("brokerAddr {:?} is not host:port", crate::clip(addr, 64)),
            ));
        }
        let reg =
            Registration { broker_id, cluster: cluster.to_owned(), peer_ip: peer.ip(), at: Instant::now() };
        match self.shared.group.register(addr, reg) {
            Some(true) => tracing::info!(broker_id, addr, %peer, "slave registered"),
            Some(false) => {}
            None => {
                return Err(reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!(
                        "{MAX_REGISTRATIONS} slaves are registered already, or {} is registered from another host",
                        crate::clip(addr, 64)
                    ),
                ));
            }
        }
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_ext("haServerAddr", ha_addr(b))
            .with_ext("masterAddr", broker_addr(b)))
    }

    fn unregister(&self, req: &RemotingCommand, peer: SocketAddr) -> Answer {
        let addr = req.ext_str("brokerAddr").map_err(|e| bad_header(req, e))?;
        if self.shared.group.unregister(addr, peer.ip()) {
            tracing::info!(addr, "slave unregistered");
        }
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    }
}

impl RouteProcessor {
    /// GET_SYSTEM_TOPIC_LIST_FROM_NS, as 4.9's `RouteInfoManager.getSystemTopicList`: the
    /// cluster's name and this group's broker name (the names a name server knows its brokers
    /// reserve, which the Dashboard marks as system topics), and the address of the group's
    /// first broker (its master when known).
    fn system_topics_ns(&self, b: &Broker, req: &RemotingCommand) -> RemotingCommand {
        let c = b.config();
        let first = self.shared.group.members(b).into_iter().min_by_key(|(id, _)| *id).map(|(_, a)| a);
        let body = json!({
            "brokerAddr": first.unwrap_or_else(|| broker_addr(b)),
            "topicList": [c.broker_cluster_name, c.broker_name],
        });
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_body(body.to_string().into_bytes())
    }
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (4.9's `TopicConfigManager.getSystemTopic`): the system
/// topics of this broker's table (`TopicValidator`'s, TBW102 among them), sorted.
fn system_topics_broker(b: &Broker, req: &RemotingCommand) -> RemotingCommand {
    let names: Vec<String> =
        b.tables().topics().all().into_keys().filter(|t| crate::metadata::is_system_topic(t)).collect();
    let body = json!({ "topicList": names });
    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.to_string().into_bytes())
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic of this broker group's table, as a name
/// server lists the topics its brokers registered (`TopicList`: `{"topicList":[...]}`).
fn topic_list(b: &Broker, req: &RemotingCommand) -> RemotingCommand {
    let names: Vec<String> = b.tables().topics().all().into_keys().collect();
    let body = json!({ "topicList": names });
    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.to_string().into_bytes())
}

impl RequestHandler for RouteProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let answer = match request.code {
            request_code::GET_ROUTEINFO_BY_TOPIC => self.route_info(&b, &request),
            request_code::GET_BROKER_CLUSTER_INFO => Ok(self.cluster_info(&b, &request)),
            request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => Ok(topic_list(&b, &request)),
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS => Ok(self.system_topics_ns(&b, &request)),
            request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => Ok(system_topics_broker(&b, &request)),
            request_code::REGISTER_BROKER => self.register(&b, &request, ctx.peer()),
            request_code::UNREGISTER_BROKER => self.unregister(&request, ctx.peer()),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(answer.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for RouteProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteProcessor").finish_non_exhaustive()
    }
}

/// A topic's permission as the route advertises it (4.9's `registerBrokerAll`): a broker
/// that is not both readable and writable (`brokerPermission` 4 or 2) advertises each topic
/// with only the bits both allow.
fn advertised_perm(topic_perm: i32, broker_perm: i32) -> i32 {
    use crate::metadata::TopicConfig;
    let rw = TopicConfig::PERM_READ | TopicConfig::PERM_WRITE;
    if broker_perm & rw == rw { topic_perm } else { topic_perm & broker_perm }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(ip: [u8; 4]) -> Registration {
        Registration { broker_id: 1, cluster: "c".into(), peer_ip: IpAddr::from(ip), at: Instant::now() }
    }

    /// A slave's registration is its host's: another host can neither replace nor remove it
    /// (either took the slave out of the master's routes), the slave's own host can.
    #[test]
    fn only_the_registering_host_replaces_or_removes_a_registration() {
        let t = GroupTable::default();
        assert_eq!(t.register("10.0.0.5:10911", reg([10, 0, 0, 5])), Some(true));
        assert_eq!(t.register("10.0.0.5:10911", reg([10, 0, 0, 6])), None, "another host");
        assert!(!t.unregister("10.0.0.5:10911", IpAddr::from([10, 0, 0, 6])));
        assert_eq!(t.lock()["10.0.0.5:10911"].peer_ip, IpAddr::from([10, 0, 0, 5]));
        assert_eq!(t.register("10.0.0.5:10911", reg([10, 0, 0, 5])), Some(false), "renewed");
        assert!(t.unregister("10.0.0.5:10911", IpAddr::from([10, 0, 0, 5])));
        assert!(t.lock().is_empty());
    }
}
