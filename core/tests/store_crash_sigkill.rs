//! A SYNC_FLUSH store killed with SIGKILL mid-put keeps every acknowledged message.
//!
//! The test re-runs its own binary as a child (selected by an environment variable) that
//! opens the store and puts in a loop, appending `round index phy queue_offset` to a log file
//! after each PUT_OK (one unbuffered write per line). The parent waits for the log to grow,
//! kills the child with SIGKILL, reopens the store and checks every logged message: same
//! offset, same queue offset, same body. Several rounds run on the same store, so each round
//! also recovers from the previous kill.
//!
//! SIGKILL loses no page cache: this proves that what a put acknowledges is in the files and
//! that recovery of a killed process (abort file, unflushed ConsumeQueues, a half-written next
//! record, a pre-allocated file) keeps it. Power loss is `store_recovery`'s subject.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::store_config;
use rmqha_core::store::GetMessageStatus;
use rmqha_core::{BrokerConfig, Message, MessageStore, PutStatus};

const ENV_DIR: &str = "RMQHA_CRASH_DIR";
const ENV_ROUND: &str = "RMQHA_CRASH_ROUND";
const TOPIC: &str = "Crash";
const QUEUES: usize = 4;

fn config(dir: &Path) -> BrokerConfig {
    store_config(dir, &[("flushDiskType", "SYNC_FLUSH"), ("mappedFileSizeConsumeQueue", "400")])
}

fn body(round: usize, i: usize) -> Vec<u8> {
    let mut b = format!("r{round}-m{i}-").into_bytes();
    b.resize(150 + (i * 37) % 400, b'a' + (i % 26) as u8);
    b
}

fn log_path(dir: &Path, round: usize) -> std::path::PathBuf {
    dir.with_extension(format!("acked-{round}"))
}

/// The child: puts until killed. Ignored (listed as skipped, not as a passing test); the
/// crash test runs it with `--ignored` and its variables set.
#[test]
#[ignore = "the child process of the SIGKILL test, which runs it"]
fn crash_child() {
    let (Some(dir), Some(round)) = (std::env::var_os(ENV_DIR), std::env::var_os(ENV_ROUND)) else {
        panic!("run by the SIGKILL test, with {ENV_DIR} and {ENV_ROUND} set")
    };
    let dir = Path::new(&dir);
    let round: usize = round.to_str().unwrap().parse().unwrap();
    let store = MessageStore::open(config(dir)).unwrap();
    store.start().unwrap();
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log_path(dir, round)).unwrap();
    for i in 0.. {
        let msg = Message::new(TOPIC, body(round, i))
            .with_queue((i % QUEUES) as i32)
            .with_keys(&[format!("r{round}-k{i}")]);
        let r = store.put_message_sync(&msg).unwrap();
        if r.status == PutStatus::PutOk {
            log.write_all(format!("{round} {i} {} {}\n", r.phy_offset, r.queue_offset).as_bytes()).unwrap();
        }
    }
}

struct Acked {
    round: usize,
    i: usize,
    phy: i64,
    queue_offset: i64,
}

fn read_acked(dir: &Path, round: usize) -> Vec<Acked> {
    let text = std::fs::read_to_string(log_path(dir, round)).unwrap_or_default();
    // A line cut by the kill has no newline yet: it was not acknowledged to anyone.
    let complete = &text[..text.rfind('\n').map_or(0, |n| n + 1)];
    complete
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Acked {
                round: f[0].parse().unwrap(),
                i: f[1].parse().unwrap(),
                phy: f[2].parse().unwrap(),
                queue_offset: f[3].parse().unwrap(),
            }
        })
        .collect()
}

fn lines_in(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

#[test]
fn sigkill_during_sync_flush_puts_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut all: Vec<Acked> = Vec::new();
    for round in 0..3usize {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash_child", "--ignored", "--test-threads", "1", "--nocapture"])
            .env(ENV_DIR, &dir)
            .env(ENV_ROUND, round.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Kill after a varying number of acknowledged puts, enough to roll CommitLog and
        // ConsumeQueue files.
        let want = 300 + round * 170;
        let deadline = Instant::now() + Duration::from_secs(30);
        while lines_in(&log_path(&dir, round)) < want {
            assert!(Instant::now() < deadline, "round {round}: the child acknowledged too few puts");
            if let Some(status) = child.try_wait().unwrap() {
                panic!("round {round}: the child exited by itself: {status}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert!(dir.join("abort").exists(), "a killed store leaves its abort file");

        all.extend(read_acked(&dir, round));
        let store = MessageStore::open(config(&dir)).unwrap();
        assert!(!store.recovery().last_exit_ok);
        store.start().unwrap();
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        for a in &all {
            let m = store
                .message_at(a.phy)
                .unwrap_or_else(|| panic!("round {round}: acked r{}-m{} at {} lost", a.round, a.i, a.phy));
            assert_eq!(m.body, body(a.round, a.i), "acked r{}-m{}", a.round, a.i);
            assert_eq!((m.queue_id, m.queue_offset), ((a.i % QUEUES) as i32, a.queue_offset));
            assert!(store.max_offset() >= a.phy + m.store_size as i64);
        }
        // Through the queues too: every acknowledged message is where its queue offset says.
        for a in all.iter().step_by(7) {
            let got = store.get_messages(TOPIC, (a.i % QUEUES) as i32, a.queue_offset, 1);
            assert_eq!(got.status, GetMessageStatus::Found);
            assert_eq!(got.messages()[0].phy_offset, a.phy);
        }
        let last = all.last().unwrap();
        let found = store.query_by_key(TOPIC, &format!("r{}-k{}", last.round, last.i), 4, 0, i64::MAX);
        assert_eq!(found.iter().map(|m| m.phy_offset).collect::<Vec<_>>(), vec![last.phy]);
        // Queue offsets stay dense across the kills: round n continues where n-1 stopped.
        for q in 0..QUEUES as i32 {
            let max = store.queue_max_offset(TOPIC, q);
            let acked =
                all.iter().filter(|a| (a.i % QUEUES) as i32 == q).map(|a| a.queue_offset).max().unwrap();
            assert!(max > acked, "queue {q}");
        }
        // A clean shutdown releases the lock for the next child (whose kill is the next crash).
        drop(store);
    }
}
