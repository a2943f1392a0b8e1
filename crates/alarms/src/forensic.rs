//! DetectPro's forensic module: the packets of an alarm's window and hosts,
//! cut from the recording through its index (`sluice-store`'s extract),
//! and the flow records of those hosts in that window.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;

use sluice_store::{Selection, extract};
use sluice_wire::IpVersion;

/// What to cut.
#[derive(Clone, Debug)]
pub struct Cut {
    /// Packets stamped in `[from_ns, to_ns)`...
    pub from_ns: u64,
    pub to_ns: u64,
    /// ...to or from one of these hosts (any packet when empty)...
    pub hosts: Vec<IpAddr>,
    /// ...up to this many bytes of frames.
    pub max_bytes: u64,
}

/// What a cut wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    pub packets: u64,
    /// Packets that matched past `max_bytes`.
    pub skipped: u64,
    /// Packets of the window read from the recording.
    pub examined: u64,
}

impl Cut {
    /// The hosts of an alarm, as it names them; names that are not
    /// addresses are left out.
    pub fn hosts_of(names: &[String]) -> Vec<IpAddr> {
        names.iter().filter_map(|h| h.parse().ok()).collect()
    }
}

/// Writes the packets of `cut` from the recordings under `recording` to
/// the pcap file `out`.
pub fn cut_packets(recording: &Path, cut: &Cut, out: &Path) -> io::Result<CutReport> {
    let hosts: HashSet<[u8; 16]> = cut.hosts.iter().map(|&h| key_bytes(h)).collect();
    let selection = Selection {
        from_ns: cut.from_ns,
        to_ns: cut.to_ns,
        flow_hash: None,
    };
    let mut report = CutReport::default();
    let mut bytes = 0u64;
    let extracted = extract(
        recording,
        &selection,
        |p| {
            if !hosts.is_empty() {
                let Ok(d) = sluice_wire::decode(p.link, p.data) else {
                    return false;
                };
                let (src, dst) = (normal(d.key.version, d.key.src), normal(d.key.version, d.key.dst));
                if !hosts.contains(&src) && !hosts.contains(&dst) {
                    return false;
                }
            }
            if bytes + p.data.len() as u64 > cut.max_bytes {
                report.skipped += 1;
                return false;
            }
            bytes += p.data.len() as u64;
            true
        },
        out,
    )?;
    report.packets = extracted.packets_written;
    report.examined = extracted.packets_examined;
    Ok(report)
}

/// Copies the records of `flows` (a `flows.jsonl`) that have one of
/// `hosts` as an end and overlap `[from_ns, to_ns)` to `out`; how many.
pub fn cut_records(flows: &Path, hosts: &[IpAddr], from_ns: u64, to_ns: u64, out: &Path) -> io::Result<u64> {
    let named = |path: &Path, e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = File::open(flows).map_err(|e| named(flows, e))?;
    let mut writer = BufWriter::new(File::create(out).map_err(|e| named(out, e))?);
    let quoted: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    let texts: HashSet<String> = hosts.iter().map(IpAddr::to_string).collect();
    let mut written = 0;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| named(flows, e))?;
        // Only lines that name a host are parsed.
        if !quoted.iter().any(|q| line.contains(q.as_str())) {
            continue;
        }
        let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let end = |f: &str| record[f].as_str().is_some_and(|s| texts.contains(s));
        let first = record["first_ts_ns"].as_u64().unwrap_or(0);
        let last = record["last_ts_ns"].as_u64().unwrap_or(u64::MAX);
        if (end("src_ip") || end("dst_ip")) && first < to_ns && last >= from_ns {
            writer.write_all(line.as_bytes()).map_err(|e| named(out, e))?;
            writer.write_all(b"\n").map_err(|e| named(out, e))?;
            written += 1;
        }
    }
    writer.flush().map_err(|e| named(out, e))?;
    Ok(written)
}

/// An address as a flow key holds it: IPv4 in the first four bytes.
fn key_bytes(addr: IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match addr {
        IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => b = v6.octets(),
    }
    b
}

fn normal(version: IpVersion, bytes: [u8; 16]) -> [u8; 16] {
    match version {
        IpVersion::V4 => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&bytes[..4]);
            b
        }
        IpVersion::V6 => bytes,
    }
}
