//! `rmqha bench store`: put, dispatch and read throughput of one `MessageStore`, with the
//! baselines that give the numbers a meaning:
//!
//! * plain copy: the same encoded record bytes copied into a pre-touched mapped file, one
//!   after the other, by one thread: the most an append can cost without bookkeeping;
//! * fdatasync rate: 4 KiB written and fdatasync'd in a loop: how many durable group
//!   commits the disk allows per second.
//! * encode only: each record encoded from its message (`PreparedMessage`) into the same
//!   pre-touched file, without the store around it: what the record format itself costs.
//!
//! Under each put case it prints the put threads' CPU share, CPU per put and page faults, so a
//! slow put path can be told apart from one that is off the CPU or faulting in pages.
//!
//! Targets (from the project brief): ASYNC_FLUSH, one thread, 1 KiB bodies, at least 40% of
//! plain copy's bytes/s; 128 B bodies at least 20% of its records/s; SYNC_FLUSH, 64 threads,
//! at least 16 messages per flush and at least 16 times the fdatasync rate; the dispatcher
//! at least as fast as the puts.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use rmqha_core::message::PreparedMessage;
use rmqha_core::store::GetMessageStatus;
use rmqha_core::{BrokerConfig, Message, MessageStore, PutStatus};

use super::{WRITE_RATE_BOUND, warn_if_short_of_space};

/// Options of `rmqha bench store`.
#[derive(Debug, Clone, Args)]
pub struct StoreBenchArgs {
    /// Directory for the stores (each case gets a fresh subdirectory, removed afterwards);
    /// default: a new directory under the system's temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// mappedFileSizeCommitLog of the stores, in bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub file_size: u64,
    /// Seconds each put case runs.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true, value_parser = crate::bench::positive_seconds)]
    pub seconds: f64,
    /// Body sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![128usize, 1024, 4096])]
    pub body_sizes: Vec<usize>,
    /// Thread counts of the ASYNC_FLUSH cases, comma-separated (0 runs none).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 4])]
    pub async_threads: Vec<usize>,
    /// Thread counts of the SYNC_FLUSH cases, comma-separated (0 runs none).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize, 8, 64])]
    pub sync_threads: Vec<usize>,
    /// Queues the messages are spread over.
    #[arg(long, default_value_t = 8)]
    pub queues: i32,
    /// Start each put case's clock only once the current and next CommitLog files are
    /// pre-touched (warmMapedFileEnable), as the plain-copy baseline's file is: the put path
    /// measured without the first-touch cost of fresh pages (reported by the fresh-pages
    /// baseline). `--prewarm false` measures puts that fault in fresh pages.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub prewarm: bool,
    /// More store settings for every put case, as `KEY=VALUE` (repeatable), e.g.
    /// `--set enabledAppendPropCRC=true` to measure the whole-record CRC.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl Default for StoreBenchArgs {
    fn default() -> Self {
        StoreBenchArgs {
            dir: None,
            file_size: 1 << 30,
            seconds: 2.0,
            body_sizes: vec![128, 1024, 4096],
            async_threads: vec![1, 4],
            sync_threads: vec![1, 8, 64],
            queues: 8,
            prewarm: true,
            set: Vec::new(),
        }
    }
}

const TOPIC: &str = "BenchTopic";

/// One put case's outcome.
#[derive(Debug, Clone)]
struct PutCase {
    sync: bool,
    threads: usize,
    body: usize,
    msgs: u64,
    bytes: u64,
    secs: f64,
    flushes: u64,
    /// Seconds from the start until the dispatcher had indexed every message.
    dispatched_secs: f64,
    /// What the put threads used, summed over them.
    cpu: ThreadCpu,
}

/// CPU time and page faults of threads (`getrusage(RUSAGE_THREAD)`), to tell a put path
/// that is slow from one that is off the CPU (other threads of the store, or the host,
/// running on its core) or faulting in pages.
#[derive(Debug, Clone, Copy, Default)]
struct ThreadCpu {
    user_s: f64,
    sys_s: f64,
    minor_faults: i64,
}

impl ThreadCpu {
    /// The calling thread's usage so far (zeros where there is no per-thread usage).
    #[cfg(target_os = "linux")]
    fn current() -> ThreadCpu {
        // SAFETY: getrusage fills the zeroed struct we pass; RUSAGE_THREAD is Linux's
        // per-thread variant.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) } != 0 {
            return ThreadCpu::default();
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        ThreadCpu { user_s: secs(r.ru_utime), sys_s: secs(r.ru_stime), minor_faults: r.ru_minflt }
    }
    #[cfg(not(target_os = "linux"))]
    fn current() -> ThreadCpu {
        ThreadCpu::default()
    }
    fn since(self, before: ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user_s: self.user_s - before.user_s,
            sys_s: self.sys_s - before.sys_s,
            minor_faults: self.minor_faults - before.minor_faults,
        }
    }
    fn add(self, o: ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user_s: self.user_s + o.user_s,
            sys_s: self.sys_s + o.sys_s,
            minor_faults: self.minor_faults + o.minor_faults,
        }
    }
}

impl PutCase {
    fn msgs_per_s(&self) -> f64 {
        self.msgs as f64 / self.secs
    }
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
    fn per_flush(&self) -> f64 {
        self.msgs as f64 / self.flushes.max(1) as f64
    }
}

/// Rates of a baseline or a read pass.
#[derive(Debug, Clone, Copy)]
struct Rate {
    records: f64,
    bytes: f64,
}

/// Runs the store benchmark and prints its table.
pub fn run_store(args: &StoreBenchArgs) -> Result<(), String> {
    if args.seconds <= 0.0 || args.body_sizes.is_empty() || args.queues < 1 {
        return Err("--seconds, --body-sizes and --queues must be positive".into());
    }
    let (base, remove_base) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("rmqha-bench-store-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let result = run_in(args, &base);
    if remove_base {
        let _ = std::fs::remove_dir_all(&base);
    }
    result
}

fn run_in(args: &StoreBenchArgs, base: &Path) -> Result<(), String> {
    let case_time = Duration::from_secs_f64(args.seconds);
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, s: String| {
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    say(
        &mut out,
        format!(
            "rmqha bench store: {} per case, mappedFileSizeCommitLog {} bytes, {} queues, in {}",
            fmt_secs(args.seconds),
            args.file_size,
            args.queues,
            base.display()
        ),
    );

    // One case's store at a time (each is removed after its case), with its current and next
    // files; the baselines' files are smaller.
    warn_if_short_of_space(
        base,
        args.seconds * WRITE_RATE_BOUND + 2.0 * args.file_size as f64,
        "bench store",
    );

    let mut copies = Vec::new();
    let mut fsync_rates: Vec<(usize, f64)> = Vec::new();
    let mut cases = Vec::new();
    let mut dispatch = Vec::new();
    let mut reads = Vec::new();
    for &body in &args.body_sizes {
        // Baselines right before the cases they judge: on a shared machine the load drifts.
        let r = plain_copy_rate(base, body, args.file_size, case_time, true)?;
        let fresh = plain_copy_rate(base, body, args.file_size, case_time, false)?;
        let enc = encode_rate(base, body, args.file_size, case_time)?;
        say(
            &mut out,
            format!(
                "baseline plain copy, {body} B body ({} B record): {:.0} records/s, {:.0} MB/s pre-touched; \
                 {:.0} records/s, {:.0} MB/s into fresh pages",
                record_len(body),
                r.records,
                r.bytes / 1e6,
                fresh.records,
                fresh.bytes / 1e6
            ),
        );
        say(
            &mut out,
            format!(
                "encode only (each record encoded from its message into the pre-touched file, no store): \
                 {:.0} records/s, {:.0}% of plain copy",
                enc.records,
                100.0 * enc.records / r.records
            ),
        );
        copies.push((body, r, fresh));
        for &t in args.async_threads.iter().filter(|&&t| t > 0) {
            let dir = case_dir(base, &format!("async-{t}t-{body}b"))?;
            let (case, store) = put_case(args, &dir, false, t, body, case_time)?;
            say(&mut out, describe(&case));
            if t == 1 {
                // Reads and a rebuild of the queues from this case's CommitLog.
                let r = read_rate(&store, args.queues, case_time);
                say(&mut out, format!("  get_messages: {:.0} msgs/s, {:.0} MB/s", r.records, r.bytes / 1e6));
                reads.push((body, r));
                drop(store);
                let d = rebuild_rate(args, &dir)?;
                say(&mut out, format!("  dispatch (rebuilding the ConsumeQueues): {d:.0} msgs/s"));
                dispatch.push((body, d, case.msgs_per_s()));
            } else {
                drop(store);
            }
            remove_case_dir(&dir);
            cases.push(case);
        }
        if args.sync_threads.iter().any(|&t| t > 0) {
            // Measured next to the cases it judges: other I/O on the disk moves it a lot.
            let rate = fdatasync_rate(base, case_time.min(Duration::from_secs(2)))?;
            say(&mut out, format!("baseline fdatasync (4 KiB overwrite + fdatasync): {rate:.0}/s"));
            fsync_rates.push((body, rate));
        }
        for &t in args.sync_threads.iter().filter(|&&t| t > 0) {
            let dir = case_dir(base, &format!("sync-{t}t-{body}b"))?;
            let (case, store) = put_case(args, &dir, true, t, body, case_time)?;
            drop(store);
            remove_case_dir(&dir);
            say(&mut out, describe(&case));
            cases.push(case);
        }
    }

    say(&mut out, String::new());
    say(&mut out, table(&cases, &copies, &dispatch, &reads, &fsync_rates));
    Ok(())
}

fn describe(c: &PutCase) -> String {
    let on_cpu = c.cpu.user_s + c.cpu.sys_s;
    format!(
        "{} {:>2} thread(s), {:>4} B: {:>9.0} msgs/s {:>7.1} MB/s{}; dispatch done {:.3} s after the start of a {:.3} s run\n  \
         put threads: on a CPU {:.0}% of the run ({:.2} s user, {:.2} s system, {:.0} ns of CPU per put), {} page faults",
        if c.sync { "SYNC_FLUSH " } else { "ASYNC_FLUSH" },
        c.threads,
        c.body,
        c.msgs_per_s(),
        c.mb_per_s(),
        if c.sync { format!(", {:.1} msgs/flush", c.per_flush()) } else { String::new() },
        c.dispatched_secs,
        c.secs,
        100.0 * on_cpu / (c.secs * c.threads as f64),
        c.cpu.user_s,
        c.cpu.sys_s,
        1e9 * on_cpu / c.msgs.max(1) as f64,
        c.cpu.minor_faults
    )
}

fn table(
    cases: &[PutCase],
    copies: &[(usize, Rate, Rate)],
    dispatch: &[(usize, f64, f64)],
    reads: &[(usize, Rate)],
    fsync_rates: &[(usize, f64)],
) -> String {
    let fsync_rate = |body: usize| fsync_rates.iter().find(|(b, _)| *b == body).map_or(f64::NAN, |(_, r)| *r);
    let mut s = String::new();
    s.push_str("| case | threads | body | msgs/s | MB/s | msgs/flush | vs baseline |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---|\n");
    for c in cases {
        let copy = copies.iter().find(|(b, _, _)| *b == c.body).map(|(_, r, f)| (*r, *f));
        let vs = match (c.sync, copy) {
            (false, Some((r, f))) => format!(
                "{:.0}% of plain copy (pre-touched), {:.0}% of plain copy into fresh pages",
                100.0 * c.bytes as f64 / c.secs / r.bytes,
                100.0 * c.bytes as f64 / c.secs / f.bytes
            ),
            (true, _) => format!("{:.1}x the fdatasync rate", c.msgs_per_s() / fsync_rate(c.body)),
            _ => String::new(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.1} | {} | {} |\n",
            if c.sync { "SYNC_FLUSH" } else { "ASYNC_FLUSH" },
            c.threads,
            c.body,
            c.msgs_per_s(),
            c.mb_per_s(),
            if c.sync { format!("{:.1}", c.per_flush()) } else { "-".into() },
            vs
        ));
    }
    for (body, r) in reads {
        s.push_str(&format!(
            "| get_messages | 1 | {body} | {:.0} | {:.1} | - | |\n",
            r.records,
            r.bytes / 1e6
        ));
    }
    for (body, d, put) in dispatch {
        s.push_str(&format!(
            "| dispatch (rebuild) | 1 | {body} | {d:.0} | - | - | {:.0}% of the ASYNC 1-thread put rate |\n",
            100.0 * d / put
        ));
    }
    s.push_str("\nTargets:\n");
    let async1 = |body: usize| cases.iter().find(|c| !c.sync && c.threads == 1 && c.body == body);
    let copy = |body: usize| copies.iter().find(|(b, _, _)| *b == body).map(|(_, r, _)| *r);
    let mut target = |name: &str, value: Option<f64>, goal: f64, unit: &str| match value {
        Some(v) => s.push_str(&format!(
            "  {name}: {v:.1}{unit} (target >= {goal}{unit}) {}\n",
            if v >= goal { "MET" } else { "MISSED" }
        )),
        None => s.push_str(&format!("  {name}: not measured in this run\n")),
    };
    target(
        "ASYNC 1 thread 1 KiB bytes/s vs plain copy",
        async1(1024).zip(copy(1024)).map(|(c, r)| 100.0 * c.bytes as f64 / c.secs / r.bytes),
        40.0,
        "%",
    );
    target(
        "ASYNC 1 thread 128 B msgs/s vs plain copy",
        async1(128).zip(copy(128)).map(|(c, r)| 100.0 * c.msgs_per_s() / r.records),
        20.0,
        "%",
    );
    let sync64: Vec<&PutCase> = cases.iter().filter(|c| c.sync && c.threads == 64).collect();
    for c in &sync64 {
        target(&format!("SYNC 64 threads {} B msgs per flush", c.body), Some(c.per_flush()), 16.0, "");
        target(
            &format!("SYNC 64 threads {} B msgs/s vs fdatasync/s", c.body),
            Some(c.msgs_per_s() / fsync_rate(c.body)),
            16.0,
            "x",
        );
    }
    for (body, d, put) in dispatch {
        target(&format!("dispatch rate vs put rate, {body} B"), Some(100.0 * d / put), 100.0, "%");
    }
    s
}

fn fmt_secs(s: f64) -> String {
    format!("{s:.1} s")
}

fn case_dir(base: &Path, name: &str) -> Result<PathBuf, String> {
    let d = base.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    Ok(d)
}

fn remove_case_dir(d: &Path) {
    let _ = std::fs::remove_dir_all(d);
}

fn config(args: &StoreBenchArgs, dir: &Path, sync: bool) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    let mut set = |k: &str, v: &str| c.set(k, v).map_err(|e| e.to_string());
    set("storePathRootDir", dir.to_str().ok_or("the directory is not UTF-8")?)?;
    set("mappedFileSizeCommitLog", &args.file_size.to_string())?;
    set("flushDiskType", if sync { "SYNC_FLUSH" } else { "ASYNC_FLUSH" })?;
    set("brokerIP1", "127.0.0.1")?;
    set("listenPort", "10911")?;
    if args.prewarm {
        set("warmMapedFileEnable", "true")?;
    }
    for kv in &args.set {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set {kv:?} is not KEY=VALUE"))?;
        set(k.trim(), v.trim())?;
    }
    Ok(c)
}

fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

fn bench_message(body: &[u8], queue: i32) -> Message {
    Message::new(TOPIC, body.to_vec()).with_queue(queue)
}

fn record_len(body_len: usize) -> usize {
    let host: SocketAddr = ([127, 0, 0, 1], 10911).into();
    let m = bench_message(&body(body_len), 0);
    PreparedMessage::prepare(&m, &host, usize::MAX, 1).map(|p| p.total_len).unwrap_or(0)
}

/// Puts from `threads` threads for `time`; returns the case and the still-open store.
fn put_case(
    args: &StoreBenchArgs,
    dir: &Path,
    sync: bool,
    threads: usize,
    body_len: usize,
    time: Duration,
) -> Result<(PutCase, Arc<MessageStore>), String> {
    let store = MessageStore::open(config(args, dir, sync)?).map_err(|e| e.to_string())?;
    store.start().map_err(|e| e.to_string())?;
    // One put before the clock starts: the first file is created and mapped.
    store.put_message_sync(&bench_message(&body(body_len), 0)).map_err(|e| e.to_string())?;
    if args.prewarm && !store.wait_prepared(Duration::from_secs(600)) {
        return Err("the next CommitLog file was not ready within 10 minutes".into());
    }
    let flushes_before = store.commit_log().flush_count();
    let msgs = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let deadline = start + time;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, msgs, bytes, failed) = (store.clone(), msgs.clone(), bytes.clone(), failed.clone());
            let queues = args.queues;
            std::thread::Builder::new().name(format!("bench-put-{t}")).spawn(move || {
                // Messages are built once: the benchmark measures the store, not allocation.
                let pool: Vec<Message> =
                    (0..queues).map(|q| bench_message(&body(body_len), (q + t as i32) % queues)).collect();
                let (mut n, mut b, mut i) = (0u64, 0u64, 0usize);
                let cpu_before = ThreadCpu::current();
                while Instant::now() < deadline {
                    // Check the clock every 64 puts in the async cases (a put is sub-microsecond).
                    for _ in 0..if sync { 1 } else { 64 } {
                        let msg = &pool[i % pool.len()];
                        i += 1;
                        let r = if sync {
                            store.put_message_sync(msg)
                        } else {
                            store.put_message(msg).map(|h| h.wait())
                        };
                        match r {
                            Ok(r) if r.status == PutStatus::PutOk => {
                                n += 1;
                                b += r.size as u64;
                            }
                            _ => {
                                failed.store(true, Ordering::Relaxed);
                                return ThreadCpu::default();
                            }
                        }
                    }
                }
                msgs.fetch_add(n, Ordering::Relaxed);
                bytes.fetch_add(b, Ordering::Relaxed);
                ThreadCpu::current().since(cpu_before)
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot start a put thread: {e}"))?;
    let mut cpu = ThreadCpu::default();
    for h in handles {
        cpu = cpu.add(h.join().map_err(|_| "a put thread panicked".to_string())?);
    }
    let secs = start.elapsed().as_secs_f64();
    if failed.load(Ordering::Relaxed) {
        return Err(format!("a put failed in {}", dir.display()));
    }
    let flushes = store.commit_log().flush_count() - flushes_before;
    if !store.wait_dispatched(Duration::from_secs(120)) {
        return Err("the dispatcher did not catch up within 120 s".into());
    }
    let dispatched_secs = start.elapsed().as_secs_f64();
    let case = PutCase {
        sync,
        threads,
        body: body_len,
        msgs: msgs.load(Ordering::Relaxed),
        bytes: bytes.load(Ordering::Relaxed),
        secs,
        flushes,
        dispatched_secs,
        cpu,
    };
    Ok((case, store))
}

/// Reads every queue from its start with `get_messages` (32 per call), touching every byte.
fn read_rate(store: &MessageStore, queues: i32, limit: Duration) -> Rate {
    let start = Instant::now();
    let (mut records, mut bytes, mut sum) = (0u64, 0u64, 0u64);
    'outer: for q in 0..queues {
        let mut off = 0i64;
        loop {
            let got = store.get_messages(TOPIC, q, off, 32);
            if got.status != GetMessageStatus::Found {
                break;
            }
            for r in &got.records {
                let b = r.bytes();
                sum = sum.wrapping_add(b.iter().map(|&x| x as u64).sum::<u64>());
                bytes += b.len() as u64;
            }
            records += got.records.len() as u64;
            off = got.next_begin_offset;
            if start.elapsed() > limit {
                break 'outer;
            }
        }
    }
    std::hint::black_box(sum);
    let secs = start.elapsed().as_secs_f64();
    Rate { records: records as f64 / secs, bytes: bytes as f64 / secs }
}

/// Deletes the ConsumeQueues and index of a cleanly shut down store and times the rebuild:
/// `start` dispatches the whole CommitLog before it returns.
fn rebuild_rate(args: &StoreBenchArgs, dir: &Path) -> Result<f64, String> {
    for sub in ["consumequeue", "index"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
    }
    let mut c = config(args, dir, false)?;
    // Timed is the dispatch; warming the rest of the last file (warmMapedFileEnable, which
    // `--prewarm` sets for the put cases) would be timed with it.
    c.set("warmMapedFileEnable", "false").map_err(|e| e.to_string())?;
    let store = MessageStore::open(c).map_err(|e| e.to_string())?;
    let t = Instant::now();
    store.start().map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let msgs: i64 = (0..args.queues).map(|q| store.queue_max_offset(TOPIC, q)).sum();
    Ok(msgs as f64 / secs)
}

/// The same encoded record copied back to back into a mapping by one thread; with
/// `pretouch` every page is faulted in before the clock starts, without it every page is new
/// as it is for a log that grows.
fn plain_copy_rate(
    base: &Path,
    body_len: usize,
    file_size: u64,
    time: Duration,
    pretouch: bool,
) -> Result<Rate, String> {
    mapped_write_rate(base, body_len, file_size, time, pretouch, false)
}

/// Like the pre-touched plain copy, but each record is encoded in place from its message
/// (`PreparedMessage::prepare` and `write`: validation, body CRC, header fields), with no
/// lock, no offsets and no store around it: what the record format itself costs against the
/// copy, and so how much of a put's cost is the store's.
fn encode_rate(base: &Path, body_len: usize, file_size: u64, time: Duration) -> Result<Rate, String> {
    mapped_write_rate(base, body_len, file_size, time, true, true)
}

fn mapped_write_rate(
    base: &Path,
    body_len: usize,
    file_size: u64,
    time: Duration,
    pretouch: bool,
    encode: bool,
) -> Result<Rate, String> {
    let host: SocketAddr = ([127, 0, 0, 1], 10911).into();
    let msg = bench_message(&body(body_len), 0);
    let p = PreparedMessage::prepare(&msg, &host, usize::MAX, 1).map_err(|e| format!("{e:?}"))?;
    let mut record = vec![0u8; p.total_len];
    p.write(&mut record, 0, 0, 1, &host);

    let path = base.join("plain-copy");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.set_len(file_size).map_err(|e| e.to_string())?;
    // SAFETY: a private file of ours, mapped once and not resized while mapped.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(|e| e.to_string())?;
    if pretouch {
        for page in map.chunks_mut(4096) {
            page[0] = 0;
        }
    }
    let start = Instant::now();
    let deadline = start + time;
    let (mut pos, mut records, mut copied) = (0usize, 0u64, 0u64);
    let len = record.len();
    'run: loop {
        for _ in 0..256 {
            if pos + len > map.len() {
                if !pretouch {
                    break 'run; // every page written once: no fresh pages left
                }
                pos = 0;
            }
            if encode {
                let p = PreparedMessage::prepare(&msg, &host, usize::MAX, 1).map_err(|e| format!("{e:?}"))?;
                p.write(&mut map[pos..pos + len], records as i64, pos as i64, 2, &host);
            } else {
                map[pos..pos + len].copy_from_slice(&record);
            }
            pos += len;
            records += 1;
            copied += len as u64;
        }
        if Instant::now() >= deadline {
            break 'run;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(&map);
    drop(map);
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(Rate { records: records as f64 / secs, bytes: copied as f64 / secs })
}

/// 4 KiB write + fdatasync, in a loop, over blocks written beforehand.
fn fdatasync_rate(base: &Path, time: Duration) -> Result<f64, String> {
    use std::os::unix::fs::FileExt;
    let path = base.join("fdatasync-probe");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // The blocks are written once beforehand, so the loop measures the disk's flush of data
    // alone, not block allocation or file growth (the store's files are preallocated too):
    // the highest honest fdatasync rate, so the ratio against it is not flattered.
    const SPAN: u64 = 1024;
    let page = vec![7u8; 4096];
    for i in 0..SPAN {
        file.write_all_at(&page, i * 4096).map_err(|e| e.to_string())?;
    }
    file.sync_all().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < time {
        file.write_all_at(&page, (n % SPAN) * 4096).map_err(|e| e.to_string())?;
        file.sync_data().map_err(|e| e.to_string())?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(n as f64 / secs)
}
