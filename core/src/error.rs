//! The crate's error type.

use std::path::PathBuf;

/// Every failure rmqha reports. A non-OK put status of a stored message is *not* an error
/// (see `PutStatus`); an error means the operation did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// A file or directory of the store could not be created, opened, locked or written.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, e.g. "cannot load CommitLog from".
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The store cannot work: recovery refused what it found, a flush failed, another broker
    /// holds the lock, a thread could not start. (A file that could not be made or opened is
    /// `Io`.)
    #[error("store: {0}")]
    Store(String),
    /// A put stored nothing; `status` says why in RocketMQ's terms.
    #[error("put failed with {status}: {reason}")]
    PutFailed { status: crate::store::PutStatus, reason: String },
    /// An argument was out of range or malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The operation needs a master.
    #[error("not a master: {0}")]
    NotMaster(String),
    /// The operation needs a slave.
    #[error("not a slave: {0}")]
    NotSlave(String),
    #[error(transparent)]
    Remoting(#[from] crate::remoting::RemotingError),
    #[error(transparent)]
    Metadata(#[from] crate::metadata::MetadataError),
    #[error(transparent)]
    Sync(#[from] crate::sync::SyncError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
