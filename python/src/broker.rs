//! `rmqha.Broker`: a running master or slave.
//!
//! Every call that may block (locks, page faults, fsync, waiting for a slave's ack, joining
//! threads) runs with the GIL released, so other Python threads go on. A put that waits for
//! its final answer waits in slices and checks for signals between them, so Ctrl-C
//! interrupts the wait (the message stays stored; only its final status is not known).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyType};
use rmqha_core::filter::MessageSelector;
use rmqha_core::store::PutHandle;
use rmqha_core::{Broker, BrokerConfig, Message, TimeBoundary};

use crate::errors;
use crate::results::{PyGetMessagesResult, PyMessage, PyPutResult, message_list, offsets_dict};

/// How long a waiting put sleeps between checks for signals.
const SIGNAL_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// A running broker. Close it with `close()` or a `with` block; any call after that raises
/// `ClosedError`.
#[pyclass(name = "Broker", module = "rmqha", frozen)]
pub struct PyBroker {
    inner: Mutex<Option<Arc<Broker>>>,
    /// The broker while anything still holds it (a `close()` in progress, a call in flight):
    /// a second `close()` waits on it for the first to finish.
    core: Weak<Broker>,
}

impl PyBroker {
    /// Starts a broker (a master if `master`, else a slave) with the GIL released.
    pub fn start(py: Python<'_>, config: BrokerConfig, master: bool) -> PyResult<Self> {
        // What the broker's threads log goes to stderr (level from RMQHA_LOG, warn by default).
        rmqha_core::logging::init_for_bindings();
        let started =
            py.detach(|| if master { Broker::start_master(config) } else { Broker::start_slave(config) });
        let broker = started.map_err(|e| errors::to_py(py, e))?;
        Ok(PyBroker { core: Arc::downgrade(&broker), inner: Mutex::new(Some(broker)) })
    }

    /// The broker, or `ClosedError`. The clone keeps it alive through a call that races a
    /// `close()`; `close()` still shuts it down, and the call then sees a stopped broker.
    fn broker(&self) -> PyResult<Arc<Broker>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(errors::closed)
    }

    /// Runs `f` on the broker with the GIL released.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Broker) -> T + Send) -> PyResult<T> {
        let b = self.broker()?;
        Ok(py.detach(|| f(&b)))
    }
}

impl Drop for PyBroker {
    /// A broker garbage-collected without `close()` shuts down here; with the GIL released
    /// when the interpreter allows it, since a shutdown flushes and joins threads.
    fn drop(&mut self) {
        if let Some(b) = self.inner.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            // If the interpreter cannot be attached to (it is finalizing), the closure is
            // dropped uncalled and the broker shuts down right there.
            Python::try_attach(move |py| py.detach(move || drop(b)));
        }
    }
}

#[pymethods]
impl PyBroker {
    /// Puts a message and returns when the answer is final for the broker's role: stored;
    /// flushed if SYNC_FLUSH; acked by a slave, or timed out, if SYNC_MASTER.
    #[pyo3(signature = (topic, body, tags=None, keys=None, properties=None, queue_id=0))]
    #[allow(clippy::too_many_arguments)] // the Python signature (API.md), plus self and py
    fn put_message_sync(
        &self,
        py: Python<'_>,
        topic: String,
        body: &Bound<'_, PyAny>,
        tags: Option<String>,
        keys: Option<&Bound<'_, PyAny>>,
        properties: Option<&Bound<'_, PyAny>>,
        queue_id: i32,
    ) -> PyResult<PyPutResult> {
        if queue_id < 0 {
            // As C and Node: a bad argument, refused before anything is built.
            return Err(crate::errors::InvalidArgumentError::new_err(format!(
                "queue_id {queue_id} is negative"
            )));
        }
        let mut msg = Message::new(topic, body_bytes(py, body)?).with_queue(queue_id);
        if let Some(props) = properties {
            for item in props.call_method0("items")?.try_iter()? {
                let (k, v): (String, String) = item?.extract()?;
                msg.set_property(k, v);
            }
        }
        if let Some(t) = tags {
            msg = msg.with_tags(t);
        }
        if let Some(k) = keys {
            let keys = key_list(k)?;
            if let Some(why) = keys.iter().find_map(|k| rmqha_core::message::key_error(k)) {
                return Err(errors::InvalidArgumentError::new_err(why));
            }
            if !keys.is_empty() {
                msg = msg.with_keys(&keys);
            }
        }
        let broker = self.broker()?;
        let handle = py.detach(|| broker.put_message(&msg)).map_err(|e| errors::to_py(py, e))?;
        let result = match handle {
            PutHandle::Ready(r) => r,
            PutHandle::Pending(ticket) => loop {
                if let Some(r) = py.detach(|| ticket.wait_timeout(SIGNAL_CHECK_INTERVAL)) {
                    break r;
                }
                py.check_signals()?;
            },
        };
        Ok(result.into())
    }

    /// Up to `max_msgs` messages of a queue from a ConsumeQueue offset; with `tags` (a tag
    /// expression, `"a || b"`) or `sql` (a SQL92 expression over the properties), only the
    /// messages it passes (RocketMQ's `MessageSelector`).
    #[pyo3(signature = (topic, queue_id, offset, max_msgs=32, *, tags=None, sql=None))]
    #[allow(clippy::too_many_arguments)]
    fn get_messages(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: i32,
        tags: Option<&str>,
        sql: Option<&str>,
    ) -> PyResult<PyGetMessagesResult> {
        // As the C API answers (the core would read max 0 as one message).
        if max_msgs < 1 {
            return Err(errors::InvalidArgumentError::new_err(format!("max_msgs {max_msgs} is below 1")));
        }
        let selector = MessageSelector::from_tags_or_sql(tags, sql).map_err(|e| errors::to_py(py, e))?;
        let (r, msgs) = self.with(py, |b| {
            let r = b.get_messages_selected(topic, queue_id, offset, max_msgs, &selector);
            let msgs = r.messages();
            (r, msgs)
        })?;
        PyGetMessagesResult::new(py, &r, msgs)
    }

    /// Messages of `topic` whose KEYS (or UNIQ_KEY) hold `key`, newest first, at most `max`,
    /// stored from `begin` to `end` ms since the epoch (both included; `end=None`: no bound).
    #[pyo3(signature = (topic, key, max=32, begin=0, end=None))]
    fn query_by_key<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: Option<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let end = end.unwrap_or(i64::MAX);
        if begin > end {
            return Err(errors::InvalidArgumentError::new_err(format!("begin {begin} is after end {end}")));
        }
        let msgs = self.with(py, |b| b.query_by_key_between(topic, key, max, begin, end))?;
        message_list(py, msgs)
    }

    /// The message with this offset message id (hex), or None.
    fn message_by_id(&self, py: Python<'_>, msg_id: &str) -> PyResult<Option<PyMessage>> {
        let m = self.with(py, |b| b.message_by_id(msg_id))?;
        Ok(m.map(|m| PyMessage::new(py, m)))
    }

    /// CommitLog max physical offset (the end of the last byte written).
    fn max_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with(py, |b| b.max_offset())
    }
    /// The first physical offset still on disk.
    fn min_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with(py, |b| b.min_offset())
    }
    /// The end of what is fsynced.
    fn flushed_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with(py, |b| b.flushed_offset())
    }
    /// Master: highest offset acked by any slave (-1 if none); slave: highest it acked.
    fn slave_ack_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.with(py, |b| b.slave_ack_offset())
    }
    /// The remoting port actually bound.
    fn listen_port(&self) -> PyResult<u16> {
        Ok(self.broker()?.listen_port())
    }
    /// The HA port actually bound (0 on a slave).
    fn ha_port(&self) -> PyResult<u16> {
        Ok(self.broker()?.ha_port())
    }
    /// The ConsumeQueue's first offset.
    fn queue_min_offset(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        self.with(py, |b| b.queue_min_offset(topic, queue_id))
    }
    /// The ConsumeQueue's next offset (its number of entries).
    fn queue_max_offset(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        self.with(py, |b| b.queue_max_offset(topic, queue_id))
    }

    /// A queue's offset by store time (ms since the epoch), as SEARCH_OFFSET_BY_TIMESTAMP
    /// answers: `boundary="lower"` the first message stored at or after it (the queue's max
    /// offset when every message is older), `"upper"` the last stored at or before it. Either
    /// answers the min offset when every message is newer, and 0 for an unknown queue.
    #[pyo3(signature = (topic, queue_id, timestamp_ms, boundary="lower"))]
    fn queue_offset_by_time(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        timestamp_ms: i64,
        boundary: &str,
    ) -> PyResult<i64> {
        let boundary: TimeBoundary = boundary.parse().map_err(|e| errors::to_py(py, e))?;
        self.with(py, |b| b.queue_offset_by_time(topic, queue_id, timestamp_ms, boundary))
    }

    /// One snapshot of the offsets and replication state, as a dict.
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let o = self.with(py, |b| b.offsets())?;
        offsets_dict(py, o)
    }

    /// The broker's metrics as Prometheus text (exposition format 0.0.4): offsets, each
    /// slave's ack offset and lag, put counters by status, and a histogram of how long puts
    /// waited for a flush or a slave. Serve it at /metrics for Prometheus.
    fn metrics(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |b| b.metrics())
    }

    /// A consumer group's committed offset of a queue (-1 if none).
    fn consumer_offset(&self, py: Python<'_>, group: &str, topic: &str, queue_id: i32) -> PyResult<i64> {
        self.with(py, |b| b.consumer_offset(group, topic, queue_id))
    }

    /// Commits a consumer group's offset of a queue.
    fn commit_consumer_offset(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> PyResult<()> {
        self.with(py, |b| b.commit_consumer_offset(group, topic, queue_id, offset))?
            .map_err(|e| errors::to_py(py, e))
    }

    /// Slave: replicates from another master (its HA "host:port") from now on. Raises
    /// NotSlaveError on a master and InvalidArgumentError for an address that is not host:port.
    fn set_master_address(&self, py: Python<'_>, ha_address: &str) -> PyResult<()> {
        self.with(py, |b| b.set_master_address(ha_address))?.map_err(|e| errors::to_py(py, e))
    }

    /// Every config key with its effective value (ports as bound), as strings. Secrets
    /// (haAuthSecret, aclSecretKey) read "<hidden>" when set.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let b = self.broker()?;
        crate::config::to_dict(py, b.config())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Shuts the broker down gracefully (flush, stop services, join threads, the store let
    /// go). Idempotent; a call while another thread's runs returns once that one is done.
    /// Raises `StoreError` when the stop was not clean (config tables not persisted, a failed
    /// final flush): the broker is stopped all the same. Only the call that stopped the
    /// broker raises it; later (and racing) calls return quietly.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(b) = taken {
            py.detach(move || {
                let closed = b.close();
                drop(b);
                closed
            })
            .map_err(|e| crate::errors::to_py(py, e))?;
        } else if let Some(b) = self.core.upgrade() {
            // Another call is stopping it: wait until it is done (the store let go).
            py.detach(move || {
                b.shutdown();
                drop(b);
            });
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        match self.close(py) {
            Ok(()) => Ok(false),
            // The block's own exception goes on (an `except` for it must still catch it);
            // the unclean stop becomes a RuntimeWarning (it is in the log too).
            Err(e) if _exc_type.is_some() => {
                let msg = std::ffi::CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
                let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
                PyErr::warn(py, category.as_any(), &msg, 1)?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn __repr__(&self) -> String {
        match &*self.inner.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(b) => format!(
                "<rmqha.Broker {} listen_port={} ha_port={} store='{}'>",
                b.role(),
                b.listen_port(),
                b.ha_port(),
                b.config().store_root().display()
            ),
            None => "<rmqha.Broker closed>".into(),
        }
    }
}

/// A message body from bytes, str (UTF-8) or any buffer (bytearray, memoryview...).
fn body_bytes(py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = body.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    match PyBuffer::<u8>::get(body) {
        Ok(buf) => buf.to_vec(py),
        Err(_) => Err(PyTypeError::new_err(format!(
            "body must be bytes, str or a bytes-like object, not {}",
            body.get_type().name()?
        ))),
    }
}

/// Keys from one str (split at whitespace, as the C API reads its `keys` string) or an
/// iterable of str (each one key).
fn key_list(keys: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = keys.cast::<PyString>() {
        return Ok(s.to_str()?.split_whitespace().map(str::to_string).collect());
    }
    keys.try_iter()?.map(|k| k?.extract::<String>()).collect()
}
