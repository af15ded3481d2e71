//! The metadata layer's error type.

use std::path::PathBuf;

/// Errors of the metadata layer. Each variant names the file or document it concerns, so a
/// log line alone tells an operator where to look.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// A file-system operation on a config file (or its `.tmp`/`.bak` sibling, or the config
    /// directory) failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// The file or directory the operation was applied to.
        path: PathBuf,
        /// What was being done, e.g. "write", "fsync", "rename to topics.json".
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A JSON document did not decode. `line` and `column` (1-based, column in bytes) point
    /// into the document as it was given, before any fastjson quirk was smoothed out; both
    /// are 0 when serde could not tell a position.
    #[error("{origin}: invalid JSON at line {line}, column {column}: {reason}")]
    Json {
        /// The file path or the name of the remoting body, with the table it holds.
        origin: String,
        line: usize,
        column: usize,
        reason: String,
    },
    /// Neither a config file nor its `.bak` holds a readable table. The broker must not start
    /// with an empty table in its place (RocketMQ does, and silently forgets every topic).
    #[error(
        "cannot load {path} ({reason}) nor its backup {bak_path} ({bak_reason}); the broker does not start \
         with an empty table in its place: restore one of them, or move both away to start with an empty table"
    )]
    Unloadable { path: PathBuf, reason: String, bak_path: PathBuf, bak_reason: String },
    /// A table entry was refused before any change was made.
    #[error("invalid {what} {key:?}: {reason}")]
    Invalid {
        /// The kind of entry, e.g. "topic config".
        what: &'static str,
        /// The entry's name as given.
        key: String,
        reason: String,
    },
    /// A table could not be encoded as JSON (a bug, not bad input).
    #[error("cannot encode {what} as JSON: {reason}")]
    Encode { what: String, reason: String },
}

impl MetadataError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        MetadataError::Io { path: path.into(), op, source }
    }
}
