//! `sluice extract` and `sluice repair` on recordings that are not as the
//! recorder wrote them: an index entry changed, a record header with a bit
//! flipped, a file torn by a crash. A recording is evidence: whatever
//! happens to part of it, every packet that can still be read comes out
//! (extract) or stays (repair), and what could not be read is reported
//! with its place and makes the result partial (exit status 3).
//!
//! The recordings are `sluice record -r` of a `sluice gen` capture, in
//! 1 MiB blocks and 5 MiB files, as in the commands that found these
//! defects; no root needed.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::sluice;

const PACKETS: usize = 30_000;

/// A generated capture recorded as `format` into `DIR/rec`; the packets
/// (time, bytes) in recorded order.
fn recorded(dir: &Path, format: &str) -> (PathBuf, Vec<(u64, Vec<u8>)>) {
    let generated = dir.join("m.pcap");
    if !generated.exists() {
        let gen_args = ["gen", "--profile", "mix", "--packets", "30000", "--seed", "3", "-w"];
        let output = sluice(&[&gen_args[..], &[generated.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let rec = dir.join(format!("rec-{format}"));
    let output = sluice(&[
        "record",
        "-q",
        "-r",
        generated.to_str().unwrap(),
        "-w",
        rec.to_str().unwrap(),
        "--block-mib",
        "1",
        "--rotate",
        "5MiB",
        "--format",
        format,
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let packets = recordings(&rec).iter().flat_map(|f| packets(f)).collect::<Vec<_>>();
    assert_eq!(packets.len(), PACKETS);
    (rec, packets)
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    sluice_store::recordings(dir).unwrap()
}

fn packets(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let file = sluice_capture::CaptureFile::open(path).unwrap();
    file.reader().unwrap().map(|p| (p.ts_ns, p.data.to_vec())).collect()
}

/// Where each record of a recording starts.
fn offsets(path: &Path) -> Vec<u64> {
    let file = sluice_capture::CaptureFile::open(path).unwrap();
    file.reader().unwrap().map(|p| p.offset).collect()
}

fn extract(rec: &Path, out: &Path) -> Output {
    sluice(&["extract", "-r", rec.to_str().unwrap(), "-w", out.to_str().unwrap()])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn flip(path: &Path, at: u64, mask: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= mask;
    std::fs::write(path, bytes).unwrap();
}

/// Byte 3 of a record's captured length: bit 24 flipped there makes a
/// 16 MB record of a 1.5 kB frame.
fn captured_high_byte(format: &str) -> u64 {
    if format == "pcap" { 8 + 3 } else { 20 + 3 }
}

/// Issue 35, defect 1: one index entry's packet count set to 0 made
/// extract skip the block ("1 skipped by time", with no time given) and
/// exit 0 with 28,515 of 30,000 packets.
#[test]
fn an_index_entry_saying_no_packets_hides_none() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["pcap", "pcapng"] {
        let (rec, sent) = recorded(dir.path(), format);
        let index = sluice_store::index_path(&recordings(&rec)[0]);
        let entry_packets = 16 + 176 * 3 + 32;
        let mut bytes = std::fs::read(&index).unwrap();
        bytes[entry_packets..entry_packets + 4].copy_from_slice(&0u32.to_le_bytes());
        std::fs::write(&index, bytes).unwrap();
        let out = dir.path().join("o.pcap");
        let output = extract(&rec, &out);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(3), "{format}: {stdout}{stderr}");
        assert!(packets(&out) == sent, "{format}: every packet\n{stdout}{stderr}");
        assert!(stdout.contains(" 0 skipped by time"), "{stdout}");
        assert!(
            stderr.contains(&format!("warning: {}: byte offset 544: entry 3", index.display())),
            "{stderr}"
        );
    }
}

/// Defects 2 and 3: a flipped bit in a record header inside an indexed
/// block made extract fail (exit 1) with a partial output; a torn file
/// gave exit 0. Both are partial results: every other packet comes out,
/// each problem is a warning with its byte offset, and the exit status
/// is 3.
#[test]
fn damaged_and_torn_recordings_give_every_readable_packet_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["pcap", "pcapng"] {
        let (rec, sent) = recorded(dir.path(), format);
        let files = recordings(&rec);
        let first = offsets(&files[0]);
        // A record in the third block of the first file.
        let victim = first.iter().position(|&o| o > 2_300_000).unwrap();
        flip(&files[0], first[victim] + captured_high_byte(format), 1);
        let out = dir.path().join("o.pcap");
        let output = extract(&rec, &out);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(3), "{format}: {stdout}{stderr}");
        let mut expected = sent.clone();
        expected.remove(victim);
        assert!(
            packets(&out) == expected,
            "{format}: all but the damaged packet\n{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "warning: {}: byte offset {}: {} bytes that are not records",
                files[0].display(),
                first[victim],
                first[victim + 1] - first[victim]
            )),
            "{stderr}"
        );

        // The last file cut inside a record, as a crash leaves it, and
        // without the index entry of its last block.
        let last = files.last().unwrap();
        let cut = *offsets(last).last().unwrap() + 20;
        std::fs::OpenOptions::new()
            .write(true)
            .open(last)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let output = extract(&rec, &out);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(3), "{format}: {stdout}{stderr}");
        assert!(packets(&out) == expected[..expected.len() - 1], "{format}");
        assert!(stderr.contains("the file ends inside a record"), "{stderr}");
        assert!(stdout.contains("ends inside a record, read up to it"), "{stdout}");
    }
}

/// Defect 4: on the same damaged file, repair kept the packets before the
/// bad record, cut the 4,213 intact ones after it and exited 0; and it
/// rewrote the index of whole files at 4 MiB blocks. Now every readable
/// packet stays, the damaged bytes are moved to a side file and the exit
/// status says so; whole files and their indexes are left as they are.
#[test]
fn repair_keeps_every_readable_packet_and_leaves_whole_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["pcap", "pcapng"] {
        let (rec, sent) = recorded(dir.path(), format);
        let files = recordings(&rec);
        let indexes: Vec<Vec<u8>> = files
            .iter()
            .map(|f| std::fs::read(sluice_store::index_path(f)).unwrap())
            .collect();
        let first = offsets(&files[0]);
        let victim = first.iter().position(|&o| o > 2_300_000).unwrap();
        flip(&files[0], first[victim] + captured_high_byte(format), 1);
        let damaged = std::fs::read(&files[0]).unwrap()[first[victim] as usize..first[victim + 1] as usize].to_vec();
        let output = sluice(&["repair", rec.to_str().unwrap()]);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert_eq!(output.status.code(), Some(3), "{format}: {stdout}{stderr}");
        let mut expected = sent.clone();
        expected.remove(victim);
        let kept: Vec<_> = files.iter().flat_map(|f| packets(f)).collect();
        assert!(kept == expected, "{format}: every readable packet kept\n{stdout}");
        let side = PathBuf::from(format!("{}.unreadable", files[0].display()));
        let side_bytes = std::fs::read(&side).unwrap();
        assert!(side_bytes.ends_with(&damaged), "the damaged record, moved aside");
        assert!(stdout.contains(&format!("moved to {}", side.display())), "{stdout}");
        assert!(stderr.contains(&format!("byte offset {}", first[victim])), "{stderr}");
        // The changed file's index has the recording's 1 MiB blocks; the
        // others' are untouched.
        let rebuilt = sluice_store::Index::read(sluice_store::index_path(&files[0])).unwrap();
        assert_eq!(rebuilt.blocks.len(), (indexes[0].len() - 16) / 176);
        for (file, index) in files.iter().zip(&indexes).skip(1) {
            assert_eq!(&std::fs::read(sluice_store::index_path(file)).unwrap(), index);
        }
        for line in stdout.lines().skip(1) {
            assert!(line.ends_with("whole; index left as it is"), "{stdout}");
        }
        // Extract now reads the repaired recording cleanly.
        let out = dir.path().join("o.pcap");
        let output = extract(&rec, &out);
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert!(packets(&out) == expected);
    }
}
