//! `rmqha bench topics`: topics created one at a time on a master through
//! `Broker::create_topic`, each answered only once `config/topics.json` is on disk, and the
//! reopen of a broker with that many topics. The baseline is the disk itself: a durable
//! replacement (write, fsync, rename, directory fsync) of a file the size of the final table.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use rmqha_core::Broker;

#[derive(Args, Debug, Clone)]
pub struct TopicsBenchArgs {
    /// Directory for the broker (a fresh subdirectory, removed afterwards); default: under
    /// the system's temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Topics to create, one call each.
    #[arg(long, default_value_t = 3000)]
    pub topics: usize,
    /// Report the rate of every this many creates.
    #[arg(long, default_value_t = 500)]
    pub step: usize,
}

pub fn run(args: &TopicsBenchArgs) -> Result<(), String> {
    if args.topics == 0 || args.step == 0 {
        return Err("--topics and --step must be at least 1".into());
    }
    let base = match &args.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(|e| format!("cannot make a directory for the broker: {e}"))?;
    let config = super::broker_config(base.path(), "ASYNC_MASTER", 64 << 20, &[])?;
    let broker = Broker::start_master(config.clone()).map_err(|e| e.to_string())?;
    let before = broker.tables().topics().len();
    println!(
        "rmqha bench topics: {} topics created one at a time (the broker starts with {before} system topics), in {}",
        args.topics,
        base.path().display()
    );
    let t = Instant::now();
    let mut step_start = Instant::now();
    let mut last_step = (0, 0.0);
    for i in 0..args.topics {
        broker.create_topic(&format!("BenchTopic{i:06}"), 8).map_err(|e| format!("create_topic {i}: {e}"))?;
        if (i + 1) % args.step == 0 || i + 1 == args.topics {
            let n = (i + 1) % args.step;
            let n = if n == 0 { args.step } else { n };
            let secs = step_start.elapsed().as_secs_f64();
            println!(
                "  topics {:>6} to {:>6}: {:>8.0} creates/s ({:.2} ms each)",
                i + 2 - n,
                i + 1,
                n as f64 / secs,
                secs * 1e3 / n as f64
            );
            last_step = (n, n as f64 / secs);
            step_start = Instant::now();
        }
    }
    let total = t.elapsed().as_secs_f64();
    let table = broker.tables().topics().path();
    let size = fs::metadata(&table).map_err(|e| format!("{}: {e}", table.display()))?.len();
    broker.close().map_err(|e| e.to_string())?;
    drop(broker);

    let t = Instant::now();
    let broker = Broker::start_master(config).map_err(|e| e.to_string())?;
    let reopened = t.elapsed().as_secs_f64();
    let found = broker.tables().topics().len();
    broker.close().map_err(|e| e.to_string())?;
    if found != before + args.topics {
        return Err(format!("the reopened broker has {found} topics, expected {}", before + args.topics));
    }

    let replace = durable_replace_rate(base.path(), size as usize)?;
    println!(
        "{} topics in {total:.2} s ({:.0} creates/s); topics.json {size} bytes; reopened in {reopened:.2} s",
        args.topics,
        args.topics as f64 / total
    );
    println!(
        "baseline: durable replacement of a {size}-byte file (write, fsync, rename, directory fsync): \
         {replace:.0}/s; the last {} creates ran at {:.0}% of it",
        last_step.0,
        100.0 * last_step.1 / replace
    );
    Ok(())
}

/// Replacements per second of a `size`-byte file, the way a config table is made durable
/// without its backup copy: 20 rounds, or 2 s, whichever ends first.
fn durable_replace_rate(dir: &Path, size: usize) -> Result<f64, String> {
    let body = vec![b' '; size];
    let target = dir.join("baseline.json");
    let tmp = dir.join("baseline.json.tmp");
    let d = fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let t = Instant::now();
    let mut n = 0;
    while n < 20 && (n < 3 || t.elapsed().as_secs_f64() < 2.0) {
        let mut f = fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        f.write_all(&body).and_then(|()| f.sync_all()).map_err(|e| format!("{}: {e}", tmp.display()))?;
        fs::rename(&tmp, &target)
            .and_then(|()| d.sync_all())
            .map_err(|e| format!("{}: {e}", target.display()))?;
        n += 1;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}
