//! ConsumeQueue: per (topic, queue id), the 20-byte unit `[i64 phy offset][i32 size][i64 tags
//! code]` of each message, in queue-offset order (spec 4.1). Built by the dispatcher, the only
//! writer; read by consumers without locks.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::mapped_file::MappedFile;
use super::mapped_file_queue::MappedFileQueue;

/// Bytes of one unit.
pub const CQ_UNIT_SIZE: usize = 20;

/// One unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    pub phy_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    pub fn encode(&self) -> [u8; CQ_UNIT_SIZE] {
        let mut b = [0u8; CQ_UNIT_SIZE];
        b[..8].copy_from_slice(&self.phy_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }
    pub fn decode(b: &[u8]) -> Self {
        CqUnit {
            phy_offset: i64::from_be_bytes(b[..8].try_into().unwrap_or_default()),
            size: i32::from_be_bytes(b[8..12].try_into().unwrap_or_default()),
            tags_code: i64::from_be_bytes(b[12..20].try_into().unwrap_or_default()),
        }
    }
    /// The filler unit written before the first real unit of a queue that starts mid-file.
    pub const FILLER: CqUnit = CqUnit { phy_offset: 0, size: i32::MAX, tags_code: 0 };
    fn is_valid(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0
    }
}

/// The ConsumeQueue of one (topic, queue id).
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    files: MappedFileQueue,
    /// End (offset + size) of the last CommitLog record indexed.
    max_physic_offset: AtomicI64,
    /// Byte offset of the first live unit.
    min_logic_offset: AtomicU64,
    /// CommitLog bytes of the records indexed since the queue was opened (stats:
    /// `TOPIC_PUT_SIZE`); added to by the one thread that dispatches.
    indexed_bytes: AtomicU64,
}

impl ConsumeQueue {
    fn open(root: &Path, topic: &str, queue_id: i32, file_size: usize) -> io::Result<Self> {
        let dir = root.join(topic).join(queue_id.to_string());
        Ok(ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            files: MappedFileQueue::load_mapped_only(&dir, file_size)?,
            max_physic_offset: AtomicI64::new(-1),
            min_logic_offset: AtomicU64::new(0),
            indexed_bytes: AtomicU64::new(0),
        })
    }

    /// CommitLog bytes of the records indexed since the queue was opened.
    pub fn indexed_bytes(&self) -> u64 {
        self.indexed_bytes.load(Ordering::Relaxed)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }
    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }
    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset.load(Ordering::Acquire)
    }

    /// One past the last queue offset.
    pub fn max_offset_in_queue(&self) -> i64 {
        (self.files.max_offset() / CQ_UNIT_SIZE as u64) as i64
    }

    /// The first queue offset still readable.
    pub fn min_offset_in_queue(&self) -> i64 {
        (self.min_logic_offset.load(Ordering::Acquire) / CQ_UNIT_SIZE as u64) as i64
    }

    /// The unit at queue offset `index`, if written.
    pub fn get(&self, index: i64) -> Option<CqUnit> {
        if index < 0 {
            return None;
        }
        let at = (index as u64).checked_mul(CQ_UNIT_SIZE as u64)?;
        let f = self.files.find(at)?;
        let b = f.read((at - f.start_offset()) as usize, CQ_UNIT_SIZE)?;
        Some(CqUnit::decode(b))
    }

    /// Up to `max` units from queue offset `index` to the last unit written in the file that
    /// holds it, as RocketMQ's `getIndexBuffer` selects them (QUERY_CONSUME_QUEUE): `None`
    /// if `index` is below the first live unit (negative included) or not written yet.
    pub fn units_in_file_from(&self, index: i64, max: usize) -> Option<Vec<CqUnit>> {
        if index < 0 || index < self.min_offset_in_queue() {
            return None;
        }
        let at = (index as u64).checked_mul(CQ_UNIT_SIZE as u64)?;
        let f = self.files.find(at)?;
        let bytes = f.readable_from((at - f.start_offset()) as usize);
        if bytes.len() < CQ_UNIT_SIZE {
            return None;
        }
        Some(bytes.chunks_exact(CQ_UNIT_SIZE).take(max).map(CqUnit::decode).collect())
    }

    /// Appends the unit of queue offset `cq_offset` (dispatcher thread only). Units already
    /// present are skipped, which makes re-dispatch after a crash idempotent.
    ///
    /// The caller keeps the queue's last file between calls in `current` (start with `None`),
    /// tagged with the generation of the file list it was read at: while the list is
    /// unchanged, a put neither takes the list's lock nor touches the file's reference count,
    /// whose cache line the readers' clones share (the dispatcher puts millions of units a
    /// second).
    pub fn put(
        &self,
        current: &mut Option<(u64, Arc<MappedFile>)>,
        unit: CqUnit,
        cq_offset: i64,
    ) -> io::Result<()> {
        // Both from a record's header, which no checksum covers: a damaged or forged one
        // must not overflow the arithmetic below (a panic in the dispatcher, at every start).
        let expect = u64::try_from(cq_offset)
            .ok()
            .and_then(|o| o.checked_mul(CQ_UNIT_SIZE as u64))
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("queue offset {cq_offset} of {}/{} is out of range", self.topic, self.queue_id),
                )
            })?;
        if unit.phy_offset.saturating_add(unit.size as i64) <= self.max_physic_offset() {
            return Ok(()); // rebuilt duplicate
        }
        let generation = self.files.generation();
        if !matches!(current, Some((g, _)) if *g == generation) {
            // The list is read after its generation: a change in between costs one more read.
            *current = self.files.last().map(|f| (generation, f));
        }
        let fs = self.files.file_size() as u64;
        let Some((_, file)) = current.as_ref() else {
            // A queue starting mid-stream: its first file begins where the unit falls,
            // filled up to it with filler units.
            let f = self.files.create_file(expect - expect % fs)?;
            let fill = (expect % fs) as usize;
            if fill > 0 {
                f.reserve_through(fill)?;
                f.write_region(0, fill, |b| {
                    for chunk in b.chunks_mut(CQ_UNIT_SIZE) {
                        chunk.copy_from_slice(&CqUnit::FILLER.encode());
                    }
                });
                f.set_wrote_position(fill);
            }
            self.min_logic_offset.store(expect, Ordering::Release);
            // The new file moved the generation: the next round reads it as the last.
            return self.put(current, unit, cq_offset);
        };
        let end = file.start_offset() + file.wrote_position() as u64;
        if expect < end {
            return Ok(());
        }
        if file.is_full() {
            self.files.create_file(file.end_offset())?;
            return self.put(current, unit, cq_offset);
        }
        if expect > end {
            tracing::warn!(
                "consume queue {}/{}: unit for offset {cq_offset} expected at byte {expect} but the queue ends at {end}; appending at the end",
                self.topic,
                self.queue_id
            );
        }
        let pos = file.wrote_position();
        file.reserve_through(pos + CQ_UNIT_SIZE)?;
        file.write_region(pos, CQ_UNIT_SIZE, |b| b.copy_from_slice(&unit.encode()));
        file.set_wrote_position(pos + CQ_UNIT_SIZE);
        self.max_physic_offset.store(unit.phy_offset.saturating_add(unit.size as i64), Ordering::Release);
        // One writer: a load and a store, no locked add on the dispatch path.
        let bytes = self.indexed_bytes.load(Ordering::Relaxed);
        self.indexed_bytes.store(bytes.wrapping_add(u64::from(unit.size.max(0) as u32)), Ordering::Relaxed);
        Ok(())
    }

    /// Recovery (spec 3.5): keep the valid units from the third-last file on, cut the rest.
    pub fn recover(&self) -> io::Result<()> {
        let files = self.files.files();
        if files.is_empty() {
            return Ok(());
        }
        let start = files.len().saturating_sub(3);
        let mut end = files[start].start_offset();
        let mut max_phy = -1i64;
        for f in &files[start..] {
            let data = f.readable_from(0);
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE <= data.len() {
                let u = CqUnit::decode(&data[pos..pos + CQ_UNIT_SIZE]);
                if !u.is_valid() {
                    break;
                }
                if u != CqUnit::FILLER {
                    max_phy = u.phy_offset.saturating_add(u.size as i64);
                }
                pos += CQ_UNIT_SIZE;
            }
            end = f.start_offset() + pos as u64;
            if pos + CQ_UNIT_SIZE <= data.len() {
                break; // an invalid unit: the queue ends here
            }
        }
        self.files.truncate(end)?;
        while self.files.last().is_some_and(|f| f.wrote_position() == 0) {
            self.files.remove_last()?;
        }
        self.files.set_flushed_where(end);
        self.max_physic_offset.store(max_phy, Ordering::Release);
        self.init_min_logic_offset();
        Ok(())
    }

    fn init_min_logic_offset(&self) {
        // The first non-filler unit of the first file.
        if let Some(f) = self.files.first() {
            let data = f.readable_from(0);
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE <= data.len()
                && CqUnit::decode(&data[pos..pos + CQ_UNIT_SIZE]) == CqUnit::FILLER
            {
                pos += CQ_UNIT_SIZE;
            }
            self.min_logic_offset.store(f.start_offset() + pos as u64, Ordering::Release);
        }
    }

    /// Drops the units that point at or beyond `phy_offset` (spec 3.7).
    pub fn truncate_dirty(&self, phy_offset: i64) -> io::Result<()> {
        while let Some(last) = self.files.last() {
            let data = last.readable_from(0);
            let mut pos = 0;
            while pos + CQ_UNIT_SIZE <= data.len() {
                let u = CqUnit::decode(&data[pos..pos + CQ_UNIT_SIZE]);
                if !u.is_valid() || (u != CqUnit::FILLER && u.phy_offset >= phy_offset) {
                    break;
                }
                pos += CQ_UNIT_SIZE;
            }
            let keeps_real_unit =
                data[..pos].chunks(CQ_UNIT_SIZE).any(|c| CqUnit::decode(c) != CqUnit::FILLER);
            if pos < data.len() {
                self.files.truncate(last.start_offset() + pos as u64)?;
            }
            if keeps_real_unit {
                break;
            }
            // Nothing real left in this file: drop it and look at the previous one. Fillers
            // only open a queue's first file, so a queue left with fillers alone is empty and
            // is recreated, fillers included, by its next put.
            self.files.remove_last()?;
            if self.files.file_count() == 0 {
                self.min_logic_offset.store(0, Ordering::Release);
            }
        }
        self.max_physic_offset.store(self.last_real_unit_end(), Ordering::Release);
        Ok(())
    }

    fn last_real_unit_end(&self) -> i64 {
        for f in self.files.files().iter().rev() {
            let data = f.readable_from(0);
            let mut pos = data.len() / CQ_UNIT_SIZE * CQ_UNIT_SIZE;
            while pos >= CQ_UNIT_SIZE {
                pos -= CQ_UNIT_SIZE;
                let u = CqUnit::decode(&data[pos..pos + CQ_UNIT_SIZE]);
                if u.is_valid() && u != CqUnit::FILLER {
                    return u.phy_offset.saturating_add(u.size as i64);
                }
            }
        }
        -1
    }

    /// Moves the minimum past units whose record is gone (the CommitLog now starts at
    /// `cl_min`).
    pub fn correct_min_offset(&self, cl_min: i64) {
        let min = self.min_logic_offset.load(Ordering::Acquire);
        let mut at = min;
        let max = self.files.max_offset();
        while at < max {
            let Some(u) = self.get((at / CQ_UNIT_SIZE as u64) as i64) else { break };
            if u != CqUnit::FILLER && u.phy_offset >= cl_min {
                break;
            }
            at += CQ_UNIT_SIZE as u64;
        }
        if at != min {
            self.min_logic_offset.store(at, Ordering::Release);
        }
    }

    /// Deletes whole files whose units all point below `cl_min`; returns how many.
    pub fn delete_expired(&self, cl_min: i64) -> io::Result<usize> {
        let mut n = 0;
        loop {
            let removed = self.files.remove_first_if(|f| {
                let data = f.readable_from(0);
                if data.len() < f.size() || data.len() < CQ_UNIT_SIZE {
                    return false; // not full
                }
                let last = CqUnit::decode(&data[data.len() / CQ_UNIT_SIZE * CQ_UNIT_SIZE - CQ_UNIT_SIZE..]);
                let expired = last.phy_offset.saturating_add(last.size as i64) <= cl_min;
                if expired {
                    // Raise the minimum before the file leaves the list, so a reader never
                    // finds an offset at or above the minimum without its unit.
                    self.min_logic_offset.fetch_max(f.end_offset(), Ordering::AcqRel);
                }
                expired
            })?;
            if removed.is_none() {
                break;
            }
            n += 1;
        }
        if n > 0 {
            let first = self.files.min_offset().max(0) as u64;
            if self.min_logic_offset.load(Ordering::Acquire) < first {
                self.min_logic_offset.store(first, Ordering::Release);
            }
        }
        self.correct_min_offset(cl_min);
        Ok(n)
    }

    pub fn flush(&self, least_pages: usize) -> io::Result<u64> {
        self.files.flush(least_pages)
    }

    /// Flushes every unit written so far, across files (`flush` does one file per call).
    pub fn flush_all(&self) -> io::Result<u64> {
        self.files.flush_all()
    }

    /// Deletes every file (the queue is rebuilt from the CommitLog).
    pub fn destroy(&self) -> io::Result<()> {
        self.files.destroy_all()?;
        self.max_physic_offset.store(-1, Ordering::Release);
        self.min_logic_offset.store(0, Ordering::Release);
        Ok(())
    }
}

/// All ConsumeQueues of a store.
pub struct ConsumeQueueStore {
    root: PathBuf,
    file_size: usize,
    queues: RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>,
    /// A ConsumeQueue or index flush failed since the store opened (see `flush_logics`).
    flush_failed: std::sync::atomic::AtomicBool,
    /// Test hook: the next flush round fails.
    fail_next_flush: std::sync::atomic::AtomicBool,
    /// The root directory, open since the store opened: a `syncfs` through it reports every
    /// writeback error on its file system not reported before (see `sync_file_system`).
    root_dir: Option<std::fs::File>,
}

/// Whether `topic` is a single directory name (see `ConsumeQueueStore::find_or_create`): not
/// empty, `.` or `..`, without a `/` or a NUL, and at most 255 bytes (`NAME_MAX`; a longer
/// one fails every attempt to make its directory, and a record's topic field can hold 32,767).
pub(crate) fn names_one_directory(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= 255
        && topic != "."
        && topic != ".."
        && !topic.bytes().any(|b| b == b'/' || b == 0)
}

impl ConsumeQueueStore {
    /// Opens every queue under `root` (`<topic>/<queueId>/` directories).
    pub fn load(root: &Path, file_size: usize) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let mut queues: HashMap<String, HashMap<i32, Arc<ConsumeQueue>>> = HashMap::new();
        for topic_entry in std::fs::read_dir(root)? {
            let topic_entry = topic_entry?;
            // Through a symlink too (a topic's queues moved to another disk): skipped, its
            // queues were opened later, unrecovered, with every file taken as full.
            if !std::fs::metadata(topic_entry.path()).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let Some(topic) = topic_entry.file_name().to_str().map(str::to_string) else { continue };
            for q in std::fs::read_dir(topic_entry.path())? {
                let q = q?;
                let Some(qid) = q.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
                let cq = ConsumeQueue::open(root, &topic, qid, file_size)?;
                queues.entry(topic.clone()).or_default().insert(qid, Arc::new(cq));
            }
        }
        Ok(ConsumeQueueStore {
            root: root.to_path_buf(),
            file_size,
            queues: RwLock::new(queues),
            flush_failed: Default::default(),
            fail_next_flush: Default::default(),
            root_dir: std::fs::File::open(root).ok(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Syncs the file system of the queues as a whole (`syncfs`): every queue's pages, and
    /// the names of their new files and directories, with one sync where a sync per file took
    /// 0.2 ms each (4 s for 20,000 queues here). Through a descriptor open since the store
    /// opened, it fails on any writeback error on that file system not reported through a
    /// `syncfs` before (possibly older than the store, or in another program's file): a flush
    /// may then count as failed that was not, never the other way. `Ok(false)` where that
    /// cannot be done or proves too little (an older kernel, FUSE, overlayfs; see
    /// `mapped_file::syncfs_reports_errors`): the caller syncs each file.
    pub fn sync_file_system(&self) -> io::Result<bool> {
        match &self.root_dir {
            Some(d) => super::mapped_file::sync_file_system(d, &self.root),
            None => Ok(false),
        }
    }

    /// The queue, if it exists.
    pub fn find(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.read().unwrap_or_else(|e| e.into_inner()).get(topic)?.get(&queue_id).cloned()
    }

    /// The queue, created if missing. A topic that cannot be one directory name under the
    /// ConsumeQueue root (empty, `.`, `..`, a `/` or a NUL, over 255 bytes) is refused: puts allow only
    /// RocketMQ's topic characters, but a record replicated from another master, or one
    /// written by an older version, must not make a directory anywhere else.
    pub fn find_or_create(&self, topic: &str, queue_id: i32) -> io::Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.find(topic, queue_id) {
            return Ok(q);
        }
        if !names_one_directory(topic) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("topic {topic:?} cannot name a ConsumeQueue directory"),
            ));
        }
        let mut all = self.queues.write().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = all.get(topic).and_then(|m| m.get(&queue_id)) {
            return Ok(q.clone());
        }
        let q = Arc::new(ConsumeQueue::open(&self.root, topic, queue_id, self.file_size)?);
        all.entry(topic.to_string()).or_default().insert(queue_id, q.clone());
        Ok(q)
    }

    /// Whether a ConsumeQueue or index flush failed since the store opened: after a failed
    /// writeback the kernel marks the pages clean, so no later flush proves they reached the
    /// disk, and the checkpoint may claim nothing more until a restart.
    pub fn flush_failed(&self) -> bool {
        self.flush_failed.load(Ordering::Acquire)
    }

    pub(crate) fn set_flush_failed(&self) {
        self.flush_failed.store(true, Ordering::Release);
    }

    /// Test hook: the next ConsumeQueue flush round fails as if the disk had.
    #[doc(hidden)]
    pub fn inject_flush_failure(&self) {
        self.fail_next_flush.store(true, Ordering::Release);
    }

    pub(crate) fn take_injected_flush_failure(&self) -> bool {
        self.fail_next_flush.swap(false, Ordering::AcqRel)
    }

    /// Takes every queue of `topic` out of the table (the caller destroys them).
    pub fn remove_topic(&self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        let removed = self.queues.write().unwrap_or_else(|e| e.into_inner()).remove(topic);
        let mut queues: Vec<_> = removed.into_iter().flat_map(|m| m.into_values()).collect();
        queues.sort_by_key(|q| q.queue_id());
        queues
    }

    /// Every queue.
    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// The queues of `topic`.
    pub fn queues_of(&self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The queue ids of a topic, in order.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    /// The highest indexed CommitLog end over every queue (where dispatch resumes).
    pub fn max_physic_offset(&self) -> i64 {
        self.all().iter().map(|q| q.max_physic_offset()).max().unwrap_or(-1)
    }

    /// topic -> (messages ever put, CommitLog bytes indexed since the queues were opened),
    /// over every queue of the topic (stats: `TOPIC_PUT_NUMS`, `TOPIC_PUT_SIZE`).
    pub fn topic_totals(&self) -> HashMap<String, (u64, u64)> {
        let mut t: HashMap<String, (u64, u64)> = HashMap::new();
        for q in self.all() {
            let e = t.entry(q.topic().to_string()).or_default();
            e.0 += q.max_offset_in_queue().max(0) as u64;
            e.1 += q.indexed_bytes();
        }
        t
    }

    /// topic -> queue -> next queue offset, for the put path.
    pub fn queue_offset_table(&self) -> HashMap<String, HashMap<i32, i64>> {
        let mut t: HashMap<String, HashMap<i32, i64>> = HashMap::new();
        for q in self.all() {
            t.entry(q.topic().to_string()).or_default().insert(q.queue_id(), q.max_offset_in_queue());
        }
        t
    }

    /// Deletes every queue.
    pub fn destroy_all(&self) -> io::Result<()> {
        for q in self.all() {
            q.destroy()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: i64) -> CqUnit {
        CqUnit { phy_offset: i * 100, size: 100, tags_code: i }
    }

    /// A new queue's first file is named without a directory sync on the dispatcher's
    /// thread (one per new queue held every queue's dispatch up; scale audit): the queue
    /// hands its directory, and the topic directory and root it made, to the flusher, once.
    /// A record's topic field can hold 32,767 bytes; a directory name only 255. Such a topic
    /// failed every attempt to make its directory with an error the dispatcher retried for
    /// good, stopping dispatch of every topic.
    #[test]
    fn a_topic_longer_than_a_directory_name_is_invalid_input() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConsumeQueueStore::load(dir.path(), 20 * CQ_UNIT_SIZE).unwrap();
        let err = store.find_or_create(&"x".repeat(256), 0).err().expect("a 256-byte name");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert!(store.find_or_create(&"x".repeat(255), 0).is_ok());
    }

    #[test]
    fn a_new_queue_leaves_its_directory_syncs_to_the_flusher() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
        let q = store.find_or_create("T", 3).unwrap();
        let mut last = None;
        q.put(&mut last, unit(0), 0).unwrap();
        let mut dirs = std::collections::BTreeSet::new();
        q.files().take_unsynced_dirs(&mut dirs);
        let root = dir.path().to_path_buf();
        let want: std::collections::BTreeSet<_> =
            [root.clone(), root.join("T"), root.join("T").join("3")].into();
        assert_eq!(dirs, want);
        let mut again = std::collections::BTreeSet::new();
        q.files().take_unsynced_dirs(&mut again);
        assert!(again.is_empty(), "{again:?}");
        // A queue loaded from an existing directory has nothing new until it makes a file.
        drop((q, last, store));
        let store = ConsumeQueueStore::load(dir.path(), 20 * 100).unwrap();
        let q = store.find("T", 3).unwrap();
        q.files().take_unsynced_dirs(&mut again);
        assert!(again.is_empty(), "{again:?}");
    }

    /// A kept last file is dropped as soon as the file list changes: units go where their
    /// queue offset says across file rolls, a truncation, and the queue's destruction.
    #[test]
    fn put_follows_rolls_truncation_and_destroy_with_a_kept_file() {
        let dir = tempfile::tempdir().unwrap();
        let q = ConsumeQueue::open(dir.path(), "T", 0, 3 * CQ_UNIT_SIZE).unwrap();
        let mut current = None;
        for i in 0..10 {
            q.put(&mut current, unit(i), i).unwrap();
        }
        assert_eq!(q.files().file_count(), 4);
        assert_eq!(q.max_offset_in_queue(), 10);
        for i in 0..10 {
            assert_eq!(q.get(i), Some(unit(i)), "unit {i}");
        }

        // Cut back to 5 units (two files left, the last half full); the cached file was the
        // fourth, now gone.
        q.truncate_dirty(unit(5).phy_offset).unwrap();
        assert_eq!(q.max_offset_in_queue(), 5);
        for i in 5..8 {
            let u = CqUnit { tags_code: 1000 + i, ..unit(i) };
            q.put(&mut current, u, i).unwrap();
            assert_eq!(q.get(i), Some(u), "unit {i} after the truncation");
        }
        assert_eq!(q.get(4), Some(unit(4)));
        assert_eq!(q.max_offset_in_queue(), 8);

        // Emptied, the queue starts again mid-stream, behind fillers, in a new first file.
        q.destroy().unwrap();
        q.put(&mut current, unit(40), 40).unwrap();
        assert_eq!(q.get(40), Some(unit(40)));
        assert_eq!(q.get(39), Some(CqUnit::FILLER));
        assert_eq!(q.min_offset_in_queue(), 40);
        assert_eq!(q.max_offset_in_queue(), 41);
    }

    /// QUERY_CONSUME_QUEUE's read: from the unit asked to the end of its file (RocketMQ's
    /// `getIndexBuffer`), at most `max`; nothing below the minimum, past the last unit, or
    /// behind a mid-file start's fillers.
    #[test]
    fn units_in_file_stop_at_the_file_end_and_the_queue_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let q = ConsumeQueue::open(dir.path(), "T", 0, 4 * CQ_UNIT_SIZE).unwrap();
        let mut current = None;
        for i in 0..10 {
            q.put(&mut current, unit(i), i).unwrap();
        }
        let got = |index: i64, max: usize| q.units_in_file_from(index, max);
        assert_eq!(got(1, 100), Some((1..4).map(unit).collect()));
        assert_eq!(got(4, 2), Some(vec![unit(4), unit(5)]));
        assert_eq!(got(9, 5), Some(vec![unit(9)]));
        assert_eq!(got(3, 0), Some(vec![]));
        assert_eq!(got(10, 1), None);
        assert_eq!(got(-1, 1), None);
        assert_eq!(got(i64::MAX, 1), None);
        // Retention moved the minimum to 3: the units below it are not answered.
        q.correct_min_offset(unit(3).phy_offset);
        assert_eq!(q.min_offset_in_queue(), 3);
        assert_eq!(got(2, 1), None);
        assert_eq!(got(3, 100), Some(vec![unit(3)]));

        q.destroy().unwrap();
        q.put(&mut current, unit(41), 41).unwrap();
        assert_eq!(got(40, 1), None, "a filler");
        assert_eq!(got(41, 9), Some(vec![unit(41)]));
    }
}
