//! The classic HA wire format (spec 6.1). There is no handshake, magic or version:
//!
//! * slave → master: 8 bytes, the slave's CommitLog max offset (i64, big-endian), repeated;
//! * master → slave: `[i64 start offset][i32 body size][body]`, a body of raw CommitLog bytes
//!   that never crosses a file boundary; a body size of 0 is a heartbeat.

/// Bytes of a master frame header.
pub const FRAME_HEADER_SIZE: usize = 12;
/// Bytes of a slave report.
pub const REPORT_SIZE: usize = 8;
/// Largest body a slave accepts (RocketMQ's READ_MAX_BUFFER_SIZE).
pub const MAX_FRAME_BODY: usize = 4 * 1024 * 1024;

/// Encodes a master frame header.
pub fn encode_header(offset: i64, size: i32) -> [u8; FRAME_HEADER_SIZE] {
    let mut h = [0u8; FRAME_HEADER_SIZE];
    h[..8].copy_from_slice(&offset.to_be_bytes());
    h[8..].copy_from_slice(&size.to_be_bytes());
    h
}

/// Decodes a master frame header.
pub fn decode_header(b: &[u8; FRAME_HEADER_SIZE]) -> (i64, i32) {
    let offset = i64::from_be_bytes(b[..8].try_into().unwrap_or_default());
    let size = i32::from_be_bytes(b[8..].try_into().unwrap_or_default());
    (offset, size)
}

/// Encodes a slave report.
pub fn encode_report(offset: i64) -> [u8; REPORT_SIZE] {
    offset.to_be_bytes()
}

/// A master frame as the slave parses it out of its read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedFrame<'a> {
    /// A complete frame: start offset and body (empty for a heartbeat).
    Frame { offset: i64, body: &'a [u8] },
    /// Not enough bytes yet.
    Partial,
    /// A header that cannot be valid: negative size or offset, a body over `MAX_FRAME_BODY`,
    /// or an end past `i64::MAX`.
    Bad(String),
}

/// Parses the frame at the start of `buf`.
pub fn parse_frame(buf: &[u8]) -> ParsedFrame<'_> {
    let Some(h) = buf.get(..FRAME_HEADER_SIZE) else { return ParsedFrame::Partial };
    let (offset, size) = decode_header(h.try_into().expect("12 bytes"));
    if size < 0 || size as usize > MAX_FRAME_BODY {
        return ParsedFrame::Bad(format!("frame at offset {offset} declares {size} body bytes"));
    }
    if offset < 0 {
        return ParsedFrame::Bad(format!("frame declares negative offset {offset}"));
    }
    // Its end must be an offset too: `offset + size` is computed all along the slave's path.
    if offset.checked_add(size as i64).is_none() {
        return ParsedFrame::Bad(format!(
            "frame at offset {offset} with {size} bytes ends past the largest offset"
        ));
    }
    match buf.get(FRAME_HEADER_SIZE..FRAME_HEADER_SIZE + size as usize) {
        Some(body) => ParsedFrame::Frame { offset, body },
        None => ParsedFrame::Partial,
    }
}

/// Takes the newest complete report out of a stream of 8-byte reports, keeping alignment
/// across reads: RocketMQ's master likewise only looks at the last whole value.
#[derive(Debug, Default)]
pub struct ReportReader {
    partial: [u8; REPORT_SIZE],
    have: usize,
}

impl ReportReader {
    /// Feeds bytes; returns the newest complete report in them, if any.
    pub fn feed(&mut self, data: &[u8]) -> Option<i64> {
        self.feed_keeping(data, false)
    }

    /// Feeds bytes; returns the oldest complete report in them, if any: for a connection's
    /// first report, which says where the slave starts, whatever came after it in one read.
    pub fn feed_oldest(&mut self, data: &[u8]) -> Option<i64> {
        self.feed_keeping(data, true)
    }

    fn feed_keeping(&mut self, mut data: &[u8], oldest: bool) -> Option<i64> {
        let mut last = None;
        while !data.is_empty() {
            let n = (REPORT_SIZE - self.have).min(data.len());
            self.partial[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == REPORT_SIZE {
                if !(oldest && last.is_some()) {
                    last = Some(i64::from_be_bytes(self.partial));
                }
                self.have = 0;
            }
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_header_and_report() {
        assert_eq!(encode_header(0x0102030405060708, 32768), [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0x80, 0]);
        assert_eq!(encode_report(1_815_111), [0, 0, 0, 0, 0, 0x1B, 0xB2, 0x47]);
        assert_eq!(decode_header(&encode_header(-1, 0)), (-1, 0));
    }

    #[test]
    fn parse_partial_and_bad() {
        let mut buf = encode_header(100, 3).to_vec();
        assert_eq!(parse_frame(&buf[..5]), ParsedFrame::Partial);
        assert_eq!(parse_frame(&buf), ParsedFrame::Partial);
        buf.extend_from_slice(b"abcde");
        assert_eq!(parse_frame(&buf), ParsedFrame::Frame { offset: 100, body: b"abc" });
        assert!(matches!(parse_frame(&encode_header(0, -5)), ParsedFrame::Bad(_)));
        assert!(matches!(parse_frame(&encode_header(0, i32::MAX)), ParsedFrame::Bad(_)));
        assert_eq!(parse_frame(&encode_header(7, 0)), ParsedFrame::Frame { offset: 7, body: b"" });
    }

    #[test]
    fn report_reader_keeps_alignment() {
        let mut r = ReportReader::default();
        let mut stream = Vec::new();
        for v in [1i64, 2, 300] {
            stream.extend_from_slice(&encode_report(v));
        }
        assert_eq!(r.feed(&stream[..5]), None);
        assert_eq!(r.feed(&stream[5..13]), Some(1)); // completes #1, #2 still partial
        assert_eq!(r.feed(&stream[13..]), Some(300));
        assert_eq!(r.feed(&[]), None);
        // The oldest, for a first report; alignment kept as well.
        let mut r = ReportReader::default();
        assert_eq!(r.feed_oldest(&stream[..3]), None);
        assert_eq!(r.feed_oldest(&stream[3..20]), Some(1));
        assert_eq!(r.feed(&stream[20..]), Some(300));
    }
}
