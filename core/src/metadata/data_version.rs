//! DataVersion: the change stamp a table carries, so a slave can tell whether its copy is
//! current without comparing the whole table.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

use crate::store::clock::now_ms;

/// RocketMQ's `DataVersion`. Two versions are equal when all three fields are equal, as in
/// Java; the config synchronizer skips a table whose version equals the master's.
///
/// JSON: `{"counter":N,"stateVersion":0,"timestamp":ms}`. 4.x writes no `stateVersion`, so a
/// missing field reads as 0 (any missing field does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// How many changes the table has seen (Java keeps it in an `AtomicLong`).
    pub counter: i64,
    /// Controller-mode state machine version; 0 outside controller mode.
    pub state_version: i64,
    /// Milliseconds since the Unix epoch of the last change.
    pub timestamp: i64,
}

impl DataVersion {
    /// A fresh version as Java's constructor makes it: now, counter 0.
    pub fn new() -> Self {
        DataVersion { counter: 0, state_version: 0, timestamp: now_ms() }
    }

    /// Marks a change: timestamp = now, counter + 1. Like Java's `nextVersion()`, this also
    /// resets `state_version` to 0.
    pub fn next_version(&mut self) {
        self.next_version_with_state(0);
    }

    /// Marks a change made under controller state machine version `state_version`.
    pub fn next_version_with_state(&mut self, state_version: i64) {
        self.timestamp = now_ms();
        self.state_version = state_version;
        self.counter = self.counter.wrapping_add(1);
    }
}

impl Default for DataVersion {
    /// Same as [`DataVersion::new`]: Java fills a missing `dataVersion` with `new DataVersion()`.
    fn default() -> Self {
        DataVersion::new()
    }
}

impl PartialOrd for DataVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DataVersion {
    /// Java's `DataVersion.compare`: state version first, then counter, then timestamp. The
    /// counter outranks the timestamp because clocks step backwards and counters do not.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.state_version, self.counter, self.timestamp).cmp(&(
            other.state_version,
            other.counter,
            other.timestamp,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_version_bumps_counter_and_time() {
        let mut v = DataVersion { counter: 7, state_version: 3, timestamp: 1 };
        let before = v;
        v.next_version();
        assert_eq!(v.counter, 8);
        assert_eq!(v.state_version, 0);
        assert!(v.timestamp > 1);
        assert_ne!(v, before);
    }

    #[test]
    fn equality_needs_all_three_fields() {
        let a = DataVersion { counter: 1, state_version: 0, timestamp: 100 };
        let same = a;
        assert_eq!(a, same);
        assert_ne!(a, DataVersion { counter: 2, ..a });
        assert_ne!(a, DataVersion { timestamp: 101, ..a });
        assert_ne!(a, DataVersion { state_version: 1, ..a });
    }

    #[test]
    fn json_is_alphabetical_and_accepts_4x() {
        let v = DataVersion { counter: 5, state_version: 0, timestamp: 1700000000000 };
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"counter":5,"stateVersion":0,"timestamp":1700000000000}"#
        );
        let old: DataVersion = serde_json::from_str(r#"{"timestamp":1600000000000,"counter":9}"#).unwrap();
        assert_eq!(old, DataVersion { counter: 9, state_version: 0, timestamp: 1600000000000 });
    }

    #[test]
    fn order_is_java_compare() {
        let a = DataVersion { counter: 2, state_version: 0, timestamp: 10 };
        let b = DataVersion { counter: 1, state_version: 0, timestamp: 99 };
        assert!(a > b, "counter outranks timestamp");
        assert!(DataVersion { state_version: 1, ..b } > a);
    }
}
