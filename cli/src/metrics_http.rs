//! `rmqha broker --metrics-listen ADDR`: serves `Broker::metrics` at `GET /metrics`, for
//! Prometheus to scrape. HTTP/1.1 with one request per connection; each connection on a thread
//! of its own with 5 s to send its request, at most `MAX_CONNECTIONS` at once (more are
//! closed unanswered), so a slow or garbage client holds up no scrape.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmqha_core::Broker;

const MAX_CONNECTIONS: usize = 16;
const MAX_REQUEST: usize = 8192;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` and serves from a background thread; returns the bound address (port 0 picks
/// one). The thread holds the broker weakly: once it is gone, scrapes get 503.
pub fn serve(addr: SocketAddr, broker: &Arc<Broker>) -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("--metrics-listen {addr}: cannot bind: {e}"))?;
    let bound = listener.local_addr().map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
    let broker = Arc::downgrade(broker);
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("rmqha-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else {
                    // Out of descriptors, say: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
                let (broker, done) = (broker.clone(), open.clone());
                let spawned =
                    std::thread::Builder::new().name("rmqha-metrics-conn".into()).spawn(move || {
                        answer(conn, &broker);
                        done.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(bound)
}

/// Reads one request head and answers it.
fn answer(mut conn: TcpStream, broker: &Weak<Broker>) {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = conn.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_REQUEST {
            return respond(
                &mut conn,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request head too large\n",
            );
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = std::str::from_utf8(line).unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => match broker.upgrade() {
            Some(b) => respond(&mut conn, "200 OK", rmqha_core::metrics::CONTENT_TYPE, &b.metrics()),
            None => respond(&mut conn, "503 Service Unavailable", "text/plain", "the broker has stopped\n"),
        },
        ("GET", _) => respond(&mut conn, "404 Not Found", "text/plain", "metrics are at /metrics\n"),
        _ => respond(&mut conn, "405 Method Not Allowed", "text/plain", "only GET /metrics\n"),
    }
}

fn respond(conn: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(body.as_bytes()));
    // Closing with unread bytes (the rest of a refused request) would reset the connection,
    // and the client could lose the answer: end our side, then read what is left, briefly.
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        if !matches!(conn.read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
}
