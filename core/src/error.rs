//! The crate's error type.

use std::path::PathBuf;

/// Every failure rmqha reports. A non-OK put status of a stored message is *not* an error
/// (see `PutStatus`); an error means the operation did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("config: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Remoting(#[from] crate::remoting::RemotingError),
    #[error(transparent)]
    Metadata(#[from] crate::metadata::MetadataError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
