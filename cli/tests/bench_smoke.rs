//! The benchmark commands run end to end on tiny settings (the numbers are not looked at:
//! benchmarks are timed in BENCHMARKS.md, never in tests): every case, baseline and target
//! line is printed and the command exits 0, so `rmqha bench` cannot rot unnoticed.

use std::process::Command;
use std::time::{Duration, Instant};

const RMQHA: &str = env!("CARGO_BIN_EXE_rmqha");

/// Runs `rmqha ARGS --dir DIR` (ARGS split at spaces) and returns its standard output.
fn run(args: &str, dir: &std::path::Path) -> String {
    let start = Instant::now();
    // Info logs (shown only when the run fails) say why a master closed a slave's
    // connection, which a slave's own error cannot.
    let out = Command::new(RMQHA)
        .args(args.split_whitespace())
        .args(["--dir", dir.to_str().unwrap()])
        .env("RMQHA_LOG", "info")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "rmqha {args} failed after {:?}:\n{stdout}\n{}",
        start.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(start.elapsed() < Duration::from_secs(120), "rmqha {args} took {:?}", start.elapsed());
    stdout
}

fn assert_prints(out: &str, lines: &[&str]) {
    for want in lines {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
}

#[test]
fn bench_store_prints_every_case_with_its_baselines() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        "bench store --seconds 0.1 --body-sizes 128 --async-threads 1 --sync-threads 2 \
         --file-size 4194304 --prewarm false",
        dir.path(),
    );
    assert_prints(
        &out,
        &[
            "baseline plain copy, 128 B body",
            "encode only",
            "ASYNC_FLUSH  1 thread(s),  128 B",
            "SYNC_FLUSH   2 thread(s),  128 B",
            "put threads: on a CPU",
            "baseline fdatasync",
            "| dispatch (rebuild) | 1 | 128 |",
            "ASYNC 1 thread 128 B msgs/s vs plain copy",
        ],
    );
}

#[test]
fn bench_ha_prints_catch_up_sync_and_async_and_the_cost_of_slaves() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        run("bench ha --rounds 1 --seconds 0.2 --catchup-bytes 4194304 --file-size 1048576", dir.path());
    assert_prints(
        &out,
        &[
            "(a) catch-up",
            "plain pipeline",
            "loopback round trip",
            "SYNC_MASTER        64",
            "SYNC/ASYNC throughput at 64 threads",
            "(c) ASYNC_MASTER",
            "2 slave(s)",
        ],
    );
}

/// `--slave-set` reaches the slaves (here ones that ack only synced bytes), and a key rmqha
/// does not read is refused by name.
#[test]
fn bench_ha_slave_set_configures_the_slaves() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        "bench ha --only b --seconds 0.2 --file-size 1048576 --slave-set flushDiskType=SYNC_FLUSH",
        dir.path(),
    );
    assert_prints(&out, &["SYNC_MASTER        64", "SYNC/ASYNC throughput at 64 threads"]);
    let out = Command::new(RMQHA)
        .args(["bench", "ha", "--only", "b", "--slave-set", "flushDiskTyp=SYNC_FLUSH"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("did you mean flushDiskType?"), "{err}");
}

#[test]
fn bench_queues_prints_dispatch_and_reopen_times() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("bench queues --queues 40", dir.path());
    assert_prints(&out, &["40 new queues: dispatched in", "ms per queue); reopened after a crash in"]);
}

#[test]
fn bench_filter_prints_every_case_against_the_unfiltered_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("bench filter --messages 2000 --seconds 0.1", dir.path());
    assert_prints(
        &out,
        &[
            "| no filter | `*` |",
            "| tag, 1 in 10 | `T3` |",
            "| SQL92, 1 in 10 | `bucket = 3` |",
            "| SQL92 4 terms, 1 in 10 |",
            "| tag, none | `T99` |",
            "| SQL92, none | `bucket = 99` |",
            "sent vs no filter",
        ],
    );
    // Every case read the whole queue: the filters sent one message in ten, or none.
    for line in out.lines().filter(|l| l.starts_with("| ") && l.contains('`')) {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        let (scanned, sent): (f64, f64) = (cols[3].parse().unwrap(), cols[4].parse().unwrap());
        let share = sent / scanned;
        let want = if line.contains("no filter") {
            1.0
        } else if line.contains("none") {
            0.0
        } else {
            0.1
        };
        assert!((share - want).abs() < 0.01, "{line}: sent {share:.3} of what it scanned, not {want}");
    }
}

/// `bench remote --threads 0` panicked indexing an empty list of clients, and a `--seconds`
/// of NaN, a negative or a huge value panicked converting it to a duration: each is refused
/// by name now, before anything starts.
#[test]
fn bench_arguments_that_panicked_are_refused() {
    for args in [
        "bench remote --threads 0",
        "bench remote --seconds nan",
        "bench store --seconds nan",
        "bench ha --seconds -1",
        "bench store --seconds 1e300",
        "bench filter --seconds 0",
    ] {
        let out = Command::new(RMQHA).args(args.split_whitespace()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args}: {err}");
        let flag = if args.contains("--threads") { "'--threads <THREADS>'" } else { "'--seconds <SECONDS>'" };
        assert!(err.contains(flag) && !err.contains("panicked"), "{args}: {err}");
    }
}
