//! Retention (spec 11: fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio): old CommitLog
//! files are deleted, and the ConsumeQueues and index files that point into them follow.
//!
//! The clock and the disk-usage reading are injectable so tests need not wait hours or fill a
//! disk.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::commit_log::CommitLog;
use super::consume_queue::ConsumeQueueStore;
use super::dispatcher::Dispatcher;
use super::index::IndexService;

/// Time and disk readings used by retention.
pub trait StoreClock: Send + Sync {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
    /// The local hour of day (0..23).
    fn hour_of_day(&self) -> u8;
    /// Fraction (0..1) of the file system holding `path` that is used.
    fn disk_used_ratio(&self, path: &Path) -> f64;
}

/// The real clock and disk.
pub struct SystemClock;

impl StoreClock for SystemClock {
    fn now_ms(&self) -> i64 {
        super::commit_log::now_ms()
    }
    fn hour_of_day(&self) -> u8 {
        let secs = (self.now_ms() / 1000) as libc::time_t;
        // SAFETY: localtime_r writes into our zeroed tm and reads only `secs`.
        let tm = unsafe {
            let mut tm: libc::tm = std::mem::zeroed();
            libc::localtime_r(&secs, &mut tm);
            tm
        };
        tm.tm_hour as u8
    }
    fn disk_used_ratio(&self, path: &Path) -> f64 {
        disk_used_ratio(path).unwrap_or(0.0)
    }
}

fn statvfs(path: &Path) -> Option<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills our zeroed struct from a NUL-terminated path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut st) == 0).then_some(st)
    }
}

/// Used fraction of the file system holding `path`, as `df` and RocketMQ
/// (`UtilAll.getDiskPartitionSpaceUsedPercent`) compute it: used blocks over used plus
/// available ones, rounded up to a whole percent. Blocks reserved for root count as neither,
/// so a file system with a large reserve is not taken for a full one.
pub fn disk_used_ratio(path: &Path) -> Option<f64> {
    let st = statvfs(path)?;
    // `fsblkcnt_t` is narrower than u64 on some targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let (blocks, free, avail) = (u64::from(st.f_blocks), u64::from(st.f_bfree), u64::from(st.f_bavail));
    let used = blocks.saturating_sub(free);
    let entire = used + avail;
    if entire == 0 {
        return None;
    }
    Some((used * 100).div_ceil(entire) as f64 / 100.0)
}

/// Bytes an unprivileged writer can still put on the file system holding `path`.
pub fn disk_available_bytes(path: &Path) -> Option<u64> {
    let st = statvfs(path)?;
    // `c_ulong` and `fsblkcnt_t` are narrower than u64 on some targets.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some(u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize)))
}

/// Settings of retention.
#[derive(Debug, Clone)]
pub struct RetentionOptions {
    pub file_reserved_ms: i64,
    pub delete_hours: Vec<u8>,
    pub disk_max_used_ratio: f64,
    /// Most files deleted in one pass (RocketMQ's DELETE_FILES_BATCH_MAX).
    pub max_files_per_pass: usize,
}

/// What a pass deleted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RetentionReport {
    pub commit_log_files: usize,
    pub consume_queue_files: usize,
    pub index_files: usize,
}

/// One retention pass.
pub fn run_pass(
    cl: &CommitLog,
    cqs: &ConsumeQueueStore,
    index: Option<&IndexService>,
    dispatcher: &Dispatcher,
    clock: &Arc<dyn StoreClock>,
    opts: &RetentionOptions,
) -> std::io::Result<RetentionReport> {
    let now = clock.now_ms();
    let at_delete_hour = opts.delete_hours.contains(&clock.hour_of_day());
    let disk_full = clock.disk_used_ratio(cl.queue().dir()) > opts.disk_max_used_ratio;
    let mut report = RetentionReport::default();
    if at_delete_hour || disk_full {
        let reput = dispatcher.reput_from();
        for _ in 0..opts.max_files_per_pass {
            let removed = cl.queue().remove_first_if(|f| {
                // Never a file the dispatcher has not finished with.
                if f.end_offset() > reput {
                    return false;
                }
                if disk_full {
                    return true;
                }
                let modified = std::fs::metadata(f.path())
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(now);
                now - modified > opts.file_reserved_ms
            })?;
            match removed {
                Some(f) => {
                    tracing::info!(
                        "retention deleted CommitLog file {} ({})",
                        f.path().display(),
                        if disk_full {
                            "disk above diskMaxUsedSpaceRatio"
                        } else {
                            "older than fileReservedTime"
                        }
                    );
                    report.commit_log_files += 1;
                }
                None => break,
            }
        }
    }
    // ConsumeQueues and index files follow the CommitLog's new start.
    let cl_min = cl.min_offset() as i64;
    for q in cqs.all() {
        report.consume_queue_files += q.delete_expired(cl_min)?;
    }
    if let Some(i) = index {
        report.index_files += i.delete_expired(cl_min)?;
    }
    Ok(report)
}

/// Not a real clock: time moves only when told; for tests.
pub struct ManualClock {
    now: std::sync::atomic::AtomicI64,
    hour: std::sync::atomic::AtomicU8,
    used_ratio_millis: std::sync::atomic::AtomicU32,
}

impl ManualClock {
    /// A clock at the current time, at `hour`, with `used_ratio` of the disk used.
    pub fn new(hour: u8, used_ratio: f64) -> Arc<Self> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        Arc::new(ManualClock {
            now: now.into(),
            hour: hour.into(),
            used_ratio_millis: ((used_ratio * 1000.0) as u32).into(),
        })
    }
    pub fn advance_ms(&self, ms: i64) {
        self.now.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn set_hour(&self, h: u8) {
        self.hour.store(h, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn set_used_ratio(&self, r: f64) {
        self.used_ratio_millis.store((r * 1000.0) as u32, std::sync::atomic::Ordering::SeqCst);
    }
}

impl StoreClock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn hour_of_day(&self) -> u8 {
        self.hour.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn disk_used_ratio(&self, _path: &Path) -> f64 {
        self.used_ratio_millis.load(std::sync::atomic::Ordering::SeqCst) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The used fraction is `df`'s Use% (reserved blocks are not "used": on this project's
    /// VM root holds back most of the free blocks, and counting them put a 45% disk at 80%);
    /// the bytes available fit in the file system; a missing path has neither reading.
    #[test]
    fn statvfs_readings_match_df() {
        let dir = tempfile::tempdir().unwrap();
        let used = disk_used_ratio(dir.path()).expect("statvfs of a temporary directory");
        assert!((0.0..=1.0).contains(&used), "used ratio {used}");
        let out = std::process::Command::new("df").arg("--output=pcent").arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "df: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let df_pct: f64 = text.lines().nth(1).unwrap().trim().trim_end_matches('%').parse().unwrap();
        // Other processes may write between the two readings.
        assert!((used * 100.0 - df_pct).abs() <= 1.0, "ours {used}, df {df_pct}%");
        let free = disk_available_bytes(dir.path()).expect("statvfs of a temporary directory");
        let st = statvfs(dir.path()).unwrap();
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let total = u64::from(st.f_blocks) * u64::from(st.f_frsize);
        assert!(free <= total, "{free} available of {total}");
        assert_eq!(disk_used_ratio(&dir.path().join("missing")), None);
        assert_eq!(disk_available_bytes(&dir.path().join("missing")), None);
    }
}
