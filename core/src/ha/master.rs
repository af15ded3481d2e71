//! The master's HA service: accepts slaves on `haListenPort`, streams CommitLog bytes to each
//! and turns their acks into the replication watermark that SYNC_MASTER puts wait on
//! (RocketMQ's HAService + HAConnection + GroupTransferService, spec 6.1 and 7).
//!
//! Each slave connection has a reader thread (acks) and a writer thread (frames). Writers sleep
//! on the CommitLog's append signal, so a put wakes them directly. Every ack recomputes the
//! watermark and completes, in the reader's thread, every put it covers.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::frame::{FRAME_HEADER_SIZE, ReportReader, encode_header};
use crate::join_unless_current;
use crate::message::{CheckResult, check_record};
use crate::net::wake_acceptor;
use crate::store::commit_log::{CommitLog, now_ms};
use crate::store::mapped_file::MappedFile;
use crate::store::notify::Notifier;
use crate::store::status::PutStatus;
use crate::store::wait::{OffsetWaiters, PutTicket, WaitPart};

/// Settings of the master side.
#[derive(Debug, Clone)]
pub struct HaMasterOptions {
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
    pub transfer_batch_size: usize,
    pub slave_fallbehind_max: i64,
    pub slave_timeout: Duration,
    /// Distinct slave hosts whose ack a SYNC_MASTER put needs.
    pub sync_slave_count: usize,
    /// An empty slave gets only the last file (RocketMQ) instead of the whole log.
    pub sync_from_last_file: bool,
    /// A reconnecting slave must report a record boundary and is resent the records before
    /// it to compare (rmqha); false streams from exactly the reported offset (RocketMQ).
    pub verify_slave_tail: bool,
    /// After sending less than a full batch, wait this long for more before the next frame
    /// (0 sends at once). An ASYNC_MASTER's puts wait for no ack, so a short linger turns a
    /// frame, a wake-up and an ack per put into one per batch; a SYNC_MASTER uses 0.
    pub linger: Duration,
    /// `haAuthSecret`: every connection must prove it knows this before its first report
    /// counts (see `super::auth`); `None` takes any client, as RocketMQ.
    pub auth_secret: Option<crate::config::Secret>,
}

/// A slave as the master sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveInfo {
    pub addr: SocketAddr,
    /// Highest offset the slave acked (-1 before its first report).
    pub ack_offset: i64,
    /// Bytes the slave is behind the master's max offset.
    pub lag_bytes: i64,
    /// Milliseconds since the connection was accepted.
    pub connected_ms: u64,
    /// Whether the master streams to it (its offset was accepted).
    pub transferring: bool,
    /// Milliseconds since the slave last sent anything (a report, an ack or a heartbeat,
    /// every `haSendHeartbeatInterval` at the latest): a frozen slave's `lag_bytes` stays
    /// small until the housekeeping close, while this grows.
    pub last_report_ms: u64,
}

/// A slave the master refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedSlave {
    pub addr: SocketAddr,
    pub requested_offset: i64,
    pub reason: String,
    pub at_ms: i64,
}

struct Conn {
    id: u64,
    peer: SocketAddr,
    stream: TcpStream,
    accepted: Instant,
    /// When the slave last sent bytes, in ms after `accepted`.
    last_read_ms: AtomicU64,
    /// The slave's first report (-1 until it arrives).
    request_offset: AtomicI64,
    ack_offset: AtomicI64,
    /// Whether the slave reported again after its first report: an rmqha slave does so only
    /// once it compared the records resent before that offset, so its reports, from this
    /// one on, speak for bytes this master checked (see `distinct_acks`).
    confirmed: AtomicBool,
    /// Whether bytes before the slave's first report were resent for it to compare, and it
    /// has not reported since: a slave that closes the connection meanwhile is named in
    /// `refused_slaves` with the two likely causes.
    verifying: AtomicBool,
    /// The end of what the writer sent (or is sending) on this connection. A put publishes
    /// its bytes to readers (the writer) a moment before it raises the log's max offset, so
    /// an ack of bytes just sent may exceed the max offset read right after it.
    sent: AtomicI64,
    transferring: AtomicBool,
    closed: AtomicBool,
    /// Wakes the writer when the first report arrives or the connection closes.
    wake: Notifier,
}

impl Conn {
    /// How long since the slave last sent bytes.
    fn silent(&self) -> Duration {
        self.silent_at(self.accepted.elapsed())
    }

    /// `silent` when the connection is `age` old (one clock read for both in `slaves`).
    fn silent_at(&self, age: Duration) -> Duration {
        let last = Duration::from_millis(self.last_read_ms.load(Ordering::Relaxed));
        age.saturating_sub(last)
    }

    fn close(&self, why: &str) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            if self.request_offset.load(Ordering::Acquire) < 0 || why.starts_with("refused") {
                // It never reported (a probe, garbage), or its refusal was logged already.
                tracing::debug!("HA connection from {} closed: {why}", self.peer);
            } else {
                tracing::info!("HA connection from slave {} closed: {why}", self.peer);
            }
            let _ = self.stream.shutdown(Shutdown::Both);
            self.wake.notify();
        }
    }
}

struct Shared {
    cl: Arc<CommitLog>,
    opts: HaMasterOptions,
    conns: Mutex<Vec<Arc<Conn>>>,
    refused: Mutex<VecDeque<RefusedSlave>>,
    waiters: Arc<OffsetWaiters>,
    /// Highest offset acked by any slave (RocketMQ's push2SlaveMaxOffset).
    push_to_slave_max: AtomicI64,
    stopping: AtomicBool,
    next_id: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    health: SyncHealth,
}

/// Whether SYNC_MASTER puts get confirmed, for the log: a put answered SLAVE_NOT_AVAILABLE or
/// FLUSH_SLAVE_TIMEOUT was silent, so a master without a working slave looked healthy while
/// every put went unconfirmed. Each state is logged (WARN) when it begins or its cause changes,
/// and its end (INFO), each at most once a minute, with counts: a slave on the edge, confirming
/// some puts and not others, does not flood the log either.
#[derive(Default)]
struct SyncHealth {
    not_available: Mutex<Unconfirmed>,
    timing_out: Mutex<Unconfirmed>,
    /// Either state is on: the put path's check is one load.
    degraded: AtomicBool,
}

/// One way puts go unconfirmed.
struct Unconfirmed {
    active: bool,
    /// Puts (or batches of timeouts) since the state began.
    count: u64,
    begins: crate::logging::Repeats,
    ends: crate::logging::Repeats,
}

impl Default for Unconfirmed {
    fn default() -> Self {
        Unconfirmed {
            active: false,
            count: 0,
            begins: crate::logging::Repeats::new(SyncHealth::EVERY),
            ends: crate::logging::Repeats::new(SyncHealth::EVERY),
        }
    }
}

impl Unconfirmed {
    /// One more; `Some(n)` if the state's WARN is due, `n` the occurrences since the last.
    fn note(&mut self, key: &str) -> Option<u64> {
        self.active = true;
        self.count += 1;
        self.begins.note(key)
    }

    /// The state ended; `Some(count)` if its INFO is due.
    fn end(&mut self) -> Option<u64> {
        if !std::mem::take(&mut self.active) {
            return None;
        }
        let count = std::mem::take(&mut self.count);
        self.ends.note("ended").map(|_| count)
    }
}

impl SyncHealth {
    const EVERY: Duration = Duration::from_secs(60);

    fn lock(m: &Mutex<Unconfirmed>) -> std::sync::MutexGuard<'_, Unconfirmed> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A put answered SLAVE_NOT_AVAILABLE; `why` gives a key for the cause and its words.
    fn unavailable(&self, why: impl FnOnce() -> (&'static str, String)) {
        self.degraded.store(true, Ordering::Relaxed);
        let (key, words) = why();
        if let Some(n) = Self::lock(&self.not_available).note(key) {
            let more = crate::logging::recurred(n);
            tracing::warn!("SYNC_MASTER puts are answered SLAVE_NOT_AVAILABLE: {words}{more}");
        }
    }

    /// `n` puts timed out waiting for an ack.
    fn unconfirmed(&self, n: usize, timeout_ms: u128) {
        self.degraded.store(true, Ordering::Relaxed);
        if let Some(rounds) = Self::lock(&self.timing_out).note("timeout") {
            tracing::warn!(
                "{n} SYNC_MASTER put(s) answered FLUSH_SLAVE_TIMEOUT: no slave acked them within slaveTimeout \
                 ({timeout_ms} ms){}",
                crate::logging::recurred(rounds)
            );
        }
    }

    /// A put found a slave able to confirm it.
    fn available(&self) {
        if self.degraded.load(Ordering::Relaxed) {
            if let Some(n) = Self::lock(&self.not_available).end() {
                tracing::info!(
                    "a slave can confirm SYNC_MASTER puts again ({n} were answered SLAVE_NOT_AVAILABLE)"
                );
            }
            self.settle();
        }
    }

    /// A slave's ack confirmed puts.
    fn confirmed(&self) {
        if self.degraded.load(Ordering::Relaxed) {
            if let Some(n) = Self::lock(&self.timing_out).end() {
                tracing::info!("slave acks confirm SYNC_MASTER puts again (after {n} rounds of timeouts)");
            }
            self.settle();
        }
    }

    fn settle(&self) {
        if !Self::lock(&self.not_available).active && !Self::lock(&self.timing_out).active {
            self.degraded.store(false, Ordering::Relaxed);
        }
    }
}

/// The master's HA service.
pub struct HaMaster {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    /// Shared with the acceptor thread, so shutdown can wake it through the socket.
    listener: Arc<TcpListener>,
    acceptor: Mutex<Option<JoinHandle<()>>>,
    deadlines: Mutex<Option<JoinHandle<()>>>,
    /// The process that made it; a fork of that process leaves it alone (`crate::fork`).
    fork: crate::fork::ForkGuard,
}

impl HaMaster {
    /// Binds `addr` (port 0 picks one) and starts accepting slaves.
    pub fn start(addr: SocketAddr, cl: Arc<CommitLog>, opts: HaMasterOptions) -> io::Result<Self> {
        let listener = Arc::new(TcpListener::bind(addr)?);
        let local_addr = listener.local_addr()?;
        cl.set_served_to_slaves(true);
        let waiters = OffsetWaiters::new(
            WaitPart::Replica,
            PutStatus::FlushSlaveTimeout,
            -1,
            Some(cl.put_metrics().clone()),
        );
        let timeout_ms = opts.slave_timeout.as_millis();
        let shared = Arc::new(Shared {
            cl,
            opts,
            conns: Mutex::new(Vec::new()),
            refused: Mutex::new(VecDeque::new()),
            waiters: waiters.clone(),
            push_to_slave_max: AtomicI64::new(-1),
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            threads: Mutex::new(Vec::new()),
            health: SyncHealth::default(),
        });
        let weak = Arc::downgrade(&shared);
        waiters.set_on_expired(move |n| {
            if let Some(s) = weak.upgrade() {
                s.health.unconfirmed(n, timeout_ms);
            }
        });
        let (s, l) = (shared.clone(), listener.clone());
        let acceptor =
            std::thread::Builder::new().name("rmqha-ha-accept".into()).spawn(move || accept_loop(&l, s))?;
        let deadlines = std::thread::Builder::new()
            .name("rmqha-ha-timeout".into())
            .spawn(move || waiters.run_deadlines())?;
        tracing::info!("HA server listening on {local_addr}");
        Ok(HaMaster {
            shared,
            local_addr,
            listener,
            acceptor: Mutex::new(Some(acceptor)),
            deadlines: Mutex::new(Some(deadlines)),
            fork: crate::fork::ForkGuard::new(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Highest offset acked by any slave (-1 if none ever acked).
    pub fn push_to_slave_max_offset(&self) -> i64 {
        self.shared.push_to_slave_max.load(Ordering::Acquire)
    }

    /// `push_to_slave_max_offset` for a thread that must not hold the master.
    pub fn ack_watermark(&self) -> Arc<dyn Fn() -> i64 + Send + Sync> {
        let shared = self.shared.clone();
        Arc::new(move || shared.push_to_slave_max.load(Ordering::Acquire))
    }

    /// RocketMQ's `isSlaveOK`: enough slaves stream from us and the watermark is within
    /// `haSlaveFallbehindMax` of `end`.
    pub fn is_slave_ok(&self, end: i64) -> bool {
        let acks = self.shared.distinct_acks(false);
        let k = self.shared.opts.sync_slave_count.max(1);
        if acks.len() < k {
            return false;
        }
        end - acks[k - 1] < self.shared.opts.slave_fallbehind_max
    }

    /// Makes `ticket`'s replica part wait for `end` to be acked, at most `slaveTimeout`; or
    /// completes it with SLAVE_NOT_AVAILABLE at once if no slave can ack it.
    pub fn wait_for_replica(&self, end: i64, ticket: &PutTicket) {
        if !self.is_slave_ok(end) {
            ticket.complete_part(
                WaitPart::Replica,
                PutStatus::SlaveNotAvailable,
                Some(self.shared.cl.put_metrics()),
            );
            self.shared.health.unavailable(|| self.why_not_ok(end));
            return;
        }
        self.shared.health.available();
        let deadline = Instant::now() + self.shared.opts.slave_timeout;
        if self.shared.waiters.register(end, deadline, ticket) {
            self.shared.health.confirmed(); // its ack came before the put registered
        }
    }

    /// Why `is_slave_ok(end)` is false, for the log.
    fn why_not_ok(&self, end: i64) -> (&'static str, String) {
        let acks = self.shared.distinct_acks(false);
        let k = self.shared.opts.sync_slave_count.max(1);
        match acks.get(k - 1) {
            None if acks.is_empty() => ("none", "no slave is streaming from this master".into()),
            None => (
                "few",
                format!("{} slave host(s) stream from this master, haSyncSlaveCount is {k}", acks.len()),
            ),
            Some(&a) => (
                "behind",
                format!(
                    "the slaves are {} bytes behind, haSlaveFallbehindMax is {}",
                    end - a,
                    self.shared.opts.slave_fallbehind_max
                ),
            ),
        }
    }

    /// The watermark SYNC_MASTER puts wait on (the K-th highest ack over distinct slaves).
    pub fn sync_watermark(&self) -> i64 {
        self.shared.waiters.value()
    }

    /// The slaves connected now.
    pub fn slaves(&self) -> Vec<SlaveInfo> {
        let max = self.shared.cl.max_offset() as i64;
        let conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns
            .iter()
            // A connection that has not reported (a port probe, a health check, a slave
            // still connecting) is no slave yet: listed, it showed as a slave all behind.
            .filter(|c| !c.closed.load(Ordering::Acquire) && c.request_offset.load(Ordering::Acquire) >= 0)
            .map(|c| {
                let ack = c.ack_offset.load(Ordering::Acquire);
                let age = c.accepted.elapsed();
                SlaveInfo {
                    addr: c.peer,
                    ack_offset: ack,
                    lag_bytes: if ack < 0 { max } else { (max - ack).max(0) },
                    connected_ms: age.as_millis() as u64,
                    transferring: c.transferring.load(Ordering::Acquire),
                    // Never above `connected_ms`: the same clock read.
                    last_report_ms: c.silent_at(age).as_millis() as u64,
                }
            })
            .collect()
    }

    /// Slaves recently refused (offset not servable), newest last.
    pub fn refused_slaves(&self) -> Vec<RefusedSlave> {
        self.shared.refused.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect()
    }

    /// Closes every connection and stops the service. Puts still waiting for an ack (and any
    /// registered later) get FLUSH_SLAVE_TIMEOUT: they are stored, but no slave confirmed them.
    pub fn shutdown(&self) {
        // In a fork, its sockets and threads are the parent's.
        if self.fork.forked() || self.shared.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        wake_acceptor(&self.listener, self.local_addr);
        // The threads joined here may complete puts, whose callbacks may shut the broker down
        // (and with it this service) on that very thread: it must not wait for itself.
        if let Some(h) = self.acceptor.lock().unwrap_or_else(|e| e.into_inner()).take() {
            join_unless_current(h);
        }
        for c in self.shared.conns.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            c.close("master shutting down");
        }
        self.shared.cl.replicate_signal().notify();
        let threads: Vec<_> =
            std::mem::take(&mut *self.shared.threads.lock().unwrap_or_else(|e| e.into_inner()));
        threads.into_iter().for_each(join_unless_current);
        self.shared.waiters.close();
        if let Some(h) = self.deadlines.lock().unwrap_or_else(|e| e.into_inner()).take() {
            join_unless_current(h);
        }
        self.shared.cl.set_served_to_slaves(false);
    }
}

impl Drop for HaMaster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    /// Acks of transferring slaves, one per distinct host (its best), highest first. With
    /// `confirmed`, only connections whose slave reported again after its first report: that
    /// report is the slave's own claim about bytes this master has not checked, so it may say
    /// where a slave stands but must not release a SYNC_MASTER put. The slave compares the
    /// records resent before it (closing the connection if they differ) and reports nothing
    /// until it has, so its next report confirms the first.
    fn distinct_acks(&self, confirmed: bool) -> Vec<i64> {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let mut best: Vec<(IpAddr, i64)> = Vec::new();
        for c in conns.iter() {
            if c.closed.load(Ordering::Acquire) || !c.transferring.load(Ordering::Acquire) {
                continue;
            }
            let ack = c.ack_offset.load(Ordering::Acquire);
            if confirmed && !c.confirmed.load(Ordering::Acquire) {
                continue;
            }
            match best.iter_mut().find(|(ip, _)| *ip == c.peer.ip()) {
                Some((_, b)) => *b = (*b).max(ack),
                None => best.push((c.peer.ip(), ack)),
            }
        }
        let mut acks: Vec<i64> = best.into_iter().map(|(_, a)| a).collect();
        acks.sort_unstable_by(|a, b| b.cmp(a));
        acks
    }

    fn on_ack(&self, ack: i64) {
        self.push_to_slave_max.fetch_max(ack, Ordering::AcqRel);
        let k = self.opts.sync_slave_count.max(1);
        let acks = self.distinct_acks(true);
        if let Some(&w) = acks.get(k - 1)
            && self.waiters.advance(w) > 0
        {
            self.health.confirmed();
        }
    }

    fn refuse(&self, conn: &Conn, requested: i64, reason: String) {
        // A refused slave retries every few seconds, and anything may connect to this port.
        static REFUSALS: crate::logging::Throttle = crate::logging::Throttle::new(Duration::from_secs(300));
        let line = format!("refusing HA slave {} asking for offset {requested}: {reason}", conn.peer);
        match REFUSALS.note(&conn.peer.ip().to_string()) {
            Some(n) => tracing::warn!("{line}{}", crate::logging::recurred(n)),
            None => tracing::debug!("{line}"),
        }
        let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() >= 16 {
            r.pop_front();
        }
        r.push_back(RefusedSlave {
            addr: conn.peer,
            requested_offset: requested,
            reason: reason.clone(),
            at_ms: now_ms(),
        });
        drop(r);
        conn.close(&format!("refused: {reason}"));
    }

    /// For a slave refused because its log diverged from this one (ahead of it, or ending
    /// where no record of this log starts): the highest offset this log could serve it from,
    /// this log's end or the start of the record holding `req`, sent as an empty frame before
    /// the close (the classic protocol has no other way to say it). `None` for other refusals,
    /// and without `haVerifySlaveTail` (a stock slave takes no hint).
    fn divergence_hint(&self, req: i64) -> Option<u64> {
        let cl = &self.cl;
        let (min, max) = (cl.min_offset() as i64, cl.max_offset() as i64);
        if !self.opts.verify_slave_tail || req <= 0 || req < min || remoting_header(req).is_some() {
            return None;
        }
        if req > max {
            return Some(max as u64);
        }
        let fs = cl.file_size() as i64;
        Some(cl.record_start_at_or_before((req - req % fs) as u64, req as u64))
    }

    /// Where to start streaming for a slave that reported `req`, or why not.
    fn start_offset(&self, req: i64) -> Result<u64, String> {
        let cl = &self.cl;
        let max = cl.max_offset() as i64;
        let fs = cl.file_size() as i64;
        if req == 0 {
            if max == 0 {
                return Ok(0);
            }
            return Ok(if self.opts.sync_from_last_file { (max - max % fs) as u64 } else { cl.min_offset() });
        }
        if req > max {
            if let Some((len, header)) = remoting_header(req) {
                return Err(format!(
                    "not an HA slave: its first bytes read as a RocketMQ remoting request (frame of {len} bytes, \
                     header of {header}): a remoting client, or a slave's masterAddress, pointed at this HA \
                     port; remoting belongs on the broker's listenPort"
                ));
            }
            return Err(format!(
                "the slave is ahead of this master (slave ends at {req}, master at {max}): its log diverged"
            ));
        }
        let min = cl.min_offset() as i64;
        if req < min {
            return Err(format!(
                "offset {req} is below this master's first offset {min} (deleted by retention)"
            ));
        }
        if req == max || req % fs == 0 || !self.opts.verify_slave_tail {
            // Without verification, as RocketMQ: a stock slave's log ends wherever its last
            // frame ended, often inside a record, and it holds the bytes before it.
            return Ok(req as u64);
        }
        // Anything else must be where a record (or the BLANK filler) starts.
        let ok = cl.data_at(req as u64).is_some_and(|(f, pos)| {
            match check_record(f.readable_from(pos), &cl.check_options(false)) {
                CheckResult::Message(m) => m.commit_log_offset == req,
                CheckResult::Blank => true,
                _ => false,
            }
        });
        if ok {
            Ok(req as u64)
        } else {
            Err(format!(
                "offset {req} is not a record boundary in this master's log: the slave's log diverged from this \
                 master's (its records end elsewhere), or it is a stock RocketMQ slave, whose log ends wherever \
                 its last frame ended (for those, set haVerifySlaveTail=false on this master)"
            ))
        }
    }
}

/// The offset of the last nonzero byte of the file at `file_start`, below `end`.
fn last_written_before(cl: &CommitLog, file_start: u64, end: u64) -> Option<u64> {
    let (file, pos) = cl.data_at(file_start)?;
    let data = file.readable_from(pos);
    let data = &data[..data.len().min((end - file_start) as usize)];
    data.iter().rposition(|&b| b != 0).map(|p| file_start + p as u64)
}

fn accept_loop(listener: &TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("HA accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if let Err(e) = start_connection(stream, &shared) {
            tracing::warn!("HA connection setup failed: {e}");
        }
    }
}

/// Bytes before a reconnecting slave's offset that the master resends for the slave to
/// compare with its own.
const VERIFY_WINDOW: u64 = 32 * 1024;

/// Most HA connections at once (each has a reader and a writer thread). Beyond it a new
/// connection is closed at once.
const MAX_CONNECTIONS: usize = 256;
/// Most connections that have not sent their first report. A slave reports as soon as it
/// connects, so at this many a new connection takes the place of the oldest silent one: idle
/// sockets cannot hold threads until the housekeeping interval closes them, nor keep a real
/// slave out.
const MAX_UNREPORTED: usize = 16;
/// Most connections from one host that have not sent their first report. Past it, or at
/// `MAX_UNREPORTED` in all, the host holding the most gives up its oldest: a flood from one
/// host cannot push out another host's slave while that one connects (with `haAuthSecret`
/// its handshake takes a round trip or two before its report).
const MAX_UNREPORTED_PER_HOST: usize = 8;

fn start_connection(stream: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    stream.set_nodelay(true)?;
    // Reads time out so the reader can enforce housekeeping; a write that cannot progress for
    // the housekeeping interval means the slave stopped reading.
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.set_write_timeout(Some(shared.opts.housekeeping_interval))?;
    let conn = Arc::new(Conn {
        id: shared.next_id.fetch_add(1, Ordering::Relaxed),
        peer,
        stream: stream.try_clone()?,
        accepted: Instant::now(),
        last_read_ms: AtomicU64::new(0),
        request_offset: AtomicI64::new(-1),
        ack_offset: AtomicI64::new(-1),
        confirmed: AtomicBool::new(false),
        verifying: AtomicBool::new(false),
        sent: AtomicI64::new(-1),
        transferring: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        wake: Notifier::new(),
    });
    {
        let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.retain(|c| !c.closed.load(Ordering::Acquire));
        let silent: Vec<&Arc<Conn>> =
            conns.iter().filter(|c| c.request_offset.load(Ordering::Acquire) < 0).collect();
        let from = |ip: IpAddr| silent.iter().filter(|c| c.peer.ip() == ip).count();
        let host = if from(peer.ip()) >= MAX_UNREPORTED_PER_HOST {
            Some(peer.ip())
        } else if silent.len() >= MAX_UNREPORTED {
            silent.iter().map(|c| c.peer.ip()).max_by_key(|&ip| from(ip))
        } else {
            None
        };
        if let Some(host) = host {
            if let Some(oldest) = silent.iter().filter(|c| c.peer.ip() == host).min_by_key(|c| c.accepted) {
                oldest.close(&format!(
                    "no report yet, and too many connections without one ({MAX_UNREPORTED} in all, \
                     {MAX_UNREPORTED_PER_HOST} from one host): making room for {peer}"
                ));
            }
            conns.retain(|c| !c.closed.load(Ordering::Acquire));
        }
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!("HA connection from {peer} refused: {MAX_CONNECTIONS} connections already");
            let _ = stream.shutdown(Shutdown::Both);
            return Ok(());
        }
        conns.push(conn.clone());
    }
    // Logged once it reports (a port probe is no slave).
    tracing::debug!("HA connection from {peer}");
    let (s1, c1) = (shared.clone(), conn.clone());
    let reader = std::thread::Builder::new().name(format!("rmqha-ha-read-{}", conn.id)).spawn(move || {
        let why = read_loop(&s1, &c1, stream);
        c1.close(&why);
        remove(&s1, &c1);
    })?;
    let (s2, c2) = (shared.clone(), conn.clone());
    let writer =
        std::thread::Builder::new().name(format!("rmqha-ha-write-{}", conn.id)).spawn(move || {
            let why = write_loop(&s2, &c2);
            c2.close(&why);
            remove(&s2, &c2);
        })?;
    let mut threads = shared.threads.lock().unwrap_or_else(|e| e.into_inner());
    threads.retain(|t| !t.is_finished());
    threads.push(reader);
    threads.push(writer);
    Ok(())
}

fn remove(shared: &Shared, conn: &Conn) {
    shared.conns.lock().unwrap_or_else(|e| e.into_inner()).retain(|c| c.id != conn.id);
}

fn read_loop(shared: &Shared, conn: &Conn, mut stream: TcpStream) -> String {
    if let Some(secret) = &shared.opts.auth_secret {
        let deadline = conn.accepted + shared.opts.housekeeping_interval;
        if let Err(why) = super::auth::master_handshake(&mut stream, secret, deadline) {
            if !conn.closed.load(Ordering::Acquire) && !shared.stopping.load(Ordering::Acquire) {
                shared.refuse(conn, -1, why.clone());
            }
            return format!("refused: {why}");
        }
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut reports = ReportReader::default();
    // When the slave last sent bytes is kept on the connection (`last_report_ms` reads it).

    loop {
        if conn.closed.load(Ordering::Acquire) || shared.stopping.load(Ordering::Acquire) {
            return "closing".into();
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => return closed_by_slave(shared, conn, "the slave closed the connection".into()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if conn.silent() > shared.opts.housekeeping_interval {
                    return format!(
                        "no report for {:?} (haHousekeepingInterval)",
                        shared.opts.housekeeping_interval
                    );
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return closed_by_slave(shared, conn, format!("read error: {e}")),
        };
        conn.last_read_ms.store(conn.accepted.elapsed().as_millis() as u64, Ordering::Relaxed);
        // The first report is the first 8 bytes: what a peer that is no slave sent first.
        let first = conn.request_offset.load(Ordering::Acquire) < 0;
        let report = if first { reports.feed_oldest(&buf[..n]) } else { reports.feed(&buf[..n]) };
        let Some(offset) = report else { continue };
        let max = (shared.cl.max_offset() as i64).max(conn.sent.load(Ordering::Acquire));
        if offset < 0 {
            let why = format!("a negative offset {offset} is not a slave's report");
            if conn.request_offset.load(Ordering::Acquire) < 0 {
                shared.refuse(conn, offset, why.clone());
            }
            return why;
        }
        if conn.request_offset.load(Ordering::Acquire) < 0 {
            if offset == super::auth::magic_as_report() {
                let why = "it asks to authenticate (its haAuthSecret is set), and this master has no haAuthSecret: \
                           set the same secret on both"
                    .to_string();
                shared.refuse(conn, -1, why.clone());
                return format!("refused: {why}");
            }
            conn.request_offset.store(offset, Ordering::Release);
            conn.ack_offset.store(offset, Ordering::Release);
            conn.wake.notify();
            // Its first report is where it wants to start, not an ack of anything we sent.
            continue;
        }
        if offset > max {
            // RocketMQ issue 3015: a "slave" acking what we never had must not release puts.
            return format!("the slave acked offset {offset} beyond this master's max offset {max}");
        }
        let prev = conn.ack_offset.fetch_max(offset, Ordering::AcqRel);
        conn.verifying.store(false, Ordering::Release);
        let confirming = !conn.confirmed.swap(true, Ordering::AcqRel);
        if (offset > prev || confirming) && conn.transferring.load(Ordering::Acquire) {
            // A confirmation acking no more than the first report still releases the puts
            // ending there: this slave wrote them before a link reset lost its ack.
            shared.on_ack(offset);
        }
    }
}

/// Why a connection ended when its slave closed it (or reset it): `why`, and when the slave
/// went away holding bytes resent for it to compare, in `refused_slaves` too. An rmqha slave
/// closes then because its log differs there; a stock RocketMQ slave closes on any frame
/// that does not start at its own end, and retries for ever, so the operator needs the hint.
fn closed_by_slave(shared: &Shared, conn: &Conn, why: String) -> String {
    let master_closed = conn.closed.load(Ordering::Acquire) || shared.stopping.load(Ordering::Acquire);
    if master_closed || !conn.verifying.load(Ordering::Acquire) {
        return why;
    }
    let reason = format!(
        "{why} before acking the bytes resent before its offset: its log differs from this master's there \
         (an rmqha slave then logs that its log diverged), it is a stock RocketMQ slave, which takes only \
         frames that start at its own end (for those, set haVerifySlaveTail=false on this master), or it \
         stopped"
    );
    shared.refuse(conn, conn.request_offset.load(Ordering::Acquire), reason.clone());
    format!("refused: {reason}")
}

fn write_loop(shared: &Shared, conn: &Conn) -> String {
    block_sigpipe();
    // Wait for the slave's first report (no polling: the reader wakes us).
    let req = loop {
        let seen = conn.wake.seq();
        if conn.closed.load(Ordering::Acquire) {
            return "closed before the slave reported".into();
        }
        let r = conn.request_offset.load(Ordering::Acquire);
        if r >= 0 {
            break r;
        }
        conn.wake.wait(seen, Duration::from_secs(1));
    };
    let mut next = match shared.start_offset(req) {
        Ok(n) => n,
        Err(reason) => {
            if let Some(hint) = shared.divergence_hint(req) {
                // Before the close: where this log could serve from, for an rmqha slave to
                // say (or, with haSlaveTruncateDiverged, cut back to). A stock slave closes
                // on a frame that is not at its end, as it would on the close.
                if let Ok(mut s) = conn.stream.try_clone() {
                    let _ = send_header(&mut s, hint as i64, 0, false);
                }
            }
            shared.refuse(conn, req, reason.clone());
            return format!("refused: {reason}");
        }
    };
    // An offset this master also has says nothing about the bytes before it: a slave of
    // another store, or one that kept records this master lost in a crash and then wrote
    // again, reports an offset that fits. Resend the last bytes before it (the slave
    // compares them with its own and closes the connection if they differ) so such a slave
    // never takes new bytes onto a diverged log. The window need not start at a record: the
    // slave compares bytes, so no walk over the file's records is needed to find one (which
    // read every record header from the file's start, up to 1 GiB, on each reconnect).
    if shared.opts.verify_slave_tail && req > 0 && next > shared.cl.min_offset() {
        let fs = shared.cl.file_size() as u64;
        let file_start = (next - 1) / fs * fs;
        let mut from = next.saturating_sub(VERIFY_WINDOW).max(file_start);
        if next % fs == 0 {
            // At a file boundary the window may lie wholly in the previous file's end filler,
            // zeros on any log: two logs that diverged before it compared equal, and the
            // slave took this master's next file onto its own (found by a failover audit).
            // Reach back to the last bytes written before the filler (its header, and the
            // record before it). A filler is shorter than the record that did not fit.
            if let Some(last) = last_written_before(&shared.cl, file_start, next) {
                from = from.min(last.saturating_sub(VERIFY_WINDOW).max(file_start));
            }
        }
        next = from.max(shared.cl.min_offset());
    }
    conn.transferring.store(true, Ordering::Release);
    // The bytes before the slave's end are sent again for it to compare with its own.
    let resend = req - next as i64;
    let resend = if resend > 0 {
        conn.verifying.store(true, Ordering::Release);
        format!(" (resending {resend} bytes for the divergence check)")
    } else {
        String::new()
    };
    tracing::info!("HA slave {} reported offset {req}; streaming from {next}{resend}", conn.peer);
    let cl = &shared.cl;
    let batch = shared.opts.transfer_batch_size.max(1);
    let mut stream = match conn.stream.try_clone() {
        Ok(s) => s,
        Err(e) => return format!("cannot clone socket: {e}"),
    };
    let mut last_write = Instant::now();
    loop {
        let seen = cl.replicate_signal().seq();
        if conn.closed.load(Ordering::Acquire) || shared.stopping.load(Ordering::Acquire) {
            return "closing".into();
        }
        let mut sent = false;
        if let Some((file, pos)) = cl.data_at(next) {
            let data = file.readable_from(pos);
            if !data.is_empty() {
                let body = &data[..data.len().min(batch)];
                // Before the bytes leave: the slave may ack them before this thread runs again.
                conn.sent.fetch_max((next + body.len() as u64) as i64, Ordering::AcqRel);
                if let Err(e) = send(&mut stream, next as i64, &file, pos, body) {
                    return format!("write error: {e}");
                }
                next += body.len() as u64;
                last_write = Instant::now();
                sent = true;
                if body.len() < batch && !shared.opts.linger.is_zero() {
                    std::thread::sleep(shared.opts.linger);
                }
            } else if file.is_full() {
                next = file.end_offset();
                continue;
            }
        }
        if sent {
            continue;
        }
        // Retention deleted the file this slave needs next, before it got there (it was
        // catching up, or its link was slow). RocketMQ's writer waits for those bytes
        // forever while heartbeats tell the slave all is well; refuse it, so both sides say
        // why it stopped.
        let min = cl.min_offset();
        if next < min {
            let reason = format!(
                "offset {next} was deleted by retention before this slave received it (this master's \
                 first offset is now {min})"
            );
            shared.refuse(conn, next as i64, reason.clone());
            return format!("refused: {reason}");
        }
        if last_write.elapsed() >= shared.opts.heartbeat_interval {
            if let Err(e) = send_header(&mut stream, next as i64, 0, false) {
                return format!("heartbeat write error: {e}");
            }
            last_write = Instant::now();
        }
        let wait =
            shared.opts.heartbeat_interval.saturating_sub(last_write.elapsed()).max(Duration::from_millis(1));
        cl.replicate_signal().wait(seen, wait.min(Duration::from_secs(1)));
    }
}

/// The frame and header lengths, if a slave's first report is the start of a RocketMQ
/// remoting frame instead: a length (at most remoting's 16 MiB), a serialize type (0 JSON, 1
/// ROCKETMQ) and a header length that fits the frame. A real slave's offset reads so only far
/// above 20 GiB, with odds of about one in a billion, and only ever one ahead of the master.
fn remoting_header(report: i64) -> Option<(i32, u32)> {
    let b = report.to_be_bytes();
    let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let header = u32::from_be_bytes([0, b[5], b[6], b[7]]);
    let plausible =
        (5..=16 << 20).contains(&len) && b[4] <= 1 && header > 0 && header as i64 <= len as i64 - 4;
    plausible.then_some((len, header))
}

/// Keeps a write to a socket the slave closed from raising SIGPIPE, whose default action
/// ends the process: `sendfile` has no `MSG_NOSIGNAL`, and a C host may not ignore the signal
/// as Rust, Python and Node programs do. Blocked in this thread only, the signal stays
/// pending here and the write fails with EPIPE, which closes the connection.
fn block_sigpipe() {
    #[cfg(target_os = "linux")]
    // SAFETY: changes only this thread's signal mask, with a set built by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Writes a frame: the header, then the body (`body`, the bytes at `pos` of `file`) with
/// `sendfile` where there is one, so the master does not copy the stream through user space;
/// elsewhere with a write from the mapped file.
fn send(stream: &mut TcpStream, offset: i64, file: &MappedFile, pos: usize, body: &[u8]) -> io::Result<()> {
    send_header(stream, offset, body.len(), true)?;
    let mut done = 0;
    while done < body.len() {
        #[cfg(target_os = "linux")]
        let n = file.send_to(stream, pos + done, body.len() - done)?;
        #[cfg(not(target_os = "linux"))]
        let n = {
            let _ = (file, pos);
            io::Write::write(stream, &body[done..])?
        };
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "socket accepted no bytes"));
        }
        done += n;
    }
    Ok(())
}

/// Writes a frame header; with `more`, the kernel is told the body follows, so header and
/// body leave in the same segments (`MSG_MORE`).
fn send_header(stream: &mut TcpStream, offset: i64, len: usize, more: bool) -> io::Result<()> {
    let header = encode_header(offset, len as i32);
    debug_assert!(FRAME_HEADER_SIZE == header.len());
    let mut hdr: &[u8] = &header;
    while !hdr.is_empty() {
        #[cfg(target_os = "linux")]
        let n = {
            use std::os::unix::io::AsRawFd;
            let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
            // SAFETY: a send of our own buffer on a socket we hold.
            let n = unsafe { libc::send(stream.as_raw_fd(), hdr.as_ptr().cast(), hdr.len(), flags) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            n as usize
        };
        #[cfg(not(target_os = "linux"))]
        let n = {
            let _ = more;
            io::Write::write(stream, hdr)?
        };
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "socket accepted no bytes"));
        }
        hdr = &hdr[n..];
    }
    Ok(())
}
