//! Retention (spec 11: fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio) and the disk guard
//! with a manual clock and disk gauge: expired CommitLog files go at a delete hour, or at any
//! hour above diskMaxUsedSpaceRatio; files of any age go above diskSpaceCleanForciblyRatio;
//! above diskSpaceWarningLevelRatio puts are refused until the disk is back at or below
//! diskSpaceCleanForciblyRatio. ConsumeQueue and index files follow; reads of deleted offsets
//! answer OFFSET_TOO_SMALL or MESSAGE_WAS_REMOVING, and a reader holding records keeps their
//! bytes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{list_files, message, store_config, wait_until};
use rmqha_core::store::retention::ManualClock;
use rmqha_core::store::{GetMessageStatus, TimeBoundary};
use rmqha_core::{Error, MessageStore, PutResult, PutStatus};

const HOUR: i64 = 3_600_000;
const FILE: i64 = 8192;

/// Fields drop in order: the store shuts down before its directory is removed (the other way
/// round, its last dispatch fails and shutdown waits out its 5 s bound).
struct Fixture {
    store: Arc<MessageStore>,
    clock: Arc<ManualClock>,
    puts: Vec<(PutResult, Vec<u8>)>,
    dir: tempfile::TempDir,
}

fn setup(messages: usize) -> Fixture {
    setup_with(messages, &[])
}

/// `setup` with more config keys.
fn setup_with(messages: usize, extra: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = vec![
        ("mappedFileSizeCommitLog", "8192"),
        ("mappedFileSizeConsumeQueue", "200"),
        ("maxIndexNum", "16"),
        ("fileReservedTime", "1"),
        ("deleteWhen", "04"),
        ("diskMaxUsedSpaceRatio", "75"),
        // The background pass would use the manual clock too: keep it out of the way.
        ("cleanResourceInterval", "3600000"),
    ];
    keys.extend_from_slice(extra);
    let cfg = store_config(dir.path(), &keys);
    let clock = ManualClock::new(10, 0.10);
    let store = MessageStore::open_with_clock(cfg, clock.clone()).unwrap();
    store.start().unwrap();
    let puts = (0..messages)
        .map(|i| {
            let m = message("Ret", (i % 2) as i32, i, 150);
            (store.put_message_sync(&m).unwrap(), m.body)
        })
        .collect();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    // On disk, as the flusher would have them in flushIntervalCommitLog: retention deletes no
    // file whose bytes are not.
    store.flush().unwrap();
    Fixture { dir, clock, store, puts }
}

/// Retention passes until one deletes nothing; the CommitLog files deleted in all.
fn retain(store: &MessageStore) -> usize {
    let mut n = 0;
    loop {
        let r = store.run_retention().unwrap();
        if r.commit_log_files == 0 {
            return n;
        }
        n += r.commit_log_files;
    }
}

fn counts(f: &Fixture) -> (usize, usize, usize) {
    let d = f.dir.path();
    (
        list_files(&d.join("commitlog")).len(),
        list_files(&d.join("consumequeue")).len(),
        list_files(&d.join("index")).len(),
    )
}

/// The checks every deletion must pass: offsets moved, queues and index followed, reads of
/// deleted offsets answer without crashing, the survivors read back.
fn check_after_deletion(f: &Fixture) {
    let store = &f.store;
    let cl_min = store.min_offset();
    assert_eq!(cl_min % FILE, 0);
    assert!(cl_min > 0);
    // A cut below what is left would drop every message: refused, naming the first offset.
    let e = store.truncate(0).unwrap_err().to_string();
    assert!(e.contains(&format!("below the CommitLog's first offset {cl_min}")), "{e}");
    assert_eq!(store.min_offset(), cl_min);
    for q in 0..2 {
        let ours: Vec<&(PutResult, Vec<u8>)> = f.puts.iter().filter(|(r, _)| r.queue_id == q).collect();
        let first_alive = ours.iter().position(|(r, _)| r.phy_offset >= cl_min).unwrap() as i64;
        assert_eq!(store.queue_min_offset("Ret", q), first_alive, "queue {q} min follows the CommitLog");
        // A search by time before every message left answers the first one left, whichever
        // boundary (RocketMQ's UPPER answers 0, an offset gone).
        for b in [TimeBoundary::Lower, TimeBoundary::Upper] {
            assert_eq!(store.queue_offset_by_time_bounded("Ret", q, 0, b), first_alive, "{b:?}");
        }
        let got = store.get_messages("Ret", q, 0, 4);
        assert_eq!((got.status, got.next_begin_offset), (GetMessageStatus::OffsetTooSmall, first_alive));
        let got = store.get_messages("Ret", q, first_alive, 4);
        assert_eq!(got.status, GetMessageStatus::Found);
        assert_eq!(got.messages()[0].body, ours[first_alive as usize].1);
    }
    // Deleted messages are gone by offset and by key; survivors are found both ways.
    let (gone, _) = &f.puts[0];
    assert!(store.message_at(gone.phy_offset).is_none());
    assert!(store.query_by_key("Ret", "key-0", 4, 0, i64::MAX).is_empty());
    let last = f.puts.len() - 1;
    let found = store.query_by_key("Ret", &format!("key-{last}"), 4, 0, i64::MAX);
    assert_eq!(found.len(), 1);
    // ConsumeQueue files wholly below the CommitLog's start are gone, and so are index files.
    for q in 0..2 {
        let cq = f.dir.path().join(format!("consumequeue/Ret/{q}"));
        for name in list_files(&cq) {
            let bytes = std::fs::read(cq.join(&name)).unwrap();
            let last_unit = rmqha_core::store::consume_queue::CqUnit::decode(&bytes[bytes.len() - 20..]);
            let full = last_unit.size > 0;
            assert!(
                !full || last_unit.phy_offset + last_unit.size as i64 > cl_min,
                "{name} should be deleted"
            );
        }
    }
    for name in list_files(&f.dir.path().join("index")) {
        let b = std::fs::read(f.dir.path().join("index").join(&name)).unwrap();
        let end_phy = i64::from_be_bytes(b[24..32].try_into().unwrap());
        assert!(end_phy >= cl_min, "index file {name} ends at {end_phy}, below {cl_min}");
    }
}

#[test]
fn expired_files_go_only_at_the_delete_hour() {
    let f = setup(400);
    let before = counts(&f);
    let cl_files = f.store.commit_log().queue().file_count();
    assert!(before.0 >= 8 && before.1 >= 8 && before.2 >= 8, "{before:?}");
    // Fresh files, not the delete hour: nothing.
    assert_eq!(retain(&f.store), 0);
    // The delete hour, but nothing is older than fileReservedTime: nothing.
    f.clock.set_hour(4);
    assert_eq!(retain(&f.store), 0);
    // Old enough, but not the delete hour: nothing.
    f.clock.set_hour(10);
    f.clock.advance_ms(2 * HOUR);
    assert_eq!(retain(&f.store), 0);
    assert_eq!(counts(&f), before);
    assert_eq!(f.store.min_offset(), 0);
    // Old enough at the delete hour: every file but the one being written.
    f.clock.set_hour(4);
    let deleted = retain(&f.store);
    assert_eq!(deleted, cl_files - 1);
    assert_eq!(f.store.commit_log().queue().file_count(), 1);
    let after = counts(&f);
    assert!(after.0 <= 2, "the active file and perhaps the one pre-allocated after it: {after:?}");
    assert!(after.1 < before.1 && after.2 < before.2, "{before:?} -> {after:?}");
    check_after_deletion(&f);
    // New puts go on; a restart keeps the new minimums.
    let r = f.store.put_message_sync(&message("Ret", 0, 10_000, 150)).unwrap();
    assert!(r.status.is_stored());
    let cfg = f.store.config().clone();
    let mins: Vec<i64> = (0..2).map(|q| f.store.queue_min_offset("Ret", q)).collect();
    let cl_min = f.store.min_offset();
    f.store.shutdown();
    let Fixture { store, dir: _dir, .. } = f;
    drop(store);
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert_eq!(store.min_offset(), cl_min);
    assert_eq!((0..2).map(|q| store.queue_min_offset("Ret", q)).collect::<Vec<_>>(), mins);
}

#[test]
fn above_max_used_ratio_expired_files_go_at_any_hour() {
    let f = setup(300);
    let cl_files = f.store.commit_log().queue().file_count();
    // Above diskMaxUsedSpaceRatio, below diskSpaceCleanForciblyRatio, not the delete hour:
    // nothing has expired, so nothing goes (RocketMQ keeps young files up to 85%).
    f.clock.set_used_ratio(0.80);
    assert_eq!(retain(&f.store), 0);
    assert_eq!(f.store.min_offset(), 0);
    // Once they are older than fileReservedTime they go at once, without waiting for 04.
    f.clock.advance_ms(2 * HOUR);
    assert_eq!(retain(&f.store), cl_files - 1);
    check_after_deletion(&f);
    // Puts were never refused on the way.
    assert!(!f.store.disk_guard().is_full());
    assert!(f.store.put_message_sync(&message("Ret", 0, 10_000, 150)).unwrap().status.is_stored());
}

#[test]
fn above_clean_forcibly_ratio_files_go_whatever_their_age() {
    let f = setup(300);
    let cl_files = f.store.commit_log().queue().file_count();
    // Not expired, not the delete hour, but the disk is above diskSpaceCleanForciblyRatio.
    f.clock.set_used_ratio(0.86);
    let deleted = retain(&f.store);
    assert_eq!(deleted, cl_files - 1);
    check_after_deletion(&f);
    // Below the ratios again: new files stay.
    f.clock.set_used_ratio(0.50);
    for i in 0..100 {
        f.store.put_message_sync(&message("Ret", 0, 20_000 + i, 150)).unwrap();
    }
    assert!(f.store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(retain(&f.store), 0);
}

#[test]
fn clean_file_forcibly_disabled_keeps_young_files_on_a_full_disk() {
    let f = setup_with(300, &[("cleanFileForciblyEnable", "false")]);
    let cl_files = f.store.commit_log().queue().file_count();
    f.clock.set_used_ratio(0.95);
    assert_eq!(retain(&f.store), 0, "young files stay without cleanFileForciblyEnable");
    assert_eq!(f.store.commit_log().queue().file_count(), cl_files);
    // The store is still marked full; expired files still go.
    assert!(f.store.disk_guard().is_full());
    f.clock.advance_ms(2 * HOUR);
    assert_eq!(retain(&f.store), cl_files - 1);
}

/// A full file whose bytes the ASYNC flusher has not reached yet stays until they are on
/// disk. Deleting it left the flushed offset below the first file, where the flusher found
/// no file to flush, forever: nothing was flushed again (a SYNC_FLUSH group commit spun and
/// timed every put out).
#[test]
fn files_go_only_once_flushed_and_the_flusher_goes_on_after_a_deletion() {
    let f = setup_with(0, &[("flushCommitLogTimed", "true"), ("flushIntervalCommitLog", "3600000")]);
    for i in 0..5 {
        f.store.put_message_sync(&message("Ret", 0, i, 150)).unwrap();
    }
    let flushed = f.store.flush().unwrap();
    assert!(flushed > 0 && flushed < FILE, "flushed to {flushed}, inside the first file");
    for i in 5..300 {
        f.store.put_message_sync(&message("Ret", 0, i, 150)).unwrap();
    }
    assert!(f.store.wait_dispatched(Duration::from_secs(10)));
    let cl_files = f.store.commit_log().queue().file_count();
    f.clock.set_used_ratio(0.86);
    retain(&f.store);
    assert!(
        f.store.min_offset() <= f.store.flushed_offset(),
        "deleted up to {} with only {} bytes flushed",
        f.store.min_offset(),
        f.store.flushed_offset()
    );
    let max = f.store.max_offset();
    assert_eq!(f.store.flush().unwrap(), max, "a flush covers everything written");
    assert_eq!(f.store.flushed_offset(), max);
    // Now on disk, they go.
    assert_eq!(retain(&f.store) + (f.store.commit_log().queue().file_count()), cl_files);
    assert_eq!(f.store.commit_log().queue().file_count(), 1);
    assert_eq!(f.store.flush().unwrap(), max);
    let r = f.store.put_message_sync(&message("Ret", 0, 1_000, 150)).unwrap();
    assert_eq!(f.store.flush().unwrap(), r.phy_offset + r.size as i64);
}

/// Above diskSpaceWarningLevelRatio (puts refused) files go whatever their age, as above
/// diskSpaceCleanForciblyRatio, also where a config sets the warning level lower: only
/// expired files went then, and puts stayed refused for up to fileReservedTime.
#[test]
fn above_a_lower_warning_level_files_go_whatever_their_age() {
    let f = setup_with(300, &[("diskSpaceWarningLevelRatio", "60"), ("diskSpaceCleanForciblyRatio", "80")]);
    let cl_files = f.store.commit_log().queue().file_count();
    f.clock.set_used_ratio(0.70);
    assert_eq!(retain(&f.store), cl_files - 1);
    assert!(f.store.disk_guard().is_full(), "marked full above the warning level");
    check_after_deletion(&f);
}

/// Puts one message and expects the disk guard to refuse it, storing nothing.
fn assert_refused(f: &Fixture, i: usize, used_pct: &str) {
    let before = f.store.max_offset();
    match f.store.put_message_sync(&message("Ret", 0, 30_000 + i, 150)) {
        Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason }) => {
            for needle in ["diskSpaceWarningLevelRatio (90%)", "diskSpaceCleanForciblyRatio (85%)", used_pct]
            {
                assert!(reason.contains(needle), "{needle:?} not in {reason:?}");
            }
            assert!(reason.contains(&f.dir.path().join("commitlog").display().to_string()), "{reason}");
        }
        other => panic!("expected SERVICE_NOT_AVAILABLE, got {other:?}"),
    }
    assert_eq!(f.store.max_offset(), before, "a refused put stored nothing");
}

#[test]
fn above_warning_level_puts_are_refused_until_back_at_clean_forcibly_ratio() {
    let f = setup_with(50, &[("cleanFileForciblyEnable", "false")]);
    // At the warning level exactly: still accepted (RocketMQ compares with `>`).
    f.clock.set_used_ratio(0.90);
    retain(&f.store);
    assert!(!f.store.disk_guard().is_full());
    assert!(f.store.put_message_sync(&message("Ret", 0, 1, 150)).unwrap().status.is_stored());
    // Above it: marked full at the next reading; every put is refused with a reason.
    f.clock.set_used_ratio(0.913);
    retain(&f.store);
    assert!(f.store.disk_guard().is_full());
    assert!((f.store.disk_guard().used_ratio() - 0.913).abs() < 1e-6);
    for i in 0..3 {
        assert_refused(&f, i, "91.3% used");
    }
    let batch = [message("Ret", 1, 40_000, 150), message("Ret", 1, 40_001, 150)];
    assert!(matches!(
        f.store.put_messages(&batch),
        Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, .. })
    ));
    // Between the two ratios: still refused (no flapping at the threshold).
    f.clock.set_used_ratio(0.88);
    retain(&f.store);
    assert_refused(&f, 10, "91.3% used");
    // At diskSpaceCleanForciblyRatio: accepted again, and what was stored before reads back.
    f.clock.set_used_ratio(0.85);
    retain(&f.store);
    assert!(!f.store.disk_guard().is_full());
    let r = f.store.put_message_sync(&message("Ret", 0, 50_000, 150)).unwrap();
    assert_eq!(r.status, PutStatus::PutOk);
    assert!(f.store.wait_dispatched(Duration::from_secs(10)));
    for (p, body) in &f.puts {
        assert_eq!(&f.store.message_at(p.phy_offset).unwrap().body, body);
    }
}

/// The retention thread takes the readings by itself, every cleanResourceInterval.
#[test]
fn the_retention_thread_marks_the_store_full_and_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        store_config(dir.path(), &[("mappedFileSizeCommitLog", "8192"), ("cleanResourceInterval", "20")]);
    let clock = ManualClock::new(10, 0.10);
    let store = MessageStore::open_with_clock(cfg, clock.clone()).unwrap();
    store.start().unwrap();
    assert_eq!(store.put_message_sync(&message("Ret", 0, 1, 150)).unwrap().status, PutStatus::PutOk);
    clock.set_used_ratio(0.97);
    assert!(wait_until(Duration::from_secs(10), || store.disk_guard().is_full()));
    let max = store.max_offset();
    match store.put_message_sync(&message("Ret", 0, 2, 150)) {
        Err(Error::PutFailed { status: PutStatus::ServiceNotAvailable, reason }) => {
            assert!(reason.contains("97.0% used"), "{reason}");
        }
        other => panic!("expected SERVICE_NOT_AVAILABLE, got {other:?}"),
    }
    assert_eq!(store.max_offset(), max);
    clock.set_used_ratio(0.40);
    assert!(wait_until(Duration::from_secs(10), || !store.disk_guard().is_full()));
    assert_eq!(store.put_message_sync(&message("Ret", 0, 3, 150)).unwrap().status, PutStatus::PutOk);
    store.shutdown();
}

/// The retention thread waits deleteCommitLogFilesInterval between two deletions of one pass,
/// as RocketMQ does, so that deleting many files spreads its I/O.
#[test]
fn the_retention_thread_spaces_deletions_by_delete_commit_log_files_interval() {
    const PAUSE_MS: u128 = 300;
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(
        dir.path(),
        &[
            ("mappedFileSizeCommitLog", "8192"),
            ("mappedFileSizeConsumeQueue", "200"),
            ("cleanResourceInterval", "20"),
            ("deleteCommitLogFilesInterval", "300"),
        ],
    );
    let clock = ManualClock::new(10, 0.10);
    let store = MessageStore::open_with_clock(cfg, clock.clone()).unwrap();
    store.start().unwrap();
    for i in 0..200 {
        store.put_message_sync(&message("Ret", 0, i, 150)).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let files = store.commit_log().queue().file_count();
    assert!(
        (4..=10).contains(&files),
        "{files} files: one pass (at most 10 deletions) must delete all but one"
    );
    // Above diskSpaceCleanForciblyRatio every file but the one being written goes, in one pass.
    clock.set_used_ratio(0.86);
    let mut seen = files;
    let mut deletions = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen > 1 && std::time::Instant::now() < deadline {
        let now = store.commit_log().queue().file_count();
        if now < seen {
            deletions.push((std::time::Instant::now(), seen - now));
            seen = now;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    store.shutdown();
    assert_eq!(seen, 1, "deletions seen: {deletions:?}");
    assert!(deletions.iter().all(|&(_, n)| n == 1), "one file at a time: {deletions:?}");
    // Each observation may come late by one poll and a scheduling delay, never early.
    let span = deletions.last().unwrap().0 - deletions[0].0;
    let want = (deletions.len() as u128 - 1) * PAUSE_MS;
    assert!(
        span.as_millis() + 100 >= want,
        "{} deletions over {span:?}; want at least {want} ms",
        deletions.len()
    );
}

#[test]
fn readers_survive_deletion_under_their_feet() {
    let f = setup(400);
    // A reader holds a batch of records from the oldest file.
    let held = f.store.get_messages("Ret", 0, 0, 16);
    assert_eq!(held.status, GetMessageStatus::Found);
    let held_bodies: Vec<Vec<u8>> = f
        .puts
        .iter()
        .filter(|(r, _)| r.queue_id == 0)
        .take(held.records.len())
        .map(|(_, b)| b.clone())
        .collect();
    // Other readers keep reading every offset while files are deleted.
    let stop = Arc::new(AtomicBool::new(false));
    // How often each reader met the new minimum.
    let too_small: Arc<[AtomicUsize; 2]> = Arc::new(Default::default());
    let readers: Vec<_> = (0..2)
        .map(|q| {
            let (store, stop, too_small) = (f.store.clone(), stop.clone(), too_small.clone());
            let bodies: Vec<Vec<u8>> =
                f.puts.iter().filter(|(r, _)| r.queue_id == q).map(|(_, b)| b.clone()).collect();
            std::thread::spawn(move || {
                let mut statuses = std::collections::HashSet::new();
                let mut off = 0i64;
                while !stop.load(Ordering::Acquire) {
                    let got = store.get_messages("Ret", q, off, 8);
                    statuses.insert(got.status);
                    match got.status {
                        GetMessageStatus::Found => {
                            for m in got.messages() {
                                assert_eq!(m.body, bodies[m.queue_offset as usize]);
                            }
                        }
                        GetMessageStatus::OffsetTooSmall => {
                            too_small[q as usize].fetch_add(1, Ordering::AcqRel);
                        }
                        GetMessageStatus::MessageWasRemoving => {}
                        other => panic!("unexpected {other} at {off}"),
                    }
                    off = (off + 7) % (bodies.len() as i64);
                }
                statuses
            })
        })
        .collect();
    f.clock.set_used_ratio(0.9);
    let deleted = retain(&f.store);
    assert!(deleted > 0);
    assert!(f.store.message_at(held.records[0].phy_offset).is_none(), "its file is gone");
    // The held records still read back whole: the mapping outlives the deleted file.
    let msgs = held.messages();
    assert_eq!(msgs.len(), held.records.len());
    for (m, b) in msgs.iter().zip(&held_bodies) {
        assert_eq!(&m.body, b);
    }
    // Let the readers meet the new minimum before they stop.
    assert!(wait_until(Duration::from_secs(20), || too_small.iter().all(|n| n.load(Ordering::Acquire) >= 2)));
    stop.store(true, Ordering::Release);
    for r in readers {
        let statuses = r.join().expect("a reader panicked");
        assert!(statuses.contains(&GetMessageStatus::OffsetTooSmall), "{statuses:?}");
    }
    check_after_deletion(&f);
}
