//! The broker's metadata tables (spec section 8): topic configs, consumer offsets, delay
//! offsets and subscription groups, persisted under `<storePathRootDir>/config/`.
//!
//! So far: the [`DataVersion`] change stamp and JSON that reads what fastjson writes.

mod data_version;
mod error;
pub mod json;

pub use data_version::DataVersion;
pub use error::MetadataError;
pub use json::JsonStyle;
