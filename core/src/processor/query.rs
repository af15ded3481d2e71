//! QUERY_MESSAGE (12, by key) and VIEW_MESSAGE_BY_ID (33, by physical offset): RocketMQ's
//! `QueryMessageProcessor`. Both answer with raw CommitLog records in the body, as a pull does.

use std::sync::Arc;

use crate::broker::Broker;
use crate::remoting::{
    Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::{Shared, bad_header, broker_gone, reply};

/// Java `MixAll.UNIQUE_MSG_QUERY_FLAG`: the key is a message's UNIQ_KEY.
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// Java `MessageStoreConfig.defaultQueryMaxNum`.
const DEFAULT_QUERY_MAX_NUM: usize = 32;

/// QUERY_MESSAGE and VIEW_MESSAGE_BY_ID.
pub struct QueryProcessor {
    shared: Arc<Shared>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

impl QueryProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[request_code::QUERY_MESSAGE, request_code::VIEW_MESSAGE_BY_ID];

    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        QueryProcessor { shared }
    }

    /// Messages whose KEYS or UNIQ_KEY hold `key`, stored within `[beginTimestamp,
    /// endTimestamp]`, newest first, at most `maxNum` (capped by `maxMsgsNumBatch`).
    fn query_message(&self, b: &Broker, req: &RemotingCommand) -> Answer {
        let h = |e| bad_header(req, e);
        let topic = req.ext_str("topic").map_err(h)?;
        let key = req.ext_str("key").map_err(h)?;
        let mut max = req.ext_i32("maxNum").map_err(h)?.max(0) as usize;
        let begin = req.ext_i64("beginTimestamp").map_err(h)?;
        let end = req.ext_i64("endTimestamp").map_err(h)?;
        if req.ext(UNIQUE_MSG_QUERY_FLAG) == Some("true") {
            max = DEFAULT_QUERY_MAX_NUM;
        }
        let store = b.store();
        let mut body = Vec::new();
        for m in store.query_by_key(topic, key, max, begin, end) {
            if let Some(rec) = store.record_at(m.phy_offset) {
                body.extend_from_slice(rec.bytes());
            }
        }
        let last_ts = store.dispatcher().last_dispatched_timestamp();
        let last_phy = store.max_offset() - store.dispatch_behind_bytes() as i64;
        if body.is_empty() {
            return Err(reply(
                req,
                response_code::QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
            )
            .with_ext("indexLastUpdateTimestamp", last_ts)
            .with_ext("indexLastUpdatePhyoffset", last_phy));
        }
        Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
            .with_ext("indexLastUpdateTimestamp", last_ts)
            .with_ext("indexLastUpdatePhyoffset", last_phy)
            .with_body(body))
    }

    /// The record at physical offset `offset` (decoded from an offset message id by the client).
    /// With ACL on, only for an account that may read the message's topic (SUB): the id
    /// names any record in the log (4.9 checks nothing here, and hands out any topic's
    /// messages to whoever can sign a request).
    fn view_message(&self, b: &Broker, req: &RemotingCommand, ctx: &RequestContext) -> Answer {
        let offset = req.ext_i64("offset").map_err(|e| bad_header(req, e))?;
        match b.store().genuine_record_at(offset) {
            Some(rec) => {
                let topic_ok = |id: &crate::acl::AclIdentity| {
                    id.check_subscribe(rec.view().and_then(|v| v.topic_str()).unwrap_or_default())
                };
                if let Err(reason) = ctx.acl_permits(b.config().acl_enable, topic_ok) {
                    tracing::warn!(peer = %ctx.peer(), offset, "ACL refused VIEW_MESSAGE_BY_ID: {reason}");
                    return Err(reply(req, response_code::SYSTEM_ERROR, format!("AclException: {reason}")));
                }
                Ok(RemotingCommand::response_to(req, response_code::SUCCESS, None)
                    .with_body(rec.bytes().to_vec()))
            }
            None => Err(reply(
                req,
                response_code::SYSTEM_ERROR,
                format!("can not find message by the offset, {offset}"),
            )),
        }
    }
}

impl RequestHandler for QueryProcessor {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        let Some(b) = self.shared.broker() else { return Handled::Respond(broker_gone(&request)) };
        let answer = match request.code {
            request_code::QUERY_MESSAGE => self.query_message(&b, &request),
            request_code::VIEW_MESSAGE_BY_ID => self.view_message(&b, &request, ctx),
            _ => Ok(RemotingCommand::not_supported(&request)),
        };
        Handled::Respond(answer.unwrap_or_else(|e| e))
    }
}

impl std::fmt::Debug for QueryProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryProcessor").finish_non_exhaustive()
    }
}
