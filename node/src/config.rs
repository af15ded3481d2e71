//! Configs cross as plain objects keyed by RocketMQ property names (API.md).

use std::collections::{BTreeMap, HashMap};

use napi::bindgen_prelude::{Either3, FnArgs, FromNapiValue, Function, JsObjectValue, Object, Unknown};
use napi::{Env, JsValue, ValueType};
use rmqha_core::BrokerConfig;

use crate::error::{Failure, Outcome};

/// A config value as JavaScript writes it; numbers and booleans become their string form.
pub(crate) type JsConfig = HashMap<String, Either3<String, f64, bool>>;

/// The key/value strings of a JS config object. Anything but a plain object (a number, a
/// string, an array, null) is INVALID_ARGUMENT: napi would read a number as an object with
/// no keys, and the broker would start on RocketMQ's default store, `~/store`.
pub(crate) fn config_pairs(env: &Env, config: Unknown) -> napi::Result<Vec<(String, String)>> {
    let is_object = config.get_type()? == ValueType::Object && !config.is_array()?;
    if !is_object {
        let what =
            if config.is_array()? { "an array".to_string() } else { format!("{:?}", config.get_type()?) };
        let failure = Failure::invalid(format!("the config must be an object of RocketMQ keys, not {what}"));
        return Err(failure.into_js(env));
    }
    // SAFETY: the value belongs to this call's environment.
    let config = unsafe { JsConfig::from_napi_value(env.raw(), config.raw()) }?;
    // A number past 2^53 loses digits on its way here: a secret written as one would differ
    // from the same digits given as a string (or to Python, which keeps them).
    if matches!(config.get("haAuthSecret"), Some(Either3::B(_) | Either3::C(_))) {
        let failure = Failure::invalid("haAuthSecret must be a string".to_string());
        return Err(failure.into_js(env));
    }
    Ok(config
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Either3::A(s) => s,
                // Whole numbers print without a fraction, as a properties file writes them.
                Either3::B(n) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
                    format!("{}", n as i64)
                }
                Either3::B(n) => n.to_string(),
                Either3::C(b) => b.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// Builds and validates a config (unknown keys end up in `warnings`).
pub(crate) fn build(pairs: &[(String, String)]) -> Outcome<BrokerConfig> {
    Ok(BrokerConfig::from_map(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?)
}

/// The keys a properties file set, with their values (canonical key spelling).
pub(crate) fn explicit_entries(config: &BrokerConfig) -> BTreeMap<String, String> {
    config.to_map().into_iter().filter(|(k, _)| config.is_explicit(k)).collect()
}

/// Reports config warnings (unknown or unsupported keys) as Node process warnings.
pub(crate) fn emit_warnings(env: &Env, warnings: &[String]) -> napi::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    let process: Object = env.get_global()?.get_named_property("process")?;
    let emit: Function<FnArgs<(String, String)>, ()> = process.get_named_property("emitWarning")?;
    for w in warnings {
        emit.apply(process, (w.clone(), "RmqhaConfigWarning".to_string()).into())?;
    }
    Ok(())
}
