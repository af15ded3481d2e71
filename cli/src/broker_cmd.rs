//! `rmqha broker -c FILE [--set key=value]...`

use std::path::PathBuf;

use clap::Args;
use rmqha_core::{Broker, BrokerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

#[derive(Args)]
pub struct BrokerArgs {
    /// RocketMQ-style broker.properties file.
    #[arg(short = 'c', long = "config")]
    config: PathBuf,
    /// Override a property (repeatable), e.g. --set listenPort=0.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// Applies `--set KEY=VALUE` overrides to a config.
pub fn apply_overrides(config: &mut BrokerConfig, sets: &[String]) -> Result<(), String> {
    for kv in sets {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set {kv:?}: expected KEY=VALUE"))?;
        config.set(k, v).map_err(|e| format!("--set {kv}: {e}"))?;
    }
    Ok(())
}

pub fn run(args: BrokerArgs) -> Result<(), String> {
    let mut config = BrokerConfig::from_properties_file(&args.config).map_err(|e| e.to_string())?;
    apply_overrides(&mut config, &args.set)?;
    config.validate().map_err(|e| e.to_string())?;
    // Signals are registered before the broker starts so none is missed.
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|e| format!("cannot handle signals: {e}"))?;
    let broker = Broker::start(config).map_err(|e| e.to_string())?;
    // One line a script can wait for.
    println!(
        "rmqha broker started: role={} listenPort={} haPort={} store={}",
        broker.role(),
        broker.listen_port(),
        broker.ha_port(),
        broker.config().store_root().display()
    );
    if let Some(sig) = signals.forever().next() {
        tracing::info!("signal {sig}: shutting down");
    }
    broker.shutdown();
    println!("rmqha broker stopped");
    Ok(())
}
