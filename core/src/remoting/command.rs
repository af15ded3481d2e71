//! [`RemotingCommand`]: one request or response, independent of how its header is serialized.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::codes::{LanguageCode, SerializeType, response_code};
use super::error::RemotingError;

/// Flag bit 0 (`RPC_TYPE`): set on responses.
pub const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1 (`RPC_ONEWAY`): the sender expects no response.
pub const FLAG_ONEWAY: i32 = 2;

/// The version rmqha puts on every command it sends: `MQVersion.Version.V4_9_4.ordinal()`,
/// what a RocketMQ 4.9.4 broker sends (its `BrokerStartup` sets `rocketmq.remoting.version`
/// to `MQVersion.CURRENT_VERSION`, and every command it builds carries it). Clients read it
/// from a broker's answers (the heartbeat's becomes the broker's version in the Java
/// client's `brokerVersionTable`, which gates features by version); 0 reads as 3.0.0-SNAPSHOT.
pub const ROCKETMQ_VERSION: i32 = 401;

/// One RocketMQ remoting command: a request or a response.
///
/// Fields are public because a command is plain data that handlers read and build. The struct
/// is `#[non_exhaustive]` so it can grow; build one with [`RemotingCommand::request`],
/// [`RemotingCommand::response`] or [`RemotingCommand::response_to`].
///
/// Ext fields are kept in a `BTreeMap` so that encoding is deterministic (RocketMQ uses a
/// `HashMap`, whose order a reader must not rely on anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemotingCommand {
    /// A request code (see [`request_code`](super::request_code)) or, in a response, a response
    /// code (see [`response_code`](super::response_code)).
    pub code: i32,
    /// The language of the peer that built the command.
    pub language: LanguageCode,
    /// The sender's version (`MQVersion` ordinal in Java peers). i16 on a ROCKETMQ header.
    pub version: i32,
    /// Request id; a response echoes its request's.
    pub opaque: i32,
    /// Bit 0 response, bit 1 oneway; other bits are carried untouched.
    pub flag: i32,
    /// Human-readable text, mostly on error responses. A ROCKETMQ header cannot tell an empty
    /// remark from none, so `Some("")` comes back as `None` from one.
    pub remark: Option<String>,
    /// The custom header, flattened to strings (Java's `extFields`).
    pub ext_fields: BTreeMap<String, String>,
    /// How the header is serialized when this command is encoded; on a decoded command, how it
    /// was serialized.
    pub serialize_type: SerializeType,
    /// The payload after the header; empty when there is none (the wire cannot tell the two
    /// apart).
    pub body: Vec<u8>,
}

impl RemotingCommand {
    /// A request with `code`, language OTHER (see [`LanguageCode::OTHER`]), version
    /// [`ROCKETMQ_VERSION`], opaque 0 (the client assigns one), JSON header, no ext fields and
    /// no body.
    pub fn request(code: i32) -> Self {
        RemotingCommand {
            code,
            language: LanguageCode::OTHER,
            version: ROCKETMQ_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: BTreeMap::new(),
            serialize_type: SerializeType::Json,
            body: Vec::new(),
        }
    }

    /// A response with `code` and `remark`, not yet tied to a request (opaque 0). A
    /// [`Responder`](super::Responder) fills in the request's opaque when it sends it.
    pub fn response(code: i32, remark: Option<&str>) -> Self {
        let mut cmd = Self::request(code);
        cmd.flag = FLAG_RESPONSE;
        cmd.remark = remark.map(str::to_owned);
        cmd
    }

    /// The response to `request`: echoes its opaque and serialize type (RocketMQ 4.9.x
    /// answers in the request's header format), sets the response flag.
    pub fn response_to(request: &RemotingCommand, code: i32, remark: Option<&str>) -> Self {
        let mut cmd = Self::response(code, remark);
        cmd.opaque = request.opaque;
        cmd.serialize_type = request.serialize_type;
        cmd
    }

    /// REQUEST_CODE_NOT_SUPPORTED for `request`, with the remark RocketMQ's
    /// `NettyRemotingAbstract` writes (including its leading space).
    pub fn not_supported(request: &RemotingCommand) -> Self {
        let remark = format!(" request type {} not supported", request.code);
        Self::response_to(request, response_code::REQUEST_CODE_NOT_SUPPORTED, Some(&remark))
    }

    /// SYSTEM_ERROR for `request` with `remark`.
    pub fn system_error(request: &RemotingCommand, remark: &str) -> Self {
        Self::response_to(request, response_code::SYSTEM_ERROR, Some(remark))
    }

    /// Whether the response flag is set.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether the oneway flag is set: the sender wants no response.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Sets the response flag.
    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    /// Sets the oneway flag.
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// The command with `body`.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The command with `remark`.
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// The command with ext field `key` set to `value` (any `Display`, as Java's
    /// `value.toString()`).
    pub fn with_ext(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.set_ext(key, value);
        self
    }

    /// The command with its header serialized as `serialize_type`.
    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// The command with `version`.
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    /// Sets ext field `key` to `value`, replacing any previous value.
    pub fn set_ext(&mut self, key: impl Into<String>, value: impl ToString) {
        self.ext_fields.insert(key.into(), value.to_string());
    }

    /// Removes ext field `key` and returns its value.
    pub fn remove_ext(&mut self, key: &str) -> Option<String> {
        self.ext_fields.remove(key)
    }

    /// The raw value of ext field `key`, if present.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key).map(String::as_str)
    }

    /// Ext field `key`, which the caller requires.
    pub fn ext_str(&self, key: &str) -> Result<&str, RemotingError> {
        self.ext(key).ok_or_else(|| self.missing(key))
    }

    /// Ext field `key` as an i32, which the caller requires.
    pub fn ext_i32(&self, key: &str) -> Result<i32, RemotingError> {
        self.ext_opt_i32(key)?.ok_or_else(|| self.missing(key))
    }

    /// Ext field `key` as an i64, which the caller requires.
    pub fn ext_i64(&self, key: &str) -> Result<i64, RemotingError> {
        self.ext_opt_i64(key)?.ok_or_else(|| self.missing(key))
    }

    /// Ext field `key` as a bool ("true"/"false", any case), which the caller requires.
    ///
    /// Stricter than Java's `Boolean.parseBoolean`, which reads any other text as false: a
    /// typo should be an error, not a silent "false".
    pub fn ext_bool(&self, key: &str) -> Result<bool, RemotingError> {
        self.ext_opt_bool(key)?.ok_or_else(|| self.missing(key))
    }

    /// Ext field `key` as an i32 if present; an error only if present and not an i32.
    pub fn ext_opt_i32(&self, key: &str) -> Result<Option<i32>, RemotingError> {
        self.ext_parse(key, "a 32-bit integer")
    }

    /// Ext field `key` as an i64 if present; an error only if present and not an i64.
    pub fn ext_opt_i64(&self, key: &str) -> Result<Option<i64>, RemotingError> {
        self.ext_parse(key, "a 64-bit integer")
    }

    /// Ext field `key` as a bool if present; an error only if present and not a bool.
    pub fn ext_opt_bool(&self, key: &str) -> Result<Option<bool>, RemotingError> {
        match self.ext(key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(self.invalid(key, v, "a boolean")),
        }
    }

    fn ext_parse<T: FromStr>(&self, key: &str, expected: &'static str) -> Result<Option<T>, RemotingError> {
        match self.ext(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| self.invalid(key, v, expected)),
        }
    }

    fn missing(&self, key: &str) -> RemotingError {
        RemotingError::MissingExtField { code: self.code, opaque: self.opaque, field: key.to_owned() }
    }

    fn invalid(&self, key: &str, value: &str, expected: &'static str) -> RemotingError {
        RemotingError::InvalidExtField {
            code: self.code,
            opaque: self.opaque,
            field: key.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::request_code;

    #[test]
    fn response_to_echoes_opaque_and_serialize_type() {
        let mut req = RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)
            .with_serialize_type(SerializeType::RocketMq);
        req.opaque = 42;
        let resp = RemotingCommand::response_to(&req, response_code::SUCCESS, None);
        assert_eq!(resp.opaque, 42);
        assert!(resp.is_response());
        assert!(!resp.is_oneway());
        assert_eq!(resp.serialize_type, SerializeType::RocketMq);
        assert!(!req.is_response());
    }

    #[test]
    fn not_supported_names_the_code() {
        let req = RemotingCommand::request(9999);
        let resp = RemotingCommand::not_supported(&req);
        assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
        assert_eq!(resp.remark.as_deref(), Some(" request type 9999 not supported"));
    }

    #[test]
    fn typed_ext_getters() {
        let req = RemotingCommand::request(request_code::PULL_MESSAGE)
            .with_ext("queueOffset", 1234567890123_i64)
            .with_ext("queueId", 3)
            .with_ext("suspend", "TRUE")
            .with_ext("bad", "12x");
        assert_eq!(req.ext_i64("queueOffset").unwrap(), 1234567890123);
        assert_eq!(req.ext_i32("queueId").unwrap(), 3);
        assert!(req.ext_bool("suspend").unwrap());
        assert_eq!(req.ext_opt_i64("absent").unwrap(), None);

        let err = req.ext_i64("absent").unwrap_err().to_string();
        assert!(err.contains("\"absent\"") && err.contains("code 11"), "{err}");
        let err = req.ext_i32("queueOffset").unwrap_err().to_string();
        assert!(err.contains("32-bit"), "{err}");
        let err = req.ext_bool("bad").unwrap_err().to_string();
        assert!(err.contains("\"12x\"") && err.contains("boolean"), "{err}");
    }
}
