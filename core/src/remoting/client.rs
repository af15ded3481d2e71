//! [`RemotingClient`]: synchronous calls to one remoting server over one connection.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::command::{FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand};
use super::error::{FrameError, RemotingError};
use super::frame::{DEFAULT_MAX_FRAME, read_frame};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Longest wait for a TCP connection (RocketMQ's `connectTimeoutMillis`, 3 s). A call's own
    /// timeout caps it further.
    pub connect_timeout: Duration,
    /// Largest accepted response frame, length field included.
    pub max_frame: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig { connect_timeout: Duration::from_secs(3), max_frame: DEFAULT_MAX_FRAME }
    }
}

struct ClientConn {
    stream: TcpStream,
}

/// A client of one remoting server (`host:port`), safe to share between threads.
///
/// Calls are serialized over one connection by a mutex: simple, and enough for config sync
/// and tools. The connection is made on the first call (or by [`connect`](Self::connect)),
/// dropped after any I/O error and checked before each call, so a server that restarted or
/// closed an idle connection costs a reconnect, not a failed call. Each request gets the next value
/// of a per-client opaque counter, and a call returns the response carrying its opaque,
/// skipping any other frame (a late response to a call that timed out, or a request the
/// server pushes, which rmqha does not serve).
pub struct RemotingClient {
    addr: String,
    config: ClientConfig,
    next_opaque: AtomicI32,
    conn: Mutex<Option<ClientConn>>,
    /// Set by `abort`: every call fails at once from then on.
    aborted: AtomicBool,
    /// A second handle on the open connection, for `abort` to shut down while a call holds
    /// `conn`.
    live: Mutex<Option<TcpStream>>,
}

impl RemotingClient {
    /// A client of `addr` (`host:port`). Does not connect yet.
    pub fn new(addr: impl Into<String>, config: ClientConfig) -> Self {
        RemotingClient {
            addr: addr.into(),
            config,
            next_opaque: AtomicI32::new(0),
            conn: Mutex::new(None),
            aborted: AtomicBool::new(false),
            live: Mutex::new(None),
        }
    }

    /// Ends the call in progress (its wait for a response returns at once) and fails every
    /// later one: for a broker that stops while its master does not answer, or while a
    /// connection to it is being made.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        if let Some(stream) = self.live.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// A client of `addr`, connected now, so a wrong address fails here.
    pub fn connect(addr: impl Into<String>, config: ClientConfig) -> Result<Self, RemotingError> {
        let client = Self::new(addr, config);
        let deadline = crate::deadline_after(client.config.connect_timeout);
        client.ensure_connected(&mut client.lock(), deadline)?;
        Ok(client)
    }

    /// The server address as given.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether a connection is open (it may still turn out broken on the next call).
    pub fn is_connected(&self) -> bool {
        self.lock().is_some()
    }

    /// Closes the connection; the next call reconnects.
    pub fn close(&self) {
        self.disconnect(&mut self.lock());
    }

    /// Sends `request` and waits up to `timeout` (connecting included) for its response.
    ///
    /// The request's opaque is replaced by the client's next one and its response/oneway flags
    /// are cleared. A response with any code is `Ok`: the caller judges the code.
    pub fn invoke_sync(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let deadline = crate::deadline_after(timeout);
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        let (code, opaque) = (request.code, request.opaque);
        let timed_out =
            |stage| RemotingError::Timeout { peer: self.addr.clone(), code, opaque, timeout, stage };
        let bytes = request.encode().map_err(|e| self.frame_error(e))?;

        let mut guard = self.lock();
        if remaining(deadline).is_none() {
            return Err(timed_out("waiting for another call on the same client"));
        }
        self.ensure_connected(&mut guard, deadline).map_err(|e| match e {
            RemotingError::Connect { source, .. } if is_timeout(&source) => timed_out("connecting"),
            other => other,
        })?;
        self.send(&mut guard, &bytes, deadline)
            .map_err(|e| self.io_or_timeout(e, || timed_out("sending the request")))?;

        loop {
            let Some(left) = remaining(deadline) else {
                return Err(timed_out("waiting for the response"));
            };
            let Some(conn) = guard.as_ref() else {
                // Set by ensure_connected and cleared only just before returning.
                return Err(RemotingError::ConnectionClosed { peer: self.addr.clone(), code, opaque });
            };
            conn.stream.set_read_timeout(Some(left)).map_err(|e| self.io_error(e))?;
            let mut reader = CountingReader { inner: &conn.stream, count: 0, deadline };
            match read_frame(&mut reader, self.config.max_frame) {
                Ok(Some(frame)) if frame.is_response() && frame.opaque == opaque => {
                    return Ok(frame);
                }
                Ok(Some(frame)) => {
                    tracing::debug!(peer = %self.addr, code = frame.code, opaque = frame.opaque,
                        awaited = opaque, "skipping a frame that is not the awaited response");
                }
                Ok(None) => {
                    self.disconnect(&mut guard);
                    return Err(RemotingError::ConnectionClosed { peer: self.addr.clone(), code, opaque });
                }
                Err(FrameError::Io(e)) if is_timeout(&e) => {
                    // Part of a frame was consumed: the stream is out of step, start afresh.
                    // Otherwise keep it; a late response will be skipped as a stray.
                    if reader.count > 0 {
                        self.disconnect(&mut guard);
                    }
                    return Err(timed_out("waiting for the response"));
                }
                Err(FrameError::Io(e)) => {
                    self.disconnect(&mut guard);
                    return Err(self.io_error(e));
                }
                Err(e) => {
                    self.disconnect(&mut guard);
                    return Err(self.frame_error(e));
                }
            }
        }
    }

    /// Sends `request` with the oneway flag and returns once it is written (within `timeout`,
    /// connecting included); the server sends no response.
    pub fn invoke_oneway(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), RemotingError> {
        let deadline = crate::deadline_after(timeout);
        request.flag = (request.flag & !FLAG_RESPONSE) | FLAG_ONEWAY;
        request.opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        let (code, opaque) = (request.code, request.opaque);
        let timed_out =
            |stage| RemotingError::Timeout { peer: self.addr.clone(), code, opaque, timeout, stage };
        let bytes = request.encode().map_err(|e| self.frame_error(e))?;
        let mut guard = self.lock();
        if remaining(deadline).is_none() {
            return Err(timed_out("waiting for another call on the same client"));
        }
        self.ensure_connected(&mut guard, deadline)?;
        self.send(&mut guard, &bytes, deadline)
            .map_err(|e| self.io_or_timeout(e, || timed_out("sending the request")))
    }

    /// Drops the connection, and `abort`'s handle on it (a second descriptor of the socket,
    /// which would otherwise keep it open).
    fn disconnect(&self, conn: &mut Option<ClientConn>) {
        *conn = None;
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn lock(&self) -> MutexGuard<'_, Option<ClientConn>> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ensure_connected(
        &self,
        conn: &mut Option<ClientConn>,
        deadline: Instant,
    ) -> Result<(), RemotingError> {
        if self.aborted.load(Ordering::Acquire) {
            self.disconnect(conn);
            return Err(
                self.io_error(io::Error::new(io::ErrorKind::ConnectionAborted, "the client was stopped"))
            );
        }
        if let Some(existing) = conn.as_ref() {
            if !peer_has_closed(&existing.stream) {
                return Ok(());
            }
            // The server closed it while we were not looking (idle timeout, restart):
            // reconnect now instead of failing this call on a dead socket.
            tracing::debug!(peer = %self.addr, "connection closed by the server; reconnecting");
            self.disconnect(conn);
        }
        let timeout =
            remaining(deadline).unwrap_or(Duration::from_millis(1)).min(self.config.connect_timeout);
        // Within this call's deadline, however long the resolver takes to answer.
        let aborted = || self.aborted.load(Ordering::Acquire);
        let addrs = crate::net::resolve(&self.addr, timeout, aborted)
            .map_err(|source| RemotingError::Resolve { addr: self.addr.clone(), source })?;
        let mut last_err = io::Error::new(io::ErrorKind::NotFound, "address resolved to nothing");
        if addrs.is_empty() {
            return Err(RemotingError::Resolve { addr: self.addr.clone(), source: last_err });
        }
        for addr in addrs {
            match crate::net::connect(addr, timeout, None, aborted) {
                Ok(stream) => {
                    tracing::debug!(peer = %self.addr, %addr, "connected");
                    *self.live.lock().unwrap_or_else(PoisonError::into_inner) = stream.try_clone().ok();
                    if self.aborted.load(Ordering::Acquire) {
                        // Aborted while connecting: `abort` found no stream to shut down.
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    }
                    *conn = Some(ClientConn { stream });
                    return Ok(());
                }
                Err(e) => last_err = e,
            }
        }
        Err(RemotingError::Connect { addr: self.addr.clone(), timeout, source: last_err })
    }

    /// Writes one whole frame; on failure the connection is dropped, since part of the frame
    /// may have been sent.
    fn send(&self, guard: &mut Option<ClientConn>, bytes: &[u8], deadline: Instant) -> io::Result<()> {
        let result = match (guard.as_ref(), remaining(deadline)) {
            (Some(conn), Some(_)) => write_all_by(&conn.stream, bytes, deadline),
            (None, _) => Err(io::Error::new(io::ErrorKind::NotConnected, "not connected")),
            (_, None) => Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed")),
        };
        if result.is_err() {
            self.disconnect(guard);
        }
        result
    }

    fn io_or_timeout(&self, e: io::Error, timed_out: impl FnOnce() -> RemotingError) -> RemotingError {
        if is_timeout(&e) { timed_out() } else { self.io_error(e) }
    }

    fn io_error(&self, source: io::Error) -> RemotingError {
        RemotingError::Io { peer: self.addr.clone(), source }
    }

    fn frame_error(&self, source: FrameError) -> RemotingError {
        RemotingError::Frame { peer: self.addr.clone(), source }
    }
}

impl std::fmt::Debug for RemotingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClient")
            .field("addr", &self.addr)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Whether the server has closed `stream`: a non-blocking peek sees end of stream or an
/// error. Pending bytes (a late response) mean it is alive; the read loop skips them.
fn peer_has_closed(stream: &TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let closed = match stream.peek(&mut [0u8; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).is_err() || closed
}

/// `write_all` within `deadline`: a write timeout alone restarts with every partial write, so
/// a peer reading a byte at a time held the call for as long as it kept reading.
fn write_all_by(stream: &TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let Some(left) = remaining(deadline) else {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        };
        stream.set_write_timeout(Some(left))?;
        match (&*stream).write(bytes) {
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write the whole request"));
            }
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Counts bytes read, to tell a timeout between frames (stream still in step) from one in the
/// middle of a frame. Each read waits only until the call's deadline: a read timeout alone
/// restarts with every read, so a peer sending a frame a byte at a time held the call for as
/// long as it kept sending.
struct CountingReader<'a> {
    inner: &'a TcpStream,
    count: usize,
    deadline: Instant,
}

impl Read for CountingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(left) = remaining(self.deadline) else {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        };
        self.inner.set_read_timeout(Some(left))?;
        let n = self.inner.read(buf)?;
        self.count += n;
        Ok(n)
    }
}
