//! A short soak: `rmqha-chaos` for about 20 seconds and at least two rounds of each of its
//! nine faults (SIGKILL of master and slave, link cut and stall, torn and corrupted
//! tails, full disk on master and slave), every round checked (no acknowledged message lost, the slave a byte
//! prefix of the master, ConsumeQueues consistent, no panic). The longer run is
//! `cargo run --release --bin rmqha-chaos -- --seconds 1800` (RELIABILITY.md). A shorter run
//! does every fault once with whole-record CRCs on (`--record-crc`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `rmqha-chaos` with `args` (and a report, in `dir`) and returns its report.
fn soak(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let report = dir.join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmqha-chaos"))
        .args(args)
        .arg("--report")
        .arg(&report)
        .arg("--work")
        .arg(dir.join("work"))
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // A watchdog: the harness bounds every wait itself; this catches a harness bug. Below
    // nextest's 360 s limit for this test, so that its message is what a hang shows.
    let deadline = Instant::now() + Duration::from_secs(330);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rmqha-chaos did not finish within 330 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(status.success(), "rmqha-chaos failed ({status}):\n{text}");
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["result"], "pass");
    assert_eq!(r["messages_lost"], 0);
    assert!(r["messages_acknowledged"].as_u64().unwrap() > 0);
    assert_eq!(r["faults"].as_object().unwrap().len(), 9, "every fault kind ran: {}", r["faults"]);
    r
}

#[test]
fn chaos_soak_one_minute() {
    let dir = tempfile::tempdir().unwrap();
    soak(dir.path(), &["--seconds", "20", "--min-rounds", "18"]);
}

/// Every fault once with whole-record CRCs (`enabledAppendPropCRC`) on both stores: recovery
/// checks each record's `__CRC32#`, and a good record it cut would be a lost acknowledged
/// message.
#[test]
fn chaos_soak_with_record_crcs() {
    let dir = tempfile::tempdir().unwrap();
    let r = soak(dir.path(), &["--seconds", "3", "--min-rounds", "9", "--record-crc", "--keep"]);
    assert_eq!(r["record_crc"], true);
    // The stores live on file systems the harness mounts and unmounts; the settings it gave
    // the slave process are kept (the master's are the same, from the same function).
    let props = std::fs::read_to_string(dir.path().join("work/slave.properties")).unwrap();
    assert!(props.lines().any(|l| l == "enabledAppendPropCRC=true"), "{props}");
}

/// Every fault once with each store's CommitLog over three directories (`storePathCommitLog`
/// with `;`): recovery, torn tails, full disks and replication cross directories, and the
/// harness checks that every directory holds files.
#[test]
fn chaos_soak_over_three_commit_log_directories() {
    let dir = tempfile::tempdir().unwrap();
    let r = soak(dir.path(), &["--seconds", "3", "--min-rounds", "9", "--commit-log-dirs", "3", "--keep"]);
    assert_eq!(r["commit_log_dirs"], 3);
    let props = std::fs::read_to_string(dir.path().join("work/slave.properties")).unwrap();
    let line = props.lines().find(|l| l.starts_with("storePathCommitLog=")).expect("storePathCommitLog set");
    assert_eq!(line.split(';').count(), 3, "{line}");
}
