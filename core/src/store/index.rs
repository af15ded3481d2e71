//! IndexFile: a hash index from `topic#key` to physical offsets (spec 4.2), so messages can
//! be found by their keys and unique key. Built by the dispatcher (the only writer); queried
//! concurrently. Slots and header fields are rewritten in place, so they are read and written
//! as atomics; entries are append-only and published before the slot that points at them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use super::checkpoint::StoreCheckpoint;
use super::mapped_file::{MappedFile, RESERVE_CHUNK};
use crate::message::DispatchRequest;
use crate::message::hash::java_string_hash;
use crate::message::sysflag;

/// Bytes of the header.
pub const INDEX_HEADER_SIZE: usize = 40;
/// Bytes of a hash slot.
pub const HASH_SLOT_SIZE: usize = 4;
/// Bytes of an entry.
pub const INDEX_ENTRY_SIZE: usize = 20;

/// `abs(hashCode)` as RocketMQ computes it (`abs(MIN_VALUE)` is 0 there).
pub fn index_key_hash(key: &str) -> i32 {
    let h = java_string_hash(key);
    if h == i32::MIN { 0 } else { h.abs() }
}

/// One index file.
pub struct IndexFile {
    file: Arc<MappedFile>,
    slot_num: usize,
    index_num: usize,
}

impl IndexFile {
    fn size_for(slot_num: usize, index_num: usize) -> usize {
        INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
    }

    fn entries_start(&self) -> usize {
        INDEX_HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE
    }

    fn create(
        dir: &Path,
        name: &str,
        slot_num: usize,
        index_num: usize,
        begin_phy: i64,
        begin_ts: i64,
    ) -> io::Result<Self> {
        let size = Self::size_for(slot_num, index_num);
        // The header and the hash slots (written anywhere) reserved now, the entries (written
        // in order) as they come: at the defaults the file is 420 MB, of which 20 MB is slots.
        let entries_start = INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE;
        let file = Arc::new(
            MappedFile::create_reserving(dir, name, 0, size, entries_start + RESERVE_CHUNK)?
                .without_descriptor(),
        );
        // The header and slots are written anywhere: fault them in one page at a time. (The
        // entries, written in order, keep the read-around.)
        file.advise_random_head(entries_start);
        let idx = IndexFile { file, slot_num, index_num };
        idx.file.reset_positions(idx.entries_start() + INDEX_ENTRY_SIZE);
        idx.set_i64(16, begin_phy);
        idx.set_i64(24, begin_phy);
        idx.set_i64(0, begin_ts);
        idx.set_i64(8, begin_ts);
        idx.set_i32(36, 1);
        Ok(idx)
    }

    fn open(path: &Path, slot_num: usize, index_num: usize) -> io::Result<Self> {
        let size = Self::size_for(slot_num, index_num);
        let file = Arc::new(MappedFile::open(path, 0, size)?.without_descriptor());
        let idx = IndexFile { file, slot_num, index_num };
        // A header no writer leaves (bit rot, a partial copy): trusting it, a zero count made
        // the writer start again over the file's entries, and a begin offset past the log's
        // end had recovery delete the file as one written after the log's end.
        let (count, begin, end) = (idx.get_i32(36), idx.begin_phy_offset(), idx.end_phy_offset());
        if count < 1 || count as usize > index_num || begin < 0 || begin > end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "its header is damaged: {count} entries (1 to {index_num}), records from CommitLog offset \
                     {begin} to {end}"
                ),
            ));
        }
        idx.file.reset_positions(idx.entries_start() + count as usize * INDEX_ENTRY_SIZE);
        Ok(idx)
    }

    fn get_i64(&self, pos: usize) -> i64 {
        u64::from_be(self.file.atomic_u64(pos).load(Ordering::Acquire)) as i64
    }
    fn set_i64(&self, pos: usize, v: i64) {
        self.file.atomic_u64(pos).store((v as u64).to_be(), Ordering::Release);
    }
    fn get_i32(&self, pos: usize) -> i32 {
        u32::from_be(self.file.atomic_u32(pos).load(Ordering::Acquire)) as i32
    }
    fn set_i32(&self, pos: usize, v: i32) {
        self.file.atomic_u32(pos).store((v as u32).to_be(), Ordering::Release);
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
    pub fn begin_timestamp(&self) -> i64 {
        self.get_i64(0)
    }
    pub fn end_timestamp(&self) -> i64 {
        self.get_i64(8)
    }
    pub fn begin_phy_offset(&self) -> i64 {
        self.get_i64(16)
    }
    pub fn end_phy_offset(&self) -> i64 {
        self.get_i64(24)
    }
    pub fn hash_slot_count(&self) -> i32 {
        self.get_i32(32)
    }
    /// Entries written plus one (entry 0 is never used).
    pub fn index_count(&self) -> i32 {
        let c = self.get_i32(36);
        if c <= 0 { 1 } else { c }
    }
    pub fn is_full(&self) -> bool {
        self.index_count() as usize >= self.index_num
    }

    fn slot_pos(&self, hash: i32) -> usize {
        INDEX_HEADER_SIZE + (hash as usize % self.slot_num) * HASH_SLOT_SIZE
    }

    /// Reserves the disk blocks of the next `n` entries (as many as fit), so that none of
    /// them writes into a hole: through the mapping, on a full disk, that raises SIGBUS. A
    /// file opened from disk has nothing counted as reserved, and its first call reserves
    /// from the start (blocks that hold data already cost nothing).
    fn reserve_entries(&self, n: usize) -> io::Result<()> {
        let count = self.index_count() as usize;
        let end = self.entries_start() + count.saturating_add(n).min(self.index_num) * INDEX_ENTRY_SIZE;
        self.file.reserve_through(end).map_err(|e| {
            io::Error::new(e.kind(), format!("reserving disk space in {}: {e}", self.path().display()))
        })
    }

    /// How many more entries the file takes.
    fn room(&self) -> usize {
        self.index_num.saturating_sub(self.index_count() as usize)
    }

    /// Adds `key` → `phy_offset`; false if the file is full. The entry's blocks must be
    /// reserved (`reserve_entries`).
    ///
    /// Publication order, which `select` relies on: the entry's bytes, then the write
    /// position, then the slot (Release), then the header's count (Release). A reader that
    /// sees the slot pointing at an entry therefore sees the entry, even while the count still
    /// says it is not there.
    fn put_key(&self, key: &str, phy_offset: i64, store_timestamp: i64) -> bool {
        let count = self.index_count();
        if count as usize >= self.index_num {
            return false;
        }
        if count == 1 {
            // The file's first entry: its begin fields are this record's, set before the
            // entry's time offset is taken from them. (RocketMQ takes the offset from the
            // previous file's end timestamp, which a rolled-over file starts with, and only
            // then moves the begin: the first entry then reads as stored in the future.)
            self.set_i64(16, phy_offset);
            self.set_i64(0, store_timestamp);
        }
        let hash = index_key_hash(key);
        let slot_pos = self.slot_pos(hash);
        let mut prev = self.get_i32(slot_pos);
        // Entries are 1..count-1: a slot at `count` (a crash between the slot and the count)
        // names the entry this put is about to write over, which would point at itself.
        if prev <= 0 || prev >= count {
            prev = 0;
        }
        let begin = self.begin_timestamp();
        let diff = if begin <= 0 {
            0
        } else {
            (store_timestamp.saturating_sub(begin) / 1000).clamp(0, i32::MAX as i64)
        };
        let pos = self.entries_start() + count as usize * INDEX_ENTRY_SIZE;
        debug_assert!(self.file.reserved() >= pos + INDEX_ENTRY_SIZE, "entry not reserved");
        self.file.write_region(pos, INDEX_ENTRY_SIZE, |b| {
            b[..4].copy_from_slice(&hash.to_be_bytes());
            b[4..12].copy_from_slice(&phy_offset.to_be_bytes());
            b[12..16].copy_from_slice(&(diff as i32).to_be_bytes());
            b[16..20].copy_from_slice(&prev.to_be_bytes());
        });
        self.file.set_wrote_position(pos + INDEX_ENTRY_SIZE);
        self.set_i32(slot_pos, count);
        if prev == 0 {
            self.set_i32(32, self.hash_slot_count() + 1);
        }
        self.set_i64(24, phy_offset);
        // The latest time of any entry: after the clock went back, the last entry's is not.
        self.set_i64(8, store_timestamp.max(self.end_timestamp()));
        #[cfg(test)]
        tests::between_slot_and_count();
        self.set_i32(36, count + 1);
        true
    }

    /// Whether the file's time range overlaps `[begin, end]`.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.begin_timestamp(), self.end_timestamp());
        (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
    }

    /// Offsets of entries for `key`'s hash stored in `[begin, end]`, newest first, given to
    /// `f` until it returns false. False if `f` asked to stop.
    ///
    /// The slot is read before the count: the writer publishes an entry's slot before the
    /// count that includes it (see `put_key`), so an entry the slot names is accepted up to
    /// and including the count read after it. Reading the count first, as RocketMQ does,
    /// missed the newest entry of a key (and so the whole chain behind it) whenever a query
    /// ran between the writer's two stores.
    fn select(&self, key: &str, begin: i64, end: i64, f: &mut dyn FnMut(i64) -> bool) -> bool {
        let hash = index_key_hash(key);
        let mut no = self.get_i32(self.slot_pos(hash));
        let count = self.index_count();
        let file_begin = self.begin_timestamp();
        if no > count {
            return true; // a slot pointing past every entry: damaged, nothing to follow
        }
        while no > 0 {
            let pos = self.entries_start() + no as usize * INDEX_ENTRY_SIZE;
            let Some(e) = self.file.read(pos, INDEX_ENTRY_SIZE) else { break };
            let h = i32::from_be_bytes(e[..4].try_into().unwrap_or_default());
            let phy = i64::from_be_bytes(e[4..12].try_into().unwrap_or_default());
            let diff = i32::from_be_bytes(e[12..16].try_into().unwrap_or_default()) as i64;
            let prev = i32::from_be_bytes(e[16..20].try_into().unwrap_or_default());
            // Kept in whole seconds from the file's begin, rounded down: the entry was stored
            // within the second from `ts` (the caller checks the message's own time).
            let ts = file_begin.saturating_add(diff * 1000);
            let latest = ts.saturating_add(999);
            if h == hash && latest >= begin && ts <= end && !f(phy) {
                return false;
            }
            // Chains run from newer entries to older ones: anything else is damage, and
            // stopping there also bounds the walk.
            if prev <= 0 || prev >= no || latest < begin {
                break;
            }
            no = prev;
        }
        true
    }

    fn flush(&self) -> io::Result<()> {
        // The header and slots are rewritten anywhere: flush the whole file.
        self.file.set_flushed_position(0);
        self.file.flush(0).map(|_| ())
    }
}

/// Settings of the index.
#[derive(Debug, Clone)]
pub struct IndexOptions {
    pub slot_num: usize,
    pub index_num: usize,
    pub max_msgs_num_batch: usize,
}

/// All index files, oldest first.
pub struct IndexService {
    dir: PathBuf,
    opts: IndexOptions,
    files: RwLock<Vec<Arc<IndexFile>>>,
    checkpoint: Arc<StoreCheckpoint>,
    /// Lowest CommitLog offset indexed by a file that load destroyed: dispatch must start
    /// there or the rebuilt index misses what those files held.
    rebuild_from: Option<u64>,
    /// The threads flushing full files, joined by `join_flushers` (at shutdown): one left
    /// running could write the checkpoint after the store closed, over a store reopened
    /// since in the same process, and kept its 400 MB file mapped.
    flushers: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// A full file's flush failed (or could not be started): the checkpoint's index timestamp
    /// stays where it is, and the store reports a failed index flush (see `flush_failed`).
    flush_failed: Arc<std::sync::atomic::AtomicBool>,
}

/// What load needs of an index file's 40-byte header (the same whatever the file's slot and
/// entry counts), read once: whether it is all zeros or unreadable (`blank`), and its begin
/// and end CommitLog offsets (0 where unreadable or negative).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct HeaderInfo {
    blank: bool,
    begin: u64,
    end: u64,
}

fn header_info(path: &Path) -> HeaderInfo {
    use std::io::Read;
    let mut header = [0u8; 40];
    match std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header)) {
        Ok(()) => {
            let at =
                |i: usize| i64::from_be_bytes(header[i..i + 8].try_into().unwrap_or_default()).max(0) as u64;
            HeaderInfo { blank: header.iter().all(|&b| b == 0), begin: at(16), end: at(24) }
        }
        Err(_) => HeaderInfo { blank: true, begin: 0, end: 0 },
    }
}

impl IndexService {
    /// Loads the index files. After an unclean exit, files that may hold entries newer than
    /// the checkpoint's index timestamp are destroyed (dispatch rebuilds them).
    pub fn load(
        dir: &Path,
        opts: IndexOptions,
        checkpoint: Arc<StoreCheckpoint>,
        last_exit_ok: bool,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut names: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(n) = name.to_str() else { continue };
            if n.ends_with(".creating") {
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            if n.len() == 17 && n.bytes().all(|b| b.is_ascii_digit()) {
                names.push(e.path());
            }
        }
        // In the order they were written: by the CommitLog offset their records begin at. Not
        // by name, as RocketMQ loads them: a name is the local time the file was made, which
        // a DST fall-back or a clock stepped back puts out of order, and the checks below
        // (and where dispatch goes on indexing) assume the last file is the newest. A file
        // whose header is all zeros (made just before a power loss, its header never written
        // back) goes last, by name: sorted first by its begin of 0, it was refused there and
        // every good file after it was destroyed and indexed again from the log's start.
        let mut names: Vec<(HeaderInfo, PathBuf)> = names.into_iter().map(|p| (header_info(&p), p)).collect();
        names.sort();
        let count = names.len();
        let names = names.into_iter().enumerate();
        let mut files = Vec::new();
        let mut rebuild_from: Option<u64> = None;
        let index_ts = checkpoint.get().index_msg_timestamp;
        for (i, (header, p)) in names {
            let f = match IndexFile::open(&p, opts.slot_num, opts.index_num) {
                Ok(f) => f,
                Err(e) => {
                    // Typically written with other maxHashSlotNum / maxIndexNum values, so its
                    // slots and entries cannot be found. Its header still says where its
                    // records began: dispatch indexes them again from there. A damaged header
                    // may not (a begin past its end, or all zeros): then from the previous
                    // file's end, where this one began, or from the log's start.
                    let HeaderInfo { blank, begin, end } = header;
                    let prev_end = files.last().map(|f: &Arc<IndexFile>| f.end_phy_offset().max(0) as u64);
                    let begin = if begin > end || blank {
                        prev_end.unwrap_or(0)
                    } else {
                        begin.min(prev_end.unwrap_or(begin))
                    };
                    tracing::warn!(
                        "index file {} cannot be used ({e}); deleting it, dispatch indexes its records again \
                         from CommitLog offset {begin}",
                        p.display()
                    );
                    rebuild_from = Some(rebuild_from.map_or(begin, |r| r.min(begin)));
                    let _ = std::fs::remove_file(&p);
                    continue;
                }
            };
            if let Some(from) = rebuild_from {
                // An earlier file was dropped, and dispatch indexes again from where it began.
                // A later file kept would make that rebuild skip everything below its end
                // (already indexed, as far as it can tell), so the dropped file's keys would
                // stay lost: the later files are rebuilt too.
                tracing::info!(
                    "destroying index file {} too: dispatch indexes again from CommitLog offset {from}",
                    p.display()
                );
                f.file.destroy()?;
                continue;
            }
            // The last file, not full, was never flushed whole: its end time does not show it
            // when the clock went back since the checkpoint's (it starts with the previous
            // file's end, and keeps the latest), and a power loss may have kept its header
            // without its entries.
            let unflushed_last = i + 1 == count && !f.is_full();
            if !last_exit_ok && (f.end_timestamp() > index_ts || unflushed_last) {
                tracing::info!("unclean exit: destroying index file {} (rebuilt by dispatch)", p.display());
                let begin = f.begin_phy_offset().max(0) as u64;
                rebuild_from = Some(rebuild_from.map_or(begin, |r| r.min(begin)));
                f.file.destroy()?;
                continue;
            }
            files.push(Arc::new(f));
        }
        Ok(IndexService {
            dir: dir.to_path_buf(),
            opts,
            files: RwLock::new(files),
            checkpoint,
            rebuild_from,
            flushers: std::sync::Mutex::new(Vec::new()),
            flush_failed: Arc::default(),
        })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where dispatch must start at the latest so that the index files destroyed by `load`
    /// (after an unclean exit) are rebuilt whole; `None` if none were.
    pub fn rebuild_from(&self) -> Option<u64> {
        self.rebuild_from
    }

    fn last_file(&self) -> io::Result<Arc<IndexFile>> {
        let last = self.files.read().unwrap_or_else(|e| e.into_inner()).last().cloned();
        match last {
            Some(f) if !f.is_full() => Ok(f),
            prev => self.roll(prev),
        }
    }

    /// A new last file after `prev` (a full file, or one too full for a record's keys).
    fn roll(&self, prev: Option<Arc<IndexFile>>) -> io::Result<Arc<IndexFile>> {
        let (begin_phy, begin_ts) =
            prev.as_ref().map(|p| (p.end_phy_offset(), p.end_timestamp())).unwrap_or((0, 0));
        let name = self.new_name();
        let f = Arc::new(IndexFile::create(
            &self.dir,
            &name,
            self.opts.slot_num,
            self.opts.index_num,
            begin_phy,
            begin_ts,
        )?);
        self.files.write().unwrap_or_else(|e| e.into_inner()).push(f.clone());
        if let Some(p) = prev {
            // The full file is final: flush it off the dispatch thread and record its end in
            // the checkpoint, after the previous full file's flush (the checkpoint claims every
            // file up to its timestamp), and only while no such flush has failed.
            let cp = self.checkpoint.clone();
            let failed = self.flush_failed.clone();
            let mut flushers = self.flushers.lock().unwrap_or_else(|e| e.into_inner());
            // Shared with the new thread, so that a failed spawn can still join it here.
            let before = Arc::new(std::sync::Mutex::new(flushers.pop()));
            flushers.retain(|h| !h.is_finished());
            let path = p.path().to_path_buf();
            let earlier = before.clone();
            let spawned = std::thread::Builder::new().name("rmqha-index-flush".into()).spawn(move || {
                if let Some(h) = earlier.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = h.join();
                }
                #[cfg(test)]
                tests::before_flushing_a_full_file();
                if let Err(e) = p.flush() {
                    failed.store(true, std::sync::atomic::Ordering::Release);
                    tracing::error!("flushing index file {} failed: {e}", p.path().display());
                    return;
                }
                if failed.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                cp.update(|d| d.index_msg_timestamp = p.end_timestamp());
                if let Err(e) = cp.flush() {
                    tracing::warn!("writing the checkpoint failed: {e}");
                }
            });
            match spawned {
                Ok(h) => flushers.push(h),
                Err(e) => {
                    self.flush_failed.store(true, std::sync::atomic::Ordering::Release);
                    tracing::error!("cannot start the flush of full index file {}: {e}", path.display());
                    // Joined now: detached, it could write the checkpoint after the store closed.
                    if let Some(h) = before.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        let _ = h.join();
                    }
                }
            }
        }
        Ok(f)
    }

    fn new_name(&self) -> String {
        let mut name = local_time_name(super::commit_log::now_ms());
        // Names sort in the order files are made, as RocketMQ's loader expects, even when the
        // local time went back (a DST fall-back, a clock step): then the last name plus 1 ms.
        let last =
            self.files.read().unwrap_or_else(|e| e.into_inner()).last().and_then(|f| {
                f.path().file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u64>().ok())
            });
        if let Some(last) = last.filter(|&l| name.parse::<u64>().is_ok_and(|n| n <= l)) {
            name = format!("{:017}", last + 1);
        }
        // Two files in one millisecond (tiny test files): take the next free name.
        while self.dir.join(&name).exists() {
            let n: u64 = name.parse().unwrap_or(0) + 1;
            name = format!("{n:017}");
        }
        name
    }

    /// Indexes one dispatched message (dispatcher thread only).
    pub fn build_index(&self, req: &DispatchRequest<'_>) -> io::Result<()> {
        if sysflag::transaction_type(req.sys_flag) == sysflag::TRANSACTION_ROLLBACK_TYPE {
            return Ok(());
        }
        let has_keys =
            req.uniq_key.is_some() || req.keys.is_some_and(|k| k.split(' ').any(|s| !s.is_empty()));
        if !has_keys {
            return Ok(());
        }
        // Already indexed (a rebuild): everything before the last indexed record, and that
        // record itself, whose start the header keeps as its end (skipping only what lies
        // before it indexed its keys a second time). A file with no entry holds the previous
        // file's end, or 0 for the first file, where a record at 0 is new. Checked against
        // the last file before a full one is rolled: a rebuild that made a new, empty file
        // after a full one left a file that truncation did not see past (see `truncate`).
        let last = self.files.read().unwrap_or_else(|e| e.into_inner()).last().cloned();
        if let Some(f) = &last {
            let end = f.end_phy_offset();
            if req.commit_log_offset < end
                || (req.commit_log_offset == end && (end > 0 || f.index_count() > 1))
            {
                return Ok(());
            }
        }
        let mut file = match last {
            Some(f) if !f.is_full() => f,
            prev => self.roll(prev)?,
        };
        let keys = || {
            req.uniq_key
                .into_iter()
                .chain(req.keys.into_iter().flat_map(|k| k.split(' ')))
                .filter(|k| !k.is_empty())
        };
        // The record's keys go in whole or not at all: once its first entry is in, a retry
        // takes the record for indexed. So a file too full for all of them is rolled before
        // the first (a new file's creation can fail on a full disk), and every entry's blocks
        // are reserved before the first is written.
        let mut left = keys().count();
        if file.room() < left.min(self.opts.index_num.saturating_sub(1)) {
            file = self.roll(Some(file))?;
        }
        file.reserve_entries(left)?;
        let mut key = String::with_capacity(req.topic.len() + 33);
        for k in keys() {
            key.clear();
            key.push_str(req.topic);
            key.push('#');
            key.push_str(k);
            if !file.put_key(&key, req.commit_log_offset, req.store_timestamp) {
                file = self.last_file()?;
                file.reserve_entries(left)?;
                file.put_key(&key, req.commit_log_offset, req.store_timestamp);
            }
            left -= 1;
        }
        Ok(())
    }

    /// Physical offsets of messages whose `topic#key` hashes like the key's, stored within
    /// `[begin, end]` ms, newest first, given to `f` until it returns false. The caller
    /// re-checks each message's topic and keys (hashes collide) and drops repeats (a message
    /// listing the key twice, or with the key as its unique key too, has several entries).
    pub fn for_each_offset(
        &self,
        topic: &str,
        key: &str,
        begin: i64,
        end: i64,
        mut f: impl FnMut(i64) -> bool,
    ) {
        let full_key = format!("{topic}#{key}");
        let files = self.files.read().unwrap_or_else(|e| e.into_inner()).clone();
        // Every file whose time range meets the query's: RocketMQ stops at the first file that
        // began before `begin`, but after the clock went back a newer file can begin before
        // older ones end. A file costs one header check.
        for file in files.iter().rev() {
            if file.is_time_matched(begin, end) && !file.select(&full_key, begin, end, &mut f) {
                break;
            }
        }
    }

    /// The most messages a key query returns (`maxMsgsNumBatch`).
    pub fn max_query(&self) -> usize {
        self.opts.max_msgs_num_batch.max(1)
    }

    /// Waits for the threads flushing full files (shutdown, before the final checkpoint).
    pub fn join_flushers(&self) {
        let flushers = std::mem::take(&mut *self.flushers.lock().unwrap_or_else(|e| e.into_inner()));
        for h in flushers {
            let _ = h.join();
        }
    }

    /// Deletes files whose entries all point below `cl_min` (never the last one).
    pub fn delete_expired(&self, cl_min: i64) -> io::Result<usize> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while files.len() > 1 && files[0].end_phy_offset() < cl_min {
            let f = files.remove(0);
            f.file.destroy()?;
            n += 1;
        }
        Ok(n)
    }

    /// Forgets the CommitLog from `offset` on (a truncated log): files whose entries all lie
    /// at or beyond it are deleted, and the last file's end offset comes back to it, so that
    /// records written again at those offsets are indexed instead of being taken for
    /// already-indexed ones. Entries left pointing beyond `offset` are harmless: a query
    /// re-reads each message and checks its topic and keys.
    /// Files with no entry at the end go too, whatever their begin: such a file only carries
    /// the previous file's end, and kept, it hid that file, whose end stayed past the cut. A
    /// rebuild after a later crash then skipped the records written again there as indexed,
    /// and their keys were never found.
    pub fn truncate(&self, offset: i64) -> io::Result<()> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        while files.last().is_some_and(|f| f.index_count() <= 1 || f.begin_phy_offset() >= offset) {
            let f = files.pop().expect("last");
            f.file.destroy()?;
        }
        if let Some(f) = files.last() {
            // The header's end is the start of the last indexed record, and a rebuild skips
            // records up to and including it: just below the cut, so the next record (which
            // starts at `offset`) is indexed.
            if f.end_phy_offset() >= offset {
                f.set_i64(24, offset - 1);
            }
        }
        Ok(())
    }

    /// Flushes the current file.
    /// Syncs every index file's pages (see `MappedFile::sync_all_pages`).
    pub(crate) fn sync_all_pages(&self) -> io::Result<()> {
        for f in self.files.read().unwrap_or_else(|e| e.into_inner()).iter() {
            f.file.sync_all_pages()?;
        }
        Ok(())
    }

    pub fn flush(&self) -> io::Result<()> {
        let last = self.files.read().unwrap_or_else(|e| e.into_inner()).last().cloned();
        if let Some(f) = last { f.flush() } else { Ok(()) }
    }

    /// Whether flushing a full file failed, or could not be started, since the store opened:
    /// its pages may be marked clean without being on disk.
    pub fn flush_failed(&self) -> bool {
        self.flush_failed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Deletes every index file.
    pub fn destroy_all(&self) -> io::Result<()> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        for f in files.drain(..) {
            f.file.destroy()?;
        }
        Ok(())
    }

    /// The number of index files.
    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// `yyyyMMddHHmmssSSS` in local time, as RocketMQ names index files.
fn local_time_name(ms: i64) -> String {
    let secs = (ms / 1000) as libc::time_t;
    // SAFETY: localtime_r writes into our zeroed tm and reads only `secs`.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Milliseconds the thread flushing a full file waits first (a slow disk).
    static FLUSH_DELAY_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Tiny files: three entries each (RocketMQ's count starts at 1).
    fn three_per_file() -> IndexOptions {
        IndexOptions { slot_num: 8, index_num: 4, max_msgs_num_batch: 64 }
    }

    /// An empty index of three entries per file in a new directory, with its checkpoint.
    fn fresh_index() -> (tempfile::TempDir, Arc<StoreCheckpoint>, IndexOptions, IndexService) {
        let dir = tempfile::tempdir().unwrap();
        let cp = Arc::new(StoreCheckpoint::open(&dir.path().join("checkpoint")).unwrap());
        let opts = three_per_file();
        let index = IndexService::load(&dir.path().join("index"), opts.clone(), cp.clone(), true).unwrap();
        (dir, cp, opts, index)
    }

    /// Indexes keys "k0".."k{n-1}" at offsets 100, 200, ... and times 1_000_000, 1_000_001, ...
    fn index_keys(index: &IndexService, n: i64) {
        const KEYS: [&str; 7] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6"];
        for i in 0..n {
            index.build_index(&request(100 * (i + 1), KEYS[i as usize], 1_000_000 + i)).unwrap();
        }
    }

    pub(super) fn before_flushing_a_full_file() {
        let ms = FLUSH_DELAY_MS.load(std::sync::atomic::Ordering::Acquire);
        if ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }

    /// A full file whose flush failed: its pages may be marked clean without being on disk,
    /// so the checkpoint never claims it, nor any later file (flushed in order), and the
    /// store hears of it (a clean stop then keeps the abort file). Before, the failure was
    /// only logged, and the next file's flush moved the checkpoint past it (found by an
    /// audit).
    #[test]
    fn a_failed_full_file_flush_holds_the_checkpoint_and_is_reported() {
        let (_dir, cp, _opts, index) = fresh_index();
        index.build_index(&request(50, "first", 999_999)).unwrap();
        // The first file's flush fails with EIO, as a failing disk's writeback would.
        let first = index.files.read().unwrap()[0].path().to_path_buf();
        *super::super::mapped_file::tests::FAIL_FLUSH_OF.lock().unwrap() = Some(first);
        index_keys(&index, 6);
        index.join_flushers();
        assert_eq!(index.file_count(), 3, "two files filled");
        assert!(index.flush_failed());
        assert_eq!(cp.get().index_msg_timestamp, 0, "neither full file is claimed");
    }

    /// After a power loss just after a roll, the new file's header may be all zeros (named
    /// and synced, its header never written back). It goes last and alone: the good files
    /// before it are kept and dispatch indexes again only from where they end. Sorted first
    /// (by a begin of 0), it made every good file after it go too (found by an audit).
    #[test]
    fn a_blank_header_sorts_last_and_spares_the_good_files() {
        let (dir, cp, opts, index) = fresh_index();
        index_keys(&index, 7);
        index.join_flushers();
        let files = index.files.read().unwrap().clone();
        assert_eq!(files.len(), 3);
        let second_end = files[1].end_phy_offset() as u64;
        let newest = files[2].path().to_path_buf();
        drop((files, index));
        let mut bytes = std::fs::read(&newest).unwrap();
        bytes[..40].fill(0);
        std::fs::write(&newest, &bytes).unwrap();
        let index = IndexService::load(&dir.path().join("index"), opts, cp, false).unwrap();
        assert_eq!(index.file_count(), 2, "the two good files kept");
        assert_eq!(index.rebuild_from(), Some(second_end), "indexed again from where they end");
        assert_eq!(offsets(&index, "k0", 0, i64::MAX), vec![100]);
    }

    /// After an unclean exit the last file, not full, is rebuilt even when its end time is
    /// not past the checkpoint's (the clock went back: it starts with the previous file's
    /// end and keeps the latest), since it was never flushed whole.
    #[test]
    fn after_a_crash_an_unfull_last_file_is_rebuilt_whatever_its_times() {
        let (dir, cp, opts, index) = fresh_index();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            index.build_index(&request(100 * (i as i64 + 1), key, 1_000_000 + i as i64)).unwrap();
        }
        // The clock went back before the next record.
        index.build_index(&request(400, "d", 900_000)).unwrap();
        index.join_flushers();
        assert_eq!(cp.get().index_msg_timestamp, 1_000_002);
        let last = index.files.read().unwrap()[1].clone();
        assert_eq!(last.end_timestamp(), 1_000_002, "not past the checkpoint's");
        let begin = last.begin_phy_offset() as u64;
        drop((last, index));
        let index = IndexService::load(&dir.path().join("index"), opts, cp, false).unwrap();
        assert_eq!(index.file_count(), 1);
        assert_eq!(index.rebuild_from(), Some(begin));
    }

    /// A slot holding the count itself (a crash between a put's slot and its count) names an
    /// entry never written: the next entry for that slot starts a chain rather than point at
    /// itself.
    #[test]
    fn a_slot_at_the_count_is_no_previous_entry() {
        let dir = tempfile::tempdir().unwrap();
        let f = IndexFile::create(dir.path(), "20260101000000000", 8, 16, 0, 0).unwrap();
        assert!(f.put_key("x", 100, 1_000));
        let count = f.index_count();
        let slot = f.slot_pos(index_key_hash("y"));
        f.set_i32(slot, count);
        assert!(f.put_key("y", 200, 2_000));
        let entry = f.entries_start() + count as usize * INDEX_ENTRY_SIZE;
        assert_eq!(f.get_i32(entry + 16), 0, "no previous entry");
        assert_eq!(found(&f, "y", 0, i64::MAX), vec![200]);
    }

    thread_local! {
        /// Runs in `put_key` between the slot's store and the count's.
        static BETWEEN: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
    }

    pub(super) fn between_slot_and_count() {
        BETWEEN.with(|h| {
            if let Some(h) = h.borrow().as_ref() {
                h()
            }
        });
    }

    fn found(f: &IndexFile, key: &str, begin: i64, end: i64) -> Vec<i64> {
        let mut out = Vec::new();
        f.select(key, begin, end, &mut |p| {
            out.push(p);
            true
        });
        out
    }

    /// A query running while the writer has published an entry's slot but not yet the count
    /// that includes it (another thread, in a real store) must find the entry and the chain
    /// behind it. Reading the count first, it found nothing at all for the key: about one
    /// query in ten for a hot key under load.
    #[test]
    fn a_query_between_the_slot_and_the_count_finds_the_new_entry_and_the_older_ones() {
        let dir = tempfile::tempdir().unwrap();
        let f = Arc::new(IndexFile::create(dir.path(), "20261201000000000", 16, 64, 0, 1_000).unwrap());
        assert!(f.put_key("T#hot", 100, 1_000));
        assert!(f.put_key("T#hot", 200, 1_000));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (reader, out) = (f.clone(), seen.clone());
        BETWEEN.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                *out.lock().unwrap() = found(&reader, "T#hot", 0, i64::MAX);
            }))
        });
        assert!(f.put_key("T#hot", 300, 1_000));
        BETWEEN.with(|h| *h.borrow_mut() = None);
        assert_eq!(*seen.lock().unwrap(), vec![300, 200, 100]);
        assert_eq!(found(&f, "T#hot", 0, i64::MAX), vec![300, 200, 100]);
    }

    /// A file made when the previous one filled starts with the previous file's end time; its
    /// first entry's time offset must be taken from its own begin (the first record's time),
    /// or the entry reads as stored in the future and a query bounded by now misses it.
    #[test]
    fn the_first_entry_of_a_rolled_file_keeps_its_own_store_time() {
        let dir = tempfile::tempdir().unwrap();
        let prev_end = 1_700_000_000_000i64;
        let f = IndexFile::create(dir.path(), "20261201000000001", 16, 64, 4096, prev_end).unwrap();
        let stored = prev_end + 7_000;
        assert!(f.put_key("T#k", 5000, stored));
        assert_eq!(f.begin_timestamp(), stored);
        assert_eq!(found(&f, "T#k", 0, stored), vec![5000], "stored at {stored}, not later");
        assert_eq!(found(&f, "T#k", stored, stored), vec![5000]);
    }

    fn request(offset: i64, key: &'static str, store_timestamp: i64) -> DispatchRequest<'static> {
        DispatchRequest {
            topic: "T",
            queue_id: 0,
            commit_log_offset: offset,
            msg_size: 100,
            tags_code: 0,
            store_timestamp,
            consume_queue_offset: 0,
            keys: Some(key),
            uniq_key: None,
            sys_flag: 0,
            prepared_transaction_offset: 0,
        }
    }

    fn offsets(index: &IndexService, key: &str, begin: i64, end: i64) -> Vec<i64> {
        let mut out = Vec::new();
        index.for_each_offset("T", key, begin, end, |p| {
            out.push(p);
            true
        });
        out
    }

    /// Entry times are kept in whole seconds from the file's begin, rounded down: a query
    /// whose range begins inside an entry's second must still meet it (a message-id lookup
    /// starts a second before the producer's clock, which may be ahead of the broker's).
    /// After the clock went back, a newer file can begin before an older one ends: the search
    /// goes on to the older files, and a file's end time stays the latest of its entries.
    #[test]
    fn time_bounded_queries_survive_rounding_and_a_clock_stepped_back() {
        let (_dir, _cp, _opts, index) = fresh_index();
        index.build_index(&request(100, "a", 1_000_000)).unwrap();
        index.build_index(&request(200, "b", 1_010_900)).unwrap();
        assert_eq!(offsets(&index, "b", 1_010_500, i64::MAX), vec![200], "stored at 1_010_900");
        assert!(offsets(&index, "b", 1_011_000, i64::MAX).is_empty());
        // The clock goes back 8 s: the rest of this file, then a new one, get earlier times.
        index.build_index(&request(300, "c", 1_002_000)).unwrap();
        index.build_index(&request(400, "d", 1_003_000)).unwrap(); // the second file
        assert_eq!(index.file_count(), 2);
        let first = index.files.read().unwrap()[0].clone();
        assert_eq!(first.end_timestamp(), 1_010_900, "the latest entry's time, not the last one's");
        assert_eq!(offsets(&index, "b", 1_010_000, i64::MAX), vec![200], "past the newer file");
        assert_eq!(offsets(&index, "d", 1_003_000, 1_003_000), vec![400]);
        assert_eq!(offsets(&index, "a", 0, i64::MAX), vec![100]);
    }

    /// A record whose keys do not all fit in the current file goes whole into a new one, made
    /// before its first key is written: when that creation failed (a full disk), the first
    /// keys were in and the retry took the record for indexed, so its other keys were never
    /// indexed although the message had been acknowledged.
    #[test]
    fn a_records_keys_survive_a_failed_roll() {
        let (_dir, _cp, _opts, index) = fresh_index();
        index.build_index(&request(100, "a b", 1_000_000)).unwrap();
        super::super::mapped_file::fail_next_named_creation(io::Error::from_raw_os_error(libc::ENOSPC));
        let err = index.build_index(&request(200, "c d", 1_000_001)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        // Space is back: the dispatcher retries the record.
        index.build_index(&request(200, "c d", 1_000_001)).unwrap();
        for (key, at) in [("a", 100), ("b", 100), ("c", 200), ("d", 200)] {
            assert_eq!(offsets(&index, key, 0, i64::MAX), vec![at], "key {key}");
        }
        assert_eq!(index.file_count(), 2);
        // A record with more keys than a file takes spans files as before.
        index.build_index(&request(300, "e f g h", 1_000_002)).unwrap();
        for key in ["e", "f", "g", "h"] {
            assert_eq!(offsets(&index, key, 0, i64::MAX), vec![300], "key {key}");
        }
    }

    /// Truncation with an empty file at the end (rolled, then its entries' blocks could not
    /// be reserved): the file goes, and the full file before it gets its end lowered to the
    /// cut. Kept, the empty file hid the full one, whose end stayed past the cut; after a
    /// crash the file holding the keys written at the cut was rebuilt (newer than the
    /// checkpoint), and the rebuild skipped them as indexed below that stale end.
    #[test]
    fn a_cut_behind_an_empty_last_file_lowers_the_full_files_end() {
        let (dir, cp, opts, index) = fresh_index();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            index.build_index(&request(100 * (i as i64 + 1), key, 1_000_000 + i as i64)).unwrap();
        }
        let full = index.files.read().unwrap()[0].clone();
        assert!(full.is_full());
        index.roll(Some(full.clone())).unwrap();
        index.join_flushers();
        assert_eq!(cp.get().index_msg_timestamp, 1_000_002, "the full file's end, in the checkpoint");
        assert_eq!(index.file_count(), 2);
        index.truncate(200).unwrap();
        assert_eq!(index.file_count(), 1, "the empty file went");
        assert_eq!(full.end_phy_offset(), 199);
        // Written again at the cut, later in time: into a new file.
        index.build_index(&request(200, "x", 2_000_000)).unwrap();
        assert_eq!(offsets(&index, "x", 0, i64::MAX), vec![200]);
        drop(index);
        // A crash: the new file is newer than the checkpoint and is rebuilt.
        let index = IndexService::load(&dir.path().join("index"), opts, cp, false).unwrap();
        index.build_index(&request(200, "x", 2_000_000)).unwrap();
        assert_eq!(offsets(&index, "x", 0, i64::MAX), vec![200], "the key written at the cut");
    }

    /// Shutdown waits for the thread flushing a full file: left running, it wrote the
    /// checkpoint after the store had closed (over a store reopened since in the process).
    #[test]
    fn join_flushers_waits_for_the_full_files_flush() {
        let (_dir, cp, _opts, index) = fresh_index();
        FLUSH_DELAY_MS.store(300, std::sync::atomic::Ordering::Release);
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            index.build_index(&request(100 * (i as i64 + 1), key, 1_000_000 + i as i64)).unwrap();
        }
        assert_eq!(index.file_count(), 2, "the first file filled and its flush began");
        index.join_flushers();
        FLUSH_DELAY_MS.store(0, std::sync::atomic::Ordering::Release);
        assert_eq!(cp.get().index_msg_timestamp, 1_000_002, "the full file's end, in the checkpoint");
    }
}
