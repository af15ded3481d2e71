//! Golden bytes for the CommitLog record format (spec section 1), written out field by field
//! from the spec's table, never produced by the encoder under test: what `PreparedMessage`
//! writes must be byte-identical to what RocketMQ writes, and what RocketMQ 5.x writes (v2
//! records, BLANK fillers) must decode.

use std::net::SocketAddr;

use rmqha_core::message::codec::{BLANK_HEADER_LEN, record_len, write_blank};
use rmqha_core::message::properties;
use rmqha_core::message::{
    BLANK_MAGIC_CODE, CheckOptions, CheckResult, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, Message,
    PreparedMessage, check_record, crc32_masked, decode_offset_msg_id, decode_record, java_string_hash,
    offset_msg_id,
};
use rmqha_core::store::index::index_key_hash;

/// A bitwise CRC-32 (IEEE, reflected 0xEDB88320), written from the definition so the test does
/// not trust the library the code uses.
fn reference_crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

const CHECK: CheckOptions<'static> = CheckOptions { check_crc: true, delay_levels_ms: &[] };

fn encode(msg: &Message, store_host: SocketAddr, queue_offset: i64, phy: i64, store_ts: i64) -> Vec<u8> {
    let p = PreparedMessage::prepare(msg, &store_host, 4 << 20, 999).expect("valid message");
    let mut out = vec![0xEE; p.total_len];
    p.write(&mut out, queue_offset, phy, store_ts, &store_host);
    out
}

#[test]
fn crc_is_ieee_masked_to_31_bits() {
    // The check value of CRC-32/IEEE has its top bit set, so the mask shows.
    assert_eq!(reference_crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32_masked(b"123456789"), 0x4BF4_3926);
    assert_eq!(crc32_masked(b""), 0);
    for body in [&b"Hello RocketMQ"[..], &[0xFF; 1000], b"x"] {
        assert_eq!(crc32_masked(body), reference_crc32(body) & 0x7FFF_FFFF);
    }
}

#[test]
fn v1_ipv4_record_with_tags_and_keys_is_byte_exact() {
    let store_host: SocketAddr = "192.168.1.2:10911".parse().unwrap();
    let mut msg =
        Message::new("TopicTest", &b"123456789"[..]).with_queue(3).with_tags("TagA").with_keys(&["k1", "k2"]);
    msg.flag = 7;
    msg.born_timestamp = 1_700_000_000_000;
    msg.born_host = Some("10.0.0.1:50000".parse().unwrap());
    msg.reconsume_times = 2;
    msg.prepared_transaction_offset = 0x0102_0304_0506_0708;

    // Spec 1.2, one field per line. 84 bytes of fixed header with IPv4 hosts, then
    // 4 + 9 (body) + 1 + 9 (topic) + 2 + 21 (properties) = 130 bytes.
    let mut want: Vec<u8> = Vec::new();
    want.extend([0x00, 0x00, 0x00, 0x82]); // 1 TOTALSIZE = 130
    want.extend([0xDA, 0xA3, 0x20, 0xA7]); // 2 MAGICCODE v1
    want.extend([0x4B, 0xF4, 0x39, 0x26]); // 3 BODYCRC = crc32("123456789") & 0x7FFFFFFF
    want.extend([0x00, 0x00, 0x00, 0x03]); // 4 QUEUEID
    want.extend([0x00, 0x00, 0x00, 0x07]); // 5 FLAG
    want.extend([0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2A]); // 6 QUEUEOFFSET = 42
    want.extend([0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00]); // 7 PHYSICALOFFSET = 4096
    want.extend([0x00, 0x00, 0x00, 0x00]); // 8 SYSFLAG: IPv4 hosts, no tx, no compression
    want.extend([0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00]); // 9 BORNTIMESTAMP 1700000000000
    want.extend([10, 0, 0, 1, 0x00, 0x00, 0xC3, 0x50]); // 10 BORNHOST 10.0.0.1 : 50000
    want.extend([0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B]); // 11 STORETIMESTAMP 1700000000123
    want.extend([192, 168, 1, 2, 0x00, 0x00, 0x2A, 0x9F]); // 12 STOREHOST 192.168.1.2 : 10911
    want.extend([0x00, 0x00, 0x00, 0x02]); // 13 RECONSUMETIMES
    want.extend([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]); // 14 PREPARED_TRANSACTION_OFFSET
    assert_eq!(want.len(), 84, "BODYLENGTH sits at 84 with IPv4 hosts");
    want.extend([0x00, 0x00, 0x00, 0x09]); // 15 BODYLENGTH
    want.extend(b"123456789"); //    BODY
    want.push(9); // 16 TOPICLENGTH (1 byte in v1)
    want.extend(b"TopicTest"); //    TOPIC
    want.extend([0x00, 0x15]); // 17 PROPERTIESLENGTH = 21
    want.extend(b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02"); // key 0x01 value 0x02, trailing 0x02
    assert_eq!(want.len(), 130);
    assert_eq!(record_len(9, 9, 21, false, false), 130);

    let got = encode(&msg, store_host, 42, 4096, 1_700_000_000_123);
    assert_eq!(got, want);

    // And it reads back as the spec says.
    let v = decode_record(&want).unwrap();
    assert_eq!((v.total_size, v.magic, v.queue_id, v.flag), (130, MESSAGE_MAGIC_CODE, 3, 7));
    assert_eq!((v.queue_offset, v.physical_offset, v.sys_flag), (42, 4096, 0));
    assert_eq!(v.born_host, "10.0.0.1:50000".parse().unwrap());
    assert_eq!(v.store_host, store_host);
    assert_eq!(v.store_timestamp, 1_700_000_000_123);
    assert_eq!(v.prepared_transaction_offset, 0x0102_0304_0506_0708);
    assert_eq!((v.body, v.topic), (&b"123456789"[..], &b"TopicTest"[..]));
    let CheckResult::Message(req) = check_record(&want, &CHECK) else { panic!("valid record") };
    assert_eq!(req.topic, "TopicTest");
    assert_eq!((req.commit_log_offset, req.msg_size, req.consume_queue_offset), (4096, 130, 42));
    assert_eq!(req.tags_code, 2_598_919, "Java \"TagA\".hashCode()");
    assert_eq!(req.keys, Some("k1 k2"));
    assert_eq!(req.uniq_key, None);
}

#[test]
fn v1_ipv6_record_sets_host_flags_and_20_byte_hosts() {
    let store_host: SocketAddr = "[fe80::1]:10911".parse().unwrap();
    let mut msg = Message::new("T6", &b"v6"[..]);
    msg.born_timestamp = 1;
    msg.born_host = Some("[2001:db8::1]:50000".parse().unwrap());
    msg.sys_flag = 0x30; // the encoder decides the host bits itself, whatever the caller says

    let mut want: Vec<u8> = Vec::new();
    want.extend([0x00, 0x00, 0x00, 0x77]); // TOTALSIZE = 84 + 12 + 12 + 4 + 2 + 1 + 2 + 2 = 119
    want.extend([0xDA, 0xA3, 0x20, 0xA7]); // magic v1
    want.extend((reference_crc32(b"v6") & 0x7FFF_FFFF).to_be_bytes()); // BODYCRC
    want.extend([0, 0, 0, 0]); // QUEUEID
    want.extend([0, 0, 0, 0]); // FLAG
    want.extend([0, 0, 0, 0, 0, 0, 0, 5]); // QUEUEOFFSET = 5
    want.extend([0, 0, 0, 0, 0, 0, 0x20, 0]); // PHYSICALOFFSET = 8192
    want.extend([0, 0, 0, 0x30]); // SYSFLAG: BORNHOST_V6 | STOREHOSTADDRESS_V6
    want.extend([0, 0, 0, 0, 0, 0, 0, 1]); // BORNTIMESTAMP
    want.extend([0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]); // 2001:db8::1
    want.extend([0x00, 0x00, 0xC3, 0x50]); // port 50000
    want.extend([0, 0, 0, 0, 0, 0, 0, 9]); // STORETIMESTAMP = 9 (@68 with an IPv6 born host)
    want.extend([0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]); // fe80::1
    want.extend([0x00, 0x00, 0x2A, 0x9F]); // port 10911
    want.extend([0, 0, 0, 0]); // RECONSUMETIMES
    want.extend([0, 0, 0, 0, 0, 0, 0, 0]); // PREPARED_TRANSACTION_OFFSET
    want.extend([0, 0, 0, 2]); // BODYLENGTH
    want.extend(b"v6");
    want.push(2);
    want.extend(b"T6");
    want.extend([0, 0]); // no properties
    assert_eq!(want.len(), 119);
    assert_eq!(&want[68..76], &9i64.to_be_bytes(), "store timestamp at 48 + 20");

    assert_eq!(encode(&msg, store_host, 5, 8192, 9), want);
    let v = decode_record(&want).unwrap();
    assert_eq!(v.born_host, "[2001:db8::1]:50000".parse().unwrap());
    assert_eq!(v.store_host, store_host);
    assert!(matches!(check_record(&want, &CHECK), CheckResult::Message(_)));
}

#[test]
fn v2_record_with_two_byte_topic_length_decodes() {
    // RocketMQ 5.x writes v2 for topics longer than 127 UTF-16 units (long retry topics).
    let topic = format!("%RETRY%{}", "g".repeat(150));
    let body = b"retry body";
    let props = b"TAGS\x01a\xF0\x9F\x98\x80b\x02";
    let total = 84 + 4 + body.len() + 2 + topic.len() + 2 + props.len();
    let mut rec: Vec<u8> = Vec::new();
    rec.extend((total as i32).to_be_bytes());
    rec.extend([0xDA, 0xA3, 0x20, 0xAB]); // MESSAGE_MAGIC_CODE_V2
    rec.extend((reference_crc32(body) & 0x7FFF_FFFF).to_be_bytes());
    rec.extend(1i32.to_be_bytes()); // queue id
    rec.extend(0i32.to_be_bytes()); // flag
    rec.extend(77i64.to_be_bytes()); // queue offset
    rec.extend(123_456i64.to_be_bytes()); // physical offset
    rec.extend(0i32.to_be_bytes()); // sys flag
    rec.extend(1i64.to_be_bytes()); // born ts
    rec.extend([127, 0, 0, 1, 0, 0, 0x30, 0x39]); // born host 127.0.0.1:12345
    rec.extend(2i64.to_be_bytes()); // store ts
    rec.extend([127, 0, 0, 1, 0, 0, 0x2A, 0x9F]); // store host 127.0.0.1:10911
    rec.extend(0i32.to_be_bytes()); // reconsume times
    rec.extend(0i64.to_be_bytes()); // prepared tx offset
    rec.extend((body.len() as i32).to_be_bytes());
    rec.extend(body);
    rec.extend((topic.len() as i16).to_be_bytes()); // 2-byte topic length
    rec.extend(topic.as_bytes());
    rec.extend((props.len() as i16).to_be_bytes());
    rec.extend(props);
    assert_eq!(rec.len(), total);
    rec.extend([0u8; 16]); // bytes after the record do not matter

    let v = decode_record(&rec).unwrap();
    assert_eq!(v.magic, MESSAGE_MAGIC_CODE_V2);
    assert_eq!(v.topic, topic.as_bytes());
    assert_eq!(v.body, body);
    assert_eq!(v.total_size as usize, total);
    let CheckResult::Message(req) = check_record(&rec, &CHECK) else { panic!("valid v2 record") };
    assert_eq!(req.topic, topic);
    assert_eq!((req.commit_log_offset, req.consume_queue_offset, req.queue_id), (123_456, 77, 1));
    assert_eq!(req.tags_code, 57_849_694, "Java \"a\\uD83D\\uDE00b\".hashCode()");

    // The same bytes with the v1 magic are not a record: the topic length byte would be 0.
    let mut as_v1 = rec.clone();
    as_v1[4..8].copy_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
    assert!(decode_record(&as_v1).is_err());
}

/// RocketMQ 5's `enabledAppendPropCRC`: the properties end with `__CRC32#`, 0x01, the CRC-32
/// (masked to 31 bits) of every record byte before that property as ten decimal digits, least
/// significant first (`MessageDecoder.createCrc32`), and 0x02. A `__CRC32#` a client sent is
/// never written: only the broker's, last.
#[test]
fn a_record_crc_ends_the_properties_in_rocketmqs_form() {
    let store_host: SocketAddr = "192.168.1.2:10911".parse().unwrap();
    let mut msg = Message::new("TopicTest", &b"123456789"[..]).with_queue(3).with_tags("TagA");
    msg.born_timestamp = 1_700_000_000_000;
    msg.set_property("__CRC32#", "1234567890"); // forged: dropped
    let plain = encode(&msg, store_host, 42, 4096, 1_700_000_000_123);
    assert_eq!(properties::get(decode_record(&plain).unwrap().properties, "__CRC32#"), None);

    let p = PreparedMessage::prepare(&msg, &store_host, 4 << 20, 999).unwrap().with_record_crc(true).unwrap();
    assert_eq!(p.total_len, plain.len() + 20);
    let mut rec = vec![0xEE; p.total_len];
    p.write(&mut rec, 42, 4096, 1_700_000_000_123, &store_host);
    // Everything before the property is the plain record with its lengths grown by 20.
    let (head, tail) = rec.split_at(rec.len() - 20);
    let mut want_head = plain.clone();
    want_head[..4].copy_from_slice(&(plain.len() as i32 + 20).to_be_bytes());
    let props_len_at = plain.len() - 2 - b"TAGS\x01TagA\x02".len();
    want_head[props_len_at..props_len_at + 2]
        .copy_from_slice(&(b"TAGS\x01TagA\x02".len() as i16 + 20).to_be_bytes());
    assert_eq!(head, &want_head[..]);
    let crc = reference_crc32(head) & 0x7FFF_FFFF;
    let digits: String = format!("{crc:010}").chars().rev().collect();
    let mut want_tail = b"__CRC32#\x01".to_vec();
    want_tail.extend(digits.as_bytes());
    want_tail.push(0x02);
    assert_eq!(tail, &want_tail[..], "crc {crc}");
    assert_eq!(rmqha_core::message::codec::record_crc(decode_record(&rec).unwrap().properties), Some(crc));

    // Checked with the body CRC: a flipped header byte the body CRC cannot see is caught.
    assert!(matches!(check_record(&rec, &CHECK), CheckResult::Message(_)));
    let mut flipped = rec.clone();
    flipped[12] ^= 1; // QUEUEID
    assert!(matches!(check_record(&flipped, &CHECK), CheckResult::Invalid { skip: None }));
    let unchecked = CheckOptions { check_crc: false, delay_levels_ms: &[] };
    assert!(matches!(check_record(&flipped, &unchecked), CheckResult::Message(_)));
    // A record without the property (written before, or by RocketMQ 4) is checked as before.
    assert!(matches!(check_record(&plain, &CHECK), CheckResult::Message(_)));
}

#[test]
fn blank_record_fills_the_rest_of_a_file() {
    let mut buf = vec![0u8; 256];
    write_blank(&mut buf, 256);
    assert_eq!(&buf[..BLANK_HEADER_LEN], &[0x00, 0x00, 0x01, 0x00, 0xCB, 0xD4, 0x31, 0x94]);
    assert_eq!(BLANK_MAGIC_CODE, 0xCBD4_3194_u32 as i32);
    assert_eq!(check_record(&buf, &CHECK), CheckResult::Blank);
    // Only the 8-byte header is needed to recognise it.
    assert_eq!(check_record(&buf[..8], &CHECK), CheckResult::Blank);
    // A BLANK is not a message.
    assert!(decode_record(&buf).is_err());
}

#[test]
fn invalid_records_say_whether_they_can_be_skipped() {
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let rec = encode(&Message::new("T", &b"body"[..]), host, 0, 0, 1);
    // Body CRC mismatch: invalid when checking CRCs (recovery), fine when not (dispatch).
    let mut bad_crc = rec.clone();
    bad_crc[8] ^= 0x01;
    assert_eq!(check_record(&bad_crc, &CHECK), CheckResult::Invalid { skip: None });
    let no_crc = CheckOptions { check_crc: false, delay_levels_ms: &[] };
    assert!(matches!(check_record(&bad_crc, &no_crc), CheckResult::Message(_)));
    // Fields that do not add up to TOTALSIZE: a sound header, skip the record (a bug).
    let mut long = rec.clone();
    long.extend([0u8; 4]);
    let n = long.len() as i32;
    long[..4].copy_from_slice(&n.to_be_bytes());
    assert_eq!(check_record(&long, &CHECK), CheckResult::Invalid { skip: Some(n) });
    // Zeros (a torn tail) and a bad magic are not records at all.
    assert_eq!(check_record(&[0u8; 64], &CHECK), CheckResult::Invalid { skip: None });
    let mut bad_magic = rec.clone();
    bad_magic[4] = 0;
    assert_eq!(check_record(&bad_magic, &CHECK), CheckResult::Invalid { skip: None });
    // A record cut short is incomplete (a slave's tail waits for more).
    assert_eq!(check_record(&rec[..rec.len() - 1], &CHECK), CheckResult::Incomplete);
}

#[test]
fn properties_use_0x01_and_0x02_with_javas_parser_rules() {
    let enc = properties::encode(&[("TAGS", "TagA"), ("KEYS", "k1 k2"), ("NULL", ""), ("UNIQ_KEY", "AC1")]);
    assert_eq!(enc, b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AC1\x02", "empty values are skipped");
    assert_eq!(properties::get(&enc, "UNIQ_KEY"), Some(&b"AC1"[..]));
    // Parser: split on 0x02; segments under 3 bytes dropped; the first 0x01 splits; empty keys
    // or values dropped; no trailing 0x02 needed.
    let parsed = properties::decode(b"\x02ab\x02\x01v\x02k\x01\x02x\x01y\x01z\x02last\x01one");
    assert_eq!(parsed, vec![("x".into(), "y\u{1}z".into()), ("last".into(), "one".into())]);
    // Keys and values with a separator byte cannot be stored.
    let host: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let bad = Message::new("T", &b""[..]).with_property("k", "a\u{2}b");
    assert!(PreparedMessage::prepare(&bad, &host, 1024, 0).is_err());
    let bad_topic = Message::new("a\u{1}b", &b""[..]);
    assert!(PreparedMessage::prepare(&bad_topic, &host, 1024, 0).is_err());
}

#[test]
fn java_string_hash_counts_utf16_units() {
    assert_eq!(java_string_hash("TagA"), 2_598_919);
    // U+1F600 is the surrogate pair D83D DE00, hashed as two units.
    assert_eq!(java_string_hash("\u{1F600}"), 1_772_899);
    assert_eq!(java_string_hash("a\u{1F600}b"), 57_849_694);
    // U+10437 (a pair) then U+00E9 (one unit, two UTF-8 bytes).
    assert_eq!(java_string_hash("\u{10437}\u{e9}"), 54_888_275);
    // Wraps like a Java int; the index takes abs(), with abs(MIN_VALUE) = 0 as in RocketMQ.
    assert_eq!(java_string_hash("TopicTest#order-1"), -1_829_193_424);
    assert_eq!(index_key_hash("TopicTest#order-1"), 1_829_193_424);
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(index_key_hash("polygenelubricants"), 0);
    // The tags code written to the ConsumeQueue uses the same hash.
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let rec = encode(&Message::new("T", &b"x"[..]).with_tags("\u{10437}\u{e9}"), host, 0, 0, 1);
    let CheckResult::Message(req) = check_record(&rec, &CHECK) else { panic!() };
    assert_eq!(req.tags_code, 54_888_275);
    let tagged = Message::new("T", &b"x"[..]).with_tags("a\u{1F600}b");
    let p = PreparedMessage::prepare(&tagged, &host, 9, 0).unwrap();
    assert_eq!(p.tags_code, 57_849_694);
}

#[test]
fn offset_msg_id_is_host_port_and_offset_in_uppercase_hex() {
    let v4: SocketAddr = "192.168.1.2:10911".parse().unwrap();
    //                   C0A80102 = 192.168.1.2, 00002A9F = 10911, then the i64 offset
    assert_eq!(offset_msg_id(&v4, 4096), "C0A8010200002A9F0000000000001000");
    assert_eq!(decode_offset_msg_id("C0A8010200002A9F0000000000001000"), Some((v4, 4096)));
    let v6: SocketAddr = "[fe80::1]:10911".parse().unwrap();
    assert_eq!(
        offset_msg_id(&v6, 1 << 32),
        "FE800000000000000000000000000001".to_string() + "00002A9F" + "0000000100000000"
    );
    assert_eq!(decode_offset_msg_id(&offset_msg_id(&v6, 1 << 32)), Some((v6, 1 << 32)));
    assert_eq!(decode_offset_msg_id("C0A8010200002A9F000000000000100"), None, "31 digits");
}
