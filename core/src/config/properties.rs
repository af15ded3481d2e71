//! A reader for Java `.properties` files, as `java.util.Properties.load` reads them.
//!
//! RocketMQ's `broker.conf` is such a file, so users expect its exact rules: `#` and `!`
//! comments, `key=value`, `key: value` and `key value`, backslash escapes including `\uXXXX`,
//! and lines continued by an odd number of trailing backslashes. Unlike Java we keep the line
//! number of each entry so that a bad value can be reported where it is.

/// One `key = value` entry and the (1-based) line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyEntry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Why a properties text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct PropertiesSyntaxError {
    pub line: usize,
    pub reason: String,
}

/// Parses a properties text. Later duplicates of a key are kept as separate entries in
/// file order (the caller decides; for a config, the last one wins as in Java).
pub fn parse_properties(text: &str) -> Result<Vec<PropertyEntry>, PropertiesSyntaxError> {
    let mut entries = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line_no = 1;
    while i < chars.len() {
        // Start of a natural line: skip leading white space.
        let start_line = line_no;
        while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\u{c}') {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        if is_eol(chars[i]) {
            i = skip_eol(&chars, i);
            line_no += 1;
            continue;
        }
        if chars[i] == '#' || chars[i] == '!' {
            // Comment lines never continue, whatever they end with.
            while i < chars.len() && !is_eol(chars[i]) {
                i += 1;
            }
            continue;
        }
        // Gather the logical line, joining continuations.
        let mut logical = String::new();
        loop {
            let seg_start = i;
            while i < chars.len() && !is_eol(chars[i]) {
                i += 1;
            }
            let seg = &chars[seg_start..i];
            let trailing = seg.iter().rev().take_while(|&&c| c == '\\').count();
            if trailing % 2 == 1 {
                logical.extend(&seg[..seg.len() - 1]);
                if i >= chars.len() {
                    break; // a continuation at end of input ends the line (as Java)
                }
                i = skip_eol(&chars, i);
                line_no += 1;
                while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\u{c}') {
                    i += 1;
                }
            } else {
                logical.extend(seg);
                break;
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(&key).map_err(|reason| PropertiesSyntaxError { line: start_line, reason })?;
        let value = unescape(&value).map_err(|reason| PropertiesSyntaxError { line: start_line, reason })?;
        entries.push(PropertyEntry { key, value, line: start_line });
    }
    Ok(entries)
}

fn is_eol(c: char) -> bool {
    c == '\n' || c == '\r'
}

fn skip_eol(chars: &[char], mut i: usize) -> usize {
    if chars[i] == '\r' && i + 1 < chars.len() && chars[i + 1] == '\n' {
        i += 1;
    }
    i + 1
}

/// Splits a logical line (escapes still in place) into raw key and raw value.
fn split_key_value(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut escaped = false;
    while i < chars.len() {
        let c = chars[i];
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '=' | ':' | ' ' | '\t' | '\u{c}') {
            break;
        }
        i += 1;
    }
    let key: String = chars[..i].iter().collect();
    // Skip white space, then at most one separator, then white space.
    while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\u{c}') {
        i += 1;
    }
    if i < chars.len() && matches!(chars[i], '=' | ':') {
        i += 1;
    }
    while i < chars.len() && matches!(chars[i], ' ' | '\t' | '\u{c}') {
        i += 1;
    }
    let value: String = chars[i..].iter().collect();
    (key, value)
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    let mut pending_high: Option<u16> = None;
    while let Some(c) = it.next() {
        if c != '\\' {
            flush_high(&mut out, &mut pending_high);
            out.push(c);
            continue;
        }
        let Some(e) = it.next() else {
            break; // a lone trailing backslash is dropped, as Java does
        };
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => {
                let mut code: u32 = 0;
                for _ in 0..4 {
                    let d = it
                        .next()
                        .and_then(|d| d.to_digit(16))
                        .ok_or_else(|| "malformed \\uxxxx escape".to_string())?;
                    code = code * 16 + d;
                }
                // Java strings are UTF-16: a surrogate pair arrives as two escapes.
                let unit = code as u16;
                if (0xD800..0xDC00).contains(&unit) {
                    flush_high(&mut out, &mut pending_high);
                    pending_high = Some(unit);
                    continue;
                }
                if (0xDC00..0xE000).contains(&unit) {
                    if let Some(high) = pending_high.take() {
                        let cp = 0x10000 + (((high as u32) - 0xD800) << 10) + (unit as u32 - 0xDC00);
                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                    } else {
                        out.push('\u{FFFD}');
                    }
                    continue;
                }
                flush_high(&mut out, &mut pending_high);
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                continue;
            }
            other => out.push(other),
        }
        flush_high(&mut out, &mut pending_high);
    }
    flush_high(&mut out, &mut pending_high);
    Ok(out)
}

fn flush_high(out: &mut String, pending: &mut Option<u16>) {
    if pending.take().is_some() {
        out.push('\u{FFFD}');
    }
}

/// Sets a key in a properties text and keeps the rest of it as it was (comments, order,
/// line endings): every entry whose key `is_key` picks (an old spelling, say) becomes
/// `key=value` on the line where it began, its continuation lines dropped; with none,
/// `key=value` is appended. The value is escaped as Java's `Properties.store` writes it
/// (`\uXXXX` beyond ASCII: RocketMQ reads the file as ISO-8859-1).
pub fn set_property(
    text: &str,
    is_key: impl Fn(&str) -> bool,
    key: &str,
    value: &str,
) -> Result<String, PropertiesSyntaxError> {
    let lines: std::collections::BTreeSet<usize> =
        parse_properties(text)?.into_iter().filter(|e| is_key(&e.key)).map(|e| e.line).collect();
    let entry = format!("{}={}", escape(key, true), escape(value, false));
    // Physical lines with their ends, numbered as `parse_properties` numbers them.
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + entry.len() + 1);
    let (mut i, mut line_no) = (0, 1);
    let mut skipping = false;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && !is_eol(chars[i]) {
            i += 1;
        }
        let content: String = chars[start..i].iter().collect();
        let end = if i < chars.len() { skip_eol(&chars, i) } else { i };
        let eol: String = chars[i..end].iter().collect();
        i = end;
        let continues = content.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1;
        if lines.contains(&line_no) {
            out.push_str(&entry);
            out.push_str(if eol.is_empty() { "\n" } else { &eol });
            skipping = continues;
        } else if skipping {
            skipping = continues;
        } else {
            out.push_str(&content);
            out.push_str(&eol);
        }
        line_no += 1;
    }
    if lines.is_empty() {
        if !(out.is_empty() || out.ends_with('\n') || out.ends_with('\r')) {
            out.push('\n');
        }
        out.push_str(&entry);
        out.push('\n');
    }
    Ok(out)
}

/// Java's `Properties.saveConvert`: a key escapes its spaces, a value only a leading one.
fn escape(s: &str, is_key: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for (n, c) in s.chars().enumerate() {
        match c {
            ' ' if n == 0 || is_key => out.push_str("\\ "),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if (' '..='~').contains(&c) => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04X}"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_property_replaces_each_entry_in_place_and_keeps_the_rest() {
        let text = "# drain it\r\nbrokerName = a\r\nbrokerPermission : 6\r\n! end\r\nx=1\\\n  2\nx 3";
        let set = |t: &str, k: &str, v: &str| set_property(t, |key| key == k, k, v).unwrap();
        assert_eq!(
            set(text, "brokerPermission", "4"),
            "# drain it\r\nbrokerName = a\r\nbrokerPermission=4\r\n! end\r\nx=1\\\n  2\nx 3"
        );
        // A continued entry loses its continuation lines; the last line had no newline.
        assert_eq!(
            set(text, "x", "9"),
            "# drain it\r\nbrokerName = a\r\nbrokerPermission : 6\r\n! end\r\nx=9\nx=9\n"
        );
        // A key the text lacks is appended, after a newline of its own if the text ends without.
        assert_eq!(set("a=1", "b", " é=\\"), "a=1\nb=\\ \\u00E9\\=\\\\\n");
        assert_eq!(set("", "b", "2"), "b=2\n");
        let back = parse_properties(&set("a=1", "b", " é=\\ #x")).unwrap();
        assert_eq!((back[1].key.as_str(), back[1].value.as_str()), ("b", " é=\\ #x"));
        // Old spellings are replaced too, under the key given.
        let t = set_property(
            "mapedFileSizeCommitLog=1\n",
            |k| k.starts_with("ma"),
            "mappedFileSizeCommitLog",
            "2",
        );
        assert_eq!(t.unwrap(), "mappedFileSizeCommitLog=2\n");
        assert!(
            set_property("a=\\u12", |_| true, "a", "1").is_err(),
            "a text that does not parse is refused"
        );
    }

    fn kv(text: &str) -> Vec<(String, String, usize)> {
        parse_properties(text).unwrap().into_iter().map(|e| (e.key, e.value, e.line)).collect()
    }

    #[test]
    fn separators_and_comments() {
        let got = kv("# comment\n! also\n\na=1\nb: 2\nc 3\n  d  =  4  \ne\n");
        assert_eq!(
            got,
            vec![
                ("a".into(), "1".into(), 4),
                ("b".into(), "2".into(), 5),
                ("c".into(), "3".into(), 6),
                ("d".into(), "4  ".into(), 7),
                ("e".into(), "".into(), 8),
            ]
        );
    }

    #[test]
    fn continuation_lines_and_crlf() {
        let got = kv("list = a,\\\r\n      b,\\\n\tc\r\nnext=x\\\\\nlast=y");
        assert_eq!(got[0], ("list".into(), "a,b,c".into(), 1));
        assert_eq!(got[1], ("next".into(), "x\\".into(), 4));
        assert_eq!(got[2], ("last".into(), "y".into(), 5));
    }

    #[test]
    fn comment_with_trailing_backslash_does_not_continue() {
        let got = kv("# note \\\nkey=v\n");
        assert_eq!(got, vec![("key".into(), "v".into(), 2)]);
    }

    #[test]
    fn escapes() {
        let got = kv("a\\=b\\ c=x\\ty\\u0041\\uD83D\\uDE00\\q\n");
        assert_eq!(got[0].0, "a=b c");
        assert_eq!(got[0].1, "x\tyA\u{1F600}q");
        assert!(parse_properties("k=\\u00G1").is_err());
    }

    #[test]
    fn separator_may_be_followed_by_another_separator_char() {
        // Java: only the first '=' or ':' after the key is a separator.
        assert_eq!(kv("k = =v")[0].1, "=v");
        assert_eq!(kv("k:=v")[0].1, "=v");
    }
}
