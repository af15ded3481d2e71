//! `rmqha-chaos`: a fault-injection harness for master/slave replication.
//!
//! It runs a SYNC_MASTER (this binary in child mode, embedding a `Broker` whose producer
//! thread logs every PUT_OK) and a SLAVE (`rmqha broker`, or this binary in slave mode) as
//! separate processes, with a TCP proxy of its own between the slave and the master's HA port.
//! Each round injects one fault: SIGKILL of the master or of the slave, a cut or a stalled
//! link, a torn or corrupted CommitLog tail (slave, or master beyond what anyone holds), or a
//! full disk on the master or on the slave (a size-limited tmpfs it mounts and fills; where it
//! cannot mount, the names of the next CommitLog files are taken so that creating them fails).
//! Then it stops both, opens both stores in-process and checks: every acknowledged message is
//! on the slave and on the master; the slave's CommitLog is a byte prefix of the master's; the
//! ConsumeQueues match the CommitLog; nobody panicked.
//!
//!     rmqha-chaos --rounds 8
//!     rmqha-chaos --seconds 1800 --report chaos.json

#[path = "../chaos/child.rs"]
mod child;
#[path = "../chaos/proxy.rs"]
mod proxy;
#[path = "../chaos/verify.rs"]
mod verify;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use child::Rng;
use proxy::Proxy;
use verify::Ack;

#[derive(Parser)]
#[command(name = "rmqha-chaos", about = "Fault-injection harness for rmqha master/slave replication")]
struct Cli {
    #[command(subcommand)]
    child: Option<ChildCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum ChildCmd {
    /// (internal) A SYNC_MASTER with an embedded producer.
    #[command(hide = true)]
    ChildMaster {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        ack_log: PathBuf,
        #[arg(long)]
        generation: u64,
        #[arg(long)]
        file_size: u64,
        #[arg(long)]
        flush_disk_type: String,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        record_crc: bool,
        #[arg(long, default_value_t = 1)]
        commit_log_dirs: usize,
    },
    /// (internal) A slave from a properties file, like `rmqha broker -c FILE`.
    #[command(hide = true)]
    ChildSlave {
        #[arg(short = 'c')]
        config: PathBuf,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Rounds to run (one fault each); default 9 (every kind once) unless --seconds is given.
    #[arg(long)]
    rounds: Option<u64>,
    /// Start no new round after this many seconds.
    #[arg(long)]
    seconds: Option<u64>,
    /// With --seconds: run at least this many rounds even if time is up.
    #[arg(long, default_value_t = 0)]
    min_rounds: u64,
    /// Seed of the fault order, delays and message sizes (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Work directory (default: a new temporary directory, removed on success).
    #[arg(long)]
    work: Option<PathBuf>,
    /// How to fill the disk: auto (tmpfs if it can mount, else blocked), tmpfs, blocked.
    #[arg(long, default_value = "auto")]
    disk_full: String,
    /// CommitLog file size of both stores.
    #[arg(long, default_value_t = 262_144)]
    file_size: u64,
    /// flushDiskType of both stores: ASYNC_FLUSH (mapped-file appends) or SYNC_FLUSH (`pwrite`
    /// appends with zeros written ahead, group commit).
    #[arg(long, default_value = "ASYNC_FLUSH", value_parser = ["ASYNC_FLUSH", "SYNC_FLUSH"])]
    flush_disk_type: String,
    /// Both stores write a whole-record CRC into every record (`enabledAppendPropCRC`), which
    /// recovery then checks: a good record it cut would show as a lost acknowledged message.
    #[arg(long)]
    record_crc: bool,
    /// Both stores spread their CommitLog over this many directories (`storePathCommitLog`
    /// with `;`), so recovery, torn tails and replication cross directories.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=8))]
    commit_log_dirs: u16,
    /// Acknowledged messages to wait for before and after each fault.
    #[arg(long, default_value_t = 1000)]
    acks_per_phase: u64,
    /// Start new stores once the master's log passes this many bytes.
    #[arg(long, default_value_t = 24 << 20)]
    cycle_bytes: u64,
    /// The `rmqha` binary to run the slave with (default: beside this binary, else this
    /// binary's own slave mode).
    #[arg(long)]
    slave_bin: Option<PathBuf>,
    /// Write the summary as JSON here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the work directory even on success.
    #[arg(long)]
    keep: bool,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.child {
        Some(ChildCmd::ChildMaster {
            store,
            ack_log,
            generation,
            file_size,
            flush_disk_type,
            seed,
            record_crc,
            commit_log_dirs,
        }) => {
            init_logging();
            verify::RECORD_CRC.store(record_crc, std::sync::atomic::Ordering::Relaxed);
            verify::COMMIT_LOG_DIRS.store(commit_log_dirs, std::sync::atomic::Ordering::Relaxed);
            child::run_master(&store, &ack_log, generation, file_size, &flush_disk_type, seed)
        }
        Some(ChildCmd::ChildSlave { config }) => {
            init_logging();
            child::run_slave(&config)
        }
        None => {
            verify::RECORD_CRC.store(cli.run.record_crc, std::sync::atomic::Ordering::Relaxed);
            verify::COMMIT_LOG_DIRS
                .store(cli.run.commit_log_dirs as usize, std::sync::atomic::Ordering::Relaxed);
            run(cli.run)
        }
    };
    if let Err(e) = result {
        eprintln!("rmqha-chaos: {e}");
        std::process::exit(1);
    }
}

fn init_logging() {
    rmqha_core::logging::init_stderr(rmqha_core::logging::env_filter("warn"));
}

// ---------------------------------------------------------------------------------------
// Faults

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillMaster,
    KillSlave,
    CutLink,
    StallLink,
    TornSlaveTail,
    CorruptSlaveTail,
    TornMasterTail,
    DiskFull,
    DiskFullSlave,
}

const ALL_FAULTS: [Fault; 9] = [
    Fault::KillMaster,
    Fault::KillSlave,
    Fault::CutLink,
    Fault::StallLink,
    Fault::TornSlaveTail,
    Fault::CorruptSlaveTail,
    Fault::TornMasterTail,
    Fault::DiskFull,
    Fault::DiskFullSlave,
];

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::KillMaster => "sigkill-master",
            Fault::KillSlave => "sigkill-slave",
            Fault::CutLink => "link-cut",
            Fault::StallLink => "link-stall",
            Fault::TornSlaveTail => "torn-slave-tail",
            Fault::CorruptSlaveTail => "corrupt-slave-tail",
            Fault::TornMasterTail => "torn-master-tail",
            Fault::DiskFull => "disk-full",
            Fault::DiskFullSlave => "disk-full-slave",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskMethod {
    Tmpfs,
    Blocked,
}

impl DiskMethod {
    fn describe(self) -> &'static str {
        match self {
            DiskMethod::Tmpfs => {
                "tmpfs (a size-limited file system mounted by the harness, filled with a filler file)"
            }
            DiskMethod::Blocked => {
                "blocked files (directories stand where the master's next CommitLog files would be created)"
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Child processes

struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn spawn(mut cmd: Command, name: &str, stderr: &Path) -> Result<Proc, String> {
        let err = std::fs::File::create(stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        // SAFETY: prctl in the forked child before exec is async-signal-safe and touches no
        // memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                // If the harness dies, so do its brokers.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(Proc { name: name.into(), child, stdin, lines })
    }

    fn wait_line(&mut self, pat: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(l) if l.contains(pat) => return Ok(l),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(s) = self.child.try_wait().map_err(|e| e.to_string())? {
                        return Err(format!("{} exited ({s}) before printing {pat:?}", self.name));
                    }
                    if Instant::now() >= deadline {
                        return Err(format!("{} printed no {pat:?} within {timeout:?}", self.name));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!("{} closed its output before printing {pat:?}", self.name));
                }
            }
        }
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        let s = self.stdin.as_mut().ok_or("no stdin")?;
        writeln!(s, "{line}").and_then(|_| s.flush()).map_err(|e| format!("{}: {e}", self.name))
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                return Err(format!("{} did not exit within {timeout:?}", self.name));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The producer's log

#[derive(Default)]
struct AckLog {
    path: PathBuf,
    pos: u64,
    partial: Vec<u8>,
    acks: Vec<Ack>,
    /// (tag, status) of every put that was not PUT_OK.
    fails: Vec<(String, String)>,
}

impl AckLog {
    fn new(path: PathBuf) -> Self {
        AckLog { path, ..Default::default() }
    }

    fn poll(&mut self) -> Result<(), String> {
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
        };
        f.seek(SeekFrom::Start(self.pos)).map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(|e| e.to_string())?;
        self.pos += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else { return Ok(()) };
        let rest = self.partial.split_off(last_nl + 1);
        let whole = std::mem::replace(&mut self.partial, rest);
        for line in String::from_utf8_lossy(&whole).lines() {
            let v: Vec<&str> = line.split_whitespace().collect();
            match v.first() {
                Some(&"ok") if v.len() == 8 => {
                    let p = |s: &str| s.parse::<i64>().map_err(|e| format!("ack log line {line:?}: {e}"));
                    self.acks.push(Ack {
                        tag: v[1].into(),
                        msg_id: v[2].into(),
                        phy: p(v[3])?,
                        size: p(v[4])? as i32,
                        queue: p(v[5])? as i32,
                        queue_offset: p(v[6])?,
                        body_len: p(v[7])? as usize,
                    });
                }
                Some(&"fail") if v.len() >= 3 => self.fails.push((v[1].into(), v[2].into())),
                _ => return Err(format!("ack log {}: malformed line {line:?}", self.path.display())),
            }
        }
        Ok(())
    }

    /// Called between generations, once the previous writer is dead and reaped: whatever it
    /// left unterminated is a line torn by SIGKILL (Linux checks for a fatal signal between the
    /// pages a `write` copies, so even one `write` per line can stop part-way). The put it
    /// described was never recorded as acknowledged, so it is dropped here and the next
    /// generation's first line starts clean. Returns whether a torn line was dropped.
    fn seal_generation(&mut self) -> Result<bool, String> {
        self.poll()?;
        let torn = !self.partial.is_empty();
        self.partial.clear();
        Ok(torn)
    }

    fn max_acked_end(&self) -> i64 {
        self.acks.iter().map(Ack::end).max().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------
// File systems

struct Mount {
    dir: PathBuf,
}

impl Mount {
    fn tmpfs(dir: &Path, size_mb: u64) -> Result<Mount, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "rmqha-chaos"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Mount { dir: dir.to_path_buf() })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.dir).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Fills the file system holding `dir` with `dir/filler` until it refuses a byte more.
fn fill_disk(dir: &Path) -> Result<u64, String> {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut total = 0u64;
    for chunk in [1usize << 20, 4096, 1] {
        let buf = vec![0xA5u8; chunk];
        while let Ok(n) = f.write(&buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    let _ = f.sync_all();
    Ok(total)
}

fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::create_dir_all(to);
    let Ok(rd) = std::fs::read_dir(from) else { return };
    for e in rd.flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            copy_tree(&e.path(), &dst);
        } else if e.file_name() != "filler" {
            let _ = std::fs::copy(e.path(), &dst);
        }
    }
}

fn clear_dir(dir: &Path) -> Result<(), String> {
    for e in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
        let p = e.path();
        let r = if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        r.map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Records in raw CommitLog bytes (for tampering)

const BLANK_MAGIC: u32 = 0xCBD4_3194;

/// (position, size) of the whole records from the start of a file's bytes, up to `end`.
fn records_in(bytes: &[u8], end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= end {
        let size = i32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap_or_default());
        let magic = u32::from_be_bytes(bytes[pos + 4..pos + 8].try_into().unwrap_or_default());
        if size <= 0 || magic == BLANK_MAGIC || pos + size as usize > end {
            break;
        }
        out.push((pos, size as usize));
        pos += size as usize;
    }
    out
}

/// The last CommitLog file holding data: (path, start offset, bytes, data end).
type DataFile = (PathBuf, u64, Vec<u8>, usize);

fn last_data_file(store: &Path) -> Result<Option<DataFile>, String> {
    for (name, path) in verify::commit_log_paths(store)?.into_iter().rev() {
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if end > 0 {
            let start = name.parse::<u64>().map_err(|e| e.to_string())?;
            return Ok(Some((path, start, bytes, end)));
        }
    }
    Ok(None)
}

fn write_at(path: &Path, pos: usize, data: &[u8]) -> Result<(), String> {
    let f =
        std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all_at(data, pos as u64).map_err(|e| format!("{}: {e}", path.display()))
}

/// Offset of the body within a record with IPv4 hosts (spec 1.2).
const BODY_AT: usize = 88;

fn body_len_at(bytes: &[u8], pos: usize) -> usize {
    u32::from_be_bytes(bytes[pos + 84..pos + 88].try_into().unwrap_or_default()) as usize
}

// ---------------------------------------------------------------------------------------
// The run

#[derive(Default)]
struct Stats {
    rounds: u64,
    faults: BTreeMap<&'static str, u64>,
    acked_total: u64,
    cycles: u64,
    master_starts: u64,
    slave_starts: u64,
    master_sigkills: u64,
    slave_sigkills: u64,
    master_clean_stops: u64,
    not_ok_puts: BTreeMap<String, u64>,
    disk_full_errors: u64,
    torn_tails_cut: u64,
    torn_ack_lines: u64,
    abnormal_recoveries: u64,
    records_checked: u64,
    cq_units_checked: u64,
    prefix_bytes_checked: u64,
}

enum SlaveBin {
    Rmqha(PathBuf),
    SelfMode,
}

struct World {
    a: RunArgs,
    exe: PathBuf,
    slave_bin: SlaveBin,
    work: PathBuf,
    master_dir: PathBuf,
    slave_dir: PathBuf,
    logs: PathBuf,
    disk: DiskMethod,
    // Dropped after the processes (field order): unmounts the stores' file systems.
    proxy: Proxy,
    master: Option<Proc>,
    slave: Option<Proc>,
    _mounts: Vec<Mount>,
    generation: u64,
    slave_gen: u64,
    acks: AckLog,
    stats: Stats,
    rng: Rng,
    seed: u64,
    round_logs: Vec<PathBuf>,
}

const START_TIMEOUT: Duration = Duration::from_secs(60);
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(60);

fn is_disk_error(status: &str) -> bool {
    status == "CREATE_MAPPED_FILE_FAILED" || status == "error"
}

impl World {
    fn props(&self) -> PathBuf {
        self.work.join("slave.properties")
    }

    fn write_slave_props(&self) -> Result<(), String> {
        let mut s = String::from("# written by rmqha-chaos\nbrokerRole=SLAVE\nbrokerId=1\n");
        for (k, v) in verify::store_settings(self.a.file_size, &self.a.flush_disk_type) {
            s.push_str(&format!("{k}={v}\n"));
        }
        s.push_str(&format!("storePathRootDir={}\n", self.slave_dir.display()));
        if let Some(dirs) = verify::commit_log_path_setting(&self.slave_dir) {
            s.push_str(&format!("storePathCommitLog={dirs}\n"));
        }
        s.push_str(&format!("haMasterAddress={}\n", self.proxy.addr()));
        std::fs::write(self.props(), s).map_err(|e| e.to_string())
    }

    fn start_master(&mut self) -> Result<(), String> {
        if let Some(m) = &mut self.master {
            return match m.exited() {
                None => Ok(()),
                Some(s) => Err(format!("the master exited on its own: {s}")),
            };
        }
        if self.acks.seal_generation()? {
            self.stats.torn_ack_lines += 1;
        }
        self.generation += 1;
        let err = self.logs.join(format!("master-{}.err", self.generation));
        let mut cmd = Command::new(&self.exe);
        cmd.arg("child-master")
            .arg("--store")
            .arg(&self.master_dir)
            .arg("--ack-log")
            .arg(&self.acks.path)
            .args([
                "--generation",
                &self.generation.to_string(),
                "--file-size",
                &self.a.file_size.to_string(),
                "--flush-disk-type",
                &self.a.flush_disk_type,
            ])
            .args(["--seed", &self.seed.to_string()])
            .args(["--commit-log-dirs", &self.a.commit_log_dirs.to_string()])
            .env("RMQHA_LOG", "warn");
        if self.a.record_crc {
            cmd.arg("--record-crc");
        }
        let mut p = Proc::spawn(cmd, &format!("master #{}", self.generation), &err)?;
        self.round_logs.push(err);
        let line = p.wait_line("chaos-master ready", START_TIMEOUT)?;
        let port: u16 = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("haPort="))
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("no haPort in {line:?}"))?;
        if line.contains("tornTail=true") {
            self.stats.torn_tails_cut += 1;
        }
        if line.contains("lastExitOk=false") {
            self.stats.abnormal_recoveries += 1;
        }
        self.proxy.retarget(([127, 0, 0, 1], port).into());
        self.master = Some(p);
        self.stats.master_starts += 1;
        Ok(())
    }

    fn start_slave(&mut self) -> Result<(), String> {
        if let Some(s) = &mut self.slave {
            return match s.exited() {
                None => Ok(()),
                Some(st) => Err(format!("the slave exited on its own: {st}")),
            };
        }
        self.slave_gen += 1;
        let err = self.logs.join(format!("slave-{}.err", self.slave_gen));
        let mut cmd = match &self.slave_bin {
            SlaveBin::Rmqha(p) => {
                let mut c = Command::new(p);
                c.arg("broker").arg("-c").arg(self.props());
                c
            }
            SlaveBin::SelfMode => {
                let mut c = Command::new(&self.exe);
                c.arg("child-slave").arg("-c").arg(self.props());
                c
            }
        };
        cmd.env("RMQHA_LOG", "warn");
        let mut p = Proc::spawn(cmd, &format!("slave #{}", self.slave_gen), &err)?;
        self.round_logs.push(err);
        p.wait_line("rmqha broker started", START_TIMEOUT)?;
        self.slave = Some(p);
        self.stats.slave_starts += 1;
        Ok(())
    }

    fn ensure_running(&mut self) -> Result<(), String> {
        self.start_master()?;
        self.start_slave()
    }

    fn check_alive(&mut self) -> Result<(), String> {
        for p in [&mut self.master, &mut self.slave].into_iter().flatten() {
            if let Some(s) = p.exited() {
                return Err(format!("{} exited on its own: {s}", p.name));
            }
        }
        Ok(())
    }

    /// Waits until `n` more puts were acknowledged.
    fn wait_acks(&mut self, n: u64) -> Result<(), String> {
        self.acks.poll()?;
        let target = self.acks.acks.len() as u64 + n;
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        loop {
            self.acks.poll()?;
            if self.acks.acks.len() as u64 >= target {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() >= deadline {
                return Err(format!(
                    "only {} of {target} puts acknowledged within {PROGRESS_TIMEOUT:?} (live proxied connections: {})",
                    self.acks.acks.len(),
                    self.proxy.live()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for a failed put logged after the first `since` failures, matching `pred`.
    fn wait_fail(&mut self, since: usize, what: &str, pred: impl Fn(&str) -> bool) -> Result<String, String> {
        let deadline = Instant::now() + PROGRESS_TIMEOUT;
        loop {
            self.acks.poll()?;
            let from = since.min(self.acks.fails.len());
            if let Some((_, s)) = self.acks.fails[from..].iter().find(|(_, s)| pred(s)) {
                return Ok(s.clone());
            }
            self.check_alive()?;
            if Instant::now() >= deadline {
                return Err(format!("no put failed with {what} within {PROGRESS_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop_master(&mut self, kill: bool) -> Result<(), String> {
        let Some(mut p) = self.master.take() else { return Ok(()) };
        if let Some(s) = p.exited() {
            return Err(format!("{} had exited on its own: {s}", p.name));
        }
        if kill {
            p.signal(libc::SIGKILL);
            let s = p.wait_exit(Duration::from_secs(20))?;
            if s.signal() != Some(libc::SIGKILL) {
                return Err(format!("{} ended with {s} instead of SIGKILL", p.name));
            }
            self.stats.master_sigkills += 1;
        } else {
            p.send("exit")?;
            let s = p.wait_exit(Duration::from_secs(60))?;
            if !s.success() {
                return Err(format!("{} did not stop cleanly: {s}", p.name));
            }
            self.stats.master_clean_stops += 1;
        }
        Ok(())
    }

    fn stop_slave(&mut self, kill: bool) -> Result<(), String> {
        let Some(mut p) = self.slave.take() else { return Ok(()) };
        if let Some(s) = p.exited() {
            return Err(format!("{} had exited on its own: {s}", p.name));
        }
        p.signal(if kill { libc::SIGKILL } else { libc::SIGTERM });
        let s = p.wait_exit(Duration::from_secs(60))?;
        if kill {
            if s.signal() != Some(libc::SIGKILL) {
                return Err(format!("{} ended with {s} instead of SIGKILL", p.name));
            }
            self.stats.slave_sigkills += 1;
        } else if !s.success() {
            return Err(format!("{} did not stop cleanly on SIGTERM: {s}", p.name));
        }
        Ok(())
    }

    fn random_pause(&mut self) {
        // Not synchronisation: the fault lands at a random point of the stream.
        std::thread::sleep(Duration::from_millis(self.rng.range(0, 300)));
    }

    fn inject(&mut self, fault: Fault) -> Result<String, String> {
        match fault {
            Fault::KillMaster => {
                self.random_pause();
                self.stop_master(true)?;
                self.start_master()?;
                Ok("master SIGKILLed mid-stream and restarted".into())
            }
            Fault::KillSlave => {
                self.random_pause();
                let since = self.acks.fails.len();
                self.stop_slave(true)?;
                let st = self.wait_fail(since, "any status", |_| true)?;
                self.start_slave()?;
                Ok(format!("slave SIGKILLed (the master answered {st} meanwhile) and restarted"))
            }
            Fault::CutLink => {
                self.random_pause();
                let before = self.proxy.forwarded();
                self.proxy.cut();
                let deadline = Instant::now() + PROGRESS_TIMEOUT;
                while self.proxy.forwarded() == before {
                    if Instant::now() >= deadline {
                        return Err("the slave did not reconnect after the link was cut".into());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok("link cut; the slave reconnected".into())
            }
            Fault::StallLink => {
                self.random_pause();
                let since = self.acks.fails.len();
                self.proxy.stall(true);
                let r = self.wait_fail(since, "FLUSH_SLAVE_TIMEOUT", |s| s == "FLUSH_SLAVE_TIMEOUT");
                self.proxy.stall(false);
                let st = r?;
                Ok(format!("link stalled until a put answered {st}"))
            }
            Fault::TornSlaveTail | Fault::CorruptSlaveTail => {
                self.random_pause();
                self.stop_slave(true)?;
                let what = self.tamper_slave(fault == Fault::TornSlaveTail)?;
                self.start_slave()?;
                Ok(what)
            }
            Fault::TornMasterTail => {
                // Stall the link so the master holds bytes the slave does not, then kill both.
                let since = self.acks.fails.len();
                self.proxy.stall(true);
                let r = self.wait_fail(since, "FLUSH_SLAVE_TIMEOUT", |s| s == "FLUSH_SLAVE_TIMEOUT");
                let r = r.and_then(|_| self.stop_master(true)).and_then(|_| self.stop_slave(true));
                self.proxy.stall(false);
                r?;
                let what = self.tamper_master()?;
                self.ensure_running()?;
                Ok(what)
            }
            Fault::DiskFull => self.disk_full(),
            Fault::DiskFullSlave => self.disk_full_slave(),
        }
    }

    /// A torn or corrupted tail on the (stopped) slave: its recovery must cut it and the
    /// master must send the bytes again.
    fn tamper_slave(&mut self, torn: bool) -> Result<String, String> {
        let Some((path, start, bytes, end)) = last_data_file(&self.slave_dir)? else {
            return Ok("slave log empty: nothing to tamper with".into());
        };
        if torn {
            let lose = self.rng.range(1, end.min(3000) as u64 + 1) as usize;
            let p = end - lose;
            let mut patch = vec![0u8; lose];
            let mut what =
                format!("slave tail torn: {lose} bytes before offset {} zeroed", start + end as u64);
            if self.rng.next() % 2 == 0 {
                // Part of the lost write landed as garbage.
                let g = (self.rng.range(1, 600) as usize).min(bytes.len() - p);
                let garbage: Vec<u8> = (0..g).map(|_| self.rng.next() as u8).collect();
                patch.resize(patch.len().max(g), 0);
                patch[..g].copy_from_slice(&garbage);
                what.push_str(&format!(", {g} garbage bytes written at {}", start + p as u64));
            }
            write_at(&path, p, &patch)?;
            Ok(what)
        } else {
            let recs = records_in(&bytes, end);
            let nth = self.rng.range(0, recs.len().clamp(1, 8) as u64) as usize;
            let Some(&(pos, size)) = recs.iter().rev().nth(nth) else {
                return Ok("slave's last file holds no whole record: nothing to corrupt".into());
            };
            let body_len = body_len_at(&bytes, pos);
            // Only what the record format can detect: its size, its magic, or its body (CRC).
            let (at, field) = match self.rng.range(0, 4) {
                0 => (pos + self.rng.range(0, 4) as usize, "TOTALSIZE"),
                1 => (pos + 4 + self.rng.range(0, 4) as usize, "MAGICCODE"),
                _ if body_len > 0 => (pos + BODY_AT + self.rng.range(0, body_len as u64) as usize, "body"),
                _ => (pos + 4, "MAGICCODE"),
            };
            let flip = self.rng.range(1, 256) as u8;
            write_at(&path, at, &[bytes[at] ^ flip])?;
            Ok(format!(
                "slave record at {} ({size} bytes) corrupted: {field} byte at {} xor {flip:#04x}",
                start + pos as u64,
                start + at as u64
            ))
        }
    }

    /// A torn tail on the (stopped) master, only beyond what the slave holds and beyond the
    /// last acknowledged message: a write in flight when the machine died.
    fn tamper_master(&mut self) -> Result<String, String> {
        self.acks.poll()?;
        let acked_end = self.acks.max_acked_end().max(0) as u64;
        // What the slave holds once it recovers (it cuts a partial record at start).
        let slave_end = {
            let o =
                verify::open(&self.slave_dir, "SLAVE", self.a.file_size, &self.a.flush_disk_type, "slave")?;
            o.store.max_offset().max(0) as u64
        };
        let boundary = acked_end.max(slave_end);
        let Some((path, start, bytes, end)) = last_data_file(&self.master_dir)? else {
            return Ok("master log empty: nothing to tear".into());
        };
        let recs = records_in(&bytes, end);
        let mut what = Vec::new();
        let beyond: Vec<(usize, usize)> =
            recs.iter().copied().filter(|&(p, _)| start + p as u64 >= boundary).collect();
        let mut data_end = recs.last().map(|&(p, s)| p + s).unwrap_or(0);
        if let Some(&(pos, size)) = beyond.last() {
            let body_len = body_len_at(&bytes, pos);
            let from = pos + BODY_AT + self.rng.range(0, body_len.max(1) as u64) as usize;
            write_at(&path, from, &vec![0u8; pos + size - from])?;
            what.push(format!(
                "master record at {} torn: its last {} bytes zeroed ({} unacknowledged records beyond the slave's end {slave_end} and the last ack's end {acked_end})",
                start + pos as u64,
                pos + size - from,
                beyond.len()
            ));
            data_end = from;
        }
        if self.rng.next() % 2 == 0 || what.is_empty() {
            let at = data_end.max(end);
            // Leave the 8 bytes a BLANK record would need.
            let room = bytes.len().saturating_sub(at + 8);
            if room > 0 {
                let g = (self.rng.range(1, 700) as usize).min(room);
                let garbage: Vec<u8> = (0..g).map(|_| self.rng.next() as u8).collect();
                write_at(&path, at, &garbage)?;
                what.push(format!("{g} garbage bytes after the master's data at {}", start + at as u64));
            }
        }
        if what.is_empty() {
            what.push("no room to tear on the master".into());
        }
        Ok(what.join("; "))
    }

    fn disk_full(&mut self) -> Result<String, String> {
        let since = self.acks.fails.len();
        let filled = match self.disk {
            DiskMethod::Tmpfs => fill_disk(&self.master_dir)?,
            DiskMethod::Blocked => self.block_next_files(&self.master_dir, true)?,
        };
        let r = self.wait_fail(since, "a disk error", is_disk_error);
        // Space returns whatever happened.
        match self.disk {
            DiskMethod::Tmpfs => {
                let _ = std::fs::remove_file(self.master_dir.join("filler"));
            }
            DiskMethod::Blocked => {
                self.block_next_files(&self.master_dir, false)?;
            }
        }
        let st = r?;
        self.acks.poll()?;
        let errors = self.acks.fails[since..].iter().filter(|(_, s)| is_disk_error(s)).count() as u64;
        self.stats.disk_full_errors += errors;
        self.check_alive()?;
        // Writes resume once space is back.
        self.wait_acks(20)?;
        let how = match self.disk {
            DiskMethod::Tmpfs => format!("{filled} bytes of filler"),
            DiskMethod::Blocked => format!("{filled} file names blocked"),
        };
        Ok(format!("disk full ({how}): {errors} puts failed ({st}), then writes resumed"))
    }

    /// The slave's disk fills: it cannot take the next CommitLog file, so it stops acking and
    /// puts answer FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (stored on the master, not
    /// acknowledged); once space returns it catches up and puts are acknowledged again.
    fn disk_full_slave(&mut self) -> Result<String, String> {
        let since = self.acks.fails.len();
        let dir = self.slave_dir.clone();
        let filled = match self.disk {
            DiskMethod::Tmpfs => fill_disk(&dir)?,
            DiskMethod::Blocked => self.block_next_files(&dir, true)?,
        };
        let r = self.wait_fail(since, "a replication status", |s| {
            s == "FLUSH_SLAVE_TIMEOUT" || s == "SLAVE_NOT_AVAILABLE"
        });
        match self.disk {
            DiskMethod::Tmpfs => {
                let _ = std::fs::remove_file(dir.join("filler"));
            }
            DiskMethod::Blocked => {
                self.block_next_files(&dir, false)?;
            }
        }
        let st = r?;
        self.check_alive()?;
        self.wait_acks(20)?;
        let how = match self.disk {
            DiskMethod::Tmpfs => format!("{filled} bytes of filler"),
            DiskMethod::Blocked => format!("{filled} file names blocked"),
        };
        Ok(format!(
            "slave disk full ({how}): puts answered {st} until space returned, then were acknowledged again"
        ))
    }

    /// The fallback "full disk" where no file system can be mounted: directories stand where
    /// the master's next CommitLog files (and their `.creating` temporaries) would be
    /// created, so creating them fails, as it would with ENOSPC. Returns how many.
    fn block_next_files(&self, store: &Path, on: bool) -> Result<u64, String> {
        let last =
            verify::commit_log_paths(store)?.keys().filter_map(|n| n.parse::<u64>().ok()).max().unwrap_or(0);
        let mut n = 0;
        // In every CommitLog directory: the next file may be made in any of them.
        for dir in verify::commit_log_dirs(store) {
            if !dir.is_dir() {
                continue;
            }
            for k in 1..=8u64 {
                let name = format!("{:020}", last + k * self.a.file_size);
                for p in [dir.join(format!("{name}.creating")), dir.join(&name)] {
                    if on && !p.exists() {
                        std::fs::create_dir(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                        n += 1;
                    } else if !on && p.is_dir() {
                        std::fs::remove_dir(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                    }
                }
            }
            if !on {
                // Blocks left from an earlier round (they are only ever empty directories).
                for e in std::fs::read_dir(&dir).map_err(|e| e.to_string())?.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
        }
        Ok(n)
    }

    fn verify(&mut self) -> Result<String, String> {
        self.acks.poll()?;
        let prefix = verify::check_prefix(&self.slave_dir, &self.master_dir)?;
        verify::check_spread(&self.master_dir)?;
        verify::check_spread(&self.slave_dir)?;
        let slave =
            verify::open(&self.slave_dir, "SLAVE", self.a.file_size, &self.a.flush_disk_type, "slave")?;
        verify::check_acks(&slave, &self.acks.acks)?;
        let cs = verify::check_consume_queues(&slave)?;
        let slave_end = slave.store.max_offset();
        drop(slave);
        let master = verify::open(
            &self.master_dir,
            "SYNC_MASTER",
            self.a.file_size,
            &self.a.flush_disk_type,
            "master",
        )?;
        verify::check_acks(&master, &self.acks.acks)?;
        let cm = verify::check_consume_queues(&master)?;
        let master_end = master.store.max_offset();
        drop(master);
        if slave_end > master_end {
            return Err(format!("the slave ({slave_end}) is ahead of the master ({master_end})"));
        }
        for p in &self.round_logs {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            if let Some(i) = text.find("panicked") {
                let from = text[..i].rfind('\n').map_or(0, |n| n + 1);
                let line = text[from..].lines().next().unwrap_or("");
                return Err(format!("{} shows a panic: {line}", p.display()));
            }
        }
        self.stats.records_checked += cs.records + cm.records;
        self.stats.cq_units_checked += cs.units + cm.units;
        self.stats.prefix_bytes_checked += prefix;
        Ok(format!(
            "checked {} acked on both; slave {slave_end} / master {master_end} bytes; {}+{} records, {}+{} queue units consistent",
            self.acks.acks.len(),
            cs.records,
            cm.records,
            cs.units,
            cm.units
        ))
    }

    fn new_cycle_if_big(&mut self) -> Result<(), String> {
        let size: u64 = verify::commit_log_files(&self.master_dir)?
            .values()
            .map(|b| b.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1) as u64)
            .sum();
        if size < self.a.cycle_bytes {
            return Ok(());
        }
        self.stats.acked_total += self.acks.acks.len() as u64;
        self.count_fails();
        self.stats.cycles += 1;
        clear_dir(&self.master_dir)?;
        clear_dir(&self.slave_dir)?;
        self.acks = AckLog::new(self.work.join(format!("acks-{}.log", self.stats.cycles)));
        println!("chaos: cycle {} starts on empty stores", self.stats.cycles);
        Ok(())
    }

    fn count_fails(&mut self) {
        for (_, s) in self.acks.fails.drain(..) {
            *self.stats.not_ok_puts.entry(s).or_default() += 1;
        }
    }

    fn round(&mut self, r: u64, fault: Fault) -> Result<(), String> {
        let t0 = Instant::now();
        self.round_logs.clear();
        self.ensure_running()?;
        self.wait_acks(self.a.acks_per_phase)?;
        let what = self.inject(fault)?;
        self.ensure_running()?;
        self.wait_acks(self.a.acks_per_phase)?;
        // Round end: the master is SIGKILLed two times in three, else stopped cleanly.
        let kill = self.rng.range(0, 3) > 0;
        self.stop_master(kill)?;
        self.stop_slave(false)?;
        let checked = self.verify()?;
        *self.stats.faults.entry(fault.name()).or_default() += 1;
        self.stats.rounds += 1;
        println!(
            "chaos: round {r} {:<18} {:5.1}s  {what}; master {} at the end; {checked}",
            fault.name(),
            t0.elapsed().as_secs_f64(),
            if kill { "SIGKILLed" } else { "stopped cleanly" }
        );
        self.new_cycle_if_big()
    }
}

fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

fn run(a: RunArgs) -> Result<(), String> {
    let started = Instant::now();
    let seed = a.seed.unwrap_or_else(seed_from_clock);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let slave_bin = match &a.slave_bin {
        Some(p) => SlaveBin::Rmqha(p.clone()),
        None => match exe.parent().map(|d| d.join("rmqha")) {
            Some(p) if p.is_file() => SlaveBin::Rmqha(p),
            _ => SlaveBin::SelfMode,
        },
    };
    let (work, tmp_guard) = match &a.work {
        Some(w) => (w.clone(), None),
        None => {
            let t = tempfile::Builder::new().prefix("rmqha-chaos-").tempdir().map_err(|e| e.to_string())?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let (master_dir, slave_dir, logs) = (work.join("master"), work.join("slave"), work.join("logs"));
    for d in [&master_dir, &slave_dir, &logs] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let mut mounts = Vec::new();
    let mut mount_error = None;
    let disk = match a.disk_full.as_str() {
        "blocked" => DiskMethod::Blocked,
        "tmpfs" | "auto" => {
            let both = Mount::tmpfs(&master_dir, 64).and_then(|m| {
                mounts.push(m);
                Mount::tmpfs(&slave_dir, 64)
            });
            match both {
                Ok(m) => {
                    mounts.push(m);
                    DiskMethod::Tmpfs
                }
                Err(e) if a.disk_full == "auto" => {
                    mounts.clear();
                    mount_error = Some(e);
                    DiskMethod::Blocked
                }
                Err(e) => return Err(e),
            }
        }
        other => return Err(format!("--disk-full {other}: expected auto, tmpfs or blocked")),
    };
    let proxy = Proxy::start().map_err(|e| format!("proxy: {e}"))?;
    let acks = AckLog::new(work.join("acks-0.log"));
    let mut w = World {
        a: a.clone(),
        exe,
        slave_bin,
        work: work.clone(),
        master_dir,
        slave_dir,
        logs,
        disk,
        proxy,
        master: None,
        slave: None,
        _mounts: mounts,
        generation: 0,
        slave_gen: 0,
        acks,
        stats: Stats::default(),
        rng: Rng(seed),
        seed,
        round_logs: Vec::new(),
    };
    w.write_slave_props()?;
    println!(
        "chaos: seed {seed}, work {}, disk full by {}{}, slave via {}",
        work.display(),
        disk.describe(),
        mount_error.as_ref().map(|e| format!(" (cannot mount: {e})")).unwrap_or_default(),
        match &w.slave_bin {
            SlaveBin::Rmqha(p) => format!("{} broker", p.display()),
            SlaveBin::SelfMode => "rmqha-chaos child-slave".into(),
        }
    );
    let rounds = a.rounds.unwrap_or(if a.seconds.is_some() { u64::MAX } else { ALL_FAULTS.len() as u64 });
    let mut order: Vec<Fault> = Vec::new();
    let mut failure = None;
    for r in 1..=rounds {
        if r > a.min_rounds && a.seconds.is_some_and(|s| started.elapsed() >= Duration::from_secs(s)) {
            break;
        }
        if order.is_empty() {
            // Every kind once per block, in a seeded order.
            order = ALL_FAULTS.to_vec();
            for i in (1..order.len()).rev() {
                let j = w.rng.range(0, i as u64 + 1) as usize;
                order.swap(i, j);
            }
        }
        let fault = order.remove(0);
        if let Err(e) = w.round(r, fault) {
            failure = Some(format!("round {r} ({}): {e}", fault.name()));
            break;
        }
    }
    // Stop whatever still runs.
    let _ = w.stop_master(true);
    let _ = w.stop_slave(true);
    w.stats.acked_total += w.acks.acks.len() as u64;
    w.count_fails();
    let elapsed = started.elapsed();
    let s = &w.stats;
    let faults_total: u64 = s.faults.values().sum();
    let summary = serde_json::json!({
        "result": if failure.is_none() { "pass" } else { "fail" },
        "failure": failure,
        "seed": seed,
        "flush_disk_type": w.a.flush_disk_type,
        "record_crc": w.a.record_crc,
        "commit_log_dirs": w.a.commit_log_dirs,
        "seconds": elapsed.as_secs(),
        "rounds": s.rounds,
        "faults": s.faults,
        "faults_total": faults_total,
        "messages_acknowledged": s.acked_total,
        "messages_lost": if failure.is_none() { 0 } else { -1 },
        "puts_not_ok": s.not_ok_puts,
        "disk_full_method": match disk { DiskMethod::Tmpfs => "tmpfs", DiskMethod::Blocked => "blocked-files" },
        "disk_full_errors": s.disk_full_errors,
        "master_starts": s.master_starts,
        "slave_starts": s.slave_starts,
        "master_sigkills": s.master_sigkills,
        "master_clean_stops": s.master_clean_stops,
        "slave_sigkills": s.slave_sigkills,
        "store_cycles": s.cycles + 1,
        "master_recoveries_that_cut_a_torn_tail": s.torn_tails_cut,
        "ack_lines_torn_by_sigkill": s.torn_ack_lines,
        "master_abnormal_recoveries": s.abnormal_recoveries,
        "records_checked": s.records_checked,
        "consume_queue_units_checked": s.cq_units_checked,
        "prefix_bytes_compared": s.prefix_bytes_checked,
        "slave_process": match &w.slave_bin { SlaveBin::Rmqha(_) => "rmqha broker", SlaveBin::SelfMode => "rmqha-chaos child-slave" },
        "command": std::env::args().collect::<Vec<_>>().join(" "),
    });
    let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
    if let Some(p) = &a.report {
        std::fs::write(p, &text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    println!("{text}");
    match failure {
        Some(f) => {
            // Keep the evidence: the stores live on tmpfs, which goes with the mounts.
            let keep = work.join("failed");
            copy_tree(&w.master_dir, &keep.join("master"));
            copy_tree(&w.slave_dir, &keep.join("slave"));
            drop(w);
            if let Some(t) = tmp_guard {
                let _ = t.keep();
            }
            Err(format!("FAILED {f}\n  evidence kept in {}", keep.display()))
        }
        None => {
            println!(
                "chaos: PASS {} rounds, {faults_total} faults, {} messages acknowledged, 0 lost, in {:.0}s",
                s.rounds,
                s.acked_total,
                elapsed.as_secs_f64()
            );
            drop(w);
            if a.keep {
                if let Some(t) = tmp_guard {
                    let _ = t.keep();
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AckLog;
    use std::io::Write;

    #[test]
    fn a_line_torn_by_a_kill_is_dropped_at_the_next_generation() {
        let dir = std::env::temp_dir().join(format!("rmqha-acklog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("acks.log");
        let mut f = std::fs::File::create(&path).unwrap();
        // Generation 1: one whole ack, then a line cut mid-write.
        f.write_all(b"ok g1-1 AC 0 200 1 0 100\nok g1-2 AC 200 2").unwrap();
        let mut log = AckLog::new(path.clone());
        log.poll().unwrap();
        assert_eq!(log.acks.len(), 1);
        assert!(log.seal_generation().unwrap(), "the torn tail is reported");
        // Generation 2 appends right after the torn bytes.
        f.write_all(b"fail g2-1 SLAVE_NOT_AVAILABLE 400\nok g2-2 AC 400 200 3 0 100\n").unwrap();
        log.poll().unwrap();
        assert_eq!(log.acks.iter().map(|a| a.tag.as_str()).collect::<Vec<_>>(), ["g1-1", "g2-2"]);
        assert_eq!(log.fails, [("g2-1".to_string(), "SLAVE_NOT_AVAILABLE".to_string())]);
        assert!(!log.seal_generation().unwrap(), "nothing torn the second time");
        // Without sealing, the same tear is an error, not a silent misparse.
        let mut f2 = std::fs::File::create(&path).unwrap();
        f2.write_all(b"ok g1-1 AC 0 2fail g2-1 X 1\n").unwrap();
        assert!(AckLog::new(path).poll().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
