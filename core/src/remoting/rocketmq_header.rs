//! The ROCKETMQ binary header (serialize type 1, Java's `RocketMQSerializable`):
//! `[i16 code][u8 language][i16 version][i32 opaque][i32 flag][i32 remarkLen][remark]
//! [i32 extLen][ext]`, ext = repeated `[i16 keyLen][key][i32 valLen][val]`, all big-endian.
//!
//! Every length is checked against the bytes that remain before anything is copied, so a
//! hostile header cannot make us allocate more than it is long. Invalid UTF-8 is replaced
//! (U+FFFD) as Java's `new String(bytes, UTF_8)` does, rather than refused.

use super::codes::{LanguageCode, SerializeType};
use super::command::RemotingCommand;
use super::error::FrameError;

/// Bytes of the fixed part: code 2 + language 1 + version 2 + opaque 4 + flag 4 + remarkLen 4
/// + extLen 4.
const FIXED_LEN: usize = 21;

/// The ROCKETMQ header of `cmd`. Fails if a value does not fit its wire field, where Java
/// would silently truncate it.
pub(crate) fn encode(cmd: &RemotingCommand) -> Result<Vec<u8>, FrameError> {
    let code = to_i16("code", cmd.code)?;
    let version = to_i16("version", cmd.version)?;
    let remark = cmd.remark.as_deref().unwrap_or("").as_bytes();
    let remark_len = to_i32_len("remark length", remark.len())?;

    let mut ext = Vec::new();
    for (key, val) in &cmd.ext_fields {
        let key_len = i16::try_from(key.len()).map_err(|_| FrameError::Unencodable {
            field: "ext key length",
            value: key.len() as u64,
            max: i16::MAX as u64,
        })?;
        ext.extend_from_slice(&key_len.to_be_bytes());
        ext.extend_from_slice(key.as_bytes());
        ext.extend_from_slice(&to_i32_len("ext value length", val.len())?.to_be_bytes());
        ext.extend_from_slice(val.as_bytes());
    }
    let ext_len = to_i32_len("ext fields length", ext.len())?;

    let mut out = Vec::with_capacity(FIXED_LEN + remark.len() + ext.len());
    out.extend_from_slice(&code.to_be_bytes());
    out.push(cmd.language.0);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&cmd.opaque.to_be_bytes());
    out.extend_from_slice(&cmd.flag.to_be_bytes());
    out.extend_from_slice(&remark_len.to_be_bytes());
    out.extend_from_slice(remark);
    out.extend_from_slice(&ext_len.to_be_bytes());
    out.extend_from_slice(&ext);
    Ok(out)
}

fn to_i16(field: &'static str, value: i32) -> Result<i16, FrameError> {
    i16::try_from(value).map_err(|_| FrameError::Unencodable {
        field,
        // Two's complement keeps negatives distinguishable in the message.
        value: i64::from(value) as u64,
        max: i16::MAX as u64,
    })
}

fn to_i32_len(field: &'static str, len: usize) -> Result<i32, FrameError> {
    i32::try_from(len).map_err(|_| FrameError::Unencodable { field, value: len as u64, max: i32::MAX as u64 })
}

/// A cursor that turns every short read into a `MalformedHeader` naming what was cut off.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return Err(format!("{what} needs {n} bytes at offset {}, only {remaining} remain", self.pos));
        }
        let slice = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let slice = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        self.array(what).map(i16::from_be_bytes)
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        self.array(what).map(i32::from_be_bytes)
    }

    /// A length field: negative lengths are refused (Java skips a negative remark or ext
    /// length, but no encoder writes one, so it means garbage).
    fn len_i32(&mut self, what: &str) -> Result<usize, String> {
        let len = self.i32(what)?;
        usize::try_from(len).map_err(|_| format!("negative {what} {len}"))
    }

    fn len_i16(&mut self, what: &str) -> Result<usize, String> {
        let len = self.i16(what)?;
        usize::try_from(len).map_err(|_| format!("negative {what} {len}"))
    }
}

/// A command (empty body) from ROCKETMQ header bytes. Bytes after the ext fields are ignored,
/// as Java does.
pub(crate) fn decode(header: &[u8]) -> Result<RemotingCommand, FrameError> {
    decode_inner(header).map_err(|reason| FrameError::MalformedHeader {
        serialize_type: SerializeType::RocketMq,
        header_len: header.len(),
        reason,
    })
}

fn decode_inner(header: &[u8]) -> Result<RemotingCommand, String> {
    let mut cur = Cursor { buf: header, pos: 0 };
    let code = cur.i16("code")?;
    let language = cur.array::<1>("language")?[0];
    let version = cur.i16("version")?;
    let opaque = cur.i32("opaque")?;
    let flag = cur.i32("flag")?;

    let remark_len = cur.len_i32("remark length")?;
    let remark = cur.take(remark_len, "remark")?;

    let ext_len = cur.len_i32("ext fields length")?;
    let mut ext = Cursor { buf: cur.take(ext_len, "ext fields")?, pos: 0 };

    let mut cmd = RemotingCommand::request(i32::from(code));
    cmd.language = LanguageCode(language);
    cmd.version = i32::from(version);
    cmd.opaque = opaque;
    cmd.flag = flag;
    cmd.remark = (remark_len > 0).then(|| String::from_utf8_lossy(remark).into_owned());
    cmd.serialize_type = SerializeType::RocketMq;
    while ext.pos < ext.buf.len() {
        let key_len = ext.len_i16("ext key length")?;
        let key = ext.take(key_len, "ext key")?;
        let val_len = ext.len_i32("ext value length")?;
        let val = ext.take(val_len, "ext value")?;
        cmd.ext_fields
            .insert(String::from_utf8_lossy(key).into_owned(), String::from_utf8_lossy(val).into_owned());
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut cmd = RemotingCommand::request(310)
            .with_remark("héllo")
            .with_ext("topic", "T")
            .with_ext("queueId", 2)
            .with_serialize_type(SerializeType::RocketMq)
            .with_version(-3);
        cmd.opaque = -7;
        cmd.flag = 3;
        cmd.language = LanguageCode(250);
        let bytes = encode(&cmd).unwrap();
        assert_eq!(decode(&bytes).unwrap(), cmd);
    }

    #[test]
    fn empty_remark_is_none() {
        let cmd = RemotingCommand::request(1).with_remark("").with_serialize_type(SerializeType::RocketMq);
        let back = decode(&encode(&cmd).unwrap()).unwrap();
        assert_eq!(back.remark, None);
    }

    #[test]
    fn refuses_values_that_do_not_fit() {
        let err = encode(&RemotingCommand::request(40_000)).unwrap_err();
        assert!(err.to_string().contains("code = 40000"), "{err}");
        let err = encode(&RemotingCommand::request(1).with_version(-40_000)).unwrap_err();
        assert!(matches!(err, FrameError::Unencodable { field: "version", .. }), "{err}");
    }

    #[test]
    fn lengths_beyond_the_header_are_errors() {
        let mut bytes = encode(&RemotingCommand::request(1).with_remark("ab")).unwrap();
        // Remark length says 1 GiB.
        bytes[13..17].copy_from_slice(&(1_i32 << 30).to_be_bytes());
        let err = decode(&bytes).unwrap_err().to_string();
        assert!(err.contains("remark needs 1073741824 bytes"), "{err}");

        let mut bytes = encode(&RemotingCommand::request(1)).unwrap();
        bytes[17..21].copy_from_slice(&(-1_i32).to_be_bytes());
        let err = decode(&bytes).unwrap_err().to_string();
        assert!(err.contains("negative ext fields length -1"), "{err}");

        let err = decode(&[0u8; 20]).unwrap_err().to_string();
        assert!(err.contains("ext fields length needs 4 bytes"), "{err}");
    }
}
