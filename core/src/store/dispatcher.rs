//! The dispatcher (RocketMQ's ReputMessageService, spec 5): one thread that reads CommitLog
//! bytes from the reput offset and appends ConsumeQueue units and index entries. It runs on
//! masters and slaves alike, which is why replication copies only CommitLog bytes.
//!
//! It sleeps on the CommitLog's append signal, so it is woken by local puts and by a slave's
//! replicated writes alike; there is no polling interval on the hot path.

use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use super::commit_log::CommitLog;
use super::consume_queue::{ConsumeQueue, ConsumeQueueStore, CqUnit};
use super::deleted_topics::DeletedTopics;
use super::index::IndexService;
use super::mapped_file::MappedFile;
use super::notify::Notifier;
use crate::message::{CheckResult, DispatchRequest, check_record, sysflag};

/// How long the dispatcher pauses after a round that dispatched something.
const DISPATCH_PAUSE: Duration = Duration::from_micros(500);

/// The dispatcher's state, shared with readers of its progress.
pub struct Dispatcher {
    commit_log: Arc<CommitLog>,
    cqs: Arc<ConsumeQueueStore>,
    index: Option<Arc<IndexService>>,
    /// Records of deleted topics below their deletion get no unit.
    deleted: Arc<DeletedTopics>,
    /// On a slave a partial record at the tail is waited for, not skipped.
    is_slave: AtomicBool,
    reput_from: AtomicU64,
    /// How many times `reput_from` went back (a cut, a master's deletion): a value read before
    /// one no longer says what is dispatched (see `rewinds`).
    rewinds: AtomicU64,
    /// Store timestamp of the last dispatched message.
    last_dispatched_ts: AtomicI64,
    /// Signalled after each round that dispatched something (long polling waits on it).
    dispatched: Notifier,
    /// Offset at which a bad record was last reported (to log each once).
    reported_bad: AtomicU64,
    /// Held for each round (see `exclusive`).
    round: parking_lot::Mutex<QueueCache>,
    /// Slave: why the replicated bytes do not fit this store's files (the master's
    /// `mappedFileSizeCommitLog` differs); dispatch stops there and the HA client stops acking.
    /// Set once; read without a lock on the HA client's every round.
    layout_fault: std::sync::OnceLock<String>,
    /// Which queues got units, for long polling (see `want_arrivals`).
    arrivals: Arrivals,
    /// Why dispatch keeps failing, and since when (ms since the epoch); `None` while it works.
    failing: std::sync::Mutex<Option<(String, i64)>>,
}

/// The queues that got units since long polling last asked, recorded only while it wants
/// them (pulls are parked): it then checks those queues, not every queue a pull waits on.
/// With 20,000 parked pulls, checking them all after every dispatch round took a core.
#[derive(Default)]
struct Arrivals {
    wanted: AtomicBool,
    queues: parking_lot::Mutex<FxHashMap<String, FxHashSet<i32>>>,
}

/// The ConsumeQueues the dispatcher has written to, by topic and queue id, each with its last
/// file (see `ConsumeQueue::put`): a record's queue is found here without the store's shared
/// lock, SipHash or a reference-count bump. The store removes a queue only with its topic
/// (`forget_topic`, which drops it here too), so a queue entry never goes stale; a kept file is checked against its queue's
/// file-list generation by each put and by `sweep`.
struct QueueCache {
    queues: FxHashMap<String, FxHashMap<i32, KeptQueue>>,
    swept: Instant,
    /// The queues this round put units into, while long polling wants them.
    arrived: FxHashMap<String, FxHashSet<i32>>,
}

type KeptQueue = (Arc<ConsumeQueue>, Option<(u64, Arc<MappedFile>)>);

/// How often the dispatcher lets go of kept files that left their queue's file list.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl QueueCache {
    fn new() -> Self {
        QueueCache { queues: FxHashMap::default(), swept: Instant::now(), arrived: FxHashMap::default() }
    }

    fn arrived(&mut self, topic: &str, queue_id: i32) {
        match self.arrived.get_mut(topic) {
            Some(ids) => {
                ids.insert(queue_id);
            }
            None => {
                self.arrived.entry(topic.to_owned()).or_default().insert(queue_id);
            }
        }
    }

    /// Drops the kept last files that retention, truncation or `destroy` took out of their
    /// queue's file list (a put drops them too, but an idle queue would keep a deleted file's
    /// mapping, and its disk space, for as long as no record came), at most every `every`.
    fn sweep(&mut self, every: Duration) {
        if self.swept.elapsed() < every {
            return;
        }
        self.swept = Instant::now();
        for (cq, last) in self.queues.values_mut().flat_map(|m| m.values_mut()) {
            if matches!(last, Some((g, _)) if *g != cq.files().generation()) {
                *last = None;
            }
        }
    }
}

impl Dispatcher {
    pub fn new(
        commit_log: Arc<CommitLog>,
        cqs: Arc<ConsumeQueueStore>,
        index: Option<Arc<IndexService>>,
        deleted: Arc<DeletedTopics>,
        is_slave: bool,
        reput_from: u64,
    ) -> Self {
        Dispatcher {
            commit_log,
            cqs,
            index,
            deleted,
            is_slave: AtomicBool::new(is_slave),
            reput_from: AtomicU64::new(reput_from),
            rewinds: AtomicU64::new(0),
            last_dispatched_ts: AtomicI64::new(0),
            dispatched: Notifier::new(),
            reported_bad: AtomicU64::new(u64::MAX),
            round: parking_lot::Mutex::new(QueueCache::new()),
            layout_fault: std::sync::OnceLock::new(),
            arrivals: Arrivals::default(),
            failing: std::sync::Mutex::new(None),
        }
    }

    /// Why dispatch keeps failing (consumers get no new messages), and since when (ms since
    /// the epoch); `None` while it works.
    pub fn failure(&self) -> Option<(String, i64)> {
        self.failing.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_failure(&self, why: Option<&str>) {
        let mut f = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        match why {
            None => *f = None,
            Some(w) if f.as_ref().is_some_and(|(old, _)| old == w) => {}
            Some(w) => *f = Some((w.to_string(), crate::store::commit_log::now_ms())),
        }
    }

    /// Long polling: whether to record the queues that get units (while pulls are parked).
    /// A record dispatched before this is set is not recorded: whoever sets it checks the
    /// queues it cares about once after setting it.
    pub(crate) fn want_arrivals(&self, on: bool) {
        self.arrivals.wanted.store(on, Ordering::SeqCst);
    }

    /// The queues that got units since the last call (while wanted), by topic.
    pub(crate) fn take_arrivals(&self) -> FxHashMap<String, FxHashSet<i32>> {
        std::mem::take(&mut *self.arrivals.queues.lock())
    }

    pub fn reput_from(&self) -> u64 {
        self.reput_from.load(Ordering::Acquire)
    }
    pub(crate) fn set_reput_from(&self, v: u64) {
        if self.reput_from.swap(v, Ordering::AcqRel) > v {
            self.rewinds.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How many times dispatch was sent back to an earlier offset: the checkpoint's flusher
    /// reads it before and after a flush, and claims nothing measured across one.
    pub fn rewinds(&self) -> u64 {
        self.rewinds.load(Ordering::Acquire)
    }
    pub fn is_slave(&self) -> bool {
        self.is_slave.load(Ordering::Acquire)
    }
    pub fn set_slave(&self, slave: bool) {
        self.is_slave.store(slave, Ordering::Release);
    }
    pub fn last_dispatched_timestamp(&self) -> i64 {
        self.last_dispatched_ts.load(Ordering::Acquire)
    }
    pub fn dispatched(&self) -> &Notifier {
        &self.dispatched
    }

    /// Bytes written but not yet dispatched.
    pub fn behind_bytes(&self) -> u64 {
        self.commit_log.max_offset().saturating_sub(self.reput_from())
    }

    /// Holds off dispatch rounds until the guard drops, waiting for one in progress: a
    /// truncation cuts the log and the queues and moves the reput offset back under it. A
    /// round that overlapped a truncation used to publish its stale reput offset after the
    /// cut (so the records appended next were never dispatched) and could append units for
    /// records the cut removed.
    pub fn exclusive(&self) -> parking_lot::MutexGuard<'_, impl Sized> {
        self.round.lock()
    }

    /// Like `exclusive`, and forgets the queues of `topic` it kept: the caller takes them out
    /// of the store (a deleted topic), and the next record of the topic makes new ones.
    pub(crate) fn forget_topic(&self, topic: &str) -> parking_lot::MutexGuard<'_, impl Sized> {
        let mut round = self.round.lock();
        round.queues.remove(topic);
        round
    }

    /// The store's deleted topics.
    pub fn deleted_topics(&self) -> &DeletedTopics {
        &self.deleted
    }

    /// Slave: why the replicated log does not fit this store's file size, once found.
    pub fn layout_fault(&self) -> Option<&str> {
        self.layout_fault.get().map(String::as_str)
    }

    /// Records why the replicated log does not fit this store's files (the dispatcher's own
    /// checks, or the slave client's before it acks); the first reason stays.
    pub(crate) fn set_layout_fault(&self, why: String) {
        if self.layout_fault.set(why).is_ok() {
            tracing::error!("{}", self.layout_fault.get().map_or("", String::as_str));
        }
    }

    /// Dispatches everything available now; returns whether anything was consumed.
    pub fn dispatch_available(&self) -> std::io::Result<bool> {
        let mut queues = self.round.lock();
        queues.sweep(SWEEP_EVERY);
        let cl = &self.commit_log;
        let mut reput = self.reput_from();
        let start = reput;
        let min = cl.min_offset();
        if reput < min {
            reput = min;
        }
        let opts = cl.check_options(false);
        let mut count = 0u64;
        // The end and store timestamp of the last record dispatched, for the flushers and
        // the checkpoint's logics timestamp, published once per round.
        let mut last = (0u64, 0i64);
        'files: while reput < cl.max_offset() {
            let Some((file, pos)) = cl.data_at(reput) else {
                // Not in any file: the log moved on (deletion) or a file is missing.
                let next = cl.roll_next_file(reput);
                if cl.queue().find(next).is_some() {
                    reput = next;
                    continue;
                }
                break;
            };
            let data = file.readable_from(pos);
            if data.is_empty() {
                if file.is_full() {
                    reput = file.end_offset();
                    continue;
                }
                break;
            }
            let mut at = 0usize;
            while at < data.len() {
                match check_record(&data[at..], &opts) {
                    CheckResult::Message(mut req) => {
                        let here = reput + at as u64;
                        if req.commit_log_offset != here as i64 {
                            // The field is outside the body's checksum: a damaged header, or
                            // bytes from a master that lies. Index the record where it is.
                            self.report_bad(
                                here,
                                &format!(
                                    "the record's offset field says {}; indexed where it is",
                                    req.commit_log_offset
                                ),
                            );
                            req.commit_log_offset = here as i64;
                        }
                        self.dispatch(&mut queues, &req)?;
                        count += 1;
                        at += req.msg_size as usize;
                        last = (reput + at as u64, req.store_timestamp);
                    }
                    CheckResult::Blank => {
                        if self.is_slave.load(Ordering::Acquire) {
                            // The master's filler says how much of its file is left: its file
                            // must end where this slave's does.
                            let left = i32::from_be_bytes(data[at..at + 4].try_into().unwrap_or_default());
                            let ends = reput + at as u64 + left.max(0) as u64;
                            if ends != file.end_offset() {
                                self.set_layout_fault(filler_mismatch(reput + at as u64, ends, &file));
                                reput += at as u64;
                                break 'files;
                            }
                        }
                        reput = cl.roll_next_file(reput + at as u64);
                        self.publish(reput, count);
                        continue 'files;
                    }
                    CheckResult::Incomplete if self.is_slave.load(Ordering::Acquire) => {
                        // Judged on the bytes read (`data`), not on the file now: more may
                        // have arrived since, and a file that filled meanwhile says nothing.
                        if pos + data.len() == file.size() {
                            // A master's record never crosses its file's end, so the master's
                            // files are larger than this slave's.
                            self.set_layout_fault(format!(
                                "the record at offset {} runs past the end of this slave's CommitLog file at {}: \
                                 the master's mappedFileSizeCommitLog is larger than this slave's ({} bytes); set it \
                                 to the master's and rebuild this slave's store",
                                reput + at as u64,
                                file.end_offset(),
                                file.size()
                            ));
                        }
                        // Replicated bytes arrive in arbitrary chunks: wait for the rest.
                        reput += at as u64;
                        break 'files;
                    }
                    CheckResult::Invalid { skip: Some(n) } => {
                        self.report_bad(reput + at as u64, "record fields disagree with its size; skipped");
                        at += n as usize;
                    }
                    CheckResult::Invalid { skip: None } if self.is_slave.load(Ordering::Acquire) => {
                        self.report_bad(reput + at as u64, "not a record; waiting for the master's bytes");
                        reput += at as u64;
                        break 'files;
                    }
                    CheckResult::Incomplete | CheckResult::Invalid { .. } => {
                        // On a master everything below max offset is whole records; anything
                        // else is damage: skip the rest of this file's data (as RocketMQ).
                        self.report_bad(
                            reput + at as u64,
                            "not a record; skipping the rest of the file's data",
                        );
                        at = data.len();
                    }
                }
            }
            reput += at as u64;
            self.publish(reput, count);
        }
        self.publish(reput, count);
        if !queues.arrived.is_empty() {
            let mut shared = self.arrivals.queues.lock();
            for (topic, ids) in queues.arrived.drain() {
                shared.entry(topic).or_default().extend(ids);
            }
        }
        if count > 0 {
            self.last_dispatched_ts.store(last.1, Ordering::Release);
            cl.note_dispatched(last.0, last.1);
            self.dispatched.notify();
        }
        Ok(reput != start)
    }

    fn publish(&self, reput: u64, _count: u64) {
        self.reput_from.store(reput, Ordering::Release);
    }

    fn report_bad(&self, offset: u64, what: &str) {
        if self.reported_bad.swap(offset, Ordering::AcqRel) != offset {
            tracing::error!("dispatch at CommitLog offset {offset}: {what}");
        }
    }

    fn dispatch(&self, queues: &mut QueueCache, req: &DispatchRequest<'_>) -> std::io::Result<()> {
        if sysflag::takes_queue_offset(req.sys_flag)
            && !self.deleted.hides(req.topic, req.commit_log_offset as u64)
        {
            let of_topic = match queues.queues.get_mut(req.topic) {
                Some(q) => q,
                None => queues.queues.entry(req.topic.to_owned()).or_default(),
            };
            let unit =
                CqUnit { phy_offset: req.commit_log_offset, size: req.msg_size, tags_code: req.tags_code };
            let queued = match of_topic.entry(req.queue_id) {
                Entry::Occupied(e) => Ok(e.into_mut()),
                Entry::Vacant(e) => {
                    self.cqs.find_or_create(req.topic, req.queue_id).map(|cq| e.insert((cq, None)))
                }
            }
            .and_then(|(cq, last_file)| cq.put(last_file, unit, req.consume_queue_offset));
            match queued {
                Ok(()) => {
                    if self.arrivals.wanted.load(Ordering::SeqCst) {
                        queues.arrived(req.topic, req.queue_id);
                    }
                }
                // A topic that is not one directory name, or a queue offset no queue can hold
                // (never from a put here, but a replicated record or a damaged header may
                // carry one): the record stays in the log without a unit, and dispatch goes on.
                Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => {
                    self.report_bad(
                        req.commit_log_offset as u64,
                        &format!("{err}: the record gets no queue unit"),
                    );
                }
                Err(err) => {
                    let dir = self.cqs.root().join(req.topic).join(req.queue_id.to_string());
                    return Err(std::io::Error::new(
                        err.kind(),
                        format!("ConsumeQueue {}/{} ({}): {err}", req.topic, req.queue_id, dir.display()),
                    ));
                }
            }
        }
        if let Some(index) = &self.index {
            index.build_index(req).map_err(|e| {
                std::io::Error::new(e.kind(), format!("index ({}): {e}", index.dir().display()))
            })?;
        }
        Ok(())
    }

    /// The dispatch loop; returns when `stop` is set and everything available is dispatched.
    pub fn run(&self, stop: &AtomicBool) {
        let signal = self.commit_log.appended();
        // A full disk fails every attempt until space returns: said when it starts and when
        // the cause changes, then every 5 minutes (consumers get nothing new meanwhile, and
        // one line long ago is easy to miss); retried at a steady pace rather than on every
        // append, which would log a line per put and spin a core.
        let mut failing = crate::logging::Repeats::new(Duration::from_secs(300));
        loop {
            let seen = signal.seq();
            let progressed = match self.dispatch_available() {
                Ok(p) => {
                    let attempts = failing.clear();
                    if attempts > 0 {
                        self.set_failure(None);
                        tracing::info!("dispatch resumed after {attempts} failed attempts");
                    }
                    p
                }
                Err(e) => {
                    let why = e.to_string();
                    self.set_failure(Some(&why));
                    if let Some(n) = failing.note(&why) {
                        let more = crate::logging::recurred(n);
                        tracing::error!(
                            "dispatch failed, retrying every 100 ms; consumers get no new messages meanwhile: \
                             {why}{more}"
                        );
                    }
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if stop.load(Ordering::Acquire) && !progressed {
                return;
            }
            if progressed {
                // Pause before the next round instead of waiting on the signal: a waiting
                // dispatcher makes every put pay a wake-up syscall and two context switches,
                // which at high put rates cost more than the put itself. After a pause the
                // next round takes a whole batch (RocketMQ's reput sleeps 1 ms per round too).
                std::thread::sleep(DISPATCH_PAUSE);
            } else {
                signal.wait(seen, Duration::from_millis(500));
            }
        }
    }
}

/// Why a slave cannot take a master's log whose end-of-file filler at `at` says the master's
/// file ends at `ends`, inside this slave's `file` (the dispatcher's check, and the slave
/// client's before it acks).
pub(crate) fn filler_mismatch(at: u64, ends: u64, file: &crate::store::mapped_file::MappedFile) -> String {
    format!(
        "the master's end-of-file filler at offset {at} says its CommitLog file ends at {ends}, but this \
         slave's ends at {}: the master's mappedFileSizeCommitLog differs from this slave's ({} bytes); set \
         it to the master's and rebuild this slave's store",
        file.end_offset(),
        file.size()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept last file that left its queue's file list is let go by the next sweep, so an
    /// idle queue does not keep a deleted file mapped; a current one is kept.
    #[test]
    fn sweep_lets_go_of_files_that_left_their_queue() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConsumeQueueStore::load(dir.path(), 3 * 20).unwrap();
        let mut cache = QueueCache::new();
        for qid in 0..2 {
            let cq = store.find_or_create("T", qid).unwrap();
            let mut last = None;
            for i in 0..2 {
                cq.put(&mut last, CqUnit { phy_offset: i * 100, size: 100, tags_code: 0 }, i).unwrap();
            }
            cache.queues.entry("T".into()).or_default().insert(qid, (cq, last));
        }
        let kept = |c: &QueueCache, qid: i32| c.queues["T"][&qid].1.as_ref().map(|(_, f)| f.clone());
        let file = kept(&cache, 0).expect("queue 0 keeps its last file");
        store.find("T", 0).unwrap().destroy().unwrap();

        cache.sweep(Duration::from_secs(3600));
        assert!(kept(&cache, 0).is_some(), "swept before its time");
        cache.sweep(Duration::ZERO);
        assert!(kept(&cache, 0).is_none(), "the destroyed queue's file is still kept");
        assert!(kept(&cache, 1).is_some(), "queue 1's current file was dropped");
        assert_eq!(Arc::strong_count(&file), 1, "someone else still holds the deleted file");
    }
}
