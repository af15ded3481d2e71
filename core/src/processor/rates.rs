//! Messages each consumer group pulls from each topic, as a rate over the last minute:
//! GET_CONSUME_STATS's `consumeTps` (RocketMQ's `BrokerStatsManager` GROUP_GET_NUMS, which
//! `PullMessageProcessor` counts for every pull answered with messages and
//! `getConsumeStats` reads as the per-minute TPS of `topic@group`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Seconds in the window.
pub(crate) const WINDOW: usize = 60;
/// Keys idle past the window are dropped whenever the table has grown by this many.
const PRUNE_EVERY: usize = 256;

/// Counts per second over the last `WINDOW` seconds.
#[derive(Debug, Clone)]
struct MinuteRate {
    counts: [u64; WINDOW],
    /// The second (since the table's epoch) each slot counts; a slot of another second is stale.
    seconds: [u64; WINDOW],
    last: u64,
}

impl MinuteRate {
    fn new() -> Self {
        MinuteRate { counts: [0; WINDOW], seconds: [u64::MAX; WINDOW], last: 0 }
    }

    fn add(&mut self, second: u64, n: u64) {
        let slot = (second % WINDOW as u64) as usize;
        if self.seconds[slot] != second {
            self.seconds[slot] = second;
            self.counts[slot] = 0;
        }
        self.counts[slot] += n;
        self.last = second;
    }

    /// The count over the `WINDOW` seconds before `now` (the current second, still counting,
    /// left out).
    fn in_window(&self, now: u64) -> u64 {
        let from = now.saturating_sub(WINDOW as u64);
        (0..WINDOW)
            .filter(|&i| self.seconds[i] >= from && self.seconds[i] < now)
            .map(|i| self.counts[i])
            .sum()
    }
}

/// Pull counts of every `topic@group` that pulled messages in the last minute.
#[derive(Debug)]
pub(crate) struct GroupRates {
    epoch: Instant,
    inner: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    rates: HashMap<String, MinuteRate>,
    pruned_at_len: usize,
}

impl Default for GroupRates {
    fn default() -> Self {
        GroupRates { epoch: Instant::now(), inner: Mutex::default() }
    }
}

impl GroupRates {
    fn second(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    /// Counts `n` messages pulled by `group` from `topic`.
    pub(crate) fn add(&self, topic: &str, group: &str, n: usize) {
        self.add_at(topic, group, n, self.second());
    }

    fn add_at(&self, topic: &str, group: &str, n: usize, now: u64) {
        if n == 0 {
            return;
        }
        let key = format!("{topic}@{group}");
        let mut t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = t.rates.get_mut(&key) {
            r.add(now, n as u64);
            return;
        }
        if t.rates.len() >= t.pruned_at_len + PRUNE_EVERY {
            t.rates.retain(|_, r| r.last + WINDOW as u64 >= now);
            t.pruned_at_len = t.rates.len();
        }
        let mut r = MinuteRate::new();
        r.add(now, n as u64);
        t.rates.insert(key, r);
    }

    /// Messages `group` pulled from `topic` in the last `WINDOW` seconds (the current one,
    /// still counting, left out).
    pub(crate) fn last_minute(&self, topic: &str, group: &str) -> u64 {
        self.last_minute_at(topic, group, self.second())
    }

    fn last_minute_at(&self, topic: &str, group: &str, now: u64) -> u64 {
        let t = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        t.rates.get(&format!("{topic}@{group}")).map_or(0, |r| r.in_window(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_the_last_minute_without_the_current_second() {
        let mut r = MinuteRate::new();
        r.add(100, 30);
        r.add(100, 30);
        r.add(130, 60);
        assert_eq!(r.in_window(100), 0, "the second still counting is left out");
        assert_eq!(r.in_window(131), 120);
        assert_eq!(r.in_window(161), 60, "second 100 has left the window");
        assert_eq!(r.in_window(191), 0);
        // A slot reused a minute later starts from zero.
        r.add(160, 6);
        assert_eq!(r.in_window(161), 66);
        r.add(220, 1);
        assert_eq!(r.in_window(221), 1, "second 160's slot now counts second 220 alone");
    }

    #[test]
    fn rates_are_per_topic_and_group_and_idle_ones_are_pruned() {
        let rates = GroupRates::default();
        let len = || rates.inner.lock().unwrap().rates.len();
        rates.add_at("T", "g", 120, 10);
        rates.add_at("T", "g", 0, 10);
        assert_eq!(rates.last_minute_at("T", "g", 11), 120);
        assert_eq!((rates.last_minute_at("U", "g", 11), rates.last_minute_at("T", "h", 11)), (0, 0));
        // Keys added within the minute are all kept as the table grows.
        for i in 0..PRUNE_EVERY {
            rates.add_at("T", &format!("g{i}"), 1, 20);
        }
        assert_eq!(len(), PRUNE_EVERY + 1);
        // A minute later the next new key past the step drops every idle one.
        rates.add_at("T", "g", 1, 75);
        for i in 0..PRUNE_EVERY {
            rates.add_at("U", &format!("g{i}"), 1, 90);
        }
        assert_eq!(len(), PRUNE_EVERY + 1, "the idle T@g0.. went; T@g (active at 75) stayed");
        assert_eq!(rates.last_minute_at("T", "g", 76), 1);
    }
}
