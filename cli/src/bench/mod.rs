//! `rmqha bench`: benchmarks are programs, not timed assertions. Each one measures its own
//! baselines in the same run (what the hardware does without rmqha) and prints the ratios
//! its targets are stated in, so results from different machines can be compared.

pub mod filter;
pub mod queues;
pub mod store;
pub mod topics;

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

/// A generous bound on the bytes one benchmark store writes per second on a machine like the
/// project's (about 1.7 GB/s was the most seen): used only to warn before a run that may fill
/// the disk.
pub const WRITE_RATE_BOUND: f64 = 2.5e9;

/// Prints a warning when the file system holding `dir` (or its nearest existing ancestor) has
/// less than `need` bytes available: a benchmark that fills the disk fails part way (and so
/// does everything else writing to that disk meanwhile), so the user should know first.
pub fn warn_if_short_of_space(dir: &Path, need: f64, what: &str) {
    if let Some(w) = space_warning(dir, need, what) {
        println!("{w}");
    }
}

fn space_warning(dir: &Path, need: f64, what: &str) -> Option<String> {
    let free = dir.ancestors().find_map(rmqha_core::store::retention::disk_available_bytes)?;
    ((free as f64) < need).then(|| {
        format!(
            "warning: {what} may write up to {:.1} GB at a time into {}, whose file system has {:.1} GB \
             available; a full disk fails the run (choose another place with --dir)",
            need / 1e9,
            dir.display(),
            free as f64 / 1e9
        )
    })
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

/// Parses a `--seconds` value: a number of seconds above 0 that a `Duration` holds (NaN, a
/// huge value or a negative one panicked when the case was timed).
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    match Duration::try_from_secs_f64(v) {
        Ok(d) if !d.is_zero() => Ok(v),
        _ => Err("expected a number of seconds greater than 0".to_string()),
    }
}

/// Parses a count that must be at least 1 (`--threads 0` indexed an empty list of clients).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("expected at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warning names the need and the place, only when the disk is short of it; a
    /// directory that does not exist yet is judged by its nearest existing ancestor.
    #[test]
    fn warns_only_when_the_disk_is_short() {
        let dir = tempfile::tempdir().unwrap();
        let not_yet = dir.path().join("c/r0-slaves-2");
        assert_eq!(space_warning(&not_yet, 0.0, "bench ha"), None);
        let w = space_warning(&not_yet, 1e18, "bench ha").expect("no disk has an exabyte free");
        assert!(w.starts_with("warning: bench ha may write up to 1000000000.0 GB"), "{w}");
        assert!(w.contains(&not_yet.display().to_string()), "{w}");
    }
}
