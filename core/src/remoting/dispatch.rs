//! [`Dispatch`]: routes requests by code to the handler registered for that code.
//!
//! A [`RemotingServer`](super::RemotingServer) takes one handler, but a broker answers many
//! families of requests (admin and config sync, send, pull, offsets), each implemented by its
//! own processor. `Dispatch` composes them the way RocketMQ's `registerProcessor` table does:
//! a map from request code to processor, and a default for every other code.

use std::collections::HashMap;
use std::sync::Arc;

use super::command::RemotingCommand;
use super::server::{Handled, RequestContext, RequestHandler};

/// A [`RequestHandler`] that hands each request to the handler registered for its code, or to
/// the fallback, or answers REQUEST_CODE_NOT_SUPPORTED.
///
/// Built before the server starts and immutable afterwards, so routing needs no lock.
///
/// ```
/// use std::sync::Arc;
/// use rmqha_core::remoting::{Dispatch, Handled, RemotingCommand, RequestContext, response_code};
///
/// let echo = Arc::new(|req: RemotingCommand, _: &RequestContext| {
///     Handled::Respond(RemotingCommand::response_to(&req, response_code::SUCCESS, None))
/// });
/// let mut dispatch = Dispatch::new();
/// dispatch.register_all(&[10, 310], echo);
/// assert!(dispatch.handles(310));
/// assert!(!dispatch.handles(11));
/// ```
#[derive(Default)]
pub struct Dispatch {
    routes: HashMap<i32, Arc<dyn RequestHandler>>,
    fallback: Option<Arc<dyn RequestHandler>>,
    /// Told when a connection ends (`RequestHandler::connection_closed`).
    close_listeners: Vec<Arc<dyn RequestHandler>>,
}

impl Dispatch {
    /// A router with no routes: every request is answered REQUEST_CODE_NOT_SUPPORTED.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes `code` to `handler`; returns the handler it replaces, so a caller that expects
    /// no overlap can check.
    pub fn register(
        &mut self,
        code: i32,
        handler: Arc<dyn RequestHandler>,
    ) -> Option<Arc<dyn RequestHandler>> {
        self.routes.insert(code, handler)
    }

    /// Routes every code in `codes` to `handler`, replacing earlier routes for them.
    pub fn register_all(&mut self, codes: &[i32], handler: Arc<dyn RequestHandler>) {
        for &code in codes {
            self.routes.insert(code, Arc::clone(&handler));
        }
    }

    /// The handler for codes without a route (instead of REQUEST_CODE_NOT_SUPPORTED).
    pub fn set_fallback(&mut self, handler: Arc<dyn RequestHandler>) {
        self.fallback = Some(handler);
    }

    /// Tells `handler` when a connection ends.
    pub fn on_close(&mut self, handler: Arc<dyn RequestHandler>) {
        self.close_listeners.push(handler);
    }

    /// Whether `code` has a route of its own (the fallback does not count).
    pub fn handles(&self, code: i32) -> bool {
        self.routes.contains_key(&code)
    }

    /// The routed codes, ascending.
    pub fn codes(&self) -> Vec<i32> {
        let mut codes: Vec<i32> = self.routes.keys().copied().collect();
        codes.sort_unstable();
        codes
    }
}

impl RequestHandler for Dispatch {
    fn handle(&self, request: RemotingCommand, ctx: &RequestContext) -> Handled {
        match self.routes.get(&request.code).or(self.fallback.as_ref()) {
            Some(handler) => handler.handle(request, ctx),
            None => Handled::Respond(RemotingCommand::not_supported(&request)),
        }
    }

    fn connection_closed(&self, peer: std::net::SocketAddr) {
        for h in &self.close_listeners {
            h.connection_closed(peer);
        }
    }
}

impl std::fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("codes", &self.codes())
            .field("fallback", &self.fallback.is_some())
            .field("close_listeners", &self.close_listeners.len())
            .finish()
    }
}
