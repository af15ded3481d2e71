//! The slave's HA client (RocketMQ's HAClient, spec 6.1): connects to the master, reports its
//! CommitLog end, appends each frame at exactly the offset the master sent (so its files are
//! byte-identical to the master's), acks after every applied frame, heartbeats, and
//! reconnects with backoff. The master address can change at runtime.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::frame::{FRAME_HEADER_SIZE, MAX_FRAME_BODY, ParsedFrame, encode_report, parse_frame};
use crate::store::MessageStore;
use crate::store::flush::{StopSignal, Woke};

/// Settings of the slave side.
#[derive(Debug, Clone)]
pub struct HaSlaveOptions {
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
    pub connect_timeout: Duration,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Local address to connect from (None: the OS chooses).
    pub bind_address: Option<std::net::IpAddr>,
    /// `haAuthSecret`: prove it to the master, and check the master's proof, before the first
    /// report (see `super::auth`); `None` for a master without one.
    pub auth_secret: Option<crate::config::Secret>,
    /// `haSlaveTruncateDiverged`: cut a log that diverged from the master's back to where it
    /// diverged and reconnect, instead of refusing to follow.
    pub truncate_diverged: bool,
    /// A SYNC_FLUSH slave: ack only what is synced to its disk (each batch of frames is
    /// synced before the ack that covers it), so a SYNC_MASTER's PUT_OK means the record is
    /// on the slave's disk, not only in its page cache. RocketMQ's slave acks what it wrote,
    /// whatever its `flushDiskType`.
    pub ack_flushed: bool,
    /// Called after such a cut, with the log's new end (the broker moves consumer offsets
    /// left past their queues' new ends back to them).
    pub on_truncated: Option<TruncateHook>,
}

/// What a slave does after cutting its diverged log back (see
/// [`HaSlaveOptions::on_truncated`]).
#[derive(Clone)]
pub struct TruncateHook(pub Arc<dyn Fn(u64) + Send + Sync>);

impl std::fmt::Debug for TruncateHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TruncateHook")
    }
}

/// What the slave knows of its master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlaveStatus {
    pub master_address: String,
    pub connected: bool,
    /// Highest offset acked to the master.
    pub acked_offset: i64,
    /// Why the last connection ended (until the master streams again), or why the last connect
    /// failed (until one succeeds).
    pub last_error: Option<String>,
}

struct Shared {
    store: Arc<MessageStore>,
    opts: HaSlaveOptions,
    master: Mutex<String>,
    /// The live connection, so an address change or shutdown can cut it. Registered, and cut
    /// by an address change, under the `master` lock (taken first): a change cuts exactly
    /// the connections made to an earlier address.
    current: Mutex<Option<TcpStream>>,
    connected: AtomicBool,
    acked: AtomicI64,
    last_error: Mutex<Option<String>>,
    stop: Arc<StopSignal>,
    /// Set by a session that cut a diverged log back: reconnect at once to compare again.
    retry_now: AtomicBool,
}

/// The slave's HA client thread.
pub struct HaSlave {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process that made it; a fork of that process leaves it alone (`crate::fork`).
    fork: crate::fork::ForkGuard,
}

impl HaSlave {
    /// Starts replicating from `master_address` (`host:port`; empty waits for one).
    pub fn start(store: Arc<MessageStore>, master_address: &str, opts: HaSlaveOptions) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            store,
            opts,
            master: Mutex::new(master_address.to_string()),
            current: Mutex::new(None),
            connected: AtomicBool::new(false),
            acked: AtomicI64::new(-1),
            last_error: Mutex::new(None),
            stop: StopSignal::new(),
            retry_now: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("rmqha-ha-client".into()).spawn(move || run(&s))?;
        Ok(HaSlave { shared, thread: Mutex::new(Some(thread)), fork: crate::fork::ForkGuard::new() })
    }

    /// Switches to another master; the current connection is closed and the next attempt uses
    /// the new address.
    pub fn set_master_address(&self, addr: &str) {
        // Set and cut under the `master` lock, which the client holds to register a connection
        // after comparing its address: the cut reaches every connection made to an earlier
        // address and none made to this one. (Before, a client that read the new address
        // between the change and the cut had its fresh session with the new master cut while
        // the master compared its tail, which the master recorded as a refusal.)
        let mut master = self.shared.master.lock().unwrap_or_else(|e| e.into_inner());
        *master = addr.to_string();
        self.shared.cut("master address changed");
        drop(master);
        self.shared.stop.notify_only();
    }

    pub fn status(&self) -> SlaveStatus {
        SlaveStatus {
            master_address: self.shared.master.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            connected: self.shared.connected.load(Ordering::Acquire),
            acked_offset: self.shared.acked.load(Ordering::Acquire),
            last_error: self.shared.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// Stops the client and joins its thread.
    pub fn shutdown(&self) {
        if self.fork.forked() {
            return; // its socket and thread are the parent's
        }
        self.shared.stop.stop();
        self.shared.cut("shutting down");
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for HaSlave {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn cut(&self, _why: &str) {
        if let Some(s) = self.current.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
    fn set_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
    }

    /// This slave's log diverged from the master's at or before `record`, a record start in
    /// it (`what` says how it was found). Without `truncate_diverged` the session ends with
    /// `what` and the remedy; with it, the log is cut back to `record` (the records from there
    /// are lost, and logged) and the slave reconnects at once to compare again: each round
    /// cuts at least one record, so the rounds end where the logs agree.
    fn diverged(&self, record: u64, what: &str) -> String {
        if !self.opts.truncate_diverged {
            return format!(
                "{what}: the logs diverged, at or before this slave's record at {record}. This store cannot \
                 follow this master as it is: start it empty (a new store directory) to copy the master's \
                 log, cut it back with `rmqha truncate --offset {record}` (the records past the cut are lost; \
                 if the logs diverged earlier still, the next connection says where), or set \
                 haSlaveTruncateDiverged=true to have it cut back by itself"
            );
        }
        let end = self.store.max_offset();
        if record as i64 >= end {
            // Nothing to cut (the master's log ends below this slave's first record, say after
            // this slave's retention took its early files): cutting "back" to the end and
            // reconnecting at once looped without a pause, cutting nothing each round.
            return format!(
                "{what}: the logs diverged at or before {record}, where this slave's log begins or ends, so \
                 haSlaveTruncateDiverged has nothing to cut: start this store empty (a new store directory) to \
                 copy the master's log"
            );
        }
        match self.store.truncate(record) {
            Ok(()) => {
                tracing::warn!(
                    "HA: {what}: the logs diverged at or before {record}; haSlaveTruncateDiverged: cut this \
                     slave's log from {end} back to {record} ({} bytes of records lost), reconnecting to \
                     compare again",
                    end.saturating_sub(record as i64)
                );
                self.retry_now.store(true, Ordering::Release);
                if let Some(hook) = &self.opts.on_truncated {
                    (hook.0)(record);
                }
                format!(
                    "{what}: the logs diverged; cut back from {end} to {record} (haSlaveTruncateDiverged)"
                )
            }
            Err(e) => format!(
                "{what}: the logs diverged, at or before {record}, and cutting this log back there failed: {e}"
            ),
        }
    }
}

fn run(shared: &Shared) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(100);
    let mut backoff = FIRST_BACKOFF;
    // A master that cannot be reached (logged again when the reason changes), or that ends
    // every session at once (it refuses this slave), is logged when that starts, then every
    // 5 minutes with a count: the retries come every few seconds for as long as it lasts.
    let mut unreachable = crate::logging::Repeats::new(Duration::from_secs(300));
    let mut ended = crate::logging::Repeats::new(Duration::from_secs(300));
    // Waits out `d` unless stopped or the master address changes from `addr` (a new master
    // is tried at once, with the backoff reset).
    let pause = |d: Duration, addr: &str, backoff: &mut Duration| {
        let changed = || *shared.master.lock().unwrap_or_else(|e| e.into_inner()) != addr;
        if shared.stop.sleep_until(d, changed) == Woke::Condition {
            *backoff = FIRST_BACKOFF;
        } else {
            *backoff = (*backoff * 2).min(shared.opts.max_backoff);
        }
    };
    // Whether `last_error` is a failed connect (cleared by the next successful one).
    let mut connect_failed = false;
    while !shared.stop.is_stopped() {
        let addr = shared.master.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if addr.is_empty() {
            // Until an address is set (`set_master_address` wakes this at once).
            shared.stop.sleep_until(Duration::from_secs(1), || {
                !shared.master.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
            });
            continue;
        }
        // Given up on when stopped or when the address changes (a host name's lookup may hang).
        let cancelled =
            || shared.stop.is_stopped() || *shared.master.lock().unwrap_or_else(|e| e.into_inner()) != addr;
        let stream = match connect(&addr, shared.opts.connect_timeout, shared.opts.bind_address, cancelled) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!("cannot connect to master {addr}: {e}");
                match unreachable.note(&msg) {
                    Some(n) => {
                        tracing::warn!("{msg}; retrying until it answers{}", crate::logging::recurred(n))
                    }
                    None => tracing::debug!("{msg}"),
                }
                shared.set_error(msg);
                connect_failed = true;
                pause(backoff, &addr, &mut backoff);
                continue;
            }
        };
        {
            // Registered under the `master` lock, after comparing the address: a change made
            // before this is seen here, one made after cuts this connection.
            let master = shared.master.lock().unwrap_or_else(|e| e.into_inner());
            // The address may have changed, or a stop arrived, while we connected.
            if shared.stop.is_stopped() || *master != addr {
                drop(master);
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
            *shared.current.lock().unwrap_or_else(|e| e.into_inner()) = stream.try_clone().ok();
        }
        if shared.stop.is_stopped() {
            // A shutdown's cut may have run before the connection was registered.
            let _ = stream.shutdown(Shutdown::Both);
            *shared.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
            continue;
        }
        if std::mem::take(&mut connect_failed) {
            // "cannot connect" beside `connected: true` would be stale at once (an error from
            // an ended session stays until the master streams: it may refuse us again).
            *shared.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        shared.connected.store(true, Ordering::Release);
        match unreachable.clear() {
            0 if ended.occurrences() > 0 => tracing::debug!("HA connected to master {addr}"),
            0 => tracing::info!("HA connected to master {addr}"),
            n => tracing::info!("HA connected to master {addr} after {n} failed attempts"),
        }
        let started = Instant::now();
        let why = session(shared, stream);
        shared.connected.store(false, Ordering::Release);
        *shared.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if shared.retry_now.swap(false, Ordering::AcqRel) {
            // A diverged log was cut back: compare again at once (logged by the cut).
            shared.set_error(why);
            backoff = FIRST_BACKOFF;
            continue;
        }
        // A session that lasted resets the backoff; a master that refuses us at once does not.
        if started.elapsed() > Duration::from_secs(5) {
            backoff = FIRST_BACKOFF;
            ended.clear();
        }
        if !shared.stop.is_stopped() {
            let msg = format!("HA connection to master {addr} ended: {why}");
            // Keyed by the master alone: one refusal ends as a reset or as a close by timing.
            match ended.note(&addr) {
                Some(n) => tracing::warn!("{msg}{}", crate::logging::recurred(n)),
                None => tracing::debug!("{msg}"),
            }
        }
        shared.set_error(why);
        pause(backoff, &addr, &mut backoff);
    }
}

/// The start of the record of `store`'s CommitLog that holds `offset` (or starts there).
fn record_holding(store: &MessageStore, offset: i64) -> u64 {
    let cl = store.commit_log();
    let fs = cl.file_size() as i64;
    cl.record_start_at_or_before((offset - offset % fs) as u64, offset as u64)
}

fn connect(
    addr: &str,
    timeout: Duration,
    bind: Option<std::net::IpAddr>,
    cancelled: impl Fn() -> bool,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr} resolves to no address"));
    for a in crate::net::resolve(addr, timeout, &cancelled)? {
        if cancelled() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped while connecting"));
        }
        match crate::net::connect(a, timeout, bind, &cancelled) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Follows the record boundaries of what a session appends, reading each record's size and
/// magic only, to find the master's end-of-file filler before the bytes after it are acked.
/// The filler must end where this slave's file does; where it does not, the master's files
/// are smaller than this slave's, its next file's records land inside this slave's file, and
/// acking them would release SYNC_MASTER puts this slave cannot serve. The dispatcher finds
/// that too, but only after the ack. (Larger master files are caught before: a frame that
/// crosses this slave's file end is refused.)
struct FillerCheck {
    /// The next record start not yet read, `None` once the bytes stop looking like records
    /// (the dispatcher then says what is wrong).
    next: Option<u64>,
}

impl FillerCheck {
    /// Reads the record headers below `end`; `Err` names a filler that ends elsewhere than
    /// this slave's file.
    fn check(&mut self, cl: &crate::store::commit_log::CommitLog, end: u64) -> Result<(), String> {
        use crate::message::codec::{BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2};
        while let Some(start) = self.next {
            if start + 8 > end {
                return Ok(());
            }
            let Some((file, pos)) = cl.data_at(start) else {
                self.next = None;
                return Ok(());
            };
            let data = file.readable_from(pos);
            let mut at = 0usize;
            while at + 8 <= data.len() {
                let word = |i: usize| i32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
                let (size, magic) = (word(at), word(at + 4));
                if size < 8 {
                    self.next = None;
                    return Ok(());
                }
                match magic {
                    MESSAGE_MAGIC_CODE | MESSAGE_MAGIC_CODE_V2 => at += size as usize,
                    BLANK_MAGIC_CODE => {
                        let here = start + at as u64;
                        let ends = here + size as u64;
                        if ends != file.end_offset() {
                            return Err(crate::store::dispatcher::filler_mismatch(here, ends, &file));
                        }
                        at += size as usize;
                        break;
                    }
                    _ => {
                        self.next = None;
                        return Ok(());
                    }
                }
            }
            let next = start + at as u64;
            self.next = Some(next);
            if next < file.end_offset() {
                return Ok(()); // the rest of this file has not arrived
            }
        }
        Ok(())
    }
}

fn session(shared: &Shared, mut stream: TcpStream) -> String {
    let store = &shared.store;
    let hb = shared.opts.heartbeat_interval;
    if let Err(e) = stream.set_read_timeout(Some(hb.min(Duration::from_millis(500)))) {
        return format!("socket setup: {e}");
    }
    if let Err(e) = stream.set_write_timeout(Some(shared.opts.housekeeping_interval)) {
        return format!("socket setup: {e}");
    }
    if let Some(fault) = store.dispatcher().layout_fault() {
        return fault.to_string();
    }
    if let Some(secret) = &shared.opts.auth_secret {
        let deadline = Instant::now() + shared.opts.housekeeping_interval;
        if let Err(why) = super::auth::slave_handshake(&mut stream, secret, deadline) {
            return why;
        }
    }
    let mut reported = store.max_offset();
    // Frames are not aligned to records, so a connection that ended mid-stream often leaves
    // a partial record at the tail, and the master only serves offsets where a record
    // starts. Report where that partial record starts instead (found by hopping over record
    // lengths from where dispatch stands, a record start): the master resends from there.
    // Not where dispatch stands itself: a dispatcher that lags (after a restart that rebuilds
    // queues, say) would have the master resend up to a whole file for this slave to compare.
    // From the last file's start at the latest (a file begins with a record): a dispatcher a
    // file or more behind (catching up a backlog) left the end reported as it was, inside the
    // partial record, which the master refused as no record boundary and this slave then
    // took for diverged logs.
    let resume_from = {
        let reput = store.dispatcher().reput_from() as i64;
        let last_file_start = reported - reported % store.commit_log().file_size() as i64;
        let from = reput.max(last_file_start);
        if from < reported {
            store.commit_log().record_start_at_or_before(from as u64, reported as u64) as i64
        } else {
            reported
        }
    };
    reported = resume_from;
    // Not an ack (the master counts none until the resent records are compared), and lower
    // than what an earlier session acked when this one resumes behind its end: the slave's
    // `acked_offset` keeps what it has acked.
    if let Err(e) = stream.write_all(&encode_report(reported)) {
        return format!("first report failed: {e}");
    }
    // How far this session has checked the log: bytes the master resent and this slave
    // compared, or bytes it appended. Reports never go beyond it: a tail kept from an earlier
    // session (between `resume_from` and the log's end) is acked only once compared.
    let mut verified = reported;
    // Record boundaries through what this session appends: from where the master starts,
    // which is a record start (it refuses any other offset).
    let mut fillers = FillerCheck { next: (resume_from > 0).then_some(resume_from as u64) };
    // Whether the master's stream has reached `resume_from`, so that the records it resends
    // before it were compared. Until then this slave reports nothing (not even a heartbeat):
    // the master counts a report after the first as confirmed, and one acking exactly
    // `resume_from` then releases SYNC_MASTER puts ending there (written by this slave before
    // a link reset lost its ack), which must wait for the comparison.
    let mut compared = false;
    let mut confirmed = false;
    let mut last_write = Instant::now();
    let mut last_read = Instant::now();
    // A mapping of its own rather than a heap block: the allocator would keep a freed 4 MiB
    // block in the arena of the thread that freed it, one per arena, so starting and stopping
    // slaves (and reconnecting) held up to 4 MiB per arena for good (measured: 64 MB after
    // 200 master and slave start/stop cycles on two cores). Unmapped when the session ends;
    // pages are touched only as data fills them.
    let mut buf = match memmap2::MmapMut::map_anon(MAX_FRAME_BODY + FRAME_HEADER_SIZE) {
        Ok(m) => m,
        Err(e) => {
            return format!("cannot map a {} byte receive buffer: {e}", MAX_FRAME_BODY + FRAME_HEADER_SIZE);
        }
    };
    let mut filled = 0usize;
    let mut streaming = false;
    let mut first_frame = true;
    loop {
        if shared.stop.is_stopped() {
            return "stopped".into();
        }
        match stream.read(&mut buf[filled..]) {
            Ok(0) if !streaming => {
                // The wire protocol carries no reason: a master refuses an offset by closing.
                return format!(
                    "the master closed the connection before sending anything after this slave reported offset \
                     {resume_from}: a master refuses an offset it does not have (ahead of it, below its first \
                     file, not a record boundary) and names the reason in its refused slaves (offsets(), \
                     `rmqha status`); if it lists none, haMasterAddress may not be its haListenPort"
                );
            }
            Ok(0) => return "the master closed the connection".into(),
            Ok(n) => {
                filled += n;
                last_read = Instant::now();
                if !streaming {
                    // The master streams to us: an error from an earlier session is history.
                    streaming = true;
                    *shared.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return format!("read error: {e}"),
        }
        // Apply every complete frame in the buffer.
        let mut at = 0;
        let mut appended = false;
        loop {
            match parse_frame(&buf[at..filled]) {
                ParsedFrame::Partial => break,
                ParsedFrame::Bad(why) => return format!("bad frame from master: {why}"),
                ParsedFrame::Frame { offset, body } => {
                    if first_frame && body.is_empty() && offset >= 0 && offset < resume_from {
                        // The master refused this slave's end and said where its log could
                        // serve from (`HaMaster::divergence_hint`): before that, if anywhere.
                        let record = record_holding(store, offset.max(store.min_offset()));
                        return shared.diverged(
                            record,
                            &format!(
                                "the master cannot serve this slave's end at {resume_from} (this slave is ahead \
                                 of it, or its records end elsewhere); the master's log lines up to {offset} at most"
                            ),
                        );
                    }
                    first_frame = false;
                    // Frames come in order: this one reaching `resume_from` means every
                    // resent record before it was compared (this one is below; a mismatch
                    // ends the session before any report).
                    compared |= offset + body.len() as i64 >= resume_from;
                    let mut local = store.max_offset();
                    if local == 0 && fillers.next.is_none() {
                        fillers.next = Some(offset.max(0) as u64);
                    }
                    let frame_len = FRAME_HEADER_SIZE + body.len();
                    let (mut offset, mut body) = (offset, body);
                    let held_from = store.min_offset();
                    if local != 0 && offset + (body.len() as i64) <= held_from {
                        // Wholly below this slave's first file (the records the master resends
                        // before a reported offset at that file's start): nothing to compare
                        // them with, nor anywhere to put them.
                        at += frame_len;
                        continue;
                    }
                    if local != 0 && offset < held_from && offset + (body.len() as i64) > held_from {
                        // Bytes below what this slave still holds (its own retention): skip.
                        let skip = (held_from - offset) as usize;
                        offset += skip as i64;
                        body = &body[skip..];
                    }
                    if local != 0 && offset != local && offset >= held_from && offset < local {
                        // Resent bytes this slave holds (see resume_from; the master also
                        // resends the records before a reported offset for this check): they
                        // must be the same, and only what follows them is appended.
                        let overlap = ((local - offset) as usize).min(body.len());
                        // Where the resent bytes first differ from this slave's, if they do.
                        let differ = store
                            .commit_log()
                            .data_at(offset as u64)
                            .and_then(|(f, pos)| {
                                f.read(pos, overlap)
                                    .map(|held| held.iter().zip(&body[..overlap]).position(|(a, b)| a != b))
                            })
                            .unwrap_or(Some(0))
                            .map(|i| offset + i as i64);
                        match differ {
                            None => {
                                offset += overlap as i64;
                                body = &body[overlap..];
                            }
                            Some(differs_at) if differs_at >= resume_from && resume_from < local => {
                                // Only the partial record at this slave's tail differs (the
                                // master lost the bytes it came from, in a crash, and wrote
                                // others there). No put's record ends inside it, so no ack
                                // of this slave released one: drop it from the first byte
                                // that differs (what precedes is the master's too, possibly
                                // compared in earlier frames) and take the master's.
                                tracing::warn!(
                                    "HA: the partial record at this slave's tail ({resume_from}..{local}) differs \
                                     from the master's bytes at {differs_at}; dropping it from there"
                                );
                                if let Err(e) = store.cut(differs_at as u64) {
                                    return format!("cannot drop the partial record from {differs_at}: {e}");
                                }
                                // The master's record takes the dropped one's place, at
                                // `resume_from`, with its own size.
                                fillers.next = Some(resume_from as u64);
                                body = &body[(differs_at - offset) as usize..];
                                offset = differs_at;
                                local = differs_at;
                            }
                            Some(differs_at) => {
                                let record = record_holding(store, differs_at);
                                return shared.diverged(
                                    record,
                                    &format!(
                                        "master resent bytes at {differs_at} that differ from this slave's"
                                    ),
                                );
                            }
                        }
                        verified = verified.max(offset);
                        if body.is_empty() {
                            at += frame_len;
                            continue;
                        }
                    }
                    if local != 0 && offset != local {
                        // Never write bytes at the wrong place: reconnect and report again.
                        return format!("master sent offset {offset} but this slave's log ends at {local}");
                    }
                    if !body.is_empty() {
                        if let Err(e) = store.commit_log().append_raw(offset as u64, body) {
                            return format!("cannot apply frame at {offset}: {e}");
                        }
                        verified = verified.max(offset + body.len() as i64);
                        appended = true;
                    }
                    at += frame_len;
                }
            }
        }
        if at > 0 {
            buf.copy_within(at..filled, 0);
            filled -= at;
        }
        if let Err(fault) = fillers.check(store.commit_log(), store.max_offset() as u64) {
            store.dispatcher().set_layout_fault(fault);
        }
        if let Some(fault) = store.dispatcher().layout_fault() {
            // Bytes that do not fit this store's files: acking more would release puts whose
            // records this slave cannot serve.
            return fault.to_string();
        }
        let mut ack = verified.min(store.max_offset());
        if shared.opts.ack_flushed {
            // Group commit of its own: one sync covers every frame this round applied (and
            // the ones that arrived while the last sync ran wait in the socket for the next).
            let cl = store.commit_log();
            if (cl.flushed_offset() as i64) < ack {
                if let Err(e) = cl.flush_all() {
                    // The log is poisoned now: nothing more is acked until a restart.
                    return format!("cannot sync the received log to disk (SYNC_FLUSH): {e}");
                }
            }
            ack = ack.min(cl.flushed_offset() as i64);
        }
        let due = last_write.elapsed() >= hb;
        let grew = ack > reported;
        // The first report once compared says so, even when it acks no more than the first.
        let confirm = compared && !confirmed;
        if compared && (grew || due || confirm) {
            confirmed = true;
            // Recorded before it is sent, so the slave never shows less than the master may
            // already have counted.
            shared.acked.fetch_max(ack, Ordering::AcqRel);
            if let Err(e) = stream.write_all(&encode_report(ack)) {
                return format!("report failed: {e}");
            }
            reported = ack;
            last_write = Instant::now();
        }
        if appended {
            // After the ack: the dispatcher's wake-up must not delay it.
            store.commit_log().appended().notify();
        }
        if last_read.elapsed() > shared.opts.housekeeping_interval {
            return format!(
                "nothing from the master for {:?} (haHousekeepingInterval; or this process was paused, \
                 which stops its reads too)",
                shared.opts.housekeeping_interval
            );
        }
    }
}
