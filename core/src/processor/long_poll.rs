//! Long polling (RocketMQ's `PullRequestHoldService`): a pull with the suspend flag that finds
//! nothing new is parked here instead of answered PULL_NOT_FOUND, and answered by one thread
//! as soon as its queue grows past the requested offset, or when its suspend timeout passes,
//! or dropped when its connection closes.
//!
//! The thread sleeps on the dispatcher's [`Notifier`](crate::store::notify::Notifier), which is
//! signalled after every dispatch round (master and slave alike), so a message wakes its
//! waiting pulls as soon as it is in a ConsumeQueue. Each wake checks every parked request's
//! queue (a lookup, no read); a woken request is processed again from scratch with suspension
//! disallowed, exactly as RocketMQ re-runs `processRequest(…, brokerAllowSuspend = false)`.
//!
//! Parking a request also signals the notifier, so the thread recomputes its next deadline and
//! re-checks the new request's queue: a message dispatched between the pull's read and the
//! parking is not missed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::remoting::{RemotingCommand, Responder};
use crate::store::MessageStore;

use super::pull::PullProcessor;

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
/// The thread re-checks at least this often, whatever happens.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// One parked pull.
pub(crate) struct Held {
    pub request: RemotingCommand,
    pub responder: Responder,
    pub topic: String,
    pub queue_id: i32,
    pub offset: i64,
    pub deadline: Instant,
}

impl Held {
    /// About how much memory the parked request keeps.
    fn bytes(&self) -> usize {
        let r = &self.request;
        256 + r.body.len()
            + r.remark.as_ref().map_or(0, String::len)
            + r.ext_fields.iter().map(|(k, v)| 64 + k.len() + v.len()).sum::<usize>()
    }
}

/// The parked pulls and the bytes they keep, in all and per connection.
#[derive(Default)]
struct Parked {
    list: Vec<Held>,
    bytes: usize,
    per_connection: std::collections::HashMap<std::net::SocketAddr, (usize, usize)>,
}

impl Parked {
    fn add(&mut self, held: Held, bytes: usize) {
        self.bytes += bytes;
        let c = self.per_connection.entry(held.responder.peer()).or_default();
        c.0 += 1;
        c.1 += bytes;
        self.list.push(held);
    }

    fn remove(&mut self, i: usize) -> Held {
        let h = self.list.swap_remove(i);
        let bytes = h.bytes();
        self.bytes -= bytes;
        let peer = h.responder.peer();
        if let Some(c) = self.per_connection.get_mut(&peer) {
            c.0 -= 1;
            c.1 -= bytes;
            if c.0 == 0 {
                self.per_connection.remove(&peer);
            }
        }
        h
    }
}

/// The parked pulls.
pub(crate) struct LongPoll {
    store: Arc<MessageStore>,
    held: Mutex<Parked>,
    stopped: AtomicBool,
}

impl LongPoll {
    pub(crate) fn new(store: Arc<MessageStore>) -> Self {
        LongPoll { store, held: Mutex::new(Parked::default()), stopped: AtomicBool::new(false) }
    }

    /// Parks `held`; gives it back if the service is full or stopped.
    pub(crate) fn hold(&self, held: Held) -> Result<(), Box<Held>> {
        {
            let mut p = self.held.lock().unwrap_or_else(|e| e.into_inner());
            let bytes = held.bytes();
            let (n, b) = p.per_connection.get(&held.responder.peer()).copied().unwrap_or_default();
            if self.stopped.load(Ordering::Acquire)
                || p.list.len() >= MAX_HELD
                || p.bytes + bytes > MAX_HELD_BYTES
                || n >= MAX_HELD_PER_CONNECTION
                || b + bytes > MAX_HELD_BYTES_PER_CONNECTION
            {
                return Err(Box::new(held));
            }
            p.add(held, bytes);
        }
        self.wake();
        Ok(())
    }

    /// How many pulls are parked.
    pub(crate) fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).list.len()
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

    /// Removes and returns the pulls to answer now; also the earliest deadline of the rest.
    fn take_ready(&self, now: Instant) -> (Vec<Held>, Option<Instant>) {
        let mut parked = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mut ready = Vec::new();
        let mut next: Option<Instant> = None;
        let mut i = 0;
        while i < parked.list.len() {
            let h = &parked.list[i];
            let arrived = self.store.queue_max_offset(&h.topic, h.queue_id) > h.offset;
            if arrived || now >= h.deadline || !h.responder.is_connected() {
                ready.push(parked.remove(i));
            } else {
                next = Some(next.map_or(h.deadline, |n| n.min(h.deadline)));
                i += 1;
            }
        }
        (ready, next)
    }
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
