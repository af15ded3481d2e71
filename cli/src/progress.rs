//! `rmqha progress HOST:PORT --group G`: a consumer group's progress and lag on a broker,
//! from GET_CONSUME_STATS (what `mqadmin consumerProgress` asks each broker).

use std::time::Duration;

use clap::Args;
use rmqha_core::broker_admin::ConsumeStats;
use rmqha_core::remoting::{RemotingCommand, request_code};

#[derive(Args)]
pub struct ProgressArgs {
    /// The broker's remoting address (listenPort).
    addr: String,
    /// The consumer group.
    #[arg(long)]
    group: String,
    /// Only this topic (default: every topic the group committed offsets on).
    #[arg(long)]
    topic: Option<String>,
    /// Print the queues as JSON lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acl: crate::client_cmd::AclArgs,
}

pub fn run(args: ProgressArgs) -> Result<(), String> {
    let credentials = args.acl.credentials()?;
    let mut req =
        RemotingCommand::request(request_code::GET_CONSUME_STATS).with_ext("consumerGroup", &args.group);
    if let Some(t) = &args.topic {
        req = req.with_ext("topic", t);
    }
    let resp = crate::client_cmd::admin_call(&args.addr, req, credentials.as_ref(), Duration::from_secs(3))?;
    let stats = ConsumeStats::decode(&resp.body)
        .map_err(|e| format!("{} sent a consume stats body rmqha cannot read: {e}", args.addr))?;
    let now = rmqha_core::store::clock::now_ms();
    if args.json {
        for (q, o) in &stats.offsets {
            let line = serde_json::json!({
                "topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id,
                "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset,
                "lag": o.lag(), "lastTimestamp": o.last_timestamp,
            });
            println!("{line}");
        }
        return Ok(());
    }
    if stats.offsets.is_empty() {
        println!("group {} has no committed offsets at {}", args.group, args.addr);
        return Ok(());
    }
    let width = stats.offsets.iter().map(|(q, _)| q.topic.len()).max().unwrap_or(5).max(5);
    println!(
        "{:<width$}  {:>5}  {:>14}  {:>15}  {:>10}  last consumed",
        "topic", "queue", "broker-offset", "consumer-offset", "lag"
    );
    for (q, o) in &stats.offsets {
        let last = if o.last_timestamp > 0 {
            format!("{} s ago", (now - o.last_timestamp).max(0) / 1000)
        } else {
            "-".to_string()
        };
        println!(
            "{:<width$}  {:>5}  {:>14}  {:>15}  {:>10}  {last}",
            q.topic,
            q.queue_id,
            o.broker_offset,
            o.consumer_offset,
            o.lag()
        );
    }
    let total: i64 = stats.offsets.iter().map(|(_, o)| o.lag()).sum();
    println!(
        "total lag {total} over {} queues (group {} at {}), pulling {:.2} msgs/s over the last minute",
        stats.offsets.len(),
        args.group,
        args.addr,
        stats.consume_tps
    );
    Ok(())
}
