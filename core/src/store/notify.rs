//! A wake-up signal for threads that wait for "something new" (appended bytes, a flush
//! request). Signalling costs one atomic add when nobody waits, so the put path can signal
//! after every append.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub struct Notifier {
    seq: AtomicU64,
    waiting: AtomicUsize,
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
        // A waiter registers before re-checking `seq` under the lock, so either it sees the
        // new sequence or we see it waiting and wake it: no lost wake-up.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    /// Sleeps until `seq` moves past `seen` or `timeout` passes; returns the current sequence.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = std::time::Instant::now() + timeout;
        while self.seq.load(Ordering::SeqCst) == seen {
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
}
