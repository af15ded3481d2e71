//! The remoting layer's errors: [`FrameError`] for what is wrong with bytes, and
//! [`RemotingError`] for what went wrong talking to a peer (which wraps a `FrameError` together
//! with the peer's address).

use std::net::SocketAddr;
use std::time::Duration;

use super::codes::SerializeType;

/// Why bytes are not a valid RemotingCommand frame, or why a command cannot be encoded.
///
/// Carries no peer address because the codec works on any `Read`/`Write`; the server and the
/// client wrap it in [`RemotingError::Frame`] with the address.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The underlying reader or writer failed (including read timeouts).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The input ended inside a frame.
    #[error("truncated frame: {what} needs {expected} bytes, input ended after {got}")]
    Truncated { what: &'static str, expected: usize, got: usize },
    /// The length field declares a frame larger than the configured maximum. Checked before
    /// anything is allocated.
    #[error(
        "frame length {length} (+4 for the length field) exceeds the maximum frame size {max}{}",
        not_remoting_hint(*length)
    )]
    TooLarge { length: i32, max: usize },
    /// The length field is negative or too small to hold the header-length field.
    #[error("invalid frame length {length}: must be at least 4")]
    InvalidLength { length: i32 },
    /// The header-length field declares more bytes than the frame has.
    #[error("header length {header_len} exceeds frame length {frame_len} minus 4")]
    HeaderTooLong { header_len: usize, frame_len: usize },
    /// The high byte of the header-length field is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown serialize type {type_byte} in header length field {raw:#010x}")]
    UnknownSerializeType { type_byte: u8, raw: u32 },
    /// The header bytes do not parse.
    #[error("malformed {serialize_type} header ({header_len} bytes): {reason}")]
    MalformedHeader { serialize_type: SerializeType, header_len: usize, reason: String },
    /// A complete frame given as a slice has bytes left after the frame its length field
    /// declares.
    #[error("{extra} bytes after the end of a {frame_len}-byte frame")]
    TrailingBytes { frame_len: usize, extra: usize },
    /// A value does not fit its field on the wire (a code beyond i16 in a ROCKETMQ header, a
    /// header beyond 24 bits, a frame beyond i32).
    #[error("cannot encode {field} = {value}: the wire allows at most {max}")]
    Unencodable { field: &'static str, value: u64, max: u64 },
}

/// Errors of the remoting layer: a frame, a connection, a call or a request's fields.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemotingError {
    /// Reading from or writing to a peer failed.
    #[error("remoting I/O error with {peer}: {source}")]
    Io {
        peer: String,
        #[source]
        source: std::io::Error,
    },
    /// A peer sent bytes that are not a valid frame, or a command could not be encoded for it.
    #[error("bad frame with {peer}: {source}")]
    Frame {
        peer: String,
        #[source]
        source: FrameError,
    },
    /// `host:port` did not resolve to any address.
    #[error("cannot resolve remoting address {addr}: {source}")]
    Resolve {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// Connecting failed or did not finish within the timeout ("within" only said of a
    /// timeout: a refusal is immediate).
    #[error("cannot connect to {addr}{}: {source}", within(timeout, source))]
    Connect {
        addr: String,
        timeout: Duration,
        #[source]
        source: std::io::Error,
    },
    /// A call did not complete in time.
    #[error(
        "timed out after {:.1} s {stage} for request code {code} (opaque {opaque}) to {peer}",
        timeout.as_secs_f64()
    )]
    Timeout {
        peer: String,
        code: i32,
        opaque: i32,
        timeout: Duration,
        /// What the call was doing when time ran out.
        stage: &'static str,
    },
    /// The peer closed the connection before answering.
    #[error("{peer} closed the connection before answering request code {code} (opaque {opaque})")]
    ConnectionClosed { peer: String, code: i32, opaque: i32 },
    /// The broker's own call to a client was refused because as many already await that
    /// client's answers as a connection may have.
    #[error("{limit} requests already await {peer}'s answers")]
    TooManyCalls { peer: String, limit: usize },
    /// A deferred response could not be sent because its connection is gone.
    #[error("connection to {peer} is closed; response to request code {code} (opaque {opaque}) dropped")]
    ResponderClosed { peer: SocketAddr, code: i32, opaque: i32 },
    /// A server could not bind one of its addresses.
    #[error("cannot bind remoting server to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A thread could not be spawned.
    #[error("cannot spawn thread {name}: {source}")]
    Spawn {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// A request lacks an ext field its handler requires.
    #[error("request code {code} (opaque {opaque}) lacks ext field {field:?}")]
    MissingExtField { code: i32, opaque: i32, field: String },
    /// An ext field's value does not parse as the type its handler requires.
    #[error("request code {code} (opaque {opaque}): ext field {field:?} = {value:?} is not {expected}")]
    InvalidExtField { code: i32, opaque: i32, field: String, value: String, expected: &'static str },
}

/// A length field that spells the start of another protocol's text: the peer is no RocketMQ
/// remoting endpoint.
fn not_remoting_hint(length: i32) -> String {
    let b = length.to_be_bytes();
    match &b {
        b"HTTP" => "; the peer answered in HTTP: is this a RocketMQ remoting port?".into(),
        _ if b.iter().all(|c| c.is_ascii_graphic() || *c == b' ') => format!(
            "; the length field reads as text ({:?}): is this a RocketMQ remoting port?",
            String::from_utf8_lossy(&b)
        ),
        _ => String::new(),
    }
}

/// " within N s" for a connect that timed out, nothing for one refused at once.
fn within(timeout: &Duration, source: &std::io::Error) -> String {
    if matches!(source.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) {
        format!(" within {:.1} s", timeout.as_secs_f64())
    } else {
        String::new()
    }
}
