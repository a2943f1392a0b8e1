//! Parquet records (`--format parquet`) read back by other programs:
//! pyarrow compares every field of every row with the JSON record of the
//! same flow from the same run (a second `flows` listener), and DuckDB
//! computes the run's per-application totals and top talkers from the
//! files (`examples/parquet_summary.py`), and so does Spark where pyspark
//! is installed. pyarrow and DuckDB come from PyPI (`.ci/run` installs
//! them); without them these tests skip with a message.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use common::{flow_records, shared_mix, sluice};
use serde_json::Value;

/// A generated mix of some 2,600 flows, IPv4 and IPv6, made once.
static MIX: LazyLock<PathBuf> = LazyLock::new(|| shared_mix("parquet-mix", 20_000, 5));

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether python3 can import `module`; a message when it cannot.
fn python_has(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: python3 cannot import {module} (.ci/run installs it with pip)");
    }
    ok
}

/// `sluice probe --config CONFIG -r MIX -o OUT EXTRA...`, which must
/// succeed; its summary.
fn probe(config: &str, out: &Path, extra: &[&str]) -> Value {
    let file = out.with_extension("yaml");
    std::fs::write(&file, config).unwrap();
    let mut args = vec!["probe", "--config", s(&file), "-r", s(&MIX), "-o", s(out), "-q"];
    args.extend_from_slice(extra);
    let output = sluice(&args);
    assert!(
        output.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// Each row of the Parquet files in `dir` as pyarrow reads it, timestamps
/// as integer nanoseconds; and each column's type as pyarrow names it.
fn pyarrow_rows(dir: &Path) -> (Vec<BTreeMap<String, Value>>, BTreeMap<String, String>) {
    let script = r#"
import json, sys, glob
import pyarrow as pa, pyarrow.parquet as pq
files = sorted(glob.glob(sys.argv[1] + "/flows-*.parquet"))
table = pa.concat_tables([pq.read_table(f) for f in files])
types = {f.name: str(f.type) for f in table.schema}
codecs = {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files}
for i, f in enumerate(table.schema):
    if pa.types.is_timestamp(f.type):
        table = table.set_column(i, f.name, table.column(i).cast(pa.int64()))
print(json.dumps({"types": types, "codecs": sorted(codecs), "rows": table.to_pylist()}))
"#;
    let output = Command::new("python3").args(["-c", script, s(dir)]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let read: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(read["codecs"], serde_json::json!(["ZSTD"]));
    let rows = read["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::from_value(r.clone()).unwrap())
        .collect();
    let types = serde_json::from_value(read["types"].clone()).unwrap();
    (rows, types)
}

/// Every field of every record: the JSON line's value where it has one,
/// null (or an empty list) where JSON lines leave the field out.
#[test]
fn pyarrow_reads_every_field_of_every_record() {
    if !python_has("pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let config = "flows:\n  - format: jsonl\n  - name: columns\n    format: parquet\n";
    let summary = probe(config, &out, &["--no-stats"]);
    let records = flow_records(&out);
    assert!(records.len() > 2000, "{} records", records.len());
    let (rows, types) = pyarrow_rows(&out.join("columns"));
    assert_eq!(types["first_ts_ns"], "timestamp[ns, tz=UTC]");
    assert_eq!(types["app"], "dictionary<values=string, indices=int32, ordered=0>");
    assert_eq!(types["first_sizes"], "list<item: int64>");
    assert_eq!(types["dns_answers"], "list<item: string>");
    assert_eq!(types["c2s_size_mean"], "double");
    assert_eq!(types["packets"], "int64");
    assert_eq!(rows.len(), records.len());
    let by_id: BTreeMap<&str, &Value> = records.iter().map(|r| (r["flow_id"].as_str().unwrap(), r)).collect();
    let names: Vec<&String> = types.keys().collect();
    let mut compared = 0;
    for row in &rows {
        let id = row["flow_id"].as_str().unwrap();
        let record = by_id.get(id).unwrap_or_else(|| panic!("row {id} has no JSON record"));
        for name in &names {
            let cell = &row[name.as_str()];
            match record.get(name.as_str()) {
                Some(value) => assert_eq!(cell, value, "flow {id}, field {name}"),
                None => assert!(
                    cell.is_null() || cell.as_array().is_some_and(Vec::is_empty),
                    "flow {id}, field {name}: {cell} where JSON has none"
                ),
            }
            compared += 1;
        }
        assert!(record.as_object().unwrap().len() <= names.len());
    }
    assert!(compared > 2000 * 90, "{compared} cells");
    assert_eq!(
        summary["parquet_files"].as_array().map(Vec::len),
        None,
        "only the first listener's"
    );
}

/// `examples/parquet_summary.py OUT --check --engine ENGINE` over a run
/// writing Parquet, which must succeed; what it printed.
fn engine_check(engine: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = sluice(&["analyze", s(&MIX), "-q", "-o", s(&out), "--format", "parquet"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/parquet_summary.py");
    let check = Command::new("python3")
        .args([s(&script), s(&out), "--check", "--engine", engine])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    serde_json::from_slice(&check.stdout).unwrap()
}

/// DuckDB's per-application totals and top talkers over the files equal
/// the run's own summary.
#[test]
fn duckdb_computes_the_summary_from_the_files() {
    if python_has("duckdb") {
        let printed = engine_check("duckdb");
        assert!(printed["applications"].as_object().unwrap().len() > 5);
    }
}

/// Spark (local mode) reading the same files computes the same: one path
/// from Sluice's records into a distributed engine. CI does not install
/// pyspark (large, and slow to start); there this test skips.
#[test]
fn spark_computes_the_summary_from_the_files() {
    if python_has("pyspark") {
        engine_check("spark");
    }
}

/// Files close at the size given, numbered in order; their rows add up to
/// every flow, and no hidden half-written file is left.
#[test]
fn files_rotate_by_size_and_are_complete() {
    if !python_has("pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = sluice(&[
        "analyze",
        s(&MIX),
        "-o",
        s(&out),
        "--format",
        "parquet",
        "--flows-rotate",
        "64KiB",
        "--workers",
        "2",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("Parquet files"), "{printed}");
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let files: Vec<PathBuf> = summary["parquet_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    for (i, file) in files.iter().enumerate() {
        assert_eq!(
            file.file_name().unwrap().to_str().unwrap(),
            format!("flows-{:06}.parquet", i + 1)
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("parquet"))
        .collect();
    names.sort();
    assert_eq!(names.len(), files.len(), "{names:?}");
    // Each file is whole: its footer says how many rows it holds.
    let mut rows = 0;
    for name in &names {
        let data = std::fs::read(out.join(name)).unwrap();
        assert_eq!(&data[..4], b"PAR1");
        assert_eq!(&data[data.len() - 4..], b"PAR1", "{name} has its footer");
        rows += parquet_rows(&data);
    }
    assert_eq!(rows, summary["flows"].as_u64().unwrap());
}

/// The rows a Parquet file's footer counts, as pyarrow (or DuckDB) reads
/// them.
fn parquet_rows(data: &[u8]) -> u64 {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), data).unwrap();
    for script in [
        "import sys, pyarrow.parquet as pq; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)",
        "import sys, duckdb; print(duckdb.sql(f\"select count(*) from read_parquet('{sys.argv[1]}')\").fetchone()[0])",
    ] {
        let output = Command::new("python3")
            .args(["-c", script, s(file.path())])
            .output()
            .unwrap();
        if output.status.success() {
            return String::from_utf8_lossy(&output.stdout).trim().parse().unwrap();
        }
    }
    panic!("neither pyarrow nor duckdb reads the file (.ci/run installs them)");
}
