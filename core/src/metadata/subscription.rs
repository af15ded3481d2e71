//! Subscription groups: `SubscriptionGroupConfig`, the SubscriptionGroupWrapper JSON, and
//! `subscriptionGroup.json`.

use super::json::{JsonStyle, null_as_default, object_from_slice_lenient, object_from_str_lenient};
use super::named_table::{NamedTable, Wrapper};
use super::{DataVersion, MetadataError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One consumer group's configuration (Java `SubscriptionGroupConfig`). Missing JSON fields
/// take Java's defaults; unknown fields are kept in `extra` and written back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    /// 5.x group attributes.
    #[serde(deserialize_with = "null_as_default")]
    pub attributes: BTreeMap<String, String>,
    /// The broker id consumers of this group read from (0 = master).
    pub broker_id: i64,
    pub consume_broadcast_enable: bool,
    pub consume_enable: bool,
    pub consume_from_min_enable: bool,
    pub consume_message_orderly: bool,
    /// 5.x: push consumers' consume timeout.
    pub consume_timeout_minute: i32,
    #[serde(deserialize_with = "null_as_default")]
    pub group_name: String,
    /// 5.x GroupRetryPolicy (`{"type":"CUSTOMIZED"}` by default), kept as JSON: the store
    /// does not interpret it.
    pub group_retry_policy: serde_json::Value,
    pub group_sys_flag: i32,
    pub notify_consumer_ids_changed_enable: bool,
    pub retry_max_times: i32,
    pub retry_queue_nums: i32,
    /// 5.x set of SimpleSubscriptionData, kept as JSON; absent unless set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<serde_json::Value>,
    /// The broker id to read from when consumption is slow (1 = first slave).
    pub which_broker_when_consume_slowly: i64,
    /// Fields a newer RocketMQ wrote that this version does not model.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: impl Into<String>) -> Self {
        SubscriptionGroupConfig {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: group_name.into(),
            group_retry_policy: serde_json::json!({"type": "CUSTOMIZED"}),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            subscription_data_set: None,
            which_broker_when_consume_slowly: 1,
            extra: BTreeMap::new(),
        }
    }
}

impl SubscriptionGroupConfig {
    /// Decodes one group's config as fastjson writes it (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's
    /// body); missing fields take Java's defaults. `origin` names the source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, origin)
    }
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        SubscriptionGroupConfig::new("")
    }
}

/// SubscriptionGroupWrapper: the content of `subscriptionGroup.json` and the body of a
/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG response.
///
/// `forbiddenTable` (5.x: group → topic → forbidden bits) is not in Java's remoting wrapper
/// but is in the file; `None` means "not sent", which a slave must not read as "empty".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden_table: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

impl SubscriptionGroupWrapper {
    /// Decodes a remoting body or file content as fastjson writes it. `origin` names the
    /// source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, origin).map(Self::fill_names)
    }

    /// Encodes as strict JSON (pretty for files, compact for remoting bodies).
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        super::json::to_json(self, style, Self::WHAT)
    }

    fn fill_names(mut self) -> Self {
        for (name, config) in &mut self.subscription_group_table {
            if config.group_name.is_empty() {
                config.group_name.clone_from(name);
            }
        }
        self
    }
}

impl Wrapper for SubscriptionGroupWrapper {
    type Config = SubscriptionGroupConfig;
    const WHAT: &'static str = "subscription group";

    fn decode_text(text: &str, origin: &str) -> Result<Self, MetadataError> {
        let mut w: Self = object_from_str_lenient(text, &format!("{origin} ({})", Self::WHAT))?;
        // The file always carries the table, so "absent" here means "empty".
        w.forbidden_table.get_or_insert_with(BTreeMap::new);
        Ok(w.fill_names())
    }
    fn version(&self) -> &DataVersion {
        &self.data_version
    }
    fn version_mut(&mut self) -> &mut DataVersion {
        &mut self.data_version
    }
    fn table(&self) -> &BTreeMap<String, SubscriptionGroupConfig> {
        &self.subscription_group_table
    }
    fn table_mut(&mut self) -> &mut BTreeMap<String, SubscriptionGroupConfig> {
        &mut self.subscription_group_table
    }
    fn name_of(config: &SubscriptionGroupConfig) -> &str {
        &config.group_name
    }
    const TABLE_FIELD: &'static str = "subscriptionGroupTable";
    fn without_table(&self) -> Self {
        SubscriptionGroupWrapper {
            data_version: self.data_version,
            forbidden_table: self.forbidden_table.clone(),
            subscription_group_table: BTreeMap::new(),
        }
    }

    /// Keeps the local forbidden table when the master did not send one (Java's remoting
    /// wrapper never does).
    fn adopt(&mut self, mut master: Self) {
        if master.forbidden_table.is_none() {
            master.forbidden_table = self.forbidden_table.take();
        }
        *self = master;
    }
}

/// The broker's subscription groups, persisted in `config/subscriptionGroup.json` (Java
/// `SubscriptionGroupManager`). Same rules as [`TopicConfigTable`](super::TopicConfigTable):
/// every change bumps the DataVersion and is persisted before the call returns.
#[derive(Debug)]
pub struct SubscriptionGroupTable {
    inner: NamedTable<SubscriptionGroupWrapper>,
}

impl SubscriptionGroupTable {
    /// Loads `path` (falling back to its `.bak`); a missing file is an empty table.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        Ok(SubscriptionGroupTable { inner: NamedTable::open(path.into())? })
    }

    /// The file this table persists to.
    pub fn path(&self) -> PathBuf {
        self.inner.path()
    }

    /// The config of `group`, if it exists.
    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.inner.get(group)
    }

    /// Whether `group` exists.
    pub fn contains(&self, group: &str) -> bool {
        self.inner.contains(group)
    }

    /// A copy of every group config, by name.
    pub fn all(&self) -> BTreeMap<String, SubscriptionGroupConfig> {
        self.inner.all()
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current DataVersion.
    pub fn data_version(&self) -> DataVersion {
        self.inner.data_version()
    }

    /// A consistent copy of the version, the groups and the forbidden table together.
    pub fn wrapper(&self) -> SubscriptionGroupWrapper {
        self.inner.wrapper()
    }

    /// The table as JSON: `Compact` is the GET_ALL_SUBSCRIPTIONGROUP_CONFIG response body.
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        self.inner.encode(style)
    }

    /// Creates or updates a group (keyed by `config.group_name`) and persists; returns the
    /// previous config. An empty name is refused.
    pub fn put_group(
        &self,
        config: SubscriptionGroupConfig,
    ) -> Result<Option<SubscriptionGroupConfig>, MetadataError> {
        self.inner.put(config)
    }

    /// Creates the group unless it exists; returns the config in the table and whether it was
    /// created (what Java does when `autoCreateSubscriptionGroup` is on).
    pub fn create_if_absent(
        &self,
        config: SubscriptionGroupConfig,
    ) -> Result<(SubscriptionGroupConfig, bool), MetadataError> {
        self.inner.create_if_absent(config)
    }

    /// `create_if_absent` for many groups, with one version step and one write for all it
    /// creates; in order, each group's config in the table and whether it was created.
    pub fn create_all_if_absent(
        &self,
        configs: impl IntoIterator<Item = SubscriptionGroupConfig>,
    ) -> Result<Vec<(SubscriptionGroupConfig, bool)>, MetadataError> {
        self.inner.create_all_if_absent(configs)
    }

    /// Deletes a group and persists; returns its config, or `None` (and changes nothing) if
    /// it did not exist.
    pub fn delete_group(&self, group: &str) -> Result<Option<SubscriptionGroupConfig>, MetadataError> {
        self.inner.delete(group)
    }

    /// Adds the built-in groups a broker starts with that the table lacks, without bumping the
    /// version or persisting. Returns how many were added.
    pub fn seed_if_absent(&self, configs: impl IntoIterator<Item = SubscriptionGroupConfig>) -> usize {
        self.inner.seed_if_absent(configs)
    }

    /// Slave side: skip (`false`) when the local DataVersion equals the master's; otherwise
    /// take the master's groups and version (and its forbidden table if it sent one),
    /// persist, return `true`. No version bump afterwards.
    pub fn apply_from_master(&self, master: SubscriptionGroupWrapper) -> Result<bool, MetadataError> {
        self.inner.apply_from_master(master)
    }

    /// Writes the table to its file now.
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.inner.persist()
    }

    /// Writes the table if memory holds changes the file lacks; returns whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.inner.persist_if_dirty()
    }

    /// Whether memory holds changes the file lacks.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_java_defaults() {
        let c: SubscriptionGroupConfig = serde_json::from_str(r#"{"groupName":"G"}"#).unwrap();
        assert_eq!(c, SubscriptionGroupConfig::new("G"));
        assert!(c.consume_enable && c.consume_from_min_enable && c.consume_broadcast_enable);
        assert_eq!((c.retry_queue_nums, c.retry_max_times), (1, 16));
        assert_eq!((c.broker_id, c.which_broker_when_consume_slowly), (0, 1));
        assert_eq!(c.consume_timeout_minute, 15);
    }

    #[test]
    fn json_fields_are_alphabetical() {
        let json = serde_json::to_string(&SubscriptionGroupConfig::new("G")).unwrap();
        let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let positions: Vec<usize> = keys.iter().map(|k| json.find(&format!("\"{k}\"")).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{json}");
    }

    #[test]
    fn adopt_keeps_local_forbidden_table_when_master_sends_none() {
        let mut local = SubscriptionGroupWrapper {
            forbidden_table: Some([("G".to_string(), serde_json::json!({"T": 1}))].into()),
            ..Default::default()
        };
        let master = SubscriptionGroupWrapper::decode(br#"{"subscriptionGroupTable":{}}"#, "m").unwrap();
        local.adopt(master);
        assert_eq!(local.forbidden_table.unwrap().len(), 1);
    }
}
