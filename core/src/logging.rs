//! Where rmqha's log events go when the host has not chosen: standard error.
//!
//! The library logs through `tracing`: a slave's lost or refused connection, a failed flush, a
//! full disk, a peer's garbage. A Rust program installs its own subscriber. The `rmqha`
//! command, and the C, Python and Node bindings (at the first broker start), install this one,
//! so that an embedding process sees what went wrong without any setup.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The level filter: `RMQHA_LOG` if set and valid, else `RUST_LOG`, else `default` (a
/// `tracing` filter such as `warn` or `info,rmqha_core::ha=debug`).
pub fn env_filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env("RMQHA_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default))
}

/// Installs a global subscriber that writes events passing `filter` to standard error (with
/// colours only on a terminal), unless the process has one already. Returns whether it
/// installed it.
pub fn init_stderr(filter: EnvFilter) -> bool {
    let ansi = std::io::stderr().is_terminal();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .finish();
    tracing::subscriber::set_global_default(subscriber).is_ok()
}

/// What the bindings install at their first broker start: [`env_filter`] with `warn` by
/// default, minus the config module's warnings, which the bindings hand to the host in its own
/// way (Python's `warnings`, Node's process warnings, `rmqha_config_warnings`). Idempotent.
pub fn init_for_bindings() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut filter = env_filter("warn");
        if let Ok(d) = "rmqha_core::config=off".parse() {
            filter = filter.add_directive(d);
        }
        init_stderr(filter);
    });
}
