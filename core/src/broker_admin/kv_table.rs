//! [`KvTable`]: RocketMQ's `KVTable` body, a string map wrapped as `{"table":{…}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metadata::MetadataError;
use crate::metadata::json::{JsonStyle, null_as_default, object_from_slice_lenient, to_json};

/// The body of a GET_BROKER_RUNTIME_INFO response (Java `KVTable`): `{"table":{"k":"v",…}}`.
///
/// Kept in a `BTreeMap` so the body is deterministic (Java's `HashMap` has no order a reader
/// could rely on anyway).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    /// The entries.
    #[serde(default, deserialize_with = "null_as_default")]
    pub table: BTreeMap<String, String>,
}

impl KvTable {
    const WHAT: &'static str = "runtime info (KVTable)";

    /// Wraps `table`.
    pub fn new(table: BTreeMap<String, String>) -> Self {
        KvTable { table }
    }

    /// Decodes a body as a Java broker writes it. `origin` names the source in errors.
    pub fn decode(bytes: &[u8], origin: &str) -> Result<Self, MetadataError> {
        object_from_slice_lenient(bytes, &format!("{origin} ({})", Self::WHAT))
    }

    /// Encodes as compact JSON, the form of a response body.
    pub fn encode(&self) -> Result<String, MetadataError> {
        to_json(self, JsonStyle::Compact, Self::WHAT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_rocketmq_writes_it() {
        let t = KvTable::new(BTreeMap::from([
            ("brokerRole".to_string(), "SLAVE".to_string()),
            ("commitLogMaxOffset".to_string(), "1024".to_string()),
        ]));
        let json = t.encode().unwrap();
        assert_eq!(json, r#"{"table":{"brokerRole":"SLAVE","commitLogMaxOffset":"1024"}}"#);
        assert_eq!(KvTable::decode(json.as_bytes(), "body").unwrap(), t);
        assert!(KvTable::decode(b"{}", "body").unwrap().table.is_empty());
    }
}
