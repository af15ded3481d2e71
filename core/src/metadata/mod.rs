//! Topic config, consumer offsets, delay offsets and subscription groups (spec section 8).
//! Filled by the config-sync work.

/// Errors of the metadata layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    #[error("metadata file {path}: {reason}")]
    File { path: std::path::PathBuf, reason: String },
}
