//! A store written by another implementation (rocketmq-rust 1.0, see
//! /work/shared/fixtures/README.md) opens, recovers to where it ended, serves every message,
//! and takes new puts where its queues left off. The fixture is only ever read: the test works
//! on a copy.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{copy_dir, store_config};
use rmqha_core::message::{CheckOptions, CheckResult, check_record};
use rmqha_core::store::GetMessageStatus;
use rmqha_core::store::consume_queue::CqUnit;
use rmqha_core::{Message, MessageStore, PutStatus};

const FIXTURE: &str = "/work/shared/fixtures/rocketmq-rust-1.0-store";
const END: u64 = 1_815_111;
const TOPIC: &str = "StorePeerTopic";
const COUNT: usize = 3000;

fn body(i: usize) -> Vec<u8> {
    let mut b = format!("storepeer-{i}-").into_bytes();
    b.resize(500, b'y');
    b
}

fn open_copy(dir: &Path) -> std::sync::Arc<MessageStore> {
    copy_dir(Path::new(FIXTURE), dir);
    // The fixture's sizes: 1 MiB CommitLog files, default (6,000,000-byte) ConsumeQueue files.
    let cfg = store_config(
        dir,
        &[("mappedFileSizeCommitLog", "1048576"), ("mappedFileSizeConsumeQueue", "6000000")],
    );
    MessageStore::open(cfg).expect("the fixture opens")
}

#[test]
fn fixture_files_decode_as_the_spec_says() {
    // Read the copy's files directly, without the store: 3000 records, a BLANK at the end of
    // the first file, 3000 ConsumeQueue units pointing at them, confirm offset at byte 32.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(FIXTURE), dir.path());
    let cl = dir.path().join("commitlog");
    let files = [
        std::fs::read(cl.join("00000000000000000000")).unwrap(),
        std::fs::read(cl.join("00000000000001048576")).unwrap(),
    ];
    let opts = CheckOptions { check_crc: true, delay_levels_ms: &[] };
    let mut offsets = Vec::new();
    let mut blanks = 0;
    for (n, f) in files.iter().enumerate() {
        let mut pos = 0usize;
        while pos < f.len() {
            match check_record(&f[pos..], &opts) {
                CheckResult::Message(req) => {
                    let phy = n * 1_048_576 + pos;
                    assert_eq!(req.commit_log_offset as usize, phy);
                    offsets.push((phy as i64, req.msg_size, req.queue_id, req.consume_queue_offset));
                    pos += req.msg_size as usize;
                }
                CheckResult::Blank => {
                    blanks += 1;
                    break;
                }
                _ => break,
            }
        }
        if n == 1 {
            assert_eq!(n * 1_048_576 + pos, END as usize, "the log ends at 1815111");
        }
    }
    assert_eq!(offsets.len(), COUNT);
    assert_eq!(blanks, 1, "only the full first file ends in a BLANK");
    for (i, &(_, _, q, qo)) in offsets.iter().enumerate() {
        assert_eq!((q, qo), ((i % 4) as i32, (i / 4) as i64));
    }
    for q in 0..4 {
        let raw =
            std::fs::read(dir.path().join(format!("consumequeue/{TOPIC}/{q}/00000000000000000000"))).unwrap();
        assert_eq!(raw.len(), 6_000_000);
        let units: Vec<CqUnit> = raw.chunks(20).map(CqUnit::decode).take_while(|u| u.size > 0).collect();
        assert_eq!(units.len(), COUNT / 4);
        for (k, u) in units.iter().enumerate() {
            let (phy, size, _, _) = offsets[k * 4 + q];
            assert_eq!((u.phy_offset, u.size, u.tags_code), (phy, size, 0));
        }
    }
    // The checkpoint: 4096 bytes, big-endian i64 fields. The fixture's README says the confirm
    // offset is at byte 32 (the 5.x layout), but rocketmq-rust 1.0 wrote it one field late:
    // byte 32 holds 0 and byte 40 holds 1815111. rmqha reads the 5.x layout and does not need
    // the value (recovery finds the end from the log), then writes it where 5.x has it.
    let cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(cp.len(), 4096);
    let field = |at: usize| i64::from_be_bytes(cp[at..at + 8].try_into().unwrap());
    assert!(field(0) > 0 && field(0) == field(8), "physic and logics timestamps");
    assert_eq!((field(16), field(24), field(32), field(40)), (0, 0, 0, END as i64));
}

#[test]
fn fixture_recovers_serves_every_message_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_copy(dir.path());
    let rec = store.recovery().clone();
    assert!(rec.last_exit_ok, "the fixture has no abort file");
    assert_eq!(rec.recovered_offset, END);
    assert!(!rec.torn_tail);
    assert_eq!(store.max_offset(), END as i64);
    assert_eq!(store.min_offset(), 0);
    assert_eq!(store.checkpoint().get().confirm_phy_offset, END as i64);
    let cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(&cp[32..40], &(END as i64).to_be_bytes(), "recovery writes the confirm offset at byte 32");
    for q in 0..4 {
        assert_eq!(store.queue_max_offset(TOPIC, q), 750);
        assert_eq!(store.queue_min_offset(TOPIC, q), 0);
    }
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    // Every message through get_messages, queue by queue, in order.
    let mut seen = 0;
    for q in 0..4i32 {
        let mut off = 0i64;
        loop {
            let got = store.get_messages(TOPIC, q, off, 32);
            if off == 750 {
                assert_eq!(got.status, GetMessageStatus::OffsetOverflowOne);
                break;
            }
            assert_eq!(got.status, GetMessageStatus::Found, "queue {q} offset {off}");
            for m in got.messages() {
                let i = off as usize * 4 + q as usize;
                assert_eq!((m.topic.as_str(), m.queue_id, m.queue_offset), (TOPIC, q, off));
                assert_eq!(m.body, body(i), "message {i}");
                assert!(m.tags.is_none() && m.keys.is_empty() && m.properties.is_empty());
                // The offset message id leads back to the same record.
                assert_eq!(store.message_by_id(&m.msg_id).unwrap().phy_offset, m.phy_offset);
                off += 1;
                seen += 1;
            }
            assert_eq!(got.next_begin_offset, off);
        }
    }
    assert_eq!(seen, COUNT);

    // New puts continue each queue at 750 and the log at 1815111.
    let mut next_phy = END as i64;
    for i in 0..8usize {
        let r =
            store.put_message_sync(&Message::new(TOPIC, body(COUNT + i)).with_queue((i % 4) as i32)).unwrap();
        assert_eq!(r.status, PutStatus::PutOk);
        assert_eq!(r.queue_offset, 750 + (i / 4) as i64);
        assert_eq!(r.phy_offset, next_phy);
        next_phy = r.end_offset();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    for q in 0..4 {
        assert_eq!(store.queue_max_offset(TOPIC, q), 752);
        let got = store.get_messages(TOPIC, q, 750, 32);
        assert_eq!(got.messages().len(), 2);
        assert_eq!(got.messages()[0].body, body(COUNT + q as usize));
    }
    let cfg = store.config().clone();
    store.shutdown();
    drop(store); // releases the lock
    // The old data is untouched by the new puts and by a restart.
    let again = MessageStore::open(cfg).unwrap();
    assert!(again.recovery().last_exit_ok);
    assert_eq!(again.recovery().recovered_offset as i64, next_phy);
    again.start().unwrap();
    let m = again.get_messages(TOPIC, 3, 749, 1).messages();
    assert_eq!(m[0].body, body(2999));
}
