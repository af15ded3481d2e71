//! Waiting for an offset to be reached: the flush (SYNC_FLUSH group commit) and the slave
//! acks (SYNC_MASTER) both complete puts when a watermark passes their end offset.
//!
//! A put that must wait gets a [`PutTicket`] with one pending part per wait (flush, replica).
//! Each part is registered in an [`OffsetWaiters`] keyed by end offset. When the watermark
//! advances, every waiter it covers completes in one pass, in the thread that advanced it: no
//! polling, no per-request wake-ups. A deadline thread completes the parts that time out.
//! Tickets complete either a blocked caller (`wait`) or a callback (`on_complete`), so a Node
//! promise can be settled from rmqha's own threads without holding a libuv worker.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::put_metrics::{PutMetrics, WaitTally};
use super::status::{PutResult, PutStatus};

type Callback = Box<dyn FnOnce(PutResult) + Send>;

/// Which durability wait a part stands for. A replica failure outranks a flush failure in
/// the final status, as in RocketMQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPart {
    Flush,
    Replica,
}

struct TicketState {
    result: PutResult,
    pending: u8,
    flush: PutStatus,
    replica: PutStatus,
    callback: Option<Callback>,
}

struct TicketInner {
    state: Mutex<TicketState>,
    cv: Condvar,
    /// `PENDING`, `SLEEPING` (pending, and its caller sleeps on this word) or `DONE` (the
    /// final status is known). Set to `DONE` under the state lock; read without it.
    word: AtomicU32,
    /// Where a blocked caller's wake-up comes from: this word, woken through the store's relay
    /// (see `WakeRelay`), or the ticket's own condvar where there is none.
    relay: Option<Arc<WakeRelay>>,
    /// When the wait began (tickets with parts): the thread that completes the last part
    /// counts the final status and the time waited in its `PutMetrics`.
    began: Option<Instant>,
}

const PENDING: u32 = 0;
const DONE: u32 = 1;
const SLEEPING: u32 = 2;

/// Hands the wake-ups of a completed batch from the thread that completed it to the threads
/// it wakes. A flush (or an ack) completes dozens of blocked puts at once, and waking a
/// sleeping thread costs the waker several microseconds on a VM (an inter-processor
/// interrupt, a VM exit); done serially by the group-commit thread (or the HA reader), that
/// delayed the next flush by ~150 us per batch of ~35. Here the completer wakes `FAN_OUT`
/// sleepers itself and queues the rest; every woken caller wakes up to `FAN_OUT` more before
/// it returns, so the batch wakes as a tree, in parallel on every CPU, and only the sleepers
/// whose puts completed are woken.
#[derive(Default)]
pub struct WakeRelay {
    queue: parking_lot::Mutex<Vec<Arc<TicketInner>>>,
    /// Length of `queue`, so callers with nothing to help skip its lock.
    queued: AtomicUsize,
}

impl WakeRelay {
    const FAN_OUT: usize = 2;
    /// The longest a sleeper sleeps without rechecking its word (see `wait_until`).
    const RECHECK: Duration = Duration::from_millis(10);

    /// A relay where the platform has futexes (Linux); elsewhere `None`, and tickets keep
    /// their own condvars.
    pub fn new() -> Option<Arc<Self>> {
        cfg!(target_os = "linux").then(|| Arc::new(WakeRelay::default()))
    }

    /// Wakes the first sleepers of a completed batch and queues the rest for them to wake.
    fn hand_off(&self, mut sleepers: Vec<Arc<TicketInner>>) {
        let now: Vec<_> = sleepers.drain(..Self::FAN_OUT.min(sleepers.len())).collect();
        if !sleepers.is_empty() {
            let mut q = self.queue.lock();
            q.append(&mut sleepers);
            self.queued.store(q.len(), Ordering::Release);
        }
        for t in now {
            futex::wake(&t.word);
        }
    }

    /// Wakes up to `FAN_OUT` queued sleepers (called by every caller whose wait ends).
    fn help(&self) {
        if self.queued.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut picked: [Option<Arc<TicketInner>>; Self::FAN_OUT] = Default::default();
        {
            let mut q = self.queue.lock();
            for slot in &mut picked {
                *slot = q.pop();
            }
            self.queued.store(q.len(), Ordering::Release);
        }
        for t in picked.into_iter().flatten() {
            futex::wake(&t.word);
        }
    }

    /// Sleeps on `word` until it is `DONE` or `deadline` passes; returns whether it is done.
    /// Either way, helps wake the queued sleepers before returning.
    fn wait_until(&self, word: &AtomicU32, deadline: Option<Instant>) -> bool {
        let done = loop {
            match word.load(Ordering::Acquire) {
                DONE => break true,
                // Announce the sleep: a completion after this sees SLEEPING and wakes us; one
                // before it makes the exchange fail and we read DONE.
                PENDING
                    if word
                        .compare_exchange(PENDING, SLEEPING, Ordering::AcqRel, Ordering::Acquire)
                        .is_err() =>
                {
                    continue;
                }
                _ => {}
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    // Giving up: no longer a sleeper, so no completion counts on this thread
                    // to pass wake-ups on (unless it completed meanwhile).
                    _ => {
                        break word
                            .compare_exchange(SLEEPING, PENDING, Ordering::AcqRel, Ordering::Acquire)
                            .is_err_and(|now| now == DONE);
                    }
                },
                None => Self::RECHECK,
            };
            // In slices: a thread counted as a sleeper but not asleep any more (its wait ended
            // just as it completed) passes no wake-ups on, and the sleepers queued behind it
            // would wait for other callers to pass by. Each sleeper rechecks its word at least
            // this often, so that costs at most one slice.
            futex::wait(word, SLEEPING, Some(left.min(Self::RECHECK)));
        };
        self.help();
        done
    }
}

#[cfg(target_os = "linux")]
mod futex {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// Sleeps while `word` holds `seen`, at most `timeout` (spurious returns are fine).
    pub fn wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `word` is a live, aligned u32 for the duration of the call; a private futex
        // on it is only ever used by this process.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                ts_ptr,
            );
        }
    }

    pub fn wake(word: &AtomicU32) {
        // SAFETY: as in `wait`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod futex {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    // Never called: `WakeRelay::new` gives no relay without futexes.
    pub fn wait(_word: &AtomicU32, _seen: u32, _timeout: Option<Duration>) {}

    pub fn wake(_word: &AtomicU32) {}
}

thread_local! {
    /// How many put callbacks this thread is running (one may put, and complete another).
    static IN_PUT_CALLBACK: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs a put's callback, marked as such for [`stop_lock`]. A callback that panics costs
/// its own put only: callbacks run on the threads that complete puts (the deadline thread, a
/// slave's ack reader, the group commit), and a panic that unwound one of those stopped every
/// later put's timeout, or left a slave's connection streaming with nobody counting its acks.
fn run_callback(cb: Callback, result: PutResult) {
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            IN_PUT_CALLBACK.with(|c| c.set(c.get() - 1));
        }
    }
    IN_PUT_CALLBACK.with(|c| c.set(c.get() + 1));
    let _running = Running;
    let (status, offset) = (result.status, result.phy_offset);
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(result))) {
        let why = crate::panic_message(payload.as_ref());
        tracing::error!(%status, offset, "a put's completion callback panicked: {why}");
    }
}

/// Takes the lock a stop holds while it runs (a broker's or a store's), or `None` when a
/// put's callback asks for a stop while another one runs: the running stop joins the thread
/// the callback runs on, or runs the callback itself (failing the puts it leaves pending),
/// so waiting for it would never end. That stop finishes the job.
pub(crate) fn stop_lock(m: &Mutex<()>) -> Option<MutexGuard<'_, ()>> {
    if IN_PUT_CALLBACK.with(|c| c.get()) == 0 {
        return Some(lock(m));
    }
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not wedge every later put: the protected data stays consistent
    // because every critical section here is a handful of assignments.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A put whose final status may still be pending.
#[derive(Clone)]
pub struct PutTicket {
    inner: Arc<TicketInner>,
}

impl std::fmt::Debug for PutTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.inner.state);
        f.debug_struct("PutTicket").field("result", &s.result).field("done", &(s.pending == 0)).finish()
    }
}

impl PutTicket {
    /// A ticket that is already final.
    pub fn ready(result: PutResult) -> Self {
        Self::with_parts(result, 0)
    }

    /// A ticket that completes after `parts` parts complete.
    pub(crate) fn with_parts(result: PutResult, parts: u8) -> Self {
        Self::with_relay(result, parts, None)
    }

    /// A ticket whose blocked caller is woken through `relay` (see `WakeRelay`).
    pub(crate) fn with_relay(result: PutResult, parts: u8, relay: Option<Arc<WakeRelay>>) -> Self {
        PutTicket {
            inner: Arc::new(TicketInner {
                state: Mutex::new(TicketState {
                    result,
                    pending: parts,
                    flush: PutStatus::PutOk,
                    replica: PutStatus::PutOk,
                    callback: None,
                }),
                cv: Condvar::new(),
                word: AtomicU32::new(if parts == 0 { DONE } else { PENDING }),
                relay,
                began: (parts > 0).then(Instant::now),
            }),
        }
    }

    /// Completes one part; the last part computes the final status and runs the callback,
    /// and the final status and the time waited are counted in `metrics`.
    pub fn complete_part(&self, part: WaitPart, status: PutStatus, metrics: Option<&PutMetrics>) {
        let mut tally = WaitTally::default();
        let relay = self.complete_part_quietly(part, status, &mut tally);
        if let Some(m) = metrics {
            m.add(&tally);
        }
        if let Some(relay) = relay {
            relay.hand_off(vec![self.inner.clone()]);
        }
    }

    /// `complete_part`, except that a caller sleeping on the ticket's word is not woken:
    /// the returned relay must be handed this ticket (with the rest of the batch); and the
    /// final status, if this part made it final, goes into `tally`.
    fn complete_part_quietly(
        &self,
        part: WaitPart,
        status: PutStatus,
        tally: &mut WaitTally,
    ) -> Option<&Arc<WakeRelay>> {
        let (cb, result, slept) = {
            let mut s = lock(&self.inner.state);
            if s.pending == 0 {
                return None;
            }
            match part {
                WaitPart::Flush => s.flush = status,
                WaitPart::Replica => s.replica = status,
            }
            s.pending -= 1;
            if s.pending > 0 {
                return None;
            }
            s.result.status = if s.replica != PutStatus::PutOk {
                s.replica
            } else if s.flush != PutStatus::PutOk {
                s.flush
            } else {
                s.result.status
            };
            if let Some(began) = self.inner.began {
                tally.waited(s.result.status, began.elapsed());
            }
            let slept = self.inner.word.swap(DONE, Ordering::AcqRel) == SLEEPING;
            if self.inner.relay.is_none() {
                self.inner.cv.notify_all();
            }
            (s.callback.take(), s.result.clone(), slept)
        };
        if let Some(cb) = cb {
            run_callback(cb, result);
        }
        self.inner.relay.as_ref().filter(|_| slept)
    }

    /// Whether the final status is known.
    pub fn is_done(&self) -> bool {
        self.inner.word.load(Ordering::Acquire) == DONE
    }

    /// Blocks until the final status is known.
    pub fn wait(&self) -> PutResult {
        if let Some(relay) = &self.inner.relay {
            relay.wait_until(&self.inner.word, None);
        }
        let mut s = lock(&self.inner.state);
        while s.pending > 0 {
            s = self.inner.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.result.clone()
    }

    /// Blocks up to `timeout`; `None` if still pending (callers that must answer signals,
    /// like Python's Ctrl-C, wait in slices).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<PutResult> {
        let deadline = crate::deadline_after(timeout);
        if let Some(relay) = &self.inner.relay {
            if !relay.wait_until(&self.inner.word, Some(deadline)) {
                return None;
            }
        }
        let mut s = lock(&self.inner.state);
        while s.pending > 0 {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            s = self.inner.cv.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        Some(s.result.clone())
    }

    /// Runs `f` with the final result: at once if it is known, otherwise on the thread that
    /// completes the ticket (keep `f` short; it must not block).
    pub fn on_complete(&self, f: impl FnOnce(PutResult) + Send + 'static) {
        let result = {
            let mut s = lock(&self.inner.state);
            if s.pending > 0 {
                s.callback = Some(Box::new(f));
                return;
            }
            s.result.clone()
        };
        run_callback(Box::new(f), result);
    }

    /// The result as known now (status may still change while pending).
    pub fn current(&self) -> PutResult {
        lock(&self.inner.state).result.clone()
    }
}

struct Waiter {
    ticket: PutTicket,
    deadline: Instant,
}

struct WaitersState {
    value: i64,
    /// Bumped by every `reset`: a watermark measured before one is stale (`advance_from`).
    epoch: u64,
    seq: u64,
    by_target: BTreeMap<(i64, u64), Waiter>,
    by_deadline: BTreeMap<(Instant, u64), i64>,
    closed: bool,
}

/// Puts waiting for a watermark (flushed offset, or slave ack offset) to reach their end.
pub struct OffsetWaiters {
    part: WaitPart,
    timeout_status: PutStatus,
    state: Mutex<WaitersState>,
    /// Wakes the deadline thread when an earlier deadline arrives or on close.
    cv: Condvar,
    /// Told how many puts each pass of the deadline thread timed out (for the log).
    on_expired: std::sync::OnceLock<Box<dyn Fn(usize) + Send + Sync>>,
    /// Where the puts this completes are counted (their final status, how long they waited).
    metrics: Option<Arc<PutMetrics>>,
}

impl OffsetWaiters {
    /// Waiters for one part; a part that times out completes with `timeout_status`. The
    /// puts whose last part they complete are counted in `metrics`.
    pub fn new(
        part: WaitPart,
        timeout_status: PutStatus,
        initial: i64,
        metrics: Option<Arc<PutMetrics>>,
    ) -> Arc<Self> {
        Arc::new(OffsetWaiters {
            part,
            timeout_status,
            state: Mutex::new(WaitersState {
                value: initial,
                epoch: 0,
                seq: 0,
                by_target: BTreeMap::new(),
                by_deadline: BTreeMap::new(),
                closed: false,
            }),
            cv: Condvar::new(),
            on_expired: std::sync::OnceLock::new(),
            metrics,
        })
    }

    /// Calls `f` with the number of puts each pass of the deadline thread timed out (off every
    /// lock). Set once; later calls are ignored.
    pub fn set_on_expired(&self, f: impl Fn(usize) + Send + Sync + 'static) {
        let _ = self.on_expired.set(Box::new(f));
    }

    /// The watermark.
    pub fn value(&self) -> i64 {
        lock(&self.state).value
    }

    /// Number of puts waiting.
    pub fn pending(&self) -> usize {
        lock(&self.state).by_target.len()
    }

    /// Waits for the watermark to reach `target`, at the latest until `deadline`. The ticket
    /// must have had a part added for this wait.
    /// Returns whether the watermark covered `target` already (the part completed PUT_OK).
    pub fn register(&self, target: i64, deadline: Instant, ticket: &PutTicket) -> bool {
        let mut s = lock(&self.state);
        if s.closed {
            // The record is in the log already (only appended puts register), so the answer
            // must say stored: the part's timeout status, never a not-stored one.
            drop(s);
            ticket.complete_part(self.part, self.timeout_status, self.metrics.as_deref());
            return false;
        }
        if s.value >= target {
            drop(s);
            ticket.complete_part(self.part, PutStatus::PutOk, self.metrics.as_deref());
            return true;
        }
        s.seq += 1;
        let seq = s.seq;
        let earliest = s.by_deadline.keys().next().map(|k| k.0);
        s.by_target.insert((target, seq), Waiter { ticket: ticket.clone(), deadline });
        s.by_deadline.insert((deadline, seq), target);
        if earliest.is_none_or(|e| deadline < e) {
            self.cv.notify_all();
        }
        false
    }

    /// Raises the watermark (never lowers it) and completes every put it now covers; returns
    /// how many that was.
    pub fn advance(&self, value: i64) -> usize {
        self.advance_checked(None, value)
    }

    fn advance_checked(&self, epoch: Option<u64>, value: i64) -> usize {
        let done = {
            let mut s = lock(&self.state);
            if value <= s.value || epoch.is_some_and(|e| e != s.epoch) {
                return 0;
            }
            s.value = value;
            if s.by_target.is_empty() {
                return 0;
            }
            let rest = s.by_target.split_off(&(value + 1, 0));
            let done = std::mem::replace(&mut s.by_target, rest);
            for ((_, seq), w) in &done {
                s.by_deadline.remove(&(w.deadline, *seq));
            }
            done
        };
        let n = done.len();
        complete_batch(
            done.into_values().map(|w| w.ticket),
            self.part,
            PutStatus::PutOk,
            self.metrics.as_deref(),
        );
        n
    }

    /// Lowers the watermark (a truncated log, a slave that went away) without completing
    /// anything.
    pub fn reset(&self, value: i64) {
        let mut s = lock(&self.state);
        s.value = value;
        s.epoch += 1;
    }

    /// The current epoch, for `advance_from`: read it before measuring a new watermark.
    pub fn epoch(&self) -> u64 {
        lock(&self.state).epoch
    }

    /// `advance`, unless a `reset` came since `epoch` was read: the value was measured before
    /// the log was cut (a flush that returned just before a truncation), and would raise the
    /// watermark over bytes the cut took away, so that a later put ending there heard PUT_OK
    /// unflushed (found by an audit).
    pub fn advance_from(&self, epoch: u64, value: i64) -> usize {
        self.advance_checked(Some(epoch), value)
    }

    /// Completes every waiting put with `status` (shutdown, poisoned store).
    pub fn fail_all(&self, status: PutStatus) {
        let done = {
            let mut s = lock(&self.state);
            s.by_deadline.clear();
            std::mem::take(&mut s.by_target)
        };
        complete_batch(done.into_values().map(|w| w.ticket), self.part, status, self.metrics.as_deref());
    }

    /// Stops the deadline thread and answers what is still waiting, and anything registered
    /// later, with the part's timeout status: those puts are in the log, unconfirmed.
    pub fn close(&self) {
        lock(&self.state).closed = true;
        self.cv.notify_all();
        self.fail_all(self.timeout_status);
    }

    /// The deadline loop: completes timed-out puts until `close`. Run it on its own thread.
    pub fn run_deadlines(&self) {
        let mut s = lock(&self.state);
        loop {
            if s.closed {
                return;
            }
            let now = Instant::now();
            let mut expired = Vec::new();
            while let Some((&(deadline, seq), &target)) = s.by_deadline.iter().next() {
                if deadline > now {
                    break;
                }
                s.by_deadline.remove(&(deadline, seq));
                if let Some(w) = s.by_target.remove(&(target, seq)) {
                    expired.push(w.ticket);
                }
            }
            if !expired.is_empty() {
                drop(s);
                let n = expired.len();
                complete_batch(expired, self.part, self.timeout_status, self.metrics.as_deref());
                if let Some(f) = self.on_expired.get() {
                    f(n);
                }
                s = lock(&self.state);
                continue;
            }
            s = match s.by_deadline.keys().next().map(|k| k.0) {
                Some(d) => {
                    self.cv
                        .wait_timeout(s, d.saturating_duration_since(now))
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.cv.wait(s).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

/// Completes a part of each ticket, then hands the sleepers among them to their relays. The
/// puts made final are counted in `metrics` once for the batch: the counters' cache lines
/// are touched a few times per flush or ack, not several times per put (per put, they cost
/// SYNC_FLUSH puts at 64 threads about a tenth of their rate).
fn complete_batch(
    tickets: impl IntoIterator<Item = PutTicket>,
    part: WaitPart,
    status: PutStatus,
    metrics: Option<&PutMetrics>,
) {
    let mut batches: Vec<(Arc<WakeRelay>, Vec<Arc<TicketInner>>)> = Vec::new();
    let mut tally = WaitTally::default();
    for t in tickets {
        let relay = t.complete_part_quietly(part, status, &mut tally);
        let Some(relay) = relay else { continue };
        match batches.iter_mut().find(|(r, _)| Arc::ptr_eq(r, relay)) {
            Some((_, sleepers)) => sleepers.push(t.inner.clone()),
            None => batches.push((relay.clone(), vec![t.inner.clone()])),
        }
    }
    if let Some(m) = metrics {
        m.add(&tally);
    }
    for (relay, sleepers) in batches {
        relay.hand_off(sleepers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn result(end: i64) -> PutResult {
        PutResult {
            status: PutStatus::PutOk,
            phy_offset: end - 10,
            size: 10,
            queue_id: 0,
            queue_offset: 0,
            msg_num: 1,
            store_timestamp: 0,
            store_host: SocketAddr::from(([127, 0, 0, 1], 1)),
        }
    }

    #[test]
    fn one_advance_completes_every_covered_waiter() {
        let w = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        let far = Instant::now() + Duration::from_secs(60);
        let tickets: Vec<_> = (1..=5)
            .map(|i| {
                let t = PutTicket::with_parts(result(i * 10), 1);
                w.register(i * 10, far, &t);
                t
            })
            .collect();
        w.advance(30);
        assert!(tickets[..3].iter().all(|t| t.is_done()));
        assert!(tickets[3..].iter().all(|t| !t.is_done()));
        assert_eq!(w.pending(), 2);
        w.advance(50);
        assert!(tickets.iter().all(|t| t.wait().status == PutStatus::PutOk));
    }

    /// A watermark measured before a reset (a flush that returned just before the log was
    /// cut) does not raise it: a put registered after the cut, ending below that stale value,
    /// waits for a real flush.
    #[test]
    fn a_watermark_measured_before_a_reset_is_ignored() {
        let w = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        let epoch = w.epoch();
        w.reset(0);
        assert_eq!(w.advance_from(epoch, 500), 0);
        let t = PutTicket::with_parts(result(100), 1);
        w.register(100, Instant::now() + Duration::from_secs(60), &t);
        assert!(!t.is_done(), "completed by a stale watermark");
        assert_eq!(w.advance_from(w.epoch(), 100), 1);
        assert_eq!(t.wait().status, PutStatus::PutOk);
    }

    #[test]
    fn deadline_thread_times_out_and_replica_status_wins() {
        let flush = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        let repl = OffsetWaiters::new(WaitPart::Replica, PutStatus::FlushSlaveTimeout, 0, None);
        let (f2, r2) = (flush.clone(), repl.clone());
        let h1 = std::thread::spawn(move || f2.run_deadlines());
        let h2 = std::thread::spawn(move || r2.run_deadlines());
        let t = PutTicket::with_parts(result(100), 2);
        let soon = Instant::now() + Duration::from_millis(20);
        flush.register(100, soon, &t);
        repl.register(100, soon, &t);
        let got = t.wait_timeout(Duration::from_secs(10)).expect("timed out by deadline thread");
        assert_eq!(got.status, PutStatus::FlushSlaveTimeout);
        // A later advance does not touch a completed ticket.
        flush.advance(1000);
        assert_eq!(t.wait().status, PutStatus::FlushSlaveTimeout);
        flush.close();
        repl.close();
        h1.join().unwrap();
        h2.join().unwrap();
    }

    /// A callback that panics on the deadline thread costs its put only: later puts still
    /// time out. (The thread unwound, and every later put without a slave waited forever.)
    #[test]
    fn a_panicking_callback_does_not_stop_the_deadline_thread() {
        let w = OffsetWaiters::new(WaitPart::Replica, PutStatus::FlushSlaveTimeout, 0, None);
        let w2 = w.clone();
        let h = std::thread::spawn(move || w2.run_deadlines());
        let first = PutTicket::with_parts(result(10), 1);
        first.on_complete(|_| panic!("a user's callback"));
        w.register(10, Instant::now() + Duration::from_millis(20), &first);
        assert_eq!(
            first.wait_timeout(Duration::from_secs(10)).map(|r| r.status),
            Some(PutStatus::FlushSlaveTimeout)
        );
        let second = PutTicket::with_parts(result(20), 1);
        w.register(20, Instant::now() + Duration::from_millis(50), &second);
        let got = second.wait_timeout(Duration::from_secs(10)).map(|r| r.status);
        assert_eq!(got, Some(PutStatus::FlushSlaveTimeout), "the deadline thread stopped");
        w.close();
        h.join().unwrap();
    }

    #[test]
    fn callback_runs_once_with_final_status() {
        let w = OffsetWaiters::new(WaitPart::Replica, PutStatus::FlushSlaveTimeout, 0, None);
        let t = PutTicket::with_parts(result(10), 1);
        let (tx, rx) = std::sync::mpsc::channel();
        t.on_complete(move |r| tx.send(r.status).unwrap());
        w.register(10, Instant::now() + Duration::from_secs(60), &t);
        w.advance(9);
        assert!(rx.try_recv().is_err());
        w.advance(10);
        assert_eq!(rx.recv().unwrap(), PutStatus::PutOk);
        // Already done: the callback runs at once.
        let (tx, rx) = std::sync::mpsc::channel();
        t.on_complete(move |r| tx.send(r.status).unwrap());
        assert_eq!(rx.recv().unwrap(), PutStatus::PutOk);
        w.close();
        // A put appended as the service closes is stored: its answer says so.
        let t2 = PutTicket::with_parts(result(20), 1);
        w.register(20, Instant::now() + Duration::from_secs(60), &t2);
        let late = t2.wait();
        assert_eq!(late.status, PutStatus::FlushSlaveTimeout);
        assert!(late.status.is_stored());
        let flush = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        flush.close();
        let t3 = PutTicket::with_parts(result(30), 1);
        flush.register(30, Instant::now() + Duration::from_secs(60), &t3);
        assert_eq!(t3.wait().status, PutStatus::FlushDiskTimeout);
    }

    /// Waiters, a relay, and `n` tickets on the relay registered for ends 10, 20, ... 10n.
    #[cfg(target_os = "linux")]
    fn relayed_tickets(n: i64) -> (Arc<OffsetWaiters>, Arc<WakeRelay>, Vec<PutTicket>) {
        let w = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        let relay = WakeRelay::new().unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let tickets = (1..=n)
            .map(|i| {
                let t = PutTicket::with_relay(result(i * 10), 1, Some(relay.clone()));
                w.register(i * 10, far, &t);
                t
            })
            .collect();
        (w, relay, tickets)
    }

    /// Waits (with a deadline) until every ticket's caller sleeps on its word.
    #[cfg(target_os = "linux")]
    fn until_asleep(tickets: &[PutTicket]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tickets.iter().all(|t| t.inner.word.load(Ordering::Acquire) == SLEEPING) {
            assert!(Instant::now() < deadline, "the callers did not go to sleep within 10 s");
            std::thread::yield_now();
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn one_advance_wakes_exactly_the_sleepers_it_completes_through_the_relay() {
        // More sleepers than the completer wakes itself: the rest must be woken by the ones
        // it wakes, and by the ones those wake.
        let (w, relay, tickets) = relayed_tickets(40);
        let threads: Vec<_> = tickets.iter().cloned().map(|t| std::thread::spawn(move || t.wait())).collect();
        until_asleep(&tickets);
        w.advance(320);
        let mut threads = threads.into_iter();
        for t in threads.by_ref().take(32) {
            assert_eq!(t.join().unwrap().status, PutStatus::PutOk);
        }
        assert_eq!(relay.queued.load(Ordering::Acquire), 0, "every queued sleeper was woken");
        // The other eight were not woken at all: still asleep, still pending.
        assert!(tickets[32..].iter().all(|t| t.inner.word.load(Ordering::Acquire) == SLEEPING));
        assert_eq!(tickets[32].wait_timeout(Duration::from_millis(20)), None);
        w.advance(400);
        for t in threads {
            assert_eq!(t.join().unwrap().status, PutStatus::PutOk);
        }
    }

    /// The first sleepers of a batch may not be asleep any more (their waits ended as they
    /// completed): they pass no wake-ups on, and the sleepers queued behind them must still
    /// wake, by rechecking their words.
    #[cfg(target_os = "linux")]
    #[test]
    fn sleepers_behind_callers_that_pass_nothing_on_still_wake() {
        let (w, _relay, tickets) = relayed_tickets(7);
        // The first two look asleep to the completer, but no thread waits on them.
        for t in &tickets[..2] {
            t.inner.word.store(SLEEPING, Ordering::Release);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        for t in &tickets[2..] {
            let (t, tx) = (t.clone(), tx.clone());
            std::thread::spawn(move || tx.send(t.wait().status).unwrap());
        }
        until_asleep(&tickets[2..]);
        w.advance(70);
        for _ in 2..7 {
            let status = rx.recv_timeout(Duration::from_secs(10)).expect("a sleeper was never woken");
            assert_eq!(status, PutStatus::PutOk);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_single_completion_wakes_its_sleeper() {
        let relay = WakeRelay::new().unwrap();
        let t = PutTicket::with_relay(result(10), 2, Some(relay));
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.wait())
        };
        until_asleep(std::slice::from_ref(&t));
        t.complete_part(WaitPart::Flush, PutStatus::PutOk, None);
        assert!(!t.is_done(), "one part of two is not final");
        t.complete_part(WaitPart::Replica, PutStatus::FlushSlaveTimeout, None);
        assert_eq!(waiter.join().unwrap().status, PutStatus::FlushSlaveTimeout);
    }

    #[test]
    fn a_deadline_completes_a_ticket_on_a_relay() {
        let w = OffsetWaiters::new(WaitPart::Flush, PutStatus::FlushDiskTimeout, 0, None);
        let runner = {
            let w = w.clone();
            std::thread::spawn(move || w.run_deadlines())
        };
        let t = PutTicket::with_relay(result(100), 1, WakeRelay::new());
        w.register(100, Instant::now() + Duration::from_millis(30), &t);
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.wait())
        };
        assert_eq!(waiter.join().unwrap().status, PutStatus::FlushDiskTimeout);
        assert_eq!(t.wait_timeout(Duration::ZERO).unwrap().status, PutStatus::FlushDiskTimeout);
        w.close();
        runner.join().unwrap();
    }
}
