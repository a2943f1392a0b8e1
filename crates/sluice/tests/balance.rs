//! `sluice balance`: the cell incubator on files. Every capture of nDPI's
//! reference set is split over four cells; each frame must be in exactly
//! one cell, in order, and the probes of the four cells together must give
//! the records of one probe on the whole capture (docs/scale-out.md says
//! which fields may differ, and why).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_capture::CaptureFile;

use common::{ndpi_pcaps, sluice};

/// Each frame of a capture: time, wire length, bytes.
fn frames(path: &Path) -> Vec<(u64, u32, Vec<u8>)> {
    let file = CaptureFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = file.reader().unwrap();
    reader.map(|p| (p.ts_ns, p.wire_len, p.data.to_vec())).collect()
}

fn records(out: &Path) -> Vec<Value> {
    match std::fs::read_to_string(out.join("flows.jsonl")) {
        Ok(text) => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        Err(_) => Vec::new(),
    }
}

fn analyze(input: &Path, out: &Path) {
    let output = sluice(&[
        "analyze".as_ref(),
        input.as_os_str(),
        "-q".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}: {}",
        input.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Fields of a label, which may rest on what other flows taught.
const LABEL: [&str; 4] = ["app", "master", "classifier", "confidence"];

/// Whether `whole` (one probe) and `cell` (its cell's probe) differ only
/// as docs/scale-out.md allows: a label resting on another flow, or a
/// flow still open at the end of its cell's capture whose idle timeout the
/// whole capture's later clock saw pass.
fn allowed(whole: &Value, cell: &Value, cell_clock_ns: u64, whole_clock_ns: u64) -> Result<(), String> {
    let (Value::Object(w), Value::Object(c)) = (whole, cell) else {
        return Err("not objects".into());
    };
    let differing: Vec<&String> = w.keys().chain(c.keys()).filter(|k| w.get(*k) != c.get(*k)).collect();
    for field in differing {
        match field.as_str() {
            f if LABEL.contains(&f) => {
                let learned_port = w["classifier"] == "dynamic-port";
                let service = |r: &Value| {
                    r["app"]
                        .as_str()
                        .unwrap_or("")
                        .split('.')
                        .next()
                        .unwrap_or("")
                        .to_string()
                };
                let named_by_dns =
                    w["classifier"] == c["classifier"] && w["master"] == c["master"] && service(whole) == service(cell);
                if !learned_port && !named_by_dns {
                    return Err(format!("label {field}: {} vs {}", w[f], c[f]));
                }
            }
            "end_reason" => {
                let (we, ce) = (w["end_reason"].as_str(), c["end_reason"].as_str());
                let later_clock = we == Some("idle") && ce == Some("end_of_input") && cell_clock_ns < whole_clock_ns;
                if !later_clock {
                    return Err(format!("end_reason {we:?} vs {ce:?}"));
                }
            }
            other => return Err(format!("{other}: {} vs {}", w[other], c[other])),
        }
    }
    Ok(())
}

#[test]
fn the_cells_together_give_one_probes_records() {
    let Some(pcaps) = ndpi_pcaps() else { return };
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&pcaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    inputs.sort();
    assert!(inputs.len() > 100, "{} captures", inputs.len());
    let dir = tempfile::tempdir().unwrap();
    let (mut flows, mut label_differences, mut end_differences, mut fragments) = (0, 0, 0, 0u64);
    let mut stepping_back = 0;
    let mut per_cell = [0u64; 4];
    for input in &inputs {
        let name = input.file_name().unwrap().to_str().unwrap();
        let here = dir.path().join(name);
        std::fs::create_dir(&here).unwrap();
        let template = here.join("cell%d.pcap");
        let output = sluice(&[
            "balance".as_ref(),
            "-r".as_ref(),
            input.as_os_str(),
            "--cells".as_ref(),
            "4".as_ref(),
            "-w".as_ref(),
            template.as_os_str(),
            "-q".as_ref(),
            "-o".as_ref(),
            here.join("balance").as_os_str(),
        ]);
        assert!(
            matches!(output.status.code(), Some(0 | 3)),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(here.join("balance/summary.json")).unwrap()).unwrap();
        fragments += summary["balance"]["resolved_fragments"].as_u64().unwrap();
        let cells: Vec<PathBuf> = (0..4).map(|i| here.join(format!("cell{i}.pcap"))).collect();

        // Every frame in exactly one cell, each cell in input order.
        let all = frames(input);
        let cell_frames: Vec<_> = cells.iter().map(|c| frames(c)).collect();
        let mut next = [0usize; 4];
        for (n, frame) in all.iter().enumerate() {
            let cell = (0..4)
                .find(|&c| cell_frames[c].get(next[c]) == Some(frame))
                .unwrap_or_else(|| panic!("{name}: frame {} is in no cell where it belongs", n + 1));
            next[cell] += 1;
        }
        for c in 0..4 {
            assert_eq!(
                next[c],
                cell_frames[c].len(),
                "{name}: cell {c} holds frames not in the input"
            );
            per_cell[c] += next[c] as u64;
            let counted = &summary["balance"]["cells"][c];
            assert_eq!(
                counted["packets"].as_u64(),
                Some(next[c] as u64),
                "{name}: cell {c}'s count"
            );
        }

        // The cells' records are the whole's, each flow in one cell. A
        // file's clock is its latest time so far: where time steps back,
        // flows time out at other packets in the cells than in the whole,
        // and the records are not compared.
        if all.windows(2).any(|w| w[1].0 < w[0].0) {
            stepping_back += 1;
            continue;
        }
        analyze(input, &here.join("whole"));
        let listed = records(&here.join("whole"));
        let whole: BTreeMap<String, Value> = listed
            .iter()
            .map(|r| (r["flow_id"].as_str().unwrap().to_string(), r.clone()))
            .collect();
        assert_eq!(whole.len(), listed.len(), "{name}: flow ids repeat");
        let whole_clock = all.iter().map(|f| f.0).max().unwrap_or(0);
        let mut seen = 0;
        for (c, cell) in cells.iter().enumerate() {
            let out = here.join(format!("c{c}"));
            analyze(cell, &out);
            let cell_clock = cell_frames[c].iter().map(|f| f.0).max().unwrap_or(0);
            for record in records(&out) {
                let id = record["flow_id"].as_str().unwrap();
                let one = whole
                    .get(id)
                    .unwrap_or_else(|| panic!("{name}: cell {c} has flow {id}, which one probe has not"));
                seen += 1;
                if let Err(why) = allowed(one, &record, cell_clock, whole_clock) {
                    panic!("{name}: flow {id} in cell {c}: {why}\n  one probe: {one}\n  cell: {record}");
                }
                label_differences += usize::from(LABEL.iter().any(|f| one[f] != record[f]));
                end_differences += usize::from(one["end_reason"] != record["end_reason"]);
            }
        }
        assert_eq!(
            seen,
            whole.len(),
            "{name}: the cells have {seen} records, one probe {}",
            whole.len()
        );
        flows += seen;
    }
    eprintln!(
        "{} captures ({stepping_back} with time stepping back, records not compared), {flows} flows: {label_differences} labels and {end_differences} end reasons differ as documented; {fragments} fragments followed their first; frames per cell {per_cell:?}",
        inputs.len()
    );
    assert!(flows > 1000, "{flows}");
    assert!(
        stepping_back * 10 < inputs.len(),
        "{stepping_back} captures not compared"
    );
    assert!(fragments > 0, "the captures hold fragments that follow their first");
}

#[test]
fn bad_cell_lists_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("none.pcap");
    // A pcap file header (microseconds, Ethernet) and no packet.
    let mut header = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    header.extend(2u16.to_le_bytes());
    header.extend(4u16.to_le_bytes());
    header.extend([0; 8]);
    header.extend(65535u32.to_le_bytes());
    header.extend(1u32.to_le_bytes());
    std::fs::write(&input, header).unwrap();
    for (cells, write, words) in [
        ("0", "cell%d.pcap", "no cells"),
        ("-,-", "cell%d.pcap", "at least one must remain"),
        ("4", "cell.pcap", "%d"),
    ] {
        let out = sluice(&[
            "balance",
            "-r",
            input.to_str().unwrap(),
            "--cells",
            cells,
            "-w",
            dir.path().join(write).to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{cells}");
        assert!(err.contains(words), "--cells {cells} -w {write}: {err}");
    }
}

fn probe(input: &Path, out: &Path) {
    let output = sluice(&[
        "probe".as_ref(),
        "-r".as_ref(),
        input.as_os_str(),
        "-q".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--stats-top".as_ref(),
        "5".as_ref(),
        "--stats-interval".as_ref(),
        "50ms".as_ref(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

fn stats(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("stats.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn merged_cells_are_one_probes_summary_and_statistics() {
    let mix = common::shared_mix("balance-merge", 30_000, 39);
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("cell%d.pcap");
    let output = sluice(&[
        "balance".as_ref(),
        "-r".as_ref(),
        mix.as_os_str(),
        "--cells".as_ref(),
        "4".as_ref(),
        "-w".as_ref(),
        template.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    probe(&mix, &dir.path().join("whole"));
    let mut merge_args = vec!["merge".to_string()];
    for c in 0..4 {
        let out = dir.path().join(format!("c{c}"));
        probe(&dir.path().join(format!("cell{c}.pcap")), &out);
        merge_args.push(out.to_str().unwrap().to_string());
    }
    let merged = dir.path().join("merged");
    merge_args.extend(["-o".to_string(), merged.to_str().unwrap().to_string()]);
    let output = sluice(&merge_args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let json = |p: PathBuf| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (one, all) = (
        json(dir.path().join("whole/summary.json")),
        json(merged.join("summary.json")),
    );
    for field in ["packets", "bytes", "flows", "first_ts_ns", "last_ts_ns", "l4"] {
        assert_eq!(one[field], all[field], "summary {field}");
    }
    for field in ["created", "fin", "rst", "evicted"] {
        assert_eq!(one["flow_ends"][field], all["flow_ends"][field], "flow_ends.{field}");
    }
    // Every application's flows add up (the mix's labels rest on each
    // flow's own packets).
    let apps = |s: &Value| -> BTreeMap<String, Value> {
        s["applications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_string(), p[1].clone()))
            .collect()
    };
    assert_eq!(apps(&one), apps(&all));
    // The talkers: each merged figure under the truth by at most the bound.
    let bound = all["talkers_error_bound"].as_u64().unwrap();
    let truth: BTreeMap<&str, u64> = one["top_talkers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["host"].as_str().unwrap(), t["bytes"].as_u64().unwrap()))
        .collect();
    for t in all["top_talkers"].as_array().unwrap() {
        if let Some(&true_bytes) = truth.get(t["host"].as_str().unwrap()) {
            let shown = t["bytes"].as_u64().unwrap();
            assert!(
                shown <= true_bytes && true_bytes - shown <= bound,
                "{t}: truth {true_bytes}, bound {bound}"
            );
        }
    }

    // The statistics: interval by interval, the same totals; each top host
    // within its bound of the truth.
    let (one, all) = (stats(&dir.path().join("whole")), stats(&merged));
    assert_eq!(one.len(), all.len(), "intervals");
    assert!(one.len() > 1, "the mix spans several intervals");
    let mut bounded = 0;
    for (o, a) in one.iter().zip(&all) {
        for field in [
            "ts_ns",
            "packets",
            "bytes",
            "flows_active",
            "flows_new",
            "l4",
            "applications",
        ] {
            assert_eq!(o[field], a[field], "interval {}: {field}", o["ts_ns"]);
        }
        let bound = a["merge_error_bound"]["top_hosts"]["bytes"].as_u64().unwrap();
        let truth: BTreeMap<&str, u64> = o["top_hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["host"].as_str().unwrap(), h["bytes"].as_u64().unwrap()))
            .collect();
        assert!(a["top_hosts"].as_array().unwrap().len() <= 3 * 5);
        for h in a["top_hosts"].as_array().unwrap() {
            if let Some(&true_bytes) = truth.get(h["host"].as_str().unwrap()) {
                let shown = h["bytes"].as_u64().unwrap();
                assert!(
                    shown <= true_bytes && true_bytes - shown <= bound,
                    "{h}: truth {true_bytes}, bound {bound}"
                );
                bounded += 1;
            }
        }
    }
    assert!(bounded > 0);
    // The records: every flow once.
    let lines = |p: PathBuf| std::fs::read_to_string(p).unwrap().lines().count();
    assert_eq!(
        lines(merged.join("flows.jsonl")),
        lines(dir.path().join("whole/flows.jsonl"))
    );
}

/// Each frame's cell, by its bytes and time, from `balance -r` into
/// `cells` (a `--cells` value) of the shared mix.
fn cells_of(mix: &Path, dir: &Path, cells: &str) -> BTreeMap<(u64, Vec<u8>), usize> {
    std::fs::create_dir_all(dir).unwrap();
    let template = dir.join("cell%d.pcap");
    let output = sluice(&[
        "balance".as_ref(),
        "-r".as_ref(),
        mix.as_os_str(),
        "--cells".as_ref(),
        cells.as_ref(),
        "-w".as_ref(),
        template.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut of = BTreeMap::new();
    let places = cells.split(',').count().max(cells.parse().unwrap_or(0));
    for c in 0..places {
        let path = dir.join(format!("cell{c}.pcap"));
        if cells.split(',').nth(c) == Some("-") {
            assert!(!path.exists(), "a cell that left gets no file");
            continue;
        }
        for (ts, _, bytes) in frames(&path) {
            of.insert((ts, bytes), c);
        }
    }
    of
}

#[test]
fn cells_joining_and_leaving_move_only_their_share() {
    let mix = common::shared_mix("balance-join", 20_000, 7);
    let dir = tempfile::tempdir().unwrap();
    let four = cells_of(&mix, &dir.path().join("four"), "4");
    let five = cells_of(&mix, &dir.path().join("five"), "5");
    let left = cells_of(&mix, &dir.path().join("left"), "0,1,-,3");
    assert_eq!(four.len(), five.len());
    // A fifth cell takes about a fifth of the traffic, all from the others.
    let moved = four.iter().filter(|(f, c)| five[f] != **c).count();
    assert!(four.iter().all(|(f, c)| five[f] == *c || five[f] == 4));
    let share = moved as f64 / four.len() as f64;
    assert!(
        share <= 0.25 && share > 0.1,
        "{share} of the frames moved from 4 to 5 cells"
    );
    // Cell 2 leaving moves its frames alone, spread over the others.
    let mut heirs = [0usize; 4];
    for (f, &c) in &four {
        if c == 2 {
            heirs[left[f]] += 1;
        } else {
            assert_eq!(left[f], c, "a frame of cell {c} moved when cell 2 left");
        }
    }
    assert_eq!(heirs[2], 0);
    assert!(heirs[0] > 0 && heirs[1] > 0 && heirs[3] > 0, "{heirs:?}");
}

#[test]
fn merge_lists_the_cells_alarms_in_time_order_and_names_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let cell = |name: &str, starts: &[u64]| -> PathBuf {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("summary.json"), r#"{"packets": 5, "flows": 1}"#).unwrap();
        let lines: String = starts
            .iter()
            .map(|s| format!("{{\"alarm_id\": \"{name}-{s}\", \"detector\": \"syn_flood\", \"start_ts_ns\": {s}}}\n"))
            .collect();
        std::fs::write(d.join("alarms.jsonl"), lines).unwrap();
        d
    };
    let (a, b) = (cell("a", &[30, 10]), cell("b", &[20]));
    let out = dir.path().join("merged");
    let output = sluice(&[
        "merge".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let ids: Vec<String> = std::fs::read_to_string(out.join("alarms.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["alarm_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids, ["a-10", "b-20", "a-30"]);
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        (summary["packets"].as_u64(), summary["flows"].as_u64()),
        (Some(10), Some(2))
    );

    std::fs::write(b.join("alarms.jsonl"), "{\"alarm_id\": 1}\nnot json\n").unwrap();
    let output = sluice(&[
        "merge".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(err.contains("alarms.jsonl line 2"), "{err}");
}
