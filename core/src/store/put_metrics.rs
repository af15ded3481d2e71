//! Counters of the put path for monitoring (`Broker::metrics`): puts refused by status,
//! puts that waited for a flush or a slave by final status, and how long they waited.
//!
//! Stored puts are counted under the put lock by the CommitLog (`CommitLog::stored_counts`),
//! where counting costs no locked instruction. The clock is read only for puts that wait,
//! whose waits take microseconds to seconds, and the thread that completes a batch of them
//! tallies it (`WaitTally`) and adds it here at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::status::PutStatus;

/// Upper bounds (seconds) of the wait histogram's buckets; a last `+Inf` bucket is implied.
pub const WAIT_BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Put counters, kept by the CommitLog and added to by the waiters that complete puts.
#[derive(Debug, Default)]
pub struct PutMetrics {
    refused: [AtomicU64; PutStatus::ALL.len()],
    waited: [AtomicU64; PutStatus::ALL.len()],
    /// Non-cumulative counts per bucket of `WAIT_BUCKETS`, then one for longer waits.
    wait_buckets: [AtomicU64; WAIT_BUCKETS.len() + 1],
    wait_sum_ns: AtomicU64,
}

/// Waits counted by one thread (completing a batch of puts), added to `PutMetrics` at once.
#[derive(Debug, Default)]
pub struct WaitTally {
    waited: [u64; PutStatus::ALL.len()],
    buckets: [u64; WAIT_BUCKETS.len() + 1],
    sum_ns: u64,
}

impl WaitTally {
    /// A put that waited `waited` for its final `status`.
    pub fn waited(&mut self, status: PutStatus, waited: Duration) {
        self.waited[status as usize] += 1;
        let secs = waited.as_secs_f64();
        self.buckets[WAIT_BUCKETS.iter().position(|&b| secs <= b).unwrap_or(WAIT_BUCKETS.len())] += 1;
        self.sum_ns = self.sum_ns.saturating_add(u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
    }
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct PutMetricsSnapshot {
    /// Puts that stored nothing, by status (indexed by `PutStatus as usize`).
    pub refused: [u64; PutStatus::ALL.len()],
    /// Puts that waited for a flush or a slave, by final status.
    pub waited: [u64; PutStatus::ALL.len()],
    /// Cumulative counts of waits at most each bound of `WAIT_BUCKETS`, then the total.
    pub wait_cumulative: [u64; WAIT_BUCKETS.len() + 1],
    /// Total time waited, in seconds.
    pub wait_sum_seconds: f64,
}

impl PutMetrics {
    /// A put refused with `status` (nothing stored).
    pub fn refused(&self, status: PutStatus) {
        self.refused[status as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds what a thread tallied while completing a batch of puts.
    pub fn add(&self, t: &WaitTally) {
        if t.waited.iter().all(|&n| n == 0) {
            return;
        }
        for (c, &n) in self.waited.iter().zip(&t.waited) {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
        for (c, &n) in self.wait_buckets.iter().zip(&t.buckets) {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.wait_sum_ns.fetch_add(t.sum_ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> PutMetricsSnapshot {
        let load = |a: &[AtomicU64]| a.iter().map(|c| c.load(Ordering::Relaxed)).collect::<Vec<_>>();
        let mut wait_cumulative = [0u64; WAIT_BUCKETS.len() + 1];
        let mut total = 0u64;
        for (slot, n) in wait_cumulative.iter_mut().zip(load(&self.wait_buckets)) {
            total += n;
            *slot = total;
        }
        PutMetricsSnapshot {
            refused: load(&self.refused).try_into().expect("one counter per status"),
            waited: load(&self.waited).try_into().expect("one counter per status"),
            wait_cumulative,
            wait_sum_seconds: self.wait_sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_fall_in_cumulative_buckets_by_their_upper_bound() {
        let m = PutMetrics::default();
        let mut t = WaitTally::default();
        t.waited(PutStatus::PutOk, Duration::from_micros(100)); // exactly the first bound
        t.waited(PutStatus::PutOk, Duration::from_micros(101));
        t.waited(PutStatus::FlushSlaveTimeout, Duration::from_secs(3));
        m.add(&t);
        let mut t = WaitTally::default();
        t.waited(PutStatus::FlushSlaveTimeout, Duration::from_secs(60));
        m.add(&t);
        m.add(&WaitTally::default());
        m.refused(PutStatus::MessageIllegal);
        let s = m.snapshot();
        assert_eq!(s.waited[PutStatus::PutOk as usize], 2);
        assert_eq!(s.waited[PutStatus::FlushSlaveTimeout as usize], 2);
        assert_eq!(s.refused[PutStatus::MessageIllegal as usize], 1);
        assert_eq!(s.refused.iter().sum::<u64>(), 1);
        assert_eq!(s.wait_cumulative[0], 1, "0.0001 s");
        assert_eq!(s.wait_cumulative[1], 2, "0.00025 s");
        assert_eq!(s.wait_cumulative[13], 2, "2.5 s");
        assert_eq!(s.wait_cumulative[14], 3, "5 s");
        assert_eq!(s.wait_cumulative[15], 3, "10 s");
        assert_eq!(s.wait_cumulative[16], 4, "+Inf");
        assert!((s.wait_sum_seconds - 63.000201).abs() < 1e-9, "{}", s.wait_sum_seconds);
    }

    #[test]
    fn statuses_index_their_counters() {
        for (i, s) in PutStatus::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
        }
    }
}
