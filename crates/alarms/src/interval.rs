//! One statistics interval as the detectors read it: the fields of a
//! `stats.jsonl` line (docs/probe.md) that they use. The probe hands the
//! detectors each line as it is written; `sluice alarms --replay` reads
//! them back from the file. Fields a line lacks (an older file) are empty.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Interval {
    pub ts_ns: u64,
    pub interval_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub flows_active: u64,
    pub flows_new: u64,
    pub flows_ended: u64,
    pub drops: u64,
    pub tcp_syn: u64,
    pub l4: BTreeMap<String, Counts>,
    pub applications: BTreeMap<String, Counts>,
    pub interfaces: BTreeMap<String, InterfaceCounts>,
    pub top_hosts: Vec<HostEntry>,
    pub top_syn_destinations: Vec<SynEntry>,
    pub top_port_scanners: Vec<ScanEntry>,
    pub top_host_sweepers: Vec<SweepEntry>,
    pub top_amplification: Vec<AmplificationEntry>,
    pub top_servers: Vec<ServerEntry>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Counts {
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct InterfaceCounts {
    pub packets: u64,
    pub bytes: u64,
    pub kernel_drops: u64,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct HostEntry {
    pub host: String,
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// SYNs (from the flows' initiators) to one host.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct SynEntry {
    pub host: String,
    pub syn: u64,
    pub flows: u64,
    pub sources: u64,
    /// The destination ports with the most SYNs, most first.
    pub ports: Vec<u16>,
}

/// Distinct destination ports one source tried on one destination.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ScanEntry {
    pub host: String,
    pub target: String,
    pub ports: u64,
    pub flows: u64,
}

/// Distinct destinations one source tried on one service.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct SweepEntry {
    pub host: String,
    pub service: String,
    pub hosts: u64,
    pub flows: u64,
}

/// UDP answers from a reflection-prone service to one host.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct AmplificationEntry {
    pub host: String,
    pub service: String,
    pub packets: u64,
    pub bytes: u64,
    pub request_bytes: u64,
    pub sources: u64,
}

/// A server: a host, the service it answers on, and its flows' label.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ServerEntry {
    pub host: String,
    pub service: String,
    pub application: String,
    pub flows: u64,
    pub packets: u64,
    pub bytes: u64,
}

impl Interval {
    /// An interval in which nothing was read: files write none, and the
    /// detectors take a gap in their times for such intervals.
    pub fn empty(ts_ns: u64, interval_ns: u64) -> Interval {
        Interval {
            ts_ns,
            interval_ns,
            ..Interval::default()
        }
    }

    pub fn end_ns(&self) -> u64 {
        self.ts_ns + self.interval_ns
    }

    pub fn from_value(value: &serde_json::Value) -> Result<Interval, serde_json::Error> {
        Interval::deserialize(value)
    }
}
