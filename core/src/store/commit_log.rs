//! The CommitLog: every message of every topic, appended to one byte stream (spec 1, 2).
//!
//! Appends take the put lock, assign the physical offset, the per-queue offset and the store
//! time, and encode the record straight into the mapped file. A record never spans two files:
//! when it does not fit (with 8 bytes to spare), the rest of the file gets a BLANK record and
//! the record goes to the next file. Readers never take the lock.

use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::clock::StoreClock;
use super::mapped_file::{FOLIO_ALIGN, MappedFile, OS_PAGE_SIZE, ZERO_CHUNK};
use super::mapped_file_queue::{Allocator, MappedFileQueue};
use super::notify::Notifier;
use super::put_metrics::PutMetrics;
use super::status::PutStatus;
use crate::message::codec::{BLANK_HEADER_LEN, write_blank};
use crate::message::{
    CheckOptions, CheckResult, InvalidMessage, Message, PreparedMessage, check_record, sysflag,
};

pub use super::clock::now_ms;

/// How far past a record's end the put has the CPU fetch the lines it will write (16 KiB: a few
/// dozen records ahead, inside L1 and L2, and well behind the warmer's zeroed window). Measured
/// with `bench store`: 1 KiB ASYNC puts 1.12-1.23 M msgs/s without, 1.24-1.34 M with.
const PREFETCH_AHEAD: usize = 16 * 1024;

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub phy_offset: i64,
    pub wrote_bytes: i32,
    pub queue_offset: i64,
    pub queue_id: i32,
    pub msg_num: i32,
    pub store_timestamp: i64,
}

/// Why an append did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendError {
    /// A status that says why (MESSAGE_ILLEGAL, CREATE_MAPPED_FILE_FAILED, ...).
    Status(PutStatus, String),
}

impl AppendError {
    pub fn status(&self) -> PutStatus {
        match self {
            AppendError::Status(s, _) => *s,
        }
    }
}

/// What a batch's encoded records may take beyond `maxMessageSize` (RocketMQ 5's
/// `MessageExtEncoder` headroom).
pub const BATCH_ENCODING_HEADROOM: usize = 64 * 1024;

/// Settings the CommitLog needs.
#[derive(Debug, Clone)]
pub struct CommitLogOptions {
    pub file_size: usize,
    pub max_message_size: usize,
    pub store_host: SocketAddr,
    pub check_crc_on_recover: bool,
    /// `enabledAppendPropCRC`: each record ends with a whole-record CRC (see
    /// `PreparedMessage::with_record_crc`).
    pub append_record_crc: bool,
    pub delay_levels_ms: Vec<i64>,
    pub os_page_cache_busy_timeout_ms: i64,
    /// Appends go to the file with `pwrite` instead of stores through the mapping (a
    /// SYNC_FLUSH master): no page is then mapped writable, so a flush writes the blocks
    /// written rather than whole folios (with an ext4 that keeps large folios, a store through
    /// the mapping marks all of a folio of up to 2 MiB dirty, and each fsync writes it all
    /// out), and needs no write-protection and TLB shoot-down per page.
    pub append_with_pwrite: bool,
}

struct PutState {
    /// topic -> queue id -> next queue offset.
    queue_offsets: FastMap<String, FastMap<i32, i64>>,
    /// The file appends go to, with the queue generation it was taken at: while the
    /// generation stands, an append neither locks the file list nor touches the file's
    /// reference count, whose cache line the readers' clones would otherwise bounce.
    current: Option<(u64, Arc<MappedFile>)>,
    /// Where a batch is encoded before its `pwrite` (with `append_with_pwrite`); kept, so
    /// that puts do not allocate.
    scratch: Vec<u8>,
    /// The store timestamps' clock (see `StoreClock`).
    clock: StoreClock,
    /// Set (under this lock) when the store shuts down: no append may land after its final
    /// flush, or after its locks are released to the next owner of the directory.
    closed: bool,
    /// Puts (calls) and messages appended since the log was opened, for monitoring:
    /// counted here, under the lock, they cost the put path no locked instruction.
    stored_puts: u64,
    stored_messages: u64,
}

/// A map hashed with FxHash (rustc's hasher). The queue-offset table is looked up under the
/// put lock on every put, where SipHash cost more than the rest of the bookkeeping; its
/// resistance to crafted keys buys little for topic names the broker has accepted.
type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The log.
pub struct CommitLog {
    queue: MappedFileQueue,
    opts: CommitLogOptions,
    /// The put lock, on a cache line of its own: readers polling `max_offset` or waiting on
    /// the notifiers must not make the writer's lock and unlock wait for a shared line.
    /// parking_lot's mutex is eventually fair: a waiter gets the lock within about 0.5 ms
    /// even while other producers keep taking it. std's lets running threads barge forever;
    /// with 64 producers on two cores a put waited up to 2 s behind them.
    put: CachePadded<parking_lot::Mutex<PutState>>,
    /// End of the data visible to readers.
    max_offset: CachePadded<AtomicU64>,
    /// Counters of the put path (see `put_metrics`).
    put_metrics: Arc<PutMetrics>,
    /// When the current holder took the put lock (ms), 0 when free.
    locked_since: AtomicI64,
    poisoned: OnceLock<String>,
    /// Signalled after every append (the dispatcher and the flushers wait on it).
    appended: CachePadded<Notifier>,
    /// Signalled after every append before `appended`: the HA writers, which a SYNC_MASTER put
    /// waits on, are woken first.
    replicate: CachePadded<Notifier>,
    /// Wakes the warmer (see `warm_signal`).
    warm: OffsetTrigger,
    /// Wakes the ASYNC_FLUSH flusher (see `flush_signal`).
    flush: OffsetTrigger,
    /// Flush calls that synced new data (group commit batches many puts into one).
    flushes: AtomicU64,
    faults: FlushFaults,
    /// Where the dispatched records of each store timestamp end (see `note_dispatched`).
    stamps: parking_lot::Mutex<std::collections::VecDeque<(u64, i64)>>,
    /// An HA master serves this log to slaves (see `set_served_to_slaves`).
    served_to_slaves: AtomicBool,
}

/// How many (end, timestamp) samples `note_dispatched` keeps for the flushers; about a second
/// of timestamps at one sample per millisecond. When the flush lags further, the oldest go and
/// `physicMsgTimestamp` waits for a later one: it falls behind, never ahead.
const MAX_STAMPS: usize = 1024;

/// A signal raised by the append that passes an offset its waiter set (`u64::MAX`: none), so
/// that a thread with nothing to do until then costs the put path one comparison.
struct OffsetTrigger {
    at: AtomicU64,
    signal: Notifier,
}

impl Default for OffsetTrigger {
    fn default() -> Self {
        OffsetTrigger { at: AtomicU64::new(u64::MAX), signal: Notifier::new() }
    }
}

impl OffsetTrigger {
    fn set(&self, offset: u64) {
        self.at.store(offset, Ordering::SeqCst);
    }
    fn passed(&self, end: u64) {
        if end >= self.at.load(Ordering::Relaxed) {
            self.signal.notify();
        }
    }
}

/// Faults tests inject into the flush path (a relaxed load when unused; a failing flush is
/// the queue's, `MappedFileQueue::inject_flush_failure`).
#[derive(Default)]
struct FlushFaults {
    delay_ms: AtomicU64,
    /// Flushes sleeping in `delay_ms` now.
    delaying: AtomicU64,
    /// The errno the next `pwrite` append fails with (0: none).
    append_errno: std::sync::atomic::AtomicI32,
}

impl CommitLog {
    /// Each delay level's delay in ms (`messageDelayLevel`, level 1 first).
    pub fn delay_levels_ms(&self) -> &[i64] {
        &self.opts.delay_levels_ms
    }

    /// Loads the files of `dir` (recovery is a separate step).
    pub fn load(
        dir: &std::path::Path,
        opts: CommitLogOptions,
        allocator: Option<Arc<Allocator>>,
    ) -> std::io::Result<Self> {
        Self::load_dirs(Arc::new(super::dirs::LogDirs::single(dir)), opts, allocator)
    }

    /// `load` of a log over several directories (`storePathCommitLog` with `;`).
    pub fn load_dirs(
        dirs: Arc<super::dirs::LogDirs>,
        opts: CommitLogOptions,
        allocator: Option<Arc<Allocator>>,
    ) -> std::io::Result<Self> {
        let queue = MappedFileQueue::load_dirs(dirs, opts.file_size, allocator)?;
        queue.refuse_flushes_after_a_failure();
        // Appends go into the last file: its holes (RocketMQ's files are sparse, and so is a
        // store copied with `cp --sparse` or `rsync -S`) would fault on a full disk, killing
        // the process with SIGBUS in an append (or, on tmpfs, in recovery's first read).
        if let Some(last) = queue.last() {
            last.reserve_through(last.size()).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "reserving the disk blocks of the last CommitLog file {}, which has holes: {e}",
                        last.path().display()
                    ),
                )
            })?;
        }
        let max = queue.max_offset();
        Ok(CommitLog {
            queue,
            opts,
            put: CachePadded::new(parking_lot::Mutex::new(PutState {
                queue_offsets: FastMap::default(),
                current: None,
                scratch: Vec::new(),
                clock: StoreClock::default(),
                closed: false,
                stored_puts: 0,
                stored_messages: 0,
            })),
            max_offset: CachePadded::new(AtomicU64::new(max)),
            put_metrics: Arc::default(),
            locked_since: AtomicI64::new(0),
            poisoned: OnceLock::new(),
            appended: CachePadded::new(Notifier::new()),
            replicate: CachePadded::new(Notifier::new()),
            warm: OffsetTrigger::default(),
            flush: OffsetTrigger::default(),
            flushes: AtomicU64::new(0),
            faults: FlushFaults::default(),
            stamps: parking_lot::Mutex::new(std::collections::VecDeque::new()),
            served_to_slaves: AtomicBool::new(false),
        })
    }

    /// Records that every record dispatched so far and stored at or before `timestamp` ends at
    /// or before `end` (the dispatcher, once per round, with the last record it read; later
    /// records of the same millisecond may follow, see `flushed_timestamp`). Called on masters and
    /// slaves alike: a slave's records carry the master's timestamps, which its own appends
    /// of raw bytes do not know.
    pub fn note_dispatched(&self, end: u64, timestamp: i64) {
        let mut stamps = self.stamps.lock();
        match stamps.back_mut() {
            Some(last) if last.1 >= timestamp => last.0 = last.0.max(end),
            _ => {
                if stamps.len() == MAX_STAMPS {
                    stamps.pop_front();
                }
                stamps.push_back((end, timestamp));
            }
        }
    }

    /// The newest store timestamp whose records all end at or before `flushed`, if it moved
    /// since the last call: what `physicMsgTimestamp` may claim once `flushed` is on disk.
    ///
    /// A sample `(end, ts)` covers every record *older* than `ts`, not every record of `ts`:
    /// the dispatcher's round may stop between two records of one millisecond (it does at
    /// each file's end), and the records of `ts` after `end` come in a later sample. So a
    /// covered sample lets the checkpoint claim `ts - 1`, a millisecond less than it could
    /// with per-record samples, which recovery's 3-second margin dwarfs.
    pub fn flushed_timestamp(&self, flushed: u64) -> Option<i64> {
        let mut stamps = self.stamps.lock();
        let mut newest = None;
        while let Some(&(end, ts)) = stamps.front() {
            if end > flushed {
                break;
            }
            newest = Some(ts.saturating_sub(1));
            stamps.pop_front();
        }
        newest
    }

    /// Set while an HA master serves this log: its slaves hold what it acknowledged, so the
    /// log may not be cut (`MessageStore::truncate` refuses).
    pub fn set_served_to_slaves(&self, on: bool) {
        self.served_to_slaves.store(on, Ordering::Release);
    }

    pub fn served_to_slaves(&self) -> bool {
        self.served_to_slaves.load(Ordering::Acquire)
    }

    pub fn options(&self) -> &CommitLogOptions {
        &self.opts
    }
    pub fn queue(&self) -> &MappedFileQueue {
        &self.queue
    }
    pub fn file_size(&self) -> usize {
        self.opts.file_size
    }
    pub fn store_host(&self) -> SocketAddr {
        self.opts.store_host
    }
    pub fn appended(&self) -> &Notifier {
        &self.appended
    }
    /// The warmer's signal: raised by an append that passes the trigger the warmer set.
    pub fn warm_signal(&self) -> &Notifier {
        &self.warm.signal
    }
    /// Sets the offset whose passing wakes the warmer.
    pub fn set_warm_trigger(&self, offset: u64) {
        self.warm.set(offset);
    }

    /// The ASYNC_FLUSH flusher's signal: raised by an append (or replicated bytes) that
    /// passes the trigger it set, i.e. once there is something for it to flush. Waking it on
    /// every append (as RocketMQ does) made most puts pay a wake-up for a flusher that then
    /// found less than a folio to flush and slept again.
    pub fn flush_signal(&self) -> &Notifier {
        &self.flush.signal
    }
    /// Sets the offset whose passing wakes the flusher.
    pub fn set_flush_trigger(&self, offset: u64) {
        self.flush.set(offset);
    }

    /// The end offset from which `flush_behind_writer(least_pages)` has something to flush:
    /// the next `FOLIO_ALIGN` boundary of the file being flushed at least `least_pages`
    /// pages past what is flushed, or that file's end.
    pub fn next_flush_offset(&self, least_pages: usize) -> u64 {
        let flushed = self.flushed_offset();
        let fs = self.opts.file_size as u64;
        let start = flushed - flushed % fs;
        let pos = flushed - start;
        let align = FOLIO_ALIGN as u64;
        let mut next = (pos / align + 1) * align;
        if next - pos < (least_pages * OS_PAGE_SIZE) as u64 {
            next += align;
        }
        start + next.min(fs)
    }

    /// Raises the signals whose triggers an append ending at `end` passed.
    fn signal_triggers(&self, end: u64) {
        self.warm.passed(end);
        self.flush.passed(end);
    }

    /// The signal HA writers wait on (see `replicate`).
    pub fn replicate_signal(&self) -> &Notifier {
        &self.replicate
    }

    /// End of the last byte written (what readers, the dispatcher and HA may see).
    pub fn max_offset(&self) -> u64 {
        self.max_offset.load(Ordering::Acquire)
    }
    /// First offset still on disk (0 for an empty log).
    pub fn min_offset(&self) -> u64 {
        self.queue.first().map(|f| f.start_offset()).unwrap_or(0)
    }
    pub fn flushed_offset(&self) -> u64 {
        self.queue.flushed_where()
    }

    /// Why the store refuses writes, if a flush failed.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.get().map(|s| s.as_str())
    }
    pub(crate) fn poison(&self, why: String) {
        if self.poisoned.set(why.clone()).is_ok() {
            tracing::error!("store poisoned, refusing writes until restart: {why}");
        }
    }

    /// The start of the file following the one holding `offset`.
    pub fn roll_next_file(&self, offset: u64) -> u64 {
        let fs = self.opts.file_size as u64;
        offset + fs - offset % fs
    }

    /// Options for validating records as this log was configured.
    pub fn check_options(&self, check_crc: bool) -> CheckOptions<'_> {
        CheckOptions { check_crc, delay_levels_ms: &self.opts.delay_levels_ms }
    }

    /// The readable bytes from `offset` to the end of the data in its file, with that file.
    pub fn data_at(&self, offset: u64) -> Option<(Arc<MappedFile>, usize)> {
        let f = self.queue.find(offset)?;
        let pos = (offset - f.start_offset()) as usize;
        if pos > f.wrote_position() {
            return None;
        }
        Some((f, pos))
    }

    /// The record bytes `[offset, offset + size)` if present.
    pub fn read(&self, offset: u64, size: usize) -> Option<(Arc<MappedFile>, usize)> {
        let (f, pos) = self.data_at(offset)?;
        f.read(pos, size)?;
        Some((f, pos))
    }

    /// Sets the next queue offsets (after recovery, from the ConsumeQueues).
    pub fn set_queue_offsets(&self, table: HashMap<String, HashMap<i32, i64>>) {
        let table = table.into_iter().map(|(topic, queues)| (topic, queues.into_iter().collect())).collect();
        self.put.lock().queue_offsets = table;
    }

    /// Deleting `topic`: with puts held off, calls `record(end)` with the end of the log (every
    /// record of the topic so far lies below it) and, if that succeeds, forgets the topic's
    /// queue offsets, so its next record starts each queue again at 0. `record` is called only
    /// if the topic `has_queues` or queue offsets here: else the log holds no record of it.
    pub fn forget_topic_offsets<E>(
        &self,
        topic: &str,
        has_queues: bool,
        record: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut s = self.put.lock();
        let end = self.max_offset();
        if has_queues || s.queue_offsets.contains_key(topic) {
            record(end)?;
        }
        s.queue_offsets.remove(topic);
        Ok(end)
    }

    /// The put path's counters (refusals, and the final statuses of puts that waited),
    /// shared with the flush and replica waiters that complete those puts.
    pub fn put_metrics(&self) -> &Arc<PutMetrics> {
        &self.put_metrics
    }

    /// Puts (calls) and messages appended since the log was opened.
    pub fn stored_counts(&self) -> (u64, u64) {
        let s = self.put.lock();
        (s.stored_puts, s.stored_messages)
    }

    /// The next queue offset of a queue as the put path sees it.
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let s = self.put.lock();
        s.queue_offsets.get(topic).and_then(|q| q.get(&queue_id)).copied().unwrap_or(0)
    }

    /// Refuses every later append (waiting for one in progress to finish): a store that shuts
    /// down calls this before its final dispatch and flush, so every append that succeeded is
    /// in them, and none lands after the store let go of its directory.
    pub fn close_for_writes(&self) {
        self.put.lock().closed = true;
    }

    /// Appends messages as one contiguous batch in one file. Called by the store facade.
    pub fn append(&self, msgs: &[Message]) -> Result<AppendOutcome, AppendError> {
        if let Some(why) = self.poisoned() {
            return Err(AppendError::Status(
                PutStatus::ServiceNotAvailable,
                format!("store poisoned until restart: {why}"),
            ));
        }
        if msgs.is_empty() {
            return Err(AppendError::Status(PutStatus::MessageIllegal, "empty batch".into()));
        }
        let host = self.opts.store_host;
        // Everything position-independent happens before the lock.
        let mut one = [None];
        let mut many = Vec::new();
        let prepared: &mut [Option<PreparedMessage<'_>>] = if msgs.len() == 1 {
            &mut one
        } else {
            many.resize(msgs.len(), None);
            &mut many
        };
        if let Some(m) = msgs.iter().find(|m| m.queue_id < 0) {
            // It would make a ConsumeQueue directory named "-7" (remote sends pick a queue
            // for a negative id before they get here, as RocketMQ's broker does).
            return Err(AppendError::Status(
                PutStatus::MessageIllegal,
                format!("queue id {} is negative", m.queue_id),
            ));
        }
        let mut total = 0usize;
        for (slot, m) in prepared.iter_mut().zip(msgs) {
            // A born timestamp left at 0 ("now") becomes the store timestamp under the lock:
            // one clock read per put instead of two.
            let p = PreparedMessage::prepare(m, &host, self.opts.max_message_size, 0)
                .and_then(|p| p.with_record_crc(self.opts.append_record_crc))
                .map_err(|e| {
                    let (status, why) = match e {
                        InvalidMessage::Topic => {
                            let why = format!(
                                "topic {:?} must be 1 to 127 characters from a-z, A-Z, 0-9, %, |, _ and - \
                             (RocketMQ's TopicValidator; it names a ConsumeQueue directory)",
                                m.topic
                            );
                            return AppendError::Status(PutStatus::MessageIllegal, why);
                        }
                        InvalidMessage::BodyTooLarge => {
                            (PutStatus::MessageIllegal, "body larger than maxMessageSize")
                        }
                        InvalidMessage::PropertiesTooLarge => {
                            (PutStatus::PropertiesSizeExceeded, "properties longer than 32767 bytes")
                        }
                        InvalidMessage::PropertyCharacters => {
                            (PutStatus::MessageIllegal, "a property contains the byte 0x01 or 0x02")
                        }
                    };
                    AppendError::Status(status, why.to_string())
                })?;
            total += p.total_len;
            *slot = Some(p);
        }
        let batch_limit = self.opts.max_message_size.saturating_add(BATCH_ENCODING_HEADROOM);
        if msgs.len() > 1 && total > batch_limit {
            // As RocketMQ 5's batch encoder: the batch's records together, not only each body,
            // stay within maxMessageSize plus 64 KiB of encoding headroom (a batch is one
            // unit under the put lock, and one frame to a slave's reader).
            return Err(AppendError::Status(
                PutStatus::MessageIllegal,
                format!(
                    "a batch of {} messages encodes to {total} bytes, more than maxMessageSize ({}) plus 64 KiB",
                    msgs.len(),
                    self.opts.max_message_size
                ),
            ));
        }
        if total + BLANK_HEADER_LEN > self.opts.file_size {
            return Err(AppendError::Status(
                PutStatus::MessageIllegal,
                format!("{total} bytes do not fit in a CommitLog file of {} bytes", self.opts.file_size),
            ));
        }

        let busy_limit = self.opts.os_page_cache_busy_timeout_ms;
        let since = self.locked_since.load(Ordering::Relaxed);
        if since != 0 && busy_limit > 0 {
            let held = now_ms() - since;
            if held > busy_limit {
                return Err(AppendError::Status(
                    PutStatus::OsPageCacheBusy,
                    format!("the put lock has been held for {held} ms"),
                ));
            }
        }
        let mut state = self.put.lock();
        if state.closed {
            return Err(AppendError::Status(PutStatus::ServiceNotAvailable, "the store is shut down".into()));
        }
        let store_ts = state.clock.now_ms();
        self.locked_since.store(store_ts, Ordering::Relaxed);
        let result = self.append_locked(&mut state, prepared, total, store_ts);
        self.locked_since.store(0, Ordering::Relaxed);
        drop(state);
        if result.is_ok() {
            self.replicate.notify();
            self.appended.notify();
        }
        result
    }

    fn append_locked(
        &self,
        state: &mut PutState,
        prepared: &[Option<PreparedMessage<'_>>],
        total: usize,
        store_ts: i64,
    ) -> Result<AppendOutcome, AppendError> {
        let PutState { queue_offsets, current, scratch, stored_puts, stored_messages, .. } = state;
        let file = self.file_for_append(current, total)?;
        let pos = file.wrote_position();
        let phy = file.start_offset() + pos as u64;
        let host = self.opts.store_host;
        let mut first_queue_offset = -1;
        let mut queue_id = -1;
        let mut encode = |buf: &mut [u8]| {
            let mut at = 0;
            for p in prepared.iter().flatten() {
                let mut p = *p;
                if p.born_timestamp == 0 {
                    p.born_timestamp = store_ts;
                }
                let m = p.msg;
                let queue_offset = if sysflag::takes_queue_offset(p.sys_flag) {
                    // No allocation once a topic is known: look up by &str.
                    let offs = match queue_offsets.get_mut(m.topic.as_str()) {
                        Some(q) => q,
                        None => queue_offsets.entry(m.topic.clone()).or_default(),
                    };
                    let slot = offs.entry(m.queue_id).or_insert(0);
                    let q = *slot;
                    *slot += 1;
                    q
                } else {
                    0
                };
                if first_queue_offset < 0 {
                    first_queue_offset = queue_offset;
                    queue_id = m.queue_id;
                }
                p.write(
                    &mut buf[at..at + p.total_len],
                    queue_offset,
                    (phy + at as u64) as i64,
                    store_ts,
                    &host,
                );
                at += p.total_len;
            }
        };
        if self.opts.append_with_pwrite {
            if scratch.len() < total {
                scratch.resize(total, 0);
            }
            let buf = &mut scratch[..total];
            encode(buf);
            let injected = self.faults.append_errno.swap(0, Ordering::AcqRel);
            let written = if injected != 0 {
                Err(std::io::Error::from_raw_os_error(injected))
            } else {
                file.pwrite_at(pos, buf)
            };
            if let Err(e) = written {
                let why = format!("writing {total} bytes at {phy} to {}: {e}", file.path().display());
                if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
                    // Nothing was appended (the write position stays, and the next append
                    // writes over whatever part landed): give the queue offsets back and
                    // refuse only this put, so writing resumes once space returns.
                    for p in prepared.iter().flatten().filter(|p| sysflag::takes_queue_offset(p.sys_flag)) {
                        if let Some(slot) = queue_offsets
                            .get_mut(p.msg.topic.as_str())
                            .and_then(|q| q.get_mut(&p.msg.queue_id))
                        {
                            *slot -= 1;
                        }
                    }
                    tracing::warn!("put refused, the disk is full: {why}");
                    return Err(AppendError::Status(PutStatus::ServiceNotAvailable, why));
                }
                // Any other failure: the bytes' fate is unknown, and nothing may be appended
                // after a possible gap, so the store refuses writes from here on.
                self.poison(why.clone());
                return Err(AppendError::Status(PutStatus::ServiceNotAvailable, why));
            }
        } else {
            file.write_region(pos, total, encode);
            // As many lines as this record took, PREFETCH_AHEAD further on: the put lock's
            // release waits for the record's stores, and stores into lines already in the
            // cache do not wait for memory.
            file.prefetch_for_write(pos + total + PREFETCH_AHEAD, total);
        }
        // Here rather than after the call, where the same two adds cost the put path about
        // 15 ns more (measured at 128 B, ASYNC_FLUSH, 1 thread).
        *stored_puts += 1;
        *stored_messages += prepared.len() as u64;
        file.set_wrote_position(pos + total);
        self.max_offset.store(phy + total as u64, Ordering::Release);
        self.signal_triggers(phy + total as u64);
        Ok(AppendOutcome {
            phy_offset: phy as i64,
            wrote_bytes: total as i32,
            queue_offset: first_queue_offset,
            queue_id,
            msg_num: prepared.len() as i32,
            store_timestamp: store_ts,
        })
    }

    /// The file the next `len` bytes go into: the cached current file while the file list is
    /// unchanged and the bytes fit, else as `roll_for_append` finds it.
    fn file_for_append<'s>(
        &self,
        current: &'s mut Option<(u64, Arc<MappedFile>)>,
        len: usize,
    ) -> Result<&'s MappedFile, AppendError> {
        let generation = self.queue.generation();
        let fits = |f: &MappedFile| f.wrote_position() + len + BLANK_HEADER_LEN <= self.opts.file_size;
        match current {
            Some((g, f)) if *g == generation && fits(f) => {}
            _ => {
                // Read before the list is: a change after it only costs one more lookup.
                let f = self.roll_for_append(len)?;
                *current = Some((generation, f));
            }
        }
        Ok(&current.as_ref().expect("just set").1)
    }

    /// The file the next `len` bytes go into, writing the BLANK record and rolling if needed.
    fn roll_for_append(&self, len: usize) -> Result<Arc<MappedFile>, AppendError> {
        let fs = self.opts.file_size;
        let file = match self.queue.last() {
            Some(f) if !f.is_full() => f,
            Some(f) => self.new_file(f.end_offset())?,
            None => {
                let max = self.max_offset();
                self.new_file(max - max % fs as u64)?
            }
        };
        let pos = file.wrote_position();
        let max_blank = fs - pos;
        if len + BLANK_HEADER_LEN <= max_blank {
            return Ok(file);
        }
        // Create the next file first: if that fails, the current file stays appendable and
        // nothing is half done.
        let next = self.new_file(file.end_offset())?;
        file.write_region(pos, BLANK_HEADER_LEN, |buf| write_blank(buf, max_blank));
        file.set_wrote_position(fs);
        self.max_offset.store(file.end_offset(), Ordering::Release);
        Ok(next)
    }

    fn new_file(&self, start: u64) -> Result<Arc<MappedFile>, AppendError> {
        if let Some(last) = self.queue.last() {
            if last.end_offset() > start {
                return Ok(last); // already created (a roll prepared the next file)
            }
        }
        self.queue.create_file(start).map_err(|e| {
            let why =
                format!("cannot create CommitLog file at {start} in {}: {e}", self.queue.dirs().describe());
            // Every put fails this way until it is fixed (a full disk below the disk guard's
            // level, a permission): an operator must see it, once a minute with a count.
            static FAILED: crate::logging::Throttle =
                crate::logging::Throttle::new(std::time::Duration::from_secs(60));
            if let Some(n) = FAILED.note(&e.to_string()) {
                tracing::error!(
                    "puts fail with CREATE_MAPPED_FILE_FAILED: {why}{}",
                    crate::logging::recurred(n)
                );
            }
            AppendError::Status(PutStatus::CreateMappedFileFailed, why)
        })
    }

    /// Appends replicated bytes at exactly `offset` (a slave applying a master's frame). The
    /// bytes must not cross a file boundary; an empty log accepts any file-aligned offset and
    /// creates its first file there, so the slave's files match the master's.
    pub fn append_raw(&self, offset: u64, data: &[u8]) -> Result<(), String> {
        if let Some(why) = self.poisoned() {
            return Err(format!("store poisoned until restart: {why}"));
        }
        if data.is_empty() {
            return Ok(());
        }
        let fs = self.opts.file_size as u64;
        let state = self.put.lock();
        if state.closed {
            return Err("the store is shut down".into());
        }
        let max = self.max_offset();
        let empty = max == 0;
        if empty && self.queue.last().is_some() {
            // Only empty files (a log truncated to nothing): start afresh where the master is.
            self.queue.destroy_all().map_err(|e| format!("cannot clear the empty log: {e}"))?;
        }
        if empty {
            if offset % fs != 0 {
                return Err(format!("an empty slave can only start at a file boundary, not at {offset}"));
            }
        } else if offset != max {
            return Err(format!("frame at offset {offset} but the log ends at {max}"));
        }
        if offset % fs + data.len() as u64 > fs {
            return Err(format!("frame at {offset} of {} bytes crosses a file boundary", data.len()));
        }
        let file = match self.queue.last() {
            Some(f) if !f.is_full() && f.start_offset() <= offset && offset < f.end_offset() => f,
            _ => self.queue.create_file(offset - offset % fs).map_err(|e| {
                format!(
                    "cannot create CommitLog file at {} in {}: {e}",
                    offset - offset % fs,
                    self.queue.dirs().describe()
                )
            })?,
        };
        let pos = (offset - file.start_offset()) as usize;
        file.pwrite_at(pos, data).map_err(|e| {
            let why = format!(
                "writing {} replicated bytes at {offset} to {}: {e}",
                data.len(),
                file.path().display()
            );
            if e.kind() != std::io::ErrorKind::StorageFull {
                self.poison(why.clone());
            }
            why
        })?;
        file.set_wrote_position(pos + data.len());
        self.max_offset.store(offset + data.len() as u64, Ordering::Release);
        drop(state);
        self.signal_triggers(offset + data.len() as u64);
        // The caller (the slave's HA client) acks first and then wakes the dispatcher with
        // `appended().notify()`, so the ack is not queued behind the dispatcher's wake-up.
        Ok(())
    }

    /// Flushes up to the current end; returns the flushed offset, poisoning the log on error.
    pub fn flush(&self, least_pages: usize) -> std::io::Result<u64> {
        self.flush_with(|q| q.flush(least_pages))
    }

    /// Makes the next `window` bytes of the current file ready for the writer, as its appends
    /// need (`Populate`): faulted in where it stores through the mapping; written with zeros,
    /// and sent to disk, where it appends with `pwrite`.
    pub fn warm_ahead(&self, window: usize) -> std::io::Result<()> {
        if !self.opts.append_with_pwrite {
            if let Some(f) = self.queue.last() {
                f.pretouch_to(f.wrote_position() + window);
            }
            return Ok(());
        }
        // Zeros go a `ZERO_CHUNK` at a time under the put lock, so that no append can land in
        // a range being zeroed.
        loop {
            let state = self.put.lock();
            let Some(file) = self.queue.last() else { return Ok(()) };
            let from = file.ready_position();
            let end = (file.wrote_position() + window).min(file.size());
            if from >= end {
                return Ok(());
            }
            let len = ZERO_CHUNK.min(end - from);
            let r = file.zero(from, len);
            drop(state);
            r?;
            file.start_writeback(from, len)?;
        }
    }

    /// Flushes like `flush`, but only up to the last `FOLIO_ALIGN` boundary behind the writer
    /// in the current file (all of a full file): the writer's folio stays writable.
    pub fn flush_behind_writer(&self, least_pages: usize) -> std::io::Result<u64> {
        self.flush_with(|q| q.flush_aligned(least_pages, FOLIO_ALIGN))
    }

    /// Flushes everything written so far.
    pub fn flush_all(&self) -> std::io::Result<u64> {
        self.flush_with(MappedFileQueue::flush_all)
    }

    fn flush_with(&self, f: impl FnOnce(&MappedFileQueue) -> std::io::Result<u64>) -> std::io::Result<u64> {
        // After a failed sync no later one proves anything: the kernel reports a writeback
        // error once, to whichever caller syncs first, and marks the failed pages clean, so
        // the next sync of the same bytes succeeds. A flush that began before another
        // caller's failed is no proof either. Either way the puts it would complete must not
        // hear PUT_OK.
        let refused = |why: &str| std::io::Error::other(format!("store poisoned until restart: {why}"));
        if let Some(why) = self.poisoned() {
            return Err(refused(why));
        }
        let before = self.queue.flushed_where();
        let r = self.injected_fault().and_then(|()| f(&self.queue));
        match &r {
            Ok(_) if self.poisoned().is_some() => {
                return Err(refused(self.poisoned().unwrap_or_default()));
            }
            Ok(after) if *after > before => {
                self.flushes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => self.poison(format!("flushing {} failed: {e}", self.queue.dirs().describe())),
        }
        r
    }

    /// How many flushes synced new data so far (a measure of group commit).
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    fn injected_fault(&self) -> std::io::Result<()> {
        let delay = self.faults.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            self.faults.delaying.fetch_add(1, Ordering::AcqRel);
            std::thread::sleep(std::time::Duration::from_millis(delay));
            self.faults.delaying.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Test hook: the next flush fails with an I/O error, as a failed fsync would (inside the
    /// queue's flush, under its lock, as a real one).
    #[doc(hidden)]
    pub fn inject_flush_failure(&self) {
        self.queue.inject_flush_failure();
    }

    /// Test hook: the next append written with `pwrite` (SYNC_FLUSH) fails with `errno`.
    #[doc(hidden)]
    pub fn inject_append_error(&self, errno: i32) {
        self.faults.append_errno.store(errno, Ordering::Release);
    }

    /// Test hook: how many flushes are sleeping in `inject_flush_delay` now.
    #[doc(hidden)]
    pub fn flushes_in_injected_delay(&self) -> u64 {
        self.faults.delaying.load(Ordering::Acquire)
    }

    /// Test hook: every flush first sleeps `ms` milliseconds (0 turns it off), as a slow disk.
    #[doc(hidden)]
    pub fn inject_flush_delay(&self, ms: u64) {
        self.faults.delay_ms.store(ms, Ordering::Release);
    }

    /// The last record start at or before `target`, found by hopping over record lengths from
    /// `file_start` (a file's start, which is always a record start); `file_start` itself
    /// when none is readable. Reads 8 bytes per record: cheap even across a 1 GiB file.
    pub fn record_start_at_or_before(&self, file_start: u64, target: u64) -> u64 {
        let mut at = file_start;
        while at < target {
            let Some((file, pos)) = self.data_at(at) else { break };
            let Some(head) = file.read(pos, 8) else { break };
            let size = i32::from_be_bytes(head[..4].try_into().unwrap_or_default());
            let magic = i32::from_be_bytes(head[4..8].try_into().unwrap_or_default());
            let is_record = magic == crate::message::codec::MESSAGE_MAGIC_CODE
                || magic == crate::message::codec::MESSAGE_MAGIC_CODE_V2;
            if !is_record || size <= 0 || at + size as u64 > target {
                break;
            }
            at += size as u64;
        }
        at
    }

    /// Walks records from `from` (a record boundary) and returns the end of the last valid
    /// one, as recovery does: a BLANK jumps to the next file, anything invalid or short stops.
    /// `visit` sees each valid record's offset and its decoded header.
    pub fn scan_valid_end(
        &self,
        from: u64,
        check_crc: bool,
        mut visit: impl FnMut(u64, &crate::message::DispatchRequest<'_>),
    ) -> u64 {
        let opts = self.check_options(check_crc);
        let mut offset = from;
        loop {
            let Some((file, pos)) = self.data_at(offset) else { return offset };
            let data = file.readable_from(pos);
            if data.is_empty() {
                return offset;
            }
            match check_record(data, &opts) {
                CheckResult::Message(req) => {
                    if req.commit_log_offset as u64 != offset {
                        // A record copied from elsewhere: not part of this log.
                        return offset;
                    }
                    visit(offset, &req);
                    offset += req.msg_size as u64;
                }
                CheckResult::Blank => {
                    let next = self.roll_next_file(offset);
                    if self.queue.find(next).is_none() {
                        return next;
                    }
                    offset = next;
                }
                _ => return offset,
            }
        }
    }

    /// Cuts the log at `offset`, zeroing what follows on disk. Nothing may read beyond
    /// `offset` meanwhile (the caller stops the dispatcher and HA first).
    pub fn truncate(&self, offset: u64) -> std::io::Result<()> {
        let _state = self.put.lock();
        // Checked again under the put lock: a caller's check ran before it, and puts may have
        // appended since (on a master serving slaves, records streamed and acknowledged).
        let end = self.max_offset.load(Ordering::Acquire);
        if offset > end {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("cannot truncate to {offset}: beyond the CommitLog's end at {end}"),
            ));
        }
        if self.served_to_slaves() && offset < end {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "cannot truncate to {offset}: this master serves its CommitLog to slaves, which hold what \
                     would be cut (it ends at {end})"
                ),
            ));
        }
        // Cut short (a file left, its tail half zeroed, or the zeros' sync failed), the log's
        // files and positions no longer agree, and cut records could come back after a crash:
        // nothing may be appended after that.
        if let Err(e) = self.injected_fault().and_then(|()| self.queue.truncate(offset)) {
            self.poison(format!("truncating the CommitLog to offset {offset}: {e}"));
            return Err(e);
        }
        self.max_offset.store(offset, Ordering::Release);
        // Samples of records that are gone would hold `physicMsgTimestamp` back until the
        // log grew past them again.
        self.stamps.lock().retain(|&(end, _)| end <= offset);
        Ok(())
    }

    /// Sets positions after recovery: everything before `offset` is whole, `offset` is the end.
    pub(crate) fn set_recovered_end(&self, offset: u64) -> std::io::Result<()> {
        self.queue.truncate(offset)?;
        self.queue.set_flushed_where(offset);
        if let Some(last) = self.queue.last() {
            let pos = (offset.saturating_sub(last.start_offset()) as usize).min(last.size());
            last.set_flushed_position(pos);
        }
        self.max_offset.store(offset, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &std::path::Path) -> CommitLog {
        let opts = CommitLogOptions {
            file_size: 4096,
            max_message_size: 1024,
            store_host: "127.0.0.1:0".parse().unwrap(),
            check_crc_on_recover: true,
            append_record_crc: false,
            delay_levels_ms: Vec::new(),
            os_page_cache_busy_timeout_ms: 1000,
            append_with_pwrite: false,
        };
        CommitLog::load(dir, opts, None).unwrap()
    }

    #[test]
    fn flushed_timestamp_names_only_timestamps_whose_records_are_all_covered() {
        let dir = tempfile::tempdir().unwrap();
        let cl = log(dir.path());
        cl.note_dispatched(100, 10);
        cl.note_dispatched(200, 10); // more records of the same millisecond
        cl.note_dispatched(300, 11);
        assert_eq!(cl.flushed_timestamp(150), None, "records of ms 10 end at 200");
        assert_eq!(cl.flushed_timestamp(200), Some(9), "records of ms 10 may follow 200");
        assert_eq!(cl.flushed_timestamp(250), None, "nothing new is covered");
        // A clock stepped back: its records count as the newest timestamp's.
        cl.note_dispatched(400, 9);
        assert_eq!(cl.flushed_timestamp(300), None);
        assert_eq!(cl.flushed_timestamp(400), Some(10));

        // A round that stopped mid-millisecond (at a file's end) and a flush that reached
        // exactly there: ms 20 is not all on disk, its next records come in the next round.
        cl.note_dispatched(500, 20);
        assert_eq!(cl.flushed_timestamp(500), Some(19));
        cl.note_dispatched(600, 20);
        assert_eq!(cl.flushed_timestamp(599), None);
        cl.note_dispatched(700, 21);
        assert_eq!(cl.flushed_timestamp(700), Some(20));

        // A flush far behind: the oldest samples go, the newest stay.
        for i in 0..MAX_STAMPS as u64 + 10 {
            cl.note_dispatched(1000 + i, 100 + i as i64);
        }
        assert_eq!(cl.stamps.lock().len(), MAX_STAMPS);
        assert_eq!(cl.flushed_timestamp(u64::MAX), Some(100 + MAX_STAMPS as i64 + 8));

        // A truncation forgets the samples of records it cut.
        cl.note_dispatched(5000, 2000);
        cl.truncate(0).unwrap();
        assert_eq!(cl.flushed_timestamp(u64::MAX), None);
    }

    /// A truncation that fails midway leaves files and positions that disagree (and, if the
    /// zeros were not synced, cut records that a crash could bring back): the log refuses
    /// appends from then on rather than write after it.
    #[test]
    fn a_failed_truncation_poisons_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let cl = log(dir.path());
        let msg = crate::message::Message::new("T", b"hello".to_vec());
        let first = cl.append(std::slice::from_ref(&msg)).map_err(|_| "append").unwrap();
        cl.append(std::slice::from_ref(&msg)).map_err(|_| "append").unwrap();
        cl.inject_flush_failure();
        assert!(cl.truncate((first.phy_offset + first.wrote_bytes as i64) as u64).is_err());
        let why = cl.poisoned().expect("poisoned");
        assert!(why.contains("truncating the CommitLog"), "{why}");
        assert!(cl.append(std::slice::from_ref(&msg)).is_err());
    }
}
