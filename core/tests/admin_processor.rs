//! The AdminProcessor over a real RemotingServer: the four config-sync requests answered with
//! RocketMQ's bodies, GET_BROKER_RUNTIME_INFO with the provider's KVTable, the request's opaque
//! and header format echoed, the VIP port answering the same, unknown codes refused, and the
//! processor composed with other handlers through a Dispatch.

mod sync_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmqha_core::broker_admin::{AdminProcessor, KvTable, RuntimeInfoProvider};
use rmqha_core::metadata::{
    ConfigTables, ConsumerOffsetWrapper, SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicConfig,
    TopicConfigWrapper,
};
use rmqha_core::remoting::{
    ClientConfig, Dispatch, Handled, RemotingClient, RemotingCommand, RemotingServer, RequestContext,
    SerializeType, ServerConfig, request_code, response_code,
};

const CALL: Duration = Duration::from_secs(5);

fn tables(dir: &std::path::Path) -> Arc<ConfigTables> {
    let t = Arc::new(ConfigTables::open(dir).unwrap());
    t.topics().put_topic(TopicConfig::with_queues("TopicTest", 4, 4, 6)).unwrap();
    t.subscription_groups().put_group(SubscriptionGroupConfig::new("G")).unwrap();
    t.consumer_offsets().commit("G", "TopicTest", 0, 250);
    t.consumer_offsets().commit("G", "TopicTest", 3, 17);
    t
}

/// A runtime-info provider that counts its calls, as the broker's would read live offsets.
fn counting_provider() -> (RuntimeInfoProvider, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&calls);
    let provider: RuntimeInfoProvider = Arc::new(move || {
        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
        BTreeMap::from([
            ("brokerRole".to_string(), "SYNC_MASTER".to_string()),
            ("calls".to_string(), n.to_string()),
            ("commitLogMaxOffset".to_string(), "123456".to_string()),
        ])
    });
    (provider, calls)
}

fn call(addr: &str, req: RemotingCommand) -> RemotingCommand {
    RemotingClient::new(addr, ClientConfig::default()).invoke_sync(req, CALL).unwrap()
}

#[test]
fn config_sync_requests_get_rocketmq_bodies_on_both_ports() {
    let dir = tempfile::tempdir().unwrap();
    let t = tables(dir.path());
    let (provider, _) = counting_provider();
    let server =
        sync_common::bind_main_and_vip(Arc::new(AdminProcessor::new(Arc::clone(&t), provider)), true);
    t.delay_offsets().apply_from_master("{\n\t\"offsetTable\":{1:3,2:1\n\t}\n}").unwrap();

    for addr in server.local_addrs() {
        let addr = addr.to_string();
        let resp = call(&addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG));
        assert_eq!(resp.code, response_code::SUCCESS);
        assert!(resp.is_response());
        assert!(!resp.body.contains(&b'\n'), "compact, as RocketMQ's encode()");
        assert_eq!(TopicConfigWrapper::decode(&resp.body, "body").unwrap(), t.topics().wrapper());

        let resp = call(&addr, RemotingCommand::request(request_code::GET_ALL_CONSUMER_OFFSET));
        assert_eq!(resp.code, response_code::SUCCESS);
        let offsets = ConsumerOffsetWrapper::decode(&resp.body, "body").unwrap();
        assert_eq!(offsets.offset_table, t.consumer_offsets().all());
        assert_eq!(offsets.data_version, Some(t.consumer_offsets().data_version()));

        let resp = call(&addr, RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET));
        assert_eq!(resp.code, response_code::SUCCESS);
        assert_eq!(resp.body, b"{\n\t\"offsetTable\":{1:3,2:1\n\t}\n}", "the file's text, verbatim");

        let resp = call(&addr, RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG));
        assert_eq!(resp.code, response_code::SUCCESS);
        let groups = SubscriptionGroupWrapper::decode(&resp.body, "body").unwrap();
        assert_eq!(groups.subscription_group_table, t.subscription_groups().all());
        assert_eq!(groups.data_version, t.subscription_groups().data_version());
    }
}

#[test]
fn responses_echo_opaque_and_header_format() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, _) = counting_provider();
    let server = RemotingServer::bind(
        &["127.0.0.1:0".parse().unwrap()],
        Arc::new(AdminProcessor::new(tables(dir.path()), provider)),
        ServerConfig::default(),
    )
    .unwrap();
    let client = RemotingClient::new(server.local_addrs()[0].to_string(), ClientConfig::default());
    for ser in [SerializeType::Json, SerializeType::RocketMq] {
        for code in AdminProcessor::CODES.iter().copied().chain([9999]) {
            let resp =
                client.invoke_sync(RemotingCommand::request(code).with_serialize_type(ser), CALL).unwrap();
            // The client matched the opaque; the format is the request's.
            assert_eq!(resp.serialize_type, ser, "code {code}");
            assert!(resp.is_response());
        }
    }
}

#[test]
fn runtime_info_is_the_providers_table() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, calls) = counting_provider();
    let server = RemotingServer::bind(
        &["127.0.0.1:0".parse().unwrap()],
        Arc::new(AdminProcessor::new(tables(dir.path()), provider)),
        ServerConfig::default(),
    )
    .unwrap();
    let addr = server.local_addrs()[0].to_string();
    for expected_calls in 1..=2 {
        let resp = call(&addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO));
        assert_eq!(resp.code, response_code::SUCCESS);
        let text = String::from_utf8(resp.body.clone()).unwrap();
        assert!(text.starts_with("{\"table\":{"), "{text}");
        let kv = KvTable::decode(&resp.body, "body").unwrap();
        assert_eq!(kv.table["brokerRole"], "SYNC_MASTER");
        assert_eq!(kv.table["commitLogMaxOffset"], "123456");
        assert_eq!(kv.table["calls"], expected_calls.to_string(), "asked afresh for each request");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn unknown_codes_are_not_supported() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, _) = counting_provider();
    let server = RemotingServer::bind(
        &["127.0.0.1:0".parse().unwrap()],
        Arc::new(AdminProcessor::new(tables(dir.path()), provider)),
        ServerConfig::default(),
    )
    .unwrap();
    let addr = server.local_addrs()[0].to_string();
    for code in [
        request_code::SEND_MESSAGE,
        request_code::PULL_MESSAGE,
        request_code::GET_ALL_MESSAGE_REQUEST_MODE,
        request_code::GET_TIMER_CHECK_POINT,
        -1,
        9999,
    ] {
        let resp = call(&addr, RemotingCommand::request(code));
        assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED, "code {code}");
        assert_eq!(resp.remark.as_deref(), Some(format!(" request type {code} not supported").as_str()));
    }
}

#[test]
fn a_dispatch_composes_the_admin_processor_with_other_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, _) = counting_provider();
    let admin = Arc::new(AdminProcessor::new(tables(dir.path()), provider));
    let mut dispatch = Dispatch::new();
    Arc::clone(&admin).register(&mut dispatch);
    // A stand-in for the send processor another module provides.
    dispatch.register(
        request_code::SEND_MESSAGE,
        Arc::new(|req: RemotingCommand, _: &RequestContext| {
            Handled::Respond(
                RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(b"sent".to_vec()),
            )
        }),
    );
    assert!(dispatch.handles(request_code::GET_ALL_TOPIC_CONFIG));
    assert!(dispatch.handles(request_code::SEND_MESSAGE));
    assert!(!dispatch.handles(request_code::PULL_MESSAGE));
    assert_eq!(dispatch.codes().len(), AdminProcessor::CODES.len() + 1);

    let server = sync_common::bind_main_and_vip(Arc::new(dispatch), true);
    for addr in server.local_addrs() {
        let addr = addr.to_string();
        let resp = call(&addr, RemotingCommand::request(request_code::SEND_MESSAGE));
        assert_eq!((resp.code, resp.body.as_slice()), (response_code::SUCCESS, b"sent".as_slice()));
        let resp = call(&addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG));
        assert_eq!(resp.code, response_code::SUCCESS);
        assert!(
            TopicConfigWrapper::decode(&resp.body, "body")
                .unwrap()
                .topic_config_table
                .contains_key("TopicTest")
        );
        let resp = call(&addr, RemotingCommand::request(request_code::PULL_MESSAGE));
        assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    }

    // A fallback takes every unrouted code; `process` leaves codes it does not own to it.
    let mut dispatch = Dispatch::new();
    Arc::clone(&admin).register(&mut dispatch);
    dispatch.set_fallback(Arc::new(|req: RemotingCommand, _: &RequestContext| {
        Handled::Respond(RemotingCommand::response_to(&req, response_code::SYSTEM_BUSY, Some("later")))
    }));
    let server =
        RemotingServer::bind(&["127.0.0.1:0".parse().unwrap()], Arc::new(dispatch), ServerConfig::default())
            .unwrap();
    let addr = server.local_addrs()[0].to_string();
    assert_eq!(call(&addr, RemotingCommand::request(4242)).code, response_code::SYSTEM_BUSY);
    assert_eq!(
        call(&addr, RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET)).code,
        response_code::SUCCESS
    );
    assert!(admin.process(&RemotingCommand::request(4242)).is_none());
}

#[test]
fn a_oneway_request_gets_no_response_and_the_connection_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (provider, calls) = counting_provider();
    let server = RemotingServer::bind(
        &["127.0.0.1:0".parse().unwrap()],
        Arc::new(AdminProcessor::new(tables(dir.path()), provider)),
        ServerConfig::default(),
    )
    .unwrap();
    let client = RemotingClient::new(server.local_addrs()[0].to_string(), ClientConfig::default());
    client.invoke_oneway(RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), CALL).unwrap();
    let resp =
        client.invoke_sync(RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), CALL).unwrap();
    assert_eq!(resp.code, response_code::SUCCESS);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the oneway request was handled, its answer dropped");
}
