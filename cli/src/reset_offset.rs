//! `rmqha reset-offset HOST:PORT --group G --topic T --to TIME`: move a consumer group's
//! offsets on a topic to a store time (INVOKE_BROKER_TO_RESET_OFFSET, what `mqadmin
//! resetOffsetByTime` asks each broker). The broker moves its committed offsets and tells the
//! group's live consumers, which pull from the new offsets.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use rmqha_core::broker_admin::ResetOffsets;
use rmqha_core::remoting::{RemotingCommand, request_code};

#[derive(Args)]
pub struct ResetOffsetArgs {
    /// The master's remoting address (listenPort).
    addr: String,
    /// The consumer group.
    #[arg(long)]
    group: String,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// Where to: `end` (each queue's end: skip everything not consumed yet), `now`, a time
    /// in ms since the epoch, or an RFC 3339 time in UTC (`2026-12-02T21:00:00Z`,
    /// `2026-12-02 21:00:00`). Each queue moves to its first message stored at or after it.
    #[arg(long, conflicts_with = "ago", required_unless_present = "ago")]
    to: Option<String>,
    /// Where to, as a time before now: `90s`, `15m`, `2h`, `1day`.
    #[arg(long)]
    ago: Option<String>,
    /// Only move a queue back (RocketMQ's isForce=false): a queue whose target lies at or
    /// past the group's offset keeps its offset, and one without an offset is left alone.
    #[arg(long)]
    rewind_only: bool,
    /// Print the queues as JSON lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acl: crate::client_cmd::AclArgs,
}

/// The request's `timestamp`: ms since the epoch, or -1 for each queue's end.
fn timestamp(to: Option<&str>, ago: Option<&str>) -> Result<i64, String> {
    let ms = |t: SystemTime| -> Result<i64, String> {
        let d = t.duration_since(UNIX_EPOCH).map_err(|_| "the time is before 1970".to_string())?;
        i64::try_from(d.as_millis()).map_err(|_| "the time is too far ahead".to_string())
    };
    if let Some(ago) = ago {
        let d = humantime::parse_duration(ago.trim())
            .map_err(|e| format!("--ago {ago:?} is not a duration (90s, 15m, 2h, 1day): {e}"))?;
        let t =
            SystemTime::now().checked_sub(d).ok_or_else(|| format!("--ago {ago:?} reaches before 1970"))?;
        return ms(t);
    }
    let to = to.unwrap_or("end").trim();
    match to {
        "end" => Ok(-1),
        "now" => ms(SystemTime::now()),
        _ if !to.is_empty() && to.bytes().all(|b| b.is_ascii_digit()) => {
            to.parse().map_err(|_| format!("--to {to} is too large for a time in ms"))
        }
        _ => humantime::parse_rfc3339_weak(to)
            .map_err(|e| {
                format!("--to {to:?} is not end, now, ms since the epoch or an RFC 3339 time in UTC: {e}")
            })
            .and_then(ms),
    }
}

pub fn run(args: ResetOffsetArgs) -> Result<(), String> {
    let credentials = args.acl.credentials()?;
    let ts = timestamp(args.to.as_deref(), args.ago.as_deref())?;
    let req = RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET)
        .with_ext("topic", &args.topic)
        .with_ext("group", &args.group)
        .with_ext("timestamp", ts)
        .with_ext("isForce", !args.rewind_only);
    let resp = crate::client_cmd::admin_call(&args.addr, req, credentials.as_ref(), Duration::from_secs(10))?;
    let table = ResetOffsets::decode(&resp.body)
        .map_err(|e| format!("{} sent an offset table rmqha cannot read: {e}", args.addr))?;
    if args.json {
        for (q, offset) in &table.offsets {
            let line = serde_json::json!({
                "topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id, "offset": offset,
            });
            println!("{line}");
        }
    } else {
        for (q, offset) in &table.offsets {
            println!("{} {} queue {}: offset {offset}", q.broker_name, q.topic, q.queue_id);
        }
        let to = if ts == -1 { "the end of each queue".to_string() } else { format!("store time {ts} ms") };
        println!(
            "group {} reset on topic {} to {to}, {} queues",
            args.group,
            args.topic,
            table.offsets.len()
        );
    }
    if let Some(remark) = resp.remark.filter(|r| !r.is_empty()) {
        eprintln!("{remark}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::timestamp;

    #[test]
    fn times_as_the_request_carries_them() {
        assert_eq!(timestamp(Some("end"), None), Ok(-1));
        assert_eq!(timestamp(None, None), Ok(-1));
        assert_eq!(timestamp(Some("1700000000123"), None), Ok(1_700_000_000_123));
        assert_eq!(timestamp(Some("2026-12-02T21:00:00Z"), None), Ok(1_796_245_200_000));
        assert_eq!(timestamp(Some("2026-12-02 21:00:00"), None), Ok(1_796_245_200_000));
        let now = timestamp(Some("now"), None).unwrap();
        let hour_ago = timestamp(None, Some("1h")).unwrap();
        assert!((now - hour_ago - 3_600_000).abs() < 60_000, "{now} {hour_ago}");
        for bad in ["yesterday", "-5", "12:00", "99999999999999999999999"] {
            let e = timestamp(Some(bad), None).unwrap_err();
            assert!(e.contains("--to"), "{bad}: {e}");
        }
        assert!(timestamp(None, Some("soon")).unwrap_err().contains("--ago"));
    }
}
