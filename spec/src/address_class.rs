//! Which addresses are public. A request the control plane makes on a
//! tenant's behalf must not reach the control plane's own host or network:
//! every address of a special-use block (RFC 6890 and its IPv6 twins) is
//! named here by what a person would call it, so a refusal can say why.
//! IPv6 forms that carry an IPv4 address (mapped, 6to4, NAT64) are judged by
//! the IPv4 address they lead to.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 special-use blocks: (network, prefix length, what it is).
const V4_BLOCKS: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "unspecified"),
    ([10, 0, 0, 0], 8, "private"),
    ([100, 64, 0, 0], 10, "shared (carrier-grade NAT)"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "reserved"),
    ([192, 0, 2, 0], 24, "documentation"),
    ([192, 88, 99, 0], 24, "reserved"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "reserved"),
    ([198, 51, 100, 0], 24, "documentation"),
    ([203, 0, 113, 0], 24, "documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
];

/// IPv6 special-use blocks not handled through an embedded IPv4 address.
const V6_BLOCKS: &[(u128, u8, &str)] = &[
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    // IPv4-compatible (deprecated): never a real peer.
    (0, 96, "reserved"),
    (0x0100_0000_0000_0000_0000_0000_0000_0000, 64, "reserved"),
    (0x0064_ff9b_0001_0000_0000_0000_0000_0000, 48, "private"),
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 23, "reserved"),
    (
        0x2001_0db8_0000_0000_0000_0000_0000_0000,
        32,
        "documentation",
    ),
    (
        0xfc00_0000_0000_0000_0000_0000_0000_0000,
        7,
        "private (unique local)",
    ),
    (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10, "link-local"),
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, "site-local"),
    (0xff00_0000_0000_0000_0000_0000_0000_0000, 8, "multicast"),
];

/// What kind of non-public address `ip` is; `None`: a public address.
pub fn special_use(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => v4_class(v4),
            None => v6_class(v6),
        },
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let a = u32::from(ip);
    V4_BLOCKS
        .iter()
        .find(|(net, len, _)| in_v4(a, u32::from_be_bytes(*net), *len))
        .map(|(_, _, what)| *what)
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    let a = u128::from(ip);
    V6_BLOCKS
        .iter()
        .find(|(net, len, _)| in_v6(a, *net, *len))
        .map(|(_, _, what)| *what)
}

/// The IPv4 address an IPv6 address leads to: mapped (`::ffff:a.b.c.d`),
/// NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let a = u128::from(ip);
    let low32 = Ipv4Addr::from(a as u32);
    if in_v6(a, 0xffff_0000_0000, 96) || in_v6(a, 0x0064_ff9b << 96, 96) {
        return Some(low32);
    }
    if in_v6(a, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from((a >> 80) as u32));
    }
    None
}

/// Whether `a` lies in `net/len` (IPv4).
pub fn in_v4(a: u32, net: u32, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    };
    a & mask == net & mask
}

/// Whether `a` lies in `net/len` (IPv6).
pub fn in_v6(a: u128, net: u128, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    };
    a & mask == net & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row: an address and what it is (`None`: public).
    #[test]
    fn every_special_use_block_is_named_and_public_addresses_are_not() {
        let rows: &[(&str, Option<&str>)] = &[
            ("127.0.0.1", Some("loopback")),
            ("127.255.255.254", Some("loopback")),
            ("0.0.0.0", Some("unspecified")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("link-local")),
            ("100.64.0.1", Some("shared (carrier-grade NAT)")),
            ("224.0.0.1", Some("multicast")),
            ("255.255.255.255", Some("reserved")),
            ("198.51.100.7", Some("documentation")),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            ("::", Some("unspecified")),
            ("::1", Some("loopback")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:10.0.0.1", Some("private")),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::7f00:1", Some("loopback")),
            ("2002:7f00:1::", Some("loopback")),
            ("2002:0808:0808::", None),
            ("fc00::1", Some("private (unique local)")),
            ("fd12:3456::1", Some("private (unique local)")),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("ff02::1", Some("multicast")),
            ("2001:db8::1", Some("documentation")),
            ("2606:4700:4700::1111", None),
        ];
        for (addr, want) in rows {
            let ip: IpAddr = addr.parse().unwrap();
            assert_eq!(special_use(ip), *want, "{addr}");
        }
    }
}
