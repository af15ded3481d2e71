//! Configuration: a Java properties reader and `BrokerConfig` with RocketMQ's keys.

mod broker_config;
mod properties;

pub(crate) use broker_config::is_host_port;
pub use broker_config::{
    BrokerConfig, BrokerRole, ConfigError, FlushDiskType, REDACTED, Secret, check_broker_permission,
};
pub use properties::{PropertiesSyntaxError, PropertyEntry, parse_properties, set_property};
