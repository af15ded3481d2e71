//! The clock of store timestamps: milliseconds since the epoch, read under the put lock as
//! RocketMQ reads `System.currentTimeMillis()`.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the epoch (`CLOCK_REALTIME`), as `System.currentTimeMillis()`,
/// without `SystemTime`'s `Duration` and 128-bit arithmetic, which cost a third as much again
/// as the clock read on the put path. A clock before 1970 reads as 0 rather than failing.
pub fn now_ms() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } == 0 {
        // `time_t` and `c_long` are 32 bits wide on some targets.
        #[allow(clippy::unnecessary_cast)]
        let ms = ts.tv_sec as i64 * 1000 + ts.tv_nsec as i64 / 1_000_000;
        ms.max(0)
    } else {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    }
}

/// How old a millisecond reading `StoreClock` may hand out again.
const REUSE_NS: u64 = 50_000;
/// How long `StoreClock` times the TSC against the monotonic clock before trusting its rate.
const CALIBRATE: std::time::Duration = std::time::Duration::from_millis(20);
/// A measurement that ran longer than this starts again: it ends at the first put after
/// `CALIBRATE`, which on an idle store may be hours later, and over hours a counter that
/// runs on while the monotonic clock stops (a suspended machine) would read as a much faster
/// clock, and readings would be reused for seconds.
const CALIBRATE_MAX: std::time::Duration = std::time::Duration::from_millis(100);
/// No time-stamp counter runs faster than this many ticks per nanosecond (10 GHz).
const MAX_TICKS_PER_NS: u128 = 10;

/// The reuse window in ticks for a counter that advanced `ticks` over `elapsed_ns` of the
/// monotonic clock; `None` if that is no clock to trust (it went backwards, barely moved, or
/// ran faster than any real counter).
fn reuse_window(ticks: u128, elapsed_ns: u128) -> Option<u64> {
    if ticks >= u64::MAX as u128 / 2 || elapsed_ns == 0 || ticks > elapsed_ns * MAX_TICKS_PER_NS {
        return None;
    }
    let window = ticks * REUSE_NS as u128 / elapsed_ns;
    (window > 0).then_some(window as u64)
}

/// The put path's clock, kept under the put lock. While puts come faster than one every
/// `REUSE_NS` (50 µs), it reads the CPU's time-stamp counter (about 8 ns on the project's VM)
/// and hands out the millisecond it read from the system clock at most 50 µs before (about
/// 19 ns through the vDSO, plus the conversion): a timestamp at most 50 µs late, one
/// millisecond short at worst, where RocketMQ's own clock reading is only as exact as the
/// moment the lock was taken.
///
/// Only on x86-64 with an invariant TSC (constant rate, counting in every power state, CPUID
/// leaf 0x8000_0007), and only after its rate was measured over the first 20 ms; otherwise,
/// and whenever the counter is not between 0 and 50 µs past the last reading (another core's
/// counter behind this one's, a migrated VM), it reads the system clock.
pub struct StoreClock {
    /// The reuse window in TSC ticks; 0 reads the system clock every time.
    window: u64,
    last_tsc: u64,
    last_ms: i64,
    /// Where the rate measurement started, while it runs.
    calibrating: Option<(u64, Instant)>,
}

impl Default for StoreClock {
    fn default() -> Self {
        let calibrating = invariant_tsc().then(|| (tsc(), Instant::now()));
        StoreClock { window: 0, last_tsc: 0, last_ms: 0, calibrating }
    }
}

impl StoreClock {
    /// Milliseconds since the epoch, at most `REUSE_NS` old.
    pub fn now_ms(&mut self) -> i64 {
        if self.window > 0 {
            let now = tsc();
            if now.wrapping_sub(self.last_tsc) < self.window {
                return self.last_ms;
            }
            self.last_tsc = now;
        } else if let Some((start, at)) = self.calibrating {
            let elapsed = at.elapsed();
            if elapsed > CALIBRATE_MAX {
                self.calibrating = Some((tsc(), Instant::now()));
            } else if elapsed >= CALIBRATE {
                let now = tsc();
                // A counter that went backwards or barely moved is no clock: never reuse.
                if let Some(window) = reuse_window(now.wrapping_sub(start) as u128, elapsed.as_nanos()) {
                    self.window = window;
                    self.last_tsc = now;
                }
                self.calibrating = None;
            }
        }
        self.last_ms = now_ms();
        self.last_ms
    }
}

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU and has no preconditions.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0000 says which extended leaves do.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rate measurement: a 2.5 GHz counter over 20 ms gives a 50 µs window of 125,000
    /// ticks; a counter that went backwards, stood still, or ran at more than 10 GHz (a
    /// suspended machine's counter against a stopped monotonic clock) is not trusted.
    #[test]
    fn the_reuse_window_comes_only_from_a_plausible_counter() {
        assert_eq!(reuse_window(50_000_000, 20_000_000), Some(125_000));
        assert_eq!(reuse_window(0, 20_000_000), None);
        assert_eq!(reuse_window(u64::MAX as u128 - 5, 20_000_000), None, "went backwards");
        assert_eq!(reuse_window(50_000_000, 0), None);
        // An hour of suspended counting over 20 ms of monotonic time.
        assert_eq!(reuse_window(3600 * 2_500_000_000, 20_000_000), None);
        assert_eq!(reuse_window(200_000_000, 20_000_000), Some(500_000), "10 GHz is the limit");
    }

    /// A measurement that ran past `CALIBRATE_MAX` (an idle store, its first put hours after
    /// start) starts again instead of deriving a rate from it.
    #[test]
    fn a_long_measurement_starts_again() {
        if !invariant_tsc() {
            return;
        }
        let mut clock = StoreClock::default();
        // A second: well past CALIBRATE_MAX, and within any machine's uptime.
        let Some(long_ago) = Instant::now().checked_sub(std::time::Duration::from_secs(1)) else { return };
        clock.calibrating = Some((tsc().wrapping_sub(1_000_000), long_ago));
        clock.now_ms();
        assert_eq!(clock.window, 0);
        let (_, at) = clock.calibrating.expect("measuring again");
        assert!(at.elapsed() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn now_ms_agrees_with_system_time() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
        let ms = now_ms();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
        assert!(before <= ms && ms <= after, "{before} <= {ms} <= {after}");
    }

    /// Every reading, before and after the TSC's rate is measured, lies between the system
    /// clock read just before it (less the one millisecond a 50 µs old reading can lose) and
    /// the one read just after: a clock that kept reusing a reading would fall behind.
    #[test]
    fn store_clock_is_never_more_than_a_millisecond_behind() {
        let mut clock = StoreClock::default();
        let until = Instant::now() + std::time::Duration::from_millis(300);
        let (mut calls, mut pauses) = (0u64, 0u32);
        while Instant::now() < until {
            let before = now_ms();
            let ms = clock.now_ms();
            let after = now_ms();
            assert!(before - 1 <= ms && ms <= after, "{before} - 1 <= {ms} <= {after} at call {calls}");
            calls += 1;
            if calls % 100_000 == 0 && pauses < 20 {
                // Gaps longer than the reuse window, as between puts of a quiet producer.
                std::thread::sleep(std::time::Duration::from_millis(2));
                pauses += 1;
            }
        }
        if invariant_tsc() {
            assert!(clock.window > 0, "the TSC's rate was not measured in 300 ms");
        }
    }
}
