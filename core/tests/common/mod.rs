//! Helpers shared by the scenario tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use rmqha_core::{BrokerConfig, Message};

/// A store config on `dir` with small files so tests roll often.
pub fn store_config(dir: &Path, extra: &[(&str, &str)]) -> BrokerConfig {
    let mut c = BrokerConfig::default();
    c.set("storePathRootDir", dir.to_str().unwrap()).unwrap();
    c.set("mappedFileSizeCommitLog", "65536").unwrap();
    c.set("mappedFileSizeConsumeQueue", "2000").unwrap();
    c.set("maxHashSlotNum", "64").unwrap();
    c.set("maxIndexNum", "256").unwrap();
    c.set("listenPort", "0").unwrap();
    c.set("brokerIP1", "127.0.0.1").unwrap();
    c.set("flushIntervalCommitLog", "50").unwrap();
    c.set("flushIntervalConsumeQueue", "50").unwrap();
    for (k, v) in extra {
        c.set(k, v).unwrap();
    }
    c
}

/// The `i`th test message: body `msg-<i>-` padded to `len` bytes.
pub fn message(topic: &str, queue: i32, i: usize, len: usize) -> Message {
    let mut body = format!("msg-{i}-").into_bytes();
    body.resize(len.max(body.len()), b'x');
    Message::new(topic, body)
        .with_queue(queue)
        .with_tags(format!("tag{}", i % 3))
        .with_keys(&[format!("key-{i}")])
}

/// Polls `cond` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            let mut perms = std::fs::metadata(&dst).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&dst, perms).unwrap();
        }
    }
}

/// The CommitLog file holding physical offset `phy`, and `phy`'s position in it.
pub fn commit_log_file(root: &Path, phy: u64, file_size: u64) -> (std::path::PathBuf, usize) {
    let start = phy - phy % file_size;
    (root.join("commitlog").join(format!("{start:020}")), (phy - start) as usize)
}

/// Reads bytes `[from, to)` of a file.
pub fn read_range(path: &Path, from: usize, to: usize) -> Vec<u8> {
    let all = std::fs::read(path).unwrap();
    all[from..to].to_vec()
}

/// Overwrites bytes of a file in place (the file keeps its length).
pub fn patch(path: &Path, at: usize, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at as u64).unwrap();
}

/// The big-endian i64 at byte `at` of the store's checkpoint file.
pub fn checkpoint_field(root: &Path, at: usize) -> i64 {
    let b = std::fs::read(root.join("checkpoint")).unwrap();
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Every file under `dir`, recursively, relative paths sorted.
pub fn list_files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(base, &e.path(), out);
            } else {
                out.push(e.path().strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
