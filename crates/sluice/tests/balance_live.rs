//! `sluice balance -i`: network namespaces as machines. A sender, a
//! balancer with one input veth and four cell veths (and, inline, an
//! output veth), four cells each running `sluice probe`. The generated mix
//! and the worst case go through at 20 kpps: nothing may be lost, each
//! flow's packets (both directions) must be in exactly one cell, the cells
//! must share the mix evenly, and the cells' records together must be
//! those of one probe on the balancer's input. Inline, the output link
//! must receive every frame, in order.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_capture::CaptureFile;

use common::{SLUICE, run, succeeded};

const CELLS: usize = 4;

/// One topology at a time: six processes at 20 kpps already share two
/// cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The machines: namespaces `snd`, `bal`, `cell0`..`cell3` and `out`,
/// deleted when dropped. `snd`'s `s0` is `bal`'s `in0`; `bal`'s `c{i}` is
/// `cell{i}`'s `p0`; `bal`'s `out0` is `out`'s `o0`.
struct Machines {
    prefix: String,
}

impl Machines {
    fn create(tag: &str) -> Option<Machines> {
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if !is_root || Command::new("ip").arg("-V").output().is_err() {
            eprintln!("skipping: needs root and iproute2 to create network namespaces");
            return None;
        }
        let m = Machines {
            prefix: format!("sluice-{tag}-{}", std::process::id()),
        };
        let mut names = vec!["snd".to_string(), "bal".to_string(), "out".to_string()];
        names.extend((0..CELLS).map(|i| format!("cell{i}")));
        for n in &names {
            run("ip", &["netns", "add", &m.ns(n)]);
            m.exec(n, &["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
        }
        let mut pairs = vec![("snd", "s0".to_string(), "bal", "in0".to_string())];
        let cells: Vec<String> = (0..CELLS).map(|i| format!("cell{i}")).collect();
        for (i, cell) in cells.iter().enumerate() {
            pairs.push(("bal", format!("c{i}"), cell.as_str(), "p0".to_string()));
        }
        pairs.push(("bal", "out0".to_string(), "out", "o0".to_string()));
        for (a, link_a, b, link_b) in &pairs {
            let (ns_a, ns_b) = (m.ns(a), m.ns(b));
            run(
                "ip",
                &[
                    "-n", &ns_a, "link", "add", link_a, "type", "veth", "peer", "name", link_b, "netns", &ns_b,
                ],
            );
            run("ip", &["-n", &ns_a, "link", "set", link_a, "up"]);
            run("ip", &["-n", &ns_b, "link", "set", link_b, "up"]);
        }
        Some(m)
    }

    fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn exec(&self, ns: &str, args: &[&str]) {
        let mut all = vec!["netns", "exec"];
        let ns = self.ns(ns);
        all.push(&ns);
        all.extend_from_slice(args);
        run("ip", &all);
    }

    fn spawn(&self, ns: &str, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(ns), SLUICE])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        let mut names = vec!["snd".to_string(), "bal".to_string(), "out".to_string()];
        names.extend((0..CELLS).map(|i| format!("cell{i}")));
        for n in names {
            let _ = Command::new("ip").args(["netns", "del", &self.ns(&n)]).status();
        }
    }
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(child: Child) -> String {
    run("kill", &["-TERM", &child.id().to_string()]);
    succeeded(child)
}

/// Flows as (oriented key, packets and bytes each way), sorted: what one
/// probe and the cells must agree on whatever the clocks of their
/// captures.
fn flows(out: &Path) -> Vec<(String, [u64; 4])> {
    let text = std::fs::read_to_string(out.join("flows.jsonl")).unwrap_or_default();
    let mut flows: Vec<_> = text
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            let key = format!(
                "{} {}:{} > {}:{} vlan {} tunnel {}",
                r["l4"], r["src_ip"], r["src_port"], r["dst_ip"], r["dst_port"], r["vlan"], r["tunnel_id"]
            );
            let counts = ["c2s_packets", "c2s_bytes", "s2c_packets", "s2c_bytes"].map(|f| r[f].as_u64().unwrap());
            (key, counts)
        })
        .collect();
    flows.sort();
    flows
}

fn frames(path: &Path) -> Vec<Vec<u8>> {
    let file = CaptureFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.reader().unwrap().map(|p| p.data.to_vec()).collect()
}

/// Sends `packets` of `profile` through the balancer into the cells and
/// checks every rule; returns each cell's packets.
fn through_cells(profile: &str, packets: u64, inline: bool) -> Option<[u64; CELLS]> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let m = Machines::create(&format!("bal-{}", &profile[..3]))?;
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| -> PathBuf { dir.path().join(name) };
    let mut cells = Vec::new();
    for i in 0..CELLS {
        let out = d(&format!("cell{i}"));
        cells.push(m.spawn(
            &format!("cell{i}"),
            &["probe", "-i", "p0", "-q", "--workers", "1", "-o", s(&out)],
        ));
        wait_for(&out.join("probe.yaml"));
    }
    let whole = m.spawn(
        "bal",
        &["probe", "-i", "in0", "-q", "--workers", "1", "-o", s(&d("whole"))],
    );
    wait_for(&d("whole").join("probe.yaml"));
    let mut tap = None;
    if inline {
        let rec = d("inline");
        tap = Some(m.spawn("out", &["record", "-i", "o0", "-q", "--dir", s(&rec)]));
        wait_for(&rec.join("probe.yaml"));
    }
    let cell_links: Vec<String> = (0..CELLS).map(|i| format!("c{i}")).collect();
    let list = cell_links.join(",");
    let balance_out = d("balance");
    let mut args = vec!["balance", "-i", "in0", "--cells", &list, "-q", "-o", s(&balance_out)];
    if inline {
        args.extend(["--inline", "out0"]);
    }
    let balancer = m.spawn("bal", &args);
    wait_for(&d("balance").join("probe.yaml"));

    let (count, seed) = (packets.to_string(), "39".to_string());
    let sender = m.spawn(
        "snd",
        &[
            "gen",
            "--profile",
            profile,
            "--packets",
            &count,
            "--seed",
            &seed,
            "-i",
            "s0",
            "--rate",
            "20000pps",
        ],
    );
    succeeded(sender);
    std::thread::sleep(Duration::from_millis(500));
    stop(balancer);
    std::thread::sleep(Duration::from_millis(500));
    for cell in cells {
        stop(cell);
    }
    stop(whole);

    let summary = json(&d("balance").join("summary.json"));
    let report = &summary["balance"];
    assert_eq!(
        summary["capture"]["packets"], packets,
        "the balancer read every frame: {summary}"
    );
    assert_eq!(summary["drops"]["kernel_drops"], 0);
    let mut per_cell = [0u64; CELLS];
    for (i, slot) in per_cell.iter_mut().enumerate() {
        let counts = &report["cells"][i];
        assert_eq!(counts["redirect_failures"], 0, "{counts}");
        assert_eq!(counts["drops"], 0, "{counts}");
        *slot = counts["packets"].as_u64().unwrap();
        let cell = json(&d(&format!("cell{i}")).join("summary.json"));
        assert_eq!(cell["capture"]["packets"], *slot, "cell {i} received all it was sent");
        assert_eq!(cell["drops"]["kernel_drops"], 0, "cell {i}");
    }
    assert_eq!(per_cell.iter().sum::<u64>(), packets, "every frame in one cell");

    // Each flow in exactly one cell, both directions, as one probe saw it.
    let mut union = Vec::new();
    let mut keys = std::collections::BTreeMap::new();
    for i in 0..CELLS {
        for (key, counts) in flows(&d(&format!("cell{i}"))) {
            if let Some(other) = keys.insert(key.clone(), i) {
                assert_eq!(other, i, "flow {key} in cells {other} and {i}");
            }
            union.push((key, counts));
        }
    }
    union.sort();
    let one = flows(&d("whole"));
    assert!(one.len() > 100, "{} flows", one.len());
    assert_eq!(union.len(), one.len(), "the cells' records and one probe's");
    for (a, b) in union.iter().zip(&one) {
        assert_eq!(a, b, "a cell's flow and one probe's");
    }

    eprintln!(
        "{profile}: {packets} packets, {} flows, per cell {per_cell:?}",
        one.len()
    );
    if let Some(tap) = tap {
        std::thread::sleep(Duration::from_millis(300));
        stop(tap);
        assert_eq!(report["inline"]["packets"], packets, "{report}");
        let mix = dir.path().join("sent.pcap");
        run(
            SLUICE,
            &[
                "gen",
                "--profile",
                profile,
                "--packets",
                &count,
                "--seed",
                &seed,
                "-w",
                s(&mix),
            ],
        );
        let mut recorded = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(d("inline"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
            .collect();
        files.sort();
        for f in files {
            recorded.extend(frames(&f));
        }
        let sent = frames(&mix);
        assert_eq!(recorded.len(), sent.len(), "the inline link got every frame");
        assert!(recorded == sent, "the inline link got the frames in the order sent");
    }
    Some(per_cell)
}

#[test]
fn cells_share_the_mix_evenly_and_lose_nothing() {
    let Some(per_cell) = through_cells("mix", 40_000, false) else {
        return;
    };
    let mean = per_cell.iter().sum::<u64>() as f64 / CELLS as f64;
    for (i, &p) in per_cell.iter().enumerate() {
        assert!(
            (p as f64 - mean).abs() <= 0.1 * mean,
            "cell {i} got {p} packets, the mean is {mean}: {per_cell:?}"
        );
    }
}

#[test]
fn the_worst_case_goes_through_inline_in_order() {
    through_cells("worst-case", 20_000, true);
}

/// A counter of a namespace's interface, from its sysfs.
fn link_counter(m: &Machines, ns: &str, link: &str, counter: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &m.ns(ns), "cat"])
        .arg(format!("/sys/class/net/{link}/statistics/{counter}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|e| {
        panic!(
            "{ns}'s {link} {counter}: {e} ({})",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `/metrics` of a server in a namespace, through curl there; None
/// without curl.
fn scrape(m: &Machines, ns: &str, addr: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", &m.ns(ns), "curl", "-sf", "--max-time", "10"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A metric's value in a scrape (the sum over its label sets).
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Frames the XDP program passes to the user-space path: `arp` ARP
/// requests (not IP) and `gre` GRE packets over IPv4 (a tunnel), from the
/// protocols' layouts.
fn passed_frames(arp: usize, gre: usize) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let eth = |ethertype: u16| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    };
    for i in 0..arp {
        let mut f = eth(0x0806);
        // Ethernet, IPv4, request; sender 10.9.0.1, target 10.9.1.i.
        f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0x01, 10, 9, 0, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&[10, 9, 1, i as u8]);
        f.resize(60, 0);
        frames.push(f);
    }
    for i in 0..gre {
        let mut f = eth(0x0800);
        // IPv4, 20-byte header, protocol 47 (GRE), then GRE carrying
        // IPv4 with no payload.
        let total: u16 = 20 + 4;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, i as u8, 0, 0, 64, 47, 0, 0, 10, 9, 0, 1, 10, 9, 0, 2]);
        f.extend_from_slice(&[0, 0, 0x08, 0]);
        f.resize(60, 0);
        frames.push(f);
    }
    frames
}

/// Sends raw frames on a namespace's interface (a packet socket, through
/// python3); false when python3 cannot.
fn send_raw(m: &Machines, ns: &str, link: &str, frames: &[Vec<u8>]) -> bool {
    use std::io::Write;
    let script = format!(
        "import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('{link}',0))\nfor l in sys.stdin:\n    s.send(bytes.fromhex(l.strip()))\n"
    );
    let Ok(mut child) = Command::new("ip")
        .args(["netns", "exec", &m.ns(ns), "python3", "-c", &script])
        .stdin(Stdio::piped())
        .spawn()
    else {
        return false;
    };
    let mut input = child.stdin.take().unwrap();
    for f in frames {
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        writeln!(input, "{hex}").unwrap();
    }
    drop(input);
    child.wait().is_ok_and(|s| s.success())
}

/// `sluice balance --xdp`, the program attached in generic mode to the
/// balancer's input veth: every frame the sender sent is counted once by
/// the fast path (redirected to a cell, or passed to the user-space path
/// by reason), in summary.json and in /metrics; what it passed is what the
/// user-space path read; each cell's link received what the two paths sent
/// it; nothing failed.
#[test]
fn the_xdp_fast_path_counts_every_frame_in_the_summary_and_the_metrics() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(m) = Machines::create("xdp") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("balance");
    m.exec("bal", &["ip", "link", "set", "lo", "up"]);
    let addr = "127.0.0.1:9739";
    let balancer = m.spawn(
        "bal",
        &[
            "balance",
            "-i",
            "in0",
            "--cells",
            "c0,c1,c2,c3",
            "--xdp-mode",
            "generic",
            "-o",
            s(&out),
            "--metrics",
            addr,
        ],
    );
    wait_for(&out.join("probe.yaml"));
    let packets: u64 = 10_000;
    let sender = m.spawn(
        "snd",
        &[
            "gen",
            "--profile",
            "mix",
            "--packets",
            &packets.to_string(),
            "--seed",
            "39",
            "-i",
            "s0",
            "--rate",
            "20000pps",
        ],
    );
    succeeded(sender);
    let (arp, gre) = (50, 30);
    let extra = if send_raw(&m, "snd", "s0", &passed_frames(arp, gre)) {
        (arp + gre) as u64
    } else {
        eprintln!("not sending ARP and GRE frames: no python3");
        0
    };
    let packets = packets + extra;
    // The counts are published at least once a second: wait until the
    // metrics show every frame (or give up and let the summary tell).
    let start = Instant::now();
    let mut scraped = None;
    while start.elapsed() < Duration::from_secs(30) {
        match scrape(&m, "bal", addr) {
            Some(text) => {
                let seen = metric(&text, "sluice_balance_xdp_packets_total")
                    + metric(&text, "sluice_balance_xdp_passed_total");
                let done = seen >= packets;
                scraped = Some(text);
                if done {
                    break;
                }
            }
            None if start.elapsed() > Duration::from_secs(10) => break,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let stderr = stop(balancer);
    let summary = json(&out.join("summary.json"));
    let xdp = &summary["balance"]["xdp"];
    if xdp["mode"] == "none" {
        eprintln!("skipping: the XDP program did not attach: {} ({stderr})", xdp["error"]);
        return;
    }
    assert_eq!(xdp["mode"], "generic", "{xdp}");
    assert_eq!(xdp["interface"], "in0", "{xdp}");
    let cells: Vec<u64> = (0..CELLS)
        .map(|i| {
            assert_eq!(xdp["cells"][i]["cell"], format!("c{i}"), "{xdp}");
            xdp["cells"][i]["packets"].as_u64().unwrap()
        })
        .collect();
    let redirected: u64 = cells.iter().sum();
    let passed: u64 = xdp["passed"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    eprintln!("xdp: {redirected} redirected {cells:?}, {passed} passed: {xdp}");
    assert_eq!(redirected + passed, packets, "every frame counted once by XDP: {xdp}");
    assert!(cells.iter().all(|&n| n > 0), "every cell got frames: {cells:?}");
    assert_eq!(xdp["redirect_failures"], 0, "{xdp}");
    assert_eq!(xdp["passed"]["no-cell"], 0, "{xdp}");
    if extra > 0 {
        assert_eq!(xdp["passed"]["not-ip"], arp as u64, "{xdp}");
        assert_eq!(xdp["passed"]["tunnel"], gre as u64, "{xdp}");
    }
    // What XDP passed, and only that, reached the user-space path.
    let report = &summary["balance"];
    assert_eq!(summary["capture"]["packets"], passed, "{summary}");
    let user: Vec<u64> = (0..CELLS)
        .map(|i| report["cells"][i]["packets"].as_u64().unwrap())
        .collect();
    assert_eq!(user.iter().sum::<u64>(), passed, "{report}");
    // Each cell's link got both paths' frames.
    for i in 0..CELLS {
        let received = link_counter(&m, &format!("cell{i}"), "p0", "rx_packets");
        assert_eq!(received, cells[i] + user[i], "cell {i}: {report}");
    }
    match scraped {
        Some(text) => {
            for (i, n) in cells.iter().enumerate() {
                let line = format!(r#"sluice_balance_xdp_packets_total{{cell="c{i}"}} {n}"#);
                assert!(text.contains(&line), "{line} missing from:\n{text}");
            }
            assert_eq!(metric(&text, "sluice_balance_xdp_passed_total"), passed);
            assert_eq!(metric(&text, "sluice_balance_xdp_redirect_failures_total"), 0);
        }
        None => eprintln!("not checking /metrics: no curl, or it could not reach {addr}"),
    }
}

/// Processes that must not outlive a failing test: killed when dropped,
/// unless stopped before.
#[derive(Default)]
struct Running(Vec<Option<Child>>);

impl Running {
    fn add(&mut self, child: Child) -> usize {
        self.0.push(Some(child));
        self.0.len() - 1
    }

    fn stop(&mut self, index: usize) -> String {
        stop(self.0[index].take().expect("stopped once"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for child in self.0.iter_mut().filter_map(Option::take) {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A frame's flow, the same whichever way it goes (its key or its reverse,
/// the smaller), or None for frames with no flow and later fragments
/// (whose ports are their first fragment's).
fn either_way(frame: &[u8]) -> Option<String> {
    let d = sluice_wire::decode(sluice_wire::LinkType::Ethernet, frame).ok()?;
    if matches!(d.fragment, sluice_wire::Fragment::Later { .. }) {
        return None;
    }
    let (a, b) = (format!("{:?}", d.key), format!("{:?}", d.key.reversed()));
    Some(a.min(b))
}

/// `sluice balance --inline OUT --xdp`, the program attached in generic mode
/// to the balancer's input veth: OUT receives every frame, in the order
/// sent (the mix the program broadcasts, then ARP and GRE frames it passes,
/// which the user-space path forwards); each frame is in exactly one
/// cell's capture, each flow's frames (both directions) in one cell; the
/// program's counts and the user-space path's add up to what was sent.
#[test]
fn inline_xdp_sends_every_frame_to_out_in_order_and_each_flow_to_one_cell() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(m) = Machines::create("xin") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| -> PathBuf { dir.path().join(name) };
    // Every cell and OUT record what their link receives.
    let mut running = Running::default();
    let mut recorders = Vec::new();
    let mut taps: Vec<(String, &str)> = (0..CELLS).map(|i| (format!("cell{i}"), "p0")).collect();
    taps.push(("out".to_string(), "o0"));
    for (ns, link) in &taps {
        let rec = d(ns);
        recorders.push(running.add(m.spawn(ns, &["record", "-i", link, "-q", "--dir", s(&rec)])));
        wait_for(&rec.join("probe.yaml"));
    }
    let out = d("balance");
    let balancer = running.add(m.spawn(
        "bal",
        &[
            "balance",
            "-i",
            "in0",
            "--cells",
            "c0,c1,c2,c3",
            "--inline",
            "out0",
            "--xdp-mode",
            "generic",
            "-q",
            "-o",
            s(&out),
        ],
    ));
    wait_for(&out.join("probe.yaml"));
    let packets: u64 = 10_000;
    let (count, seed) = (packets.to_string(), "39".to_string());
    let gen_args = ["gen", "--profile", "mix", "--packets", &count, "--seed", &seed];
    let mut args = gen_args.to_vec();
    args.extend(["-i", "s0", "--rate", "10000pps"]);
    succeeded(m.spawn("snd", &args));
    // Frames the program passes, sent after the mix so that OUT's order is
    // the order sent whichever path a frame takes.
    std::thread::sleep(Duration::from_millis(500));
    let raw = passed_frames(50, 30);
    let raw = if send_raw(&m, "snd", "s0", &raw) {
        raw
    } else {
        eprintln!("not sending ARP and GRE frames: no python3");
        Vec::new()
    };
    // Wait until OUT's and the cells' links have received every frame (or
    // give up and let the checks below tell).
    let expected = packets + raw.len() as u64;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let on_out = link_counter(&m, "out", "o0", "rx_packets");
        let in_cells: u64 = (0..CELLS)
            .map(|i| link_counter(&m, &format!("cell{i}"), "p0", "rx_packets"))
            .sum();
        if on_out >= expected && in_cells >= expected {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_millis(500));
    let stderr = running.stop(balancer);
    std::thread::sleep(Duration::from_millis(500));
    for rec in recorders {
        running.stop(rec);
    }

    let summary = json(&out.join("summary.json"));
    let report = &summary["balance"];
    let xdp = &report["xdp"];
    if xdp["mode"] == "none" {
        eprintln!("skipping: the XDP program did not attach: {} ({stderr})", xdp["error"]);
        return;
    }
    assert_eq!(xdp["mode"], "generic", "{xdp}");

    let mut sent = {
        let mix = d("sent.pcap");
        let mut args = gen_args.to_vec();
        args.extend(["-w", s(&mix)]);
        run(SLUICE, &args);
        frames(&mix)
    };
    sent.extend(raw.iter().cloned());
    let recorded = |ns: &str| -> Vec<Vec<u8>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(d(ns))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
            .collect();
        files.sort();
        files.iter().flat_map(|f| frames(f)).collect()
    };

    // The program's counts and the user-space path's.
    let xdp_cells: Vec<u64> = (0..CELLS)
        .map(|i| xdp["cells"][i]["packets"].as_u64().unwrap())
        .collect();
    let passed: u64 = xdp["passed"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    eprintln!("inline xdp: {xdp_cells:?} redirected, {passed} passed: {xdp}");
    assert_eq!(
        xdp_cells.iter().sum::<u64>() + passed,
        sent.len() as u64,
        "every frame counted once by XDP: {xdp}"
    );
    assert!(xdp_cells.iter().all(|&n| n > 0), "every cell got frames: {xdp_cells:?}");
    assert_eq!(xdp["redirect_failures"], 0, "{xdp}");
    assert!(passed >= raw.len() as u64, "{xdp}");
    assert_eq!(
        summary["capture"]["packets"], passed,
        "the user-space path read what XDP passed: {summary}"
    );
    assert_eq!(summary["drops"]["kernel_drops"], 0, "{summary}");
    assert_eq!(report["inline"]["packets"], passed, "{report}");
    assert_eq!(report["inline"]["redirect_failures"], 0, "{report}");

    // OUT: every frame, in the order sent.
    let on_out = recorded("out");
    assert_eq!(on_out.len(), sent.len(), "OUT received every frame: {report}");
    assert!(on_out == sent, "OUT received the frames in the order sent");

    // The cells: each frame in exactly one, each flow in one.
    let mut unplaced: std::collections::HashMap<&[u8], i64> = std::collections::HashMap::new();
    for f in &sent {
        *unplaced.entry(f.as_slice()).or_default() += 1;
    }
    let mut flow_cell = std::collections::BTreeMap::new();
    let cell_frames: Vec<Vec<Vec<u8>>> = (0..CELLS).map(|i| recorded(&format!("cell{i}"))).collect();
    for (i, frames) in cell_frames.iter().enumerate() {
        let user = report["cells"][i]["packets"].as_u64().unwrap();
        assert_eq!(
            frames.len() as u64,
            xdp_cells[i] + user,
            "cell {i} received what the two paths sent it: {report}"
        );
        for f in frames {
            let left = unplaced.entry(f.as_slice()).or_default();
            *left -= 1;
            assert!(*left >= 0, "cell {i} received a frame not sent, or once too often");
            if let Some(flow) = either_way(f)
                && let Some(other) = flow_cell.insert(flow.clone(), i)
            {
                assert_eq!(other, i, "flow {flow} in cells {other} and {i}");
            }
        }
    }
    assert!(unplaced.values().all(|&n| n == 0), "every frame sent is in a cell");
    assert!(flow_cell.len() > 100, "{} flows", flow_cell.len());
}
