//! `rmqha config HOST:PORT`: a running broker's settings (GET_BROKER_CONFIG, what `mqadmin
//! getBrokerConfig` asks), and `--set KEY=VALUE` to change one at run time
//! (UPDATE_BROKER_CONFIG, `mqadmin updateBrokerConfig`): `brokerPermission=4` drains a
//! broker's writes before maintenance, and the broker writes the change into its properties
//! file so a restart keeps it.

use std::time::Duration;

use clap::Args;
use rmqha_core::config::parse_properties;
use rmqha_core::remoting::{RemotingCommand, request_code};

#[derive(Args)]
pub struct ConfigArgs {
    /// The broker's remoting address (listenPort).
    addr: String,
    /// Change a setting at run time (repeatable; all or nothing). The broker takes
    /// `brokerPermission` (6 read and write, 4 read only, 2 write only),
    /// `autoCreateTopicEnable`, `autoCreateSubscriptionGroup`, `slaveReadEnable` and
    /// `notifyConsumerIdsChangedEnable`, and refuses any other key, naming it.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Print only these keys (repeatable).
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    /// Print the settings as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acl: crate::client_cmd::AclArgs,
}

/// The `--set` values as the request's body, each checked to be `KEY=VALUE`.
fn update_body(sets: &[String]) -> Result<String, String> {
    let mut body = String::new();
    for s in sets {
        let Some((k, v)) = s.split_once('=') else {
            return Err(format!("--set {s:?} is not KEY=VALUE"));
        };
        let k = k.trim();
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(format!("--set {s:?} names no key"));
        }
        // Escaped as a properties file would be, so the broker reads back what was given.
        body.push_str(
            &rmqha_core::config::set_property("", |_| false, k, v.trim()).map_err(|e| e.to_string())?,
        );
    }
    Ok(body)
}

pub fn run(args: ConfigArgs) -> Result<(), String> {
    let credentials = args.acl.credentials()?;
    let timeout = Duration::from_secs(5);
    let mut wanted = args.keys.clone();
    if !args.set.is_empty() {
        let body = update_body(&args.set)?;
        let req = RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(body.into_bytes());
        crate::client_cmd::admin_call(&args.addr, req, credentials.as_ref(), timeout)?;
        if wanted.is_empty() {
            // Show what was set, as the broker has it now.
            wanted = args
                .set
                .iter()
                .filter_map(|s| s.split_once('='))
                .map(|(k, _)| k.trim().to_string())
                .collect();
        }
    }
    let req = RemotingCommand::request(request_code::GET_BROKER_CONFIG);
    let resp = crate::client_cmd::admin_call(&args.addr, req, credentials.as_ref(), timeout)?;
    let text = String::from_utf8_lossy(&resp.body);
    let entries =
        parse_properties(&text).map_err(|e| format!("{} sent a config rmqha cannot read: {e}", args.addr))?;
    let shown: Vec<_> = entries.iter().filter(|e| wanted.is_empty() || wanted.contains(&e.key)).collect();
    if let Some(missing) = wanted.iter().find(|k| !entries.iter().any(|e| &e.key == *k)) {
        return Err(format!("{} has no setting {missing}", args.addr));
    }
    if args.json {
        let map: serde_json::Map<String, serde_json::Value> =
            shown.iter().map(|e| (e.key.clone(), serde_json::Value::from(e.value.as_str()))).collect();
        println!("{}", serde_json::Value::Object(map));
    } else {
        for e in shown {
            println!("{}={}", e.key, e.value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::update_body;

    #[test]
    fn sets_become_a_properties_body() {
        let sets = |s: &[&str]| update_body(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(sets(&["brokerPermission=4"]), Ok("brokerPermission=4\n".into()));
        assert_eq!(sets(&[" a = 1 ", "b=x=y"]), Ok("a=1\nb=x\\=y\n".into()));
        assert!(sets(&["brokerPermission"]).unwrap_err().contains("not KEY=VALUE"));
        assert!(sets(&["=4"]).unwrap_err().contains("names no key"));
    }
}
