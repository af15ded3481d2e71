//! END_TRANSACTION (37): RocketMQ 4.9's `EndTransactionProcessor` (see `crate::transaction`).
//!
//! A producer ends a transaction, usually oneway, naming its half message by log offset
//! (`commitLogOffset`) and half-queue offset (`tranStateTableOffset`). A commit puts the
//! message to its real topic through the broker's put (a DELAY is applied now; on a
//! SYNC_MASTER the put completes once a slave holds it), and only once that put is final and
//! stored writes the op message that marks the half message decided; a rollback writes the op
//! message only. A request that names no half message of its producer group is answered
//! SYSTEM_ERROR as in 4.9 (nothing for a oneway request) and changes nothing.

use std::sync::Arc;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::message::sysflag;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};
use crate::store::PutStatus;
use crate::transaction::{self, EndRef};

use super::{Shared, bad_header, broker_gone, java_bool, reply};

/// END_TRANSACTION.
pub struct EndTransactionProcessor {
    shared: Arc<Shared>,
}

impl EndTransactionProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::END_TRANSACTION];

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
        if decision == sysflag::TRANSACTION_ROLLBACK_TYPE {
            return Handled::Respond(match broker.store().put_message(&transaction::op_message(&half)) {
                Ok(_) => RemotingCommand::response_to(req, response_code::SUCCESS, None),
                Err(e) => reply(req, response_code::SYSTEM_ERROR, e.to_string()),
            });
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
                if let Err(e) = store.put_message(&transaction::op_message(&half)) {
                    // The half message stays undecided: the check-back asks the producer again.
                    tracing::warn!(msg_id = %half.msg_id, "the op message of a committed transaction was not written: {e}");
                }
                request
            } else {
                tracing::warn!(msg_id = %half.msg_id, status = %result.status, "committing a transaction failed");
                RemotingCommand::response(result.status.response_code(), Some(result.status.as_str()))
            };
            if let Err(e) = responder.send(answer) {
                tracing::debug!(error = %e, "END_TRANSACTION response not delivered");
            }
        });
        Handled::Deferred
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

impl RequestHandler for EndTransactionProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(broker) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        self.process(&broker, &request, ctx)
    }
}

impl std::fmt::Debug for EndTransactionProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndTransactionProcessor").finish_non_exhaustive()
    }
}
