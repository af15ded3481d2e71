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

/// A broker config for tests: 127.0.0.1, free ports, small files.
pub fn broker_config(dir: &Path, role: &str, extra: &[(&str, &str)]) -> BrokerConfig {
    let mut c = store_config(dir, &[]);
    c.set("bindAddress", "127.0.0.1").unwrap();
    c.set("brokerRole", role).unwrap();
    c.set("haListenPort", "0").unwrap();
    c.set("brokerName", "broker-a").unwrap();
    if role == "SLAVE" {
        c.set("brokerId", "1").unwrap();
    }
    for (k, v) in extra {
        c.set(k, v).unwrap();
    }
    c
}

/// A SLAVE on `dir` replicating from `master` (its HA port on 127.0.0.1), with more keys.
pub fn slave_of(
    dir: &Path,
    master: &rmqha_core::Broker,
    extra: &[(&str, &str)],
) -> std::sync::Arc<rmqha_core::Broker> {
    let addr = format!("127.0.0.1:{}", master.ha_port());
    let mut kv = vec![("haMasterAddress", addr.as_str())];
    kv.extend_from_slice(extra);
    rmqha_core::Broker::start_slave(broker_config(dir, "SLAVE", &kv)).unwrap()
}

/// Asserts that two stores hold the same CommitLog files, byte for byte; a difference names
/// the file and the first byte instead of printing both. A file that only one store has must
/// be all zeros: the next file, which a store's allocator makes ahead of its writer on its own
/// schedule, so one of two running stores may have it a moment before the other.
pub fn assert_same_commit_logs(a: &Path, b: &Path) {
    let (a, b) = (commit_log_files(a), commit_log_files(b));
    for (name, bytes) in a.iter().filter(|(k, _)| !b.contains_key(*k)) {
        assert!(bytes.iter().all(|&x| x == 0), "file {name} is only in the first store, and holds data");
    }
    for (name, bytes) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
        assert!(bytes.iter().all(|&x| x == 0), "file {name} is only in the second store, and holds data");
    }
    for (name, bytes) in &a {
        let Some(other) = b.get(name) else { continue };
        if bytes != other {
            let at = bytes
                .iter()
                .zip(other.iter())
                .position(|(x, y)| x != y)
                .unwrap_or(bytes.len().min(other.len()));
            let last = bytes.iter().zip(other.iter()).rposition(|(x, y)| x != y).unwrap_or(at);
            panic!(
                "file {name} differs: lengths {} and {}, first difference at byte {at}, last at byte {last} \
                 ({:?} against {:?} there)",
                bytes.len(),
                other.len(),
                &bytes[at..(at + 16).min(bytes.len())],
                &other[at..(at + 16).min(other.len())],
            );
        }
    }
}

/// The CommitLog files of a store, name → bytes.
pub fn commit_log_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.join("commitlog")).unwrap() {
        let e = e.unwrap();
        out.insert(e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap());
    }
    out
}

/// A TCP proxy for fault tests: forwards one listener to a target, and can cut every
/// connection or stall forwarding.
pub struct Proxy {
    pub addr: std::net::SocketAddr,
    state: std::sync::Arc<ProxyState>,
}

struct ProxyState {
    stalled: std::sync::atomic::AtomicBool,
    /// Stalls only what the client sends (a slave's acks), not what it receives.
    stalled_up: std::sync::atomic::AtomicBool,
    stopping: std::sync::atomic::AtomicBool,
    conns: std::sync::Mutex<Vec<std::net::TcpStream>>,
}

impl Proxy {
    pub fn start(target: std::net::SocketAddr) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = std::sync::Arc::new(ProxyState {
            stalled: false.into(),
            stalled_up: false.into(),
            stopping: false.into(),
            conns: std::sync::Mutex::new(Vec::new()),
        });
        let st = state.clone();
        std::thread::spawn(move || {
            for c in listener.incoming() {
                if st.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = c else { continue };
                let Ok(server) = std::net::TcpStream::connect(target) else { continue };
                st.conns.lock().unwrap().push(client.try_clone().unwrap());
                st.conns.lock().unwrap().push(server.try_clone().unwrap());
                for (mut from, mut to, up) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap(), true),
                    (server.try_clone().unwrap(), client.try_clone().unwrap(), false),
                ] {
                    let st = st.clone();
                    std::thread::spawn(move || {
                        use std::io::{Read, Write};
                        let mut buf = [0u8; 65536];
                        let stalled = || {
                            (st.stalled.load(Ordering::SeqCst)
                                || (up && st.stalled_up.load(Ordering::SeqCst)))
                                && !st.stopping.load(Ordering::SeqCst)
                        };
                        loop {
                            while stalled() {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            while stalled() {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { addr, state }
    }

    /// Closes every proxied connection (new ones are still accepted).
    pub fn cut(&self) {
        for c in self.state.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Stops or resumes forwarding (bytes wait in the proxy and the socket buffers).
    pub fn stall(&self, on: bool) {
        self.state.stalled.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops or resumes forwarding what clients send, while what they receive still flows.
    pub fn stall_up(&self, on: bool) {
        self.state.stalled_up.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut();
        let _ = std::net::TcpStream::connect(self.addr);
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

/// Panics on any thread of this test process so far (the default hook still prints them);
/// the counting hook is installed by the first call.
pub fn panic_count() -> &'static std::sync::atomic::AtomicUsize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
    &PANICS
}

/// A tmpfs of a given size mounted for a test (needs root, as the chaos harness does);
/// unmounted on drop.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, bytes: u64) -> Result<Tmpfs, String> {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "rmqha-test"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}
