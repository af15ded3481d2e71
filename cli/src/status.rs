//! `rmqha status HOST:PORT`: asks a broker for GET_BROKER_RUNTIME_INFO over remoting.

use std::time::Duration;

use clap::Args;
use rmqha_core::remoting::{ClientConfig, RemotingClient, RemotingCommand, request_code, response_code};

#[derive(Args)]
pub struct StatusArgs {
    /// The broker's remoting address (listenPort).
    addr: String,
    /// Print the raw table as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acl: crate::client_cmd::AclArgs,
}

pub fn run(args: StatusArgs) -> Result<(), String> {
    let table = fetch(&args.addr, args.acl.credentials()?.as_ref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&table).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let get = |k: &str| table.get(k).cloned().unwrap_or_default();
    println!("broker   {} (id {}) at {}", get("brokerName"), get("brokerId"), args.addr);
    println!("role     {} / {}", get("brokerRole"), get("flushDiskType"));
    let slave = get("brokerRole") == "SLAVE";
    println!(
        "offsets  min {}  max {}  flushed {}  {} {}  dispatch-behind {}",
        get("commitLogMinOffset"),
        get("commitLogMaxOffset"),
        get("flushedOffset"),
        // A slave's own acks to its master; a master's, what its slaves acked.
        if slave { "acked" } else { "slave-ack" },
        get("slaveAckOffset"),
        get("dispatchBehindBytes")
    );
    if slave {
        println!("ports    remoting {}", get("listenPort"));
    } else {
        println!("ports    remoting {}  HA {}", get("listenPort"), get("haPort"));
    }
    let pct = |k: &str| match get(k).parse::<f64>() {
        Ok(r) if r >= 0.0 => format!("{:.0}%", r * 100.0),
        _ => "unknown".to_string(),
    };
    println!(
        "disk     commitlog {} used  consumequeue {} used",
        pct("commitLogDiskRatio"),
        pct("consumeQueueDiskRatio")
    );
    // The rates over the last 10 s, and the messages since the last local midnight (since
    // the start, before the first one), as `mqadmin clusterList` shows them.
    let first = |k: &str| get(k).split(' ').next().and_then(|r| r.parse::<f64>().ok()).unwrap_or(0.0);
    let since = |now: &str, morning: &str| {
        get(now).parse::<u64>().unwrap_or(0).saturating_sub(get(morning).parse::<u64>().unwrap_or(0))
    };
    println!(
        "traffic  in {:.1} msgs/s  out {:.1} msgs/s (last 10 s); today {} stored, {} pulled",
        first("putTps"),
        first("getTransferedTps"),
        since("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
        since("msgGetTotalTodayNow", "msgGetTotalTodayMorning")
    );
    if let Some(reason) = table.get("diskFull") {
        println!("FULL     {reason}");
    }
    if let Some(reason) = table.get("dispatchError") {
        println!("DISPATCH STALLED (consumers get no new messages): {reason}");
    }
    if slave {
        let remoting = get("masterAddress");
        let remoting = if remoting.is_empty() { "none" } else { &remoting };
        println!("master   {remoting} (HA {}, connected: {})", get("haMasterAddress"), get("connected"));
        if let Some(e) = table.get("lastHaError") {
            println!("last HA error: {e}");
        }
    } else {
        let confirm = match (get("brokerRole").as_str(), get("slaveOk").as_str()) {
            ("SYNC_MASTER", "false") => {
                "  (SYNC puts are answered SLAVE_NOT_AVAILABLE: no slave close enough)"
            }
            _ => "",
        };
        println!("slaves   {}{confirm}", get("slaveCount"));
        for s in get("slaves").split("; ").filter(|s| !s.is_empty()) {
            println!("  {s}");
        }
        if let Some(r) = table.get("lastRefusedSlave") {
            println!("refused  {r}");
        }
    }
    Ok(())
}

/// The broker's runtime info table.
pub fn fetch(
    addr: &str,
    credentials: Option<&rmqha_core::acl::Credentials>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let client = RemotingClient::connect(addr, ClientConfig::default()).map_err(|e| e.to_string())?;
    let req = crate::client_cmd::signed(
        RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO),
        credentials,
    );
    let resp = client.invoke_sync(req, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    if resp.code != response_code::SUCCESS {
        return Err(format!("{addr} answered code {}: {}", resp.code, resp.remark.unwrap_or_default()));
    }
    let kv = rmqha_core::broker_admin::KvTable::decode(&resp.body, addr)
        .map_err(|e| format!("{addr} sent a runtime info body that is not a KV table: {e}"))?;
    Ok(kv.table)
}
