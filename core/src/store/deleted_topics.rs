//! Topics deleted from the store, and below which CommitLog offset their records are gone.
//!
//! Deleting a topic removes its ConsumeQueues, but its records stay in the CommitLog until
//! retention takes their files. Without a record of the deletion, anything that builds
//! queues from the log would bring the topic back: the dispatcher reaching records put just
//! before the deletion, a restart (dispatch resumes at the highest offset the remaining
//! queues hold, which the deleted topic's queues may have held), and recovery's repair of
//! queues that lack records the log holds. RocketMQ has all three (`cleanUnusedTopic` leaves
//! the records, and its reput starts at the remaining queues' highest offset).
//!
//! So each deletion is kept, durably before the queues go, in `<storePathRootDir>/
//! deletedTopics.json` (`{"topic": offset}`), and a record of a deleted topic below its offset
//! gets no ConsumeQueue unit. An entry goes once the CommitLog's first file starts at or past
//! its offset. The file is outside `consumequeue/` (RocketMQ parses every name there).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::metadata::MetadataError;
use crate::metadata::persist::ConfigFile;

/// The deleted topics of a store.
#[derive(Debug)]
pub struct DeletedTopics {
    file: Mutex<ConfigFile>,
    /// Topic → the CommitLog offset below which its records are deleted.
    table: RwLock<BTreeMap<String, u64>>,
    /// Whether `table` has entries: the dispatcher's per-record check is one load without.
    any: AtomicBool,
}

impl DeletedTopics {
    /// Loads `path` (or its `.bak`); absent means no topic was deleted.
    pub fn open(path: PathBuf) -> Result<Self, MetadataError> {
        let mut file = ConfigFile::new(path.clone());
        let table = file
            .load(|text, origin| {
                serde_json::from_str::<BTreeMap<String, u64>>(text.trim_start_matches('\u{feff}')).map_err(
                    |e| MetadataError::Invalid {
                        what: "deleted topics",
                        key: origin.to_string(),
                        reason: format!("not a JSON object of topic to CommitLog offset: {e}"),
                    },
                )
            })?
            .map(|(t, _)| t)
            .unwrap_or_default();
        Ok(DeletedTopics {
            any: AtomicBool::new(!table.is_empty()),
            file: Mutex::new(file),
            table: RwLock::new(table),
        })
    }

    /// Whether the record of `topic` at `offset` belongs to a deletion (gets no unit).
    pub fn hides(&self, topic: &str, offset: u64) -> bool {
        self.any.load(Ordering::Acquire) && self.table.read().get(topic).is_some_and(|&below| offset < below)
    }

    /// The offset below which `topic`'s records are deleted, if it was deleted.
    pub fn below(&self, topic: &str) -> Option<u64> {
        self.table.read().get(topic).copied()
    }

    /// Records that `topic`'s records below `below` are deleted; returns once that is on disk.
    pub fn add(&self, topic: &str, below: u64) -> Result<(), MetadataError> {
        self.change(|t| {
            let e = t.entry(topic.to_string()).or_insert(0);
            *e = (*e).max(below);
        })
    }

    /// Forgets deletions whose records all lie below `log_min` (retention took them).
    pub fn forget_below(&self, log_min: u64) -> Result<(), MetadataError> {
        if !self.table.read().values().any(|&below| below <= log_min) {
            return Ok(());
        }
        self.change(|t| t.retain(|_, below| *below > log_min))
    }

    /// After the CommitLog was cut at `offset`: records written there again are new.
    pub fn truncate(&self, offset: u64) -> Result<(), MetadataError> {
        if !self.table.read().values().any(|&below| below > offset) {
            return Ok(());
        }
        self.change(|t| t.values_mut().for_each(|below| *below = (*below).min(offset)))
    }

    /// The deleted topics and their offsets.
    pub fn all(&self) -> BTreeMap<String, u64> {
        self.table.read().clone()
    }

    fn change(&self, f: impl FnOnce(&mut BTreeMap<String, u64>)) -> Result<(), MetadataError> {
        let mut file = self.file.lock();
        let mut next = self.table.read().clone();
        f(&mut next);
        let text = serde_json::to_string_pretty(&next).map_err(|e| MetadataError::Invalid {
            what: "deleted topics",
            key: String::new(),
            reason: e.to_string(),
        })?;
        // On disk first: a deletion is only in effect once a restart would keep it.
        file.store(text.as_bytes())?;
        self.any.store(!next.is_empty(), Ordering::Release);
        *self.table.write() = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletions_are_kept_cut_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deletedTopics.json");
        let d = DeletedTopics::open(path.clone()).unwrap();
        assert!(!d.hides("T", 0));
        d.add("T", 1000).unwrap();
        d.add("U", 500).unwrap();
        assert!(d.hides("T", 999) && !d.hides("T", 1000) && !d.hides("V", 0));
        // Reopened, the same.
        let d = DeletedTopics::open(path.clone()).unwrap();
        assert_eq!(d.all(), BTreeMap::from([("T".into(), 1000), ("U".into(), 500)]));
        // A cut log: what is written from 700 on is new.
        d.truncate(700).unwrap();
        assert!(d.hides("T", 699) && !d.hides("T", 700) && d.hides("U", 499));
        // Retention past 500 takes U's records; T's are partly left.
        d.forget_below(600).unwrap();
        assert_eq!(DeletedTopics::open(path.clone()).unwrap().all(), BTreeMap::from([("T".into(), 700)]));
        d.forget_below(700).unwrap();
        assert!(!d.hides("T", 0));
        assert!(DeletedTopics::open(path).unwrap().all().is_empty());
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deletedTopics.json");
        std::fs::write(&path, b"{\"T\": -1").unwrap();
        let err = DeletedTopics::open(path).unwrap_err().to_string();
        assert!(err.contains("deletedTopics.json"), "{err}");
    }
}
