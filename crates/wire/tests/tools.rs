//! tshark and tcpdump, where they are installed, find the same inner packet
//! as the decoder in the framings, tags and tunnels of the test frames
//! (`src/test_frames.rs`, built from each format's definition). Each framing
//! must be confirmed by at least one of them; what one cannot take apart
//! is listed, and the list is checked to still be true.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_wire::{LinkType, decode};

#[allow(dead_code)]
#[path = "../src/test_frames.rs"]
mod test_frames;

use test_frames::{Case, cases};

/// Framings tshark 4.0 leaves as data: link types it has no dissector for
/// (SLIP, the DSA tags, Cisco HDLC and Frame Relay with a direction byte,
/// bare MPLS), NFLOG attributes in the other byte order than the file's
/// (the test's pcapng file is little-endian), the netANALYZER headers, and
/// ERSPAN III's IP frame type.
const TSHARK_CANNOT: &[&str] = &[
    "SLIP",
    "DSA tag, Broadcom",
    "DSA tag, Broadcom prepended",
    "DSA tag, Marvell",
    "EDSA tag, Marvell",
    "Cisco HDLC with direction",
    "Frame Relay with direction",
    "MPLS link type",
    "NFLOG, big-endian attributes",
    "netANALYZER",
    "netANALYZER transparent",
    "ERSPAN type III, IP frame",
];

/// Framings tcpdump 4.99 leaves undecoded: ERSPAN (it prints the GRE
/// protocol number), the 802.1BR E-tag and VN-tag Ethernet types,
/// Transparent Ethernet Bridging behind a cooked header, the HT Control
/// field of 802.11 (it skips only the QoS control), and link types it has
/// no printer for.
const TCPDUMP_CANNOT: &[&str] = &[
    "ERSPAN type I",
    "ERSPAN type II",
    "ERSPAN type III",
    "ERSPAN type III, IP frame",
    "802.1BR E-tag",
    "VN-tag",
    "SLL, ARPHRD_IPGRE, bridged Ethernet",
    "SLL2, ARPHRD_IPGRE, bridged Ethernet",
    "802.11 QoS data, +HTC",
    "PPP with direction",
    "Cisco HDLC with direction",
    "Frame Relay with direction",
    "MPLS link type",
];

/// What neither tool decodes: these follow tcpdump.org's definitions of
/// their link types alone (a direction byte in front of Cisco HDLC or
/// Frame Relay, a bare label stack), and ERSPAN III's IP frame type
/// (draft-foschiano-erspan section 4.3), which both show as data.
const NEITHER: &[&str] = &[
    "ERSPAN type III, IP frame",
    "Frame Relay with direction",
    "Cisco HDLC with direction",
    "MPLS link type",
];

fn installed(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipping {tool}: not installed");
    }
    ok
}

/// What the decoder finds: the inner source address and ports.
fn ours(case: &Case) -> String {
    let d = decode(LinkType::from_linktype(case.linktype).unwrap(), &case.frame).unwrap();
    format!("{} {} {}", d.key.src_ip(), d.key.src_port, d.key.dst_port)
}

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len().next_multiple_of(4)) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b.resize(len as usize - 4, 0);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// A little-endian pcapng file with one interface per distinct link type
/// and each case's frame on its link type's interface.
fn pcapng(cases: &[Case]) -> Vec<u8> {
    let mut file = block(
        0x0a0d_0d0a,
        &[&0x1a2b_3c4du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat(),
    );
    let mut interfaces: Vec<u32> = Vec::new();
    for case in cases {
        if !interfaces.contains(&case.linktype) {
            interfaces.push(case.linktype);
            let mut idb = (case.linktype as u16).to_le_bytes().to_vec();
            idb.extend_from_slice(&[0, 0]);
            idb.extend_from_slice(&65_535u32.to_le_bytes());
            file.extend_from_slice(&block(1, &idb));
        }
    }
    for (n, case) in cases.iter().enumerate() {
        let interface = interfaces.iter().position(|&l| l == case.linktype).unwrap() as u32;
        let len = case.frame.len() as u32;
        let mut epb = Vec::new();
        for word in [interface, 0, n as u32 * 1000, len, len] {
            epb.extend_from_slice(&word.to_le_bytes());
        }
        epb.extend_from_slice(&case.frame);
        file.extend_from_slice(&block(6, &epb));
    }
    file
}

/// A pcap file of one frame. NFLOG attributes are in the byte order of
/// the host that wrote the file, which is the file's (libpcap swaps them
/// when it reads a file of the other order): the big-endian ones go into
/// a big-endian file, the others into a little-endian one.
fn pcap(case: &Case) -> Vec<u8> {
    let big = case.name.contains("big-endian");
    let word = |w: u32| if big { w.to_be_bytes() } else { w.to_le_bytes() };
    let mut file = word(0xa1b2_c3d4).to_vec();
    for version in [2u16, 4] {
        file.extend_from_slice(&if big {
            version.to_be_bytes()
        } else {
            version.to_le_bytes()
        });
    }
    for w in [0, 0, 65_535, case.linktype] {
        file.extend_from_slice(&word(w));
    }
    let len = case.frame.len() as u32;
    for w in [1, 0, len, len] {
        file.extend_from_slice(&word(w));
    }
    file.extend_from_slice(&case.frame);
    file
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-wire-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run(program: &str, args: &[&str], file: &Path) -> String {
    let output = Command::new(program).args(args).arg(file).output().unwrap();
    assert!(
        output.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The names of the cases `tool` agrees on; panics on a disagreement or on
/// a listed gap the tool no longer has.
fn check(tool: &str, cannot: &[&str], theirs: impl Fn(&Case) -> Option<String>) -> BTreeSet<&'static str> {
    let mut agreed = BTreeSet::new();
    let mut wrong = Vec::new();
    for case in cases() {
        let theirs = theirs(&case);
        let ours = ours(&case);
        let same = theirs.as_deref() == Some(&ours);
        if cannot.contains(&case.name) {
            if same {
                wrong.push(format!("{}: {tool} decodes it now; take it off the list", case.name));
            }
        } else if same {
            agreed.insert(case.name);
        } else {
            wrong.push(format!("{}: {tool} {theirs:?}, sluice {ours:?}", case.name));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    agreed
}

fn tshark() -> Option<BTreeSet<&'static str>> {
    if !installed("tshark") {
        return None;
    }
    let all = cases();
    let path = scratch("all.pcapng");
    std::fs::write(&path, pcapng(&all)).unwrap();
    let fields = [
        "-e",
        "ip.src",
        "-e",
        "ipv6.src",
        "-e",
        "tcp.srcport",
        "-e",
        "tcp.dstport",
    ];
    let mut args = vec!["-n", "-T", "fields", "-E", "separator=;"];
    args.extend(fields);
    args.push("-r");
    let stdout = run("tshark", &args, &path);
    let lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), all.len(), "{stdout}");
    let names: Vec<&str> = all.iter().map(|c| c.name).collect();
    Some(check("tshark", TSHARK_CANNOT, |case| {
        let line = &lines[names.iter().position(|&n| n == case.name).unwrap()];
        let fields: Vec<&str> = line.split(';').collect();
        // The innermost address is the last one tshark lists.
        let address = if case.v6 { fields[1] } else { fields[0] };
        let inner = address.rsplit(',').next().unwrap_or_default();
        Some(format!("{inner} {} {}", fields[2], fields[3]))
    }))
}

fn tcpdump() -> Option<BTreeSet<&'static str>> {
    if !installed("tcpdump") {
        return None;
    }
    Some(check("tcpdump", TCPDUMP_CANNOT, |case| {
        let path = scratch(&format!("{}.pcap", case.name.replace([' ', ',', '/'], "_")));
        std::fs::write(&path, pcap(case)).unwrap();
        let line = run("tcpdump", &["-n", "-r"], &path);
        // "... IP 10.0.0.1.40000 > 10.0.0.2.80: Flags ..." (the innermost
        // packet is printed last).
        let at = line.rfind(" > ")?;
        let source = line[..at].rsplit(' ').next()?;
        let (address, port) = source.rsplit_once('.')?;
        let destination = line[at + 3..].split(": ").next()?;
        let (_, dport) = destination.rsplit_once('.')?;
        Some(format!("{address} {port} {dport}"))
    }))
}

#[test]
fn tshark_and_tcpdump_find_the_inner_packets_the_decoder_finds() {
    let (Some(tshark), Some(tcpdump)) = (tshark(), tcpdump()) else {
        return;
    };
    let _ = std::fs::remove_dir_all(scratch("x").parent().unwrap());
    let unconfirmed: Vec<&str> = cases()
        .iter()
        .map(|c| c.name)
        .filter(|n| !tshark.contains(n) && !tcpdump.contains(n))
        .collect();
    assert_eq!(unconfirmed, NEITHER, "confirmed by neither tool");
}
