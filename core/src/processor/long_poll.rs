//! Long polling (RocketMQ's `PullRequestHoldService`): a pull with the suspend flag that finds
//! nothing new is parked here instead of answered PULL_NOT_FOUND, and answered by one thread
//! as soon as its queue has a new message its subscription may want, or when its suspend
//! timeout passes, or dropped when its connection closes.
//!
//! The thread sleeps on the dispatcher's [`Notifier`](crate::store::notify::Notifier), which is
//! signalled after every dispatch round (master and slave alike), so a message wakes its
//! waiting pulls as soon as it is in a ConsumeQueue. Parked pulls are grouped by queue, and
//! while any is parked the dispatcher records which queues it put units into: a round looks
//! only at those queues (and at the queues of pulls parked since the last round), every
//! queue once a second, so pulls parked on idle queues cost nothing per dispatch round (they
//! did: one lookup per queue per round, a core at 20,000 parked pulls). Only a queue that grew
//! past what its pulls have seen has its pulls looked at. Timeouts come from a
//! deadline-ordered set, and closed connections are swept about once a second, so neither
//! needs a scan every round.
//!
//! A pull with a tag subscription wakes only when one of its queue's new units has one of
//! its tags codes, as RocketMQ's `notifyMessageArriving` checks `isMatchedByConsumeQueue`
//! before waking a held request; it remembers how far it has checked, so each new unit is
//! read once per parked pull. A pull whose whole scan window (`maxFilterMessageSize / 20`
//! units from its offset) has filled with units it does not want is woken too: its answer
//! (PULL_RETRY_IMMEDIATELY) moves the consumer past them. A SQL92 pull reads each new record
//! and wakes only for one its expression matches, as 4.9 evaluates the dispatched message's
//! properties before waking. A woken request is processed again
//! from scratch with suspension disallowed, exactly as RocketMQ re-runs
//! `processRequest(…, brokerAllowSuspend = false)`, and so is one whose time ran out.
//!
//! Parking a request also signals the notifier, so the thread recomputes its next deadline and
//! re-checks the new request's queue: a message dispatched between the pull's read and the
//! parking is not missed.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::remoting::{RemotingCommand, Responder};
use crate::store::MessageStore;
use crate::store::consume_queue::{CQ_UNIT_SIZE, ConsumeQueue};

use super::clients::ConsumerFilter;
use super::pull::PullProcessor;
use crate::store::MessageFilter;

/// At most this many pulls are parked at once; more are answered at once (PULL_NOT_FOUND),
/// so a client flooding suspended pulls cannot exhaust memory.
pub(crate) const MAX_HELD: usize = 65_536;
/// And at most this many bytes of parked requests (their header fields: a frame may carry up
/// to `remotingMaxFrameSize` of them, and 65,536 such requests would be a terabyte).
pub(crate) const MAX_HELD_BYTES: usize = 64 << 20;
/// And at most this many pulls, or bytes of them, from one connection: a Java consumer parks
/// one pull per queue it consumes, and one connection filling the whole service would have
/// every other consumer answered at once, re-pulling in a busy loop.
pub(crate) const MAX_HELD_PER_CONNECTION: usize = 4096;
pub(crate) const MAX_HELD_BYTES_PER_CONNECTION: usize = 8 << 20;
/// The longest suspension honoured. Java clients ask for 15 s (push) or 20 s (lite pull); a
/// longer one is cut here, well inside the server's 120 s idle timeout.
pub(crate) const MAX_SUSPEND: Duration = Duration::from_secs(60);
/// The thread re-checks at least this often, whatever happens; closed connections' pulls
/// are swept this often too.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// One parked pull.
pub(crate) struct Held {
    pub request: RemotingCommand,
    pub responder: Responder,
    pub topic: String,
    pub queue_id: i32,
    pub offset: i64,
    pub deadline: Instant,
    /// The subscription the pull was read with: which new units wake it.
    pub filter: ConsumerFilter,
}

impl Held {
    /// About how much memory the parked request keeps.
    fn bytes(&self) -> usize {
        let r = &self.request;
        256 + r.body.len()
            + r.remark.as_ref().map_or(0, String::len)
            + r.ext_fields.iter().map(|(k, v)| 64 + k.len() + v.len()).sum::<usize>()
            + self.filter.heap_bytes()
    }
}

/// A parked pull and what the thread knows of it.
struct Entry {
    held: Held,
    bytes: usize,
    /// The queue's units below this have been checked: none is for this pull.
    checked: i64,
}

/// The parked pulls of one queue.
struct Waiters {
    ids: BTreeSet<u64>,
    /// At most the least `checked` of them: a queue whose max offset is not past it has
    /// nothing new for any of them.
    low: i64,
    /// The queue's max offset when last looked at.
    seen_max: i64,
}

/// What one parked pull's check comes to.
enum Check {
    Wake,
    Stay,
}

/// The parked pulls, by queue and by deadline, and the bytes they keep, in all and per
/// connection.
#[derive(Default)]
struct Parked {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    queues: HashMap<String, HashMap<i32, Waiters>>,
    deadlines: BTreeSet<(Instant, u64)>,
    bytes: usize,
    per_connection: HashMap<SocketAddr, (usize, usize)>,
    last_sweep: Option<Instant>,
    /// Queues of pulls parked since the last round: checked once whatever arrived.
    fresh: Vec<(String, i32)>,
    /// The last round that checked every queue with parked pulls (once a second, besides the
    /// queues the dispatcher reports).
    last_full: Option<Instant>,
}

impl Parked {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn add(&mut self, held: Held, bytes: usize) {
        let id = self.next_id;
        self.next_id += 1;
        self.bytes += bytes;
        let c = self.per_connection.entry(held.responder.peer()).or_default();
        c.0 += 1;
        c.1 += bytes;
        self.deadlines.insert((held.deadline, id));
        let w = self
            .queues
            .entry(held.topic.clone())
            .or_default()
            .entry(held.queue_id)
            .or_insert_with(|| Waiters { ids: BTreeSet::new(), low: i64::MAX, seen_max: 0 });
        w.ids.insert(id);
        w.low = w.low.min(held.offset);
        self.fresh.push((held.topic.clone(), held.queue_id));
        self.entries.insert(id, Entry { checked: held.offset, held, bytes });
    }

    fn remove(&mut self, id: u64) -> Option<Held> {
        let Entry { held: h, bytes, .. } = self.entries.remove(&id)?;
        self.deadlines.remove(&(h.deadline, id));
        if let Some(by_id) = self.queues.get_mut(&h.topic) {
            if let Some(w) = by_id.get_mut(&h.queue_id) {
                w.ids.remove(&id);
                if w.ids.is_empty() {
                    by_id.remove(&h.queue_id);
                }
            }
            if by_id.is_empty() {
                self.queues.remove(&h.topic);
            }
        }
        self.bytes -= bytes;
        let peer = h.responder.peer();
        if let Some(c) = self.per_connection.get_mut(&peer) {
            c.0 -= 1;
            c.1 -= bytes;
            if c.0 == 0 {
                self.per_connection.remove(&peer);
            }
        }
        Some(h)
    }
}

/// Whether a parked pull has something new in its queue, whose max offset is now `max`
/// (past `e.checked`); `window` is how many units from its offset its read would scan. A
/// SQL92 pull reads each new record it may want from `store`, and wakes only for one whose
/// properties match.
fn check(e: &mut Entry, store: &MessageStore, cq: Option<&ConsumeQueue>, max: i64, window: i64) -> Check {
    let h = &e.held;
    if h.filter.is_all() || !h.responder.is_connected() {
        return Check::Wake;
    }
    // A queue gone, or a unit that cannot be read: the pull's read says what happened.
    let Some(cq) = cq else { return Check::Wake };
    let end = max.min(h.offset.saturating_add(window));
    for i in e.checked.max(h.offset)..end {
        let Some(u) = cq.get(i) else { return Check::Wake };
        let filler = u.size == i32::MAX && u.phy_offset == 0 || u.phy_offset < 0;
        if filler || !h.filter.matches_unit(u.tags_code) {
            continue;
        }
        if !h.filter.needs_record() {
            return Check::Wake;
        }
        match store.record_at(u.phy_offset) {
            Some(r) if !h.filter.matches_record(r.bytes()) => {}
            // A record that cannot be read: the pull's read says what happened.
            _ => return Check::Wake,
        }
    }
    if max > end {
        // Nothing in the whole window the pull's read scans: its answer moves it past them.
        return Check::Wake;
    }
    e.checked = max;
    Check::Stay
}

/// The parked pulls.
pub(crate) struct LongPoll {
    store: Arc<MessageStore>,
    held: Mutex<Parked>,
    stopped: AtomicBool,
    /// Queues looked at so far (each a ConsumeQueue lookup): what a round costs.
    queue_checks: std::sync::atomic::AtomicU64,
}

impl LongPoll {
    pub(crate) fn new(store: Arc<MessageStore>) -> Self {
        LongPoll {
            store,
            held: Mutex::new(Parked::default()),
            stopped: AtomicBool::new(false),
            queue_checks: Default::default(),
        }
    }

    /// How many times a parked pull's queue was looked at so far.
    pub(crate) fn queue_checks(&self) -> u64 {
        self.queue_checks.load(Ordering::Relaxed)
    }

    /// Parks `held`; gives it back if the service is full or stopped.
    pub(crate) fn hold(&self, held: Held) -> Result<(), Box<Held>> {
        {
            let mut p = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let bytes = held.bytes();
            let (n, b) = p.per_connection.get(&held.responder.peer()).copied().unwrap_or_default();
            if self.stopped.load(Ordering::Acquire)
                || p.len() >= MAX_HELD
                || p.bytes + bytes > MAX_HELD_BYTES
                || n >= MAX_HELD_PER_CONNECTION
                || b + bytes > MAX_HELD_BYTES_PER_CONNECTION
            {
                return Err(Box::new(held));
            }
            // Before the pull is parked: its queue is checked once after this (`fresh`), so a
            // unit the dispatcher wrote without recording it is seen then.
            self.store.dispatcher().want_arrivals(true);
            p.add(held, bytes);
        }
        self.wake();
        Ok(())
    }

    /// How many pulls are parked.
    pub(crate) fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Stops the thread; parked pulls are dropped unanswered (their connections are closing).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        // A spurious wake-up for the notifier's other waiters, who re-check their conditions.
        self.store.dispatcher().dispatched().notify();
    }

    /// How many units from its offset a parked pull's read scans (at least; a large
    /// `maxMsgNums` scans more, and such a pull is only woken early).
    fn scan_window(&self) -> i64 {
        (self.store.config().max_filter_message_size.max(0) as usize / CQ_UNIT_SIZE).max(1) as i64
    }

    /// Removes and returns the pulls to answer now (or drop, if their connection closed);
    /// also the earliest deadline of the rest.
    fn take_ready(&self, now: Instant) -> (Vec<Held>, Option<Instant>) {
        let window = self.scan_window();
        let mut parked = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let p = &mut *parked;
        let mut ready_ids = Vec::new();
        // Timed out.
        ready_ids.extend(p.deadlines.iter().take_while(|(d, _)| *d <= now).map(|&(_, id)| id));
        // Closed connections, about once a second (a woken pull's is checked below).
        if p.last_sweep.is_none_or(|t| now.saturating_duration_since(t) >= MAX_SLEEP) {
            p.last_sweep = Some(now);
            ready_ids.extend(
                p.entries.iter().filter(|(_, e)| !e.held.responder.is_connected()).map(|(&id, _)| id),
            );
        }
        // Queues that grew: those the dispatcher put units into since the last round, and
        // those of newly parked pulls; every queue once a second (a slave's truncation moves
        // no unit in, and a safety net costs little at that pace).
        let cqs = self.store.consume_queues();
        let arrived = self.store.dispatcher().take_arrivals();
        let fresh = std::mem::take(&mut p.fresh);
        let entries = &mut p.entries;
        let mut checked = 0u64;
        let mut check = |w: &mut Waiters, topic: &str, queue_id: i32| {
            let cq = cqs.find(topic, queue_id);
            check_queue(&self.store, entries, w, cq.as_deref(), window, &mut ready_ids);
            checked += 1;
        };
        if p.last_full.is_none_or(|t| now.saturating_duration_since(t) >= MAX_SLEEP) {
            p.last_full = Some(now);
            for (topic, by_id) in &mut p.queues {
                for (&queue_id, w) in by_id.iter_mut() {
                    check(w, topic, queue_id);
                }
            }
        } else {
            let touched = arrived
                .iter()
                .flat_map(|(t, ids)| ids.iter().map(move |&q| (t.as_str(), q)))
                .chain(fresh.iter().map(|(t, q)| (t.as_str(), *q)));
            for (topic, queue_id) in touched {
                if let Some(w) = p.queues.get_mut(topic).and_then(|m| m.get_mut(&queue_id)) {
                    check(w, topic, queue_id);
                }
            }
        }
        self.queue_checks.fetch_add(checked, Ordering::Relaxed);
        // `remove` ignores an id listed twice (timed out and woken, say).
        let ready = ready_ids.into_iter().filter_map(|id| p.remove(id)).collect();
        if p.entries.is_empty() {
            // Under the lock `hold` parks with: no pull parks between this and the store.
            self.store.dispatcher().want_arrivals(false);
        }
        let next = p.deadlines.first().map(|&(d, _)| d);
        (ready, next)
    }
}

/// Checks the parked pulls of one queue, whose ConsumeQueue is `cq`: the ones its new units
/// wake go to `ready`.
fn check_queue(
    store: &MessageStore,
    entries: &mut HashMap<u64, Entry>,
    w: &mut Waiters,
    cq: Option<&ConsumeQueue>,
    window: i64,
    ready: &mut Vec<u64>,
) {
    let max = cq.map_or(0, |q| q.max_offset_in_queue());
    if max < w.seen_max {
        // Truncated (a slave re-synced): what was checked may be rewritten.
        w.low = i64::MAX;
        for id in &w.ids {
            if let Some(e) = entries.get_mut(id) {
                e.checked = e.held.offset;
                w.low = w.low.min(e.checked);
            }
        }
    }
    w.seen_max = max;
    if max <= w.low {
        return;
    }
    let mut low = i64::MAX;
    for &id in &w.ids {
        let Some(e) = entries.get_mut(&id) else { continue };
        if max > e.checked {
            if let Check::Wake = check(e, store, cq, max, window) {
                ready.push(id);
                continue;
            }
        }
        low = low.min(e.checked);
    }
    w.low = low;
}

/// The long-poll thread: answers parked pulls as their messages arrive or their time runs out.
pub(crate) fn run(pull: &Arc<PullProcessor>, store: &Arc<MessageStore>) {
    let lp = pull.long_poll();
    let notifier = store.dispatcher().dispatched();
    loop {
        let seen = notifier.seq();
        if lp.stopped.load(Ordering::Acquire) {
            break;
        }
        let (ready, next) = lp.take_ready(Instant::now());
        for h in ready {
            if h.responder.is_connected() {
                pull.answer_held(h);
            }
        }
        let sleep = next.map_or(MAX_SLEEP, |d| d.saturating_duration_since(Instant::now()).min(MAX_SLEEP));
        if !sleep.is_zero() {
            notifier.wait(seen, sleep);
        }
    }
    *lp.held.lock().unwrap_or_else(|e| e.into_inner()) = Parked::default();
    tracing::debug!("long-poll service stopped");
}
