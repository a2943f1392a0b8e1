//! The call records' other forms: `calls.sqlite` (per-day tables read back
//! by Python's own sqlite3 module) and `sluice calls`, the search over it
//! (or over `calls.jsonl` when there is no database).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use common::{jsonl, ndpi_pcaps, run, sluice};

/// The inputs of the shared runs: nDPI's SIP capture (an old day) then a
/// generated trace (another day), as one input.
fn inputs() -> &'static (tempfile::TempDir, Vec<PathBuf>) {
    static INPUTS: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let pcap = tmp.path().join("voip.pcap");
        run(
            common::SLUICE,
            &[
                "gen",
                "--profile",
                "voip",
                "--packets",
                "100000",
                "-w",
                pcap.to_str().unwrap(),
            ],
        );
        let mut inputs: Vec<PathBuf> = Vec::new();
        if let Some(dir) = ndpi_pcaps() {
            inputs.push(dir.join("sip.pcap"));
        }
        inputs.push(pcap);
        (tmp, inputs)
    })
}

/// `sluice voip` over [`inputs`] by `workers` workers, into a directory of
/// its own.
fn voip_run(workers: usize) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = vec![
        "voip".to_string(),
        "-q".into(),
        "--workers".into(),
        workers.to_string(),
        "-o".into(),
        out.to_str().unwrap().into(),
    ];
    for i in &inputs().1 {
        args.extend(["-r".to_string(), i.to_str().unwrap().to_string()]);
    }
    let output = sluice(&args);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    tmp
}

/// The run most tests share, by one worker.
fn calls_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| voip_run(1)).path().join("out").leak()
}

/// The call table's clock is the least of the workers' marks: two workers,
/// one of them reading the later day while the other still reads the
/// earlier one's SIP, write the same calls as one worker.
#[test]
fn two_workers_write_the_calls_one_worker_writes() {
    let by_id = |dir: &Path| -> BTreeMap<String, Value> {
        jsonl(&dir.join("calls.jsonl"))
            .into_iter()
            .map(|c| (c["call_id"].as_str().unwrap().to_string(), c))
            .collect()
    };
    let two = voip_run(2);
    let (one, two) = (by_id(calls_dir()), by_id(&two.path().join("out")));
    assert!(one.len() > 10, "{} calls", one.len());
    assert_eq!(one.len(), two.len(), "calls written by one worker and by two");
    for (id, call) in &one {
        assert_eq!(Some(call), two.get(id), "call {id}");
    }
}

/// Reads calls.sqlite with Python's sqlite3: the journal mode, and per
/// table its rows, its indexed columns and the UTC day of each row's
/// `invite_ts_ns` as Python's datetime computes it.
const READ_DB: &str = r#"
import json, sqlite3, sys, datetime
db = sqlite3.connect(sys.argv[1])
out = {"journal_mode": db.execute("PRAGMA journal_mode").fetchone()[0], "tables": {}}
for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
    cur = db.execute('SELECT * FROM "%s"' % name)
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur]
    days = sorted({datetime.datetime.fromtimestamp(r["invite_ts_ns"] // 10**9, datetime.timezone.utc).strftime("calls_%Y%m%d") for r in rows})
    indexed = []
    for idx in db.execute('PRAGMA index_list("%s")' % name).fetchall():
        indexed += [c[2] for c in db.execute('PRAGMA index_info("%s")' % idx[1])]
    out["tables"][name] = {"columns": cols, "rows": rows, "days": days, "indexed": sorted(indexed)}
print(json.dumps(out))
"#;

/// A calls.jsonl value and the column Python read: lists as JSON text,
/// booleans as 0 or 1, numbers and text as they are.
fn same(line: &Value, column: &Value) -> bool {
    match line {
        Value::Bool(b) => column.as_i64() == Some(i64::from(*b)),
        Value::Array(_) | Value::Object(_) => {
            column
                .as_str()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .as_ref()
                == Some(line)
        }
        Value::Number(n) if n.is_f64() => column.as_f64() == n.as_f64(),
        _ => line == column,
    }
}

#[test]
fn every_calls_jsonl_line_is_a_row_of_its_day() {
    let dir = calls_dir();
    let calls = jsonl(&dir.join("calls.jsonl"));
    assert!(calls.len() > 10, "{} calls", calls.len());
    let py = run("python3", &["-c", READ_DB, dir.join("calls.sqlite").to_str().unwrap()]);
    let db: Value = serde_json::from_slice(&py.stdout).unwrap();
    assert_eq!(db["journal_mode"], "wal");
    let tables = db["tables"].as_object().unwrap();
    let mut rows: BTreeMap<(String, u64), (&str, &Value)> = BTreeMap::new();
    for (name, t) in tables {
        assert!(name.starts_with("calls_"), "{name}");
        // Every row of the table is of its day.
        assert_eq!(t["days"], serde_json::json!([name]), "{name}");
        let indexed: BTreeSet<&str> = t["indexed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        for column in ["from", "to", "invite_ts_ns"] {
            assert!(indexed.contains(column), "{name}: no index on {column}");
        }
        for row in t["rows"].as_array().unwrap() {
            let id = (
                row["call_id"].as_str().unwrap().to_string(),
                row["invite_ts_ns"].as_u64().unwrap(),
            );
            assert!(rows.insert(id.clone(), (name, row)).is_none(), "{id:?} twice");
        }
        // The columns are the fields of a line, in order.
        let fields: Vec<&String> = calls[0].as_object().unwrap().keys().collect();
        let columns: Vec<&str> = t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(fields.len(), columns.len(), "{name}: {columns:?}");
    }
    if ndpi_pcaps().is_some() {
        assert!(tables.len() >= 2, "one day only: {:?}", tables.keys());
    }
    assert_eq!(rows.len(), calls.len());
    for call in &calls {
        let id = call["call_id"].as_str().unwrap();
        let (_, row) = rows[&(id.to_string(), call["invite_ts_ns"].as_u64().unwrap())];
        for (k, v) in call.as_object().unwrap() {
            assert!(same(v, &row[k]), "{id}: {k}: line {v}, row {}", row[k]);
        }
    }
}

fn search(dir: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["calls", dir.to_str().unwrap()];
    all.extend(args);
    let out = sluice(&all);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every search `sluice calls` answers, on a directory, equals the lines
/// of calls.jsonl that match, in INVITE time order.
fn searches_answer_the_matching_lines(dir: &Path, calls: &[Value]) {
    let mut sorted = calls.to_vec();
    sorted.sort_by_key(|c| c["invite_ts_ns"].as_u64().unwrap());
    let matching = |f: &dyn Fn(&Value) -> bool| sorted.iter().filter(|c| f(c)).cloned().collect::<Vec<_>>();
    assert_eq!(search(dir, &[]), sorted);
    // A call whose Call-ID is its own (a call is written again when its
    // SIP comes back after it left the table).
    let some = sorted[sorted.len() / 2..]
        .iter()
        .find(|c| sorted.iter().filter(|o| o["call_id"] == c["call_id"]).count() == 1)
        .unwrap();
    let from = some["from"].as_str().unwrap();
    let to = some["to"].as_str().unwrap();
    let id = some["call_id"].as_str().unwrap();
    let caller = matching(&|c| c["from"] == from);
    assert!(!caller.is_empty());
    assert_eq!(search(dir, &["--caller", from]), caller);
    assert_eq!(search(dir, &["--callee", to]), matching(&|c| c["to"] == to));
    assert_eq!(
        search(dir, &["--caller", from, "--callee", to]),
        matching(&|c| c["from"] == from && c["to"] == to)
    );
    assert_eq!(search(dir, &["--call-id", id]), matching(&|c| c["call_id"] == id));
    assert_eq!(search(dir, &["--call-id", id]).len(), 1);
    assert!(search(dir, &["--caller", "sip:nobody@nowhere.invalid"]).is_empty());
    // A window of times, in ns and as UTC text (Python's formatting).
    let since = sorted[sorted.len() / 4]["invite_ts_ns"].as_u64().unwrap();
    let until = sorted[3 * sorted.len() / 4]["invite_ts_ns"].as_u64().unwrap();
    let window = matching(&|c| (since..until).contains(&c["invite_ts_ns"].as_u64().unwrap()));
    assert!(!window.is_empty());
    assert_eq!(
        search(dir, &["--since", &since.to_string(), "--until", &until.to_string()]),
        window
    );
    let text = |ns: u64| {
        let py = run(
            "python3",
            &[
                "-c",
                "import sys, datetime; ns = int(sys.argv[1]); print(datetime.datetime.fromtimestamp(ns // 10**9, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S') + '.%09dZ' % (ns % 10**9))",
                &ns.to_string(),
            ],
        );
        String::from_utf8(py.stdout).unwrap().trim().to_string()
    };
    assert_eq!(search(dir, &["--since", &text(since), "--until", &text(until)]), window);
    let day = &text(since)[..10];
    assert_eq!(
        search(dir, &["--since", day]),
        matching(&|c| c["invite_ts_ns"].as_u64().unwrap() >= common_day(day))
    );
    // The table: a header and a line per call, the Call-IDs in it.
    let out = sluice(&["calls", dir.to_str().unwrap(), "--table"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.lines().count(), sorted.len() + 1);
    assert!(table.lines().next().unwrap().starts_with("invite"));
    for (line, call) in table.lines().skip(1).zip(&sorted) {
        assert!(line.contains(call["call_id"].as_str().unwrap()), "{line}");
    }
}

/// Midnight UTC of a YYYY-MM-DD, in ns, by Python.
fn common_day(day: &str) -> u64 {
    let py = run(
        "python3",
        &[
            "-c",
            "import sys, datetime; print(int(datetime.datetime.strptime(sys.argv[1], '%Y-%m-%d').replace(tzinfo=datetime.timezone.utc).timestamp()) * 10**9)",
            day,
        ],
    );
    String::from_utf8(py.stdout).unwrap().trim().parse().unwrap()
}

#[test]
fn calls_searches_the_database() {
    let dir = calls_dir();
    searches_answer_the_matching_lines(dir, &jsonl(&dir.join("calls.jsonl")));
}

#[test]
fn calls_searches_calls_jsonl_without_a_database() {
    let dir = calls_dir();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("calls.jsonl"), tmp.path().join("calls.jsonl")).unwrap();
    searches_answer_the_matching_lines(tmp.path(), &jsonl(&dir.join("calls.jsonl")));
}

#[test]
fn calls_names_the_file_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let fails = |dir: &Path, args: &[&str]| {
        let mut all = vec!["calls", dir.to_str().unwrap()];
        all.extend(args);
        let out = sluice(&all);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = fails(&empty, &[]);
    assert!(
        e.contains(empty.to_str().unwrap()) && e.contains("calls.sqlite") && e.contains("calls.jsonl"),
        "{e}"
    );
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("calls.jsonl"), "{\"call_id\": \"a\"}\nnot json\n").unwrap();
    let e = fails(&broken, &[]);
    assert!(e.contains("calls.jsonl") && e.contains("line 2"), "{e}");
    std::fs::write(broken.join("calls.sqlite"), vec![0x55u8; 4096]).unwrap();
    let e = fails(&broken, &[]);
    assert!(e.contains(broken.join("calls.sqlite").to_str().unwrap()), "{e}");
    let out = sluice(&["calls", broken.to_str().unwrap(), "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("YYYY-MM-DD"));
}
