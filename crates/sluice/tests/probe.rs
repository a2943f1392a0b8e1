//! `sluice probe` on files: its statistics add up to its totals whatever
//! the number of workers, its configuration prints and reads back, and the
//! presets (`analyze`, `record`, `abstract`) write what the probe writes
//! with the same listeners.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use common::{ndpi_pcaps, shared_mix, sluice};
use serde_json::Value;

/// A generated mix, made once for every test here.
static MIX: LazyLock<PathBuf> = LazyLock::new(|| shared_mix("probe-mix", 60_000, 11));

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn stats_lines(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("stats.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `sluice probe ARGS`, which must succeed.
fn probe(args: &[&str]) {
    let mut all = vec!["probe", "-q"];
    all.extend_from_slice(args);
    let output = sluice(&all);
    assert!(
        output.status.success(),
        "sluice {all:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The intervals' packets, bytes and flows add up to the run's, in total
/// and per transport; the file is the same for one worker and for two.
#[test]
fn statistics_add_up_to_the_totals_for_any_number_of_workers() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for workers in ["1", "2"] {
        let out = dir.path().join(format!("w{workers}"));
        probe(&[
            "-r",
            s(&MIX),
            "-o",
            s(&out),
            "--workers",
            workers,
            "--stats-interval",
            "100ms",
        ]);
        let lines = stats_lines(&out);
        assert!(lines.len() > 5, "{} intervals", lines.len());
        let summary = json(&out.join("summary.json"));
        let sum = |field: &str| lines.iter().map(|l| l[field].as_u64().unwrap()).sum::<u64>();
        assert_eq!(sum("packets"), summary["packets"].as_u64().unwrap());
        assert_eq!(sum("bytes"), summary["bytes"].as_u64().unwrap());
        assert_eq!(sum("flows_ended"), summary["flows"].as_u64().unwrap());
        assert_eq!(sum("flows_new"), summary["flow_ends"]["created"].as_u64().unwrap());
        let mut l4: BTreeMap<String, [u64; 2]> = BTreeMap::new();
        for line in &lines {
            for (name, c) in line["l4"].as_object().unwrap() {
                let e = l4.entry(name.clone()).or_default();
                e[0] += c["packets"].as_u64().unwrap();
                e[1] += c["bytes"].as_u64().unwrap();
            }
            // Intervals follow packet time, one after another.
            assert_eq!(line["interval_ns"], 100_000_000);
            assert_eq!(line["ts_ns"].as_u64().unwrap() % 100_000_000, 0);
        }
        let expected: BTreeMap<String, [u64; 2]> = summary["l4"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    [c["packets"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()],
                )
            })
            .collect();
        assert_eq!(l4, expected);
        let mrtg = std::fs::read_to_string(out.join("mrtg/packets.log")).unwrap();
        assert_eq!(mrtg.lines().count(), lines.len());
        let first = mrtg.lines().next().unwrap();
        assert_eq!(
            first,
            format!(
                "{} {}",
                lines[0]["ts_ns"].as_u64().unwrap() / 1_000_000_000,
                lines[0]["packets"]
            )
        );
        files.push(std::fs::read(out.join("stats.jsonl")).unwrap());
    }
    assert!(files[0] == files[1], "stats.jsonl differs between 1 and 2 workers");
}

/// Each interval's top hosts are the largest by bytes, packets or flows,
/// and their figures are the sums of their flows in that interval: on a
/// capture of one interval, the sums of the flow records.
#[test]
fn top_hosts_are_what_the_records_say() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    probe(&[
        "-r",
        s(&MIX),
        "-o",
        s(&out),
        "--stats-interval",
        "1h",
        "--stats-top",
        "5",
    ]);
    let lines = stats_lines(&out);
    assert_eq!(lines.len(), 1);
    let mut bytes: BTreeMap<String, u64> = BTreeMap::new();
    for r in common::flow_records(&out) {
        let b = r["c2s_bytes"].as_u64().unwrap() + r["s2c_bytes"].as_u64().unwrap();
        for host in ["src_ip", "dst_ip"] {
            *bytes.entry(r[host].as_str().unwrap().to_string()).or_default() += b;
        }
    }
    let mut by_bytes: Vec<(&String, &u64)> = bytes.iter().collect();
    by_bytes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top = lines[0]["top_hosts"].as_array().unwrap();
    for (i, (host, b)) in by_bytes.iter().take(5).enumerate() {
        assert_eq!(top[i]["host"].as_str().unwrap(), host.as_str(), "{top:?}");
        assert_eq!(top[i]["bytes"].as_u64().unwrap(), **b);
    }
}

/// `--print-config` prints the effective file, which reads back to the
/// same configuration, and every run writes it beside its outputs.
#[test]
fn the_configuration_prints_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("probe.yaml");
    std::fs::write(
        &config,
        "flows: [{format: csv}, {name: second, format: jsonl}]\nstats: {interval: 500ms, top: 3}\nrecord: {dir: rec, rotate: 1MiB}\n",
    )
    .unwrap();
    let printed = sluice(&["probe", "--config", s(&config), "--workers", "1", "--print-config"]);
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).unwrap();
    assert!(
        text.contains("interval: 500ms") && text.contains("rotate: 1MiB") && text.contains("workers: 1"),
        "{text}"
    );
    let again = dir.path().join("again.yaml");
    std::fs::write(&again, &text).unwrap();
    let reprinted = sluice(&["probe", "--config", s(&again), "--print-config"]);
    assert_eq!(String::from_utf8(reprinted.stdout).unwrap(), text);

    let out = dir.path().join("out");
    let rec = dir.path().join("rec");
    probe(&[
        "--config",
        s(&config),
        "-r",
        s(&MIX),
        "-o",
        s(&out),
        "--record-dir",
        s(&rec),
    ]);
    assert!(out.join("flows.csv").is_file() && out.join("second/flows.jsonl").is_file());
    let written = std::fs::read_to_string(out.join("probe.yaml")).unwrap();
    assert!(
        written.contains(s(&rec)) && written.contains("interval: 500ms"),
        "{written}"
    );
    let bad = sluice(&["probe", "--config", s(&config), "--stats-top", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    std::fs::write(&config, "stats: {intervall: 1s}\n").unwrap();
    let bad = sluice(&["probe", "--config", s(&config), "-r", s(&MIX)]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("intervall"), "{stderr}");
}

/// What `analyze` writes equals what the probe writes with the `flows`
/// listener alone, on every nDPI capture read as one run and on the mix.
#[test]
fn analyze_is_the_probe_with_flows() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = vec![MIX.clone()];
    if let Some(pcaps) = ndpi_pcaps() {
        let mut all: Vec<PathBuf> = std::fs::read_dir(pcaps).unwrap().map(|e| e.unwrap().path()).collect();
        all.sort();
        inputs.extend(all);
    }
    let analyzed = dir.path().join("analyze");
    let probed = dir.path().join("probe");
    let mut analyze_args: Vec<&str> = vec!["analyze", "-q", "-o", s(&analyzed)];
    let mut probe_args: Vec<&str> = vec!["probe", "-q", "-o", s(&probed), "--no-stats"];
    for input in &inputs {
        analyze_args.push(s(input));
        probe_args.extend(["-r", s(input)]);
    }
    let a = sluice(&analyze_args);
    let p = sluice(&probe_args);
    assert_eq!(
        a.status.code(),
        p.status.code(),
        "{}",
        String::from_utf8_lossy(&p.stderr)
    );
    let sorted = |dir: &Path| {
        let mut lines: Vec<String> = std::fs::read_to_string(dir.join("flows.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    };
    assert!(sorted(&analyzed) == sorted(&probed), "the records differ");
    let summary = |dir: &Path| {
        let mut v = json(&dir.join("summary.json"));
        for timing in [
            "wall_seconds",
            "packets_per_second",
            "bits_per_second",
            "threads",
            "records_path",
        ] {
            v.as_object_mut().unwrap().remove(timing);
        }
        v
    };
    assert_eq!(summary(&analyzed), summary(&probed));
}

/// `record -r` writes the same files as the probe with the `record`
/// listener alone: the captures and their indexes, byte for byte.
#[test]
fn record_is_the_probe_with_a_recorder() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("record"), dir.path().join("probe"));
    let recorded = sluice(&["record", "-r", s(&MIX), "-w", s(&a), "--rotate", "2MiB", "-q"]);
    assert!(
        recorded.status.success(),
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    probe(&[
        "-r",
        s(&MIX),
        "-o",
        s(&b),
        "--no-flows",
        "--no-stats",
        "--record-dir",
        s(&b),
        "--rotate",
        "2MiB",
    ]);
    let captures = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".pcap"))
            .collect();
        names.sort();
        names
    };
    let names = captures(&a);
    assert!(names.len() > 2, "{names:?}");
    assert_eq!(names, captures(&b));
    for name in names {
        assert!(
            std::fs::read(a.join(&name)).unwrap() == std::fs::read(b.join(&name)).unwrap(),
            "{name} differs"
        );
    }
    let (sa, sb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    assert_eq!(sa["recording"]["packets"], sb["recording"]["packets"]);
    assert_eq!(sa["recording"]["packets"], 60000);
}

/// `abstract -r` counts what the probe with the `abstract` listener alone
/// counts.
#[test]
fn abstract_is_the_probe_with_stream_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let counters = dir.path().join("counters.json");
    let out = sluice(&[
        "abstract",
        "-r",
        s(&MIX),
        "--dir",
        s(&dir.path().join("a")),
        "--stats",
        s(&counters),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let probed = dir.path().join("probe");
    probe(&[
        "-r",
        s(&MIX),
        "-o",
        s(&probed),
        "--no-flows",
        "--no-stats",
        "--abstract-dir",
        s(&dir.path().join("b")),
    ]);
    let mut from_probe = json(&probed.join("summary.json"))["abstract"].clone();
    from_probe.as_object_mut().unwrap().remove("dropped_packets");
    assert_eq!(json(&counters), from_probe);
    assert_eq!(from_probe["packets"]["packets"], 60000);
}

/// One run with flows, statistics, a recording and stream sockets reads
/// the file once: the recording holds every packet, the records equal
/// `analyze`'s of that recording, and the abstractor counts every packet.
#[test]
fn one_capture_feeds_every_listener() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let rec = dir.path().join("rec");
    let sockets = dir.path().join("sockets");
    probe(&[
        "-r",
        s(&MIX),
        "-o",
        s(&out),
        "--record-dir",
        s(&rec),
        "--abstract-dir",
        s(&sockets),
    ]);
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["recording"]["packets"], 60000);
    assert_eq!(summary["abstract"]["packets"]["packets"], 60000);
    let again = dir.path().join("again");
    let mut recordings: Vec<PathBuf> = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    recordings.sort();
    common::analyze_all(&recordings, &again, &[]);
    let counts = |dir: &Path| common::flow_counts(&common::flow_records(dir));
    assert_eq!(counts(&out), counts(&again));
}
