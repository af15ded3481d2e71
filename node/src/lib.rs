//! rmqha for Node.js: embed a RocketMQ-compatible master or slave in a Node process.
//!
//! A thin translation of `rmqha_core` (napi-rs). Configs are objects keyed by RocketMQ
//! property names; errors are `Error`s with a `code` string (`error.rs`); offsets are JS
//! numbers. Nothing blocks the event loop but `putMessageSync`: starting, reading and closing
//! run on libuv's pool for a bounded time, and `putMessage` promises are settled by rmqha's
//! own flush and HA threads, so waits for a slave hold no libuv thread (`put.rs`).

// napi-derive learns a Task's JS type when it expands `#[napi] impl Task`: the tasks must be
// declared before the methods that return them, or the typings say `Promise<unknown>`.
mod tasks;
mod types;

mod broker;
mod config;
mod error;
mod put;

use napi::bindgen_prelude::{AsyncTask, Unknown};
use napi::{Env, Result};
use napi_derive::napi;

pub use broker::Broker;
pub use tasks::{
    CloseTask, GetMessagesTask, LoadPropertiesTask, MessageByIdTask, QueryByKeyTask, QueueOffsetByTimeTask,
    StartTask,
};
pub use types::{GetMessagesResult, Offsets, PutOptions, PutResult, RefusedSlave, SlaveInfo, StoredMessage};

use crate::config::config_pairs;
use crate::tasks::StartAs;

/// Starts a master (brokerRole ASYNC_MASTER or SYNC_MASTER). `config` maps RocketMQ property
/// keys to values, e.g. `{ storePathRootDir, brokerRole: 'SYNC_MASTER', listenPort: 0 }`.
/// Rejects with code CONFIG for a bad key or value, WRONG_ROLE for a SLAVE config; throws
/// INVALID_ARGUMENT when `config` is not an object.
#[napi(ts_args_type = "config: Record<string, string | number | boolean>", catch_unwind)]
pub fn start_master(env: Env, config: Unknown) -> Result<AsyncTask<StartTask>> {
    Ok(AsyncTask::new(StartTask { pairs: config_pairs(&env, config)?, role: StartAs::Master }))
}

/// Starts a slave (brokerRole SLAVE, haMasterAddress = the master's HA `host:port`).
/// Rejects with code CONFIG for a bad key or value, WRONG_ROLE for a master config; throws
/// INVALID_ARGUMENT when `config` is not an object.
#[napi(ts_args_type = "config: Record<string, string | number | boolean>", catch_unwind)]
pub fn start_slave(env: Env, config: Unknown) -> Result<AsyncTask<StartTask>> {
    Ok(AsyncTask::new(StartTask { pairs: config_pairs(&env, config)?, role: StartAs::Slave }))
}

/// Reads a RocketMQ `broker.properties` file into a config object (the keys it sets, with
/// canonical spelling). Unknown keys are reported as process warnings; invalid values reject
/// with code CONFIG.
#[napi(catch_unwind)]
pub fn load_properties(path: String) -> AsyncTask<LoadPropertiesTask> {
    AsyncTask::new(LoadPropertiesTask { path })
}

/// The version of rmqha this addon was built from (the workspace's, which package.json
/// carries too).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
