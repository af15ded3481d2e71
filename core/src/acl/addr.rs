//! Remote-address patterns of `plain_acl.yml` (`globalWhiteRemoteAddresses`, an account's
//! `whiteRemoteAddress`), with RocketMQ 4.9's `RemoteAddressStrategyFactory` forms.

use std::net::IpAddr;

/// One address pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddrPattern {
    /// Blank: matches nothing (RocketMQ's `BlankRemoteAddressStrategy`).
    Never,
    /// `*`, `*.*.*.*` or `*:*:*:*:*:*:*:*`: matches every address.
    Any,
    /// One address, a `,`-separated list, or `a.b.c.{x,y}`.
    Set(Vec<IpAddr>),
    /// `a.*.*.*`, `a.b.*.*`, `a.b.c.*`, or `x-y` in place of the first `*`: the octets before
    /// `index` equal `head`, octet `index` is within `start..=end`.
    Range { head: Vec<u8>, index: usize, start: u8, end: u8 },
    /// The IPv6 form: `1050::5:600:300c:1-200` (hexadecimal), `1050::5:600:300c:*`,
    /// `1050:5:600:300c:3261:*` (fewer than eight groups without `::`: the groups after the
    /// last one written match anything): the groups before `index` equal `head`, group `index`
    /// is within `start..=end`.
    Range6 { head: Vec<u16>, index: usize, start: u16, end: u16 },
}

impl AddrPattern {
    /// Parses `text` as RocketMQ 4.9 does, refusing what RocketMQ would refuse and, stricter,
    /// octets after the range that are not `*` (RocketMQ silently ignores them).
    pub(crate) fn parse(text: &str) -> Result<AddrPattern, String> {
        let t = text.trim();
        if t.is_empty() {
            return Ok(AddrPattern::Never);
        }
        if t == "*" || t == "*.*.*.*" || t == "*:*:*:*:*:*:*:*" {
            return Ok(AddrPattern::Any);
        }
        if t.ends_with('}') {
            let open = t.find('{').ok_or_else(|| format!("{t:?}: a '}}' without '{{'"))?;
            let prefix = &t[..open];
            if !(prefix.ends_with('.') || prefix.ends_with(':')) {
                return Err(format!("{t:?}: the {{...}} list must be the last part of the address"));
            }
            let items = &t[open + 1..t.len() - 1];
            let addrs = items
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|last| parse_ip(&format!("{prefix}{last}"), t))
                .collect::<Result<Vec<_>, _>>()?;
            if addrs.is_empty() {
                return Err(format!("{t:?}: the {{...}} list is empty"));
            }
            return Ok(AddrPattern::Set(addrs));
        }
        if t.contains(',') {
            let addrs = t
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|a| parse_ip(a, t))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(AddrPattern::Set(addrs));
        }
        if t.contains('*') || t.contains('-') {
            return parse_range(t);
        }
        Ok(AddrPattern::Set(vec![parse_ip(t, t)?]))
    }

    /// Whether `ip` matches.
    pub(crate) fn matches(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match self {
            AddrPattern::Never => false,
            AddrPattern::Any => true,
            AddrPattern::Set(set) => set.iter().any(|a| canonical(*a) == ip),
            AddrPattern::Range { head, index, start, end } => match ip {
                IpAddr::V4(v4) => {
                    let o = v4.octets();
                    o[..*index] == head[..] && (*start..=*end).contains(&o[*index])
                }
                IpAddr::V6(_) => false,
            },
            AddrPattern::Range6 { head, index, start, end } => match ip {
                IpAddr::V6(v6) => {
                    let g = v6.segments();
                    g[..*index] == head[..] && (*start..=*end).contains(&g[*index])
                }
                IpAddr::V4(_) => false,
            },
        }
    }
}

/// An IPv4-mapped IPv6 address (a client of a `[::]` listener) as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn parse_ip(addr: &str, whole: &str) -> Result<IpAddr, String> {
    addr.trim().parse::<IpAddr>().map_err(|_| format!("{whole:?}: {addr:?} is not an IP address"))
}

fn parse_range(t: &str) -> Result<AddrPattern, String> {
    if t.contains(':') {
        return parse_range6(t);
    }
    let parts: Vec<&str> = t.split('.').map(str::trim).collect();
    if parts.len() != 4 {
        return Err(format!("{t:?}: expected four dot-separated parts"));
    }
    let octet = |p: &str| -> Result<u8, String> {
        p.parse::<u8>().map_err(|_| format!("{t:?}: {p:?} is not a number from 0 to 255"))
    };
    let Some(index) = (1..4).find(|&i| parts[i] == "*" || parts[i].contains('-')) else {
        return Err(format!("{t:?}: only the second, third or fourth part may be '*' or a range"));
    };
    let (head, start, end) = head_and_span(t, &parts, index, octet, (0, 255), "100-200")?;
    Ok(AddrPattern::Range { head, index, start, end })
}

/// An IPv6 range, as RocketMQ 4.9's `RangeRemoteAddressStrategy` reads one: groups in
/// hexadecimal, one of them (not the first) `*` or `from-to`, every group after it `*`; a
/// `::` stands for the zero groups that make eight, and without one, fewer than eight groups
/// leave the groups not written free. Stricter than RocketMQ: a group that is not
/// hexadecimal, a second range, or a fixed group after the range is refused, not ignored.
fn parse_range6(t: &str) -> Result<AddrPattern, String> {
    let group = |p: &str| -> Result<u16, String> {
        if p.is_empty() || p.len() > 4 {
            return Err(format!("{t:?}: {p:?} is not a group of 1 to 4 hexadecimal digits"));
        }
        u16::from_str_radix(p, 16)
            .map_err(|_| format!("{t:?}: {p:?} is not a group of 1 to 4 hexadecimal digits"))
    };
    let split = |s: &str| -> Vec<String> {
        if s.is_empty() { Vec::new() } else { s.split(':').map(|p| p.trim().to_string()).collect() }
    };
    let parts: Vec<String> = match t.split_once("::") {
        Some((before, after)) => {
            if after.contains("::") {
                return Err(format!("{t:?}: '::' may appear only once"));
            }
            let (before, after) = (split(before), split(after));
            let Some(zeros) = 8usize.checked_sub(before.len() + after.len()).filter(|&z| z > 0) else {
                return Err(format!("{t:?}: more than eight groups around '::'"));
            };
            before.into_iter().chain(std::iter::repeat_n("0".to_string(), zeros)).chain(after).collect()
        }
        None => split(t),
    };
    if parts.len() > 8 {
        return Err(format!("{t:?}: more than eight groups"));
    }
    let Some(index) = parts.iter().position(|p| p == "*" || p.contains('-')) else {
        return Err(format!("{t:?}: expected a group that is '*' or a range"));
    };
    if index == 0 {
        return Err(format!("{t:?}: the first group may not be '*' or a range"));
    }
    let (head, start, end) = head_and_span(t, &parts, index, group, (0, 0xffff), "1-200 (hexadecimal)")?;
    Ok(AddrPattern::Range6 { head, index, start, end })
}

/// Of a range pattern `t` split into `parts` whose part `index` is `*` or `from-to`: the parts
/// before it (read by `unit`), and the span (`*` is `all`); every part after it must be `*`.
fn head_and_span<T: Copy + PartialOrd>(
    t: &str,
    parts: &[impl AsRef<str>],
    index: usize,
    unit: impl Fn(&str) -> Result<T, String>,
    all: (T, T),
    example: &str,
) -> Result<(Vec<T>, T, T), String> {
    let head = parts[..index].iter().map(|p| unit(p.as_ref())).collect::<Result<Vec<T>, _>>()?;
    let part = parts[index].as_ref();
    let (start, end) = if part == "*" {
        all
    } else {
        let (a, b) = part.split_once('-').unwrap_or(("", ""));
        if a.trim().is_empty() || b.trim().is_empty() {
            return Err(format!("{t:?}: a range is written from-to, such as {example}"));
        }
        let (start, end) = (unit(a.trim())?, unit(b.trim())?);
        if start > end {
            return Err(format!("{t:?}: the range {part} is empty"));
        }
        (start, end)
    };
    if let Some(p) = parts[index + 1..].iter().map(AsRef::as_ref).find(|p| *p != "*") {
        return Err(format!("{t:?}: the parts after a '*' or a range must be '*', not {p:?}"));
    }
    Ok((head, start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn forms_of_rocketmq_4_9() {
        let p = AddrPattern::parse;
        assert_eq!(p("").unwrap(), AddrPattern::Never);
        assert!(!p(" ").unwrap().matches(v4("1.2.3.4")));
        assert!(p("*").unwrap().matches(v4("1.2.3.4")));
        assert!(p("*.*.*.*").unwrap().matches(v4("10.0.0.1")));
        let one = p("192.168.0.1").unwrap();
        assert!(one.matches(v4("192.168.0.1")) && !one.matches(v4("192.168.0.2")));
        let set = p("192.168.0.{100,101}").unwrap();
        assert!(set.matches(v4("192.168.0.100")) && set.matches(v4("192.168.0.101")));
        assert!(!set.matches(v4("192.168.0.102")));
        let list = p("10.0.0.1,10.0.0.2").unwrap();
        assert!(list.matches(v4("10.0.0.2")) && !list.matches(v4("10.0.0.3")));
        let r = p("192.168.1.100-200").unwrap();
        assert!(r.matches(v4("192.168.1.100")) && r.matches(v4("192.168.1.200")));
        assert!(!r.matches(v4("192.168.1.99")) && !r.matches(v4("192.168.2.150")));
        let r = p("192.168.*.*").unwrap();
        assert!(r.matches(v4("192.168.7.9")) && !r.matches(v4("192.169.7.9")));
        let r = p("10.1-3.*.*").unwrap();
        assert!(r.matches(v4("10.2.0.0")) && !r.matches(v4("10.4.0.0")));
        let mapped: IpAddr = "::ffff:192.168.1.150".parse().unwrap();
        assert!(p("192.168.1.100-200").unwrap().matches(mapped));
        assert!(p("::1").unwrap().matches("::1".parse().unwrap()));
    }

    #[test]
    fn ipv6_ranges_as_rocketmq_4_9_reads_them() {
        let p = |s: &str| AddrPattern::parse(s).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The forms of RocketMQ's RemoteAddressStrategyTest; the range is hexadecimal.
        let r = p("1050::0005:0600:300c:1-200");
        assert!(r.matches(ip("1050:0000:0000:0000:0005:0600:300c:0001")));
        assert!(r.matches(ip("1050::5:600:300c:200")) && r.matches(ip("1050::5:600:300c:1ff")));
        assert!(!r.matches(ip("1050::5:600:300c:201")) && !r.matches(ip("1050::5:600:300c:0")));
        assert!(!r.matches(ip("1050::5:600:300d:100")), "a group of the head differs");
        let r = p("1050::0005:0600:300c:*");
        assert!(r.matches(ip("1050::5:600:300c:0")) && r.matches(ip("1050::5:600:300c:ffff")));
        assert!(!r.matches(ip("1050::5:600:3001:1")));
        // Fewer than eight groups without '::': the groups not written are free.
        let r = p("1050:0005:0600:300c:3261:*");
        assert!(r.matches(ip("1050:5:600:300c:3261:1:2:3")) && !r.matches(ip("1050:5:600:300c:3262::1")));
        let r = p("1050::0005:0600:300c:3261:1-20:*");
        assert!(
            r.matches(ip("1050:0:5:600:300c:3261:20:9")) && !r.matches(ip("1050:0:5:600:300c:3261:21:9"))
        );
        let r = p("fe80::*");
        assert!(r.matches(ip("fe80::7")) && !r.matches(ip("fe80::1:7")), "'::' stands for zeros");
        let r = p("fe80:*:*:*:*:*:*:*");
        assert!(r.matches(ip("fe80::1:7")) && !r.matches(ip("fe81::1")));
        // An IPv4 client never matches an IPv6 range, nor an IPv6 client an IPv4 one.
        assert!(!p("0:*").matches(ip("10.0.0.1")));
        assert!(!p("10.*.*.*").matches(ip("::a00:1")));
        let set = p("1050::0005:0600:300c:{1,2,3}");
        assert!(set.matches(ip("1050::5:600:300c:3")) && !set.matches(ip("1050::5:600:300c:4")));
    }

    #[test]
    fn bad_forms_are_refused_naming_the_pattern() {
        for bad in [
            "192.168.0.300",
            "192.168.1.200-100",
            "192.168.1.-5",
            "192.*.1.2",
            "1.2.3",
            "a.b.c.d",
            "*::1",
            "fe80::1:200-100",
            "fe80::1:*:5",
            "fe80::1::*",
            "fe80:1:2:3:4:5:6:7:*",
            "1:2:3:4::5:6:7:*",
            "fe80::12345:*",
            "fe80::g:*",
            "fe80::1:-5",
        ] {
            let e = AddrPattern::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}
