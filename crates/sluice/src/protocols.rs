//! `sluice protocols`: every protocol and application Sluice can name, how
//! it is detected and what metadata its flows may carry, one a line (like
//! `ndpiReader -H`), or as JSON for tools. The list is the classifier's
//! catalog (`crates/classify/data/protocols.csv`), which its tests hold to
//! the code.

use std::io::Write;

use sluice_classify::catalog::{Protocol, protocols};

#[derive(clap::Args)]
pub struct ProtocolsArgs {
    /// Print a JSON array of objects (name, ndpi_id, detection, metadata,
    /// note) instead of the table.
    #[arg(long)]
    json: bool,
}

pub fn run_protocols(args: &ProtocolsArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        json(protocols())
    } else {
        table(protocols())
    };
    // A closed pipe (`sluice protocols | head`) is no error of ours.
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn table(rows: &[Protocol]) -> String {
    let width = rows.iter().map(|p| p.name.len()).max().unwrap_or(4);
    let mut text = format!("{:width$}  {:>7}  {:28}  METADATA\n", "NAME", "NDPI_ID", "DETECTED BY");
    for p in rows {
        let id = p.ndpi_id.map_or("-".to_string(), |id| id.to_string());
        let detection = if p.detection.is_empty() {
            "-".to_string()
        } else {
            p.detection.join(",")
        };
        let metadata = if p.metadata.is_empty() {
            "-".to_string()
        } else {
            p.metadata.join(",")
        };
        let mut line = format!("{:width$}  {id:>7}  {detection:28}  {metadata}", p.name);
        if p.detection.is_empty() {
            line.push_str("  (not named: ");
            line.push_str(p.note);
            line.push(')');
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

fn json(rows: &[Protocol]) -> String {
    let array: Vec<serde_json::Value> = rows
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "ndpi_id": p.ndpi_id,
                "detection": p.detection,
                "metadata": p.metadata,
                "note": p.note,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&array).expect("plain values serialise");
    text.push('\n');
    text
}
