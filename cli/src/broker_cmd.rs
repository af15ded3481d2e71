//! `rmqha broker -c FILE [--set key=value]...`

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use rmqha_core::{Broker, BrokerConfig};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

#[derive(Args)]
pub struct BrokerArgs {
    /// RocketMQ-style broker.properties file.
    #[arg(short = 'c', long = "config")]
    config: PathBuf,
    /// Override a property (repeatable), e.g. --set listenPort=0.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9100; port 0 picks
    /// one, printed in the start line).
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
}

/// Applies `--set KEY=VALUE` overrides to a config.
pub fn apply_overrides(config: &mut BrokerConfig, sets: &[String]) -> Result<(), String> {
    for kv in sets {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set {kv:?}: expected KEY=VALUE"))?;
        // A file may hold keys of other RocketMQ components, and RocketMQ ignores what it does
        // not read; a key typed here is meant for this command, and a typo ignored would run
        // it on the file's value (`truncate` on the file's store instead of the one named).
        if k.trim().is_empty() {
            return Err(format!("--set {kv:?}: expected KEY=VALUE, with a key"));
        }
        if let Some(like) = BrokerConfig::unknown_key(k) {
            let hint = like.map(|k| format!(" (did you mean {k}?)")).unwrap_or_default();
            return Err(format!(
                "--set {}: unknown config key{hint}: rmqha reads no such key (a properties file may hold it; \
                 there it is ignored with a warning)",
                k.trim()
            ));
        }
        // The key only: the error names the value where it may (never a secret's).
        config.set(k, v).map_err(|e| format!("--set {}: {e}", k.trim()))?;
    }
    Ok(())
}

pub fn run(args: BrokerArgs) -> Result<(), String> {
    let mut config = BrokerConfig::read_properties_file(&args.config).map_err(|e| e.to_string())?;
    apply_overrides(&mut config, &args.set)?;
    // A rule between keys (a SLAVE with brokerId 0, ...) names the file too; after the
    // overrides, since `--set` may be what fixes it.
    config.validate().map_err(|e| format!("{}: {e}", args.config.display()))?;
    // Signals are registered before the broker starts so none is missed. A hang-up (the
    // terminal or SSH session closed) shuts down cleanly too, as the JVM's shutdown hook
    // does, unless it is ignored (`nohup`), which the JVM honours as well.
    let mut wanted = vec![SIGINT, SIGTERM];
    if !signal_is_ignored(SIGHUP) {
        wanted.push(SIGHUP);
    }
    let mut signals = Signals::new(wanted).map_err(|e| format!("cannot handle signals: {e}"))?;
    let broker = Broker::start(config).map_err(|e| e.to_string())?;
    let metrics = match args.metrics_listen {
        Some(addr) => match crate::metrics_http::serve(addr, &broker) {
            Ok(bound) => format!(" metrics=http://{bound}/metrics"),
            Err(e) => {
                let _ = broker.close();
                return Err(e);
            }
        },
        None => String::new(),
    };
    // One line a script can wait for.
    say(&format!(
        "rmqha broker started: role={} listenPort={} haPort={} store={}{metrics}",
        broker.role(),
        broker.listen_port(),
        broker.ha_port(),
        broker.config().store_root().display()
    ));
    if let Some(sig) = signals.forever().next() {
        let name = match sig {
            SIGINT => "SIGINT",
            SIGTERM => "SIGTERM",
            SIGHUP => "SIGHUP",
            _ => "a signal",
        };
        tracing::info!("{name}: shutting down");
    }
    match broker.close() {
        Ok(()) => {
            say("rmqha broker stopped");
            Ok(())
        }
        Err(e) => {
            // Not a success: a service manager or script must see it (exit status 1).
            say("rmqha broker stopped UNCLEANLY");
            Err(e.to_string())
        }
    }
}

/// Prints a status line. Standard output may be a pipe whose reader is gone (`rmqha broker |
/// tee log` stopped with Ctrl-C): a lost status line is no reason to panic and report a
/// crash after a clean shutdown.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// Whether `sig` is set to be ignored (as `nohup` sets SIGHUP).
fn signal_is_ignored(sig: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current disposition.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}
