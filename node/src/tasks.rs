//! Work that may touch the disk or join threads runs on libuv's pool as a napi `Task`, so the
//! event loop never waits for it. Each is short and bounded: waits for a slave never happen
//! here (see `put.rs`).

use std::sync::Arc;

use napi::bindgen_prelude::Env;
use napi::{Result, Task};
use napi_derive::napi;
use rmqha_core::{Broker as CoreBroker, BrokerConfig};

use crate::broker::Broker;
use crate::config;
use crate::error::{Failure, Outcome, to_js};
use crate::types::{GetMessagesResult, StoredMessage};

/// Runs a task's work on the pool thread. napi-rs calls `compute` from an `extern "C"`
/// callback, where a panic (a bug in rmqha) would abort the whole Node process; here it
/// rejects the task's promise instead (code `GenericFailure`, message "rmqha panicked: ...").
pub(crate) fn guarded<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        let what = rmqha_core::panic_message(payload.as_ref());
        Err(napi::Error::new(napi::Status::GenericFailure, format!("rmqha panicked: {what}")))
    })
}

/// Which start function was called.
#[derive(Clone, Copy)]
pub(crate) enum StartAs {
    Master,
    Slave,
}

/// `startMaster` / `startSlave`: validate the config, open and recover the store, bind ports.
pub struct StartTask {
    pub(crate) pairs: Vec<(String, String)>,
    pub(crate) role: StartAs,
}

#[napi]
impl Task for StartTask {
    type Output = Outcome<(Arc<CoreBroker>, Vec<String>)>;
    type JsValue = Broker;

    fn compute(&mut self) -> Result<Self::Output> {
        // What the broker's threads log goes to stderr (level from RMQHA_LOG, warn by default).
        rmqha_core::logging::init_for_bindings();
        guarded(|| {
            Ok(config::build(&self.pairs).and_then(|mut cfg| {
                let warnings = std::mem::take(&mut cfg.warnings);
                let broker = match self.role {
                    StartAs::Master => CoreBroker::start_master(cfg),
                    StartAs::Slave => CoreBroker::start_slave(cfg),
                }?;
                Ok((broker, warnings))
            }))
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Broker> {
        let (broker, warnings) = to_js(&env, output)?;
        config::emit_warnings(&env, &warnings)?;
        Broker::new(&env, broker)
    }
}

/// `loadProperties`: read and validate a `broker.properties` file.
pub struct LoadPropertiesTask {
    pub(crate) path: String,
}

#[napi]
impl Task for LoadPropertiesTask {
    type Output = Outcome<BrokerConfig>;
    type JsValue = std::collections::BTreeMap<String, String>;

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| Ok(BrokerConfig::read_properties_file(&self.path).map_err(Failure::from)))
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Self::JsValue> {
        let cfg = to_js(&env, output)?;
        config::emit_warnings(&env, &cfg.warnings)?;
        Ok(config::explicit_entries(&cfg))
    }
}

/// `getMessages`: read and decode up to `max_msgs` messages of a queue.
pub struct GetMessagesTask {
    pub(crate) broker: Arc<CoreBroker>,
    pub(crate) topic: String,
    pub(crate) queue_id: i32,
    pub(crate) offset: i64,
    pub(crate) max_msgs: i32,
    pub(crate) selector: rmqha_core::filter::MessageSelector,
}

#[napi]
impl Task for GetMessagesTask {
    type Output = GetMessagesResult;
    type JsValue = GetMessagesResult;

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| {
            let (topic, q, offset, max) = (&self.topic, self.queue_id, self.offset, self.max_msgs);
            Ok(self.broker.get_messages_selected(topic, q, offset, max, &self.selector).into())
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output)
    }
}

/// `queryByKey`: messages of a topic with a key, newest first.
pub struct QueryByKeyTask {
    pub(crate) broker: Arc<CoreBroker>,
    pub(crate) topic: String,
    pub(crate) key: String,
    pub(crate) max: u32,
    pub(crate) begin: i64,
    pub(crate) end: i64,
}

#[napi]
impl Task for QueryByKeyTask {
    type Output = Vec<StoredMessage>;
    type JsValue = Vec<StoredMessage>;

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| {
            let found = self.broker.query_by_key_between(
                &self.topic,
                &self.key,
                self.max as usize,
                self.begin,
                self.end,
            );
            Ok(found.into_iter().map(StoredMessage::from).collect())
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output)
    }
}

/// `messageById`: one message by its offset message id, or null.
pub struct MessageByIdTask {
    pub(crate) broker: Arc<CoreBroker>,
    pub(crate) msg_id: String,
}

#[napi]
impl Task for MessageByIdTask {
    type Output = Option<StoredMessage>;
    type JsValue = Option<StoredMessage>;

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| Ok(self.broker.message_by_id(&self.msg_id).map(StoredMessage::from)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output)
    }
}

/// `queueOffsetByTime`: a queue's offset by store time.
pub struct QueueOffsetByTimeTask {
    pub(crate) broker: Arc<CoreBroker>,
    pub(crate) topic: String,
    pub(crate) queue_id: i32,
    pub(crate) ts: i64,
    pub(crate) boundary: rmqha_core::store::TimeBoundary,
}

#[napi]
impl Task for QueueOffsetByTimeTask {
    type Output = i64;
    type JsValue = i64;

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| Ok(self.broker.queue_offset_by_time(&self.topic, self.queue_id, self.ts, self.boundary)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output)
    }
}

/// `close`: graceful shutdown (flush, stop services, join threads). Puts still waiting for a
/// slave get their answer first. `None` when the broker was already closed. Rejects with
/// `STORE` when the stop was not clean (the broker is stopped all the same).
pub struct CloseTask {
    pub(crate) broker: Option<Arc<CoreBroker>>,
    /// Whether this call stops the broker (and so reports an unclean stop), or waits for
    /// another call that does.
    pub(crate) report: bool,
}

#[napi]
impl Task for CloseTask {
    type Output = Outcome<()>;
    type JsValue = ();

    fn compute(&mut self) -> Result<Self::Output> {
        guarded(|| {
            Ok(match self.broker.take() {
                Some(b) if self.report => b.close().map_err(Failure::from),
                Some(b) => {
                    b.shutdown();
                    Ok(())
                }
                None => Ok(()),
            })
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<()> {
        to_js(&env, output)
    }
}
