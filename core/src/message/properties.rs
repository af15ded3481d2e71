//! Message properties: `key 0x01 value 0x02` pairs (spec 1.3).

/// Separates a key from its value.
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// Ends every key/value pair.
pub const PROPERTY_SEPARATOR: u8 = 2;

/// Well-known property keys.
pub mod keys {
    /// RocketMQ 5's whole-record CRC (`enabledAppendPropCRC`); only a broker writes it.
    pub const CRC32: &str = "__CRC32#";
    pub const KEYS: &str = "KEYS";
    pub const TAGS: &str = "TAGS";
    pub const WAIT: &str = "WAIT";
    pub const DELAY: &str = "DELAY";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const INNER_NUM: &str = "INNER_NUM";
    pub const INNER_BASE: &str = "INNER_BASE";
    pub const DUP_INFO: &str = "DUP_INFO";
}

/// Whether a pair is encoded: not with an empty value (the Java encoder skips nulls), and not
/// [`keys::CRC32`], which only a broker writes, last, from the record's own bytes (one
/// carried over from a message stored before, or sent by a client, would be stale or false).
fn is_kept(k: &str, v: &str) -> bool {
    !v.is_empty() && k != keys::CRC32
}

/// The encoded length of `props` (without empty values and `__CRC32#`, see `is_kept`).
pub fn encoded_len<K: AsRef<str>, V: AsRef<str>>(props: &[(K, V)]) -> usize {
    props
        .iter()
        .filter(|(k, v)| is_kept(k.as_ref(), v.as_ref()))
        .map(|(k, v)| k.as_ref().len() + v.as_ref().len() + 2)
        .sum()
}

/// Writes the encoding of `props` into `dst`, which must be exactly `encoded_len` long.
pub fn encode_into<K: AsRef<str>, V: AsRef<str>>(props: &[(K, V)], dst: &mut [u8]) {
    let mut p = 0;
    for (k, v) in props {
        if !is_kept(k.as_ref(), v.as_ref()) {
            continue;
        }
        let (k, v) = (k.as_ref().as_bytes(), v.as_ref().as_bytes());
        dst[p..p + k.len()].copy_from_slice(k);
        p += k.len();
        dst[p] = NAME_VALUE_SEPARATOR;
        p += 1;
        dst[p..p + v.len()].copy_from_slice(v);
        p += v.len();
        dst[p] = PROPERTY_SEPARATOR;
        p += 1;
    }
    debug_assert_eq!(p, dst.len());
}

/// Encodes `props` into a new buffer.
pub fn encode<K: AsRef<str>, V: AsRef<str>>(props: &[(K, V)]) -> Vec<u8> {
    let mut v = vec![0u8; encoded_len(props)];
    encode_into(props, &mut v);
    v
}

/// Whether a key or value can be encoded unambiguously (no separator bytes in it).
pub fn is_encodable(s: &str) -> bool {
    !s.bytes().any(|b| b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
}

/// Iterates the pairs of an encoded properties string without allocating, with RocketMQ's
/// parser rules: segments shorter than 3 bytes are ignored, the first 0x01 splits key and
/// value, and both must be non-empty.
pub fn iter(encoded: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    encoded.split(|&b| b == PROPERTY_SEPARATOR).filter_map(|seg| {
        if seg.len() < 3 {
            return None;
        }
        let i = seg.iter().position(|&b| b == NAME_VALUE_SEPARATOR)?;
        let (k, v) = (&seg[..i], &seg[i + 1..]);
        if k.is_empty() || v.is_empty() { None } else { Some((k, v)) }
    })
}

/// The value of one property, without allocating.
pub fn get<'a>(encoded: &'a [u8], key: &str) -> Option<&'a [u8]> {
    iter(encoded).find(|(k, _)| *k == key.as_bytes()).map(|(_, v)| v)
}

/// All pairs as owned strings (invalid UTF-8 replaced).
pub fn decode(encoded: &[u8]) -> Vec<(String, String)> {
    iter(encoded)
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_golden() {
        let enc = encode(&[("TAGS", "TagA"), ("KEYS", "k1 k2"), ("EMPTY", "")]);
        assert_eq!(enc, b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02");
        assert_eq!(get(&enc, "KEYS"), Some(&b"k1 k2"[..]));
        assert_eq!(get(&enc, "WAIT"), None);
    }

    #[test]
    fn parser_rules() {
        // short segments, missing separators, empty keys or values are dropped; the first 0x01
        // splits.
        let raw = b"a\x01\x02\x01bc\x02ab\x02k\x01v\x01w\x02x\x01y";
        let got = decode(raw);
        assert_eq!(got, vec![("k".to_string(), "v\u{1}w".to_string()), ("x".into(), "y".into())]);
    }
}
