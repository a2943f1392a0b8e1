//! The alarms and the web console on a live capture: a mix sent through a
//! veth pair between two network namespaces with a SYN flood injected in
//! it; the console's charts grow while the traffic flows, its event stream
//! carries the intervals, the flood shows up as an alarm within seconds
//! of its start, and its evidence pcap downloads from the console holding
//! the flood's packets: over HTTP, and in headless Chromium (Playwright for
//! Python, `tests/browser/console.py`) where it is installed.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Namespaces, SLUICE, flood_syns, run, succeeded};
use serde_json::Value;

const WEB: &str = "127.0.0.1:18380";
/// The background's rate, and the flood: 20 % of it for 10 s, from 15 s.
const RATE: u64 = 2000;
const FLOOD: &str = "syn_flood@15s+10s:20%";
const FLOOD_PACKETS: u64 = RATE / 5 * 10;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// GET `path` from the console in namespace `b`: the body, if it answered
/// 200.
fn get(ns: &Namespaces, path: &str, out: &Path) -> Option<Vec<u8>> {
    let file = out.with_extension("download");
    let output = Command::new("ip")
        .args(["netns", "exec", &ns.b, "curl", "-sf", "--max-time", "5", "-o", s(&file)])
        .arg(format!("http://{WEB}{path}"))
        .output()
        .unwrap();
    if !output.status.success() {
        return None;
    }
    std::fs::read(&file).ok()
}

fn get_json(ns: &Namespaces, path: &str, out: &Path) -> Option<Value> {
    serde_json::from_slice(&get(ns, path, out)?).ok()
}

fn until<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Whether Chromium and Playwright for Python are here.
fn browser_available() -> bool {
    let chromium = Path::new("/usr/bin/chromium").exists();
    let playwright = Command::new("python3")
        .args(["-c", "import playwright.sync_api"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !chromium || !playwright {
        eprintln!("the browser part skipped: needs /usr/bin/chromium and Playwright for Python");
    }
    chromium && playwright
}

struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_syn_flood_through_a_veth_shows_up_in_the_console_with_its_packets() {
    let Some(ns) = Namespaces::create("alarms-live") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, rec) = (dir.path().join("out"), dir.path().join("rec"));
    run("ip", &["netns", "exec", &ns.b, "ip", "link", "set", "lo", "up"]);
    let probe = Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "probe", "-i", "vb", "-q", "-o", s(&out)])
        .args([
            "--record-dir",
            s(&rec),
            "--alarms",
            "--alarm",
            "warmup=8s",
            "--web",
            WEB,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut probe = KillOnDrop(Some(probe));
    until("the console never answered", Duration::from_secs(20), || {
        get(&ns, "/api/status", &out)
    });
    let page = String::from_utf8(get(&ns, "/", &out).unwrap()).unwrap();
    assert!(page.contains("uPlot"));
    let rate = format!("{RATE}pps");
    // Killed if the test fails, like the probe and the browser: a sender
    // left running would load the machine for the tests after it.
    let mut sender = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", &ns.a, SLUICE, "gen", "--profile", "mix", "-i", "va"])
            .args([
                "--rate",
                &rate,
                "--packet-rate",
                &rate,
                "--duration",
                "40s",
                "--seed",
                "4",
            ])
            .args(["--anomaly", FLOOD])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let started_ns = now_ns();
    // The same in a browser, where there is one: the page in namespace b.
    let download = dir.path().join("browser-evidence.pcap");
    let mut browser = KillOnDrop(browser_available().then(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/console.py");
        Command::new("ip")
            .args(["netns", "exec", &ns.b, "python3", s(&script), "--live", "--url"])
            .arg(format!("http://{WEB}/"))
            .args(["--detector", "syn_flood", "--download", s(&download)])
            .args(["--timeout", "90"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }));
    // The charts move while the traffic flows.
    let points = |ns: &Namespaces| -> Vec<Value> {
        get_json(ns, "/api/series", &out)
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    };
    let packets = |p: &[Value]| p.iter().filter_map(|x| x["pps"].as_f64()).sum::<f64>();
    let first = until("no interval with packets", Duration::from_secs(15), || {
        let p = points(&ns);
        (packets(&p) > 0.0).then_some(p)
    });
    std::thread::sleep(Duration::from_secs(3));
    let later = points(&ns);
    assert!(later.len() > first.len(), "{} then {} points", first.len(), later.len());
    assert!(packets(&later) > packets(&first));
    // The event stream carries the intervals as they are written.
    let events = Command::new("ip")
        .args(["netns", "exec", &ns.b, "curl", "-sN", "--max-time", "3"])
        .arg(format!("http://{WEB}/api/events"))
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(events.contains("event: interval"), "{events}");
    // The flood, within seconds of its start (15 s of packets in).
    let flood = || {
        let alarms = get_json(&ns, "/api/alarms", &out)?;
        alarms
            .as_array()?
            .iter()
            .find(|a| a["detector"] == "syn_flood")
            .cloned()
    };
    let waited = Instant::now();
    let alarm = loop {
        if let Some(alarm) = flood() {
            break alarm;
        }
        if waited.elapsed() > Duration::from_secs(45) {
            // What the probe and the sender saw, for a failure on a loaded
            // machine to be told from a detector's.
            let alarms = get_json(&ns, "/api/alarms", &out);
            let status = get_json(&ns, "/api/status", &out);
            let series = get_json(&ns, "/api/series", &out);
            let sent = sender.0.take().map(|mut c| {
                let _ = c.kill();
                String::from_utf8_lossy(&c.wait_with_output().unwrap().stderr).into_owned()
            });
            panic!(
                "the SYN flood never showed up\nalarms: {alarms:?}\nstatus: {status:?}\nsender: {sent:?}\nseries: {series:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let seen_ns = now_ns();
    let start_ns = alarm["start_ts_ns"].as_u64().unwrap();
    assert!(start_ns >= started_ns, "{alarm}");
    assert!(
        seen_ns - start_ns <= 5_000_000_000,
        "seen {} s after it started",
        (seen_ns - start_ns) / 1_000_000_000
    );
    assert_eq!(alarm["hosts"], serde_json::json!(["198.51.100.80"]));
    // Its evidence, once it has closed and been cut.
    let id = alarm["alarm_id"].as_str().unwrap().to_string();
    let closed = until(
        "the flood's alarm never got its evidence",
        Duration::from_secs(60),
        || {
            let alarms = get_json(&ns, "/api/alarms", &out)?;
            alarms
                .as_array()?
                .iter()
                .find(|a| a["alarm_id"] == id.as_str() && a["evidence"].is_string())
                .cloned()
        },
    );
    let evidence = closed["evidence"].as_str().unwrap();
    let pcap = get(&ns, &format!("/api/{evidence}"), &out).expect("the evidence downloads");
    let path = dir.path().join("evidence.pcap");
    std::fs::write(&path, pcap).unwrap();
    let syns = flood_syns(&path);
    assert!(
        syns * 100 >= FLOOD_PACKETS * 99,
        "{syns} of {FLOOD_PACKETS} SYNs in {evidence}"
    );
    if let Some(browser) = browser.0.take() {
        let output = browser.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(seen["console_errors"], serde_json::json!([]), "{seen}");
        assert_eq!(seen["state"], "live", "{seen}");
        assert!(
            seen["points_later"].as_u64() > seen["points"].as_u64(),
            "the charts did not move: {seen}"
        );
        assert!(seen["pps_later"].as_f64().unwrap() > 0.0, "{seen}");
        let shown_ns = (seen["alarm_unix_s"].as_f64().unwrap() * 1e9) as u64;
        assert!(
            shown_ns.saturating_sub(start_ns) <= 5_000_000_000,
            "the page showed the flood late: {seen}"
        );
        assert_eq!(seen["alarm_hosts"], "198.51.100.80", "{seen}");
        let syns = flood_syns(&download);
        assert!(
            syns * 100 >= FLOOD_PACKETS * 99,
            "{syns} of {FLOOD_PACKETS} SYNs downloaded by the page"
        );
    }
    succeeded(sender.0.take().unwrap());
    let child = probe.0.take().unwrap();
    run("kill", &["-TERM", &child.id().to_string()]);
    let stderr = succeeded(child);
    let lines = std::fs::read_to_string(out.join("alarms.jsonl")).unwrap();
    assert!(lines.contains(&format!("\"alarm_id\":\"{id}\"")), "{stderr}");
}
