//! The statistics' breakdowns for the alarms' detectors: SYNs per
//! destination, distinct ports per source and destination (vertical
//! scans), distinct destinations per source and service (horizontal
//! sweeps), answers from reflection-prone UDP services per destination
//! (amplification) and traffic per server. Like the other maps of the
//! statistics they are added to once per flow and interval, when the
//! interval closes (never per packet), and merged over the workers by the
//! listener's thread; distinct counts are 256-bit linear-counting
//! sketches, merged by OR, so a source whose flows went to every worker is
//! counted once.

use rustc_hash::FxHashMap;
use serde_json::{Value, json};
use sluice_classify::FlowClass;
use sluice_flow::Flow;
use sluice_wire::tcp_flags;

use crate::summary::Counts;
use crate::talkers::Host;
use crate::worker::l4_label;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// UDP services that answer a small request with a large reply, the usual
/// reflectors of amplification attacks: chargen, DNS, NTP, SNMP, CLDAP,
/// SSDP, WS-Discovery, memcached, QOTD, portmap.
pub(crate) const AMPLIFIERS: [u16; 10] = [19, 53, 123, 161, 389, 1900, 3702, 11211, 17, 111];

/// How many distinct values went in, within a few per cent up to a few
/// hundred; past about 1,400 it says 1,420 ("at least").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Distinct([u64; 4]);

impl Distinct {
    pub(crate) fn insert(&mut self, value: u64) {
        // splitmix64's finaliser: ports and addresses come in runs, which
        // a multiplication alone would spread into regular patterns.
        let mut h = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        let bit = (h >> 56) as usize;
        self.0[bit / 64] |= 1 << (bit % 64);
    }

    pub(crate) fn merge(&mut self, other: &Distinct) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    pub(crate) fn estimate(&self) -> u64 {
        let set: u32 = self.0.iter().map(|w| w.count_ones()).sum();
        let zeros = 256 - set;
        if zeros == 0 {
            return 1420;
        }
        (-256.0 * (f64::from(zeros) / 256.0).ln()).round() as u64
    }
}

fn host_value(h: Host) -> u64 {
    let [a, b] = h.halves();
    a.rotate_left(17) ^ b
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Pair {
    flows: u64,
    ports: Distinct,
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Sweep {
    flows: u64,
    hosts: Distinct,
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Syn {
    syn: u64,
    flows: u64,
    sources: Distinct,
    /// The ports with the most SYNs, with their counts (a count of 0 is
    /// an empty place): space-saving over four places, so a port that
    /// takes most of the SYNs is always there.
    ports: [(u16, u64); 4],
}

impl Syn {
    fn port(&mut self, port: u16, syn: u64) {
        if let Some(p) = self.ports.iter_mut().find(|p| p.0 == port && p.1 > 0) {
            p.1 += syn;
            return;
        }
        let least = self.ports.iter_mut().min_by_key(|p| p.1).expect("four places");
        *least = (port, least.1 + syn);
    }

    /// The ports, most SYNs first.
    fn top_ports(&self) -> Vec<u16> {
        let mut ports: Vec<(u16, u64)> = self.ports.iter().copied().filter(|p| p.1 > 0).collect();
        ports.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ports.into_iter().map(|p| p.0).collect()
    }
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Amplified {
    packets: u64,
    bytes: u64,
    request_bytes: u64,
    sources: Distinct,
}

#[derive(Clone, Default)]
pub(crate) struct Served {
    counts: Counts,
    /// The label of the flow part with the most bytes (ties: the greater
    /// label), whatever the order the parts come in.
    application: String,
    application_bytes: u64,
}

impl Served {
    fn label(&mut self, bytes: u64, application: &str) {
        if (bytes, application) > (self.application_bytes, self.application.as_str()) {
            self.application_bytes = bytes;
            self.application.clear();
            self.application.push_str(application);
        }
    }
}

/// A worker's (or the merged) breakdowns of one interval.
#[derive(Default)]
pub(crate) struct Breakdowns {
    pub(crate) tcp_syn: u64,
    pairs: FxHashMap<(Host, Host), Pair>,
    sweeps: FxHashMap<(Host, u8, u16), Sweep>,
    syn: FxHashMap<Host, Syn>,
    amplified: FxHashMap<(Host, u16), Amplified>,
    servers: FxHashMap<(Host, u8, u16), Served>,
    /// Flow parts that found a map full.
    pub(crate) untracked: u64,
}

/// What a flow carried in the interval, by direction: packets, bytes, and
/// the initiator's SYNs.
#[derive(Clone, Copy, Default)]
pub(crate) struct Carried {
    pub c2s_bytes: u64,
    pub s2c_bytes: u64,
    pub s2c_packets: u64,
    pub c2s_packets: u64,
    pub syn: u64,
}

/// A flow's per-direction counters, to take differences of.
#[derive(Clone, Copy, Default)]
pub(crate) struct Mark {
    c2s_packets: u64,
    c2s_bytes: u64,
    s2c_packets: u64,
    s2c_bytes: u64,
    syn: u32,
}

impl Mark {
    /// The counters before the packet of `wire_len` bytes and `flags` that
    /// was just added, in the initiator's direction or not.
    pub(crate) fn before(flow: &Flow<FlowClass>, from_client: bool, wire_len: u32, flags: u8) -> Mark {
        let [c, s] = &flow.directions;
        let mut m = Mark {
            c2s_packets: c.packets,
            c2s_bytes: c.bytes,
            s2c_packets: s.packets,
            s2c_bytes: s.bytes,
            syn: c.flag_counts[1],
        };
        // Saturating: a flow between one address and port and itself
        // cannot tell its directions apart.
        if from_client {
            m.c2s_packets = m.c2s_packets.saturating_sub(1);
            m.c2s_bytes = m.c2s_bytes.saturating_sub(u64::from(wire_len));
            m.syn = m
                .syn
                .saturating_sub(u32::from(flow.key.proto == TCP && flags & tcp_flags::SYN != 0));
        } else {
            m.s2c_packets = m.s2c_packets.saturating_sub(1);
            m.s2c_bytes = m.s2c_bytes.saturating_sub(u64::from(wire_len));
        }
        m
    }

    pub(crate) fn since(&self, flow: &Flow<FlowClass>) -> Carried {
        let [c, s] = &flow.directions;
        Carried {
            c2s_packets: c.packets.saturating_sub(self.c2s_packets),
            c2s_bytes: c.bytes.saturating_sub(self.c2s_bytes),
            s2c_packets: s.packets.saturating_sub(self.s2c_packets),
            s2c_bytes: s.bytes.saturating_sub(self.s2c_bytes),
            syn: u64::from(c.flag_counts[1].saturating_sub(self.syn)),
        }
    }
}

fn capped<'a, K: std::hash::Hash + Eq, V: Default>(
    map: &'a mut FxHashMap<K, V>,
    key: K,
    untracked: &mut u64,
    limit: usize,
) -> Option<&'a mut V> {
    if map.len() >= limit && !map.contains_key(&key) {
        *untracked += 1;
        return None;
    }
    Some(map.entry(key).or_default())
}

impl Breakdowns {
    /// Adds what `flow` carried in the interval; `application` is its label.
    pub(crate) fn add(&mut self, flow: &Flow<FlowClass>, carried: &Carried, application: &str, limit: usize) {
        let key = &flow.key;
        let (src, dst) = (Host::of(key.version, &key.src), Host::of(key.version, &key.dst));
        let untracked = &mut self.untracked;
        if let Some(p) = capped(&mut self.pairs, (src, dst), untracked, limit) {
            p.flows += 1;
            p.ports.insert(u64::from(key.dst_port) | u64::from(key.proto) << 16);
        }
        if let Some(s) = capped(&mut self.sweeps, (src, key.proto, key.dst_port), untracked, limit) {
            s.flows += 1;
            s.hosts.insert(host_value(dst));
        }
        if key.proto == TCP && carried.syn > 0 {
            self.tcp_syn += carried.syn;
            if let Some(s) = capped(&mut self.syn, dst, untracked, limit) {
                s.syn += carried.syn;
                s.flows += 1;
                s.sources.insert(host_value(src));
                s.port(key.dst_port, carried.syn);
            }
        }
        if key.proto == UDP {
            // The reflector is the end on the service's port; the other
            // gets its answers.
            let reflected = if AMPLIFIERS.contains(&key.src_port) {
                Some((
                    dst,
                    src,
                    key.src_port,
                    carried.c2s_packets,
                    carried.c2s_bytes,
                    carried.s2c_bytes,
                ))
            } else if AMPLIFIERS.contains(&key.dst_port) {
                Some((
                    src,
                    dst,
                    key.dst_port,
                    carried.s2c_packets,
                    carried.s2c_bytes,
                    carried.c2s_bytes,
                ))
            } else {
                None
            };
            if let Some((victim, reflector, port, packets, bytes, asked)) = reflected
                && let Some(a) = capped(&mut self.amplified, (victim, port), untracked, limit)
            {
                a.packets += packets;
                a.bytes += bytes;
                a.request_bytes += asked;
                a.sources.insert(host_value(reflector));
            }
        }
        if let Some(s) = capped(&mut self.servers, (dst, key.proto, key.dst_port), untracked, limit) {
            let bytes = carried.c2s_bytes + carried.s2c_bytes;
            s.counts.add(&Counts {
                flows: 1,
                packets: carried.c2s_packets + carried.s2c_packets,
                bytes,
            });
            s.label(bytes, application);
        }
    }

    pub(crate) fn merge(&mut self, other: Breakdowns) {
        self.tcp_syn += other.tcp_syn;
        self.untracked += other.untracked;
        for (k, v) in other.pairs {
            let e = self.pairs.entry(k).or_default();
            e.flows += v.flows;
            e.ports.merge(&v.ports);
        }
        for (k, v) in other.sweeps {
            let e = self.sweeps.entry(k).or_default();
            e.flows += v.flows;
            e.hosts.merge(&v.hosts);
        }
        for (k, v) in other.syn {
            let e = self.syn.entry(k).or_default();
            e.syn += v.syn;
            e.flows += v.flows;
            e.sources.merge(&v.sources);
            for (port, syn) in v.ports {
                if syn > 0 {
                    e.port(port, syn);
                }
            }
        }
        for (k, v) in other.amplified {
            let e = self.amplified.entry(k).or_default();
            e.packets += v.packets;
            e.bytes += v.bytes;
            e.request_bytes += v.request_bytes;
            e.sources.merge(&v.sources);
        }
        for (k, v) in other.servers {
            let e = self.servers.entry(k).or_default();
            e.counts.add(&v.counts);
            e.label(v.application_bytes, &v.application);
        }
    }

    /// Adds the interval's fields to its `stats.jsonl` object: each list
    /// holds the `n` largest, largest first.
    pub(crate) fn write(&self, line: &mut Value, n: usize) {
        let service = |proto: u8, port: u16| format!("{}/{port}", l4_label(proto).to_ascii_lowercase());
        line["tcp_syn"] = self.tcp_syn.into();
        line["top_syn_destinations"] = largest(
            &self.syn,
            n,
            |s| s.syn,
            |h, s| json!({"host": h.addr().to_string(), "syn": s.syn, "flows": s.flows, "sources": s.sources.estimate(), "ports": s.top_ports()}),
        );
        let scans: FxHashMap<_, _> = self
            .pairs
            .iter()
            .map(|(k, v)| (*k, (v.ports.estimate(), v.flows)))
            .filter(|(_, (ports, _))| *ports > 1)
            .collect();
        line["top_port_scanners"] = largest(
            &scans,
            n,
            |v| v.0,
            |(s, d), (ports, flows)| json!({"host": s.addr().to_string(), "target": d.addr().to_string(), "ports": ports, "flows": flows}),
        );
        let sweeps: FxHashMap<_, _> = self
            .sweeps
            .iter()
            .map(|(k, v)| (*k, (v.hosts.estimate(), v.flows)))
            .filter(|(_, (hosts, _))| *hosts > 1)
            .collect();
        line["top_host_sweepers"] = largest(
            &sweeps,
            n,
            |v| v.0,
            |(s, proto, port), (hosts, flows)| json!({"host": s.addr().to_string(), "service": service(*proto, *port), "hosts": hosts, "flows": flows}),
        );
        line["top_amplification"] = largest(
            &self.amplified,
            n,
            |a| a.bytes,
            |(h, port), a| {
                json!({
                    "host": h.addr().to_string(), "service": service(UDP, *port), "packets": a.packets,
                    "bytes": a.bytes, "request_bytes": a.request_bytes, "sources": a.sources.estimate(),
                })
            },
        );
        line["top_servers"] = largest(
            &self.servers,
            n,
            |s| s.counts.bytes,
            |(h, proto, port), s| {
                json!({
                    "host": h.addr().to_string(), "service": service(*proto, *port), "application": s.application,
                    "flows": s.counts.flows, "packets": s.counts.packets, "bytes": s.counts.bytes,
                })
            },
        );
    }
}

/// The `n` entries with the largest `by`, largest first, ties by key.
fn largest<K: Ord, V>(
    map: &FxHashMap<K, V>,
    n: usize,
    by: impl Fn(&V) -> u64,
    show: impl Fn(&K, &V) -> Value,
) -> Value {
    let mut entries: Vec<(&K, &V)> = map.iter().filter(|(_, v)| by(v) > 0).collect();
    entries.sort_unstable_by(|a, b| by(b.1).cmp(&by(a.1)).then_with(|| a.0.cmp(b.0)));
    entries.truncate(n);
    Value::Array(entries.into_iter().map(|(k, v)| show(k, v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_counts_are_close_and_merge_as_one() {
        for n in [1u64, 2, 10, 50, 200, 500] {
            let mut all = Distinct::default();
            let (mut a, mut b) = (Distinct::default(), Distinct::default());
            for v in 0..n {
                all.insert(v * 7919 + 3);
                if v % 2 == 0 {
                    a.insert(v * 7919 + 3);
                }
                // Values on both sides count once.
                if v % 2 == 1 || v % 3 == 0 {
                    b.insert(v * 7919 + 3);
                }
            }
            a.merge(&b);
            assert_eq!(a, all);
            let e = all.estimate() as f64;
            // Linear counting's standard error is a few per cent here.
            assert!((e - n as f64).abs() <= (n as f64 * 0.15).max(1.0), "{n}: {e}");
        }
    }
}
