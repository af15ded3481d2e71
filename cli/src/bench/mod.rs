//! `rmqha bench`: benchmarks are programs, not timed assertions. Each one measures its own
//! baselines in the same run (what the hardware does without rmqha) and prints the ratios
//! its targets are stated in, so results from different machines can be compared.

pub mod store;

use std::path::Path;
use std::time::{Duration, Instant};

use rmqha_core::BrokerConfig;

/// A broker config for the in-process benchmark brokers: loopback, free ports, no index.
pub fn broker_config(
    root: &Path,
    role: &str,
    file_size: u64,
    extra: &[(&str, String)],
) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    let mut set = |k: &str, v: &str| c.set(k, v).map_err(|e| e.to_string());
    set("storePathRootDir", &root.display().to_string())?;
    set("brokerRole", role)?;
    set("bindAddress", "127.0.0.1")?;
    set("brokerIP1", "127.0.0.1")?;
    set("listenPort", "0")?;
    set("haListenPort", "0")?;
    set("mappedFileSizeCommitLog", &file_size.to_string())?;
    set("messageIndexEnable", "false")?;
    if role == "SLAVE" {
        set("brokerId", "1")?;
    }
    for (k, v) in extra {
        set(k, v)?;
    }
    Ok(c)
}

/// Polls `f` every millisecond until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
