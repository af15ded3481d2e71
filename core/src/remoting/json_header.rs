//! The JSON header (serialize type 0): what Java's fastjson writes for a `RemotingCommand`.
//!
//! Encoding follows fastjson's defaults so our bytes look like a Java peer's: keys in
//! alphabetical order, null fields omitted, compact. Decoding is lenient the way fastjson is:
//! any key order, unknown keys ignored, optional keys missing, numbers given as strings, and
//! ext field values that are numbers or booleans (some non-Java clients send them) turned
//! into their text.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::codes::{LanguageCode, SerializeType};
use super::command::RemotingCommand;
use super::error::FrameError;

#[derive(Serialize)]
struct JsonHeaderOut<'a> {
    code: i32,
    #[serde(rename = "extFields", skip_serializing_if = "is_empty")]
    ext_fields: &'a BTreeMap<String, String>,
    flag: i32,
    language: &'a str,
    opaque: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    remark: Option<&'a str>,
    #[serde(rename = "serializeTypeCurrentRPC")]
    serialize_type: &'static str,
    version: i32,
}

fn is_empty(map: &&BTreeMap<String, String>) -> bool {
    map.is_empty()
}

/// The JSON header of `cmd`.
pub(crate) fn encode(cmd: &RemotingCommand) -> Vec<u8> {
    let header = JsonHeaderOut {
        code: cmd.code,
        ext_fields: &cmd.ext_fields,
        flag: cmd.flag,
        // JSON can only carry a name; a code we cannot name is sent as OTHER, as RocketMQ's
        // own enum cannot hold anything else either.
        language: cmd.language.name().unwrap_or("OTHER"),
        opaque: cmd.opaque,
        remark: cmd.remark.as_deref(),
        serialize_type: SerializeType::Json.name(),
        version: cmd.version,
    };
    // Serializing a struct of strings and integers into a Vec cannot fail.
    serde_json::to_vec(&header).expect("JSON header serialization is infallible")
}

/// A command (empty body) from JSON header bytes.
///
/// `code` is the only required key: a header without it is not a command. The other keys take
/// Java's field defaults (language JAVA, version/opaque/flag 0) when missing.
pub(crate) fn decode(header: &[u8]) -> Result<RemotingCommand, FrameError> {
    let malformed = |reason: String| FrameError::MalformedHeader {
        serialize_type: SerializeType::Json,
        header_len: header.len(),
        reason,
    };
    // Bytes that are no UTF-8 (a client's GBK tags or keys) read as U+FFFD, as Java's
    // `new String(data, UTF_8)` reads them before parsing: refusing them closed the
    // connection, and the client resent the message forever.
    let text = String::from_utf8_lossy(header);
    let value: Value = serde_json::from_str(&text).map_err(|e| malformed(format!("invalid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(malformed(format!("expected a JSON object, found {}", json_kind(&value))));
    };

    let code = int_field(&obj, "code")
        .map_err(&malformed)?
        .ok_or_else(|| malformed("missing \"code\"".to_owned()))?;
    let mut cmd = RemotingCommand::request(code);
    cmd.language = language_field(&obj).map_err(&malformed)?;
    cmd.version = int_field(&obj, "version").map_err(&malformed)?.unwrap_or(0);
    cmd.opaque = int_field(&obj, "opaque").map_err(&malformed)?.unwrap_or(0);
    cmd.flag = int_field(&obj, "flag").map_err(&malformed)?.unwrap_or(0);
    cmd.remark = match obj.get("remark") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(scalar_text(other)),
    };
    cmd.ext_fields = ext_fields(&obj).map_err(&malformed)?;
    // The frame's type byte is authoritative; `serializeTypeCurrentRPC` is informational.
    cmd.serialize_type = SerializeType::Json;
    Ok(cmd)
}

fn int_field(obj: &Map<String, Value>, key: &str) -> Result<Option<i32>, String> {
    let parsed = match obj.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_i64().and_then(|v| i32::try_from(v).ok()),
        // fastjson reads "10" into an int field; so do we.
        Some(Value::String(s)) => s.trim().parse::<i32>().ok(),
        Some(_) => None,
    };
    match parsed {
        Some(v) => Ok(Some(v)),
        None => Err(format!("\"{key}\" is {} {}, not a 32-bit integer", json_kind(&obj[key]), obj[key])),
    }
}

fn language_field(obj: &Map<String, Value>) -> Result<LanguageCode, String> {
    match obj.get("language") {
        None | Some(Value::Null) => Ok(LanguageCode::JAVA),
        // An unknown name is a newer peer's language, not a reason to drop its request.
        Some(Value::String(s)) => Ok(LanguageCode::from_name(s).unwrap_or(LanguageCode::OTHER)),
        // fastjson also accepts an enum as its ordinal.
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|v| u8::try_from(v).ok())
            .map(LanguageCode)
            .ok_or_else(|| format!("\"language\" {n} is not a language code")),
        Some(other) => Err(format!("\"language\" is {}, not a name", json_kind(other))),
    }
}

fn ext_fields(obj: &Map<String, Value>) -> Result<BTreeMap<String, String>, String> {
    match obj.get("extFields") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => Ok(map
            .iter()
            // Java's map would hold the null and `get` would return it: the same as absent.
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), scalar_text(v)))
            .collect()),
        Some(other) => Err(format!("\"extFields\" is {}, not an object", json_kind(other))),
    }
}

/// A value as the string Java's `toString()` would give after fastjson read it into a
/// `Map<String, String>`: strings as they are, anything else as its JSON text.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GBK bytes in a value read as U+FFFD, as Java reads them; the command is not refused.
    #[test]
    fn bytes_that_are_no_utf8_read_as_replacement_characters() {
        let cmd = decode(b"{\"code\":10,\"extFields\":{\"k\":\"\xC4\xE3\"}}").unwrap();
        assert_eq!(cmd.code, 10);
        assert_eq!(cmd.ext("k"), Some("\u{FFFD}\u{FFFD}"));
    }

    #[test]
    fn encodes_keys_alphabetically_and_omits_nulls() {
        let cmd = RemotingCommand::request(21).with_ext("b", "2").with_ext("a", 1);
        let text = String::from_utf8(encode(&cmd)).unwrap();
        assert_eq!(
            text,
            r#"{"code":21,"extFields":{"a":"1","b":"2"},"flag":0,"language":"OTHER","opaque":0,"serializeTypeCurrentRPC":"JSON","version":401}"#
        );
    }

    #[test]
    fn decodes_any_order_unknown_keys_and_scalar_ext_values() {
        let text = r#"{"serializeTypeCurrentRPC":"JSON","extFields":{"queueOffset":123,"suspend":true,
            "s":"x","n":null,"f":1.5},"opaque":9,"unknown":{"deep":[1,2]},"flag":1,"code":"0",
            "language":"GO","remark":null}"#;
        let cmd = decode(text.as_bytes()).unwrap();
        assert_eq!(cmd.code, 0);
        assert_eq!(cmd.opaque, 9);
        assert_eq!(cmd.flag, 1);
        assert_eq!(cmd.language, LanguageCode::GO);
        assert_eq!(cmd.version, 0);
        assert_eq!(cmd.remark, None);
        assert_eq!(cmd.ext("queueOffset"), Some("123"));
        assert_eq!(cmd.ext("suspend"), Some("true"));
        assert_eq!(cmd.ext("s"), Some("x"));
        assert_eq!(cmd.ext("f"), Some("1.5"));
        assert_eq!(cmd.ext("n"), None);
    }

    #[test]
    fn minimal_header_takes_java_defaults() {
        let cmd = decode(br#"{"code":34}"#).unwrap();
        assert_eq!(cmd.code, 34);
        assert_eq!(cmd.language, LanguageCode::JAVA);
        assert_eq!((cmd.version, cmd.opaque, cmd.flag), (0, 0, 0));
        assert!(cmd.ext_fields.is_empty());
    }

    #[test]
    fn unknown_language_name_becomes_other() {
        let cmd = decode(br#"{"code":1,"language":"COBOL"}"#).unwrap();
        assert_eq!(cmd.language, LanguageCode::OTHER);
    }

    #[test]
    fn rejects_what_is_not_a_command() {
        for bad in [
            &br#"{}"#[..],
            br#"[1,2]"#,
            br#"{"code":1.5}"#,
            br#"{"code":4294967296}"#,
            br#"{"code":1,"extFields":[1]}"#,
            br#"{"code":1,"opaque":"x"}"#,
            b"\xff\xfe",
            b"",
        ] {
            let err = decode(bad).unwrap_err();
            assert!(matches!(err, FrameError::MalformedHeader { .. }), "{bad:?}: {err}");
        }
    }
}
