//! SF-TAP's cell incubator: each flow, both directions, goes to one of N
//! cells (machines running probes), chosen from the flow key's symmetric
//! hash (`sluice-wire`) through a table of slots ([`CellTable`]) that
//! moves as few flows as possible when cells join or leave.
//!
//! [`Balancer`] makes the choice for a decoded frame and keeps the counts
//! per cell; where the frames go (capture files, interfaces) is its
//! caller's business. Later IP fragments, which carry no ports, are given
//! their first fragment's ports first (`sluice-flow`'s resolver), so they
//! follow their datagram as SF-TAP's incubator does; those whose first
//! fragment was not seen are counted and go where their addresses with
//! ports 0 hash.

mod distinct;
pub mod merge;
mod table;
pub mod xdp;

use serde::Serialize;
use sluice_flow::FragmentResolver;
use sluice_wire::{DecodeError, Decoded, FlowKey};

pub use distinct::Distinct;
pub use table::{CellTable, SLOTS, TableError, slot_of};

/// What the cell is chosen by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum HashMode {
    /// The flow key as the probe's workers hash it: addresses, ports,
    /// protocol, VLAN and tunnel id, the same for both directions.
    #[default]
    #[serde(rename = "symmetric-5tuple")]
    Symmetric5tuple,
    /// The two addresses (with VLAN and tunnel id) alone: every flow
    /// between two hosts in one cell, fragments included whether or not
    /// their first fragment was seen.
    #[serde(rename = "ip-pair")]
    IpPair,
}

impl std::str::FromStr for HashMode {
    type Err = String;

    fn from_str(s: &str) -> Result<HashMode, String> {
        match s {
            "symmetric-5tuple" => Ok(HashMode::Symmetric5tuple),
            "ip-pair" => Ok(HashMode::IpPair),
            other => Err(format!("--hash {other:?}: one of symmetric-5tuple, ip-pair")),
        }
    }
}

impl std::fmt::Display for HashMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HashMode::Symmetric5tuple => "symmetric-5tuple",
            HashMode::IpPair => "ip-pair",
        })
    }
}

/// The hash a flow's cell is chosen by.
#[inline]
pub fn flow_hash(key: &FlowKey, mode: HashMode) -> u64 {
    match mode {
        HashMode::Symmetric5tuple => key.symmetric_hash(),
        HashMode::IpPair => FlowKey {
            src_port: 0,
            dst_port: 0,
            proto: 0,
            ..*key
        }
        .symmetric_hash(),
    }
}

/// One cell's counts.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CellCounts {
    /// The cell's name: its interface, or its output file.
    pub cell: String,
    /// Frames and their wire bytes sent to the cell.
    pub packets: u64,
    pub bytes: u64,
    /// Distinct flows sent to it (estimated: a sketch of their hashes,
    /// about 1.6 % standard error).
    pub flows: u64,
    /// Frames for the cell lost because its output had no room (live).
    pub drops: u64,
    /// Frames its output refused (longer than its MTU, the interface went
    /// away) or could not write.
    pub redirect_failures: u64,
}

/// What a balancer did, for the summary.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BalanceReport {
    pub hash: HashMode,
    pub cells: Vec<CellCounts>,
    /// Frames with no flow (not IP, malformed, cut short): they go to the
    /// first present cell, which counts them as such.
    pub unhashed_frames: u64,
    /// Later IP fragments given their first fragment's ports.
    pub resolved_fragments: u64,
    /// Later IP fragments whose first fragment was not seen: they go where
    /// their addresses with ports 0 hash.
    pub unresolved_fragments: u64,
    /// Inline: frames forwarded to the output link, and those it refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline: Option<CellCounts>,
    /// The XDP fast path's counts, when it was asked for (`balance.xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpReport>,
}

/// What the XDP fast path did, for the summary: the frames it redirected
/// in the kernel never reach the user-space counts above.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct XdpReport {
    /// The interface it is attached to.
    pub interface: String,
    /// `driver` or `generic` (the kernel's SKB mode); `none` when it could
    /// not attach, `error` saying why (the user-space path then takes
    /// every frame).
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Per cell: frames and their bytes the program chose the cell for
    /// (redirected, or passed when the redirect failed).
    pub cells: Vec<XdpCellCounts>,
    /// Frames passed to the user-space path, by reason (every reason,
    /// zeros included; `no-cell` and redirect failures as below).
    pub passed: std::collections::BTreeMap<String, u64>,
    /// Later IP fragments given their first fragment's ports, and those
    /// left without.
    pub resolved_fragments: u64,
    pub unresolved_fragments: u64,
    /// Frames whose cell's interface would not take them: passed to the
    /// user-space path instead.
    pub redirect_failures: u64,
}

/// One cell's counts on the XDP fast path.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct XdpCellCounts {
    pub cell: String,
    pub packets: u64,
    pub bytes: u64,
}

impl BalanceReport {
    /// Adds the counts of another balancer over the same cells (another
    /// reading thread's).
    pub fn add(&mut self, other: &BalanceReport) {
        if self.cells.is_empty() {
            *self = other.clone();
            return;
        }
        for (mine, theirs) in self.cells.iter_mut().zip(&other.cells) {
            mine.add(theirs);
        }
        self.unhashed_frames += other.unhashed_frames;
        self.resolved_fragments += other.resolved_fragments;
        self.unresolved_fragments += other.unresolved_fragments;
        match (&mut self.inline, &other.inline) {
            (Some(mine), Some(theirs)) => mine.add(theirs),
            (None, Some(theirs)) => self.inline = Some(theirs.clone()),
            _ => {}
        }
        // One program serves every reading thread: its counts are whole.
        if self.xdp.is_none() {
            self.xdp.clone_from(&other.xdp);
        }
    }
}

impl CellCounts {
    /// Adds another count of the same cell. Flows seen by two readers are
    /// added as if distinct: each reader's flows are its own.
    pub fn add(&mut self, other: &CellCounts) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        self.flows += other.flows;
        self.drops += other.drops;
        self.redirect_failures += other.redirect_failures;
    }
}

/// Chooses each frame's cell and counts.
pub struct Balancer {
    table: CellTable,
    mode: HashMode,
    fragments: FragmentResolver,
    counts: Vec<CellCounts>,
    distinct: Vec<Distinct>,
    first_present: usize,
    unhashed: u64,
}

impl Balancer {
    /// A balancer over `table`'s cells, named `names` (one per position).
    pub fn new(table: CellTable, mode: HashMode, names: &[String]) -> Balancer {
        assert_eq!(names.len(), table.cells(), "one name per cell");
        let first_present = (0..table.cells()).find(|&c| table.is_present(c)).expect("one present");
        Balancer {
            counts: names
                .iter()
                .map(|n| CellCounts {
                    cell: n.clone(),
                    ..CellCounts::default()
                })
                .collect(),
            distinct: (0..table.cells()).map(|_| Distinct::new()).collect(),
            table,
            mode,
            fragments: FragmentResolver::new(1 << 16),
            first_present,
            unhashed: 0,
        }
    }

    pub fn table(&self) -> &CellTable {
        &self.table
    }

    pub fn mode(&self) -> HashMode {
        self.mode
    }

    /// The cell of a frame as the source decoded it, counted as sent there
    /// with `wire_len` bytes.
    #[inline]
    pub fn choose(&mut self, decoded: Result<&Decoded, DecodeError>, wire_len: u32) -> usize {
        let cell = match decoded {
            Ok(decoded) => {
                let mut decoded = *decoded;
                self.fragments.resolve(&mut decoded);
                let hash = flow_hash(&decoded.key, self.mode);
                let cell = self.table.cell_of(hash);
                self.distinct[cell].add(hash);
                cell
            }
            Err(_) => {
                self.unhashed += 1;
                self.first_present
            }
        };
        let counts = &mut self.counts[cell];
        counts.packets += 1;
        counts.bytes += u64::from(wire_len);
        cell
    }

    /// A frame chosen for `cell` was lost for want of room.
    pub fn dropped(&mut self, cell: usize) {
        self.counts[cell].drops += 1;
    }

    /// A frame chosen for `cell` was refused by its output.
    pub fn failed(&mut self, cell: usize) {
        self.counts[cell].redirect_failures += 1;
    }

    /// The counts so far.
    pub fn report(&self) -> BalanceReport {
        BalanceReport {
            hash: self.mode,
            cells: self
                .counts
                .iter()
                .zip(&self.distinct)
                .map(|(c, d)| CellCounts {
                    flows: d.estimate(),
                    ..c.clone()
                })
                .collect(),
            unhashed_frames: self.unhashed,
            resolved_fragments: self.fragments.resolved,
            unresolved_fragments: self.fragments.unresolved,
            inline: None,
            xdp: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::{Fragment, IpVersion};

    fn udp(src: u8, dst: u8, ports: (u16, u16), fragment: Fragment) -> Decoded {
        let mut d = Decoded::default();
        d.key.version = IpVersion::V4;
        d.key.src[..4].copy_from_slice(&[10, 0, 0, src]);
        d.key.dst[..4].copy_from_slice(&[10, 0, 1, dst]);
        d.key.proto = 17;
        (d.key.src_port, d.key.dst_port) = ports;
        d.fragment = fragment;
        d
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn both_directions_and_later_fragments_go_to_the_flows_cell() {
        let mut b = Balancer::new(CellTable::new(16).unwrap(), HashMode::Symmetric5tuple, &names(16));
        let mut moved_by_ports = 0;
        for i in 0..200u16 {
            let forward = udp(1, 2, (1000 + i, 53), Fragment::First { id: u32::from(i) });
            let cell = b.choose(Ok(&forward), 1514);
            let back = udp(2, 1, (53, 1000 + i), Fragment::None);
            let mut reversed = back;
            reversed.key = forward.key.reversed();
            assert_eq!(b.choose(Ok(&reversed), 100), cell);
            let later = udp(
                1,
                2,
                (0, 0),
                Fragment::Later {
                    id: u32::from(i),
                    offset: 1480,
                    more: false,
                },
            );
            assert_eq!(b.choose(Ok(&later), 600), cell, "flow {i}'s later fragment");
            let portless = later.key.symmetric_hash();
            if b.table().cell_of(portless) != cell {
                moved_by_ports += 1;
            }
        }
        assert!(
            moved_by_ports > 100,
            "the ports decide the cell: without resolution most would stray"
        );
        let report = b.report();
        assert_eq!(report.resolved_fragments, 200);
        assert_eq!(report.unresolved_fragments, 0);
        assert_eq!(report.cells.iter().map(|c| c.packets).sum::<u64>(), 600);
        let flows: u64 = report.cells.iter().map(|c| c.flows).sum();
        assert!((190..=210).contains(&flows), "{flows} flows estimated for 200");
    }

    #[test]
    fn an_unseen_first_fragment_is_counted() {
        let mut b = Balancer::new(CellTable::new(4).unwrap(), HashMode::Symmetric5tuple, &names(4));
        let later = udp(
            1,
            2,
            (0, 0),
            Fragment::Later {
                id: 9,
                offset: 8,
                more: false,
            },
        );
        b.choose(Ok(&later), 60);
        b.choose(Err(DecodeError::NotIp { ethertype: 0x0806 }), 60);
        let r = b.report();
        assert_eq!((r.unresolved_fragments, r.unhashed_frames), (1, 1));
    }

    #[test]
    fn ip_pair_keeps_every_flow_of_two_hosts_together() {
        let mut b = Balancer::new(CellTable::new(8).unwrap(), HashMode::IpPair, &names(8));
        let first = b.choose(Ok(&udp(1, 2, (1, 2), Fragment::None)), 60);
        for port in 0..500 {
            let mut tcp = udp(1, 2, (port, 80), Fragment::None);
            tcp.key = tcp.key.reversed();
            tcp.key.proto = 6;
            assert_eq!(b.choose(Ok(&tcp), 60), first);
        }
        assert_eq!("ip-pair".parse::<HashMode>(), Ok(HashMode::IpPair));
        assert!("5tuple".parse::<HashMode>().unwrap_err().contains("symmetric-5tuple"));
    }
}
