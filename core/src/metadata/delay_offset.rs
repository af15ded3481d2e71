//! Delay offsets: delay level → how far the scheduler has consumed queue `level - 1` of
//! `SCHEDULE_TOPIC_XXXX`, in `delayOffset.json` (Java `ScheduleMessageService`).
//!
//! A slave stores the master's JSON verbatim, as RocketMQ does, so the text it would serve
//! after a promotion is byte for byte what the master last sent.

use super::json::{JsonStyle, null_as_default, object_from_slice_lenient, object_from_str_lenient, to_json};
use super::persist::Store;
use super::{DataVersion, MetadataError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The JSON of `delayOffset.json` and of a GET_ALL_DELAY_OFFSET response:
/// `{"dataVersion":{…},"offsetTable":{1:0,2:17,…}}` (no `dataVersion` from 4.x).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayOffsetWrapper {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub offset_table: BTreeMap<i32, i64>,
}

impl DelayOffsetWrapper {
    const WHAT: &'static str = "delay offsets";

    /// Decodes a remoting body or file content as fastjson writes it. `origin` names the
    /// source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, origin)
    }

    /// Encodes as strict JSON (quoted levels).
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        to_json(self, style, Self::WHAT)
    }
}

#[derive(Debug)]
struct State {
    wrapper: DelayOffsetWrapper,
    /// The exact text on disk (loaded, or last received from the master), while the offsets
    /// have not changed locally since. Persisting writes it unchanged.
    verbatim: Option<String>,
}

/// The scheduler's progress per delay level. Persisted on demand (the broker calls
/// [`persist_if_dirty`](Self::persist_if_dirty) every `flushDelayOffsetInterval`, 10 s).
#[derive(Debug)]
pub struct DelayOffsetTable {
    state: RwLock<State>,
    store: Store,
}

impl DelayOffsetTable {
    /// Loads `path` (falling back to its `.bak`); a missing file is an empty table.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let (store, loaded) = Store::open(path.into(), |text, origin| {
            object_from_str_lenient::<DelayOffsetWrapper>(
                text,
                &format!("{origin} ({})", DelayOffsetWrapper::WHAT),
            )
        })?;
        let state = match loaded {
            Some((wrapper, text)) => State { wrapper, verbatim: Some(text) },
            None => State { wrapper: DelayOffsetWrapper::default(), verbatim: None },
        };
        Ok(DelayOffsetTable { state: RwLock::new(state), store })
    }

    /// The file this table persists to.
    pub fn path(&self) -> PathBuf {
        self.store.path()
    }

    /// The offset of delay level `level`, if recorded.
    pub fn offset(&self, level: i32) -> Option<i64> {
        self.read().wrapper.offset_table.get(&level).copied()
    }

    /// A copy of every level's offset.
    pub fn all(&self) -> BTreeMap<i32, i64> {
        self.read().wrapper.offset_table.clone()
    }

    /// The DataVersion, if the table has one (a 4.x file or master sends none).
    pub fn data_version(&self) -> Option<DataVersion> {
        self.read().wrapper.data_version
    }

    /// Records the scheduler's progress on `level`.
    pub fn update_offset(&self, level: i32, offset: i64) {
        let mut state = self.write();
        if state.wrapper.offset_table.insert(level, offset) != Some(offset) {
            state.wrapper.data_version.get_or_insert_with(DataVersion::new).next_version();
            state.verbatim = None;
            self.store.mark_dirty();
        }
    }

    /// Records `offset` for `level` only if the table still holds `expected` there (`None`:
    /// no offset), and says whether it did. The scheduler records its progress with this, so
    /// that an offset set meanwhile from outside (`Broker::set_delay_offset`) is never
    /// written over.
    pub fn update_offset_if(&self, level: i32, expected: Option<i64>, offset: i64) -> bool {
        let mut state = self.write();
        let current = state.wrapper.offset_table.get(&level).copied();
        if current != expected {
            return false;
        }
        if current != Some(offset) {
            state.wrapper.offset_table.insert(level, offset);
            state.wrapper.data_version.get_or_insert_with(DataVersion::new).next_version();
            state.verbatim = None;
            self.store.mark_dirty();
        }
        true
    }

    /// A consistent copy of the version and the offsets.
    pub fn wrapper(&self) -> DelayOffsetWrapper {
        self.read().wrapper.clone()
    }

    /// The text the file holds when it is the master's (or the loaded file's) verbatim JSON;
    /// `None` once offsets changed locally.
    pub fn verbatim(&self) -> Option<String> {
        self.read().verbatim.clone()
    }

    /// The table as JSON: `Compact` is the GET_ALL_DELAY_OFFSET response body. Encodes a
    /// copy after releasing the lock.
    pub fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        self.wrapper().encode(style)
    }

    /// Slave side: if `master_json` differs from the text this table holds, checks that it
    /// decodes (RocketMQ would store garbage), takes its offsets, and persists the text
    /// verbatim. Returns whether anything changed; when nothing did, it still returns only
    /// once the table is on disk (an earlier apply's write may have failed). A body that does
    /// not decode is an error and changes nothing.
    pub fn apply_from_master(&self, master_json: &str) -> Result<bool, MetadataError> {
        if self.read().verbatim.as_deref() == Some(master_json) {
            self.store.persist_if_dirty(|| self.snapshot())?;
            return Ok(false);
        }
        let wrapper = object_from_str_lenient::<DelayOffsetWrapper>(
            master_json,
            "GET_ALL_DELAY_OFFSET body (delay offsets)",
        )?;
        {
            let mut state = self.write();
            state.wrapper = wrapper;
            state.verbatim = Some(master_json.to_string());
            self.store.mark_dirty();
        }
        self.persist()?;
        Ok(true)
    }

    /// Writes the table now: the verbatim text if there is one, else pretty JSON.
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.store.persist(|| self.snapshot())
    }

    /// Writes the table if it changed since the last write; returns whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        if !self.store.is_dirty() {
            return Ok(false);
        }
        self.store.persist_if_dirty(|| self.snapshot())
    }

    /// The file text: the verbatim text if there is one, else pretty JSON of a copy taken
    /// under the read lock and encoded after releasing it. Called by the store under the file
    /// lock, so of two racing persists the later still writes the later state.
    fn snapshot(&self) -> Result<String, MetadataError> {
        let wrapper = {
            let state = self.read();
            match &state.verbatim {
                Some(text) => return Ok(text.clone()),
                None => state.wrapper.clone(),
            }
        };
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
