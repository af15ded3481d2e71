//! Statuses, the thread-local last error, and the panic boundary every export runs inside.

use std::cell::RefCell;
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use rmqha_core::Error;

use crate::args;

/// What a call did. The numbers are stable: new statuses get new numbers, old ones keep theirs.
///
/// Every status but `RMQHA_STATUS_OK` leaves a message on the calling thread for
/// `rmqha_last_error_message`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmqha_status {
    /// The call did what it says.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullArgument = 1,
    /// An argument was out of range or malformed (e.g. a string that is not UTF-8, a negative
    /// offset, `max_msgs` < 1).
    InvalidArgument = 2,
    /// A configuration value was invalid, a properties file could not be read or parsed, or
    /// the keys contradict each other; the message names the key (and file and line).
    Config = 3,
    /// `rmqha_config_set` was given a key rmqha does not know (or a RocketMQ key it does not
    /// implement). The key was ignored; the config is unchanged and still usable.
    UnknownConfigKey = 4,
    /// An I/O or network failure: a file or directory of the store could not be created,
    /// opened or written (the message names it), or a socket failed.
    Io = 5,
    /// The store cannot work: recovery refused what it found (damage inside the log, an empty
    /// log beside indexed queues), a flush failed, another broker holds the store's lock, or a
    /// port could not be bound.
    Store = 6,
    /// The broker's role does not allow the call: `rmqha_start_master` with a SLAVE config,
    /// `rmqha_start_slave` with a master config, `rmqha_set_master_address` on a master. (A put
    /// on a slave is `RMQHA_STATUS_PUT_FAILED` with SERVICE_NOT_AVAILABLE, as in every binding.)
    WrongRole = 7,
    /// A put stored nothing; `rmqha_put_result_t.status` says why in RocketMQ's terms (for
    /// example SERVICE_NOT_AVAILABLE after `rmqha_shutdown`, MESSAGE_ILLEGAL for a too large
    /// body).
    PutFailed = 8,
    /// The thing asked for does not exist (a message id, a slave index).
    NotFound = 9,
    /// A bug in rmqha: a Rust panic was caught at the C boundary. The handle involved may be in
    /// an unexpected state; shut it down and free it.
    Panic = 99,
}

impl rmqha_status {
    fn name(self) -> &'static CStr {
        match self {
            rmqha_status::Ok => c"RMQHA_STATUS_OK",
            rmqha_status::NullArgument => c"RMQHA_STATUS_NULL_ARGUMENT",
            rmqha_status::InvalidArgument => c"RMQHA_STATUS_INVALID_ARGUMENT",
            rmqha_status::Config => c"RMQHA_STATUS_CONFIG",
            rmqha_status::UnknownConfigKey => c"RMQHA_STATUS_UNKNOWN_CONFIG_KEY",
            rmqha_status::Io => c"RMQHA_STATUS_IO",
            rmqha_status::Store => c"RMQHA_STATUS_STORE",
            rmqha_status::WrongRole => c"RMQHA_STATUS_WRONG_ROLE",
            rmqha_status::PutFailed => c"RMQHA_STATUS_PUT_FAILED",
            rmqha_status::NotFound => c"RMQHA_STATUS_NOT_FOUND",
            rmqha_status::Panic => c"RMQHA_STATUS_PANIC",
        }
    }

    const ALL: [rmqha_status; 11] = [
        rmqha_status::Ok,
        rmqha_status::NullArgument,
        rmqha_status::InvalidArgument,
        rmqha_status::Config,
        rmqha_status::UnknownConfigKey,
        rmqha_status::Io,
        rmqha_status::Store,
        rmqha_status::WrongRole,
        rmqha_status::PutFailed,
        rmqha_status::NotFound,
        rmqha_status::Panic,
    ];
}

/// A failed call: the status to return and the message to leave for the caller.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: rmqha_status,
    pub message: String,
}

impl Failure {
    pub fn new(status: rmqha_status, message: impl Into<String>) -> Self {
        Failure { status, message: message.into() }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::Config(_) => rmqha_status::Config,
            Error::Io { .. } | Error::Remoting(_) => rmqha_status::Io,
            Error::PutFailed { .. } => rmqha_status::PutFailed,
            Error::InvalidArgument(_) => rmqha_status::InvalidArgument,
            Error::NotMaster(_) | Error::NotSlave(_) => rmqha_status::WrongRole,
            // Store, metadata (the config tables on disk), and whatever core adds later.
            _ => rmqha_status::Store,
        };
        Failure { status, message: e.to_string() }
    }
}

pub(crate) type FfiResult<T = ()> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(message: String) {
    // `try_with`: a call from a thread-local destructor after ours was destroyed loses only
    // its message.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = message);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = rmqha_core::panic_message(payload);
    format!("rmqha panicked (a bug; please report it): {what}")
}

/// Runs the body of an export that returns a status: a `Failure` or a panic becomes a status
/// and a last-error message.
pub(crate) fn guard(f: impl FnOnce() -> FfiResult) -> rmqha_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => rmqha_status::Ok,
        Ok(Err(fail)) => {
            set_last_error(fail.message);
            fail.status
        }
        Err(payload) => {
            set_last_error(panic_message(payload.as_ref()));
            rmqha_status::Panic
        }
    }
}

/// Runs the body of an export that returns a value: a panic gives `on_panic`.
pub(crate) fn guard_value<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            set_last_error(panic_message(payload.as_ref()));
            on_panic
        }
    }
}

/// Copies the message of the last non-OK status returned on the calling thread into `buf`.
///
/// Writes at most `len` bytes including a terminating NUL (truncating at a UTF-8 character
/// boundary) and returns the length of the whole message without its NUL, like `snprintf`: a
/// return value >= `len` means the copy was truncated. `buf` may be NULL when `len` is 0, to
/// ask for the length. An OK status does not clear the message; with no failure yet on this
/// thread the message is empty.
///
/// Ownership: `buf` belongs to the caller. Thread safety: each thread has its own message.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_last_error_message(buf: *mut c_char, len: usize) -> usize {
    guard_value(0, || {
        LAST_ERROR
            .try_with(|e| {
                // SAFETY: the caller gives a buffer of `len` bytes (or NULL).
                unsafe { args::copy_to_buf(&e.borrow(), buf, len) }
            })
            .unwrap_or(0)
    })
}

/// The name of a status, e.g. "RMQHA_STATUS_WRONG_ROLE"; "RMQHA_STATUS_UNKNOWN" for a
/// number this library does not define.
///
/// Ownership: a static string; never free it. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn rmqha_status_name(status: u32) -> *const c_char {
    guard_value(std::ptr::null(), || {
        rmqha_status::ALL
            .iter()
            .find(|s| **s as u32 == status)
            .map_or(c"RMQHA_STATUS_UNKNOWN", |s| s.name())
            .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_their_numbers() {
        let numbers: Vec<u32> = rmqha_status::ALL.iter().map(|s| *s as u32).collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 99]);
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let s = guard(|| panic!("boom"));
        assert_eq!(s, rmqha_status::Panic);
        let mut buf = [0 as c_char; 128];
        // SAFETY: buf has 128 bytes.
        let n = unsafe { rmqha_last_error_message(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: the copy is NUL-terminated.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(n, msg.len());
        assert!(msg.contains("boom"), "{msg}");
    }

    #[test]
    fn unknown_status_numbers_have_a_name() {
        // SAFETY: static strings.
        let name = unsafe { CStr::from_ptr(rmqha_status_name(12345)) };
        assert_eq!(name, c"RMQHA_STATUS_UNKNOWN");
        let name = unsafe { CStr::from_ptr(rmqha_status_name(7)) };
        assert_eq!(name, c"RMQHA_STATUS_WRONG_ROLE");
    }
}
