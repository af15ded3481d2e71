//! A wake-up signal for threads that wait for "something new" (appended bytes, a flush
//! request). Signalling costs one atomic add when nobody waits, and two loads more while the
//! waiters are already being woken, so the put path can signal after every append.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub struct Notifier {
    seq: AtomicU64,
    waiting: AtomicUsize,
    /// Set by the `notify` that wakes the current waiters, cleared by a waiter about to
    /// sleep: the notifies in between (every append until a woken thread runs, dozens at
    /// millions of puts per second) make no system call. RocketMQ's `hasNotified`.
    woken: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Notifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current sequence; pass it to `wait` to sleep until the next `notify`.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Wakes every waiter.
    pub fn notify(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        // A waiter registers and clears `woken` before re-checking `seq` under the lock, so
        // either it sees the new sequence, or we see it waiting with `woken` clear and wake
        // it (taking the lock, which it holds until it sleeps): no lost wake-up. A `woken`
        // already set means a notify after that waiter's check is waking it.
        if self.waiting.load(Ordering::SeqCst) > 0
            && !self.woken.load(Ordering::SeqCst)
            && !self.woken.swap(true, Ordering::SeqCst)
        {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    /// Sleeps until `seq` moves past `seen` or `timeout` passes; returns the current sequence.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = crate::deadline_after(timeout);
        loop {
            self.woken.store(false, Ordering::SeqCst);
            if self.seq.load(Ordering::SeqCst) != seen {
                break;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            g = self.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        drop(g);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        self.seq()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn wakes_a_waiter_and_times_out_without_notify() {
        let n = Arc::new(Notifier::new());
        let seen = n.seq();
        let n2 = n.clone();
        let h = std::thread::spawn(move || n2.wait(seen, Duration::from_secs(30)));
        n.notify();
        assert!(h.join().unwrap() > seen);
        let s = n.seq();
        assert_eq!(n.wait(s, Duration::from_millis(5)), s);
    }

    /// Two waiters and a notifier racing: every notify that a waiter needs reaches it, though
    /// most notifies find the waiters already being woken and make no system call.
    #[test]
    fn no_wake_up_is_lost_under_racing_notifies() {
        use std::sync::atomic::AtomicU64;
        let n = Arc::new(Notifier::new());
        let produced = Arc::new(AtomicU64::new(0));
        const TOTAL: u64 = 20_000;
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (n, produced) = (n.clone(), produced.clone());
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    loop {
                        let seen = n.seq();
                        if produced.load(Ordering::SeqCst) == TOTAL {
                            break;
                        }
                        n.wait(seen, Duration::from_secs(60));
                    }
                    tx.send(()).unwrap();
                });
                rx
            })
            .collect();
        for i in 0..TOTAL {
            produced.fetch_add(1, Ordering::SeqCst);
            n.notify();
            if i % 1000 == 0 {
                std::thread::yield_now();
            }
        }
        for rx in waiters {
            // A lost wake-up would leave a waiter asleep for its full minute.
            rx.recv_timeout(Duration::from_secs(20)).expect("a waiter missed the last notify");
        }
    }
}
