//! `rmqha stats HOST:PORT`: each topic's put rate and the last day's messages in, and for
//! each group consuming it, its lag, pull rate and the last day's messages out: what
//! `mqadmin statsAll` prints, asked of one broker (the topic list, QUERY_TOPIC_CONSUME_BY_WHO,
//! VIEW_BROKER_STATS_DATA and GET_CONSUME_STATS).

use std::time::Duration;

use clap::Args;
use rmqha_core::broker_admin::ConsumeStats;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code, response_code};

#[derive(Args)]
pub struct StatsArgs {
    /// The broker's remoting address (listenPort).
    addr: String,
    /// Only these topics (default: every topic the broker has put to or a group consumes).
    #[arg(long)]
    topic: Vec<String>,
    /// Print one JSON object per topic and group.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acl: crate::client_cmd::AclArgs,
}

const TIMEOUT: Duration = Duration::from_secs(3);

/// A stats item's rate over the last minute and count over the last day, if the broker has
/// the item.
fn item(c: &Call<'_>, name: &str, key: &str) -> Result<Option<(f64, u64)>, String> {
    let req = RemotingCommand::request(request_code::VIEW_BROKER_STATS_DATA)
        .with_ext("statsName", name)
        .with_ext("statsKey", key);
    let resp = c.call(req)?;
    if resp.code != response_code::SUCCESS {
        // No such item: nothing put (or pulled) since the broker started.
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_slice(&resp.body)
        .map_err(|e| format!("{} sent a stats body that is not JSON: {e}", c.addr))?;
    let tps = v["statsMinute"]["tps"].as_f64().unwrap_or(0.0);
    let day = v["statsDay"]["sum"].as_u64().unwrap_or(0);
    Ok(Some((tps, day)))
}

struct Call<'a> {
    addr: &'a str,
    client: RemotingClient,
    credentials: Option<rmqha_core::acl::Credentials>,
}

impl Call<'_> {
    fn call(&self, req: RemotingCommand) -> Result<RemotingCommand, String> {
        let req = crate::client_cmd::signed(req, self.credentials.as_ref());
        self.client.invoke_sync(req, TIMEOUT).map_err(|e| format!("{}: {e}", self.addr))
    }

    fn ok(&self, req: RemotingCommand) -> Result<RemotingCommand, String> {
        let resp = self.call(req)?;
        if resp.code != response_code::SUCCESS {
            return Err(format!(
                "{} answered code {}: {}",
                self.addr,
                resp.code,
                resp.remark.unwrap_or_default()
            ));
        }
        Ok(resp)
    }

    fn list(&self, req: RemotingCommand, field: &str) -> Result<Vec<String>, String> {
        let resp = self.ok(req)?;
        let v: serde_json::Value = serde_json::from_slice(&resp.body)
            .map_err(|e| format!("{} sent a {field} body that is not JSON: {e}", self.addr))?;
        Ok(v[field].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect())
    }
}

pub fn run(args: StatsArgs) -> Result<(), String> {
    let client = RemotingClient::connect(&args.addr, rmqha_core::remoting::ClientConfig::default())
        .map_err(|e| format!("{}: {e}", args.addr))?;
    let c = Call { addr: &args.addr, client, credentials: args.acl.credentials()? };
    let mut topics = if args.topic.is_empty() {
        c.list(RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER), "topicList")?
    } else {
        args.topic.clone()
    };
    topics.sort();
    let mut rows = Vec::new();
    for topic in &topics {
        let put = item(&c, "TOPIC_PUT_NUMS", topic)?;
        let groups = c.list(
            RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO).with_ext("topic", topic),
            "groupList",
        )?;
        if put.is_none() && groups.is_empty() && args.topic.is_empty() {
            // Never put to since the start, nobody consuming: a template or an idle topic.
            continue;
        }
        let (in_tps, in_day) = put.unwrap_or_default();
        if groups.is_empty() {
            rows.push(Row {
                topic: topic.clone(),
                group: None,
                lag: 0,
                in_tps,
                in_day,
                out_tps: 0.0,
                out_day: 0,
            });
        }
        for group in groups {
            let (out_tps, out_day) =
                item(&c, "GROUP_GET_NUMS", &format!("{topic}@{group}"))?.unwrap_or_default();
            let stats = c.ok(RemotingCommand::request(request_code::GET_CONSUME_STATS)
                .with_ext("consumerGroup", &group)
                .with_ext("topic", topic))?;
            let lag = ConsumeStats::decode(&stats.body)
                .map_err(|e| format!("{} sent a consume stats body rmqha cannot read: {e}", args.addr))?
                .offsets
                .iter()
                .map(|(_, o)| o.lag())
                .sum();
            rows.push(Row {
                topic: topic.clone(),
                group: Some(group),
                lag,
                in_tps,
                in_day,
                out_tps,
                out_day,
            });
        }
    }
    if args.json {
        for r in &rows {
            let line = serde_json::json!({
                "topic": r.topic, "group": r.group, "lag": r.lag,
                "inTps": r.in_tps, "inMsg24Hour": r.in_day, "outTps": r.out_tps, "outMsg24Hour": r.out_day,
            });
            println!("{line}");
        }
        return Ok(());
    }
    if rows.is_empty() {
        println!("no topic at {} was put to or consumed since the broker started", args.addr);
        return Ok(());
    }
    let tw = rows.iter().map(|r| r.topic.len()).max().unwrap_or(5).max(5);
    let gw = rows.iter().map(|r| r.group.as_deref().map_or(1, str::len)).max().unwrap_or(5).max(5);
    println!(
        "{:<tw$}  {:<gw$}  {:>10}  {:>10}  {:>12}  {:>10}  {:>12}",
        "topic", "group", "lag", "in msgs/s", "in last 24h", "out msgs/s", "out last 24h"
    );
    for r in &rows {
        println!(
            "{:<tw$}  {:<gw$}  {:>10}  {:>10.2}  {:>12}  {:>10.2}  {:>12}",
            r.topic,
            r.group.as_deref().unwrap_or("-"),
            r.lag,
            r.in_tps,
            r.in_day,
            r.out_tps,
            r.out_day
        );
    }
    Ok(())
}

/// One topic and one group consuming it (none: a topic nobody consumes).
struct Row {
    topic: String,
    group: Option<String>,
    lag: i64,
    in_tps: f64,
    in_day: u64,
    out_tps: f64,
    out_day: u64,
}
