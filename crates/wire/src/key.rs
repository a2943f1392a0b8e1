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
///
/// The fields lie in the order written (`repr(C)`, 44 bytes, no padding),
/// so that [`FlowKey::side_of`] compares the ports, VLAN, protocol,
/// version and tunnel id as two words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
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
    /// Tunnel identifier (the VNI of VXLAN, VXLAN-GPE and Geneve), 0 otherwise.
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

    /// Which side of the flow `self` names a packet whose key is `packet`
    /// comes from: `Some(false)` when the keys are equal, `Some(true)` when
    /// `packet` is this key reversed, `None` when it is another flow's.
    /// The same answers as `==` against the key and against
    /// [`FlowKey::reversed`], without building the reversed key: a flow
    /// table asks it on every packet.
    #[inline]
    pub fn side_of(&self, packet: &FlowKey) -> Option<bool> {
        if self.same(packet) {
            Some(false)
        } else if self.turned(packet) {
            Some(true)
        } else {
            None
        }
    }

    /// `==` in three blocks: the addresses, 16 bytes each, compared
    /// without a branch between them, and the rest (the fields after
    /// them, in the order laid out) as one chain, which the compiler
    /// reads as one word and one half-word.
    #[inline]
    fn same(&self, other: &FlowKey) -> bool {
        let rest = self.src_port == other.src_port
            && self.dst_port == other.dst_port
            && self.vlan == other.vlan
            && self.proto == other.proto
            && self.version == other.version
            && self.tunnel_id == other.tunnel_id;
        (self.src == other.src) & (self.dst == other.dst) & rest
    }

    /// `other` is this key reversed. Out of line: inlined beside
    /// [`FlowKey::same`], the compiler interleaved the two and lost the
    /// block comparisons of both.
    #[inline(never)]
    fn turned(&self, other: &FlowKey) -> bool {
        self.src == other.dst
            && self.dst == other.src
            && self.src_port == other.dst_port
            && self.dst_port == other.src_port
            && self.vlan == other.vlan
            && self.proto == other.proto
            && self.version == other.version
            && self.tunnel_id == other.tunnel_id
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

/// An address as `Display` writes it, spelled by hand into a buffer of its
/// own: through the formatting machinery an IPv4 address was a tenth of
/// the time of a flow abstractor event stream and a good share of a JSON
/// record's, and an IPv6 address cost some 2,000 instructions.
pub struct IpText {
    bytes: [u8; 39],
    len: u8,
}

impl IpText {
    pub fn of(ip: IpAddr) -> IpText {
        let mut bytes = [0u8; 39];
        let len = match ip {
            IpAddr::V4(v4) => write_v4(&mut bytes, 0, v4),
            IpAddr::V6(v6) => write_v6(&mut bytes, v6),
        };
        IpText { bytes, len: len as u8 }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("digits, dots and colons")
    }
}

/// Writes `v4` at `at`, returns where it ends.
fn write_v4(text: &mut [u8; 39], mut at: usize, v4: Ipv4Addr) -> usize {
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            text[at] = b'.';
            at += 1;
        }
        if octet >= 100 {
            text[at] = b'0' + octet / 100;
            at += 1;
        }
        if octet >= 10 {
            text[at] = b'0' + octet / 10 % 10;
            at += 1;
        }
        text[at] = b'0' + octet % 10;
        at += 1;
    }
    at
}

/// RFC 5952's form, as `Display` writes it: lowercase hexadecimal groups
/// without leading zeros, the first longest run of two or more zero groups
/// as `::`, and an IPv4-mapped address as `::ffff:` and its IPv4 form.
fn write_v6(text: &mut [u8; 39], v6: Ipv6Addr) -> usize {
    if let Some(v4) = v6.to_ipv4_mapped() {
        text[..7].copy_from_slice(b"::ffff:");
        return write_v4(text, 7, v4);
    }
    let groups = v6.segments();
    let (mut zeros, mut run) = ((0, 0), (0, 0));
    for (i, &group) in groups.iter().enumerate() {
        run = match group {
            0 if run.1 == 0 => (i, 1),
            0 => (run.0, run.1 + 1),
            _ => (0, 0),
        };
        if run.1 > zeros.1 {
            zeros = run;
        }
    }
    let (skip_from, skip_to) = if zeros.1 > 1 {
        (zeros.0, zeros.0 + zeros.1)
    } else {
        (8, 8)
    };
    let mut at = 0;
    for (i, &group) in groups.iter().enumerate() {
        if (skip_from..skip_to).contains(&i) {
            if i == skip_from {
                text[at..at + 2].copy_from_slice(b"::");
                at += 2;
            }
            continue;
        }
        if i > 0 && i != skip_to {
            text[at] = b':';
            at += 1;
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digits = (16 - group.leading_zeros() as usize).div_ceil(4).max(1);
        for d in (0..digits).rev() {
            text[at] = HEX[(group >> (4 * d) & 0xf) as usize];
            at += 1;
        }
    }
    at
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
    fn ip_text_is_display() {
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
            assert_eq!(IpText::of(ip).as_str(), ip.to_string());
        }
    }

    /// Every pattern of zero and non-zero groups, with groups of every
    /// width, IPv4-mapped and -compatible addresses, and pseudo-random
    /// ones: written as `Display` writes them.
    #[test]
    fn ipv6_is_written_as_display_writes_it() {
        let mut addresses = Vec::new();
        for mask in 0..=255u32 {
            for value in [1u16, 0xa, 0xab, 0x1000, 0xffff, 0x0f0f] {
                let groups: [u16; 8] = std::array::from_fn(|i| if mask >> i & 1 == 1 { value } else { 0 });
                addresses.push(Ipv6Addr::from(groups));
            }
        }
        addresses.push(Ipv4Addr::new(1, 2, 3, 4).to_ipv6_mapped());
        addresses.push(Ipv4Addr::new(0, 0, 0, 0).to_ipv6_mapped());
        addresses.push(Ipv4Addr::new(1, 2, 3, 4).to_ipv6_compatible());
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let bits = u128::from(state) << 64 | u128::from(state.rotate_left(17) ^ 0x55);
            // Zero some groups, so that runs of zeros of every length occur.
            let zeroed: u128 = (0..8)
                .filter(|i| state >> (i + 40) & 1 == 1)
                .map(|i| 0xffffu128 << (16 * i))
                .sum();
            addresses.push(Ipv6Addr::from(bits & !zeroed));
        }
        for v6 in addresses {
            let text = IpText::of(IpAddr::V6(v6));
            assert_eq!(text.as_str(), v6.to_string(), "{:x?}", v6.segments());
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

    /// `side_of` answers as `==` against the key and its reverse, over
    /// keys that differ from each other in every field, one at a time.
    #[test]
    fn side_of_is_equality_with_the_key_or_its_reverse() {
        let base = key(1, 1234, 2, 80);
        let mut keys = vec![base, base.reversed(), key(1, 1234, 1, 1234), key(2, 80, 2, 80)];
        for k in [base, key(1, 80, 2, 80), key(1, 1234, 1, 1234)] {
            let mut six = FlowKey {
                version: IpVersion::V6,
                ..k
            };
            six.src[15] = 9;
            let mut far = k;
            far.dst[12] = 7;
            keys.extend([
                k,
                FlowKey {
                    src_port: k.src_port ^ 0x100,
                    ..k
                },
                FlowKey {
                    dst_port: k.dst_port.wrapping_add(1),
                    ..k
                },
                FlowKey { vlan: 7, ..k },
                FlowKey { proto: 17, ..k },
                FlowKey {
                    tunnel_id: 1 << 20,
                    ..k
                },
                FlowKey { tunnel_id: 5, ..k },
                six,
                FlowKey {
                    version: IpVersion::V6,
                    ..k
                },
                far,
            ]);
        }
        let reversed: Vec<FlowKey> = keys.iter().map(FlowKey::reversed).collect();
        keys.extend(reversed);
        for a in &keys {
            for b in &keys {
                let expected = if a == b {
                    Some(false)
                } else if *a == b.reversed() {
                    Some(true)
                } else {
                    None
                };
                assert_eq!(a.side_of(b), expected, "{a:?} {b:?}");
            }
        }
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
