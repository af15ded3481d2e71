//! Errors as Node sees them: an `Error` whose `code` is a stable string.
//!
//! | code | when |
//! |---|---|
//! | `CONFIG` | a config key or value is wrong |
//! | `WRONG_ROLE` | the operation or start function needs the other role (core `NotMaster` / `NotSlave`) |
//! | `CLOSED` | the broker was closed |
//! | `PUT_FAILED` | nothing was stored; `putStatus` says why (e.g. `SERVICE_NOT_AVAILABLE`) |
//! | `INVALID_ARGUMENT`, `IO`, `STORE`, `REMOTING`, `METADATA` | the core error of that name |
//! | `INTERNAL` | a put lost its answer (a bug) |

use napi::bindgen_prelude::{JsObjectValue, Object, Unknown};
use napi::{Env, JsError, JsValue};
use rmqha_core::Error as CoreError;

/// A failure on its way to JavaScript. Plain data, so it can cross threads; it becomes a JS
/// `Error` on the JavaScript thread (`into_js`).
#[derive(Debug)]
pub struct Failure {
    code: &'static str,
    message: String,
    put_status: Option<&'static str>,
}

impl Failure {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Failure { code, message: message.into(), put_status: None }
    }

    /// An INVALID_ARGUMENT failure.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new("INVALID_ARGUMENT", message)
    }

    pub(crate) fn closed() -> Self {
        Failure::new("CLOSED", "the broker is closed")
    }

    /// The JS `Error` (with `code`, and `putStatus` for PUT_FAILED), wrapped so napi throws or
    /// rejects with exactly this object.
    pub(crate) fn into_js(self, env: &Env) -> napi::Error {
        let value = self.into_value(env);
        // SAFETY: `value` was just created in this environment.
        napi::Error::from(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
    }

    /// The JS `Error` itself (with `code`, and `putStatus` for PUT_FAILED).
    pub(crate) fn into_value(self, env: &Env) -> napi::sys::napi_value {
        let error = JsError::from(napi::Error::new(self.code, self.message)).into_unknown(*env);
        if let Some(status) = self.put_status {
            let mut obj = Object::from_raw(env.raw(), error.raw());
            // Without `putStatus` the error still has its code and message.
            let _ = obj.set_named_property("putStatus", status);
        }
        error.raw()
    }
}

impl From<CoreError> for Failure {
    fn from(e: CoreError) -> Self {
        let message = e.to_string();
        let (code, put_status) = match &e {
            CoreError::Config(_) => ("CONFIG", None),
            CoreError::Io { .. } => ("IO", None),
            CoreError::Store(_) => ("STORE", None),
            CoreError::PutFailed { status, .. } => ("PUT_FAILED", Some(status.as_str())),
            CoreError::InvalidArgument(_) => ("INVALID_ARGUMENT", None),
            CoreError::NotMaster(_) | CoreError::NotSlave(_) => ("WRONG_ROLE", None),
            CoreError::Remoting(_) => ("REMOTING", None),
            CoreError::Metadata(_) => ("METADATA", None),
            _ => ("ERROR", None),
        };
        Failure { code, message, put_status }
    }
}

impl From<rmqha_core::config::ConfigError> for Failure {
    fn from(e: rmqha_core::config::ConfigError) -> Self {
        Failure::new("CONFIG", format!("config: {e}"))
    }
}

/// `Result` of the binding's own work, converted at the JavaScript boundary.
pub type Outcome<T> = Result<T, Failure>;

/// Converts an outcome on the JavaScript thread.
pub(crate) fn to_js<T>(env: &Env, outcome: Outcome<T>) -> napi::Result<T> {
    outcome.map_err(|f| f.into_js(env))
}

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub(crate) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A JS number that must be an integer from `lo` to `hi`. napi's own conversions wrap
/// (2**32 + 1 becomes 1), truncate (7.9 becomes 7) and turn NaN into 0 without a word.
pub(crate) fn int_in(name: &str, v: f64, lo: i64, hi: i64) -> Outcome<i64> {
    if v.is_finite() && v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 {
        Ok(v as i64)
    } else {
        Err(Failure::invalid(format!("{name} {v} is not an integer from {lo} to {hi}")))
    }
}
