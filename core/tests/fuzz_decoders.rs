//! Fuzzing every decoder with random bytes and with mutated valid encodings: CommitLog records
//! (`check_record`, `decode_record`), HA frames as the slave parses them and HA reports as the
//! master reads them, remoting frames (`RemotingCommand::decode`, `read_frame`), properties
//! files (the parser and `BrokerConfig`), the metadata tables' lenient JSON reader, message
//! properties and message ids. Never a panic; each test runs under a watchdog, so a hang fails
//! instead of blocking the suite.

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rmqha_core::config::parse_properties;
use rmqha_core::ha::frame::{ParsedFrame, ReportReader, encode_header, parse_frame};
use rmqha_core::message::{
    CheckOptions, CheckResult, check_record, decode_offset_msg_id, decode_record, properties,
};
use rmqha_core::metadata::{
    ConsumerOffsetWrapper, DelayOffsetWrapper, SubscriptionGroupWrapper, TopicConfigWrapper,
};
use rmqha_core::remoting::{RemotingCommand, SerializeType, read_frame};
use rmqha_core::{BrokerConfig, Message, MessageStore};

/// Runs `f` on a thread and fails if it does not finish in `limit` (a hang), re-raising its
/// panic if it panicked.
fn with_deadline(limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p)
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not finish within {limit:?}: a decoder hangs"),
    }
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, max_shrink_iters: 500, failure_persistence: None, ..Config::default() })
}

/// Mutations of a valid encoding: byte flips, overwrites with boundary values, truncation,
/// extension, and spliced duplicates.
fn mutated(valid: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let n = valid.len();
    (
        0..n,
        prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..6), 0..6),
        prop::option::of(any::<usize>()),
        prop::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(move |(i, edits, cut, tail)| {
            let mut b = valid[i].clone();
            for (at, v, kind) in edits {
                if b.is_empty() {
                    break;
                }
                let at = at % b.len();
                match kind {
                    0 => b[at] ^= v.max(1),
                    1 => b[at] = v,
                    2 => b[at] = 0xFF,
                    3 => b[at] = 0x7F,
                    4 => b[at] = 0x80,
                    _ => {
                        // A 4-byte length field set to an extreme.
                        let end = (at + 4).min(b.len());
                        let vals = [0u8, 0xFF, 0x7F, 0x80];
                        for (k, x) in b[at..end].iter_mut().enumerate() {
                            *x = vals[(v as usize + k) % 4];
                        }
                    }
                }
            }
            if let Some(c) = cut {
                let len = b.len();
                b.truncate(c % (len + 1));
            }
            b.extend_from_slice(&tail);
            b
        })
}

fn bytes_or_mutated(valid: Vec<Vec<u8>>, max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![1 => prop::collection::vec(any::<u8>(), 0..max), 3 => mutated(valid)]
}

/// Real records, written by a store: plain, tagged, keyed, with properties, empty and large
/// bodies, long topics, batches.
fn records() -> &'static Vec<Vec<u8>> {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut c = BrokerConfig::default();
        c.set("storePathRootDir", dir.path().to_str().unwrap()).unwrap();
        c.set("mappedFileSizeCommitLog", "1048576").unwrap();
        c.set("brokerIP1", "127.0.0.1").unwrap();
        let store = MessageStore::open(c).unwrap();
        store.start().unwrap();
        let msgs = vec![
            Message::new("T", b"x".to_vec()),
            Message::new("TopicTagged", b"hello".to_vec()).with_tags("TagA").with_queue(3),
            Message::new("TopicKeys", vec![0u8; 300])
                .with_keys(&["k1", "k2"])
                .with_property("UNIQ_KEY", "ABCD"),
            Message::new("TopicProps", b"{}".to_vec()).with_property("DELAY", "3").with_property("a", "b"),
            Message::new("SCHEDULE_TOPIC_XXXX", b"d".to_vec()).with_property("DELAY", "2"),
            Message::new("E", Vec::new()),
            Message::new("%RETRY%".to_string() + &"g".repeat(120), vec![7u8; 5000]),
        ];
        let mut out = Vec::new();
        for m in &msgs {
            let r = store.put_message_sync(m).unwrap();
            out.push(store.record_at(r.phy_offset).unwrap().bytes().to_vec());
        }
        let batch: Vec<Message> = (0..3).map(|i| Message::new("Batch", vec![i as u8; 10 + i])).collect();
        let r = store.put_messages(&batch).unwrap().wait();
        let first = store.record_at(r.phy_offset).unwrap();
        // The batch as one buffer: record after record.
        let (f, _) = store.commit_log().read(r.phy_offset as u64, r.size as usize).unwrap();
        let pos = (r.phy_offset as u64 - f.start_offset()) as usize;
        out.push(f.read(pos, r.size as usize).unwrap().to_vec());
        out.push(first.bytes().to_vec());
        store.shutdown();
        out
    })
}

#[test]
fn records_never_panic_and_checks_agree_with_decoding() {
    let valid = records().clone();
    for v in &valid {
        assert!(matches!(
            check_record(v, &CheckOptions { check_crc: true, delay_levels_ms: &[1000] }),
            CheckResult::Message(_)
        ));
        decode_record(v).expect("a store's own record decodes");
    }
    with_deadline(Duration::from_secs(60), move || {
        runner(3000)
            .run(&bytes_or_mutated(valid, 400), |b| {
                let levels = [1000i64, 5000, 10000];
                for crc in [true, false] {
                    let opts = CheckOptions { check_crc: crc, delay_levels_ms: &levels };
                    match check_record(&b, &opts) {
                        CheckResult::Message(req) => {
                            prop_assert!(req.msg_size > 0 && req.msg_size as usize <= b.len());
                            // What the validator accepts, the reader can read.
                            let v = decode_record(&b[..req.msg_size as usize]);
                            prop_assert!(
                                v.is_ok(),
                                "check_record accepted what decode_record refuses: {:?}",
                                v.err()
                            );
                        }
                        CheckResult::Invalid { skip: Some(n) } => prop_assert!(n > 0),
                        _ => {}
                    }
                }
                let _ = decode_record(&b);
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn ha_frames_and_reports_never_panic() {
    let mut valid = vec![encode_header(0, 0).to_vec(), encode_header(1 << 30, 5).to_vec()];
    for r in records().iter().take(4) {
        let mut f = encode_header(4096, r.len() as i32).to_vec();
        f.extend_from_slice(r);
        valid.push(f);
    }
    with_deadline(Duration::from_secs(60), move || {
        runner(3000)
            .run(&(bytes_or_mutated(valid, 64), prop::collection::vec(1usize..17, 1..8)), |(b, chunks)| {
                // The slave's parser: frames one after another, as in its read buffer.
                let mut at = 0;
                let mut frames = 0;
                while at <= b.len() && frames < 1000 {
                    match parse_frame(&b[at..]) {
                        ParsedFrame::Frame { offset, body } => {
                            prop_assert!(offset >= 0);
                            at += 12 + body.len();
                            frames += 1;
                        }
                        ParsedFrame::Partial | ParsedFrame::Bad(_) => break,
                    }
                }
                // The master's report reader: any chunking gives the newest whole report.
                let mut r = ReportReader::default();
                let mut last = None;
                let mut pos = 0;
                for c in chunks.iter().cycle() {
                    if pos >= b.len() {
                        break;
                    }
                    let end = (pos + c).min(b.len());
                    if let Some(v) = r.feed(&b[pos..end]) {
                        last = Some(v);
                    }
                    pos = end;
                }
                let whole = b.len() / 8;
                let want = (whole > 0)
                    .then(|| i64::from_be_bytes(b[(whole - 1) * 8..whole * 8].try_into().unwrap()));
                prop_assert_eq!(last, want);
                Ok(())
            })
            .unwrap();
    });
}

fn remoting_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for st in [SerializeType::Json, SerializeType::RocketMq] {
        let cmds = [
            RemotingCommand::request(28).with_serialize_type(st),
            RemotingCommand::request(10)
                .with_ext("topic", "T")
                .with_ext("queueId", 3)
                .with_body(b"body".to_vec())
                .with_serialize_type(st),
            RemotingCommand::response(0, Some("ok")).with_remark("é remark").with_serialize_type(st),
        ];
        for c in cmds {
            out.push(c.encode().unwrap());
        }
    }
    out
}

#[test]
fn remoting_frames_never_panic() {
    let valid = remoting_frames();
    for v in &valid {
        RemotingCommand::decode(v).expect("own encoding decodes");
    }
    with_deadline(Duration::from_secs(60), move || {
        runner(3000)
            .run(&bytes_or_mutated(valid, 200), |b| {
                if let Ok(cmd) = RemotingCommand::decode(&b) {
                    // A decoded command encodes again (maybe differently, never a panic).
                    let _ = cmd.encode();
                }
                let mut r = &b[..];
                for _ in 0..4 {
                    match read_frame(&mut r, 4096) {
                        Ok(Some(_)) => continue,
                        _ => break,
                    }
                }
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn properties_files_and_broker_config_never_panic() {
    let valid: Vec<Vec<u8>> = [
        include_str!("../../examples/broker-a.properties"),
        include_str!("../../examples/broker-a-s.properties"),
        "a=b\\\n  continued\nkey\\ with\\ space : v\\u0041lue\n! bang comment\n# c\nempty=\n",
        "listenPort=10911\nbrokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=127.0.0.1:10912\nmappedFileSizeCommitLog=4096\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    with_deadline(Duration::from_secs(60), move || {
        runner(2000)
            .run(&bytes_or_mutated(valid, 300), |b| {
                let text = String::from_utf8_lossy(&b);
                let _ = parse_properties(&text);
                if let Ok(c) = BrokerConfig::from_properties_str(&text) {
                    let _ = c.validate();
                    // What was accepted writes out and reads back the same.
                    let again = BrokerConfig::from_properties_str(&c.to_properties(false));
                    prop_assert!(again.is_ok(), "to_properties output does not parse: {:?}", again.err());
                    prop_assert_eq!(again.unwrap().to_map(), c.to_map());
                    let all = BrokerConfig::from_properties_str(&c.to_properties(true));
                    prop_assert!(all.is_ok(), "to_properties(all) output does not parse: {:?}", all.err());
                    prop_assert_eq!(all.unwrap().effective_broker_id(), c.effective_broker_id());
                }
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn metadata_json_never_panics() {
    let valid: Vec<Vec<u8>> = [
        r#"{"dataVersion":{"counter":2,"timestamp":1700000000000},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}"#,
        r#"{"offsetTable":{"T@g":{0:12,1:7},"%RETRY%g@g":{0:0}}}"#,
        r#"{"offsetTable":{1:1000,2:0}}"#,
        r#"{"dataVersion":{"counter":1,"timestamp":1},"subscriptionGroupTable":{"g":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"groupName":"g","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    with_deadline(Duration::from_secs(60), move || {
        runner(2000)
            .run(&bytes_or_mutated(valid, 200), |b| {
                let _ = TopicConfigWrapper::decode(&b, "fuzz");
                let _ = ConsumerOffsetWrapper::decode(&b, "fuzz");
                let _ = DelayOffsetWrapper::decode(&b, "fuzz");
                let _ = SubscriptionGroupWrapper::decode(&b, "fuzz");
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn message_properties_and_ids_never_panic() {
    let valid: Vec<Vec<u8>> = vec![
        properties::encode(&[("KEYS", "a b"), ("TAGS", "t"), ("UNIQ_KEY", "X")]),
        b"0A0000010000285400000000000003E8".to_vec(),
        b"00000000000000000000000000000001000029040000000000000010".to_vec(),
    ];
    with_deadline(Duration::from_secs(60), move || {
        runner(3000)
            .run(&bytes_or_mutated(valid, 100), |b| {
                let _ = properties::decode(&b);
                let _ = properties::get(&b, "KEYS");
                let _ = properties::iter(&b).count();
                let _ = decode_offset_msg_id(&String::from_utf8_lossy(&b));
                let _ = rmqha_core::message::parse_delay_levels(&String::from_utf8_lossy(&b));
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn bad_delay_levels_are_an_error_not_a_panic() {
    use rmqha_core::message::parse_delay_levels;
    assert_eq!(parse_delay_levels("1s 5m 2h"), Some(vec![1000, 300_000, 7_200_000]));
    // A multi-byte last character once panicked on a byte slice; a huge count overflowed.
    assert_eq!(parse_delay_levels("1s 5\u{e9}"), None);
    assert_eq!(parse_delay_levels("\u{e9}"), None);
    assert_eq!(parse_delay_levels("9223372036854775807d"), None);
    let dir = tempfile::tempdir().unwrap();
    let mut c = BrokerConfig::default();
    c.set("storePathRootDir", dir.path().to_str().unwrap()).unwrap();
    c.set("messageDelayLevel", "1s 10\u{e9}").unwrap();
    let e = MessageStore::open(c).err().expect("a bad messageDelayLevel is refused");
    assert!(e.to_string().contains("messageDelayLevel"), "{e}");
}

#[test]
fn a_slave_config_written_out_in_full_reads_back() {
    let c = BrokerConfig::from_properties_str("brokerRole=SLAVE\nhaMasterAddress=127.0.0.1:10912\n").unwrap();
    let again = BrokerConfig::from_properties_str(&c.to_properties(true)).unwrap();
    assert_eq!(again.effective_broker_id(), 1);
}
