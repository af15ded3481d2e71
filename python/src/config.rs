//! Config dicts: RocketMQ property keys to `str`/`int`/`bool`/path values, to and from
//! `BrokerConfig`.

use std::ffi::CString;
use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};
use rmqha_core::BrokerConfig;

use crate::errors::{self, ConfigWarning};

/// A `BrokerConfig` from a mapping of property keys to values. Unknown keys become
/// `ConfigWarning`s; invalid values raise `ConfigError` naming the key.
pub fn from_mapping(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<BrokerConfig> {
    if !config.hasattr("items")? {
        return Err(PyTypeError::new_err(format!(
            "a config is a mapping of RocketMQ property keys to values, not {}",
            type_name(config)
        )));
    }
    let mut pairs = Vec::new();
    for item in config.call_method0("items")?.try_iter()? {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        let key: String = key
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("config keys must be str, not {}", type_name(&key))))?;
        let value = value_string(&key, &value)?;
        pairs.push((key, value));
    }
    let cfg = BrokerConfig::from_map(pairs).map_err(|e| errors::config_error(py, e))?;
    warn_all(py, &cfg.warnings)?;
    Ok(cfg)
}

/// `rmqha.load_properties`: the keys a properties file sets (canonical spelling), as strings.
pub fn load_file(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let cfg =
        py.detach(|| BrokerConfig::read_properties_file(&path)).map_err(|e| errors::config_error(py, e))?;
    warn_all(py, &cfg.warnings)?;
    let dict = PyDict::new(py);
    for key in BrokerConfig::KEYS.iter().filter(|k| cfg.is_explicit(k)) {
        dict.set_item(*key, cfg.get(key))?;
    }
    Ok(dict)
}

/// Every key with its effective value, as strings; secrets that are set read `<hidden>`.
pub fn to_dict<'py>(py: Python<'py>, cfg: &BrokerConfig) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in cfg.to_map_redacted() {
        dict.set_item(k, v)?;
    }
    Ok(dict)
}

/// The properties-file spelling of a config value: `bool` as true/false, `int` in decimal,
/// `str` as is, and `os.PathLike` through `os.fspath`.
fn value_string(key: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    // bool first: it is a subclass of int.
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_string());
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(value.str()?.to_string());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    if value.hasattr("__fspath__")? {
        let p: PathBuf = value.extract()?;
        return p
            .into_os_string()
            .into_string()
            .map_err(|_| PyTypeError::new_err(format!("config value for {key} is not a UTF-8 path")));
    }
    Err(PyTypeError::new_err(format!(
        "config value for {key} must be str, int, bool or a path, not {}",
        type_name(value)
    )))
}

fn warn_all(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    let category = py.get_type::<ConfigWarning>();
    for w in warnings {
        let msg = CString::new(w.replace('\0', " ")).unwrap_or_default();
        PyErr::warn(py, category.as_any(), &msg, 1)?;
    }
    Ok(())
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}
