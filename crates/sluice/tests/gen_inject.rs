//! `sluice gen -i` sends the generator's frames on an interface at a known
//! rate. Two network namespaces joined by a veth pair: the sender in one,
//! tcpdump in the other, and what tcpdump captured must be exactly what
//! `sluice gen -w` writes, on the schedule asked for.
//!
//! Needs root (namespaces, raw sockets), `ip` and `tcpdump`; without them
//! the tests say why on stderr and pass.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sluice_capture::CaptureFile;

/// The tests pace frames by spinning on a core; two at once on a small
/// machine would disturb each other's schedule.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");

/// Why these tests cannot run here, if they cannot.
fn missing_requirement() -> Option<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some("not root (network namespaces and raw sockets need it)");
    }
    let runs = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !runs("ip", "-V") {
        return Some("`ip` (iproute2) is not available");
    }
    if !runs("tcpdump", "--version") {
        return Some("`tcpdump` is not available");
    }
    None
}

fn run(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Two namespaces, `sender` with `vethA` and `receiver` with `vethB`, the
/// two ends of one veth pair. Dropping it deletes the namespaces, and the
/// pair with them, even when the test has failed.
struct VethPair {
    namespaces: Vec<String>,
}

impl VethPair {
    fn new(test: &str) -> VethPair {
        let mut pair = VethPair { namespaces: Vec::new() };
        for side in ["a", "b"] {
            let name = format!("sluice-{test}-{}-{side}", std::process::id());
            run("ip", &["netns", "add", &name]);
            pair.namespaces.push(name.clone());
            // No IPv6 means no router solicitations or duplicate address
            // detection on the link: the frames on it are the test's only.
            // (Without IPv6 in the kernel the file is absent, and so are they.)
            let _ = Command::new("ip")
                .args(["netns", "exec", &name, "sh", "-c"])
                .arg("echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
                .stderr(Stdio::null())
                .status();
        }
        let (a, b) = (pair.sender().to_string(), pair.receiver().to_string());
        run(
            "ip",
            &[
                "link", "add", "vethA", "netns", &a, "type", "veth", "peer", "name", "vethB", "netns", &b,
            ],
        );
        run("ip", &["-n", &a, "link", "set", "vethA", "up"]);
        run("ip", &["-n", &b, "link", "set", "vethB", "up"]);
        // The carrier comes up a moment after the link does, and the
        // sender refuses an interface without one.
        let deadline = Instant::now() + Duration::from_secs(10);
        for (ns, dev) in [(&a, "vethA"), (&b, "vethB")] {
            loop {
                let out = run("ip", &["-n", ns, "-o", "link", "show", dev]);
                if String::from_utf8_lossy(&out.stdout).contains("state UP") {
                    break;
                }
                assert!(Instant::now() < deadline, "{dev} never got a carrier");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        pair
    }

    fn sender(&self) -> &str {
        &self.namespaces[0]
    }

    fn receiver(&self) -> &str {
        &self.namespaces[1]
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        for name in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// tcpdump writing what arrives on `vethB` to a file.
struct Capture {
    child: Child,
    path: PathBuf,
    /// The rest of tcpdump's stderr, read as it comes so it never blocks.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Capture {
    fn start(pair: &VethPair, path: &Path) -> Capture {
        let mut child = Command::new("ip")
            .args(["netns", "exec", pair.receiver(), "tcpdump", "-i", "vethB", "-n", "-U"])
            // A 16 MB ring of packed blocks. Not immediate mode, whose ring
            // of fixed-size slots drops frames whenever tcpdump is kept off
            // the CPU for a few milliseconds; without it, the last block
            // reaches the file within tcpdump's 1 s timeout.
            .args(["--time-stamp-precision=nano", "-B", "16384", "-w"])
            .arg(path)
            // Every generated frame is from or to this address: whatever
            // else the kernel might put on the link stays out.
            .args(["ether", "host", "02:00:00:00:00:0a"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        // tcpdump says it is listening once its socket is bound: frames
        // sent from then on are captured.
        while !seen.contains("listening on") {
            if stderr.read_line(&mut seen).unwrap_or(0) == 0 {
                let _ = child.wait();
                panic!("tcpdump stopped before listening: {seen}");
            }
        }
        let stderr = std::thread::spawn(move || {
            let _ = stderr.read_to_string(&mut seen);
            seen
        });
        Capture {
            child,
            path: path.to_path_buf(),
            stderr: Some(stderr),
        }
    }

    /// Stops tcpdump once its file has `bytes` bytes (it writes each packet
    /// as it reads it), or after 10 s, and returns its stderr.
    fn stop_at(mut self, bytes: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(&self.path).map_or(0, |m| m.len()) < bytes && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.interrupt();
        let status = self.child.wait().expect("tcpdump ends");
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "tcpdump: {stderr}");
        stderr
    }

    /// SIGINT, on which tcpdump finishes its file; `ip netns exec` has
    /// become tcpdump, so the child's pid is tcpdump's.
    fn interrupt(&self) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!("kill -INT {}", self.child.id()))
            .status();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.interrupt();
            let _ = self.child.wait();
        }
    }
}

/// `(timestamp ns, frame)` of every packet of a capture file.
fn frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let file = CaptureFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = file.reader().unwrap();
    let frames = reader.by_ref().map(|p| (p.ts_ns, p.data.to_vec())).collect();
    assert!(reader.warnings().is_empty(), "{:?}", reader.warnings());
    frames
}

/// The frames `sluice gen -w` writes for this profile and count.
fn reference(dir: &Path, profile: &str, packets: u64) -> (PathBuf, Vec<Vec<u8>>) {
    let path = dir.join(format!("{profile}.pcap"));
    let packets = packets.to_string();
    let path_arg = path.to_str().unwrap();
    run(
        SLUICE,
        &["gen", "--profile", profile, "--packets", &packets, "-w", path_arg],
    );
    let frames = frames(&path).into_iter().map(|(_, f)| f).collect();
    (path, frames)
}

/// Runs `sluice gen ARGS -i vethA` in the sender's namespace; returns its
/// report line and the frames and seconds it says it sent.
fn send(pair: &VethPair, args: &[&str]) -> (String, u64, f64) {
    let out = Command::new("ip")
        .args(["netns", "exec", pair.sender(), SLUICE, "gen", "-i", "vethA"])
        .args(args)
        .output()
        .expect("sluice runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sluice gen -i: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("sent on vethA: "))
        .unwrap_or_else(|| panic!("no report: {stderr}"))
        .to_string();
    let number_before = |marker: &str| -> f64 {
        let before = line.split(marker).next().unwrap();
        let number = before.rsplit(' ').next().unwrap();
        number
            .parse()
            .unwrap_or_else(|_| panic!("no number before {marker:?} in {line}"))
    };
    let frames = number_before(" frames") as u64;
    let seconds: f64 = line
        .split(" in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no time in {line}"));
    assert!(line.contains(" 0 errors"), "{line}");
    (line, frames, seconds)
}

fn assert_same_frames(captured: &[(u64, Vec<u8>)], expected: &[Vec<u8>]) {
    for (i, ((_, got), want)) in captured.iter().zip(expected).enumerate() {
        assert!(
            got == want,
            "frame {i} differs: captured {} bytes, generated {} bytes",
            got.len(),
            want.len()
        );
    }
}

#[test]
fn twenty_thousand_mix_frames_arrive_whole_in_order_at_the_rate_asked() {
    if let Some(why) = missing_requirement() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (reference_path, expected) = reference(dir.path(), "mix", 20_000);
    let pair = VethPair::new("mix");
    let capture = Capture::start(&pair, &dir.path().join("captured.pcap"));

    let (line, sent, seconds) = send(&pair, &["--profile", "mix", "--packets", "20000", "--rate", "20000pps"]);

    // tcpdump writes nanosecond pcap as `sluice gen -w` does: the same
    // frames make a file of the same size.
    let tcpdump = capture.stop_at(std::fs::metadata(&reference_path).unwrap().len());
    assert_eq!(sent, 20_000, "{line}");
    // 20,000 frames at 20,000 a second: 1 s. Not a measurement of the
    // machine, only a check that the pacing is on and not far off.
    assert!((0.7..5.0).contains(&seconds), "{line}");
    let captured = frames(&dir.path().join("captured.pcap"));
    assert_eq!(captured.len(), 20_000, "tcpdump: {tcpdump}");
    assert_same_frames(&captured, &expected);
}

#[test]
fn a_paced_run_for_a_duration_spreads_its_frames_over_it() {
    if let Some(why) = missing_requirement() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // With no --packets the generator goes on until the duration ends; the
    // mix's first frames do not depend on how many follow.
    let (_, expected) = reference(dir.path(), "mix", 5_000);
    let pair = VethPair::new("pace");
    let capture = Capture::start(&pair, &dir.path().join("captured.pcap"));

    let (line, sent, _) = send(&pair, &["--profile", "mix", "--rate", "5000pps", "--duration", "1s"]);

    // A file header, then a record header and the frame for each frame sent.
    let size = 24
        + expected
            .iter()
            .take(sent as usize)
            .map(|f| 16 + f.len() as u64)
            .sum::<u64>();
    let tcpdump = capture.stop_at(size);
    let captured = frames(&dir.path().join("captured.pcap"));
    assert_eq!(
        captured.len() as u64,
        sent,
        "every frame sent arrives; tcpdump: {tcpdump}"
    );
    // Frames due at 0, 0.2, ..., 999.8 ms: 5,000, fewer only if the
    // machine stalled near the end.
    assert!((4_500..=5_000).contains(&sent), "{line}");
    assert_same_frames(&captured, &expected);

    let span = (captured.last().unwrap().0 - captured[0].0) as f64 / 1e9;
    assert!((0.8..1.05).contains(&span), "first to last frame: {span} s; {line}");
    // On a busy machine the sender is preempted now and then and catches
    // up in a burst, so gaps between frames say little; but every frame must
    // stay close to its place in the schedule, 200 µs after the one before.
    let first = captured[0].0 as i64;
    for (k, (ts, _)) in captured.iter().enumerate() {
        let lag = *ts as i64 - first - k as i64 * 200_000;
        assert!(
            lag.abs() < 100_000_000,
            "frame {k} is {lag} ns off its due time; {line}"
        );
    }
}
