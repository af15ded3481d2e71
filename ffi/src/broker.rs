//! `rmqha_broker`: start, stop, offsets and consumer progress.

use std::ffi::c_char;
use std::sync::Arc;

use rmqha_core::{Broker, BrokerRole, TimeBoundary};

use crate::args;
use crate::config::rmqha_config;
use crate::status::{Failure, FfiResult, guard, rmqha_status};
use crate::{RMQHA_ADDR_SIZE, RMQHA_ERROR_SIZE};

/// A running broker (master or slave). Opaque; create with `rmqha_start_master` or
/// `rmqha_start_slave`; stop with `rmqha_shutdown`, then free with `rmqha_broker_free`.
///
/// Every function taking a broker is thread-safe: one handle may be used from many threads at
/// once, except `rmqha_broker_free`, which must come after every other call on the handle
/// has returned.
pub struct rmqha_broker {
    pub(crate) inner: Arc<Broker>,
}

// What the header promises: one handle used from many threads at once.
const _: () = {
    const fn thread_safe<T: Send + Sync>() {}
    thread_safe::<rmqha_broker>();
    thread_safe::<crate::config::rmqha_config>();
};

/// A broker's role (`brokerRole`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmqha_role {
    AsyncMaster = 0,
    SyncMaster = 1,
    Slave = 2,
}

impl From<BrokerRole> for rmqha_role {
    fn from(r: BrokerRole) -> Self {
        match r {
            BrokerRole::AsyncMaster => rmqha_role::AsyncMaster,
            BrokerRole::SyncMaster => rmqha_role::SyncMaster,
            BrokerRole::Slave => rmqha_role::Slave,
        }
    }
}

/// The broker behind a handle argument.
///
/// # Safety
/// `p` is NULL or a live handle from `rmqha_start_master`/`rmqha_start_slave`.
pub(crate) unsafe fn broker_arg<'a>(p: *const rmqha_broker) -> FfiResult<&'a Broker> {
    // SAFETY: by the caller's contract.
    Ok(&unsafe { args::handle(p, "broker") }?.inner)
}

fn start(
    cfg: *const rmqha_config,
    out: *mut *mut rmqha_broker,
    want_master: bool,
    function: &str,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: checked non-NULL above; set first so a failure leaves NULL.
        unsafe { args::write(out, std::ptr::null_mut()) };
        // What the broker's threads log goes to stderr (level from RMQHA_LOG, warn by default);
        // inside the guard, as everything that could panic.
        rmqha_core::logging::init_for_bindings();
        // SAFETY: the caller passes a config from rmqha_config_new.
        let config = unsafe { args::handle(cfg, "cfg") }?.lock().clone();
        if config.broker_role.is_master() != want_master {
            let wanted = if want_master { "ASYNC_MASTER or SYNC_MASTER" } else { "SLAVE" };
            return Err(Failure::new(
                rmqha_status::WrongRole,
                format!("{function} needs brokerRole {wanted}; the config says {}", config.broker_role),
            ));
        }
        let inner = if want_master { Broker::start_master(config) } else { Broker::start_slave(config) }?;
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, Box::into_raw(Box::new(rmqha_broker { inner }))) };
        Ok(())
    })
}

/// Starts a master (`brokerRole` ASYNC_MASTER or SYNC_MASTER) from `cfg` and stores its handle
/// in `*out`. The store, the HA listener and the remoting server are running when it returns;
/// with `listenPort`/`haListenPort` 0 the bound ports are given by `rmqha_listen_port` and
/// `rmqha_ha_port`. From the first start of a master or slave on, what the brokers' threads
/// log goes to stderr: warnings and errors, or the level the `RMQHA_LOG` environment variable
/// names (`off` for nothing).
///
/// Returns `RMQHA_STATUS_WRONG_ROLE` for a SLAVE config, `RMQHA_STATUS_CONFIG` for invalid
/// settings, `RMQHA_STATUS_STORE`/`RMQHA_STATUS_IO` when the store or a port cannot be opened
/// (e.g. the store directory is locked by another broker).
///
/// Ownership: `cfg` is only read (copied); the caller keeps it and may free it at once. The
/// caller owns `*out`: `rmqha_shutdown` then `rmqha_broker_free`; on any failure `*out` is set
/// to NULL, so freeing it is always safe. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_start_master(
    cfg: *const rmqha_config,
    out: *mut *mut rmqha_broker,
) -> rmqha_status {
    start(cfg, out, true, "rmqha_start_master")
}

/// Starts a slave (`brokerRole` SLAVE, `haMasterAddress` the master's HA `host:port`) from
/// `cfg` and stores its handle in `*out`. It connects to its master in the background (and
/// keeps reconnecting); `rmqha_offsets` tells whether it is connected.
///
/// Returns `RMQHA_STATUS_WRONG_ROLE` for a master config, `RMQHA_STATUS_CONFIG` for invalid
/// settings (e.g. no `haMasterAddress`), `RMQHA_STATUS_STORE`/`RMQHA_STATUS_IO` as
/// `rmqha_start_master`.
///
/// Ownership and thread safety: as `rmqha_start_master`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_start_slave(
    cfg: *const rmqha_config,
    out: *mut *mut rmqha_broker,
) -> rmqha_status {
    start(cfg, out, false, "rmqha_start_slave")
}

/// Stops the broker gracefully: remoting, HA (puts waiting for a slave get their answer),
/// then the store (flushed, threads joined, its locks let go, so another broker may open it
/// while this handle lives). Idempotent: a call while another runs returns once that one is
/// done. `RMQHA_STATUS_STORE` when the stop was not clean (the config tables could not be
/// persisted, or the final flush failed and the abort file stays for the next start's
/// recovery); `rmqha_last_error_message` names why, and the broker is stopped all the same (every
/// later call returns the same). After it,
/// puts fail with
/// `RMQHA_STATUS_PUT_FAILED` (SERVICE_NOT_AVAILABLE) while offsets and reads still answer
/// from what was stored; the handle must still be freed with `rmqha_broker_free`.
///
/// Ownership: the caller keeps the handle. Thread safety: callable from any thread, also while
/// other threads use the handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_shutdown(broker: *const rmqha_broker) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a live handle.
        unsafe { broker_arg(broker) }?.close()?;
        Ok(())
    })
}

/// Frees a broker handle, shutting the broker down first if `rmqha_shutdown` was not called.
/// NULL is allowed and does nothing.
///
/// Ownership: takes back what `rmqha_start_master`/`rmqha_start_slave` gave; the handle must
/// not be used afterwards. Thread safety: no other call may be using the handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_broker_free(broker: *mut rmqha_broker) {
    crate::status::guard_value((), || {
        if !broker.is_null() {
            // SAFETY: the handle came from Box::into_raw in `start` and is freed once.
            let handle = unsafe { Box::from_raw(broker) };
            handle.inner.shutdown();
        }
    })
}

/// The body of `rmqha_<name>(broker, &out)`: a cheap read of the broker.
fn query<T>(broker: *const rmqha_broker, out: *mut T, read: impl FnOnce(&Broker) -> T) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: the caller passes a live handle.
        let v = read(unsafe { broker_arg(broker) }?);
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}

/// The body of `rmqha_queue_<name>(broker, topic, queue_id, &out)`.
fn queue_query(
    broker: *const rmqha_broker,
    topic: *const c_char,
    out: *mut i64,
    read: impl FnOnce(&Broker, &str) -> i64,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: the caller passes a live handle and a C string.
        let v = unsafe { read(broker_arg(broker)?, args::str(topic, "topic")?) };
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}

/// The CommitLog's max physical offset into `*out`: the end of the last byte written.
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_max_offset(broker: *const rmqha_broker, out: *mut i64) -> rmqha_status {
    query(broker, out, Broker::max_offset)
}

/// The first physical offset still on disk into `*out`.
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_min_offset(broker: *const rmqha_broker, out: *mut i64) -> rmqha_status {
    query(broker, out, Broker::min_offset)
}

/// The end of what is fsynced into `*out`.
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_flushed_offset(broker: *const rmqha_broker, out: *mut i64) -> rmqha_status {
    query(broker, out, Broker::flushed_offset)
}

/// Into `*out`: on a master the highest offset acked by any slave (-1 before any ack); on a
/// slave the highest offset it has acked to its master.
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_slave_ack_offset(broker: *const rmqha_broker, out: *mut i64) -> rmqha_status {
    query(broker, out, Broker::slave_ack_offset)
}

/// The remoting port actually bound into `*out` (useful with `listenPort` 0).
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_listen_port(broker: *const rmqha_broker, out: *mut u16) -> rmqha_status {
    query(broker, out, Broker::listen_port)
}

/// The HA port actually bound, where slaves connect, into `*out` (useful with `haListenPort`
/// 0); 0 on a slave.
///
/// Ownership: `*out` is the caller's. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_ha_port(broker: *const rmqha_broker, out: *mut u16) -> rmqha_status {
    query(broker, out, Broker::ha_port)
}

/// The first ConsumeQueue offset of a queue still readable into `*out` (0 for an unknown
/// queue).
///
/// Ownership: `topic` is borrowed for the call; `*out` is the caller's. Thread safety:
/// callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_queue_min_offset(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    out: *mut i64,
) -> rmqha_status {
    queue_query(broker, topic, out, |b, t| b.queue_min_offset(t, queue_id))
}

/// The ConsumeQueue offset one past a queue's last dispatched message into `*out`: the
/// queue's message count while nothing was removed (0 for an unknown queue). On a slave it
/// grows as replicated bytes are dispatched.
///
/// Ownership: `topic` is borrowed for the call; `*out` is the caller's. Thread safety:
/// callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_queue_max_offset(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    out: *mut i64,
) -> rmqha_status {
    queue_query(broker, topic, out, |b, t| b.queue_max_offset(t, queue_id))
}

/// Which end `rmqha_queue_offset_by_time` answers (RocketMQ 5's `BoundaryType`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmqha_time_boundary {
    /// The first message stored at or after the time.
    Lower = 0,
    /// The last message stored at or before the time.
    Upper = 1,
}

/// A queue's offset by store time into `*out`, as SEARCH_OFFSET_BY_TIMESTAMP answers:
/// with `RMQHA_TIME_BOUNDARY_LOWER` the first message stored at or after `timestamp_ms`
/// (milliseconds since the epoch; the queue's max offset when every message is older), with
/// `RMQHA_TIME_BOUNDARY_UPPER` the last message stored at or before it (the last message when
/// every message is older). Either answers the queue's min offset when every message is
/// newer, and 0 for an unknown queue. Use it to start reading a queue from a point in time.
/// `RMQHA_STATUS_INVALID_ARGUMENT` for a `boundary` that is neither.
///
/// Ownership: `topic` is borrowed for the call; `*out` is the caller's. Thread safety:
/// callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_queue_offset_by_time(
    broker: *const rmqha_broker,
    topic: *const c_char,
    queue_id: i32,
    timestamp_ms: i64,
    boundary: u32,
    out: *mut i64,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        let boundary = match boundary {
            b if b == rmqha_time_boundary::Lower as u32 => TimeBoundary::Lower,
            b if b == rmqha_time_boundary::Upper as u32 => TimeBoundary::Upper,
            b => {
                return Err(Failure::new(
                    rmqha_status::InvalidArgument,
                    format!(
                        "boundary {b} is neither RMQHA_TIME_BOUNDARY_LOWER (0) nor RMQHA_TIME_BOUNDARY_UPPER (1)"
                    ),
                ));
            }
        };
        // SAFETY: the caller passes a live handle and a C string.
        let (b, topic) = unsafe { (broker_arg(broker)?, args::str(topic, "topic")?) };
        let v = b.queue_offset_by_time(topic, queue_id, timestamp_ms, boundary);
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}

/// A consumer group's committed offset of a queue into `*out`, -1 if it never committed.
///
/// Ownership: the strings are borrowed for the call. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_consumer_offset(
    broker: *const rmqha_broker,
    group: *const c_char,
    topic: *const c_char,
    queue_id: i32,
    out: *mut i64,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: the caller passes a live handle and C strings.
        let (b, group, topic) =
            unsafe { (broker_arg(broker)?, args::str(group, "group")?, args::str(topic, "topic")?) };
        let v = b.consumer_offset(group, topic, queue_id);
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}

/// Commits a consumer group's offset of a queue (accepted on masters and slaves alike;
/// persisted in the background and at shutdown). `RMQHA_STATUS_INVALID_ARGUMENT` for a
/// negative offset.
///
/// Ownership: the strings are borrowed for the call. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_commit_consumer_offset(
    broker: *const rmqha_broker,
    group: *const c_char,
    topic: *const c_char,
    queue_id: i32,
    offset: i64,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and C strings.
        let (b, group, topic) =
            unsafe { (broker_arg(broker)?, args::str(group, "group")?, args::str(topic, "topic")?) };
        Ok(b.commit_consumer_offset(group, topic, queue_id, offset)?)
    })
}

/// Slave: replicates from another master from now on. `ha_address` is the new master's HA
/// `host:port` (its `rmqha_ha_port`), for example after the master restarted on other ports.
/// The current connection is closed and the next one goes there; the slave reports its max
/// offset as on any connection, so the new master must hold the same log, and one that does
/// not refuses it (the slave appends nothing). `RMQHA_STATUS_WRONG_ROLE` on a master,
/// `RMQHA_STATUS_INVALID_ARGUMENT` for an address that is not `host:port`.
///
/// Ownership: `ha_address` is borrowed for the call. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_set_master_address(
    broker: *const rmqha_broker,
    ha_address: *const c_char,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a live handle and a C string.
        let (b, addr) = unsafe { (broker_arg(broker)?, args::str(ha_address, "ha_address")?) };
        Ok(b.set_master_address(addr)?)
    })
}

/// One snapshot of a broker's offsets and replication state (see `rmqha_offsets`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rmqha_offsets_t {
    pub role: rmqha_role,
    /// As `rmqha_max_offset`.
    pub max_offset: i64,
    /// As `rmqha_min_offset`.
    pub min_offset: i64,
    /// As `rmqha_flushed_offset`.
    pub flushed_offset: i64,
    /// As `rmqha_slave_ack_offset`.
    pub slave_ack_offset: i64,
    /// CommitLog bytes not yet dispatched to ConsumeQueues and the index.
    pub dispatch_behind_bytes: u64,
    pub listen_port: u16,
    pub ha_port: u16,
    /// Master: slaves connected now, for `rmqha_slave_info`. Slave: 0.
    pub slave_count: usize,
    /// Slave: whether it is connected to its master. Master: false.
    pub connected: bool,
    /// Slave: the master's HA address (`haMasterAddress`). Master: "".
    pub master_address: [c_char; RMQHA_ADDR_SIZE],
    /// Slave: why its last HA connection ended, "" if it never failed. Master: "".
    pub last_ha_error: [c_char; RMQHA_ERROR_SIZE],
}

/// Copies the broker's metrics as Prometheus text (exposition format 0.0.4: offsets, each
/// slave's ack offset and lag, put counters by status, a histogram of how long puts waited
/// for a flush or a slave) into `buf`, NUL-terminated and truncated to `len` bytes, and
/// stores the text's full length in `*out_len` (a value >= `len` means truncated: call again
/// with a buffer of at least `*out_len + 1` bytes, and since the text is rendered anew each
/// call and may grow meanwhile, repeat until `*out_len` < `len`; a little slack, say 256
/// bytes more, usually makes the second call the last; `buf` may be NULL when `len` is 0, and
/// NULL with a larger `len` is `RMQHA_STATUS_NULL_ARGUMENT`).
/// `out_len` may be NULL. Serve it at `/metrics` from your own HTTP server for Prometheus.
///
/// Ownership: `buf` belongs to the caller. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_metrics(
    broker: *const rmqha_broker,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> rmqha_status {
    guard(|| {
        // SAFETY: the caller passes a live handle.
        let text = unsafe { broker_arg(broker) }?.metrics();
        // SAFETY: `buf` has `len` writable bytes (or is NULL), `out_len` is NULL or writable,
        // by the caller's contract.
        unsafe { args::copy_out(&text, buf, len, out_len) }
    })
}

/// Fills `*out` with one consistent-enough snapshot of the broker's offsets (each value is read
/// once; they are not taken under one lock).
///
/// Ownership: `*out` is the caller's; it holds no pointers, nothing to free. Thread safety:
/// callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_offsets(
    broker: *const rmqha_broker,
    out: *mut rmqha_offsets_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: the caller passes a live handle.
        let o = unsafe { broker_arg(broker) }?.offsets();
        let v = rmqha_offsets_t {
            role: o.role.into(),
            max_offset: o.max_offset,
            min_offset: o.min_offset,
            flushed_offset: o.flushed_offset,
            slave_ack_offset: o.slave_ack_offset,
            dispatch_behind_bytes: o.dispatch_behind_bytes,
            listen_port: o.listen_port,
            ha_port: o.ha_port,
            slave_count: o.slaves.len(),
            connected: o.connected.unwrap_or(false),
            master_address: args::fixed(o.master_address.as_deref().unwrap_or("")),
            last_ha_error: args::fixed(o.last_ha_error.as_deref().unwrap_or("")),
        };
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}

/// A slave connected to a master (see `rmqha_slave_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct rmqha_slave_info_t {
    /// The slave's address as the master sees it, `ip:port`.
    pub addr: [c_char; RMQHA_ADDR_SIZE],
    /// The highest offset the slave acked (-1 before its first report).
    pub ack_offset: i64,
    /// Bytes the slave is behind the master's max offset.
    pub lag_bytes: i64,
    /// Milliseconds since the master accepted the connection.
    pub connected_ms: u64,
    /// Whether the master streams to it (its starting offset was accepted).
    pub transferring: bool,
    /// Milliseconds since the slave last sent anything (a report, an ack or a heartbeat,
    /// every `haSendHeartbeatInterval` at the latest): a frozen slave's `lag_bytes` stays
    /// small while this grows.
    pub last_report_ms: u64,
}

/// Fills `*out` with the `index`th (0-based) slave connected to this master now.
/// `RMQHA_STATUS_NOT_FOUND` when `index` is not below the number of slaves connected now,
/// which can differ from `slave_count` of an earlier `rmqha_offsets` as slaves come and go,
/// and is always 0 on a slave.
///
/// Ownership: `*out` is the caller's; nothing to free. Thread safety: callable from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmqha_slave_info(
    broker: *const rmqha_broker,
    index: usize,
    out: *mut rmqha_slave_info_t,
) -> rmqha_status {
    guard(|| {
        args::out(out, "out")?;
        // SAFETY: the caller passes a live handle.
        let b = unsafe { broker_arg(broker) }?;
        let slaves = b.ha_master().map(|m| m.slaves()).unwrap_or_default();
        let s = slaves.get(index).ok_or_else(|| {
            Failure::new(rmqha_status::NotFound, format!("no slave {index}: {} connected", slaves.len()))
        })?;
        let v = rmqha_slave_info_t {
            addr: args::fixed(&s.addr.to_string()),
            ack_offset: s.ack_offset,
            lag_bytes: s.lag_bytes,
            connected_ms: s.connected_ms,
            transferring: s.transferring,
            last_report_ms: s.last_report_ms,
        };
        // SAFETY: checked non-NULL above.
        unsafe { args::write(out, v) };
        Ok(())
    })
}
