//! `MessageStore`: the CommitLog, ConsumeQueues, index, dispatcher, flush and retention
//! services of one store directory, opened, recovered, started and shut down together.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::checkpoint::StoreCheckpoint;
use super::commit_log::{AppendError, CommitLog, CommitLogOptions};
use super::consume_queue::{CQ_UNIT_SIZE, ConsumeQueue, ConsumeQueueStore, CqUnit};
use super::deleted_topics::DeletedTopics;
use super::dirs::LogDirs;
use super::dispatcher::Dispatcher;
use super::flush::{self, StopSignal};
use super::index::{IndexOptions, IndexService};
use super::lock::{self, StoreLock};
use super::mapped_file::Populate;
use super::mapped_file_queue::Allocator;
use super::put_metrics::PutMetrics;
use super::read::{
    GetMessageResult, GetMessageStatus, MessageFilter, RawRecord, StoredMessage, TimeBoundary,
    total_physical_memory,
};
use super::retention::{self, DiskGuard, RetentionOptions, RetentionReport, StoreClock, SystemClock};
use super::status::{PutResult, PutStatus};
use super::wait::{OffsetWaiters, PutTicket, WaitPart, WakeRelay};
use crate::config::{BrokerConfig, BrokerRole, FlushDiskType};
use crate::error::{Error, Result};
use crate::fork::ForkGuard;
use crate::join_unless_current;
use crate::message::{Message, decode_offset_msg_id, decode_record, parse_delay_levels};

/// A put's answer: final at once, or pending a flush and/or a slave ack.
#[derive(Debug, Clone)]
pub enum PutHandle {
    Ready(PutResult),
    Pending(PutTicket),
}

impl PutHandle {
    /// Blocks until the answer is final.
    pub fn wait(self) -> PutResult {
        match self {
            PutHandle::Ready(r) => r,
            PutHandle::Pending(t) => t.wait(),
        }
    }
    /// The ticket, if the answer is pending.
    pub fn ticket(&self) -> Option<&PutTicket> {
        match self {
            PutHandle::Ready(_) => None,
            PutHandle::Pending(t) => Some(t),
        }
    }
    /// Runs `f` with the final answer (at once if known).
    pub fn on_complete(self, f: impl FnOnce(PutResult) + Send + 'static) {
        match self {
            PutHandle::Ready(r) => f(r),
            PutHandle::Pending(t) => t.on_complete(f),
        }
    }
}

/// How the last run ended and what recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub last_exit_ok: bool,
    /// End of the CommitLog after recovery.
    pub recovered_offset: u64,
    /// Whether non-zero bytes after the last valid record were cut (a torn or corrupt tail).
    pub torn_tail: bool,
    /// Where dispatch resumed.
    pub dispatch_from: u64,
    /// Records the ConsumeQueues had indexed at or past `recovered_offset`, which the
    /// CommitLog no longer holds (a torn or zeroed tail): logged as lost.
    pub indexed_records_lost: u64,
}

/// Deleted topics, in the store's root directory (see `deleted_topics`).
pub const DELETED_TOPICS_FILE: &str = "deletedTopics.json";

/// How long a stopping store waits for a dispatcher that does not move.
/// Most records a key query reads (see `query_by_key`).
pub const KEY_QUERY_CANDIDATES: usize = 4096;

const STALLED_DISPATCH: Duration = Duration::from_millis(300);

const ROLE_ASYNC_MASTER: u8 = 0;
const ROLE_SYNC_MASTER: u8 = 1;
const ROLE_SLAVE: u8 = 2;

fn role_code(r: BrokerRole) -> u8 {
    match r {
        BrokerRole::AsyncMaster => ROLE_ASYNC_MASTER,
        BrokerRole::SyncMaster => ROLE_SYNC_MASTER,
        BrokerRole::Slave => ROLE_SLAVE,
    }
}

/// The store of one directory.
pub struct MessageStore {
    config: Arc<BrokerConfig>,
    role: AtomicU8,
    commit_log: Arc<CommitLog>,
    cqs: Arc<ConsumeQueueStore>,
    index: Option<Arc<IndexService>>,
    checkpoint: Arc<StoreCheckpoint>,
    allocator: Arc<Allocator>,
    dispatcher: Arc<Dispatcher>,
    flush_waiters: Arc<OffsetWaiters>,
    /// How threads blocked on this store's puts are woken (see `WakeRelay`).
    wake: Option<Arc<WakeRelay>>,
    clock: Arc<dyn StoreClock>,
    /// Set while the disk is above `diskSpaceWarningLevelRatio`: puts are refused.
    disk: Arc<DiskGuard>,
    stop: Arc<StopSignal>,
    dispatcher_stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    running: AtomicBool,
    /// Set once `start` has restored the queue offsets and made the abort file: puts are
    /// taken from then on (`running` is set when a start begins).
    accepting: AtomicBool,
    shut: AtomicBool,
    recovery: RecoveryReport,
    total_memory: u64,
    /// The process that opened the store; a fork of it may not write (`crate::fork`).
    fork: ForkGuard,
    /// The store's `lock` and the CommitLog directory's own lock (see
    /// `lock::lock_commit_log_dir`), held until a shutdown completes: a handle kept after it
    /// (a binding's call in flight) must not keep another broker off the store.
    locks: Mutex<Option<(StoreLock, Vec<StoreLock>)>>,
    /// Held through a shutdown, so that a concurrent call returns only once it is done.
    stopping: Mutex<()>,
    /// Why the last `shutdown` was not clean (the abort file kept), if it was not.
    unclean: Mutex<Option<String>>,
}

fn io_err(path: &std::path::Path, op: &'static str, source: std::io::Error) -> Error {
    Error::Io { op, path: path.to_path_buf(), source }
}

/// The CommitLog's directories (`storePathCommitLog`, `readOnlyCommitLogStorePaths`), the
/// writable ones created. Two entries that are one directory (through a symlink) are refused:
/// their files would be loaded twice and their locks would clash. So is a missing writable
/// directory beside others that hold CommitLog files: most likely its disk is not mounted,
/// and the log would go on without the files there (its tail, say), handing their offsets
/// out again; a new directory must be made by hand first.
fn commit_log_dirs(config: &BrokerConfig) -> Result<Arc<LogDirs>> {
    let (write, read_only) = (config.commit_log_dirs(), config.read_only_commit_log_dirs());
    let holds_files = |d: &PathBuf| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten().any(|e| e.file_name().to_str().is_some_and(super::mapped_file::is_file_name))
        })
    };
    if let Some(missing) = write.iter().find(|d| !d.exists()) {
        if let Some(with_files) = write.iter().chain(&read_only).find(|d| holds_files(d)) {
            return Err(Error::Store(format!(
                "the CommitLog directory {} does not exist, but {} holds CommitLog files: if it is on a disk \
                 that is not mounted, mount it (its files are part of the log); if it is a new directory, \
                 create it (mkdir -p) and start again",
                missing.display(),
                with_files.display()
            )));
        }
    }
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::new();
    for dir in write.iter().chain(&read_only) {
        if !read_only.contains(dir) {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "cannot create CommitLog directory", e))?;
        }
        let Ok(real) = std::fs::canonicalize(dir) else { continue };
        if let Some((_, first)) = seen.iter().find(|(r, d)| *r == real && *d != dir) {
            return Err(Error::Config(crate::config::ConfigError::new(format!(
                "storePathCommitLog/readOnlyCommitLogStorePaths name the directory {} twice, as {} and {}",
                real.display(),
                first.display(),
                dir.display()
            ))));
        }
        seen.push((real, dir));
    }
    LogDirs::new(&write, &read_only)
        .map(Arc::new)
        .map_err(|e| Error::Config(crate::config::ConfigError::new(e.to_string())))
}

/// A lock another broker holds is a store error that says so; any other failure to take it is
/// an I/O error on `path`.
fn lock_err(path: &std::path::Path, op: &'static str, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::WouldBlock { Error::Store(e.to_string()) } else { io_err(path, op, e) }
}

impl MessageStore {
    /// Opens and recovers the store of `config.storePathRootDir` (no threads yet; see `start`).
    pub fn open(config: BrokerConfig) -> Result<Arc<Self>> {
        Self::open_with_clock(config, Arc::new(SystemClock))
    }

    /// `open` with an injected clock (tests of retention).
    pub fn open_with_clock(config: BrokerConfig, clock: Arc<dyn StoreClock>) -> Result<Arc<Self>> {
        config.validate()?;
        raise_open_file_limit();
        let root = config.store_root();
        std::fs::create_dir_all(&root).map_err(|e| io_err(&root, "cannot create store directory", e))?;
        let lock = StoreLock::acquire(&config.lock_path())
            .map_err(|e| lock_err(&config.lock_path(), "cannot lock", e))?;
        let cl_dirs = commit_log_dirs(&config)?;
        let mut cl_locks = Vec::new();
        for dir in cl_dirs.all() {
            if cl_dirs.is_read_only(dir) && !dir.exists() {
                continue; // nothing to read there (RocketMQ skips it too)
            }
            let lock = lock::lock_commit_log_dir(dir)
                .map_err(|e| lock_err(dir, "cannot create CommitLog directory", e))?;
            cl_locks.extend(lock);
        }
        let last_exit_ok = lock::last_exit_ok(&config.abort_path());
        let store_host = store_host(&config);
        let delay_levels = parse_delay_levels(&config.message_delay_level).ok_or_else(|| {
            Error::Config(crate::config::ConfigError::new(format!(
                "messageDelayLevel {:?} is not a list like \"1s 5s 1m 2h\"",
                config.message_delay_level
            )))
        })?;
        // A SYNC_FLUSH master appends with pwrite and has zeros written ahead of it; an
        // ASYNC_FLUSH one stores through the mapping and has its pages faulted in ahead.
        let append_with_pwrite = config.flush_disk_type == FlushDiskType::SyncFlush;
        let allocator = Allocator::new(if append_with_pwrite { Populate::Zero } else { Populate::Write });
        allocator.set_pretouch(pretouch_bytes(&config, config.broker_role));
        let commit_log = Arc::new(
            CommitLog::load_dirs(
                cl_dirs.clone(),
                CommitLogOptions {
                    file_size: config.mapped_file_size_commit_log as usize,
                    max_message_size: config.max_message_size as usize,
                    store_host,
                    check_crc_on_recover: config.check_crc_on_recover,
                    append_record_crc: config.enabled_append_prop_crc,
                    delay_levels_ms: delay_levels,
                    os_page_cache_busy_timeout_ms: config.os_page_cache_busy_time_out_mills,
                    append_with_pwrite,
                },
                Some(allocator.clone()),
            )
            .map_err(|e| {
                let op = match e.kind() {
                    std::io::ErrorKind::InvalidData => "cannot load CommitLog (mappedFileSizeCommitLog) from",
                    _ => "cannot load CommitLog from",
                };
                io_err(Path::new(&cl_dirs.describe()), op, e)
            })?,
        );
        let cq_dir = config.consume_queue_dir();
        let cqs = Arc::new(
            ConsumeQueueStore::load(&cq_dir, config.consume_queue_file_size() as usize).map_err(|e| {
                // The key only where a file's size or a gap between files says it.
                let op = match e.kind() {
                    std::io::ErrorKind::InvalidData => {
                        "cannot load consume queues (mappedFileSizeConsumeQueue) from"
                    }
                    _ => "cannot load consume queues from",
                };
                io_err(&cq_dir, op, e)
            })?,
        );
        let cp_path = config.checkpoint_path();
        let checkpoint = Arc::new(
            StoreCheckpoint::open(&cp_path).map_err(|e| io_err(&cp_path, "cannot open checkpoint", e))?,
        );
        let index = if config.message_index_enable {
            let dir = config.index_dir();
            Some(Arc::new(
                IndexService::load(
                    &dir,
                    IndexOptions {
                        slot_num: config.max_hash_slot_num as usize,
                        index_num: config.max_index_num as usize,
                        max_msgs_num_batch: config.max_msgs_num_batch as usize,
                    },
                    checkpoint.clone(),
                    last_exit_ok,
                )
                .map_err(|e| io_err(&dir, "cannot load index files from", e))?,
            ))
        } else {
            None
        };
        let deleted_path = root.join(DELETED_TOPICS_FILE);
        let deleted = Arc::new(DeletedTopics::open(deleted_path)?);
        let recovery =
            recover(&config, &commit_log, &cqs, index.as_deref(), &checkpoint, &deleted, last_exit_ok)?;
        let dispatcher = Arc::new(Dispatcher::new(
            commit_log.clone(),
            cqs.clone(),
            index.clone(),
            deleted,
            config.broker_role == BrokerRole::Slave,
            recovery.dispatch_from,
        ));
        let flushed = commit_log.flushed_offset() as i64;
        let flush_waiters = OffsetWaiters::new(
            WaitPart::Flush,
            PutStatus::FlushDiskTimeout,
            flushed,
            Some(commit_log.put_metrics().clone()),
        );
        // A disk slower than syncFlushTimeout answered puts FLUSH_DISK_TIMEOUT without a word.
        let (timeout_ms, dir) = (config.sync_flush_timeout, cl_dirs.describe());
        let timeouts = crate::logging::Throttle::new(std::time::Duration::from_secs(60));
        flush_waiters.set_on_expired(move |n| {
            if let Some(rounds) = timeouts.note("timeout") {
                tracing::warn!(
                    "{n} SYNC_FLUSH put(s) answered FLUSH_DISK_TIMEOUT: not flushed to {} within syncFlushTimeout \
                     ({timeout_ms} ms){}",
                    dir,
                    crate::logging::recurred(rounds)
                );
            }
        });
        Ok(Arc::new(MessageStore {
            role: AtomicU8::new(role_code(config.broker_role)),
            config: Arc::new(config),
            commit_log,
            cqs,
            index,
            checkpoint,
            allocator,
            dispatcher,
            flush_waiters,
            wake: WakeRelay::new(),
            clock,
            disk: Arc::new(DiskGuard::default()),
            stop: StopSignal::new(),
            dispatcher_stop: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
            running: AtomicBool::new(false),
            accepting: AtomicBool::new(false),
            shut: AtomicBool::new(false),
            recovery,
            total_memory: total_physical_memory(),
            fork: ForkGuard::new(),
            locks: Mutex::new(Some((lock, cl_locks))),
            stopping: Mutex::new(()),
            unclean: Mutex::new(None),
        }))
    }

    /// Dispatches what recovery left undispatched, then starts the service threads and marks
    /// the store as running (the abort file).
    pub fn start(self: &Arc<Self>) -> Result<()> {
        if self.shut.load(Ordering::Acquire) {
            // Its locks are let go and its threads joined: starting them again would run a
            // store another process may hold now.
            return Err(Error::Store("the store was shut down: open it again to start it".into()));
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Queue offsets for new puts come from the ConsumeQueues, so they must be complete first.
        // Until they are (`accepting`), puts are refused: one taken meanwhile got queue offset
        // 0 in a queue that had messages, and its unit was never written.
        while self
            .dispatcher
            .dispatch_available()
            .map_err(|e| Error::Store(format!("dispatch failed: {e}")))?
        {}
        #[cfg(test)]
        tests::during_start();
        self.commit_log.set_queue_offsets(self.cqs.queue_offset_table());
        let cl_min = self.commit_log.min_offset() as i64;
        for q in self.cqs.all() {
            q.correct_min_offset(cl_min);
        }
        lock::create_abort_file(&self.config.abort_path())
            .map_err(|e| io_err(&self.config.abort_path(), "cannot create abort file", e))?;
        let warm = self.config.warm_maped_file_enable;
        // With warmMapedFileEnable an empty master's first file is made now rather than by the
        // first put, so that it can be warmed like every later file (a slave's first file must
        // wait for the master's offset).
        if warm && self.role() != BrokerRole::Slave && self.commit_log.queue().last().is_none() {
            let start = self.commit_log.max_offset()
                - self.commit_log.max_offset() % self.commit_log.file_size() as u64;
            self.commit_log.queue().create_file(start).map_err(|e| {
                io_err(
                    Path::new(&self.commit_log.queue().dirs().describe()),
                    "cannot create the first CommitLog file in",
                    e,
                )
            })?;
        }
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = self.commit_log.queue().last() {
            // The next CommitLog file is prepared ahead of need; with warmMapedFileEnable the
            // unwritten part of the current one is faulted in as well.
            self.commit_log.queue().request_next(last.end_offset());
            if warm {
                // RocketMQ warms a file before it is used; the current one is warmed here, before
                // the store accepts puts, the next ones by the allocator.
                self.commit_log
                    .warm_ahead(last.size())
                    .map_err(|e| io_err(last.path(), "cannot write zeros ahead in", e))?;
            }
        }

        let a = self.allocator.clone();
        threads.push(spawn("rmqha-allocate", move || a.run())?);
        let (cl, stop) = (self.commit_log.clone(), self.stop.clone());
        let window = WARM_WINDOW.min(self.commit_log.file_size() as u64);
        let slave_flag = self.dispatcher.clone();
        threads.push(spawn("rmqha-warm", move || run_warmer(&cl, &stop, window, &slave_flag))?);
        let d = self.dispatcher.clone();
        let dstop = self.dispatcher_stop.clone();
        threads.push(spawn("rmqha-dispatch", move || d.run(&dstop))?);
        let c = &self.config;
        match c.flush_disk_type {
            FlushDiskType::AsyncFlush => {
                let (cl, cp, stop) = (self.commit_log.clone(), self.checkpoint.clone(), self.stop.clone());
                let interval = Duration::from_millis(c.flush_interval_commit_log as u64);
                let least = c.flush_commit_log_least_pages.max(0) as usize;
                let thorough = Duration::from_millis(c.flush_commit_log_thorough_interval as u64);
                let timed = c.flush_commit_log_timed;
                threads.push(spawn("rmqha-flush", move || {
                    flush::run_async_flush(&cl, &cp, &stop, interval, least, thorough, timed)
                })?);
            }
            FlushDiskType::SyncFlush => {
                let (cl, cp, w, stop) = (
                    self.commit_log.clone(),
                    self.checkpoint.clone(),
                    self.flush_waiters.clone(),
                    self.stop.clone(),
                );
                threads
                    .push(spawn("rmqha-group-commit", move || flush::run_group_commit(&cl, &cp, &w, &stop))?);
            }
        }
        let w = self.flush_waiters.clone();
        threads.push(spawn("rmqha-flush-timeout", move || w.run_deadlines())?);
        // Service threads hold the parts they use, never the store itself: a thread holding
        // an `Arc<MessageStore>` would keep the store alive after its owner drops it, so
        // `Drop` (and with it shutdown, the lock release and the thread joins) would never run.
        let (cqs, index, dispatcher, cl, cp, stop) = (
            self.cqs.clone(),
            self.index.clone(),
            self.dispatcher.clone(),
            self.commit_log.clone(),
            self.checkpoint.clone(),
            self.stop.clone(),
        );
        let (interval, least, thorough) = (
            Duration::from_millis(c.flush_interval_consume_queue as u64),
            c.flush_consume_queue_least_pages.max(0) as usize,
            Duration::from_millis(c.flush_consume_queue_thorough_interval as u64),
        );
        threads.push(spawn("rmqha-flush-cq", move || {
            flush::run_cq_flush(
                &cqs,
                index.as_deref(),
                &dispatcher,
                &cl,
                &cp,
                &stop,
                interval,
                least,
                thorough,
            )
        })?);
        let (cqs, index, dispatcher, cl, stop, clock, disk) = (
            self.cqs.clone(),
            self.index.clone(),
            self.dispatcher.clone(),
            self.commit_log.clone(),
            self.stop.clone(),
            self.clock.clone(),
            self.disk.clone(),
        );
        let opts = retention_options(c);
        let interval = Duration::from_millis(c.clean_resource_interval as u64);
        let between_deletions = Duration::from_millis(c.delete_commit_log_files_interval.max(0) as u64);
        threads.push(spawn("rmqha-retention", move || {
            while stop.sleep(interval) {
                let pause = || stop.sleep(between_deletions);
                if let Err(e) = retention::run_pass(
                    &cl,
                    &cqs,
                    index.as_deref(),
                    &dispatcher,
                    &clock,
                    &disk,
                    &opts,
                    &pause,
                ) {
                    tracing::error!("retention failed: {e}");
                }
            }
        })?);
        self.accepting.store(true, Ordering::Release);
        Ok(())
    }

    /// Flushes everything, stops and joins every thread, removes the abort file if all was
    /// dispatched and flushed, and lets go of the store's locks. Idempotent; a call while
    /// another runs returns once that one is done, except from a put's callback, where it
    /// returns at once (see `Broker::shutdown`).
    pub fn shutdown(&self) {
        let Some(_one) = super::wait::stop_lock(&self.stopping) else {
            return;
        };
        if self.shut.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.fork.forked() {
            // The parent owns the threads, the checkpoint and the abort file.
            return;
        }
        let was_running = self.running.load(Ordering::Acquire);
        // A put that passed its running check before `shut` was set may still be preparing
        // its message: it appends before this returns or not at all, so whatever was stored
        // is in the final dispatch and flush below.
        self.commit_log.close_for_writes();
        // Let the dispatcher catch up before it stops, for at most 5 s and only while it moves:
        // a slave's partial tail never completes, and a dispatch failing on a full disk (or
        // never started) makes no progress; both used to hold every stop for the whole 5 s.
        // Cut short, the abort file stays and the next start dispatches the rest.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut moved = (self.dispatcher.reput_from(), Instant::now());
        while was_running && self.dispatcher.behind_bytes() > 0 && Instant::now() < deadline {
            let seen = self.dispatcher.dispatched().seq();
            self.commit_log.appended().notify();
            self.dispatcher.dispatched().wait(seen, Duration::from_millis(50));
            let reput = self.dispatcher.reput_from();
            if reput != moved.0 {
                moved = (reput, Instant::now());
            } else if moved.1.elapsed() >= STALLED_DISPATCH {
                break;
            }
        }
        self.dispatcher_stop.store(true, Ordering::Release);
        self.commit_log.appended().notify();
        self.stop.stop();
        self.commit_log.warm_signal().notify();
        self.commit_log.flush_signal().notify();
        self.allocator.close();
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        // The group-commit and flush threads finish their last flush before returning; the
        // deadline thread is closed after them so their waiters complete as flushed.
        let mut deadline_thread = None;
        for t in threads {
            if t.thread().name() == Some("rmqha-flush-timeout") {
                deadline_thread = Some(t);
                continue;
            }
            join_unless_current(t);
        }
        let flushed = self.commit_log.flush_all();
        if let Err(e) = &flushed {
            tracing::error!("the final CommitLog flush failed: {e}");
        }
        let flushed_ok = flushed.is_ok();
        if flushed_ok {
            self.flush_waiters.advance(self.commit_log.flushed_offset() as i64);
        }
        self.flush_waiters.close();
        if let Some(t) = deadline_thread {
            join_unless_current(t);
        }
        if let Some(index) = &self.index {
            index.join_flushers();
        }
        flush::flush_logics(
            &self.cqs,
            self.index.as_deref(),
            &self.dispatcher,
            &self.commit_log,
            &self.checkpoint,
            0,
            true,
        );
        let behind = self.dispatcher.behind_bytes();
        if was_running {
            if flushed_ok && behind == 0 && self.commit_log.poisoned().is_none() && !self.cqs.flush_failed() {
                if let Err(e) = lock::remove_abort_file(&self.config.abort_path()) {
                    tracing::error!("cannot remove the abort file: {e}");
                }
            } else if flushed_ok
                && !self.cqs.flush_failed()
                && self.role() == BrokerRole::Slave
                && behind < self.commit_log.file_size() as u64
            {
                // Replicated bytes arrive in arbitrary chunks, so a slave often stops inside a
                // record; the next start cuts that partial record (and the master resends it).
                tracing::info!(
                    "slave log ends inside a record ({behind} bytes not dispatchable); keeping the abort file so the next start cuts it"
                );
            } else {
                let why = format!(
                    "keeping the abort file: {} bytes not dispatched, CommitLog flush {}, ConsumeQueue and index \
                     flushes {}; the next start recovers",
                    behind,
                    match &flushed {
                        Ok(_) => "ok".to_string(),
                        Err(e) => format!("failed ({e})"),
                    },
                    if self.cqs.flush_failed() { "failed" } else { "ok" }
                );
                tracing::warn!("{why}");
                *self.unclean.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            }
        }
        drop(self.locks.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Why the last `shutdown` left the store for an abnormal recovery (the abort file kept:
    /// records not dispatched, a failed flush), or `None` after a clean one. A slave stopping
    /// inside a replicated record keeps the abort file by design and counts as clean.
    pub fn unclean_stop(&self) -> Option<String> {
        self.unclean.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Test support: stops every thread the way a killed process stops, without the clean
    /// shutdown's final dispatch wait, CQ flush and checkpoint, and keeping the abort file and
    /// any pre-created file, so the next `open` recovers abnormally. A process crash keeps the
    /// page cache, so what was written to the mapped files stays visible: this is honest for
    /// SIGKILL, not for power loss. Idempotent; a later `shutdown` does nothing.
    #[doc(hidden)]
    pub fn crash(&self) {
        if self.shut.swap(true, Ordering::AcqRel) || self.fork.forked() {
            return;
        }
        // A killed process puts nothing more either.
        self.commit_log.close_for_writes();
        self.dispatcher_stop.store(true, Ordering::Release);
        self.commit_log.appended().notify();
        self.stop.stop();
        self.commit_log.warm_signal().notify();
        self.commit_log.flush_signal().notify();
        self.allocator.halt();
        self.flush_waiters.close();
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        threads.into_iter().for_each(join_unless_current);
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }
    pub fn commit_log(&self) -> &Arc<CommitLog> {
        &self.commit_log
    }
    pub fn consume_queues(&self) -> &Arc<ConsumeQueueStore> {
        &self.cqs
    }
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }
    pub fn checkpoint(&self) -> &Arc<StoreCheckpoint> {
        &self.checkpoint
    }
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire) && !self.shut.load(Ordering::Acquire)
    }

    /// The broker role the store acts in.
    pub fn role(&self) -> BrokerRole {
        match self.role.load(Ordering::Acquire) {
            ROLE_SYNC_MASTER => BrokerRole::SyncMaster,
            ROLE_SLAVE => BrokerRole::Slave,
            _ => BrokerRole::AsyncMaster,
        }
    }

    /// An error when this process is a fork of the one that opened the store (`crate::fork`).
    pub fn writable(&self) -> Result<()> {
        if self.fork.forked() {
            return Err(Error::Store(self.fork.reason()));
        }
        if self.shut.load(Ordering::Acquire) {
            // Its locks may be another broker's by now: it touches no file any more.
            return Err(Error::Store("the store is shut down".into()));
        }
        Ok(())
    }

    /// Whether this process is a fork of the one that opened the store (`crate::fork`).
    pub fn is_forked(&self) -> bool {
        self.fork.forked()
    }

    /// Each delay level's delay in ms (`messageDelayLevel`, level 1 first).
    pub fn delay_levels_ms(&self) -> &[i64] {
        self.commit_log.delay_levels_ms()
    }

    /// Changes the role (promotion of a slave, demotion of a master).
    pub fn set_role(&self, role: BrokerRole) {
        self.role.store(role_code(role), Ordering::Release);
        self.allocator.set_pretouch(pretouch_bytes(&self.config, role));
        self.dispatcher.set_slave(role == BrokerRole::Slave);
    }

    /// Appends one message and answers as SYNC_FLUSH requires; a SYNC_MASTER's replica wait
    /// is added by the broker (`replica_part`). An `Err` means nothing was stored.
    pub fn put_message(&self, msg: &Message) -> Result<PutHandle> {
        self.put_messages_with(std::slice::from_ref(msg), false)
    }

    /// Appends messages as one contiguous batch (one lock, one file).
    pub fn put_messages(&self, msgs: &[Message]) -> Result<PutHandle> {
        self.put_messages_with(msgs, false)
    }

    /// Appends; if `replica_part`, the returned ticket has a second part for the caller to
    /// register with its replication waiters.
    pub fn put_messages_with(&self, msgs: &[Message], replica_part: bool) -> Result<PutHandle> {
        let handle = self.put_or_refuse(msgs, replica_part);
        if let Err(Error::PutFailed { status, .. }) = &handle {
            self.commit_log.put_metrics().refused(*status);
        }
        handle
    }

    /// The put path's counters: refusals, and the puts that waited (see `stored_counts`
    /// for the puts stored).
    pub fn put_metrics(&self) -> &PutMetrics {
        self.commit_log.put_metrics()
    }

    /// Puts (calls) and messages stored since the store was opened.
    pub fn stored_counts(&self) -> (u64, u64) {
        self.commit_log.stored_counts()
    }

    fn put_or_refuse(&self, msgs: &[Message], replica_part: bool) -> Result<PutHandle> {
        if self.fork.forked() {
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: self.fork.reason(),
            });
        }
        if !self.is_running() {
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: "the store is not running".into(),
            });
        }
        if !self.accepting.load(Ordering::Acquire) {
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: "the store is starting: its queue offsets are not restored yet".into(),
            });
        }
        if self.role() == BrokerRole::Slave {
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: "this broker is a SLAVE; put to its master".into(),
            });
        }
        if self.disk.is_full() {
            return Err(Error::PutFailed {
                status: PutStatus::ServiceNotAvailable,
                reason: self.disk.reason(),
            });
        }
        #[cfg(test)]
        tests::before_append();
        let outcome = self
            .commit_log
            .append(msgs)
            .map_err(|AppendError::Status(status, reason)| Error::PutFailed { status, reason })?;
        let result = PutResult {
            status: PutStatus::PutOk,
            phy_offset: outcome.phy_offset,
            size: outcome.wrote_bytes,
            queue_id: outcome.queue_id,
            queue_offset: outcome.queue_offset,
            msg_num: outcome.msg_num,
            store_timestamp: outcome.store_timestamp,
            store_host: self.commit_log.store_host(),
        };
        // A batch waits unless every message asks not to: PUT_OK must hold for each.
        let wait = msgs.iter().any(|m| m.wait_store_ok());
        let flush_wait = wait && self.config.flush_disk_type == FlushDiskType::SyncFlush;
        let parts = flush_wait as u8 + replica_part as u8;
        if parts == 0 {
            return Ok(PutHandle::Ready(result));
        }
        let end = result.end_offset();
        let ticket = PutTicket::with_relay(result, parts, self.wake.clone());
        if flush_wait {
            let deadline = Instant::now() + Duration::from_millis(self.config.sync_flush_timeout as u64);
            self.flush_waiters.register(end, deadline, &ticket);
            if self.commit_log.poisoned().is_some() {
                // The flush failed between our append and our registration: the group commit
                // thread is gone and will not answer, so answer now rather than at the deadline.
                self.flush_waiters.fail_all(PutStatus::FlushDiskTimeout);
            }
        }
        Ok(PutHandle::Pending(ticket))
    }

    /// Appends and waits for the final answer.
    pub fn put_message_sync(&self, msg: &Message) -> Result<PutResult> {
        Ok(self.put_message(msg)?.wait())
    }

    /// Appends replicated CommitLog bytes at exactly `offset` (slave side of HA).
    pub fn append_replicated(&self, offset: u64, data: &[u8]) -> std::result::Result<(), String> {
        if self.fork.forked() {
            return Err(self.fork.reason());
        }
        self.commit_log.append_raw(offset, data)?;
        self.commit_log.appended().notify();
        Ok(())
    }

    // ---- offsets ----

    pub fn max_offset(&self) -> i64 {
        self.commit_log.max_offset() as i64
    }
    pub fn min_offset(&self) -> i64 {
        self.commit_log.min_offset() as i64
    }
    pub fn flushed_offset(&self) -> i64 {
        self.commit_log.flushed_offset() as i64
    }
    pub fn dispatch_behind_bytes(&self) -> u64 {
        self.dispatcher.behind_bytes()
    }
    /// The next queue offset to be written (one past the last), 0 for an unknown queue.
    pub fn queue_max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.cqs.find(topic, queue_id).map(|q| q.max_offset_in_queue()).unwrap_or(0)
    }
    /// The next queue offset of a queue the store has (it holds or held messages), `None` for
    /// any other.
    pub fn existing_queue_max_offset(&self, topic: &str, queue_id: i32) -> Option<i64> {
        self.cqs.find(topic, queue_id).map(|q| q.max_offset_in_queue())
    }
    /// The first readable queue offset, 0 for an unknown queue.
    pub fn queue_min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.cqs.find(topic, queue_id).map(|q| q.min_offset_in_queue()).unwrap_or(0)
    }
    /// The queue ids of a topic that have a ConsumeQueue.
    pub fn queue_ids(&self, topic: &str) -> Vec<i32> {
        self.cqs.queue_ids(topic)
    }

    /// Deletes `topic` from the store (RocketMQ's `deleteTopics`): its ConsumeQueues and their
    /// directory go, and its records in the CommitLog, which stay until retention takes them
    /// (a key query still finds them), never get a unit again: not from the dispatcher, a
    /// restart or recovery (see `deleted_topics`). Its next record starts each queue again at
    /// queue offset 0, as in RocketMQ. Returns how many queues went.
    ///
    /// A name that is not one directory name (`..`, `.`, with a `/`) is refused: no topic has
    /// it, and before, `..` removed the ConsumeQueue root's parent, the whole store.
    pub fn delete_topic(&self, topic: &str) -> Result<usize> {
        refuse_path_steps(topic)?;
        self.writable()?;
        // No dispatch round meanwhile: one would put units into the queues being destroyed
        // (making their files again) from its cache.
        let _no_dispatch = self.dispatcher.forget_topic(topic);
        let deleted = self.dispatcher.deleted_topics();
        // A topic with neither queues nor queue offsets has no record in the log a unit could
        // be made for: nothing to record (a deletion is kept until retention takes the log it
        // covers, and any client may ask to delete any name).
        let has_queues = !self.cqs.queues_of(topic).is_empty();
        let below = self
            .commit_log
            .forget_topic_offsets(topic, has_queues, |end| deleted.add(topic, end))
            .map_err(|e| Error::Store(format!("deleting topic {topic:?}: {e}")))?;
        let queues = self.cqs.remove_topic(topic);
        drop_queues(&self.cqs, topic, &queues)?;
        tracing::info!(topic, queues = queues.len(), below, "topic deleted from the store");
        Ok(queues.len())
    }

    /// The deleted topics, each with the CommitLog offset below which its records are gone:
    /// what a master tells its slaves (see `apply_master_deletions`).
    pub fn deleted_topics(&self) -> BTreeMap<String, u64> {
        self.dispatcher.deleted_topics().all()
    }

    /// Slave: takes the master's topic deletions (`deleted_topics` there). The log is the
    /// master's byte for byte, so a deletion means the same records here: each one not yet
    /// taken is recorded, the topic's queues go, and dispatch goes back to the deletion's
    /// offset, where the records the topic got after it (queue offsets from 0 again) are
    /// dispatched into new queues; every other record there is already queued and indexed,
    /// and is skipped. Without this a slave kept a deleted topic's queues, and a topic made
    /// again on the master got no units here (its queue offsets were behind the old queue's
    /// end). Calls `taken` with each topic as its deletion is taken (so that what follows a
    /// deletion is done for every one taken, even if a later one fails); returns how many were.
    pub fn apply_master_deletions(
        &self,
        deletions: &BTreeMap<String, u64>,
        taken: &mut dyn FnMut(&str),
    ) -> Result<usize> {
        self.writable()?;
        let deleted = self.dispatcher.deleted_topics();
        let mut count = 0;
        for (topic, &below) in deletions {
            // An offset is an i64: a larger one read as negative, so the deletion hid every
            // record of the topic, at any offset, for good.
            let Ok(below_offset) = i64::try_from(below) else {
                tracing::warn!(
                    "the master's deletion of topic {topic:?} below offset {below} not taken: no such offset"
                );
                continue;
            };
            // Every record's topic passed RocketMQ's name rule on its way into the log.
            if let Some(reason) = crate::processor::topic_name_error(topic) {
                tracing::warn!(
                    "the master's deletion of topic {:?} not taken: {}",
                    crate::clip(topic, 64),
                    crate::clip(&reason, 200)
                );
                continue;
            }
            let known = deleted.below(topic).is_some_and(|b| b >= below);
            // A queue holding a unit below the deletion: one a crash left behind after the
            // deletion was recorded.
            let left = self.cqs.queues_of(topic).iter().any(|q| {
                q.get(q.min_offset_in_queue()).is_some_and(|u| u.size > 0 && u.phy_offset < below_offset)
            });
            if known && !left {
                continue;
            }
            let _no_dispatch = self.dispatcher.forget_topic(topic);
            deleted.add(topic, below).map_err(|e| Error::Store(format!("deleting topic {topic:?}: {e}")))?;
            let queues = self.cqs.remove_topic(topic);
            drop_queues(&self.cqs, topic, &queues)?;
            // Without queues here nothing of the topic was dispatched past the deletion, and
            // a fresh slave need not walk its log again.
            if !queues.is_empty() && self.dispatcher.reput_from() > below {
                self.dispatcher.set_reput_from(below);
            }
            tracing::info!(
                topic,
                queues = queues.len(),
                below,
                "topic deleted on the master: deleted here too"
            );
            taken(topic);
            count += 1;
        }
        if count > 0 {
            self.commit_log.appended().notify();
        }
        Ok(count)
    }

    /// The queue offset of the first message stored at or after `timestamp` ms
    /// (`TimeBoundary::Lower`, see `queue_offset_by_time_bounded`).
    pub fn queue_offset_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        self.queue_offset_by_time_bounded(topic, queue_id, timestamp, TimeBoundary::Lower)
    }

    /// The queue offset a search by store time answers, as RocketMQ 5's
    /// `getOffsetInQueueByTime(timestamp, boundaryType)`:
    ///
    /// - `Lower`: the first message stored at or after `timestamp` ms; the queue's max offset
    ///   (the next to be written) when every message is older, its min offset when every
    ///   message is newer.
    /// - `Upper`: the last message stored at or before `timestamp` ms; the last message when
    ///   every message is older, and the queue's min offset when every message is newer
    ///   (RocketMQ answers 0 there, an offset retention may have removed).
    ///
    /// Messages that share a store time are all inside `[lower, upper]` of that time. The
    /// whole queue is searched (RocketMQ searches the one file whose modification time
    /// passes the timestamp, and misses messages of older files stored after it). 0 for a
    /// queue that does not exist.
    pub fn queue_offset_by_time_bounded(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        boundary: TimeBoundary,
    ) -> i64 {
        let Some(q) = self.cqs.find(topic, queue_id) else { return 0 };
        let (min, max) = (q.min_offset_in_queue(), q.max_offset_in_queue());
        // The first offset whose message is stored after the timestamp (Upper), or at or
        // after it (Lower). A unit whose record cannot be read counts as newer.
        let after = |ts: i64| match boundary {
            TimeBoundary::Lower => ts >= timestamp,
            TimeBoundary::Upper => ts > timestamp,
        };
        let (mut lo, mut hi) = (min, max);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ts = q.get(mid).and_then(|u| self.store_time_at(u.phy_offset, u.size)).unwrap_or(i64::MAX);
            if after(ts) { hi = mid } else { lo = mid + 1 }
        }
        match boundary {
            TimeBoundary::Lower => lo,
            TimeBoundary::Upper => (lo - 1).max(min),
        }
    }

    /// The store time of the message at `offset` of a queue (RocketMQ's
    /// `getMessageStoreTimeStamp`); `None` where the queue or its record cannot be read.
    pub fn queue_store_time(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        let u = self.cqs.find(topic, queue_id)?.get(offset)?;
        self.store_time_at(u.phy_offset, u.size)
    }

    fn store_time_at(&self, phy: i64, size: i32) -> Option<i64> {
        let (f, pos) = self.commit_log.read(phy as u64, size as usize)?;
        decode_record(f.read(pos, size as usize)?).ok().map(|v| v.store_timestamp)
    }

    // ---- reads ----

    /// Messages of a queue from `offset` (spec 10).
    pub fn get_messages(&self, topic: &str, queue_id: i32, offset: i64, max_msgs: i32) -> GetMessageResult {
        self.get_messages_limited(topic, queue_id, offset, max_msgs, 128 * 1024 * 1024)
    }

    /// `get_messages` with a cap on total bytes (a client's `maxTotalSize`).
    pub fn get_messages_limited(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: i32,
        max_total_size: usize,
    ) -> GetMessageResult {
        self.get_messages_filtered(topic, queue_id, offset, max_msgs, max_total_size, None)
    }

    /// `get_messages_limited` with a filter, applied during the scan as RocketMQ's
    /// `getMessage(…, messageFilter)` applies it: a unit whose tags code fails
    /// `matches_unit` is skipped without reading the CommitLog, and a record that fails
    /// `matches_record` is skipped after it is read; neither counts toward `max_msgs` or the
    /// byte limits, only toward the scan window (`maxFilterMessageSize` bytes of units, at
    /// least `max_msgs` units). `nextBeginOffset` is one past the last unit scanned, so a
    /// consumer moves past the skipped units; if none matched the status is
    /// `NoMatchedMessage`.
    pub fn get_messages_filtered(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: i32,
        max_total_size: usize,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        let c = &self.config;
        let correct = |old: i64, new: i64| {
            if self.role() != BrokerRole::Slave || c.offset_check_in_slave { new } else { old }
        };
        let max_phy = self.commit_log.max_offset() as i64;
        let mut res = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: correct(offset, 0),
            min_offset: 0,
            max_offset: 0,
            suggest_pulling_from_slave: false,
            records: Vec::new(),
        };
        let Some(cq) = self.cqs.find(topic, queue_id) else { return res };
        let (min, max) = (cq.min_offset_in_queue(), cq.max_offset_in_queue());
        res.min_offset = min;
        res.max_offset = max;
        if max == 0 {
            res.status = GetMessageStatus::NoMessageInQueue;
            res.next_begin_offset = correct(offset, 0);
            return res;
        }
        if offset < min {
            res.status = GetMessageStatus::OffsetTooSmall;
            res.next_begin_offset = correct(offset, min);
            return res;
        }
        if offset == max {
            res.status = GetMessageStatus::OffsetOverflowOne;
            res.next_begin_offset = correct(offset, offset);
            return res;
        }
        if offset > max {
            res.status = GetMessageStatus::OffsetOverflowBadly;
            res.next_begin_offset = correct(offset, if min == 0 { min } else { max });
            return res;
        }
        // A unit that cannot be read: retention deleted its file since `min` was read (or it
        // is missing). Also where the scan below loses its first units to a deletion.
        let unit_missing = |mut res: GetMessageResult| {
            let min_now = cq.min_offset_in_queue();
            if offset < min_now {
                res.status = GetMessageStatus::OffsetTooSmall;
                res.min_offset = min_now;
                res.next_begin_offset = correct(offset, min_now);
                return res;
            }
            res.status = GetMessageStatus::OffsetFoundNull;
            let per_file = (cq.files().file_size() / CQ_UNIT_SIZE) as i64;
            res.next_begin_offset = correct(offset, offset + per_file - offset % per_file);
            res
        };
        if cq.get(offset).is_none() {
            return unit_missing(res);
        }
        let max_msgs = max_msgs.max(1) as usize;
        let max_total = max_total_size.max(100);
        // A pull that filters scans `maxFilterMessageSize` bytes of units, or `max_msgs` units,
        // but never more than one file's worth: any client may ask for 2^31 messages, and a
        // filter nothing matches then read the whole queue in one request.
        let per_file = cq.files().file_size() / CQ_UNIT_SIZE;
        let scan_units = (c.max_filter_message_size as usize / CQ_UNIT_SIZE).max(max_msgs.min(per_file));
        let in_memory_span =
            (self.total_memory as f64 * c.access_message_in_memory_max_ratio as f64 / 100.0) as i64;
        let mut status = GetMessageStatus::NoMatchedMessage;
        let mut next_phy_file_start = i64::MIN;
        let mut max_phy_pulling = 0i64;
        let mut total = 0usize;
        let mut scanned = 0i64;
        while (scanned as usize) < scan_units && offset + scanned < max {
            let Some(u) = cq.get(offset + scanned) else {
                if res.records.is_empty() && status == GetMessageStatus::NoMatchedMessage {
                    return unit_missing(res);
                }
                break;
            };
            let phy = u.phy_offset;
            let size = u.size.max(0) as usize;
            if u.size == i32::MAX && phy == 0 || phy < 0 {
                scanned += 1; // a filler unit, or a damaged one that points nowhere
                continue;
            }
            max_phy_pulling = phy;
            if next_phy_file_start != i64::MIN && phy < next_phy_file_start {
                scanned += 1;
                continue;
            }
            let in_disk = max_phy.saturating_sub(phy) > in_memory_span;
            if self.batch_full(size, max_msgs, total, res.records.len(), in_disk)
                || total + size > max_total && total > 0
            {
                break;
            }
            if filter.is_some_and(|f| !f.matches_unit(u.tags_code)) {
                if res.records.is_empty() {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                scanned += 1;
                continue;
            }
            let at = offset + scanned;
            match self.commit_log.read(phy as u64, size) {
                Some((file, pos)) => {
                    let bytes = file.read(pos, size).unwrap_or_default();
                    if let Some(why) = unit_mismatch(bytes, topic, queue_id, at) {
                        damaged_unit(topic, queue_id, at, &u, &why);
                        scanned += 1;
                        continue;
                    }
                    if filter.is_some_and(|f| !f.matches_record(bytes)) {
                        scanned += 1;
                        continue;
                    }
                    res.records.push(RawRecord::new(file, pos, size, phy, at));
                    total += size;
                    status = GetMessageStatus::Found;
                    next_phy_file_start = i64::MIN;
                }
                // Not a file retention took: the unit itself is damaged (a size beyond its
                // file, an offset past the log's end). Rolling to the next file, as for a
                // removed one, skipped every later unit of the window in this file.
                None if phy as u64 >= self.commit_log.min_offset() => {
                    damaged_unit(topic, queue_id, at, &u, "its bytes are not in the CommitLog");
                }
                None => {
                    if res.records.is_empty() {
                        status = GetMessageStatus::MessageWasRemoving;
                    }
                    next_phy_file_start = self.commit_log.roll_next_file(phy as u64) as i64;
                }
            }
            scanned += 1;
        }
        res.status = status;
        // As RocketMQ: only the error statuses are corrected on a slave, a scan never is.
        res.next_begin_offset = offset + scanned;
        res.suggest_pulling_from_slave = max_phy - max_phy_pulling > in_memory_span;
        res
    }

    fn batch_full(&self, size: usize, max_msgs: usize, total: usize, count: usize, in_disk: bool) -> bool {
        let c = &self.config;
        if total == 0 || count == 0 {
            return false;
        }
        if max_msgs <= count {
            return true;
        }
        let (max_bytes, max_count) = if in_disk {
            (c.max_transfer_bytes_on_message_in_disk, c.max_transfer_count_on_message_in_disk)
        } else {
            (c.max_transfer_bytes_on_message_in_memory, c.max_transfer_count_on_message_in_memory)
        };
        total + size > max_bytes.max(0) as usize || count as i64 > max_count as i64 - 1
    }

    /// The record at physical offset `phy`, if it is there.
    pub fn record_at(&self, phy: i64) -> Option<RawRecord> {
        let (file, pos) = self.commit_log.data_at(phy as u64)?;
        let head = file.read(pos, 4)?;
        let size = i32::from_be_bytes(head.try_into().ok()?);
        if size <= 0 {
            return None;
        }
        file.read(pos, size as usize)?;
        let mut rec = RawRecord::new(file, pos, size as usize, phy, 0);
        rec.queue_offset = rec.view()?.queue_offset;
        Some(rec)
    }

    /// The message at physical offset `phy`.
    pub fn message_at(&self, phy: i64) -> Option<StoredMessage> {
        let r = self.record_at(phy)?;
        r.view().map(|v| StoredMessage::from_view(&v))
    }

    /// The record at `phy`, only if a record starts there. The offset of a message id comes
    /// from anyone, and a body may hold bytes shaped like a record whose offset field names
    /// where they lie (a producer can forge one, topic, keys and all). A record dispatch has
    /// passed must be the one its queue lists at its queue offset; one it has not reached yet,
    /// or that no queue lists (a deleted topic's), is found by hopping over record lengths
    /// from a known record start (where dispatch stands, or its file's start).
    pub fn genuine_record_at(&self, phy: i64) -> Option<RawRecord> {
        let rec = self.record_at(phy)?;
        let (topic, queue_id, queue_offset, takes_queue) = {
            let v = rec.view()?;
            if v.physical_offset != phy {
                return None;
            }
            (
                v.topic_str()?.to_string(),
                v.queue_id,
                v.queue_offset,
                crate::message::sysflag::takes_queue_offset(v.sys_flag),
            )
        };
        let reput = self.dispatcher.reput_from() as i64;
        // A deleted topic's record stays in the log until retention takes it, and its key
        // still finds it, but no queue lists it any more (or a queue of the topic made again
        // lists another record at its queue offset): it is checked by hopping, as RocketMQ's
        // lookup by id, which reads the log, finds it.
        let deleted =
            || self.dispatcher.deleted_topics().below(&topic).is_some_and(|below| (phy as u64) < below);
        if phy < reput && takes_queue && !deleted() {
            let unit = self.cqs.find(&topic, queue_id)?.get(queue_offset)?;
            return (unit.phy_offset == phy && unit.size as usize == rec.bytes().len()).then_some(rec);
        }
        let fs = self.commit_log.file_size() as i64;
        let file_start = phy - phy % fs;
        let from = if (file_start..=phy).contains(&reput) { reput } else { file_start };
        (self.commit_log.record_start_at_or_before(from as u64, phy as u64) == phy as u64).then_some(rec)
    }

    /// The message with RocketMQ offset message id `msg_id`.
    pub fn message_by_id(&self, msg_id: &str) -> Option<StoredMessage> {
        let (_, phy) = decode_offset_msg_id(msg_id)?;
        // Only the message whose id this is: the offset alone also finds whatever record
        // another log put there (the id of a message an old master lost in a failover).
        let rec = self.genuine_record_at(phy)?;
        rec.view().map(|v| StoredMessage::from_view(&v)).filter(|m| m.msg_id.eq_ignore_ascii_case(msg_id))
    }

    /// Messages of `topic` whose KEYS or UNIQ_KEY contain `key`, stored within
    /// `[begin, end]` ms, newest first, each once, at most `max` (capped by maxMsgsNumBatch).
    ///
    /// The index walk goes on past entries that are not this key's (hash collisions) and
    /// past repeats of a message (a key listed twice, or equal to the unique key), so neither
    /// uses up `max`. It reads at most `KEY_QUERY_CANDIDATES` records, though: keys whose
    /// Java hash codes are equal are easy to make ("Aa" and "BB"), and a query for one of a
    /// hot key's would otherwise read every message of that key, a second or more per
    /// million, on the thread that answers it.
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> Vec<StoredMessage> {
        let Some(index) = &self.index else { return Vec::new() };
        let max = max.min(index.max_query());
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        let mut seen = std::collections::HashSet::new();
        let mut read = 0usize;
        index.for_each_offset(topic, key, begin, end, |phy| {
            if !seen.insert(phy) {
                return true;
            }
            if read == KEY_QUERY_CANDIDATES {
                static CAPPED: crate::logging::Throttle = crate::logging::Throttle::new(Duration::from_secs(60));
                if let Some(n) = CAPPED.note(topic) {
                    tracing::warn!(
                        "a query for key {:?} of topic {topic:?} stopped after reading {KEY_QUERY_CANDIDATES} \
                         messages whose keys hash alike (older matches, if any, are not returned){}",
                        crate::clip(key, 64),
                        crate::logging::recurred(n)
                    );
                }
                return false;
            }
            read += 1;
            let Some(m) = self.message_at(phy) else { return true };
            // Hashes collide: keep only real matches.
            let uniq = m.property(crate::message::properties::keys::UNIQ_KEY) == Some(key);
            let in_time = (begin..=end).contains(&m.store_timestamp);
            if m.topic == topic && in_time && (uniq || m.keys.iter().any(|k| k == key)) {
                out.push(m);
            }
            out.len() < max
        });
        out
    }

    /// The disk guard: whether puts are refused because the disk is nearly full, and the
    /// last reading (taken by every retention pass, as RocketMQ's CleanCommitLogService does).
    pub fn disk_guard(&self) -> &DiskGuard {
        &self.disk
    }

    /// One retention pass now (the retention thread runs one every `cleanResourceInterval`);
    /// it also takes the disk guard's reading. Unlike the thread's passes, it deletes files
    /// without waiting `deleteCommitLogFilesInterval` between them.
    pub fn run_retention(&self) -> Result<RetentionReport> {
        self.writable()?;
        let opts = retention_options(&self.config);
        retention::run_pass(
            &self.commit_log,
            &self.cqs,
            self.index.as_deref(),
            &self.dispatcher,
            &self.clock,
            &self.disk,
            &opts,
            &|| true,
        )
        .map_err(|e| Error::Store(format!("retention: {e}")))
    }

    /// Flushes the CommitLog now, whatever the flush type.
    pub fn flush(&self) -> Result<i64> {
        self.writable()?;
        // Read before the flush: a truncation after it returns makes its value stale.
        let epoch = self.flush_waiters.epoch();
        let f = self.commit_log.flush_all().map_err(|e| Error::Store(format!("flush failed: {e}")))?;
        self.flush_waiters.advance_from(epoch, f as i64);
        Ok(f as i64)
    }

    /// Waits until the next CommitLog file is created (and pre-touched); benchmarks call it
    /// before starting their clock. False on timeout.
    pub fn wait_prepared(&self, timeout: Duration) -> bool {
        self.allocator.wait_idle(timeout)
    }

    /// Waits until dispatch has consumed everything written (tests, shutdown).
    pub fn wait_dispatched(&self, timeout: Duration) -> bool {
        let deadline = crate::deadline_after(timeout);
        loop {
            let seen = self.dispatcher.dispatched().seq();
            if self.dispatcher.behind_bytes() == 0 {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            self.dispatcher.dispatched().wait(seen, (deadline - now).min(Duration::from_millis(50)));
        }
    }

    /// Cuts the CommitLog (and the ConsumeQueues) at `offset`, zeroing the discarded bytes.
    /// For a slave whose log diverged from its master; puts must not run meanwhile. Refused
    /// while an HA master serves the log: its slaves would keep what was cut (and acked puts
    /// ending there), and its writers would go on sending from their old positions, in the
    /// middle of the records written next.
    ///
    /// `offset` must be where a record starts (or a file's start, or the end): a cut inside a
    /// record leaves a partial one that no master serves from (an operator cutting where a
    /// divergence message points, say); the error names the record start below it. Nor may it
    /// lie below the log's first offset when retention deleted the files before it: that cut
    /// empties the store, and no divergence message names such an offset.
    pub fn truncate(&self, offset: u64) -> Result<()> {
        self.writable()?;
        let min = self.commit_log.min_offset();
        if offset < min {
            return Err(Error::Store(format!(
                "cannot truncate to {offset}: below the CommitLog's first offset {min} (older files were \
                 deleted): that would drop every message it holds; to start the store afresh, give it an \
                 empty directory"
            )));
        }
        let max = self.commit_log.max_offset();
        if offset < max {
            let fs = self.commit_log.file_size() as u64;
            let start = self.commit_log.record_start_at_or_before(offset - offset % fs, offset);
            if start != offset {
                return Err(Error::Store(format!(
                    "cannot truncate to {offset}: not where a record starts in this CommitLog (the record \
                     holding it starts at or before {start})"
                )));
            }
        }
        self.cut(offset)
    }

    /// `truncate` anywhere, a record's middle too: a slave dropping the partial record at its
    /// tail from where it differs from its master's bytes.
    /// Refused, changing nothing, past the log's end (the file holding `offset` would claim
    /// bytes past its end as written) and below it on a master serving slaves: checked by the
    /// CommitLog under its put lock.
    pub(crate) fn cut(&self, offset: u64) -> Result<()> {
        self.writable()?;
        let _no_dispatch = self.dispatcher.exclusive();
        self.commit_log.truncate(offset).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => Error::Store(e.to_string()),
            _ => Error::Store(format!("truncate: {e}")),
        })?;
        self.dispatcher
            .deleted_topics()
            .truncate(offset)
            .map_err(|e| Error::Store(format!("truncate deleted topics: {e}")))?;
        for q in self.cqs.all() {
            q.truncate_dirty(offset as i64)
                .map_err(|e| Error::Store(format!("truncate consume queue: {e}")))?;
        }
        if let Some(index) = &self.index {
            index.truncate(offset as i64).map_err(|e| Error::Store(format!("truncate index: {e}")))?;
        }
        if self.dispatcher.reput_from() > offset {
            self.dispatcher.set_reput_from(offset);
        }
        self.flush_waiters.reset(self.commit_log.flushed_offset() as i64);
        self.commit_log.set_queue_offsets(self.cqs.queue_offset_table());
        // The checkpoint no longer says bytes past the cut were synced: a crash recovery
        // refuses to cut the log below that offset (damage inside, not a torn tail), and
        // the records written there next are not synced yet.
        let cut = offset as i64;
        if self.checkpoint.get().master_flushed_offset > cut {
            self.checkpoint.update(|d| d.master_flushed_offset = d.master_flushed_offset.min(cut));
            self.checkpoint
                .flush()
                .map_err(|e| Error::Store(format!("truncate: writing the checkpoint: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn retention_options(c: &BrokerConfig) -> RetentionOptions {
    RetentionOptions {
        file_reserved_ms: c.file_reserved_time * 3_600_000,
        delete_hours: c.delete_when_hours(),
        disk_max_used_ratio: c.disk_max_used_space_ratio as f64 / 100.0,
        clean_forcibly_ratio: c.disk_space_clean_forcibly_ratio as f64 / 100.0,
        warning_level_ratio: c.disk_space_warning_level_ratio as f64 / 100.0,
        clean_forcibly_enable: c.clean_file_forcibly_enable,
        consume_queue_dir: c.consume_queue_dir(),
        max_files_per_pass: 10,
    }
}

/// How far ahead of a master's writer pages are faulted in.
const WARM_WINDOW: u64 = 16 << 20;

/// Raises the process's soft limit on open files to its hard limit, as the JVM does for
/// RocketMQ (`-XX:+MaxFDLimit`, on by default). Every CommitLog file the store keeps holds a
/// descriptor (for `pwrite`, `sendfile` to slaves and syncs), as do connections: under the
/// usual soft limit of 1024 a broker keeping more than about 900 CommitLog files (900 GiB
/// with 1 GiB files, a day at 10 MB/s) failed every put with "Too many open files". Only
/// ever raised, once per process; a host that needs its limit low can set the hard limit.
fn raise_open_file_limit() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit/setrlimit read and write only the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur >= lim.rlim_max {
            return;
        }
        // An unlimited hard limit cannot be the soft one (the kernel's `nr_open` caps it).
        let target = lim.rlim_max.min(1 << 20);
        if target <= lim.rlim_cur {
            return;
        }
        let was = lim.rlim_cur;
        lim.rlim_cur = target;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
            tracing::info!("raised the open-file limit from {was} to {target}");
        } else {
            tracing::warn!(
                "cannot raise the open-file limit from {was} ({}): a store that keeps more CommitLog files than \
                 that fails its puts",
                std::io::Error::last_os_error()
            );
        }
    });
}

/// Bytes the allocator pre-touches at the start of each new CommitLog file.
fn pretouch_bytes(config: &BrokerConfig, role: BrokerRole) -> usize {
    if role == BrokerRole::Slave {
        0 // replicated bytes are written with pwrite, which needs no pre-touched pages
    } else if config.warm_maped_file_enable {
        usize::MAX
    } else {
        WARM_WINDOW as usize
    }
}

/// Keeps the pages `window` bytes ahead of a master's writer faulted in, so appends never
/// fault in a fresh page: woken by the append that passes the trigger it set (half a window
/// on), so it costs the put path one comparison and does no more than the writer will need.
fn run_warmer(cl: &CommitLog, stop: &StopSignal, window: u64, dispatcher: &Dispatcher) {
    let signal = cl.warm_signal();
    // One line per run of failures (the warmer retries every second): a poisoned or full
    // store would otherwise log forever.
    let mut failing = false;
    while !stop.is_stopped() {
        let seen = signal.seq();
        if dispatcher.is_slave() {
            cl.set_warm_trigger(u64::MAX);
        } else {
            let end = cl.max_offset();
            match cl.warm_ahead(window as usize) {
                // Appends go on into the unzeroed blocks; a failing disk shows in their writes
                // and flushes.
                Err(e) if !failing => {
                    tracing::warn!(
                        "writing zeros ahead of the CommitLog writer: {e} (not logged again until it works)"
                    );
                    failing = true;
                }
                Err(_) => {}
                Ok(_) => failing = false,
            }
            cl.set_warm_trigger(end + window / 2);
        }
        signal.wait(seen, Duration::from_secs(1));
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::Store(format!("cannot start thread {name}: {e}")))
}

/// The address written as every record's store host: brokerIP1:listenPort.
fn store_host(config: &BrokerConfig) -> SocketAddr {
    let ip = if config.broker_ip1.is_empty() {
        crate::net::local_ip()
    } else {
        config.broker_ip1.parse().unwrap_or_else(|_| crate::net::local_ip())
    };
    SocketAddr::new(ip, config.listen_port as u16)
}

/// A deletion is recorded at the log's end when it happens, flushed or not. A crash can then
/// leave a log that ends below it (the unflushed tail lost, or the log's files removed while
/// `deletedTopics.json` stayed), and the records a master writes there next are new: left as
/// it was, the deletion hid every one of the topic's, acknowledged PUT_OK, from consumers for
/// good. A slave keeps its deletions: the bytes it will take there again are its master's.
fn deletions_past_the_end(config: &BrokerConfig, deleted: &DeletedTopics, end: u64) -> Result<()> {
    if config.broker_role == BrokerRole::Slave {
        return Ok(());
    }
    let past: Vec<_> = deleted.all().into_iter().filter(|&(_, below)| below > end).collect();
    if past.is_empty() {
        return Ok(());
    }
    tracing::warn!(
        "recovery: topic deletions recorded past the CommitLog's end {end} (the log lost its tail, or its files \
         were removed): {}; records written from {end} on are new, so they are deleted below {end} only",
        past.iter().map(|(t, b)| format!("{t} below {b}")).collect::<Vec<_>>().join(", ")
    );
    deleted.truncate(end).map_err(|e| Error::Store(format!("recovery: deleted topics: {e}")))
}

/// Recovery (spec 3): cut the CommitLog after its last valid record, make the ConsumeQueues
/// match, and decide where dispatch resumes.
fn recover(
    config: &BrokerConfig,
    cl: &CommitLog,
    cqs: &ConsumeQueueStore,
    index: Option<&IndexService>,
    checkpoint: &StoreCheckpoint,
    deleted: &DeletedTopics,
    last_exit_ok: bool,
) -> Result<RecoveryReport> {
    let store_err = |what: &str, e: std::io::Error| Error::Store(format!("recovery: {what}: {e}"));
    for q in cqs.all() {
        q.recover().map_err(|e| store_err("consume queue", e))?;
    }
    // Only now do the queues know where their units end.
    drop_deleted_leftovers(cqs, deleted)?;
    let files = cl.queue().files();
    if files.is_empty() {
        let indexed_end = cqs.max_physic_offset();
        if indexed_end > 0 {
            // Queues without their log: most often `storePathCommitLog` names the wrong
            // directory. Destroying them (RocketMQ's answer) would leave queues built from
            // another log once the right one is back, pointing at the wrong records.
            return Err(Error::Store(format!(
                "recovery: the CommitLog directory {} holds no CommitLog file, but the ConsumeQueues in {} \
                 index records up to offset {indexed_end}: storePathCommitLog may name the wrong directory, \
                 or the log was deleted. Nothing was deleted. To start this store with an empty log anyway \
                 (a slave to be filled again from its master), delete {} and {} as well",
                cl.queue().dirs().describe(),
                cqs.root().display(),
                cqs.root().display(),
                config.index_dir().display()
            )));
        }
        // No CommitLog: nothing derived from it can stand.
        cqs.destroy_all().map_err(|e| store_err("consume queues", e))?;
        if let Some(i) = index {
            i.destroy_all().map_err(|e| store_err("index", e))?;
        }
        cl.set_recovered_end(0).map_err(|e| store_err("commit log", e))?;
        deletions_past_the_end(config, deleted, 0)?;
        return Ok(RecoveryReport {
            last_exit_ok,
            recovered_offset: 0,
            torn_tail: false,
            dispatch_from: 0,
            indexed_records_lost: 0,
        });
    }
    let check_crc = config.check_crc_on_recover;
    let (scan_from, dispatch_hint) = if last_exit_ok {
        let start = files[files.len().saturating_sub(3)].start_offset();
        (start, None)
    } else {
        // The newest file whose first message is older than what the checkpoint says is
        // safely dispatched and flushed.
        let cp = checkpoint.get();
        let limit = if config.message_index_enable && config.message_index_safe {
            cp.min_timestamp_index()
        } else {
            cp.min_timestamp()
        };
        let opts = cl.check_options(check_crc);
        let mut start = files[0].start_offset();
        for f in files.iter().rev() {
            if let crate::message::CheckResult::Message(req) =
                crate::message::check_record(f.readable_from(0), &opts)
            {
                if req.store_timestamp != 0 && req.store_timestamp <= limit {
                    start = f.start_offset();
                    break;
                }
            }
        }
        // Store timestamps go back with the clock: after a step back, files made since carry
        // earlier timestamps than the checkpoint's and pass for safe. The checkpoint also
        // says which offsets were flushed (the CommitLog's, and rmqha's ConsumeQueue offset,
        // 0 when unknown): start no later than the file holding the lower of them.
        let floor = [cp.master_flushed_offset, cp.logics_offset].into_iter().filter(|&o| o > 0).min();
        if let Some(floor) = floor {
            let floor = floor as u64;
            if let Some(f) = files.iter().rev().find(|f| f.start_offset() <= floor) {
                if f.start_offset() < start {
                    tracing::info!(
                        "recovery: the checkpoint's offsets ({floor}) lie before the file its timestamps \
                         name ({start}); starting at {}",
                        f.start_offset()
                    );
                    start = f.start_offset();
                }
            }
        }
        (start, Some(start))
    };
    // Dispatch runs in log order, so every record below the highest offset any ConsumeQueue
    // holds was dispatched. Per queue, the first such record the walk meets and the highest
    // queue offset among them: a ConsumeQueue that lacks some (a queue directory deleted, a
    // file cut short) is re-dispatched below, rather than handing its offsets out again.
    let dispatched_below = cqs.max_physic_offset().max(0) as u64;
    let mut seen: HashMap<String, HashMap<i32, QueueSeen>> = HashMap::new();
    let end = cl.scan_valid_end(scan_from, check_crc, |offset, req| {
        // Prepared and rolled-back transactional records have no ConsumeQueue unit.
        let queued = crate::message::sysflag::takes_queue_offset(req.sys_flag);
        if offset >= dispatched_below || !queued || deleted.hides(req.topic, offset) {
            return;
        }
        let queues = match seen.get_mut(req.topic) {
            Some(q) => q,
            None => seen.entry(req.topic.to_string()).or_default(),
        };
        queues.entry(req.queue_id).and_modify(|q| q.last_queue_offset = req.consume_queue_offset).or_insert(
            QueueSeen {
                first_phy: offset,
                first_queue_offset: req.consume_queue_offset,
                last_queue_offset: req.consume_queue_offset,
            },
        );
    });
    // Where the checkpoint says the log was synced to (after a crash; a checkpoint found
    // implausible says nothing). Not on a slave: what it cuts, its master holds and sends
    // again, and a slave that refused to start would stop replicating altogether.
    let synced = if last_exit_ok || config.broker_role == BrokerRole::Slave {
        None
    } else {
        let cp = checkpoint.get();
        (cp.implausible(crate::store::clock::now_ms()).is_none() && cp.master_flushed_offset > 0)
            .then_some(cp.master_flushed_offset as u64)
    };
    let synced_past_end = synced.is_some_and(|s| s > end);
    let past = units_past(cl, cqs, end, last_exit_ok || synced_past_end);
    if (last_exit_ok || synced_past_end) && past.valid > 0 {
        // A clean stop flushed and dispatched everything, so nothing after the last record
        // can be a torn write; after a crash, nothing the checkpoint says was synced can be
        // either. If the ConsumeQueues index valid records past `end`, the log is damaged
        // inside, and cutting it there (RocketMQ's answer) would destroy acknowledged
        // messages for good (after a crash this was done: one bad byte in a synced record cut
        // every acknowledged record after it). Refuse, and leave the CommitLog as it is.
        let (file, pos) = cl
            .data_at(end)
            .map(|(f, pos)| (f.path().display().to_string(), pos))
            .unwrap_or_else(|| (cl.queue().dirs().describe(), 0));
        let how = match synced {
            Some(s) => format!(" (the checkpoint says the log was synced up to offset {s})"),
            None => String::new(),
        };
        return Err(Error::Store(format!(
            "recovery: the CommitLog record at offset {end} ({file}, position {pos}) fails its checks \
             (magic, length or CRC), but at least {} valid records after it are indexed, up to offset {}: the log \
             is damaged inside, not torn at its end{how}, and cutting it there would delete them. The \
             CommitLog was not changed. To cut it there anyway, losing those records, delete the file {} and \
             create the file {}, and start again",
            past.valid,
            past.valid_end,
            config.checkpoint_path().display(),
            config.abort_path().display(),
        )));
    }
    // What the queues indexed past the end is gone from the log: say so, loudly. After a
    // clean stop those records had been acknowledged and flushed; after a crash they had at
    // least been dispatched.
    let lost = past.indexed;
    if lost > 0 {
        tracing::error!(
            "recovery: the ConsumeQueues index {lost} records at or after offset {end} (up to offset {}) that \
             the CommitLog in {} no longer holds (its tail is torn or zeroed); they are lost{}",
            past.indexed_end,
            cl.queue().dirs().describe(),
            if last_exit_ok { ", though the broker had stopped cleanly" } else { "" }
        );
    }
    let torn_tail = cl
        .data_at(end)
        .map(|(f, pos)| f.readable_from(pos).iter().take(4096).any(|&b| b != 0))
        .unwrap_or(false);
    if torn_tail {
        tracing::warn!(
            "recovery: the CommitLog in {} ends with torn or invalid data at offset {end}; cutting it there",
            cl.queue().dirs().describe()
        );
    }
    cl.set_recovered_end(end).map_err(|e| store_err("commit log", e))?;
    deletions_past_the_end(config, deleted, end)?;
    for q in cqs.all() {
        q.truncate_dirty(end as i64).map_err(|e| store_err("consume queue", e))?;
    }
    if let Some(i) = index {
        i.truncate(end as i64).map_err(|e| store_err("index", e))?;
    }
    if !last_exit_ok {
        // A crash keeps the page cache: what the last run wrote but never synced is readable
        // now, and from here on counts as flushed, so later flushes sync only newer pages. A
        // power loss before the kernel wrote it back would then leave a hole below records
        // acknowledged after this start, and the next recovery would cut them off there.
        for f in cl.queue().files().iter().filter(|f| f.end_offset() > scan_from) {
            f.sync_all_pages().map_err(|e| store_err("commit log", e))?;
        }
        // The queues and the index with one `syncfs` of their file system(s): one sync per
        // queue file took 34 s for 20,000 queues (scale audit).
        let mut dirs = vec![cqs.root().to_path_buf()];
        dirs.extend(index.map(|i| i.dir().to_path_buf()));
        if !super::mapped_file::sync_file_systems(&dirs).map_err(|e| store_err("consume queue", e))? {
            for q in cqs.all() {
                for f in q.files().files() {
                    f.sync_all_pages().map_err(|e| store_err("consume queue", e))?;
                }
            }
            if let Some(i) = index {
                i.sync_all_pages().map_err(|e| store_err("index", e))?;
            }
        }
    }
    let min = cl.min_offset();
    let mut repair_from = u64::MAX;
    let foreign = foreign_queues(cl, cqs, min, end);
    for q in &foreign {
        q.destroy().map_err(|e| store_err("consume queue", e))?;
        repair_from = min;
    }
    let cq_max = cqs.max_physic_offset().max(0) as u64;
    for (topic, queues) in &seen {
        for (&queue_id, q) in queues {
            if foreign.iter().any(|f| f.topic() == topic && f.queue_id() == queue_id) {
                continue; // rebuilt from `min` already
            }
            let cq = cqs.find(topic, queue_id);
            let held = cq.as_ref().map_or(0, |cq| cq.max_offset_in_queue());
            if q.last_queue_offset >= held {
                // The walk's first record of the queue may lie past its end (units lost from
                // before the walk): dispatching from there would put each unit at the queue's
                // end, under another queue offset than its record's. Start where the queue's
                // own units end instead (the CommitLog's start for an empty queue).
                let from = if q.first_queue_offset <= held {
                    q.first_phy
                } else {
                    cq.map(|cq| cq.max_physic_offset()).filter(|&p| p > 0).map_or(min, |p| p as u64).max(min)
                };
                tracing::warn!(
                    "recovery: ConsumeQueue {topic}/{queue_id} ends at queue offset {held}, but the CommitLog \
                     holds its records up to queue offset {}; re-dispatching from offset {from}",
                    q.last_queue_offset,
                );
                repair_from = repair_from.min(from);
            }
        }
    }
    // RocketMQ re-dispatches only from the recovery start file, so after a crash the keys of a
    // destroyed index file older than that file were lost from the index for good. Reaching
    // back to where the destroyed files began re-dispatches more, but the ConsumeQueues skip
    // what they hold and the index skips what its surviving files hold.
    let index_from = index.and_then(IndexService::rebuild_from).unwrap_or(u64::MAX);
    let dispatch_from = match dispatch_hint {
        None => cq_max.max(min),
        Some(start) => start.min(cq_max).max(min),
    }
    .min(index_from.max(min))
    .min(repair_from)
    .min(end);
    checkpoint.update(|d| d.confirm_phy_offset = end as i64);
    // On disk at once: until the next thorough flush the file would otherwise still claim an
    // offset that recovery may just have cut away.
    checkpoint.flush().map_err(|e| store_err("checkpoint", e))?;
    Ok(RecoveryReport {
        last_exit_ok,
        recovered_offset: end,
        torn_tail,
        dispatch_from,
        indexed_records_lost: lost,
    })
}

/// Why the record a ConsumeQueue unit points at is not the unit's, if it is not: a unit
/// damaged by bit rot, or a queue file from another store, must not serve another queue's
/// message (or zero bytes as one). The dispatcher wrote each unit from its record, so the
/// record's size, topic, queue and queue offset are the unit's.
fn unit_mismatch(bytes: &[u8], topic: &str, queue_id: i32, queue_offset: i64) -> Option<String> {
    let Some(rec) = crate::message::codec::record_identity(bytes) else {
        return Some("no record of its size there".into());
    };
    // Not its offset field: outside the body's checksum, it may be damaged in a record that
    // is whole, which the dispatcher queues where it is.
    if rec.total_size as usize != bytes.len() {
        return Some(format!("the record there has size {}", rec.total_size));
    }
    if rec.topic != topic.as_bytes() || rec.queue_id != queue_id || rec.queue_offset != queue_offset {
        return Some(format!(
            "the record there is {}/{} #{}",
            crate::clip(&String::from_utf8_lossy(rec.topic), 200),
            rec.queue_id,
            rec.queue_offset
        ));
    }
    None
}

/// Logs a damaged unit (each queue at most once a minute), which a read skips.
fn damaged_unit(topic: &str, queue_id: i32, queue_offset: i64, u: &CqUnit, why: &str) {
    static DAMAGED: crate::logging::Throttle = crate::logging::Throttle::new(Duration::from_secs(60));
    if let Some(n) = DAMAGED.note(&format!("{topic}/{queue_id}")) {
        tracing::warn!(
            "ConsumeQueue {topic}/{queue_id} unit {queue_offset} (CommitLog offset {}, size {}) is damaged: {why}; \
             reads skip it{}",
            u.phy_offset,
            u.size,
            crate::logging::recurred(n)
        );
    }
}

/// Destroys the files of a deleted topic's `queues` and removes its directory.
/// Refuses a topic name that is not one directory name (see `names_one_directory`).
fn refuse_path_steps(topic: &str) -> Result<()> {
    if super::consume_queue::names_one_directory(topic) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{topic:?} is not a topic name: it is not one directory name")))
    }
}

fn drop_queues(cqs: &ConsumeQueueStore, topic: &str, queues: &[Arc<ConsumeQueue>]) -> Result<()> {
    let failed =
        |e: std::io::Error| Error::Store(format!("deleting the ConsumeQueues of topic {topic:?}: {e}"));
    for q in queues {
        q.destroy().map_err(failed)?;
    }
    // `root.join("..")` has the root as its parent too: only a name that is one directory.
    // And only a topic that had queues: on a case-insensitive file system another spelling
    // of a live topic's name finds that topic's directory.
    let dir = cqs.root().join(topic);
    if !queues.is_empty() && super::consume_queue::names_one_directory(topic) && dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(failed)?;
        super::mapped_file::sync_dir(cqs.root()).map_err(failed)?;
    }
    Ok(())
}

/// Finishes deletions a crash interrupted: queues of a deleted topic whose every unit lies
/// below the deletion (a queue made again after it has units past it, and stays). Called
/// once the queues are recovered: before, none knows where its units end.
fn drop_deleted_leftovers(cqs: &ConsumeQueueStore, deleted: &DeletedTopics) -> Result<()> {
    for (topic, below) in deleted.all() {
        let left = cqs.queues_of(&topic);
        let below = i64::try_from(below).unwrap_or(i64::MAX);
        if !left.is_empty() && left.iter().all(|q| q.max_physic_offset() <= below) {
            tracing::warn!(topic, "finishing the deletion of topic {topic:?}: removing its ConsumeQueues");
            let queues = cqs.remove_topic(&topic);
            drop_queues(cqs, &topic, &queues)?;
        }
    }
    Ok(())
}

/// The queues whose last unit does not point at their own record in this log: built from
/// another CommitLog (a `storePathCommitLog` that named another directory for a while, a
/// queue directory copied from another store). Their units would hand out other records, so
/// recovery deletes them and dispatch rebuilds them from the log.
fn foreign_queues(cl: &CommitLog, cqs: &ConsumeQueueStore, min: u64, end: u64) -> Vec<Arc<ConsumeQueue>> {
    let opts = cl.check_options(false);
    let mut foreign = Vec::new();
    for q in cqs.all() {
        if q.topic().starts_with("%LMQ%") {
            // RocketMQ 5's light queues index records of other topics (multi-dispatch, which
            // rmqha does not do): their units cannot be judged by the record's topic.
            continue;
        }
        let last = q.max_offset_in_queue() - 1;
        let Some(unit) = q.get(last) else { continue };
        if unit.size <= 0 || unit.phy_offset < min as i64 || unit.phy_offset >= end as i64 {
            // Expired with its log file, or past the end (cut by `truncate_dirty`).
            continue;
        }
        if !unit_points_at_its_record(cl, &q, &unit, &opts, Some(last)) {
            tracing::error!(
                "recovery: ConsumeQueue {}/{} was not built from the CommitLog in {}: its last unit (queue \
                 offset {last}) points at offset {} ({} bytes), where this log holds another record; \
                 deleting the queue and rebuilding it from the log",
                q.topic(),
                q.queue_id(),
                cl.queue().dirs().describe(),
                unit.phy_offset,
                unit.size
            );
            foreign.push(q);
        }
    }
    foreign
}

/// Whether `unit` of queue `q` points at a record of that topic and queue, which says it
/// lies there and has the unit's size (and, given, the queue offset), under `opts`' checks.
fn unit_points_at_its_record(
    cl: &CommitLog,
    q: &ConsumeQueue,
    unit: &CqUnit,
    opts: &crate::message::CheckOptions<'_>,
    queue_offset: Option<i64>,
) -> bool {
    cl.data_at(unit.phy_offset as u64).is_some_and(|(file, pos)| {
        matches!(
            crate::message::check_record(file.readable_from(pos), opts),
            crate::message::CheckResult::Message(req)
                if req.commit_log_offset == unit.phy_offset
                    && req.msg_size == unit.size
                    && req.topic == q.topic()
                    && req.queue_id == q.queue_id()
                    && queue_offset.is_none_or(|o| req.consume_queue_offset == o)
        )
    })
}

/// What recovery's walk saw of one queue.
struct QueueSeen {
    first_phy: u64,
    first_queue_offset: i64,
    last_queue_offset: i64,
}

/// The ConsumeQueue units at or past a recovery's end offset.
#[derive(Default)]
struct PastEnd {
    /// How many there are, and where the furthest one ends.
    indexed: u64,
    indexed_end: u64,
    /// Of the last `CHECKED_PER_QUEUE` of each queue (past the first, which is `end`'s own
    /// record), how many point at a record that still checks there (CRC included).
    valid: u64,
    valid_end: u64,
}

/// Walks each queue back from its last unit to `end`; with `check`, also checks the records.
fn units_past(cl: &CommitLog, cqs: &ConsumeQueueStore, end: u64, check: bool) -> PastEnd {
    const CHECKED_PER_QUEUE: usize = 64;
    let opts = cl.check_options(true);
    let mut past = PastEnd::default();
    for q in cqs.all() {
        if q.max_physic_offset() <= end as i64 {
            continue;
        }
        let (mut i, mut checked) = (q.max_offset_in_queue() - 1, 0);
        while let Some(unit) = q.get(i) {
            if unit.phy_offset < end as i64 || unit.size <= 0 {
                break;
            }
            i -= 1;
            let unit_end = unit.phy_offset.saturating_add(unit.size as i64) as u64;
            past.indexed += 1;
            past.indexed_end = past.indexed_end.max(unit_end);
            if !check || checked == CHECKED_PER_QUEUE || unit.phy_offset == end as i64 {
                continue;
            }
            checked += 1;
            if unit_points_at_its_record(cl, &q, &unit, &opts, None) {
                past.valid += 1;
                past.valid_end = past.valid_end.max(unit_end);
            }
        }
    }
    past
}

/// topic -> queue -> next offset, for tests and status.
pub fn queue_offsets(store: &MessageStore) -> HashMap<String, HashMap<i32, i64>> {
    store.cqs.queue_offset_table()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// Runs in a put between its checks and its append (this thread's puts only).
        static BEFORE_APPEND: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
        /// Runs in `start` once dispatch caught up, before the queue offsets are restored.
        static DURING_START: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
    }

    pub(super) fn during_start() {
        DURING_START.with(|h| {
            if let Some(h) = h.borrow().as_ref() {
                h()
            }
        });
    }

    /// A put while `start` restores the queue offsets is refused; one after gets the next
    /// offset of its queue. (Taken, it got queue offset 0 in a queue of 10 messages, and its
    /// unit was never written.) A store shut down cannot be started again.
    #[test]
    fn puts_wait_for_start_to_restore_the_queue_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(config(dir.path(), &[])).unwrap();
        store.start().unwrap();
        for i in 0..10 {
            store.put_message_sync(&Message::new("T", format!("m{i}").into_bytes())).unwrap();
        }
        store.shutdown();
        drop(store);
        let store = MessageStore::open(config(dir.path(), &[])).unwrap();
        let early = Arc::new(Mutex::new(None));
        let (s2, e2) = (store.clone(), early.clone());
        DURING_START.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                *e2.lock().unwrap() = Some(s2.put_message_sync(&Message::new("T", &b"early"[..])));
            }))
        });
        store.start().unwrap();
        DURING_START.with(|h| *h.borrow_mut() = None);
        match early.lock().unwrap().take().expect("the hook ran") {
            Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason }) => {
                assert!(reason.contains("starting"), "{reason}")
            }
            other => panic!("a put during the start: {other:?}"),
        }
        let r = store.put_message_sync(&Message::new("T", &b"after"[..])).unwrap();
        assert_eq!(r.queue_offset, 10);
        store.shutdown();
        assert!(store.start().is_err(), "started again after a shutdown");
        assert!(!dir.path().join("abort").exists(), "the abort file came back");
    }

    pub(super) fn before_append() {
        BEFORE_APPEND.with(|h| {
            if let Some(h) = h.borrow().as_ref() {
                h()
            }
        });
    }

    /// A small store on `dir`, with `extra` keys.
    fn config(dir: &std::path::Path, extra: &[(&str, &str)]) -> BrokerConfig {
        let mut cfg = BrokerConfig::default();
        let base = [
            ("storePathRootDir", dir.to_str().unwrap()),
            ("mappedFileSizeCommitLog", "65536"),
            ("listenPort", "0"),
            ("brokerIP1", "127.0.0.1"),
        ];
        for (k, v) in base.iter().chain(extra) {
            cfg.set(k, v).unwrap();
        }
        cfg
    }

    /// A clean stop with 20,000 dirty queues synced each queue file on its own (4 s here,
    /// 11-32 s on slower disks). From `BATCH_SYNC_MIN_QUEUES` dirty queues on, a thorough
    /// flush syncs their file system once and records every queue as flushed; below it, each
    /// queue is synced as before.
    #[test]
    fn a_thorough_flush_of_many_queues_syncs_their_file_system_once() {
        use crate::store::mapped_file::SYNCED_FS;
        for (queues, whole) in [(flush::BATCH_SYNC_MIN_QUEUES + 6, true), (10, false)] {
            let dir = tempfile::tempdir().unwrap();
            let store =
                MessageStore::open(config(dir.path(), &[("flushIntervalConsumeQueue", "600000")])).unwrap();
            store.start().unwrap();
            for i in 0..queues {
                let m = Message::new(format!("Q{}", i / 8), b"x".to_vec()).with_queue((i % 8) as i32);
                store.put_message(&m).unwrap();
            }
            assert!(store.wait_dispatched(Duration::from_secs(10)));
            let all = store.cqs.all();
            assert_eq!(all.len(), queues);
            assert!(all.iter().all(|q| q.files().flushed_where() < q.files().max_offset()));
            SYNCED_FS.with(|s| s.borrow_mut().clear());
            flush::flush_logics(
                &store.cqs,
                None,
                &store.dispatcher,
                &store.commit_log,
                &store.checkpoint,
                0,
                true,
            );
            let synced_fs = SYNCED_FS.with(|s| s.borrow().clone());
            // Only where a successful syncfs proves the data on disk (kernel and file system).
            let usable = crate::store::mapped_file::syncfs_reports_errors(
                &std::fs::File::open(store.cqs.root()).unwrap(),
            );
            let want = if whole && usable { vec![store.cqs.root().to_path_buf()] } else { vec![] };
            assert_eq!(synced_fs, want, "{queues} queues");
            assert_eq!(
                synced_fs,
                if whole { vec![store.cqs.root().to_path_buf()] } else { vec![] },
                "{queues} queues"
            );
            for q in &all {
                assert_eq!(
                    q.files().flushed_where(),
                    q.files().max_offset(),
                    "{}/{}",
                    q.topic(),
                    q.queue_id()
                );
                for f in q.files().files() {
                    assert_eq!(f.flushed_position(), f.wrote_position());
                }
            }
            assert!(!store.cqs.flush_failed());
            store.shutdown();
            assert_eq!(store.unclean_stop(), None);
        }
    }

    /// A cut (dispatch sent back) while a thorough flush syncs the queues: the checkpoint's
    /// logics fields, measured before the flush, would claim units above the cut that are
    /// written again after it and not flushed; an OS crash then started recovery past them
    /// (found by an audit). Nothing is claimed across such a rewind.
    #[test]
    fn a_rewind_during_a_queue_flush_claims_nothing_in_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let slow =
            [("flushIntervalConsumeQueue", "3600000"), ("flushConsumeQueueThoroughInterval", "3600000")];
        let store = MessageStore::open(config(dir.path(), &slow)).unwrap();
        store.start().unwrap();
        for i in 0..3 {
            store.put_message_sync(&Message::new("T", format!("m{i}").into_bytes())).unwrap();
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let claimed = store.checkpoint.get().logics_offset;
        assert!(store.dispatcher.reput_from() as i64 > claimed);
        let cq = store.cqs.find("T", 0).unwrap().files().last().unwrap().path().to_path_buf();
        let thorough = || {
            let (cqs, cl, cp) = (&store.cqs, &store.commit_log, &store.checkpoint);
            flush::flush_logics(cqs, store.index.as_deref(), &store.dispatcher, cl, cp, 0, true)
        };
        let d = store.dispatcher.clone();
        *crate::store::mapped_file::tests::MID_FLUSH.lock().unwrap() =
            Some((cq, Box::new(move || d.set_reput_from(0))));
        thorough();
        *crate::store::mapped_file::tests::MID_FLUSH.lock().unwrap() = None;
        assert_eq!(store.checkpoint.get().logics_offset, claimed, "claimed across the rewind");
        // The next flush claims again.
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        thorough();
        assert_eq!(store.checkpoint.get().logics_offset, store.dispatcher.reput_from() as i64);
        store.shutdown();
    }

    /// A put that passed its running check just before `shutdown` began appended after the
    /// final flush (and after the store's locks went to the next owner of the directory) and
    /// answered PUT_OK: a record never flushed, in a store someone else may have opened.
    #[test]
    fn a_put_past_its_checks_when_shutdown_begins_never_lands_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(MessageStore::open(config(dir.path(), &[])).unwrap());
        store.start().unwrap();
        store.put_message_sync(&Message::new("T", b"before".to_vec())).unwrap();
        let (at_check, checked) = crossbeam_channel::bounded::<()>(0);
        let (go, wait_go) = crossbeam_channel::bounded::<()>(0);
        let s = store.clone();
        let putter = std::thread::spawn(move || {
            BEFORE_APPEND.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    at_check.send(()).unwrap();
                    wait_go.recv().unwrap();
                }))
            });
            s.put_message_sync(&Message::new("T", b"late".to_vec()))
        });
        checked.recv().unwrap();
        store.shutdown();
        let (max, flushed) = (store.max_offset(), store.flushed_offset());
        go.send(()).unwrap();
        match putter.join().unwrap() {
            Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason }) => {
                assert!(reason.contains("shut down"), "{reason}")
            }
            other => panic!("a put after shutdown answered {other:?}"),
        }
        assert_eq!(store.max_offset(), max, "the log grew after shutdown returned");
        assert_eq!(max, flushed);
    }

    /// The directory syncs a new queue leaves to the flusher are done by it: after a stop
    /// (a thorough flush) none is left.
    #[test]
    fn the_flusher_syncs_the_directories_of_new_queues() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            MessageStore::open(config(dir.path(), &[("mappedFileSizeConsumeQueue", "2000")])).unwrap();
        store.start().unwrap();
        store.put_message_sync(&Message::new("Fresh", b"x".to_vec()).with_queue(2)).unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let q = store.cqs.find("Fresh", 2).unwrap();
        store.shutdown();
        let mut left = std::collections::BTreeSet::new();
        q.files().take_unsynced_dirs(&mut left);
        assert!(left.is_empty(), "not synced: {left:?}");
    }

    /// After a crash, recovery counts what the page cache kept as flushed: it must have synced
    /// it first, or a power loss could leave a hole below later acknowledged puts.
    #[test]
    fn a_recovery_after_a_crash_syncs_what_it_counts_as_flushed() {
        use crate::store::mapped_file::SYNCED_WHOLE;
        let dir = tempfile::tempdir().unwrap();
        // Nothing flushed by the running store: all of it is the page cache's.
        let cfg = config(
            dir.path(),
            &[
                ("mappedFileSizeConsumeQueue", "2000"),
                ("flushIntervalCommitLog", "600000"),
                ("flushCommitLogThoroughInterval", "600000"),
                ("flushIntervalConsumeQueue", "600000"),
            ],
        );
        let store = MessageStore::open(cfg.clone()).unwrap();
        store.start().unwrap();
        for i in 0..300 {
            let body = format!("record-{i}-").into_bytes().repeat(40);
            store.put_message_sync(&Message::new("Crash", body).with_queue(i % 2)).unwrap();
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.crash();
        drop(store);
        SYNCED_WHOLE.with(|s| s.borrow_mut().clear());
        crate::store::mapped_file::SYNCED_FS.with(|s| s.borrow_mut().clear());
        let store = MessageStore::open(cfg.clone()).unwrap();
        assert!(!store.recovery().last_exit_ok);
        store.start().unwrap();
        let synced = SYNCED_WHOLE.with(|s| s.borrow().clone());
        let cl_files = store.commit_log().queue().files();
        assert!(cl_files.len() >= 3, "the test needs several files");
        for f in &cl_files {
            assert!(synced.contains(&f.path().to_path_buf()), "{} not synced", f.path().display());
        }
        // The queues' file system as a whole (`syncfs`), or else each file.
        let whole_fs = crate::store::mapped_file::SYNCED_FS
            .with(|s| s.borrow().contains(&store.cqs.root().to_path_buf()));
        for q in store.cqs.all() {
            for f in q.files().files() {
                assert!(
                    whole_fs || synced.contains(&f.path().to_path_buf()),
                    "{} not synced",
                    f.path().display()
                );
            }
        }
        store.shutdown();
        drop(store);
        // A clean stop flushed everything: the next (normal) recovery syncs nothing.
        SYNCED_WHOLE.with(|s| s.borrow_mut().clear());
        crate::store::mapped_file::SYNCED_FS.with(|s| s.borrow_mut().clear());
        let store = MessageStore::open(cfg).unwrap();
        assert!(store.recovery().last_exit_ok);
        assert!(SYNCED_WHOLE.with(|s| s.borrow().is_empty()));
        assert!(crate::store::mapped_file::SYNCED_FS.with(|s| s.borrow().is_empty()));
        store.shutdown();
    }
}
