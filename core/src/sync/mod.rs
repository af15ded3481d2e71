//! Config sync, master → slave (spec section 8): a slave that serves reads must know its
//! master's topics, consumer offsets, delay offsets and subscription groups.
//!
//! RocketMQ's slave pulls the four tables over the remoting protocol (`SlaveSynchronize.syncAll`);
//! so does [`SlaveSynchronizer`], from a master whose remoting server answers with
//! [`AdminProcessor`](crate::broker_admin::AdminProcessor):
//!
//! | table | request | sent to | applied |
//! |---|---|---|---|
//! | topic configs | GET_ALL_TOPIC_CONFIG (21) | VIP port (port − 2), else main port | replaced when the DataVersion differs |
//! | consumer offsets | GET_ALL_CONSUMER_OFFSET (43) | main port | merged; no offset moves backwards but by a rewind the master stamped |
//! | delay offsets | GET_ALL_DELAY_OFFSET (45) | main port | the master's text, verbatim |
//! | subscription groups | GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) | main port | replaced when the DataVersion differs |
//!
//! The rules themselves live with the tables (`apply_from_master` in [`crate::metadata`]); this
//! module fetches, schedules, reports and logs. Each table succeeds or fails on its own and a
//! failure is retried at the next interval. What differs from RocketMQ, and why: consumer
//! offsets are merged instead of overwritten (a master restarted with stale offsets would
//! otherwise roll consumers back, issue #1094); topics and groups keep the master's version
//! instead of bumping it (5.x's bump rewrites both files on every sync); the interval runs from
//! the end of the latest sync, manual ones included.
//!
//! Files: `config` the settings, `master` the clients of one master address and the VIP rule,
//! `synchronizer` the sync and its thread, `report` the per-sync report and the status, `error`
//! the errors.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rmqha_core::metadata::ConfigTables;
//! use rmqha_core::sync::{SlaveSyncConfig, SlaveSynchronizer};
//!
//! let tables = Arc::new(ConfigTables::open("/var/rmqha/slave")?);
//! let sync = SlaveSynchronizer::new(
//!     Arc::clone(&tables),
//!     Some("10.0.0.1:10911"),
//!     SlaveSyncConfig::default().with_own_address("10.0.0.2:10911"),
//! );
//! sync.start()?; // syncs at once, then every 60 s
//! // ... later, e.g. on broker shutdown:
//! sync.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod error;
mod master;
mod report;
mod synchronizer;

pub use config::SlaveSyncConfig;
pub use error::{SyncError, TableError, TableFailure};
pub use master::vip_address;
pub use report::{SkipReason, SyncAttempt, SyncReport, SyncStatus, SyncTable, TableOutcome};
pub use synchronizer::SlaveSynchronizer;
