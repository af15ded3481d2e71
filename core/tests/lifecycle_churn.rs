//! A host that starts and stops brokers for months: master and slave pairs started, used and
//! stopped over and over in one process keep their file descriptors, threads and memory
//! flat. (From an audit of resource use under churn: each slave session's 4 MiB receive
//! buffer came from the heap, where the allocator kept one freed block per arena for good.)

mod common;

use std::time::Duration;

use common::{broker_config, message, slave_of, wait_until};
use rmqha_core::{Broker, PutStatus};

struct Usage {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

fn usage() -> Usage {
    let count = |dir: &str| std::fs::read_dir(dir).unwrap().count();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    Usage { fds: count("/proc/self/fd"), threads: count("/proc/self/task"), rss_kib }
}

/// A SYNC_MASTER and its slave on the same directories, 10 acknowledged puts, both stopped.
fn cycle(md: &std::path::Path, sd: &std::path::Path) {
    let master = Broker::start_master(broker_config(md, "SYNC_MASTER", &[])).unwrap();
    let slave = slave_of(sd, &master, &[]);
    assert!(wait_until(Duration::from_secs(10), || master.offsets().slaves.iter().any(|s| s.transferring)));
    for i in 0..10 {
        assert_eq!(master.put_message_sync(&message("Churn", 0, i, 200)).unwrap().status, PutStatus::PutOk);
    }
    slave.shutdown();
    master.shutdown();
}

#[test]
#[cfg(target_os = "linux")]
fn master_and_slave_cycles_keep_fds_threads_and_memory_flat() {
    let (md, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for _ in 0..3 {
        cycle(md.path(), sd.path());
    }
    let before = usage();
    const CYCLES: usize = 40;
    for _ in 0..CYCLES {
        cycle(md.path(), sd.path());
    }
    // Threads end a moment after their joins return to the host.
    assert!(wait_until(Duration::from_secs(5), || usage().threads <= before.threads), "threads grew");
    let after = usage();
    assert!(after.fds <= before.fds, "fds {} -> {}", before.fds, after.fds);
    let grown_mib = (after.rss_kib as f64 - before.rss_kib as f64) / 1024.0;
    // Before the fix: about 1 MiB per cycle (40 MiB here) until every arena held a block.
    assert!(grown_mib < 16.0, "RSS grew {grown_mib:.1} MiB over {CYCLES} master and slave cycles");
}
