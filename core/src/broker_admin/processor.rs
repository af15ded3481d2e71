//! [`AdminProcessor`]: the admin requests a slave's config sync and tools send to a broker.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metadata::{ConfigTables, JsonStyle, MetadataError};
use crate::remoting::{
    Dispatch, Handled, RemotingCommand, RequestContext, RequestHandler, request_code, response_code,
};

use super::KvTable;

/// Supplies the GET_BROKER_RUNTIME_INFO table: role, offsets, slaves, … as strings. Called on
/// the connection's thread for each request, so it should only read cheap snapshots.
pub type RuntimeInfoProvider = Arc<dyn Fn() -> BTreeMap<String, String> + Send + Sync>;

/// Supplies a master's deleted topics (topic → the CommitLog offset below which its records
/// are gone), added to its GET_ALL_TOPIC_CONFIG answers for its slaves.
pub type DeletedTopicsProvider = Arc<dyn Fn() -> BTreeMap<String, u64> + Send + Sync>;

/// Answers the config-sync and runtime-info requests from a broker's [`ConfigTables`]
/// (RocketMQ's `AdminBrokerProcessor`, the part a slave and `rmqha status` use):
///
/// | request | response body |
/// |---|---|
/// | GET_ALL_TOPIC_CONFIG (21) | TopicConfigSerializeWrapper, compact JSON |
/// | GET_ALL_CONSUMER_OFFSET (43) | ConsumerOffsetManager JSON, compact |
/// | GET_ALL_DELAY_OFFSET (45) | the text of `delayOffset.json` |
/// | GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) | SubscriptionGroupWrapper, compact JSON |
/// | GET_BROKER_RUNTIME_INFO (28) | KVTable `{"table":{…}}` from the [`RuntimeInfoProvider`] |
///
/// Responses are SUCCESS and echo the request's opaque and header format. Masters and slaves
/// both serve these (a tool may ask a slave; a slave promoted by hand serves its mirror).
///
/// **Composition.** Used alone as a server's handler it answers every other code with
/// REQUEST_CODE_NOT_SUPPORTED. A broker that also serves send and pull registers it into a
/// [`Dispatch`] with [`register`](Self::register), or calls [`process`](Self::process), which
/// returns `None` for codes it does not own.
///
/// 5.x paging fields on the topic and group requests (`topicSeq`, `maxTopicNum`, …) are
/// ignored and the whole table is returned without a total, which a paging client reads as a
/// single last page (spec section 8).
pub struct AdminProcessor {
    tables: Arc<ConfigTables>,
    runtime_info: RuntimeInfoProvider,
    deleted_topics: Option<DeletedTopicsProvider>,
}

impl AdminProcessor {
    /// The request codes this processor answers.
    pub const CODES: &'static [i32] = &[
        request_code::GET_ALL_TOPIC_CONFIG,
        request_code::GET_BROKER_RUNTIME_INFO,
        request_code::GET_ALL_CONSUMER_OFFSET,
        request_code::GET_ALL_DELAY_OFFSET,
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    ];

    /// A processor serving `tables`, with `runtime_info` for GET_BROKER_RUNTIME_INFO.
    pub fn new(tables: Arc<ConfigTables>, runtime_info: RuntimeInfoProvider) -> Self {
        AdminProcessor { tables, runtime_info, deleted_topics: None }
    }

    /// Adds the deleted topics `provider` gives to GET_ALL_TOPIC_CONFIG answers
    /// ([`DELETED_TOPICS_FIELD`](crate::metadata::DELETED_TOPICS_FIELD)).
    pub fn with_deleted_topics(mut self, provider: DeletedTopicsProvider) -> Self {
        self.deleted_topics = Some(provider);
        self
    }

    /// The tables served.
    pub fn tables(&self) -> &Arc<ConfigTables> {
        &self.tables
    }

    /// Whether `code` is one of [`CODES`](Self::CODES).
    pub fn handles(code: i32) -> bool {
        Self::CODES.contains(&code)
    }

    /// Routes this processor's codes to it in `dispatch`.
    pub fn register(self: Arc<Self>, dispatch: &mut Dispatch) {
        dispatch.register_all(Self::CODES, self);
    }

    /// The response to `request`, or `None` if its code is not one this processor answers
    /// (so a caller can try the next processor).
    pub fn process(&self, request: &RemotingCommand) -> Option<RemotingCommand> {
        let body = match request.code {
            request_code::GET_ALL_TOPIC_CONFIG => {
                self.tables.topics().encode(JsonStyle::Compact).map(|body| match &self.deleted_topics {
                    Some(deleted) => crate::metadata::with_deleted_topics(body, &deleted()),
                    None => body,
                })
            }
            request_code::GET_ALL_CONSUMER_OFFSET => {
                self.tables.consumer_offsets().encode(JsonStyle::Compact)
            }
            request_code::GET_ALL_DELAY_OFFSET => Ok(self.delay_offset_text()),
            request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
                self.tables.subscription_groups().encode(JsonStyle::Compact)
            }
            request_code::GET_BROKER_RUNTIME_INFO => KvTable::new((self.runtime_info)()).encode(),
            _ => return None,
        };
        Some(match body {
            Ok(body) => RemotingCommand::response_to(request, response_code::SUCCESS, None)
                .with_body(body.into_bytes()),
            Err(e) => self.encoding_failed(request, &e),
        })
    }

    /// What `delayOffset.json` holds, or would hold if persisted now.
    ///
    /// RocketMQ answers with the file's text, so do the same where we can: the verbatim text
    /// (as loaded, or as received from a master) until an offset changes here, then the
    /// pretty form a persist writes. Serving memory rather than reading the file means an
    /// offset that is not yet flushed (the file is written every 10 s) is not served stale.
    /// Unlike RocketMQ, an empty table is answered with `{"offsetTable":{}}` rather than
    /// SYSTEM_ERROR "No delay offset in this broker", so a slave of a master that never
    /// scheduled a message does not log a failure every interval.
    fn delay_offset_text(&self) -> String {
        let delay = self.tables.delay_offsets();
        delay.verbatim().unwrap_or_else(|| {
            delay
                .encode(JsonStyle::Pretty)
                // Encoding a map of integers cannot fail; if it somehow did, an empty table
                // is the honest fallback for a table we cannot describe.
                .unwrap_or_else(|_| "{\"offsetTable\":{}}".to_string())
        })
    }

    fn encoding_failed(&self, request: &RemotingCommand, e: &MetadataError) -> RemotingCommand {
        tracing::error!(code = request.code, error = %e, "cannot encode admin response");
        RemotingCommand::system_error(request, &e.to_string())
    }
}

impl RequestHandler for AdminProcessor {
    fn handle(&self, request: RemotingCommand, _ctx: &RequestContext) -> Handled {
        Handled::Respond(self.process(&request).unwrap_or_else(|| RemotingCommand::not_supported(&request)))
    }
}

impl std::fmt::Debug for AdminProcessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminProcessor")
            .field("config_dir", &self.tables.config_dir())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{DelayOffsetWrapper, TopicConfig, TopicConfigWrapper};

    fn processor(dir: &std::path::Path) -> AdminProcessor {
        let tables = Arc::new(ConfigTables::open(dir).unwrap());
        AdminProcessor::new(
            tables,
            Arc::new(|| BTreeMap::from([("brokerRole".into(), "ASYNC_MASTER".into())])),
        )
    }

    #[test]
    fn answers_its_codes_and_passes_on_others() {
        let dir = tempfile::tempdir().unwrap();
        let p = processor(dir.path());
        p.tables().topics().put_topic(TopicConfig::new("T")).unwrap();
        let mut req = RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG);
        req.opaque = 9;
        let resp = p.process(&req).unwrap();
        assert_eq!(resp.code, response_code::SUCCESS);
        assert_eq!(resp.opaque, 9);
        let w = TopicConfigWrapper::decode(&resp.body, "body").unwrap();
        assert_eq!(w, p.tables().topics().wrapper());
        assert!(!resp.body.contains(&b'\n'), "a response body is compact JSON");

        assert!(p.process(&RemotingCommand::request(10)).is_none());
        for &code in AdminProcessor::CODES {
            assert!(AdminProcessor::handles(code));
            assert!(p.process(&RemotingCommand::request(code)).is_some());
        }
    }

    #[test]
    fn delay_offsets_are_served_as_the_file_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = processor(dir.path());
        let req = RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET);

        // Verbatim text stays verbatim, fastjson quirks included.
        let text = "{\"offsetTable\":{1:5,2:0}}";
        p.tables().delay_offsets().apply_from_master(text).unwrap();
        assert_eq!(p.process(&req).unwrap().body, text.as_bytes());

        // After a local change: what a persist would write.
        p.tables().delay_offsets().update_offset(3, 7);
        let body = p.process(&req).unwrap().body;
        p.tables().delay_offsets().persist().unwrap();
        let file = std::fs::read(p.tables().delay_offsets().path()).unwrap();
        assert_eq!(body, file);
        let w = DelayOffsetWrapper::decode(&body, "body").unwrap();
        assert_eq!(w.offset_table[&3], 7);
    }
}
