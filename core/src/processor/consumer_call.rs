//! GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): a tool's request the
//! broker forwards to one consumer client, answering the tool with the client's response
//! (RocketMQ 4.9's `AdminBrokerProcessor.getConsumerRunningInfo`, `consumeMessageDirectly` and
//! `callConsumer`). `mqadmin consumerStatus` and `consumeMessage`, and RocketMQ Dashboard's
//! consumer detail, ask them.
//!
//! **The client.** The header's `consumerGroup` and `clientId` name a live member of the
//! group (as its heartbeats registered it); none is SYSTEM_ERROR `The Consumer <group>
//! <clientId> not online`. A member whose heartbeat's version is below
//! `MQVersion.Version.V3_1_8_SNAPSHOT` (ordinal 62) is refused SYSTEM_ERROR, as 4.9.
//!
//! **The forwarded request.** The request's code with the tool's ext fields (less its ACL
//! signature fields: the signature is the tool's, and the client has no use for it) and body,
//! sent on the client's connection with a fresh opaque ([`Responder::invoke`]). For 309 the
//! broker first reads the message the header's `msgId` (an offset message id) names and puts
//! the stored record in the body, and sets `brokerName` to its own, as 4.9; a `msgId` that is
//! no offset message id, or names no stored message, is refused SYSTEM_ERROR before any client
//! is asked (4.9 fails with a NullPointerException there, also a SYSTEM_ERROR). As 4.9, the
//! id's store host is not compared with this broker's: the offset finds the record.
//!
//! **The answer.** The client's response as it sent it: its code, remark, ext fields and body
//! (in the tool's header format, where 4.9 writes the client's). No answer within
//! `consumerCallTimeoutMillis` (10 s, `Broker2Client.callClient`'s timeout) is
//! CONSUME_MSG_TIMEOUT (207) `consumer <group> <clientId> Timeout: ...`; a failed send, or the
//! client's connection closing before it answers, is SYSTEM_ERROR `invoke consumer <group>
//! <clientId> Exception: ...` at once (4.9 waits out its timeout when the channel closes).
//!
//! **Waiting.** Unlike 4.9, which blocks one of its admin threads in `invokeSync`, the tool's
//! request is [deferred](Handled::Deferred): the connection thread that read it goes on, and
//! a short-lived thread waits for the client's answer (woken by the client's connection
//! thread when it reads it, or at once when that connection closes) and answers the tool. At
//! most [`MAX_CALLS_PER_CONNECTION`](crate::remoting::MAX_CALLS_PER_CONNECTION) calls await
//! one client and [`MAX_WAITING`] the whole broker; beyond them a call is refused
//! SYSTEM_ERROR at once.
//!
//! **INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)**, `mqadmin getConsumerStatus` (4.9's
//! `Broker2Client.getConsumeStatus`): header `topic`, `group` and an optional `clientAddr`
//! (a client id, as 4.9 compares it). The broker sends GET_CONSUMER_STATUS_FROM_CLIENT (221,
//! header `topic` and `group`) to every live member of the group, or to the one whose id is
//! `clientAddr`, and answers SUCCESS with a `GetConsumerStatusBody` whose `consumerTable`
//! holds, per client id, the `messageQueueTable` that client answered: the offset of each
//! queue of the topic in its memory. A member that answers an error, answers a body that does
//! not decode, or does not answer within 5 s (4.9's timeout) is left out and logged, as 4.9
//! does. No member online is SYSTEM_ERROR `No Any Consumer online in the consumer group:
//! [G]`; a member asked whose version is below `V3_0_7_SNAPSHOT` is SYSTEM_ERROR `the client
//! does not support this feature. version=...`, before any is asked (4.9 refuses when its
//! iteration meets one, after asking the members before it). The members are asked at once
//! and waited for together, on a thread of the request's own, where 4.9 asks them one after
//! another from one of its admin threads.
//!
//! **ACL.** 4.9 checks only the signature of these codes. Here both need SUB on the group's
//! retry topic (`%RETRY%<group>`, the group's resource), as the requests that act for a group
//! do: 309 makes one of the group's consumers consume a message, and 307 reads its state.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::broker::Broker;
use crate::remoting::{
    Handled, RemotingCommand, RemotingError, RequestContext, RequestHandler, request_code, response_code,
};

use super::{Shared, bad_header, broker_gone, reply};

/// Java `MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()`: the oldest client that answers these.
const V3_1_8_SNAPSHOT: i32 = 62;

/// Java `MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()`: the oldest client that answers
/// GET_CONSUMER_STATUS_FROM_CLIENT.
const V3_0_7_SNAPSHOT: i32 = 28;

/// How long a consumer has to answer GET_CONSUMER_STATUS_FROM_CLIENT (4.9's fixed 5 s).
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// Most forwarded requests awaiting their clients' answers in one broker at once (a thread
/// each).
pub const MAX_WAITING: usize = 256;

/// GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY.
pub struct ConsumerCallProcessor {
    shared: Arc<Shared>,
    /// Forwarded requests awaiting their answers.
    waiting: Arc<AtomicUsize>,
}

impl ConsumerCallProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::GET_CONSUMER_RUNNING_INFO,
        request_code::CONSUME_MESSAGE_DIRECTLY,
        request_code::INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    ];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ConsumerCallProcessor { shared, waiting: Arc::default() }
    }

    /// The request to forward, and the group and client to forward it to.
    fn forwarded(
        &self,
        b: &Broker,
        req: &RemotingCommand,
    ) -> Result<(RemotingCommand, String, String), RemotingCommand> {
        let h = |e| bad_header(req, e);
        let group = req.ext_str("consumerGroup").map_err(h)?.to_owned();
        let client_id = req.ext_str("clientId").map_err(h)?.to_owned();
        let mut forward = RemotingCommand::request(req.code);
        forward.ext_fields = req.ext_fields.clone();
        for signed in [crate::acl::ACCESS_KEY, crate::acl::SIGNATURE, crate::acl::SECURITY_TOKEN] {
            forward.ext_fields.remove(signed);
        }
        if req.code == request_code::CONSUME_MESSAGE_DIRECTLY {
            let msg_id = req.ext_str("msgId").map_err(h)?;
            let Some((_, offset)) = crate::message::decode_offset_msg_id(msg_id) else {
                return Err(reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!("msgId {} is not an offset message id", crate::clip(msg_id, 64)),
                ));
            };
            let Some(record) = b.store().genuine_record_at(offset) else {
                return Err(reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!("can not find message by the msgId {msg_id} (offset {offset})"),
                ));
            };
            forward.set_ext("brokerName", &b.config().broker_name);
            forward.body = record.bytes().to_vec();
        } else {
            forward.body = req.body.clone();
        }
        Ok((forward, group, client_id))
    }

    /// Java `callConsumer`: sends `forward` to the client and answers `req` with its
    /// response, later (see the module doc), or with an error now.
    fn call_consumer(
        &self,
        b: &Broker,
        req: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Result<(), RemotingCommand> {
        let (forward, group, client_id) = self.forwarded(b, req)?;
        let Some(channel) = self.shared.clients.consumer_channel(&group, &client_id) else {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("The Consumer <{group}> <{client_id}> not online"),
            ));
        };
        if channel.version < V3_1_8_SNAPSHOT {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                    version_desc(channel.version)
                ),
            ));
        }
        let failed = |e: &dyn std::fmt::Display| {
            reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("invoke consumer <{group}> <{client_id}> Exception: {e}"),
            )
        };
        let Some(slot) = Slot::take(&self.waiting) else {
            return Err(failed(&format!("{MAX_WAITING} requests already await consumers' answers")));
        };
        let timeout = Duration::from_millis(b.config().consumer_call_timeout_millis.max(1) as u64);
        let call = channel.responder.invoke(forward, timeout).map_err(|e| failed(&e))?;
        tracing::debug!(group, client = client_id, code = req.code, opaque = call.opaque(), peer = %channel.peer,
            "request forwarded to a consumer");
        let responder = ctx.responder();
        let template = RemotingCommand::response_to(req, response_code::SUCCESS, None);
        let code = req.code;
        let (group_, client_id_) = (group.clone(), client_id.clone());
        let spawned = std::thread::Builder::new().name("rmqha-consumer-call".into()).spawn(move || {
            let (group, client_id) = (group_, client_id_);
            let _slot = slot;
            let answer = match call.wait() {
                Ok(client) => {
                    let mut answer = template;
                    answer.code = client.code;
                    answer.remark = client.remark;
                    answer.ext_fields = client.ext_fields;
                    answer.body = client.body;
                    answer
                }
                Err(e) => {
                    let (code, remark) = match &e {
                        RemotingError::Timeout { .. } => (
                            response_code::CONSUME_MSG_TIMEOUT,
                            format!("consumer <{group}> <{client_id}> Timeout: {e}"),
                        ),
                        _ => (
                            response_code::SYSTEM_ERROR,
                            format!("invoke consumer <{group}> <{client_id}> Exception: {e}"),
                        ),
                    };
                    tracing::info!(group, client = client_id, code, "{remark}");
                    let mut answer = template;
                    answer.code = code;
                    answer.remark = Some(remark);
                    answer
                }
            };
            if let Err(e) = responder.send(answer) {
                tracing::debug!(code, "answer to a forwarded request not sent: {e}");
            }
        });
        // The call (in the closure) is dropped with it: its entry leaves the client's table,
        // and an answer the client still sends is ignored.
        spawned.map(drop).map_err(|e| failed(&e))
    }
}

impl ConsumerCallProcessor {
    /// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (see the module doc): asks the members, and
    /// answers `req` once they all answered or timed out, later; or with an error now.
    fn consumer_status(&self, req: &RemotingCommand, ctx: &RequestContext) -> Result<(), RemotingCommand> {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?.to_owned();
        let group = req.ext_str("group").map_err(h)?.to_owned();
        let only = req.ext("clientAddr").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
        let members = self.shared.clients.consumer_channels(&group);
        if members.is_empty() {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("No Any Consumer online in the consumer group: [{group}]"),
            ));
        }
        let asked: Vec<_> =
            members.into_iter().filter(|(id, _)| only.as_ref().is_none_or(|o| o == id)).collect();
        if let Some((_, old)) = asked.iter().find(|(_, c)| c.version < V3_0_7_SNAPSHOT) {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("the client does not support this feature. version={}", version_desc(old.version)),
            ));
        }
        let Some(slot) = Slot::take(&self.waiting) else {
            return Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("{MAX_WAITING} requests already await consumers' answers"),
            ));
        };
        let mut calls = Vec::with_capacity(asked.len());
        for (id, channel) in asked {
            let ask = RemotingCommand::request(request_code::GET_CONSUMER_STATUS_FROM_CLIENT)
                .with_ext("topic", &topic)
                .with_ext("group", &group);
            match channel.responder.invoke(ask, STATUS_TIMEOUT) {
                Ok(call) => calls.push((id, call)),
                Err(e) => tracing::warn!(
                    group,
                    topic,
                    client = id,
                    "[get-consumer-status] cannot ask a consumer: {e}"
                ),
            }
        }
        let responder = ctx.responder();
        let template = RemotingCommand::response_to(req, response_code::SUCCESS, None);
        let spawned = std::thread::Builder::new().name("rmqha-consumer-status".into()).spawn(move || {
            let _slot = slot;
            let mut status = crate::broker_admin::ConsumerStatus::default();
            for (id, call) in calls {
                let why = match call.wait() {
                    Ok(r) if r.code == response_code::SUCCESS => {
                        match crate::broker_admin::ConsumerStatus::decode(&r.body) {
                            Ok(s) => {
                                status.consumer_table.push((id, s.message_queue_table));
                                continue;
                            }
                            Err(e) => format!("its answer does not decode: {e}"),
                        }
                    }
                    Ok(r) => format!("it answered code {} ({})", r.code, r.remark.unwrap_or_default()),
                    Err(e) => e.to_string(),
                };
                tracing::warn!(group, topic, client = id, "[get-consumer-status] a consumer left out: {why}");
            }
            if let Err(e) = responder.send(template.with_body(status.encode())) {
                tracing::debug!("answer to INVOKE_BROKER_TO_GET_CONSUMER_STATUS not sent: {e}");
            }
        });
        spawned.map(drop).map_err(|e| {
            reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("[get-consumer-status] cannot wait for the consumers: {e}"),
            )
        })
    }
}

/// One of the broker's [`MAX_WAITING`] places for a forwarded request; given back on drop.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(waiting: &Arc<AtomicUsize>) -> Option<Slot> {
        waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_WAITING).then_some(n + 1))
            .ok()?;
        Some(Slot(waiting.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Java `MQVersion.getVersionDesc` for the versions below V3_1_8_SNAPSHOT (the ones it is
/// asked of here): the name of `MQVersion.Version`'s constant with that ordinal.
fn version_desc(version: i32) -> String {
    const V3_0_0: [&str; 16] = [
        "V3_0_0_SNAPSHOT",
        "V3_0_0_ALPHA1",
        "V3_0_0_BETA1",
        "V3_0_0_BETA2",
        "V3_0_0_BETA3",
        "V3_0_0_BETA4",
        "V3_0_0_BETA5",
        "V3_0_0_BETA6_SNAPSHOT",
        "V3_0_0_BETA6",
        "V3_0_0_BETA7_SNAPSHOT",
        "V3_0_0_BETA7",
        "V3_0_0_BETA8_SNAPSHOT",
        "V3_0_0_BETA8",
        "V3_0_0_BETA9_SNAPSHOT",
        "V3_0_0_BETA9",
        "V3_0_0_FINAL",
    ];
    match usize::try_from(version) {
        Ok(v) if v < V3_0_0.len() => V3_0_0[v].to_owned(),
        // Then V3_0_1 .. V3_0_15 and V3_1_0 .. V3_1_9, a SNAPSHOT and a release each.
        Ok(v) if v < V3_1_8_SNAPSHOT as usize => {
            let n = (v - V3_0_0.len()) / 2;
            let (minor, patch) = if n < 15 { (0, n + 1) } else { (1, n - 15) };
            let snapshot = if (v - V3_0_0.len()) % 2 == 0 { "_SNAPSHOT" } else { "" };
            format!("V3_{minor}_{patch}{snapshot}")
        }
        _ => version.to_string(),
    }
}

impl RequestHandler for ConsumerCallProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        if !Self::CODES.contains(&request.code) {
            return Handled::Respond(RemotingCommand::not_supported(&request));
        }
        let outcome = if request.code == request_code::INVOKE_BROKER_TO_GET_CONSUMER_STATUS {
            self.consumer_status(&request, ctx)
        } else {
            self.call_consumer(&b, &request, ctx)
        };
        match outcome {
            Ok(()) => Handled::Deferred,
            Err(answer) => Handled::Respond(answer),
        }
    }
}

impl std::fmt::Debug for ConsumerCallProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerCallProcessor")
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of `MQVersion.Version`'s first constants, by ordinal.
    #[test]
    fn version_names_follow_mq_version() {
        assert_eq!(version_desc(0), "V3_0_0_SNAPSHOT");
        assert_eq!(version_desc(15), "V3_0_0_FINAL");
        assert_eq!(version_desc(16), "V3_0_1_SNAPSHOT");
        assert_eq!(version_desc(17), "V3_0_1");
        assert_eq!(version_desc(44), "V3_0_15_SNAPSHOT");
        assert_eq!(version_desc(45), "V3_0_15");
        assert_eq!(version_desc(46), "V3_1_0_SNAPSHOT");
        assert_eq!(version_desc(61), "V3_1_7");
        assert_eq!(version_desc(-3), "-3");
    }

    #[test]
    fn slots_are_bounded_and_given_back() {
        let waiting = Arc::new(AtomicUsize::new(0));
        let slots: Vec<Slot> = (0..MAX_WAITING).map(|_| Slot::take(&waiting).unwrap()).collect();
        assert!(Slot::take(&waiting).is_none());
        drop(slots);
        assert_eq!(waiting.load(Ordering::Relaxed), 0);
        assert!(Slot::take(&waiting).is_some());
    }
}
