//! `rmqha truncate -c FILE --offset N`: cuts a stopped broker's store back to a record start.
//!
//! For an operator whose slave refuses its master with "the logs diverged" (typically an old
//! master rejoining as a slave of the one that replaced it, with a tail that never reached
//! it): the message names a record start at or before the divergence, and cutting there lets
//! the slave follow the master again. What lies past the cut is lost from this store.

use std::path::PathBuf;

use clap::Args;
use rmqha_core::metadata::ConfigTables;
use rmqha_core::{BrokerConfig, MessageStore};

#[derive(Args)]
pub struct TruncateArgs {
    /// The store's broker.properties (storePathRootDir, mappedFileSizeCommitLog, ...); the
    /// broker must be stopped.
    #[arg(short = 'c', long = "config")]
    config: PathBuf,
    /// Override a property (repeatable), e.g. --set storePathRootDir=/data/rmqha.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The CommitLog offset to cut at: where a record starts (a divergence message names
    /// one), a file's start, or the log's end.
    #[arg(long)]
    offset: u64,
}

pub fn run(args: TruncateArgs) -> Result<(), String> {
    let mut config = BrokerConfig::read_properties_file(&args.config).map_err(|e| e.to_string())?;
    crate::broker_cmd::apply_overrides(&mut config, &args.set)?;
    config.validate().map_err(|e| format!("{}: {e}", args.config.display()))?;
    let root = config.store_root().to_path_buf();
    // Opening a store makes one where there is none: a mistyped path would have been made a
    // store, and its "cut" reported as done, while the real store kept its diverged tail.
    // A CommitLog directory missing beside others that exist (a disk not mounted, or a new
    // directory not made yet) is refused by the store's open, which says which and why.
    let cl_dirs = config.commit_log_dirs();
    let no_cl = cl_dirs.iter().all(|d| !d.is_dir());
    if !root.is_dir() || no_cl {
        let missing = if root.is_dir() { &cl_dirs[0] } else { &root };
        return Err(format!(
            "{}: not a broker's store: {} is not a directory (check storePathRootDir and \
             storePathCommitLog in {} and --set)",
            root.display(),
            missing.display(),
            args.config.display()
        ));
    }
    let store = MessageStore::open(config).map_err(|e| e.to_string())?;
    store.start().map_err(|e| e.to_string())?;
    let (before, first) = (store.max_offset(), store.min_offset());
    // Each queue's range of offsets before the cut (its first ones may be gone with files
    // retention deleted).
    let queues_before: Vec<(String, i32, i64, i64)> = store
        .consume_queues()
        .queue_offset_table()
        .into_iter()
        .flat_map(|(topic, queues)| {
            let store = &store;
            queues.into_iter().map(move |(queue, end)| {
                let first = store.queue_min_offset(&topic, queue).max(0);
                (topic.clone(), queue, first, end)
            })
        })
        .collect();
    let cut = store.truncate(args.offset).and_then(|()| {
        // Consumer offsets past the cut name positions the next master fills with other
        // messages: they go back to their queue's end.
        let tables = ConfigTables::open(&root).map_err(rmqha_core::Error::from)?;
        let moved = tables.consumer_offsets().cap_at(|topic, queue| store.queue_max_offset(topic, queue));
        tables.consumer_offsets().persist().map_err(rmqha_core::Error::from)?;
        Ok(moved)
    });
    // The messages cut, queue by queue: what consumers of each will never get from this store.
    let mut dropped: Vec<(String, i32, i64, i64)> = Vec::new();
    if cut.is_ok() {
        for (topic, queue, first, end) in &queues_before {
            let now = store.queue_max_offset(topic, *queue).max(*first);
            if now < *end {
                dropped.push((topic.clone(), *queue, *end, now));
            }
        }
    }
    dropped.sort();
    store.shutdown();
    let moved = cut.map_err(|e| format!("{}: {e}", root.display()))?;
    let messages: i64 = dropped.iter().map(|(_, _, end, now)| end - now).sum();
    // Bytes below the log's first offset (files retention deleted) were not there to drop.
    let bytes = (before as u64).saturating_sub(args.offset.max(first.max(0) as u64));
    println!(
        "{}: CommitLog cut at {} (it ended at {before}; {bytes} bytes, {messages} messages dropped); {moved} \
         consumer offsets past the cut moved back to their queue's end",
        root.display(),
        args.offset,
    );
    const LISTED: usize = 32;
    for (topic, queue, end, now) in dropped.iter().take(LISTED) {
        println!("  {topic} queue {queue}: {} messages, queue offsets {now} to {}", end - now, end - 1);
    }
    if dropped.len() > LISTED {
        println!("  ... and {} more queues", dropped.len() - LISTED);
    }
    // The cut itself is on disk (its zeros are synced as it is made); a stop that could not
    // flush or dispatch the rest leaves the store to a crash recovery at its next start.
    if let Some(why) = store.unclean_stop() {
        return Err(format!("{}: the store did not stop cleanly after the cut: {why}", root.display()));
    }
    Ok(())
}
