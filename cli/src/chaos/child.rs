//! The harness's child modes: a SYNC_MASTER with an embedded producer, and a slave.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmqha_core::message::offset_msg_id;
use rmqha_core::{Broker, BrokerConfig, Message, PutStatus};

use super::verify::{TOPIC, config};

/// A small deterministic generator (splitmix64): no dependency, reproducible from a seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..hi` (hi exclusive, hi > lo).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// Child mode `master`: a SYNC_MASTER whose producer thread appends a line to `ack_log` for
/// every put (`ok ...` for PUT_OK, `fail ...` otherwise), one write per line. Stops cleanly on
/// `exit` from stdin (or when stdin closes).
pub fn run_master(
    store: &Path,
    ack_log: &Path,
    generation: u64,
    file_size: u64,
    flush_disk_type: &str,
    seed: u64,
) -> Result<(), String> {
    let mut c: BrokerConfig = config(store, "SYNC_MASTER", file_size, flush_disk_type)?;
    c.set("haListenPort", "0").map_err(|e| e.to_string())?;
    let broker = Broker::start_master(c).map_err(|e| e.to_string())?;
    let rec = broker.store().recovery();
    println!(
        "chaos-master ready generation={generation} haPort={} listenPort={} lastExitOk={} tornTail={} recovered={}",
        broker.ha_port(),
        broker.listen_port(),
        rec.last_exit_ok,
        rec.torn_tail,
        rec.recovered_offset
    );
    let _ = std::io::stdout().flush();
    let stop = Arc::new(AtomicBool::new(false));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ack_log)
        .map_err(|e| format!("{}: {e}", ack_log.display()))?;
    let producer = {
        let (broker, stop) = (broker.clone(), stop.clone());
        std::thread::Builder::new()
            .name("chaos-producer".into())
            .spawn(move || produce(&broker, log, generation, seed, &stop))
            .map_err(|e| e.to_string())?
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "exit" {
            break;
        }
    }
    // `exit`, or the harness went away (stdin closed): stop cleanly.
    stop.store(true, Ordering::SeqCst);
    let _ = producer.join();
    broker.shutdown();
    println!("chaos-master stopped");
    Ok(())
}

fn produce(broker: &Broker, mut log: std::fs::File, generation: u64, seed: u64, stop: &AtomicBool) {
    let mut rng = Rng(seed ^ generation.wrapping_mul(0x9E37_79B9));
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        i += 1;
        let tag = format!("g{generation}-{i}");
        let len = rng.range(16, 1024) as usize;
        let mut body = format!("{tag}|").into_bytes();
        let fill = b'a' + (i % 26) as u8;
        body.resize(len.max(body.len()), fill);
        let body_len = body.len();
        let queue = rng.range(0, 4) as i32;
        let m = Message::new(TOPIC, body).with_queue(queue).with_tags(format!("q{queue}")).with_keys(&[&tag]);
        let line = match broker.put_message_sync(&m) {
            Ok(r) if r.status == PutStatus::PutOk => format!(
                "ok {tag} {} {} {} {} {} {body_len}\n",
                offset_msg_id(&r.store_host, r.phy_offset),
                r.phy_offset,
                r.size,
                r.queue_id,
                r.queue_offset
            ),
            Ok(r) => format!("fail {tag} {} {}\n", r.status, r.phy_offset),
            Err(e) => format!("fail {tag} error {}\n", e.to_string().replace('\n', " ")),
        };
        let ok = line.starts_with("ok ");
        // One write per line, newline last: a SIGKILL can still stop a `write` between pages,
        // but what it leaves has no newline, and the harness drops it before the next
        // generation appends (`AckLog::seal_generation`).
        if log.write_all(line.as_bytes()).is_err() {
            eprintln!("chaos-producer: cannot write the ack log");
            std::process::exit(3);
        }
        if !ok {
            // No slave, or no disk: do not spin.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Child mode `slave`: `rmqha broker -c FILE` for when that binary is not at hand.
pub fn run_slave(props: &Path) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(|e| format!("signals: {e}"))?;
    let broker = Broker::start_from_file(props).map_err(|e| e.to_string())?;
    println!(
        "rmqha broker started: role={} listenPort={} haPort={} store={}",
        broker.role(),
        broker.listen_port(),
        broker.ha_port(),
        broker.config().store_root().display()
    );
    let _ = std::io::stdout().flush();
    let _ = signals.forever().next();
    broker.shutdown();
    println!("rmqha broker stopped");
    Ok(())
}
