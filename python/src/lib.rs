//! `rmqha._rmqha`: the native half of the `rmqha` Python package.
//!
//! A thin translation of `rmqha_core`: Python dicts and arguments in, core calls with the GIL
//! released, Python objects and exceptions out. Anything C or Node would also need belongs in
//! the core, not here. The pure-Python package `rmqha` re-exports these names.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

mod broker;
mod config;
mod errors;
mod results;

use broker::PyBroker;

/// Starts a master (brokerRole ASYNC_MASTER or SYNC_MASTER) from a config dict of RocketMQ
/// property keys.
#[pyfunction]
fn start_master(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<PyBroker> {
    let cfg = config::from_mapping(py, config)?;
    PyBroker::start(py, cfg, true)
}

/// Starts a slave (brokerRole SLAVE, haMasterAddress set) from a config dict.
#[pyfunction]
fn start_slave(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<PyBroker> {
    let cfg = config::from_mapping(py, config)?;
    PyBroker::start(py, cfg, false)
}

/// Reads a RocketMQ `broker.properties` file into a config dict (the keys it sets, in
/// canonical spelling, values as strings).
#[pyfunction]
fn load_properties(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    config::load_file(py, path)
}

#[pymodule(name = "_rmqha")]
fn rmqha_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(start_master, m)?)?;
    m.add_function(wrap_pyfunction!(start_slave, m)?)?;
    m.add_function(wrap_pyfunction!(load_properties, m)?)?;
    m.add_class::<PyBroker>()?;
    m.add_class::<results::PyPutResult>()?;
    m.add_class::<results::PyMessage>()?;
    m.add_class::<results::PyGetMessagesResult>()?;
    errors::register(m)?;
    Ok(())
}
