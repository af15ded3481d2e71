//! `putMessage`'s promise is settled from rmqha's own threads.
//!
//! The append itself runs on the calling (JavaScript) thread, like a write into memory: it
//! keeps the call order as the store order. The wait for the final answer (group flush on
//! SYNC_FLUSH, a slave's ack on SYNC_MASTER) is a callback on the core's `PutHandle`, run by
//! the flush or HA thread that completes it. That thread hands the result to the promise
//! through the deferred's threadsafe function, so no libuv pool thread waits for replication.
//! Each pending promise keeps the event loop alive until settled, and every put is settled
//! by `close()` at the latest, so nothing is left holding the process afterwards.

use napi::bindgen_prelude::Env;
use napi::{JsDeferred, Result};
use rmqha_core::PutResult as CorePutResult;

use crate::error::{Failure, Outcome};
use crate::types::PutResult;

type Resolver = Box<dyn FnOnce(Env) -> Result<PutResult> + Send>;

/// A put's promise not yet settled. Settling consumes it; dropping it unsettled rejects the
/// promise (code INTERNAL) rather than leaving it pending and the process unable to exit.
pub(crate) struct PendingPut(Option<JsDeferred<PutResult, Resolver>>);

impl PendingPut {
    pub(crate) fn new(deferred: JsDeferred<PutResult, Resolver>) -> Self {
        PendingPut(Some(deferred))
    }

    /// Settles with the store's final answer.
    pub(crate) fn complete(self, result: CorePutResult) {
        self.settle(Ok(result.into()));
    }

    /// Settles with an error.
    pub(crate) fn fail(self, failure: Failure) {
        self.settle(Err(failure));
    }

    fn settle(mut self, outcome: Outcome<PutResult>) {
        if let Some(deferred) = self.0.take() {
            deferred.resolve(Box::new(move |env| outcome.map_err(|f| f.into_js(&env))));
        }
    }
}

impl Drop for PendingPut {
    fn drop(&mut self) {
        if let Some(deferred) = self.0.take() {
            let failure = Failure::new("INTERNAL", "the put's answer was lost (please report)");
            deferred.resolve(Box::new(move |env| Err(failure.into_js(&env))));
        }
    }
}
