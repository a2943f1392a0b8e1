//! The `sluice` binary facing bad input and bad arguments: exit statuses,
//! messages that name the file and the byte offset, and the partial results
//! it still writes.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::sluice;

fn status(out: &Output) -> Option<i32> {
    out.status.code()
}

/// stdout and stderr together, for messages that may go to either.
fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// Writes a synthetic capture with `sluice gen`.
fn gen_capture(path: &Path, packets: u64) {
    let out = sluice(&[
        "gen",
        "--profile",
        "mix",
        "--packets",
        &packets.to_string(),
        "--seed",
        "7",
        "-w",
        s(path),
    ]);
    assert_eq!(status(&out), Some(0), "sluice gen failed: {}", text(&out));
}

/// Offsets of the records of a pcap file as `sluice gen` writes it
/// (little-endian, 24-byte header, 16-byte record headers).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    assert_eq!(bytes[..4], [0x4d, 0x3c, 0xb2, 0xa1], "gen writes little-endian ns pcap");
    let mut offsets = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        offsets.push(at);
        let captured = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + captured;
    }
    assert_eq!(at, bytes.len());
    offsets
}

/// Runs `sluice analyze` with two workers into `out`, quietly or not.
fn analyze(inputs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["analyze"];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend(["-o", s(out), "--workers", "2"]);
    args.extend(extra);
    sluice(&args)
}

/// The lines of flows.jsonl, sorted (workers finish flows in any order).
fn sorted_records(out_dir: &Path) -> Vec<String> {
    let path = out_dir.join("flows.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
    lines.sort();
    lines
}

fn summary(out_dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out_dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

fn packets_in_records(records: &[String]) -> u64 {
    records
        .iter()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum()
}

struct Truncated {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    /// Cut inside a record.
    cut: PathBuf,
    /// The same records up to the cut one, ending cleanly.
    prefix: PathBuf,
    /// Where the cut record starts.
    offset: usize,
    /// Records before the cut.
    complete: usize,
}

/// A 2000-packet capture cut in the middle of record 1000 (`in_header`:
/// inside its 16-byte header; otherwise inside its data).
fn truncated(in_header: bool) -> Truncated {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.pcap");
    gen_capture(&full, 2000);
    let bytes = std::fs::read(&full).unwrap();
    let offsets = record_offsets(&bytes);
    assert_eq!(offsets.len(), 2000);
    let complete = 1000;
    let offset = offsets[complete];
    let next = offsets[complete + 1];
    let end = if in_header {
        offset + 9
    } else {
        offset + 16 + (next - offset - 16) / 2
    };
    assert!(end > offset && end < next);
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..end]).unwrap();
    let prefix = dir.path().join("prefix.pcap");
    std::fs::write(&prefix, &bytes[..offset]).unwrap();
    Truncated {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        cut,
        prefix,
        offset,
        complete,
    }
}

#[test]
fn truncated_capture_is_a_partial_result_with_the_byte_offset() {
    for in_header in [false, true] {
        let t = truncated(in_header);
        let out_dir = t.dir.join("out");
        let out = analyze(&[&t.cut], &out_dir, &[]);
        let all = text(&out);
        assert_eq!(status(&out), Some(3), "{all}");
        assert!(all.contains(s(&t.cut)), "the file is not named: {all}");
        assert!(
            all.contains(&format!("byte offset {}", t.offset)),
            "no 'byte offset {}' in: {all}",
            t.offset
        );

        // Everything before the cut was analysed, exactly as if the file
        // had ended cleanly there.
        let records = sorted_records(&out_dir);
        assert!(!records.is_empty());
        let summary = summary(&out_dir);
        assert_eq!(summary["packets"], t.complete as u64, "{summary:#}");
        assert!(packets_in_records(&records) <= t.complete as u64);

        let clean_dir = t.dir.join("clean");
        let clean = analyze(&[&t.prefix], &clean_dir, &[]);
        assert_eq!(status(&clean), Some(0), "{}", text(&clean));
        assert_eq!(records, sorted_records(&clean_dir));
    }
}

/// `abstract -r` reads the file on a thread of its own: its warnings still
/// name the file and the offset, every record before the cut is processed,
/// and the exit status says the result is partial.
#[test]
fn abstract_on_a_truncated_capture_processes_what_precedes_the_cut() {
    let t = truncated(true);
    let dir = t.dir.join("sockets");
    let counters = t.dir.join("stats.json");
    let out = sluice(&["abstract", "-r", s(&t.cut), "--dir", s(&dir), "--stats", s(&counters)]);
    let all = text(&out);
    assert_eq!(status(&out), Some(3), "{all}");
    assert!(
        all.contains(s(&t.cut)) && all.contains(&format!("byte offset {}", t.offset)),
        "no warning naming the file and byte offset {}: {all}",
        t.offset
    );
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&counters).unwrap()).unwrap();
    assert_eq!(stats["packets"]["packets"], t.complete as u64, "{stats:#}");
}

#[test]
fn quiet_run_on_a_truncated_capture_still_exits_3() {
    let t = truncated(false);
    let out_dir = t.dir.join("out");
    let out = analyze(&[&t.cut], &out_dir, &["-q"]);
    assert_eq!(status(&out), Some(3), "{}", text(&out));
    // summary.json keeps the warning and its offset.
    let summary = summary(&out_dir);
    let warning = &summary["files"][0]["warnings"][0];
    assert_eq!(warning["offset"], t.offset as u64, "{summary:#}");
    assert_eq!(warning["fatal"], true);
}

#[test]
fn garbage_after_the_last_record_is_reported_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.pcap");
    gen_capture(&path, 300);
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.len();
    bytes.extend_from_slice(b"\xde\xad\xbe\xef trailing garbage that is not a record");
    std::fs::write(&path, &bytes).unwrap();

    let out_dir = dir.path().join("out");
    let out = analyze(&[&path], &out_dir, &[]);
    let all = text(&out);
    assert_eq!(status(&out), Some(3), "{all}");
    assert!(all.contains(s(&path)), "{all}");
    assert!(
        all.contains(&format!("byte offset {end}")),
        "no 'byte offset {end}' in: {all}"
    );
    assert_eq!(summary(&out_dir)["packets"], 300);
}

#[test]
fn a_text_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("readme.txt");
    std::fs::write(&path, "This is a text file, not a packet capture.\n").unwrap();
    let out = analyze(&[&path], &dir.path().join("out"), &[]);
    let err = stderr(&out);
    assert_eq!(status(&out), Some(1), "{}", text(&out));
    assert!(err.contains(s(&path)), "the file is not named: {err}");
    assert!(err.contains("not a pcap or pcapng file"), "{err}");
}

#[test]
fn one_good_input_and_one_bad_give_a_partial_result() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.pcap");
    gen_capture(&good, 500);
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "not a capture at all\n").unwrap();

    for inputs in [[&good, &bad], [&bad, &good]] {
        let out_dir = dir.path().join("both");
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = analyze(&[inputs[0], inputs[1]], &out_dir, &[]);
        let all = text(&out);
        assert_eq!(status(&out), Some(3), "{all}");
        assert!(
            all.contains(s(&bad)) && all.contains("not a pcap or pcapng file"),
            "{all}"
        );

        let alone_dir = dir.path().join("alone");
        let alone = analyze(&[&good], &alone_dir, &[]);
        assert_eq!(status(&alone), Some(0), "{}", text(&alone));
        let records = sorted_records(&out_dir);
        assert!(!records.is_empty());
        assert_eq!(records, sorted_records(&alone_dir));
    }
}

#[test]
fn an_unwritable_output_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.pcap");
    gen_capture(&good, 50);
    let out = analyze(&[&good], Path::new("/proc/nonexistent/x"), &[]);
    let err = stderr(&out);
    assert_eq!(status(&out), Some(1), "{}", text(&out));
    assert!(err.contains("/proc/nonexistent/x"), "{err}");
    assert!(err.contains("output directory"), "{err}");
    assert_eq!(err.matches("(os error").count(), 1, "the reason, once: {err}");
}

#[test]
fn zero_workers_or_zero_flows_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.pcap");
    gen_capture(&good, 50);
    let out_dir = dir.path().join("out");
    for (args, flag) in [
        (["--workers", "0"], "--workers"),
        (["--workers", "0"], "--workers"),
        (["--max-flows", "0"], "--max-flows"),
    ] {
        let mut all = vec!["analyze", s(&good), "-o", s(&out_dir)];
        all.extend(args);
        let out = sluice(&all);
        let err = stderr(&out);
        // A wrong command line is exit status 2, as `--help` documents.
        assert_eq!(status(&out), Some(2), "{args:?}: {}", text(&out));
        assert!(err.contains(flag) && err.contains("0 is not in"), "{args:?}: {err}");
        assert!(!out_dir.join("flows.jsonl").exists(), "{args:?} still ran the analysis");
    }
}

#[test]
fn records_sorted_by_start_are_refused_for_parquet_and_live_interfaces() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("m.pcap");
    gen_capture(&trace, 100);
    let out = tmp.path().join("out");
    // Refused by the configuration's check, as the same keys in probe.yaml
    // would be (exit 1), before anything is created.
    let refused = analyze(&[&trace], &out, &["--order", "start", "--format", "parquet"]);
    assert_eq!(status(&refused), Some(1), "{}", text(&refused));
    assert!(stderr(&refused).contains("flows.order"), "{}", stderr(&refused));
    assert!(!out.exists(), "created {}", out.display());
    let live = sluice(&["probe", "-i", "lo", "-o", s(&out), "--order", "start"]);
    assert_eq!(status(&live), Some(1), "{}", text(&live));
    assert!(stderr(&live).contains("capture files (-r) only"), "{}", stderr(&live));
    let bad = sluice(&["probe", "-r", s(&trace), "-o", s(&out), "--order", "middle"]);
    assert_eq!(status(&bad), Some(2), "{}", text(&bad));
}

#[test]
fn analyze_help_lists_the_exit_statuses() {
    let out = sluice(&["analyze", "--help"]);
    assert_eq!(status(&out), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Exit status"), "{help}");
    for line in [
        "0  every input was read completely",
        "1  error",
        "2  the command line was wrong",
        "3  partial result",
    ] {
        assert!(help.contains(line), "missing {line:?} in: {help}");
    }
}

/// The keys of a flat JSON object in the order they appear in the text
/// (`serde_json::Value` keeps them sorted). Checked against the parsed
/// object, so a scanning mistake cannot go unnoticed.
fn ordered_keys(line: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0, false, false);
    let mut current = String::new();
    let mut strings = Vec::new();
    for c in line.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    in_string = false;
                    strings.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ':' if depth == 1 => keys.push(strings.pop().expect("a key before ':'")),
            _ => {}
        }
    }
    let parsed: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).expect("a JSON object");
    let mut sorted = keys.clone();
    sorted.sort();
    let mut expected: Vec<String> = parsed.keys().cloned().collect();
    expected.sort();
    assert_eq!(sorted, expected, "key scan disagrees with serde_json");
    keys
}

#[test]
fn csv_header_matches_the_json_record_fields() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("mix.pcap");
    gen_capture(&capture, 400);

    let json_dir = dir.path().join("json");
    let out = analyze(&[&capture], &json_dir, &["--format", "jsonl", "-q"]);
    assert_eq!(status(&out), Some(0), "{}", text(&out));
    let jsonl = std::fs::read_to_string(json_dir.join("flows.jsonl")).unwrap();

    let csv_dir = dir.path().join("csv");
    let out = analyze(&[&capture], &csv_dir, &["--format", "csv", "-q"]);
    assert_eq!(status(&out), Some(0), "{}", text(&out));
    assert!(!csv_dir.join("flows.jsonl").exists());
    let mut reader = csv::Reader::from_path(csv_dir.join("flows.csv")).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(header, sluice_export::field_names());

    // Same flows in both (workers hand their records over in whatever
    // order they finish), every row as wide as the header, and each JSON
    // line the header's fields in order, less those without a value: a
    // field a line leaves out is an empty cell in its flow's row.
    let rows: std::collections::HashMap<String, csv::StringRecord> = reader
        .records()
        .map(|row| {
            let row = row.unwrap();
            assert_eq!(row.len(), header.len());
            (row[0].to_owned(), row)
        })
        .collect();
    assert_eq!(rows.len(), jsonl.lines().count());
    let mut left_out = 0;
    for line in jsonl.lines() {
        let keys = ordered_keys(line);
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let row = &rows[record["flow_id"].as_str().unwrap()];
        let mut present = keys.iter().peekable();
        for (field, cell) in header.iter().zip(row.iter()) {
            if present.next_if(|k| *k == field).is_none() {
                assert_eq!(cell, "", "`{field}` is left out of {line} but has a value in CSV");
                left_out += 1;
            }
        }
        assert_eq!(present.next(), None, "keys out of schema order in {line}");
    }
    assert!(left_out > 0, "the trace has flows without metadata");
}

/// A cgroup that allows `max` tasks (processes and threads), removed when
/// dropped; `None`, with a message, where the pids controller is not there
/// to use or the test may not create a cgroup.
struct TaskLimit {
    dir: PathBuf,
}

impl TaskLimit {
    fn new(max: u32) -> Option<TaskLimit> {
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let v2 = Path::new("/sys/fs/cgroup");
        let parent = if v1.join("cgroup.procs").exists() {
            v1
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
        {
            v2
        } else {
            eprintln!("skipped: no pids cgroup controller to limit threads with");
            return None;
        };
        let dir = parent.join(format!("sluice-test-{}-{max}", std::process::id()));
        let made = std::fs::create_dir(&dir).and_then(|()| std::fs::write(dir.join("pids.max"), max.to_string()));
        if let Err(e) = made {
            eprintln!(
                "skipped: cannot make a cgroup in {} ({e}); run as root",
                parent.display()
            );
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(TaskLimit { dir })
    }

    /// `sluice ARGS` in the cgroup, from its first instruction on.
    fn sluice(&self, args: &[&str]) -> Output {
        std::process::Command::new("sh")
            .args(["-c", r#"echo $$ > "$0/cgroup.procs" && exec "$@""#])
            .arg(&self.dir)
            .arg(common::SLUICE)
            .args(args)
            .output()
            .expect("sh runs")
    }
}

impl Drop for TaskLimit {
    fn drop(&mut self) {
        // The process in it has exited: an empty cgroup can go.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A run that cannot make all its threads (the record writer, the
/// first worker, a later one) ends with an error that says what to do,
/// not a panic, and not a hang of the threads already made.
#[test]
fn too_few_threads_allowed_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("mix.pcap");
    gen_capture(&capture, 2_000);
    for max in [1, 2, 3] {
        let Some(limit) = TaskLimit::new(max) else { return };
        let out_dir = dir.path().join(format!("out-{max}"));
        let out = limit.sluice(&["analyze", s(&capture), "-q", "-o", s(&out_dir), "--workers", "2"]);
        let err = stderr(&out);
        assert_eq!(status(&out), Some(1), "{max} tasks: {}", text(&out));
        assert!(err.contains("cannot start a thread"), "{max} tasks: {err}");
        assert!(err.contains("--workers"), "{max} tasks: {err}");
        assert!(!err.contains("panicked"), "{max} tasks: {err}");
    }
    // The same run with room for its threads: the limit, not something
    // else about running in a cgroup, made the runs above fail.
    let Some(limit) = TaskLimit::new(16) else { return };
    let out = limit.sluice(&[
        "analyze",
        s(&capture),
        "-q",
        "-o",
        s(&dir.path().join("out")),
        "--workers",
        "2",
    ]);
    assert_eq!(status(&out), Some(0), "{}", text(&out));
}

/// A mistyped name or an empty device: nothing is created (not even the
/// default output folder beside the input), and the error, naming each
/// input, is all that is printed: no table of zero counters.
#[test]
fn unreadable_inputs_create_nothing_and_print_only_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcap");
    let text_file = dir.path().join("notes.txt");
    std::fs::write(&text_file, "not a capture\n").unwrap();
    let out = sluice(&["analyze", s(&missing), s(&text_file), "/dev/null"]);
    let err = stderr(&out);
    assert_eq!(status(&out), Some(1), "{}", text(&out));
    assert!(!dir.path().join("missing.sluice").exists(), "an output folder was made");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only notes.txt");
    assert!(out.stdout.is_empty(), "{}", text(&out));
    for name in [s(&missing), s(&text_file), "/dev/null"] {
        assert!(err.contains(name), "{name} is not named: {err}");
    }
    assert!(
        err.starts_with("sluice: error: none of the inputs could be read"),
        "{err}"
    );
    assert!(!err.contains("packets") && !err.contains("threads"), "{err}");
}

/// `-` is standard input, as for tcpdump and tshark: the same records as
/// the file, and by default an output folder `stdin.sluice` in the current
/// directory.
#[test]
fn a_dash_reads_standard_input() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("trace.pcap");
    gen_capture(&capture, 2_000);
    let from_file = dir.path().join("file");
    let out = sluice(&["analyze", s(&capture), "-o", s(&from_file), "-q"]);
    assert_eq!(status(&out), Some(0), "{}", text(&out));
    // A pipe, as `zcat trace.pcap.gz | sluice analyze -` gives.
    let mut child = Command::new(common::SLUICE)
        .args(["analyze", "-", "-q"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = std::fs::read(&capture).unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
    let run = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(status(&run), Some(0), "{}", text(&run));
    let from_stdin = dir.path().join("stdin.sluice");
    assert_eq!(sorted_records(&from_stdin), sorted_records(&from_file));
    assert_eq!(summary(&from_stdin)["packets"], 2_000);
}

/// A negative number is a bad value of its option, not a stray argument
/// to pass after `--`; an unknown option's suggestion is not shown as a
/// required one.
#[test]
fn bad_options_get_the_right_advice() {
    let out = sluice(&["analyze", "x.pcap", "--idle-timeout", "-5"]);
    let err = stderr(&out);
    assert_eq!(status(&out), Some(2), "{err}");
    assert!(err.contains("invalid value '-5' for '--idle-timeout"), "{err}");
    assert!(!err.contains("-- -5"), "{err}");
    let out = sluice(&["analyze", "x.pcap", "--frobnicate"]);
    let err = stderr(&out);
    assert_eq!(status(&out), Some(2), "{err}");
    assert!(err.contains("a similar argument exists: '--format'"), "{err}");
    assert!(err.contains("Usage: sluice analyze [OPTIONS] <INPUTS>..."), "{err}");
    assert!(!err.contains("Usage: sluice analyze --format"), "{err}");
}

/// The README's first command: a generated mix analysed, and the user told
/// where the files went and how much they take.
#[test]
fn the_demo_says_where_its_files_are() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = sluice(&["demo", "--dir", s(&demo), "--packets", "3000"]);
    assert_eq!(status(&out), Some(0), "{}", text(&out));
    assert!(demo.join("mix.pcap").is_file() && demo.join("out/flows.jsonl").is_file());
    let err = stderr(&out);
    let told = format!("demo: the trace and its results are in {} (", s(&demo));
    assert!(
        err.contains(&told) && err.contains(" MB); delete it when done"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("application (top 15)"));
}
