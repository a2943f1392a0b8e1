//! `sluice live` on a real interface: two network namespaces joined by a
//! veth pair, `sluice gen -i` sending on one end, `sluice live` capturing on
//! the other. The flows it reports must be the flows `sluice analyze`
//! finds in the same generated traffic written to a file. Skipped, with a
//! message, when not root or when `ip` is missing; the namespaces go away
//! even when the test fails.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;

use common::{Namespaces, SLUICE, flow_counts};

fn read_json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The flows `sluice live` wrote to `live_out` are those `sluice analyze`
/// wrote to `file_out`, with the same packets and bytes each way.
fn assert_same_flows(live_out: &Path, file_out: &Path) {
    let live = flow_counts(&read_json_lines(&live_out.join("flows.jsonl")));
    let file = flow_counts(&read_json_lines(&file_out.join("flows.jsonl")));
    assert_eq!(live.len(), file.len());
    let differing: Vec<_> = file.iter().filter(|(k, v)| live.get(*k) != Some(v)).take(5).collect();
    assert!(differing.is_empty(), "flows that differ: {differing:?}");
}

/// Runs `sluice live -i vb ARGS` in namespace `b` while namespace `a`
/// sends `sluice gen GEN -i va` at 5000 packets a second, and returns live's
/// output once it has stopped by itself (ARGS must give --duration).
fn live_while_sending(ns: &Namespaces, live_args: &[&std::ffi::OsStr], gen_args: &[&str]) -> std::process::Output {
    let capture = Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "live", "-i", "vb"])
        .args(live_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The rings are open well before the first frame is sent.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut send = vec![SLUICE];
    send.extend(gen_args);
    send.extend(["-i", "va", "--rate", "5000pps"]);
    ns.exec(&ns.a, &send);
    let capture = capture.wait_with_output().unwrap();
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
    capture
}

/// When the test sends SIGINT to `sluice live` or `sluice record`.
#[derive(Clone, Copy)]
enum Interrupt {
    /// This long after the sender has finished.
    AfterSending(std::time::Duration),
    /// This long after the sender has started, while it still sends.
    WhileSending(std::time::Duration),
}

/// Runs `sluice live -i vb ARGS` (without --duration) in namespace `b`
/// while namespace `a` sends `sluice gen GEN -i va --rate RATE`, stops it
/// with SIGINT as `interrupt` says, and returns its output.
fn live_until_sigint(
    ns: &Namespaces,
    live_args: &[&OsStr],
    gen_args: &[&str],
    rate: &str,
    interrupt: Interrupt,
) -> std::process::Output {
    let capture = Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "live", "-i", "vb"])
        .args(live_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let sender = Command::new("ip")
        .args(["netns", "exec", &ns.a, SLUICE])
        .args(gen_args)
        .args(["-i", "va", "--rate", rate])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sender = match interrupt {
        Interrupt::AfterSending(pause) => {
            common::succeeded(sender);
            std::thread::sleep(pause);
            None
        }
        Interrupt::WhileSending(after) => {
            std::thread::sleep(after);
            Some(sender)
        }
    };
    // `ip netns exec` execs sluice: the signal is sluice's.
    common::run("kill", &["-INT", &capture.id().to_string()]);
    let capture = capture.wait_with_output().unwrap();
    assert!(capture.status.success(), "{}", String::from_utf8_lossy(&capture.stderr));
    if let Some(sender) = sender {
        common::succeeded(sender);
    }
    capture
}

/// Runs a `sluice` command that must succeed.
/// A mix capture made for a test in a scratch directory (kept while the
/// returned handle lives), the output directories of its file run and its
/// live run beside it, and the `gen` arguments that made it, from which the
/// sender in the namespace makes the same traffic.
fn generate_mix(
    packets: &'static str,
    seed: &'static str,
) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, [&'static str; 7]) {
    let dir = tempfile::tempdir().unwrap();
    let gen_args = ["gen", "--profile", "mix", "--packets", packets, "--seed", seed];
    let pcap = dir.path().join("mix.pcap");
    sluice(&[&gen_args.map(OsStr::new)[..], &["-w".as_ref(), pcap.as_os_str()]].concat());
    let (file_out, live_out) = (dir.path().join("file"), dir.path().join("live"));
    (dir, pcap, file_out, live_out, gen_args)
}

fn sluice(args: &[&std::ffi::OsStr]) {
    let output = common::sluice(args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn live_capture_finds_the_flows_analyze_finds_in_the_same_traffic() {
    let Some(ns) = Namespaces::create("live") else { return };
    let (_dir, pcap, file_out, live_out, gen_args) = generate_mix("5000", "3");
    let args = ["--duration", "8s", "--workers", "2", "-o"].map(OsStr::new);
    let capture = live_while_sending(&ns, &[&args[..], &[live_out.as_os_str()]].concat(), &gen_args);
    let stderr = String::from_utf8_lossy(&capture.stderr);
    assert!(stderr.contains("live vb"), "a status line a second: {stderr}");
    common::analyze_cleanly(&[&pcap], &file_out);

    let summary = summary(&live_out);
    assert_eq!(summary["capture"]["interface"], "vb");
    assert_eq!(summary["capture"]["batch_timestamps"], "keep");
    assert_eq!(
        summary["packets"], 5000,
        "every frame sent, and nothing else, was captured"
    );
    assert_eq!(summary["drops"]["kernel_drops"], 0);
    assert_same_flows(&live_out, &file_out);
}

#[test]
fn live_reports_a_missing_interface_by_name() {
    let Some(ns) = Namespaces::create("live-err") else {
        return;
    };
    let output = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.b,
            SLUICE,
            "live",
            "-i",
            "nosuch0",
            "--duration",
            "1s",
            "-o",
            "/nonexistent/x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nosuch0") && stderr.contains("no such network interface"),
        "{stderr}"
    );
}

/// `--filter tcp`: the kernel hands over only the TCP frames, so the flows
/// are exactly the TCP flows `sluice analyze` finds in the same traffic.
#[test]
fn live_with_a_filter_finds_only_the_flows_it_matches() {
    let Some(ns) = Namespaces::create("live-filter") else {
        return;
    };
    let (_dir, pcap, file_out, live_out, gen_args) = generate_mix("3000", "5");
    let args = ["--duration", "6s", "--filter", "tcp", "-q", "-o"].map(OsStr::new);
    live_while_sending(&ns, &[&args[..], &[live_out.as_os_str()]].concat(), &gen_args);
    common::analyze_cleanly(&[&pcap], &file_out);

    let live_records = read_json_lines(&live_out.join("flows.jsonl"));
    assert!(!live_records.is_empty());
    assert!(
        live_records.iter().all(|r| r["l4"] == "TCP"),
        "only TCP flows: {:?}",
        live_records.iter().find(|r| r["l4"] != "TCP")
    );
    let file_records = read_json_lines(&file_out.join("flows.jsonl"));
    let tcp: Vec<Value> = file_records.into_iter().filter(|r| r["l4"] == "TCP").collect();
    let (live, file) = (flow_counts(&live_records), flow_counts(&tcp));
    let missing: Vec<_> = file.iter().filter(|(k, v)| live.get(*k) != Some(v)).take(5).collect();
    assert!(missing.is_empty(), "TCP flows that differ or are missing: {missing:?}");
    assert_eq!(live.len(), file.len());
    let summary = summary(&live_out);
    let tcp_packets: u64 = file.values().map(|c| c[0] + c[2]).sum();
    assert_eq!(summary["packets"], tcp_packets, "the TCP frames and no others");
}

/// The recordings under `dir`: each worker's subdirectory `wN`, its files
/// in name (so time) order.
fn recordings_by_worker(dir: &Path) -> Vec<Vec<std::path::PathBuf>> {
    let mut workers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    workers.sort();
    workers
        .iter()
        .map(|w| {
            let mut files: Vec<_> = std::fs::read_dir(w)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
                .collect();
            files.sort();
            files
        })
        .collect()
}

/// `--record DIR --record-format pcapng`: one capture feeds the analysis and
/// the recorders. Every packet captured is in the files, once; the files
/// are valid captures, time-ordered within each worker's directory;
/// `sluice analyze` finds in them the flows `live` reported; `sluice
/// extract -r DIR` merges the workers' directories by timestamp, and
/// `sluice repair DIR` finds every file in them whole.
#[test]
fn live_with_record_writes_every_packet_it_analyses() {
    let Some(ns) = Namespaces::create("live-rec") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (live_out, rec, file_out) = (
        dir.path().join("live"),
        dir.path().join("rec"),
        dir.path().join("recorded.sluice"),
    );
    let args = [
        "--duration",
        "8s",
        "--workers",
        "2",
        "--rotate",
        "200kB",
        "--record-format",
        "pcapng",
        "-o",
    ]
    .map(OsStr::new);
    let capture = live_while_sending(
        &ns,
        &[&args[..], &[live_out.as_os_str(), "--record".as_ref(), rec.as_os_str()]].concat(),
        &["gen", "--profile", "mix", "--packets", "5000", "--seed", "3"],
    );
    let stderr = String::from_utf8_lossy(&capture.stderr);
    assert!(
        stderr.contains("recorded in"),
        "the status line counts the recording: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&capture.stdout);
    assert!(stdout.contains("recorded: 5000 packets"), "{stdout}");

    let summary = summary(&live_out);
    assert_eq!(
        summary["packets"], 5000,
        "every frame sent, and nothing else: {summary}"
    );
    let recording = &summary["recording"];
    assert_eq!(recording["packets"], 5000, "{recording}");
    assert_eq!(summary["drops"]["kernel_drops"], 0);
    assert!(recording["writer_waits"].is_u64() && recording["writer_wait_ms"].is_f64());
    assert!(recording["files_written"].as_u64().unwrap() > 2, "rotated: {recording}");
    assert_eq!(recording["files_deleted"], 0);
    assert!(["o_direct", "buffered"].contains(&recording["write_mode"].as_str().unwrap()));
    assert_eq!(
        recording["direct_files"].as_u64().unwrap() + recording["buffered_files"].as_u64().unwrap(),
        recording["files_written"].as_u64().unwrap()
    );
    assert_eq!(recording["format"], "pcapng");

    let workers = recordings_by_worker(&rec);
    assert_eq!(workers.len(), 2, "one directory per worker");
    let mut recorded = 0;
    for (w, files) in workers.iter().enumerate() {
        assert_eq!(
            recording["workers"][w]["packets"].as_u64().unwrap(),
            files
                .iter()
                .map(|f| sluice_capture::CaptureFile::open(f).unwrap().reader().unwrap().count() as u64)
                .sum::<u64>()
        );
        let mut previous = 0;
        for file in files {
            let output = Command::new("capinfos")
                .arg("-c")
                .arg(file)
                .output()
                .expect("capinfos runs");
            assert!(output.status.success(), "capinfos {}: {output:?}", file.display());
            assert!(
                sluice_store::index_path(file).exists(),
                "{}: an index beside it",
                file.display()
            );
            assert!(file.extension().is_some_and(|e| e == "pcapng"));
            for packet in sluice_capture::CaptureFile::open(file).unwrap().reader().unwrap() {
                assert!(packet.ts_ns >= previous, "time-ordered within a worker");
                previous = packet.ts_ns;
                recorded += 1;
            }
        }
    }
    assert_eq!(recorded, 5000, "the files hold exactly the packets captured");

    let all: Vec<_> = workers.concat();
    common::analyze_cleanly(&all, &file_out);
    assert_same_flows(&live_out, &file_out);

    // Extracting from DIR reads both workers' directories and merges them
    // by timestamp: every packet once, in time order, ties to w0.
    let mut expected = Vec::new();
    for (w, files) in workers.iter().enumerate() {
        for file in files {
            for p in sluice_capture::CaptureFile::open(file).unwrap().reader().unwrap() {
                expected.push((p.ts_ns, w, p.wire_len, p.data.to_vec()));
            }
        }
    }
    expected.sort_by_key(|p| (p.0, p.1));
    let expected: Vec<_> = expected.into_iter().map(|(ts, _, len, data)| (ts, len, data)).collect();
    let extract = |args: &[&str]| -> (String, Vec<(u64, u32, Vec<u8>)>) {
        let out = dir.path().join("extracted.pcap");
        let output = Command::new(SLUICE)
            .args(["extract", "-r"])
            .arg(&rec)
            .args(args)
            .arg("-w")
            .arg(&out)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let packets = sluice_capture::CaptureFile::open(&out)
            .unwrap()
            .reader()
            .unwrap()
            .map(|p| (p.ts_ns, p.wire_len, p.data.to_vec()))
            .collect();
        (String::from_utf8(output.stdout).unwrap(), packets)
    };
    let (report, merged) = extract(&[]);
    assert!(
        report.contains("recordings in 2 directories, merged by timestamp"),
        "{report}"
    );
    assert_eq!(merged.len(), 5000, "{report}");
    assert!(merged == expected, "every packet, in time order\n{report}");
    // The first tenth of the time: the files that start later are skipped
    // by their index.
    let (from, to) = (expected[0].0, expected[expected.len() / 10].0);
    let seconds = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let (report, early) = extract(&["--from", &seconds(from), "--to", &seconds(to)]);
    let in_range: Vec<_> = expected.iter().filter(|p| p.0 >= from && p.0 < to).cloned().collect();
    assert!(!in_range.is_empty() && early == in_range, "{report}");
    let files_line = report.lines().find(|l| l.starts_with("files: ")).unwrap();
    assert!(!files_line.ends_with(" 0 skipped by their index"), "{report}");

    // Repair finds the workers' files in the subdirectories, all whole.
    let repaired = Command::new(SLUICE).arg("repair").arg(&rec).output().unwrap();
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stderr)
    );
    let told = String::from_utf8(repaired.stdout).unwrap();
    assert_eq!(told.lines().count(), all.len(), "{told}");
    assert!(
        told.lines().all(|l| l.ends_with(", whole; index left as it is")),
        "{told}"
    );
}

/// `--batch-timestamps wdts`: the option is in summary.json's `capture`
/// and in the printed summary, and the recorded times (those the analysis
/// used) never go back.
#[test]
fn live_with_batch_timestamps_reports_them_and_keeps_time_ordered() {
    let Some(ns) = Namespaces::create("live-wdts") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (live_out, rec) = (dir.path().join("live"), dir.path().join("rec"));
    let args = ["--duration", "6s", "--workers", "1", "--batch-timestamps", "wdts", "-o"].map(OsStr::new);
    let capture = live_while_sending(
        &ns,
        &[&args[..], &[live_out.as_os_str(), "--record".as_ref(), rec.as_os_str()]].concat(),
        &["gen", "--profile", "mix", "--packets", "3000", "--seed", "7"],
    );
    let stdout = String::from_utf8_lossy(&capture.stdout);
    assert!(stdout.contains("timestamps: wdts over each ring block"), "{stdout}");
    let summary = summary(&live_out);
    assert_eq!(summary["capture"]["batch_timestamps"], "wdts", "{summary}");
    assert_eq!(summary["packets"], 3000);
    let mut times = Vec::new();
    for file in recordings_by_worker(&rec).concat() {
        times.extend(
            sluice_capture::CaptureFile::open(&file)
                .unwrap()
                .reader()
                .unwrap()
                .map(|p| p.ts_ns),
        );
    }
    assert_eq!(times.len(), 3000);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "time-ordered");
    assert_eq!(summary["first_ts_ns"], times[0]);
    assert_eq!(summary["last_ts_ns"], times[2999]);
}

/// SIGINT right after the last frame was sent: the workers stop taking
/// time, read what the kernel already put in their rings (the last,
/// partly filled blocks included) and only then close their flows, so
/// every frame sent is in the summary and in the flows, and the kernel
/// counted no frame that the run did not process or count as dropped.
#[test]
fn sigint_right_after_a_burst_keeps_every_frame_the_kernel_took() {
    let Some(ns) = Namespaces::create("live-int") else {
        return;
    };
    let (_dir, pcap, file_out, live_out, gen_args) = generate_mix("5000", "11");
    let args = ["--workers", "2", "-q", "-o"].map(OsStr::new);
    live_until_sigint(
        &ns,
        &[&args[..], &[live_out.as_os_str()]].concat(),
        &gen_args,
        "5000pps",
        Interrupt::AfterSending(std::time::Duration::from_millis(2)),
    );
    common::analyze_cleanly(&[&pcap], &file_out);
    let summary = summary(&live_out);
    let (capture, drops) = (&summary["capture"], &summary["drops"]);
    assert_eq!(summary["packets"], 5000, "every frame sent: {capture} {drops}");
    assert_eq!(capture["kernel_packets"], 5000, "{capture} {drops}");
    assert_eq!(drops["kernel_drops"], 0);
    assert_eq!(drops["unread_at_stop"], 0);
    assert_same_flows(&live_out, &file_out);
}

/// SIGINT in the middle of a burst, with `--record`: frames keep arriving
/// as the workers stop, so their rings hold blocks not read yet and blocks
/// being filled. The kernel's count is exactly what the workers processed
/// plus what it dropped (nothing is left unread), and the recording holds
/// every frame processed.
#[test]
fn sigint_while_sending_processes_every_frame_the_kernel_counted() {
    let Some(ns) = Namespaces::create("live-int2") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (live_out, rec) = (dir.path().join("live"), dir.path().join("rec"));
    let args = ["--workers", "2", "-q", "-o"].map(OsStr::new);
    live_until_sigint(
        &ns,
        &[&args[..], &[live_out.as_os_str(), "--record".as_ref(), rec.as_os_str()]].concat(),
        &["gen", "--profile", "mix", "--packets", "30000", "--seed", "12"],
        "15000pps",
        Interrupt::WhileSending(std::time::Duration::from_millis(1000)),
    );
    let summary = summary(&live_out);
    let get = |v: &Value| v.as_u64().unwrap();
    let (packets, kernel) = (get(&summary["packets"]), get(&summary["capture"]["kernel_packets"]));
    let (capture, drops) = (&summary["capture"], &summary["drops"]);
    assert!(packets > 1000 && packets < 30_000, "stopped while sending: {capture}");
    assert_eq!(drops["unread_at_stop"], 0, "{capture} {drops}");
    assert_eq!(
        kernel,
        packets + get(&drops["kernel_drops"]),
        "the kernel counted nothing the run did not process or count as dropped: {capture} {drops}"
    );
    assert_eq!(summary["recording"]["packets"], packets);
    let recorded: u64 = recordings_by_worker(&rec)
        .concat()
        .iter()
        .map(|f| sluice_capture::CaptureFile::open(f).unwrap().reader().unwrap().count() as u64)
        .sum();
    assert_eq!(recorded, packets);
}
