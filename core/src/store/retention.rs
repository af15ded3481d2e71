//! Retention (spec 11: fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio) and RocketMQ's
//! disk guard: old CommitLog files are deleted, and the ConsumeQueues and index files that
//! point into them follow; a disk that is nearly full makes the store refuse puts.
//!
//! The thresholds are RocketMQ's (`CleanCommitLogService.isSpaceToDelete`):
//! - above `diskMaxUsedSpaceRatio` (75%) a pass runs at once, outside `deleteWhen`, but still
//!   deletes only files older than `fileReservedTime`;
//! - above `diskSpaceCleanForciblyRatio` (85%) it deletes files whatever their age
//!   (`cleanFileForciblyEnable`);
//! - above `diskSpaceWarningLevelRatio` (90%) the store is marked full and refuses puts with
//!   SERVICE_NOT_AVAILABLE, until a reading is at or below `diskSpaceCleanForciblyRatio`.
//!
//! Both the CommitLog's and the ConsumeQueues' file systems are read, and the fuller one counts
//! (RocketMQ reads both too, but a ConsumeQueue disk with room clears the flag its CommitLog
//! disk set).
//!
//! The clock and the disk-usage reading are injectable so tests need not wait hours or fill a
//! disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use super::commit_log::CommitLog;
use super::consume_queue::ConsumeQueueStore;
use super::dirs::LogDirs;
use super::dispatcher::Dispatcher;
use super::index::IndexService;

/// Time and disk readings used by retention.
pub trait StoreClock: Send + Sync {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
    /// The local hour of day (0..23).
    fn hour_of_day(&self) -> u8;
    /// Fraction (0..1) of the file system holding `path` that is used; `None` when it cannot
    /// be read (a directory gone, a disk unmounted under it).
    fn disk_used_ratio(&self, path: &Path) -> Option<f64>;
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
    fn disk_used_ratio(&self, path: &Path) -> Option<f64> {
        disk_used_ratio(path)
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

/// Settings of retention and of the disk guard (fractions, not percentages).
#[derive(Debug, Clone)]
pub struct RetentionOptions {
    pub file_reserved_ms: i64,
    pub delete_hours: Vec<u8>,
    /// `diskMaxUsedSpaceRatio`: above it a pass runs at once (expired files only).
    pub disk_max_used_ratio: f64,
    /// `diskSpaceCleanForciblyRatio`: above it files go whatever their age; at or below it a
    /// full store accepts puts again.
    pub clean_forcibly_ratio: f64,
    /// `diskSpaceWarningLevelRatio`: above it the store refuses puts.
    pub warning_level_ratio: f64,
    /// `cleanFileForciblyEnable`.
    pub clean_forcibly_enable: bool,
    /// The ConsumeQueues' directory, read beside the CommitLog's.
    pub consume_queue_dir: PathBuf,
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

/// RocketMQ's disk-full flag (`RunningFlags`' DISK_FULL bit), with the reading that set it.
#[derive(Debug, Default)]
pub struct DiskGuard {
    full: AtomicBool,
    /// The last reading's used fraction, in millionths.
    used_ppm: AtomicU32,
    /// Why puts are refused while `full`.
    reason: Mutex<String>,
}

impl DiskGuard {
    /// Whether puts are refused (one relaxed load: the put path asks on every put).
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// The used fraction of the fuller of the store's file systems at the last reading.
    pub fn used_ratio(&self) -> f64 {
        self.used_ppm.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Why puts are refused, naming the disk, its usage and the thresholds.
    pub fn reason(&self) -> String {
        self.reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes a reading of the store's file systems and sets or clears the flag; returns the
    /// used fraction of the fuller one. A CommitLog over several directories counts by its
    /// emptiest writable one, as RocketMQ's (new files can still go there), and a directory
    /// above `diskSpaceCleanForciblyRatio` gets no new file while another has room. A
    /// directory that cannot be read gets no new file and does not count (it would pass for
    /// the emptiest, and hide the others' fullness); a file system that cannot be read at all
    /// counts as empty.
    pub fn check(&self, clock: &dyn StoreClock, cl_dirs: &LogDirs, opts: &RetentionOptions) -> f64 {
        let (mut cl, mut commit_log_dir) = (None, cl_dirs.primary());
        for dir in cl_dirs.writable() {
            let used = clock.disk_used_ratio(dir);
            if cl_dirs.is_multi() {
                cl_dirs.set_full(dir, used.is_none_or(|u| u > opts.clean_forcibly_ratio));
            }
            if let Some(u) = used.filter(|u| cl.is_none_or(|c| *u < c)) {
                (cl, commit_log_dir) = (Some(u), dir);
            }
        }
        let cl = cl.unwrap_or(0.0);
        let cq = clock.disk_used_ratio(&opts.consume_queue_dir).unwrap_or(0.0);
        let (used, dir) = if cq > cl { (cq, opts.consume_queue_dir.as_path()) } else { (cl, commit_log_dir) };
        self.used_ppm.store((used.clamp(0.0, 1.0) * 1e6) as u32, Ordering::Relaxed);
        let pct = |r: f64| r * 100.0;
        // Puts resume at or below the lower of the two ratios (a config may set the warning
        // level under the forcible-cleaning one).
        let (resume_key, resume) = if opts.clean_forcibly_ratio <= opts.warning_level_ratio {
            ("diskSpaceCleanForciblyRatio", opts.clean_forcibly_ratio)
        } else {
            ("diskSpaceWarningLevelRatio", opts.warning_level_ratio)
        };
        if used > opts.warning_level_ratio {
            let reason = format!(
                "the disk holding {} is {:.1}% used, above diskSpaceWarningLevelRatio ({:.0}%): \
                 puts are refused until it is at or below {resume_key} ({:.0}%)",
                dir.display(),
                pct(used),
                pct(opts.warning_level_ratio),
                pct(resume),
            );
            *self.reason.lock().unwrap_or_else(|e| e.into_inner()) = reason.clone();
            if !self.full.swap(true, Ordering::AcqRel) {
                tracing::error!("store marked full: {reason}");
            }
        } else if used <= resume && self.full.swap(false, Ordering::AcqRel) {
            tracing::info!(
                "the disk holding {} is {:.1}% used, at or below {resume_key} ({:.0}%): puts accepted again",
                dir.display(),
                pct(used),
                pct(resume),
            );
        }
        used
    }
}

/// One retention pass; it also takes the disk guard's reading. `between` runs between two
/// CommitLog deletions (the background thread waits `deleteCommitLogFilesInterval` there, as
/// RocketMQ does, so that deleting many files spreads its I/O); when it returns false, the
/// pass deletes no more CommitLog files.
#[allow(clippy::too_many_arguments)]
pub fn run_pass(
    cl: &CommitLog,
    cqs: &ConsumeQueueStore,
    index: Option<&IndexService>,
    dispatcher: &Dispatcher,
    clock: &Arc<dyn StoreClock>,
    guard: &DiskGuard,
    opts: &RetentionOptions,
    between: &dyn Fn() -> bool,
) -> std::io::Result<RetentionReport> {
    let now = clock.now_ms();
    let at_delete_hour = opts.delete_hours.contains(&clock.hour_of_day());
    let used = guard.check(clock.as_ref(), cl.queue().dirs(), opts);
    // Above either of the two upper ratios files go whatever their age, as RocketMQ's
    // `cleanImmediately`: a config may set the warning level (puts refused) below the
    // forcible one, and only expired files going then would keep puts refused for as long as
    // fileReservedTime.
    let (forcing_key, forcing) = if opts.warning_level_ratio < opts.clean_forcibly_ratio {
        ("diskSpaceWarningLevelRatio", opts.warning_level_ratio)
    } else {
        ("diskSpaceCleanForciblyRatio", opts.clean_forcibly_ratio)
    };
    let clean_at_once = opts.clean_forcibly_enable && used > forcing;
    let space_to_delete = used > opts.disk_max_used_ratio || used > forcing;
    let mut report = RetentionReport::default();
    if at_delete_hour || space_to_delete {
        // Never a file the dispatcher has not finished with, nor one whose bytes are not on
        // disk yet: deleting those left the flushed position below the first file.
        let done = dispatcher.reput_from().min(cl.flushed_offset());
        for n in 0..opts.max_files_per_pass {
            if n > 0 && !between() {
                break;
            }
            let removed = cl.queue().remove_first_if(|f| {
                if f.end_offset() > done {
                    return false;
                }
                if clean_at_once {
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
                    if clean_at_once {
                        tracing::warn!(
                            "retention deleted CommitLog file {} before fileReservedTime: the disk is {:.1}% used, \
                             above {forcing_key} ({:.0}%)",
                            f.path().display(),
                            used * 100.0,
                            forcing * 100.0
                        );
                    } else {
                        tracing::info!(
                            "retention deleted CommitLog file {} (older than fileReservedTime)",
                            f.path().display()
                        );
                    }
                    report.commit_log_files += 1;
                }
                None => break,
            }
        }
    }
    // ConsumeQueues and index files follow the CommitLog's new start, and deleted topics
    // whose records are all gone are forgotten.
    let cl_min = cl.min_offset() as i64;
    dispatcher.deleted_topics().forget_below(cl_min as u64).map_err(std::io::Error::other)?;
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
    fn disk_used_ratio(&self, _path: &Path) -> Option<f64> {
        Some(self.used_ratio_millis.load(std::sync::atomic::Ordering::SeqCst) as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk gauge that reads each directory's file system separately.
    struct TwoDisks {
        commit_log: f64,
        consume_queue: f64,
    }

    impl StoreClock for TwoDisks {
        fn now_ms(&self) -> i64 {
            0
        }
        fn hour_of_day(&self) -> u8 {
            0
        }
        fn disk_used_ratio(&self, path: &Path) -> Option<f64> {
            Some(if path.ends_with("consumequeue") { self.consume_queue } else { self.commit_log })
        }
    }

    fn opts() -> RetentionOptions {
        RetentionOptions {
            file_reserved_ms: 0,
            delete_hours: vec![],
            disk_max_used_ratio: 0.75,
            clean_forcibly_ratio: 0.85,
            warning_level_ratio: 0.90,
            clean_forcibly_enable: true,
            consume_queue_dir: PathBuf::from("/store/consumequeue"),
            max_files_per_pass: 10,
        }
    }

    /// The fuller of the two file systems counts, whichever it is, and the reason names it.
    /// (RocketMQ reads both too, but a ConsumeQueue disk with room clears the flag that a full
    /// CommitLog disk set.)
    #[test]
    fn the_fuller_disk_sets_and_clears_the_flag() {
        let cl = &LogDirs::single(Path::new("/data/commitlog"));
        let g = DiskGuard::default();
        let used = g.check(&TwoDisks { commit_log: 0.95, consume_queue: 0.20 }, cl, &opts());
        assert_eq!(used, 0.95);
        assert!(g.is_full());
        assert!(g.reason().contains("/data/commitlog is 95.0% used"), "{}", g.reason());
        // Between the ratios on both: still full.
        g.check(&TwoDisks { commit_log: 0.86, consume_queue: 0.20 }, cl, &opts());
        assert!(g.is_full());
        g.check(&TwoDisks { commit_log: 0.85, consume_queue: 0.20 }, cl, &opts());
        assert!(!g.is_full());
        // The ConsumeQueues' disk alone can fill the store.
        g.check(&TwoDisks { commit_log: 0.30, consume_queue: 0.91 }, cl, &opts());
        assert!(g.is_full());
        assert!(g.reason().contains("/store/consumequeue is 91.0% used"), "{}", g.reason());
        assert!((g.used_ratio() - 0.91).abs() < 1e-6);
        g.check(&TwoDisks { commit_log: 0.30, consume_queue: 0.50 }, cl, &opts());
        assert!(!g.is_full());
        // A warning level under the forcible-cleaning ratio: puts resume at the lower one.
        let low = RetentionOptions { warning_level_ratio: 0.60, clean_forcibly_ratio: 0.80, ..opts() };
        g.check(&TwoDisks { commit_log: 0.70, consume_queue: 0.0 }, cl, &low);
        assert!(g.is_full());
        assert!(g.reason().contains("at or below diskSpaceWarningLevelRatio (60%)"), "{}", g.reason());
        g.check(&TwoDisks { commit_log: 0.65, consume_queue: 0.0 }, cl, &low);
        assert!(g.is_full());
        g.check(&TwoDisks { commit_log: 0.60, consume_queue: 0.0 }, cl, &low);
        assert!(!g.is_full());
    }

    /// A gauge with one reading per directory.
    struct Disks(Vec<(&'static str, f64)>);

    impl StoreClock for Disks {
        fn now_ms(&self) -> i64 {
            0
        }
        fn hour_of_day(&self) -> u8 {
            0
        }
        fn disk_used_ratio(&self, path: &Path) -> Option<f64> {
            self.0.iter().find(|(p, _)| path == Path::new(p)).map(|(_, r)| *r)
        }
    }

    /// A CommitLog over several directories, as RocketMQ's `isSpaceToDelete`: the emptiest
    /// writable one counts (new files can go there), and one above
    /// diskSpaceCleanForciblyRatio gets no new file while another has room.
    #[test]
    fn several_commit_log_directories_count_by_the_emptiest() {
        let dirs =
            LogDirs::new(&[PathBuf::from("/d1"), PathBuf::from("/d2")], &[PathBuf::from("/old")]).unwrap();
        let g = DiskGuard::default();
        let disks =
            |d1, d2| Disks(vec![("/d1", d1), ("/d2", d2), ("/old", 0.99), ("/store/consumequeue", 0.1)]);
        assert_eq!(g.check(&disks(0.95, 0.40), &dirs, &opts()), 0.40);
        assert!(!g.is_full(), "a read-only directory's disk does not count");
        assert_eq!(dirs.for_file(0, 10), Path::new("/d2"));
        assert_eq!(dirs.for_file(10, 10), Path::new("/d2"), "the full one is skipped");
        assert_eq!(g.check(&disks(0.95, 0.93), &dirs, &opts()), 0.93);
        assert!(g.is_full());
        assert!(g.reason().contains("/d2 is 93.0% used"), "{}", g.reason());
        assert_eq!(dirs.for_file(0, 10), Path::new("/d1"), "every one full: turns again");
        g.check(&disks(0.50, 0.93), &dirs, &opts());
        assert!(!g.is_full());
        assert_eq!(dirs.for_file(10, 10), Path::new("/d1"));
        // A directory without a reading (its disk gone) does not pass for the emptiest.
        let gone = Disks(vec![("/d2", 0.95), ("/store/consumequeue", 0.1)]);
        assert_eq!(g.check(&gone, &dirs, &opts()), 0.95);
        assert!(g.is_full(), "{}", g.reason());
        assert!(g.reason().contains("/d2 is 95.0% used"), "{}", g.reason());
    }

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
