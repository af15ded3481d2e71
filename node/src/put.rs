//! `putMessage`'s promise is settled from rmqha's own threads.
//!
//! The append itself runs on the calling (JavaScript) thread, like a write into memory: it
//! keeps the call order as the store order. The wait for the final answer (group flush on
//! SYNC_FLUSH, a slave's ack on SYNC_MASTER) is a callback on the core's `PutHandle`, run by
//! the flush or HA thread that completes it. That thread hands the result to the JavaScript
//! thread through the broker's threadsafe function (`Settler`), so no libuv pool thread waits
//! for replication. While any put is pending the threadsafe function keeps the event loop
//! alive; every put is settled by `close()` at the latest, so nothing holds the process after.
//!
//! The environment can end before a put is answered: a worker thread that calls
//! `process.exit()` or is terminated with puts in flight. Node then closes and frees the
//! threadsafe function, and a later call into it would touch freed memory (it aborted the
//! whole process). Its finalizer therefore marks it gone under the same lock that every call
//! holds, and an answer that arrives after that is dropped: its promise belonged to an
//! environment that no longer exists.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use napi::bindgen_prelude::{Env, Object, ToNapiValue};
use napi::{Result, check_status, sys};
use rmqha_core::PutResult as CorePutResult;

use crate::error::{Failure, Outcome};
use crate::types::PutResult;

/// A raw threadsafe function; napi allows calling and releasing it from any thread.
#[derive(Clone, Copy)]
struct RawTsfn(sys::napi_threadsafe_function);

// SAFETY: a napi threadsafe function is made to be called from other threads; `Shared` only
// hands it out under its lock, and only while Node has not finalized it.
unsafe impl Send for RawTsfn {}

/// A promise's resolver, created on the JavaScript thread and used there only (`call_js`).
struct RawDeferred(sys::napi_deferred);

// SAFETY: the pointer is only carried across threads, never dereferenced off the JS thread.
unsafe impl Send for RawDeferred {}

/// What the settler's finalizer and its users share.
struct Shared {
    /// The threadsafe function while it may be called: `None` once released or finalized.
    tsfn: Mutex<Option<RawTsfn>>,
    /// Puts whose promise is not settled yet; read and written on the JavaScript thread only.
    /// The threadsafe function holds the event loop open exactly while this is above zero.
    pending: AtomicUsize,
}

impl Shared {
    fn tsfn(&self) -> MutexGuard<'_, Option<RawTsfn>> {
        self.tsfn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One broker's channel from rmqha's threads to the JavaScript thread. Dropping the last
/// reference (the broker object and every pending put) releases the threadsafe function.
pub(crate) struct Settler {
    shared: Arc<Shared>,
}

/// A put's answer on its way to its promise.
struct Settlement {
    deferred: RawDeferred,
    outcome: Outcome<PutResult>,
}

impl Settler {
    /// Creates the threadsafe function, unreferenced (it holds the loop only for pending puts).
    pub(crate) fn new(env: &Env) -> Result<Arc<Settler>> {
        let shared = Arc::new(Shared { tsfn: Mutex::new(None), pending: AtomicUsize::new(0) });
        let raw_env = env.raw();
        let mut name = ptr::null_mut();
        let label = "rmqha putMessage";
        check_status!(
            unsafe {
                sys::napi_create_string_utf8(raw_env, label.as_ptr().cast(), label.len() as isize, &mut name)
            },
            "creating the put settler's name"
        )?;
        // The finalizer owns one reference, so `Shared` outlives every call of `call_js`.
        let finalize_data = Arc::into_raw(shared.clone()) as *mut c_void;
        let mut raw = ptr::null_mut();
        let created = check_status!(
            unsafe {
                sys::napi_create_threadsafe_function(
                    raw_env,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name,
                    0,
                    1,
                    finalize_data,
                    Some(finalize),
                    Arc::as_ptr(&shared) as *mut c_void,
                    Some(call_js),
                    &mut raw,
                )
            },
            "creating the put settler"
        );
        if let Err(e) = created {
            drop(unsafe { Arc::from_raw(finalize_data as *const Shared) });
            return Err(e);
        }
        check_status!(
            unsafe { sys::napi_unref_threadsafe_function(raw_env, raw) },
            "unreferencing the put settler"
        )?;
        *shared.tsfn() = Some(RawTsfn(raw));
        Ok(Arc::new(Settler { shared }))
    }

    /// A promise for one put, and its pending answer. Called on the JavaScript thread.
    pub(crate) fn pending<'env>(self: &Arc<Self>, env: &'env Env) -> Result<(PendingPut, Object<'env>)> {
        let raw_env = env.raw();
        let Some(tsfn) = *self.shared.tsfn() else {
            return Err(napi::Error::from_reason("the environment is shutting down"));
        };
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        check_status!(
            unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) },
            "creating a promise"
        )?;
        if self.shared.pending.load(Ordering::Relaxed) == 0 {
            check_status!(
                unsafe { sys::napi_ref_threadsafe_function(raw_env, tsfn.0) },
                "referencing the put settler"
            )?;
        }
        self.shared.pending.fetch_add(1, Ordering::Relaxed);
        let pending = PendingPut { settler: Some(self.clone()), deferred: Some(RawDeferred(deferred)) };
        Ok((pending, Object::from_raw(raw_env, promise)))
    }

    /// Hands an answer to the JavaScript thread, from any thread. Dropped when the environment
    /// is gone.
    fn send(&self, settlement: Settlement) {
        let data = Box::into_raw(Box::new(settlement));
        let tsfn = self.shared.tsfn();
        let queued = match *tsfn {
            Some(t) => {
                let mode = sys::ThreadsafeFunctionCallMode::nonblocking;
                unsafe { sys::napi_call_threadsafe_function(t.0, data.cast(), mode) == sys::Status::napi_ok }
            }
            None => false,
        };
        drop(tsfn);
        if !queued {
            drop(unsafe { Box::from_raw(data) });
        }
    }
}

impl Drop for Settler {
    fn drop(&mut self) {
        if let Some(t) = self.shared.tsfn().take() {
            unsafe {
                sys::napi_release_threadsafe_function(t.0, sys::ThreadsafeFunctionReleaseMode::release)
            };
        }
    }
}

/// Runs on the JavaScript thread for each queued answer; `env` is null when Node empties the
/// queue of a closing threadsafe function.
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_cb: sys::napi_value,
    context: *mut c_void,
    data: *mut c_void,
) {
    let settlement = unsafe { Box::from_raw(data.cast::<Settlement>()) };
    if env.is_null() {
        return;
    }
    // SAFETY: the finalizer's reference keeps `Shared` alive while calls are delivered.
    let shared = unsafe { &*(context as *const Shared) };
    let Settlement { deferred, outcome } = *settlement;
    let js_env = Env::from_raw(env);
    let resolved = outcome.and_then(|r| {
        unsafe { PutResult::to_napi_value(env, r) }.map_err(|e| Failure::new("INTERNAL", e.reason.clone()))
    });
    unsafe {
        match resolved {
            Ok(value) => sys::napi_resolve_deferred(env, deferred.0, value),
            Err(failure) => sys::napi_reject_deferred(env, deferred.0, failure.into_value(&js_env)),
        };
    }
    if shared.pending.fetch_sub(1, Ordering::Relaxed) == 1 {
        if let Some(t) = *shared.tsfn() {
            unsafe { sys::napi_unref_threadsafe_function(env, t.0) };
        }
    }
}

/// Node calls this once the threadsafe function is closed, when released or when the
/// environment ends; after it the function's memory is gone.
unsafe extern "C" fn finalize(_env: sys::napi_env, finalize_data: *mut c_void, _hint: *mut c_void) {
    let shared = unsafe { Arc::from_raw(finalize_data as *const Shared) };
    shared.tsfn().take();
}

/// A put's promise not yet settled. Settling consumes it; dropping it unsettled rejects the
/// promise (code INTERNAL) rather than leaving it pending and the process unable to exit.
pub(crate) struct PendingPut {
    settler: Option<Arc<Settler>>,
    deferred: Option<RawDeferred>,
}

impl PendingPut {
    /// Settles with the store's final answer.
    pub(crate) fn complete(self, result: CorePutResult) {
        self.settle(Ok(result.into()));
    }

    /// Settles with an error.
    pub(crate) fn fail(self, failure: Failure) {
        self.settle(Err(failure));
    }

    fn settle(mut self, outcome: Outcome<PutResult>) {
        if let (Some(settler), Some(deferred)) = (self.settler.take(), self.deferred.take()) {
            settler.send(Settlement { deferred, outcome });
        }
    }
}

impl Drop for PendingPut {
    fn drop(&mut self) {
        if let (Some(settler), Some(deferred)) = (self.settler.take(), self.deferred.take()) {
            let failure = Failure::new("INTERNAL", "the put's answer was lost (please report)");
            settler.send(Settlement { deferred, outcome: Err(failure) });
        }
    }
}
