//! A log as a sequence of equally sized mapped files named by their start offset (spec 2.2).
//!
//! The file list is behind a read-write lock that is held only to clone an `Arc`; files are
//! read without it. New files come from an [`Allocator`] that creates (and with
//! warmMapedFileEnable pre-touches) the next file in the background, so a roll does not stall
//! the put path on creating a file.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::dirs::LogDirs;
use super::mapped_file::{MappedFile, Populate, file_name, sync_dir};

/// Creates files ahead of need on a background thread.
pub struct Allocator {
    state: Mutex<AllocState>,
    cv: Condvar,
    /// Bytes at the start of each new file faulted in ahead of use: where appends write
    /// through the mapping (a master's puts) the first pages are ready when the log rolls and
    /// the store's warmer keeps going from there; `usize::MAX` is the whole file
    /// (warmMapedFileEnable); 0 none (a slave writes replicated bytes with `pwrite`).
    pretouch: std::sync::atomic::AtomicUsize,
    /// How: `Populate::Zero` where appends use `pwrite` (a SYNC_FLUSH master).
    how: Populate,
}

impl AllocState {
    /// The path of the file for `start` being made, made or requested, in whichever directory.
    fn pending(&self, start: u64) -> Option<PathBuf> {
        let name = file_name(start);
        self.creating
            .iter()
            .chain(self.slots.keys())
            .find(|p| p.file_name().and_then(|n| n.to_str()) == Some(name.as_str()))
            .cloned()
    }
}

#[derive(Default)]
struct AllocState {
    /// Files requested and not yet taken: None while being created.
    slots: HashMap<PathBuf, Option<io::Result<Arc<MappedFile>>>>,
    queue: Vec<(PathBuf, u64, usize)>,
    /// Files an appender is waiting for: their pre-touching stops early and the rest of their
    /// pages fault in on use, rather than making the put wait for the whole file.
    wanted: std::collections::HashSet<PathBuf>,
    /// The file the allocation thread is creating now. Nobody else creates that path until
    /// it is done: two creators of one name would each rename their own file into place, and
    /// the allocator deletes a file nobody wants any more (cancelled by a truncation) by
    /// name, so an appender's file could be replaced or deleted under it.
    creating: Option<PathBuf>,
    closed: bool,
}

impl Allocator {
    /// An allocator that makes new files ready `how` (see `set_pretouch` for how much).
    pub fn new(how: Populate) -> Arc<Self> {
        Arc::new(Allocator {
            state: Mutex::new(AllocState::default()),
            cv: Condvar::new(),
            pretouch: std::sync::atomic::AtomicUsize::new(0),
            how,
        })
    }

    /// How many bytes at the start of each new file are pre-touched (see the field).
    pub fn set_pretouch(&self, bytes: usize) {
        self.pretouch.store(bytes, std::sync::atomic::Ordering::Release);
    }

    /// Asks for the file at `start` in `dir` to be created in the background, unless one for
    /// that offset is already requested, in any directory.
    pub fn request(&self, dir: &Path, start: u64, size: usize) {
        let path = dir.join(file_name(start));
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.closed || s.pending(start).is_some() || path.exists() {
            return;
        }
        s.slots.insert(path.clone(), None);
        s.queue.push((dir.to_path_buf(), start, size));
        self.cv.notify_all();
    }

    /// The file at `start`: the pre-created one if requested (waiting for it if it is being
    /// made), otherwise created now in `dir`. A file made in another directory (a log over
    /// several directories, whose choice for `start` changed since with a disk's fullness) is
    /// the one taken: two files for one offset would make the log ambiguous. One that failed
    /// there, or is still only queued, is made in `dir` instead (the caller's choice, which
    /// may be the fallback from a full disk).
    pub fn take(&self, dir: &Path, start: u64, size: usize) -> io::Result<Arc<MappedFile>> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            // Looked up on every pass: what was being made may be gone, and made again elsewhere.
            let path = s.pending(start).unwrap_or_else(|| dir.join(file_name(start)));
            let requested_in = path.parent().unwrap_or(dir).to_path_buf();
            if s.creating.as_ref() == Some(&path) {
                // Being made (perhaps for a request since cancelled): wait for it to finish.
                s.wanted.insert(path.clone());
                s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            match s.slots.get(&path) {
                Some(Some(_)) => {
                    s.wanted.remove(&path);
                    let done = s.slots.remove(&path).flatten().expect("present");
                    return match done {
                        Ok(f) if f.size() == size => Ok(f),
                        Ok(f) => {
                            // Made for another size; should not happen. Replace it.
                            let _ = f.destroy();
                            drop(s);
                            MappedFile::create(dir, start, size).map(Arc::new)
                        }
                        Err(e) => {
                            // Made while the disk was full, perhaps long ago: space may be
                            // back, so try again now rather than fail this roll on it.
                            drop(s);
                            MappedFile::create(dir, start, size).map(Arc::new).inspect_err(|_| {
                                tracing::debug!(
                                    "creating {} failed in the background ({e}), and again now",
                                    path.display()
                                );
                            })
                        }
                    };
                }
                queued_or_unrequested => {
                    // Not being made (see above): if queued, take the request over ourselves.
                    if queued_or_unrequested.is_some() {
                        s.queue.retain(|(d, st, _)| !(*d == requested_in && *st == start));
                        s.slots.remove(&path);
                    }
                    s.wanted.remove(&path);
                    drop(s);
                    return MappedFile::create(dir, start, size).map(Arc::new);
                }
            }
        }
    }

    /// Waits until no file is queued or being made (benchmarks start their clock only once
    /// the next file is ready). False on timeout.
    pub fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let deadline = crate::deadline_after(timeout);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if s.closed
                || (s.queue.is_empty() && s.creating.is_none() && s.slots.values().all(|v| v.is_some()))
            {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            s = self.cv.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// The allocation loop; run on its own thread until `close`.
    pub fn run(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if s.closed {
                return;
            }
            if s.queue.is_empty() {
                s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            let (dir, start, size) = s.queue.remove(0);
            let path = dir.join(file_name(start));
            if !matches!(s.slots.get(&path), Some(None)) {
                continue; // cancelled, or already made for an earlier request
            }
            s.creating = Some(path.clone());
            drop(s);
            let pretouch = self.pretouch.load(std::sync::atomic::Ordering::Acquire);
            let made = MappedFile::create(&dir, start, size).map(|f| {
                if pretouch > 0 {
                    let ready = f.pretouch_fresh(pretouch, self.how, || {
                        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                        !s.closed && !s.wanted.contains(&path)
                    });
                    if let Err(e) = ready {
                        // Only a head start is lost: appends write the file as they would
                        // have without it, and report a failing disk themselves.
                        tracing::warn!("writing zeros ahead into {}: {e}", path.display());
                    }
                }
                Arc::new(f)
            });
            if let Err(e) = &made {
                tracing::warn!("pre-allocating {} failed: {e}", path.display());
            }
            s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.creating = None;
            if let Some(slot @ None) = s.slots.get_mut(&path) {
                *slot = Some(made);
            } else if let Ok(f) = made {
                // Nobody wants it any more (taken over or cancelled).
                let _ = f.destroy();
            }
            self.cv.notify_all();
        }
    }

    /// Stops the loop and deletes pre-created files nobody took (they are empty, but a
    /// leftover file beyond the log's end would look like part of the log at the next load).
    pub fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.closed = true;
        s.queue.clear();
        for (_, slot) in s.slots.drain() {
            if let Some(Ok(f)) = slot {
                let _ = f.destroy();
            }
        }
        self.cv.notify_all();
    }

    /// Stops the loop and leaves pre-created files on disk, as a killed process would
    /// (`MessageStore::crash`); the next load must cope with them.
    pub(crate) fn halt(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.closed = true;
        s.queue.clear();
        self.cv.notify_all();
    }

    /// Deletes pre-created, untaken files at or beyond `start` (after a truncation), in
    /// whichever directory they were made.
    pub fn cancel_from(&self, start: u64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.queue.retain(|(_, st, _)| *st < start);
        let doomed: Vec<PathBuf> = s
            .slots
            .keys()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|o| o >= start)
            })
            .cloned()
            .collect();
        for p in doomed {
            if let Some(Some(Ok(f))) = s.slots.remove(&p) {
                let _ = f.destroy();
            }
        }
    }
}

/// The files of one log.
pub struct MappedFileQueue {
    dirs: Arc<LogDirs>,
    file_size: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    /// Bumped by every change of `files` (and by truncation), so that the put path can keep
    /// its current file without taking the lock or touching the file's reference count.
    generation: crossbeam_utils::CachePadded<AtomicU64>,
    flushed_where: AtomicU64,
    /// Held by a flush and by a truncation: a flush raises the flushed positions to the end
    /// it read before syncing, which a truncation in between would have lowered.
    flush_lock: parking_lot::Mutex<()>,
    /// Mapped-only queues (ConsumeQueues): a file was named in `dir` since its last sync, and
    /// whether `dir` itself was made (so its parents hold new names too). See `take_unsynced_dirs`.
    dir_unsynced: AtomicBool,
    dir_new: AtomicBool,
    allocator: Option<Arc<Allocator>>,
    /// Whether its files keep their descriptors (`MappedFile::without_descriptor`).
    keep_descriptors: bool,
    /// A file's flush failed (set under `flush_lock`, before the lock goes).
    flush_failed: AtomicBool,
    /// Whether every flush after a failed one is refused (`refuse_flushes_after_a_failure`).
    refuse_after_failure: AtomicBool,
    /// Test hook: the next flush fails (`inject_flush_failure`).
    fail_next_flush: AtomicBool,
}

/// Bytes of a queue's files written but not flushed, listed by `begin_flush`, for the caller
/// to sync (`syncfs`) and then record with `synced`.
pub struct PendingFlush<'a> {
    queue: &'a MappedFileQueue,
    files: Vec<(Arc<MappedFile>, usize)>,
    _no_truncation: parking_lot::MutexGuard<'a, ()>,
}

impl PendingFlush<'_> {
    /// Records the listed bytes as flushed: the caller synced their file system after
    /// `begin_flush` returned.
    pub fn synced(self) {
        let mut where_ = self.queue.flushed_where();
        for (f, pos) in &self.files {
            f.mark_flushed(*pos);
            where_ = where_.max(f.start_offset() + *pos as u64);
        }
        self.queue.set_flushed_where(where_);
    }
}

impl MappedFileQueue {
    /// Loads the files in `dir` (creating `dir` if needed). Every file must be `file_size`
    /// bytes, except that an empty last file is deleted (a crash while creating it).
    pub fn load(dir: &Path, file_size: usize, allocator: Option<Arc<Allocator>>) -> io::Result<Self> {
        Self::load_with(Arc::new(LogDirs::single(dir)), file_size, allocator, true)
    }

    /// `load` over several directories (a multi-directory CommitLog): the files of all of them
    /// make one log; writable directories are created if needed, missing read-only ones are
    /// skipped. One offset's file in two directories is an error naming both.
    pub fn load_dirs(
        dirs: Arc<LogDirs>,
        file_size: usize,
        allocator: Option<Arc<Allocator>>,
    ) -> io::Result<Self> {
        Self::load_with(dirs, file_size, allocator, true)
    }

    /// `load` for files that are only mapped, never written with `pwrite` nor sent with
    /// `sendfile` (ConsumeQueues): they keep no descriptor once mapped.
    pub fn load_mapped_only(dir: &Path, file_size: usize) -> io::Result<Self> {
        Self::load_with(Arc::new(LogDirs::single(dir)), file_size, None, false)
    }

    fn load_with(
        dirs: Arc<LogDirs>,
        file_size: usize,
        allocator: Option<Arc<Allocator>>,
        keep_descriptors: bool,
    ) -> io::Result<Self> {
        let dir_new = !dirs.primary().exists();
        let mut names: Vec<(u64, PathBuf)> = Vec::new();
        for dir in dirs.all() {
            if dirs.is_read_only(dir) {
                if !dir.exists() {
                    continue;
                }
            } else {
                std::fs::create_dir_all(dir)?;
            }
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.ends_with(".creating") {
                    // An interrupted creation: never part of the log.
                    let _ = std::fs::remove_file(entry.path());
                    continue;
                }
                if super::mapped_file::is_file_name(name) {
                    if let Ok(off) = name.parse::<u64>() {
                        names.push((off, entry.path()));
                    }
                }
            }
        }
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} and {} both hold the file at offset {}: one log's file must be in one directory \
                     (were these directories written by two brokers?)",
                    w[0].1.display(),
                    w[1].1.display(),
                    w[0].0
                ),
            ));
        }
        let mut files = Vec::with_capacity(names.len());
        let count = names.len();
        for (i, (off, path)) in names.into_iter().enumerate() {
            let len = std::fs::metadata(&path)?.len();
            if len == 0 && i + 1 == count {
                tracing::warn!("deleting empty last file {}", path.display());
                std::fs::remove_file(&path)?;
                continue;
            }
            if off % file_size as u64 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} does not start at a multiple of the file size {file_size}", path.display()),
                ));
            }
            if let Some(prev) = files.last().map(|f: &Arc<MappedFile>| f.end_offset()) {
                if prev != off {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "gap in {}: a file ends at {prev} but the next starts at {off} ({})",
                            dirs.describe(),
                            path.display()
                        ),
                    ));
                }
            }
            let file = MappedFile::open(&path, off, file_size).map_err(|e| match e.kind() {
                io::ErrorKind::InvalidData => io::Error::new(
                    e.kind(),
                    format!("{e} (is the file size key set as when the store was written?)"),
                ),
                _ => e,
            })?;
            files.push(Arc::new(if keep_descriptors { file } else { file.without_descriptor() }));
        }
        Ok(MappedFileQueue {
            dirs,
            file_size,
            files: RwLock::new(files),
            generation: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            flushed_where: AtomicU64::new(0),
            flush_lock: parking_lot::Mutex::new(()),
            dir_unsynced: AtomicBool::new(false),
            dir_new: AtomicBool::new(dir_new && !keep_descriptors),
            allocator,
            keep_descriptors,
            flush_failed: AtomicBool::new(false),
            refuse_after_failure: AtomicBool::new(false),
            fail_next_flush: AtomicBool::new(false),
        })
    }

    /// Mapped-only queues: the directories whose new names are not yet synced (this queue's
    /// directory after a file was made in it; its parent and grandparent, a ConsumeQueue's
    /// topic directory and root, after the directory itself was made), which the caller syncs
    /// before counting on those names. Each is given once; `restore_unsynced` after a failed sync.
    pub(crate) fn take_unsynced_dirs(&self, out: &mut std::collections::BTreeSet<PathBuf>) {
        if self.dir_unsynced.swap(false, Ordering::AcqRel) {
            out.insert(self.dir().to_path_buf());
        }
        if self.dir_new.swap(false, Ordering::AcqRel) {
            out.extend(self.dir().ancestors().skip(1).take(2).map(Path::to_path_buf));
        }
    }

    /// After a failed directory sync: the names are still unsynced.
    pub(crate) fn restore_unsynced(&self) {
        self.dir_unsynced.store(true, Ordering::Release);
    }

    /// The directory of a single-directory log; the first writable one of a log over several
    /// (see `dirs`).
    pub fn dir(&self) -> &Path {
        self.dirs.primary()
    }
    /// Every directory of the log and where new files go.
    pub fn dirs(&self) -> &Arc<LogDirs> {
        &self.dirs
    }
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// A snapshot of the file list.
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }
    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).first().cloned()
    }
    /// The generation of the file list (see the field); read it before `last`.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).last().cloned()
    }

    /// The file holding `offset`.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let first = files.first()?.start_offset();
        if offset < first {
            return None;
        }
        let idx = ((offset - first) / self.file_size as u64) as usize;
        files.get(idx).filter(|f| f.start_offset() <= offset && offset < f.end_offset()).cloned()
    }

    /// First offset on disk (-1 when empty, as RocketMQ).
    pub fn min_offset(&self) -> i64 {
        self.first().map(|f| f.start_offset() as i64).unwrap_or(-1)
    }

    /// End of the readable data.
    pub fn max_offset(&self) -> u64 {
        self.last().map(|f| f.start_offset() + f.wrote_position() as u64).unwrap_or(0)
    }

    pub fn flushed_where(&self) -> u64 {
        self.flushed_where.load(Ordering::Acquire)
    }
    pub fn set_flushed_where(&self, v: u64) {
        self.flushed_where.store(v, Ordering::Release);
    }

    /// A new last file starting at `start` (which must follow the current last file, or be
    /// any file-size multiple for an empty queue). Asks the allocator for the one after.
    pub fn create_file(&self, start: u64) -> io::Result<Arc<MappedFile>> {
        debug_assert_eq!(start % self.file_size as u64, 0);
        if let Some(last) = self.last() {
            if last.end_offset() != start {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "new file at {start} does not follow the last file ending at {}",
                        last.end_offset()
                    ),
                ));
            }
        }
        let dir = self.dirs.for_file(start, self.file_size);
        let file = match &self.allocator {
            Some(a) => {
                let f = self.with_space_fallback(dir, |d| a.take(d, start, self.file_size))?;
                self.request_next(f.end_offset());
                f
            }
            None if self.keep_descriptors => {
                Arc::new(self.with_space_fallback(dir, |d| MappedFile::create(d, start, self.file_size))?)
            }
            // Mapped-only files (ConsumeQueues) reserve their blocks as they fill, and are
            // faulted in page by page while few (`advise_random_while_cold`).
            None => {
                let f = MappedFile::create_reserving_with(
                    dir,
                    &super::mapped_file::file_name(start),
                    start,
                    self.file_size,
                    super::mapped_file::RESERVE_CHUNK,
                    false,
                )?
                .without_descriptor();
                self.dir_unsynced.store(true, Ordering::Release);
                f.advise_random_while_cold();
                Arc::new(f)
            }
        };
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        files.push(file.clone());
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(files);
        Ok(file)
    }

    /// `make(dir)`, and where it fails for lack of space (ENOSPC, EDQUOT) and the log has
    /// other writable directories, `make` in each of them in turn: one full disk does not stop
    /// a log that has room on another (RocketMQ waits for its disk check to mark the disk
    /// full, failing puts until then). The first error is the one returned.
    fn with_space_fallback<T>(&self, dir: &Path, make: impl Fn(&Path) -> io::Result<T>) -> io::Result<T> {
        let first = match make(dir) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if !matches!(first.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            return Err(first);
        }
        for other in self.dirs.others(dir) {
            match make(&other) {
                Ok(v) => {
                    tracing::warn!(
                        "no space for a new file in {} ({first}); made it in {} instead",
                        dir.display(),
                        other.display()
                    );
                    return Ok(v);
                }
                Err(e) => tracing::debug!("no new file in {} either: {e}", other.display()),
            }
        }
        Err(first)
    }

    /// Asks the allocator (if any) to prepare the file starting at `start` in the directory
    /// chosen for it, unless a file for that offset exists in any directory.
    pub fn request_next(&self, start: u64) {
        if let Some(a) = &self.allocator {
            let name = file_name(start);
            if self.dirs.all().any(|d| d.join(&name).exists()) {
                return;
            }
            a.request(self.dirs.for_file(start, self.file_size), start, self.file_size);
        }
    }

    /// Flushes the file holding the flushed position (one file per call, as RocketMQ); returns
    /// the new flushed position.
    pub fn flush(&self, least_pages: usize) -> io::Result<u64> {
        self.flush_aligned(least_pages, 1)
    }

    /// `flush`, each file only up to a multiple of `align` bytes (see `MappedFile::flush_aligned`).
    pub fn flush_aligned(&self, least_pages: usize, align: usize) -> io::Result<u64> {
        let _no_truncation = self.flush_lock.lock();
        if self.refuse_after_failure.load(Ordering::Acquire) && self.flush_failed.load(Ordering::Acquire) {
            return Err(io::Error::other(
                "an earlier flush of this log failed: no later sync proves its bytes on disk",
            ));
        }
        self.injected_failure()?;
        let mut where_ = self.flushed_where();
        // At or below the first file's start (a new queue, or files deleted under the flushed
        // position), the first file is next: `find` knows no file there, and the position
        // would never move again.
        let file = match self.first() {
            Some(first) if where_ <= first.start_offset() => Some(first),
            Some(_) => self.find(where_).or_else(|| self.find(where_ - 1)),
            None => None,
        };
        if let Some(f) = file {
            let pos = f.flush_aligned(least_pages, align).inspect_err(|_| {
                // Before the lock goes: another flusher waiting for it would sync the same
                // pages, which the failed writeback left marked clean, "succeed", and raise the
                // flushed position over bytes that may never have reached the disk.
                self.flush_failed.store(true, Ordering::Release);
            })?;
            where_ = where_.max(f.start_offset() + pos as u64);
            self.set_flushed_where(where_);
        }
        Ok(where_)
    }

    /// The failure `inject_flush_failure` asked for, once, counted as a real one.
    fn injected_failure(&self) -> io::Result<()> {
        if self.fail_next_flush.swap(false, Ordering::AcqRel) {
            self.flush_failed.store(true, Ordering::Release);
            return Err(io::Error::other("injected flush failure (test hook)"));
        }
        Ok(())
    }

    /// Test hook: the next flush (or truncation, which syncs its zeros) fails, as a failed
    /// sync would, under the flush lock.
    #[doc(hidden)]
    pub fn inject_flush_failure(&self) {
        self.fail_next_flush.store(true, Ordering::Release);
    }

    /// From the first failed flush on, every flush is refused and nothing more counts as
    /// flushed (the CommitLog: a failed writeback reports its error once, and marks the pages
    /// clean, so a later sync of the same bytes succeeds without writing them).
    pub fn refuse_flushes_after_a_failure(&self) {
        self.refuse_after_failure.store(true, Ordering::Release);
    }

    /// What `flush_all` would sync, for a caller that syncs it another way (one `syncfs` for
    /// thousands of queues instead of a sync per file): each file with unflushed bytes and its
    /// write position now. Truncation waits until the returned value is dropped, so nothing
    /// listed is cut in the meantime. `None` when everything written is flushed.
    pub fn begin_flush(&self) -> Option<PendingFlush<'_>> {
        let guard = self.flush_lock.lock();
        let files: Vec<_> = self
            .files()
            .into_iter()
            .filter_map(|f| {
                let wrote = f.wrote_position();
                (f.flushed_position() < wrote).then_some((f, wrote))
            })
            .collect();
        (!files.is_empty()).then_some(PendingFlush { queue: self, files, _no_truncation: guard })
    }

    /// Flushes everything written so far, across files.
    pub fn flush_all(&self) -> io::Result<u64> {
        loop {
            let before = self.flushed_where();
            let after = self.flush(0)?;
            if after >= self.max_offset() || after == before {
                return Ok(after);
            }
        }
    }

    /// Cuts the log at `offset`: files starting beyond it are deleted, and the file holding it
    /// is zeroed from there on and keeps its size. A file starting exactly at `offset` is kept
    /// empty. Nothing may read or write beyond `offset` meanwhile.
    pub fn truncate(&self, offset: u64) -> io::Result<()> {
        let _no_flush = self.flush_lock.lock();
        // The zeros of the cut are synced: an injected failure fails that sync too.
        self.injected_failure()?;
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        let mut removed_from = std::collections::BTreeSet::new();
        while let Some(last) = files.last() {
            if last.start_offset() > offset {
                let f = files.pop().expect("last");
                f.destroy()?;
                removed_from.insert(f.path().parent().unwrap_or(self.dir()).to_path_buf());
            } else {
                break;
            }
        }
        if let Some(last) = files.last() {
            last.zero_from((offset - last.start_offset()) as usize)?;
        }
        drop(files);
        if let Some(a) = &self.allocator {
            a.cancel_from(offset + 1);
        }
        if self.flushed_where() > offset {
            self.set_flushed_where(offset);
        }
        // Only a deletion changes a directory.
        removed_from.iter().try_for_each(|d| sync_dir(d))
    }

    /// Deletes every file (an empty log).
    pub fn destroy_all(&self) -> io::Result<()> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        for f in files.drain(..) {
            f.destroy()?;
        }
        self.set_flushed_where(0);
        Ok(())
    }

    /// Removes the last file from the list and deletes it.
    pub fn remove_last(&self) -> io::Result<()> {
        let f = {
            let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
            self.generation.fetch_add(1, Ordering::AcqRel);
            files.pop()
        };
        if let Some(f) = f {
            f.destroy()?;
            if self.flushed_where() > f.start_offset() {
                self.set_flushed_where(f.start_offset());
            }
        }
        Ok(())
    }

    /// Removes the first file from the list and deletes it, if `pred` agrees; retention uses it.
    pub fn remove_first_if(
        &self,
        pred: impl FnOnce(&MappedFile) -> bool,
    ) -> io::Result<Option<Arc<MappedFile>>> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        if files.len() <= 1 {
            return Ok(None); // the last (active) file is never deleted
        }
        if !pred(&files[0]) {
            return Ok(None);
        }
        let f = files.remove(0);
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(files);
        f.destroy()?;
        Ok(Some(f))
    }
}

#[cfg(test)]
mod flush_tests {
    use super::*;

    /// Files deleted under the flushed position (retention, or a slave's log replaced from
    /// its master's start): the next flush starts at the first file left.
    #[test]
    fn a_flush_goes_on_from_the_first_file_after_files_below_it_went() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 4096, None).unwrap();
        for start in [0u64, 4096, 8192] {
            let f = q.create_file(start).unwrap();
            f.pwrite_at(0, &[7u8; 4096]).unwrap();
            f.set_wrote_position(4096);
        }
        assert_eq!(q.flush(0).unwrap(), 4096);
        for _ in 0..2 {
            q.remove_first_if(|_| true).unwrap();
        }
        assert_eq!(q.flushed_where(), 4096, "below the first file, which starts at 8192");
        assert_eq!(q.flush_all().unwrap(), 12288);
        assert_eq!(q.flushed_where(), 12288);
    }

    /// A new ConsumeQueue file is mapped for random access (`VmFlags: rr` in smaps): its first
    /// unit's write fault otherwise read around it, zeroing up to `read_ahead_kb` of holes
    /// (measured on this VM: 4.9-7.2 ms per new queue on the dispatcher's thread, against
    /// 0.3-1.2 ms with the advice; scale audit).
    #[test]
    fn new_consume_queue_files_are_mapped_for_random_access() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load_mapped_only(dir.path(), 6_000_000).unwrap();
        let f = q.create_file(0).unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let start = format!("{:x}-", f.map_addr());
        let flags = |smaps: &str| {
            let at = smaps.find(&start).unwrap_or_else(|| panic!("no mapping at {start}"));
            smaps[at..].lines().find(|l| l.starts_with("VmFlags:")).unwrap().to_string()
        };
        assert!(flags(&smaps).split_whitespace().any(|w| w == "rr"), "{}", flags(&smaps));
        // A busy queue's file, past its first reserved chunk, is read around again.
        f.reserve_through(super::super::mapped_file::RESERVE_CHUNK + 1).unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        assert!(!flags(&smaps).split_whitespace().any(|w| w == "rr"), "{}", flags(&smaps));
    }

    /// tmpfs has no FALLOC_FL_ZERO_RANGE, and truncation's fallback read every page of the
    /// rest of the file through the mapping, which on tmpfs allocates the holes: a sparse
    /// ConsumeQueue file (6 MB, 64 KiB reserved) cut by recovery took all 6 MB, and on a
    /// full tmpfs the read raised SIGBUS. Found by an audit.
    #[test]
    fn truncating_a_sparse_file_on_tmpfs_leaves_its_holes() {
        use std::os::unix::fs::MetadataExt;
        let shm = Path::new("/dev/shm");
        assert!(shm.is_dir(), "this test needs /dev/shm (tmpfs)");
        let dir = tempfile::tempdir_in(shm).unwrap();
        let q = MappedFileQueue::load_mapped_only(dir.path(), 6_000_000).unwrap();
        let f = q.create_file(0).unwrap();
        f.reserve_through(2000).unwrap();
        f.write_region(0, 2000, |b| b.fill(7));
        f.set_wrote_position(2000);
        q.truncate(1000).unwrap();
        let allocated = std::fs::metadata(f.path()).unwrap().blocks() * 512;
        assert!(allocated <= 256 * 1024, "{allocated} bytes allocated");
        let mut head = [0u8; 2000];
        std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::open(f.path()).unwrap(), &mut head, 0)
            .unwrap();
        assert!(head[..1000].iter().all(|&b| b == 7) && head[1000..].iter().all(|&b| b == 0));
        assert_eq!(f.wrote_position(), 1000);
        // Past the end is refused, not published as written.
        assert!(f.zero_from(6_000_001).is_err());
        assert_eq!(f.wrote_position(), 1000);
    }

    /// A CommitLog flush that fails while another flusher waits for the queue's flush lock
    /// (a SYNC_FLUSH slave's group commit and its HA client): the waiting one synced the same
    /// pages after the lock went, which the failed writeback had left clean, succeeded, and
    /// raised the flushed position before the store was poisoned; the slave then acked the
    /// lost bytes (found by an audit). The failure is recorded under the lock now.
    #[test]
    fn after_a_failed_flush_nothing_more_counts_as_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(dir.path(), 1 << 20, None).unwrap();
        q.refuse_flushes_after_a_failure();
        let f = q.create_file(0).unwrap();
        f.write_region(0, 8192, |b| b.fill(7));
        f.set_wrote_position(8192);
        *crate::store::mapped_file::tests::FAIL_FLUSH_OF.lock().unwrap() = Some(f.path().to_path_buf());
        assert!(q.flush(0).is_err());
        let err = q.flush(0).unwrap_err().to_string();
        assert!(err.contains("earlier flush of this log failed"), "{err}");
        assert!(q.flush_all().is_err());
        assert_eq!((q.flushed_where(), f.flushed_position()), (0, 0), "nothing counts as flushed");
        // A queue that does not refuse (a ConsumeQueue's) flushes again.
        let other = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::load(other.path(), 1 << 20, None).unwrap();
        let f = q.create_file(0).unwrap();
        f.write_region(0, 8192, |b| b.fill(7));
        f.set_wrote_position(8192);
        *crate::store::mapped_file::tests::FAIL_FLUSH_OF.lock().unwrap() = Some(f.path().to_path_buf());
        assert!(q.flush(0).is_err());
        assert_eq!(q.flush(0).unwrap(), 8192);
    }

    /// A truncation while a flush syncs: the flush raised the flushed position to the end it
    /// read before the cut, above the new end, and bytes written there later counted as
    /// flushed without a sync (a SYNC_FLUSH put acknowledged before it was on disk). Found
    /// by an audit. The flush pauses after its sync for the truncation, which now waits for
    /// the flush instead (the pause then ends at its timeout).
    #[test]
    fn a_truncation_during_a_flush_leaves_nothing_counted_as_flushed_past_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let q = Arc::new(MappedFileQueue::load(dir.path(), 1 << 20, None).unwrap());
        let f = q.create_file(0).unwrap();
        f.write_region(0, 64 << 10, |b| b.fill(7));
        f.set_wrote_position(64 << 10);
        let (synced_tx, synced_rx) = std::sync::mpsc::channel();
        let (cut_tx, cut_rx) = std::sync::mpsc::channel::<()>();
        let cut_rx = std::sync::Mutex::new(cut_rx);
        *crate::store::mapped_file::tests::MID_FLUSH.lock().unwrap() = Some((
            f.path().to_path_buf(),
            Box::new(move || {
                let _ = synced_tx.send(());
                let _ = cut_rx.lock().unwrap().recv_timeout(std::time::Duration::from_millis(300));
            }),
        ));
        let flusher = {
            let q = q.clone();
            std::thread::spawn(move || q.flush(0).unwrap())
        };
        synced_rx.recv().unwrap();
        q.truncate(4096).unwrap();
        let _ = cut_tx.send(());
        flusher.join().unwrap();
        *crate::store::mapped_file::tests::MID_FLUSH.lock().unwrap() = None;
        assert!(
            f.flushed_position() <= f.wrote_position() && q.flushed_where() <= q.max_offset(),
            "flushed {} / {} past the end {} / {}",
            f.flushed_position(),
            q.flushed_where(),
            f.wrote_position(),
            q.max_offset()
        );
    }
}

#[cfg(test)]
mod allocator_tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A file the allocator failed to make (a full disk) is made again by the roll that takes
    /// it: before, that roll failed on the stale error (CREATE_MAPPED_FILE_FAILED) although
    /// space had come back meanwhile.
    #[test]
    fn a_take_retries_a_creation_that_failed_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not-yet");
        let a = Allocator::new(Populate::Write);
        let runner = {
            let a = a.clone();
            std::thread::spawn(move || a.run())
        };
        a.request(&missing, 0, 1 << 20);
        assert!(a.wait_idle(Duration::from_secs(30)), "the background creation ended");
        // It failed (no directory); the cause goes away before the roll.
        std::fs::create_dir(&missing).unwrap();
        let f = a.take(&missing, 0, 1 << 20).unwrap();
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 1 << 20);
        a.close();
        runner.join().unwrap();
    }

    /// A log over several directories: the file for an offset, requested in one directory,
    /// is taken from there when it was made, and made in the taker's directory when it could
    /// not be (a full disk: before, the take tried the full one again and failed the roll
    /// although the taker had chosen another directory).
    #[test]
    fn a_take_adopts_a_file_made_elsewhere_and_makes_a_failed_one_where_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (full, open) = (dir.path().join("full-missing"), dir.path().join("open"));
        std::fs::create_dir(&open).unwrap();
        let a = Allocator::new(Populate::Write);
        let runner = {
            let a = a.clone();
            std::thread::spawn(move || a.run())
        };
        a.request(&full, 0, 1 << 16);
        a.request(dir.path(), 1 << 16, 1 << 16);
        // A second request for one offset, in another directory, is not a second file.
        a.request(&open, 1 << 16, 1 << 16);
        assert!(a.wait_idle(Duration::from_secs(30)));
        let f = a.take(&open, 0, 1 << 16).unwrap();
        assert_eq!(f.path(), open.join(file_name(0)), "made where the taker asked");
        let g = a.take(&open, 1 << 16, 1 << 16).unwrap();
        assert_eq!(g.path(), dir.path().join(file_name(1 << 16)), "the file made elsewhere");
        assert!(!open.join(file_name(1 << 16)).exists(), "no second file for one offset");
        a.close();
        runner.join().unwrap();
    }

    /// A truncation cancels a file the allocator is making; an append then needs that file.
    /// It must get the allocator's file once it is made (or one made after it), never make
    /// its own beside it: two creators each rename their file into place, and the allocator
    /// deletes by name the file it made for nobody, which deleted the appender's file under
    /// it (found by the model test under load: a log with a gap at the next start).
    #[test]
    fn a_take_waits_for_a_cancelled_creation_and_keeps_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 << 20; // pre-touched whole: long enough to overlap
        let a = Allocator::new(Populate::Write);
        a.set_pretouch(usize::MAX);
        let runner = {
            let a = a.clone();
            std::thread::spawn(move || a.run())
        };
        let start = size as u64;
        let path = dir.path().join(file_name(start));
        a.request(dir.path(), start, size);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !(a.state.lock().unwrap().creating.is_some() && path.exists()) {
            assert!(Instant::now() < deadline, "the allocator did not start making the file");
            std::thread::yield_now();
        }
        a.cancel_from(start);
        let f = a.take(dir.path(), start, size).unwrap();
        f.pwrite_at(0, b"kept").unwrap();
        f.set_wrote_position(4);
        a.close();
        runner.join().unwrap();
        let on_disk = std::fs::read(&path).expect("the appender's file is still there");
        assert_eq!(on_disk.len(), size);
        assert_eq!(&on_disk[..4], b"kept", "the file at the path is the appender's");
        assert!(!dir.path().join(format!("{}.creating", file_name(start))).exists());
    }
}
