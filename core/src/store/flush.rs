//! Flush services (spec 2.4, 2.5, 3.3): ASYNC_FLUSH on an interval, SYNC_FLUSH group commit,
//! and the ConsumeQueue/checkpoint flusher.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::checkpoint::StoreCheckpoint;
use super::commit_log::CommitLog;
use super::consume_queue::ConsumeQueueStore;
use super::dispatcher::Dispatcher;
use super::index::IndexService;
use super::notify::Notifier;
use super::status::PutStatus;
use super::wait::OffsetWaiters;

/// Interruptible sleeps for service threads: `stop` wakes them at once.
#[derive(Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    notifier: Notifier,
}

impl StopSignal {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
    pub fn flag(&self) -> &AtomicBool {
        &self.stopped
    }
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.notifier.notify();
    }
    /// Wakes sleepers without stopping them (they re-check their conditions).
    pub fn notify_only(&self) {
        self.notifier.notify();
    }
    /// Sleeps for `d` unless stopped first; returns false when stopped.
    pub fn sleep(&self, d: Duration) -> bool {
        self.sleep_until(d, || false) != Woke::Stopped
    }

    /// Sleeps for `d`, or until stopped, or until `cond` holds when checked (at the start
    /// and after each `notify_only`).
    pub fn sleep_until(&self, d: Duration, cond: impl Fn() -> bool) -> Woke {
        let deadline = Instant::now() + d;
        loop {
            let seen = self.notifier.seq();
            if self.is_stopped() {
                return Woke::Stopped;
            }
            if cond() {
                return Woke::Condition;
            }
            let now = Instant::now();
            if now >= deadline {
                return Woke::Timeout;
            }
            self.notifier.wait(seen, deadline - now);
        }
    }
}

/// Why `StopSignal::sleep_until` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    Timeout,
    Stopped,
    Condition,
}

/// Moves the checkpoint's `physicMsgTimestamp` up to the newest store timestamp whose records
/// are all on disk. After an OS crash recovery trusts every CommitLog file before the one
/// this timestamp points to, so it must never name a record that is not flushed. RocketMQ
/// copies the newest appended record's timestamp after a flush, also after one that flushed
/// little or nothing, and its slaves set it when they dispatch a record.
fn record_physic_timestamp(cl: &CommitLog, cp: &StoreCheckpoint) {
    let flushed = cl.flushed_offset();
    let ts = cl.flushed_timestamp(flushed);
    cp.update(|d| {
        if let Some(ts) = ts {
            d.physic_msg_timestamp = ts;
        }
        d.master_flushed_offset = flushed as i64;
    });
}

/// ASYNC_FLUSH: every `interval`, flush when `least_pages` pages are dirty, and everything
/// every `thorough`. Woken by appends (not `timed`), it also flushes in between, but then only
/// up to a folio boundary behind the writer: flushing the writer's own folio on every wake-up
/// would make its next store fault (see `MappedFile::flush_aligned`). So what a crash of the
/// machine can lose stays bounded by `interval`, as RocketMQ's, without that cost per flush.
/// The append that wakes it is the one that passes the next such boundary (its trigger, see
/// `CommitLog::flush_signal`), not every append.
pub fn run_async_flush(
    cl: &CommitLog,
    cp: &StoreCheckpoint,
    stop: &StopSignal,
    interval: Duration,
    least_pages: usize,
    thorough: Duration,
    timed: bool,
) {
    let mut last_thorough = Instant::now();
    let mut last_tip = Instant::now();
    loop {
        let running = if timed {
            stop.sleep(interval)
        } else {
            let signal = cl.flush_signal();
            let seen = signal.seq();
            let trigger = cl.next_flush_offset(least_pages);
            cl.set_flush_trigger(trigger);
            if stop.is_stopped() {
                false
            } else {
                // An append that passed the trigger before it was set has not signalled: the
                // log's end says so. (A race the other way costs at most one `interval`.)
                if cl.max_offset() < trigger {
                    let tip_due = interval.saturating_sub(last_tip.elapsed());
                    signal.wait(seen, tip_due.max(Duration::from_millis(1)));
                }
                !stop.is_stopped()
            }
        };
        if !running {
            break;
        }
        let least = if last_thorough.elapsed() >= thorough {
            last_thorough = Instant::now();
            0
        } else {
            least_pages
        };
        // One file per call, as RocketMQ; a roll leaves the rest for the next round.
        let flushed = if timed || least == 0 || last_tip.elapsed() >= interval {
            last_tip = Instant::now();
            cl.flush(least)
        } else {
            cl.flush_behind_writer(least)
        };
        if flushed.is_err() {
            return; // poisoned; the error is logged and puts fail from now on
        }
        record_physic_timestamp(cl, cp);
    }
    for _ in 0..10 {
        match cl.flush_all() {
            Ok(f) if f >= cl.max_offset() => break,
            Ok(_) => continue,
            Err(_) => return,
        }
    }
    record_physic_timestamp(cl, cp);
}

/// SYNC_FLUSH group commit: flush whatever has been appended, then complete every put the
/// flush covers. Puts appended during one fsync all ride on the next one.
///
/// Each round is one sync of what was appended when it began (of one file at a roll), and
/// its puts complete as soon as it returns. Syncing again while appends keep arriving (as
/// `flush_all` does) before completing anything made a round take two or three syncs at 64
/// threads, and every put in it wait for all of them.
pub fn run_group_commit(cl: &CommitLog, cp: &StoreCheckpoint, waiters: &OffsetWaiters, stop: &StopSignal) {
    let signal = cl.appended();
    loop {
        let seen = signal.seq();
        let stopping = stop.is_stopped();
        if cl.flushed_offset() < cl.max_offset() {
            // Read before the flush: a truncation after it returns makes its value stale.
            let epoch = waiters.epoch();
            match cl.flush(0) {
                Ok(flushed) => {
                    waiters.advance_from(epoch, flushed as i64);
                    record_physic_timestamp(cl, cp);
                }
                Err(_) => {
                    // Poisoned: nothing waiting will ever be flushed.
                    waiters.fail_all(PutStatus::FlushDiskTimeout);
                    return;
                }
            }
        } else if stopping {
            return;
        } else {
            signal.wait(seen, Duration::from_millis(10));
        }
    }
}

/// Flushes ConsumeQueues every `interval` (when `least_pages` are dirty), and thoroughly, with
/// the index and the checkpoint, every `thorough`.
#[allow(clippy::too_many_arguments)]
pub fn run_cq_flush(
    cqs: &ConsumeQueueStore,
    index: Option<&IndexService>,
    dispatcher: &Dispatcher,
    cl: &CommitLog,
    cp: &StoreCheckpoint,
    stop: &StopSignal,
    interval: Duration,
    least_pages: usize,
    thorough: Duration,
) {
    let mut last_thorough = Instant::now();
    while stop.sleep(interval) {
        let full = last_thorough.elapsed() >= thorough;
        if full {
            last_thorough = Instant::now();
        }
        flush_logics(cqs, index, dispatcher, cl, cp, if full { 0 } else { least_pages }, full);
    }
}

/// From how many queues with unflushed units (on a thorough flush) or new queue directories
/// a flush round syncs their file system once (`syncfs`) rather than each file and
/// directory: below it, a sync each is cheap and writes back nothing else.
pub const BATCH_SYNC_MIN_QUEUES: usize = 64;

/// Flushes the ConsumeQueues (and with `with_checkpoint`, the index and the checkpoint).
pub fn flush_logics(
    cqs: &ConsumeQueueStore,
    index: Option<&IndexService>,
    dispatcher: &Dispatcher,
    cl: &CommitLog,
    cp: &StoreCheckpoint,
    least_pages: usize,
    with_checkpoint: bool,
) {
    // The timestamp (and the offset below which every record is dispatched) is taken before
    // flushing, so it never claims more than is on disk.
    let rewinds = dispatcher.rewinds();
    let logics_offset = dispatcher.reput_from();
    let logics_ts = dispatcher.last_dispatched_timestamp();
    // On a failing disk every queue fails every round: one line per round, not per queue.
    let (mut failed, mut first) = (0usize, None);
    if cqs.take_injected_flush_failure() {
        failed += 1;
        first = Some("(injected): Input/output error".to_string());
    }
    // Names of queue files and directories made since the last round, before the units in
    // them count as flushed (the dispatcher leaves these syncs to this thread).
    let queues = cqs.all();
    let mut dirs = std::collections::BTreeSet::new();
    for q in &queues {
        q.files().take_unsynced_dirs(&mut dirs);
    }
    // Many new directories, or a thorough flush of many queues (a clean stop, the round every
    // flushConsumeQueueThoroughInterval): one sync of their file system covers them all.
    let pending: Vec<_> = if least_pages == 0 {
        queues.iter().filter_map(|q| q.files().begin_flush()).collect()
    } else {
        Vec::new()
    };
    let mut synced_whole = false;
    if pending.len() >= BATCH_SYNC_MIN_QUEUES || dirs.len() >= BATCH_SYNC_MIN_QUEUES {
        match cqs.sync_file_system() {
            Ok(true) => {
                dirs.clear();
                synced_whole = least_pages == 0;
            }
            Ok(false) => {}
            // Counted; each directory's and queue's own sync below then says what is safe.
            Err(e) => {
                failed += 1;
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
    // Either way the queues' flush locks go now: the syncs below take them again.
    if synced_whole {
        pending.into_iter().for_each(|p| p.synced());
    } else {
        drop(pending);
    }
    for dir in &dirs {
        if let Err(e) = super::mapped_file::sync_dir(dir) {
            failed += 1;
            first.get_or_insert_with(|| format!("{}: {e}", dir.display()));
            for q in queues.iter().filter(|q| q.files().dir() == dir.as_path()) {
                q.files().restore_unsynced();
            }
        }
    }
    for q in queues.iter().filter(|_| !synced_whole) {
        // A thorough flush, after which the checkpoint claims every unit dispatched so far,
        // covers all of a queue's files: one file per call (RocketMQ's) left the units of a
        // queue that had moved into its next file in the page cache.
        let flushed = if least_pages == 0 { q.flush_all() } else { q.flush(least_pages) };
        if let Err(e) = flushed {
            failed += 1;
            first.get_or_insert_with(|| format!("{}/{}: {e}", q.topic(), q.queue_id()));
        }
    }
    if let Some(first) = first {
        if !cqs.flush_failed() {
            tracing::error!(
                "the checkpoint's ConsumeQueue and index fields stay where they are until a restart: \
                 a failed writeback leaves pages marked clean, so no later flush proves them on disk"
            );
        }
        cqs.set_flush_failed();
        tracing::error!("flushing {failed} consume queue(s) failed, the first {first}");
    }
    if with_checkpoint {
        if let Some(i) = index {
            if let Err(e) = i.flush() {
                cqs.set_flush_failed();
                tracing::error!("flushing the index failed: {e}");
            }
            if i.flush_failed() {
                // Logged by the flush itself; the store's flag keeps the checkpoint's fields and
                // the abort file, as after any failed ConsumeQueue or index flush.
                cqs.set_flush_failed();
            }
        }
        // A cut while the queues were flushed (a slave's `truncate`) took dispatch back below
        // `logics_offset`: the units written again above the cut are not in this flush.
        if logics_ts > 0 && !cqs.flush_failed() && dispatcher.rewinds() == rewinds {
            cp.update(|d| {
                d.logics_msg_timestamp = logics_ts;
                d.logics_offset = logics_offset as i64;
            });
        }
        let flushed = cl.flushed_offset() as i64;
        cp.update(|d| d.confirm_phy_offset = flushed);
        if let Err(e) = cp.flush() {
            tracing::error!("writing the checkpoint failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_ends_when_its_condition_holds_after_a_notify() {
        let stop = StopSignal::new();
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let (stop, flag) = (stop.clone(), flag.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                flag.store(true, Ordering::SeqCst);
                stop.notify_only();
            })
        };
        let woke = stop.sleep_until(Duration::from_secs(30), || flag.load(Ordering::SeqCst));
        assert_eq!(woke, Woke::Condition);
        setter.join().unwrap();
        assert_eq!(stop.sleep_until(Duration::from_millis(1), || false), Woke::Timeout);
        stop.stop();
        assert_eq!(stop.sleep_until(Duration::from_secs(30), || true), Woke::Stopped);
    }
}
