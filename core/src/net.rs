//! Local addresses.

use std::net::{IpAddr, Ipv4Addr};

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
