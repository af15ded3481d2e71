//! Garbage on the remoting port closes that connection only: garbage bytes, a truncated
//! frame, a frame declaring 2 GiB, a negative length, an undecodable header, a peer that
//! idles mid-frame, and connections beyond the limit. Meanwhile a well-behaved client on
//! another connection keeps being served, and each closing is logged naming peer and reason.

mod peer_common;

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rmqha_core::remoting::{
    ClientConfig, Handled, RemotingClient, RemotingCommand, RemotingServer, RequestContext, ServerConfig,
    response_code,
};

use peer_common::{closed_by_server, logged_lines_with, logs};

const CALL: Duration = Duration::from_secs(5);

fn start(config: ServerConfig) -> RemotingServer {
    logs();
    let handler = |req: RemotingCommand, _: &RequestContext| {
        Handled::Respond(
            RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(req.body.clone()),
        )
    };
    RemotingServer::bind(&["127.0.0.1:0".parse().unwrap()], Arc::new(handler), config).unwrap()
}

fn addr(server: &RemotingServer) -> SocketAddr {
    server.local_addrs()[0]
}

fn good_client(server: &RemotingServer) -> RemotingClient {
    let client = RemotingClient::connect(addr(server).to_string(), ClientConfig::default()).unwrap();
    assert_works(&client);
    client
}

fn assert_works(client: &RemotingClient) {
    let resp = client.invoke_sync(RemotingCommand::request(9001).with_body(b"ping".to_vec()), CALL).unwrap();
    assert_eq!(resp.body, b"ping");
}

/// Connects a raw socket, writes `bytes`, and returns it with the peer address the server
/// sees.
fn raw_peer(server: &RemotingServer, bytes: &[u8]) -> (TcpStream, SocketAddr) {
    let mut stream = TcpStream::connect(addr(server)).unwrap();
    stream.write_all(bytes).unwrap();
    let local = stream.local_addr().unwrap();
    (stream, local)
}

fn wait_for_log(needle: &str) -> String {
    let deadline = Instant::now() + CALL;
    loop {
        if let Some(line) = logged_lines_with(&[needle]).into_iter().next() {
            return line;
        }
        assert!(Instant::now() < deadline, "no log line containing {needle:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn frame_prefix(length: i32, header_len_and_type: u32) -> Vec<u8> {
    let mut v = length.to_be_bytes().to_vec();
    v.extend_from_slice(&header_len_and_type.to_be_bytes());
    v
}

#[test]
fn garbage_bytes_close_only_that_connection() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    let (mut bad, bad_addr) = raw_peer(&server, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    // "GET " read as a big-endian length is 1195725856.
    assert!(line.contains("frame length 1195725856"), "{line}");
    assert!(line.contains("WARN"), "{line}");
    assert_works(&good);
}

#[test]
fn two_gib_length_is_refused_before_allocating() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    let (mut bad, bad_addr) = raw_peer(&server, &frame_prefix(i32::MAX, 0));
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    assert!(
        line.contains("frame length 2147483647") && line.contains("maximum frame size 16777216"),
        "{line}"
    );
    assert_works(&good);
}

#[test]
fn negative_length_closes_the_connection() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    let (mut bad, bad_addr) = raw_peer(&server, &frame_prefix(-1, 0));
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    assert!(line.contains("invalid frame length -1"), "{line}");
    assert_works(&good);
}

#[test]
fn truncated_frame_closes_the_connection() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    // Declares 100 bytes, sends 10, then half-closes.
    let mut bytes = frame_prefix(100, 20);
    bytes.extend_from_slice(b"{\"code\":1");
    let (mut bad, bad_addr) = raw_peer(&server, &bytes);
    bad.shutdown(Shutdown::Write).unwrap();
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    assert!(line.contains("truncated frame"), "{line}");
    assert_works(&good);
}

#[test]
fn undecodable_header_closes_the_connection() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    let mut bytes = frame_prefix(4 + 5, 5);
    bytes.extend_from_slice(b"nope!");
    let (mut bad, bad_addr) = raw_peer(&server, &bytes);
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    assert!(line.contains("malformed JSON header"), "{line}");
    assert_works(&good);
}

#[test]
fn header_longer_than_frame_closes_the_connection() {
    let server = start(ServerConfig::default());
    let good = good_client(&server);
    let (mut bad, bad_addr) = raw_peer(&server, &frame_prefix(8, 0x0100_0010));
    assert!(closed_by_server(&mut bad, CALL));
    let line = wait_for_log(&bad_addr.to_string());
    assert!(line.contains("header length 16 exceeds frame length 8"), "{line}");
    assert_works(&good);
}

#[test]
fn frame_above_configured_maximum_closes_the_connection() {
    let server = start(ServerConfig { max_frame: 1024, ..ServerConfig::default() });
    let client = RemotingClient::new(addr(&server).to_string(), ClientConfig::default());
    let err = client.invoke_sync(RemotingCommand::request(1).with_body(vec![0u8; 2048]), CALL).unwrap_err();
    assert!(!matches!(err, rmqha_core::remoting::RemotingError::Timeout { .. }), "{err}");
    // The same client reconnects and is served with a frame that fits.
    let resp = client.invoke_sync(RemotingCommand::request(1).with_body(vec![1u8; 100]), CALL).unwrap();
    assert_eq!(resp.body.len(), 100);
}

#[test]
fn peer_idling_mid_frame_is_closed_by_the_idle_timeout() {
    let server = start(ServerConfig { idle_timeout: Duration::from_millis(300), ..ServerConfig::default() });
    let (mut bad, bad_addr) = raw_peer(&server, &frame_prefix(100, 20));
    let started = Instant::now();
    assert!(closed_by_server(&mut bad, CALL));
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    let line = wait_for_log(&format!("peer={bad_addr}"));
    assert!(line.contains("idle"), "{line}");
}

/// Idle connections cannot lock clients out: at the limit, a new connection takes the place of
/// the one idle the longest (here, one that never sent a frame), once it has been idle long
/// enough; active ones stay.
#[test]
fn at_the_limit_a_new_connection_replaces_the_one_idle_the_longest() {
    let evict_after = Duration::from_millis(200);
    let server =
        start(ServerConfig { max_connections: 2, evict_idle_after: evict_after, ..ServerConfig::default() });
    let (mut idle, idle_addr) = raw_peer(&server, b"");
    let busy = good_client(&server);
    assert_eq!(server.connection_count(), 2);
    // Keep `busy` active while `idle` ages past the threshold.
    let aged = Instant::now() + evict_after + Duration::from_millis(100);
    while Instant::now() < aged {
        assert_works(&busy);
        thread::sleep(Duration::from_millis(20));
    }
    let newcomer = good_client(&server);
    assert_works(&newcomer);
    assert!(closed_by_server(&mut idle, CALL), "the idle connection was kept");
    assert_works(&busy);
    assert_eq!(server.connection_count(), 2);
    let line = wait_for_log(&format!("peer={idle_addr}"));
    assert!(line.contains("idle the longest"), "{line}");
}

/// A connection owed an answer (a SYNC_MASTER put waiting for its slave, a long-polled pull)
/// is never closed to make room, however long ago its request came: its client would never
/// get the answer, and would send a stored message again. Once answered, it may go.
#[test]
fn a_connection_owed_an_answer_is_not_evicted() {
    logs();
    let held: Arc<std::sync::Mutex<Option<rmqha_core::remoting::Responder>>> = Arc::default();
    let keep = Arc::clone(&held);
    let handler = move |req: RemotingCommand, ctx: &RequestContext| {
        if req.code == 9002 {
            *keep.lock().unwrap() = Some(ctx.responder());
            return Handled::Deferred;
        }
        Handled::Respond(
            RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(req.body.clone()),
        )
    };
    let evict_after = Duration::from_millis(100);
    let server = RemotingServer::bind(
        &["127.0.0.1:0".parse().unwrap()],
        Arc::new(handler),
        ServerConfig { max_connections: 1, evict_idle_after: evict_after, ..ServerConfig::default() },
    )
    .unwrap();
    let waiting = RemotingClient::connect(addr(&server).to_string(), ClientConfig::default()).unwrap();
    let call = thread::spawn(move || {
        let r = waiting.invoke_sync(RemotingCommand::request(9002).with_body(b"late".to_vec()), CALL * 2);
        (waiting, r)
    });
    let deadline = Instant::now() + CALL;
    while held.lock().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the request never reached the handler");
        thread::sleep(Duration::from_millis(5));
    }
    // Its connection ages past the threshold while its answer is owed.
    let aged = Instant::now() + evict_after * 3;
    while Instant::now() < aged {
        thread::sleep(Duration::from_millis(20));
    }
    let (mut newcomer, _) = raw_peer(&server, b"");
    assert!(closed_by_server(&mut newcomer, CALL), "the newcomer took the owed connection's place");
    let responder = held.lock().unwrap().take().unwrap();
    let req = RemotingCommand::request(9002);
    responder
        .send(RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(b"done".to_vec()))
        .unwrap();
    drop(responder);
    let (_waiting, r) = call.join().unwrap();
    assert_eq!(r.unwrap().body, b"done", "the answer reached its client");
    // Answered, idle: now it may make room.
    let aged = Instant::now() + evict_after * 2;
    while Instant::now() < aged {
        thread::sleep(Duration::from_millis(20));
    }
    let later = good_client(&server);
    assert_works(&later);
}

#[test]
fn connections_beyond_the_limit_are_closed() {
    let server = start(ServerConfig { max_connections: 2, ..ServerConfig::default() });
    let first = good_client(&server);
    let second = good_client(&server);
    assert_eq!(server.connection_count(), 2);

    let (mut third, _) = raw_peer(&server, b"");
    assert!(closed_by_server(&mut third, CALL));
    assert_works(&first);

    second.close();
    let deadline = Instant::now() + CALL;
    while server.connection_count() > 1 {
        assert!(Instant::now() < deadline, "closed connection still counted");
        thread::sleep(Duration::from_millis(5));
    }
    let fourth = good_client(&server);
    assert_works(&fourth);
}

/// A caller's timeout of any size is honoured, not a panic: `Instant + Duration::MAX`
/// overflows (`rmqha put --timeout 1e19` panicked there).
#[test]
fn a_huge_timeout_is_no_panic() {
    let server = start(ServerConfig::default());
    let client = RemotingClient::connect(addr(&server).to_string(), ClientConfig::default()).unwrap();
    let resp = client
        .invoke_sync(RemotingCommand::request(9001).with_body(b"ping".to_vec()), Duration::MAX)
        .unwrap();
    assert_eq!(resp.body, b"ping");
}
