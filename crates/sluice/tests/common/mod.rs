//! What the tests share: running `sluice` and reading back the records it
//! wrote, a pair of network namespaces joined by a veth pair, created by
//! the test and deleted even when it fails, running commands that must
//! succeed, and where nDPI's reference captures are.

#![allow(dead_code)] // Each test file uses its own part of this module.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

pub const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");

/// `sluice ARGS`, its output collected.
pub fn sluice<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(SLUICE).args(args).output().expect("sluice runs")
}

/// `sluice analyze INPUT -q -o OUT EXTRA...`, which must exit 0, or 3 (the
/// input had read warnings).
pub fn analyze(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let output = analyze_all(&[input], out, extra);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}: {}",
        input.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `sluice analyze INPUTS... -q -o OUT EXTRA...`, whatever its exit status.
pub fn analyze_all<P: AsRef<Path>>(inputs: &[P], out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&OsStr> = vec!["analyze".as_ref()];
    args.extend(inputs.iter().map(|p| p.as_ref().as_os_str()));
    args.extend(["-q".as_ref(), "-o".as_ref(), out.as_os_str()]);
    args.extend(extra.iter().map(OsStr::new));
    sluice(&args)
}

/// `sluice analyze INPUTS... -q -o OUT`, which must read them without a
/// warning (exit 0).
pub fn analyze_cleanly<P: AsRef<Path>>(inputs: &[P], out: &Path) {
    let output = analyze_all(inputs, out, &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Flows by their oriented 5-tuple and VLAN, with their packets and bytes
/// each way: what must not depend on where the packets came from.
pub fn flow_counts(records: &[Value]) -> BTreeMap<String, [u64; 4]> {
    records
        .iter()
        .map(|r| {
            let key = format!(
                "{} {}:{} > {}:{} vlan {}",
                r["l4"], r["src_ip"], r["src_port"], r["dst_ip"], r["dst_port"], r["vlan"]
            );
            let counts = ["c2s_packets", "c2s_bytes", "s2c_packets", "s2c_bytes"].map(|f| r[f].as_u64().unwrap());
            (key, counts)
        })
        .collect()
}

/// The objects of a JSON lines file.
pub fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The JSON flow records in `out`.
pub fn flow_records(out: &Path) -> Vec<Value> {
    jsonl(&out.join("flows.jsonl"))
}

/// Namespaces `a` and `b` joined by veth `va` (in `a`) and `vb` (in `b`),
/// IPv6 off so that the kernel sends nothing of its own; deleted when
/// dropped.
pub struct Namespaces {
    pub a: String,
    pub b: String,
}

impl Namespaces {
    /// `None`, with a message, when not root or without iproute2.
    pub fn create(tag: &str) -> Option<Namespaces> {
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if !is_root || Command::new("ip").arg("-V").output().is_err() {
            eprintln!("skipping: needs root and iproute2 to create network namespaces");
            return None;
        }
        let id = std::process::id();
        let ns = Namespaces {
            a: format!("sluice-{tag}-{id}-a"),
            b: format!("sluice-{tag}-{id}-b"),
        };
        run("ip", &["netns", "add", &ns.a]);
        run("ip", &["netns", "add", &ns.b]);
        run(
            "ip",
            &[
                "-n", &ns.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &ns.b,
            ],
        );
        for (name, link) in [(&ns.a, "va"), (&ns.b, "vb")] {
            ns.exec(name, &["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]);
            run("ip", &["-n", name, "link", "set", link, "up"]);
        }
        Some(ns)
    }

    /// Runs `args` in namespace `ns`; it must succeed.
    /// `sluice gen --profile mix` sending `packets` packets made with
    /// `seed` from `a` on `va`, at a pace the veth takes without loss;
    /// its standard error is piped for [`succeeded`].
    pub fn send_mix(&self, packets: u64, seed: u64) -> Child {
        let (packets, seed) = (packets.to_string(), seed.to_string());
        Command::new("ip")
            .args(["netns", "exec", &self.a, SLUICE, "gen", "--profile", "mix"])
            .args(["--packets", &packets, "--seed", &seed, "-i", "va", "--rate", "20000pps"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn exec(&self, ns: &str, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", ns];
        all.extend_from_slice(args);
        run("ip", &all)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs a program that must succeed, and returns its output.
pub fn run(program: &str, args: &[&str]) -> Output {
    let output = Command::new(program).args(args).output().expect("the program runs");
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Waits for a child that must succeed, and returns its standard error.
pub fn succeeded(child: Child) -> String {
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// A ramfs mounted on a temporary directory, unmounted when dropped. ramfs
/// has no direct I/O, so it refuses `O_DIRECT` (with `EINVAL`) on every
/// kernel, where tmpfs accepts it since Linux 6.6. Mounted in the test's
/// own mount namespace, so the commands that `ip netns exec` starts see it.
pub struct Ramfs {
    pub dir: tempfile::TempDir,
}

impl Ramfs {
    /// `None`, with a message, where it cannot be mounted.
    pub fn mount() -> Option<Ramfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "ramfs", "sluice-test"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status();
        if !mounted.is_ok_and(|s| s.success()) {
            eprintln!("skipping: mounting a ramfs needs root and mount(8)");
            return None;
        }
        Some(Ramfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// The pcap folder of nDPI's reference captures (`../shared/data/ndpi-dev`,
/// or `$NDPI_DEV_DIR`); `None`, with a message, when it is absent.
pub fn ndpi_pcaps() -> Option<PathBuf> {
    let dir = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    if dir.join("pcap").is_dir() {
        Some(dir.join("pcap"))
    } else {
        eprintln!("skipping: {} not found (set NDPI_DEV_DIR)", dir.display());
        None
    }
}

/// A directory for what a test file makes once and shares through a static.
/// Statics are never dropped, so a temporary directory there would outlive
/// every run: this one is fixed under the build's scratch space and emptied
/// by the next run instead.
pub fn shared_scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// What libpcap's own filter selects from `input`, written to `output` with
/// nanosecond timestamps kept: the reference for Sluice's filters.
pub fn tcpdump_select(input: &Path, output: &Path, expression: &str) {
    run(
        "tcpdump",
        &[
            "--time-stamp-precision=nano",
            "-r",
            input.to_str().unwrap(),
            "-w",
            output.to_str().unwrap(),
            expression,
        ],
    );
}

/// tshark's view of each frame of `files` (with a display filter, of those
/// it shows), in order: the time to the nanosecond, the wire length and
/// the captured length, tab-separated.
pub fn tshark_frames(files: &[PathBuf], display_filter: Option<&str>) -> Vec<String> {
    let mut frames = Vec::new();
    for file in files {
        let mut args = vec!["-r", file.to_str().unwrap()];
        if let Some(filter) = display_filter {
            args.extend(["-Y", filter]);
        }
        args.extend([
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
        ]);
        let output = run("tshark", &args);
        frames.extend(String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned));
    }
    frames
}

/// `sluice gen --profile mix` of `packets` packets with `seed`, written
/// once into the shared scratch folder `name` (for the tests of one binary
/// to share); its path.
pub fn shared_mix(name: &str, packets: u64, seed: u64) -> PathBuf {
    let path = shared_scratch(name).join("mix.pcap");
    let (packets, seed) = (packets.to_string(), seed.to_string());
    let args = ["gen", "--profile", "mix", "--packets", &packets, "--seed", &seed, "-w"];
    let mut all: Vec<&str> = args.to_vec();
    all.push(path.to_str().unwrap());
    run(SLUICE, &all);
    path
}

/// SYNs to 198.51.100.80 port 80 (where `gen --anomaly syn_flood` aims)
/// in a little-endian pcap of Ethernet frames.
pub fn flood_syns(path: &Path) -> u64 {
    let data = std::fs::read(path).unwrap();
    let mut at = 24;
    let mut n = 0;
    while at + 16 <= data.len() {
        let len = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &data[at + 16..at + 16 + len];
        at += 16 + len;
        if f.len() >= 14 + 20 + 14 && f[12..14] == [0x08, 0x00] && f[14 + 9] == 6 {
            let tcp = &f[14 + usize::from(f[14] & 0x0f) * 4..];
            if f[30..34] == [198, 51, 100, 80] && tcp[2..4] == 80u16.to_be_bytes() && tcp[13] & 0x12 == 0x02 {
                n += 1;
            }
        }
    }
    n
}
