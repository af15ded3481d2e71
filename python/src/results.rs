//! Read-only Python views of the core's results: `PutResult`, `Message`, `GetMessagesResult`,
//! and the `offsets()` snapshot as a dict.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rmqha_core::ha::{RefusedSlave, SlaveInfo};
use rmqha_core::{GetMessageResult, Offsets, StoredMessage};

/// The store's answer to a put. `status` is "PUT_OK" or, for a stored message whose
/// durability fell short, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE.
#[pyclass(name = "PutResult", module = "rmqha", frozen, eq, get_all)]
#[derive(PartialEq, Eq)]
pub struct PyPutResult {
    pub status: &'static str,
    /// Whether the message is in the CommitLog (true for every status but the failures).
    pub stored: bool,
    pub msg_id: String,
    pub phy_offset: i64,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub size: i32,
    pub msg_num: i32,
    pub store_timestamp: i64,
}

#[pymethods]
impl PyPutResult {
    fn __repr__(&self) -> String {
        format!(
            "PutResult(status='{}', msg_id='{}', phy_offset={}, queue_id={}, queue_offset={}, size={})",
            self.status, self.msg_id, self.phy_offset, self.queue_id, self.queue_offset, self.size
        )
    }
}

impl From<rmqha_core::PutResult> for PyPutResult {
    fn from(r: rmqha_core::PutResult) -> Self {
        PyPutResult {
            status: r.status.as_str(),
            stored: r.status.is_stored(),
            msg_id: r.msg_id(),
            phy_offset: r.phy_offset,
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            size: r.size,
            msg_num: r.msg_num,
            store_timestamp: r.store_timestamp,
        }
    }
}

/// A stored message.
#[pyclass(name = "Message", module = "rmqha", frozen)]
pub struct PyMessage {
    #[pyo3(get)]
    topic: String,
    #[pyo3(get)]
    queue_id: i32,
    #[pyo3(get)]
    queue_offset: i64,
    #[pyo3(get)]
    phy_offset: i64,
    #[pyo3(get)]
    store_size: i32,
    body: Py<PyBytes>,
    #[pyo3(get)]
    tags: Option<String>,
    #[pyo3(get)]
    keys: Vec<String>,
    properties: Vec<(String, String)>,
    #[pyo3(get)]
    flag: i32,
    #[pyo3(get)]
    sys_flag: i32,
    #[pyo3(get)]
    reconsume_times: i32,
    #[pyo3(get)]
    store_timestamp: i64,
    #[pyo3(get)]
    born_timestamp: i64,
    #[pyo3(get)]
    store_host: String,
    #[pyo3(get)]
    born_host: String,
    #[pyo3(get)]
    msg_id: String,
}

#[pymethods]
impl PyMessage {
    #[getter]
    fn body(&self, py: Python<'_>) -> Py<PyBytes> {
        self.body.clone_ref(py)
    }

    /// Every property of the record (TAGS, KEYS, UNIQ_KEY, user properties...), a fresh dict.
    #[getter]
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.properties {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Message(topic='{}', queue_id={}, queue_offset={}, phy_offset={}, msg_id='{}', body=<{} bytes>)",
            self.topic,
            self.queue_id,
            self.queue_offset,
            self.phy_offset,
            self.msg_id,
            self.body.bind(py).as_bytes().len()
        )
    }
}

impl PyMessage {
    pub fn new(py: Python<'_>, m: StoredMessage) -> Self {
        PyMessage {
            body: PyBytes::new(py, &m.body).unbind(),
            topic: m.topic,
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            phy_offset: m.phy_offset,
            store_size: m.store_size,
            tags: m.tags,
            keys: m.keys,
            properties: m.properties,
            flag: m.flag,
            sys_flag: m.sys_flag,
            reconsume_times: m.reconsume_times,
            store_timestamp: m.store_timestamp,
            born_timestamp: m.born_timestamp,
            store_host: m.store_host.to_string(),
            born_host: m.born_host.to_string(),
            msg_id: m.msg_id,
        }
    }
}

/// Messages as a Python list.
pub fn message_list(py: Python<'_>, msgs: Vec<StoredMessage>) -> PyResult<Bound<'_, PyList>> {
    let items = msgs.into_iter().map(|m| Py::new(py, PyMessage::new(py, m))).collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// The result of `get_messages`; `status` uses RocketMQ's names (FOUND, NO_MESSAGE_IN_QUEUE,
/// OFFSET_OVERFLOW_ONE, ...).
#[pyclass(name = "GetMessagesResult", module = "rmqha", frozen)]
pub struct PyGetMessagesResult {
    #[pyo3(get)]
    status: &'static str,
    #[pyo3(get)]
    next_begin_offset: i64,
    #[pyo3(get)]
    min_offset: i64,
    #[pyo3(get)]
    max_offset: i64,
    #[pyo3(get)]
    suggest_pulling_from_slave: bool,
    messages: Vec<Py<PyMessage>>,
}

#[pymethods]
impl PyGetMessagesResult {
    /// The messages found, a fresh list.
    #[getter]
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.messages.iter().map(|m| m.clone_ref(py)))
    }

    fn __repr__(&self) -> String {
        format!(
            "GetMessagesResult(status='{}', next_begin_offset={}, min_offset={}, max_offset={}, messages=<{}>)",
            self.status,
            self.next_begin_offset,
            self.min_offset,
            self.max_offset,
            self.messages.len()
        )
    }
}

impl PyGetMessagesResult {
    pub fn new(py: Python<'_>, r: &GetMessageResult, msgs: Vec<StoredMessage>) -> PyResult<Self> {
        let messages =
            msgs.into_iter().map(|m| Py::new(py, PyMessage::new(py, m))).collect::<PyResult<_>>()?;
        Ok(PyGetMessagesResult {
            status: r.status.as_str(),
            next_begin_offset: r.next_begin_offset,
            min_offset: r.min_offset,
            max_offset: r.max_offset,
            suggest_pulling_from_slave: r.suggest_pulling_from_slave,
            messages,
        })
    }
}

/// The `offsets()` snapshot as a dict; `master_address`, `connected` and `last_ha_error` are
/// None on a master.
pub fn offsets_dict(py: Python<'_>, o: Offsets) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("role", o.role.as_str())?;
    d.set_item("max_offset", o.max_offset)?;
    d.set_item("min_offset", o.min_offset)?;
    d.set_item("flushed_offset", o.flushed_offset)?;
    d.set_item("slave_ack_offset", o.slave_ack_offset)?;
    d.set_item("dispatch_behind_bytes", o.dispatch_behind_bytes)?;
    d.set_item("listen_port", o.listen_port)?;
    d.set_item("ha_port", o.ha_port)?;
    let slaves = o.slaves.iter().map(|s| slave_dict(py, s)).collect::<PyResult<Vec<_>>>()?;
    d.set_item("slaves", slaves)?;
    let refused = o.refused_slaves.iter().map(|r| refused_dict(py, r)).collect::<PyResult<Vec<_>>>()?;
    d.set_item("refused_slaves", refused)?;
    d.set_item("master_address", o.master_address)?;
    d.set_item("connected", o.connected)?;
    d.set_item("last_ha_error", o.last_ha_error)?;
    Ok(d)
}

fn slave_dict<'py>(py: Python<'py>, s: &SlaveInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("addr", s.addr.to_string())?;
    d.set_item("ack_offset", s.ack_offset)?;
    d.set_item("lag_bytes", s.lag_bytes)?;
    d.set_item("connected_ms", s.connected_ms)?;
    d.set_item("transferring", s.transferring)?;
    d.set_item("last_report_ms", s.last_report_ms)?;
    Ok(d)
}

fn refused_dict<'py>(py: Python<'py>, r: &RefusedSlave) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("addr", r.addr.to_string())?;
    d.set_item("requested_offset", r.requested_offset)?;
    d.set_item("reason", &r.reason)?;
    d.set_item("at_ms", r.at_ms)?;
    Ok(d)
}
