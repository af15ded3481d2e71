//! Subscription groups managed over the remoting port, as `mqadmin updateSubGroup` and
//! `deleteSubGroup` do: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) and DELETE_SUBSCRIPTIONGROUP
//! (207). What a broker with `autoCreateSubscriptionGroup=false` needs to admit a consumer
//! group without the embedding API.

mod common;
mod remote_common;

use std::sync::Arc;

use rmqha_core::Broker;
use rmqha_core::remoting::{RemotingCommand, request_code};

use remote_common::*;

fn master(dir: &std::path::Path) -> Arc<Broker> {
    Broker::start_master(common::broker_config(
        dir,
        "ASYNC_MASTER",
        &[("autoCreateSubscriptionGroup", "false")],
    ))
    .unwrap()
}

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(body.as_bytes().to_vec())
}

#[test]
fn a_group_created_by_request_is_persisted_used_and_mirrored() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(&dir.path().join("m"));
    b.create_topic("T", 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    // Without the group, a pull is refused (autoCreateSubscriptionGroup=false).
    let r = call(&c, pull_req("ops_group", "T", 0, 0, 1, FLAG_SUBSCRIPTION, 0, "*"));
    assert_eq!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");

    // As the Java admin sends it: the whole SubscriptionGroupConfig, fastjson's field order.
    let body = r#"{"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,"consumeFromMinEnable":false,"consumeMessageOrderly":false,"groupName":"ops_group","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}"#;
    let r = call(&c, update(body));
    assert_eq!(r.code, code::SUCCESS, "{r:?}");
    let g = b.subscription_group("ops_group").expect("created");
    assert_eq!((g.retry_max_times, g.consume_broadcast_enable), (3, false));
    let file = std::fs::read_to_string(dir.path().join("m/config/subscriptionGroup.json")).unwrap();
    assert!(file.contains("\"ops_group\""), "persisted before the answer: {file}");
    let r = call(&c, pull_req("ops_group", "T", 0, 0, 1, FLAG_SUBSCRIPTION, 0, "*"));
    assert_ne!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");

    // A slave mirrors it, and refuses to change its own copy.
    let remoting = format!("127.0.0.1:{}", b.listen_port());
    let s = common::slave_of(&dir.path().join("s"), &b, &[("masterAddress", &remoting)]);
    s.sync_config_now().unwrap();
    assert_eq!(s.subscription_group("ops_group").map(|g| g.retry_max_times), Some(3));
    let sc = client(s.remoting_addrs()[0]);
    let r = call(&sc, update(&body.replace("ops_group", "other_group")));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    assert!(r.remark.as_deref().unwrap_or("").contains("master"), "{r:?}");
    assert!(s.subscription_group("other_group").is_none());
    s.shutdown();
    b.shutdown();
}

#[test]
fn bad_group_configs_are_refused_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    let c = client(b.remoting_addrs()[0]);
    for (body, says) in [
        ("not json", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body"),
        ("[]", "expected a JSON object"),
        (r#"{"retryMaxTimes":3}"#, "group name"),
        (r#"{"groupName":"a b"}"#, "group name"),
    ] {
        let r = call(&c, update(body));
        assert_eq!(r.code, code::SYSTEM_ERROR, "{body}: {r:?}");
        assert!(r.remark.as_deref().unwrap_or("").contains(says), "{body}: {r:?}");
    }
    // Missing fields take Java's defaults.
    assert_eq!(call(&c, update(r#"{"groupName":"minimal"}"#)).code, code::SUCCESS);
    assert_eq!(
        b.subscription_group("minimal").map(|g| (g.retry_max_times, g.consume_enable)),
        Some((16, true))
    );
    b.shutdown();
}

#[test]
fn deleting_a_group_keeps_its_offsets_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("T", 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    for g in ["keep", "clean"] {
        assert_eq!(call(&c, update(&format!(r#"{{"groupName":"{g}"}}"#))).code, code::SUCCESS);
        b.commit_consumer_offset(g, "T", 0, 0).unwrap();
    }
    let delete =
        |g: &str| RemotingCommand::request(request_code::DELETE_SUBSCRIPTIONGROUP).with_ext("groupName", g);
    assert_eq!(call(&c, delete("keep")).code, code::SUCCESS);
    assert!(b.subscription_group("keep").is_none());
    assert_eq!(b.consumer_offset("keep", "T", 0), 0, "4.9 keeps the offsets by default");
    assert_eq!(call(&c, delete("clean").with_ext("removeOffset", "true")).code, code::SUCCESS);
    assert!(b.subscription_group("clean").is_none());
    assert_eq!(b.consumer_offset("clean", "T", 0), -1);
    let file = std::fs::read_to_string(dir.path().join("config/consumerOffset.json")).unwrap();
    let table: serde_json::Value = serde_json::from_str(&file).unwrap();
    let offsets = &table["offsetTable"];
    assert!(offsets.get("T@keep").is_some() && offsets.get("T@clean").is_none(), "persisted: {file}");
    // The deletion is stamped for the slaves (a tombstone).
    assert!(table["rmqhaRewindTable"].get("T@clean").is_some(), "persisted: {file}");
    // An unknown group is no error; a request without a name is.
    assert_eq!(call(&c, delete("never")).code, code::SUCCESS);
    let r = call(&c, RemotingCommand::request(request_code::DELETE_SUBSCRIPTIONGROUP));
    assert_eq!(r.code, code::SYSTEM_ERROR, "{r:?}");
    b.shutdown();
}

/// A 4.9 broker starts with its tools' groups (`SubscriptionGroupManager.init`): `mqadmin`
/// pulls as TOOLS_CONSUMER, which `autoCreateSubscriptionGroup=false` would otherwise refuse.
#[test]
fn rocketmqs_built_in_groups_exist_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let b = master(dir.path());
    b.create_topic("T", 1).unwrap();
    let c = client(b.remoting_addrs()[0]);
    let r = call(&c, pull_req("TOOLS_CONSUMER", "T", 0, 0, 1, FLAG_SUBSCRIPTION, 0, "*"));
    assert_ne!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");
    let r = call(&c, pull_req("NOT_BUILT_IN", "T", 0, 0, 1, FLAG_SUBSCRIPTION, 0, "*"));
    assert_eq!(r.code, code::SUBSCRIPTION_GROUP_NOT_EXIST, "{r:?}");
    let all = call(&c, RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG));
    let body: serde_json::Value = serde_json::from_slice(&all.body).unwrap();
    for g in [
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
    ] {
        assert_eq!(body["subscriptionGroupTable"][g]["groupName"], g, "{g}");
    }
    b.shutdown();
}
