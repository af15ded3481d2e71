//! RocketMQ's offset message id: the store host and the physical offset, in hex.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Uppercase hex of `[store host address][store host port: i32][phy offset: i64]`
/// (32 hex digits for IPv4, 56 for IPv6).
pub fn offset_msg_id(store_host: &SocketAddr, phy_offset: i64) -> String {
    let mut raw = [0u8; 28];
    let n = match store_host.ip() {
        IpAddr::V4(ip) => {
            raw[..4].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            raw[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    raw[n..n + 4].copy_from_slice(&(store_host.port() as i32).to_be_bytes());
    raw[n + 4..n + 12].copy_from_slice(&phy_offset.to_be_bytes());
    let mut out = String::with_capacity((n + 12) * 2);
    for b in &raw[..n + 12] {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// The store host and physical offset of an offset message id, or `None` if `id` is not one.
pub fn decode_offset_msg_id(id: &str) -> Option<(SocketAddr, i64)> {
    let bytes = id.as_bytes();
    if bytes.len() != 32 && bytes.len() != 56 {
        return None;
    }
    let mut raw = [0u8; 28];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        raw[i] = (hi * 16 + lo) as u8;
    }
    let n = if bytes.len() == 32 { 4 } else { 16 };
    let ip = if n == 4 {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&raw[..16]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    let port = i32::from_be_bytes(raw[n..n + 4].try_into().ok()?);
    let offset = i64::from_be_bytes(raw[n + 4..n + 12].try_into().ok()?);
    Some((SocketAddr::new(ip, u16::try_from(port).ok()?), offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_id_golden() {
        let host: SocketAddr = "192.168.0.1:10911".parse().unwrap();
        // C0A80001 | 00002A9F | 0000000000001000
        assert_eq!(offset_msg_id(&host, 4096), "C0A8000100002A9F0000000000001000");
        assert_eq!(decode_offset_msg_id("C0A8000100002A9F0000000000001000"), Some((host, 4096)));
        assert_eq!(decode_offset_msg_id("c0a8000100002a9f0000000000001000"), Some((host, 4096)));
    }

    #[test]
    fn ipv6_id_round_trip() {
        let host: SocketAddr = "[::1]:10911".parse().unwrap();
        let id = offset_msg_id(&host, 1 << 40);
        assert_eq!(id.len(), 56);
        assert_eq!(decode_offset_msg_id(&id), Some((host, 1 << 40)));
        assert_eq!(decode_offset_msg_id("XYZ"), None);
        assert_eq!(decode_offset_msg_id(&"G".repeat(32)), None);
    }
}
