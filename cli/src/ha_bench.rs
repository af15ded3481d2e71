//! `rmqha bench ha`: replication benchmarks, each beside a baseline measured in the same run.
//!
//! (a) catch-up of an empty slave vs a plain loopback pipeline into a mapped file;
//! (b) SYNC_MASTER vs ASYNC_MASTER throughput and latency vs the loopback round trip;
//! (c) ASYNC_MASTER throughput with 0, 1 and 2 slaves attached.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use rmqha_core::{Broker, Message, PutStatus};

use crate::bench::{WRITE_RATE_BOUND, broker_config, wait_for, warn_if_short_of_space};

#[derive(Args)]
pub struct HaBenchArgs {
    /// Bytes an empty slave catches up in (a).
    #[arg(long, default_value_t = 1 << 30)]
    catchup_bytes: u64,
    /// Seconds per throughput case in (b) and (c).
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = crate::bench::positive_seconds)]
    seconds: f64,
    /// Body size for (b) and (c).
    #[arg(long, default_value_t = 1024)]
    body_size: usize,
    /// CommitLog file size.
    #[arg(long, default_value_t = 1 << 30)]
    file_size: u64,
    /// Directory for the stores (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run only these parts (a, b, c); default all.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Rounds of (c): each runs 0, 1 and 2 slaves (in alternating order), and the medians are
    /// compared. Put rates on this kind of machine drift by up to 2x between runs of a few
    /// seconds (page zeroing, writeback, a shared host), so one round compares noise.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// More settings for every slave, as `KEY=VALUE` (repeatable), e.g.
    /// `--slave-set flushDiskType=SYNC_FLUSH` (a slave that acks only what it synced).
    #[arg(long = "slave-set", value_name = "KEY=VALUE")]
    slave_set: Vec<String>,
}

fn slave(root: &Path, master: &Broker, a: &HaBenchArgs) -> Result<Arc<Broker>, String> {
    let mut c = broker_config(
        root,
        "SLAVE",
        a.file_size,
        // As deployed: the master's remoting address too (config sync), which also keeps the
        // start from warning, for every slave of every case, that the slave mirrors nothing.
        &[
            ("haMasterAddress", format!("127.0.0.1:{}", master.ha_port())),
            ("masterAddress", format!("127.0.0.1:{}", master.remoting_addrs()[0].port())),
        ],
    )?;
    crate::broker_cmd::apply_overrides(&mut c, &a.slave_set)?;
    Broker::start_slave(c).map_err(|e| e.to_string())
}

pub fn run(a: HaBenchArgs) -> Result<(), String> {
    // A bad `--slave-set` is refused before anything starts.
    crate::broker_cmd::apply_overrides(&mut rmqha_core::BrokerConfig::default(), &a.slave_set)?;
    let tmp;
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("rmqha-bench-").tempdir().map_err(|e| e.to_string())?;
            tmp.path().to_path_buf()
        }
    };
    let want = |p: &str| a.only.is_empty() || a.only.iter().any(|o| o == p);
    // What the largest part keeps on disk at once: (a) the master's log, the slave's copy and
    // the pipeline's; (b) a master and its slave; (c) a master and two slaves. Each store
    // also has its current and next files.
    let (files, catchup) = (2.0 * a.file_size as f64, a.catchup_bytes as f64);
    let need = [
        ("a", 3.0 * catchup + 2.0 * files),
        ("b", 2.0 * (a.seconds * WRITE_RATE_BOUND + files)),
        ("c", 3.0 * (a.seconds * WRITE_RATE_BOUND + files)),
    ]
    .into_iter()
    .filter(|(p, _)| want(p))
    .map(|(_, n)| n)
    .fold(0.0, f64::max);
    warn_if_short_of_space(&root, need, "bench ha");
    if want("a") {
        catch_up(&a, &root.join("a"))?;
    }
    if want("b") {
        sync_vs_async(&a, &root.join("b"))?;
    }
    if want("c") {
        cost_of_slaves(&a, &root.join("c"))?;
    }
    Ok(())
}

/// (a) An empty slave catching up `catchup_bytes`, and the plain pipeline beside it.
fn catch_up(a: &HaBenchArgs, root: &Path) -> Result<(), String> {
    println!("== (a) catch-up of {} MiB by an empty slave", a.catchup_bytes >> 20);
    let master = Broker::start_master(broker_config(&root.join("master"), "ASYNC_MASTER", a.file_size, &[])?)
        .map_err(|e| e.to_string())?;
    let body = vec![b'x'; 1024];
    let msg = Message::new("BenchTopic", body);
    while (master.max_offset() as u64) < a.catchup_bytes {
        master.put_message_sync(&msg).map_err(|e| e.to_string())?;
    }
    master.store().flush().map_err(|e| e.to_string())?;
    let total = master.max_offset() as u64;
    let t0 = Instant::now();
    let s = slave(&root.join("slave"), &master, a)?;
    if !wait_for(Duration::from_secs(600), || s.max_offset() as u64 >= total) {
        return Err("catch-up did not finish in 10 minutes".into());
    }
    let ha_secs = t0.elapsed().as_secs_f64();
    s.shutdown();
    drop(s);
    let ha_mbs = total as f64 / ha_secs / 1e6;

    // Baseline: the same bytes over a loopback socket into a new mapped file.
    let files: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("master/commitlog"))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        v.sort();
        v
    };
    master.shutdown();
    let base_secs = plain_pipeline(&files, total, &root.join("pipeline"), a.file_size)?;
    let base_mbs = total as f64 / base_secs / 1e6;
    println!("rmqha catch-up      {:>9.1} MB/s  ({total} bytes in {ha_secs:.2} s)", ha_mbs);
    println!("plain pipeline      {:>9.1} MB/s  ({total} bytes in {base_secs:.2} s)", base_mbs);
    println!("ratio               {:>9.0} %   (target >= 60 %)", ha_mbs / base_mbs * 100.0);
    Ok(())
}

fn plain_pipeline(files: &[PathBuf], total: u64, dir: &Path, file_size: u64) -> Result<f64, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let out_dir = dir.to_path_buf();
    let receiver = std::thread::spawn(move || -> Result<(), String> {
        let (mut sock, _) = listener.accept().map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        let mut index = 0u64;
        while got < total {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(out_dir.join(format!("{index:020}")))
                .map_err(|e| e.to_string())?;
            f.set_len(file_size).map_err(|e| e.to_string())?;
            // SAFETY: a file of our own, sized above; the map is dropped before the file.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&f) }.map_err(|e| e.to_string())?;
            let mut pos = 0usize;
            while pos < file_size as usize && got < total {
                let want = buf.len().min(file_size as usize - pos).min((total - got) as usize);
                let n = sock.read(&mut buf[..want]).map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("pipeline sender closed early".into());
                }
                map[pos..pos + n].copy_from_slice(&buf[..n]);
                pos += n;
                got += n as u64;
            }
            index += file_size;
        }
        Ok(())
    });
    let t0 = Instant::now();
    let mut sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let mut left = total;
    for p in files {
        let f = std::fs::File::open(p).map_err(|e| e.to_string())?;
        // SAFETY: read-only map of a file nobody writes during the benchmark.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| e.to_string())?;
        let n = (map.len() as u64).min(left) as usize;
        sock.write_all(&map[..n]).map_err(|e| e.to_string())?;
        left -= n as u64;
        if left == 0 {
            break;
        }
    }
    drop(sock);
    receiver.join().map_err(|_| "pipeline receiver panicked".to_string())??;
    Ok(t0.elapsed().as_secs_f64())
}

struct CaseResult {
    msgs: u64,
    secs: f64,
    hist: Histogram<u64>,
    not_ok: u64,
}

/// Puts from `threads` threads for `seconds`, recording latency in microseconds.
fn drive(master: &Arc<Broker>, threads: usize, seconds: f64, body_size: usize) -> Result<CaseResult, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let body = vec![b'b'; body_size];
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (m, stop, body) = (master.clone(), stop.clone(), body.clone());
            std::thread::spawn(move || -> Result<(u64, u64, Histogram<u64>), String> {
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
                let msg = Message::new("BenchTopic", body).with_queue((t % 8) as i32);
                let (mut n, mut bad) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let r = m.put_message_sync(&msg).map_err(|e| e.to_string())?;
                    let _ = hist.record(t0.elapsed().as_micros().max(1) as u64);
                    n += 1;
                    if r.status != PutStatus::PutOk {
                        bad += 1;
                    }
                }
                Ok((n, bad, hist))
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut res = CaseResult {
        msgs: 0,
        secs: 0.0,
        hist: Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
        not_ok: 0,
    };
    for h in handles {
        let (n, bad, hist) = h.join().map_err(|_| "producer panicked".to_string())??;
        res.msgs += n;
        res.not_ok += bad;
        res.hist.add(&hist).map_err(|e| e.to_string())?;
    }
    res.secs = t0.elapsed().as_secs_f64();
    Ok(res)
}

/// Median TCP round trip on loopback for an 8-byte ping, in microseconds.
fn loopback_rtt_us() -> Result<f64, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let echo = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.set_nodelay(true);
            let mut b = [0u8; 8];
            while s.read_exact(&mut b).is_ok() {
                if s.write_all(&b).is_err() {
                    break;
                }
            }
        }
    });
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut samples = Vec::with_capacity(20_000);
    let mut b = [0u8; 8];
    for i in 0..20_000u64 {
        let t0 = Instant::now();
        s.write_all(&i.to_be_bytes()).map_err(|e| e.to_string())?;
        s.read_exact(&mut b).map_err(|e| e.to_string())?;
        samples.push(t0.elapsed().as_nanos() as f64 / 1000.0);
    }
    drop(s);
    let _ = echo.join();
    samples.sort_by(|a, b| a.total_cmp(b));
    Ok(samples[samples.len() / 2])
}

/// (b) SYNC_MASTER vs ASYNC_MASTER with one slave, 1/8/64 producers.
fn sync_vs_async(a: &HaBenchArgs, root: &Path) -> Result<(), String> {
    println!(
        "== (b) SYNC_MASTER vs ASYNC_MASTER, one slave, {} B bodies, {} s per case",
        a.body_size, a.seconds
    );
    let rtt = loopback_rtt_us()?;
    println!("loopback round trip (median): {rtt:.1} us");
    println!(
        "{:<13} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9}",
        "role", "threads", "msgs/s", "p50 us", "p99 us", "p99.9 us", "not OK"
    );
    let mut table = Vec::new();
    for threads in [1usize, 8, 64] {
        for role in ["ASYNC_MASTER", "SYNC_MASTER"] {
            let dir = root.join(format!("{role}-{threads}"));
            let master = Broker::start_master(broker_config(&dir.join("m"), role, a.file_size, &[])?)
                .map_err(|e| e.to_string())?;
            let s = slave(&dir.join("s"), &master, a)?;
            if !wait_for(Duration::from_secs(10), || master.offsets().slaves.iter().any(|x| x.transferring)) {
                return Err("slave did not connect".into());
            }
            let r = drive(&master, threads, a.seconds, a.body_size)?;
            let rate = r.msgs as f64 / r.secs;
            println!(
                "{:<13} {:>7} {:>11.0} {:>9} {:>9} {:>9} {:>9}",
                role,
                threads,
                rate,
                r.hist.value_at_quantile(0.5),
                r.hist.value_at_quantile(0.99),
                r.hist.value_at_quantile(0.999),
                r.not_ok
            );
            table.push((role, threads, rate, r.hist.value_at_quantile(0.5)));
            s.shutdown();
            master.shutdown();
            drop((s, master));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let get = |role: &str, t: usize| table.iter().find(|x| x.0 == role && x.1 == t).cloned();
    if let (Some(s64), Some(a64)) = (get("SYNC_MASTER", 64), get("ASYNC_MASTER", 64)) {
        println!("SYNC/ASYNC throughput at 64 threads: {:.0} % (target >= 80 %)", s64.2 / a64.2 * 100.0);
    }
    if let Some(s1) = get("SYNC_MASTER", 1) {
        println!(
            "SYNC_MASTER 1 thread p50: {} us = {:.1} loopback round trips (target <= 4)",
            s1.3,
            s1.3 as f64 / rtt
        );
    }
    Ok(())
}

/// (c) ASYNC_MASTER put throughput with 0, 1 and 2 slaves.
fn cost_of_slaves(a: &HaBenchArgs, root: &Path) -> Result<(), String> {
    println!(
        "== (c) ASYNC_MASTER put throughput with 0, 1, 2 slaves (4 threads, {} B, {} rounds)",
        a.body_size, a.rounds
    );
    let mut rates: [Vec<f64>; 3] = Default::default();
    for round in 0..a.rounds.max(1) {
        let order: Vec<usize> = if round % 2 == 0 { vec![0, 1, 2] } else { vec![2, 1, 0] };
        let mut line = format!("round {}:", round + 1);
        for n in order {
            let rate = slaves_case(a, &root.join(format!("r{round}-slaves-{n}")), n)?;
            rates[n].push(rate);
            line += &format!("  {n} slave(s) {rate:.0} msgs/s");
        }
        println!("{line}");
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    for (n, m) in medians.iter().enumerate() {
        println!(
            "{n} slave(s): {:>11.0} msgs/s median  ({:.0} % of no slaves; target with 2 >= 85 %)",
            m,
            m / medians[0] * 100.0
        );
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One case of (c): a fresh master with `n` fresh slaves, driven by 4 threads.
fn slaves_case(a: &HaBenchArgs, dir: &Path, n: usize) -> Result<f64, String> {
    let master = Broker::start_master(broker_config(&dir.join("m"), "ASYNC_MASTER", a.file_size, &[])?)
        .map_err(|e| e.to_string())?;
    let slaves: Vec<_> =
        (0..n).map(|i| slave(&dir.join(format!("s{i}")), &master, a)).collect::<Result<_, _>>()?;
    if !wait_for(Duration::from_secs(10), || {
        master.offsets().slaves.iter().filter(|x| x.transferring).count() == n
    }) {
        return Err("slaves did not connect".into());
    }
    let r = drive(&master, 4, a.seconds, a.body_size)?;
    // A slave that stopped applying (a full disk, say) would make the case look cheaper than
    // it is: its number would count against fewer slaves than it claims.
    let failed: Vec<String> = slaves
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.offsets().last_ha_error.map(|e| format!("slave {i}: {e}")))
        .collect();
    for s in slaves {
        s.shutdown();
    }
    master.shutdown();
    drop(master);
    let _ = std::fs::remove_dir_all(dir);
    if !failed.is_empty() {
        return Err(format!("a slave failed during the {n}-slave case ({})", failed.join("; ")));
    }
    Ok(r.msgs as f64 / r.secs)
}
