//! END_TRANSACTION (37): RocketMQ 4.9's `EndTransactionProcessor` (see `crate::transaction`),
//! and RESUME_CHECK_HALF_MESSAGE (323, see [`EndTransactionProcessor::resume_check`]).
//!
//! A producer ends a transaction, usually oneway, naming its half message by log offset
//! (`commitLogOffset`) and half-queue offset (`tranStateTableOffset`). A commit puts the
//! message to its real topic through the broker's put (a DELAY is applied now; on a
//! SYNC_MASTER the put completes once a slave holds it), and only once that put is final and
//! stored writes the op message that marks the half message decided; a rollback writes the op
//! message only. A request that names no half message of its producer group is answered
//! SYSTEM_ERROR as in 4.9 (nothing for a oneway request) and changes nothing.
//!
//! **At most one decision per transaction** (4.9 decides again each time it is asked: a
//! second COMMIT puts the message a second time, a COMMIT after a ROLLBACK goes through).
//! A transaction is its half message and every copy the Checker put back of it, all known by
//! their origin (the first half message's queue offset, `TRAN_PREPARED_QUEUE_OFFSET` on a
//! copy): a producer's commit naming the first offsets and one answering a check-back with
//! the copy's are the same transaction. The first END_TRANSACTION that finds the half message
//! claims it (`crate::transaction::Decisions`) and holds the claim until its op message is
//! written; a commit whose put fails (or a rollback whose op message is not written) releases
//! it, so a retry can decide. Any later END_TRANSACTION of the transaction stores nothing and
//! writes no op message, and is answered:
//!
//! - SUCCESS (remark `already committed`/`already rolled back`) if it asks what was decided;
//! - SYSTEM_ERROR naming the recorded decision if it asks the other;
//! - SYSTEM_ERROR `being decided` while the first one is still at work (it may yet fail: ask
//!   again for the outcome);
//! - SYSTEM_ERROR if the op message records no decision (one RocketMQ wrote), or if the
//!   Checker's recorded cursors have passed every copy of the transaction and it is no
//!   longer known (decided long ago, discarded after `transactionCheckMax`, or older than
//!   `fileReservedTime`) and its committed message is not found (below).
//!
//! A transaction not known here (nothing in memory, no op message from the Checker's cursor
//! on) may still have been committed: a crash or a full disk between the committed message's
//! put and its op message's (4.9 stores it again when the check-back's answer commits). So its
//! committed message is looked for in the real topic (a delayed one in SCHEDULE_TOPIC_XXXX
//! until due) through the index (the `UNIQ_KEY` a commit keeps; COMMIT type,
//! `preparedTransactionOffset` naming a half message of the same transaction, the same body):
//! found, a COMMIT writes only the op message, a ROLLBACK is refused. Without the index
//! (`messageIndexEnable=false`) nothing is found.
//!
//! The decisions survive a restart through the op queue: each op message records which way
//! (`TRAN_DECISION`) and of which transaction (its origin, `TRAN_PREPARED_QUEUE_OFFSET`: the
//! half message it names may be deleted by retention before a copy is), and the first claim
//! after a start reads the op queue from the Checker's recorded cursor, as the Checker does.
//! They are kept in memory until the Checker's recorded cursors pass their op message and
//! every copy of their half message. A commit whose message is stored but whose op message
//! fails to be written stays known as committed (the next agreeing END_TRANSACTION writes the
//! op message). Over 1,000,000 in a queue (the cursors are recorded only once durable: a
//! SYNC_MASTER without its slave records none), the oldest decided ones whose op message is
//! written and dispatched leave memory, with a warning; an END_TRANSACTION of one of them
//! finds its op message in the op queue and is answered as above.
//!
//! **ACL** (with `aclEnable=true`; 4.9 does not check END_TRANSACTION at all): the request
//! must come from an account with PUB on the transaction's real topic (the half message's
//! `REAL_TOPIC`), checked once the half message is found, against the account the gate
//! verified (`RequestContext::acl`); a white-listed address passes as at the gate. A refusal
//! changes nothing and is answered as the gate's (SYSTEM_ERROR, `AclException: ...`).

use std::sync::Arc;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::message::sysflag;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::PutStatus;
use crate::transaction::{self, EndRef, Outcome, Verdict};

use super::{Shared, bad_header, broker_gone, java_bool, reply};

/// END_TRANSACTION.
pub struct EndTransactionProcessor {
    shared: Arc<Shared>,
}

impl EndTransactionProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] =
        &[request_code::END_TRANSACTION, request_code::RESUME_CHECK_HALF_MESSAGE];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        EndTransactionProcessor { shared }
    }

    fn process(&self, broker: &Broker, req: &RemotingCommand, ctx: &RequestContext) -> Handled {
        if broker.role() == BrokerRole::Slave {
            tracing::warn!(peer = %ctx.peer(), "END_TRANSACTION sent to a slave: refused");
            return Handled::Respond(reply(
                req,
                response_code::SLAVE_NOT_AVAILABLE,
                "this broker is a SLAVE: end transactions on its master",
            ));
        }
        let parsed = (|| {
            Ok::<_, crate::remoting::RemotingError>((
                req.ext_str("producerGroup")?.to_owned(),
                req.ext_i64("tranStateTableOffset")?,
                req.ext_i64("commitLogOffset")?,
                req.ext_i32("commitOrRollback")?,
            ))
        })();
        let (group, queue_offset, log_offset, decision) = match parsed {
            Ok(p) => p,
            Err(e) => return Handled::Respond(bad_header(req, e)),
        };
        let from_check = java_bool(req, "fromTransactionCheck").unwrap_or(false);
        let msg_id = req.ext("msgId").unwrap_or("");
        match decision {
            sysflag::TRANSACTION_COMMIT_TYPE | sysflag::TRANSACTION_ROLLBACK_TYPE => {}
            _ => {
                // Unknown (NOT_TYPE) or anything else: 4.9 logs it and answers nothing.
                tracing::info!(
                    peer = %ctx.peer(), group, msg_id, from_check, decision,
                    "END_TRANSACTION without a decision (the producer does not know yet): ignored"
                );
                return Handled::Deferred;
            }
        }
        let end = EndRef {
            producer_group: &group,
            tran_state_table_offset: queue_offset,
            commit_log_offset: log_offset,
        };
        let half = match transaction::find_half(broker.store(), &end) {
            Ok(h) => h,
            Err(why) => {
                tracing::warn!(
                    peer = %ctx.peer(), group, msg_id, queue_offset, log_offset, from_check,
                    "END_TRANSACTION ignored: {why}"
                );
                return Handled::Respond(reply(req, response_code::SYSTEM_ERROR, why));
            }
        };
        let topic = half.property(crate::schedule::REAL_TOPIC).unwrap_or("");
        if let Err(reason) = ctx.acl_permits(broker.config().acl_enable, |id| id.check_publish(topic)) {
            tracing::warn!(
                peer = %ctx.peer(), group, msg_id, topic,
                "ACL refused END_TRANSACTION: {reason}"
            );
            if req.is_oneway() {
                return Handled::NoResponse;
            }
            return Handled::Respond(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("AclException: {reason}"),
            ));
        }
        let outcome =
            if decision == sysflag::TRANSACTION_COMMIT_TYPE { Outcome::Commit } else { Outcome::Rollback };
        let claim = match self.shared.decisions.claim(broker.store(), broker.tables(), &half, outcome) {
            Verdict::Claimed(c) => c,
            other => {
                let (code, why) = refusal(&other, outcome);
                tracing::info!(
                    peer = %ctx.peer(), group, msg_id, queue_offset, log_offset, from_check,
                    "END_TRANSACTION {}: nothing redone: {why}", outcome.as_str()
                );
                return Handled::Respond(reply(req, code, why));
            }
        };
        if outcome == Outcome::Rollback || claim.op_only() {
            // A rollback, or a commit whose message is stored but whose op message is not.
            return Handled::Respond(
                match broker.store().put_message(&transaction::op_message(&half, outcome)) {
                    Ok(h) => match transaction::op_offset(&h) {
                        Some(op) => {
                            claim.settle(Some(op));
                            RemotingCommand::response_to(req, response_code::SUCCESS, None)
                        }
                        None => reply(req, response_code::SYSTEM_ERROR, "the op message was not stored"),
                    },
                    Err(e) => reply(req, response_code::SYSTEM_ERROR, e.to_string()),
                },
            );
        }
        let Some(msg) = transaction::committed(&half) else {
            return Handled::Respond(reply(
                req,
                response_code::SYSTEM_ERROR,
                "the half message has no REAL_TOPIC / REAL_QID",
            ));
        };
        let handle = match broker.put_message(&msg) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(group, msg_id, "committing a transaction failed: {e}");
                return Handled::Respond(reply(req, put_failure_code(&e), e.to_string()));
            }
        };
        let responder = ctx.responder();
        let store = broker.store().clone();
        let request = RemotingCommand::response_to(req, response_code::SUCCESS, None);
        handle.on_complete(move |result| {
            // 4.9 `sendFinalMessage`: stored with a timeout status counts as success.
            let stored = result.status.is_stored();
            let answer = if stored {
                let op = match store.put_message(&transaction::op_message(&half, Outcome::Commit)) {
                    Ok(h) => transaction::op_offset(&h),
                    Err(e) => {
                        tracing::warn!(msg_id = %half.msg_id, "the op message of a committed transaction was not written: {e}");
                        None
                    }
                };
                // Committed either way: the Checker's next round writes a missing op
                // message (see `Checker::check_queue`).
                claim.settle(op);
                request
            } else {
                tracing::warn!(msg_id = %half.msg_id, status = %result.status, "committing a transaction failed");
                // The claim is released: a retry may commit.
                drop(claim);
                RemotingCommand::response(result.status.response_code(), Some(result.status.as_str()))
            };
            if let Err(e) = responder.send(answer) {
                tracing::debug!(error = %e, "END_TRANSACTION response not delivered");
            }
        });
        Handled::Deferred
    }
}

/// The answer to an END_TRANSACTION asking `asked` of a transaction it may not decide.
fn refusal(verdict: &Verdict, asked: Outcome) -> (i32, String) {
    match *verdict {
        Verdict::Decided(Some(done)) if done == asked => {
            (response_code::SUCCESS, format!("the transaction was already {}", done.done()))
        }
        Verdict::Decided(Some(done)) => (
            response_code::SYSTEM_ERROR,
            format!("the transaction was already {}: a {} is refused", done.done(), asked.as_str()),
        ),
        Verdict::Decided(None) => (
            response_code::SYSTEM_ERROR,
            "the transaction was already decided (its op message does not say which way)".to_string(),
        ),
        Verdict::Deciding(x) => (
            response_code::SYSTEM_ERROR,
            format!(
                "the transaction is being decided ({}) by another END_TRANSACTION: ask again",
                x.as_str()
            ),
        ),
        Verdict::Passed => (
            response_code::SYSTEM_ERROR,
            "the transaction is no longer pending: the check-back has passed every copy of its half message"
                .to_string(),
        ),
        Verdict::Claimed(_) => (response_code::SYSTEM_ERROR, "claimed".to_string()),
    }
}

fn put_failure_code(e: &crate::Error) -> i32 {
    match e {
        crate::Error::PutFailed {
            status: PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded,
            ..
        } => response_code::MESSAGE_ILLEGAL,
        crate::Error::PutFailed { status: PutStatus::ServiceNotAvailable, .. } => {
            response_code::SERVICE_NOT_AVAILABLE
        }
        _ => response_code::SYSTEM_ERROR,
    }
}

impl EndTransactionProcessor {
    /// RESUME_CHECK_HALF_MESSAGE (323, `mqadmin resumeCheckHalfMessage -m MSG_ID`): the half
    /// message the header's `msgId` (an offset message id) names, typically one discarded to
    /// TRANS_CHECK_MAX_TIME_TOPIC after `transactionCheckMax` unanswered checks, is put back
    /// in the half queue with no checks counted, so the Checker asks its producer group again
    /// (see [`transaction::resumed`]). Beyond 4.9: a message that is no transaction's half
    /// message is refused (4.9 puts any message it names into the half topic), so is a slave,
    /// and the copy keeps the transaction it belongs to, so that one already decided is not
    /// decided twice (nor checked again while its decision is known).
    fn resume_check(&self, broker: &Broker, req: &RemotingCommand) -> RemotingCommand {
        if broker.role() == BrokerRole::Slave {
            return reply(
                req,
                response_code::SLAVE_NOT_AVAILABLE,
                "this broker is a SLAVE: resume the check on its master",
            );
        }
        let msg_id = match req.ext_str("msgId") {
            Ok(m) => m,
            Err(e) => return bad_header(req, e),
        };
        // The message whose id this is (this broker's address, a record starting there).
        let Some(msg) = broker.store().message_by_id(msg_id) else {
            return reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("no message of this broker has msgId {}", crate::clip(msg_id, 64)),
            );
        };
        let Some((copy, origin)) = transaction::resumed(&msg) else {
            return reply(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "msgId {msg_id} names a message of topic {}, not a transaction's half message \
                     (in {} or {})",
                    msg.topic,
                    transaction::HALF_TOPIC,
                    transaction::CHECK_MAX_TIME_TOPIC
                ),
            );
        };
        // A transaction decided already is not checked again: its producer could answer
        // otherwise now (4.9 puts it back regardless, and a rolled-back transaction could be
        // committed).
        if let Some(o) = origin {
            if let Some(outcome) = self.shared.decisions.decided(broker.store(), &msg, 0, o) {
                let how = outcome.map_or("by an op message that does not say how", Outcome::as_str);
                return reply(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!(
                        "msgId {msg_id} belongs to a transaction decided already ({how}): its check is not resumed"
                    ),
                );
            }
        }
        // The copy says WAIT=false (as 4.9's `setWaitStoreMsgOK(false)`): its put answers
        // once stored, without waiting for a flush or a slave, so this does not hold the
        // connection's thread.
        let stored = match broker.store().put_message(&copy) {
            Ok(h) => h.wait(),
            Err(e) => {
                tracing::error!(msg_id, "putting a half message back for its check to resume failed: {e}");
                return reply(
                    req,
                    put_failure_code(&e),
                    format!("Put message back to {} failed: {e}", transaction::HALF_TOPIC),
                );
            }
        };
        if !stored.status.is_stored() {
            return reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("Put message back to {} failed: {}", transaction::HALF_TOPIC, stored.status),
            );
        }
        if let Some(o) = origin {
            self.shared.decisions.note_copy(0, o, stored.queue_offset);
        }
        tracing::info!(msg_id, copy_offset = stored.queue_offset, "a half message's check resumed");
        RemotingCommand::response_to(req, response_code::SUCCESS, None)
    }
}

impl RequestHandler for EndTransactionProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        if request.code == request_code::RESUME_CHECK_HALF_MESSAGE {
            return Handled::Respond(self.resume_check(&broker, &request));
        }
        self.process(&broker, &request, ctx)
    }
}

impl std::fmt::Debug for EndTransactionProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndTransactionProcessor").finish_non_exhaustive()
    }
}
