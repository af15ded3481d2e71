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
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A serialize wrapper that holds one named table.
pub(crate) trait Wrapper: Serialize + Clone + Default {
    type Config: Clone + PartialEq;
    /// Names the table in errors and logs, e.g. "topic config".
    const WHAT: &'static str;

    fn decode_text(text: &str, origin: &str) -> Result<Self, MetadataError>;
    fn version(&self) -> &DataVersion;
    fn version_mut(&mut self) -> &mut DataVersion;
    fn table(&self) -> &BTreeMap<String, Self::Config>;
    fn table_mut(&mut self) -> &mut BTreeMap<String, Self::Config>;
    fn name_of(config: &Self::Config) -> &str;

    /// Takes the master's state. Wrappers with side tables override this to keep what the
    /// master did not send.
    fn adopt(&mut self, master: Self) {
        *self = master;
    }
}

/// A persisted, versioned, thread-safe named table.
#[derive(Debug)]
pub(crate) struct NamedTable<W> {
    state: RwLock<W>,
    store: Store,
}

impl<W: Wrapper> NamedTable<W> {
    pub(crate) fn open(path: PathBuf) -> Result<Self, MetadataError> {
        let (store, loaded) = Store::open(path, W::decode_text)?;
        let state = loaded.map(|(w, _)| w).unwrap_or_default();
        Ok(NamedTable { state: RwLock::new(state), store })
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

    pub(crate) fn encode(&self, style: JsonStyle) -> Result<String, MetadataError> {
        to_json(&*self.read(), style, W::WHAT)
    }

    /// Inserts or replaces; returns the previous config. Re-putting an identical config is
    /// not a change: the version stays, so slaves are not made to re-sync for nothing.
    pub(crate) fn put(&self, config: W::Config) -> Result<Option<W::Config>, MetadataError> {
        let name = checked_name::<W>(&config)?;
        let previous = {
            let mut state = self.write();
            if state.table().get(&name) == Some(&config) {
                return Ok(Some(config));
            }
            let previous = state.table_mut().insert(name, config);
            state.version_mut().next_version();
            self.store.mark_dirty();
            previous
        };
        self.persist()?;
        Ok(previous)
    }

    /// Inserts `config` unless its name is taken; returns the config now in the table and
    /// whether it was created.
    pub(crate) fn create_if_absent(&self, config: W::Config) -> Result<(W::Config, bool), MetadataError> {
        let name = checked_name::<W>(&config)?;
        {
            let mut state = self.write();
            if let Some(existing) = state.table().get(&name) {
                return Ok((existing.clone(), false));
            }
            state.table_mut().insert(name, config.clone());
            state.version_mut().next_version();
            self.store.mark_dirty();
        }
        self.persist()?;
        Ok((config, true))
    }

    pub(crate) fn delete(&self, name: &str) -> Result<Option<W::Config>, MetadataError> {
        let removed = {
            let mut state = self.write();
            let removed = state.table_mut().remove(name);
            if removed.is_none() {
                return Ok(None);
            }
            state.version_mut().next_version();
            self.store.mark_dirty();
            removed
        };
        self.persist()?;
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
                return Ok(false);
            }
            state.adopt(master);
            self.store.mark_dirty();
        }
        self.persist()?;
        Ok(true)
    }

    pub(crate) fn persist(&self) -> Result<(), MetadataError> {
        self.store.persist(|| to_json(&*self.read(), JsonStyle::Pretty, W::WHAT))
    }

    pub(crate) fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        if !self.store.is_dirty() {
            return Ok(false);
        }
        self.persist().map(|()| true)
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
