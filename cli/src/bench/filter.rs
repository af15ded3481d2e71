//! `rmqha bench filter`: what a consumer's filter costs a pull. One queue of `--messages`
//! messages (128-byte bodies; tag `T{i % 10}`, properties `bucket` = i % 10 and `color`) is
//! read from its start to its end over the remoting port, 32 messages a pull as a Java
//! consumer asks, once per case, again and again for `--seconds`:
//!
//! - `no filter` (`*`): every unit read and sent, the baseline;
//! - `tag`: one message in ten by its tag, skipped by tags code without reading the others;
//! - `SQL92`: the same one in ten by `bucket = 3`, every record read and evaluated;
//! - `SQL92, 4 terms`: the same one in ten by a longer expression;
//! - `tag, none` and `SQL92, none`: a tag and an expression no message has (the tag skips
//!   every unit by its code; the expression reads and evaluates every record), nothing sent.
//!
//! Each case prints the queue units scanned per second, the messages sent per second, and
//! the messages sent per second against the baseline's (a consumer's rate is bound by its
//! pulls, 32 messages each, so a filter that selects one message in ten costs it only what
//! the scan adds to each pull).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use rmqha_core::remoting::{ClientConfig, RemotingClient, response_code};
use rmqha_core::{Broker, Message};

use crate::client_cmd::pull_request;

#[derive(Args, Debug, Clone)]
pub struct FilterBenchArgs {
    /// Directory for the broker (a fresh subdirectory, removed afterwards); default: under
    /// the system's temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Messages in the queue.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1000..=10_000_000))]
    pub messages: u64,
    /// Seconds per case (whole passes over the queue; at least one).
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true, value_parser = crate::bench::positive_seconds)]
    pub seconds: f64,
}

const CASES: &[(&str, &str, &str)] = &[
    ("no filter", "TAG", "*"),
    ("tag, 1 in 10", "TAG", "T3"),
    ("SQL92, 1 in 10", "SQL92", "bucket = 3"),
    (
        "SQL92 4 terms, 1 in 10",
        "SQL92",
        "bucket = 3 AND color IN ('red', 'blue', 'green') AND n >= 0 AND TAGS IS NOT NULL",
    ),
    ("tag, none", "TAG", "T99"),
    ("SQL92, none", "SQL92", "bucket = 99"),
];

pub fn run(args: &FilterBenchArgs) -> Result<(), String> {
    let base = match &args.dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(|e| format!("cannot make a directory for the broker: {e}"))?;
    let config = super::broker_config(
        base.path(),
        "ASYNC_MASTER",
        1 << 30,
        &[("enablePropertyFilter", "true".into())],
    )?;
    let broker = Broker::start_master(config).map_err(|e| e.to_string())?;
    broker.create_topic("BenchFilter", 1).map_err(|e| e.to_string())?;
    let colors = ["red", "blue", "green"];
    let mut batch = Vec::with_capacity(1000);
    for i in 0..args.messages {
        batch.push(
            Message::new("BenchFilter", vec![b'x'; 128])
                .with_queue(0)
                .with_tags(format!("T{}", i % 10))
                .with_property("bucket", (i % 10).to_string())
                .with_property("color", colors[(i % 3) as usize])
                .with_property("n", i.to_string()),
        );
        if batch.len() == 1000 || i + 1 == args.messages {
            broker.put_messages(&batch).map_err(|e| e.to_string())?.wait();
            batch.clear();
        }
    }
    if !broker.store().wait_dispatched(Duration::from_secs(120)) {
        return Err("the dispatcher did not catch up within 120 s".into());
    }
    let addr = broker.remoting_addrs()[0].to_string();
    let client = RemotingClient::connect(&addr, ClientConfig::default()).map_err(|e| e.to_string())?;
    println!(
        "rmqha bench filter: one queue of {} messages (128 B bodies), read whole over the remoting port, \
         32 a pull, {:.1} s a case",
        args.messages, args.seconds
    );
    println!("| case | expression | units scanned/s | messages sent/s | pulls/s | sent vs no filter |");
    println!("|---|---|---:|---:|---:|---:|");
    let mut baseline = None;
    for (name, kind, expr) in CASES {
        let (mut scanned, mut sent, mut pulls) = (0u64, 0u64, 0u64);
        let t = Instant::now();
        while scanned == 0 || t.elapsed().as_secs_f64() < args.seconds {
            let mut offset = 0i64;
            while (offset as u64) < args.messages {
                let req = pull_request("TOOLS_CONSUMER", "BenchFilter", 0, offset, 32, kind, expr, 0);
                let resp =
                    client.invoke_sync(req, Duration::from_secs(10)).map_err(|e| format!("pull: {e}"))?;
                pulls += 1;
                if resp.code != response_code::SUCCESS && resp.code != response_code::PULL_RETRY_IMMEDIATELY {
                    return Err(format!(
                        "{name}: pull at {offset} answered {}: {:?}",
                        resp.code, resp.remark
                    ));
                }
                let next: i64 = resp.ext("nextBeginOffset").and_then(|v| v.parse().ok()).unwrap_or(offset);
                if next <= offset {
                    return Err(format!("{name}: the pull at {offset} did not move on"));
                }
                sent += count_records(&resp.body)?;
                scanned += (next - offset) as u64;
                offset = next;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        let sent_rate = sent as f64 / secs;
        let base_rate = *baseline.get_or_insert(sent_rate);
        let vs = if sent == 0 { "-".to_string() } else { format!("{:.0}%", 100.0 * sent_rate / base_rate) };
        println!(
            "| {name} | `{expr}` | {:.0} | {:.0} | {:.0} | {vs} |",
            scanned as f64 / secs,
            sent_rate,
            pulls as f64 / secs
        );
    }
    broker.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// How many records a pull body holds, each checked to be a whole record.
fn count_records(mut body: &[u8]) -> Result<u64, String> {
    let mut n = 0;
    while !body.is_empty() {
        let v = rmqha_core::message::decode_record(body).map_err(|e| format!("a pulled record: {e:?}"))?;
        body = &body[v.total_size as usize..];
        n += 1;
    }
    Ok(n)
}
