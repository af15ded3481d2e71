//! Property tests of the remoting codec: any bytes decode to a command or an error without
//! panicking, and every encodable command survives a round trip in both header formats.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rmqha_core::remoting::{DEFAULT_MAX_FRAME, LanguageCode, RemotingCommand, SerializeType, read_frame};

/// A frame whose length fields are consistent, around arbitrary header bytes, so the header
/// decoders (not just the length checks) see garbage.
fn framed(type_byte: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    frame.extend_from_slice(&((u32::from(type_byte) << 24) | header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    frame.extend_from_slice(body);
    frame
}

fn command(serialize_type: SerializeType) -> impl Strategy<Value = RemotingCommand> {
    // A ROCKETMQ header holds code and version in an i16; a JSON header names the language,
    // so only named languages survive it.
    let (code, version) = match serialize_type {
        SerializeType::Json => (any::<i32>().boxed(), any::<i32>().boxed()),
        SerializeType::RocketMq => {
            (any::<i16>().prop_map(i32::from).boxed(), any::<i16>().prop_map(i32::from).boxed())
        }
    };
    let language = match serialize_type {
        SerializeType::Json => (0u8..=13).boxed(),
        SerializeType::RocketMq => any::<u8>().boxed(),
    };
    (
        code,
        language,
        version,
        any::<i32>(),
        any::<i32>(),
        proptest::option::of(".{1,40}"),
        proptest::collection::btree_map(".{0,20}", ".{0,40}", 0..6),
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(move |(code, language, version, opaque, flag, remark, ext, body)| {
            let mut cmd = RemotingCommand::request(code)
                .with_serialize_type(serialize_type)
                .with_version(version)
                .with_body(body);
            cmd.language = LanguageCode(language);
            cmd.opaque = opaque;
            cmd.flag = flag;
            cmd.remark = remark;
            cmd.ext_fields = ext.into_iter().collect::<BTreeMap<_, _>>();
            cmd
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = RemotingCommand::decode(&bytes);
        let mut reader = &bytes[..];
        // Keep reading until the stream is exhausted or broken, as a connection would.
        while let Ok(Some(_)) = read_frame(&mut reader, DEFAULT_MAX_FRAME) {}
    }

    #[test]
    fn arbitrary_headers_never_panic(
        type_byte in 0u8..=2,
        header in proptest::collection::vec(any::<u8>(), 0..256),
        body in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let _ = RemotingCommand::decode(&framed(type_byte, &header, &body));
    }

    #[test]
    fn json_shaped_headers_never_panic(header in r#"\{("[a-zA-Z]{1,16}":(-?[0-9]{1,12}|"[^"\\]{0,8}"|null|true|\{\}|\[\]),?){0,8}\}"#) {
        let _ = RemotingCommand::decode(&framed(0, header.as_bytes(), b""));
    }

    #[test]
    fn corrupting_a_valid_frame_never_panics(
        cmd in command(SerializeType::RocketMq),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = cmd.encode().unwrap();
        for (index, value) in flips {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        let _ = RemotingCommand::decode(&bytes);
    }

    #[test]
    fn json_round_trip(cmd in command(SerializeType::Json)) {
        let bytes = cmd.encode().unwrap();
        prop_assert_eq!(RemotingCommand::decode(&bytes).unwrap(), cmd);
    }

    #[test]
    fn rocketmq_round_trip(cmd in command(SerializeType::RocketMq)) {
        let bytes = cmd.encode().unwrap();
        prop_assert_eq!(RemotingCommand::decode(&bytes).unwrap(), cmd.clone());
        let mut reader = &bytes[..];
        prop_assert_eq!(read_frame(&mut reader, DEFAULT_MAX_FRAME).unwrap(), Some(cmd));
        prop_assert!(reader.is_empty());
    }
}
