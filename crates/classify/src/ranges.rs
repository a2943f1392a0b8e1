//! Address ranges → services, longest prefix first.
//!
//! Prefixes are either nested or disjoint, so the ranges flatten, once, into
//! sorted disjoint intervals, each carrying the service of the most specific
//! prefix that covers it; a lookup is then one binary search over the
//! interval starts. Against two kept crates (`prefix-trie`'s `PrefixMap` and
//! `ip_network_table`, a tree bitmap) on the same prefixes, the search was
//! several times faster per lookup (docs/classification.md has the
//! measurement), and it needs no dependency. Building is a sort and one pass.

use std::net::IpAddr;

/// Disjoint intervals of one address family, by start.
#[derive(Debug, Default)]
struct Intervals {
    starts: Vec<u128>,
    ends: Vec<u128>,
    services: Vec<&'static str>,
}

impl Intervals {
    /// `prefixes` as (first address, last address, service), a later one
    /// replacing an earlier equal prefix.
    fn new(mut prefixes: Vec<(u128, u128, &'static str)>) -> Intervals {
        // Equal prefixes: the last given wins. Then widest first at each
        // start, so that the narrower ones nest inside.
        let mut seen = std::collections::HashMap::new();
        for (i, &(first, last, _)) in prefixes.iter().enumerate() {
            seen.insert((first, last), i);
        }
        let mut kept: Vec<_> = prefixes
            .drain(..)
            .enumerate()
            .filter(|(i, p)| seen[&(p.0, p.1)] == *i)
            .map(|(_, p)| p)
            .collect();
        kept.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = Intervals::default();
        let mut emit = |first: u128, last: u128, service: &'static str| {
            out.starts.push(first);
            out.ends.push(last);
            out.services.push(service);
        };
        // The prefixes open at the cursor, outermost first; `cursor` is the
        // first address not yet given to an interval (`None` past the end).
        let mut open: Vec<(u128, &'static str)> = Vec::new();
        let mut cursor: Option<u128> = Some(0);
        for (first, last, service) in kept {
            while let Some(&(end, outer)) = open.last() {
                if end >= first {
                    break;
                }
                if let Some(c) = cursor.filter(|&c| c <= end) {
                    emit(c, end, outer);
                }
                cursor = end.checked_add(1);
                open.pop();
            }
            if let (Some(&(_, outer)), Some(c)) = (open.last(), cursor)
                && c < first
            {
                emit(c, first - 1, outer);
            }
            cursor = Some(first);
            open.push((last, service));
        }
        while let Some((end, outer)) = open.pop() {
            if let Some(c) = cursor.filter(|&c| c <= end) {
                emit(c, end, outer);
            }
            cursor = end.checked_add(1);
        }
        out
    }

    #[inline]
    fn get(&self, addr: u128) -> Option<&'static str> {
        let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
        (addr <= self.ends[i]).then(|| self.services[i])
    }
}

/// IPv4 and IPv6 ranges, each with its service.
#[derive(Debug, Default)]
pub(crate) struct AddressRanges {
    v4: Intervals,
    v6: Intervals,
    /// Per family, the first bytes some range covers: most flows' addresses
    /// are in none, and are turned away by one bit before any search.
    v4_first: [u64; 4],
    v6_first: [u64; 4],
    prefixes: usize,
}

/// Marks in `set` the first bytes of the addresses from `first` to `last`,
/// numbers of `bits` bits.
fn mark_first_bytes(set: &mut [u64; 4], (first, last): (u128, u128), bits: u32) {
    let (from, to) = ((first >> (bits - 8)) as usize, (last >> (bits - 8)) as usize);
    for b in from..=to {
        set[b / 64] |= 1 << (b % 64);
    }
}

fn has_first_byte(set: &[u64; 4], b: u8) -> bool {
    set[usize::from(b) / 64] & (1 << (b % 64)) != 0
}

/// The first and last address of `addr/len`, as numbers of `bits` bits.
fn span(addr: u128, len: u8, bits: u32) -> (u128, u128) {
    let host_bits = bits - u32::from(len);
    let host_mask = if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    (addr & !host_mask, addr | host_mask)
}

impl AddressRanges {
    /// `prefixes` (address, prefix length, service); a later equal prefix
    /// replaces an earlier one. Lengths past the family's are cut to it.
    pub(crate) fn new(prefixes: Vec<(IpAddr, u8, &'static str)>) -> AddressRanges {
        let count = prefixes.len();
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        let (mut v4_first, mut v6_first) = ([0; 4], [0; 4]);
        for (addr, len, service) in prefixes {
            match addr {
                IpAddr::V4(a) => {
                    let (first, last) = span(u128::from(a.to_bits()), len.min(32), 32);
                    mark_first_bytes(&mut v4_first, (first, last), 32);
                    v4.push((first, last, service));
                }
                IpAddr::V6(a) => {
                    let (first, last) = span(a.to_bits(), len.min(128), 128);
                    mark_first_bytes(&mut v6_first, (first, last), 128);
                    v6.push((first, last, service));
                }
            }
        }
        AddressRanges {
            v4: Intervals::new(v4),
            v6: Intervals::new(v6),
            v4_first,
            v6_first,
            prefixes: count,
        }
    }

    #[inline]
    pub(crate) fn get(&self, addr: IpAddr) -> Option<&'static str> {
        let v4 = |a: std::net::Ipv4Addr| {
            has_first_byte(&self.v4_first, a.octets()[0])
                .then(|| self.v4.get(u128::from(a.to_bits())))
                .flatten()
        };
        match addr {
            IpAddr::V4(a) => v4(a),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(a) => v4(a),
                None => has_first_byte(&self.v6_first, a.octets()[0])
                    .then(|| self.v6.get(a.to_bits()))
                    .flatten(),
            },
        }
    }

    pub(crate) fn prefixes(&self) -> usize {
        self.prefixes
    }

    pub(crate) fn services(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.v4.services.iter().chain(&self.v6.services).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_addr(bits: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from_bits(bits))
    }

    fn v6_addr(bits: u128) -> IpAddr {
        IpAddr::V6(std::net::Ipv6Addr::from_bits(bits))
    }

    /// The longest prefix holding `addr`, by trying every prefix.
    fn by_hand(prefixes: &[(IpAddr, u8, &'static str)], addr: IpAddr) -> Option<&'static str> {
        // An IPv4-mapped address is the IPv4 address it carries, whatever
        // IPv6 prefix covers ::ffff:0:0/96.
        let addr = match addr {
            IpAddr::V6(a) => a.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            IpAddr::V4(_) => addr,
        };
        let mut best: Option<(u8, usize)> = None;
        for (i, &(p, len, _)) in prefixes.iter().enumerate() {
            let inside = match (p, addr) {
                (IpAddr::V4(p), IpAddr::V4(a)) => {
                    let (first, last) = span(u128::from(p.to_bits()), len, 32);
                    (first..=last).contains(&u128::from(a.to_bits()))
                }
                (IpAddr::V6(p), IpAddr::V6(a)) => {
                    let (first, last) = span(p.to_bits(), len, 128);
                    (first..=last).contains(&a.to_bits())
                }
                _ => false,
            };
            // Longer wins; of equal prefixes, the later.
            if inside && best.is_none_or(|(l, _)| len >= l) {
                best = Some((len, i));
            }
        }
        best.map(|(_, i)| prefixes[i].2)
    }

    proptest::proptest! {
        /// Nested, overlapping, equal and disjoint prefixes of both
        /// families, the whole space included: the flattened intervals
        /// answer as a search of every prefix does.
        #[test]
        fn the_intervals_answer_as_the_longest_prefix_does(
            v4 in proptest::collection::vec((0u32..64, 0u8..=32, 0usize..4), 0..24),
            v6 in proptest::collection::vec((0u128..64, 0u8..=128, 0usize..4), 0..12),
            probes in proptest::collection::vec(proptest::num::u32::ANY, 64),
        ) {
            const NAMES: [&str; 4] = ["A", "B", "C", "D"];
            // Few distinct high bits, so that prefixes nest and collide.
            let mut prefixes: Vec<(IpAddr, u8, &'static str)> = v4
                .iter()
                .map(|&(hi, len, n)| (v4_addr((hi << 26) | (hi.wrapping_mul(0x9e37_79b9) >> 8)), len, NAMES[n]))
                .collect();
            prefixes.extend(v6.iter().map(|&(hi, len, n)| (v6_addr((hi << 122) | (hi << 60)), len, NAMES[n])));
            let table = AddressRanges::new(prefixes.clone());
            let mut addrs: Vec<IpAddr> = probes.iter().map(|&p| v4_addr(p)).collect();
            addrs.extend(probes.iter().map(|&p| v6_addr(u128::from(p) << 96 | u128::from(p))));
            for &(p, len, _) in &prefixes {
                // Either edge of each prefix, and just past them.
                let (bits, value) = match p {
                    IpAddr::V4(a) => (32, u128::from(a.to_bits())),
                    IpAddr::V6(a) => (128, a.to_bits()),
                };
                let (first, last) = span(value, len, bits);
                for v in [first, last, first.wrapping_sub(1), last.wrapping_add(1)] {
                    addrs.push(if bits == 32 { v4_addr((v & 0xffff_ffff) as u32) } else { v6_addr(v) });
                }
            }
            for addr in addrs {
                proptest::prop_assert_eq!(table.get(addr), by_hand(&prefixes, addr), "{}", addr);
            }
        }
    }

    #[test]
    fn a_mapped_ipv4_address_is_looked_up_as_ipv4() {
        let table = AddressRanges::new(vec![("149.154.160.0".parse().unwrap(), 20, "Telegram")]);
        assert_eq!(table.get("::ffff:149.154.167.51".parse().unwrap()), Some("Telegram"));
        assert_eq!(table.get("149.154.176.1".parse().unwrap()), None);
        assert_eq!(AddressRanges::default().get("1.2.3.4".parse().unwrap()), None);
        // Even where an IPv6 prefix spans the mapped block.
        let table = AddressRanges::new(vec![("::".parse().unwrap(), 80, "A")]);
        assert_eq!(table.get("::ffff:255.255.255.255".parse().unwrap()), None);
        assert_eq!(table.get("::fffe:255.255.255.255".parse().unwrap()), Some("A"));
    }
}
