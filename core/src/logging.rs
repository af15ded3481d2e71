//! Where rmqha's log events go when the host has not chosen: standard error.
//!
//! The library logs through `tracing`: a slave's lost or refused connection, a failed flush, a
//! full disk, a peer's garbage. A Rust program installs its own subscriber. The `rmqha`
//! command, and the C, Python and Node bindings (at the first broker start), install this one,
//! so that an embedding process sees what went wrong without any setup.

use std::io::IsTerminal;
use std::io::Write as _;

use tracing_subscriber::EnvFilter;

/// The level filter: `RMQHA_LOG` if set and valid, else `RUST_LOG`, else `default` (a
/// `tracing` filter such as `warn` or `info,rmqha_core::ha=debug`). `warning` is read as
/// `warn`. A bare word that is neither a level nor one of rmqha's targets is refused on
/// stderr, and the default used: `tracing` would read `RMQHA_LOG=verbose` as "everything from
/// a target named verbose", which logs nothing, errors included.
pub fn env_filter(default: &str) -> EnvFilter {
    for var in ["RMQHA_LOG", "RUST_LOG"] {
        let Ok(spec) = std::env::var(var) else { continue };
        match checked_spec(&spec).and_then(|s| EnvFilter::try_new(&s).map_err(|e| e.to_string())) {
            Ok(filter) => return filter,
            Err(why) => {
                // Not `eprintln!`, which panics when stderr cannot be written (a closed pipe,
                // a full disk): this runs in C, Python and Node hosts.
                let _ = writeln!(
                    std::io::stderr(),
                    "rmqha: {var}={spec:?} ignored: {why}; logging at {default:?}"
                );
                break;
            }
        }
    }
    EnvFilter::new(default)
}

/// `spec` with `warning` spelled `warn`, or why a bare word in it is no level.
fn checked_spec(spec: &str) -> Result<String, String> {
    let mut out = Vec::new();
    for d in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let is_level = |w: &str| w.parse::<tracing_subscriber::filter::LevelFilter>().is_ok();
        if d.eq_ignore_ascii_case("warning") {
            out.push("warn".to_string());
        } else if d.contains(['=', '[', ':']) || is_level(d) || d.starts_with("rmqha") {
            out.push(d.to_string());
        } else {
            return Err(format!("{d:?} is not a level (off, error, warn, info, debug, trace)"));
        }
    }
    Ok(out.join(","))
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

/// Keeps a repeating event from flooding the log while its first occurrence shows at once:
/// an event is logged when it is new (its key differs from the last one logged), and the same
/// key again at most every `every`, with how many times it recurred in between.
#[derive(Debug)]
pub struct Repeats {
    every: std::time::Duration,
    last: Option<(String, std::time::Instant)>,
    since_logged: u64,
    total: u64,
}

impl Repeats {
    pub const fn new(every: std::time::Duration) -> Self {
        Repeats { every, last: None, since_logged: 0, total: 0 }
    }

    /// Notes one occurrence of `key`. `Some(n)` means log it now, and that it recurred `n`
    /// times since it was last logged (0 when new).
    pub fn note(&mut self, key: &str) -> Option<u64> {
        self.note_at(key, std::time::Instant::now())
    }

    fn note_at(&mut self, key: &str, now: std::time::Instant) -> Option<u64> {
        self.total += 1;
        match &self.last {
            Some((k, at)) if k == key && now.duration_since(*at) < self.every => {
                self.since_logged += 1;
                None
            }
            _ => {
                let n = if self.last.as_ref().is_some_and(|(k, _)| k == key) { self.since_logged } else { 0 };
                self.last = Some((key.to_string(), now));
                self.since_logged = 0;
                Some(n)
            }
        }
    }

    /// Whether it was last logged less than `every` before `now`.
    fn logged_within(&self, now: std::time::Instant) -> bool {
        self.last.as_ref().is_some_and(|(_, at)| now.duration_since(*at) < self.every)
    }

    /// How many times the event occurred since it began (0: it is not happening).
    pub fn occurrences(&self) -> u64 {
        self.total
    }

    /// The event stopped: how many times it occurred in all since it began (0 if it never
    /// did), and forgets it, so that its next occurrence is logged as new.
    pub fn clear(&mut self) -> u64 {
        let total = self.total;
        *self = Repeats::new(self.every);
        total
    }
}

/// What a repeated event's line adds: how many times it recurred unlogged since its last
/// line (`n` as [`Repeats::note`] returns it), nothing for a new one.
pub fn recurred(n: u64) -> String {
    if n == 0 { String::new() } else { format!(" ({n} more times since the last report)") }
}

/// [`Repeats`] per key for a place many threads pass, one per call site in a `static`: each key
/// (a topic, a peer's address) is logged when new, then at most every `every`. Up to 64 keys
/// are tracked; past that, keys not logged within `every` are forgotten, and if all are
/// recent, new keys share one more slot, so a peer inventing keys cannot flood the log either.
#[derive(Debug)]
pub struct Throttle {
    every: std::time::Duration,
    keys: std::sync::Mutex<Vec<(String, Repeats)>>,
}

impl Throttle {
    const MAX_KEYS: usize = 64;
    const OVERFLOW: &str = "\u{0}overflow";

    pub const fn new(every: std::time::Duration) -> Self {
        Throttle { every, keys: std::sync::Mutex::new(Vec::new()) }
    }

    /// [`Repeats::note`] for `key`.
    pub fn note(&self, key: &str) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = key;
        if !keys.iter().any(|(k, _)| k == key) && keys.len() >= Self::MAX_KEYS {
            keys.retain(|(_, r)| r.logged_within(now));
            if keys.len() >= Self::MAX_KEYS {
                key = Self::OVERFLOW;
            }
        }
        let i = match keys.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                keys.push((key.to_string(), Repeats::new(self.every)));
                keys.len() - 1
            }
        };
        keys[i].1.note_at(key, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_word_that_is_no_level_is_refused_and_warning_means_warn() {
        assert_eq!(checked_spec("warning").unwrap(), "warn");
        assert_eq!(checked_spec("WARNING, rmqha_core::ha=debug").unwrap(), "warn,rmqha_core::ha=debug");
        for ok in ["info", "DEBUG", "off", "rmqha_core", "rmqha_core::ha", "info,rmqha_core[x]=trace", "3"] {
            assert!(checked_spec(ok).is_ok(), "{ok}");
        }
        let why = checked_spec("verbose").unwrap_err();
        assert!(why.contains("\"verbose\" is not a level"), "{why}");
    }

    #[test]
    fn a_repeat_is_logged_once_per_interval_with_its_count_and_a_new_key_at_once() {
        let mut r = Repeats::new(Duration::from_secs(60));
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(r.note_at("refused", at(0)), Some(0));
        assert_eq!(r.note_at("refused", at(1)), None);
        assert_eq!(r.note_at("refused", at(59)), None);
        assert_eq!(r.note_at("timed out", at(59)), Some(0), "a new cause shows at once");
        assert_eq!(r.note_at("timed out", at(100)), None);
        assert_eq!(r.note_at("timed out", at(119)), Some(1), "after the interval, with the count in between");
        assert_eq!(r.note_at("timed out", at(120)), None);
        assert_eq!(r.clear(), 7);
        assert_eq!(r.note_at("timed out", at(121)), Some(0), "after a clear it is new again");
        let t = Throttle::new(Duration::from_secs(60));
        assert_eq!(t.note("x"), Some(0));
        assert_eq!(t.note("x"), None);
        assert_eq!(t.note("y"), Some(0), "each key on its own");
        assert_eq!(t.note("x"), None);
        // A peer inventing keys: 64 are tracked, then new ones share one slot.
        let logged = (0..1000).filter(|i| t.note(&format!("k{i}")).is_some()).count();
        assert_eq!(logged, 64 - 2 + 1);
    }
}
