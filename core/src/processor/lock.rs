//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): RocketMQ's `RebalanceLockManager`, which
//! orderly consumers need. A Java `MessageListenerOrderly` consumer locks each queue it is
//! assigned on the queue's master (every 20 s) and consumes only the queues it holds; without
//! these requests it would consume nothing.
//!
//! A lock belongs to one client of a group and lapses 60 s after it was last taken or renewed
//! (Java `rocketmq.broker.rebalance.lockMaxLiveTime`). Bodies are `LockBatchRequestBody` /
//! `UnlockBatchRequestBody` JSON (`consumerGroup`, `clientId`, `mqSet` of `{topic,
//! brokerName, queueId}`), and the lock answer is `LockBatchResponseBody` (`lockOKMQSet`).
//!
//! Unlike RocketMQ, whose table keeps an entry for every queue ever named until its holder
//! unlocks it, the table here holds only what a client can use, so that it stays bounded
//! over a long uptime whatever clients send:
//!
//! - lapsed locks are dropped: a group's on each of its requests, every group's on the first
//!   request 10 s or more after the last such sweep; a group left with no lock is dropped;
//! - a lock request for a group name RocketMQ clients refuse (`Validators.checkGroup`) is
//!   answered SUBSCRIPTION_GROUP_NOT_EXIST; a queue of another broker, of a topic this broker
//!   does not have, or past the topic's queues is not locked (it is left out of
//!   `lockOKMQSet`, which the client reads as "not locked"). A topic a send would create on
//!   first use (`autoCreateTopicEnable`, from TBW102) counts as having TBW102's queues;
//! - a group holds at most 4096 locks here, and all groups together 262144: a queue past
//!   either is not locked (with one warning per group until it is below again).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::metadata::TopicConfig;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::topic::{effective_topic, topic_name_error};
use super::{AUTO_CREATE_TOPIC_KEY_TOPIC, Shared, broker_gone, reply};

/// Java `RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME`.
const LOCK_MAX_LIVE: Duration = Duration::from_secs(60);
/// How often every group's lapsed locks are dropped (a group's own are on each request).
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Most queues one group holds locked on this broker. A Java consumer locks all the queues it
/// is assigned on a broker in one request; 4096 is more than any group's share of a broker.
pub(crate) const MAX_LOCKS_PER_GROUP: usize = 4096;
/// Most locks all groups hold together (some tens of MB at most).
pub(crate) const MAX_LOCKS: usize = 1 << 18;

/// A queue as a request names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Queue {
    topic: String,
    broker_name: String,
    queue_id: i64,
}

/// A queue of this broker: topic and queue id.
type Key = (String, i32);

#[derive(Debug)]
struct Lock {
    /// Shared by the locks one request takes.
    client_id: Arc<str>,
    at: Instant,
}

impl Lock {
    fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.at) < LOCK_MAX_LIVE
    }
}

#[derive(Debug, Default)]
struct GroupLocks {
    locks: HashMap<Key, Lock>,
    /// Whether a lock was refused for a full table since the group last had room (to warn
    /// once, not on every request).
    warned_full: bool,
}

impl GroupLocks {
    /// Drops the lapsed locks; returns how many.
    fn prune(&mut self, now: Instant) -> usize {
        let before = self.locks.len();
        self.locks.retain(|_, l| l.live(now));
        before - self.locks.len()
    }
}

#[derive(Debug, Default)]
struct Inner {
    groups: HashMap<String, GroupLocks>,
    /// The locks of all groups.
    total: usize,
    last_sweep: Option<Instant>,
}

impl Inner {
    /// Drops every group's lapsed locks and the groups left without one, if the last sweep
    /// was `SWEEP_EVERY` ago.
    fn sweep_if_due(&mut self, now: Instant) {
        if self.last_sweep.is_some_and(|t| now.saturating_duration_since(t) < SWEEP_EVERY) {
            return;
        }
        self.last_sweep = Some(now);
        self.groups.retain(|_, g| {
            g.prune(now);
            !g.locks.is_empty()
        });
        self.total = self.groups.values().map(|g| g.locks.len()).sum();
    }
}

/// Queue locks by group.
#[derive(Debug)]
pub(crate) struct LockTable {
    inner: Mutex<Inner>,
    max_per_group: usize,
    max_total: usize,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable::with_limits(MAX_LOCKS_PER_GROUP, MAX_LOCKS)
    }
}

impl LockTable {
    fn with_limits(max_per_group: usize, max_total: usize) -> Self {
        LockTable { inner: Mutex::default(), max_per_group, max_total }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks (or renews) each queue free, lapsed or already held by `client_id`, as of `now`;
    /// returns those now held by it. A new lock past the group's or the table's limit is
    /// not taken.
    fn try_lock(&self, group: &str, client_id: &str, queues: Vec<Key>, now: Instant) -> Vec<Key> {
        let mut inner = self.lock();
        inner.sweep_if_due(now);
        let Inner { groups, total, .. } = &mut *inner;
        let g = groups.entry(group.to_owned()).or_default();
        *total -= g.prune(now);
        let client: Arc<str> = client_id.into();
        let mut refused = 0usize;
        let mut held = Vec::with_capacity(queues.len().min(self.max_per_group));
        for key in queues {
            let full = g.locks.len() >= self.max_per_group || *total >= self.max_total;
            match g.locks.entry(key) {
                Entry::Occupied(mut e) => {
                    let l = e.get_mut();
                    if *l.client_id == *client_id || !l.live(now) {
                        if *l.client_id != *client_id {
                            l.client_id = client.clone();
                        }
                        l.at = now;
                        held.push(e.key().clone());
                    }
                }
                Entry::Vacant(_) if full => refused += 1,
                Entry::Vacant(e) => {
                    held.push(e.key().clone());
                    e.insert(Lock { client_id: client.clone(), at: now });
                    *total += 1;
                }
            }
        }
        if refused == 0 {
            g.warned_full = false;
        } else if !g.warned_full {
            g.warned_full = true;
            tracing::warn!(
                group,
                client = client_id,
                refused,
                group_locks = g.locks.len(),
                all_locks = *total,
                "queues not locked: the group holds {} locks or all groups {} (warned once until below)",
                self.max_per_group,
                self.max_total,
            );
        }
        if g.locks.is_empty() {
            groups.remove(group);
        }
        held
    }

    /// Releases the queues `client_id` holds among `queues`.
    fn unlock(&self, group: &str, client_id: &str, queues: &[Key], now: Instant) {
        let mut inner = self.lock();
        inner.sweep_if_due(now);
        let Inner { groups, total, .. } = &mut *inner;
        if let Some(g) = groups.get_mut(group) {
            *total -= g.prune(now);
            for q in queues {
                if g.locks.get(q).is_some_and(|l| *l.client_id == *client_id) {
                    g.locks.remove(q);
                    *total -= 1;
                }
            }
            if g.locks.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// How many groups and locks the table holds.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let inner = self.lock();
        let total = inner.groups.values().map(|g| g.locks.len()).sum();
        assert_eq!(total, inner.total, "the count follows the table");
        (inner.groups.len(), total)
    }
}

/// How many queues of `topic` may be locked on this broker: the topic's, or, for a topic a
/// send would create on first use from TBW102 (`autoCreateTopicEnable` on a master), the
/// template's; `None` for a topic that cannot exist here.
fn lockable_queues(b: &Broker, topic: &str) -> Option<i32> {
    if let Some(tc) = effective_topic(b, topic) {
        return Some(tc.read_queue_nums.max(tc.write_queue_nums));
    }
    if b.role() == BrokerRole::Slave || !b.auto_create_topic_enable() || topic_name_error(topic).is_some() {
        return None;
    }
    let template = b.tables().topics().get(AUTO_CREATE_TOPIC_KEY_TOPIC)?;
    (template.perm & TopicConfig::PERM_INHERIT != 0).then_some(template.write_queue_nums)
}

/// The queues of `queues` this broker has (its broker name, a topic it has or would create,
/// a queue id among the topic's), as keys; the others are left out.
fn this_brokers_queues(b: &Broker, queues: Vec<Queue>) -> Vec<Key> {
    let me = b.config().broker_name.as_str();
    let mut counts: HashMap<String, Option<i32>> = HashMap::new();
    let mut left_out = 0usize;
    let mut keys = Vec::with_capacity(queues.len());
    for q in queues {
        let count = match counts.get(&q.topic) {
            Some(c) => *c,
            None => {
                let c = lockable_queues(b, &q.topic);
                counts.insert(q.topic.clone(), c);
                c
            }
        };
        match count {
            Some(n) if q.broker_name == me && (0..i64::from(n)).contains(&q.queue_id) => {
                keys.push((q.topic, q.queue_id as i32));
            }
            _ => left_out += 1,
        }
    }
    if left_out > 0 {
        tracing::debug!(left_out, "lock request names queues this broker does not have");
    }
    keys
}

/// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
pub struct LockProcessor {
    shared: Arc<Shared>,
}

struct LockBody {
    group: String,
    client_id: String,
    queues: Vec<Queue>,
}

fn parse_body(body: &[u8]) -> Result<LockBody, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let v: Value = crate::metadata::json::from_str_lenient(text, "lock body").map_err(|e| e.to_string())?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let group = s("consumerGroup").ok_or("no consumerGroup")?;
    let client_id = s("clientId").ok_or("no clientId")?;
    let queues = v
        .get("mqSet")
        .and_then(Value::as_array)
        .ok_or("no mqSet")?
        .iter()
        .map(|q| {
            Some(Queue {
                topic: q.get("topic")?.as_str()?.to_owned(),
                broker_name: q.get("brokerName")?.as_str()?.to_owned(),
                queue_id: q.get("queueId")?.as_i64()?,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or("an mqSet entry lacks topic, brokerName or queueId")?;
    Ok(LockBody { group, client_id, queues })
}

impl LockProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::LOCK_BATCH_MQ, request_code::UNLOCK_BATCH_MQ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LockProcessor { shared }
    }
}

impl RequestHandler for LockProcessor {
    fn handle(&self, req: RemotingCommand, _ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&req)) };
        let body = match parse_body(&req.body) {
            Ok(b) => b,
            Err(e) => {
                return Handled::Respond(reply(
                    &req,
                    response_code::SYSTEM_ERROR,
                    format!("bad lock body: {e}"),
                ));
            }
        };
        let locks = &self.shared.locks;
        let now = Instant::now();
        Handled::Respond(match req.code {
            request_code::LOCK_BATCH_MQ => {
                if !crate::message::codec::group_is_valid(&body.group) {
                    return Handled::Respond(reply(
                        &req,
                        response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                        format!("the consumer group {:.300?} is not a valid group name", body.group),
                    ));
                }
                let queues = this_brokers_queues(&broker, body.queues);
                let ok = locks.try_lock(&body.group, &body.client_id, queues, now);
                let me = broker.config().broker_name.as_str();
                let set: Vec<Value> = ok
                    .into_iter()
                    .map(|(topic, queue_id)| json!({"brokerName": me, "queueId": queue_id, "topic": topic}))
                    .collect();
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_body(json!({ "lockOKMQSet": set }).to_string().into_bytes())
            }
            _ => {
                let keys: Vec<Key> = body
                    .queues
                    .into_iter()
                    .filter_map(|q| Some((q.topic, i32::try_from(q.queue_id).ok()?)))
                    .collect();
                locks.unlock(&body.group, &body.client_id, &keys, now);
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
            }
        })
    }
}

impl std::fmt::Debug for LockProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockProcessor").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(i: i32) -> Key {
        ("T".into(), i)
    }

    fn qs(ids: std::ops::Range<i32>) -> Vec<Key> {
        ids.map(q).collect()
    }

    #[test]
    fn a_queue_is_held_by_one_client_until_unlocked() {
        let t = LockTable::default();
        let now = Instant::now();
        assert_eq!(t.try_lock("g", "c1", vec![q(0), q(1)], now), vec![q(0), q(1)]);
        assert_eq!(t.try_lock("g", "c2", vec![q(1), q(2)], now), vec![q(2)]);
        assert_eq!(t.try_lock("g", "c1", vec![q(1)], now), vec![q(1)], "renewal");
        assert_eq!(t.try_lock("other", "c2", vec![q(1)], now), vec![q(1)], "locks are per group");
        t.unlock("g", "c2", &[q(1)], now);
        assert!(t.try_lock("g", "c2", vec![q(1)], now).is_empty(), "only the holder unlocks");
        t.unlock("g", "c1", &[q(1)], now);
        assert_eq!(t.try_lock("g", "c2", vec![q(1)], now), vec![q(1)]);
        assert_eq!(t.size(), (2, 4));
        t.unlock("other", "c2", &[q(1)], now);
        assert_eq!(t.size(), (1, 3), "a group without locks is dropped");
    }

    /// Locks lapse 60 s after they were taken or renewed (RocketMQ's
    /// REBALANCE_LOCK_MAX_LIVE_TIME), and a lapsed lock is gone from the table, not just
    /// open to another client: the group's at its next request, every group's at the next
    /// sweep, and a group left with none is dropped.
    #[test]
    fn lapsed_locks_are_dropped_with_their_groups() {
        let t = LockTable::default();
        let t0 = Instant::now();
        assert_eq!(t.try_lock("g", "c1", qs(0..100), t0).len(), 100);
        assert_eq!(t.try_lock("gone", "c9", qs(0..50), t0).len(), 50);
        assert_eq!(t.size(), (2, 150));
        let renewed = t0 + Duration::from_secs(30);
        assert_eq!(t.try_lock("g", "c1", qs(0..10), renewed).len(), 10);
        // Until they lapse, another client gets none of them.
        let before = t0 + LOCK_MAX_LIVE - Duration::from_millis(1);
        assert!(t.try_lock("g", "c2", qs(0..100), before).is_empty());
        assert!(t.try_lock("gone", "c2", qs(0..50), before).is_empty());
        // A request of another group, past the lapse: "gone" holds nothing now and is gone;
        // "g" keeps only the renewed ten.
        let later = t0 + LOCK_MAX_LIVE + SWEEP_EVERY;
        assert_eq!(t.try_lock("third", "c3", vec![q(0)], later), vec![q(0)]);
        assert_eq!(t.size(), (2, 11));
        // The renewed ones lapse too, and the group goes with them; the client that held
        // them can still lock again.
        let much_later = renewed + LOCK_MAX_LIVE + SWEEP_EVERY;
        t.unlock("third", "c3", &[q(0)], much_later);
        assert_eq!(t.size(), (0, 0));
        assert_eq!(t.try_lock("g", "c2", qs(0..3), much_later), qs(0..3), "lapsed locks are free");
        assert_eq!(t.size(), (1, 3));
        // A request for a group whose locks all lapsed drops them before anything else.
        let last = much_later + LOCK_MAX_LIVE;
        assert!(t.try_lock("g", "c1", vec![], last).is_empty());
        assert_eq!(t.size(), (0, 0));
        // Between sweeps, a group's own request drops its lapsed locks (another group's wait
        // for the sweep).
        let a = last + Duration::from_secs(1);
        t.try_lock("p", "c1", qs(0..5), a);
        t.try_lock("q", "c1", qs(0..7), a);
        t.try_lock("r", "c1", qs(0..1), a + LOCK_MAX_LIVE - Duration::from_millis(1));
        assert_eq!(t.size(), (3, 13), "swept just before the lapse");
        assert_eq!(t.try_lock("p", "c2", qs(3..4), a + LOCK_MAX_LIVE), qs(3..4));
        assert_eq!(t.size(), (3, 9));
    }

    /// A group holds at most `max_per_group` locks, all groups `max_total`: one request
    /// naming a quarter of a million queues takes only that many, renewals still succeed, and
    /// a queue frees room when it is unlocked or lapses.
    #[test]
    fn the_table_is_capped_per_group_and_in_all() {
        let t = LockTable::with_limits(100, 250);
        let now = Instant::now();
        let ok = t.try_lock("g", "c1", qs(0..250_000), now);
        assert!(ok == qs(0..100), "{} locked", ok.len());
        assert_eq!(t.size(), (1, 100));
        assert_eq!(t.try_lock("g", "c1", qs(0..200), now), qs(0..100), "renewals are not new locks");
        assert_eq!(t.try_lock("h", "c1", qs(0..100), now).len(), 100);
        assert_eq!(t.try_lock("i", "c1", qs(0..100), now), qs(0..50), "all groups hold 250");
        assert!(t.try_lock("j", "c1", qs(0..100), now).is_empty());
        assert_eq!(t.size(), (3, 250));
        t.unlock("g", "c1", &qs(0..10), now);
        assert_eq!(t.try_lock("j", "c1", qs(0..100), now), qs(0..10));
        assert_eq!(t.size(), (4, 250));
        let later = now + LOCK_MAX_LIVE;
        assert_eq!(t.try_lock("k", "c1", qs(0..1000), later), qs(0..100));
        assert_eq!(t.size(), (1, 100));
        // The default limits.
        let t = LockTable::default();
        assert_eq!(t.try_lock("g", "c1", qs(0..10_000), now).len(), MAX_LOCKS_PER_GROUP);
    }

    #[test]
    fn bodies_as_the_java_client_writes_them() {
        let b = parse_body(
            br#"{"clientId":"10.0.0.1@1","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":3,"topic":"T"}],"onlyThisBroker":false}"#,
        )
        .unwrap();
        let want = vec![Queue { topic: "T".into(), broker_name: "b".into(), queue_id: 3 }];
        assert_eq!((b.group.as_str(), b.client_id.as_str(), b.queues), ("g", "10.0.0.1@1", want));
        assert!(parse_body(b"{}").is_err());
        assert!(parse_body(br#"{"clientId":"c","consumerGroup":"g","mqSet":[{"topic":"T"}]}"#).is_err());
    }
}
