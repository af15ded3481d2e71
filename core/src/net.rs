//! Local addresses, and name resolution that a slow resolver cannot stretch.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Unblocks a thread sitting in `listener.accept()`, which then sees its stop flag and exits.
/// Shutting the listening socket down fails a blocked `accept()` (EINVAL on Linux) without a
/// new descriptor; a connection to the port, the only way std offers, needs one, and in a
/// process out of descriptors a stop then waited forever. Where the shutdown is refused (not
/// Linux), a connection to `addr` (loopback for a wildcard) remains the way.
pub(crate) fn wake_acceptor(listener: &std::net::TcpListener, addr: SocketAddr) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: shutdown(2) of a socket the caller holds open.
        if unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) } == 0 {
            return;
        }
        tracing::debug!(%addr, error = %io::Error::last_os_error(),
            "cannot shut the listener down; connecting to wake its acceptor");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = listener;
    let target = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    };
    if let Err(e) = std::net::TcpStream::connect_timeout(&target, Duration::from_secs(5)) {
        tracing::warn!(%addr, error = %e, "cannot wake an acceptor; its stop waits for the next connection");
    }
}

/// A non-loopback local address as RocketMQ picks one (`NetworkUtil.getLocalInetAddress`):
/// the first public IPv4, else the last private IPv4, else an IPv6, else 127.0.0.1.
pub fn local_ip() -> IpAddr {
    let mut private_v4 = None;
    let mut v6 = None;
    for ip in interface_addresses() {
        match ip {
            IpAddr::V4(v4) if v4.is_loopback() || v4.is_link_local() || v4.is_unspecified() => {}
            IpAddr::V4(v4) if v4.is_private() => private_v4 = Some(ip),
            IpAddr::V4(_) => return ip,
            IpAddr::V6(a)
                if !a.is_loopback() && !a.is_unspecified() && (a.segments()[0] & 0xffc0) != 0xfe80 =>
            {
                v6.get_or_insert(ip);
            }
            IpAddr::V6(_) => {}
        }
    }
    private_v4.or(v6).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn interface_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    // SAFETY: getifaddrs allocates a list we only read and then free with freeifaddrs; every
    // sockaddr is read according to its family.
    unsafe {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut cur = head;
        while !cur.is_null() {
            let sa = (*cur).ifa_addr;
            if !sa.is_null() {
                match (*sa).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(sa as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(sa as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}

/// Resolves `host:port` to its addresses, giving up after `timeout` or as soon as
/// `cancelled()` holds (checked every 50 ms). An IP literal is parsed at once; a host name is
/// looked up on a short-lived thread, since `getaddrinfo` cannot be interrupted and a
/// resolver that does not answer would otherwise hold the caller for its own timeouts (tens
/// of seconds), and a broker's shutdown with it. A lookup given up on finishes in the
/// background and its answer is dropped.
pub fn resolve(addr: &str, timeout: Duration, cancelled: impl Fn() -> bool) -> io::Result<Vec<SocketAddr>> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    resolve_with(addr, timeout, cancelled, |a| a.to_socket_addrs().map(Iterator::collect))
}

/// Connects to `addr` within `timeout`, giving up within 50 ms once `cancelled` says so: a
/// stop must not wait out the connect timeout of a master whose host drops our SYNs (down,
/// firewalled, or with a full accept queue). `bind` picks the local address.
pub(crate) fn connect(
    addr: SocketAddr,
    timeout: Duration,
    bind: Option<IpAddr>,
    cancelled: impl Fn() -> bool,
) -> io::Result<std::net::TcpStream> {
    use std::os::unix::io::AsRawFd;
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    if let Some(ip) = bind {
        sock.bind(&SocketAddr::new(ip, 0).into())?;
    }
    sock.set_nonblocking(true)?;
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            let deadline = crate::deadline_after(timeout);
            loop {
                if cancelled() {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        format!("stopped while connecting to {addr}"),
                    ));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connecting to {addr} took longer than {timeout:?}"),
                    ));
                }
                let slice = left.min(Duration::from_millis(50)).as_millis().max(1) as libc::c_int;
                let mut pfd = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                // SAFETY: one pollfd for a socket we hold open.
                let n = unsafe { libc::poll(&mut pfd, 1, slice) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                if n > 0 {
                    // Writable: connected, or failed with the error SO_ERROR holds.
                    if let Some(e) = sock.take_error()? {
                        return Err(e);
                    }
                    break;
                }
            }
        }
        Err(e) => return Err(e),
    }
    sock.set_nonblocking(false)?;
    sock.set_tcp_nodelay(true)?;
    Ok(sock.into())
}

fn resolve_with(
    addr: &str,
    timeout: Duration,
    cancelled: impl Fn() -> bool,
    lookup: impl FnOnce(&str) -> io::Result<Vec<SocketAddr>> + Send + 'static,
) -> io::Result<Vec<SocketAddr>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let owned = addr.to_string();
    std::thread::Builder::new().name("rmqha-resolve".into()).spawn(move || {
        let _ = tx.send(lookup(&owned));
    })?;
    let deadline = crate::deadline_after(timeout);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("resolving {addr} took longer than {timeout:?}"),
            ));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(r) => return r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) if cancelled() => {
                return Err(io::Error::new(
                    io::ErrorKind::Interrupted,
                    format!("stopped while resolving {addr}"),
                ));
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other(format!("the lookup of {addr} ended without an answer")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn hung(_: &str) -> io::Result<Vec<SocketAddr>> {
        std::thread::sleep(Duration::from_secs(30));
        Ok(Vec::new())
    }

    #[test]
    fn an_ip_literal_needs_no_lookup() {
        let got = resolve("127.0.0.1:9876", Duration::ZERO, || true).unwrap();
        assert_eq!(got, vec!["127.0.0.1:9876".parse().unwrap()]);
        let got = resolve("[::1]:9876", Duration::ZERO, || true).unwrap();
        assert_eq!(got, vec!["[::1]:9876".parse().unwrap()]);
    }

    #[test]
    fn a_lookup_that_hangs_ends_at_the_timeout() {
        let start = Instant::now();
        let e = resolve_with("master.example:10912", Duration::from_millis(200), || false, hung).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("master.example:10912"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(10), "waited {:?}", start.elapsed());
    }

    #[test]
    fn a_lookup_that_hangs_ends_when_cancelled() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let t = std::thread::spawn(move || {
            resolve_with("master.example:10912", Duration::from_secs(60), || s.load(Ordering::Acquire), hung)
        });
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        stop.store(true, Ordering::Release);
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert!(start.elapsed() < Duration::from_secs(10), "waited {:?}", start.elapsed());
    }

    #[test]
    fn a_lookup_answer_is_passed_on() {
        let want: SocketAddr = "10.0.0.7:10912".parse().unwrap();
        let got =
            resolve_with("master:10912", Duration::from_secs(10), || false, move |_| Ok(vec![want])).unwrap();
        assert_eq!(got, vec![want]);
        let e = resolve_with(
            "master:10912",
            Duration::from_secs(10),
            || false,
            |_| Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
