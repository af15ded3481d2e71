//! ConsumeQueues and IndexFiles are derived data (spec 4, 5): they are rebuilt from the
//! CommitLog when missing, shrink with it, read correctly across file boundaries, and the
//! index answers key queries through hash collisions and file rolls.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{checkpoint_field, commit_log_file, copy_dir, list_files, message, patch, store_config};
use rmqha_core::store::GetMessageStatus;
use rmqha_core::store::consume_queue::CqUnit;
use rmqha_core::{BrokerConfig, Message, MessageStore, PutResult, PutStatus};

fn open_started(cfg: BrokerConfig) -> Arc<MessageStore> {
    let store = MessageStore::open(cfg).unwrap();
    store.start().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store
}

/// Every message of every queue of `topics`, through get_messages: (queue, offset) -> (phy, body).
fn all_queue_contents(
    store: &MessageStore,
    topics: &[String],
) -> BTreeMap<(String, i32, i64), (i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for t in topics {
        for q in store.queue_ids(t) {
            let mut off = store.queue_min_offset(t, q);
            loop {
                let got = store.get_messages(t, q, off, 32);
                if got.status != GetMessageStatus::Found {
                    assert_eq!(got.status, GetMessageStatus::OffsetOverflowOne, "{t}/{q} at {off}");
                    break;
                }
                for m in got.messages() {
                    assert_eq!(m.queue_offset, off);
                    out.insert((t.clone(), q, off), (m.phy_offset, m.body));
                    off += 1;
                }
            }
        }
    }
    out
}

fn topics(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("Topic{i}")).collect()
}

fn fill(store: &MessageStore, topics: &[String], queues: i32, per_queue: usize) -> Vec<PutResult> {
    let mut out = Vec::new();
    for round in 0..per_queue {
        for (ti, t) in topics.iter().enumerate() {
            for q in 0..queues {
                let i = (round * topics.len() + ti) * queues as usize + q as usize;
                let r = store.put_message_sync(&message(t, q, i, 40 + i % 200)).unwrap();
                assert_eq!(r.status, PutStatus::PutOk);
                assert_eq!(r.queue_offset, round as i64);
                out.push(r);
            }
        }
    }
    out
}

fn key_answers(store: &MessageStore, topic: &str, keys: &[usize]) -> Vec<Vec<i64>> {
    keys.iter()
        .map(|k| {
            store
                .query_by_key(topic, &format!("key-{k}"), 64, 0, i64::MAX)
                .iter()
                .map(|m| m.phy_offset)
                .collect()
        })
        .collect()
}

fn rebuilt_after(delete: impl Fn(&Path), leave_abort: bool) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[]);
    let ts = topics(3);
    let (before, keys) = {
        let store = open_started(cfg.clone());
        let puts = fill(&store, &ts, 4, 30);
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let probe: Vec<usize> = (0..puts.len()).step_by(37).collect();
        let keys = key_answers(&store, "Topic1", &probe);
        // Messages of Topic1 carry key-i; the probes of other topics find nothing in Topic1.
        assert!(keys.iter().any(|k| k.len() == 1));
        let before = all_queue_contents(&store, &ts);
        assert_eq!(before.len(), 3 * 4 * 30);
        store.shutdown();
        (before, (probe, keys))
    };
    if leave_abort {
        std::fs::write(dir.path().join("abort"), b"0").unwrap();
    }
    delete(dir.path());
    let store = open_started(cfg);
    assert_eq!(store.recovery().last_exit_ok, !leave_abort);
    assert_eq!(all_queue_contents(&store, &ts), before, "queues rebuilt from the CommitLog");
    assert_eq!(key_answers(&store, "Topic1", &keys.0), keys.1, "index rebuilt from the CommitLog");
    for t in &ts {
        assert_eq!(store.queue_ids(t), vec![0, 1, 2, 3]);
        for q in 0..4 {
            assert_eq!(store.queue_max_offset(t, q), 30);
        }
    }
    assert!(list_files(&dir.path().join("consumequeue")).len() >= 12);
    // New puts continue the rebuilt queues.
    let r = store.put_message_sync(&message("Topic2", 3, 99_999, 10)).unwrap();
    assert_eq!(r.queue_offset, 30);
}

#[test]
fn queues_and_index_rebuilt_after_clean_exit_when_deleted() {
    rebuilt_after(
        |root| {
            std::fs::remove_dir_all(root.join("consumequeue")).unwrap();
            std::fs::remove_dir_all(root.join("index")).unwrap();
        },
        false,
    );
}

#[test]
fn queues_and_index_rebuilt_after_crash_when_files_deleted() {
    rebuilt_after(
        |root| {
            for f in list_files(&root.join("consumequeue")) {
                std::fs::remove_file(root.join("consumequeue").join(f)).unwrap();
            }
            for f in list_files(&root.join("index")) {
                std::fs::remove_file(root.join("index").join(f)).unwrap();
            }
        },
        true,
    );
}

#[test]
fn torn_commit_log_tail_shrinks_every_queue_it_touched() {
    let src = tempfile::tempdir().unwrap();
    let cfg = store_config(src.path(), &[]);
    let store = open_started(cfg);
    let puts = fill(&store, &topics(2), 3, 20);
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let crash = tempfile::tempdir().unwrap();
    copy_dir(src.path(), crash.path()); // a crash image: the store is still running
    drop(store);

    // The last 5 records (topics and queues mixed) are torn: zeroed from the 5th-last on.
    let cut = &puts[puts.len() - 5];
    let end = puts.last().unwrap().end_offset() as usize;
    let (file, pos) = commit_log_file(crash.path(), cut.phy_offset as u64, 65536);
    assert_eq!(cut.phy_offset as u64 / 65536, (end as u64 - 1) / 65536, "the torn records share a file");
    let zeros = vec![0u8; end - cut.phy_offset as usize];
    patch(&file, pos, &zeros[..zeros.len() / 2]); // half zeroed...
    patch(&file, pos + zeros.len() / 2 + 3, &[0xAB; 9]); // ...and garbage after

    let store = open_started(store_config(crash.path(), &[]));
    assert_eq!(store.max_offset(), cut.phy_offset);
    assert_eq!(checkpoint_field(crash.path(), 32), cut.phy_offset);
    // fill() puts round by round, topic by topic, queue by queue: put j is topic (j/3)%2,
    // queue j%3.
    let survivors = &puts[..puts.len() - 5];
    for (ti, t) in topics(2).iter().enumerate() {
        for q in 0..3 {
            let kept =
                survivors.iter().enumerate().filter(|(j, r)| r.queue_id == q && (j / 3) % 2 == ti).count();
            assert_eq!(store.queue_max_offset(t, q), kept as i64, "{t}/{q}");
        }
    }
    assert!(store.recovery().torn_tail);
    // Appends go on from the cut, with the queue offsets the cut left.
    let next = store.queue_max_offset("Topic1", 2);
    let r = store.put_message_sync(&message("Topic1", 2, 7777, 10)).unwrap();
    assert_eq!((r.phy_offset, r.queue_offset), (cut.phy_offset, next));
}

#[test]
fn reads_cross_commit_log_and_consume_queue_file_boundaries() {
    // 4 KiB CommitLog files hold ~8 records; 100-byte ConsumeQueue files hold 5 units.
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(
        dir.path(),
        &[("mappedFileSizeCommitLog", "4096"), ("mappedFileSizeConsumeQueue", "100")],
    );
    let store = open_started(cfg.clone());
    let mut bodies = Vec::new();
    for i in 0..300usize {
        let m = message("Edge", (i % 5 == 4) as i32, i, 100 + (i * 53) % 500);
        let r = store.put_message_sync(&m).unwrap();
        if r.queue_id == 0 {
            bodies.push((r.phy_offset, m.body));
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(store.commit_log().queue().file_count() > 30);
    let n = bodies.len() as i64;
    assert!(list_files(&dir.path().join("consumequeue/Edge/0")).len() as i64 >= n / 5);
    let check = |store: &MessageStore| {
        for start in 0..n {
            let got = store.get_messages("Edge", 0, start, 32);
            assert_eq!(got.status, GetMessageStatus::Found, "from {start}");
            let msgs = got.messages();
            assert_eq!(msgs.len() as i64, 32.min(n - start), "from {start}: a batch runs on across files");
            for (k, m) in msgs.iter().enumerate() {
                let want = &bodies[start as usize + k];
                assert_eq!((m.phy_offset, &m.body), (want.0, &want.1), "from {start}");
            }
            assert_eq!(got.next_begin_offset, start + msgs.len() as i64);
        }
    };
    check(&store);
    store.shutdown();
    drop(store);
    let store = open_started(cfg);
    check(&store);
    // Every full CommitLog file ends in a BLANK whose size covers the rest of the file.
    let cl = store.commit_log().queue().files();
    for f in &cl[..cl.len() - 1] {
        let bytes = std::fs::read(f.path()).unwrap();
        let mut pos = 0usize;
        loop {
            let size = i32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            let magic = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().unwrap());
            if magic == 0xCBD4_3194 {
                assert_eq!(pos + size, 4096, "{}", f.path().display());
                break;
            }
            pos += size;
        }
    }
}

#[test]
fn many_topics_and_queues() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[]);
    let ts = topics(24);
    let store = open_started(cfg.clone());
    fill(&store, &ts, 8, 4);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let got = all_queue_contents(&store, &ts);
    assert_eq!(got.len(), 24 * 8 * 4);
    for ((t, q, off), (phy, body)) in &got {
        let m = store.message_at(*phy).unwrap();
        assert_eq!((&m.topic, m.queue_id, m.queue_offset, &m.body), (t, *q, *off, body));
    }
    store.shutdown();
    drop(store);
    let store = open_started(cfg);
    assert_eq!(all_queue_contents(&store, &ts), got);
    assert_eq!(store.queue_ids("Topic23"), (0..8).collect::<Vec<_>>());
    assert!(store.queue_ids("NoSuchTopic").is_empty());
    assert_eq!(store.get_messages("NoSuchTopic", 0, 0, 1).status, GetMessageStatus::NoMatchedLogicQueue);
}

#[test]
fn query_by_key_through_hash_collisions_and_rolling_index_files() {
    let dir = tempfile::tempdir().unwrap();
    // 4 slots: every chain mixes many keys. 20 entries per file (19 used): files roll often.
    let cfg = store_config(dir.path(), &[("maxHashSlotNum", "4"), ("maxIndexNum", "20")]);
    let store = open_started(cfg.clone());
    // "Aa" and "BB" have the same Java hashCode, and so do "Topic#Aa" and "Topic#BB": the
    // index cannot tell them apart, query_by_key must.
    assert_eq!(rmqha_core::message::java_string_hash("Q#Aa"), rmqha_core::message::java_string_hash("Q#BB"));
    let colliding = ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa"];
    let mut by_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for i in 0..150usize {
        let k =
            if i % 3 == 0 { colliding[i / 3 % colliding.len()].to_string() } else { format!("k{}", i % 40) };
        let mut keys = vec![k.clone()];
        if i % 2 == 0 {
            keys.push("hot".into());
        }
        let r = store.put_message_sync(&Message::new("Q", format!("body-{i}")).with_keys(&keys)).unwrap();
        for k in keys {
            by_key.entry(k).or_default().push(r.phy_offset);
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let index_files = list_files(&dir.path().join("index"));
    assert!(index_files.len() >= 10, "the index rolled: {index_files:?}");
    let check = |store: &MessageStore| {
        for (k, phys) in &by_key {
            let got: Vec<i64> =
                store.query_by_key("Q", k, 64, 0, i64::MAX).iter().map(|m| m.phy_offset).collect();
            let mut want = phys.clone();
            want.reverse(); // newest first
            want.truncate(64); // maxMsgsNumBatch
            if k == "hot" {
                assert_eq!(phys.len(), 75);
                assert_eq!(got.len(), 64, "capped by maxMsgsNumBatch");
                assert!(got.iter().all(|p| phys.contains(p)));
            } else {
                assert_eq!(got, want, "key {k}");
            }
        }
        let two: Vec<i64> =
            store.query_by_key("Q", "Aa", 2, 0, i64::MAX).iter().map(|m| m.phy_offset).collect();
        assert!(two.len() <= 2 && two.iter().all(|p| by_key["Aa"].contains(p)));
        assert!(store.query_by_key("Q", "never-used", 64, 0, i64::MAX).is_empty());
        assert!(store.query_by_key("Other", "Aa", 64, 0, i64::MAX).is_empty(), "keys are per topic");
        assert!(store.query_by_key("Q", "Aa", 64, 0, 1).is_empty(), "outside the time range");
    };
    check(&store);
    store.shutdown();
    drop(store);
    let store = open_started(cfg);
    check(&store);
    // Each index file's header: indexCount never exceeds maxIndexNum, begin <= end offsets.
    for f in index_files {
        let b = std::fs::read(dir.path().join("index").join(&f)).unwrap();
        assert_eq!(b.len(), 40 + 4 * 4 + 20 * 20);
        let begin_phy = i64::from_be_bytes(b[16..24].try_into().unwrap());
        let end_phy = i64::from_be_bytes(b[24..32].try_into().unwrap());
        let count = i32::from_be_bytes(b[36..40].try_into().unwrap());
        assert!(begin_phy <= end_phy && (1..=20).contains(&count), "{f}: {begin_phy} {end_phy} {count}");
    }
}

#[test]
fn queue_starting_mid_stream_gets_filler_units() {
    // Old CommitLog files are gone (as after retention) and the queues are rebuilt: queue
    // offsets start mid-stream, and the ConsumeQueue's first file is padded with filler units.
    let dir = tempfile::tempdir().unwrap();
    let cfg = store_config(dir.path(), &[("mappedFileSizeCommitLog", "4096")]);
    let store = open_started(cfg.clone());
    let mut puts = Vec::new();
    for i in 0..400usize {
        puts.push(
            store.put_message_sync(&Message::new("Mid", format!("mid-{i:04}-{}", "z".repeat(90)))).unwrap(),
        );
    }
    store.shutdown();
    drop(store);
    let cl_dir = dir.path().join("commitlog");
    let files = list_files(&cl_dir);
    let deleted = 8;
    for f in &files[..deleted] {
        std::fs::remove_file(cl_dir.join(f)).unwrap();
    }
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let first_kept = puts.iter().find(|r| r.phy_offset >= (deleted as i64) * 4096).unwrap();
    let q0 = first_kept.queue_offset;
    assert!(q0 > 100, "the first unit lands in the second ConsumeQueue file");

    let store = open_started(cfg.clone());
    assert_eq!(store.min_offset(), deleted as i64 * 4096);
    assert_eq!(store.queue_min_offset("Mid", 0), q0);
    assert_eq!(store.queue_max_offset("Mid", 0), 400);
    let got = store.get_messages("Mid", 0, 0, 8);
    assert_eq!((got.status, got.next_begin_offset), (GetMessageStatus::OffsetTooSmall, q0));
    let got = store.get_messages("Mid", 0, q0, 8);
    assert_eq!(got.status, GetMessageStatus::Found);
    assert_eq!(got.messages()[0].phy_offset, first_kept.phy_offset);

    // On disk: the ConsumeQueue's first file starts at the 2000-byte boundary below q0*20 and
    // holds filler units [0][0x7FFFFFFF][0] up to q0.
    let cq_dir = dir.path().join("consumequeue/Mid/0");
    let cq_files = list_files(&cq_dir);
    let first_start = (q0 as u64 * 20) / 2000 * 2000;
    assert_eq!(cq_files[0], format!("{first_start:020}"));
    let bytes = std::fs::read(cq_dir.join(&cq_files[0])).unwrap();
    let fillers = (q0 as usize * 20 - first_start as usize) / 20;
    assert!(fillers > 0);
    for u in 0..fillers {
        let unit = &bytes[u * 20..u * 20 + 20];
        assert_eq!(
            unit,
            &[0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0],
            "filler {u}"
        );
    }
    let real = CqUnit::decode(&bytes[fillers * 20..fillers * 20 + 20]);
    assert_eq!((real.phy_offset, real.size), (first_kept.phy_offset, first_kept.size));
    // The fillers and the minimum survive a restart.
    store.shutdown();
    drop(store);
    let store = open_started(cfg);
    assert_eq!(store.queue_min_offset("Mid", 0), q0);
    assert_eq!(store.get_messages("Mid", 0, q0 - 1, 1).status, GetMessageStatus::OffsetTooSmall);
    assert_eq!(store.put_message_sync(&Message::new("Mid", "next")).unwrap().queue_offset, 400);
}

#[test]
fn index_after_a_crash_still_finds_keys_written_long_before_it() {
    // After a crash, index files newer than the checkpoint's index timestamp are destroyed
    // and rebuilt by re-dispatching. Recovery starts re-dispatching at the newest CommitLog
    // file older than the checkpoint's timestamps, so with a recent checkpoint (the CQ flush
    // writes it every minute) the rebuild must still reach back to every key the destroyed
    // files held.
    let src = tempfile::tempdir().unwrap();
    let store = open_started(store_config(src.path(), &[]));
    let puts: Vec<PutResult> = (0..600usize)
        .map(|i| store.put_message_sync(&message("Idx", (i % 2) as i32, i, 200)).unwrap())
        .collect();
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(store.commit_log().queue().file_count() >= 3);
    let crash = tempfile::tempdir().unwrap();
    copy_dir(src.path(), crash.path());
    drop(store);
    // The checkpoint as a thorough flush just after the last put would have left it.
    let last_ts = rmqha_core::store::commit_log::now_ms() + 5000;
    patch(&crash.path().join("checkpoint"), 0, &last_ts.to_be_bytes());
    patch(&crash.path().join("checkpoint"), 8, &last_ts.to_be_bytes());

    let store = open_started(store_config(crash.path(), &[]));
    assert!(!store.recovery().last_exit_ok);
    for (i, r) in puts.iter().enumerate().step_by(23) {
        let found = store.query_by_key("Idx", &format!("key-{i}"), 4, 0, i64::MAX);
        assert_eq!(found.iter().map(|m| m.phy_offset).collect::<Vec<_>>(), vec![r.phy_offset], "key-{i}");
    }
    for q in 0..2 {
        assert_eq!(store.queue_max_offset("Idx", q), 300);
    }
}

/// Index files written with other `maxHashSlotNum` / `maxIndexNum` values cannot be read with
/// these. They are deleted and dispatch indexes their records again, so keys written before
/// the change are still found. Before, they were deleted and their keys lost for good, while
/// the log said dispatch would rebuild them.
#[test]
fn index_written_with_other_sizes_is_rebuilt_with_these() {
    let dir = tempfile::tempdir().unwrap();
    let ts = topics(2);
    let (probe, keys) = {
        let store = open_started(store_config(dir.path(), &[]));
        let puts = fill(&store, &ts, 2, 100);
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let probe: Vec<usize> = (0..puts.len()).step_by(13).collect();
        let keys = key_answers(&store, "Topic1", &probe);
        assert!(keys.iter().filter(|k| k.len() == 1).count() > 5, "{keys:?}");
        assert!(list_files(&dir.path().join("index")).len() > 1, "several index files");
        store.shutdown();
        (probe, keys)
    };
    for extra in [&[("maxIndexNum", "512")][..], &[("maxHashSlotNum", "128")], &[]] {
        let store = open_started(store_config(dir.path(), extra));
        assert_eq!(key_answers(&store, "Topic1", &probe), keys, "after reopening with {extra:?}");
        store.shutdown();
    }
}

/// A topic names a ConsumeQueue directory. Puts accept RocketMQ's topic characters only (as
/// its `TopicValidator`), so a topic such as `../escape` can no longer make a directory
/// outside `consumequeue` (it made `<store>/escape/0`, and `..` made `<store>/0`). A record
/// that holds such a topic anyway (replicated from another master) gets no queue unit, and
/// dispatch goes on past it.
#[test]
fn topics_that_are_not_one_directory_name_never_make_directories() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = open_started(store_config(&root, &[]));
    for topic in ["../escape", "a/b", ".", "..", "sp ace", "dot.ted", "t\u{0}x", ""] {
        match store.put_message(&message(topic, 0, 1, 10)) {
            Err(rmqha_core::Error::PutFailed { status: PutStatus::MessageIllegal, reason }) => {
                assert!(reason.contains(&format!("{topic:?}")), "{reason}")
            }
            other => panic!("{topic:?}: {other:?}"),
        }
    }
    let ok = store.put_message_sync(&message("ok_Topic-1%|", 0, 1, 10)).unwrap();
    assert_eq!(ok.status, PutStatus::PutOk);
    assert_eq!(store.max_offset(), ok.end_offset(), "nothing else was stored");

    // A slave receives a record whose topic is `ab/cd` (the body's CRC does not cover the
    // topic, so the patched record still checks), then a good one.
    let good = store.put_message_sync(&message("ab_cd", 0, 2, 10)).unwrap();
    let mut bad = store.record_at(good.phy_offset).unwrap().bytes().to_vec();
    let at = bad.windows(5).position(|w| w == b"ab_cd").unwrap();
    bad[at + 2] = b'/';
    store.shutdown();
    let slave_root = dir.path().join("slave");
    let slave = open_started(store_config(&slave_root, &[("brokerRole", "SLAVE")]));
    slave.append_replicated(0, &bad).unwrap();
    let again = open_started(store_config(&dir.path().join("third"), &[]));
    let follow = again.put_message_sync(&message("after", 0, 3, 10)).unwrap();
    let mut follow_bytes = again.record_at(follow.phy_offset).unwrap().bytes().to_vec();
    // Re-base the record on the slave's next offset (its physical offset field, at byte 28).
    follow_bytes[28..36].copy_from_slice(&(bad.len() as i64).to_be_bytes());
    slave.append_replicated(bad.len() as u64, &follow_bytes).unwrap();
    assert!(slave.wait_dispatched(Duration::from_secs(10)), "dispatch stalled at the bad record");
    assert_eq!(slave.queue_max_offset("after", 0), 1, "the record after it has its queue unit");
    assert!(!slave_root.join("consumequeue").join("ab").exists());
    let mut made = Vec::new();
    for base in [dir.path(), root.as_path(), slave_root.as_path()] {
        for e in std::fs::read_dir(base).unwrap() {
            made.push(e.unwrap().file_name().to_string_lossy().into_owned());
        }
    }
    made.sort();
    assert!(
        !made.iter().any(|n| n == "escape" || n == "0" || n == "b" || n == "cd"),
        "directories made outside consumequeue: {made:?}"
    );
    again.shutdown();
    slave.shutdown();
}

/// A message lists a key twice, or has it as its unique key too: it has several index entries
/// for the key, and is still returned once. Entries of other keys in the same chain (hash
/// collisions) and those repeats do not use up `max`: before, a query for 3 messages could
/// return one message twice, or fewer than 3 while more were there.
#[test]
fn query_by_key_returns_each_message_once_and_fills_max_past_collisions() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_started(store_config(dir.path(), &[]));
    let mut dup = Vec::new();
    for i in 0..4 {
        let m =
            Message::new("D", format!("dup-{i}")).with_keys(&["dup", "dup"]).with_property("UNIQ_KEY", "dup");
        dup.push(store.put_message_sync(&m).unwrap().phy_offset);
    }
    // "Aa" and "BB" collide; the newest entries of the chain are all "BB".
    let mut aa = Vec::new();
    for i in 0..3 {
        aa.push(
            store
                .put_message_sync(&Message::new("D", format!("aa-{i}")).with_keys(&["Aa"]))
                .unwrap()
                .phy_offset,
        );
    }
    for i in 0..10 {
        store.put_message_sync(&Message::new("D", format!("bb-{i}")).with_keys(&["BB"])).unwrap();
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let phys = |key: &str, max: usize| -> Vec<i64> {
        store.query_by_key("D", key, max, 0, i64::MAX).iter().map(|m| m.phy_offset).collect()
    };
    dup.reverse();
    aa.reverse();
    assert_eq!(phys("dup", 3), dup[..3].to_vec());
    assert_eq!(phys("dup", 64), dup);
    assert_eq!(phys("Aa", 2), aa[..2].to_vec());
    assert_eq!(phys("Aa", 64), aa);
    assert!(phys("Aa", 0).is_empty());
}

/// An index file in the middle that cannot be used is deleted, and dispatch indexes its
/// records again. The files after it must go too: kept, they made the rebuild skip every
/// record below their end as already indexed, and the deleted file's keys stayed unfindable.
#[test]
fn a_damaged_index_file_in_the_middle_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [("maxIndexNum", "40")];
    let puts: Vec<PutResult> = {
        let store = open_started(store_config(dir.path(), &extra));
        let puts =
            (0..200usize).map(|i| store.put_message_sync(&message("Mid", 0, i, 60)).unwrap()).collect();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
        puts
    };
    let index_dir = dir.path().join("index");
    let files = list_files(&index_dir);
    assert!(files.len() >= 4, "{files:?}");
    // Cut the second file short, keeping its header: it can no longer be mapped at its size.
    let victim = index_dir.join(&files[1]);
    let f = std::fs::OpenOptions::new().write(true).open(&victim).unwrap();
    f.set_len(100).unwrap();
    drop(f);
    let store = open_started(store_config(dir.path(), &extra));
    for (i, r) in puts.iter().enumerate() {
        let found = store.query_by_key("Mid", &format!("key-{i}"), 4, 0, i64::MAX);
        assert_eq!(found.iter().map(|m| m.phy_offset).collect::<Vec<_>>(), vec![r.phy_offset], "key-{i}");
    }
}

/// Index files are named by the local time they were made, which a DST fall-back (or a clock
/// stepped back) puts out of order: the newest file can sort before an older one. Loaded by
/// name after a crash, the newest was destroyed (newer than the checkpoint's index time) and
/// the older one after it "in order" too, while dispatch rebuilt only from the newest file's
/// start: the older file's keys were lost for good. Files are now loaded in the order of the
/// CommitLog offsets they begin at.
#[test]
fn index_files_named_out_of_order_by_a_clock_step_load_in_log_order() {
    let src = tempfile::tempdir().unwrap();
    let extra = [("maxIndexNum", "40")];
    let store = open_started(store_config(src.path(), &extra));
    let index_dir = src.path().join("index");
    let mut puts = Vec::new();
    // Until a third file starts: the second (A) is then full.
    while list_files(&index_dir).len() < 3 {
        puts.push(store.put_message_sync(&message("Dst", 0, puts.len(), 1500)).unwrap());
        assert!(store.wait_dispatched(Duration::from_secs(10)));
    }
    let names = list_files(&index_dir);
    let a_end_ts = {
        let b = std::fs::read(index_dir.join(&names[1])).unwrap();
        i64::from_be_bytes(b[8..16].try_into().unwrap())
    };
    // The third file (B) gets entries stored after A's last one.
    while rmqha_core::store::commit_log::now_ms() <= a_end_ts {
        std::thread::yield_now();
    }
    // ... and enough of them that the CommitLog's last file holds B's records only, so that
    // recovery (told by the checkpoint that everything before it is safe) re-dispatches
    // nothing of A's.
    let files = store.commit_log().queue().file_count();
    while store.commit_log().queue().file_count() == files {
        puts.push(store.put_message_sync(&message("Dst", 0, puts.len(), 4000)).unwrap());
    }
    puts.push(store.put_message_sync(&message("Dst", 0, puts.len(), 4000)).unwrap());
    store.flush().unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(list_files(&index_dir).len(), 3);
    let crash = tempfile::tempdir().unwrap();
    copy_dir(src.path(), crash.path()); // while running: the abort file is there
    drop(store);
    // The checkpoint's index time covers A, not B; B's name sorts between the first file's
    // and A's, as after a fall-back.
    let later = rmqha_core::store::commit_log::now_ms() + 5000;
    patch(&crash.path().join("checkpoint"), 0, &later.to_be_bytes());
    patch(&crash.path().join("checkpoint"), 8, &later.to_be_bytes());
    patch(&crash.path().join("checkpoint"), 16, &a_end_ts.to_be_bytes());
    let dir = crash.path().join("index");
    let base: u64 = 20261025020000000;
    for (i, n) in names.iter().enumerate() {
        let name = match i {
            0 => base,
            1 => base + 20,
            _ => base + 10,
        };
        std::fs::rename(dir.join(n), dir.join(format!("{name:017}"))).unwrap();
    }
    let store = open_started(store_config(crash.path(), &extra));
    assert!(!store.recovery().last_exit_ok);
    for (i, r) in puts.iter().enumerate() {
        let found = store.query_by_key("Dst", &format!("key-{i}"), 4, 0, i64::MAX);
        assert_eq!(found.iter().map(|m| m.phy_offset).collect::<Vec<_>>(), vec![r.phy_offset], "key-{i}");
    }
}

/// A file made after the local time went back (a DST fall-back, a clock step) is named after
/// the last file, not before it, so names keep sorting in the order files were made, as
/// RocketMQ's loader (which sorts by name) expects.
#[test]
fn a_new_index_file_is_named_after_the_last_even_when_the_clock_went_back() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [("maxIndexNum", "40")];
    let index_dir = dir.path().join("index");
    {
        let store = open_started(store_config(dir.path(), &extra));
        store.put_message_sync(&message("Back", 0, 0, 60)).unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
    }
    let files = list_files(&index_dir);
    assert_eq!(files.len(), 1);
    // As if made an hour ahead of the clock now.
    let ahead = "20991025023500000";
    std::fs::rename(index_dir.join(&files[0]), index_dir.join(ahead)).unwrap();
    let store = open_started(store_config(dir.path(), &extra));
    let mut i = 1;
    while list_files(&index_dir).len() < 3 {
        store.put_message_sync(&message("Back", 0, i, 60)).unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        i += 1;
    }
    assert_eq!(
        list_files(&index_dir),
        vec![ahead.to_string(), "20991025023500001".into(), "20991025023500002".into()]
    );
}

/// The index keeps entry times in whole seconds, so its walk lets through entries within the
/// second before a query's range; the query then checks each message's own store time, so
/// what it returns lies within `[begin, end]` to the millisecond.
#[test]
fn query_by_key_checks_each_message_store_time_to_the_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_started(store_config(dir.path(), &[]));
    let r = store.put_message_sync(&message("Ms", 0, 0, 60)).unwrap();
    let ts = r.store_timestamp;
    // A later message, so that the index file's time range reaches past the first one's.
    while rmqha_core::store::commit_log::now_ms() <= ts + 1 {
        std::thread::yield_now();
    }
    store.put_message_sync(&message("Ms", 0, 1, 60)).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let found = |begin: i64, end: i64| store.query_by_key("Ms", "key-0", 4, begin, end).len();
    assert_eq!(found(ts, ts), 1);
    assert_eq!(found(ts - 500, ts + 500), 1);
    assert_eq!(found(ts + 1, i64::MAX), 0, "stored before the range");
    assert_eq!(found(0, ts - 1), 0, "stored after the range");
}

/// Puts `n` messages of `len` bytes to topic `t` queue 0 and stops the store cleanly.
fn written_and_stopped(dir: &Path, t: &str, n: usize, len: usize) -> Vec<PutResult> {
    let store = open_started(store_config(dir, &[]));
    let put: Vec<_> = (0..n).map(|i| store.put_message_sync(&message(t, 0, i, len)).unwrap()).collect();
    assert!(put.iter().all(|r| r.status == PutStatus::PutOk));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    put
}

/// A ConsumeQueue unit in the middle of a queue (which recovery does not read) damaged by bit
/// rot, or a queue file copied from another store, pointing at another queue's record: reads
/// served that record as this queue's message (found by an audit of damaged files). The
/// unit is skipped now, and every other message is served.
#[test]
fn a_unit_pointing_at_another_queues_record_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_started(store_config(dir.path(), &[]));
    let mut b = Vec::new();
    for i in 0..10 {
        assert_eq!(store.put_message_sync(&message("A", 0, i, 100)).unwrap().status, PutStatus::PutOk);
        b.push(store.put_message_sync(&message("B", 0, 100 + i, 100)).unwrap());
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    let unit = CqUnit { phy_offset: b[3].phy_offset, size: b[3].size, tags_code: 0 };
    patch(&dir.path().join("consumequeue/A/0/00000000000000000000"), 3 * 20, &unit.encode());
    let store = open_started(store_config(dir.path(), &[]));
    let got = store.get_messages("A", 0, 0, 32);
    let served: Vec<_> = got.messages().iter().map(|m| (m.topic.clone(), m.queue_offset)).collect();
    let expected: Vec<_> = (0..10).filter(|&i| i != 3).map(|i| ("A".to_string(), i)).collect();
    assert_eq!(served, expected);
    assert_eq!(got.next_begin_offset, 10);
    // Asked for the damaged unit alone: nothing served, and the consumer moves past it.
    let one = store.get_messages("A", 0, 3, 1);
    assert!(one.messages().iter().all(|m| m.topic == "A" && m.queue_offset != 3), "{:?}", one.status);
    store.shutdown();
}

/// A unit whose size runs past its CommitLog file was taken for a record in a removed file:
/// the read skipped to the next CommitLog file, and with it every later unit of the scan in
/// this one (44 of 49 messages, by following `next_begin_offset`, never reached a consumer).
/// Now only that unit is skipped; so is one whose offset lies inside a record.
#[test]
fn a_unit_with_an_impossible_size_or_offset_hides_only_itself() {
    for (at, field) in [(5, 8), (7, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let put = written_and_stopped(dir.path(), "T", 50, 100);
        let bytes = if field == 8 {
            0x7fff_0000i32.to_be_bytes().to_vec()
        } else {
            (put[at].phy_offset + 1).to_be_bytes().to_vec()
        };
        patch(&dir.path().join("consumequeue/T/0/00000000000000000000"), at * 20 + field, &bytes);
        let store = open_started(store_config(dir.path(), &[]));
        let (mut off, mut delivered) = (0, Vec::new());
        for _ in 0..100 {
            if off >= 50 {
                break;
            }
            let got = store.get_messages("T", 0, off, 32);
            assert_eq!(got.records.len(), got.messages().len(), "every record served decodes");
            delivered.extend(got.messages().iter().map(|m| m.queue_offset));
            off = got.next_begin_offset;
        }
        let expected: Vec<i64> = (0..50).filter(|&i| i != at as i64).collect();
        assert_eq!(delivered, expected, "unit {at} damaged at byte {field}");
        store.shutdown();
    }
}

/// Zeroed units (a lost page, a partial copy) in a queue file older than the last three,
/// which recovery does not read, were served as zero-byte records with status FOUND.
#[test]
fn zeroed_units_are_not_served_as_messages() {
    let dir = tempfile::tempdir().unwrap();
    written_and_stopped(dir.path(), "T", 450, 50);
    patch(&dir.path().join("consumequeue/T/0/00000000000000000000"), 10 * 20, &[0u8; 200]);
    let store = open_started(store_config(dir.path(), &[]));
    let got = store.get_messages("T", 0, 10, 32);
    assert_eq!(got.status, GetMessageStatus::Found);
    assert_eq!(got.records.len(), got.messages().len(), "every record served decodes");
    let offsets: Vec<_> = got.messages().iter().map(|m| m.queue_offset).collect();
    assert_eq!(offsets, (20..52).collect::<Vec<i64>>());
    store.shutdown();
}

/// `consumequeue/<topic>` moved to another disk and replaced by a symlink: recovery skipped
/// it (it looked at the link, not at what it names), and the queue, opened later without
/// recovery, took every file as full: its next put got queue offset 100 instead of 10, and
/// offsets 10 to 99 read as holes.
#[test]
fn a_symlinked_topic_directory_is_recovered_like_any_other() {
    let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    written_and_stopped(dir.path(), "T", 10, 100);
    let t = dir.path().join("consumequeue/T");
    let moved = other.path().join("T");
    copy_dir(&t, &moved);
    std::fs::remove_dir_all(&t).unwrap();
    std::os::unix::fs::symlink(&moved, &t).unwrap();
    let store = open_started(store_config(dir.path(), &[]));
    assert_eq!(store.queue_max_offset("T", 0), 10);
    let r = store.put_message_sync(&message("T", 0, 10, 100)).unwrap();
    assert_eq!((r.status, r.queue_offset), (PutStatus::PutOk, 10));
    store.shutdown();
}

/// A queue file that cannot be opened (here a directory in its place; a permission error
/// reads the same way) was reported as "cannot load consume queues
/// (mappedFileSizeConsumeQueue) from <consumequeue>: Is a directory": no file named, and a
/// setting blamed that has nothing to do with it.
#[test]
fn a_queue_file_that_cannot_be_opened_is_named() {
    let dir = tempfile::tempdir().unwrap();
    written_and_stopped(dir.path(), "T", 10, 100);
    let file = dir.path().join("consumequeue/T/0/00000000000000000000");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let err = MessageStore::open(store_config(dir.path(), &[])).err().expect("opened").to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(!err.contains("mappedFileSizeConsumeQueue"), "{err}");
}

/// The only index file, with a damaged header, and what it cost: a begin offset with one high
/// bit flipped had recovery delete the file as one written past the log's end, and nothing
/// indexed its records again; a zeroed entry count had the writer start over the file's
/// entries. Either way keys written before were never found again. Such a file is now
/// rebuilt from where its records began.
#[test]
fn an_index_file_with_a_damaged_header_is_rebuilt() {
    for (field, damage) in [(16usize, "begin offset"), (36, "entry count")] {
        let dir = tempfile::tempdir().unwrap();
        written_and_stopped(dir.path(), "T", 5, 100);
        let idx_dir = dir.path().join("index");
        let idx = idx_dir.join(list_files(&idx_dir).pop().unwrap());
        let bytes = std::fs::read(&idx).unwrap();
        if field == 16 {
            let mut begin = bytes[16..24].to_vec();
            begin[0] ^= 0x40;
            patch(&idx, 16, &begin);
        } else {
            patch(&idx, 36, &0i32.to_be_bytes());
        }
        let store = open_started(store_config(dir.path(), &[]));
        for i in 5..10 {
            assert_eq!(store.put_message_sync(&message("T", 0, i, 100)).unwrap().status, PutStatus::PutOk);
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        let missing: Vec<usize> = (0..10)
            .filter(|i| store.query_by_key("T", &format!("key-{i}"), 4, 0, i64::MAX).is_empty())
            .collect();
        assert!(missing.is_empty(), "{damage} damaged: keys not found: {missing:?}");
        store.shutdown();
    }
}
