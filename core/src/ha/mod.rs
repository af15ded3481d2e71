//! Master/slave replication over RocketMQ's classic HA protocol (spec 6.1, 7).

pub mod auth;
pub mod frame;
pub mod master;
pub mod slave;

pub use master::{HaMaster, HaMasterOptions, RefusedSlave, SlaveInfo};
pub use slave::{HaSlave, HaSlaveOptions, SlaveStatus, TruncateHook};
