//! [`RemotingServer`]: listeners, their acceptor threads, and the table of live connections
//! that shutdown closes and joins.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::command::RemotingCommand;
use super::connection::{Connection, Responder};
use super::error::RemotingError;
use super::frame::DEFAULT_MAX_FRAME;
use crate::join_unless_current;
use crate::net::wake_acceptor;

/// Answers requests. One handler serves every listener and connection of a server.
///
/// `handle` runs on the connection's thread, so requests of one connection are handled in
/// order and a slow handler delays only its own connection. Work that waits (long polling, a
/// put waiting for a slave's ack) should return [`Handled::Deferred`] and answer later through
/// [`RequestContext::responder`]. Unknown codes are the handler's to answer, usually with
/// [`RemotingCommand::not_supported`].
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request (never a response: those go to the call awaiting them, see
    /// [`Responder::invoke`], or are dropped).
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled;

    /// Called once when the connection from `peer` has ended, after its last request
    /// (RocketMQ's channel-close event). Nothing by default.
    fn connection_closed(&self, _peer: std::net::SocketAddr) {}
}

impl<F> RequestHandler for F
where
    F: Fn(RemotingCommand, &RequestContext) -> Handled + Send + Sync + 'static,
{
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        self(request, ctx)
    }
}

/// What a handler did with a request.
#[derive(Debug)]
pub enum Handled {
    /// Send this response now. Its opaque and response flag are set for you; build it with
    /// [`RemotingCommand::response_to`] to also answer in the request's header format.
    Respond(RemotingCommand),
    /// The response will be sent later through a [`Responder`] taken from the context.
    Deferred,
    /// No response (oneway requests; the server ignores `Respond` for those anyway).
    NoResponse,
}

/// Where a request came from, and how to answer it later.
#[derive(Debug)]
pub struct RequestContext {
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) responder: Responder,
    /// Who the ACL gate let through (`None` without `aclEnable`).
    pub(crate) acl: Option<Arc<crate::acl::AclIdentity>>,
}

impl RequestContext {
    /// Who sent the request, as the ACL gate verified it; `None` when no gate ran (ACL is
    /// off).
    pub fn acl(&self) -> Option<&crate::acl::AclIdentity> {
        self.acl.as_deref()
    }

    /// With `aclEnable`, whether who the gate verified passes `check` (a permission the gate
    /// could not judge, on a resource found only by the handler); fail closed: with ACL on, a
    /// request the gate did not see is nobody's. `Ok` without ACL.
    pub(crate) fn acl_permits(
        &self,
        acl_enable: bool,
        check: impl FnOnce(&crate::acl::AclIdentity) -> Result<(), String>,
    ) -> Result<(), String> {
        if !acl_enable {
            return Ok(());
        }
        match self.acl() {
            Some(identity) => check(identity),
            None => Err("the request did not pass the ACL gate".to_string()),
        }
    }

    /// The same request as seen past the ACL gate, which verified `identity`.
    pub(crate) fn with_acl(&self, identity: Arc<crate::acl::AclIdentity>) -> RequestContext {
        RequestContext {
            peer: self.peer,
            local: self.local,
            responder: self.responder.clone(),
            acl: Some(identity),
        }
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The server address the request arrived on: tells the main port from the VIP port.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// A responder for this request, to answer after returning [`Handled::Deferred`].
    pub fn responder(&self) -> Responder {
        self.responder.clone()
    }
}

/// Server settings. Defaults follow RocketMQ's `NettyServerConfig`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted frame, length field included (`com.rocketmq.remoting.frameMaxLength`,
    /// 16 MiB). A larger declared length closes the connection before anything is allocated.
    pub max_frame: usize,
    /// At most this many connections (a thread each). At the limit, a new connection takes
    /// the place of the one idle the longest, if that one has been idle `evict_idle_after` or
    /// more (so idle connections cannot lock clients out until the idle timeout); otherwise
    /// it is accepted and closed at once.
    pub max_connections: usize,
    /// How long a connection must have been idle before a new one may take its place at the
    /// connection limit.
    pub evict_idle_after: Duration,
    /// A connection with no read and no write for this long is closed
    /// (`serverChannelMaxIdleTimeSeconds`, 120 s). Zero disables the check.
    pub idle_timeout: Duration,
    /// A response write that cannot progress for this long fails and closes the connection,
    /// so a peer that stops reading cannot block a handler forever. Zero means no timeout.
    pub write_timeout: Duration,
    /// Prefix of thread names: `<name>-accept-<port>`, `<name>-conn-<id>`.
    pub thread_name: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_frame: DEFAULT_MAX_FRAME,
            max_connections: 1024,
            evict_idle_after: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(10),
            thread_name: "rmqha-remoting".to_owned(),
        }
    }
}

struct Shared {
    config: ServerConfig,
    /// Zero of the connections' activity clocks.
    epoch: Instant,
    handler: Arc<dyn RequestHandler>,
    stopping: Arc<AtomicBool>,
    conns: Mutex<Conns>,
}

#[derive(Default)]
struct Conns {
    next_id: u64,
    /// Each open connection: a clone of its socket, so shutdown (or an eviction) can wake its
    /// blocked reader, and when it last received a frame.
    live: HashMap<u64, Live>,
    /// Handles of connection threads not yet joined; finished ones are reaped on accept.
    threads: Vec<JoinHandle<()>>,
}

struct Live {
    closer: TcpStream,
    peer: SocketAddr,
    /// Milliseconds since `Shared::epoch` at the last frame read (or the accept).
    active_ms: Arc<AtomicU64>,
    /// Requests of the peer not answered yet: such a connection is never evicted.
    owed: Arc<std::sync::atomic::AtomicUsize>,
}

impl Shared {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// At the connection limit: closes the connection idle the longest, if it has been idle
    /// long enough, and says whether there is room now.
    fn evict_idlest(&self, conns: &mut Conns, local: SocketAddr) -> bool {
        let now = self.now_ms();
        let Some((&id, idle_ms)) = conns
            .live
            .iter()
            // A connection owed an answer is busy, however long ago it last sent anything (a
            // put waiting for its slave, a long-polled pull): closing it would lose the answer.
            .filter(|(_, l)| l.owed.load(Ordering::Acquire) == 0)
            .map(|(id, l)| (id, now.saturating_sub(l.active_ms.load(Ordering::Relaxed))))
            .max_by_key(|&(_, idle)| idle)
        else {
            return false;
        };
        if idle_ms < self.config.evict_idle_after.as_millis() as u64 {
            return false;
        }
        if let Some(l) = conns.live.remove(&id) {
            tracing::warn!(peer = %l.peer, %local, idle_ms, limit = self.config.max_connections,
                "connection limit reached; closing the connection idle the longest for a new one");
            let _ = l.closer.shutdown(Shutdown::Both);
        }
        true
    }

    fn conns(&self) -> MutexGuard<'_, Conns> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn accept_loop(self: Arc<Self>, listener: Arc<TcpListener>, local: SocketAddr) {
        loop {
            let accepted = listener.accept();
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            match accepted {
                Ok((stream, peer)) => self.admit(stream, peer, local),
                Err(e) if is_resource_exhaustion(&e) => {
                    tracing::warn!(%local, error = %e, "accept failed; backing off");
                    // Out of descriptors or memory: retrying at once would spin on the same
                    // error. A short pause is a backoff, not a wait for a condition.
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => tracing::debug!(%local, error = %e, "accept failed"),
            }
        }
        tracing::debug!(%local, "acceptor stopped");
    }

    fn admit(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr, local: SocketAddr) {
        // RocketMQ sets TCP_NODELAY: responses are small and latency matters.
        let _ = stream.set_nodelay(true);
        let mut conns = self.conns();
        reap_finished(&mut conns.threads);
        if conns.live.len() >= self.config.max_connections && !self.evict_idlest(&mut conns, local) {
            drop(conns);
            tracing::warn!(%peer, %local, limit = self.config.max_connections,
                "connection limit reached; closing new connection");
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let closer = match stream.try_clone() {
            Ok(closer) => closer,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot clone socket; closing new connection");
                return;
            }
        };
        let id = conns.next_id;
        conns.next_id += 1;
        let active_ms = Arc::new(AtomicU64::new(self.now_ms()));
        let owed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let connection = Connection {
            stream,
            peer,
            local,
            handler: Arc::clone(&self.handler),
            max_frame: self.config.max_frame,
            idle_timeout: non_zero(self.config.idle_timeout),
            write_timeout: non_zero(self.config.write_timeout),
            stopping: Arc::clone(&self.stopping),
            activity: (self.epoch, Arc::clone(&active_ms)),
            owed: Arc::clone(&owed),
        };
        let shared = Arc::clone(self);
        let name = format!("{}-conn-{id}", self.config.thread_name);
        let spawned = thread::Builder::new().name(name.clone()).spawn(move || {
            connection.run();
            shared.conns().live.remove(&id);
        });
        match spawned {
            // Registered under the same lock the thread takes to unregister, so a thread that
            // ends at once still finds its entry.
            Ok(handle) => {
                conns.live.insert(id, Live { closer, peer, active_ms, owed });
                conns.threads.push(handle);
                tracing::debug!(%peer, %local, id, "connection accepted");
            }
            Err(e) => {
                tracing::warn!(%peer, thread = %name, error = %e, "cannot spawn connection thread");
                let _ = closer.shutdown(Shutdown::Both);
            }
        }
    }
}

fn non_zero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

fn reap_finished(threads: &mut Vec<JoinHandle<()>>) {
    let mut i = 0;
    while i < threads.len() {
        if threads[i].is_finished() {
            let _ = threads.swap_remove(i).join();
        } else {
            i += 1;
        }
    }
}

/// An acceptor thread and its listener, shared so that shutdown can wake the thread through
/// the socket (see [`wake_acceptor`]); the socket stays open while either holds it, so its
/// descriptor number cannot be reused by another file meanwhile.
struct Acceptor {
    thread: JoinHandle<()>,
    listener: Arc<TcpListener>,
    local: SocketAddr,
}

/// A RocketMQ remoting server: one acceptor thread per listening address and one thread per
/// connection, all named and all joined by [`shutdown`](Self::shutdown) (or drop).
///
/// A broker binds its listen port and the VIP port (listen port − 2) on one server, so both
/// are served by the same handler.
pub struct RemotingServer {
    shared: Arc<Shared>,
    local_addrs: Vec<SocketAddr>,
    acceptors: Mutex<Vec<Acceptor>>,
    /// The process that made it; a fork of that process leaves it alone (`crate::fork`).
    fork: crate::fork::ForkGuard,
}

impl RemotingServer {
    /// Binds every address in `addrs` (port 0 picks a free port) and starts serving with
    /// `handler`. Fails, binding nothing, if any address cannot be bound.
    pub fn bind(
        addrs: &[SocketAddr],
        handler: Arc<dyn RequestHandler>,
        config: ServerConfig,
    ) -> Result<Self, RemotingError> {
        let mut listeners = Vec::with_capacity(addrs.len());
        for &addr in addrs {
            let bind_err = |source| RemotingError::Bind { addr, source };
            let listener = TcpListener::bind(addr).map_err(bind_err)?;
            let local = listener.local_addr().map_err(bind_err)?;
            listeners.push((Arc::new(listener), local));
        }
        let shared = Arc::new(Shared {
            config,
            handler,
            stopping: Arc::new(AtomicBool::new(false)),
            epoch: Instant::now(),
            conns: Mutex::new(Conns::default()),
        });
        let server = RemotingServer {
            local_addrs: listeners.iter().map(|(_, local)| *local).collect(),
            shared,
            acceptors: Mutex::new(Vec::new()),
            fork: crate::fork::ForkGuard::new(),
        };
        for (listener, local) in listeners {
            let name = format!("{}-accept-{}", server.shared.config.thread_name, local.port());
            let (shared, accepting) = (Arc::clone(&server.shared), Arc::clone(&listener));
            let thread = thread::Builder::new()
                .name(name.clone())
                .spawn(move || shared.accept_loop(accepting, local))
                // Dropping `server` here shuts down the acceptors already started.
                .map_err(|source| RemotingError::Spawn { name, source })?;
            server.acceptors().push(Acceptor { thread, listener, local });
            tracing::info!(%local, "remoting server listening");
        }
        Ok(server)
    }

    /// The bound addresses, in the order given to [`bind`](Self::bind), with real ports.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// How many connections are open now.
    pub fn connection_count(&self) -> usize {
        self.shared.conns().live.len()
    }

    /// Stops accepting, closes every connection and joins every thread. Idempotent. A handler
    /// still running delays this until it returns; deferred responses sent afterwards fail
    /// with [`RemotingError::ResponderClosed`].
    pub fn shutdown(&self) {
        if self.fork.forked() {
            return; // its sockets and threads are the parent's
        }
        self.shared.stopping.store(true, Ordering::Release);
        let acceptors = std::mem::take(&mut *self.acceptors());
        for a in &acceptors {
            wake_acceptor(&a.listener, a.local);
        }
        acceptors.into_iter().for_each(|a| join_unless_current(a.thread));
        // No acceptor runs any more, so no connection can be added behind our back.
        let (live, threads) = {
            let mut conns = self.shared.conns();
            (std::mem::take(&mut conns.live), std::mem::take(&mut conns.threads))
        };
        for stream in live.values().map(|l| &l.closer) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        threads.into_iter().for_each(join_unless_current);
    }

    fn acceptors(&self) -> MutexGuard<'_, Vec<Acceptor>> {
        self.acceptors.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for RemotingServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for RemotingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingServer")
            .field("local_addrs", &self.local_addrs)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}
