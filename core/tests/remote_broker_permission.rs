//! `brokerPermission` (RocketMQ's `PermName` bits: 4 read, 2 write), from the properties or
//! changed at runtime by UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig -k
//! brokerPermission -v 4`, the way to drain a broker's writes): sends (and send-backs) refused
//! NO_PERMISSION without write, pulls without read, routes advertising only what both allow.
//! The other switches UPDATE_BROKER_CONFIG changes (`autoCreateTopicEnable`, ...) take effect
//! at once; any other key is refused at runtime, naming it. A change is written into the
//! properties file the broker started from, so a restart keeps it.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingClient, RemotingCommand, request_code};

use remote_common::*;

fn master(dir: &std::path::Path, extra: &[(&str, &str)]) -> Arc<Broker> {
    let b = Broker::start_master(common::broker_config(dir, "ASYNC_MASTER", extra)).unwrap();
    b.create_topic("T", 1).unwrap();
    b
}

fn update(c: &RemotingClient, body: &str) -> RemotingCommand {
    call(c, RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(body.as_bytes().to_vec()))
}

fn route_perm(c: &RemotingClient) -> i64 {
    let r = call(c, RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_ext("topic", "T"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["queueDatas"][0]["perm"].as_i64().unwrap()
}

/// GET_BROKER_CONFIG: `key`'s value and the config's version.
fn config_value(c: &RemotingClient, key: &str) -> (String, String) {
    let r = call(c, RemotingCommand::request(request_code::GET_BROKER_CONFIG));
    let body = String::from_utf8(r.body.clone()).unwrap();
    let value = body.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).unwrap().to_string();
    (value, r.ext("version").unwrap_or_default().to_string())
}

fn config_line(c: &RemotingClient) -> (String, String) {
    let (v, version) = config_value(c, "brokerPermission");
    (format!("brokerPermission={v}"), version)
}

fn send(c: &RemotingClient) -> RemotingCommand {
    call(c, send_v2(&Msg::new("T", b"x").queue(0)))
}

fn pull(c: &RemotingClient) -> RemotingCommand {
    call(c, pull_req("perm_cg", "T", 0, 0, 8, FLAG_SUBSCRIPTION, 0, "*"))
}

#[test]
fn brokerpermission_changed_at_runtime_drains_writes_or_reads() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[]);
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(send(&c).code, code::SUCCESS);
    assert_eq!(route_perm(&c), 6);
    let (line, v0) = config_line(&c);
    assert_eq!(line, "brokerPermission=6");

    // Read only: sends refused, pulls served, routes say read only, the config shows it.
    let r = update(&c, "brokerPermission=4\n");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert_eq!(b.broker_permission(), 4);
    let r = send(&c);
    assert_eq!(r.code, code::NO_PERMISSION, "{r:?}");
    assert!(r.remark.unwrap().contains("sending message is forbidden"));
    assert!(b.store().wait_dispatched(TIMEOUT));
    let p = pull(&c);
    assert_eq!((p.code, decode_records(&p.body).len()), (code::SUCCESS, 1), "{p:?}");
    assert_eq!(route_perm(&c), 4);
    let (line, v1) = config_line(&c);
    assert_eq!(line, "brokerPermission=4");
    assert_ne!(v0, v1, "the config's version moved");

    // Write only: pulls refused, sends served.
    assert_eq!(update(&c, "brokerPermission = 2").code, code::SUCCESS);
    let p = pull(&c);
    assert_eq!(p.code, code::NO_PERMISSION, "{p:?}");
    assert!(p.remark.unwrap().contains("pulling message is forbidden"));
    assert_eq!(send(&c).code, code::SUCCESS);
    assert_eq!(route_perm(&c), 2);

    // Refused, naming why; all or nothing.
    for (body, says) in [
        ("brokerPermission=5", "must be 6 (read and write), 4 (read only) or 2 (write only)"),
        ("brokerPermission=rw", "brokerPermission"),
        ("brokerPermission=6\nlistenPort=1", "listenPort cannot change while the broker runs"),
        ("brokerPermission=6\nslaveReadEnable=maybe", "invalid value \"maybe\" for slaveReadEnable"),
        ("flushDiskType=SYNC_FLUSH", "flushDiskType cannot change while the broker runs"),
        ("noSuchKey=1", "unknown config key noSuchKey"),
        ("", "names no key"),
    ] {
        let r = update(&c, body);
        assert_eq!(r.code, code::SYSTEM_ERROR, "{body}: {r:?}");
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains(says), "{body}: {remark}");
    }
    assert_eq!(b.broker_permission(), 2, "a refused update changes nothing");
    assert_eq!(update(&c, "brokerPermission=6").code, code::SUCCESS);
    assert_eq!((send(&c).code, pull(&c).code), (code::SUCCESS, code::SUCCESS));
    assert_eq!(route_perm(&c), 6);
    b.shutdown();
}

#[test]
fn brokerpermission_from_the_properties_applies_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("brokerPermission", "4")]);
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(send(&c).code, code::NO_PERMISSION);
    assert_eq!(route_perm(&c), 4);
    // The embedding API is the owner's, and is not refused.
    let r = b.put_message_sync(&rmqha_core::Message::new("T", b"own".to_vec()).with_queue(0)).unwrap();
    assert_eq!(r.status, rmqha_core::PutStatus::PutOk);
    b.shutdown();
    let e = rmqha_core::config::BrokerConfig::from_properties_str("brokerName=b\nbrokerPermission=7\n")
        .unwrap_err();
    assert_eq!((e.key.as_deref(), e.line), (Some("brokerPermission"), Some(2)), "{e}");
}

#[test]
fn a_change_is_written_into_the_brokers_properties_file_and_outlives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.properties");
    let original = format!(
        "# broker-a, drained by hand when needed\r\nbrokerName=broker-a\r\nbindAddress=127.0.0.1\r\n\
         listenPort=0\r\nhaListenPort=0\r\nstorePathRootDir={}\r\nmapedFileSizeCommitLog=1048576\r\n\
         ! the default, written out\r\nbrokerPermission = 6\r\nflushDiskType=ASYNC_FLUSH\r\n",
        dir.path().join("store").display()
    );
    // Through a symbolic link, as a deployment that keeps its configs elsewhere has it.
    let real_dir = dir.path().join("conf");
    std::fs::create_dir(&real_dir).unwrap();
    let real = real_dir.join("broker-a.conf");
    std::fs::write(&real, &original).unwrap();
    std::os::unix::fs::symlink(&real, &file).unwrap();
    let b = Broker::start_from_file(&file).unwrap();
    b.create_topic("T", 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let r = update(&c, "brokerPermission=4");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(std::fs::symlink_metadata(&file).unwrap().file_type().is_symlink(), "the link is kept");
    let text = std::fs::read_to_string(&real).unwrap();
    assert_eq!(text, original.replace("brokerPermission = 6", "brokerPermission=4"), "only its line changed");
    let bak = real_dir.join("broker-a.conf.bak");
    assert_eq!(std::fs::read_to_string(&bak).unwrap(), original, "the previous content kept");
    assert!(!real_dir.join("broker-a.conf.tmp").exists());
    b.shutdown();

    // Restarted from the same file: still read only.
    let b = Broker::start_from_file(&file).unwrap();
    assert_eq!(b.broker_permission(), 4);
    let c = client(b.remoting_addrs()[0]);
    assert_eq!(send(&c).code, code::NO_PERMISSION);

    // The file gone (or not writable): the change still holds, and the answer says until when.
    std::fs::remove_file(&real).unwrap();
    let r = update(&c, "brokerPermission=6");
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains("brokerPermission is 6 now, but only until the broker restarts"), "{remark}");
    assert!(remark.contains("broker.properties"), "names the file: {remark}");
    assert_eq!(b.broker_permission(), 6);
    assert_eq!(send(&c).code, code::SUCCESS);
    b.shutdown();
}

#[test]
fn switches_change_at_runtime_and_show_in_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path(), &[("autoCreateTopicEnable", "false")]);
    let c = client(b.remoting_addrs()[0]);
    let fresh = |topic: &str| call(&c, send_v2(&Msg::new(topic, b"x").queue(0)));
    let value = |key: &str| config_value(&c, key).0;
    assert_eq!(fresh("Fresh1").code, code::TOPIC_NOT_EXIST);
    assert_eq!(value("autoCreateTopicEnable"), "false");

    // On: the template topic is put in place as at a start, and a send creates its topic.
    let r = update(&c, "autoCreateTopicEnable=true\nslaveReadEnable = true");
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    assert!(b.auto_create_topic_enable() && b.slave_read_enable());
    assert!(b.topic_config("TBW102").is_some(), "the template is seeded");
    assert_eq!(fresh("Fresh1").code, code::SUCCESS);
    assert!(b.topic_config("Fresh1").is_some());
    assert_eq!((value("autoCreateTopicEnable"), value("slaveReadEnable")), ("true".into(), "true".into()));

    // Off again: the next new topic is refused, and the one created stays.
    assert_eq!(update(&c, "autoCreateTopicEnable=false").code, code::SUCCESS);
    assert_eq!(fresh("Fresh2").code, code::TOPIC_NOT_EXIST);
    assert_eq!(fresh("Fresh1").code, code::SUCCESS);

    // The embedding API does the same, and says what changed.
    let changed =
        b.update_config(&[("autoCreateSubscriptionGroup", "false"), ("brokerPermission", "6")]).unwrap();
    assert_eq!(changed, vec![("autoCreateSubscriptionGroup", "false".to_string())]);
    assert!(!b.auto_create_subscription_group());
    assert_eq!(b.runtime_config_value("listenPort"), None, "not a runtime key");
    b.shutdown();
}
