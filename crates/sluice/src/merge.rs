//! `sluice merge`: the outputs of several cells' probes as one probe's
//! (`sluice_balance::merge`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;
use sluice_engine::config::ProbeConfig;

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sluice merge cell0.out cell1.out cell2.out cell3.out -o all.out")]
pub struct MergeArgs {
    /// The cells' output directories (each with summary.json, and
    /// stats.jsonl, flows.jsonl and alarms.jsonl where the cell wrote
    /// them).
    #[arg(value_name = "DIR", required = true)]
    dirs: Vec<PathBuf>,
    /// Where the merged summary.json, stats.jsonl, flows.jsonl and
    /// alarms.jsonl go.
    #[arg(short, long, value_name = "DIR")]
    out: PathBuf,
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON; is it a probe's output?", path.display()))
}

fn read_lines(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| serde_json::from_str(l).with_context(|| format!("{} line {}: not JSON", path.display(), n + 1)))
        .collect()
}

pub fn run_merge(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    let mut summaries = Vec::new();
    let mut intervals = Vec::new();
    let mut top = None;
    let mut records = Vec::new();
    let mut alarms = Vec::new();
    for dir in &args.dirs {
        summaries.push(read_json(&dir.join("summary.json"))?);
        let stats = dir.join("stats.jsonl");
        if stats.exists() {
            intervals.push(read_lines(&stats)?);
        }
        let config = dir.join("probe.yaml");
        if config.exists() {
            let n = ProbeConfig::read(&config)?.stats.first().map(|s| s.top);
            if let (Some(a), Some(b)) = (top, n)
                && a != b
            {
                bail!(
                    "{}: stats.top is {b} but another cell's is {a}: cells must keep top lists of one length to be merged",
                    config.display()
                );
            }
            top = top.or(n);
        }
        let flows = dir.join("flows.jsonl");
        if flows.exists() {
            records.push(flows);
        }
        let raised = dir.join("alarms.jsonl");
        if raised.exists() {
            alarms.extend(read_lines(&raised)?);
        }
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let summary = sluice_balance::merge::merge_summaries(&summaries)?;
    let write = |name: &str, bytes: &[u8]| -> anyhow::Result<()> {
        let path = args.out.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    let mut text = serde_json::to_vec_pretty(&summary)?;
    text.push(b'\n');
    write("summary.json", &text)?;
    if !intervals.is_empty() {
        let mut text = Vec::new();
        for interval in sluice_balance::merge::merge_intervals(&intervals, top.unwrap_or(20)) {
            serde_json::to_writer(&mut text, &interval)?;
            text.push(b'\n');
        }
        write("stats.jsonl", &text)?;
    }
    if !records.is_empty() {
        // Each flow was in one cell: the union is every record once.
        let path = args.out.join("flows.jsonl");
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?,
        );
        for file in &records {
            let mut input = std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
            std::io::copy(&mut input, &mut out).with_context(|| format!("cannot write {}", path.display()))?;
        }
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !alarms.is_empty() {
        // Each cell's detectors saw its share: the alarms are listed as
        // raised, in time order, each naming the cell's evidence as it
        // wrote it.
        alarms.sort_by_key(|a| a["start_ts_ns"].as_u64().unwrap_or(0));
        let mut text = Vec::new();
        for alarm in &alarms {
            serde_json::to_writer(&mut text, alarm)?;
            text.push(b'\n');
        }
        write("alarms.jsonl", &text)?;
    }
    println!(
        "merged {} cells: {} packets, {} flows into {}",
        args.dirs.len(),
        summary["packets"],
        summary["flows"],
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
