//! `rmqha_config`: a broker configuration under RocketMQ's property keys.

use std::ffi::c_char;
use std::sync::{Mutex, MutexGuard};

use rmqha_core::BrokerConfig;

use crate::args;
use crate::status::{Failure, guard, rmqha_status};

/// A broker configuration: RocketMQ property keys (`storePathRootDir`, `brokerRole`,
/// `listenPort`, `haListenPort`, `haMasterAddress`, `mappedFileSizeCommitLog`, ...) with
/// string values. Opaque; create with `rmqha_config_new`, free with `rmqha_config_free`.
///
/// A config is only read by `rmqha_start_master`/`rmqha_start_slave` (which copy it), so it
/// can be freed or reused right after a broker starts.
pub struct rmqha_config {
    inner: Mutex<BrokerConfig>,
}

impl rmqha_config {
    /// The config; a panic while it was locked left nothing half-written worth refusing.
    pub(crate) fn lock(&self) -> MutexGuard<'_, BrokerConfig> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Creates a config holding RocketMQ's defaults (an ASYNC_MASTER storing under
/// `~/store`), into `*out`.
///
/// Ownership: the caller owns `*out` and frees it with `rmqha_config_free`.
/// Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_new(out: *mut *mut rmqha_config) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        let cfg = Box::new(rmqha_config { inner: Mutex::new(BrokerConfig::default()) });
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, Box::into_raw(cfg)) };
        Ok(())
    })
}

/// Sets one key to a value, as a line `key=value` of a properties file would.
///
/// Returns `RMQHA_STATUS_CONFIG` for an invalid value (the message names the key and value;
/// the config keeps its previous value) and `RMQHA_STATUS_UNKNOWN_CONFIG_KEY` for a key rmqha
/// does not know or does not implement (ignored; the config is still usable, so a caller
/// copying a whole RocketMQ configuration may go on). A known key set with a warning (a disk
/// ratio clamped to RocketMQ's range, a key that has no effect in rmqha) returns
/// `RMQHA_STATUS_OK`; `rmqha_config_warnings` lists the warning. Both spellings of renamed
/// keys are accepted (`mappedFileSizeCommitLog` and `mapedFileSizeCommitLog`).
///
/// Ownership: `key` and `value` are borrowed for the call. Thread safety: callable from any
/// thread; calls on one config are serialised.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_set(
    cfg: *mut rmqha_config,
    key: *const c_char,
    value: *const c_char,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a config from rmqha_config_new and C strings.
        let (cfg, key, value) =
            unsafe { (args::handle(cfg, "cfg")?, args::str(key, "key")?, args::str(value, "value")?) };
        let mut c = cfg.lock();
        let before = c.warnings.len();
        c.set(key, value).map_err(|e| Failure::new(rmqha_status::Config, e.to_string()))?;
        let key = key.trim();
        if c.get(key).is_some() {
            // Known and kept, even with a warning (a clamped ratio, a key with no effect here).
            return Ok(());
        }
        // The warning this call made, or (a warning is kept once) the one naming this key as
        // a whole word: not another key's that merely contains it.
        let names_key = |w: &str| {
            w.match_indices(key).any(|(i, _)| {
                let ident = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.';
                !w[..i].ends_with(ident) && !w[i + key.len()..].starts_with(ident)
            })
        };
        let why = c.warnings[before.min(c.warnings.len())..]
            .last()
            .or_else(|| if key.is_empty() { None } else { c.warnings.iter().rev().find(|w| names_key(w)) })
            .cloned();
        Err(Failure::new(
            rmqha_status::UnknownConfigKey,
            why.unwrap_or_else(|| format!("unknown config key {key}; ignored")),
        ))
    })
}

/// Copies the current value of `key` (either spelling) into `buf`, NUL-terminated and
/// truncated to `len` bytes, and stores the value's full length in `*out_len` (a value >=
/// `len` means truncated; `buf` may be NULL when `len` is 0, and NULL with a larger `len` is
/// `RMQHA_STATUS_NULL_ARGUMENT`). `out_len` may be NULL. A value holding a NUL byte (a
/// properties file can spell one `\u0000`) is cut at it, and its length is the cut one; the
/// warnings, error messages and metrics show a NUL as the six characters `\u0000`.
///
/// Returns `RMQHA_STATUS_UNKNOWN_CONFIG_KEY` for a key rmqha does not know.
///
/// Ownership: `buf` belongs to the caller. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_get(
    cfg: *const rmqha_config,
    key: *const c_char,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a config from rmqha_config_new and a C string.
        let (cfg, key) = unsafe { (args::handle(cfg, "cfg")?, args::str(key, "key")?) };
        let value = cfg.lock().get(key.trim()).ok_or_else(|| {
            Failure::new(rmqha_status::UnknownConfigKey, format!("unknown config key {key}"))
        })?;
        // A value is cut at a NUL byte it holds: what C can hold of it.
        let value = value.split('\0').next().unwrap_or_default();
        // SAFETY: `buf` has `len` writable bytes (or is NULL), `out_len` is NULL or writable,
        // by the caller's contract.
        unsafe { args::copy_out(value, buf, len, out_len) }
    })
}

/// Replaces the config with the one in a RocketMQ-style `broker.properties` file: keys the
/// file does not name take their defaults, so set individual keys after loading, not before.
///
/// Returns `RMQHA_STATUS_CONFIG` when the file cannot be read, a line does not parse or a value
/// is invalid (the message names the file, line and key); the config is then unchanged. Rules
/// between keys (a SLAVE needs a brokerId above 0, ...) are checked when a broker starts, so
/// keys set after loading can fix them. Keys
/// rmqha does not know are not errors: they are listed by `rmqha_config_warnings`.
///
/// Ownership: `path` is borrowed for the call. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_load_file(cfg: *mut rmqha_config, path: *const c_char) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a config from rmqha_config_new and a C string.
        let (cfg, path) = unsafe { (args::handle(cfg, "cfg")?, args::str(path, "path")?) };
        let loaded = BrokerConfig::read_properties_file(path)
            .map_err(|e| Failure::new(rmqha_status::Config, e.to_string()))?;
        *cfg.lock() = loaded;
        Ok(())
    })
}

/// Copies the config's warnings (keys ignored, values clamped, keys with no effect; one per line) into
/// `buf` as `rmqha_config_get` copies a value, with the full length in `*out_len` (may be
/// NULL); an empty string when there are none.
///
/// Ownership: `buf` belongs to the caller. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_warnings(
    cfg: *const rmqha_config,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a config from rmqha_config_new.
        let cfg = unsafe { args::handle(cfg, "cfg")? };
        let text = cfg.lock().warnings.join("\n");
        // SAFETY: `buf` has `len` writable bytes (or is NULL), `out_len` is NULL or writable,
        // by the caller's contract.
        unsafe { args::copy_out(&text, buf, len, out_len) }
    })
}

/// Frees a config. NULL is allowed and does nothing.
///
/// Ownership: takes back what `rmqha_config_new` gave; `cfg` must not be used afterwards.
/// Thread safety: no other call may be using `cfg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_config_free(cfg: *mut rmqha_config) {
    crate::status::guard_value((), || {
        if !cfg.is_null() {
            // SAFETY: `cfg` came from Box::into_raw in rmqha_config_new and is freed once.
            drop(unsafe { Box::from_raw(cfg) });
        }
    })
}
