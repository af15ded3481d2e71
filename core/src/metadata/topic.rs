//! Topic configs: `TopicConfig`, the TopicConfigSerializeWrapper JSON, and `topics.json`.

use super::json::{JsonStyle, null_as_default, object_from_slice_lenient, object_from_str_lenient};
use super::named_table::{NamedTable, Wrapper};
use super::{DataVersion, MetadataError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How a topic's tags are filtered (Java `TopicFilterType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicFilterType {
    #[default]
    SingleTag,
    MultiTag,
}

/// One topic's configuration (Java `TopicConfig`). Missing JSON fields take Java's defaults;
/// fields this version does not know are kept in `extra` and written back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// 5.x topic attributes, e.g. `"+message.type":"NORMAL"`.
    #[serde(deserialize_with = "null_as_default")]
    pub attributes: BTreeMap<String, String>,
    pub order: bool,
    /// Bit set of [`TopicConfig::PERM_READ`], [`TopicConfig::PERM_WRITE`],
    /// [`TopicConfig::PERM_INHERIT`] and [`TopicConfig::PERM_PRIORITY`].
    pub perm: i32,
    pub read_queue_nums: i32,
    pub topic_filter_type: TopicFilterType,
    #[serde(deserialize_with = "null_as_default")]
    pub topic_name: String,
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
    /// Fields a newer RocketMQ wrote that this version does not model; written after the
    /// known fields.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl TopicConfig {
    /// `PermName.PERM_PRIORITY`.
    pub const PERM_PRIORITY: i32 = 8;
    /// `PermName.PERM_READ`.
    pub const PERM_READ: i32 = 4;
    /// `PermName.PERM_WRITE`.
    pub const PERM_WRITE: i32 = 2;
    /// `PermName.PERM_INHERIT`: topics sent to with this topic as template inherit its config.
    pub const PERM_INHERIT: i32 = 1;
    /// Java's `TopicConfig.defaultReadQueueNums` / `defaultWriteQueueNums`.
    pub const DEFAULT_QUEUE_NUMS: i32 = 16;

    /// A topic with Java's defaults: 16 read and 16 write queues, perm 6 (read and write),
    /// SINGLE_TAG, not ordered.
    pub fn new(topic_name: impl Into<String>) -> Self {
        TopicConfig {
            attributes: BTreeMap::new(),
            order: false,
            perm: Self::PERM_READ | Self::PERM_WRITE,
            read_queue_nums: Self::DEFAULT_QUEUE_NUMS,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: topic_name.into(),
            topic_sys_flag: 0,
            write_queue_nums: Self::DEFAULT_QUEUE_NUMS,
            extra: BTreeMap::new(),
        }
    }

    /// `new` with the given queue counts and perm.
    pub fn with_queues(topic_name: impl Into<String>, read: i32, write: i32, perm: i32) -> Self {
        TopicConfig { read_queue_nums: read, write_queue_nums: write, perm, ..TopicConfig::new(topic_name) }
    }

    /// Whether consumers may read (`perm` has PERM_READ).
    pub fn is_readable(&self) -> bool {
        self.perm & Self::PERM_READ != 0
    }

    /// Whether producers may write (`perm` has PERM_WRITE).
    pub fn is_writeable(&self) -> bool {
        self.perm & Self::PERM_WRITE != 0
    }
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig::new("")
    }
}

/// TopicConfigSerializeWrapper: the content of `topics.json` and the body of a
/// GET_ALL_TOPIC_CONFIG response. Decoding also accepts 5.x's
/// TopicConfigAndMappingSerializeWrapper (`mappingDataVersion`, `topicQueueMappingDetailMap`,
/// `topicQueueMappingInfoMap`), whose static-topic mapping fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default, deserialize_with = "null_as_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

impl TopicConfigWrapper {
    /// Decodes a remoting body or file content as fastjson writes it. `origin` names the
    /// source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, origin).map(Self::fill_names)
    }

    /// Encodes as strict JSON (pretty for files, compact for remoting bodies).
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        super::json::to_json(self, style, Self::WHAT)
    }

    /// An entry without `topicName` is named by its key, as the table addresses it.
    fn fill_names(mut self) -> Self {
        for (name, config) in &mut self.topic_config_table {
            if config.topic_name.is_empty() {
                config.topic_name.clone_from(name);
            }
        }
        self
    }
}

/// The field rmqha adds to a master's GET_ALL_TOPIC_CONFIG answer: its deleted topics, each
/// with the CommitLog offset below which its records are gone, for its slaves to delete them
/// too (RocketMQ's answer has no such field; its slaves, fastjson, skip unknown ones).
pub const DELETED_TOPICS_FIELD: &str = "rmqhaDeletedTopics";

/// `body`, a compact GET_ALL_TOPIC_CONFIG answer (a JSON object), with
/// [`DELETED_TOPICS_FIELD`] added when `deleted` has entries.
pub fn with_deleted_topics(mut body: String, deleted: &BTreeMap<String, u64>) -> String {
    if deleted.is_empty() || !body.ends_with('}') {
        return body;
    }
    let Ok(field) = serde_json::to_string(deleted) else { return body };
    body.pop();
    let empty = body.trim_end().ends_with('{');
    body.push_str(&format!("{}\"{DELETED_TOPICS_FIELD}\":{field}}}", if empty { "" } else { "," }));
    body
}

/// The deleted topics a master's GET_ALL_TOPIC_CONFIG answer carries; none from a master
/// that sends no such field (RocketMQ's).
pub fn deleted_topics_in(body: &[u8]) -> Result<BTreeMap<String, u64>, String> {
    #[derive(Deserialize)]
    struct Deletions {
        #[serde(rename = "rmqhaDeletedTopics", default)]
        deleted: BTreeMap<String, u64>,
    }
    // Most answers carry none (a RocketMQ master's never, and its fastjson need not parse as
    // strict JSON): those are not parsed a second time. A field of ours that does not parse
    // is an error.
    if !body.windows(DELETED_TOPICS_FIELD.len()).any(|w| w == DELETED_TOPICS_FIELD.as_bytes()) {
        return Ok(BTreeMap::new());
    }
    serde_json::from_slice::<Deletions>(body)
        .map(|d| d.deleted)
        .map_err(|e| format!("{DELETED_TOPICS_FIELD} is not a JSON object of topic to CommitLog offset: {e}"))
}

impl Wrapper for TopicConfigWrapper {
    type Config = TopicConfig;
    const WHAT: &'static str = "topic config";

    fn decode_text(text: &str, origin: &str) -> Result<Self, MetadataError> {
        object_from_str_lenient(text, &format!("{origin} ({})", Self::WHAT)).map(Self::fill_names)
    }
    fn version(&self) -> &DataVersion {
        &self.data_version
    }
    fn version_mut(&mut self) -> &mut DataVersion {
        &mut self.data_version
    }
    fn table(&self) -> &BTreeMap<String, TopicConfig> {
        &self.topic_config_table
    }
    fn table_mut(&mut self) -> &mut BTreeMap<String, TopicConfig> {
        &mut self.topic_config_table
    }
    fn name_of(config: &TopicConfig) -> &str {
        &config.topic_name
    }
    const TABLE_FIELD: &'static str = "topicConfigTable";
    fn without_table(&self) -> Self {
        TopicConfigWrapper { data_version: self.data_version, topic_config_table: BTreeMap::new() }
    }
}

/// The broker's topic configs, persisted in `config/topics.json` (Java `TopicConfigManager`).
///
/// Every change bumps the DataVersion and is written to disk before the call returns. If that
/// write fails, the change stays in memory, the table stays dirty for
/// [`persist_if_dirty`](Self::persist_if_dirty), and the call returns the error. A call that
/// finds nothing to change still returns only once the table is on disk (and returns the
/// write's error if it is not), so a retry of a failed call is never acknowledged early.
#[derive(Debug)]
pub struct TopicConfigTable {
    inner: NamedTable<TopicConfigWrapper>,
}

impl TopicConfigTable {
    /// Loads `path` (falling back to its `.bak`); a missing file is an empty table.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        Ok(TopicConfigTable { inner: NamedTable::open(path.into())? })
    }

    /// The file this table persists to.
    pub fn path(&self) -> PathBuf {
        self.inner.path()
    }

    /// The config of `topic`, if it exists.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.inner.get(topic)
    }

    /// Whether `topic` exists.
    pub fn contains(&self, topic: &str) -> bool {
        self.inner.contains(topic)
    }

    /// A copy of every topic config, by name.
    pub fn all(&self) -> BTreeMap<String, TopicConfig> {
        self.inner.all()
    }

    /// The number of topics.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current DataVersion.
    pub fn data_version(&self) -> DataVersion {
        self.inner.data_version()
    }

    /// A consistent copy of the version and the table together.
    pub fn wrapper(&self) -> TopicConfigWrapper {
        self.inner.wrapper()
    }

    /// The table as JSON: `Compact` is the GET_ALL_TOPIC_CONFIG response body.
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        self.inner.encode(style)
    }

    /// Creates or updates a topic (keyed by `config.topic_name`) and persists; returns the
    /// previous config. An empty name is refused.
    pub fn put_topic(&self, config: TopicConfig) -> Result<Option<TopicConfig>, MetadataError> {
        self.inner.put(config)
    }

    /// Creates the topic unless it exists; returns the config in the table and whether it was
    /// created (Java `createTopicIfAbsent`).
    pub fn create_if_absent(&self, config: TopicConfig) -> Result<(TopicConfig, bool), MetadataError> {
        self.inner.create_if_absent(config)
    }

    /// `create_if_absent` for many topics, with one version step and one write for all it
    /// creates; in order, each topic's config in the table and whether it was created.
    pub fn create_all_if_absent(
        &self,
        configs: impl IntoIterator<Item = TopicConfig>,
    ) -> Result<Vec<(TopicConfig, bool)>, MetadataError> {
        self.inner.create_all_if_absent(configs)
    }

    /// Deletes a topic and persists; returns its config, or `None` (and changes nothing) if
    /// it did not exist.
    pub fn delete_topic(&self, topic: &str) -> Result<Option<TopicConfig>, MetadataError> {
        self.inner.delete(topic)
    }

    /// Adds the built-in topics a broker starts with (SCHEDULE_TOPIC_XXXX, TBW102, ...) that
    /// the table lacks, without bumping the version or persisting: Java puts them in before
    /// loading `topics.json`, so the file's entries win. Returns how many were added.
    pub fn seed_if_absent(&self, configs: impl IntoIterator<Item = TopicConfig>) -> usize {
        self.inner.seed_if_absent(configs)
    }

    /// Slave side: if the local DataVersion equals the master's, does nothing and returns
    /// `false`. Otherwise replaces the whole table and the version with the master's,
    /// persists, and returns `true`. The version is not bumped afterwards (5.x does, which
    /// makes every later sync rewrite the table).
    pub fn apply_from_master(&self, master: TopicConfigWrapper) -> Result<bool, MetadataError> {
        self.inner.apply_from_master(master)
    }

    /// Writes the table to its file now.
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.inner.persist()
    }

    /// Writes the table if memory holds changes the file lacks (after a failed write); returns
    /// whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.inner.persist_if_dirty()
    }

    /// Whether memory holds changes the file lacks.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }
}

/// RocketMQ's `TopicValidator.SYSTEM_TOPIC_SET`: topics the broker itself uses.
const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Java `TopicValidator.isSystemTopic`: one of the broker's own topics, or one named
/// `rmq_sys_...`. Such a topic is never deleted by request.
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with("rmq_sys_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_java_defaults() {
        let c: TopicConfig = serde_json::from_str(r#"{"topicName":"T"}"#).unwrap();
        assert_eq!(c, TopicConfig::new("T"));
        assert_eq!(c.perm, 6);
        assert!(c.is_readable() && c.is_writeable());
    }

    #[test]
    fn json_fields_are_rocketmq_names_in_alphabetical_order() {
        let json = serde_json::to_string(&TopicConfig::new("T")).unwrap();
        assert_eq!(
            json,
            r#"{"attributes":{},"order":false,"perm":6,"readQueueNums":16,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":16}"#
        );
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let text = r#"{"topicName":"T","topicMessageType":"FIFO","future":{"a":[1]}}"#;
        let c: TopicConfig = serde_json::from_str(text).unwrap();
        assert_eq!(c.extra.len(), 2);
        let back: TopicConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn nulls_read_as_defaults_and_names_come_from_keys() {
        let w =
            TopicConfigWrapper::decode(br#"{"topicConfigTable":{"T":{"attributes":null,"perm":4}}}"#, "t")
                .unwrap();
        let c = &w.topic_config_table["T"];
        assert_eq!(c.topic_name, "T");
        assert!(c.attributes.is_empty());
        assert!(!c.is_writeable());
    }

    #[test]
    fn unknown_filter_type_is_an_error() {
        let err =
            TopicConfigWrapper::decode(br#"{"topicConfigTable":{"T":{"topicFilterType":"REGEX"}}}"#, "body")
                .unwrap_err();
        assert!(matches!(err, MetadataError::Json { line: 1, .. }), "{err}");
    }

    #[test]
    fn deleted_topics_ride_along_in_the_topic_answer() {
        let deleted = BTreeMap::from([("Gone".to_string(), 4096u64)]);
        let mut wrapper = TopicConfigWrapper::default();
        wrapper.topic_config_table.insert("T".into(), TopicConfig::new("T"));
        let table = wrapper.encode(JsonStyle::Compact).unwrap();
        let body = with_deleted_topics(table.clone(), &deleted);
        assert_eq!(deleted_topics_in(body.as_bytes()).unwrap(), deleted);
        // The table itself reads as before.
        assert_eq!(TopicConfigWrapper::decode(body.as_bytes(), "body").unwrap(), wrapper);
        assert_eq!(with_deleted_topics(table.clone(), &BTreeMap::new()), table);
        assert_eq!(deleted_topics_in(b"{}").unwrap(), BTreeMap::new());
        assert_eq!(deleted_topics_in(br#"{"rmqhaDeletedTopics":{"A":1}}"#).unwrap()["A"], 1);
        // A RocketMQ master's fastjson body (unquoted keys) carries none.
        assert_eq!(deleted_topics_in(br#"{topicConfigTable:{}}"#).unwrap(), BTreeMap::new());
        // Ours, damaged, is an error naming the field.
        let err = deleted_topics_in(br#"{"rmqhaDeletedTopics":{"A":-1}}"#).unwrap_err();
        assert!(err.contains(DELETED_TOPICS_FIELD), "{err}");
    }
}
