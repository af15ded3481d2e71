//! Remoting frames written out byte by byte from spec section 9 (not produced by the encoder),
//! compared with what rmqha encodes and decodes.

use rmqha_core::remoting::{LanguageCode, RemotingCommand, SerializeType, request_code, response_code};

/// GET_ALL_TOPIC_CONFIG with a JSON header, as rmqha sends it: keys in fastjson's
/// alphabetical order, no remark, ext fields of the paged topic request, version 401
/// (MQVersion V4_9_4).
const JSON_REQUEST: &[u8] = b"\x00\x00\x00\x97\
\x00\x00\x00\x93\
{\"code\":21,\"extFields\":{\"maxTopicNum\":\"2000\",\"topicSeq\":\"0\"},\"flag\":0,\
\"language\":\"OTHER\",\"opaque\":7,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":401}";

/// A Java broker's JSON response: language JAVA, version 395, remark, a 5-byte body.
const JSON_RESPONSE_FROM_JAVA: &[u8] = b"\x00\x00\x00\x76\
\x00\x00\x00\x6d\
{\"code\":0,\"flag\":1,\"language\":\"JAVA\",\"opaque\":7,\"remark\":\"ok\",\
\"serializeTypeCurrentRPC\":\"JSON\",\"version\":395}\
hello";

/// GET_ALL_TOPIC_CONFIG with a ROCKETMQ header and one ext field.
const ROCKETMQ_REQUEST: &[u8] = &[
    0x00, 0x00, 0x00, 0x28, // length 40 = 4 + header 36
    0x01, 0x00, 0x00, 0x24, // serialize type 1 (ROCKETMQ), header length 36
    0x00, 0x15, // code 21
    0x07, // language OTHER (7)
    0x01, 0x91, // version 401 (MQVersion V4_9_4)
    0x00, 0x00, 0x00, 0x07, // opaque 7
    0x00, 0x00, 0x00, 0x00, // flag 0: request
    0x00, 0x00, 0x00, 0x00, // remark length 0: no remark
    0x00, 0x00, 0x00, 0x0F, // ext length 15
    0x00, 0x08, b't', b'o', b'p', b'i', b'c', b'S', b'e', b'q', // key "topicSeq"
    0x00, 0x00, 0x00, 0x01, b'0', // value "0"
];

/// SUCCESS with a ROCKETMQ header from a Java peer: remark "ok", one ext field, body "hi".
const ROCKETMQ_RESPONSE: &[u8] = &[
    0x00, 0x00, 0x00, 0x25, // length 37 = 4 + header 31 + body 2
    0x01, 0x00, 0x00, 0x1F, // serialize type 1, header length 31
    0x00, 0x00, // code 0 SUCCESS
    0x00, // language JAVA
    0x01, 0x8B, // version 395
    0x00, 0x00, 0x00, 0x07, // opaque 7
    0x00, 0x00, 0x00, 0x01, // flag 1: response
    0x00, 0x00, 0x00, 0x02, b'o', b'k', // remark "ok"
    0x00, 0x00, 0x00, 0x08, // ext length 8
    0x00, 0x01, b'a', // key "a"
    0x00, 0x00, 0x00, 0x01, b'1', // value "1"
    b'h', b'i', // body
];

fn topic_config_request(serialize_type: SerializeType) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)
        .with_serialize_type(serialize_type)
        .with_ext("topicSeq", 0);
    if serialize_type == SerializeType::Json {
        cmd.set_ext("maxTopicNum", 2000);
    }
    cmd.opaque = 7;
    cmd
}

#[test]
fn json_request_encodes_to_golden_bytes() {
    let cmd = topic_config_request(SerializeType::Json);
    assert_eq!(cmd.encode().unwrap(), JSON_REQUEST);
}

#[test]
fn json_request_decodes_from_golden_bytes() {
    let cmd = RemotingCommand::decode(JSON_REQUEST).unwrap();
    assert_eq!(cmd, topic_config_request(SerializeType::Json));
    // OTHER, which every RocketMQ release decodes: RUST exists since 4.9.4 only, and an
    // older peer's fastjson fails on an enum name it does not know.
    assert_eq!(cmd.language, LanguageCode::OTHER);
    assert_eq!(cmd.ext_i32("maxTopicNum").unwrap(), 2000);
}

#[test]
fn json_response_from_java_decodes() {
    let cmd = RemotingCommand::decode(JSON_RESPONSE_FROM_JAVA).unwrap();
    assert_eq!(cmd.code, response_code::SUCCESS);
    assert_eq!(cmd.language, LanguageCode::JAVA);
    assert_eq!(cmd.version, 395);
    assert_eq!(cmd.opaque, 7);
    assert!(cmd.is_response());
    assert!(!cmd.is_oneway());
    assert_eq!(cmd.remark.as_deref(), Some("ok"));
    assert!(cmd.ext_fields.is_empty());
    assert_eq!(cmd.serialize_type, SerializeType::Json);
    assert_eq!(cmd.body, b"hello");
    // And rmqha writes the same bytes for the same command.
    assert_eq!(cmd.encode().unwrap(), JSON_RESPONSE_FROM_JAVA);
}

#[test]
fn rocketmq_request_encodes_to_golden_bytes() {
    let cmd = topic_config_request(SerializeType::RocketMq);
    assert_eq!(cmd.encode().unwrap(), ROCKETMQ_REQUEST);
}

#[test]
fn rocketmq_request_decodes_from_golden_bytes() {
    let cmd = RemotingCommand::decode(ROCKETMQ_REQUEST).unwrap();
    assert_eq!(cmd, topic_config_request(SerializeType::RocketMq));
}

#[test]
fn rocketmq_response_round_trips_golden_bytes() {
    let cmd = RemotingCommand::decode(ROCKETMQ_RESPONSE).unwrap();
    assert_eq!(cmd.code, response_code::SUCCESS);
    assert_eq!(cmd.language, LanguageCode::JAVA);
    assert_eq!(cmd.version, 395);
    assert_eq!(cmd.opaque, 7);
    assert!(cmd.is_response());
    assert_eq!(cmd.remark.as_deref(), Some("ok"));
    assert_eq!(cmd.ext("a"), Some("1"));
    assert_eq!(cmd.serialize_type, SerializeType::RocketMq);
    assert_eq!(cmd.body, b"hi");

    let mut request = RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)
        .with_serialize_type(SerializeType::RocketMq);
    request.opaque = 7;
    let mut built = RemotingCommand::response_to(&request, response_code::SUCCESS, Some("ok"))
        .with_ext("a", 1)
        .with_body(b"hi".to_vec())
        .with_version(395);
    built.language = LanguageCode::JAVA;
    assert_eq!(built.encode().unwrap(), ROCKETMQ_RESPONSE);
}

#[test]
fn json_header_in_any_key_order_with_numeric_ext_values() {
    // What a non-Java client might send: keys shuffled, an unknown key, numbers in extFields.
    let header = br#"{"opaque":3,"extFields":{"queueId":1,"queueOffset":9007199254740993,"sysFlag":0},"language":"CPP","flag":2,"whatever":[1,{"x":null}],"code":11}"#;
    let mut frame = Vec::new();
    frame.extend_from_slice(&(4 + header.len() as i32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
    frame.extend_from_slice(header);
    let cmd = RemotingCommand::decode(&frame).unwrap();
    assert_eq!(cmd.code, request_code::PULL_MESSAGE);
    assert_eq!(cmd.language, LanguageCode::CPP);
    assert!(cmd.is_oneway());
    assert_eq!(cmd.ext_i32("queueId").unwrap(), 1);
    assert_eq!(cmd.ext_i64("queueOffset").unwrap(), 9_007_199_254_740_993);
    assert_eq!(cmd.version, 0);
    assert_eq!(cmd.remark, None);
}
