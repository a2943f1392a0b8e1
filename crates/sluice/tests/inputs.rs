//! What `sluice analyze` reads besides a few capture files: more files than
//! the process could map at once, and a capture piped in.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;

use common::{SLUICE, analyze, flow_counts, flow_records, sluice};

/// A little-endian microsecond pcap holding one UDP datagram from
/// 10.0.x.y:port to 10.1.0.1:53, `n` giving x, y and the port.
fn one_datagram_capture(n: usize) -> Vec<u8> {
    let payload = b"hello";
    let mut udp = Vec::new();
    udp.extend_from_slice(&(1024 + (n % 60_000) as u16).to_be_bytes());
    udp.extend_from_slice(&53u16.to_be_bytes());
    udp.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0]);
    frame.extend_from_slice(&(20 + udp.len() as u16).to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    frame.extend_from_slice(&[10, 0, (n >> 8) as u8, n as u8, 10, 1, 0, 1]);
    frame.extend_from_slice(&udp);
    let mut pcap = Vec::new();
    for word in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65_535, 1] {
        pcap.extend_from_slice(&word.to_le_bytes());
    }
    let seconds = 1_700_000_000 + n as u32;
    for word in [seconds, 0, frame.len() as u32, frame.len() as u32] {
        pcap.extend_from_slice(&word.to_le_bytes());
    }
    pcap.extend_from_slice(&frame);
    pcap
}

/// Rotated captures come in many small files; a run over more of them
/// than `vm.max_map_count` allows mappings used to fail.
#[test]
fn more_files_than_the_process_could_map_are_all_read() {
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(usize::MAX);
    if limit > 200_000 {
        eprintln!("skipped: vm.max_map_count is {limit}, too many files to write for a test");
        return;
    }
    let files = limit + 500;
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..files).map(|n| format!("{n:05}")).collect();
    for (n, name) in names.iter().enumerate() {
        std::fs::write(dir.path().join(name), one_datagram_capture(n)).unwrap();
    }
    // Relative names keep the command line well under its limit.
    let output = Command::new(SLUICE)
        .current_dir(dir.path())
        .arg("analyze")
        .args(&names)
        .args(["-q", "-o", "out", "--format", "csv"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["files"].as_array().unwrap().len(), files);
    assert_eq!(summary["packets"], files as u64);
    assert_eq!(summary["drops"]["unreadable_files"], 0);
    let records = std::fs::read_to_string(dir.path().join("out/flows.csv")).unwrap();
    // Flows from 10.0.x.y repeat every 65,536 files, at a different port.
    assert_eq!(records.lines().count(), files + 1, "a header and a record per flow");
}

/// `sluice analyze <(zcat trace.pcap.gz)`: a pipe cannot be mapped, so it
/// is read whole, and gives the records the file gives.
#[test]
fn a_capture_piped_in_gives_the_records_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("mix.pcap");
    let generated = sluice(&[
        "gen",
        "--profile",
        "mix",
        "--packets",
        "20000",
        "--seed",
        "3",
        "-w",
        capture.to_str().unwrap(),
    ]);
    assert!(generated.status.success());
    let from_file = dir.path().join("from-file");
    analyze(&capture, &from_file, &[]);

    let from_pipe = dir.path().join("from-pipe");
    let mut child = Command::new(SLUICE)
        .args(["analyze", "/dev/stdin", "-q", "-o"])
        .arg(&from_pipe)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = std::fs::read(&capture).unwrap();
    let feeding = std::thread::spawn(move || stdin.write_all(&bytes));
    let output = child.wait_with_output().unwrap();
    feeding.join().unwrap().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let counts = |out: &Path| flow_counts(&flow_records(out));
    let expected = counts(&from_file);
    assert!(expected.len() > 100);
    assert_eq!(counts(&from_pipe), expected);
}

/// A frame that claims 4,093,509,168 bytes on the wire (as a fuzzed
/// capture did), and one that claims less than was captured of it: neither
/// length is believed. Each is a warning with its file and byte offset,
/// counted in the summary's read warnings, and the frame counts its
/// captured bytes in the totals and in its flow.
#[test]
fn frame_lengths_beyond_belief_are_located_warnings_and_count_captured_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut capture = one_datagram_capture(1);
    let frame_len = capture.len() as u64 - 24 - 16;
    let mut records = vec![capture[24..].to_vec(); 3];
    records[1][12..16].copy_from_slice(&4_093_509_168u32.to_le_bytes());
    records[2][12..16].copy_from_slice(&20u32.to_le_bytes());
    for record in &records[1..] {
        capture.extend_from_slice(record);
    }
    let path = dir.path().join("lying.pcap");
    std::fs::write(&path, &capture).unwrap();
    let out = dir.path().join("out");
    let output = analyze(&path, &out, &[]);
    assert_eq!(output.status.code(), Some(3), "a partial result");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for record in 1..3u64 {
        let offset = 24 + record * (16 + frame_len);
        assert!(
            stderr.contains(&format!("{}: byte offset {offset}: record claims a", path.display())),
            "{stderr}"
        );
    }
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["packets"], 3);
    assert_eq!(summary["bytes"], 3 * frame_len, "{summary}");
    assert_eq!(summary["drops"]["read_warnings"], 2, "{summary}");
    assert_eq!(summary["files"][0]["warning_count"], 2);
    let records = flow_records(&out);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["bytes"], 3 * frame_len);
}
