//! One accepted connection: its reader loop (on the connection's own thread), its shared
//! writer, and the [`Responder`] handlers use to answer, now or later from another thread.
//!
//! The broker also sends requests of its own to a client on the client's connection: oneway
//! ([`Responder::push_oneway`]) or awaiting an answer ([`Responder::invoke`], RocketMQ's
//! `invokeSync` on a client channel). An awaited request waits in its connection's table of
//! calls under its opaque; the connection's read loop hands the response frame with that
//! opaque to the waiter, and closing the connection wakes every waiter at once.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::codes::response_code;
use super::command::RemotingCommand;
use super::error::{FrameError, RemotingError};
use super::frame::read_frame;
use super::server::{Handled, RequestContext, RequestHandler};

/// Bytes of answers a connection may hold for a peer that reads too slowly; beyond them the
/// connection is closed (RocketMQ's Netty channel stops being writable and its answers fail).
/// One answer alone may be larger (a slave's config sync takes a table of up to 256 MiB in
/// one answer): only answers queued behind another count against it.
const MAX_PENDING_BYTES: usize = 64 << 20;

/// Most requests of the broker's own awaiting their answers on one connection at once
/// ([`Responder::invoke`]); beyond them a call fails at once rather than pile up waiters on a
/// client that does not answer.
pub const MAX_CALLS_PER_CONNECTION: usize = 64;

/// The opaque of the next request the broker sends a client (oneway or awaited).
static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);

/// The write side of a connection, shared by its thread and every [`Responder`].
///
/// Answers come from the connection's own thread and from shared ones: the thread that
/// completes a SYNC_MASTER put (the HA reader of a slave's connection, the flush thread) or a
/// long poll. None of them may block on a peer that does not read, or that peer would hold
/// up every other client. So a frame is written with a non-blocking send; what does not fit
/// in the socket's buffer waits in `outbox`, which one writer thread of this connection
/// drains with blocking writes (bounded by the write timeout), spawned when the outbox fills
/// and ending when it is empty. While the outbox holds anything, every frame goes behind it,
/// so frames never interleave.
pub(crate) struct ConnWriter {
    peer: SocketAddr,
    stream: TcpStream,
    out: Mutex<Outbox>,
    closed: AtomicBool,
    created: Instant,
    /// Milliseconds after `created` of the last completed write, for the idle check.
    last_write_ms: AtomicU64,
    /// The broker's own requests awaiting the peer's answers.
    calls: Mutex<Calls>,
    /// Requests of the peer not answered yet (see [`Owed`]).
    owed: Arc<AtomicUsize>,
}

/// One request of the peer that expects an answer, shared by its [`Responder`]'s clones: it
/// counts in the connection's owed answers until the answer is sent or the last clone is
/// dropped. The server does not close a connection that is owed an answer to make room for
/// a new one (a SYNC_MASTER put waiting for its slave, a long-polled pull): the client would
/// never get it, and would send a stored message again.
struct Owed {
    count: Arc<AtomicUsize>,
    paid: AtomicBool,
}

impl Owed {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Owed { count: Arc::clone(count), paid: AtomicBool::new(false) }
    }

    fn pay(&self) {
        if !self.paid.swap(true, Ordering::AcqRel) {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        self.pay();
    }
}

/// The requests the broker sent on a connection and awaits answers to, by opaque. Each waiter
/// holds the receiving end of its entry's channel: the read loop sends the answer into it, and
/// dropping the sender (the connection closes) wakes the waiter with "disconnected".
#[derive(Default)]
struct Calls {
    waiting: HashMap<i32, Sender<RemotingCommand>>,
    /// Set when the connection closes: no call may start after.
    closed: bool,
}

#[derive(Default)]
struct Outbox {
    frames: std::collections::VecDeque<Vec<u8>>,
    bytes: usize,
    /// A writer thread is draining `frames`.
    draining: bool,
}

impl ConnWriter {
    #[cfg(test)]
    fn new(stream: TcpStream, peer: SocketAddr) -> Self {
        Self::counting(stream, peer, Arc::default())
    }

    /// A writer whose requests' owed answers count in `owed`.
    fn counting(stream: TcpStream, peer: SocketAddr, owed: Arc<AtomicUsize>) -> Self {
        ConnWriter {
            peer,
            stream,
            out: Mutex::new(Outbox::default()),
            closed: AtomicBool::new(false),
            created: Instant::now(),
            last_write_ms: AtomicU64::new(0),
            calls: Mutex::new(Calls::default()),
            owed,
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands a response frame to the call awaiting it; false if none does (it timed out, or
    /// the peer sent a response to nothing).
    fn complete(&self, response: RemotingCommand) -> bool {
        let waiter = self.calls().waiting.remove(&response.opaque);
        // The channel holds one answer and its receiver may be gone: never blocks.
        waiter.is_some_and(|tx| tx.try_send(response).is_ok())
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the connection closed and shuts the socket down, which also wakes the reader.
    /// Every call awaiting an answer on it fails at once.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _ = self.stream.shutdown(Shutdown::Both);
        let waiting = {
            let mut calls = self.calls();
            calls.closed = true;
            std::mem::take(&mut calls.waiting)
        };
        // Dropping the senders wakes their waiters.
        drop(waiting);
    }

    fn last_write(&self) -> Instant {
        self.created + Duration::from_millis(self.last_write_ms.load(Ordering::Relaxed))
    }

    fn note_write(&self) {
        let ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_write_ms.store(ms, Ordering::Relaxed);
    }

    /// Sends what the socket takes now without blocking; the rest goes to the outbox.
    fn write_frame(self: &Arc<Self>, bytes: &[u8]) -> io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if self.is_closed() {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "connection closed"));
        }
        let mut sent = 0;
        // Not while the writer thread works: it may be writing a frame it took out already.
        if !out.draining {
            while sent < bytes.len() {
                // SAFETY: a valid buffer and length; MSG_DONTWAIT makes this one call
                // non-blocking without changing the socket, which the reader uses blocking.
                let n = unsafe {
                    libc::send(
                        std::os::fd::AsRawFd::as_raw_fd(&self.stream),
                        bytes[sent..].as_ptr().cast(),
                        bytes.len() - sent,
                        libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                    )
                };
                if n >= 0 {
                    sent += n as usize;
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => {
                        drop(out);
                        self.close();
                        return Err(e);
                    }
                }
            }
            if sent == bytes.len() {
                self.note_write();
                return Ok(());
            }
        }
        let rest = bytes.len() - sent;
        if out.bytes > 0 && out.bytes + rest > MAX_PENDING_BYTES {
            drop(out);
            tracing::warn!(peer = %self.peer, "closing a connection whose peer does not read its answers \
                ({MAX_PENDING_BYTES} bytes waiting)");
            self.close();
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "the peer does not read its answers"));
        }
        out.frames.push_back(bytes[sent..].to_vec());
        out.bytes += rest;
        if !out.draining {
            out.draining = true;
            let me = Arc::clone(self);
            let spawned =
                std::thread::Builder::new().name("rmqha-remoting-writer".into()).spawn(move || me.drain());
            if let Err(e) = spawned {
                out.draining = false;
                drop(out);
                self.close();
                return Err(e);
            }
        }
        Ok(())
    }

    /// The writer thread: writes the outbox's frames in order with blocking writes (bounded by
    /// the socket's write timeout) until it is empty.
    fn drain(&self) {
        loop {
            let frame = {
                let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
                match out.frames.pop_front() {
                    Some(f) => f,
                    None => {
                        out.draining = false;
                        return;
                    }
                }
            };
            // Closed: what is left is dropped.
            if !self.is_closed() {
                match (&self.stream).write_all(&frame).and_then(|()| (&self.stream).flush()) {
                    Ok(()) => self.note_write(),
                    // A partial frame may be on the wire: the stream cannot be used any more.
                    Err(_) => self.close(),
                }
            }
            // Counted until written: while a large answer is on its way, the next one queues
            // behind it and counts against the limit (uncounted, a peer that reads nothing
            // could have any number of large answers held one after another).
            self.out.lock().unwrap_or_else(PoisonError::into_inner).bytes -= frame.len();
        }
    }
}

/// Sends the response to one request, from any thread, at any time.
///
/// Cloneable so a handler can return [`Handled::Deferred`] and hand it to whatever completes
/// the request later (a long poll, a put waiting for a slave's ack). The responder fills in the
/// request's opaque and the response flag. For a oneway request, sending does nothing, as in
/// RocketMQ. Send once: the protocol has one response per request, and a second one would
/// reach the client as a stray it skips.
#[derive(Clone)]
pub struct Responder {
    conn: Arc<ConnWriter>,
    code: i32,
    opaque: i32,
    oneway: bool,
    /// The answer this request is owed (none for a oneway request).
    owed: Option<Arc<Owed>>,
}

impl Responder {
    fn new(conn: Arc<ConnWriter>, request: &RemotingCommand) -> Self {
        let oneway = request.is_oneway();
        let owed = (!oneway).then(|| Arc::new(Owed::new(&conn.owed)));
        Responder { conn, code: request.code, opaque: request.opaque, oneway, owed }
    }

    /// A responder to a request on `stream` (unit tests of the tables that keep responders).
    #[cfg(test)]
    pub(crate) fn for_test(stream: TcpStream, peer: SocketAddr) -> Self {
        Responder::new(Arc::new(ConnWriter::new(stream, peer)), &RemotingCommand::request(0))
    }

    /// The address of the peer that sent the request.
    pub fn peer(&self) -> SocketAddr {
        self.conn.peer
    }

    /// The request's opaque, which the response will carry.
    pub fn opaque(&self) -> i32 {
        self.opaque
    }

    /// Whether the connection is still open (it may still close before a send).
    pub fn is_connected(&self) -> bool {
        !self.conn.is_closed()
    }

    /// Closes the connection (a client whose heartbeats stopped, as RocketMQ closes its
    /// channel): what is queued to it is dropped, and the server's reader ends, which reports
    /// the close as a peer's close would be.
    pub fn close_connection(&self) {
        self.conn.close();
    }

    /// Writes `response` as the answer to the request.
    ///
    /// Fails with [`RemotingError::ResponderClosed`] if the connection is gone, `Io` if the
    /// write fails (the connection is then closed), or `Frame` if the response cannot be
    /// encoded; in that last case the client is sent a SYSTEM_ERROR instead, so it does not
    /// wait for a response that will never come.
    pub fn send(&self, mut response: RemotingCommand) -> Result<(), RemotingError> {
        if self.oneway {
            return Ok(());
        }
        if let Some(owed) = &self.owed {
            owed.pay();
        }
        if self.conn.is_closed() {
            return Err(self.closed_error());
        }
        response.opaque = self.opaque;
        response.mark_response();
        let bytes = match response.encode() {
            Ok(bytes) => bytes,
            Err(source) => {
                tracing::warn!(peer = %self.conn.peer, code = self.code, opaque = self.opaque,
                    error = %source, "response cannot be encoded; sending SYSTEM_ERROR instead");
                let mut fallback = RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    Some(&format!("response could not be encoded: {source}")),
                );
                fallback.opaque = self.opaque;
                fallback.serialize_type = response.serialize_type;
                if let Ok(bytes) = fallback.encode() {
                    let _ = self.conn.write_frame(&bytes);
                }
                return Err(RemotingError::Frame { peer: self.conn.peer.to_string(), source });
            }
        };
        self.conn
            .write_frame(&bytes)
            .map_err(|source| RemotingError::Io { peer: self.conn.peer.to_string(), source })
    }

    /// Writes `request` to the peer as a oneway request of the broker's own (RocketMQ's
    /// `invokeOneway` on a client channel: CHECK_TRANSACTION_STATE), with a fresh opaque.
    /// The peer answers nothing; its client may send a request of its own in return.
    pub fn push_oneway(&self, mut request: RemotingCommand) -> Result<(), RemotingError> {
        if self.conn.is_closed() {
            return Err(self.closed_error());
        }
        request.flag = 0;
        request.mark_oneway();
        request.opaque = NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed);
        let bytes = request
            .encode()
            .map_err(|source| RemotingError::Frame { peer: self.conn.peer.to_string(), source })?;
        self.conn
            .write_frame(&bytes)
            .map_err(|source| RemotingError::Io { peer: self.conn.peer.to_string(), source })
    }

    /// Writes `request` to the peer as a request of the broker's own that awaits an answer
    /// (RocketMQ's `invokeSync` on a client channel: GET_CONSUMER_RUNNING_INFO), with a fresh
    /// opaque, and returns the call to wait on. Does not block: the write is the connection's
    /// non-blocking one, and the answer is awaited with [`PendingCall::wait`].
    ///
    /// Fails at once if the connection is closed, the write fails, or
    /// [`MAX_CALLS_PER_CONNECTION`] calls already await this peer.
    pub fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<PendingCall, RemotingError> {
        let peer = self.conn.peer.to_string();
        let (tx, rx) = crossbeam_channel::bounded(1);
        let opaque = {
            let mut calls = self.conn.calls();
            if calls.closed || self.conn.is_closed() {
                return Err(RemotingError::ConnectionClosed { peer, code: request.code, opaque: 0 });
            }
            if calls.waiting.len() >= MAX_CALLS_PER_CONNECTION {
                return Err(RemotingError::TooManyCalls { peer, limit: MAX_CALLS_PER_CONNECTION });
            }
            let mut opaque = NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed);
            while calls.waiting.contains_key(&opaque) {
                opaque = NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed);
            }
            calls.waiting.insert(opaque, tx);
            opaque
        };
        request.flag = 0;
        request.opaque = opaque;
        // From here on, dropping `call` (an error below) takes its entry out of the table.
        let call = PendingCall {
            conn: Arc::clone(&self.conn),
            code: request.code,
            opaque,
            timeout,
            deadline: Instant::now() + timeout,
            rx,
        };
        let bytes = request.encode().map_err(|source| RemotingError::Frame { peer: peer.clone(), source })?;
        self.conn.write_frame(&bytes).map_err(|source| RemotingError::Io { peer, source })?;
        Ok(call)
    }

    fn closed_error(&self) -> RemotingError {
        RemotingError::ResponderClosed { peer: self.conn.peer, code: self.code, opaque: self.opaque }
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("peer", &self.conn.peer)
            .field("code", &self.code)
            .field("opaque", &self.opaque)
            .field("oneway", &self.oneway)
            .finish()
    }
}

/// A request the broker sent a client with [`Responder::invoke`], awaiting its answer.
/// Dropping it forgets the call: an answer arriving later is ignored.
pub struct PendingCall {
    conn: Arc<ConnWriter>,
    code: i32,
    opaque: i32,
    timeout: Duration,
    deadline: Instant,
    rx: Receiver<RemotingCommand>,
}

impl PendingCall {
    /// The opaque the request went out with.
    pub fn opaque(&self) -> i32 {
        self.opaque
    }

    /// Blocks until the peer answers, the call's timeout passes ([`RemotingError::Timeout`])
    /// or the connection closes ([`RemotingError::ConnectionClosed`], at once). Call it on a
    /// thread of its own, never on a connection's: the answer arrives on the client's
    /// connection thread.
    pub fn wait(self) -> Result<RemotingCommand, RemotingError> {
        match self.rx.recv_deadline(self.deadline) {
            Ok(response) => Ok(response),
            Err(RecvTimeoutError::Timeout) => Err(RemotingError::Timeout {
                peer: self.conn.peer.to_string(),
                code: self.code,
                opaque: self.opaque,
                timeout: self.timeout,
                stage: "waiting for the client's answer",
            }),
            Err(RecvTimeoutError::Disconnected) => Err(RemotingError::ConnectionClosed {
                peer: self.conn.peer.to_string(),
                code: self.code,
                opaque: self.opaque,
            }),
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        self.conn.calls().waiting.remove(&self.opaque);
    }
}

impl std::fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCall")
            .field("peer", &self.conn.peer)
            .field("code", &self.code)
            .field("opaque", &self.opaque)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Reads from the socket, treating a read timeout as "check for idleness" rather than an
/// error: the connection is idle only if neither a read nor a write (a deferred response
/// counts) happened for the whole idle timeout, as Netty's all-idle handler in RocketMQ.
struct IdleReader<'a> {
    stream: &'a TcpStream,
    writer: &'a ConnWriter,
    idle_timeout: Option<Duration>,
    current_timeout: Option<Duration>,
    last_read: Instant,
    idle_expired: bool,
}

impl Read for IdleReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match (&*self.stream).read(buf) {
                Ok(n) => {
                    self.last_read = Instant::now();
                    if self.current_timeout != self.idle_timeout {
                        self.stream.set_read_timeout(self.idle_timeout)?;
                        self.current_timeout = self.idle_timeout;
                    }
                    return Ok(n);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    let Some(idle_timeout) = self.idle_timeout else {
                        return Err(e);
                    };
                    let idle_for = self.last_read.max(self.writer.last_write()).elapsed();
                    let Some(remaining) = idle_timeout.checked_sub(idle_for).filter(|d| !d.is_zero()) else {
                        self.idle_expired = true;
                        return Err(e);
                    };
                    self.stream.set_read_timeout(Some(remaining))?;
                    self.current_timeout = Some(remaining);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a connection thread needs; built by the acceptor, consumed by [`Connection::run`].
pub(crate) struct Connection {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) handler: Arc<dyn RequestHandler>,
    pub(crate) max_frame: usize,
    /// `None` disables the idle check.
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) stopping: Arc<AtomicBool>,
    /// Where to note, in milliseconds since the instant, when the last frame arrived (the
    /// server evicts the connection idle the longest at its connection limit).
    pub(crate) activity: (Instant, Arc<AtomicU64>),
    /// How many of the peer's requests are owed an answer (see [`Owed`]).
    pub(crate) owed: Arc<AtomicUsize>,
}

impl Connection {
    /// Serves requests until the peer closes, a frame is bad, the connection idles out or
    /// the server shuts the socket down.
    pub(crate) fn run(self) {
        let write_half = match self.stream.try_clone() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(peer = %self.peer, error = %e,
                    "cannot clone socket; closing connection");
                let _ = self.stream.shutdown(Shutdown::Both);
                return;
            }
        };
        // A peer that stops reading must not block a handler's thread forever.
        let _ = write_half.set_write_timeout(self.write_timeout);
        let writer = Arc::new(ConnWriter::counting(write_half, self.peer, Arc::clone(&self.owed)));
        let _ = self.stream.set_read_timeout(self.idle_timeout);

        let mut reader = IdleReader {
            stream: &self.stream,
            writer: &writer,
            idle_timeout: self.idle_timeout,
            current_timeout: self.idle_timeout,
            last_read: Instant::now(),
            idle_expired: false,
        };
        loop {
            let request = match read_frame(&mut reader, self.max_frame) {
                Ok(Some(request)) => request,
                Ok(None) => {
                    tracing::debug!(peer = %self.peer, local = %self.local,
                        "peer closed the connection");
                    break;
                }
                Err(e) => {
                    self.log_end(&e, reader.idle_expired, &writer);
                    break;
                }
            };
            let (epoch, at) = &self.activity;
            at.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
            if !self.dispatch(request, &writer) {
                break;
            }
        }
        writer.close();
        // As a panic in a request's handler, one here costs this connection only.
        if let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| self.handler.connection_closed(self.peer)))
        {
            tracing::error!(peer = %self.peer, panic = %crate::panic_message(payload.as_ref()),
                "connection-closed handler panicked");
        }
    }

    /// Logs why the read loop ended: a bad frame is the peer's fault and worth a warning; an
    /// idle timeout is routine; a reset or our own shutdown is noise.
    fn log_end(&self, e: &FrameError, idle_expired: bool, writer: &ConnWriter) {
        let (peer, local) = (self.peer, self.local);
        if self.stopping.load(Ordering::Acquire) || writer.is_closed() {
            tracing::debug!(%peer, reason = %e, "connection closed");
        } else if idle_expired {
            let idle_timeout = self.idle_timeout.unwrap_or_default();
            tracing::info!(%peer, %local, ?idle_timeout, "closing idle connection");
        } else if let FrameError::Io(io) = e {
            tracing::debug!(%peer, %local, error = %io, "connection failed");
        } else {
            // Anything may connect and send garbage, again and again: each host once a minute
            // per listening port.
            static BAD: crate::logging::Throttle = crate::logging::Throttle::new(Duration::from_secs(60));
            match BAD.note(&format!("{} {local}", peer.ip())) {
                Some(n) => {
                    tracing::warn!(%peer, %local, reason = %e, repeated = n, "closing connection after a bad frame")
                }
                None => tracing::debug!(%peer, %local, reason = %e, "closing connection after a bad frame"),
            }
        }
    }

    /// Runs the handler for one request and writes its immediate response, if any. Returns
    /// false when the connection is no longer usable.
    fn dispatch(&self, request: RemotingCommand, writer: &Arc<ConnWriter>) -> bool {
        if request.is_response() {
            // The answer to a request of the broker's own (`Responder::invoke`), unless its
            // call gave up already or the peer answers nothing we asked.
            let (code, opaque) = (request.code, request.opaque);
            if !writer.complete(request) {
                tracing::debug!(peer = %self.peer, code, opaque,
                    "ignoring a response nothing awaits (late, or to no request of ours)");
            }
            return true;
        }
        let ctx = RequestContext {
            peer: self.peer,
            local: self.local,
            responder: Responder::new(Arc::clone(writer), &request),
            acl: None,
        };
        let (code, opaque, serialize_type) = (request.code, request.opaque, request.serialize_type);
        // A bug in one handler must cost one request, not the server: the panic becomes a
        // SYSTEM_ERROR like an exception in RocketMQ's processor does.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| self.handler.handle(request, &ctx)));
        let response = match outcome {
            Ok(Handled::Respond(response)) => response,
            Ok(Handled::Deferred | Handled::NoResponse) => return true,
            Err(payload) => {
                let message = crate::panic_message(payload.as_ref());
                tracing::error!(peer = %self.peer, code, opaque, panic = %message,
                    "request handler panicked");
                let mut response = RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    Some(&format!("request handler panicked: {message}")),
                );
                response.serialize_type = serialize_type;
                response
            }
        };
        match ctx.responder.send(response) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(peer = %self.peer, code, opaque, error = %e, "response not sent");
                !writer.is_closed()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// One answer larger than the backlog a slow peer may leave (a config table of 80 MiB)
    /// is queued whole and arrives intact; before, every answer above 64 MiB closed the
    /// connection, so a slave never synced such a table (found by an audit). An answer queued
    /// behind it that passes the limit still closes a peer that does not read.
    #[test]
    fn one_large_answer_is_sent_whole_and_a_backlog_behind_it_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // A peer that reads nothing (kept open until the end).
        let _idle = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        let w = Arc::new(ConnWriter::new(stream, peer));
        let big: Vec<u8> = (0..80usize << 20).map(|i| (i % 251) as u8).collect();
        w.write_frame(&big).expect("one large answer is queued");
        assert!(!w.is_closed());
        // Another large answer waits behind it (the writer thread took the first out of the
        // outbox, and it still counts until written): refused.
        assert!(w.write_frame(&big).is_err(), "a second large answer behind the first");
        assert!(w.is_closed(), "a backlog past the limit closes the connection");

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        let w = Arc::new(ConnWriter::new(stream, peer));
        w.write_frame(&big).unwrap();
        let mut got = vec![0u8; big.len()];
        client.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        client.read_exact(&mut got).unwrap();
        assert!(got == big, "the answer arrived intact");
        assert!(!w.is_closed());
    }
}
