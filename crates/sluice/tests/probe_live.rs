//! `sluice probe` on a live interface: generated traffic sent through a
//! veth pair between two network namespaces the tests create, into one
//! probe running every listener at once; SIGHUP while it runs; a consumer
//! that never reads; Prometheus scraping its metrics; and the systemd unit
//! shipped in docs/.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Namespaces, SLUICE, flow_counts, flow_records, run, succeeded};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// `sluice probe -i vb ARGS` in namespace `b`.
fn start_probe(ns: &Namespaces, args: &[&str]) -> Child {
    Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "probe", "-i", "vb", "-q"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a probe with SIGTERM, as a service manager does, and returns its
/// standard error; it must exit 0.
fn stop(child: Child) -> String {
    run("kill", &["-TERM", &child.id().to_string()]);
    succeeded(child)
}

/// Waits until `path` exists (the probe has started), at most 20 s.
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

/// Frames the sender says it sent.
fn sent(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("sent on"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let after = line.split(": ").nth(1).unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

fn stats_lines(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("stats.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every listener on one capture: the recording holds every packet sent,
/// the flow records equal `analyze`'s of the recording (keys, packets,
/// bytes, times), the statistics add up to the totals, an HTTP analyzer
/// on the abstractor's `tcp/http` gets its streams, and `/metrics` has the
/// counters.
#[test]
fn every_listener_on_one_live_capture() {
    let Some(ns) = Namespaces::create("probe-all") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, rec, taps) = (dir.path().join("out"), dir.path().join("rec"), dir.path().join("taps"));
    let probe = start_probe(
        &ns,
        &[
            "-o",
            s(&out),
            "--workers",
            "2",
            "--record-dir",
            s(&rec),
            "--abstract-dir",
            s(&taps),
            "--wait-for",
            "tcp/http",
            "--metrics",
            "127.0.0.1:0",
            "--stats-interval",
            "500ms",
        ],
    );
    let http = taps.join("tcp/http");
    wait_for(&http);
    let analyzer = Command::new("python3")
        .args(["-m", "sluice_tap.http", s(&http)])
        .env("PYTHONPATH", Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The probe writes probe.yaml when it starts capturing, once the
    // analyzer is connected.
    wait_for(&out.join("probe.yaml"));
    let sender = succeeded(ns.send_mix(20_000, 3));
    let sent = sent(&sender);
    std::thread::sleep(Duration::from_millis(1500));
    stop(probe);
    let output = analyzer.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let exchanges: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();

    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["packets"], sent, "{summary:#}");
    assert_eq!(summary["drops"]["kernel_drops"], 0);
    assert_eq!(summary["recording"]["packets"], sent);
    // Live, the abstractor drops (and counts) a batch its thread has no
    // room for rather than hold the capture back: on cores busy with
    // other work it may; every packet is either abstracted or counted.
    let abstracted = summary["abstract"]["packets"]["packets"].as_u64().unwrap();
    let dropped = summary["abstract"]["dropped_packets"].as_u64().unwrap();
    assert_eq!(abstracted + dropped, sent, "{:#}", summary["abstract"]);
    // Two rings: each records into its own directory.
    assert!(rec.join("w0").is_dir() && rec.join("w1").is_dir());
    let again = dir.path().join("again");
    let merged = dir.path().join("merged.pcap");
    run(SLUICE, &["extract", "-r", s(&rec), "-w", s(&merged)]);
    common::analyze(&merged, &again, &["--workers", "1"]);
    let records = flow_records(&out);
    assert_eq!(flow_counts(&records), flow_counts(&flow_records(&again)));
    let times = |records: &[Value]| {
        let mut t: Vec<(u64, u64)> = records
            .iter()
            .map(|r| (r["first_ts_ns"].as_u64().unwrap(), r["last_ts_ns"].as_u64().unwrap()))
            .collect();
        t.sort();
        t
    };
    assert_eq!(times(&records), times(&flow_records(&again)));

    let lines = stats_lines(&out);
    let sum = |field: &str| lines.iter().map(|l| l[field].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("packets"), sent);
    assert_eq!(sum("flows_ended"), records.len() as u64);
    assert_eq!(lines[0]["interfaces"]["vb"]["kernel_drops"], 0);

    // Each HTTP exchange the analyzer read is of a flow the records hold.
    assert!(!exchanges.is_empty());
    let clients: std::collections::BTreeSet<(String, u64)> = records
        .iter()
        .map(|r| {
            (
                r["src_ip"].as_str().unwrap().to_string(),
                r["src_port"].as_u64().unwrap(),
            )
        })
        .collect();
    for e in &exchanges {
        let client = (
            e["client"]["ip"].as_str().unwrap().to_string(),
            e["client"]["port"].as_u64().unwrap(),
        );
        assert!(clients.contains(&client), "{e}");
    }
}

/// A consumer that connects to the abstractor and never reads: the
/// abstractor drops (and counts) what it cannot deliver, and the other
/// listeners' counts stay exact.
#[test]
fn a_consumer_that_never_reads_leaves_the_other_listeners_exact() {
    let Some(ns) = Namespaces::create("probe-stuck") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, rec, taps) = (dir.path().join("out"), dir.path().join("rec"), dir.path().join("taps"));
    let probe = start_probe(
        &ns,
        &[
            "-o",
            s(&out),
            "--workers",
            "1",
            "--record-dir",
            s(&rec),
            "--abstract-dir",
            s(&taps),
            "--buffer-mib",
            "1",
            "--stall",
            "2s",
            "--wait-for",
            "tcp/http,tcp/tls",
        ],
    );
    wait_for(&taps.join("tcp/tls"));
    // Connected, never read: the socket's buffers fill and stay full.
    let stuck: Vec<_> = ["tcp/http", "tcp/tls"]
        .iter()
        .map(|i| std::os::unix::net::UnixStream::connect(taps.join(i)).unwrap())
        .collect();
    wait_for(&out.join("probe.yaml"));
    // SF-TAP's HTTP workload: more bytes for tcp/http than its queue and
    // the socket's kernel buffer together hold.
    let sender = Command::new("ip")
        .args(["netns", "exec", &ns.a, SLUICE, "gen", "--profile", "connections"])
        .args(["--packets", "48000", "--seed", "4", "-i", "va", "--rate", "24000pps"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sent = sent(&succeeded(sender));
    std::thread::sleep(Duration::from_millis(1500));
    stop(probe);
    drop(stuck);
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["packets"], sent);
    assert_eq!(summary["recording"]["packets"], sent);
    assert_eq!(summary["recording"]["dropped"], 0);
    let flows_packets: u64 = summary["l4"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(
        flows_packets,
        sent - summary["drops"]["non_ip_frames"].as_u64().unwrap()
    );
    let abstracted = &summary["abstract"];
    let dropped: u64 = abstracted["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["dropped_events"].as_u64().unwrap())
        .sum::<u64>()
        + abstracted["dropped_packets"].as_u64().unwrap();
    assert!(dropped > 0, "nothing counted as dropped: {}", abstracted["interfaces"]);
}

/// SIGHUP while records are being written: the file is reopened under its
/// name, and the records before (in the moved file) and after (in the new
/// one) are every record of the run, each whole.
#[test]
fn sighup_reopens_the_outputs_and_loses_no_record() {
    let Some(ns) = Namespaces::create("probe-hup") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let probe = start_probe(
        &ns,
        &[
            "-o",
            s(&out),
            "--workers",
            "2",
            "--idle-timeout",
            "1",
            "--tcp-idle-timeout",
            "1",
        ],
    );
    wait_for(&out.join("probe.yaml"));
    // Five seconds of traffic; flows idle for a second end at the next
    // tick, and their records are handed over every second: by the third
    // second some are in the file.
    let sender = ns.send_mix(100_000, 5);
    std::thread::sleep(Duration::from_millis(3200));
    // As logrotate does: move the files away, then tell the probe.
    for f in ["flows.jsonl", "stats.jsonl"] {
        std::fs::rename(out.join(f), out.join(format!("{f}.1"))).unwrap();
    }
    run("kill", &["-HUP", &probe.id().to_string()]);
    let sent = sent(&succeeded(sender));
    std::thread::sleep(Duration::from_millis(2500));
    stop(probe);
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["packets"], sent);
    let lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(out.join(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: a torn line: {e}: {l}")))
            .collect()
    };
    let (before, after) = (lines("flows.jsonl.1"), lines("flows.jsonl"));
    assert!(
        !before.is_empty() && !after.is_empty(),
        "{} before, {} after",
        before.len(),
        after.len()
    );
    assert_eq!((before.len() + after.len()) as u64, summary["flows"].as_u64().unwrap());
    let stats: u64 = lines("stats.jsonl.1")
        .iter()
        .chain(&lines("stats.jsonl"))
        .map(|l| l["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(stats, sent);
}

/// A real Prometheus server scrapes `/metrics` every second; once the
/// traffic has stopped, its counters equal the sums of the statistics log.
#[test]
fn prometheus_scrapes_the_statistics_totals() {
    if Command::new("prometheus").arg("--version").output().is_err() {
        eprintln!("skipping: the prometheus server is not installed (apt-get install prometheus)");
        return;
    }
    let Some(ns) = Namespaces::create("probe-prom") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Both in namespace b, on its loopback.
    run("ip", &["netns", "exec", &ns.b, "ip", "link", "set", "lo", "up"]);
    let metrics = "127.0.0.1:19900";
    let probe = start_probe(&ns, &["-o", s(&out), "--metrics", metrics]);
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: sluice\n    static_configs: [{{targets: ['{metrics}']}}]\n"
        ),
    )
    .unwrap();
    let prometheus = Command::new("ip")
        .args(["netns", "exec", &ns.b, "prometheus"])
        .arg(format!("--config.file={}", s(&config)))
        .arg(format!("--storage.tsdb.path={}", s(&dir.path().join("tsdb"))))
        .args(["--web.listen-address=127.0.0.1:19090"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(prometheus);
    let query = |q: &str| -> Option<f64> {
        let output = Command::new("ip")
            .args(["netns", "exec", &ns.b, "curl", "-sf"])
            .arg(format!("http://127.0.0.1:19090/api/v1/query?query={q}"))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&output.stdout).ok()?;
        let results = v["data"]["result"].as_array()?;
        (!results.is_empty()).then(|| {
            results
                .iter()
                .map(|r| r["value"][1].as_str().unwrap().parse::<f64>().unwrap())
                .sum()
        })
    };
    // Until the server has scraped the probe once.
    let until = |what: &str, ok: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !ok() {
            assert!(start.elapsed() < Duration::from_secs(60), "{what}");
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    wait_for(&out.join("probe.yaml"));
    until("prometheus never scraped the probe", &|| query("up") == Some(1.0));
    let sent = sent(&succeeded(ns.send_mix(20_000, 6)));
    // Intervals after the traffic carry nothing: once the server holds every
    // packet, its counters stop moving.
    until("prometheus never saw every packet", &|| {
        query("sluice_packets_total") == Some(sent as f64)
    });
    std::thread::sleep(Duration::from_secs(3));
    let query = |q: &str| query(q).unwrap_or_else(|| panic!("no {q}"));
    let lines = stats_lines(&out);
    let sum = |field: &str| lines.iter().map(|l| l[field].as_u64().unwrap()).sum::<u64>() as f64;
    assert_eq!(query("sluice_packets_total"), sent as f64);
    assert_eq!(query("sluice_packets_total"), sum("packets"));
    assert_eq!(query("sluice_bytes_total"), sum("bytes"));
    assert_eq!(query("sluice_flows_new_total"), sum("flows_new"));
    assert_eq!(query("sluice_flows_ended_total"), sum("flows_ended"));
    assert!(query("sluice_l4_packets_total") > 0.0);
    assert!(query("sluice_thread_cpu_seconds_total") > 0.0);
    stop(probe);
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The systemd unit in docs/ passes `systemd-analyze verify`, with the
/// binary it starts where the unit says.
#[test]
fn the_systemd_unit_verifies() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("skipping: systemd-analyze is not installed");
        return;
    }
    let unit =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/sluice-probe.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/sluice probe"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice-probe.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/sluice", SLUICE)).unwrap();
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("sluice-probe.service:"), "{stderr}");
}
