//! The flow key and the symmetric flow hash.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum IpVersion {
    #[default]
    V4 = 4,
    V6 = 6,
}

/// A flow's identity: addresses, ports, L4 protocol, VLAN and tunnel id.
///
/// IPv4 addresses occupy the first four bytes of the 16-byte fields and the
/// rest is zero, so one fixed-size key serves both versions and compares
/// with plain byte equality. For ICMP and ICMPv6 the ports are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    /// Innermost 802.1Q VLAN id, 0 when untagged.
    pub vlan: u16,
    /// IP protocol number of the transport layer.
    pub proto: u8,
    pub version: IpVersion,
    /// Tunnel identifier (GRE key, VXLAN VNI, GTP-U TEID), 0 outside tunnels.
    pub tunnel_id: u32,
}

impl FlowKey {
    pub fn src_ip(&self) -> IpAddr {
        addr(self.version, &self.src)
    }

    pub fn dst_ip(&self) -> IpAddr {
        addr(self.version, &self.dst)
    }

    /// The same flow seen from the other side.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }

    /// Returns the direction-independent form of the key (lower endpoint
    /// first) and whether this key had to be swapped to get it.
    #[inline]
    pub fn canonical(&self) -> (FlowKey, bool) {
        if (self.src, self.src_port) <= (self.dst, self.dst_port) {
            (*self, false)
        } else {
            (self.reversed(), true)
        }
    }

    /// A 64-bit hash that is equal for both directions of a flow.
    ///
    /// Workers are chosen by this hash and flow tables are indexed by it, so
    /// it is computed once per packet. Each endpoint is mixed on its own and
    /// the two are combined with a commutative add, which makes the hash
    /// symmetric without first ordering the endpoints; a folded 128-bit
    /// multiply (as in wyhash) gives full avalanche at a few cycles per word.
    #[inline]
    pub fn symmetric_hash(&self) -> u64 {
        let a = endpoint_hash(&self.src, self.src_port);
        let b = endpoint_hash(&self.dst, self.dst_port);
        let shared = (self.proto as u64)
            | ((self.version as u64) << 8)
            | ((self.vlan as u64) << 16)
            | ((self.tunnel_id as u64) << 32);
        fold_mul(a.wrapping_add(b) ^ K2, shared ^ K3)
    }
}

const K0: u64 = 0xa076_1d64_78bd_642f;
const K1: u64 = 0xe703_7ed1_a0b4_28db;
const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
const K3: u64 = 0x5899_65cc_7537_4cc3;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let product = (a as u128).wrapping_mul(b as u128);
    (product as u64) ^ ((product >> 64) as u64)
}

#[inline]
fn endpoint_hash(addr: &[u8; 16], port: u16) -> u64 {
    let hi = u64::from_le_bytes(addr[..8].try_into().expect("8 bytes"));
    let lo = u64::from_le_bytes(addr[8..].try_into().expect("8 bytes"));
    fold_mul(fold_mul(hi ^ K0, lo ^ K1) ^ port as u64, K2)
}

fn addr(version: IpVersion, bytes: &[u8; 16]) -> IpAddr {
    match version {
        IpVersion::V4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        IpVersion::V6 => IpAddr::V6(Ipv6Addr::from(*bytes)),
    }
}

/// Writes `ip` as `Display` does. IPv4, which nearly every record and
/// event has two of, is done by hand: through the formatting machinery it
/// was a tenth of the time of a flow abstractor event stream and a good
/// share of a JSON record's. IPv6's shortest form is left to `Display`.
pub fn write_ip(out: &mut impl std::io::Write, ip: IpAddr) -> std::io::Result<()> {
    match ip {
        IpAddr::V4(v4) => {
            let mut text = [0u8; 15];
            let mut len = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[len] = b'.';
                    len += 1;
                }
                if octet >= 100 {
                    text[len] = b'0' + octet / 100;
                    len += 1;
                }
                if octet >= 10 {
                    text[len] = b'0' + octet / 10 % 10;
                    len += 1;
                }
                text[len] = b'0' + octet % 10;
                len += 1;
            }
            out.write_all(&text[..len])
        }
        IpAddr::V6(v6) => write!(out, "{v6}"),
    }
}

/// The name nDPI and Sluice's records use for an IP protocol number, or
/// `None` when the number itself should be printed.
pub fn l4_name(proto: u8) -> Option<&'static str> {
    Some(match proto {
        1 => "ICMP",
        2 => "IGMP",
        6 => "TCP",
        17 => "UDP",
        58 => "ICMPV6",
        132 => "SCTP",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_ip_matches_display() {
        for text in [
            "0.0.0.0",
            "9.10.99.100",
            "255.255.255.255",
            "192.168.1.105",
            "::",
            "2001:db8::1",
            "::ffff:1.2.3.4",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            let mut out = Vec::new();
            write_ip(&mut out, ip).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), ip.to_string());
        }
    }

    fn key(a: u8, ap: u16, b: u8, bp: u16) -> FlowKey {
        let mut k = FlowKey {
            proto: 6,
            src_port: ap,
            dst_port: bp,
            ..FlowKey::default()
        };
        k.src[..4].copy_from_slice(&[10, 0, 0, a]);
        k.dst[..4].copy_from_slice(&[10, 0, 0, b]);
        k
    }

    #[test]
    fn hash_is_symmetric_and_canonical_form_agrees() {
        let k = key(1, 1234, 2, 80);
        let r = k.reversed();
        assert_eq!(k.symmetric_hash(), r.symmetric_hash());
        assert_eq!(k.canonical().0, r.canonical().0);
        assert_ne!(k.canonical().1, r.canonical().1);
    }

    #[test]
    fn hash_separates_ports_vlans_and_tunnels() {
        let k = key(1, 1234, 2, 80);
        assert_ne!(k.symmetric_hash(), key(1, 1235, 2, 80).symmetric_hash());
        assert_ne!(k.symmetric_hash(), FlowKey { vlan: 7, ..k }.symmetric_hash());
        assert_ne!(k.symmetric_hash(), FlowKey { tunnel_id: 9, ..k }.symmetric_hash());
        // Swapping only the ports (not the addresses) is a different flow.
        assert_ne!(k.symmetric_hash(), key(1, 80, 2, 1234).symmetric_hash());
    }

    #[test]
    fn hash_spreads_incrementing_keys_over_workers() {
        let mut buckets = [0u32; 8];
        for i in 0..80_000u32 {
            let mut k = key(0, (i % 60_000) as u16, 1, 80);
            k.src[2] = (i >> 8) as u8;
            k.src[3] = i as u8;
            buckets[(k.symmetric_hash() % 8) as usize] += 1;
        }
        for b in buckets {
            assert!((9_000..11_000).contains(&b), "uneven spread {buckets:?}");
        }
    }
}
