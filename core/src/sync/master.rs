//! [`MasterLink`]: the clients of one master address (main port and VIP port) and the request
//! that fetches one table's body.

use std::net::SocketAddr;
use std::time::Duration;

use crate::remoting::{ClientConfig, RemotingClient, RemotingCommand, response_code};

use super::error::{TableError, TableFailure};
use super::report::SyncTable;

/// The master's VIP ("fast") channel address for remoting address `addr`: the same host, port
/// − 2 (RocketMQ's `MixAll.brokerVIPChannel`). `None` if `addr` has no port or the port is
/// below 2.
///
/// ```
/// use rmqha_core::sync::vip_address;
/// assert_eq!(vip_address("10.0.0.1:10911").as_deref(), Some("10.0.0.1:10909"));
/// assert_eq!(vip_address("[::1]:10911").as_deref(), Some("[::1]:10909"));
/// assert_eq!(vip_address("host:1"), None);
/// ```
pub fn vip_address(addr: &str) -> Option<String> {
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some(format!("{host}:{}", port.checked_sub(2)?))
}

/// Whether two remoting addresses name the same endpoint: equal text (what RocketMQ
/// compares), or equal once parsed (`127.0.0.1:10911` vs `127.0.0.01:10911` is not worth a
/// DNS lookup, but `[::1]:1` vs `[0:0::1]:1` is cheap to catch).
pub(crate) fn same_address(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<SocketAddr>(), b.parse::<SocketAddr>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A table's body as the master sent it, and who sent it.
pub(crate) struct Fetched {
    pub(crate) body: Vec<u8>,
    pub(crate) from: String,
}

/// Clients of one master. Replaced as a whole when the master address changes, so a sync in
/// progress finishes against the master it started with.
pub(crate) struct MasterLink {
    addr: String,
    main: RemotingClient,
    vip: Option<RemotingClient>,
    /// Signs each request for a master with `aclEnable`.
    credentials: Option<crate::acl::Credentials>,
}

/// The largest answer a slave takes from its master: a whole table in one frame. Remoting's
/// usual 16 MiB (RocketMQ's too) is passed by some 50,000 subscription groups or a million
/// consumer offsets, after which a RocketMQ slave never syncs that table again; the answers
/// come from the master the slave was configured with.
pub const SYNC_MAX_FRAME: usize = 256 << 20;

impl MasterLink {
    /// Clients of the master at `addr`. The VIP client is left out when `vip_channel` is off,
    /// when `addr` has no usable port, and when port − 2 is `own_address`: with ports picked
    /// at random (listenPort=0) the master's port − 2 can be this very broker, whose own
    /// topic table would then look like the master's.
    pub(crate) fn new(
        addr: String,
        vip_channel: bool,
        own_address: Option<&str>,
        connect_timeout: Duration,
        credentials: Option<crate::acl::Credentials>,
    ) -> Self {
        let config = ClientConfig { connect_timeout, max_frame: SYNC_MAX_FRAME };
        let vip = vip_channel
            .then(|| vip_address(&addr))
            .flatten()
            .filter(|vip| !own_address.is_some_and(|own| same_address(own, vip)))
            .map(|vip| RemotingClient::new(vip, config.clone()));
        MasterLink { main: RemotingClient::new(addr.clone(), config), vip, addr, credentials }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Ends a request in progress and fails later ones (the slave is stopping).
    pub(crate) fn abort(&self) {
        self.main.abort();
        if let Some(vip) = &self.vip {
            vip.abort();
        }
    }

    /// Fetches `table`'s body. The topic request tries the VIP port first and falls back to
    /// the main port on any transport failure (a master without a VIP listener refuses the
    /// connection at once); a response from the VIP port, even an error code, is final.
    pub(crate) fn fetch(&self, table: SyncTable, timeout: Duration) -> Result<Fetched, Box<TableFailure>> {
        if let (SyncTable::Topics, Some(vip)) = (table, &self.vip) {
            match vip.invoke_sync(self.request(table), timeout) {
                Ok(response) => return Self::check(table, vip.addr(), response),
                Err(e) => tracing::debug!(master = %self.addr, vip = %vip.addr(), error = %e,
                    "VIP channel failed; sending the {table} request to the main port"),
            }
        }
        let response = self
            .main
            .invoke_sync(self.request(table), timeout)
            .map_err(|e| failure(table, &self.addr, TableError::Request(e)))?;
        Self::check(table, &self.addr, response)
    }

    /// The request for `table`, signed when this slave has ACL credentials.
    fn request(&self, table: SyncTable) -> RemotingCommand {
        let mut request = RemotingCommand::request(table.request_code());
        if let Some(c) = &self.credentials {
            c.sign(&mut request);
        }
        request
    }

    fn check(table: SyncTable, from: &str, response: RemotingCommand) -> Result<Fetched, Box<TableFailure>> {
        if response.code != response_code::SUCCESS {
            return Err(failure(
                table,
                from,
                TableError::Refused { code: response.code, remark: response.remark },
            ));
        }
        Ok(Fetched { body: response.body, from: from.to_string() })
    }
}

/// A boxed failure: `RemotingError` makes it large, and it is the rare path.
pub(crate) fn failure(table: SyncTable, addr: &str, error: TableError) -> Box<TableFailure> {
    Box::new(TableFailure { table, addr: addr.to_string(), error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vip_address_is_port_minus_two() {
        assert_eq!(vip_address("127.0.0.1:10911").as_deref(), Some("127.0.0.1:10909"));
        assert_eq!(vip_address("broker-a:2").as_deref(), Some("broker-a:0"));
        assert_eq!(vip_address("no-port"), None);
        assert_eq!(vip_address("h:x"), None);
    }

    #[test]
    fn same_address_compares_parsed_forms() {
        assert!(same_address("127.0.0.1:10911", "127.0.0.1:10911"));
        assert!(same_address("[::1]:10911", "[0:0::1]:10911"));
        assert!(!same_address("127.0.0.1:10911", "127.0.0.1:10912"));
        assert!(!same_address("a:1", "b:1"));
    }
}
