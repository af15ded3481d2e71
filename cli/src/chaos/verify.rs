//! The checks run after every round, on stores opened in-process while both brokers are down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmqha_core::{BrokerConfig, MessageStore};

/// `--record-crc`: every store of the run writes and checks whole-record CRCs
/// (`enabledAppendPropCRC`). Set once at the start of each process of the run.
pub static RECORD_CRC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--commit-log-dirs`: how many directories every store of the run spreads its CommitLog
/// over (`storePathCommitLog` with `;`). Set once at the start of each process of the run.
pub static COMMIT_LOG_DIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// The CommitLog directories of the store in `dir`: `commitlog`, then `commitlog-2` and on
/// with `--commit-log-dirs`. All inside the store's root, so a full file system there fills
/// every one of them.
pub fn commit_log_dirs(dir: &Path) -> Vec<PathBuf> {
    let n = COMMIT_LOG_DIRS.load(std::sync::atomic::Ordering::Relaxed).max(1);
    (1..=n).map(|i| if i == 1 { dir.join("commitlog") } else { dir.join(format!("commitlog-{i}")) }).collect()
}

/// `storePathCommitLog` for the store in `dir`, if the run uses several directories.
pub fn commit_log_path_setting(dir: &Path) -> Option<String> {
    let dirs = commit_log_dirs(dir);
    (dirs.len() > 1).then(|| dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(";"))
}

/// The settings every store of a run shares (master, slave, and stores opened offline), so the
/// same files are read with the same geometry.
pub fn store_settings(file_size: u64, flush_disk_type: &str) -> Vec<(&'static str, String)> {
    let record_crc = RECORD_CRC.load(std::sync::atomic::Ordering::Relaxed);
    vec![
        ("enabledAppendPropCRC", record_crc.to_string()),
        ("flushDiskType", flush_disk_type.into()),
        ("brokerClusterName", "Chaos".into()),
        ("brokerName", "chaos".into()),
        ("mappedFileSizeCommitLog", file_size.to_string()),
        // Small ConsumeQueue and index files: they roll often, and fit a small file system.
        ("mappedFileSizeConsumeQueue", "6000".into()),
        ("maxHashSlotNum", "512".into()),
        ("maxIndexNum", "2048".into()),
        ("brokerIP1", "127.0.0.1".into()),
        ("bindAddress", "127.0.0.1".into()),
        ("listenPort", "0".into()),
        ("haSendHeartbeatInterval", "1000".into()),
        ("slaveTimeout", "1000".into()),
        // Every reconnect through the proxy's cuts and stalls opens with the challenge and
        // response (the other tests cover the default, no secret).
        ("haAuthSecret", "rmqha-chaos shared secret".into()),
        ("flushIntervalCommitLog", "100".into()),
        ("flushIntervalConsumeQueue", "200".into()),
        // Retention would (rightly) delete old CommitLog files on a full disk; the harness
        // checks every acknowledged message from the first, so it never runs here (nor does
        // the disk guard, which reads the disk in the same pass).
        ("cleanResourceInterval", "86400000".into()),
    ]
}

/// A config for `dir` in `role` with the run's settings.
pub fn config(dir: &Path, role: &str, file_size: u64, flush_disk_type: &str) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    for (k, v) in store_settings(file_size, flush_disk_type) {
        c.set(k, &v).map_err(|e| e.to_string())?;
    }
    c.set("storePathRootDir", &dir.display().to_string()).map_err(|e| e.to_string())?;
    if let Some(dirs) = commit_log_path_setting(dir) {
        c.set("storePathCommitLog", &dirs).map_err(|e| e.to_string())?;
    }
    c.set("brokerRole", role).map_err(|e| e.to_string())?;
    if role == "SLAVE" {
        c.set("brokerId", "1").map_err(|e| e.to_string())?;
    }
    Ok(c)
}

/// One acknowledged message, as the master's producer logged it.
#[derive(Debug, Clone)]
pub struct Ack {
    pub tag: String,
    pub msg_id: String,
    pub phy: i64,
    pub size: i32,
    pub queue: i32,
    pub queue_offset: i64,
    pub body_len: usize,
}

impl Ack {
    pub fn end(&self) -> i64 {
        self.phy + self.size as i64
    }
}

pub const TOPIC: &str = "ChaosTopic";

/// A store opened and recovered in-process, with everything dispatched. Dropping it leaves the
/// directory as recovery left it: `crash()` keeps the abort file and writes no checkpoint, so
/// the broker that opens it next recovers exactly as it would have.
pub struct Offline {
    pub store: Arc<MessageStore>,
    pub who: &'static str,
}

impl Drop for Offline {
    fn drop(&mut self) {
        self.store.crash();
    }
}

pub fn open(
    dir: &Path,
    role: &str,
    file_size: u64,
    flush_disk_type: &str,
    who: &'static str,
) -> Result<Offline, String> {
    let store = MessageStore::open(config(dir, role, file_size, flush_disk_type)?)
        .map_err(|e| format!("{who}: cannot open the store offline: {e}"))?;
    let off = Offline { store, who };
    while off.store.dispatcher().dispatch_available().map_err(|e| format!("{who}: dispatch: {e}"))? {}
    Ok(off)
}

/// Every acknowledged message is readable: by physical offset, by message id, through its
/// queue, and (for a sample) by key.
pub fn check_acks(o: &Offline, acks: &[Ack]) -> Result<(), String> {
    let (s, who) = (&o.store, o.who);
    for (i, a) in acks.iter().enumerate() {
        let m = s.message_at(a.phy).ok_or_else(|| {
            format!(
                "{who}: acknowledged message {} at offset {} is LOST (log ends at {})",
                a.tag,
                a.phy,
                s.max_offset()
            )
        })?;
        let want = format!("{}|", a.tag);
        if m.topic != TOPIC
            || m.queue_id != a.queue
            || m.queue_offset != a.queue_offset
            || m.store_size != a.size
            || m.body.len() != a.body_len
            || !m.body.starts_with(want.as_bytes())
        {
            return Err(format!(
                "{who}: acknowledged message {} at offset {} reads back as another: topic {} queue {} queue offset {} size {} body {:?}",
                a.tag,
                a.phy,
                m.topic,
                m.queue_id,
                m.queue_offset,
                m.store_size,
                String::from_utf8_lossy(&m.body[..m.body.len().min(40)])
            ));
        }
        match s.message_by_id(&a.msg_id) {
            Some(b) if b.phy_offset == a.phy => {}
            other => {
                return Err(format!(
                    "{who}: message id {} of {} finds {:?}",
                    a.msg_id,
                    a.tag,
                    other.map(|m| m.phy_offset)
                ));
            }
        }
        let got = s.get_messages(TOPIC, a.queue, a.queue_offset, 1);
        if got.records.first().map(|r| r.phy_offset) != Some(a.phy) {
            return Err(format!(
                "{who}: queue {} offset {} does not serve {} ({}; got {:?})",
                a.queue,
                a.queue_offset,
                a.tag,
                got.status,
                got.records.first().map(|r| r.phy_offset)
            ));
        }
        // The index is checked on a sample: a hash lookup per message is cheap, but not free.
        if i % 16 == 0 || i + 64 >= acks.len() {
            let found = s.query_by_key(TOPIC, &a.tag, 4, 0, i64::MAX);
            if !found.iter().any(|m| m.phy_offset == a.phy) {
                return Err(format!("{who}: key {} does not find its message at {}", a.tag, a.phy));
            }
        }
    }
    Ok(())
}

/// What the ConsumeQueue check saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct CqCheck {
    pub records: u64,
    pub units: u64,
}

/// The log is valid records up to its end; every ConsumeQueue unit points at a record with
/// that queue id and queue offset; every record is in its queue.
pub fn check_consume_queues(o: &Offline) -> Result<CqCheck, String> {
    let (s, who) = (&o.store, o.who);
    let cl = s.commit_log();
    let (min, max) = (cl.min_offset(), cl.max_offset());
    let mut offsets = Vec::new();
    let end = cl.scan_valid_end(min, true, |off, _| offsets.push(off));
    if end != max {
        return Err(format!("{who}: the log has invalid data: valid records end at {end}, the log at {max}"));
    }
    let mut out = CqCheck { records: offsets.len() as u64, units: 0 };
    for off in offsets {
        let m = s.message_at(off as i64).ok_or_else(|| format!("{who}: record at {off} does not decode"))?;
        let cq = s
            .consume_queues()
            .find(&m.topic, m.queue_id)
            .ok_or_else(|| format!("{who}: record at {off} has no queue {}/{}", m.topic, m.queue_id))?;
        match cq.get(m.queue_offset) {
            Some(u) if u.phy_offset == off as i64 && u.size == m.store_size => {}
            other => {
                return Err(format!(
                    "{who}: record at {off} ({}/{} queue offset {}) is not in its queue: unit {:?}",
                    m.topic, m.queue_id, m.queue_offset, other
                ));
            }
        }
    }
    for cq in s.consume_queues().all() {
        for i in cq.min_offset_in_queue()..cq.max_offset_in_queue() {
            let u = cq
                .get(i)
                .ok_or_else(|| format!("{who}: queue {}/{} has no unit {i}", cq.topic(), cq.queue_id()))?;
            if u.phy_offset == 0 && u.size == i32::MAX {
                continue; // filler before a queue's first unit
            }
            out.units += 1;
            let m = s.message_at(u.phy_offset).ok_or_else(|| {
                format!(
                    "{who}: queue {}/{} unit {i} points at {} where no record is",
                    cq.topic(),
                    cq.queue_id(),
                    u.phy_offset
                )
            })?;
            if m.topic != cq.topic()
                || m.queue_id != cq.queue_id()
                || m.queue_offset != i
                || m.store_size != u.size
            {
                return Err(format!(
                    "{who}: queue {}/{} unit {i} points at {} = {}/{} queue offset {} size {} (unit size {})",
                    cq.topic(),
                    cq.queue_id(),
                    u.phy_offset,
                    m.topic,
                    m.queue_id,
                    m.queue_offset,
                    m.store_size,
                    u.size
                ));
            }
        }
    }
    Ok(out)
}

/// The CommitLog files of a store, name -> bytes, from all its CommitLog directories.
pub fn commit_log_files(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    commit_log_paths(dir)?
        .into_iter()
        .map(|(name, path)| {
            std::fs::read(&path).map(|b| (name, b)).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

/// The CommitLog files of a store, name -> path, from all its CommitLog directories; one name
/// in two directories is an error (the store itself refuses to open then).
pub fn commit_log_paths(dir: &Path) -> Result<BTreeMap<String, PathBuf>, String> {
    let mut out = BTreeMap::new();
    for cl in commit_log_dirs(dir) {
        let rd = match std::fs::read_dir(&cl) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", cl.display())),
        };
        for e in rd {
            let e = e.map_err(|e| e.to_string())?;
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
            if is_file && rmqha_core::store::mapped_file::is_file_name(&name) {
                if let Some(other) = out.insert(name.clone(), e.path()) {
                    return Err(format!(
                        "CommitLog file {name} is in {} and {}",
                        other.display(),
                        cl.display()
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// With several CommitLog directories, the log really is spread over them: once it has at
/// least as many files as directories, every directory holds one (files take turns by index).
pub fn check_spread(dir: &Path) -> Result<(), String> {
    let dirs = commit_log_dirs(dir);
    let files = commit_log_paths(dir)?;
    if dirs.len() < 2 || files.len() < dirs.len() {
        return Ok(());
    }
    match dirs.iter().find(|d| !files.values().any(|p| p.parent() == Some(d.as_path()))) {
        Some(empty) => Err(format!(
            "{} CommitLog files, none in {}: the store did not spread its files over its directories",
            files.len(),
            empty.display()
        )),
        None => Ok(()),
    }
}

/// The slave's CommitLog is a byte prefix of the master's: each slave file's bytes, up to its
/// last non-zero byte, equal the master's file of the same name. Returns the bytes compared.
pub fn check_prefix(slave: &Path, master: &Path) -> Result<u64, String> {
    let m = commit_log_files(master)?;
    let s = commit_log_files(slave)?;
    let mut compared = 0u64;
    let names: Vec<&String> = s.keys().collect();
    for (i, (name, bytes)) in s.iter().enumerate() {
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if end == 0 && i + 1 == names.len() {
            continue; // an empty last file (pre-created)
        }
        let Some(mb) = m.get(name) else {
            return Err(format!("slave CommitLog file {name} is not on the master"));
        };
        if mb.len() != bytes.len() {
            return Err(format!(
                "slave CommitLog file {name} is {} bytes, the master's {}",
                bytes.len(),
                mb.len()
            ));
        }
        if let Some(p) = (0..end).find(|&p| bytes[p] != mb[p]) {
            return Err(format!(
                "slave CommitLog is not a prefix of the master's: file {name} differs at byte {p} (slave data ends at {end})"
            ));
        }
        // A slave file before its last must be complete (the master's next file exists).
        if i + 1 < names.len() && end < mb.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1) {
            return Err(format!(
                "slave CommitLog file {name} ends early at {end} though a later file exists"
            ));
        }
        compared += end as u64;
    }
    Ok(compared)
}
