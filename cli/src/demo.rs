//! `rmqha demo`: the README's main job. A SYNC_MASTER and a SLAVE on temporary directories
//! and free ports, N puts through `put_message_sync`, then throughput, latency, offsets, lag,
//! and a check that the slave holds the same bytes and serves the same messages.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rmqha_core::{Broker, BrokerConfig, GetMessageStatus, Message, PutStatus};

#[derive(Args)]
pub struct DemoArgs {
    /// Messages to put.
    #[arg(long, default_value_t = 20_000)]
    messages: usize,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024)]
    body_size: usize,
    /// Producer threads (at least 1).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    threads: u16,
    /// Queues of the demo topic (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(i32).range(1..=1024))]
    queues: i32,
    /// Store directories go under DIR (master/ and slave/); default: a temporary directory
    /// removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// CommitLog file size (mappedFileSizeCommitLog) for the demo stores.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    file_size: u64,
    /// SYNC_FLUSH instead of ASYNC_FLUSH on both brokers: a put then waits for the master's
    /// disk and the slave's (which acks only what it synced).
    #[arg(long)]
    sync_flush: bool,
}

const TOPIC: &str = "DemoTopic";

fn config(root: &Path, role: &str, a: &DemoArgs, extra: &[(&str, String)]) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    let mut set = |k: &str, v: &str| c.set(k, v).map_err(|e| e.to_string());
    set("storePathRootDir", &root.display().to_string())?;
    set("brokerRole", role)?;
    set("brokerName", "demo-broker")?;
    set("bindAddress", "127.0.0.1")?;
    set("brokerIP1", "127.0.0.1")?;
    set("listenPort", "0")?;
    set("haListenPort", "0")?;
    set("mappedFileSizeCommitLog", &a.file_size.to_string())?;
    set("flushDiskType", if a.sync_flush { "SYNC_FLUSH" } else { "ASYNC_FLUSH" })?;
    for (k, v) in extra {
        set(k, v)?;
    }
    Ok(c)
}

pub fn run(a: DemoArgs) -> Result<(), String> {
    let tmp;
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("rmqha-demo-").tempdir().map_err(|e| e.to_string())?;
            tmp.path().to_path_buf()
        }
    };
    let (mdir, sdir) = (root.join("master"), root.join("slave"));
    println!("rmqha demo: SYNC_MASTER and SLAVE under {}", root.display());
    let master =
        Broker::start_master(config(&mdir, "SYNC_MASTER", &a, &[])?).map_err(|e| format!("master: {e}"))?;
    let ha = format!("127.0.0.1:{}", master.ha_port());
    let slave = Broker::start_slave(config(
        &sdir,
        "SLAVE",
        &a,
        &[
            ("brokerId", "1".into()),
            ("haMasterAddress", ha.clone()),
            ("masterAddress", format!("127.0.0.1:{}", master.listen_port())),
        ],
    )?)
    .map_err(|e| format!("slave: {e}"))?;
    println!(
        "master: remoting 127.0.0.1:{}  HA {}   slave: remoting 127.0.0.1:{}",
        master.listen_port(),
        ha,
        slave.listen_port()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !master.offsets().slaves.iter().any(|s| s.transferring) {
        if Instant::now() > deadline {
            return Err("the slave did not connect within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let body: Vec<u8> = (0..a.body_size).map(|i| b'a' + (i % 26) as u8).collect();
    let bar = ProgressBar::new(a.messages as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} puts  {per_sec}  eta {eta}")
            .map_err(|e| e.to_string())?,
    );
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..a.threads)
        .map(|_| {
            let (master, next, bar, body) = (master.clone(), next.clone(), bar.clone(), body.clone());
            let queues = a.queues;
            let total = a.messages;
            std::thread::spawn(move || -> Result<(Histogram<u64>, usize), String> {
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
                let mut not_ok = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return Ok((hist, not_ok));
                    }
                    let msg = Message::new(TOPIC, body.clone())
                        .with_queue(i as i32 % queues)
                        .with_keys(&[format!("demo-{i}")]);
                    let t0 = Instant::now();
                    let r = master.put_message_sync(&msg).map_err(|e| format!("put {i}: {e}"))?;
                    let _ = hist.record(t0.elapsed().as_micros().max(1) as u64);
                    if r.status != PutStatus::PutOk {
                        not_ok += 1;
                    }
                    bar.inc(1);
                }
            })
        })
        .collect();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    let mut not_ok = 0;
    for t in threads {
        let (h, n) = t.join().map_err(|_| "a producer thread panicked".to_string())??;
        hist.add(&h).map_err(|e| e.to_string())?;
        not_ok += n;
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    let secs = elapsed.as_secs_f64();
    println!(
        "{} puts of {} B in {:.2} s: {:.0} msgs/s, {:.1} MB/s; {} not PUT_OK",
        a.messages,
        a.body_size,
        secs,
        a.messages as f64 / secs,
        (a.messages * a.body_size) as f64 / secs / 1e6,
        not_ok
    );
    println!(
        "put latency (SYNC_MASTER, waits for the slave's ack): p50 {} us  p99 {} us  max {} us",
        hist.value_at_quantile(0.50),
        hist.value_at_quantile(0.99),
        hist.max()
    );

    // Offsets and lag.
    let mo = master.offsets();
    let so = slave.offsets();
    println!(
        "master: max {}  flushed {}  slave-ack {}   slave: max {}  acked {}  connected {}",
        mo.max_offset,
        mo.flushed_offset,
        mo.slave_ack_offset,
        so.max_offset,
        so.slave_ack_offset,
        so.connected.unwrap_or(false)
    );
    for s in &mo.slaves {
        println!("slave {}: ack {}  lag {} bytes", s.addr, s.ack_offset, s.lag_bytes);
    }

    // Verification: same messages through the slave's ConsumeQueues, then same bytes on disk.
    let mut problems = Vec::new();
    if not_ok > 0 {
        problems.push(format!("{not_ok} puts were not PUT_OK"));
    }
    if !slave.store().wait_dispatched(Duration::from_secs(30))
        || !master.store().wait_dispatched(Duration::from_secs(30))
    {
        problems.push("dispatch did not catch up within 30 s".into());
    }
    let mut compared = 0usize;
    for q in 0..a.queues {
        let (mmax, smax) = (master.queue_max_offset(TOPIC, q), slave.queue_max_offset(TOPIC, q));
        if mmax != smax {
            problems.push(format!("queue {q}: master has {mmax} messages, slave {smax}"));
            continue;
        }
        let mut off = 0;
        while off < mmax {
            let (mr, sr) = (master.get_messages(TOPIC, q, off, 32), slave.get_messages(TOPIC, q, off, 32));
            if mr.status != GetMessageStatus::Found || sr.status != mr.status {
                problems.push(format!("queue {q} offset {off}: master {} slave {}", mr.status, sr.status));
                break;
            }
            let (mm, sm) = (mr.messages(), sr.messages());
            if mm != sm {
                problems.push(format!("queue {q} from offset {off}: the slave serves different messages"));
                break;
            }
            compared += mm.len();
            off = mr.next_begin_offset;
        }
    }
    slave.shutdown();
    master.shutdown();
    match compare_commit_logs(&mdir.join("commitlog"), &sdir.join("commitlog")) {
        Ok((files, bytes)) => {
            println!("CommitLog: {files} files, {bytes} bytes, byte-identical on master and slave")
        }
        Err(e) => problems.push(e),
    }
    println!("ConsumeQueue: {compared} messages read back from the slave, equal to the master's");
    if problems.is_empty() {
        println!("demo OK");
        Ok(())
    } else {
        for p in &problems {
            eprintln!("MISMATCH: {p}");
        }
        Err(format!("{} check(s) failed", problems.len()))
    }
}

/// Compares the CommitLog directories file by file.
fn compare_commit_logs(m: &Path, s: &Path) -> Result<(usize, u64), String> {
    let list = |d: &Path| -> Result<Vec<String>, String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        v.sort();
        Ok(v)
    };
    let (mf, sf) = (list(m)?, list(s)?);
    if mf != sf {
        return Err(format!("CommitLog files differ: master {mf:?}, slave {sf:?}"));
    }
    let mut bytes = 0u64;
    for f in &mf {
        let (a, b) = (
            std::fs::read(m.join(f)).map_err(|e| e.to_string())?,
            std::fs::read(s.join(f)).map_err(|e| e.to_string())?,
        );
        if a != b {
            let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            return Err(format!("CommitLog file {f} differs at byte {at}"));
        }
        bytes += a.len() as u64;
    }
    Ok((mf.len(), bytes))
}
