//! `rmqha bench queues`: a store with many queues. One message into each of `--queues` new
//! queues (the first unit of a queue makes its ConsumeQueue file), then a crash and the
//! reopen, whose recovery syncs what the crashed run left in the page cache, then one more
//! message into each queue and a clean stop, which flushes every queue.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use rmqha_core::{Message, MessageStore};

#[derive(Args, Debug, Clone)]
pub struct QueuesBenchArgs {
    /// Directory for the store (a fresh subdirectory, removed afterwards); default: under the
    /// system's temporary directory. Its disk's read-ahead and sync costs are what is measured.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// New queues: 8 per topic.
    #[arg(long, default_value_t = 5000)]
    pub queues: usize,
}

pub fn run(args: &QueuesBenchArgs) -> Result<(), String> {
    let base = match &args.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(|e| format!("cannot make a directory for the store: {e}"))?;
    let mut c = super::broker_config(base.path(), "ASYNC_MASTER", 256 << 20, &[])?;
    // No thorough ConsumeQueue flush during the run: the reopen after the crash syncs them.
    c.set("flushIntervalConsumeQueue", "600000").map_err(|e| e.to_string())?;
    let store = MessageStore::open(c.clone()).map_err(|e| e.to_string())?;
    store.start().map_err(|e| e.to_string())?;
    let n = args.queues;
    let t = Instant::now();
    for i in 0..n {
        let m = Message::new(format!("Q{}", i / 8), b"x".to_vec()).with_queue((i % 8) as i32);
        store.put_message(&m).map_err(|e| e.to_string())?;
    }
    if !store.wait_dispatched(Duration::from_secs(3600)) {
        return Err("dispatch did not finish within an hour".into());
    }
    let dispatched = t.elapsed();
    store.crash();
    drop(store);
    let t = Instant::now();
    let store = MessageStore::open(c).map_err(|e| e.to_string())?;
    store.start().map_err(|e| e.to_string())?;
    let reopened = t.elapsed();
    // One more unit in every queue, so that each has a dirty page, and a clean stop, which
    // flushes them all.
    for i in 0..n {
        let m = Message::new(format!("Q{}", i / 8), b"y".to_vec()).with_queue((i % 8) as i32);
        store.put_message(&m).map_err(|e| e.to_string())?;
    }
    if !store.wait_dispatched(Duration::from_secs(3600)) {
        return Err("dispatch did not finish within an hour".into());
    }
    let t = Instant::now();
    store.shutdown();
    let stopped = t.elapsed();
    if let Some(why) = store.unclean_stop() {
        return Err(format!("the store stopped uncleanly: {why}"));
    }
    println!(
        "{n} new queues: dispatched in {:.2} s ({:.3} ms per queue); reopened after a crash in {:.2} s; \
         a clean stop with every queue dirty in {:.2} s",
        dispatched.as_secs_f64(),
        dispatched.as_secs_f64() * 1e3 / n as f64,
        reopened.as_secs_f64(),
        stopped.as_secs_f64()
    );
    Ok(())
}
