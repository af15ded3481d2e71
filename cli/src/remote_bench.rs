//! `rmqha bench remote`: produce throughput and latency over the remoting protocol, with the
//! embedded put rate of the same broker measured in the same run beside it.
//!
//! Defaults follow RocketMQ's `benchmark/producer.sh` (64 threads, 128-byte bodies, one
//! synchronous send at a time per thread). For each role (ASYNC_MASTER, and SYNC_MASTER with
//! one slave) a fresh broker is started in this process; `embedded` is 64 threads calling
//! `Broker::put_message_sync`, `remote` is 64 threads each with its own connection sending
//! SEND_MESSAGE_V2 and waiting for the answer. Latency is per message, send to answer.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use rmqha_core::remoting::{ClientConfig, RemotingClient, response_code};
use rmqha_core::{Broker, Message, PutStatus};

use crate::bench::{broker_config, wait_for};
use crate::broker_cmd::apply_overrides;
use crate::client_cmd::send_request;

#[derive(Args)]
pub struct RemoteBenchArgs {
    /// Producer threads (producer.sh: threadCount 64).
    #[arg(long, default_value_t = 64, value_parser = crate::bench::at_least_one)]
    threads: usize,
    /// Body size in bytes (producer.sh: messageSize 128).
    #[arg(long, default_value_t = 128)]
    body_size: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true, value_parser = crate::bench::positive_seconds)]
    seconds: f64,
    /// Roles to measure, comma-separated: ASYNC_MASTER, SYNC_MASTER (with one slave).
    #[arg(long, value_delimiter = ',', default_value = "ASYNC_MASTER,SYNC_MASTER")]
    roles: Vec<String>,
    /// CommitLog file size.
    #[arg(long, default_value_t = 1 << 30)]
    file_size: u64,
    /// Directory for the stores (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Measure a running broker at this address instead (remote only; its topic BenchmarkTest
    /// must exist or be auto-created).
    #[arg(long)]
    addr: Option<String>,
    /// Broker config overrides for the master, e.g. `--set flushIntervalCommitLog=100`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

struct Outcome {
    sent: u64,
    failed: u64,
    secs: f64,
    hist: Histogram<u64>,
}

impl Outcome {
    fn print(&self, label: &str, body_size: usize) {
        let rate = self.sent as f64 / self.secs;
        let q = |p: f64| self.hist.value_at_quantile(p) as f64 / 1000.0;
        println!(
            "{label:<22} {rate:>10.0} msg/s {:>7.1} MB/s   p50 {:>7.3} ms  p99 {:>7.3} ms  p99.9 {:>7.3} ms  max {:>8.3} ms{}",
            rate * body_size as f64 / 1e6,
            q(0.5),
            q(0.99),
            q(0.999),
            self.hist.max() as f64 / 1000.0,
            if self.failed > 0 { format!("  ({} not SEND_OK)", self.failed) } else { String::new() }
        );
    }
}

/// Runs `op` on `threads` threads for `secs`; each call's latency in µs goes into the
/// histogram, a `false` result counts as a failure.
fn measure(
    threads: usize,
    secs: f64,
    op: Arc<dyn Fn(usize) -> Result<bool, String> + Send + Sync>,
) -> Result<Outcome, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (stop, op) = (stop.clone(), op.clone());
            std::thread::spawn(move || -> Result<(u64, u64, Histogram<u64>), String> {
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
                let (mut sent, mut failed) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let s = Instant::now();
                    let ok = op(t)?;
                    hist.saturating_record(s.elapsed().as_micros() as u64);
                    sent += 1;
                    failed += u64::from(!ok);
                }
                Ok((sent, failed, hist))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut total = Outcome {
        sent: 0,
        failed: 0,
        secs: 0.0,
        hist: Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
    };
    for h in handles {
        let (sent, failed, hist) = h.join().map_err(|_| "a benchmark thread panicked".to_string())??;
        total.sent += sent;
        total.failed += failed;
        total.hist.add(hist).map_err(|e| e.to_string())?;
    }
    total.secs = t0.elapsed().as_secs_f64();
    Ok(total)
}

fn remote_op(
    addr: &str,
    threads: usize,
    body_size: usize,
) -> Arc<dyn Fn(usize) -> Result<bool, String> + Send + Sync> {
    let clients: Vec<RemotingClient> =
        (0..threads).map(|_| RemotingClient::new(addr.to_string(), ClientConfig::default())).collect();
    let body = vec![b'x'; body_size];
    let props = vec![("WAIT".to_string(), "true".to_string())];
    Arc::new(move |t| {
        let resp = clients[t]
            .invoke_sync(send_request("BenchmarkTest", -1, body.clone(), &props), Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        match resp.code {
            response_code::SUCCESS => Ok(true),
            response_code::FLUSH_DISK_TIMEOUT
            | response_code::FLUSH_SLAVE_TIMEOUT
            | response_code::SLAVE_NOT_AVAILABLE => Ok(false),
            c => Err(format!("send failed: code {c}: {}", resp.remark.unwrap_or_default())),
        }
    })
}

pub fn run(a: RemoteBenchArgs) -> Result<(), String> {
    println!(
        "== remote produce: {} threads, {}-byte bodies, synchronous sends, {:.0} s per case",
        a.threads, a.body_size, a.seconds
    );
    if let Some(addr) = &a.addr {
        let op = remote_op(addr, a.threads, a.body_size);
        op(0)?; // creates the topic if needed, outside the measurement
        measure(a.threads, a.seconds, op)?.print(&format!("remote {addr}"), a.body_size);
        return Ok(());
    }
    let tmp;
    let root = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("rmqha-bench-").tempdir().map_err(|e| e.to_string())?;
            tmp.path().to_path_buf()
        }
    };
    for role in &a.roles {
        let dir = root.join(role.to_lowercase());
        let mut config = broker_config(&dir.join("master"), role, a.file_size, &[])?;
        apply_overrides(&mut config, &a.set)?;
        let master = Broker::start_master(config).map_err(|e| e.to_string())?;
        let slave = if role == "SYNC_MASTER" {
            let s = Broker::start_slave(broker_config(
                &dir.join("slave"),
                "SLAVE",
                a.file_size,
                &[
                    ("haMasterAddress", format!("127.0.0.1:{}", master.ha_port())),
                    ("masterAddress", master.remoting_addrs()[0].to_string()),
                ],
            )?)
            .map_err(|e| e.to_string())?;
            // Streaming, not merely connected: before its first offset report a slave
            // cannot ack, and SYNC puts would be SLAVE_NOT_AVAILABLE.
            if !wait_for(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)) {
                return Err("the slave did not start streaming within 10 s".into());
            }
            Some(s)
        } else {
            None
        };
        master.create_topic("BenchmarkTest", 8).map_err(|e| e.to_string())?;
        println!("-- {role}{}", if slave.is_some() { " + 1 slave" } else { "" });

        let m = master.clone();
        let body = vec![b'x'; a.body_size];
        let embedded = measure(
            a.threads,
            a.seconds,
            Arc::new(move |t| {
                let msg = Message::new("BenchmarkTest", body.clone()).with_queue((t % 8) as i32);
                let r = m.put_message_sync(&msg).map_err(|e| e.to_string())?;
                Ok(r.status == PutStatus::PutOk)
            }),
        )?;
        embedded.print("embedded put", a.body_size);
        let addr = master.remoting_addrs()[0].to_string();
        let remote = measure(a.threads, a.seconds, remote_op(&addr, a.threads, a.body_size))?;
        remote.print("remote SEND_MESSAGE_V2", a.body_size);
        println!(
            "{:<22} {:>10.0} %",
            "remote / embedded",
            remote.sent as f64 / remote.secs / (embedded.sent as f64 / embedded.secs) * 100.0
        );
        if let Some(s) = slave {
            s.shutdown();
        }
        master.shutdown();
    }
    Ok(())
}
