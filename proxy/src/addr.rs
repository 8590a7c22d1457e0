//! Address ranges the proxy never dials for a name it resolved itself (no DNS rebinding into
//! the host, its networks or special-purpose ranges).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The special range `ip` falls in, or `None` for an ordinary global unicast address.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "this network / unspecified"),
        ([10, 0, 0, 0], 8, "private"),
        ([100, 64, 0, 0], 10, "carrier-grade NAT"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([169, 254, 0, 0], 16, "link-local"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 0, 0, 0], 24, "IETF protocol assignments"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([192, 31, 196, 0], 24, "AS112"),
        ([192, 52, 193, 0], 24, "AMT"),
        ([192, 88, 99, 0], 24, "6to4 relay anycast"),
        ([192, 168, 0, 0], 16, "private"),
        ([192, 175, 48, 0], 24, "AS112"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([240, 0, 0, 0], 4, "reserved / broadcast"),
    ];
    RANGES
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|r| r.2)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // IPv4-mapped: judge the embedded address, and refuse it anyway when special.
    if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96) {
        let o = ip.octets();
        let v4 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
        return special_v4(v4).map(|_| "IPv4-mapped special address");
    }
    const RANGES: &[([u16; 8], u32, &str)] = &[
        ([0, 0, 0, 0, 0, 0, 0, 0], 96, "IPv4-compatible (deprecated)"),
        ([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, "IPv4-translated"),
        ([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, "NAT64"),
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use NAT64"),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            23,
            "IETF protocol assignments / Teredo",
        ),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
        ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4"),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
        ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "SRv6 SIDs"),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local"),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (deprecated)"),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
    ];
    RANGES
        .iter()
        .find(|(net, bits, _)| in_v6(ip, *net, *bits))
        .map(|r| r.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn special(s: &str) -> bool {
        special_range(s.parse().unwrap()).is_some()
    }

    #[test]
    fn ranges() {
        for s in [
            "127.0.0.1",
            "127.77.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.9",
            "198.18.0.1",
            "198.19.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
            "::127.0.0.1",
            "2002:7f00:1::",
            "2001::1",
        ] {
            assert!(special(s), "{s} should be special");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "198.20.0.1",
        ] {
            assert!(!special(s), "{s} should be ordinary");
        }
    }
}
