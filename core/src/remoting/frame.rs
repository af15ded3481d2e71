//! Frames on a byte stream: `[i32 length][i32 headerLenAndType][header][body]`, big-endian.
//!
//! `length` counts everything after itself. The maximum frame size is compared, as Netty's
//! `LengthFieldBasedFrameDecoder` in RocketMQ's `NettyDecoder` does, against the whole frame
//! including the 4-byte length field, and it is checked before anything is allocated. The
//! body is read with a buffer that grows as bytes arrive, so a peer that declares 16 MiB and
//! sends ten bytes costs ten bytes, not 16 MiB.

use std::io::{self, Read, Write};

use super::codes::SerializeType;
use super::command::RemotingCommand;
use super::error::FrameError;
use super::{json_header, rocketmq_header};

/// RocketMQ's default `com.rocketmq.remoting.frameMaxLength`: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// The low 24 bits of the header-length field hold the header length.
const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

impl RemotingCommand {
    /// The complete frame for this command, length field included.
    pub fn encode(&self) -> Result<Vec<u8>, FrameError> {
        let header = match self.serialize_type {
            SerializeType::Json => json_header::encode(self),
            SerializeType::RocketMq => rocketmq_header::encode(self)?,
        };
        if header.len() > MAX_HEADER_LEN {
            return Err(FrameError::Unencodable {
                field: "header length",
                value: header.len() as u64,
                max: MAX_HEADER_LEN as u64,
            });
        }
        let length = 4 + header.len() + self.body.len();
        let length_field = i32::try_from(length).map_err(|_| FrameError::Unencodable {
            field: "frame length",
            value: length as u64,
            max: i32::MAX as u64,
        })?;
        // Cannot truncate: checked against MAX_HEADER_LEN above.
        let header_len_and_type = (u32::from(self.serialize_type.code()) << 24) | header.len() as u32;

        let mut out = Vec::with_capacity(4 + length);
        out.extend_from_slice(&length_field.to_be_bytes());
        out.extend_from_slice(&header_len_and_type.to_be_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.body);
        Ok(out)
    }

    /// The command in `frame`, which must be exactly one complete frame, length field
    /// included. Never panics, whatever the bytes.
    pub fn decode(frame: &[u8]) -> Result<Self, FrameError> {
        let Some(len_bytes) = frame.first_chunk::<4>() else {
            return Err(FrameError::Truncated { what: "length field", expected: 4, got: frame.len() });
        };
        let length = i32::from_be_bytes(*len_bytes);
        if length < 4 {
            return Err(FrameError::InvalidLength { length });
        }
        // The bytes are already in memory: the slice's own size is the limit that matters.
        let declared = 4 + length as u64;
        if declared > frame.len() as u64 {
            return Err(FrameError::Truncated {
                what: "frame",
                expected: declared as usize,
                got: frame.len(),
            });
        }
        if declared < frame.len() as u64 {
            return Err(FrameError::TrailingBytes {
                frame_len: declared as usize,
                extra: frame.len() - declared as usize,
            });
        }
        let mut rest = frame;
        match read_frame(&mut rest, usize::MAX)? {
            Some(cmd) => Ok(cmd),
            // Unreachable: the slice holds at least the length field.
            None => Err(FrameError::Truncated { what: "length field", expected: 4, got: 0 }),
        }
    }
}

/// Reads one frame from `reader` and decodes it.
///
/// Returns `Ok(None)` when the stream ends cleanly before the first byte of a frame (the peer
/// closed between frames), and [`FrameError::Truncated`] when it ends inside one. A declared
/// length above `max_frame` (counting the 4-byte length field), a negative length, a header
/// longer than the frame or an unknown serialize type is an error naming the numbers; the
/// stream is then mid-frame and should be closed.
pub fn read_frame<R: Read + ?Sized>(
    reader: &mut R,
    max_frame: usize,
) -> Result<Option<RemotingCommand>, FrameError> {
    let mut len_buf = [0u8; 4];
    match read_full(reader, &mut len_buf)? {
        0 => return Ok(None),
        4 => {}
        got => {
            return Err(FrameError::Truncated { what: "length field", expected: 4, got });
        }
    }
    let length = i32::from_be_bytes(len_buf);
    if length < 4 {
        return Err(FrameError::InvalidLength { length });
    }
    // `length` is positive, so the conversion is lossless; u64 avoids overflow on 32-bit.
    if 4 + length as u64 > max_frame as u64 {
        return Err(FrameError::TooLarge { length, max: max_frame });
    }
    let frame_len = length as usize;

    let mut hlt_buf = [0u8; 4];
    let got = read_full(reader, &mut hlt_buf)?;
    if got < 4 {
        return Err(FrameError::Truncated { what: "header length field", expected: 4, got });
    }
    let raw = u32::from_be_bytes(hlt_buf);
    let header_len = (raw as usize) & MAX_HEADER_LEN;
    let type_byte = (raw >> 24) as u8;
    if header_len > frame_len - 4 {
        return Err(FrameError::HeaderTooLong { header_len, frame_len });
    }
    let serialize_type =
        SerializeType::from_code(type_byte).ok_or(FrameError::UnknownSerializeType { type_byte, raw })?;

    let header = read_growing(reader, header_len, "header")?;
    let body = read_growing(reader, frame_len - 4 - header_len, "body")?;

    let mut cmd = match serialize_type {
        SerializeType::Json => json_header::decode(&header)?,
        SerializeType::RocketMq => rocketmq_header::decode(&header)?,
    };
    cmd.body = body;
    Ok(Some(cmd))
}

/// Encodes `cmd` and writes it as one `write_all`, then flushes.
///
/// One buffer rather than header and body separately: two small writes on a socket can meet
/// Nagle's algorithm and the peer's delayed ACK and stall for tens of milliseconds.
pub fn write_command<W: Write + ?Sized>(writer: &mut W, cmd: &RemotingCommand) -> Result<(), FrameError> {
    let bytes = cmd.encode()?;
    writer.write_all(&bytes)?;
    writer.flush()?;
    Ok(())
}

/// Reads until `buf` is full or the stream ends; returns how many bytes were read.
fn read_full<R: Read + ?Sized>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads exactly `len` bytes into a buffer that grows with what arrives.
fn read_growing<R: Read + ?Sized>(
    reader: &mut R,
    len: usize,
    what: &'static str,
) -> Result<Vec<u8>, FrameError> {
    // Enough for typical headers and small bodies in one go, without trusting `len`.
    const INITIAL: usize = 64 * 1024;
    let mut buf = Vec::with_capacity(len.min(INITIAL));
    reader.take(len as u64).read_to_end(&mut buf)?;
    if buf.len() < len {
        return Err(FrameError::Truncated { what, expected: len, got: buf.len() });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(length: i32, hlt: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = length.to_be_bytes().to_vec();
        v.extend_from_slice(&hlt.to_be_bytes());
        v.extend_from_slice(rest);
        v
    }

    #[test]
    fn clean_eof_is_none_and_partial_length_is_truncated() {
        assert!(read_frame(&mut &b""[..], DEFAULT_MAX_FRAME).unwrap().is_none());
        let err = read_frame(&mut &b"\0\0"[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { expected: 4, got: 2, .. }), "{err}");
    }

    #[test]
    fn oversized_and_negative_lengths_name_the_numbers() {
        let bytes = frame(i32::MAX, 0, b"");
        let err = read_frame(&mut &bytes[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert_eq!(
            err.to_string(),
            "frame length 2147483647 (+4 for the length field) exceeds the maximum frame size 16777216"
        );
        let bytes = frame(-5, 0, b"");
        let err = read_frame(&mut &bytes[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert_eq!(err.to_string(), "invalid frame length -5: must be at least 4");
        // Another protocol's answer says so.
        let err = read_frame(&mut &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert!(
            err.to_string().ends_with("the peer answered in HTTP: is this a RocketMQ remoting port?"),
            "{err}"
        );
        // Exactly at the limit is allowed: 4 + length == max.
        let cmd = RemotingCommand::request(1);
        let bytes = cmd.encode().unwrap();
        assert_eq!(read_frame(&mut &bytes[..], bytes.len()).unwrap(), Some(cmd));
        let err = read_frame(&mut &bytes[..], bytes.len() - 1).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn header_longer_than_frame_is_an_error() {
        let bytes = frame(10, 7, b"xxxxxx");
        let err = read_frame(&mut &bytes[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert_eq!(err.to_string(), "header length 7 exceeds frame length 10 minus 4");
    }

    #[test]
    fn unknown_serialize_type_is_an_error() {
        let bytes = frame(6, 0x0200_0002, b"{}");
        let err = read_frame(&mut &bytes[..], DEFAULT_MAX_FRAME).unwrap_err();
        assert!(matches!(err, FrameError::UnknownSerializeType { type_byte: 2, .. }), "{err}");
    }

    #[test]
    fn truncated_body_is_an_error() {
        let cmd = RemotingCommand::request(1).with_body(vec![7u8; 100]);
        let bytes = cmd.encode().unwrap();
        let err = read_frame(&mut &bytes[..bytes.len() - 1], DEFAULT_MAX_FRAME).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { what: "body", expected: 100, got: 99 }), "{err}");
    }

    #[test]
    fn decode_refuses_trailing_bytes() {
        let mut bytes = RemotingCommand::request(1).encode().unwrap();
        bytes.push(0);
        let err = RemotingCommand::decode(&bytes).unwrap_err();
        assert!(matches!(err, FrameError::TrailingBytes { extra: 1, .. }), "{err}");
    }

    #[test]
    fn consecutive_frames_on_one_stream() {
        let a = RemotingCommand::request(1).with_body(b"a".to_vec());
        let b = RemotingCommand::request(2).with_serialize_type(SerializeType::RocketMq);
        let mut stream = Vec::new();
        write_command(&mut stream, &a).unwrap();
        write_command(&mut stream, &b).unwrap();
        let mut r = &stream[..];
        assert_eq!(read_frame(&mut r, DEFAULT_MAX_FRAME).unwrap(), Some(a));
        assert_eq!(read_frame(&mut r, DEFAULT_MAX_FRAME).unwrap(), Some(b));
        assert_eq!(read_frame(&mut r, DEFAULT_MAX_FRAME).unwrap(), None);
    }
}
