//! LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): RocketMQ's `RebalanceLockManager`, which
//! orderly consumers need. A Java `MessageListenerOrderly` consumer locks each queue it is
//! assigned on the queue's master (every 20 s) and consumes only the queues it holds; without
//! these requests it would consume nothing.
//!
//! A lock belongs to one client of a group and lapses 60 s after it was last taken or renewed
//! (Java `rocketmq.broker.rebalance.lockMaxLiveTime`). Bodies are `LockBatchRequestBody` /
//! `UnlockBatchRequestBody` JSON (`consumerGroup`, `clientId`, `mqSet` of `{topic,
//! brokerName, queueId}`), and the lock answer is `LockBatchResponseBody` (`lockOKMQSet`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::{Shared, reply};

/// Java `RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME`.
const LOCK_MAX_LIVE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Queue {
    topic: String,
    broker_name: String,
    queue_id: i64,
}

#[derive(Debug)]
struct Lock {
    client_id: String,
    at: Instant,
}

/// Queue locks by group.
#[derive(Debug, Default)]
pub(crate) struct LockTable {
    groups: Mutex<HashMap<String, HashMap<Queue, Lock>>>,
}

impl LockTable {
    /// Locks (or renews) each queue free, lapsed or already held by `client_id`; returns
    /// those now held by it.
    fn try_lock(&self, group: &str, client_id: &str, queues: Vec<Queue>) -> Vec<Queue> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let table = groups.entry(group.to_owned()).or_default();
        let now = Instant::now();
        queues
            .into_iter()
            .filter(|q| match table.get_mut(q) {
                Some(l) if l.client_id != client_id && now.duration_since(l.at) < LOCK_MAX_LIVE => false,
                Some(l) => {
                    l.client_id = client_id.to_owned();
                    l.at = now;
                    true
                }
                None => {
                    table.insert(q.clone(), Lock { client_id: client_id.to_owned(), at: now });
                    true
                }
            })
            .collect()
    }

    fn unlock(&self, group: &str, client_id: &str, queues: &[Queue]) {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = groups.get_mut(group) {
            for q in queues {
                if table.get(q).is_some_and(|l| l.client_id == client_id) {
                    table.remove(q);
                }
            }
            if table.is_empty() {
                groups.remove(group);
            }
        }
    }
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
        Handled::Respond(match req.code {
            request_code::LOCK_BATCH_MQ => {
                let ok = locks.try_lock(&body.group, &body.client_id, body.queues);
                let set: Vec<Value> = ok
                    .into_iter()
                    .map(|q| json!({"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic}))
                    .collect();
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_body(json!({ "lockOKMQSet": set }).to_string().into_bytes())
            }
            _ => {
                locks.unlock(&body.group, &body.client_id, &body.queues);
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

    fn q(i: i64) -> Queue {
        Queue { topic: "T".into(), broker_name: "b".into(), queue_id: i }
    }

    #[test]
    fn a_queue_is_held_by_one_client_until_unlocked() {
        let t = LockTable::default();
        assert_eq!(t.try_lock("g", "c1", vec![q(0), q(1)]), vec![q(0), q(1)]);
        assert_eq!(t.try_lock("g", "c2", vec![q(1), q(2)]), vec![q(2)]);
        assert_eq!(t.try_lock("g", "c1", vec![q(1)]), vec![q(1)], "renewal");
        assert_eq!(t.try_lock("other", "c2", vec![q(1)]), vec![q(1)], "locks are per group");
        t.unlock("g", "c2", &[q(1)]);
        assert!(t.try_lock("g", "c2", vec![q(1)]).is_empty(), "only the holder unlocks");
        t.unlock("g", "c1", &[q(1)]);
        assert_eq!(t.try_lock("g", "c2", vec![q(1)]), vec![q(1)]);
    }

    #[test]
    fn bodies_as_the_java_client_writes_them() {
        let b = parse_body(
            br#"{"clientId":"10.0.0.1@1","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":3,"topic":"T"}],"onlyThisBroker":false}"#,
        )
        .unwrap();
        assert_eq!((b.group.as_str(), b.client_id.as_str(), b.queues), ("g", "10.0.0.1@1", vec![q(3)]));
        assert!(parse_body(b"{}").is_err());
        assert!(parse_body(br#"{"clientId":"c","consumerGroup":"g","mqSet":[{"topic":"T"}]}"#).is_err());
    }
}
