//! What one sync did ([`SyncReport`]) and what the synchronizer has done so far
//! ([`SyncStatus`]).

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::remoting::request_code;

use super::error::TableFailure;

/// One of the four tables a slave mirrors, in the order they are synced (RocketMQ's
/// `syncAll` order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncTable {
    /// `topics.json`, GET_ALL_TOPIC_CONFIG.
    Topics,
    /// `consumerOffset.json`, GET_ALL_CONSUMER_OFFSET.
    ConsumerOffsets,
    /// `delayOffset.json`, GET_ALL_DELAY_OFFSET.
    DelayOffsets,
    /// `subscriptionGroup.json`, GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
    SubscriptionGroups,
}

impl SyncTable {
    /// All four, in sync order.
    pub const ALL: [SyncTable; 4] = [
        SyncTable::Topics,
        SyncTable::ConsumerOffsets,
        SyncTable::DelayOffsets,
        SyncTable::SubscriptionGroups,
    ];

    /// The request that fetches the table.
    pub fn request_code(self) -> i32 {
        match self {
            SyncTable::Topics => request_code::GET_ALL_TOPIC_CONFIG,
            SyncTable::ConsumerOffsets => request_code::GET_ALL_CONSUMER_OFFSET,
            SyncTable::DelayOffsets => request_code::GET_ALL_DELAY_OFFSET,
            SyncTable::SubscriptionGroups => request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        }
    }

    /// A name for logs and errors.
    /// The key of the table in the master's answer (the same in 4.x and 5.x).
    pub fn table_key(self) -> &'static str {
        match self {
            SyncTable::Topics => "topicConfigTable",
            SyncTable::ConsumerOffsets | SyncTable::DelayOffsets => "offsetTable",
            SyncTable::SubscriptionGroups => "subscriptionGroupTable",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SyncTable::Topics => "topic config",
            SyncTable::ConsumerOffsets => "consumer offsets",
            SyncTable::DelayOffsets => "delay offsets",
            SyncTable::SubscriptionGroups => "subscription groups",
        }
    }
}

impl fmt::Display for SyncTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What happened to one table in one sync.
#[derive(Debug)]
#[non_exhaustive]
pub enum TableOutcome {
    /// The master's table differed; the local table now mirrors it and was written to disk.
    Applied,
    /// Nothing to change: same DataVersion (topics, groups), no offset ahead of ours
    /// (consumer offsets), same text (delay offsets). The file was not rewritten.
    Unchanged,
    /// Fetching, decoding or applying failed; the table is as it was (or, if only the write
    /// failed, changed in memory and still dirty). Retried at the next sync.
    Failed(TableFailure),
    /// Not attempted because the synchronizer was shutting down.
    Cancelled,
}

impl TableOutcome {
    /// Whether the table was changed and written.
    pub fn is_applied(&self) -> bool {
        matches!(self, TableOutcome::Applied)
    }

    /// The failure, if the table failed.
    pub fn failure(&self) -> Option<&TableFailure> {
        match self {
            TableOutcome::Failed(f) => Some(f),
            _ => None,
        }
    }
}

/// Why a sync did nothing at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// No master address is known yet.
    NoMasterAddress,
    /// The master address is this broker's own address.
    MasterIsSelf,
    /// The synchronizer was shut down.
    ShutDown,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SkipReason::NoMasterAddress => "no master address",
            SkipReason::MasterIsSelf => "the master address is our own",
            SkipReason::ShutDown => "shut down",
        })
    }
}

/// What one [`sync_all`](super::SlaveSynchronizer::sync_all) did, table by table.
#[derive(Debug)]
#[non_exhaustive]
pub struct SyncReport {
    /// The master's remoting address, if one was known.
    pub master_address: Option<String>,
    /// Set when nothing was attempted; every table is then [`TableOutcome::Unchanged`].
    pub skipped: Option<SkipReason>,
    /// When the sync started (wall clock, for status output).
    pub started_at: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// Topic configs.
    pub topics: TableOutcome,
    /// Consumer offsets.
    pub consumer_offsets: TableOutcome,
    /// Delay offsets.
    pub delay_offsets: TableOutcome,
    /// Subscription groups.
    pub subscription_groups: TableOutcome,
    /// The address that answered the topic request: the VIP port, or the main port after a
    /// fallback. `None` if the request failed or was not sent.
    pub topics_answered_by: Option<String>,
}

impl SyncReport {
    /// A report for a sync from `master_address` starting now, every table unchanged so far.
    pub(crate) fn started(master_address: String) -> Self {
        SyncReport {
            master_address: Some(master_address),
            skipped: None,
            started_at: SystemTime::now(),
            duration: Duration::ZERO,
            topics: TableOutcome::Unchanged,
            consumer_offsets: TableOutcome::Unchanged,
            delay_offsets: TableOutcome::Unchanged,
            subscription_groups: TableOutcome::Unchanged,
            topics_answered_by: None,
        }
    }

    /// A report for a sync that did nothing, and why.
    pub(crate) fn nothing_done(master_address: Option<String>, reason: SkipReason) -> Self {
        SyncReport { master_address, skipped: Some(reason), ..Self::started(String::new()) }
    }

    /// The outcome for `table`.
    pub fn outcome(&self, table: SyncTable) -> &TableOutcome {
        match table {
            SyncTable::Topics => &self.topics,
            SyncTable::ConsumerOffsets => &self.consumer_offsets,
            SyncTable::DelayOffsets => &self.delay_offsets,
            SyncTable::SubscriptionGroups => &self.subscription_groups,
        }
    }

    pub(crate) fn outcome_mut(&mut self, table: SyncTable) -> &mut TableOutcome {
        match table {
            SyncTable::Topics => &mut self.topics,
            SyncTable::ConsumerOffsets => &mut self.consumer_offsets,
            SyncTable::DelayOffsets => &mut self.delay_offsets,
            SyncTable::SubscriptionGroups => &mut self.subscription_groups,
        }
    }

    /// How many tables were changed and written to disk.
    pub fn written(&self) -> usize {
        SyncTable::ALL.iter().filter(|&&t| self.outcome(t).is_applied()).count()
    }

    /// The tables that failed.
    pub fn failures(&self) -> impl Iterator<Item = &TableFailure> {
        SyncTable::ALL.into_iter().filter_map(|t| self.outcome(t).failure())
    }

    /// Whether every table was fetched and applied (or found unchanged), and the sync was not
    /// skipped.
    pub fn is_complete(&self) -> bool {
        self.skipped.is_none()
            && SyncTable::ALL
                .iter()
                .all(|&t| matches!(self.outcome(t), TableOutcome::Applied | TableOutcome::Unchanged))
    }

    /// The failures as one line: `topic config: <why>; delay offsets: <why>`.
    pub fn failure_summary(&self) -> String {
        let mut parts: Vec<String> = self.failures().map(ToString::to_string).collect();
        let cancelled: Vec<&str> = SyncTable::ALL
            .into_iter()
            .filter(|&t| matches!(self.outcome(t), TableOutcome::Cancelled))
            .map(SyncTable::name)
            .collect();
        if !cancelled.is_empty() {
            parts.push(format!("cancelled by shutdown: {}", cancelled.join(", ")));
        }
        parts.join("; ")
    }
}

/// One sync as the status output shows it: cheap to clone, text instead of error values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncAttempt {
    /// When it started.
    pub at: SystemTime,
    /// The master it synced from.
    pub master_address: String,
    /// How long it took.
    pub duration: Duration,
    /// How many tables it changed and wrote.
    pub tables_written: usize,
    /// `None` on success; otherwise what failed, naming the tables and addresses.
    pub error: Option<String>,
}

impl SyncAttempt {
    /// Whether every table synced.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// [`at`](Self::at) in milliseconds since the Unix epoch, as status output prints times.
    pub fn at_millis(&self) -> i64 {
        millis(self.at)
    }
}

/// The synchronizer's history in brief, for `offsets()` and status output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SyncStatus {
    /// The master address now in use.
    pub master_address: Option<String>,
    /// The latest sync that was attempted (skips are not attempts).
    pub last_attempt: Option<SyncAttempt>,
    /// When the latest fully successful sync started.
    pub last_success_at: Option<SystemTime>,
    /// Fully successful syncs so far.
    pub successes: u64,
    /// Syncs in which at least one table failed.
    pub failures: u64,
}

pub(crate) fn millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
