//! [`SlaveSynchronizer`]: pulls the master's four tables into the slave's [`ConfigTables`],
//! at once, every interval, and on demand.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crate::metadata::json::object_from_slice_lenient;
use crate::metadata::{
    ConfigTables, ConsumerOffsetWrapper, MetadataError, SubscriptionGroupWrapper, TopicConfigWrapper,
};
use crate::remoting::request_code;

use super::config::SlaveSyncConfig;
use super::error::{SyncError, TableError, TableFailure};
use super::master::{MasterLink, failure, same_address};
use super::report::{SkipReason, SyncAttempt, SyncReport, SyncStatus, SyncTable, TableOutcome};

/// Takes the deleted topics a master's topic answer carries (topic → the CommitLog offset
/// below which its records are gone) into the slave's store; returns how many were new.
pub type DeletionHandler = Arc<dyn Fn(&BTreeMap<String, u64>) -> Result<usize, String> + Send + Sync>;

/// Mirrors a master's topic configs, consumer offsets, delay offsets and subscription groups
/// into a slave's [`ConfigTables`] (RocketMQ's `SlaveSynchronize`).
///
/// **One sync** ([`sync_all`](Self::sync_all)) requests the four tables from the master's
/// remoting address, in RocketMQ's order, each independently: a failed table is logged with
/// the address and retried at the next sync, and does not stop the others. The topic request
/// goes to the master's VIP port (port − 2) first, then to the main port. Each body is applied
/// with the table's `apply_from_master`: topics and groups are skipped when the DataVersion
/// equals ours; consumer offsets are merged so no offset moves backwards, even when a master
/// restarts with stale offsets (but for a rewind the master stamped); delay offsets are stored as the master's text. Every change is
/// written to disk before the sync returns; an unchanged table is not rewritten.
///
/// **Scheduling.** [`start`](Self::start) spawns one named thread that syncs at once, then
/// `interval` after the end of the latest sync (whoever ran it), and at once on
/// [`request_sync`](Self::request_sync) or when the master address changes. It waits on a
/// condition variable, so it neither polls nor delays shutdown. Syncs never overlap: a stale
/// fetch applied after a newer one would roll the topic table back.
///
/// **No master.** With no master address, or one equal to the broker's own address, a sync
/// does nothing (the report says why). The address can change at any time
/// ([`set_master_address`](Self::set_master_address)), e.g. when a new master registers.
pub struct SlaveSynchronizer {
    inner: Arc<Inner>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process that made it; a fork of that process leaves it alone (`crate::fork`).
    fork: crate::fork::ForkGuard,
}

struct Inner {
    tables: Arc<ConfigTables>,
    config: SlaveSyncConfig,
    master: Mutex<Option<Arc<MasterLink>>>,
    /// Held for a whole sync: syncs never overlap.
    sync_lock: Mutex<()>,
    status: Mutex<StatusState>,
    signal: Mutex<Signal>,
    wakeup: Condvar,
    /// Set by shutdown; checked between tables so shutdown waits for one request at most.
    stopping: AtomicBool,
    /// Where the master's topic deletions go (the broker's store).
    deletions: OnceLock<DeletionHandler>,
}

#[derive(Default)]
struct StatusState {
    status: SyncStatus,
    /// End of the latest sync call, skipped ones included: the next periodic sync is due an
    /// interval later.
    last_run: Option<Instant>,
}

#[derive(Default)]
struct Signal {
    wake: bool,
    stop: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its data whole, so a panic elsewhere does not make
    // the data unusable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SlaveSynchronizer {
    /// A synchronizer of `tables` from the master at `master_address` (its remoting
    /// `host:port`; `None` or empty if not known yet). Does not start the thread.
    pub fn new(tables: Arc<ConfigTables>, master_address: Option<&str>, config: SlaveSyncConfig) -> Self {
        let inner = Inner {
            tables,
            master: Mutex::new(None),
            sync_lock: Mutex::new(()),
            status: Mutex::new(StatusState::default()),
            signal: Mutex::new(Signal::default()),
            wakeup: Condvar::new(),
            stopping: AtomicBool::new(false),
            deletions: OnceLock::new(),
            config,
        };
        inner.replace_master(master_address);
        SlaveSynchronizer {
            inner: Arc::new(inner),
            thread: Mutex::new(None),
            fork: crate::fork::ForkGuard::new(),
        }
    }

    /// Hands the deleted topics of each topic answer to `handler` (a slave's store deletes
    /// them too); without one they are not looked at. Set once, before `start`.
    pub fn set_deletion_handler(&self, handler: DeletionHandler) {
        let _ = self.inner.deletions.set(handler);
    }

    /// The tables kept in sync.
    pub fn tables(&self) -> &Arc<ConfigTables> {
        &self.inner.tables
    }

    /// The settings.
    pub fn config(&self) -> &SlaveSyncConfig {
        &self.inner.config
    }

    /// The master's remoting address now in use.
    pub fn master_address(&self) -> Option<String> {
        self.inner.link().map(|l| l.addr().to_string())
    }

    /// Switches to the master at `addr` (`None` or empty: no master). A sync in progress
    /// finishes against the old master; a running thread then syncs from the new one at once,
    /// so a slave that learns its master does not wait a whole interval. Setting the address
    /// already in use changes nothing (the connections are kept).
    pub fn set_master_address(&self, addr: Option<&str>) {
        if self.inner.replace_master(addr) && self.master_address().is_some() {
            self.inner.wake();
        }
    }

    /// Runs one sync on the calling thread (waiting for a sync already running to finish
    /// first) and returns what it did.
    ///
    /// `Ok` when every table synced, or when there was nothing to do ([`SyncReport::skipped`]
    /// says why); [`SyncError::Incomplete`] when any table failed, with the report of all
    /// four. Either way the result is logged and recorded in [`status`](Self::status).
    pub fn sync_all(&self) -> Result<SyncReport, SyncError> {
        self.inner.sync_all()
    }

    /// Same as [`sync_all`](Self::sync_all): a sync now, on the calling thread. Named for the
    /// broker API's "sync now" command.
    pub fn sync_now(&self) -> Result<SyncReport, SyncError> {
        self.inner.sync_all()
    }

    /// Asks the background thread to sync as soon as it can, without waiting. Requests made
    /// while a sync runs coalesce into one more sync after it. Does nothing unless started.
    pub fn request_sync(&self) {
        self.inner.wake();
    }

    /// Starts the background thread, which syncs at once and then every interval. Calling it
    /// again while running, or after [`shutdown`](Self::shutdown), does nothing.
    pub fn start(&self) -> Result<(), SyncError> {
        let mut thread = lock(&self.thread);
        if thread.is_some() || self.inner.stopping.load(Ordering::Acquire) {
            return Ok(());
        }
        let name = self.inner.config.thread_name.clone();
        let inner = Arc::clone(&self.inner);
        let handle = thread::Builder::new()
            .name(name.clone())
            .spawn(move || inner.run())
            .map_err(|source| SyncError::Spawn { name, source })?;
        *thread = Some(handle);
        Ok(())
    }

    /// Whether the background thread is running.
    pub fn is_running(&self) -> bool {
        lock(&self.thread).as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Stops the background thread and joins it. A sync in progress ends its request at once
    /// (a master that does not answer held the stop for up to `request_timeout`, twice for
    /// the topic request's VIP fallback; a connection being made still takes up to its
    /// connect timeout) and skips the remaining tables. Later syncs do nothing. Idempotent;
    /// also run on drop.
    pub fn shutdown(&self) {
        if self.fork.forked() {
            return; // its thread is the parent's
        }
        self.inner.stopping.store(true, Ordering::Release);
        if let Some(link) = self.inner.link() {
            link.abort();
        }
        {
            let mut signal = lock(&self.inner.signal);
            signal.stop = true;
            self.inner.wakeup.notify_all();
        }
        if let Some(handle) = lock(&self.thread).take()
            && handle.join().is_err()
        {
            tracing::error!("slave sync thread panicked");
        }
    }

    /// The synchronizer's history in brief: master address, the latest attempt, counts.
    pub fn status(&self) -> SyncStatus {
        let mut status = lock(&self.inner.status).status.clone();
        status.master_address = self.master_address();
        status
    }

    /// The latest sync attempted (time, master, success or the error text).
    pub fn last_sync(&self) -> Option<SyncAttempt> {
        lock(&self.inner.status).status.last_attempt.clone()
    }
}

impl Drop for SlaveSynchronizer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for SlaveSynchronizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlaveSynchronizer")
            .field("master_address", &self.master_address())
            .field("config", &self.inner.config)
            .field("running", &self.is_running())
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn link(&self) -> Option<Arc<MasterLink>> {
        lock(&self.master).clone()
    }

    /// Installs a link to `addr`; returns whether the address changed.
    fn replace_master(&self, addr: Option<&str>) -> bool {
        let addr = addr.map(str::trim).filter(|a| !a.is_empty());
        let mut master = lock(&self.master);
        if master.as_ref().map(|l| l.addr()) == addr {
            return false;
        }
        tracing::info!(
            old = master.as_ref().map(|l| l.addr()).unwrap_or("none"),
            new = addr.unwrap_or("none"),
            "slave sync master address changed"
        );
        *master = addr.map(|a| {
            Arc::new(MasterLink::new(
                a.to_string(),
                self.config.vip_channel,
                self.config.own_address.as_deref(),
                self.config.request_timeout,
                self.config.credentials.clone(),
            ))
        });
        true
    }

    fn wake(&self) {
        let mut signal = lock(&self.signal);
        signal.wake = true;
        self.wakeup.notify_all();
    }

    /// The background thread: sync at once, then whenever due or woken, until stopped.
    fn run(&self) {
        tracing::debug!(interval = ?self.config.interval, "slave sync thread started");
        let mut due = Instant::now();
        while self.wait_until(due) {
            // Failures are logged and recorded by sync_all; the next interval retries.
            let _ = self.sync_all();
            due = self.next_due().unwrap_or_else(Instant::now);
        }
        tracing::debug!("slave sync thread stopped");
    }

    /// An interval after the latest sync; `None` before the first.
    fn next_due(&self) -> Option<Instant> {
        lock(&self.status).last_run.map(|t| t + self.config.interval)
    }

    /// Waits until `due` or a wake-up; `false` when stopping. A sync run by another caller in
    /// the meantime pushes the due time back, as any sync restarts the interval.
    fn wait_until(&self, mut due: Instant) -> bool {
        let mut signal = lock(&self.signal);
        loop {
            if signal.stop {
                return false;
            }
            if signal.wake {
                signal.wake = false;
                return true;
            }
            let now = Instant::now();
            if now >= due {
                match self.next_due() {
                    Some(later) if later > now => due = later,
                    _ => return true,
                }
            }
            signal = self.wakeup.wait_timeout(signal, due - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    fn sync_all(&self) -> Result<SyncReport, SyncError> {
        let _one_at_a_time = lock(&self.sync_lock);
        let report = self.sync_tables();
        let mut state = lock(&self.status);
        state.last_run = Some(Instant::now());
        let Some(master) = report.master_address.clone().filter(|_| report.skipped.is_none()) else {
            return Ok(report);
        };
        let complete = report.is_complete();
        let status = &mut state.status;
        status.last_attempt = Some(SyncAttempt {
            at: report.started_at,
            master_address: master.clone(),
            duration: report.duration,
            tables_written: report.written(),
            error: (!complete).then(|| report.failure_summary()),
        });
        if complete {
            status.successes += 1;
            status.last_success_at = Some(report.started_at);
            drop(state);
            if report.written() > 0 {
                tracing::info!(%master, written = report.written(), duration = ?report.duration,
                    "config synced from master");
            } else {
                tracing::debug!(%master, duration = ?report.duration, "config unchanged on master");
            }
            Ok(report)
        } else {
            status.failures += 1;
            Err(SyncError::Incomplete { master, report: Box::new(report) })
        }
    }

    fn sync_tables(&self) -> SyncReport {
        if self.stopping.load(Ordering::Acquire) {
            return SyncReport::nothing_done(self.link().map(|l| l.addr().to_string()), SkipReason::ShutDown);
        }
        let Some(link) = self.link() else {
            return SyncReport::nothing_done(None, SkipReason::NoMasterAddress);
        };
        if let Some(own) = &self.config.own_address
            && same_address(own, link.addr())
        {
            return SyncReport::nothing_done(Some(link.addr().to_string()), SkipReason::MasterIsSelf);
        }

        let clock = Instant::now();
        let mut report = SyncReport::started(link.addr().to_string());
        for table in SyncTable::ALL {
            let outcome = if self.stopping.load(Ordering::Acquire) {
                TableOutcome::Cancelled
            } else {
                match self.sync_table(&link, table) {
                    Ok((changed, from)) => {
                        if table == SyncTable::Topics {
                            report.topics_answered_by = Some(from);
                        }
                        if changed { TableOutcome::Applied } else { TableOutcome::Unchanged }
                    }
                    Err(f) => {
                        tracing::warn!(master = %link.addr(), %table, addr = %f.addr,
                            error = %f.error, "config sync failed; retrying at the next sync");
                        TableOutcome::Failed(*f)
                    }
                }
            };
            *report.outcome_mut(table) = outcome;
        }
        report.duration = clock.elapsed();
        report
    }

    /// Fetches and applies one table; returns whether it changed, and who answered.
    fn sync_table(&self, link: &MasterLink, table: SyncTable) -> Result<(bool, String), Box<TableFailure>> {
        let fetched = link.fetch(table, self.config.request_timeout)?;
        let from = fetched.from;
        let body = fetched.body;
        let origin =
            format!("{} body from {from}", request_code::name(table.request_code()).unwrap_or("response"));
        let fail = |e: MetadataError| {
            // A body that does not decode is the master's fault; anything else (a write that
            // failed) is ours. The distinction tells an operator where to look.
            let error = match e {
                MetadataError::Json { .. } => TableError::Decode(e),
                other => TableError::Apply(other),
            };
            failure(table, &from, error)
        };
        require_table(&body, table.table_key(), &origin).map_err(fail)?;
        let t = &self.tables;
        let changed = match table {
            SyncTable::Topics => TopicConfigWrapper::decode(&body, &origin)
                .and_then(|w| t.topics().apply_from_master(w))
                .and_then(|changed| Ok(self.take_deletions(&body, &origin)? > 0 || changed)),
            SyncTable::ConsumerOffsets => ConsumerOffsetWrapper::decode(&body, &origin)
                .and_then(|w| t.consumer_offsets().apply_from_master(&w)),
            SyncTable::DelayOffsets => std::str::from_utf8(&body)
                .map_err(|e| MetadataError::Json {
                    origin: origin.clone(),
                    line: 0,
                    column: 0,
                    reason: format!("not UTF-8: {e}"),
                })
                .and_then(|text| t.delay_offsets().apply_from_master(text)),
            SyncTable::SubscriptionGroups => SubscriptionGroupWrapper::decode(&body, &origin)
                .and_then(|w| t.subscription_groups().apply_from_master(w)),
        }
        .map_err(fail)?;
        if !changed {
            // Nothing new from the master, but an earlier write may have failed and left the
            // table dirty: retry it now rather than leave the file behind memory.
            self.persist_if_dirty(table).map_err(fail)?;
        }
        Ok((changed, from))
    }

    /// Takes the deleted topics of a topic answer into the store; returns how many were new.
    fn take_deletions(&self, body: &[u8], origin: &str) -> Result<usize, MetadataError> {
        let Some(handler) = self.deletions.get() else { return Ok(0) };
        let deleted = crate::metadata::deleted_topics_in(body).map_err(|reason| MetadataError::Json {
            origin: origin.to_string(),
            line: 0,
            column: 0,
            reason,
        })?;
        if deleted.is_empty() {
            return Ok(0);
        }
        handler(&deleted).map_err(|reason| MetadataError::Invalid {
            what: "deleted topics",
            key: crate::metadata::DELETED_TOPICS_FIELD.to_string(),
            reason,
        })
    }

    fn persist_if_dirty(&self, table: SyncTable) -> Result<bool, MetadataError> {
        let t = &self.tables;
        match table {
            SyncTable::Topics => t.topics().persist_if_dirty(),
            SyncTable::ConsumerOffsets => t.consumer_offsets().persist_if_dirty(),
            SyncTable::DelayOffsets => t.delay_offsets().persist_if_dirty(),
            SyncTable::SubscriptionGroups => t.subscription_groups().persist_if_dirty(),
        }
    }
}

/// Checks that a master's answer holds its table under `key`. A SUCCESS without it (`{}`, a
/// null, another table's JSON) would decode as an empty table, a missing DataVersion as a new
/// one, and the slave would replace its table with nothing: Java's masters always send the
/// table, empty or not.
fn require_table(body: &[u8], key: &str, origin: &str) -> Result<(), MetadataError> {
    // The top level's keys only, each value skipped unread: parsed into a map of values, an
    // answer of up to 256 MiB took several GiB for this check alone (found by an audit).
    let object: TopLevelKeys = object_from_slice_lenient(body, origin)?;
    match object.0.iter().find(|(k, _)| k == key).map(|(_, null)| *null) {
        Some(false) => Ok(()),
        found => Err(MetadataError::Json {
            origin: origin.to_string(),
            line: 0,
            column: 0,
            reason: format!(
                "the answer holds no {key:?} table ({}); the slave's table is left as it is",
                if found.is_some() { "it is null" } else { "no such key" }
            ),
        }),
    }
}

/// A JSON object's top-level keys, each with whether its value is null; the values are
/// skipped without being kept.
struct TopLevelKeys(Vec<(String, bool)>);

impl<'de> serde::Deserialize<'de> for TopLevelKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = TopLevelKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<TopLevelKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    let v: Option<serde::de::IgnoredAny> = map.next_value()?;
                    keys.push((k, v.is_none()));
                }
                Ok(TopLevelKeys(keys))
            }
        }
        d.deserialize_map(Keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check finds a table's key at the top level, present and not null, whatever else
    /// the answer holds.
    #[test]
    fn require_table_reads_the_top_level_keys_only() {
        let ok = br#"{"dataVersion":{"counter":1},"offsetTable":{"T@G":{0:5}}}"#;
        assert!(require_table(ok, "offsetTable", "t").is_ok());
        for (body, why) in [
            (&br#"{"dataVersion":{"counter":1}}"#[..], "no such key"),
            (br#"{"offsetTable":null}"#, "it is null"),
            (br#"{"other":{"offsetTable":{}}}"#, "no such key"),
        ] {
            let err = require_table(body, "offsetTable", "t").unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
        assert!(require_table(b"[1,2]", "offsetTable", "t").is_err(), "not an object");
    }

    fn tables() -> (tempfile::TempDir, Arc<ConfigTables>) {
        let dir = tempfile::tempdir().unwrap();
        let t = Arc::new(ConfigTables::open(dir.path()).unwrap());
        (dir, t)
    }

    #[test]
    fn is_shareable_between_threads() {
        fn is<T: Send + Sync>() {}
        is::<SlaveSynchronizer>();
    }

    #[test]
    fn no_master_or_own_address_does_nothing() {
        let (_dir, t) = tables();
        let s = SlaveSynchronizer::new(Arc::clone(&t), None, SlaveSyncConfig::default());
        let r = s.sync_all().unwrap();
        assert_eq!(r.skipped, Some(SkipReason::NoMasterAddress));
        assert_eq!(r.written(), 0);

        let cfg = SlaveSyncConfig::default().with_own_address("127.0.0.1:10911");
        let s = SlaveSynchronizer::new(t, Some("127.0.0.1:10911"), cfg);
        let r = s.sync_all().unwrap();
        assert_eq!(r.skipped, Some(SkipReason::MasterIsSelf));
        assert!(s.last_sync().is_none(), "a skip is not an attempt");
        s.set_master_address(Some(""));
        assert_eq!(s.master_address(), None);
    }

    #[test]
    fn shutdown_without_start_and_twice_is_fine() {
        let (_dir, t) = tables();
        let s = SlaveSynchronizer::new(t, Some("127.0.0.1:1"), SlaveSyncConfig::default());
        s.shutdown();
        s.shutdown();
        s.start().unwrap();
        assert!(!s.is_running(), "start after shutdown does nothing");
        assert_eq!(s.sync_all().unwrap().skipped, Some(SkipReason::ShutDown));
    }
}
