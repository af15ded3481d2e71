//! One fixed-size segment file of a log, memory-mapped. This module holds all of rmqha's
//! `unsafe` memory access.
//!
//! Concurrency contract: exactly one writer at a time appends (the caller holds the log's put
//! lock), writing only at or beyond `wrote_position`, and publishes each append by storing the
//! new position with Release ordering. Readers load the position with Acquire ordering and only
//! look at bytes below it. Written bytes are never rewritten while readers may see them
//! (truncation happens only while nobody reads, see `zero_from`). So a reader's `&[u8]` never
//! overlaps a region being written. The mapping lives as long as the `MappedFile`, and files
//! are shared as `Arc<MappedFile>`, so a reader racing with a deletion keeps a valid mapping
//! (the file is unlinked, its pages stay until the last reader drops it).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// Bytes of an OS page, RocketMQ's flush unit.
pub const OS_PAGE_SIZE: usize = 4096;
/// The largest folio the page cache keeps a file in on x86-64 (a PMD): periodic flushes stop
/// at a multiple of it so as not to write-protect the folio the writer is filling.
pub const FOLIO_ALIGN: usize = 2 << 20;

/// How the bytes ahead of a writer are made ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Populate {
    /// Pages faulted in writable and dirty, as a store through the mapping would: for a
    /// writer that stores through the mapping (an ASYNC_FLUSH master), which then takes no
    /// page fault on its path.
    Write,
    /// Zeros written with `pwrite` and sent to disk: for a writer that appends with `pwrite`
    /// and fsyncs often (a SYNC_FLUSH master). The blocks `posix_fallocate` reserved are
    /// "unwritten" until written; a flush that writes into them must also convert the extent
    /// and persist that, a metadata write per flush, which zeros written ahead pay once per
    /// chunk instead. The pages stay in the page cache, never mapped writable.
    Zero,
}

/// How many zeros one `Populate::Zero` step writes: small enough that a live writer waiting
/// for the put lock meanwhile waits a fraction of a millisecond.
pub const ZERO_CHUNK: usize = 256 << 10;
static ZEROS: [u8; ZERO_CHUNK] = [0; ZERO_CHUNK];

/// A memory-mapped segment file.
pub struct MappedFile {
    path: PathBuf,
    /// The open descriptor. CommitLog files keep it: they are written with `pwrite`, sent
    /// with `sendfile` and synced often. ConsumeQueue and index files let it go once mapped
    /// (`without_descriptor`): a store with thousands of queues would otherwise hold a
    /// descriptor per queue file, past the usual soft limit of 1024, and the dispatcher
    /// could not open the next one. The mapping alone keeps the file's pages; the rare
    /// operations that need a descriptor (truncation, a sync) open the file by path.
    file: Option<File>,
    map: MmapRaw,
    start_offset: u64,
    size: usize,
    wrote: AtomicUsize,
    flushed: AtomicUsize,
    /// Pages up to here were faulted in ahead of the writer.
    touched: AtomicUsize,
    /// Bytes from the start whose blocks are known reserved on disk (`reserve_through`).
    reserved: AtomicUsize,
    /// Set when the file is removed from its queue (retention, truncation).
    removed: AtomicBool,
    /// Mapped for random access until its reservation grows past the first chunk
    /// (`advise_random_while_cold`).
    random_while_cold: AtomicBool,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("wrote", &self.wrote_position())
            .field("flushed", &self.flushed_position())
            .finish()
    }
}

/// The 20-digit zero-padded decimal name of a file starting at `offset`.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// Whether `name` is a log file's name: 20 decimal digits (`file_name`).
pub fn is_file_name(name: &str) -> bool {
    name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit())
}

impl MappedFile {
    /// Creates a new zero-filled file of `size` bytes with all its blocks allocated, so that a
    /// full disk fails here and never later as a SIGBUS inside an append.
    pub fn create(dir: &Path, start_offset: u64, size: usize) -> io::Result<Self> {
        Self::create_named(dir, &file_name(start_offset), start_offset, size)
    }

    /// Like `create`, with an explicit file name (index files are named by time).
    ///
    /// The name appears only once the file is whole: a crash midway never leaves a short file
    /// that load would have to reject, nor a stray entry. The file is made as an unnamed inode
    /// (`O_TMPFILE`) and linked in at the end, so a crash leaves nothing behind; RocketMQ
    /// parses every name in a log directory as an offset and would refuse to start beside a
    /// leftover. Where the filesystem cannot (or `/proc` is missing) it is made under a
    /// `.creating` name and renamed, which this loader deletes if left over.
    pub fn create_named(dir: &Path, name: &str, start_offset: u64, size: usize) -> io::Result<Self> {
        Self::create_reserving(dir, name, start_offset, size, size)
    }

    /// Like `create_named`, with only the first `reserve` bytes' blocks reserved: the rest
    /// are reserved as writes reach them (`reserve_through`). For ConsumeQueue files, whose
    /// 6 MB each a queue with a few messages would otherwise take on disk (RocketMQ's are
    /// sparse, so writing into a hole of a full disk kills its broker with SIGBUS).
    pub fn create_reserving(
        dir: &Path,
        name: &str,
        start_offset: u64,
        size: usize,
        reserve: usize,
    ) -> io::Result<Self> {
        Self::create_reserving_with(dir, name, start_offset, size, reserve, true)
    }

    /// `create_reserving`, leaving the directory unsynced when `sync_dir_now` is false: the
    /// caller syncs it before anything counts on the file's name surviving a crash (a
    /// ConsumeQueue's, before the checkpoint claims its units; a directory sync per new queue
    /// on the dispatcher's thread held every queue's dispatch up).
    pub(crate) fn create_reserving_with(
        dir: &Path,
        name: &str,
        start_offset: u64,
        size: usize,
        reserve: usize,
        sync_dir_now: bool,
    ) -> io::Result<Self> {
        let path = dir.join(name);
        let reserve = reserve.min(size);
        let file = match create_unnamed(dir, &path, size, reserve)? {
            Some(file) => file,
            None => create_renamed(dir, name, &path, size, reserve)?,
        };
        // Named now: a failure from here on (the mapping refused at `vm.max_map_count`, the
        // directory sync) takes the name away again, or every retry of the creation would
        // fail on it ("File exists") until a restart, and the next start would load it.
        let named = (|| {
            #[cfg(test)]
            tests::after_link()?;
            if sync_dir_now {
                sync_dir(dir)?;
            }
            Self::map(path.clone(), file, start_offset, size, 0)
        })();
        let f = match named {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                let _ = sync_dir(dir);
                return Err(e);
            }
        };
        f.reserved.store(reserve, Ordering::Release);
        Ok(f)
    }

    /// Bytes from the start whose blocks are known reserved on disk.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Acquire)
    }

    /// Makes sure the blocks of `[0, end)` are reserved on disk, reserving as much again as
    /// is (at least `RESERVE_CHUNK`, at most the rest of the file) when `end` passes it: a store
    /// through the mapping into an unreserved hole of a full disk raises SIGBUS, which kills
    /// the process, where this returns ENOSPC. A file opened from disk counts nothing as
    /// reserved yet (RocketMQ's files are sparse), and reserving what already holds data
    /// changes nothing. Only the file's writer calls it.
    pub fn reserve_through(&self, end: usize) -> io::Result<()> {
        let from = self.reserved.load(Ordering::Acquire);
        if end <= from {
            return Ok(());
        }
        // At least twice what is reserved: a busy queue's file takes a handful of calls (each
        // opens the file by path), a quiet one keeps its first 64 KiB.
        let to = end
            .div_ceil(RESERVE_CHUNK)
            .saturating_mul(RESERVE_CHUNK)
            .max(from.saturating_mul(2))
            .min(self.size);
        let reopened;
        let file = match &self.file {
            Some(f) => f,
            None => {
                reopened = OpenOptions::new().write(true).open(&self.path)?;
                &reopened
            }
        };
        let rc = posix_fallocate(file, from, to - from);
        match rc {
            // A file system that cannot reserve (EOPNOTSUPP) writes in place as it can.
            0 | libc::EOPNOTSUPP | libc::EINVAL => {
                self.reserved.store(to, Ordering::Release);
                if to > RESERVE_CHUNK && self.random_while_cold.swap(false, Ordering::AcqRel) {
                    // A busy file now: reading ahead of its writer pays off again.
                    self.advise(libc::MADV_NORMAL, self.size);
                }
                Ok(())
            }
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    /// Opens an existing file, which must be exactly `size` bytes. Its positions start at the
    /// end (recovery sets the last file's positions).
    pub fn open(path: &Path, start_offset: u64, size: usize) -> io::Result<Self> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(named)?;
        let len = file.metadata().map_err(named)?.len();
        if len != size as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is {len} bytes, expected {size}", path.display()),
            ));
        }
        Self::map(path.to_path_buf(), file, start_offset, size, size)
    }

    fn map(path: PathBuf, file: File, start_offset: u64, size: usize, pos: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(size).map_raw(&file).map_err(|e| map_error(&path, size, e))?;
        Ok(MappedFile {
            path,
            file: Some(file),
            map,
            start_offset,
            size,
            wrote: AtomicUsize::new(pos),
            flushed: AtomicUsize::new(pos),
            touched: AtomicUsize::new(0),
            removed: AtomicBool::new(false),
            reserved: AtomicUsize::new(0),
            random_while_cold: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the descriptor; the mapping stays (see the `file` field).
    pub fn without_descriptor(mut self) -> Self {
        self.file = None;
        self
    }

    /// Syncs every page of the file to disk, whatever the flushed position says: after a
    /// crash, bytes the last run wrote (and the page cache kept) count as flushed once
    /// recovered, though they may never have been synced.
    pub(crate) fn sync_all_pages(&self) -> io::Result<()> {
        #[cfg(test)]
        SYNCED_WHOLE.with(|s| s.borrow_mut().push(self.path.clone()));
        self.map.flush()
    }

    /// Runs `f` on the file's descriptor, opening the file by path when it keeps none.
    fn with_file<R>(&self, f: impl FnOnce(&File) -> io::Result<R>) -> io::Result<R> {
        match &self.file {
            Some(file) => f(file),
            None => f(&OpenOptions::new().read(true).write(true).open(&self.path)?),
        }
    }
    pub fn start_offset(&self) -> u64 {
        self.start_offset
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn end_offset(&self) -> u64 {
        self.start_offset + self.size as u64
    }
    /// Bytes appended and visible to readers.
    pub fn wrote_position(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }
    pub fn flushed_position(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }
    pub fn is_full(&self) -> bool {
        self.wrote_position() == self.size
    }
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }
    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }

    /// The readable bytes `[pos, wrote_position)`.
    pub fn readable_from(&self, pos: usize) -> &[u8] {
        let end = self.wrote_position();
        if pos >= end {
            return &[];
        }
        // SAFETY: [pos, end) lies inside the mapping (end <= size) and below the published
        // write position, so no writer touches it (module contract); the mapping outlives
        // `&self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), end - pos) }
    }

    /// Bytes `[pos, pos + len)` if they are all readable.
    pub fn read(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let s = self.readable_from(pos);
        s.get(..len)
    }

    /// Gives `f` the writable bytes `[pos, pos + len)` beyond the write position. The caller
    /// must be the file's only writer (hold the put lock) and publish with `set_wrote_position`.
    pub(crate) fn write_region<R>(&self, pos: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert!(pos >= self.wrote_position() && fits(pos, len, self.size), "write outside the free region");
        // SAFETY: the region is inside the mapping and at or beyond the published write
        // position, where no reader looks; the single writer is guaranteed by the caller's put
        // lock, so this is the only live reference to these bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(pos), len) };
        f(buf)
    }

    /// Asks the CPU to bring the cache lines of `[pos, pos + len)` into its caches ahead of
    /// a write (x86-64 `PREFETCHT0`; nothing elsewhere), clipped to the file. A line that no
    /// other core holds arrives exclusive, so the store into it later needs no further
    /// request. `PREFETCHW` (asking for ownership outright) was no faster in a
    /// microbenchmark here and is missing from older CPUs. A hint: it never faults and
    /// changes no byte.
    pub fn prefetch_for_write(&self, pos: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let end = (pos + len).min(self.size);
            let base = self.map.as_ptr();
            let mut at = pos & !63;
            while at < end {
                // SAFETY: `at` lies inside the mapping; a prefetch reads and writes nothing.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(at) as *const i8) };
                at += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (pos, len);
    }

    /// A 4-byte field that is rewritten in place while readers may look at it (index slots
    /// and header): accessed only through atomics, so readers never race a plain write.
    pub(crate) fn atomic_u32(&self, pos: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(fits(pos, 4, self.size) && pos % 4 == 0, "atomic field out of bounds or unaligned");
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned); the bytes are only ever
        // accessed through this atomic view, never through the slice methods.
        unsafe { &*(self.map.as_mut_ptr().add(pos) as *const std::sync::atomic::AtomicU32) }
    }

    /// An 8-byte field rewritten in place (see `atomic_u32`).
    pub(crate) fn atomic_u64(&self, pos: usize) -> &AtomicU64 {
        assert!(fits(pos, 8, self.size) && pos % 8 == 0, "atomic field out of bounds or unaligned");
        // SAFETY: in bounds and 8-aligned; only ever accessed through this atomic view.
        unsafe { &*(self.map.as_mut_ptr().add(pos) as *const AtomicU64) }
    }

    /// Writes `data` at `pos` through the file descriptor (`pwrite`) instead of the mapping.
    /// Whole pages written this way enter the page cache without first being zeroed, which a
    /// store of replicated bytes (a slave) does not need; mapped readers see the same page
    /// cache. Same single-writer contract as `write_region`; publish with `set_wrote_position`.
    pub(crate) fn pwrite_at(&self, pos: usize, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        assert!(
            pos >= self.wrote_position() && fits(pos, data.len(), self.size),
            "write outside the free region"
        );
        self.with_file(|file| file.write_all_at(data, pos as u64))
    }

    /// Sends up to `len` published bytes from `pos` to the socket `sock` with `sendfile`: the
    /// kernel passes the page-cache pages to the socket without copying them through user
    /// space (the HA master's frame bodies). Returns the bytes sent (fewer on a partial send).
    #[cfg(target_os = "linux")]
    pub fn send_to(&self, sock: &impl AsRawFd, pos: usize, len: usize) -> io::Result<usize> {
        assert!(pos + len <= self.wrote_position(), "send beyond the published bytes");
        let mut off = pos as libc::off_t;
        self.with_file(|file| {
            loop {
                // SAFETY: plain syscall on two descriptors we hold; the kernel bounds-checks.
                let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, len) };
                if n >= 0 {
                    return Ok(n as usize);
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        })
    }

    /// Publishes bytes written up to `pos`.
    pub(crate) fn set_wrote_position(&self, pos: usize) {
        assert!(pos <= self.size, "write position {pos} past the end of {}", self.path.display());
        self.wrote.store(pos, Ordering::Release);
    }

    /// Sets the positions after recovery or truncation (no reader may be active beyond `pos`).
    pub(crate) fn reset_positions(&self, pos: usize) {
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos.min(self.flushed_position()), Ordering::Release);
    }

    pub(crate) fn set_flushed_position(&self, pos: usize) {
        self.flushed.store(pos, Ordering::Release);
    }

    /// Records `[.., pos)` as on disk after it was synced some other way than `flush` (one
    /// `syncfs` for many files); never moves the flushed position back.
    pub(crate) fn mark_flushed(&self, pos: usize) {
        self.flushed.fetch_max(pos.min(self.size), Ordering::AcqRel);
    }

    /// Flushes `[flushed, wrote)` to disk; returns the new flushed position. RocketMQ flushes
    /// only when at least `least_pages` whole pages are dirty (or the file is full).
    pub fn flush(&self, least_pages: usize) -> io::Result<usize> {
        self.flush_aligned(least_pages, 1)
    }

    /// Like `flush`, but only up to the last multiple of `align` bytes written (everything
    /// once the file is full). Writeback cleans whole folios, and the page cache keeps a
    /// sequentially written file in folios of up to 2 MiB, mapped whole: flushing the folio a
    /// writer is still filling through the mapping writes all of it out and write-protects
    /// it, so the writer's next store faults, splits the mapping and shoots down the other
    /// CPUs' TLBs. A flush that stops at a `FOLIO_ALIGN` boundary leaves that folio alone.
    pub fn flush_aligned(&self, least_pages: usize, align: usize) -> io::Result<usize> {
        let wrote = self.wrote_position();
        let end = if wrote >= self.size { wrote } else { wrote / align * align };
        let flushed = self.flushed_position();
        if end <= flushed {
            return Ok(flushed);
        }
        if least_pages > 0 && end < self.size && end / OS_PAGE_SIZE - flushed / OS_PAGE_SIZE < least_pages {
            return Ok(flushed);
        }
        let from = flushed - flushed % OS_PAGE_SIZE;
        #[cfg(test)]
        tests::flush_error(&self.path)?;
        self.map.flush_range(from, end - from)?;
        #[cfg(test)]
        tests::mid_flush(&self.path);
        self.flushed.fetch_max(end, Ordering::AcqRel);
        Ok(self.flushed_position())
    }

    /// Makes `[touched, end)` of a file no writer uses yet ready (`how`), in chunks, stopping
    /// early once `go_on` says so (a shutdown, or an appender that needs the file now, should
    /// not wait for a gigabyte to be faulted in).
    pub(crate) fn pretouch_fresh(
        &self,
        end: usize,
        how: Populate,
        go_on: impl Fn() -> bool,
    ) -> io::Result<()> {
        const CHUNK: usize = 16 << 20;
        let (mut pos, end) = self.untouched_until(end);
        let began = pos;
        while pos < end && go_on() {
            let len = CHUNK.min(end - pos);
            match how {
                Populate::Zero => {
                    for at in (pos..pos + len).step_by(ZERO_CHUNK) {
                        self.zero(at, ZERO_CHUNK.min(pos + len - at))?;
                    }
                    self.start_writeback(pos, len)?;
                }
                Populate::Write if !self.populate_write(pos, len) => {
                    // Older kernels: write a zero into each page of the fresh (all-zero) file.
                    for p in (pos..pos + len).step_by(OS_PAGE_SIZE) {
                        // SAFETY: in bounds, in a file no writer uses yet (caller's contract); a
                        // volatile write of the zero that is already there.
                        unsafe { std::ptr::write_volatile(self.map.as_mut_ptr().add(p), 0) };
                    }
                }
                Populate::Write => {}
            }
            pos += len;
            self.touched.fetch_max(pos, Ordering::AcqRel);
        }
        if matches!(how, Populate::Zero) && pos >= end && pos > began && go_on() {
            // Wait for the zeros to reach the disk before the file is handed over: a sync's
            // cache flush waits for every write queued before it, so the first group commits
            // in this file would otherwise wait behind its writeback (435 ms for a whole
            // 1 GiB file with `warmMapedFileEnable`, measured on this project's VM).
            self.with_file(|file| file.sync_data())?;
        }
        Ok(())
    }

    /// `Populate::Zero` of `[pos, pos + len)`, which must lie beyond the write position and
    /// hold zeros already (a fresh file, or the zeroed tail of a truncated one): written
    /// through the page cache. The caller must be the file's only writer; `start_writeback`
    /// then sends the zeros to disk.
    pub(crate) fn zero(&self, pos: usize, len: usize) -> io::Result<()> {
        self.pwrite_at(pos, &ZEROS[..len])?;
        self.touched.fetch_max(pos + len, Ordering::AcqRel);
        Ok(())
    }

    /// Starts writing `[pos, pos + len)` out without waiting for it (`sync_file_range`).
    pub(crate) fn start_writeback(&self, pos: usize, len: usize) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        return self.with_file(|file| {
            // SAFETY: plain syscall on a descriptor we own.
            let rc = unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    pos as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if rc != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        });
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (pos, len);
            Ok(())
        }
    }

    /// The end of the bytes made ready ahead of the writer (at least the write position).
    pub fn ready_position(&self) -> usize {
        self.touched.load(Ordering::Acquire).max(self.wrote_position())
    }

    /// Faults in the pages up to `end` ahead of a live writer, so that its appends do not pay
    /// a page fault per 4 KiB. Safe while the writer appends: it changes no byte. Where the
    /// kernel cannot do it without writing (before Linux 5.14) it does nothing.
    pub(crate) fn pretouch_to(&self, end: usize) {
        let (from, end) = self.untouched_until(end);
        if from < end && self.populate_write(from, end - from) {
            self.touched.fetch_max(end, Ordering::AcqRel);
        }
    }

    /// The pages not yet faulted in up to `end` (rounded up to a page, at most the file):
    /// from the end of those touched or written so far.
    fn untouched_until(&self, end: usize) -> (usize, usize) {
        let end = (end.min(self.size).div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE).min(self.size);
        let from =
            self.touched.load(Ordering::Acquire).max(self.wrote_position() / OS_PAGE_SIZE * OS_PAGE_SIZE);
        (from, end)
    }

    fn populate_write(&self, from: usize, len: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            const MADV_POPULATE_WRITE: i32 = 23;
            if len == 0 {
                return true;
            }
            // SAFETY: advice on a page-aligned range of our own mapping; MADV_POPULATE_WRITE
            // only faults pages in as if written with their current content, changing no byte.
            let rc =
                unsafe { libc::madvise(self.map.as_mut_ptr().add(from).cast(), len, MADV_POPULATE_WRITE) };
            rc == 0
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (from, len);
            false
        }
    }

    /// Zeroes `[pos, size)` on disk and sets the positions to `pos`: a truncated record must
    /// not come back after a crash (RocketMQ issue 10666). The file is never shrunk while
    /// mapped. Callers guarantee no reader or writer uses the file beyond `pos`.
    pub(crate) fn zero_from(&self, pos: usize) -> io::Result<()> {
        if pos > self.size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot truncate {} at {pos}: past its end at {}", self.path.display(), self.size),
            ));
        }
        if pos < self.size && !self.is_zero_from(pos) {
            // The partial page by hand; whole pages by FALLOC_FL_ZERO_RANGE, which keeps the
            // blocks allocated (so no later append can fault on a full disk) and does not
            // dirty up to a whole file of page cache. Where it is unsupported, zero only the
            // pages that hold something: a tail is usually mostly zeros already.
            let aligned = pos.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
            let head_end = aligned.min(self.size);
            // SAFETY: in bounds; by the caller's guarantee nobody else accesses [pos, size).
            unsafe { std::ptr::write_bytes(self.map.as_mut_ptr().add(pos), 0, head_end - pos) };
            if aligned < self.size && !self.zero_range_fallocate(aligned) {
                // Only where data is: reading a hole through the mapping makes tmpfs (which
                // has no ZERO_RANGE) allocate it, a whole sparse ConsumeQueue file, and on a
                // full tmpfs raises SIGBUS.
                let regions = self
                    .with_file(|file| Ok(data_regions(file, aligned, self.size)))
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| vec![(aligned, self.size)]);
                for (from, to) in regions {
                    let mut p = from - from % OS_PAGE_SIZE;
                    while p < to {
                        let n = OS_PAGE_SIZE.min(self.size - p);
                        // SAFETY: in bounds, and nobody else accesses it (caller's guarantee).
                        let page = unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(p), n) };
                        if page.iter().any(|&b| b != 0) {
                            page.fill(0);
                        }
                        p += n;
                    }
                }
            }
            let from = pos - pos % OS_PAGE_SIZE;
            self.map.flush_range(from, self.size - from)?;
            self.with_file(|file| file.sync_data())?;
        }
        self.wrote.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
        self.touched.store(pos, Ordering::Release);
        Ok(())
    }

    /// Whether `[pos, size)` is known to hold only zeros, so truncating there changes nothing
    /// and needs no sync: recovery truncates every ConsumeQueue at its end on each open, and
    /// three syncs per queue made opening a store with many queues take minutes. Only short
    /// ranges are scanned; a long one (a CommitLog tail) is zeroed and synced regardless.
    ///
    /// Holes are skipped unread (`SEEK_DATA`): a ConsumeQueue file is reserved only as far as
    /// its units reach, and reading the rest through the mapping made tmpfs allocate it (the
    /// whole 6 MB of every queue at each open) or, on a full tmpfs, raised SIGBUS.
    fn is_zero_from(&self, pos: usize) -> bool {
        const SCAN_LIMIT: usize = 8 << 20;
        let scan = |from: usize, to: usize| {
            // SAFETY: in bounds; by zero_from's caller guarantee nobody writes [pos, size) now.
            let bytes = unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(from), to - from) };
            bytes.iter().all(|&b| b == 0)
        };
        let regions = self.with_file(|file| Ok(data_regions(file, pos, self.size)));
        match regions {
            Ok(Some(regions)) => {
                regions.iter().map(|(a, b)| b - a).sum::<usize>() <= SCAN_LIMIT
                    && regions.iter().all(|&(a, b)| scan(a, b))
            }
            // No SEEK_DATA here: read the range, if short.
            _ => self.size - pos <= SCAN_LIMIT && scan(pos, self.size),
        }
    }

    fn zero_range_fallocate(&self, from: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            let zeroed = self.with_file(|file| {
                // SAFETY: plain syscall on our descriptor; the kernel keeps the shared mapping
                // coherent (it drops the cached pages of the range).
                let rc = unsafe {
                    libc::fallocate(
                        file.as_raw_fd(),
                        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                        from as libc::off_t,
                        (self.size - from) as libc::off_t,
                    )
                };
                Ok(rc == 0)
            });
            zeroed.unwrap_or(false)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = from;
            false
        }
    }

    /// fsyncs the file descriptor (data and metadata).
    pub fn sync_all(&self) -> io::Result<()> {
        self.with_file(|file| file.sync_all())
    }

    /// Pages are faulted in one at a time, without reading around the faulting one: for files
    /// written here at scattered or sparse places (a new ConsumeQueue or index file). A write
    /// into a hole otherwise reads around it, as far as the disk's `read_ahead_kb` (8 MiB on
    /// some disks), and the kernel zeroes that many pages of holes: 6 ms of CPU, and 8 MiB of
    /// page cache, for each new queue's first unit on the dispatcher's thread (scale audit).
    ///
    /// For the first `len` bytes only: an index file's hash slots, written anywhere (its
    /// entries are written in order).
    pub(crate) fn advise_random_head(&self, len: usize) {
        self.advise(libc::MADV_RANDOM, len);
    }

    /// `advise_random_head` of the whole file until its reservation grows past its first
    /// `RESERVE_CHUNK` (a ConsumeQueue past some 3,000 units): then a busy queue's sequential writes get the
    /// read-around back, a little faster than a fault per page (5-10% of dispatch into a few
    /// hot queues), while the many quiet queues keep the advice.
    pub(crate) fn advise_random_while_cold(&self) {
        self.random_while_cold.store(true, Ordering::Release);
        self.advise(libc::MADV_RANDOM, self.size);
    }

    fn advise(&self, advice: libc::c_int, len: usize) {
        let len = len.min(self.size).div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        // SAFETY: advice on the head of our own mapping (page-aligned, rounded up to whole
        // pages: the mapping's length is too); changes no data.
        unsafe {
            libc::madvise(self.map.as_mut_ptr().cast(), len, advice);
        }
    }

    /// Where the mapping starts (tests find it in `/proc/self/smaps`).
    #[cfg(test)]
    pub(crate) fn map_addr(&self) -> usize {
        self.map.as_ptr() as usize
    }

    /// Advises the kernel about the use of `[pos, pos+len)`.
    pub fn advise_willneed(&self, pos: usize, len: usize) {
        let start = pos - pos % OS_PAGE_SIZE;
        let len = (len + pos - start).min(self.size - start);
        // SAFETY: advice on a range inside our own mapping; changes no data.
        unsafe {
            libc::madvise(self.map.as_mut_ptr().add(start).cast(), len, libc::MADV_WILLNEED);
        }
    }

    /// Deletes the file from disk (the mapping stays valid for readers holding an `Arc`).
    pub fn destroy(&self) -> io::Result<()> {
        self.mark_removed();
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// How much more of a file `reserve_through` reserves at a time.
pub const RESERVE_CHUNK: usize = 64 * 1024;

/// Reserves the blocks of the file's first `size` bytes. Where the file system cannot
/// (EOPNOTSUPP), writes zeros, which reserves them just as well.
fn allocate(file: &File, size: usize) -> io::Result<()> {
    if size == 0 {
        return Ok(());
    }
    let rc = posix_fallocate(file, 0, size);
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => {
            use std::os::unix::fs::FileExt;
            let zeros = vec![0u8; 1 << 20];
            let mut off = 0;
            while off < size {
                let n = zeros.len().min(size - off);
                file.write_all_at(&zeros[..n], off as u64)?;
                off += n;
            }
            file.sync_data()
        }
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Makes a file of `size` allocated bytes as an unnamed inode in `dir` and links it at
/// `path`; `None` where the filesystem has no `O_TMPFILE` or `/proc` is not mounted.
fn create_unnamed(dir: &Path, path: &Path, size: usize, reserve: usize) -> io::Result<Option<File>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let file = match OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).open(dir) {
        Ok(file) => file,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    file.set_len(size as u64)?;
    allocate(&file, reserve)?;
    #[cfg(test)]
    tests::after_allocate();
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a number");
    let to = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: both are NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) && !Path::new("/proc/self/fd").exists() {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(file))
}

/// `create_unnamed` where it cannot: the file is made as `<name>.creating` and renamed.
fn create_renamed(dir: &Path, name: &str, path: &Path, size: usize, reserve: usize) -> io::Result<File> {
    let tmp = dir.join(format!("{name}.creating"));
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
    let result = (|| {
        file.set_len(size as u64)?;
        allocate(&file, reserve)?;
        #[cfg(test)]
        tests::after_allocate();
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(file)
}

#[cfg(test)]
thread_local! {
    /// The files this thread synced whole (`sync_all_pages`), for tests.
    pub(crate) static SYNCED_WHOLE: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Directories whose file systems `sync_file_systems` synced, for tests.
    pub(crate) static SYNCED_FS: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The parts of `[from, to)` of `file` that hold data (`SEEK_DATA` / `SEEK_HOLE`; the rest
/// are holes, which read as zeros); `None` where the filesystem cannot say.
/// A failed `mmap` of `path`, explained: ENOMEM there is mostly the kernel's limit on a
/// process's mappings (`vm.max_map_count`, 65530 by default), which a store reaches with
/// tens of thousands of ConsumeQueues (one mapping per file), not a lack of memory.
fn map_error(path: &Path, size: usize, e: io::Error) -> io::Error {
    let why = if e.raw_os_error() == Some(libc::ENOMEM) {
        let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count").map(|s| s.trim().to_string());
        let used = std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count());
        format!(
            ": the process has {} mappings and vm.max_map_count is {} (each CommitLog, ConsumeQueue and \
             index file takes one); raise it (RocketMQ recommends `sysctl -w vm.max_map_count=655360`) or \
             free address space",
            used.map_or_else(|_| "?".to_string(), |n| n.to_string()),
            limit.unwrap_or_else(|_| "?".to_string())
        )
    } else {
        String::new()
    };
    io::Error::new(e.kind(), format!("cannot map {} ({size} bytes): {e}{why}", path.display()))
}

/// Whether a successful `syncfs` of `d`'s file system proves that everything written to it
/// is on disk, as a sync of each file would:
/// - Linux 5.17 or later: `syncfs` reports pages whose background writeback failed only
///   since 5.8 (before, it returned 0 after such a failure, where the file's own `fsync`
///   returned EIO), and the file system's own sync (a journal commit) only since 5.17;
/// - a local file system that keeps its writeback errors where `syncfs` looks (ext4, XFS,
///   btrfs, and tmpfs, which writes nothing back): not FUSE, whose `syncfs` does not make the
///   daemon sync, nor overlayfs, whose upper files' errors land on another file system.
#[cfg(target_os = "linux")]
pub(crate) fn syncfs_reports_errors(d: &File) -> bool {
    const EXT4: i64 = 0xEF53;
    const XFS: i64 = 0x5846_5342;
    const BTRFS: i64 = 0x9123_683E;
    const TMPFS: i64 = 0x0102_1994;
    static KERNEL_OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let kernel_ok = *KERNEL_OK.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|r| kernel_at_least(&r, (5, 17)))
    });
    if !kernel_ok {
        return false;
    }
    // SAFETY: fstatfs fills the zeroed struct we pass; the descriptor is the caller's.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(d.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    matches!(st.f_type as i64, EXT4 | XFS | BTRFS | TMPFS)
}

#[cfg(not(target_os = "linux"))]
#[allow(dead_code)] // read by tests only
pub(crate) fn syncfs_reports_errors(_d: &File) -> bool {
    false
}

/// Whether a kernel release string (`6.18.0-1-amd64`) is at least `(major, minor)`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn kernel_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// Syncs the file systems holding `dirs`, each once (`syncfs(2)`): everything written to them
/// reaches the disk, whatever file it is in. `Ok(false)` where that cannot be done or proves
/// too little (see `sync_file_system`): the caller syncs file by file.
pub(crate) fn sync_file_systems(dirs: &[PathBuf]) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let mut done = Vec::new();
        for dir in dirs {
            let d =
                File::open(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
            let dev = d.metadata()?.dev();
            if done.contains(&dev) {
                continue;
            }
            if !sync_file_system(&d, dir)? {
                return Ok(false);
            }
            done.push(dev);
        }
        Ok(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dirs;
        Ok(false)
    }
}

/// `syncfs(2)` of the file system holding `dir`, opened as `d`. Besides its own writeback's
/// errors it reports any writeback error on that file system not yet reported through `d`
/// (nor, when `d` was opened, through any `syncfs`), also one the kernel's background
/// writeback met, so a descriptor kept open misses none. `Ok(false)` where that guarantee
/// does not hold and the caller must sync file by file (see `syncfs_reports_errors`).
pub(crate) fn sync_file_system(d: &File, dir: &Path) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        if !syncfs_reports_errors(d) {
            return Ok(false);
        }
        // SAFETY: plain syscall on a descriptor the caller holds.
        if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
            let e = io::Error::last_os_error();
            // No syncfs, or one a seccomp filter refuses.
            if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                return Ok(false);
            }
            return Err(io::Error::new(
                e.kind(),
                format!("syncing the file system of {}: {e}", dir.display()),
            ));
        }
        #[cfg(test)]
        SYNCED_FS.with(|s| s.borrow_mut().push(dir.to_path_buf()));
        Ok(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (d, dir);
        Ok(false)
    }
}

/// `posix_fallocate(3)`, again when a signal interrupted it (a large reservation takes long
/// enough to meet one, and the host's signal handlers may lack SA_RESTART): returns its error
/// number, 0 on success.
fn posix_fallocate(file: &File, offset: usize, len: usize) -> libc::c_int {
    loop {
        // SAFETY: plain syscall on a descriptor the caller holds open.
        let rc =
            unsafe { libc::posix_fallocate(file.as_raw_fd(), offset as libc::off_t, len as libc::off_t) };
        if rc != libc::EINTR {
            return rc;
        }
    }
}

/// Whether `[pos, pos + len)` lies inside `size` bytes (without overflowing).
fn fits(pos: usize, len: usize, size: usize) -> bool {
    pos <= size && len <= size - pos
}

fn data_regions(file: &File, from: usize, to: usize) -> Option<Vec<(usize, usize)>> {
    let fd = file.as_raw_fd();
    let mut regions = Vec::new();
    let mut at = from;
    while at < to {
        // SAFETY: plain syscall on a descriptor we hold.
        let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => Some(regions), // no data past `at`
                _ => None,
            };
        }
        let data = data as usize;
        if data >= to {
            break;
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data as libc::off_t, libc::SEEK_HOLE) };
        if hole < 0 {
            return None;
        }
        let end = (hole as usize).min(to);
        regions.push((data.max(at), end));
        at = end;
    }
    Some(regions)
}

/// Makes this thread's next file creation fail with `e` once the file is named (tests).
#[cfg(test)]
pub(crate) fn fail_next_named_creation(e: io::Error) {
    tests::AFTER_LINK.with(|h| *h.borrow_mut() = Some(e));
}

/// fsyncs a directory so that a created, renamed or deleted entry survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(kernel_at_least("6.18.0-1-amd64\n", (5, 17)));
        assert!(kernel_at_least("5.17.0", (5, 17)));
        assert!(kernel_at_least("5.20-rc1", (5, 17)));
        assert!(!kernel_at_least("5.15.0-91-generic", (5, 17)));
        assert!(!kernel_at_least("4.19.0", (5, 17)));
        assert!(!kernel_at_least("", (5, 17)));
        assert!(!kernel_at_least("6", (5, 17)));
    }
    use std::cell::RefCell;

    thread_local! {
        /// Runs in a creation once the file is allocated, before it gets its name.
        static AFTER_ALLOCATE: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
    }

    thread_local! {
        /// The error a creation meets once its file is named, for tests.
        pub(super) static AFTER_LINK: RefCell<Option<io::Error>> = const { RefCell::new(None) };
    }

    /// A mapping refused for want of mappings names the limit and how to raise it (the
    /// dispatcher stopped, and a restart failed, blaming the file size key; scale audit).
    #[test]
    fn a_refused_mapping_names_vm_max_map_count() {
        let e = map_error(Path::new("/s/cq/T/0/0"), 6_000_000, io::Error::from_raw_os_error(libc::ENOMEM));
        let msg = e.to_string();
        assert!(msg.contains("/s/cq/T/0/0") && msg.contains("vm.max_map_count is"), "{msg}");
        let other = map_error(Path::new("/x"), 1, io::Error::from_raw_os_error(libc::EACCES)).to_string();
        assert!(other.contains("/x") && !other.contains("max_map_count"), "{other}");
    }

    /// Runs in a flush of the file at its path, between its sync and raising the flushed
    /// position (any thread).
    #[allow(clippy::type_complexity)]
    pub(crate) static MID_FLUSH: std::sync::Mutex<Option<(PathBuf, Box<dyn Fn() + Send>)>> =
        std::sync::Mutex::new(None);

    /// The next flush of the file at this path fails with EIO (any thread).
    pub(crate) static FAIL_FLUSH_OF: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

    pub(super) fn flush_error(path: &Path) -> io::Result<()> {
        let mut doomed = FAIL_FLUSH_OF.lock().unwrap_or_else(|e| e.into_inner());
        if doomed.as_deref() == Some(path) {
            *doomed = None;
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }

    pub(super) fn mid_flush(path: &Path) {
        let hook = MID_FLUSH.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, f)) = hook.as_ref()
            && p == path
        {
            f()
        }
    }

    pub(super) fn after_link() -> io::Result<()> {
        AFTER_LINK.with(|h| h.borrow_mut().take().map_or(Ok(()), Err))
    }

    /// A creation that fails once its file is named (the mapping refused, ENOMEM at
    /// `vm.max_map_count`) takes the name away: before, every later creation of that file
    /// failed with "File exists" until a restart.
    #[test]
    fn a_creation_failing_after_naming_its_file_can_be_retried() {
        let dir = tempfile::tempdir().unwrap();
        AFTER_LINK.with(|h| *h.borrow_mut() = Some(io::Error::from_raw_os_error(libc::ENOMEM)));
        let err = MappedFile::create(dir.path(), 0, 1 << 20).map(|_| ()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOMEM));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the name is gone");
        let f = MappedFile::create(dir.path(), 0, 1 << 20).unwrap();
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 1 << 20);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    pub(super) fn after_allocate() {
        AFTER_ALLOCATE.with(|h| {
            if let Some(h) = h.borrow().as_ref() {
                h()
            }
        });
    }

    /// A process that dies while making a file (the allocator makes the next 1 GiB file in
    /// the background, so a crash finds it midway more often than not) leaves no entry in
    /// the directory: RocketMQ's loader parses every name there as an offset and refuses to
    /// start beside one like `00000000001073741824.creating`.
    #[test]
    fn a_creation_cut_short_leaves_nothing_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let listing = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        let seen = std::rc::Rc::new(RefCell::new(Vec::new()));
        let probe = {
            let (seen, d) = (seen.clone(), dir.path().to_path_buf());
            move || {
                *seen.borrow_mut() = listing(&d);
                panic!("the process dies here");
            }
        };
        AFTER_ALLOCATE.with(|h| *h.borrow_mut() = Some(Box::new(probe)));
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            MappedFile::create(dir.path(), 1 << 20, 1 << 20).map(|_| ())
        }));
        AFTER_ALLOCATE.with(|h| *h.borrow_mut() = None);
        assert!(died.is_err(), "the creation reached the probe");
        assert_eq!(*seen.borrow(), Vec::<String>::new(), "entries while the file was being made");
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "entries after the creation died");

        // And a creation that runs to its end leaves exactly the named file.
        let f = MappedFile::create(dir.path(), 1 << 20, 1 << 20).unwrap();
        assert_eq!(listing(dir.path()), vec![file_name(1 << 20)]);
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 1 << 20);
    }

    #[test]
    fn create_write_read_flush_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::create(dir.path(), 8192, 8192).unwrap();
        assert_eq!(f.path().file_name().unwrap(), "00000000000000008192");
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 8192);
        f.pretouch_fresh(f.size(), Populate::Write, || true).unwrap();
        f.write_region(0, 5, |b| b.copy_from_slice(b"hello"));
        assert_eq!(f.readable_from(0), b"");
        f.set_wrote_position(5);
        assert_eq!(f.readable_from(0), b"hello");
        assert_eq!(f.read(1, 3), Some(&b"ell"[..]));
        assert_eq!(f.read(1, 10), None);
        assert_eq!(f.flush(4).unwrap(), 0, "fewer dirty pages than asked");
        assert_eq!(f.flush(0).unwrap(), 5);
        drop(f);
        let f = MappedFile::open(&dir.path().join(file_name(8192)), 8192, 8192).unwrap();
        assert_eq!(&f.readable_from(0)[..5], b"hello");
        f.zero_from(2).unwrap();
        drop(f);
        let bytes = std::fs::read(dir.path().join(file_name(8192))).unwrap();
        assert_eq!(&bytes[..5], b"he\0\0\0");
        assert!(MappedFile::open(&dir.path().join(file_name(8192)), 8192, 4096).is_err());
    }

    #[test]
    fn a_flush_behind_the_writer_stops_at_a_folio_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let size = 3 * FOLIO_ALIGN;
        let f = MappedFile::create(dir.path(), 0, size).unwrap();
        let wrote = FOLIO_ALIGN + 5000;
        f.write_region(0, wrote, |b| b.fill(7));
        f.set_wrote_position(wrote);
        assert_eq!(f.flush_aligned(4, FOLIO_ALIGN).unwrap(), FOLIO_ALIGN);
        assert_eq!(f.flushed_position(), FOLIO_ALIGN);
        assert_eq!(f.flush_aligned(4, FOLIO_ALIGN).unwrap(), FOLIO_ALIGN, "nothing more behind the writer");
        assert_eq!(f.flush(0).unwrap(), wrote, "a plain flush goes to the end");
        // A full file is flushed to its end whatever the alignment.
        f.write_region(wrote, size - wrote, |b| b.fill(8));
        f.set_wrote_position(size);
        assert_eq!(f.flush_aligned(4, FOLIO_ALIGN * 2).unwrap(), size);
    }

    /// Whether the extent holding byte 0 of `f` is unwritten (reserved by fallocate, not yet
    /// written): None where the file system does not report extents that way.
    #[cfg(target_os = "linux")]
    fn first_extent_unwritten(f: &MappedFile) -> Option<bool> {
        const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
        const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
        // struct fiemap (32 bytes) followed by one struct fiemap_extent (56 bytes).
        let mut buf = [0u64; (32 + 56) / 8];
        buf[0] = 0; // fm_start
        buf[1] = 4096; // fm_length
        buf[3] = 1; // fm_extent_count = 1 (fm_flags and fm_mapped_extents in buf[2] stay 0)
        // SAFETY: FIEMAP on our own descriptor with a buffer sized for one extent.
        let rc =
            unsafe { libc::ioctl(f.file.as_ref().unwrap().as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
        let mapped = (buf[2] >> 32) as u32;
        if rc != 0 || mapped == 0 {
            return None;
        }
        let flags = buf[4 + 5] as u32; // fe_flags: byte 40 of the extent, the low half of its sixth u64
        Some(flags & FIEMAP_EXTENT_UNWRITTEN != 0)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn zeros_written_ahead_turn_reserved_blocks_into_written_ones() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * OS_PAGE_SIZE;
        let f = MappedFile::create(dir.path(), 0, size).unwrap();
        let before = first_extent_unwritten(&f);
        f.pretouch_fresh(2 * ZERO_CHUNK.min(size / 4) + 1, Populate::Zero, || true).unwrap();
        let ready = f.ready_position();
        assert!(ready > 2 * ZERO_CHUNK.min(size / 4) && ready <= size, "{ready}");
        // Their writeback is waited for, not only started: a file is handed over with its
        // zeros on disk (no sync here).
        if before == Some(true) {
            assert_eq!(first_extent_unwritten(&f), Some(false), "the zeros were written to disk");
        }
        // A writer appends with pwrite after the zeros; a later zeroing ahead of it keeps its bytes.
        f.pwrite_at(0, b"hello").unwrap();
        f.set_wrote_position(5);
        f.zero(ready.min(size - 4096), 4096).unwrap();
        assert_eq!(f.read(0, 5), Some(&b"hello"[..]));
        let bytes = std::fs::read(f.path()).unwrap();
        assert_eq!(&bytes[..5], b"hello");
        assert!(bytes[5..].iter().all(|&b| b == 0));
    }

    /// Which pages of the mapping are mapped into this process (present in its page table,
    /// from /proc/self/pagemap; page-cache residency would not do, readahead fills that).
    #[cfg(target_os = "linux")]
    fn resident(f: &MappedFile) -> Vec<bool> {
        use std::os::unix::fs::FileExt;
        let pages = f.size.div_ceil(OS_PAGE_SIZE);
        let first = f.map.as_ptr() as usize / OS_PAGE_SIZE;
        let mut v = vec![0u8; pages * 8];
        File::open("/proc/self/pagemap").unwrap().read_exact_at(&mut v, (first * 8) as u64).unwrap();
        v.chunks(8).map(|e| u64::from_le_bytes(e.try_into().unwrap()) >> 63 == 1).collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn warming_faults_in_pages_ahead_of_the_writer_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * OS_PAGE_SIZE;
        let f = MappedFile::create(dir.path(), 0, size).unwrap();
        assert!(resident(&f).iter().all(|&x| !x), "{:?}", resident(&f));
        f.pretouch_fresh(8 * OS_PAGE_SIZE + 1, Populate::Write, || true).unwrap();
        assert_eq!(f.ready_position(), 9 * OS_PAGE_SIZE, "rounded up to a page");
        let r = resident(&f);
        assert!(r[..9].iter().all(|&x| x), "{r:?}");
        assert!(r[9..].iter().all(|&x| !x), "nothing past the window: {r:?}");

        // A writer appends; warming ahead of it keeps its bytes and touches up to the window.
        f.write_region(0, 5, |b| b.copy_from_slice(b"hello"));
        f.set_wrote_position(20 * OS_PAGE_SIZE);
        f.pretouch_to(24 * OS_PAGE_SIZE);
        if f.ready_position() == 20 * OS_PAGE_SIZE {
            return; // before Linux 5.14 a live file cannot be warmed without writing: a no-op
        }
        assert_eq!(f.ready_position(), 24 * OS_PAGE_SIZE);
        let r = resident(&f);
        assert!(r[20..24].iter().all(|&x| x), "{r:?}");
        assert!(r[24..].iter().all(|&x| !x), "{r:?}");
        assert_eq!(f.read(0, 5), Some(&b"hello"[..]));
        // Past the end of the file is clamped, and the whole file ends up resident.
        f.pretouch_to(usize::MAX);
        assert_eq!(f.ready_position(), size);
        assert!(resident(&f)[20..].iter().all(|&x| x));
    }
}
