//! A RemotingServer on 127.0.0.1 port 0 and RemotingClients talking to it: normal calls in
//! both header formats, unknown codes, deferred responses, handler panics, timeouts,
//! reconnection, several listeners, and shutdown joining every thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use rmqha_core::remoting::{
    ClientConfig, Handled, RemotingClient, RemotingCommand, RemotingError, RemotingServer, RequestContext,
    RequestHandler, Responder, SerializeType, ServerConfig, request_code, response_code,
};

const ECHO: i32 = 9001;
const DEFER: i32 = 9002;
const PANIC: i32 = 9003;
const RECORD: i32 = 9004;
const WHERE: i32 = 9005;

const CALL: Duration = Duration::from_secs(5);

struct TestHandler {
    deferred: Sender<(RemotingCommand, Responder)>,
    recorded: Sender<RemotingCommand>,
}

impl RequestHandler for TestHandler {
    fn handle(&self, req: RemotingCommand, ctx: &RequestContext) -> Handled {
        match req.code {
            ECHO => Handled::Respond(
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_ext("echo", req.ext("v").unwrap_or("-"))
                    .with_body(req.body.clone()),
            ),
            DEFER => {
                let _ = self.deferred.send((req, ctx.responder()));
                Handled::Deferred
            }
            PANIC => panic!("handler bug on opaque {}", req.opaque),
            RECORD => {
                let _ = self.recorded.send(req);
                Handled::NoResponse
            }
            WHERE => Handled::Respond(
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_ext("local", ctx.local_addr())
                    .with_ext("peer", ctx.peer()),
            ),
            request_code::GET_ALL_DELAY_OFFSET => Handled::Respond(
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_body(br#"{"offsetTable":{1:0}}"#.to_vec()),
            ),
            _ => Handled::Respond(RemotingCommand::not_supported(&req)),
        }
    }
}

struct Fixture {
    server: RemotingServer,
    deferred: Receiver<(RemotingCommand, Responder)>,
    recorded: Receiver<RemotingCommand>,
}

fn start_with(addrs: &[SocketAddr], config: ServerConfig) -> Fixture {
    let (deferred_tx, deferred) = unbounded();
    let (recorded_tx, recorded) = unbounded();
    let handler = TestHandler { deferred: deferred_tx, recorded: recorded_tx };
    let server = RemotingServer::bind(addrs, Arc::new(handler), config).unwrap();
    Fixture { server, deferred, recorded }
}

fn start() -> Fixture {
    start_with(&[localhost()], ServerConfig::default())
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn client(server: &RemotingServer) -> RemotingClient {
    RemotingClient::new(server.local_addrs()[0].to_string(), ClientConfig::default())
}

fn echo(client: &RemotingClient, v: &str) -> RemotingCommand {
    let req = RemotingCommand::request(ECHO).with_ext("v", v).with_body(v.as_bytes().to_vec());
    client.invoke_sync(req, CALL).unwrap()
}

/// Polls `cond` until it holds or `limit` passes: tests wait on conditions, never on time.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn request_and_response() {
    let fx = start();
    let client = client(&fx.server);
    let resp = echo(&client, "hello");
    assert_eq!(resp.code, response_code::SUCCESS);
    assert!(resp.is_response());
    assert_eq!(resp.ext("echo"), Some("hello"));
    assert_eq!(resp.body, b"hello");
    assert_eq!(resp.serialize_type, SerializeType::Json);

    let resp =
        client.invoke_sync(RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET), CALL).unwrap();
    assert_eq!(resp.body, br#"{"offsetTable":{1:0}}"#);
}

#[test]
fn rocketmq_header_request_gets_rocketmq_header_response() {
    let fx = start();
    let client = client(&fx.server);
    let req = RemotingCommand::request(ECHO)
        .with_serialize_type(SerializeType::RocketMq)
        .with_ext("v", "binary")
        .with_body(vec![0u8, 1, 2, 255]);
    let resp = client.invoke_sync(req, CALL).unwrap();
    assert_eq!(resp.serialize_type, SerializeType::RocketMq);
    assert_eq!(resp.ext("echo"), Some("binary"));
    assert_eq!(resp.body, [0u8, 1, 2, 255]);
}

#[test]
fn opaques_increase_and_responses_match() {
    let fx = start();
    let client = client(&fx.server);
    let a = echo(&client, "a");
    let b = echo(&client, "b");
    assert!(b.opaque > a.opaque, "{} then {}", a.opaque, b.opaque);
}

#[test]
fn unknown_code_is_request_code_not_supported() {
    let fx = start();
    let client = client(&fx.server);
    let resp = client.invoke_sync(RemotingCommand::request(4242), CALL).unwrap();
    assert_eq!(resp.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(resp.remark.as_deref(), Some(" request type 4242 not supported"));
}

#[test]
fn deferred_response_from_another_thread_does_not_hold_the_server() {
    let fx = start();
    let waiting = Arc::new(client(&fx.server));
    let call = {
        let waiting = Arc::clone(&waiting);
        thread::spawn(move || waiting.invoke_sync(RemotingCommand::request(DEFER).with_ext("n", 7), CALL))
    };
    let (req, responder) = fx.deferred.recv_timeout(CALL).unwrap();
    assert_eq!(req.ext_i32("n").unwrap(), 7);

    // While that request is parked, another connection is served.
    let other = client(&fx.server);
    assert_eq!(echo(&other, "meanwhile").ext("echo"), Some("meanwhile"));

    let sender = thread::spawn(move || {
        responder.send(RemotingCommand::response(response_code::SUCCESS, Some("later")).with_body(b"done"))
    });
    sender.join().unwrap().unwrap();
    let resp = call.join().unwrap().unwrap();
    assert_eq!(resp.code, response_code::SUCCESS);
    assert_eq!(resp.remark.as_deref(), Some("later"));
    assert_eq!(resp.body, b"done");
    assert_eq!(resp.opaque, req.opaque);
}

#[test]
fn handler_panic_becomes_system_error_and_connection_survives() {
    let fx = start();
    let client = client(&fx.server);
    let resp = client.invoke_sync(RemotingCommand::request(PANIC), CALL).unwrap();
    assert_eq!(resp.code, response_code::SYSTEM_ERROR);
    let remark = resp.remark.unwrap_or_default();
    assert!(remark.contains("handler bug on opaque"), "{remark}");
    assert_eq!(echo(&client, "still here").ext("echo"), Some("still here"));
}

#[test]
fn oneway_request_reaches_the_handler_and_gets_no_response() {
    let fx = start();
    let client = client(&fx.server);
    client.invoke_oneway(RemotingCommand::request(RECORD).with_ext("k", "v"), CALL).unwrap();
    let got = fx.recorded.recv_timeout(CALL).unwrap();
    assert!(got.is_oneway());
    assert_eq!(got.ext("k"), Some("v"));
    // A oneway request to a code that would respond: the response is suppressed, so the next
    // call's response is the next frame.
    client.invoke_oneway(RemotingCommand::request(ECHO), CALL).unwrap();
    assert_eq!(echo(&client, "next").ext("echo"), Some("next"));
}

#[test]
fn timeout_names_code_address_and_stage_and_late_response_is_skipped() {
    let fx = start();
    let client = client(&fx.server);
    // Connect first, so the short timeout below is spent waiting for the response.
    echo(&client, "warm-up");
    let err = client.invoke_sync(RemotingCommand::request(DEFER), Duration::from_millis(200)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemotingError::Timeout { code: DEFER, .. }), "{text}");
    assert!(text.contains("request code 9002"), "{text}");
    assert!(text.contains(&fx.server.local_addrs()[0].to_string()), "{text}");
    assert!(text.contains("waiting for the response"), "{text}");

    // The response arrives after the caller gave up; the next call must skip it.
    let (_, responder) = fx.deferred.recv_timeout(CALL).unwrap();
    responder.send(RemotingCommand::response(response_code::SUCCESS, Some("late"))).unwrap();
    let resp = echo(&client, "fresh");
    assert_eq!(resp.ext("echo"), Some("fresh"));
    assert_eq!(resp.remark, None);
}

#[test]
fn client_is_shared_by_threads() {
    let fx = start();
    let client = Arc::new(client(&fx.server));
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                for i in 0..50 {
                    let v = format!("{t}-{i}");
                    let resp = echo(&client, &v);
                    assert_eq!(resp.ext("echo"), Some(v.as_str()));
                    assert_eq!(resp.body, v.as_bytes());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn large_body_round_trips() {
    let fx = start();
    let client = client(&fx.server);
    let body: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let resp = client.invoke_sync(RemotingCommand::request(ECHO).with_body(body.clone()), CALL).unwrap();
    assert_eq!(resp.body, body);
}

#[test]
fn two_listeners_share_the_handler() {
    let fx = start_with(&[localhost(), localhost()], ServerConfig::default());
    let addrs = fx.server.local_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert_ne!(addrs[0].port(), 0);
    assert_ne!(addrs[0], addrs[1]);
    for addr in addrs {
        let client = RemotingClient::new(addr.to_string(), ClientConfig::default());
        let resp = client.invoke_sync(RemotingCommand::request(WHERE), CALL).unwrap();
        assert_eq!(resp.ext("local"), Some(addr.to_string().as_str()));
    }
}

#[test]
fn connect_failure_names_the_address() {
    let port = {
        let probe = std::net::TcpListener::bind(localhost()).unwrap();
        probe.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let client = RemotingClient::new(addr.clone(), ClientConfig::default());
    let err = client.invoke_sync(RemotingCommand::request(ECHO), CALL).unwrap_err();
    assert!(matches!(err, RemotingError::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&addr), "{err}");
    // Refused at once: not worded as a timeout.
    assert!(!err.to_string().contains("within"), "{err}");
    assert!(RemotingClient::connect(addr.clone(), ClientConfig::default()).is_err());
    // A timeout reads as seconds with one decimal, not as a raw Duration (2.999997438s).
    let timed_out = RemotingError::Connect {
        addr,
        timeout: Duration::from_nanos(2_999_997_438),
        source: std::io::Error::from(std::io::ErrorKind::TimedOut),
    };
    assert!(regex_free_seconds(&timed_out.to_string()), "{timed_out}");
    assert!(timed_out.to_string().contains("within 3.0 s"), "{timed_out}");
}

#[test]
fn client_reconnects_after_the_server_restarts() {
    let fx = start();
    let addr = fx.server.local_addrs()[0];
    let client = RemotingClient::connect(addr.to_string(), ClientConfig::default()).unwrap();
    assert_eq!(echo(&client, "one").ext("echo"), Some("one"));
    drop(fx);

    // Nothing listens now: the call fails, naming the address.
    let err = client.invoke_sync(RemotingCommand::request(ECHO), CALL).unwrap_err();
    assert!(err.to_string().contains(&addr.to_string()), "{err}");

    let _again = start_with(&[addr], ServerConfig::default());
    assert_eq!(echo(&client, "two").ext("echo"), Some("two"));
}

#[test]
fn client_reconnects_after_an_idle_close() {
    let config = ServerConfig { idle_timeout: Duration::from_millis(200), ..ServerConfig::default() };
    let fx = start_with(&[localhost()], config);
    let client = client(&fx.server);
    assert_eq!(echo(&client, "before").ext("echo"), Some("before"));
    assert!(wait_until(CALL, || fx.server.connection_count() == 1));
    assert!(wait_until(CALL, || fx.server.connection_count() == 0));
    assert_eq!(echo(&client, "after").ext("echo"), Some("after"));
}

#[test]
fn deferred_response_after_shutdown_is_an_error() {
    let fx = start();
    let client = Arc::new(client(&fx.server));
    let call = {
        let client = Arc::clone(&client);
        thread::spawn(move || client.invoke_sync(RemotingCommand::request(DEFER), CALL))
    };
    let (_, responder) = fx.deferred.recv_timeout(CALL).unwrap();
    fx.server.shutdown();
    assert!(!responder.is_connected());
    let err = responder.send(RemotingCommand::response(response_code::SUCCESS, None)).unwrap_err();
    assert!(matches!(err, RemotingError::ResponderClosed { .. }), "{err}");
    let err = call.join().unwrap().unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. } | RemotingError::Io { .. }), "{err}");
}

#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn shutdown_closes_connections_and_joins_threads() {
    let config = ServerConfig { thread_name: "rt-shut".to_owned(), ..ServerConfig::default() };
    let fx = start_with(&[localhost(), localhost()], config);
    let clients: Vec<_> = (0..3).map(|_| client(&fx.server)).collect();
    for c in &clients {
        echo(c, "x");
    }
    assert!(wait_until(CALL, || fx.server.connection_count() == 3));
    // A thread takes its name when it first runs: under load the second acceptor (no client
    // uses its port) may not have run yet, and is listed under its parent's name meanwhile.
    #[cfg(target_os = "linux")]
    assert!(
        wait_until(Duration::from_secs(5), || threads_named("rt-shut-") == 2 + 3),
        "2 acceptors + 3 connections: {} named",
        threads_named("rt-shut-")
    );

    let started = Instant::now();
    fx.server.shutdown();
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    assert_eq!(fx.server.connection_count(), 0);
    // A joined thread may still be listed for a moment: join returns once the thread clears
    // its tid, a little before the kernel removes the task from /proc/self/task.
    #[cfg(target_os = "linux")]
    assert!(
        wait_until(Duration::from_secs(5), || threads_named("rt-shut-") == 0),
        "every thread joined: {} left",
        threads_named("rt-shut-")
    );

    for c in &clients {
        assert!(c.invoke_sync(RemotingCommand::request(ECHO), CALL).is_err());
    }
    fx.server.shutdown(); // idempotent
}

#[test]
fn shutdown_from_inside_a_handler_does_not_deadlock() {
    let slot: Arc<std::sync::OnceLock<Arc<RemotingServer>>> = Arc::default();
    let handler_slot = Arc::clone(&slot);
    let server = Arc::new(
        RemotingServer::bind(
            &[localhost()],
            Arc::new(move |req: RemotingCommand, _: &RequestContext| {
                if let Some(server) = handler_slot.get() {
                    server.shutdown();
                }
                Handled::Respond(RemotingCommand::response_to(&req, 0, None))
            }),
            ServerConfig::default(),
        )
        .unwrap(),
    );
    slot.set(Arc::clone(&server)).unwrap();
    let client = client(&server);
    // The response may or may not make it out before the socket is shut; either is fine.
    let _ = client.invoke_sync(RemotingCommand::request(ECHO), CALL);
    assert_eq!(server.connection_count(), 0);
}

/// Whether `text` says "within N.N s".
fn regex_free_seconds(text: &str) -> bool {
    text.split("within ").nth(1).and_then(|rest| rest.split(" s").next()).is_some_and(|n| {
        n.split_once('.')
            .is_some_and(|(a, b)| !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.len() == 1)
    })
}
