//! The `Broker` class: a handle on a running core broker.
//!
//! Cheap reads (offsets, ports, consumer offsets) are synchronous. Reads that touch the
//! CommitLog and `close()` return promises computed on libuv's pool; `putMessage` returns a
//! promise settled by rmqha's threads (`put.rs`). Only `putMessageSync` blocks the event loop.
//! After `close()` every method throws (or rejects with) an error with code `CLOSED`;
//! `close()` itself may be called again and resolves at once.

use std::sync::{Arc, Mutex, Weak};

use napi::Result;
use napi::bindgen_prelude::{AsyncTask, Either, Env, Object, Uint8Array};
use napi_derive::napi;
use rmqha_core::filter::MessageSelector;
use rmqha_core::{Broker as CoreBroker, TimeBoundary};

use crate::error::{Failure, MAX_SAFE_INTEGER, Outcome, int_in, to_js};
use crate::put::Settler;
use crate::tasks::{CloseTask, GetMessagesTask, MessageByIdTask, QueryByKeyTask, QueueOffsetByTimeTask};
use crate::types::{self, GetOptions, Offsets, PutOptions, PutResult};

/// A running master or slave. Get one from `startMaster` or `startSlave`; end it with
/// `await broker.close()`.
#[napi]
pub struct Broker {
    inner: Mutex<Option<Arc<CoreBroker>>>,
    /// The broker while anything still holds it (a `close()` in progress, a task in flight):
    /// a second `close()` waits on it for the first to finish.
    core: Weak<CoreBroker>,
    /// Carries `putMessage` answers to the JavaScript thread.
    settler: Arc<Settler>,
}

/// A message body: bytes as given, or a string as UTF-8.
fn body_bytes(body: Either<Uint8Array, String>) -> Vec<u8> {
    match body {
        Either::A(bytes) => bytes.to_vec(),
        Either::B(text) => text.into_bytes(),
    }
}

impl Broker {
    pub(crate) fn new(env: &Env, broker: Arc<CoreBroker>) -> Result<Self> {
        Ok(Broker {
            core: Arc::downgrade(&broker),
            inner: Mutex::new(Some(broker)),
            settler: Settler::new(env)?,
        })
    }

    fn core(&self) -> Outcome<Arc<CoreBroker>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(Failure::closed)
    }

    /// Runs a synchronous read on the open broker.
    fn read<T>(&self, env: &Env, f: impl FnOnce(&CoreBroker) -> T) -> Result<T> {
        to_js(env, self.core().map(|b| f(&b)))
    }
}

#[napi]
impl Broker {
    /// Puts a message. The promise settles when the answer is final for the role: stored;
    /// flushed on SYNC_FLUSH; acked by a slave (or timed out) on a SYNC_MASTER. It resolves
    /// with a `PutResult` whose `status` may be non-OK for a stored message (e.g.
    /// FLUSH_SLAVE_TIMEOUT); it rejects (code PUT_FAILED, WRONG_ROLE, CLOSED, ...) when
    /// nothing was stored. Puts are stored in call order.
    #[napi(ts_return_type = "Promise<PutResult>", catch_unwind)]
    pub fn put_message<'env>(
        &self,
        env: &'env Env,
        topic: String,
        body: Either<Uint8Array, String>,
        opts: Option<PutOptions>,
    ) -> Result<Object<'env>> {
        let (pending, promise) = self.settler.pending(env)?;
        let put = types::message(topic, body_bytes(body), opts)
            .and_then(|msg| self.core().and_then(|b| b.put_message(&msg).map_err(Failure::from)));
        match put {
            Ok(handle) => handle.on_complete(move |r| pending.complete(r)),
            Err(f) => pending.fail(f),
        }
        Ok(promise)
    }

    /// Puts a message and blocks the event loop until the answer is final (see
    /// `putMessage`). Throws when nothing was stored.
    #[napi(catch_unwind)]
    pub fn put_message_sync(
        &self,
        env: Env,
        topic: String,
        body: Either<Uint8Array, String>,
        opts: Option<PutOptions>,
    ) -> Result<PutResult> {
        let outcome = types::message(topic, body_bytes(body), opts)
            .and_then(|msg| self.core().and_then(|b| b.put_message_sync(&msg).map_err(Failure::from)));
        to_js(&env, outcome.map(PutResult::from))
    }

    /// Up to `maxMsgs` messages of a queue from ConsumeQueue offset `offset`; with
    /// `opts.tags` (a tag expression) or `opts.sql` (a SQL92 expression), only the messages
    /// it passes. Skipped messages do not count toward `maxMsgs`; NO_MATCHED_MESSAGE with
    /// `nextBeginOffset` past the scanned window means none passed there.
    #[napi(catch_unwind)]
    pub fn get_messages(
        &self,
        env: Env,
        topic: String,
        queue_id: f64,
        offset: f64,
        max_msgs: f64,
        opts: Option<GetOptions>,
    ) -> Result<AsyncTask<GetMessagesTask>> {
        let opts = opts.unwrap_or_default();
        let args = (|| {
            Ok((
                int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64)? as i32,
                int_in("offset", offset, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)?,
                int_in("maxMsgs", max_msgs, 1, i32::MAX as i64)? as i32,
                MessageSelector::from_tags_or_sql(opts.tags.as_deref(), opts.sql.as_deref())?,
            ))
        })();
        let (queue_id, offset, max_msgs, selector) = to_js(&env, args)?;
        let broker = to_js(&env, self.core())?;
        Ok(AsyncTask::new(GetMessagesTask { broker, topic, queue_id, offset, max_msgs, selector }))
    }

    /// Messages of `topic` with `key` (KEYS or UNIQ_KEY), newest first, at most `max`, stored
    /// from `begin` to `end` ms since the epoch (both included; defaults: no bound).
    #[napi(catch_unwind)]
    pub fn query_by_key(
        &self,
        env: Env,
        topic: String,
        key: String,
        max: f64,
        begin: Option<f64>,
        end: Option<f64>,
    ) -> Result<AsyncTask<QueryByKeyTask>> {
        let max = to_js(&env, int_in("max", max, 0, u32::MAX as i64))? as u32;
        let begin = begin
            .map(|v| to_js(&env, int_in("begin", v, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)))
            .transpose()?
            .unwrap_or(0);
        let end = end
            .map(|v| to_js(&env, int_in("end", v, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)))
            .transpose()?
            .unwrap_or(i64::MAX);
        if begin > end {
            return Err(Failure::invalid(format!("begin {begin} is after end {end}")).into_js(&env));
        }
        let broker = to_js(&env, self.core())?;
        Ok(AsyncTask::new(QueryByKeyTask { broker, topic, key, max, begin, end }))
    }

    /// The message with this offset message id, or null.
    #[napi(catch_unwind)]
    pub fn message_by_id(&self, env: Env, msg_id: String) -> Result<AsyncTask<MessageByIdTask>> {
        let broker = to_js(&env, self.core())?;
        Ok(AsyncTask::new(MessageByIdTask { broker, msg_id }))
    }

    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    #[napi(catch_unwind)]
    pub fn role(&self, env: Env) -> Result<String> {
        self.read(&env, |b| b.role().as_str().to_string())
    }

    /// CommitLog max physical offset (end of the last byte written).
    #[napi(catch_unwind)]
    pub fn max_offset(&self, env: Env) -> Result<i64> {
        self.read(&env, |b| b.max_offset())
    }

    /// First physical offset still on disk.
    #[napi(catch_unwind)]
    pub fn min_offset(&self, env: Env) -> Result<i64> {
        self.read(&env, |b| b.min_offset())
    }

    /// End of what is fsynced.
    #[napi(catch_unwind)]
    pub fn flushed_offset(&self, env: Env) -> Result<i64> {
        self.read(&env, |b| b.flushed_offset())
    }

    /// Master: highest offset acked by any slave (-1 if none); slave: highest offset it acked.
    #[napi(catch_unwind)]
    pub fn slave_ack_offset(&self, env: Env) -> Result<i64> {
        self.read(&env, |b| b.slave_ack_offset())
    }

    /// The remoting port actually bound.
    #[napi(catch_unwind)]
    pub fn listen_port(&self, env: Env) -> Result<u32> {
        self.read(&env, |b| b.listen_port().into())
    }

    /// The HA port actually bound (0 on a slave).
    #[napi(catch_unwind)]
    pub fn ha_port(&self, env: Env) -> Result<u32> {
        self.read(&env, |b| b.ha_port().into())
    }

    /// ConsumeQueue min offset of a queue.
    #[napi(catch_unwind)]
    pub fn queue_min_offset(&self, env: Env, topic: String, queue_id: f64) -> Result<i64> {
        let queue_id = to_js(&env, int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64))? as i32;
        self.read(&env, |b| b.queue_min_offset(&topic, queue_id))
    }

    /// ConsumeQueue max offset of a queue (the next offset to be written).
    #[napi(catch_unwind)]
    pub fn queue_max_offset(&self, env: Env, topic: String, queue_id: f64) -> Result<i64> {
        let queue_id = to_js(&env, int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64))? as i32;
        self.read(&env, |b| b.queue_max_offset(&topic, queue_id))
    }

    /// A queue's offset by store time (ms since the epoch), as SEARCH_OFFSET_BY_TIMESTAMP
    /// answers: `'lower'` (the default) the first message stored at or after it (the queue's
    /// max offset when every message is older), `'upper'` the last stored at or before it.
    /// Either answers the min offset when every message is newer, and 0 for an unknown queue.
    #[napi(
        catch_unwind,
        ts_args_type = "topic: string, queueId: number, timestampMs: number, boundary?: 'lower' | 'upper'"
    )]
    pub fn queue_offset_by_time(
        &self,
        env: Env,
        topic: String,
        queue_id: f64,
        timestamp_ms: f64,
        boundary: Option<String>,
    ) -> Result<AsyncTask<QueueOffsetByTimeTask>> {
        let queue_id = to_js(&env, int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64))? as i32;
        let ts = to_js(&env, int_in("timestampMs", timestamp_ms, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER))?;
        let boundary = match boundary.as_deref() {
            None => TimeBoundary::Lower,
            Some(s) => to_js(&env, s.parse::<TimeBoundary>().map_err(Failure::from))?,
        };
        // A binary search that reads a record at each step (cold pages after a restart are disk
        // reads): on libuv's pool, as every other read of the CommitLog.
        let broker = to_js(&env, self.core())?;
        Ok(AsyncTask::new(QueueOffsetByTimeTask { broker, topic, queue_id, ts, boundary }))
    }

    /// One snapshot of the offsets and replication state.
    #[napi(catch_unwind)]
    pub fn offsets(&self, env: Env) -> Result<Offsets> {
        self.read(&env, |b| b.offsets().into())
    }

    /// The broker's metrics as Prometheus text (exposition format 0.0.4): offsets, each
    /// slave's ack offset and lag, put counters by status, and a histogram of how long puts
    /// waited for a flush or a slave. Serve it at /metrics for Prometheus.
    #[napi(catch_unwind)]
    pub fn metrics(&self, env: Env) -> Result<String> {
        self.read(&env, |b| b.metrics())
    }

    /// A consumer group's committed offset of a queue (-1 if none).
    #[napi(catch_unwind)]
    pub fn consumer_offset(&self, env: Env, group: String, topic: String, queue_id: f64) -> Result<i64> {
        let queue_id = to_js(&env, int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64))? as i32;
        self.read(&env, |b| b.consumer_offset(&group, &topic, queue_id))
    }

    /// Commits a consumer group's offset of a queue (persisted in the background and at close).
    #[napi(catch_unwind)]
    pub fn commit_consumer_offset(
        &self,
        env: Env,
        group: String,
        topic: String,
        queue_id: f64,
        offset: f64,
    ) -> Result<()> {
        let outcome = int_in("queueId", queue_id, i32::MIN as i64, i32::MAX as i64).and_then(|q| {
            let offset = int_in("offset", offset, 0, MAX_SAFE_INTEGER)?;
            self.core().and_then(|b| {
                b.commit_consumer_offset(&group, &topic, q as i32, offset).map_err(Failure::from)
            })
        });
        to_js(&env, outcome)
    }

    /// Slave: replicate from another master (HA `host:port`) from now on. WRONG_ROLE on a master,
    /// INVALID_ARGUMENT for an address that is not `host:port`.
    #[napi(catch_unwind)]
    pub fn set_master_address(&self, env: Env, ha_address: String) -> Result<()> {
        let outcome = self.core().and_then(|b| b.set_master_address(&ha_address).map_err(Failure::from));
        to_js(&env, outcome)
    }

    /// Whether `close()` was called.
    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Shuts down gracefully (flush, stop services, join threads, the store let go); pending
    /// puts settle first. A call while another runs resolves once that one is done; later
    /// calls resolve at once. Rejects with code `STORE` when the stop was not clean (config
    /// tables not persisted, a failed final flush); the broker is stopped all the same. Only
    /// the call that stopped the broker rejects so.
    #[napi(catch_unwind)]
    pub fn close(&self) -> AsyncTask<CloseTask> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Only the call that stops the broker reports an unclean stop; a racing one waits.
        let report = taken.is_some();
        let broker = taken.or_else(|| self.core.upgrade());
        AsyncTask::new(CloseTask { broker, report })
    }
}
