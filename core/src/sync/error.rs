//! The sync layer's errors: why one table failed ([`TableError`], [`TableFailure`]) and why a
//! whole sync or the synchronizer failed ([`SyncError`]).

use crate::metadata::MetadataError;
use crate::remoting::{RemotingError, response_code};

use super::report::{SyncReport, SyncTable};

/// Why one table could not be synced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The request failed: connect, send, timeout, a closed connection, a bad frame.
    #[error("request failed: {0}")]
    Request(#[source] RemotingError),
    /// The master answered with a code other than SUCCESS.
    #[error("master answered {} ({code}){}", code_name(*code), remark_suffix(remark))]
    Refused {
        /// The response code.
        code: i32,
        /// The response's remark.
        remark: Option<String>,
    },
    /// The response body is not the table's JSON.
    #[error("bad response body: {0}")]
    Decode(#[source] MetadataError),
    /// The table could not be updated or written to disk.
    #[error("cannot apply: {0}")]
    Apply(#[source] MetadataError),
}

fn code_name(code: i32) -> &'static str {
    response_code::name(code).unwrap_or("UNKNOWN")
}

fn remark_suffix(remark: &Option<String>) -> String {
    match remark.as_deref().map(str::trim) {
        Some(r) if !r.is_empty() => format!(": {r}"),
        _ => String::new(),
    }
}

/// One table's failure with the context an operator needs: which table, which address.
#[derive(Debug, thiserror::Error)]
#[error("{table} from {addr}: {error}")]
pub struct TableFailure {
    /// The table.
    pub table: SyncTable,
    /// The address the request went to last (the main port after a VIP fallback).
    pub addr: String,
    /// What went wrong.
    #[source]
    pub error: TableError,
}

/// Errors of the sync layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// At least one table did not sync. The others were still attempted; the report says
    /// what happened to each. Failed tables are retried at the next sync.
    #[error("config sync from {master} incomplete: {}", .report.failure_summary())]
    Incomplete {
        /// The master's address.
        master: String,
        /// Every table's outcome.
        report: Box<SyncReport>,
    },
    /// The background thread could not be started.
    #[error("cannot spawn thread {name}: {source}")]
    Spawn {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

impl SyncError {
    /// The report of an incomplete sync.
    pub fn report(&self) -> Option<&SyncReport> {
        match self {
            SyncError::Incomplete { report, .. } => Some(report),
            SyncError::Spawn { .. } => None,
        }
    }
}
