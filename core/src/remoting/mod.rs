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
//! `Read`/`Write` ([`read_frame`], [`write_command`]); `error` the errors.
//!
//! **Decoding is total.** Any bytes give a command or an error, never a panic; every declared
//! length is checked against the bytes available or the maximum frame size before anything is
//! allocated. Decoders are lenient where Java peers are (JSON key order, unknown keys, numbers
//! in ext fields, unknown language codes) and strict where only garbage differs (negative
//! lengths, unknown serialize types).

mod codes;
mod command;
mod error;
mod frame;
mod json_header;
mod rocketmq_header;

pub use codes::{LanguageCode, SerializeType, request_code, response_code};
pub use command::{FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand};
pub use error::{FrameError, RemotingError};
pub use frame::{DEFAULT_MAX_FRAME, read_frame, write_command};
