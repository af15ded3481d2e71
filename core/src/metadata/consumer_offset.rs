//! Consumer offsets: `topic@group` → queue id → next offset to consume, in
//! `consumerOffset.json` (Java `ConsumerOffsetManager`).

use super::json::{JsonStyle, null_as_default, object_from_slice_lenient, object_from_str_lenient, to_json};
use super::persist::Store;
use super::{DataVersion, MetadataError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Java's `ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR`.
pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// Offsets of one `topic@group` key, by queue id.
pub type QueueOffsets = BTreeMap<i32, i64>;

/// The table key of a (topic, group) pair: `topic@group`.
pub fn offset_key(topic: &str, group: &str) -> String {
    let mut key = String::with_capacity(topic.len() + 1 + group.len());
    key.push_str(topic);
    key.push(TOPIC_GROUP_SEPARATOR);
    key.push_str(group);
    key
}

/// The JSON of `consumerOffset.json` and of a GET_ALL_CONSUMER_OFFSET response:
/// `{"dataVersion":{…},"offsetTable":{"topic@group":{0:123,…}}}`. 4.x sends no `dataVersion`;
/// 5.x's other fields (`pullOffsetTable`, …) are ignored. rmqha adds `rmqhaRewindTable`
/// (`{"topic@group": stamp}`, left out while empty): when a master last moved a key's offsets
/// backwards, or deleted the key, so that its slaves take that rewind or deletion (see
/// [`ConsumerOffsetTable::apply_from_master`]). RocketMQ ignores the field.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerOffsetWrapper {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub offset_table: BTreeMap<String, QueueOffsets>,
    /// By `topic@group`: when (ms since the epoch, kept increasing per key) a master last
    /// moved one of the key's offsets backwards (an offset reset, a consumer's rewind), or
    /// deleted the key (a stamp of a key not in `offset_table`: a tombstone, kept
    /// [`TOMBSTONE_KEEP_MS`]).
    #[serde(
        default,
        rename = "rmqhaRewindTable",
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub rewind_table: BTreeMap<String, i64>,
}

impl ConsumerOffsetWrapper {
    const WHAT: &'static str = "consumer offsets";

    /// Decodes a remoting body or file content as fastjson writes it (bare integer keys
    /// included). `origin` names the source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, origin)
    }

    /// Encodes as strict JSON (quoted queue ids).
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        to_json(self, style, Self::WHAT)
    }
}

#[derive(Debug)]
struct State {
    version: DataVersion,
    table: BTreeMap<String, QueueOffsets>,
    /// See [`ConsumerOffsetWrapper::rewind_table`]: keys of `table`, and tombstones.
    rewinds: BTreeMap<String, i64>,
}

impl State {
    fn wrapper(&self) -> ConsumerOffsetWrapper {
        ConsumerOffsetWrapper {
            data_version: Some(self.version),
            offset_table: self.table.clone(),
            rewind_table: self.rewinds.clone(),
        }
    }

    /// Stamps `key` as rewound now: the wall clock in ms, or one past its previous stamp
    /// when the clock is behind it (set back, or another host's stamp taken over).
    fn stamp_rewind(&mut self, key: &str) {
        let now = crate::store::clock::now_ms();
        match self.rewinds.get_mut(key) {
            Some(stamp) => *stamp = now.max(stamp.saturating_add(1)),
            None => {
                self.rewinds.insert(key.to_owned(), now);
            }
        }
    }
}

/// How long a master keeps the stamp of a deleted `topic@group` key for its slaves: a slave
/// away longer keeps the key's old offsets (as a RocketMQ slave keeps keys its master no
/// longer has) until the master's offsets on it pass them.
pub const TOMBSTONE_KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

/// Consumer progress, persisted on demand: the broker calls
/// [`persist_if_dirty`](Self::persist_if_dirty) every `flushConsumerOffsetInterval` (5000 ms)
/// and [`persist`](Self::persist) on shutdown. Commits only touch memory.
#[derive(Debug)]
pub struct ConsumerOffsetTable {
    state: RwLock<State>,
    store: Store,
}

impl ConsumerOffsetTable {
    /// Loads `path` (falling back to its `.bak`); a missing file is an empty table.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let (store, loaded) = Store::open(path.into(), |text, origin| {
            object_from_str_lenient::<ConsumerOffsetWrapper>(
                text,
                &format!("{origin} ({})", ConsumerOffsetWrapper::WHAT),
            )
        })?;
        let wrapper = loaded.map(|(w, _)| w).unwrap_or_default();
        Ok(ConsumerOffsetTable {
            state: RwLock::new(State {
                version: wrapper.data_version.unwrap_or_default(),
                rewinds: wrapper.rewind_table,
                table: wrapper.offset_table,
            }),
            store,
        })
    }

    /// The file this table persists to.
    pub fn path(&self) -> PathBuf {
        self.store.path()
    }

    /// Records that `group` will next consume `offset` in queue `queue_id` of `topic`. Like
    /// Java, a smaller offset than the stored one is accepted (a consumer may rewind). Returns
    /// whether the offset moved backwards.
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> bool {
        self.commit_stamping(group, topic, queue_id, offset, false)
    }

    /// [`commit`](Self::commit) on a master: an offset moved backwards also stamps its key
    /// as rewound (`rmqhaRewindTable`), which its slaves' config sync takes as a rewind
    /// rather than the stale offset of a restarted master. Returns whether it moved backwards.
    pub fn commit_as_master(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> bool {
        self.commit_stamping(group, topic, queue_id, offset, true)
    }

    fn commit_stamping(&self, group: &str, topic: &str, queue_id: i32, offset: i64, stamp: bool) -> bool {
        let key = offset_key(topic, group);
        let mut state = self.write();
        let queues = state.table.entry(key.clone()).or_default();
        let old = queues.insert(queue_id, offset);
        if old == Some(offset) {
            return false;
        }
        let back = old.is_some_and(|old| old > offset);
        if back && stamp {
            state.stamp_rewind(&key);
        }
        state.version.next_version();
        self.store.mark_dirty();
        back
    }

    /// When a master last moved `group`'s offsets on `topic` backwards (ms since the epoch),
    /// if it ever did (see [`commit_as_master`](Self::commit_as_master)).
    pub fn rewound_at(&self, group: &str, topic: &str) -> Option<i64> {
        self.read().rewinds.get(&offset_key(topic, group)).copied()
    }

    /// The committed offset of `group` in queue `queue_id` of `topic`, if any. (Java returns
    /// -1 for none.)
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.read().table.get(&offset_key(topic, group)).and_then(|queues| queues.get(&queue_id).copied())
    }

    /// All committed offsets of `group` on `topic`, by queue id.
    pub fn query_queues(&self, group: &str, topic: &str) -> Option<QueueOffsets> {
        self.read().table.get(&offset_key(topic, group)).cloned()
    }

    /// Forgets every offset of `group` (as when the group is deleted); returns how many
    /// `topic@group` keys went.
    pub fn remove_group(&self, group: &str) -> usize {
        self.remove_keys(|_, g| g == group, false)
    }

    /// Forgets every group's offsets in `topic` (as when the topic is deleted, RocketMQ 5's
    /// `cleanOffsetByTopic`); returns how many `topic@group` keys went.
    pub fn remove_topic(&self, topic: &str) -> usize {
        self.remove_keys(|t, _| t == topic, false)
    }

    /// [`remove_group`](Self::remove_group) on a master: each key removed is stamped (a
    /// tombstone in `rmqhaRewindTable`), so that its slaves remove it too. Without it a slave
    /// kept the old offsets, and its larger-offset merge kept them over the master's new,
    /// lower ones once the group consumed again (a group re-consuming from the start): a
    /// consumer of the slave promoted would skip what lay between.
    pub fn remove_group_as_master(&self, group: &str) -> usize {
        self.remove_keys(|_, g| g == group, true)
    }

    /// [`remove_topic`](Self::remove_topic) on a master, stamping each key removed (see
    /// [`remove_group_as_master`](Self::remove_group_as_master)).
    pub fn remove_topic_as_master(&self, topic: &str) -> usize {
        self.remove_keys(|t, _| t == topic, true)
    }

    /// Lowers every offset above its queue's end, `end(topic, queue_id)`, to that end; returns
    /// how many moved. After a store is cut back (`rmqha truncate`, an old master rejoining as
    /// a slave), offsets past the cut named positions its new master fills with other
    /// messages, and the slave's sync keeps the larger of its own and the master's offsets:
    /// were it promoted again, its consumers would skip those messages.
    pub fn cap_at(&self, end: impl Fn(&str, i32) -> i64) -> usize {
        let mut state = self.write();
        let mut moved = 0;
        for (key, queues) in state.table.iter_mut() {
            let Some((topic, _)) = key.rsplit_once(TOPIC_GROUP_SEPARATOR) else { continue };
            for (&queue_id, offset) in queues.iter_mut() {
                let end = end(topic, queue_id);
                if *offset > end {
                    *offset = end;
                    moved += 1;
                }
            }
        }
        if moved > 0 {
            state.version.next_version();
            self.store.mark_dirty();
        }
        moved
    }

    /// Forgets the `topic@group` keys `hit(topic, group)` picks, stamping each (a tombstone)
    /// when `stamp`, else dropping its stamp; returns how many went.
    fn remove_keys(&self, hit: impl Fn(&str, &str) -> bool, stamp: bool) -> usize {
        let mut state = self.write();
        let before = state.table.len();
        let keep = |key: &String| key.rsplit_once(TOPIC_GROUP_SEPARATOR).is_none_or(|(t, g)| !hit(t, g));
        let gone: Vec<String> = state.table.keys().filter(|k| !keep(k)).cloned().collect();
        state.table.retain(|key, _| keep(key));
        if stamp {
            for key in &gone {
                state.stamp_rewind(key);
            }
            // Old tombstones go (see TOMBSTONE_KEEP_MS).
            let since = crate::store::clock::now_ms().saturating_sub(TOMBSTONE_KEEP_MS);
            let State { table, rewinds, .. } = &mut *state;
            rewinds.retain(|key, at| table.contains_key(key) || *at >= since);
        } else {
            state.rewinds.retain(|key, _| keep(key));
        }
        let removed = before - state.table.len();
        if removed > 0 {
            state.version.next_version();
            self.store.mark_dirty();
        }
        removed
    }

    /// The groups with offsets on `topic`, sorted (no copy of the table).
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        self.pairs(|t, _| t == topic).into_iter().map(|(_, g)| g).collect()
    }

    /// The topics `group` has offsets on, sorted (no copy of the table).
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        self.pairs(|_, g| g == group).into_iter().map(|(t, _)| t).collect()
    }

    /// The (topic, group) of each key `hit` picks, in key order.
    fn pairs(&self, hit: impl Fn(&str, &str) -> bool) -> Vec<(String, String)> {
        self.read()
            .table
            .keys()
            .filter_map(|key| key.rsplit_once(TOPIC_GROUP_SEPARATOR))
            .filter(|(t, g)| hit(t, g))
            .map(|(t, g)| (t.to_string(), g.to_string()))
            .collect()
    }

    /// A copy of every `topic@group` key's offsets.
    pub fn all(&self) -> BTreeMap<String, QueueOffsets> {
        self.read().table.clone()
    }

    /// The current DataVersion (bumped by every commit that changes an offset).
    pub fn data_version(&self) -> DataVersion {
        self.read().version
    }

    /// A consistent copy of the version and the table together.
    pub fn wrapper(&self) -> ConsumerOffsetWrapper {
        self.read().wrapper()
    }

    /// The table as JSON: `Compact` is the GET_ALL_CONSUMER_OFFSET response body. Encodes a
    /// copy after releasing the lock, so commits never wait for the encoding.
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        self.wrapper().encode(style)
    }

    /// Slave side: merges the master's offsets so that progress never moves backwards, save
    /// for the rewinds the master made.
    ///
    /// RocketMQ copies the master's table over the slave's (putAll), so a master that
    /// restarts with stale offsets rolls back the progress consumers made on the slave while
    /// it was away (issue #1094). Here each (key, queue) keeps the larger of the two offsets,
    /// and keys only the slave has are kept. A key the master stamped as rewound
    /// (`rmqhaRewindTable`: an offset reset, a consumer's own rewind) later than the stamp
    /// this table last took for it is taken as the master has it instead, every queue, and
    /// its stamp kept: a deliberate rewind reaches the slave once, and a stale master, which
    /// stamps nothing, still cannot roll the slave back. (A RocketMQ master sends no stamps:
    /// its rewinds do not reach the slave.)
    ///
    /// When something changed, the master's DataVersion is adopted (as 5.x does; a 4.x
    /// master sends none, and the local version is bumped instead) and the table is
    /// persisted. Returns whether something changed; when nothing did, it still returns only
    /// once the table is on disk (an earlier apply's write may have failed).
    pub fn apply_from_master(&self, master: &ConsumerOffsetWrapper) -> Result<bool, MetadataError> {
        let changed = {
            let mut state = self.write();
            let mut changed = false;
            // Keys the master deleted since this table last heard of them (tombstones).
            for (key, &stamp) in &master.rewind_table {
                if master.offset_table.contains_key(key)
                    || state.rewinds.get(key).is_some_and(|l| *l >= stamp)
                {
                    continue;
                }
                state.rewinds.insert(key.clone(), stamp);
                if state.table.remove(key).is_some() {
                    tracing::info!(key = %key, stamp, "consumer offsets deleted on the master: deleted here too");
                }
                changed = true;
            }
            for (key, master_queues) in &master.offset_table {
                let newer = |s: &i64| state.rewinds.get(key).is_none_or(|local| s > local);
                if let Some(stamp) = master.rewind_table.get(key).copied().filter(newer) {
                    tracing::info!(key = %key, stamp, "consumer offsets rewound on the master: taken as the master has them");
                    state.rewinds.insert(key.clone(), stamp);
                    state.table.insert(key.clone(), master_queues.clone());
                    changed = true;
                    continue;
                }
                let local = state.table.entry(key.clone()).or_default();
                for (&queue_id, &offset) in master_queues {
                    match local.entry(queue_id) {
                        Entry::Vacant(e) => {
                            e.insert(offset);
                            changed = true;
                        }
                        Entry::Occupied(mut e) if *e.get() < offset => {
                            e.insert(offset);
                            changed = true;
                        }
                        Entry::Occupied(_) => {}
                    }
                }
            }
            if changed {
                match master.data_version {
                    Some(v) => state.version = v,
                    None => state.version.next_version(),
                }
                self.store.mark_dirty();
            }
            changed
        };
        if changed {
            self.persist()?;
        } else {
            self.store.persist_if_dirty(|| self.snapshot())?;
        }
        Ok(changed)
    }

    /// Writes the table to its file now.
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.store.persist(|| self.snapshot())
    }

    /// Writes the table if a commit changed it since the last write; returns whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        if !self.store.is_dirty() {
            return Ok(false);
        }
        self.store.persist_if_dirty(|| self.snapshot())
    }

    /// The pretty file text of a copy taken under the read lock and encoded after releasing
    /// it: encoding a 9.5 MB table takes ~50 ms, which commits (and the readers queued behind
    /// them) would otherwise wait. Called by the store under the file lock, so of two racing
    /// persists the later still writes the later state.
    fn snapshot(&self) -> Result<String, MetadataError> {
        let wrapper = self.wrapper();
        wrapper.encode(JsonStyle::Pretty)
    }

    /// Whether memory holds offsets the file lacks.
    pub fn is_dirty(&self) -> bool {
        self.store.is_dirty()
    }

    // See NamedTable: every mutation is a whole step, so a poisoned lock is still usable.
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_topic_at_group() {
        assert_eq!(offset_key("T", "G"), "T@G");
    }

    #[test]
    fn decodes_fastjson_4x_without_data_version() {
        let w = ConsumerOffsetWrapper::decode(
            br#"{"offsetTable":{"T@G":{0:123,1:456},"%RETRY%G@G":{0:0}}}"#,
            "body",
        )
        .unwrap();
        assert!(w.data_version.is_none());
        assert_eq!(w.offset_table["T@G"][&1], 456);
        assert_eq!(w.offset_table.len(), 2);
    }

    #[test]
    fn commit_query_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let t = ConsumerOffsetTable::open(dir.path().join("consumerOffset.json")).unwrap();
        assert_eq!(t.query("G", "T", 0), None);
        assert!(!t.is_dirty());
        t.commit("G", "T", 0, 10);
        t.commit("G", "T", 0, 5);
        t.commit("H", "T", 1, 7);
        assert_eq!(t.query("G", "T", 0), Some(5), "a consumer may rewind");
        assert!(t.is_dirty());
        assert!(t.persist_if_dirty().unwrap());
        assert!(!t.persist_if_dirty().unwrap());
        assert_eq!(t.remove_group("G"), 1);
        assert_eq!(t.query("G", "T", 0), None);
        assert_eq!(t.query("H", "T", 1), Some(7));
    }
}
