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
//!
//! VIEW_BROKER_STATS_DATA (`mqadmin statsAll`) reads RocketMQ's `BrokerStatsManager` items,
//! each a count over the last minute, hour and day ([`ItemStats`]) from snapshots taken every
//! 10 s (the last 7 kept), every 10 min (7) and every hour (25), as 4.9's `StatsItem`. The
//! items served: `TOPIC_PUT_NUMS` and `TOPIC_PUT_SIZE` (key: the topic), `GROUP_GET_NUMS`,
//! `GROUP_GET_SIZE` and `SNDBCK_PUT_NUMS` (key: `topic@group`), `BROKER_PUT_NUMS` and
//! `BROKER_GET_NUMS` (key: `brokerClusterName`). A topic's puts are read from its
//! ConsumeQueues at each snapshot (their ends, and the record bytes the dispatcher indexed),
//! so the put path counts nothing per topic (it runs at millions of puts a second); they
//! count a message when it is dispatched, and a delayed one in its own topic when it is
//! delivered.

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
    /// Per `topic@group`: messages pulled, their bytes, pulls, messages sent back.
    group_gets: Mutex<std::collections::HashMap<String, [u64; 4]>>,
    items: Mutex<Items>,
}

/// RocketMQ's `BrokerStatsManager` item names served by VIEW_BROKER_STATS_DATA.
pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
pub const SNDBCK_PUT_NUMS: &str = "SNDBCK_PUT_NUMS";
pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";

/// Seconds between two item snapshots.
pub const ITEM_SAMPLE_SECS: u64 = 10;
/// Item snapshot rounds between two hour snapshots (10 min) and two day snapshots (1 h).
const HOUR_EVERY: u64 = 60;
const DAY_EVERY: u64 = 360;

/// A cumulative value (messages, bytes) and how many calls made it, at one moment.
#[derive(Debug, Clone, Copy)]
struct Snap {
    at_ms: i64,
    value: u64,
    times: u64,
}

#[derive(Debug, Default)]
struct Item {
    minute: VecDeque<Snap>,
    hour: VecDeque<Snap>,
    day: VecDeque<Snap>,
}

#[derive(Debug, Default)]
struct Items {
    table: std::collections::HashMap<(&'static str, String), Item>,
    rounds: u64,
}

/// One window of an item: 4.9's `StatsSnapshot`, VIEW_BROKER_STATS_DATA's `BrokerStatsItem`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowStats {
    /// Counted between the window's first and last snapshots.
    pub sum: u64,
    /// `sum` per second over that time.
    pub tps: f64,
    /// `sum` per call (messages per pull, bytes per pull).
    pub avgpt: f64,
}

/// An item over the last minute, hour and day.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ItemStats {
    pub minute: WindowStats,
    pub hour: WindowStats,
    pub day: WindowStats,
}

impl ItemStats {
    /// The body of a VIEW_BROKER_STATS_DATA answer (4.9 `BrokerStatsData`, fields in
    /// fastjson's order).
    pub fn to_json(&self) -> String {
        let w =
            |s: &WindowStats| format!("{{\"avgpt\":{:?},\"sum\":{},\"tps\":{:?}}}", s.avgpt, s.sum, s.tps);
        format!(
            "{{\"statsDay\":{},\"statsHour\":{},\"statsMinute\":{}}}",
            w(&self.day),
            w(&self.hour),
            w(&self.minute)
        )
    }
}

/// 4.9 `StatsItem.computeStatsData`: from the first snapshot kept in `snaps` to `last`.
fn window(snaps: &VecDeque<Snap>, last: Option<&Snap>) -> WindowStats {
    let (Some(first), Some(last)) = (snaps.front(), last) else { return WindowStats::default() };
    let sum = last.value.saturating_sub(first.value);
    let ms = last.at_ms - first.at_ms;
    let times = last.times.saturating_sub(first.times);
    WindowStats {
        sum,
        tps: if ms > 0 { sum as f64 * 1000.0 / ms as f64 } else { 0.0 },
        avgpt: if times > 0 { sum as f64 / times as f64 } else { 0.0 },
    }
}

fn push(snaps: &mut VecDeque<Snap>, s: Snap, keep: usize) {
    snaps.push_back(s);
    while snaps.len() > keep {
        snaps.pop_front();
    }
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
            group_gets: Mutex::default(),
            items: Mutex::default(),
        }
    }

    /// A message of `topic` that `group` failed to consume, put back for a retry (or to its
    /// dead-letter topic).
    pub fn count_send_back(&self, topic: &str, group: &str) {
        let key = format!("{topic}@{group}");
        self.group_gets.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default()[3] += 1;
    }

    /// Takes the items' snapshots at `now_ms` (every [`ITEM_SAMPLE_SECS`]): `topics` are each
    /// topic's messages ever put (the sum of its queues' ends) and the bytes of those indexed
    /// since the store opened, `puts` the puts and messages stored since the start, `cluster`
    /// the key of the broker-wide items. Items of topics and `topic@group`s no longer there
    /// are dropped.
    pub fn sample_items(&self, now_ms: i64, cluster: &str, topics: &[(String, u64, u64)], puts: (u64, u64)) {
        let (found, _) = self.pulls();
        let mut current: Vec<((&'static str, String), u64, u64)> = Vec::with_capacity(topics.len() + 2);
        current.push(((BROKER_PUT_NUMS, cluster.to_string()), puts.1, puts.0));
        current.push(((BROKER_GET_NUMS, cluster.to_string()), self.transferred(), found));
        for (topic, n, bytes) in topics {
            current.push(((TOPIC_PUT_NUMS, topic.clone()), *n, *n));
            current.push(((TOPIC_PUT_SIZE, topic.clone()), *bytes, *n));
        }
        {
            let mut gets = self.group_gets.lock().unwrap_or_else(|e| e.into_inner());
            // A topic deleted: its groups' counts go with it.
            gets.retain(|k, _| {
                k.rsplit_once('@').is_some_and(|(t, _)| topics.iter().any(|(topic, ..)| topic == t))
            });
            for (k, c) in gets.iter() {
                if c[2] > 0 {
                    current.push(((GROUP_GET_NUMS, k.clone()), c[0], c[2]));
                    current.push(((GROUP_GET_SIZE, k.clone()), c[1], c[2]));
                }
                if c[3] > 0 {
                    current.push(((SNDBCK_PUT_NUMS, k.clone()), c[3], c[3]));
                }
            }
        }
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let round = items.rounds;
        items.rounds += 1;
        let mut kept = std::collections::HashMap::with_capacity(current.len());
        for (key, value, times) in current {
            let mut item = items.table.remove(&key).unwrap_or_else(|| {
                let mut item = Item::default();
                if round > 0 {
                    // Appeared since the last round: it counted from zero (4.9 starts a new
                    // item's lists with a zero snapshot one step back).
                    let zero = |back_ms: i64| Snap { at_ms: now_ms - back_ms, value: 0, times: 0 };
                    item.minute.push_back(zero(ITEM_SAMPLE_SECS as i64 * 1000));
                    item.hour.push_back(zero(600_000));
                    item.day.push_back(zero(3_600_000));
                }
                item
            });
            let snap = Snap { at_ms: now_ms, value, times };
            push(&mut item.minute, snap, 7);
            if round % HOUR_EVERY == 0 {
                push(&mut item.hour, snap, 7);
            }
            if round % DAY_EVERY == 0 {
                push(&mut item.day, snap, 25);
            }
            kept.insert(key, item);
        }
        items.table = kept;
    }

    /// The item `name` of `key` (VIEW_BROKER_STATS_DATA); `None` if there is none.
    pub fn item(&self, name: &str, key: &str) -> Option<ItemStats> {
        let items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let name = [
            TOPIC_PUT_NUMS,
            TOPIC_PUT_SIZE,
            GROUP_GET_NUMS,
            GROUP_GET_SIZE,
            SNDBCK_PUT_NUMS,
            BROKER_PUT_NUMS,
            BROKER_GET_NUMS,
        ]
        .into_iter()
        .find(|n| *n == name)?;
        let item = items.table.get(&(name, key.to_string()))?;
        // Every window ends at the newest snapshot: 4.9 ends the hour's at its last 10-minute
        // one and the day's at its last hourly one, so a day's count leaves out up to the
        // last hour.
        let last = item.minute.back();
        Some(ItemStats {
            minute: window(&item.minute, last),
            hour: window(&item.hour, last),
            day: window(&item.day, last),
        })
    }

    /// A pull by `group` of `topic` answered with `messages` messages of `bytes` bytes (0:
    /// without any).
    pub fn count_pull(&self, topic: &str, group: &str, messages: usize, bytes: usize) {
        if messages == 0 {
            self.miss.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.found.fetch_add(1, Ordering::Relaxed);
        self.transferred.fetch_add(messages as u64, Ordering::Relaxed);
        let mut t = self.group_gets.lock().unwrap_or_else(|e| e.into_inner());
        let c = t.entry(format!("{topic}@{group}")).or_default();
        c[0] += messages as u64;
        c[1] += bytes as u64;
        c[2] += 1;
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
                stats.count_pull("T", "g", if s % 2 == 0 { 2 } else { 0 }, 0);
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
        stats.count_pull("T", "g", 3, 0);
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
        stats.count_pull("T", "g", 1, 0);
        stats.sample(second, 90);
        let t = info(&stats, second, 90);
        assert_eq!(t["msgPutTotalYesterdayMorning"], "50");
        assert_eq!(t["msgPutTotalTodayMorning"], "90");
        assert_eq!(t["msgGetTotalYesterdayMorning"], "3");
        assert_eq!(t["msgGetTotalTodayMorning"], "4");
    }

    #[test]
    fn items_count_over_their_windows_from_their_snapshots() {
        let stats = BrokerStats::new(0);
        // 100 bytes a message.
        let t = |n: u64| vec![("T".to_string(), n, 100 * n)];
        // Round 0 at the start: history before it is not counted.
        stats.sample_items(0, "c", &t(1000), (0, 0));
        assert_eq!(stats.item(TOPIC_PUT_NUMS, "T").unwrap(), ItemStats::default());
        assert!(stats.item(TOPIC_PUT_NUMS, "U").is_none() && stats.item("GROUP_GET_LATENCY", "T").is_none());
        // 30 messages every 10 s for 2 minutes.
        for r in 1..=12u64 {
            stats.sample_items(r as i64 * 10_000, "c", &t(1000 + 30 * r), (r, 2 * r));
        }
        let i = stats.item(TOPIC_PUT_NUMS, "T").unwrap();
        // The minute keeps 7 snapshots: the last 60 s.
        assert_eq!(i.minute, WindowStats { sum: 180, tps: 3.0, avgpt: 1.0 });
        // The hour's first snapshot is round 0's; it ends at the newest one.
        assert_eq!(i.hour.sum, 360);
        assert_eq!(i.day.sum, 360);
        assert_eq!(
            stats.item(TOPIC_PUT_SIZE, "T").unwrap().minute,
            WindowStats { sum: 18000, tps: 300.0, avgpt: 100.0 }
        );
        let b = stats.item(BROKER_PUT_NUMS, "c").unwrap();
        assert_eq!((b.minute.sum, b.minute.avgpt), (12, 2.0), "messages per put");
        assert!(stats.item(BROKER_PUT_NUMS, "other").is_none());

        // A group pulling from T after the start: counted from zero.
        stats.count_pull("T", "g", 5, 500);
        stats.count_pull("T", "g", 3, 300);
        stats.sample_items(130_000, "c", &t(1390), (13, 26));
        let g = stats.item(GROUP_GET_NUMS, "T@g").unwrap();
        assert_eq!(g.minute, WindowStats { sum: 8, tps: 0.8, avgpt: 4.0 });
        assert_eq!(g.hour.sum, 8);
        assert_eq!(stats.item(GROUP_GET_SIZE, "T@g").unwrap().minute.sum, 800);
        assert_eq!(stats.item(BROKER_GET_NUMS, "c").unwrap().minute.sum, 8);
        // No message of T@g was sent back: no such item, until one is.
        assert!(stats.item(SNDBCK_PUT_NUMS, "T@g").is_none());
        stats.count_send_back("T", "g");
        stats.count_send_back("T", "h");
        stats.sample_items(135_000, "c", &t(1390), (13, 26));
        assert_eq!(stats.item(SNDBCK_PUT_NUMS, "T@g").unwrap().minute.sum, 1);
        assert_eq!(stats.item(SNDBCK_PUT_NUMS, "T@h").unwrap().minute.sum, 1);
        assert!(stats.item(GROUP_GET_NUMS, "T@h").is_none(), "h sent back, never pulled");
        assert_eq!(
            g.to_json(),
            r#"{"statsDay":{"avgpt":4.0,"sum":8,"tps":0.0022222222222222222},"statsHour":{"avgpt":4.0,"sum":8,"tps":0.013333333333333334},"statsMinute":{"avgpt":4.0,"sum":8,"tps":0.8}}"#
        );

        // T deleted: its items and its groups' go.
        stats.sample_items(140_000, "c", &[], (13, 26));
        assert!(stats.item(TOPIC_PUT_NUMS, "T").is_none() && stats.item(GROUP_GET_NUMS, "T@g").is_none());
        assert!(stats.group_gets.lock().unwrap().is_empty());
        // A topic made again counts from zero.
        stats.sample_items(150_000, "c", &t(4), (14, 30));
        assert_eq!(stats.item(TOPIC_PUT_NUMS, "T").unwrap().minute.sum, 4);
    }

    #[test]
    fn hour_and_day_snapshots_are_kept_every_ten_minutes_and_every_hour() {
        let stats = BrokerStats::new(0);
        // One message a second for 30 hours, a round every 10 s.
        for r in 0..=(30 * 360u64) {
            stats.sample_items(r as i64 * 10_000, "c", &[("T".to_string(), 10 * r, 0)], (0, 0));
        }
        let i = stats.item(TOPIC_PUT_NUMS, "T").unwrap();
        assert_eq!(i.minute.sum, 60);
        assert_eq!(i.hour.sum, 3600, "7 snapshots 10 min apart");
        assert_eq!(i.day.sum, 24 * 3600, "25 snapshots an hour apart");
        assert!((i.day.tps - 1.0).abs() < 1e-9 && (i.hour.tps - 1.0).abs() < 1e-9);
        let items = stats.items.lock().unwrap();
        let item = &items.table[&(TOPIC_PUT_NUMS, "T".to_string())];
        assert_eq!((item.minute.len(), item.hour.len(), item.day.len()), (7, 7, 25));
    }

    #[test]
    fn the_next_midnight_is_within_a_day() {
        for now in [0i64, 1_700_000_000_000, 1_764_547_200_000, 1_764_633_599_999] {
            let m = next_local_midnight_ms(now);
            assert!(m > now && m <= now + 25 * 3_600_000, "{now} -> {m}");
        }
    }
}
