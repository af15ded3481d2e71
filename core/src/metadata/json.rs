//! JSON as RocketMQ's fastjson writes it, and as we write it.
//!
//! fastjson writes `Map<Integer, Long>` with bare integer keys (`{0:123,1:456}`), which strict
//! JSON forbids. Reading therefore runs a small pre-pass that quotes an integer key (optional
//! `-`, then digits) when it stands where an object key stands (after `{` or `,`, outside any
//! string, followed by `:`), and hands the result to serde_json. Everything else fastjson does
//! (any field order, tabs, unknown fields) serde already accepts.
//!
//! Writing is strict JSON with quoted keys, so any JSON tool reads our files; fastjson reads
//! quoted integer keys too. Struct fields are declared in alphabetical order, which is the order
//! fastjson writes them in.

use super::MetadataError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// How a table is written: pretty on disk (as RocketMQ's `ConfigManager.persist`), compact as
/// a remoting response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// Indented, one field a line: the form of the files under `config/`.
    Pretty,
    /// One line, no spaces: the form of remoting bodies.
    Compact,
}

/// Decodes `text`, accepting fastjson's bare integer keys. `origin` names the file or body
/// (and the table) in the error; the error's line and column point into `text` itself.
pub fn from_str_lenient<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, MetadataError> {
    let (strict, inserted) = quote_bare_integer_keys(text);
    serde_json::from_str(&strict).map_err(|e| {
        let (line, column) = if e.line() == 0 {
            (0, 0)
        } else {
            original_position(&strict, &inserted, text, e.line(), e.column())
        };
        MetadataError::Json { origin: origin.to_string(), line, column, reason: strip_position(&e) }
    })
}

/// Like [`from_str_lenient`], but the document must be a JSON object. serde would also build
/// a struct from an array (`[]` reads as all defaults), which for a table means a corrupt file
/// passing as an empty one.
pub fn object_from_str_lenient<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, MetadataError> {
    let bytes = text.as_bytes();
    match bytes.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(i) if bytes[i] == b'{' => from_str_lenient(text, origin),
        found => {
            let (line, column) = position_of_index(bytes, found.map_or(bytes.len(), |i| i + 1));
            Err(MetadataError::Json {
                origin: origin.to_string(),
                line,
                column,
                reason: "expected a JSON object".to_string(),
            })
        }
    }
}

/// [`object_from_str_lenient`] for a remoting body or raw file bytes; invalid UTF-8 is an
/// error at the first bad byte.
pub fn object_from_slice_lenient<T: DeserializeOwned>(
    bytes: &[u8],
    origin: &str,
) -> Result<T, MetadataError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => object_from_str_lenient(text, origin),
        Err(e) => {
            let (line, column) = position_of_index(bytes, e.valid_up_to() + 1);
            Err(MetadataError::Json {
                origin: origin.to_string(),
                line,
                column,
                reason: format!("invalid UTF-8: {e}"),
            })
        }
    }
}

/// Encodes `value` as strict JSON in the given style. `what` names the table in the error.
pub fn to_json<T: Serialize>(value: &T, style: JsonStyle, what: &str) -> Result<String, MetadataError> {
    let result = match style {
        JsonStyle::Pretty => serde_json::to_string_pretty(value),
        JsonStyle::Compact => serde_json::to_string(value),
    };
    result.map_err(|e| MetadataError::Encode { what: what.to_string(), reason: e.to_string() })
}

/// A `deserialize_with` helper: Java writers that emit nulls (`"attributes":null`) mean "not
/// set", which for us is the field's default.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// Returns `text` with every bare integer object key quoted, and the offsets (in the returned
/// text) of the quotes it inserted, ascending, so errors can be mapped back.
///
/// Only ASCII is inserted, and only next to ASCII bytes, so the result stays valid UTF-8 and
/// no line numbers change.
pub(crate) fn quote_bare_integer_keys(text: &str) -> (Cow<'_, str>, Vec<usize>) {
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut out = String::new();
    let mut inserted = Vec::new();
    let mut copied = 0;
    let mut in_string = false;
    // The last byte outside strings that was not white space: a key can only follow `{` or `,`.
    let mut prev = 0u8;
    let mut i = 0;
    while i < n {
        let c = bytes[i];
        if in_string {
            match c {
                // Skip the escaped byte, so `\"` does not end the string.
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    prev = b'"';
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'-' | b'0'..=b'9' if prev == b'{' || prev == b',' => {
                let digits = i + usize::from(c == b'-');
                let mut end = digits;
                while end < n && bytes[end].is_ascii_digit() {
                    end += 1;
                }
                let mut next = end;
                while next < n && matches!(bytes[next], b' ' | b'\t' | b'\n' | b'\r') {
                    next += 1;
                }
                if end > digits && next < n && bytes[next] == b':' {
                    out.push_str(&text[copied..i]);
                    inserted.push(out.len());
                    out.push('"');
                    out.push_str(&text[i..end]);
                    inserted.push(out.len());
                    out.push('"');
                    copied = end;
                }
                prev = b'0';
                // `end > i` always: either a digit was consumed or the `-` was.
                i = end.max(i + 1);
            }
            _ => {
                prev = c;
                i += 1;
            }
        }
    }
    if inserted.is_empty() {
        return (Cow::Borrowed(text), inserted);
    }
    out.push_str(&text[copied..]);
    (Cow::Owned(out), inserted)
}

/// Maps serde's (line, column) in the rewritten text back to the original text.
fn original_position(
    strict: &str,
    inserted: &[usize],
    original: &str,
    line: usize,
    column: usize,
) -> (usize, usize) {
    let bytes = strict.as_bytes();
    let line_start = if line <= 1 {
        0
    } else {
        bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .nth(line - 2)
            .map_or(bytes.len(), |(i, _)| i + 1)
    };
    let index = (line_start + column).min(bytes.len());
    let shift = inserted.partition_point(|&p| p < index);
    position_of_index(original.as_bytes(), index - shift)
}

/// serde_json's convention: line is 1-based; column counts the bytes since the line start up
/// to and including the byte at `index - 1`.
fn position_of_index(bytes: &[u8], index: usize) -> (usize, usize) {
    let index = index.min(bytes.len());
    let head = &bytes[..index];
    let line_start = head.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = 1 + head[..line_start].iter().filter(|&&b| b == b'\n').count();
    (line, index - line_start)
}

/// serde's message without its own " at line L column C", which would point into the
/// rewritten text.
fn strip_position(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(p) if e.line() != 0 => msg[..p].to_string(),
        _ => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn quoted(s: &str) -> String {
        quote_bare_integer_keys(s).0.into_owned()
    }

    #[test]
    fn quotes_bare_integer_keys_only() {
        assert_eq!(quoted(r#"{0:123,1:456}"#), r#"{"0":123,"1":456}"#);
        assert_eq!(quoted(r#"{"a":{-1 : 5}}"#), r#"{"a":{"-1" : 5}}"#);
        assert_eq!(quoted("{\n\t0:1,\n\t12:2\n}"), "{\n\t\"0\":1,\n\t\"12\":2\n}");
        // Values, array elements and strings stay as they are.
        for s in
            [r#"{"a":1,"b":[1,2,-3]}"#, r#"{"a":"{1:2}"}"#, r#"{"a\"{1:":"x,2:3"}"#, r#"{"0":1}"#, r#"[1,2]"#]
        {
            assert_eq!(quoted(s), s);
            assert!(matches!(quote_bare_integer_keys(s).0, Cow::Borrowed(_)));
        }
    }

    #[test]
    fn reads_fastjson_and_strict_maps_alike() {
        let a: BTreeMap<i32, i64> = from_str_lenient("{0:123,1:456}", "t").unwrap();
        let b: BTreeMap<i32, i64> = from_str_lenient(r#"{"1":456,"0":123}"#, "t").unwrap();
        assert_eq!(a, b);
        assert_eq!(a[&1], 456);
    }

    #[test]
    fn error_positions_point_into_the_original() {
        let text = "{\n\t0:1,\n\t1:x}";
        let err = from_str_lenient::<BTreeMap<i32, i64>>(text, "consumerOffset.json").unwrap_err();
        match err {
            MetadataError::Json { origin, line, column, .. } => {
                assert_eq!(origin, "consumerOffset.json");
                assert_eq!((line, column), (3, 4), "the 'x' is at line 3, column 4");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let err = object_from_slice_lenient::<serde_json::Value>(b"{\"a\":\"\xff\"}", "body").unwrap_err();
        assert!(matches!(err, MetadataError::Json { line: 1, column: 7, .. }), "{err:?}");
    }

    #[test]
    fn tables_must_be_objects() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(default)]
        #[allow(dead_code)]
        struct Wrapper {
            a: i32,
        }
        impl Default for Wrapper {
            fn default() -> Self {
                Wrapper { a: 1 }
            }
        }
        assert!(from_str_lenient::<Wrapper>("[]", "t").is_ok(), "serde's quirk");
        for text in ["[]", "  \n 5", "", "null"] {
            let err = object_from_str_lenient::<Wrapper>(text, "t").unwrap_err();
            assert!(matches!(err, MetadataError::Json { .. }), "{err}");
        }
        assert_eq!(object_from_str_lenient::<Wrapper>(" {}", "t").unwrap().a, 1);
    }

    #[test]
    fn writes_strict_json() {
        let m: BTreeMap<i32, i64> = [(0, 1), (10, 2), (2, 3)].into();
        assert_eq!(to_json(&m, JsonStyle::Compact, "t").unwrap(), r#"{"0":1,"2":3,"10":2}"#);
        assert!(to_json(&m, JsonStyle::Pretty, "t").unwrap().contains('\n'));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC*") {
            let _ = from_str_lenient::<serde_json::Value>(&s, "p");
            let _ = from_str_lenient::<BTreeMap<String, BTreeMap<i32, i64>>>(&s, "p");
        }

        #[test]
        fn json_like_text_never_panics(s in r#"[{}\[\]:,"\\0-9a -]{0,40}"#) {
            let _ = from_str_lenient::<serde_json::Value>(&s, "p");
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = object_from_slice_lenient::<serde_json::Value>(&b, "p");
        }

        #[test]
        fn fastjson_maps_read_back(m in proptest::collection::btree_map(any::<i32>(), any::<i64>(), 0..20)) {
            let body: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            let text = format!("{{{}}}", body.join(","));
            let back: BTreeMap<i32, i64> = from_str_lenient(&text, "p").unwrap();
            prop_assert_eq!(back, m);
        }
    }
}
