//! [`SlaveSyncConfig`]: how often and how patiently a slave pulls its master's tables.

use std::time::Duration;

use crate::config::BrokerConfig;

/// Settings of a [`SlaveSynchronizer`](super::SlaveSynchronizer).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SlaveSyncConfig {
    /// Time from the end of one sync to the start of the next (`slaveSyncIntervalMs`,
    /// 60 000 ms as in RocketMQ 5.x; 4.9.x synced every 10 s).
    pub interval: Duration,
    /// Longest wait for one request, connecting included (RocketMQ: 3000 ms).
    pub request_timeout: Duration,
    /// Send the topic request to the master's VIP port (its port − 2) first, as RocketMQ's
    /// `sendMessageWithVIPChannel` (default on) does; the main port is tried when the VIP
    /// port fails.
    ///
    /// The rule assumes the master binds its VIP port at port − 2, as RocketMQ brokers do.
    /// A master whose ports were picked at random (listenPort=0) does not, and its port − 2
    /// may be another server on the same host: turn this off for such masters. (Port − 2
    /// equal to [`own_address`](Self::own_address) is never used.)
    pub vip_channel: bool,
    /// This broker's own remoting address: a master address equal to it is ignored, so a
    /// broker never syncs from itself.
    pub own_address: Option<String>,
    /// Name of the background thread.
    pub thread_name: String,
    /// How the requests to the master are signed when the master has `aclEnable`
    /// (`aclAccessKey` / `aclSecretKey`); `None`: unsigned.
    pub credentials: Option<crate::acl::Credentials>,
}

impl Default for SlaveSyncConfig {
    fn default() -> Self {
        SlaveSyncConfig {
            interval: Duration::from_millis(60_000),
            request_timeout: Duration::from_millis(3_000),
            vip_channel: true,
            own_address: None,
            thread_name: "rmqha-slave-sync".to_string(),
            credentials: None,
        }
    }
}

impl SlaveSyncConfig {
    /// The settings for a broker: `slaveSyncIntervalMs` from `config` and `own_address`
    /// (the address the broker's remoting server is reachable at, `brokerIP1:listenPort`).
    pub fn from_broker_config(config: &BrokerConfig, own_address: Option<String>) -> Self {
        SlaveSyncConfig {
            // A non-positive interval would spin; validation refuses it, this is a backstop.
            interval: Duration::from_millis(config.slave_sync_interval_ms.max(1) as u64),
            own_address,
            credentials: crate::acl::Credentials::from_config(config),
            ..Self::default()
        }
    }

    /// `self` with `interval`.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// `self` with `request_timeout`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// `self` with the VIP channel on or off.
    pub fn with_vip_channel(mut self, enabled: bool) -> Self {
        self.vip_channel = enabled;
        self
    }

    /// `self` with `own_address`.
    pub fn with_own_address(mut self, addr: impl Into<String>) -> Self {
        self.own_address = Some(addr.into());
        self
    }
}
