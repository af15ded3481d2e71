//! The machinery shared by the topic config and subscription group tables: a map from name to
//! config plus a DataVersion, where every change bumps the version and is persisted at once,
//! and where a slave replaces the whole table when the master's version differs.
//!
//! The in-memory state *is* the serialize wrapper (e.g. `TopicConfigWrapper`), so the file,
//! the remoting body and the state cannot drift apart.

use super::json::{JsonStyle, to_json};
use super::persist::Store;
use super::{DataVersion, MetadataError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A serialize wrapper that holds one named table.
pub(crate) trait Wrapper: Serialize + Clone + Default {
    type Config: Clone + PartialEq + Serialize;
    /// Names the table in errors and logs, e.g. "topic config".
    const WHAT: &'static str;

    fn decode_text(text: &str, origin: &str) -> Result<Self, MetadataError>;
    fn version(&self) -> &DataVersion;
    fn version_mut(&mut self) -> &mut DataVersion;
    fn table(&self) -> &BTreeMap<String, Self::Config>;
    fn table_mut(&mut self) -> &mut BTreeMap<String, Self::Config>;
    fn name_of(config: &Self::Config) -> &str;

    /// The JSON key the table is written under (`topicConfigTable`).
    const TABLE_FIELD: &'static str;
    /// A copy of everything but the table (which is left empty): the frame the table's
    /// entries are spliced into when the file is written (see [`FileText`]).
    fn without_table(&self) -> Self;

    /// Takes the master's state. Wrappers with side tables override this to keep what the
    /// master did not send.
    fn adopt(&mut self, master: Self) {
        *self = master;
    }
}

/// A persisted, versioned, thread-safe named table.
#[derive(Debug)]
pub(crate) struct NamedTable<W: Wrapper> {
    state: RwLock<W>,
    store: Store,
    /// The file text of each entry as of the last snapshot: a write re-encodes only the
    /// entries that changed since, instead of the whole table.
    file_text: Mutex<FileText>,
    /// The names changed since the kept texts were brought up to date. Every change records
    /// its names here while it holds the state's write lock; a snapshot takes them under the
    /// read lock. (Comparing kept configs with the table's instead is not exact: JSON's `0.0`
    /// and `-0.0` are equal and written differently.)
    edits: Mutex<Edits>,
}

/// See [`NamedTable::edits`].
#[derive(Debug)]
struct Edits {
    names: BTreeSet<String>,
    /// Every entry may have changed: nothing is kept yet, a master's table was adopted, or a
    /// snapshot failed part way.
    all: bool,
}

impl<W: Wrapper> NamedTable<W> {
    pub(crate) fn open(path: PathBuf) -> Result<Self, MetadataError> {
        let (store, loaded) = Store::open(path, W::decode_text)?;
        let state = loaded.map(|(w, _)| w).unwrap_or_default();
        Ok(NamedTable {
            state: RwLock::new(state),
            store,
            file_text: Mutex::new(FileText::default()),
            edits: Mutex::new(Edits { names: BTreeSet::new(), all: true }),
        })
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.store.path()
    }

    pub(crate) fn get(&self, name: &str) -> Option<W::Config> {
        self.read().table().get(name).cloned()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.read().table().contains_key(name)
    }

    pub(crate) fn all(&self) -> BTreeMap<String, W::Config> {
        self.read().table().clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.read().table().len()
    }

    pub(crate) fn data_version(&self) -> DataVersion {
        *self.read().version()
    }

    pub(crate) fn wrapper(&self) -> W {
        self.read().clone()
    }

    /// Encodes a copy taken under the read lock: a commit (write lock), and every reader
    /// queued behind it, never waits for the encoding of a large table.
    pub(crate) fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        to_json(&self.wrapper(), style, W::WHAT)
    }

    /// Inserts or replaces; returns the previous config. Re-putting an identical config is
    /// not a change: the version stays, so slaves are not made to re-sync for nothing. It is
    /// still answered only once the table is on disk (see [`Self::ensure_durable`]).
    pub(crate) fn put(&self, config: W::Config) -> Result<Option<W::Config>, MetadataError> {
        let name = checked_name::<W>(&config)?;
        let previous = {
            let mut state = self.write();
            if state.table().get(&name) == Some(&config) {
                drop(state);
                self.ensure_durable()?;
                return Ok(Some(config));
            }
            self.edited(&name);
            let previous = state.table_mut().insert(name, config);
            state.version_mut().next_version();
            self.store.mark_dirty();
            previous
        };
        self.ensure_durable()?;
        Ok(previous)
    }

    /// Inserts `config` unless its name is taken; returns the config now in the table and
    /// whether it was created. Either way it returns once the table is on disk.
    pub(crate) fn create_if_absent(&self, config: W::Config) -> Result<(W::Config, bool), MetadataError> {
        let mut out = self.create_all_if_absent([config])?;
        Ok(out.pop().expect("one config in, one out"))
    }

    /// `create_if_absent` for many configs at once, with one version step and one write for
    /// all it creates (a heartbeat naming hundreds of new groups wrote the whole table once
    /// per group: 12 s at 3,500 groups). Returns, in order, each config now in the table and
    /// whether it was created; nothing is inserted if any name is empty.
    pub(crate) fn create_all_if_absent(
        &self,
        configs: impl IntoIterator<Item = W::Config>,
    ) -> Result<Vec<(W::Config, bool)>, MetadataError> {
        let named = configs
            .into_iter()
            .map(|c| checked_name::<W>(&c).map(|n| (n, c)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::with_capacity(named.len());
        {
            let mut state = self.write();
            for (name, config) in named {
                match state.table().get(&name) {
                    Some(existing) => out.push((existing.clone(), false)),
                    None => {
                        self.edited(&name);
                        state.table_mut().insert(name, config.clone());
                        out.push((config, true));
                    }
                }
            }
            if out.iter().any(|(_, created)| *created) {
                state.version_mut().next_version();
                self.store.mark_dirty();
            }
        }
        self.ensure_durable()?;
        Ok(out)
    }

    /// Deletes `name`; returns its config, or `None` if it was absent. Either way it returns
    /// once the table is on disk.
    pub(crate) fn delete(&self, name: &str) -> Result<Option<W::Config>, MetadataError> {
        let removed = {
            let mut state = self.write();
            let removed = state.table_mut().remove(name);
            if removed.is_none() {
                drop(state);
                self.ensure_durable()?;
                return Ok(None);
            }
            self.edited(name);
            state.version_mut().next_version();
            self.store.mark_dirty();
            removed
        };
        self.ensure_durable()?;
        Ok(removed)
    }

    /// Adds the configs whose names are absent, without bumping the version or persisting:
    /// the built-in entries a broker starts with, which the loaded file may override.
    pub(crate) fn seed_if_absent(&self, configs: impl IntoIterator<Item = W::Config>) -> usize {
        let mut state = self.write();
        let mut added = 0;
        for config in configs {
            let name = W::name_of(&config);
            if !name.is_empty() && !state.table().contains_key(name) {
                self.edited(name);
                state.table_mut().insert(name.to_string(), config);
                added += 1;
            }
        }
        added
    }

    /// Slave side: skip when the versions are equal, else take the master's table and version
    /// as they are (no bump afterwards, unlike RocketMQ 5.x, so the next sync can skip).
    pub(crate) fn apply_from_master(&self, master: W) -> Result<bool, MetadataError> {
        {
            let mut state = self.write();
            if state.version() == master.version() {
                drop(state);
                self.ensure_durable()?;
                return Ok(false);
            }
            state.adopt(master);
            self.edits().all = true;
            self.store.mark_dirty();
        }
        self.ensure_durable()?;
        Ok(true)
    }

    pub(crate) fn persist(&self) -> Result<(), MetadataError> {
        self.store.persist(|| self.snapshot())
    }

    pub(crate) fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        if !self.store.is_dirty() {
            return Ok(false);
        }
        self.store.persist_if_dirty(|| self.snapshot())
    }

    /// Before a call answers. After a change (made, then the table marked dirty): a write
    /// that finds the table clean is another thread's whose snapshot was taken after the
    /// flag was cleared, so after this change, and that succeeded; so concurrent changes
    /// share writes. For a call that changed nothing: the state it found (the config
    /// being put, the name being deleted) may be in memory only, because the write of an
    /// earlier call failed, or may be on its way to disk in another thread's write that can
    /// still fail. Waits for that write and persists if the table is dirty; an error is the
    /// caller's, so a retried request is never acknowledged while its change is not on disk.
    /// Must be called without the state lock (the file lock comes first).
    fn ensure_durable(&self) -> Result<(), MetadataError> {
        self.store.persist_if_dirty(|| self.snapshot()).map(drop)
    }

    /// The pretty file text of the current state. Called by the store under the file lock, so
    /// of two racing persists the later still writes the later state.
    ///
    /// Encoding the whole table for every change made creating N topics one at a time cost
    /// O(N²) (8.5 ms a topic at 3,000 topics, most of it encoding and copying the table), so
    /// each entry's text is kept and only the entries named in [`Self::edits`] are encoded.
    /// They are encoded from copies, after releasing the read lock (a 9.5 MB table takes
    /// ~50 ms to encode; writers and the readers queued behind them would wait that long).
    /// The entries changed meanwhile are encoded under the read lock, where the frame
    /// (version, side fields) is copied, so version and entries always agree.
    fn snapshot(&self) -> Result<String, MetadataError> {
        let mut texts = self.file_text.lock().unwrap_or_else(|p| p.into_inner());
        let document = (|| {
            let changes = {
                let state = self.read();
                self.take_edits().changes(state.table())
            };
            texts.apply::<W>(changes)?;
            let state = self.read();
            texts.apply::<W>(self.take_edits().changes(state.table()))?;
            let frame = state.without_table();
            #[cfg(debug_assertions)]
            let whole = state.clone();
            drop(state);
            let document = texts.document(&frame)?;
            #[cfg(debug_assertions)]
            assert_eq!(
                document,
                to_json(&whole, JsonStyle::Pretty, W::WHAT)?,
                "the spliced {} file",
                W::WHAT
            );
            Ok(document)
        })();
        if document.is_err() {
            // The edits taken are not all applied: start over at the next snapshot.
            self.edits().all = true;
        }
        document
    }

    /// Records a change of `name`; called with the state's write lock held.
    fn edited(&self, name: &str) {
        let mut edits = self.edits();
        if !edits.all {
            edits.names.insert(name.to_string());
        }
    }

    fn take_edits(&self) -> Edits {
        std::mem::replace(&mut *self.edits(), Edits { names: BTreeSet::new(), all: false })
    }

    fn edits(&self) -> std::sync::MutexGuard<'_, Edits> {
        self.edits.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.store.is_dirty()
    }

    // The state is replaced or mutated only in whole steps, so a panic elsewhere while a
    // guard was held cannot leave it half-changed: a poisoned lock is still usable.
    fn read(&self) -> RwLockReadGuard<'_, W> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, W> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pretty file text of a table, kept entry by entry.
///
/// `serde_json`'s pretty printer writes an entry of the table (depth 2 of the document) as
/// its escaped key, `": "`, and the entry's own pretty text with every line after the first
/// indented by four more spaces (a JSON string never holds a raw newline, so every newline is
/// a line break); a non-empty table as `{`, the entries each after `\n    ` and joined by
/// `,`, then `\n  }`; an empty one as `{}`. [`Self::document`] writes exactly that into the
/// frame, where the frame has `"<TABLE_FIELD>": {}`. The tests check the result against
/// encoding the whole wrapper, byte for byte, and debug builds check every write.
#[derive(Debug, Default)]
pub(crate) struct FileText {
    /// Name → `"<escaped name>": <indented text>`.
    entries: BTreeMap<String, String>,
}

/// What [`FileText::apply`] brings up to date: copies of the changed entries (`None`: gone).
struct Changes<C> {
    all: bool,
    entries: Vec<(String, Option<C>)>,
}

impl Edits {
    /// Copies of the entries of `table` these edits name (all of them if `all`).
    fn changes<C: Clone>(self, table: &BTreeMap<String, C>) -> Changes<C> {
        let entries = if self.all {
            table.iter().map(|(name, config)| (name.clone(), Some(config.clone()))).collect()
        } else {
            self.names
                .into_iter()
                .map(|name| {
                    let config = table.get(&name).cloned();
                    (name, config)
                })
                .collect()
        };
        Changes { all: self.all, entries }
    }
}

impl FileText {
    fn apply<W: Wrapper>(&mut self, changes: Changes<W::Config>) -> Result<(), MetadataError> {
        if changes.all {
            self.entries.clear();
        }
        for (name, config) in changes.entries {
            match config {
                Some(config) => {
                    let key = to_json(&name, JsonStyle::Compact, W::WHAT)?;
                    let value = to_json(&config, JsonStyle::Pretty, W::WHAT)?.replace('\n', "\n    ");
                    self.entries.insert(name, format!("{key}: {value}"));
                }
                None => {
                    self.entries.remove(&name);
                }
            }
        }
        Ok(())
    }

    /// The whole pretty document: `frame` (the wrapper without its table) with the kept
    /// entries spliced in.
    fn document<W: Wrapper>(&self, frame: &W) -> Result<String, MetadataError> {
        let frame = to_json(frame, JsonStyle::Pretty, W::WHAT)?;
        if self.entries.is_empty() {
            return Ok(frame);
        }
        let empty = format!("\n  \"{}\": {{}}", W::TABLE_FIELD);
        let at = frame.find(&empty).ok_or_else(|| MetadataError::Encode {
            what: W::WHAT.to_string(),
            reason: format!("the encoded frame has no empty {} field", W::TABLE_FIELD),
        })? + empty.len()
            - 2;
        let size = self.entries.values().map(|text| text.len() + 6).sum::<usize>();
        let mut out = String::with_capacity(frame.len() + size + 4);
        out.push_str(&frame[..at]);
        out.push('{');
        for (i, text) in self.entries.values().enumerate() {
            out.push_str(if i == 0 { "\n    " } else { ",\n    " });
            out.push_str(text);
        }
        out.push_str("\n  }");
        out.push_str(&frame[at + 2..]);
        Ok(out)
    }
}

/// The table key of `config`. An empty name would be a topic or group no client can address.
fn checked_name<W: Wrapper>(config: &W::Config) -> Result<String, MetadataError> {
    let name = W::name_of(config);
    if name.is_empty() {
        return Err(MetadataError::Invalid {
            what: W::WHAT,
            key: String::new(),
            reason: "the name is empty".to_string(),
        });
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{
        SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicConfig, TopicConfigWrapper,
    };
    use proptest::prelude::*;
    use serde::Serializer;
    use serde_json::Value;
    use std::sync::{Arc, Condvar};
    use std::time::Duration;

    /// Lets a test hold the next encoding of the table (which runs inside a persist, under
    /// the file lock) and then fail it: a write in progress that will not succeed.
    #[derive(Debug, Default)]
    struct Gate {
        state: Mutex<GateState>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct GateState {
        /// Hold the next encoding until released, then fail it.
        armed: bool,
        /// An encoding is being held.
        holding: bool,
        released: bool,
    }

    impl Gate {
        fn wait_until(&self, cond: impl Fn(&GateState) -> bool) {
            let mut s = self.state.lock().unwrap();
            while !cond(&s) {
                s = self.changed.wait(s).unwrap();
            }
        }

        fn set(&self, f: impl FnOnce(&mut GateState)) {
            f(&mut self.state.lock().unwrap());
            self.changed.notify_all();
        }
    }

    /// Releases the gate when dropped, also when an assertion fails, so a failing test does
    /// not leave a thread held and hang the scope that waits for it.
    struct Release<'a>(&'a Gate);

    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.set(|s| s.released = true);
        }
    }

    #[derive(Debug, Clone, Default)]
    struct Probe(Arc<Gate>);

    impl Serialize for Probe {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let gate = &self.0;
            let hold = std::mem::take(&mut gate.state.lock().unwrap().armed);
            if hold {
                gate.set(|s| s.holding = true);
                gate.wait_until(|s| s.released);
                return Err(serde::ser::Error::custom("injected encode failure"));
            }
            serializer.serialize_unit()
        }
    }

    #[derive(Debug, Clone, Default, Serialize)]
    struct TestWrapper {
        data_version: DataVersion,
        probe: Probe,
        table: BTreeMap<String, String>,
    }

    impl Wrapper for TestWrapper {
        type Config = String;
        const WHAT: &'static str = "test table";

        fn decode_text(_text: &str, _origin: &str) -> Result<Self, MetadataError> {
            Ok(TestWrapper::default())
        }
        fn version(&self) -> &DataVersion {
            &self.data_version
        }
        fn version_mut(&mut self) -> &mut DataVersion {
            &mut self.data_version
        }
        fn table(&self) -> &BTreeMap<String, String> {
            &self.table
        }
        fn table_mut(&mut self) -> &mut BTreeMap<String, String> {
            &mut self.table
        }
        fn name_of(config: &String) -> &str {
            config
        }
        const TABLE_FIELD: &'static str = "table";
        fn without_table(&self) -> Self {
            TestWrapper { data_version: self.data_version, probe: self.probe.clone(), table: BTreeMap::new() }
        }
    }

    /// A put that finds its config already in memory, put there by another thread whose
    /// write is still in progress, must wait for that write; when it fails, the table is
    /// written by the waiting put (or the put fails), never acknowledged with nothing on disk.
    #[test]
    fn an_unchanged_put_waits_for_the_write_in_progress_and_redoes_it_if_it_failed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let table = NamedTable::<TestWrapper>::open(path.clone()).unwrap();
        let gate = table.read().probe.0.clone();
        table.put("A".to_string()).unwrap();

        gate.set(|s| s.armed = true);
        std::thread::scope(|s| {
            let release = Release(&gate);
            let first = s.spawn(|| table.put("B".to_string()));
            gate.wait_until(|s| s.holding);
            // B is in memory and its write has begun (the dirty flag is already cleared).
            assert!(table.contains("B") && !table.is_dirty());
            let retry = s.spawn(|| table.put("B".to_string()));
            std::thread::sleep(Duration::from_millis(100));
            assert!(!retry.is_finished(), "answered while B's write was still in progress");
            drop(release);
            assert!(first.join().unwrap().is_err(), "the first write failed");
            assert_eq!(retry.join().unwrap().unwrap(), Some("B".to_string()));
        });
        let on_disk: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(on_disk["table"]["B"], "B", "{on_disk}");
        assert!(!table.is_dirty());
    }

    /// Encoding a large table takes long (~50 ms for 9.5 MB); it must not hold the state lock
    /// meanwhile, or every change (write lock), and every reader queued behind it, waits.
    #[test]
    fn a_change_completes_while_the_table_is_being_encoded() {
        let dir = tempfile::tempdir().unwrap();
        let table = NamedTable::<TestWrapper>::open(dir.path().join("t.json")).unwrap();
        let gate = table.read().probe.0.clone();
        gate.set(|s| s.armed = true);
        std::thread::scope(|s| {
            let release = Release(&gate);
            let encoding = s.spawn(|| table.encode(JsonStyle::Compact));
            gate.wait_until(|s| s.holding);
            let change = s.spawn(|| table.put("C".to_string()));
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !change.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            let finished = change.is_finished();
            drop(release);
            assert!(finished, "the put waited for the encoding");
            assert_eq!(change.join().unwrap().unwrap(), None);
            assert!(encoding.join().unwrap().is_err());
        });
        assert!(table.contains("C"));
    }

    /// Any JSON value, as an unknown field may hold: strings with quotes, backslashes,
    /// newlines and non-ASCII, nested a few levels.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            // 0.0 and -0.0 are equal and written differently.
            prop_oneof![Just(0.0), Just(-0.0), any::<f64>()].prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn any_topic() -> impl Strategy<Value = TopicConfig> {
        (
            any::<String>(),
            prop::collection::btree_map(any::<String>(), any::<String>(), 0..3),
            any::<(bool, i32, i32)>(),
            prop::collection::btree_map("x[a-z\"\\\\\n]{0,6}", any_json(), 0..3),
        )
            .prop_map(|(name, attributes, (order, perm, queues), extra)| TopicConfig {
                attributes,
                order,
                perm,
                read_queue_nums: queues,
                extra,
                ..TopicConfig::new(name)
            })
    }

    fn any_topics() -> impl Strategy<Value = TopicConfigWrapper> {
        (any::<(i64, i64)>(), prop::collection::vec(any_topic(), 0..6)).prop_map(
            |((counter, timestamp), topics)| TopicConfigWrapper {
                data_version: DataVersion { counter, state_version: 0, timestamp },
                topic_config_table: topics.into_iter().map(|t| (t.topic_name.clone(), t)).collect(),
            },
        )
    }

    fn any_groups() -> impl Strategy<Value = SubscriptionGroupWrapper> {
        (
            prop::option::of(prop::collection::btree_map(any::<String>(), any_json(), 0..3)),
            prop::collection::vec((any::<String>(), prop::option::of(any_json()), any::<bool>()), 0..6),
        )
            .prop_map(|(forbidden_table, groups)| SubscriptionGroupWrapper {
                data_version: DataVersion::default(),
                forbidden_table,
                subscription_group_table: groups
                    .into_iter()
                    .map(|(name, subscriptions, orderly)| {
                        let mut g = SubscriptionGroupConfig::new(name.clone());
                        g.subscription_data_set = subscriptions;
                        g.consume_message_orderly = orderly;
                        (name, g)
                    })
                    .collect(),
            })
    }

    fn pretty<W: Wrapper>(w: &W) -> String {
        to_json(w, JsonStyle::Pretty, W::WHAT).unwrap()
    }

    /// Brings `texts` from `before` (nothing kept if `None`) to `after`, naming as edited the
    /// entries whose encodings differ, and returns the spliced document.
    fn spliced<W: Wrapper>(texts: &mut FileText, before: Option<&W>, after: &W) -> String {
        let edits = match before {
            None => Edits { names: BTreeSet::new(), all: true },
            Some(before) => {
                let encoded = |w: &W, name: &String| {
                    w.table().get(name).map(|c| to_json(c, JsonStyle::Pretty, "").unwrap())
                };
                let names = before.table().keys().chain(after.table().keys());
                Edits {
                    names: names.filter(|n| encoded(before, n) != encoded(after, n)).cloned().collect(),
                    all: false,
                }
            }
        };
        texts.apply::<W>(edits.changes(after.table())).unwrap();
        texts.document(&after.without_table()).unwrap()
    }

    proptest! {
        /// The file text put together from kept entry texts is the whole wrapper's encoding,
        /// byte for byte: first from nothing kept, then from the texts kept for another table
        /// (entries added, changed, removed).
        #[test]
        fn the_spliced_file_text_is_the_encoding_of_the_whole_table(
            first in any_topics(),
            second in any_topics(),
            groups in any_groups(),
            other_groups in any_groups(),
        ) {
            let mut texts = FileText::default();
            prop_assert_eq!(spliced(&mut texts, None, &first), pretty(&first));
            let mut overlap = second.clone();
            overlap.topic_config_table.extend(first.topic_config_table.iter().take(2).map(|(k, v)| {
                let mut changed = v.clone();
                changed.write_queue_nums = changed.write_queue_nums.wrapping_add(1);
                (k.clone(), changed)
            }));
            prop_assert_eq!(spliced(&mut texts, Some(&first), &overlap), pretty(&overlap));
            prop_assert!(texts.entries.keys().eq(overlap.topic_config_table.keys()));

            let mut texts = FileText::default();
            prop_assert_eq!(spliced(&mut texts, None, &groups), pretty(&groups));
            prop_assert_eq!(spliced(&mut texts, Some(&groups), &other_groups), pretty(&other_groups));
        }
    }

    /// A master's table replaces every entry, even one equal to the kept one but written
    /// differently (found in review: `0.0` and `-0.0` compare equal).
    #[test]
    fn an_adopted_table_is_written_as_the_master_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topics.json");
        let table = NamedTable::<TopicConfigWrapper>::open(path.clone()).unwrap();
        let mut t = TopicConfig::new("T");
        t.extra.insert("x".into(), serde_json::json!(0.0));
        table.put(t).unwrap();
        let master = TopicConfigWrapper::decode(
            br#"{"dataVersion":{"counter":99,"stateVersion":0,"timestamp":1},
                 "topicConfigTable":{"T":{"topicName":"T","perm":6,"readQueueNums":16,
                 "writeQueueNums":16,"x":-0.0}}}"#,
            "master",
        )
        .unwrap();
        assert!(table.apply_from_master(master).unwrap());
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert!(on_disk.contains("\"x\": -0.0"), "{on_disk}");
        assert_eq!(on_disk, pretty(&table.wrapper()));
    }

    /// Through the table's own calls: after every change the file holds exactly the encoding
    /// of the table, and a reopen reads it back.
    #[test]
    fn every_write_of_the_table_is_the_whole_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topics.json");
        let table = NamedTable::<TopicConfigWrapper>::open(path.clone()).unwrap();
        let on_disk = || std::fs::read_to_string(&path).unwrap();
        table.persist().unwrap();
        assert_eq!(on_disk(), pretty(&table.wrapper()));
        for i in 0..20 {
            table.put(TopicConfig::with_queues(format!("T{i}\u{e9}\"\n"), 4, 4, 6)).unwrap();
            assert_eq!(on_disk(), pretty(&table.wrapper()), "after creating topic {i}");
        }
        let mut changed = table.get("T3\u{e9}\"\n").unwrap();
        changed.attributes.insert("+message.type".into(), "FIFO".into());
        table.put(changed).unwrap();
        assert_eq!(on_disk(), pretty(&table.wrapper()));
        assert!(on_disk().contains("FIFO"));
        table.delete("T7\u{e9}\"\n").unwrap();
        table.create_all_if_absent((18..25).map(|i| TopicConfig::new(format!("T{i}\u{e9}\"\n")))).unwrap();
        assert_eq!(on_disk(), pretty(&table.wrapper()));
        let mut master = table.wrapper();
        master.topic_config_table.remove("T0\u{e9}\"\n");
        master.data_version.next_version();
        table.apply_from_master(master.clone()).unwrap();
        assert_eq!(on_disk(), pretty(&master));
        drop(table);
        let reopened = NamedTable::<TopicConfigWrapper>::open(path).unwrap();
        assert_eq!(reopened.wrapper(), master);
    }
}
