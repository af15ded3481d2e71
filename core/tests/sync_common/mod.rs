//! Helpers shared by the config-sync scenario tests: a master (its tables behind a
//! RemotingServer with the AdminProcessor) listening on a main port and a VIP port at main − 2,
//! and waiting on conditions with a deadline.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmqha_core::broker_admin::AdminProcessor;
use rmqha_core::metadata::ConfigTables;
use rmqha_core::remoting::{RemotingServer, RequestHandler, ServerConfig};
use rmqha_core::sync::SlaveSyncConfig;

/// A master for the tests: tables under `dir`, served on `main` and (optionally) `vip`.
pub struct Master {
    pub tables: Arc<ConfigTables>,
    pub server: RemotingServer,
    pub main: SocketAddr,
    pub vip: Option<SocketAddr>,
}

impl Master {
    /// A master on `root` serving its tables on a main port and, if `with_vip`, a VIP port at
    /// main − 2.
    pub fn start(root: &Path, with_vip: bool) -> Master {
        let tables = Arc::new(ConfigTables::open(root).unwrap());
        let handler = Arc::new(AdminProcessor::new(
            Arc::clone(&tables),
            Arc::new(|| BTreeMap::from([("brokerRole".to_string(), "ASYNC_MASTER".to_string())])),
        ));
        let server = bind_main_and_vip(handler, with_vip);
        Master::from_server(tables, server, with_vip)
    }

    /// Restarts on the same ports (as a master process restarting would), with the tables
    /// found under `root`.
    pub fn restart_on(self, root: &Path) -> Master {
        let addrs: Vec<SocketAddr> = self.server.local_addrs().to_vec();
        let with_vip = self.vip.is_some();
        drop(self);
        let tables = Arc::new(ConfigTables::open(root).unwrap());
        let handler = Arc::new(AdminProcessor::new(Arc::clone(&tables), Arc::new(BTreeMap::new)));
        let server = RemotingServer::bind(&addrs, handler, ServerConfig::default()).unwrap();
        Master::from_server(tables, server, with_vip)
    }

    fn from_server(tables: Arc<ConfigTables>, server: RemotingServer, with_vip: bool) -> Master {
        let main = server.local_addrs()[0];
        let vip = with_vip.then(|| server.local_addrs()[1]);
        Master { tables, server, main, vip }
    }

    /// The master's remoting address, as a slave is configured with it.
    pub fn addr(&self) -> String {
        self.main.to_string()
    }
}

/// Binds `handler` on 127.0.0.1:P and, if `with_vip`, on 127.0.0.1:P−2, the VIP port a slave
/// derives from P. Without a VIP listener, P−2 is a port that was just free, so it refuses
/// connections. Ports come from the OS (port 0), then are re-bound in the needed pair.
pub fn bind_main_and_vip(handler: Arc<dyn RequestHandler>, with_vip: bool) -> RemotingServer {
    for _ in 0..100 {
        let vip_port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let Some(main_port) = vip_port.checked_add(2) else { continue };
        let mut addrs = vec![SocketAddr::from(([127, 0, 0, 1], main_port))];
        if with_vip {
            addrs.push(SocketAddr::from(([127, 0, 0, 1], vip_port)));
        }
        if let Ok(server) = RemotingServer::bind(&addrs, Arc::clone(&handler), ServerConfig::default()) {
            return server;
        }
    }
    panic!("could not bind a main port and its VIP port (main − 2)");
}

/// Slave settings for tests: short request timeout, `interval` between syncs.
pub fn sync_config(interval: Duration) -> SlaveSyncConfig {
    SlaveSyncConfig::default().with_interval(interval).with_request_timeout(Duration::from_secs(3))
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
