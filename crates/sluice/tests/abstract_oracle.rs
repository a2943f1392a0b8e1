//! The flow abstractor's TCP reassembly against an independent one: for
//! every TCP stream of nDPI's captures (`../shared/data/ndpi-dev/pcap`, or
//! `NDPI_DEV_DIR/pcap`), the bytes `sluice abstract` delivers per
//! direction must equal what `tshark -z follow,tcp,raw` reassembles.
//! Streams the comparison cannot judge fairly are skipped and counted by
//! reason; `--nocapture` shows the figures and every mismatch. Skipped,
//! with a message, when the captures or tshark are absent.
//!
//! Only streams tshark calls complete (handshake, data, FIN or RST) are
//! compared; `SLUICE_ORACLE_INCOMPLETE=1` compares the incomplete ones
//! too (captures cut at either end, picked up mid-stream), where a
//! stream starts is a matter of policy rather than of correctness.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;

/// Every TCP flow with client data goes to `tcp/all`; the rest (server
/// data only, or classified by a dissector instead of the rule) to
/// `tcp/default`.
const CONFIG: &str = "all:\n  up: '(?s).*'\n  proto: TCP\n  if: all\n";

/// Follow taps per tshark run, so that a capture with thousands of
/// streams does not make a command line longer than the system takes.
const FOLLOW_BATCH: usize = 400;

type Endpoint = (IpAddr, u16);

fn tshark_present() -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipping: tshark not found in PATH (install Wireshark's tshark to run the oracle)");
    }
    found
}

/// One flow as `sluice abstract` delivered it: the DATA bodies of each
/// direction (0: from the client, `from=1`), and whether a GAP came.
struct Delivered {
    client: Endpoint,
    server: Endpoint,
    bytes: [Vec<u8>; 2],
    gap: [bool; 2],
}

/// One TCP stream as tshark follows it; node 0 sent the stream's first
/// packet.
struct Followed {
    nodes: [Endpoint; 2],
    bytes: [Vec<u8>; 2],
}

/// What tshark's analysis says of a stream over all its packets.
#[derive(Default)]
struct StreamInfo {
    /// `tcp.completeness`: 1 SYN, 2 SYN-ACK, 4 ACK, 8 data, 16 FIN, 32 RST.
    completeness: u8,
    /// A segment before one seen, or one acknowledged, was not captured.
    lost: bool,
    payload: u64,
    /// An RST was seen.
    reset: bool,
    /// Payload came on an RST or after one.
    payload_after_reset: bool,
}

impl StreamInfo {
    /// tshark's own "Complete": the handshake, data, and a FIN or RST.
    fn complete(&self) -> bool {
        self.completeness & 0x0f == 0x0f && self.completeness & 0x30 != 0
    }
}

#[derive(Default)]
struct Tally {
    captures: u64,
    streams: u64,
    compared: u64,
    equal: u64,
    skipped: BTreeMap<&'static str, u64>,
    mismatches: Vec<String>,
}

impl Tally {
    fn skip(&mut self, reason: &'static str) {
        *self.skipped.entry(reason).or_default() += 1;
    }

    fn add(&mut self, other: Tally) {
        self.captures += other.captures;
        self.streams += other.streams;
        self.compared += other.compared;
        self.equal += other.equal;
        for (reason, n) in other.skipped {
            *self.skipped.entry(reason).or_default() += n;
        }
        self.mismatches.extend(other.mismatches);
    }
}

#[test]
fn delivered_tcp_bytes_equal_tsharks_follow() {
    let Some(pcaps) = common::ndpi_pcaps() else { return };
    if !tshark_present() {
        return;
    }
    let started = Instant::now();
    let mut captures: Vec<PathBuf> = std::fs::read_dir(&pcaps)
        .expect("the pcap folder lists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    captures.sort();
    let work = tempfile::tempdir().expect("a temporary directory");
    let config = work.path().join("all.yaml");
    std::fs::write(&config, CONFIG).expect("the configuration writes");

    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while let Some(capture) = captures.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let one = check_capture(capture, &config);
                    tally.lock().expect("no runner panicked").add(one);
                }
            });
        }
    });
    let tally = tally.into_inner().expect("no runner panicked");

    eprintln!(
        "abstract oracle: {} captures, {} TCP streams in tshark, {} compared, {} equal, {} differ ({:.0?})",
        tally.captures,
        tally.streams,
        tally.compared,
        tally.equal,
        tally.mismatches.len(),
        started.elapsed()
    );
    for (reason, n) in &tally.skipped {
        eprintln!("  skipped, {reason}: {n}");
    }
    for m in &tally.mismatches {
        eprintln!("  MISMATCH {m}");
    }
    assert!(tally.compared > 0, "no stream was compared");
    assert!(
        tally.mismatches.is_empty(),
        "{} of {} streams differ from tshark's (listed above with --nocapture)",
        tally.mismatches.len(),
        tally.compared
    );
}

fn check_capture(capture: &Path, config: &Path) -> Tally {
    let name = capture.file_name().expect("a file name").to_string_lossy().into_owned();
    let delivered = abstract_capture(capture, config, &name);
    let info = tshark_streams(capture);
    let mut tally = Tally {
        captures: 1,
        streams: info.len() as u64,
        ..Tally::default()
    };
    // Every stream with payload is followed, not only the compared ones,
    // so that a 4-tuple tshark splits into several streams is known.
    let with_payload: Vec<u32> = info.iter().filter(|(_, s)| s.payload > 0).map(|(&n, _)| n).collect();
    let followed = tshark_follow(capture, &with_payload);
    let incomplete_too = std::env::var_os("SLUICE_ORACLE_INCOMPLETE").is_some();

    let unordered = |a: Endpoint, b: Endpoint| if a <= b { (a, b) } else { (b, a) };
    let mut ours: HashMap<(Endpoint, Endpoint), Vec<&Delivered>> = HashMap::new();
    for d in &delivered {
        ours.entry(unordered(d.client, d.server)).or_default().push(d);
    }
    let mut theirs: HashMap<(Endpoint, Endpoint), u32> = HashMap::new();
    for f in followed.values().flatten() {
        *theirs.entry(unordered(f.nodes[0], f.nodes[1])).or_default() += 1;
    }
    for (stream, s) in &info {
        let skip = if s.payload == 0 {
            Some("no payload")
        } else if s.lost {
            Some("tshark saw segments missing")
        } else if s.payload_after_reset {
            // The host that reset accepts none of these bytes, and sluice
            // ends the flow at the RST (DESTROYED reason=rst); tshark's
            // follow does not look at flags and appends them anyway.
            Some("payload on or after an RST")
        } else if !s.complete() && !incomplete_too {
            Some("incomplete in tshark (no handshake, or no FIN or RST)")
        } else {
            None
        };
        if let Some(reason) = skip {
            tally.skip(reason);
            continue;
        }
        let followed = followed
            .get(stream)
            .unwrap_or_else(|| panic!("{name}: tshark's follow output lacks stream {stream}"));
        let Some(f) = followed else {
            // Its packets' TCP headers are bogus (a fuzzed capture), which
            // tshark's follow tap ignores.
            tally.skip("tshark could not follow it");
            continue;
        };
        let key = unordered(f.nodes[0], f.nodes[1]);
        if theirs[&key] > 1 {
            tally.skip("4-tuple repeated in tshark");
            continue;
        }
        let d = match ours.get(&key).map(Vec::as_slice) {
            Some([d]) => d,
            Some(_) => {
                tally.skip("4-tuple repeated in sluice (port reuse, VLANs or idle timeout)");
                continue;
            }
            None => {
                tally.compared += 1;
                tally.mismatches.push(format!(
                    "{name} stream {stream} {}:{} - {}:{}: sluice delivered no flow",
                    f.nodes[0].0, f.nodes[0].1, f.nodes[1].0, f.nodes[1].1
                ));
                continue;
            }
        };
        tally.compared += 1;
        // tshark's node 0 sent the first packet; sluice's client is the
        // one that sent the SYN, so the two may be swapped.
        let order = if f.nodes[0] == d.client { [0, 1] } else { [1, 0] };
        let mut differ = Vec::new();
        for (node, side) in order.into_iter().enumerate() {
            let (a, b) = (&d.bytes[side], &f.bytes[node]);
            if a != b {
                let at = a
                    .iter()
                    .zip(b)
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                let (from, to) = if side == 0 {
                    (d.client, d.server)
                } else {
                    (d.server, d.client)
                };
                differ.push(format!(
                    "{}:{} -> {}:{}: sluice {} bytes{}, tshark {}, first difference at byte {at}",
                    from.0,
                    from.1,
                    to.0,
                    to.1,
                    a.len(),
                    if d.gap[side] { " (after a GAP)" } else { "" },
                    b.len()
                ));
            }
        }
        if differ.is_empty() {
            tally.equal += 1;
        } else {
            tally
                .mismatches
                .push(format!("{name} stream {stream}: {}", differ.join("; ")));
        }
    }
    tally
}

/// Runs `sluice abstract` on one capture, reads both TCP interfaces to the
/// end, and checks the run: exit status 0 or 3, no panic, no event dropped.
fn abstract_capture(capture: &Path, config: &Path, name: &str) -> Vec<Delivered> {
    // UNIX socket paths are limited to 107 bytes: a short directory.
    let dir = tempfile::Builder::new()
        .prefix("o")
        .tempdir_in("/tmp")
        .expect("a socket directory");
    let stats = dir.path().join("s.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("abstract")
        .arg("-r")
        .arg(capture)
        .arg("--config")
        .arg(config)
        .arg("--dir")
        .arg(dir.path())
        .args(["--wait", "30s", "--stats"])
        .arg(&stats)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    // A consumer only gets the flows routed after it connected, and
    // `--wait` waits for `tcp/all` only: `tcp/default` must come first.
    let readers = ["tcp/default", "tcp/all"].map(|iface| {
        let mut socket = connect(&mut child, &dir.path().join(iface), name);
        std::thread::spawn(move || {
            let mut raw = Vec::new();
            socket.read_to_end(&mut raw).expect("the interface reads to its end");
            raw
        })
    });
    let output = child.wait_with_output().expect("sluice runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 3)) && !stderr.contains("panicked"),
        "{name}: sluice abstract {}: {stderr}",
        output.status
    );
    let mut delivered = Vec::new();
    for (reader, iface) in readers.into_iter().zip(["tcp/default", "tcp/all"]) {
        let raw = reader.join().expect("a reader thread");
        parse_events(&raw, &mut delivered).unwrap_or_else(|e| panic!("{name}: {iface}: {e}"));
    }
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stats).expect("the stats file reads")).expect("the stats are JSON");
    for iface in stats["interfaces"].as_array().expect("an interface list") {
        assert_eq!(iface["dropped_events"], 0, "{name}: events dropped: {iface}");
    }
    delivered
}

/// Connects to an interface once sluice has created it.
fn connect(child: &mut Child, path: &Path, name: &str) -> UnixStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(socket) = UnixStream::connect(path) {
            return socket;
        }
        if let Some(status) = child.try_wait().expect("sluice's status") {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            panic!(
                "{name}: sluice abstract ended ({status}) before {} existed: {stderr}",
                path.display()
            );
        }
        assert!(Instant::now() < deadline, "{name}: {} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Splits one interface's byte stream into events and adds each flow's
/// bodies to `flows`. Events follow their flow's CREATED on the same
/// interface; a 4-tuple seen again (port reuse) starts a new flow.
fn parse_events(mut raw: &[u8], flows: &mut Vec<Delivered>) -> Result<(), String> {
    let mut current: HashMap<(Endpoint, Endpoint), usize> = HashMap::new();
    while !raw.is_empty() {
        let end = raw
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("a header without its newline")?;
        let line = std::str::from_utf8(&raw[..end]).map_err(|_| "a header that is not ASCII")?;
        raw = &raw[end + 1..];
        let fields: HashMap<&str, &str> = line.split(',').filter_map(|kv| kv.split_once('=')).collect();
        let get = |k: &str| {
            fields
                .get(k)
                .copied()
                .ok_or_else(|| format!("`{k}` missing in `{line}`"))
        };
        let endpoint = |ip: &str, port: &str| -> Result<Endpoint, String> {
            let ip = get(ip)?.parse().map_err(|_| format!("bad address in `{line}`"))?;
            let port = get(port)?.parse().map_err(|_| format!("bad port in `{line}`"))?;
            Ok((ip, port))
        };
        let (client, server) = (endpoint("ip1", "port1")?, endpoint("ip2", "port2")?);
        let event = get("event")?;
        if event == "CREATED" {
            current.insert((client, server), flows.len());
            flows.push(Delivered {
                client,
                server,
                bytes: [Vec::new(), Vec::new()],
                gap: [false; 2],
            });
            continue;
        }
        let flow = current
            .get(&(client, server))
            .map(|&i| &mut flows[i])
            .ok_or_else(|| format!("an event before its CREATED: `{line}`"))?;
        let side = || match get("from") {
            Ok("1") => Ok(0),
            Ok("2") => Ok(1),
            _ => Err(format!("bad `from` in `{line}`")),
        };
        match event {
            "DATA" => {
                let len: usize = get("len")?.parse().map_err(|_| format!("bad `len` in `{line}`"))?;
                let body = raw
                    .get(..len)
                    .ok_or_else(|| format!("a body cut short after `{line}`"))?;
                flow.bytes[side()?].extend_from_slice(body);
                raw = &raw[len..];
            }
            "GAP" => flow.gap[side()?] = true,
            "DESTROYED" => {}
            other => return Err(format!("unknown event `{other}`")),
        }
    }
    Ok(())
}

/// Every TCP stream tshark finds, with its completeness, lost segments and
/// payload.
fn tshark_streams(capture: &Path) -> BTreeMap<u32, StreamInfo> {
    let output = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(capture)
        .args(["-Y", "tcp", "-T", "fields"])
        .args([
            "-e",
            "tcp.stream",
            "-e",
            "tcp.completeness",
            "-e",
            "tcp.analysis.lost_segment",
        ])
        .args([
            "-e",
            "tcp.analysis.ack_lost_segment",
            "-e",
            "tcp.len",
            "-e",
            "tcp.flags.reset",
        ])
        .stderr(Stdio::null())
        .output()
        .expect("tshark runs");
    // tshark's status is not checked: it reads what it can of the fuzzed
    // captures and complains about the rest.
    let mut streams: BTreeMap<u32, StreamInfo> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let [stream, completeness, lost, ack_lost, len, reset] = cols[..] else {
            continue;
        };
        // Packets with several TCP headers (an ICMP error quoting one) list
        // a value per header; the analysis flags then apply to each.
        let completeness: Vec<&str> = completeness.split(',').collect();
        let len: Vec<&str> = len.split(',').collect();
        let reset: Vec<&str> = reset.split(',').collect();
        for (i, stream) in stream.split(',').enumerate() {
            let Ok(stream) = stream.parse() else { continue };
            let s = streams.entry(stream).or_default();
            s.completeness |= completeness.get(i).and_then(|c| c.parse().ok()).unwrap_or(0);
            s.lost |= !lost.is_empty() || !ack_lost.is_empty();
            let len = len.get(i).and_then(|l| l.parse::<u64>().ok()).unwrap_or(0);
            s.payload += len;
            s.reset |= reset.get(i) == Some(&"1");
            s.payload_after_reset |= s.reset && len > 0;
        }
    }
    streams
}

/// `tshark -z follow,tcp,raw,N` for the given streams.
fn tshark_follow(capture: &Path, streams: &[u32]) -> HashMap<u32, Option<Followed>> {
    let mut followed = HashMap::new();
    for batch in streams.chunks(FOLLOW_BATCH) {
        let mut command = Command::new("tshark");
        command.arg("-n").arg("-r").arg(capture).arg("-q");
        for stream in batch {
            command.arg("-z").arg(format!("follow,tcp,raw,{stream}"));
        }
        let output = command.stderr(Stdio::null()).output().expect("tshark runs");
        parse_follow(&String::from_utf8_lossy(&output.stdout), &mut followed);
    }
    followed
}

/// Parses blocks of `Filter: tcp.stream eq N`, `Node 0: ip:port`,
/// `Node 1: ip:port`, then one hex line per segment, node 1's indented by
/// a tab.
fn parse_follow(text: &str, followed: &mut HashMap<u32, Option<Followed>>) {
    let node = |line: &str| -> Option<Endpoint> {
        let (ip, port) = line.rsplit_once(':')?;
        let ip = ip.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
        Some((ip, port.parse().ok()?))
    };
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(stream) = line.strip_prefix("Filter: tcp.stream eq ") else {
            continue;
        };
        let stream: u32 = stream.trim().parse().expect("a stream number");
        let mut nodes = [None, None];
        for (i, prefix) in ["Node 0: ", "Node 1: "].into_iter().enumerate() {
            nodes[i] = lines.next().and_then(|l| l.strip_prefix(prefix)).and_then(node);
        }
        let [Some(a), Some(b)] = nodes else {
            followed.insert(stream, None);
            continue;
        };
        let mut bytes = [Vec::new(), Vec::new()];
        while let Some(line) = lines.next_if(|l| !l.starts_with("====")) {
            let (side, hex) = match line.strip_prefix('\t') {
                Some(hex) => (1, hex),
                None => (0, line),
            };
            bytes[side].extend(
                hex.as_bytes()
                    .chunks(2)
                    .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("hex"), 16).expect("hex")),
            );
        }
        followed.insert(stream, Some(Followed { nodes: [a, b], bytes }));
    }
}
