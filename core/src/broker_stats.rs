//! Put and pull rates and daily totals for GET_BROKER_RUNTIME_INFO, as RocketMQ 4.9's
//! `StoreStatsService` and `BrokerStats` give them: what `mqadmin clusterList` shows as
//! InTPS / OutTPS and the messages in and out yesterday and today, what `mqadmin brokerStatus`
//! and the dashboard read.
//!
//! A sample of the counters is taken every second (the `rmqha-stats` thread) and the last 601
//! are kept; each rate is over the last 10 s, 1 min and 10 min, written as
//! `"<10 s> <1 min> <10 min>"`. RocketMQ leaves a rate empty until a whole window of samples
//! exists, which `clusterList` then fails to parse (it prints zeros for the broker for the
//! first ten seconds); here a rate covers what has been sampled since the start.
//!
//! The daily totals are RocketMQ's: at each local midnight the message counts put and
//! pulled so far become "today morning", and the previous ones "yesterday morning"; before
//! the first midnight both are 0, so "today" counts from the start.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Samples kept: ten minutes of one a second, and the one before them.
const MAX_SAMPLES: usize = 601;
/// The rates' windows, in seconds (one sample a second).
const WINDOWS: [usize; 3] = [10, 60, 600];

/// Counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sample {
    at_ms: i64,
    put: u64,
    found: u64,
    miss: u64,
    transferred: u64,
}

#[derive(Debug, Default)]
struct Inner {
    samples: VecDeque<Sample>,
    put_yesterday_morning: u64,
    put_today_morning: u64,
    get_yesterday_morning: u64,
    get_today_morning: u64,
    /// When the next "morning" is recorded (the next local midnight, epoch ms).
    next_morning_ms: i64,
}

/// The counters and samples of one broker (see the module doc).
#[derive(Debug)]
pub struct BrokerStats {
    boot_ms: i64,
    /// Pulls answered with messages (RocketMQ's `getMessageTimesTotalFound`).
    found: AtomicU64,
    /// Pulls answered without (`getMessageTimesTotalMiss`).
    miss: AtomicU64,
    /// Messages pulls returned (`getMessageTransferedMsgCount`).
    transferred: AtomicU64,
    inner: Mutex<Inner>,
}

impl BrokerStats {
    /// Counters started at `boot_ms`, the first morning recorded at the local midnight after.
    pub fn new(boot_ms: i64) -> Self {
        BrokerStats {
            boot_ms,
            found: AtomicU64::new(0),
            miss: AtomicU64::new(0),
            transferred: AtomicU64::new(0),
            // Every counter is 0 at the start: what is counted before the first sample (the
            // sampler not scheduled yet) still shows in the rates.
            inner: Mutex::new(Inner {
                samples: VecDeque::from([Sample { at_ms: boot_ms, ..Sample::default() }]),
                next_morning_ms: next_local_midnight_ms(boot_ms),
                ..Inner::default()
            }),
        }
    }

    /// A pull answered with `messages` messages (0: without any).
    pub fn count_pull(&self, messages: usize) {
        if messages == 0 {
            self.miss.fetch_add(1, Ordering::Relaxed);
        } else {
            self.found.fetch_add(1, Ordering::Relaxed);
            self.transferred.fetch_add(messages as u64, Ordering::Relaxed);
        }
    }

    /// Messages pulls returned since the start.
    pub fn transferred(&self) -> u64 {
        self.transferred.load(Ordering::Relaxed)
    }

    /// Pulls answered with messages and without, since the start.
    pub fn pulls(&self) -> (u64, u64) {
        (self.found.load(Ordering::Relaxed), self.miss.load(Ordering::Relaxed))
    }

    /// Takes a sample at `now_ms`, with `put` messages stored since the start; records the
    /// morning's totals once `now_ms` reaches the next local midnight.
    pub fn sample(&self, now_ms: i64, put: u64) {
        let s = Sample {
            at_ms: now_ms,
            put,
            found: self.found.load(Ordering::Relaxed),
            miss: self.miss.load(Ordering::Relaxed),
            transferred: self.transferred.load(Ordering::Relaxed),
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.samples.push_back(s);
        while inner.samples.len() > MAX_SAMPLES {
            inner.samples.pop_front();
        }
        if now_ms >= inner.next_morning_ms {
            inner.put_yesterday_morning = inner.put_today_morning;
            inner.get_yesterday_morning = inner.get_today_morning;
            inner.put_today_morning = put;
            inner.get_today_morning = s.transferred;
            inner.next_morning_ms = next_local_midnight_ms(now_ms).max(now_ms + 1);
            tracing::info!(
                yesterday_put = inner.put_today_morning - inner.put_yesterday_morning,
                yesterday_pulled = inner.get_today_morning - inner.get_yesterday_morning,
                "messages stored and pulled yesterday (since the start, if it was yesterday)"
            );
        }
    }

    /// The entries RocketMQ's GET_BROKER_RUNTIME_INFO has for these counters, at `now_ms`,
    /// with `put` messages stored since the start.
    pub fn runtime_info(&self, now_ms: i64, put: u64, mut out: impl FnMut(&str, String)) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let rates = |f: &dyn Fn(&Sample) -> u64| {
            WINDOWS
                .iter()
                .map(|&w| format!("{:.2}", rate(&inner.samples, w, f)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        out("bootTimestamp", self.boot_ms.to_string());
        out("runtime", format_runtime(now_ms - self.boot_ms));
        out("putMessageTimesTotal", put.to_string());
        out("putTps", rates(&|s| s.put));
        out("getFoundTps", rates(&|s| s.found));
        out("getMissTps", rates(&|s| s.miss));
        out("getTotalTps", rates(&|s| s.found + s.miss));
        out("getTransferedTps", rates(&|s| s.transferred));
        out("msgPutTotalYesterdayMorning", inner.put_yesterday_morning.to_string());
        out("msgPutTotalTodayMorning", inner.put_today_morning.to_string());
        out("msgPutTotalTodayNow", put.to_string());
        out("msgGetTotalYesterdayMorning", inner.get_yesterday_morning.to_string());
        out("msgGetTotalTodayMorning", inner.get_today_morning.to_string());
        out("msgGetTotalTodayNow", self.transferred().to_string());
    }
}

/// Per second, of the counter `f`, from the sample `window` before the last (or the oldest
/// kept, if fewer were taken) to the last; 0 with fewer than two samples.
fn rate(samples: &VecDeque<Sample>, window: usize, f: &dyn Fn(&Sample) -> u64) -> f64 {
    let (Some(last), Some(first)) = (samples.back(), samples.get(samples.len().saturating_sub(window + 1)))
    else {
        return 0.0;
    };
    let ms = last.at_ms - first.at_ms;
    if ms <= 0 {
        return 0.0;
    }
    f(last).saturating_sub(f(first)) as f64 * 1000.0 / ms as f64
}

/// RocketMQ's `[ 1 days, 2 hours, 3 minutes, 4 seconds ]`.
fn format_runtime(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        s / 86_400,
        s % 86_400 / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The first local midnight after `now_ms` (epoch ms), by the C library's time zone (`TZ`,
/// `/etc/localtime`), as RocketMQ's `computeNextMorningTimeMillis`; UTC's if it cannot tell.
fn next_local_midnight_ms(now_ms: i64) -> i64 {
    let utc = (now_ms.div_euclid(86_400_000) + 1) * 86_400_000;
    let secs = now_ms.div_euclid(1000) as libc::time_t;
    // SAFETY: `tm` is plain data, written by `localtime_r` before `mktime` reads it.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return utc;
        }
        tm.tm_sec = 0;
        tm.tm_min = 0;
        tm.tm_hour = 0;
        tm.tm_mday += 1;
        tm.tm_isdst = -1;
        let t = libc::mktime(&mut tm);
        if t == -1 { utc } else { t as i64 * 1000 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(stats: &BrokerStats, now_ms: i64, put: u64) -> std::collections::BTreeMap<String, String> {
        let mut t = std::collections::BTreeMap::new();
        stats.runtime_info(now_ms, put, |k, v| {
            t.insert(k.to_string(), v);
        });
        t
    }

    #[test]
    fn rates_cover_their_windows_and_what_was_sampled_before_one_was_full() {
        let stats = BrokerStats::new(0);
        // Nothing sampled yet: rates are 0, not empty.
        assert_eq!(info(&stats, 0, 0)["putTps"], "0.00 0.00 0.00");
        // 100 puts a second for 20 s, then 400 a second for 10 s.
        let mut put = 0;
        for s in 1..=30 {
            let n = if s <= 20 { 100 } else { 400 };
            put += n;
            // Every even second each pull found 2 messages; every odd one none.
            for _ in 0..n {
                stats.count_pull(if s % 2 == 0 { 2 } else { 0 });
            }
            stats.sample(s * 1000, put);
        }
        let t = info(&stats, 30_000, put);
        // Over the last 10 s: 400/s; over the last minute (only 30 s sampled): 200/s.
        assert_eq!(t["putTps"], "400.00 200.00 200.00");
        assert_eq!(t["putMessageTimesTotal"], put.to_string());
        assert_eq!(t["msgPutTotalTodayNow"], put.to_string());
        // Seconds 21..=30: five found 400 pulls each, five missed.
        assert_eq!(t["getFoundTps"].split(' ').next().unwrap(), "200.00");
        assert_eq!(t["getMissTps"].split(' ').next().unwrap(), "200.00");
        assert_eq!(t["getTotalTps"].split(' ').next().unwrap(), "400.00");
        assert_eq!(t["getTransferedTps"].split(' ').next().unwrap(), "400.00");
        // Over all 30 s: 10 even seconds of 100 pulls and 5 of 400, 2 messages each.
        assert_eq!(
            t["getTransferedTps"].split(' ').nth(1).unwrap(),
            format!("{:.2}", (1000.0 + 2000.0) * 2.0 / 30.0)
        );
        assert_eq!(t["msgGetTotalTodayNow"], stats.transferred().to_string());
        assert_eq!(t["runtime"], "[ 0 days, 0 hours, 0 minutes, 30 seconds ]");
        assert_eq!(t["bootTimestamp"], "0");
    }

    #[test]
    fn at_most_ten_minutes_of_samples_are_kept() {
        let stats = BrokerStats::new(0);
        // 1/s for an hour, then 7/s for the last 10 minutes.
        for s in 0..=4200i64 {
            let put = if s <= 3600 { s as u64 } else { 3600 + 7 * (s as u64 - 3600) };
            stats.sample(s * 1000, put);
        }
        assert_eq!(stats.inner.lock().unwrap().samples.len(), MAX_SAMPLES);
        let t = info(&stats, 4_200_000, 0);
        assert_eq!(t["putTps"], "7.00 7.00 7.00");
        assert_eq!(format_runtime(90_061_000), "[ 1 days, 1 hours, 1 minutes, 1 seconds ]");
    }

    #[test]
    fn each_midnight_moves_today_to_yesterday() {
        let stats = BrokerStats::new(1_000);
        let first = stats.inner.lock().unwrap().next_morning_ms;
        assert!(first > 1_000 && first <= 1_000 + 86_400_000 + 3_600_000, "{first}");
        stats.sample(2_000, 10);
        stats.count_pull(3);
        let t = info(&stats, 2_000, 10);
        // Before the first midnight both mornings are 0: today counts from the start.
        assert_eq!(
            (t["msgPutTotalYesterdayMorning"].as_str(), t["msgPutTotalTodayMorning"].as_str()),
            ("0", "0")
        );
        assert_eq!(t["msgGetTotalTodayNow"], "3");
        stats.sample(first, 50);
        let t = info(&stats, first, 60);
        assert_eq!(t["msgPutTotalYesterdayMorning"], "0");
        assert_eq!(t["msgPutTotalTodayMorning"], "50");
        assert_eq!(t["msgPutTotalTodayNow"], "60");
        assert_eq!(t["msgGetTotalTodayMorning"], "3");
        let second = stats.inner.lock().unwrap().next_morning_ms;
        assert!(second > first + 20 * 3_600_000 && second <= first + 26 * 3_600_000, "{first} {second}");
        // A sample before it changes nothing; one at it moves today's morning to yesterday.
        stats.sample(second - 1, 70);
        stats.count_pull(1);
        stats.sample(second, 90);
        let t = info(&stats, second, 90);
        assert_eq!(t["msgPutTotalYesterdayMorning"], "50");
        assert_eq!(t["msgPutTotalTodayMorning"], "90");
        assert_eq!(t["msgGetTotalYesterdayMorning"], "3");
        assert_eq!(t["msgGetTotalTodayMorning"], "4");
    }

    #[test]
    fn the_next_midnight_is_within_a_day() {
        for now in [0i64, 1_700_000_000_000, 1_764_547_200_000, 1_764_633_599_999] {
            let m = next_local_midnight_ms(now);
            assert!(m > now && m <= now + 25 * 3_600_000, "{now} -> {m}");
        }
    }
}
