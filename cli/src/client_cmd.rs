//! `rmqha put` and `rmqha get`: produce to and consume from a running broker over RocketMQ's
//! remoting protocol, the requests a RocketMQ producer and pull consumer send
//! (SEND_MESSAGE_V2 and PULL_MESSAGE), so scripts can drive any broker that speaks it.
//!
//! ```text
//! rmqha put 127.0.0.1:10911 --topic T --tags TagA --keys order-1 message.txt
//! printf 'a\nb\n' | rmqha put 127.0.0.1:10911 --topic T --lines
//! rmqha get 127.0.0.1:10911 --topic T --queue 0 --offset 0 --max 10
//! ```

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use rmqha_core::acl::Credentials;
use rmqha_core::config::Secret;
use rmqha_core::message::{decode_record, offset_msg_id, properties};
use rmqha_core::processor::pull_sys_flag;
use rmqha_core::remoting::{ClientConfig, RemotingClient, RemotingCommand, request_code, response_code};

/// Producer group the commands send as.
const PRODUCER_GROUP: &str = "rmqha_cli_producer";

/// Credentials for a broker with `aclEnable=true`: each request is signed as RocketMQ's
/// `AclClientRPCHook` signs it (`AccessKey`, `Signature`).
#[derive(Args)]
pub struct AclArgs {
    /// Access key of an account in the broker's plain_acl.yml (or RMQHA_ACCESS_KEY).
    #[arg(long, env = "RMQHA_ACCESS_KEY")]
    access_key: Option<String>,
    /// Its secret key; better given as RMQHA_SECRET_KEY, which a process list does not show.
    #[arg(long, env = "RMQHA_SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
}

impl AclArgs {
    /// The credentials to sign with, if given.
    pub fn credentials(&self) -> Result<Option<Credentials>, String> {
        match (self.access_key.as_deref().map(str::trim), self.secret_key.as_deref()) {
            (None, None) => Ok(None),
            (Some(a), Some(s)) if !a.is_empty() && !s.is_empty() => {
                Ok(Some(Credentials::new(a, Secret::new(s))))
            }
            _ => {
                Err("--access-key and --secret-key (or RMQHA_ACCESS_KEY and RMQHA_SECRET_KEY) go together: \
                      give both, or neither"
                    .into())
            }
        }
    }
}

/// Sends an operator's request `req` to `addr` (signed with `credentials`, if any) and returns
/// the broker's answer if it is SUCCESS; any other code is an error naming the code and the
/// broker's remark.
pub fn admin_call(
    addr: &str,
    req: RemotingCommand,
    credentials: Option<&Credentials>,
    timeout: std::time::Duration,
) -> Result<RemotingCommand, String> {
    let client =
        rmqha_core::remoting::RemotingClient::connect(addr, rmqha_core::remoting::ClientConfig::default())
            .map_err(|e| e.to_string())?;
    let resp = client.invoke_sync(signed(req, credentials), timeout).map_err(|e| e.to_string())?;
    if resp.code != rmqha_core::remoting::response_code::SUCCESS {
        return Err(format!("{addr} answered code {}: {}", resp.code, resp.remark.unwrap_or_default()));
    }
    Ok(resp)
}

/// `req`, signed when there are credentials.
pub fn signed(mut req: RemotingCommand, credentials: Option<&Credentials>) -> RemotingCommand {
    if let Some(c) = credentials {
        c.sign(&mut req);
    }
    req
}

#[derive(Args)]
pub struct PutArgs {
    /// The broker's remoting address (its listenPort), a master.
    addr: String,
    /// Topic; created on first send if the broker has autoCreateTopicEnable.
    #[arg(long)]
    topic: String,
    /// The message's tag (TAGS).
    #[arg(long)]
    tags: Option<String>,
    /// Keys, comma- or space-separated (KEYS, indexed for QUERY_MESSAGE).
    #[arg(long)]
    keys: Option<String>,
    /// Queue id; -1 (the default) lets the broker pick one.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..))]
    queue: i32,
    /// One message per input line instead of one message of the whole input.
    #[arg(long)]
    lines: bool,
    /// Extra property KEY=VALUE (repeatable).
    #[arg(long = "property", value_name = "KEY=VALUE")]
    properties: Vec<String>,
    /// Seconds to wait for each answer (a SYNC_MASTER answers after its slave's ack).
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    timeout: f64,
    /// The body: a file, or - (the default) for standard input.
    #[arg(default_value = "-")]
    file: String,
    #[command(flatten)]
    acl: AclArgs,
}

#[derive(Args)]
pub struct GetArgs {
    /// The broker's remoting address (a master, or a slave with slaveReadEnable).
    addr: String,
    /// Topic to read.
    #[arg(long)]
    topic: String,
    /// Queue id to read (a put with `--queue -1` prints the one the broker picked).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(0..))]
    queue: i32,
    /// Queue offset of the first message.
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i64).range(0..))]
    offset: i64,
    /// Most messages to print (several pulls if needed); at least 1.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    max: u32,
    /// Consumer group: by default RocketMQ's tools' group, TOOLS_CONSUMER, which every broker
    /// has, so reading creates no group; nothing is committed.
    #[arg(long, default_value = "TOOLS_CONSUMER")]
    group: String,
    /// Tag expression, e.g. "TagA || TagB"; * is everything.
    #[arg(long, default_value = "*")]
    tags: String,
    /// SQL92 expression over the messages' properties instead of tags, e.g.
    /// "a > 5 AND color = 'red'" (a broker with enablePropertyFilter=true).
    #[arg(long, conflicts_with = "tags")]
    sql: Option<String>,
    /// If the queue has nothing at the offset, wait this many milliseconds for a message
    /// (long polling).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    wait_ms: u64,
    /// Print only the bodies, each followed by a newline.
    #[arg(long)]
    body_only: bool,
    #[command(flatten)]
    acl: AclArgs,
}

/// Java `SendStatus`'s name for a send response code, or `None` if the message was not stored.
pub fn send_status(code: i32) -> Option<&'static str> {
    match code {
        response_code::SUCCESS => Some("SEND_OK"),
        response_code::FLUSH_DISK_TIMEOUT => Some("FLUSH_DISK_TIMEOUT"),
        response_code::FLUSH_SLAVE_TIMEOUT => Some("FLUSH_SLAVE_TIMEOUT"),
        response_code::SLAVE_NOT_AVAILABLE => Some("SLAVE_NOT_AVAILABLE"),
        _ => None,
    }
}

/// A message id unique to this process, in the layout of RocketMQ's client-side UNIQ_KEY
/// (`MessageClientIDSetter`: IPv4, pid, a per-process value, time, counter; 32 hex digits).
pub fn uniq_key() -> String {
    static COUNTER: AtomicU16 = AtomicU16::new(0);
    use std::hash::{BuildHasher, Hasher};
    let ip = match rmqha_core::net::local_ip() {
        std::net::IpAddr::V4(v4) => v4.octets(),
        std::net::IpAddr::V6(_) => [127, 0, 0, 1],
    };
    let salt = std::collections::hash_map::RandomState::new().build_hasher().finish() as u32;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u32).unwrap_or(0);
    let mut b = Vec::with_capacity(16);
    b.extend_from_slice(&ip);
    b.extend_from_slice(&(std::process::id() as u16).to_be_bytes());
    b.extend_from_slice(&salt.to_be_bytes());
    b.extend_from_slice(&now.to_be_bytes());
    b.extend_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// A SEND_MESSAGE_V2 request as a Java producer builds it (SendMessageRequestHeaderV2).
pub fn send_request(
    topic: &str,
    queue_id: i32,
    body: Vec<u8>,
    props: &[(String, String)],
) -> RemotingCommand {
    let born = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_ext("a", PRODUCER_GROUP)
        .with_ext("b", topic)
        .with_ext("c", "TBW102")
        .with_ext("d", 4)
        .with_ext("e", queue_id)
        .with_ext("f", 0)
        .with_ext("g", born)
        .with_ext("h", 0)
        .with_ext("i", String::from_utf8_lossy(&properties::encode(props)))
        .with_ext("j", 0)
        .with_ext("k", false)
        .with_ext("m", false)
        .with_body(body)
}

fn secs(s: f64) -> Result<Duration, String> {
    match Duration::try_from_secs_f64(s) {
        // Zero timed every send out before it was made.
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("--timeout {s}: expected a number of seconds greater than 0")),
    }
}

/// The largest body `put` sends: a request is one remoting frame, which brokers (rmqha's and
/// RocketMQ's alike) take up to 16 MiB, headers included; a larger one was cut off by the broker
/// and reported as a broken pipe.
const MAX_BODY: usize = rmqha_core::remoting::DEFAULT_MAX_FRAME - 64 * 1024;

pub fn run_put(a: PutArgs) -> Result<(), String> {
    let mut input = Vec::new();
    if a.file == "-" {
        std::io::stdin().read_to_end(&mut input).map_err(|e| format!("cannot read standard input: {e}"))?;
    } else {
        input = std::fs::read(&a.file).map_err(|e| format!("cannot read {}: {e}", a.file))?;
    }
    // Each body with what names it in an error: its line with --lines.
    let bodies: Vec<(String, Vec<u8>)> = if a.lines {
        input
            .split(|&b| b == b'\n')
            .enumerate()
            .map(|(i, l)| (format!(" (line {})", i + 1), l.strip_suffix(b"\r").unwrap_or(l).to_vec()))
            .filter(|(_, l)| !l.is_empty())
            .collect()
    } else {
        vec![(String::new(), input)]
    };
    if bodies.iter().all(|(_, b)| b.is_empty()) {
        // RocketMQ's producers refuse an empty body (Validators: "the message body length is zero").
        return Err(format!(
            "nothing to send: {} is empty{}",
            if a.file == "-" { "standard input" } else { a.file.as_str() },
            if a.lines { " (or holds only empty lines)" } else { "" }
        ));
    }
    let mut base = Vec::new();
    if let Some(t) = &a.tags {
        base.push(("TAGS".to_string(), t.clone()));
    }
    if let Some(k) = &a.keys {
        let keys: Vec<&str> = k.split([',', ' ']).filter(|s| !s.is_empty()).collect();
        base.push(("KEYS".to_string(), keys.join(" ")));
    }
    for p in &a.properties {
        let (k, v) = p.split_once('=').ok_or_else(|| format!("--property {p:?}: expected KEY=VALUE"))?;
        // RocketMQ's property separators: inside a key or value they would smuggle in other
        // properties (TAGS, UNIQ_KEY, ...) once the broker decodes the list.
        if k.is_empty() || !rmqha_core::message::properties::is_encodable(p) {
            return Err(format!(
                "--property {p:?}: the key must be non-empty, and neither part may hold the bytes 0x01 or 0x02"
            ));
        }
        // A key given twice was sent twice, and the broker kept one of them: `--property
        // UNIQ_KEY=x` stored x while put printed the uniqId it had added itself.
        let flag = match k {
            "TAGS" if a.tags.is_some() => Some("--tags"),
            "KEYS" if a.keys.is_some() => Some("--keys"),
            "UNIQ_KEY" => Some("put, which makes one for each message and prints it"),
            _ if base.iter().any(|(b, _)| b == k) => Some("an earlier --property"),
            _ => None,
        };
        if let Some(flag) = flag {
            return Err(format!("--property {p:?}: {k} is set by {flag}"));
        }
        base.push((k.to_string(), v.to_string()));
    }
    // Sent unless asked otherwise (WAIT=false: answered before the flush or the slave's ack).
    if !base.iter().any(|(k, _)| k == "WAIT") {
        base.push(("WAIT".to_string(), "true".to_string()));
    }
    let timeout = secs(a.timeout)?;
    // Checked before anything is sent, so that no part of the input is.
    if let Some((what, body)) = bodies.iter().find(|(_, b)| b.len() > MAX_BODY) {
        return Err(format!(
            "the body{what} is {} bytes, more than a request to a broker can carry ({MAX_BODY}); brokers refuse \
             bodies over their maxMessageSize (4 MiB by default) anyway: nothing was sent",
            body.len()
        ));
    }
    let credentials = a.acl.credentials()?;
    let client = RemotingClient::connect(&a.addr, ClientConfig::default()).map_err(|e| e.to_string())?;
    let mut not_ok = 0;
    let out = std::io::stdout();
    let mut out = out.lock();
    for (sent, (what, body)) in bodies.into_iter().enumerate() {
        let before = if sent > 0 {
            format!("; the {sent} message(s) before it were stored (see above)")
        } else {
            String::new()
        };
        let uniq = uniq_key();
        let mut props = base.clone();
        props.push(("UNIQ_KEY".to_string(), uniq.clone()));
        let resp = client
            .invoke_sync(signed(send_request(&a.topic, a.queue, body, &props), credentials.as_ref()), timeout)
            .map_err(|e| format!("send{what} to {}: {e}{before}", a.addr))?;
        let Some(status) = send_status(resp.code) else {
            return Err(format!(
                "send{what} to {} failed: code {} ({}): {}{before}",
                a.addr,
                resp.code,
                response_code::name(resp.code).unwrap_or("?"),
                resp.remark.unwrap_or_default()
            ));
        };
        if resp.code != response_code::SUCCESS {
            not_ok += 1;
        }
        writeln!(
            out,
            "{status} msgId={} uniqId={uniq} queueId={} queueOffset={}",
            resp.ext("msgId").unwrap_or(""),
            resp.ext("queueId").unwrap_or(""),
            resp.ext("queueOffset").unwrap_or("")
        )
        .map_err(|e| e.to_string())?;
    }
    if not_ok > 0 {
        return Err(format!("{not_ok} message(s) stored without the durability asked for (see above)"));
    }
    Ok(())
}

/// A PULL_MESSAGE request as a pull consumer sends it, with the subscription in the header:
/// `expression` of `expression_type` (`TAG` or `SQL92`).
#[allow(clippy::too_many_arguments)]
pub fn pull_request(
    group: &str,
    topic: &str,
    queue: i32,
    offset: i64,
    max: i32,
    expression_type: &str,
    expression: &str,
    suspend_ms: u64,
) -> RemotingCommand {
    let mut flag = pull_sys_flag::SUBSCRIPTION;
    if suspend_ms > 0 {
        flag |= pull_sys_flag::SUSPEND;
    }
    RemotingCommand::request(request_code::PULL_MESSAGE)
        .with_ext("consumerGroup", group)
        .with_ext("topic", topic)
        .with_ext("queueId", queue)
        .with_ext("queueOffset", offset)
        .with_ext("maxMsgNums", max)
        .with_ext("sysFlag", flag)
        .with_ext("commitOffset", 0)
        .with_ext("suspendTimeoutMillis", suspend_ms)
        .with_ext("subscription", expression)
        .with_ext("subVersion", 0)
        .with_ext("expressionType", expression_type)
}

pub fn run_get(a: GetArgs) -> Result<(), String> {
    let credentials = a.acl.credentials()?;
    let client = RemotingClient::connect(&a.addr, ClientConfig::default()).map_err(|e| e.to_string())?;
    let out = std::io::stdout();
    let mut out = out.lock();
    let mut offset = a.offset;
    let mut printed = 0usize;
    let mut wait_ms = a.wait_ms;
    let (expression_type, expression) = match &a.sql {
        Some(sql) => ("SQL92", sql.as_str()),
        None => ("TAG", a.tags.as_str()),
    };
    let summary = loop {
        let max = (a.max as usize - printed).min(32) as i32;
        let req = signed(
            pull_request(&a.group, &a.topic, a.queue, offset, max, expression_type, expression, wait_ms),
            credentials.as_ref(),
        );
        let resp = client
            .invoke_sync(req, Duration::from_millis(wait_ms) + Duration::from_secs(10))
            .map_err(|e| format!("pull from {}: {e}", a.addr))?;
        wait_ms = 0;
        let next: i64 = resp.ext("nextBeginOffset").and_then(|v| v.parse().ok()).unwrap_or(offset);
        let summary = format!(
            "# {} nextBeginOffset={next} minOffset={} maxOffset={} suggestWhichBrokerId={}",
            response_code::name(resp.code).unwrap_or("?"),
            resp.ext("minOffset").unwrap_or("?"),
            resp.ext("maxOffset").unwrap_or("?"),
            resp.ext("suggestWhichBrokerId").unwrap_or("?"),
        );
        match resp.code {
            response_code::SUCCESS => {
                print_records(&mut out, &resp.body, a.body_only).map(|n| printed += n)?;
            }
            response_code::PULL_RETRY_IMMEDIATELY if next > offset => {}
            response_code::PULL_NOT_FOUND | response_code::PULL_RETRY_IMMEDIATELY => {
                break summary;
            }
            response_code::PULL_OFFSET_MOVED => {
                // No message at the offset asked for, and none will come there: below the
                // queue's first (deleted) or past its end. Not an empty read.
                out.flush().map_err(|e| e.to_string())?;
                return Err(format!(
                    "queue {} of {} at {} has no offset {offset}: its minOffset is {} and its maxOffset (where \
                     the next message goes) {} (PULL_OFFSET_MOVED, nextBeginOffset {next})",
                    a.queue,
                    a.topic,
                    a.addr,
                    resp.ext("minOffset").unwrap_or("?"),
                    resp.ext("maxOffset").unwrap_or("?"),
                ));
            }
            code => {
                return Err(format!(
                    "pull from {} failed: code {code} ({}): {}",
                    a.addr,
                    response_code::name(code).unwrap_or("?"),
                    resp.remark.unwrap_or_default()
                ));
            }
        }
        if printed >= a.max as usize || next <= offset {
            break summary;
        }
        offset = next;
    };
    out.flush().map_err(|e| e.to_string())?;
    eprintln!("{summary}");
    Ok(())
}

/// Prints the records of a pull body; returns how many.
fn print_records(out: &mut impl Write, mut body: &[u8], body_only: bool) -> Result<usize, String> {
    let mut n = 0;
    while !body.is_empty() {
        let v = decode_record(body)
            .map_err(|e| format!("the broker sent a record that does not decode: {e:?}"))?;
        let io = |e: std::io::Error| e.to_string();
        if body_only {
            out.write_all(v.body).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
        } else {
            let prop =
                |k: &str| v.property(k).map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default();
            writeln!(
                out,
                "queueOffset={} msgId={} uniqId={} tags={} keys={:?} storeTimestamp={} body={:?}",
                v.queue_offset,
                offset_msg_id(&v.store_host, v.physical_offset),
                prop("UNIQ_KEY"),
                prop("TAGS"),
                prop("KEYS"),
                v.store_timestamp,
                String::from_utf8_lossy(v.body)
            )
            .map_err(io)?;
        }
        body = &body[v.total_size as usize..];
        n += 1;
    }
    Ok(n)
}
