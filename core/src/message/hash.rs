//! Java's `String.hashCode`, which RocketMQ uses for tags codes and index key hashes.

/// `s[0]*31^(n-1) + ... + s[n-1]` over the UTF-16 code units of `s`, wrapping as Java's
/// `int` does. Characters outside the BMP count as their two surrogates, as in Java.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// `java_string_hash` of bytes that should be UTF-8; invalid sequences hash as U+FFFD,
/// which is what `new String(bytes, UTF_8)` gives in Java.
pub fn java_string_hash_bytes(bytes: &[u8]) -> i32 {
    match std::str::from_utf8(bytes) {
        Ok(s) => java_string_hash(s),
        Err(_) => java_string_hash(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java() {
        // Values computed with java.lang.String#hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
        // Wraps around like a Java int.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // U+1F600 is the surrogate pair D83D DE00: 0xD83D*31 + 0xDE00.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        // U+00E9 is one UTF-16 unit although two UTF-8 bytes.
        assert_eq!(java_string_hash("\u{e9}"), 0xE9);
    }
}
