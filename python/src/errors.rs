//! The exception hierarchy and the translation of `rmqha_core::Error` into it.
//!
//! One class per family of core errors, all under `RmqhaError`, so a caller can catch one
//! family or everything rmqha raises. Attributes carry the context the core error has (the
//! config key and line, the put status) so callers need not parse messages.

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyException, PyUserWarning};
use pyo3::prelude::*;
use rmqha_core::Error;
use rmqha_core::config::ConfigError as CoreConfigError;
use rmqha_core::metadata::MetadataError;

pyo3::create_exception!(rmqha, RmqhaError, PyException, "Base class of every error rmqha raises.");
pyo3::create_exception!(
    rmqha,
    ConfigError,
    RmqhaError,
    "An invalid or unreadable configuration. Attributes: key, value, path, line (None when unknown)."
);
pyo3::create_exception!(
    rmqha,
    StoreError,
    RmqhaError,
    "The store cannot work: a file could not be opened, recovered, created, written or flushed."
);
pyo3::create_exception!(
    rmqha,
    PutError,
    RmqhaError,
    "A put stored nothing. Attribute: status (e.g. \"MESSAGE_ILLEGAL\", \"SERVICE_NOT_AVAILABLE\")."
);
pyo3::create_exception!(
    rmqha,
    InvalidArgumentError,
    RmqhaError,
    "An argument was out of range or malformed."
);
pyo3::create_exception!(rmqha, NotMasterError, RmqhaError, "The operation needs a master broker.");
pyo3::create_exception!(rmqha, NotSlaveError, RmqhaError, "The operation needs a slave broker.");
pyo3::create_exception!(
    rmqha,
    RemotingError,
    RmqhaError,
    "A network failure of the broker's remoting service (e.g. its port could not be bound)."
);
pyo3::create_exception!(rmqha, ClosedError, RmqhaError, "The broker was closed.");
pyo3::create_exception!(
    rmqha,
    ConfigWarning,
    PyUserWarning,
    "A config key rmqha does not know or does not implement; it was ignored."
);

/// Adds the classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RmqhaError", py.get_type::<RmqhaError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("PutError", py.get_type::<PutError>())?;
    m.add("InvalidArgumentError", py.get_type::<InvalidArgumentError>())?;
    m.add("NotMasterError", py.get_type::<NotMasterError>())?;
    m.add("NotSlaveError", py.get_type::<NotSlaveError>())?;
    m.add("RemotingError", py.get_type::<RemotingError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ConfigWarning", py.get_type::<ConfigWarning>())?;
    Ok(())
}

/// The Python exception for a core error.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Config(c) => config_error(py, c),
        Error::Io { ref path, .. } => {
            let err = StoreError::new_err(e.to_string());
            set_attrs(py, &err, &[("path", path.to_string_lossy().into_owned().into_bound_py_any(py).ok())]);
            err
        }
        Error::Metadata(MetadataError::Io { ref path, .. }) => {
            let err = StoreError::new_err(e.to_string());
            set_attrs(py, &err, &[("path", path.to_string_lossy().into_owned().into_bound_py_any(py).ok())]);
            err
        }
        Error::Store(_) | Error::Metadata(_) => {
            let err = StoreError::new_err(e.to_string());
            set_attrs(py, &err, &[("path", Some(py.None().into_bound(py)))]);
            err
        }
        Error::PutFailed { status, .. } => {
            let err = PutError::new_err(e.to_string());
            set_attrs(py, &err, &[("status", status.as_str().into_bound_py_any(py).ok())]);
            err
        }
        Error::InvalidArgument(_) => InvalidArgumentError::new_err(e.to_string()),
        Error::NotMaster(_) => NotMasterError::new_err(e.to_string()),
        Error::NotSlave(_) => NotSlaveError::new_err(e.to_string()),
        Error::Remoting(_) => RemotingError::new_err(e.to_string()),
        // `Error` is non-exhaustive: a family added later is still an RmqhaError.
        _ => RmqhaError::new_err(e.to_string()),
    }
}

/// A `ConfigError` with the key, value, path and line the core error names.
pub fn config_error(py: Python<'_>, c: CoreConfigError) -> PyErr {
    let err = ConfigError::new_err(c.to_string());
    let path = c.path.as_ref().map(|p| p.to_string_lossy().into_owned());
    set_attrs(
        py,
        &err,
        &[
            ("key", c.key.into_bound_py_any(py).ok()),
            ("value", c.value.into_bound_py_any(py).ok()),
            ("path", path.into_bound_py_any(py).ok()),
            ("line", c.line.into_bound_py_any(py).ok()),
        ],
    );
    err
}

/// The error raised by any call on a closed broker.
pub fn closed() -> PyErr {
    ClosedError::new_err("the broker is closed")
}

fn set_attrs(py: Python<'_>, err: &PyErr, attrs: &[(&str, Option<Bound<'_, PyAny>>)]) {
    let value = err.value(py);
    for (name, v) in attrs {
        if let Some(v) = v {
            // Setting an attribute on a fresh exception instance cannot fail in practice; if
            // it did, the exception without the attribute is still the right one to raise.
            let _ = value.setattr(*name, v);
        }
    }
}
