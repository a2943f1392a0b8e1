//! The Kafka sink (`--kafka`) against a real broker: Apache Kafka 4 in
//! KRaft mode, from the Maven Central jars `.ci/run` fetches (see
//! `.ci/kafka/pom.xml`), started once for this test binary with a
//! plaintext listener and a SASL/PLAIN-over-TLS one (a throw-away
//! certificate made with the JDK's keytool). Each test consumes what Sluice
//! sent and compares it with the files of the same run. Without the jars
//! (or Java) the tests skip with a message.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::{SLUICE, run, shared_scratch, sluice};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Where `.ci/run` puts the broker's jars (or `$SLUICE_KAFKA_LIBS`).
fn kafka_libs() -> Option<PathBuf> {
    let dir = std::env::var_os("SLUICE_KAFKA_LIBS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/sluice/kafka-libs")))?;
    let has_broker = std::fs::read_dir(&dir)
        .ok()?
        .any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-")));
    let java = Command::new("java").arg("-version").output().is_ok();
    if has_broker && java {
        Some(dir)
    } else {
        eprintln!(
            "skipping: no Kafka broker jars in {} or no java (.ci/run fetches them)",
            dir.display()
        );
        None
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A broker of its own, in a directory of its own. A watchdog shell ends
/// it when this test process is gone (a static is never dropped).
struct Broker {
    plain: String,
    secure: String,
    ca: PathBuf,
    dir: PathBuf,
    watchdog: Child,
}

const KEYSTORE_PASSWORD: &str = "changeit";
const USER: &str = "sluice";
const PASSWORD: &str = "sluice-secret";

impl Broker {
    /// Starts a broker in the network namespace `netns`, or in this one.
    fn start(libs: &Path, name: &str, netns: Option<&str>) -> Broker {
        let dir = shared_scratch(name);
        let (plain, secure, controller) = (free_port(), free_port(), free_port());
        let keystore = dir.join("broker.p12");
        let ca = dir.join("ca.pem");
        run(
            "keytool",
            &[
                "-genkeypair",
                "-alias",
                "broker",
                "-keyalg",
                "RSA",
                "-keysize",
                "2048",
                "-validity",
                "2",
                "-dname",
                "CN=localhost",
                "-ext",
                "SAN=IP:127.0.0.1,DNS:localhost",
                "-storetype",
                "PKCS12",
                "-keystore",
                s(&keystore),
                "-storepass",
                KEYSTORE_PASSWORD,
            ],
        );
        run(
            "keytool",
            &[
                "-exportcert",
                "-rfc",
                "-alias",
                "broker",
                "-keystore",
                s(&keystore),
                "-storepass",
                KEYSTORE_PASSWORD,
                "-file",
                s(&ca),
            ],
        );
        let properties = dir.join("server.properties");
        let jaas = format!(
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" \
             password=\"admin-secret\" user_admin=\"admin-secret\" user_{USER}=\"{PASSWORD}\";"
        );
        std::fs::write(
            &properties,
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}\n\
                 controller.listener.names=CONTROLLER\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT\n\
                 sasl.enabled.mechanisms=PLAIN\n\
                 listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}\n\
                 ssl.keystore.type=PKCS12\n\
                 ssl.keystore.location={}\n\
                 ssl.keystore.password={KEYSTORE_PASSWORD}\n\
                 ssl.key.password={KEYSTORE_PASSWORD}\n\
                 log.dirs={}\n\
                 num.partitions=1\n\
                 offsets.topic.replication.factor=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 group.initial.rebalance.delay.ms=0\n\
                 auto.create.topics.enable=true\n",
                s(&keystore),
                s(&dir.join("data")),
            ),
        )
        .unwrap();
        let classpath = format!("{}/*", s(libs));
        run(
            "java",
            &[
                "-cp",
                &classpath,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                "q1Sh-9_ISia_zwGINzRvyQ",
                "-c",
                s(&properties),
            ],
        );
        let log = dir.join("broker.log");
        let script = format!(
            "java -Xmx512m -cp '{classpath}' kafka.Kafka '{}' > '{}' 2>&1 & j=$!; echo $j > '{}'; \
             while kill -0 {} 2>/dev/null && kill -0 $j 2>/dev/null; do sleep 0.5; done; kill $j 2>/dev/null; wait $j",
            s(&properties),
            s(&log),
            s(&dir.join("broker.pid")),
            std::process::id()
        );
        let in_netns = |program: &str| match netns {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns, program]);
                command
            }
            None => Command::new(program),
        };
        // The broker's own output goes to broker.log; the shell's (a
        // "Killed" when a test kills the broker) nowhere.
        let mut watchdog = in_netns("bash")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let listening = || match netns {
            None => TcpStream::connect(("127.0.0.1", plain)).is_ok(),
            Some(_) => in_netns("bash")
                .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{plain}")])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        while !listening() {
            if watchdog.try_wait().unwrap().is_some() || Instant::now() > deadline {
                panic!(
                    "the Kafka broker did not start:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Broker {
            plain: format!("127.0.0.1:{plain}"),
            secure: format!("127.0.0.1:{secure}"),
            ca,
            dir,
            watchdog,
        }
    }

    /// Kills the broker at once, as a crash would.
    fn kill(&mut self) {
        let pid = std::fs::read_to_string(self.dir.join("broker.pid")).unwrap();
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        let _ = self.watchdog.wait();
    }
}

/// The broker the tests share.
static BROKER: LazyLock<Option<Broker>> =
    LazyLock::new(|| kafka_libs().map(|libs| Broker::start(&libs, "kafka", None)));

/// The messages of `topic` (key, JSON value), read from its start until
/// `expected` came or nothing more came for a while.
fn consume(brokers: &str, topic: &str, expected: usize) -> Vec<(Option<String>, Value)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("test-{topic}-{}", std::process::id()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut got = Vec::new();
    let mut last = Instant::now();
    while got.len() < expected && last.elapsed() < Duration::from_secs(30) {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            // The topic may not exist yet.
            let Ok(message) = message else {
                continue;
            };
            let key = message.key().map(|k| String::from_utf8(k.to_vec()).unwrap());
            let value = serde_json::from_slice(message.payload().unwrap()).unwrap();
            got.push((key, value));
            last = Instant::now();
        }
    }
    // Nothing beyond what was expected.
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            got.push((None, serde_json::from_slice(message.payload().unwrap()).unwrap()));
        }
    }
    got
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn summary(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// The export report of `topic`.
fn export<'a>(summary: &'a Value, topic: &str) -> &'a Value {
    summary["exports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["destination"].as_str().unwrap().ends_with(&format!("/{topic}")))
        .unwrap_or_else(|| panic!("no export to {topic}: {}", summary["exports"]))
}

fn probe(args: &[&str]) -> Value {
    let output = sluice(args);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out = args
        .iter()
        .position(|a| *a == "-o")
        .map(|i| PathBuf::from(args[i + 1]))
        .unwrap();
    summary(&out)
}

/// A generated mix with a SYN flood after the detectors' warm-up, made
/// once: flows, statistics and an alarm.
static FLOOD: LazyLock<PathBuf> = LazyLock::new(|| {
    let path = shared_scratch("kafka-flood").join("flood.pcap");
    let args = [
        "gen",
        "--profile",
        "mix",
        "--packet-rate",
        "2000pps",
        "--packets",
        "300000",
    ];
    let mut all = args.to_vec();
    all.extend(["--seed", "7", "--anomaly", "syn_flood@90s+30s:20%", "-w", s(&path)]);
    run(SLUICE, &all);
    path
});

/// Every flow record, every statistics interval and every alarm line of a
/// run is a message of its topic, equal to the file's line; flow records
/// are keyed by their `flow_id`, alarms by their `alarm_id`. The same run
/// writes an IPFIX file too.
#[test]
fn records_statistics_and_alarms_reach_their_topics() {
    let Some(broker) = &*BROKER else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let summary = probe(&[
        "probe",
        "-q",
        "-r",
        s(&FLOOD),
        "-o",
        s(&out),
        "--alarms",
        "--kafka",
        &broker.plain,
        "--topic-prefix",
        "run1.",
        "--ipfix",
        &format!("file:{}", s(&dir.path().join("flows.ipfix"))),
    ]);
    let records = lines(&out.join("flows.jsonl"));
    // Three sinks from one run: the JSON file, Kafka and an IPFIX file.
    let ipfix = &summary["exports"][0];
    assert_eq!(ipfix["sink"], "ipfix");
    assert_eq!(ipfix["records"], records.len() as u64, "{ipfix}");
    assert!(std::fs::metadata(dir.path().join("flows.ipfix")).unwrap().len() > 0);
    let flows = export(&summary, "run1.flows");
    assert_eq!(flows["records"], records.len() as u64, "{flows}");
    assert_eq!(flows["failed"], 0, "{flows}");
    assert_eq!(flows["dropped_queue_full"], 0, "{flows}");
    let got = consume(&broker.plain, "run1.flows", records.len());
    assert_eq!(got.len(), records.len());
    let mut sent: Vec<&Value> = got.iter().map(|(_, v)| v).collect();
    for (key, value) in &got {
        assert_eq!(key.as_deref(), value["flow_id"].as_str());
    }
    let mut written: Vec<&Value> = records.iter().collect();
    let id = |v: &&Value| v["flow_id"].as_str().unwrap().to_string();
    sent.sort_by_key(id);
    written.sort_by_key(id);
    assert_eq!(sent, written);

    let intervals = lines(&out.join("stats.jsonl"));
    assert!(intervals.len() > 100);
    let got = consume(&broker.plain, "run1.stats", intervals.len());
    let sent: Vec<Value> = got.into_iter().map(|(_, v)| v).collect();
    assert_eq!(sent, intervals, "the intervals, in order");
    assert_eq!(export(&summary, "run1.stats")["records"], intervals.len() as u64);

    let alarms = lines(&out.join("alarms.jsonl"));
    assert!(alarms.iter().any(|a| a["detector"] == "syn_flood"), "{alarms:?}");
    let got = consume(&broker.plain, "run1.alarms", alarms.len());
    for (key, value) in &got {
        assert_eq!(key.as_deref(), value["alarm_id"].as_str());
    }
    let sent: Vec<Value> = got.into_iter().map(|(_, v)| v).collect();
    assert_eq!(sent, alarms);
}

/// Call records go to `calls`, keyed by their `call_id`.
#[test]
fn call_records_reach_their_topic() {
    let Some(broker) = &*BROKER else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("voip.pcap");
    run(
        SLUICE,
        &["gen", "--profile", "voip", "--packets", "100000", "-w", s(&pcap)],
    );
    let out = dir.path().join("out");
    let summary = probe(&[
        "probe",
        "-q",
        "-r",
        s(&pcap),
        "-o",
        s(&out),
        "--voip",
        "--no-stats",
        "--kafka",
        &broker.plain,
        "--topic-prefix",
        "run2.",
    ]);
    let calls = lines(&out.join("calls.jsonl"));
    assert!(calls.len() > 5, "{} calls", calls.len());
    let got = consume(&broker.plain, "run2.calls", calls.len());
    for (key, value) in &got {
        assert_eq!(key.as_deref(), value["call_id"].as_str());
    }
    let sent: Vec<Value> = got.into_iter().map(|(_, v)| v).collect();
    assert_eq!(sent, calls);
    assert_eq!(export(&summary, "run2.calls")["records"], calls.len() as u64);
}

/// SASL/PLAIN over TLS, the broker's certificate checked against the CA
/// given: every record delivered. A wrong password delivers none, and
/// says why, and the run still ends with every record in its file.
#[test]
fn sasl_plain_over_tls_delivers_and_a_wrong_password_is_counted() {
    let Some(broker) = &*BROKER else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let secure = |out: &Path, password: &str, topic: &str| {
        let output = Command::new(SLUICE)
            .args([
                "analyze",
                s(&FLOOD),
                "-q",
                "-o",
                s(out),
                "--kafka",
                &broker.secure,
                "--topic",
                topic,
            ])
            .args([
                "--kafka-tls",
                "--kafka-ca",
                s(&broker.ca),
                "--kafka-user",
                USER,
                "--kafka-timeout",
                "10s",
            ])
            .env("SLUICE_KAFKA_PASSWORD", password)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        (summary(out), lines(&out.join("flows.jsonl")).len() as u64)
    };
    let (good, records) = secure(&dir.path().join("good"), PASSWORD, "secure");
    let flows = export(&good, "secure");
    assert_eq!(flows["records"], records, "{flows}");
    assert_eq!(flows["failed"], 0, "{flows}");
    assert_eq!(consume(&broker.plain, "secure", records as usize).len() as u64, records);
    let written = std::fs::read_to_string(dir.path().join("good/probe.yaml")).unwrap();
    assert!(!written.contains(PASSWORD), "the password is not written out");

    let (bad, records) = secure(&dir.path().join("bad"), "wrong", "refused");
    let flows = export(&bad, "refused");
    assert_eq!(flows["records"], 0, "{flows}");
    assert_eq!(
        flows["failed"].as_u64().unwrap() + flows["dropped_queue_full"].as_u64().unwrap(),
        records,
        "{flows}"
    );
    let error = flows["last_error"].as_str().unwrap_or_default().to_lowercase();
    assert!(error.contains("authentication"), "{flows}");
}

/// The broker dies while the probe captures a live link: the capture goes
/// on (every flow has its line in flows.jsonl), the producer's queue fills
/// and its overflow is counted, what it held fails after the timeout, and
/// delivered, failed and dropped add up to every record. The broker runs
/// in the probe's network namespace, where the mix arrives on a veth.
#[test]
fn a_broker_that_dies_mid_run_is_counted_and_capture_goes_on() {
    let Some(libs) = kafka_libs() else {
        return;
    };
    let Some(ns) = common::Namespaces::create("kafka") else {
        return;
    };
    run("ip", &["-n", &ns.b, "link", "set", "lo", "up"]);
    let mut broker = Broker::start(&libs, "kafka-dying", Some(&ns.b));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let probe = Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "probe", "-i", "vb", "-q", "-o", s(&out)])
        .args(["--no-stats", "--idle-timeout", "1", "--tcp-idle-timeout", "1"])
        .args([
            "--kafka",
            &broker.plain,
            "--kafka-timeout",
            "3s",
            "--kafka-queue",
            "2000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut probe = Stopped(Some(probe));
    let started = Instant::now();
    while !out.join("probe.yaml").exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "the probe never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let sender = ns.send_mix(200_000, 5);
    // The broker dies once some records are in its log.
    let log = broker.dir.join("data/flows-0/00000000000000000000.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&log).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "nothing reached the broker");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Time for the acknowledgements of what the log holds to come back.
    std::thread::sleep(Duration::from_secs(2));
    broker.kill();
    common::succeeded(sender);
    let probe = probe.0.take().unwrap();
    run("kill", &["-TERM", &probe.id().to_string()]);
    common::succeeded(probe);
    let summary = summary(&out);
    let records = lines(&out.join("flows.jsonl")).len() as u64;
    assert!(records > 10_000, "{records} records");
    assert_eq!(records, summary["flows"].as_u64().unwrap());
    let flows = export(&summary, "flows");
    let n = |k: &str| flows[k].as_u64().unwrap();
    assert_eq!(n("records") + n("failed") + n("dropped_queue_full"), records, "{flows}");
    assert!(
        n("records") > 0,
        "some records went out before the broker died: {flows}"
    );
    assert!(n("dropped_queue_full") > 0, "{flows}");
    assert!(n("failed") > 0, "{flows}");
}

/// A probe killed when the test ends, however it ends.
struct Stopped(Option<Child>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Cells of a balanced link share the topics: four probes, each on its
/// cell's share of the traffic (`sluice balance -r`), send to one `flows`
/// topic, and its messages, keyed by `flow_id`, are one probe's flows on
/// the whole traffic: the same ids, each with the same packets and bytes.
#[test]
fn the_cells_of_a_balanced_link_share_the_topics() {
    let Some(broker) = &*BROKER else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("cell%d.pcap");
    let split = sluice(&["balance", "-r", s(&FLOOD), "--cells", "4", "-w", s(&template)]);
    assert!(split.status.success(), "{}", String::from_utf8_lossy(&split.stderr));
    for cell in 0..4 {
        let input = dir.path().join(format!("cell{cell}.pcap"));
        let out = dir.path().join(format!("out{cell}"));
        let output = sluice(&[
            "analyze",
            s(&input),
            "-q",
            "-o",
            s(&out),
            "--format",
            "none",
            "--kafka",
            &broker.plain,
            "--topic-prefix",
            "cells.",
        ]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let whole = dir.path().join("whole");
    let output = sluice(&["analyze", s(&FLOOD), "-q", "-o", s(&whole)]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let counts = |r: &Value| {
        (
            r["flow_id"].as_str().unwrap().to_string(),
            (r["packets"].clone(), r["bytes"].clone()),
        )
    };
    let expected: std::collections::BTreeMap<_, _> = lines(&whole.join("flows.jsonl")).iter().map(counts).collect();
    let got = consume(&broker.plain, "cells.flows", expected.len());
    for (key, value) in &got {
        assert_eq!(key.as_deref(), value["flow_id"].as_str());
    }
    let sent: std::collections::BTreeMap<_, _> = got.iter().map(|(_, v)| counts(v)).collect();
    assert_eq!(got.len(), sent.len(), "each flow once");
    assert_eq!(sent, expected);
}
