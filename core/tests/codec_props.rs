//! Properties of the record codec: no input makes the decoder or the validator panic (they run
//! on whatever a crashed disk or a master's byte stream holds), and every message the encoder
//! accepts comes back field for field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use proptest::prelude::*;
use rmqha_core::message::codec::record_identity;
use rmqha_core::message::properties;
use rmqha_core::message::{
    CheckOptions, CheckResult, Message, PreparedMessage, check_record, crc32_masked, decode_record,
    java_string_hash,
};

const DELAYS: &[i64] = &[1000, 5000];

fn validate(buf: &[u8]) {
    let _ = decode_record(buf);
    let _ = record_identity(buf);
    for check_crc in [true, false] {
        let _ = check_record(buf, &CheckOptions { check_crc, delay_levels_ms: DELAYS });
    }
    let _ = properties::decode(buf);
}

fn host() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), p)),
    ]
}

/// Text without the two separator bytes, possibly non-ASCII.
fn prop_text(min: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            any::<char>().prop_filter("separator", |c| *c != '\u{1}' && *c != '\u{2}'),
            "[a-zA-Z0-9 ]".prop_map(|s| s.chars().next().unwrap())
        ],
        min..12,
    )
    .prop_map(|v| v.into_iter().collect())
}

fn message() -> impl Strategy<Value = Message> {
    (
        "[%|a-zA-Z0-9_-]{1,127}",
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..600),
        any::<i32>(),
        proptest::collection::vec((prop_text(1), prop_text(1)), 0..5),
        1i64..i64::MAX,
        host(),
        prop_oneof![Just(0), Just(0x4), Just(0x8), Just(0xC), Just(0x1), Just(0x2)],
        any::<i32>(),
        any::<i64>(),
    )
        .prop_map(
            |(topic, queue_id, body, flag, props, born_ts, born, sys_flag, reconsume, prepared)| Message {
                topic,
                queue_id,
                body,
                flag,
                properties: props,
                born_timestamp: born_ts,
                born_host: Some(born),
                sys_flag,
                reconsume_times: reconsume,
                prepared_transaction_offset: prepared,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        validate(&buf);
    }

    #[test]
    fn record_headers_with_arbitrary_tails_never_panic(
        magic in prop_oneof![Just(0xDAA3_20A7u32), Just(0xDAA3_20ABu32), Just(0xCBD4_3194u32), any::<u32>()],
        size in prop_oneof![any::<i32>(), 0i32..300],
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut buf = size.to_be_bytes().to_vec();
        buf.extend(magic.to_be_bytes());
        buf.extend(tail);
        validate(&buf);
    }

    #[test]
    fn encode_then_decode_round_trips(
        msg in message(),
        store in host(),
        queue_offset in any::<i64>(),
        phy in 0i64..i64::MAX,
        store_ts in any::<i64>(),
    ) {
        let p = PreparedMessage::prepare(&msg, &store, 1 << 20, 5).expect("encodable");
        let mut buf = vec![0u8; p.total_len + 7];
        p.write(&mut buf[..p.total_len], queue_offset, phy, store_ts, &store);
        let v = decode_record(&buf).expect("decodes");
        prop_assert_eq!(v.total_size as usize, p.total_len);
        prop_assert_eq!(v.topic, msg.topic.as_bytes());
        prop_assert_eq!(v.queue_id, msg.queue_id);
        prop_assert_eq!(v.flag, msg.flag);
        prop_assert_eq!(v.body, &msg.body[..]);
        prop_assert_eq!(v.body_crc as u32, crc32_masked(&msg.body));
        prop_assert_eq!(v.queue_offset, queue_offset);
        prop_assert_eq!(v.physical_offset, phy);
        prop_assert_eq!(v.born_timestamp, msg.born_timestamp);
        prop_assert_eq!(v.born_host, msg.born_host.unwrap());
        prop_assert_eq!(v.store_timestamp, store_ts);
        prop_assert_eq!(v.store_host, store);
        prop_assert_eq!(v.reconsume_times, msg.reconsume_times);
        prop_assert_eq!(v.prepared_transaction_offset, msg.prepared_transaction_offset);
        prop_assert_eq!(v.sys_flag & 0xF, msg.sys_flag & 0xF);
        prop_assert_eq!(v.sys_flag & 0x10 != 0, msg.born_host.unwrap().is_ipv6());
        prop_assert_eq!(v.sys_flag & 0x20 != 0, store.is_ipv6());
        prop_assert_eq!(properties::decode(v.properties), msg.properties.clone());
        // What a read checks its records with: the same fields, without decoding the rest.
        let id = record_identity(&buf).expect("identified");
        prop_assert_eq!((id.total_size, id.queue_id, id.queue_offset, id.topic), (v.total_size, v.queue_id, v.queue_offset, v.topic));
        match check_record(&buf, &CheckOptions { check_crc: true, delay_levels_ms: DELAYS }) {
            CheckResult::Message(req) => {
                prop_assert_eq!(req.msg_size as usize, p.total_len);
                let tags = msg.tags().map(|t| java_string_hash(t) as i64).unwrap_or(0);
                prop_assert_eq!(req.tags_code, tags);
            }
            other => prop_assert!(false, "encoded record fails validation: {:?}", other),
        }
        // Every prefix is incomplete or invalid, never a message and never a panic.
        for cut in [0, 1, 7, 8, 84, p.total_len / 2, p.total_len - 1] {
            let r = check_record(&buf[..cut.min(p.total_len - 1)], &CheckOptions { check_crc: true, delay_levels_ms: DELAYS });
            prop_assert!(!matches!(r, CheckResult::Message(_)), "prefix of {} bytes: {:?}", cut, r);
        }
    }

    #[test]
    fn damaged_records_never_panic(msg in message(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let p = PreparedMessage::prepare(&msg, &host, 1 << 20, 5).unwrap();
        let mut buf = vec![0u8; p.total_len];
        p.write(&mut buf, 0, 0, 1, &host);
        for (at, x) in flips {
            let i = at % buf.len();
            buf[i] ^= x;
        }
        validate(&buf);
    }
}
