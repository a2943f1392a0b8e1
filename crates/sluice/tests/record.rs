//! `sluice record` on a real interface: two network namespaces joined by a
//! veth pair, `sluice gen -i` sending on one end, `sluice record` writing
//! what arrives on the other. Every packet sent must be in the files (or
//! counted as dropped), the files must be valid captures with the flows
//! `sluice analyze` finds in the same traffic generated to a file, and a
//! recorder killed with SIGKILL must leave files that `sluice repair`
//! makes whole. Skipped, with a message, when not root or when `ip` is
//! missing; the namespaces go away even when a test fails.
//!
//! `sluice record -r` records nDPI's reference captures instead: the files
//! must hold exactly the frames tshark and Sluice's reader find in the
//! inputs, malformed inputs must give the warnings and exit status of
//! `sluice analyze`, and a filter, at recording or through `sluice
//! extract`, must select what tcpdump and tshark select.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sluice_store::{Index, index_path};

mod common;

use common::{Namespaces, Ramfs, SLUICE, flow_counts, run, succeeded, tshark_frames};

const PACKETS: u64 = 20_000;

impl Namespaces {
    /// Starts `sluice record -i vb -w DIR ARGS` in namespace `b`, and waits
    /// until its ring is surely open.
    fn record(&self, dir: &Path, args: &[&str]) -> Child {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.b, SLUICE, "record", "-i", "vb", "-w"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        child
    }
}

/// The recordings in `dir` (pcap or pcapng), in name order.
fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    files.sort();
    files
}

fn is_pcapng(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "pcapng")
}

/// Each packet's timestamp and the offset and length of its record (a
/// pcapng Enhanced Packet Block without options: 32 bytes, the data padded
/// to 4).
fn records(path: &Path) -> Vec<(u64, u64, u64)> {
    let file = sluice_capture::CaptureFile::open(path).unwrap();
    let length = |data: usize| match is_pcapng(path) {
        true => 32 + data.next_multiple_of(4) as u64,
        false => 16 + data as u64,
    };
    file.reader()
        .unwrap()
        .map(|p| (p.ts_ns, p.offset, length(p.data.len())))
        .collect()
}

fn capinfos_accepts(path: &Path) {
    let output = Command::new("capinfos")
        .arg("-c")
        .arg(path)
        .output()
        .expect("capinfos runs");
    assert!(
        output.status.success(),
        "capinfos {}: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The file's index holds every record once, in blocks that tile the file.
fn index_covers_every_record_once(path: &Path) {
    let index = Index::read(index_path(path)).unwrap();
    let records = records(path);
    // pcapng's header (a section header and an interface description)
    // ends where the first EPB starts; pcap's is 24 bytes.
    let mut at = match is_pcapng(path) {
        true => records[0].1,
        false => 24,
    };
    assert!(at >= 24);
    let mut next_record = records.iter().peekable();
    for block in &index.blocks {
        assert_eq!(block.offset, at, "{}: blocks tile the file", path.display());
        at += block.length;
        let inside: Vec<_> =
            std::iter::from_fn(|| next_record.next_if(|r| r.1 < block.offset + block.length)).collect();
        assert_eq!(
            inside.iter().map(|r| r.2).sum::<u64>(),
            block.length,
            "{}: a block is its whole records",
            path.display()
        );
        assert_eq!(inside.len() as u64, u64::from(block.packets));
        assert_eq!(inside.first().map(|r| r.0), Some(block.first_ts_ns));
        assert_eq!(inside.last().map(|r| r.0), Some(block.last_ts_ns));
    }
    assert_eq!(at, std::fs::metadata(path).unwrap().len());
    assert!(
        next_record.next().is_none(),
        "{}: records left out of the index",
        path.display()
    );
}

fn read_summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("record-summary.json")).unwrap()).unwrap()
}

fn file_system(dir: &Path) -> String {
    let output = run("stat", &["-f", "-c", "%T", dir.to_str().unwrap()]);
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Flows by their oriented 5-tuple, with their packets and bytes per
/// direction, as `sluice analyze` finds them in `inputs`.
fn flows(inputs: &[PathBuf], out: &Path) -> BTreeMap<String, [u64; 4]> {
    common::analyze_cleanly(inputs, out);
    flow_counts(&common::flow_records(out))
}

/// A directory on the disk the tests are built on, where O_DIRECT works
/// (unlike tmpfs, which /tmp may be).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn recording_keeps_every_packet_in_valid_files_with_the_flows_analyze_finds() {
    let Some(ns) = Namespaces::create("rec") else { return };
    let dir = disk_dir();
    let rec = dir.path().join("rec");
    let recorder = ns.record(&rec, &["--duration", "5s"]);
    succeeded(ns.send_mix(PACKETS, 5));
    let stderr = succeeded(recorder);
    assert!(stderr.contains("record vb"), "a status line a second: {stderr}");

    let summary = read_summary(&rec);
    assert_eq!(
        summary["packets"], PACKETS,
        "every frame sent, and nothing else: {summary}"
    );
    assert_eq!(summary["kernel_drops"], 0);
    if file_system(&rec) != "tmpfs" {
        assert_eq!(summary["write_mode"], "o_direct", "{summary}");
    }
    let files = recordings(&rec);
    assert_eq!(files.len(), 1);
    let mut previous = 0;
    for file in &files {
        capinfos_accepts(file);
        index_covers_every_record_once(file);
        for (ts, _, _) in records(file) {
            assert!(ts >= previous, "timestamps never go back");
            previous = ts;
        }
    }

    let generated = dir.path().join("mix.pcap");
    let gen_args = ["gen", "--profile", "mix", "--packets", "20000", "--seed", "5", "-w"];
    let output = Command::new(SLUICE).args(gen_args).arg(&generated).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let recorded = flows(&files, &dir.path().join("recorded.sluice"));
    let expected = flows(&[generated], &dir.path().join("generated.sluice"));
    assert_eq!(recorded.len(), expected.len());
    let differing: Vec<_> = expected
        .iter()
        .filter(|(k, v)| recorded.get(*k) != Some(v))
        .take(5)
        .collect();
    assert!(differing.is_empty(), "flows that differ: {differing:?}");

    // A copy cut in the middle of a record, as a kill would leave it.
    let all = records(&files[0]);
    let (_, offset, _) = all[1000];
    let torn = dir.path().join("torn.pcap");
    std::fs::copy(&files[0], &torn).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&torn)
        .unwrap()
        .set_len(offset + 30)
        .unwrap();
    let repaired = Command::new(SLUICE).arg("repair").arg(&torn).output().unwrap();
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stderr)
    );
    capinfos_accepts(&torn);
    assert_eq!(records(&torn), all[..1000]);
    index_covers_every_record_once(&torn);
}

#[test]
fn files_rotate_by_size_and_retention_keeps_the_newest() {
    let Some(ns) = Namespaces::create("rot") else { return };
    let dir = disk_dir();
    let rotated = dir.path().join("rotated");
    let recorder = ns.record(&rotated, &["--duration", "5s", "--rotate", "1MiB", "--block-mib", "1"]);
    succeeded(ns.send_mix(PACKETS, 5));
    succeeded(recorder);
    let summary = read_summary(&rotated);
    assert_eq!(summary["packets"], PACKETS, "{summary}");
    assert_eq!(summary["kernel_drops"], 0);
    let files = recordings(&rotated);
    assert!(files.len() >= 5, "{} files", files.len());
    assert_eq!(summary["files_written"], files.len());
    let mut total = 0;
    let mut previous = 0;
    for file in &files {
        capinfos_accepts(file);
        index_covers_every_record_once(file);
        assert!(std::fs::metadata(file).unwrap().len() <= 1 << 20);
        let records = records(file);
        assert!(records[0].0 >= previous, "names sort by time");
        previous = records.last().unwrap().0;
        total += records.len() as u64;
    }
    assert_eq!(total, PACKETS);

    // Through the page cache, as on file systems that refuse O_DIRECT
    // (tmpfs did before Linux 6.6).
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let kept = shm.path().join("kept");
    let recorder = ns.record(
        &kept,
        &["--duration", "5s", "--rotate", "1MiB", "--keep", "3MiB", "--buffered"],
    );
    succeeded(ns.send_mix(PACKETS, 5));
    succeeded(recorder);
    let summary = read_summary(&kept);
    assert_eq!(summary["packets"], PACKETS, "{summary}");
    assert_eq!(summary["write_mode"], "buffered");
    assert!(summary["files_deleted"].as_u64().unwrap() > 0, "{summary}");
    let left: u64 = std::fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_str().unwrap().starts_with("sluice-"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(left <= 3 << 20, "{left} bytes left");
    let files = recordings(&kept);
    assert_eq!(
        summary["files_written"].as_u64().unwrap() - summary["files_deleted"].as_u64().unwrap(),
        files.len() as u64
    );
    // The newest files are the ones left: the last packet sent is in them.
    let last: u64 = files.iter().map(|f| records(f).len() as u64).sum();
    assert!(last > 0 && last < PACKETS);
    for file in &files {
        capinfos_accepts(file);
    }
}

/// A pcap and a pcapng recorder, side by side on the same traffic, killed
/// with SIGKILL halfway.
#[test]
fn repair_makes_the_files_of_a_killed_recorder_whole() {
    let Some(ns) = Namespaces::create("kill") else { return };
    let dir = disk_dir();
    let (rec, rec_ng) = (dir.path().join("rec"), dir.path().join("rec-ng"));
    let args = ["--block-mib", "1", "--rotate", "4MiB"];
    let mut recorders = [
        ns.record(&rec, &args),
        ns.record(&rec_ng, &[&args[..], &["--format", "pcapng"]].concat()),
    ];
    let sender = ns.send_mix(PACKETS, 5);
    std::thread::sleep(Duration::from_millis(700));
    // `ip netns exec` becomes the recorder (it execs), so this is SIGKILL
    // to the recorder itself.
    for recorder in &mut recorders {
        recorder.kill().unwrap();
        let _ = recorder.wait();
    }
    succeeded(sender);
    repair_killed(&rec);
    repair_killed(&rec_ng);
}

fn repair_killed(rec: &Path) {
    let files = recordings(rec);
    assert!(!files.is_empty());
    // What a reader that trusts only whole records finds before repair
    // (sluice's own pcapng reader stops at a torn block).
    let whole_records = |path: &Path| -> u64 {
        if is_pcapng(path) {
            return match sluice_capture::CaptureFile::open(path) {
                Ok(file) => file.reader().map_or(0, |r| r.count() as u64),
                Err(_) => 0,
            };
        }
        let bytes = std::fs::read(path).unwrap();
        let (mut at, mut n) = (24usize, 0);
        while at + 16 <= bytes.len() {
            let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            if at + 16 + caplen > bytes.len() {
                break;
            }
            at += 16 + caplen;
            n += 1;
        }
        n
    };
    let before: Vec<u64> = files.iter().map(|f| whole_records(f)).collect();
    let repaired = Command::new(SLUICE).arg("repair").arg(rec).output().unwrap();
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stderr)
    );
    let told = String::from_utf8_lossy(&repaired.stdout);
    assert!(
        told.contains("cut") || told.contains("removed"),
        "the open file was torn: {told}"
    );
    let mut kept = 0;
    for (file, before) in files.iter().zip(before) {
        if !file.exists() {
            assert_eq!(before, 0, "only a file without packets is removed");
            continue;
        }
        capinfos_accepts(file);
        index_covers_every_record_once(file);
        assert_eq!(
            records(file).len() as u64,
            before,
            "{}: every complete record kept",
            file.display()
        );
        kept += before;
    }
    assert!(kept > 0, "blocks reached the disk before the kill");
}

#[test]
fn sigterm_ends_the_recording_with_every_packet_and_the_summary() {
    let Some(ns) = Namespaces::create("term") else { return };
    let dir = disk_dir();
    let rec = dir.path().join("rec");
    let recorder = ns.record(&rec, &[]);
    succeeded(ns.send_mix(PACKETS, 5));
    std::thread::sleep(Duration::from_millis(300));
    run("kill", &["-TERM", &recorder.id().to_string()]);
    let stdout = String::from_utf8(recorder.wait_with_output().unwrap().stdout).unwrap();
    assert!(stdout.contains("recorded 20000 packets from vb"), "{stdout}");
    let summary = read_summary(&rec);
    assert_eq!(summary["packets"], PACKETS, "{summary}");
    assert_eq!(summary["kernel_drops"], 0);
    let files = recordings(&rec);
    assert_eq!(files.len(), 1);
    capinfos_accepts(&files[0]);
    assert_eq!(records(&files[0]).len() as u64, PACKETS);
}

/// `--filter udp`: the kernel hands over only the UDP frames, so the files
/// hold exactly the UDP frames of the generated traffic, and nothing else.
/// On a live interface the kernel has taken VLAN tags off before the filter
/// runs, so `udp` matches tagged UDP frames too; in a file tcpdump needs
/// `udp or (vlan and udp)` for the same frames.
#[test]
fn filter_records_only_the_frames_it_matches() {
    let Some(ns) = Namespaces::create("rec-filter") else {
        return;
    };
    let dir = disk_dir();
    let rec = dir.path().join("udp");
    let recorder = ns.record(&rec, &["--duration", "5s", "--filter", "udp"]);
    succeeded(ns.send_mix(PACKETS, 5));
    succeeded(recorder);

    let generated = dir.path().join("mix.pcap");
    let packets = PACKETS.to_string();
    let gen_args = ["gen", "--profile", "mix", "--packets", &packets, "--seed", "5", "-w"];
    let output = Command::new(SLUICE).args(gen_args).arg(&generated).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    const UDP: &str = "udp or (vlan and udp)";
    let udp = run("tcpdump", &["-n", "-q", "-r", generated.to_str().unwrap(), UDP]);
    let udp_frames = udp.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
    assert!(
        udp_frames > 0 && udp_frames < PACKETS,
        "{udp_frames} UDP frames in the mix"
    );

    let summary = read_summary(&rec);
    assert_eq!(summary["filter"], "udp");
    assert_eq!(
        summary["packets"], udp_frames,
        "the UDP frames and no others: {summary}"
    );
    assert_eq!(summary["kernel_drops"], 0);
    let files = recordings(&rec);
    let mut total = 0;
    for file in &files {
        capinfos_accepts(file);
        index_covers_every_record_once(file);
        total += records(file).len() as u64;
    }
    assert_eq!(total, udp_frames);
    // tcpdump finds every recorded frame to be UDP.
    let recorded_udp: u64 = files
        .iter()
        .map(|f| {
            let not_udp = format!("not ({UDP})");
            let out = run("tcpdump", &["-n", "-q", "-r", f.to_str().unwrap(), &not_udp]);
            out.stdout.iter().filter(|&&b| b == b'\n').count() as u64
        })
        .sum();
    assert_eq!(recorded_udp, 0, "frames that are not UDP were recorded");
}

/// Every record of the recordings in `dir`, in order: time and wire length.
fn all_records(dir: &Path) -> Vec<(u64, u32)> {
    recordings(dir)
        .iter()
        .flat_map(|f| {
            let file = sluice_capture::CaptureFile::open(f).unwrap();
            file.reader()
                .unwrap()
                .map(|p| (p.ts_ns, p.wire_len))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The share of consecutive inter-arrival times that equal the one before
/// to within 1 ns: close to 1 when a block's packets are spread evenly
/// (UDTS), close to 0 for the kernel's stamps of real traffic.
fn even_gaps(times: &[u64]) -> f64 {
    let gaps: Vec<i128> = times.windows(2).map(|w| i128::from(w[1]) - i128::from(w[0])).collect();
    let even = gaps.windows(2).filter(|g| (g[1] - g[0]).abs() <= 1).count();
    even as f64 / gaps.len().saturating_sub(1).max(1) as f64
}

/// `--batch-timestamps udts`: two recorders on the same interface see the
/// same frames, one keeping the kernel's stamps, one spreading each ring
/// block's interval evenly over its packets. The option is in
/// record-summary.json; the spread times never go back, stay within a
/// block's span of the kernel's, and are evenly spaced inside each block.
#[test]
fn batch_timestamps_udts_spreads_each_block_evenly() {
    let Some(ns) = Namespaces::create("rec-udts") else {
        return;
    };
    let dir = disk_dir();
    let (kept, spread) = (dir.path().join("keep"), dir.path().join("udts"));
    let keep_recorder = ns.record(&kept, &["--duration", "5s"]);
    let udts_recorder = ns.record(&spread, &["--duration", "5s", "--batch-timestamps", "udts"]);
    succeeded(ns.send_mix(PACKETS, 5));
    succeeded(keep_recorder);
    let stdout = String::from_utf8_lossy(&udts_recorder.wait_with_output().unwrap().stdout).into_owned();
    assert!(stdout.contains("timestamps: udts over each ring block"), "{stdout}");

    let (keep_summary, udts_summary) = (read_summary(&kept), read_summary(&spread));
    assert_eq!(keep_summary["batch_timestamps"], "keep");
    assert_eq!(udts_summary["batch_timestamps"], "udts");
    for summary in [&keep_summary, &udts_summary] {
        assert_eq!(summary["packets"], PACKETS, "{summary}");
        assert_eq!(summary["kernel_drops"], 0);
    }
    let (kernel, udts) = (all_records(&kept), all_records(&spread));
    assert_eq!(kernel.len(), udts.len());
    let mut previous = 0;
    for (i, (k, u)) in kernel.iter().zip(&udts).enumerate() {
        assert_eq!(k.1, u.1, "packet {i}: the same frames in the same order");
        assert!(u.0 >= previous, "packet {i}: timestamps never go back");
        previous = u.0;
        // 10 ms blocks: a packet's place in its block's interval is near
        // its own arrival (the bound leaves room for a late block timer).
        assert!(
            k.0.abs_diff(u.0) < 100_000_000,
            "packet {i}: {} ns from the kernel's stamp",
            k.0.abs_diff(u.0)
        );
    }
    let times = |r: &[(u64, u32)]| r.iter().map(|p| p.0).collect::<Vec<_>>();
    let (even_kernel, even_udts) = (even_gaps(&times(&kernel)), even_gaps(&times(&udts)));
    eprintln!("evenly spaced gaps: kernel {even_kernel:.3}, udts {even_udts:.3}");
    assert!(even_udts > 0.8, "UDTS spaces a block evenly: {even_udts}");
    assert!(even_kernel < 0.2, "the kernel's stamps are not even: {even_kernel}");
}

/// SIGINT 2 ms after the last frame was sent, to a recorder writing to a
/// ramfs, which refuses O_DIRECT: the recorder reads every block the kernel
/// filled, the one it was still filling included, so the files hold every
/// frame sent and the kernel counted no other; every file went through the
/// page cache, whole, and the summary counts it as buffered.
#[test]
fn sigint_right_after_a_burst_records_every_frame_buffered_where_o_direct_is_refused() {
    let Some(ns) = Namespaces::create("rec-int") else {
        return;
    };
    let Some(ramfs) = Ramfs::mount() else { return };
    let rec = ramfs.path().join("rec");
    let recorder = ns.record(&rec, &["--rotate", "1MiB", "--block-mib", "1"]);
    succeeded(ns.send_mix(PACKETS, 5));
    std::thread::sleep(Duration::from_millis(2));
    run("kill", &["-INT", &recorder.id().to_string()]);
    let output = recorder.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("recorded 20000 packets from vb"), "{stdout}");
    assert!(stdout.contains("0 left unread in the ring at the stop"), "{stdout}");

    let summary = read_summary(&rec);
    assert_eq!(summary["packets"], PACKETS, "{summary}");
    assert_eq!(summary["kernel_packets"], PACKETS, "{summary}");
    assert_eq!(summary["kernel_drops"], 0);
    assert_eq!(summary["unread_at_stop"], 0);
    assert_eq!(summary["write_mode"], "buffered", "{summary}");
    let files = recordings(&rec);
    assert!(files.len() >= 5, "{} files", files.len());
    assert_eq!(summary["files_written"], files.len());
    assert_eq!(summary["buffered_files"], files.len(), "{summary}");
    assert_eq!(summary["direct_files"], 0);
    let mut total = 0;
    for file in &files {
        capinfos_accepts(file);
        index_covers_every_record_once(file);
        total += records(file).len() as u64;
    }
    assert_eq!(total, PACKETS);
    let written: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    assert_eq!(summary["written_bytes"], written, "no padding left in a buffered file");
}

/// SIGINT halfway through the burst: frames keep arriving as the recorder
/// stops, so the ring holds blocks not read yet and one being filled. The
/// kernel's count is exactly the frames recorded plus those it dropped,
/// and nothing is left unread.
#[test]
fn sigint_while_sending_records_every_frame_the_kernel_counted() {
    let Some(ns) = Namespaces::create("rec-int2") else {
        return;
    };
    let dir = disk_dir();
    let rec = dir.path().join("rec");
    let recorder = ns.record(&rec, &[]);
    let sender = ns.send_mix(PACKETS, 5);
    std::thread::sleep(Duration::from_millis(500));
    run("kill", &["-INT", &recorder.id().to_string()]);
    succeeded(recorder);
    succeeded(sender);
    let summary = read_summary(&rec);
    let get = |key: &str| summary[key].as_u64().unwrap();
    assert!(
        get("packets") > 1000 && get("packets") < PACKETS,
        "stopped while sending: {summary}"
    );
    assert_eq!(get("unread_at_stop"), 0, "{summary}");
    assert_eq!(
        get("kernel_packets"),
        get("packets") + get("kernel_drops"),
        "the kernel counted nothing that was not recorded or counted as dropped: {summary}"
    );
    let recorded: u64 = recordings(&rec).iter().map(|f| records(f).len() as u64).sum();
    assert_eq!(recorded, get("packets"));
}

// `sluice record -r`: capture files instead of an interface. These need
// neither root nor a network namespace, only nDPI's reference captures
// (skipped, with a message, without them), tshark, capinfos and tcpdump.

/// Captures of five link types and both formats, Ethernet first twice so
/// that one output file holds two inputs: 1kxun.pcap (pcap, µs),
/// alexa-app.pcapng, log4j-webapp-exploit.pcap (Linux SLL),
/// pgsql2.pcapng (BSD null), codm.pcap (raw IP).
const MIXED_INPUTS: [&str; 5] = [
    "1kxun.pcap",
    "alexa-app.pcapng",
    "log4j-webapp-exploit.pcap",
    "pgsql2.pcapng",
    "codm.pcap",
];

/// Runs `sluice record -r INPUT... -w DIR ARGS`.
fn record_files(inputs: &[PathBuf], dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(SLUICE);
    command.arg("record");
    for input in inputs {
        command.arg("-r").arg(input);
    }
    command.arg("-w").arg(dir).args(args).output().unwrap()
}

/// Each packet's timestamp, wire length and captured bytes, as Sluice's
/// reader finds them.
fn packets_of(files: &[PathBuf]) -> Vec<(u64, u32, Vec<u8>)> {
    files
        .iter()
        .flat_map(|f| {
            let file = sluice_capture::CaptureFile::open(f).unwrap();
            file.reader()
                .unwrap()
                .map(|p| (p.ts_ns, p.wire_len, p.data.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn reading_files_records_exactly_their_packets() {
    let Some(pcaps) = common::ndpi_pcaps() else { return };
    let inputs: Vec<PathBuf> = MIXED_INPUTS.iter().map(|name| pcaps.join(name)).collect();
    let dir = disk_dir();
    for format in ["pcap", "pcapng"] {
        let rec = dir.path().join(format);
        let output = record_files(&inputs, &rec, &["--format", format]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("read from 5 files"), "{stdout}");

        // One file a link type: Ethernet (two inputs), SLL, null, raw IP.
        // Their first packets' times rise in this order, so the files'
        // names sort in the order they were recorded.
        let files = recordings(&rec);
        assert_eq!(files.len(), 4, "{files:?}");
        let expected = tshark_frames(&inputs, None);
        assert!(expected.len() > 5000, "{} frames", expected.len());
        assert_eq!(
            tshark_frames(&files, None),
            expected,
            "{format}: tshark sees the same frames"
        );
        assert!(packets_of(&files) == packets_of(&inputs), "{format}: the same bytes");
        for file in &files {
            capinfos_accepts(file);
            index_covers_every_record_once(file);
        }
        let encapsulations: Vec<String> = files
            .iter()
            .map(|f| {
                let output = run("capinfos", &["-E", "-M", f.to_str().unwrap()]);
                let text = String::from_utf8(output.stdout).unwrap();
                text.lines().find(|l| l.contains("encapsulation")).unwrap().to_string()
            })
            .collect();
        for (file, want) in encapsulations.iter().zip(["ether", "linux-sll", "null", "rawip"]) {
            assert!(file.contains(want), "{file} (want {want})");
        }

        let summary = read_summary(&rec);
        let total = expected.len() as u64;
        assert_eq!(summary["packets_read"], total, "{summary}");
        assert_eq!(summary["packets"], total);
        assert_eq!(summary["filtered_out"], 0);
        assert_eq!(summary["read_warnings"], 0);
        assert_eq!(summary["files_written"], 4);
        let on_disk: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
        assert_eq!(summary["written_bytes"], on_disk);
        let seconds = summary["seconds"].as_f64().unwrap();
        let rate = summary["written_mb_per_s"].as_f64().unwrap();
        assert!(
            (rate - on_disk as f64 / seconds / 1e6).abs() < 1e-6 * rate.max(1.0),
            "{summary}"
        );
        assert_eq!(summary["inputs"].as_array().unwrap().len(), 5);
        assert_eq!(summary["inputs"][1]["format"], "pcapng");
        if file_system(&rec) != "tmpfs" {
            assert_eq!(summary["write_mode"], "o_direct", "{summary}");
        }
    }
}

#[test]
fn reading_files_rotates_by_size_into_valid_files() {
    let Some(pcaps) = common::ndpi_pcaps() else { return };
    let inputs = [pcaps.join("1kxun.pcap"), pcaps.join("alexa-app.pcapng")];
    let dir = disk_dir();
    for format in ["pcap", "pcapng"] {
        let rec = dir.path().join(format);
        let args = ["--format", format, "--rotate", "300KiB", "--block-mib", "1", "-q"];
        let output = record_files(&inputs, &rec, &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert!(output.stdout.is_empty(), "quiet");
        // Names start with the first packet's time, and 1kxun.pcap's
        // times jump past alexa-app.pcapng's: the run's sequence number,
        // at the end of the name, gives the order of recording.
        let mut files = recordings(&rec);
        let sequence = |f: &PathBuf| -> u64 {
            let name = f.file_stem().unwrap().to_str().unwrap();
            name.rsplit('-').next().unwrap().parse().unwrap()
        };
        files.sort_by_key(sequence);
        assert!(files.len() >= 10, "{} files", files.len());
        assert!(files.iter().map(sequence).eq(1..=files.len() as u64));
        let summary = read_summary(&rec);
        assert_eq!(summary["files_written"], files.len(), "{summary}");
        for file in &files {
            capinfos_accepts(file);
            index_covers_every_record_once(file);
            assert!(std::fs::metadata(file).unwrap().len() <= 300 << 10);
        }
        assert_eq!(tshark_frames(&files, None), tshark_frames(&inputs, None));
    }
}

/// The warning lines of a run's standard error.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("warning: ")).collect()
}

#[test]
fn malformed_files_give_the_warnings_and_exit_status_of_analyze() {
    let Some(pcaps) = common::ndpi_pcaps() else { return };
    let mut fuzzed: Vec<PathBuf> = std::fs::read_dir(&pcaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains("fuzz"))
        .collect();
    fuzzed.sort();
    assert!(!fuzzed.is_empty());
    let dir = disk_dir();
    let mut partial = 0;
    for (i, file) in fuzzed.iter().enumerate() {
        let rec = dir.path().join(format!("rec{i}"));
        let recorded = record_files(std::slice::from_ref(file), &rec, &["-q"]);
        let analyzed = Command::new(SLUICE)
            .arg("analyze")
            .arg(file)
            .args(["-q", "--format", "none", "-o"])
            .arg(dir.path().join(format!("analyzed{i}")))
            .output()
            .unwrap();
        let (recorded_err, analyzed_err) = (stderr_of(&recorded), stderr_of(&analyzed));
        assert!(!recorded_err.contains("panicked"), "{recorded_err}");
        assert_eq!(
            recorded.status.code(),
            analyzed.status.code(),
            "{}: {recorded_err}",
            file.display()
        );
        assert_eq!(warnings(&recorded_err), warnings(&analyzed_err), "{}", file.display());
        let summary = read_summary(&rec);
        let readable = packets_of(std::slice::from_ref(file)).len() as u64;
        assert_eq!(summary["packets"], readable, "{}: what could be read", file.display());
        let files = recordings(&rec);
        for file in &files {
            capinfos_accepts(file);
            index_covers_every_record_once(file);
        }
        if recorded.status.code() == Some(3) {
            partial += 1;
            assert!(summary["read_warnings"].as_u64().unwrap() > 0, "{summary}");
            let warning = warnings(&recorded_err)[0];
            let named = format!("warning: {}: byte offset ", file.display());
            assert!(warning.starts_with(&named), "{warning}");
            assert!(packets_of(&files) == packets_of(std::slice::from_ref(file)));
        }
    }
    assert!(partial > 0, "some fuzzed capture is malformed: {fuzzed:?}");

    // One good input and one that is not a capture: a partial result; a
    // file that is not a capture alone: an error, and nothing written.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a capture\n").unwrap();
    let good = pcaps.join("1kxun.pcap");
    let rec = dir.path().join("mixed");
    let output = record_files(&[good.clone(), text.clone()], &rec, &["-q"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains(&format!("error: {}: not a pcap", text.display())));
    let summary = read_summary(&rec);
    assert_eq!(summary["unreadable_files"], 1);
    assert_eq!(summary["packets"], packets_of(&[good]).len());
    let rec = dir.path().join("none");
    let output = record_files(&[text], &rec, &["-q"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    assert!(stderr_of(&output).contains("none of the inputs could be read"));
    assert!(!rec.exists(), "{} was created", rec.display());
}

#[test]
fn live_only_options_with_read_are_command_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let rec = dir.path().join("rec");
    for (args, named) in [
        (&["-r", "in.pcap", "--ring-mib", "8"][..], "--ring-mib"),
        (&["-r", "in.pcap", "--duration", "5s"], "--duration"),
        (&["-r", "in.pcap", "--no-promiscuous"], "--no-promiscuous"),
        (&["-r", "in.pcap", "--batch-timestamps", "udts"], "--batch-timestamps"),
        (&["-r", "in.pcap", "-i", "eth0"], "--interface"),
    ] {
        let output = Command::new(SLUICE)
            .current_dir(dir.path())
            .arg("record")
            .args(args)
            .arg("-w")
            .arg(&rec)
            .output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("'--read <FILE>' cannot be used with") && stderr.contains(named),
            "{args:?}: {stderr}"
        );
    }
    let output = Command::new(SLUICE).arg("record").arg("-w").arg(&rec).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr_of(&output).contains("<--interface <INTERFACE>|--read <FILE>>"));
    assert!(!input.exists() && !rec.exists(), "nothing created");
}

#[test]
fn a_filter_and_extract_on_read_files_select_what_tcpdump_and_tshark_select() {
    let Some(pcaps) = common::ndpi_pcaps() else { return };
    let input = pcaps.join("1kxun.pcap");
    let dir = disk_dir();
    let rec = dir.path().join("rec");
    let output = record_files(
        std::slice::from_ref(&input),
        &rec,
        &["--rotate", "500KiB", "--block-mib", "1", "-q"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(recordings(&rec).len() >= 4);

    // The IPv4 address seen most often on port 443.
    let shown = run(
        "tshark",
        &[
            "-r",
            input.to_str().unwrap(),
            "-Y",
            "ip && tcp.port == 443",
            "-T",
            "fields",
            "-e",
            "ip.dst",
        ],
    );
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for address in String::from_utf8(shown.stdout).unwrap().lines() {
        *counts.entry(address.to_string()).or_default() += 1;
    }
    let (host, _) = counts.into_iter().max_by_key(|(h, n)| (*n, h.clone())).unwrap();
    let expression = format!("host {host} and port 443");
    let display = format!("ip.addr == {host} && (tcp.port == 443 || udp.port == 443 || sctp.port == 443)");

    let by_tcpdump = dir.path().join("tcpdump.pcap");
    common::tcpdump_select(&input, &by_tcpdump, &expression);
    let by_tcpdump = packets_of(&[by_tcpdump]);
    assert!(by_tcpdump.len() > 10, "{expression}: {} packets", by_tcpdump.len());
    let by_tshark = tshark_frames(std::slice::from_ref(&input), Some(&display));

    let extracted = dir.path().join("extracted.pcap");
    let output = Command::new(SLUICE)
        .arg("extract")
        .arg("-r")
        .arg(&rec)
        .args(["--filter", &expression, "-w"])
        .arg(&extracted)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let extracted = vec![extracted];
    assert!(packets_of(&extracted) == by_tcpdump, "extract equals tcpdump -r");
    assert_eq!(tshark_frames(&extracted, None), by_tshark, "extract equals tshark -Y");

    // The same filter applied while recording.
    let filtered = dir.path().join("filtered");
    let output = record_files(
        std::slice::from_ref(&input),
        &filtered,
        &["--filter", &expression, "-q"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let files = recordings(&filtered);
    assert!(packets_of(&files) == by_tcpdump, "record --filter equals tcpdump -r");
    assert_eq!(tshark_frames(&files, None), by_tshark);
    let summary = read_summary(&filtered);
    assert_eq!(summary["filter"], expression.as_str());
    assert_eq!(
        summary["packets"].as_u64().unwrap() + summary["filtered_out"].as_u64().unwrap(),
        summary["packets_read"].as_u64().unwrap()
    );
}
