//! How much UDTS and WDTS (seed 000 §4.3) recover of the timing that a
//! batch-stamping source loses, measured on real traffic: frames paced at a
//! known rate cross a veth pair between two namespaces this test creates
//! (and deletes), the live ring captures them with the kernel's per-packet
//! ns timestamps as the reference, and a batch source is emulated by giving
//! every packet of a ring block one time: the block's last packet's time
//! ("last", a driver that stamps a batch when it closes it) or the time
//! user space read the block ("read", one that stamps when it fetches it).
//! The error is each corrected inter-arrival time minus the reference one.
//!
//! `corrections_reduce_inter_arrival_error` sends with its own paced raw
//! socket and asserts a clear gain; `measure` (ignored; bench/timestamps.py
//! runs it) takes its settings from the environment and can send with
//! `sluice gen` instead. Needs root and `ip`; otherwise it says so and
//! passes.
#![cfg(target_os = "linux")]

mod common;

use common::{Injector, VethLab};

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_capture::live::{BatchStamper, BatchTimestamps, LiveConfig, LiveSocket};

const SEND_IF: &str = "va";
const CAPTURE_IF: &str = "vb";
/// Source MAC prefix and EtherType of the frames the test sends itself.
const OUR_MAC: [u8; 6] = [0x02, 0x53, 0x4c, 0x54, 0x53, 0x01];
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Frame sizes cycled through by the test's sender: a spread like a real
/// mix's, from minimum-size frames to full ones.
const SIZES: [usize; 8] = [64, 1514, 128, 576, 1514, 64, 300, 1000];

/// Who sends, and how the schedule is known.
enum Sender {
    /// This test's raw socket, frame `k` due at `k / rate`; each frame
    /// carries its due time (ns from the first) after the Ethernet header.
    Own,
    /// `sluice gen --profile mix` at `rate` packets per second: evenly
    /// spaced by its pacer, so the schedule's inter-arrival is `1 / rate`.
    Gen(String),
}

struct Settings {
    sender: Sender,
    rate_pps: u64,
    packets: u64,
    block_bytes: usize,
    block_timeout_ms: u32,
}

/// One captured packet: kernel time, size, and when it was due (from the
/// first frame), where known.
#[derive(Clone, Copy)]
struct Rec {
    ts: u64,
    len: u32,
    due: Option<u64>,
}

/// One ring block: its packets are `recs[start..start + len]`.
struct Batch {
    start: usize,
    len: usize,
    read_ns: u64,
}

struct Capture {
    recs: Vec<Rec>,
    batches: Vec<Batch>,
    drops: u64,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Sends `packets` of the test's frames on `injector`, frame `k` at `k /
/// rate` from the first, each carrying its due time after the Ethernet
/// header and cycling through [`SIZES`].
fn send_paced(injector: &Injector, rate: u64, packets: u64) {
    let mut frame = [0u8; 1514];
    frame[..6].copy_from_slice(&[0x02, 0x53, 0x4c, 0x54, 0x53, 0x02]);
    frame[6..12].copy_from_slice(&OUR_MAC);
    frame[12..14].copy_from_slice(&ETHERTYPE);
    let start = Instant::now();
    for k in 0..packets {
        let due = (u128::from(k) * 1_000_000_000 / u128::from(rate)) as u64;
        let due_at = start + Duration::from_nanos(due);
        loop {
            let now = Instant::now();
            if now >= due_at {
                break;
            }
            let left = due_at - now;
            if left > Duration::from_micros(200) {
                thread::sleep(left - Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
        frame[14..22].copy_from_slice(&due.to_be_bytes());
        injector.send(&frame[..SIZES[k as usize % SIZES.len()]]);
    }
}

/// The due time a frame of the test's sender carries, if it is one.
fn due_of(data: &[u8]) -> Option<u64> {
    if data.len() < 22 || data[6..12] != OUR_MAC || data[12..14] != ETHERTYPE {
        return None;
    }
    Some(u64::from_be_bytes(data[14..22].try_into().unwrap()))
}

fn capture(lab: &VethLab, settings: &Settings) -> Capture {
    let mut config = LiveConfig::new(CAPTURE_IF);
    config.block_bytes = settings.block_bytes;
    config.ring_bytes = settings.block_bytes * 64;
    config.block_timeout_ms = settings.block_timeout_ms;
    config.snaplen = 64;
    let mut socket = lab.in_b(|| LiveSocket::open(&config)).expect("open the capture socket");
    let rate = settings.rate_pps;
    let packets = settings.packets;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    thread::scope(|s| {
        match &settings.sender {
            Sender::Own => {
                let injector = lab.in_a(|| Injector::open(SEND_IF));
                s.spawn(move || {
                    send_paced(&injector, rate, packets);
                    let _ = done_tx.send(());
                });
            }
            Sender::Gen(bin) => {
                let mut child = Command::new("ip")
                    .args(["netns", "exec", &lab.a, bin, "gen", "--profile", "mix", "--packets"])
                    .arg(packets.to_string())
                    .args(["-i", SEND_IF, "--rate"])
                    .arg(format!("{rate}pps"))
                    .spawn()
                    .expect("run sluice gen");
                s.spawn(move || {
                    let status = child.wait().expect("sluice gen");
                    assert!(status.success(), "sluice gen failed: {status}");
                    let _ = done_tx.send(());
                });
            }
        }
        let own = matches!(settings.sender, Sender::Own);
        let mut recs = Vec::with_capacity(packets as usize);
        let mut batches = Vec::new();
        let mut quiet_since: Option<Instant> = None;
        loop {
            let sender_done = done_rx.try_recv().is_ok() || quiet_since.is_some();
            if sender_done && quiet_since.is_none() {
                quiet_since = Some(Instant::now());
            }
            if recs.len() as u64 >= packets || quiet_since.is_some_and(|t| t.elapsed() > Duration::from_millis(500)) {
                break;
            }
            let Some(mut block) = socket.next_block(Duration::from_millis(50)).expect("read the ring") else {
                continue;
            };
            let read_ns = now_ns();
            let start = recs.len();
            for p in block.packets() {
                if own {
                    let Some(due) = due_of(p.data) else { continue };
                    recs.push(Rec {
                        ts: p.ts_ns,
                        len: p.wire_len,
                        due: Some(due),
                    });
                } else {
                    recs.push(Rec {
                        ts: p.ts_ns,
                        len: p.wire_len,
                        due: None,
                    });
                }
            }
            if recs.len() > start {
                batches.push(Batch {
                    start,
                    len: recs.len() - start,
                    read_ns,
                });
            }
        }
        let drops = socket.stats().map(|s| s.drops).unwrap_or(0);
        Capture { recs, batches, drops }
    })
}

/// Which time a batch source gives a block's packets.
#[derive(Clone, Copy, Debug)]
enum Stamp {
    /// The block's last packet's kernel time: stamped when the batch closed.
    Last,
    /// When user space got the block: stamped when the batch was fetched.
    Read,
}

impl Stamp {
    fn name(self) -> &'static str {
        match self {
            Stamp::Last => "last packet",
            Stamp::Read => "block read",
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    std: f64,
    mean_abs: f64,
    /// 99th percentile of the absolute error: the standard deviation
    /// follows the few largest errors (a sender's or scheduler's stall),
    /// this shows the rest.
    p99_abs: f64,
}

fn stats(errors: impl Iterator<Item = f64>) -> Stats {
    let mut abs: Vec<f64> = Vec::new();
    let (mut sum, mut sum_sq) = (0f64, 0f64);
    for e in errors {
        sum += e;
        sum_sq += e * e;
        abs.push(e.abs());
    }
    if abs.len() < 2 {
        return Stats::default();
    }
    let n = abs.len() as f64;
    let mean = sum / n;
    abs.sort_by(f64::total_cmp);
    Stats {
        std: ((sum_sq / n - mean * mean).max(0.0)).sqrt(),
        mean_abs: abs.iter().sum::<f64>() / n,
        p99_abs: abs[(abs.len() - 1) * 99 / 100],
    }
}

/// The emulated batch source's times for every packet, corrected by `mode`.
fn corrected(capture: &Capture, stamp: Stamp, mode: BatchTimestamps) -> Vec<u64> {
    let mut stamps = vec![0u64; capture.recs.len()];
    let mut lens = Vec::new();
    let mut stamper = BatchStamper::new(mode);
    for batch in &capture.batches {
        let recs = &capture.recs[batch.start..batch.start + batch.len];
        let time = match stamp {
            Stamp::Last => recs.last().unwrap().ts,
            Stamp::Read => batch.read_ns,
        };
        lens.clear();
        lens.extend(recs.iter().map(|r| r.len));
        stamper.correct(time, &lens, &mut stamps[batch.start..batch.start + batch.len]);
    }
    stamps
}

struct Row {
    stamp: Stamp,
    mode: BatchTimestamps,
    vs_kernel: Stats,
    vs_schedule: Stats,
    /// Against the kernel, on steady blocks only.
    steady: Stats,
}

struct Report {
    packets: usize,
    batches: usize,
    drops: u64,
    /// The kernel's times against the sender's schedule.
    kernel_vs_schedule: Stats,
    /// The share of the measured pairs that lie in steady blocks.
    steady_share: f64,
    rows: Vec<Row>,
}

fn analyse(capture: &Capture, rate_pps: u64) -> Report {
    let recs = &capture.recs;
    // Pairs whose earlier packet is in the first block are left out: the
    // first block has no previous one, so nothing can correct it.
    let first = capture.batches.first().map_or(recs.len(), |b| b.len).max(1);
    let period = 1e9 / rate_pps as f64;
    let sched = |i: usize| match (recs[i].due, recs[i - 1].due) {
        (Some(a), Some(b)) => a as f64 - b as f64,
        _ => period,
    };
    let reference = |i: usize| recs[i].ts as f64 - recs[i - 1].ts as f64;
    let pairs = || first..recs.len();
    // A block is steady when every packet in it (from its first, paired
    // with the previous block's last) came within half a period (at least
    // 20 µs, a scheduler's usual noise) of its schedule: the sender and the
    // receiving CPU kept pace. On a loaded
    // machine a stalled sender puts real gaps into a block, which UDTS and
    // WDTS cannot know about (the thesis's Figure 4.5 case); the errors on
    // steady blocks show the method's own error.
    let tolerance = (period / 2.0).max(20_000.0);
    let mut steady = vec![true; recs.len()];
    for batch in &capture.batches {
        let range = batch.start.max(1)..batch.start + batch.len;
        let ok = range.clone().all(|i| (reference(i) - sched(i)).abs() <= tolerance);
        steady[range].fill(ok);
    }
    let steady_pairs = || pairs().filter(|&i| steady[i]);
    let kernel_vs_schedule = stats(pairs().map(|i| reference(i) - sched(i)));
    let mut rows = Vec::new();
    for stamp in [Stamp::Last, Stamp::Read] {
        for mode in BatchTimestamps::ALL {
            let c = corrected(capture, stamp, mode);
            let delta = |i: usize| c[i] as f64 - c[i - 1] as f64;
            rows.push(Row {
                stamp,
                mode,
                vs_kernel: stats(pairs().map(|i| delta(i) - reference(i))),
                vs_schedule: stats(pairs().map(|i| delta(i) - sched(i))),
                steady: stats(steady_pairs().map(|i| delta(i) - reference(i))),
            });
        }
    }
    Report {
        packets: recs.len(),
        batches: capture.batches.len(),
        drops: capture.drops,
        kernel_vs_schedule,
        steady_share: steady_pairs().count() as f64 / pairs().len().max(1) as f64,
        rows,
    }
}

fn print(settings: &Settings, report: &Report) {
    let sender = match &settings.sender {
        Sender::Own => "test sender".to_string(),
        Sender::Gen(_) => "sluice gen --profile mix".to_string(),
    };
    println!(
        "\n# {sender}, {} pps, {} of {} packets captured ({} dropped), {} blocks of {} KiB / {} ms timeout, mean batch {:.1}; kernel vs schedule: std {:.0} ns, mean |e| {:.0} ns, p99 |e| {:.0} ns; {:.0}% of pairs in steady blocks",
        settings.rate_pps,
        report.packets,
        settings.packets,
        report.drops,
        report.batches,
        settings.block_bytes / 1024,
        settings.block_timeout_ms,
        report.packets as f64 / report.batches.max(1) as f64,
        report.kernel_vs_schedule.std,
        report.kernel_vs_schedule.mean_abs,
        report.kernel_vs_schedule.p99_abs,
        report.steady_share * 100.0,
    );
    for row in &report.rows {
        println!(
            "ROW|{}|{}|{:.1}|{}|{}|{:.0}|{:.0}|{:.0}|{:.0}|{:.0}|{:.0}|{:.0}|{:.0}",
            settings.rate_pps,
            row.stamp.name(),
            report.packets as f64 / report.batches.max(1) as f64,
            report.packets,
            label(row.mode),
            row.vs_kernel.std,
            row.vs_kernel.mean_abs,
            row.vs_kernel.p99_abs,
            row.vs_schedule.std,
            row.vs_schedule.mean_abs,
            report.kernel_vs_schedule.std,
            row.steady.std,
            row.steady.mean_abs,
        );
    }
}

/// `keep` here keeps the emulated batch stamps: "batch".
fn label(mode: BatchTimestamps) -> &'static str {
    match mode {
        BatchTimestamps::Keep => "batch",
        other => other.as_str(),
    }
}

fn find<'a>(report: &'a Report, stamp: &str, mode: BatchTimestamps) -> &'a Row {
    report
        .rows
        .iter()
        .find(|r| r.stamp.name() == stamp && r.mode == mode)
        .expect("row")
}

#[test]
fn corrections_reduce_inter_arrival_error() {
    let Some(lab) = VethLab::new("ts", SEND_IF, CAPTURE_IF) else {
        return;
    };
    let settings = Settings {
        sender: Sender::Own,
        rate_pps: 20_000,
        packets: 4_000,
        block_bytes: 64 << 10,
        block_timeout_ms: 2,
    };
    let capture = capture(&lab, &settings);
    drop(lab);
    assert!(
        capture.recs.len() as u64 >= settings.packets * 9 / 10,
        "captured only {} of {} frames",
        capture.recs.len(),
        settings.packets
    );
    assert!(capture.batches.len() >= 10, "only {} blocks", capture.batches.len());
    let report = analyse(&capture, settings.rate_pps);
    print(&settings, &report);
    // About 40 packets 50 µs apart per 2 ms block: stamping them all at
    // once errs by about 50 µs on every packet and by the block's length on
    // the first of each. Spreading the interval removes nearly all of it
    // at an even rate. A stalled sender (a loaded machine) puts real gaps
    // into blocks that no correction can place, and they dominate every
    // statistic over all pairs (with both cores busy, UDTS's mean error
    // over all pairs can exceed the batch stamps'), so the corrections are
    // judged on steady blocks; the bounds leave room for load.
    let keep = &find(&report, "last packet", BatchTimestamps::Keep).steady;
    let udts = &find(&report, "last packet", BatchTimestamps::Udts).steady;
    let wdts = &find(&report, "last packet", BatchTimestamps::Wdts).steady;
    if report.steady_share < 0.05 {
        eprintln!("skipped the comparison: the sender kept its schedule in too few blocks (machine too loaded)");
        return;
    }
    assert!(keep.std > 20_000.0, "batch stamps err too little to measure: {keep:?}");
    assert!(udts.std * 5.0 < keep.std, "UDTS {udts:?} against batch {keep:?}");
    assert!(
        udts.mean_abs * 5.0 < keep.mean_abs,
        "UDTS {udts:?} against batch {keep:?}"
    );
    // WDTS spreads by size, which an evenly paced sender ignores: it gains
    // less than UDTS here (the thesis's Figure 4.5 case), but still gains.
    assert!(wdts.std * 1.5 < keep.std, "WDTS {wdts:?} against batch {keep:?}");
    assert!(
        wdts.mean_abs * 1.5 < keep.mean_abs,
        "WDTS {wdts:?} against batch {keep:?}"
    );
}

/// Settings from the environment: TS_RATE (pps), TS_PACKETS, TS_BLOCK_KB,
/// TS_TIMEOUT_MS, and SLUICE_BIN to send with `sluice gen`.
#[test]
#[ignore = "a measurement; bench/timestamps.py runs it"]
fn measure() {
    let env = |name: &str, default: u64| std::env::var(name).ok().map_or(default, |v| v.parse().expect(name));
    let settings = Settings {
        sender: std::env::var("SLUICE_BIN").map_or(Sender::Own, Sender::Gen),
        rate_pps: env("TS_RATE", 10_000),
        packets: env("TS_PACKETS", 20_000),
        block_bytes: env("TS_BLOCK_KB", 64) as usize * 1024,
        block_timeout_ms: env("TS_TIMEOUT_MS", 2) as u32,
    };
    let Some(lab) = VethLab::new("ts", SEND_IF, CAPTURE_IF) else {
        return;
    };
    let capture = capture(&lab, &settings);
    drop(lab);
    let report = analyse(&capture, settings.rate_pps);
    print(&settings, &report);
}

/// One block as a socket gave it: the kernel's time for the block, and each
/// packet's time, wire length and due time (`None` for other frames).
struct SeenBlock {
    time_ns: u64,
    packets: Vec<(u64, u32, Option<u64>)>,
}

/// The ring applies `LiveConfig::batch_timestamps` to each block: three
/// sockets on one interface see the same frames, one keeping the kernel's
/// stamps, one with UDTS, one with WDTS. The block's time is its last
/// packet's kernel stamp, and each socket's times are those `distribute`
/// gives for its blocks' times and sizes, the first block keeping its time.
#[test]
fn the_ring_times_each_block_as_configured() {
    let Some(lab) = VethLab::new("ts", SEND_IF, CAPTURE_IF) else {
        return;
    };
    const PACKETS: u64 = 2_000;
    let modes = BatchTimestamps::ALL;
    let mut sockets: Vec<LiveSocket> = modes
        .iter()
        .map(|&mode| {
            let mut config = LiveConfig::new(CAPTURE_IF);
            config.block_bytes = 64 << 10;
            config.ring_bytes = config.block_bytes * 64;
            config.block_timeout_ms = 2;
            config.snaplen = 64;
            config.batch_timestamps = mode;
            let socket = lab.in_b(|| LiveSocket::open(&config)).expect("open a capture socket");
            assert_eq!(socket.batch_timestamps(), mode);
            socket
        })
        .collect();
    // 2000 frames at 20 kpps: 100 ms, about 40 to a 2 ms block; each
    // ring (4 MiB) holds them all, so they are read once sent.
    let injector = lab.in_a(|| Injector::open(SEND_IF));
    send_paced(&injector, 20_000, PACKETS);
    let seen: Vec<Vec<SeenBlock>> = sockets
        .iter_mut()
        .map(|socket| {
            let mut blocks = Vec::new();
            let mut ours = 0;
            let deadline = Instant::now() + Duration::from_secs(5);
            while ours < PACKETS && Instant::now() < deadline {
                let Some(mut block) = socket.next_block(Duration::from_millis(50)).expect("read the ring") else {
                    continue;
                };
                let packets: Vec<_> = block.packets().map(|p| (p.ts_ns, p.wire_len, due_of(p.data))).collect();
                ours += packets.iter().filter(|p| p.2.is_some()).count() as u64;
                blocks.push(SeenBlock {
                    time_ns: block.time_ns(),
                    packets,
                });
            }
            assert_eq!(socket.stats().unwrap().drops, 0);
            blocks
        })
        .collect();
    drop(lab);
    let dues = |blocks: &[SeenBlock]| -> Vec<u64> {
        blocks
            .iter()
            .flat_map(|b| b.packets.iter().filter_map(|p| p.2))
            .collect()
    };
    let expected: Vec<u64> = (0..PACKETS).map(|k| k * 1_000_000_000 / 20_000).collect();
    for (mode, blocks) in modes.iter().zip(&seen) {
        assert_eq!(dues(blocks), expected, "{mode}: every frame, in order");
        assert!(blocks.len() >= 10, "{mode}: only {} blocks", blocks.len());
    }
    // The kernel's time for a block is its last packet's stamp.
    for block in seen[0].iter().filter(|b| !b.packets.is_empty()) {
        assert_eq!(block.time_ns, block.packets.last().unwrap().0);
    }
    for (&mode, blocks) in modes.iter().zip(&seen).skip(1) {
        let mut stamper = BatchStamper::new(mode);
        let mut spread_blocks = 0;
        let mut previous_ts = 0;
        for (b, block) in blocks.iter().enumerate() {
            let lens: Vec<u32> = block.packets.iter().map(|p| p.1).collect();
            let mut want = vec![0; lens.len()];
            stamper.correct(block.time_ns, &lens, &mut want);
            let got: Vec<u64> = block.packets.iter().map(|p| p.0).collect();
            assert_eq!(got, want, "{mode}, block {b}");
            if b == 0 {
                assert!(
                    got.iter().all(|&t| t == block.time_ns),
                    "{mode}: the first block keeps its time"
                );
            } else if got.len() > 1 && got[0] != block.time_ns {
                spread_blocks += 1;
            }
            for &t in &got {
                assert!(t >= previous_ts, "{mode}: times never go back");
                previous_ts = t;
            }
        }
        assert!(spread_blocks >= 5, "{mode}: only {spread_blocks} blocks were spread");
    }
}
