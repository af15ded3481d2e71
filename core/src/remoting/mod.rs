//! RocketMQ's remoting protocol (spec section 9): the request/response RPC that producers,
//! consumers, tools and a slave's config sync speak to a broker.
//!
//! **Wire.** Every message is a [`RemotingCommand`] in a frame
//! `[i32 length][i32 headerLenAndType][header][body]` (big-endian; `length` excludes itself).
//! The high byte of `headerLenAndType` says how the header is serialized
//! ([`SerializeType`]): a JSON object (RocketMQ's default) or RocketMQ's compact binary
//! layout; the low 24 bits are the header length. The header carries `code` (a request code,
//! or a response code in a response), `language`, `version`, `opaque` (request id, echoed by
//! the response), `flag` (bit 0 response, bit 1 oneway), an optional `remark` and `extFields`,
//! the request's custom header flattened to strings. The body is opaque bytes (JSON tables for
//! config sync, messages for send/pull).
//!
//! **Files.** `codes` holds the numbers ([`request_code`], [`response_code`],
//! [`LanguageCode`]); `command` the [`RemotingCommand`] type and its ext-field accessors;
//! `json_header` and `rocketmq_header` the two header formats; `frame` framing on any
//! `Read`/`Write` ([`read_frame`], [`write_command`]); `server` and `connection` the
//! [`RemotingServer`]; `dispatch` the [`Dispatch`] router that composes per-code handlers;
//! `client` the [`RemotingClient`]; `error` the errors.
//!
//! **Decoding is total.** Any bytes give a command or an error, never a panic; every declared
//! length is checked against the bytes available or the maximum frame size before anything is
//! allocated. Decoders are lenient where Java peers are (JSON key order, unknown keys, numbers
//! in ext fields, unknown language codes) and strict where only garbage differs (negative
//! lengths, unknown serialize types).
//!
//! **Threads, not async.** The server runs one named acceptor thread per listening address
//! (a broker's listen port and its VIP port, listen port − 2) and one named thread per
//! connection that reads frames and calls the [`RequestHandler`]. A handler answers at once
//! ([`Handled::Respond`]) or later from any thread through a [`Responder`]
//! ([`Handled::Deferred`]), which is how a long poll or a put waiting for a slave's ack avoids
//! holding the connection. The broker's own requests to a client go out on the client's
//! connection through its [`Responder`]: oneway, or awaiting the answer the connection's read
//! loop hands to a [`PendingCall`] (at most [`MAX_CALLS_PER_CONNECTION`] at once; closing the
//! connection fails them at once). A handler panic becomes a SYSTEM_ERROR response; a bad frame or an
//! idle timeout closes that connection only. [`RemotingServer::shutdown`] (or drop) stops the
//! acceptors, shuts every socket down and joins every thread. The [`RemotingClient`] makes
//! synchronous calls over one connection shared by its callers, matching responses by opaque
//! and reconnecting after a failure.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rmqha_core::remoting::{
//!     ClientConfig, Handled, RemotingClient, RemotingCommand, RemotingServer, ServerConfig,
//!     request_code, response_code,
//! };
//!
//! let server = RemotingServer::bind(
//!     &["127.0.0.1:0".parse().unwrap()],
//!     Arc::new(|req: RemotingCommand, _ctx: &_| match req.code {
//!         request_code::GET_ALL_DELAY_OFFSET => Handled::Respond(
//!             RemotingCommand::response_to(&req, response_code::SUCCESS, None)
//!                 .with_body(br#"{"offsetTable":{}}"#.to_vec()),
//!         ),
//!         _ => Handled::Respond(RemotingCommand::not_supported(&req)),
//!     }),
//!     ServerConfig::default(),
//! )?;
//! let client = RemotingClient::new(server.local_addrs()[0].to_string(), ClientConfig::default());
//! let resp = client.invoke_sync(
//!     RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET),
//!     Duration::from_secs(3),
//! )?;
//! assert_eq!(resp.code, response_code::SUCCESS);
//! # Ok::<(), rmqha_core::remoting::RemotingError>(())
//! ```

mod client;
mod codes;
mod command;
mod connection;
mod dispatch;
mod error;
mod frame;
mod json_header;
mod rocketmq_header;
mod server;

pub use client::{ClientConfig, RemotingClient};
pub use codes::{LanguageCode, SerializeType, request_code, response_code};
pub use command::{FLAG_ONEWAY, FLAG_RESPONSE, ROCKETMQ_VERSION, RemotingCommand};
pub use connection::{MAX_CALLS_PER_CONNECTION, PendingCall, Responder};
pub use dispatch::Dispatch;
pub use error::{FrameError, RemotingError};
pub use frame::{DEFAULT_MAX_FRAME, read_frame, write_command};
pub use server::{Handled, RemotingServer, RequestContext, RequestHandler, ServerConfig};
