//! Anomalies injected into generated traffic, with their truth: the
//! attacks and failures the alarms' detectors look for, each at a known
//! start, end and size (a share of the background's packet rate), so that
//! a detector's hits, misses, delay and evidence can be scored.

use std::fmt;
use std::io;
use std::str::FromStr;

use etherparse::PacketBuilder;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::FrameSink;

/// What to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnomalyKind {
    /// SYNs from spoofed sources (random addresses of 100.64.0.0/10) to
    /// 198.51.100.80 port 80; nothing answers.
    SynFlood,
    /// 192.0.2.66 tries every port of 198.51.100.22 in turn with a SYN; each
    /// is answered by a RST (two packets a port).
    PortScan,
    /// 192.0.2.77 sends a SYN to port 445 of random hosts of 198.18.0.0/16;
    /// none answers.
    HostSweep,
    /// DNS (port 53) and NTP (port 123) answers of 1,100 to 1,400 bytes from
    /// random reflectors of 45.0.0.0/8 to 198.51.100.53, which asked for
    /// none of them.
    Amplification,
    /// 93.184.0.7, one of the mix's servers, sends full-size TCP segments
    /// from port 443 to 10.200.0.1 (whose SYN opens the flow).
    VolumeSurge,
    /// The given share of the background's packets is lost in the window
    /// (a link or capture failure).
    TrafficDrop,
    /// A server never seen before, 198.51.100.89, answers 10.201.0.1 on
    /// TCP port 3389 (RDP) with full-size segments, after a handshake.
    NewService,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 7] = [
        AnomalyKind::SynFlood,
        AnomalyKind::PortScan,
        AnomalyKind::HostSweep,
        AnomalyKind::Amplification,
        AnomalyKind::VolumeSurge,
        AnomalyKind::TrafficDrop,
        AnomalyKind::NewService,
    ];

    /// As `alarms.jsonl` names the detector that should find it.
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyKind::SynFlood => "syn_flood",
            AnomalyKind::PortScan => "port_scan",
            AnomalyKind::HostSweep => "host_sweep",
            AnomalyKind::Amplification => "amplification",
            AnomalyKind::VolumeSurge => "volume_surge",
            AnomalyKind::TrafficDrop => "traffic_drop",
            AnomalyKind::NewService => "new_service",
        }
    }

    /// The host an alarm about it should name, if any.
    pub fn host(self) -> Option<&'static str> {
        match self {
            AnomalyKind::SynFlood => Some("198.51.100.80"),
            AnomalyKind::PortScan => Some("192.0.2.66"),
            AnomalyKind::HostSweep => Some("192.0.2.77"),
            AnomalyKind::Amplification => Some("198.51.100.53"),
            AnomalyKind::VolumeSurge => Some("93.184.0.7"),
            AnomalyKind::TrafficDrop => None,
            AnomalyKind::NewService => Some("198.51.100.89"),
        }
    }
}

/// One anomaly: `KIND@START+LENGTH:SHARE`, as in `syn_flood@60s+30s:20%`:
/// from START after the capture's first packet, for LENGTH, at SHARE of
/// the background's packet rate (or, for `traffic_drop`, losing that share
/// of it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub start_ns: u64,
    pub duration_ns: u64,
    pub share: f64,
}

impl FromStr for Anomaly {
    type Err = String;

    fn from_str(text: &str) -> Result<Anomaly, String> {
        let bad = || format!("{text:?}: give KIND@START+LENGTH:SHARE, as in syn_flood@60s+30s:20%");
        let (kind, rest) = text.split_once('@').ok_or_else(bad)?;
        let kind = AnomalyKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind)
            .ok_or_else(|| {
                let names: Vec<_> = AnomalyKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("{text:?}: {kind:?} is not one of {}", names.join(", "))
            })?;
        let (start, rest) = rest.split_once('+').ok_or_else(bad)?;
        let (length, share) = rest.split_once(':').ok_or_else(bad)?;
        let time = |t: &str| {
            sluice_units::parse_duration(t)
                .map(|d| d.as_nanos() as u64)
                .map_err(|e| format!("{text:?}: {e}"))
        };
        let start_ns = if start.trim() == "0" { 0 } else { time(start)? };
        let share = share
            .trim()
            .strip_suffix('%')
            .and_then(|p| p.parse::<f64>().ok())
            .filter(|p| *p > 0.0 && *p <= 1000.0)
            .ok_or_else(|| format!("{text:?}: the share is a percentage, as in 20%"))?
            / 100.0;
        if kind == AnomalyKind::TrafficDrop && share > 1.0 {
            return Err(format!("{text:?}: a drop loses at most 100% of the packets"));
        }
        Ok(Anomaly {
            kind,
            start_ns,
            duration_ns: time(length)?,
            share,
        })
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}ns+{}ns:{}%",
            self.kind.as_str(),
            self.start_ns,
            self.duration_ns,
            self.share * 100.0
        )
    }
}

/// What was injected: a row of `NAME.anomalies.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct AnomalyRow {
    pub kind: AnomalyKind,
    /// Absolute times (ns since the epoch) of the window.
    pub start_ns: u64,
    pub end_ns: u64,
    pub share: f64,
    /// Packets injected (or, for a drop, removed).
    pub packets: u64,
    pub bytes: u64,
}

impl AnomalyRow {
    pub const HEADER: &'static str = "kind,start_ns,end_ns,share,packets,bytes,host";

    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{}",
            self.kind.as_str(),
            self.start_ns,
            self.end_ns,
            self.share,
            self.packets,
            self.bytes,
            self.kind.host().unwrap_or("")
        )
    }
}

struct Running {
    row: AnomalyRow,
    /// The next injected packet's time, and the gap between packets.
    next_ns: u64,
    gap_ns: u64,
    seq: u64,
}

/// A sink that passes the background on and injects the anomalies' packets
/// among it in time order (or drops the background's, for a drop).
pub struct Injecting<'a, S: FrameSink> {
    inner: &'a mut S,
    running: Vec<Running>,
    rng: Pcg64Mcg,
    frame: Vec<u8>,
    payload: Vec<u8>,
    first_ns: Option<u64>,
    anomalies: Vec<Anomaly>,
    rate: f64,
}

impl<'a, S: FrameSink> Injecting<'a, S> {
    /// Over a background of `rate` packets a second.
    pub fn new(inner: &'a mut S, anomalies: &[Anomaly], rate: f64, seed: u64) -> Injecting<'a, S> {
        Injecting {
            inner,
            running: Vec::new(),
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x616e_6f6d_616c_7921),
            frame: Vec::with_capacity(1600),
            payload: vec![0; 1500],
            first_ns: None,
            anomalies: anomalies.to_vec(),
            rate,
        }
    }

    /// What each anomaly injected.
    pub fn rows(&self) -> Vec<AnomalyRow> {
        self.running.iter().map(|r| r.row.clone()).collect()
    }

    fn start(&mut self, first_ns: u64) {
        self.first_ns = Some(first_ns);
        for a in &self.anomalies {
            let start = first_ns + a.start_ns;
            let gap = (1e9 / (a.share * self.rate)).max(1.0) as u64;
            self.running.push(Running {
                row: AnomalyRow {
                    kind: a.kind,
                    start_ns: start,
                    end_ns: start + a.duration_ns,
                    share: a.share,
                    packets: 0,
                    bytes: 0,
                },
                next_ns: start,
                gap_ns: gap,
                seq: 0,
            });
        }
    }

    /// Injects every anomaly packet due before `ts_ns`.
    fn inject_before(&mut self, ts_ns: u64) -> io::Result<()> {
        loop {
            let due = self
                .running
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.row.kind != AnomalyKind::TrafficDrop && r.next_ns < ts_ns && r.next_ns < r.row.end_ns
                })
                .min_by_key(|(_, r)| r.next_ns)
                .map(|(i, _)| i);
            let Some(i) = due else {
                return Ok(());
            };
            let (kind, seq, at) = {
                let r = &self.running[i];
                (r.row.kind, r.seq, r.next_ns)
            };
            self.build(kind, seq)?;
            self.inner.frame(at, &self.frame)?;
            let r = &mut self.running[i];
            r.row.packets += 1;
            r.row.bytes += self.frame.len() as u64;
            r.seq += 1;
            r.next_ns += r.gap_ns;
        }
    }

    fn build(&mut self, kind: AnomalyKind, seq: u64) -> io::Result<()> {
        const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
        const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
        self.frame.clear();
        let rng = &mut self.rng;
        let result = match kind {
            AnomalyKind::SynFlood => {
                let src: u32 = 0x6440_0000 | rng.random_range(0..1 << 22);
                PacketBuilder::ethernet2(MAC_A, MAC_B)
                    .ipv4(src.to_be_bytes(), [198, 51, 100, 80], 64)
                    .tcp(rng.random_range(1024..65535), 80, rng.random(), 64_240)
                    .syn()
                    .write(&mut self.frame, &[])
            }
            AnomalyKind::PortScan => {
                let port = 1 + (seq / 2 % 65_535) as u16;
                if seq.is_multiple_of(2) {
                    PacketBuilder::ethernet2(MAC_A, MAC_B)
                        .ipv4([192, 0, 2, 66], [198, 51, 100, 22], 64)
                        .tcp(41_000, port, 1_000 + seq as u32, 1024)
                        .syn()
                        .write(&mut self.frame, &[])
                } else {
                    PacketBuilder::ethernet2(MAC_B, MAC_A)
                        .ipv4([198, 51, 100, 22], [192, 0, 2, 66], 64)
                        .tcp(port, 41_000, 0, 0)
                        .rst()
                        .ack(1_000 + seq as u32)
                        .write(&mut self.frame, &[])
                }
            }
            AnomalyKind::HostSweep => {
                let host: u16 = rng.random();
                PacketBuilder::ethernet2(MAC_A, MAC_B)
                    .ipv4([192, 0, 2, 77], [198, 18, (host >> 8) as u8, host as u8], 64)
                    .tcp(rng.random_range(1024..65535), 445, rng.random(), 1024)
                    .syn()
                    .write(&mut self.frame, &[])
            }
            AnomalyKind::Amplification => {
                let src: u32 = 0x2d00_0000 | rng.random_range(0..1 << 24);
                let port = if seq.is_multiple_of(2) { 53 } else { 123 };
                let len = rng.random_range(1100..1400);
                for (i, b) in self.payload[..len].iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(13) ^ seq as u8;
                }
                PacketBuilder::ethernet2(MAC_B, MAC_A)
                    .ipv4(src.to_be_bytes(), [198, 51, 100, 53], 52)
                    .udp(port, rng.random_range(1024..65535))
                    .write(&mut self.frame, &self.payload[..len])
            }
            AnomalyKind::VolumeSurge if seq == 0 => PacketBuilder::ethernet2(MAC_A, MAC_B)
                .ipv4([10, 200, 0, 1], [93, 184, 0, 7], 64)
                .tcp(50_007, 443, 0, 64_240)
                .syn()
                .write(&mut self.frame, &[]),
            AnomalyKind::VolumeSurge => PacketBuilder::ethernet2(MAC_B, MAC_A)
                .ipv4([93, 184, 0, 7], [10, 200, 0, 1], 52)
                .tcp(443, 50_007, 7_000_000u32.wrapping_add((seq * 1448) as u32), 64_240)
                .ack(1)
                .write(&mut self.frame, &self.payload[..1448]),
            AnomalyKind::NewService => match seq {
                0 => PacketBuilder::ethernet2(MAC_A, MAC_B)
                    .ipv4([10, 201, 0, 1], [198, 51, 100, 89], 64)
                    .tcp(50_089, 3389, 100, 64_240)
                    .syn()
                    .write(&mut self.frame, &[]),
                1 => PacketBuilder::ethernet2(MAC_B, MAC_A)
                    .ipv4([198, 51, 100, 89], [10, 201, 0, 1], 64)
                    .tcp(3389, 50_089, 500, 64_240)
                    .syn()
                    .ack(101)
                    .write(&mut self.frame, &[]),
                2 => PacketBuilder::ethernet2(MAC_A, MAC_B)
                    .ipv4([10, 201, 0, 1], [198, 51, 100, 89], 64)
                    .tcp(50_089, 3389, 101, 64_240)
                    .ack(501)
                    .write(&mut self.frame, &[]),
                n => PacketBuilder::ethernet2(MAC_B, MAC_A)
                    .ipv4([198, 51, 100, 89], [10, 201, 0, 1], 64)
                    .tcp(3389, 50_089, 501u32.wrapping_add(((n - 3) * 1448) as u32), 64_240)
                    .ack(101)
                    .write(&mut self.frame, &self.payload[..1448]),
            },
            AnomalyKind::TrafficDrop => unreachable!("a drop injects nothing"),
        };
        result.map_err(io::Error::other)
    }

    /// Whether a drop running at `ts_ns` loses this background packet.
    fn dropped(&mut self, ts_ns: u64, len: usize) -> bool {
        for r in &mut self.running {
            if r.row.kind == AnomalyKind::TrafficDrop
                && (r.row.start_ns..r.row.end_ns).contains(&ts_ns)
                && self.rng.random_bool(r.row.share)
            {
                r.row.packets += 1;
                r.row.bytes += len as u64;
                return true;
            }
        }
        false
    }
}

impl<S: FrameSink> FrameSink for Injecting<'_, S> {
    fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        if self.first_ns.is_none() {
            self.start(ts_ns);
        }
        self.inject_before(ts_ns)?;
        if self.dropped(ts_ns, frame.len()) {
            return Ok(());
        }
        self.inner.frame(ts_ns, frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_and_mistakes_are_named() {
        let a: Anomaly = "syn_flood@60s+30s:20%".parse().unwrap();
        assert_eq!(a.kind, AnomalyKind::SynFlood);
        assert_eq!((a.start_ns, a.duration_ns), (60_000_000_000, 30_000_000_000));
        assert!((a.share - 0.2).abs() < 1e-12);
        assert!(
            "syn_flod@1s+1s:5%"
                .parse::<Anomaly>()
                .unwrap_err()
                .contains("syn_flood")
        );
        assert!(
            "port_scan@1s+1s:5"
                .parse::<Anomaly>()
                .unwrap_err()
                .contains("percentage")
        );
        assert!("traffic_drop@1s+1s:150%".parse::<Anomaly>().is_err());
    }
}
