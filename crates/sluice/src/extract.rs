//! `sluice extract`: the packets of a time range, a capture filter or a
//! flow, out of a directory of recordings, reading only the blocks their
//! indexes select.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use sluice_capture::live::LiveConfig;
use sluice_store::{ExtractReport, FlowSpan, Selection, extract, link_type, recordings};

#[derive(clap::Args)]
#[command(after_help = concat!("\
Times are RFC 3339 (2024-01-01T00:00:05Z, 2024-01-01T01:00:05.25+01:00) or
Unix seconds (1704067205.5), to the nanosecond.

Examples:
  sluice extract -r /data/cap --from 2026-11-25T09:00:00Z --to 2026-11-25T09:05:00Z -w 5min.pcap
  sluice extract -r /data/cap --filter 'host 10.0.0.7 and port 443' -w host.pcap
  sluice extract -r /data/cap --flow 301e9772e611ff57 --flows out/flows.jsonl -w flow.pcap
  sluice extract -r /data/rec --filter udp -w udp.pcap   (rec/w0, rec/w1, ... merged)

A block index is a hint: an entry that contradicts itself or its neighbours
does not make its block skipped, and each block read is checked against its
entry. Bytes that are not records (a damaged record, a file torn by a crash)
are skipped, and reading goes on at the next records. Each such problem is
printed on stderr as `warning: FILE: byte offset N: MESSAGE`, and the exit
status is then 3 (1 if no recording could be read).

", exit_codes!()))]
pub struct ExtractArgs {
    /// Directory of recordings (`sluice record -w DIR`), pcap or pcapng. The
    /// recordings of its immediate subdirectories are read too (`sluice
    /// live --record DIR` writes one per worker, DIR/w0, DIR/w1, ...): each
    /// directory's in time order, several merged by timestamp.
    #[arg(short = 'r', long = "dir", value_name = "DIR")]
    dir: PathBuf,
    /// Only packets stamped at or after this time.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    from: Option<u64>,
    /// Only packets stamped before this time.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    to: Option<u64>,
    /// Only packets this tcpdump expression (pcap-filter(7)) matches,
    /// evaluated by libpcap as `tcpdump -r` does.
    #[arg(long, value_name = "EXPR", conflicts_with = "flow")]
    filter: Option<String>,
    /// Only the packets of this flow (its `flow_id`, 16 hex digits), within
    /// its first and last packets' times.
    #[arg(long, value_name = "ID", value_parser = parse_flow_id)]
    flow: Option<String>,
    /// The flows.jsonl that holds --flow's record [default: DIR/flows.jsonl].
    #[arg(long, value_name = "FILE", requires = "flow")]
    flows: Option<PathBuf>,
    /// Where to write the packets (pcap, nanosecond timestamps).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    out: PathBuf,
}

pub fn run_extract(args: &ExtractArgs) -> anyhow::Result<ExitCode> {
    let mut selection = Selection {
        from_ns: args.from.unwrap_or(0),
        to_ns: args.to.unwrap_or(u64::MAX),
        flow_hash: None,
    };
    if selection.from_ns >= selection.to_ns {
        bail!("--from must be before --to");
    }
    let files = recordings(&args.dir)?;
    let Some(first) = files.first() else {
        bail!(
            "{}: no recordings (sluice-*.pcap or sluice-*.pcapng, in it or in its subdirectories)",
            args.dir.display()
        );
    };
    let report = if let Some(expression) = &args.filter {
        let filter = LiveConfig::compile_user_filter(expression, link_type(first)?)
            .map_err(|e| anyhow::anyhow!("--filter `{expression}`: {e}"))?;
        extract(&args.dir, &selection, |p| filter.matches(p.data, p.wire_len), &args.out)?
    } else if let Some(id) = &args.flow {
        let flows = match &args.flows {
            Some(flows) => flows.clone(),
            None => {
                let default = args.dir.join("flows.jsonl");
                if !default.exists() {
                    bail!(
                        "--flow needs the flow's record: give --flows FILE (the flows.jsonl of `sluice analyze` \
                         of these recordings); {} does not exist",
                        default.display()
                    );
                }
                default
            }
        };
        let flow = FlowSpan::find(&flows, id)?;
        selection.from_ns = selection.from_ns.max(flow.first_ts_ns);
        selection.to_ns = selection.to_ns.min(flow.last_ts_ns.saturating_add(1));
        selection.flow_hash = Some(flow.hash());
        extract(&args.dir, &selection, |p| flow.matches(p), &args.out)?
    } else {
        extract(&args.dir, &selection, |_| true, &args.out)?
    };
    print_report(&report, args);
    for warning in &report.warnings {
        match warning.offset {
            Some(offset) => eprintln!(
                "warning: {}: byte offset {offset}: {}",
                warning.path.display(),
                warning.message
            ),
            None => eprintln!("warning: {}: {}", warning.path.display(), warning.message),
        }
    }
    let unlisted = report.warning_count - report.warnings.len() as u64;
    if unlisted > 0 {
        eprintln!("warning: {unlisted} more warnings not listed");
    }
    Ok(if report.partial() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_report(report: &ExtractReport, args: &ExtractArgs) {
    match &report.directories[..] {
        [only] if *only == args.dir => {}
        [only] => println!("recordings in {}", only.display()),
        many => {
            let shown: Vec<String> = many.iter().map(|d| d.display().to_string()).collect();
            println!(
                "recordings in {} directories, merged by timestamp: {}",
                many.len(),
                shown.join(", ")
            );
        }
    }
    let read = report.files - report.files_skipped - report.files_unreadable;
    let unreadable = match report.files_unreadable {
        0 => String::new(),
        n => format!(", {n} not recordings (see the warnings)"),
    };
    println!(
        "files: {read} read of {}, {} skipped by their index{unreadable}",
        report.files, report.files_skipped
    );
    for path in &report.unindexed {
        println!("  read whole, no index covers it: {}", path.display());
    }
    for path in &report.truncated {
        println!("  ends inside a record, read up to it: {}", path.display());
    }
    println!(
        "blocks: {} read of {} indexed, {} skipped by time, {} by the flow's Bloom filter",
        report.blocks_read, report.blocks, report.blocks_skipped_by_time, report.blocks_skipped_by_flow
    );
    if report.bytes_unreadable > 0 {
        println!(
            "bytes read: {}, of which {} were not records (see the warnings)",
            report.bytes_read, report.bytes_unreadable
        );
    } else {
        println!("bytes read: {}", report.bytes_read);
    }
    println!(
        "packets: {} in the time range, {} written to {}",
        report.packets_examined,
        report.packets_written,
        args.out.display()
    );
}

fn parse_flow_id(text: &str) -> Result<String, String> {
    if text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err("a flow id is 16 hex digits, as in flows.jsonl's flow_id".into())
    }
}

/// Nanoseconds since the epoch from RFC 3339 (any offset) or Unix seconds
/// with a fraction.
fn parse_time(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is neither RFC 3339 (2024-01-01T00:00:05.5Z) nor Unix seconds (1704067205.5)");
    if !text.contains(['T', 't', ' ']) {
        return seconds_and_fraction(text).ok_or_else(bad);
    }
    let (date, rest) = text.split_at_checked(10).ok_or_else(bad)?;
    let field = |s: &str| s.parse::<u64>().ok().filter(|_| s.bytes().all(|b| b.is_ascii_digit()));
    let mut parts = date.split('-');
    let (Some(year), Some(month), Some(day), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let (year, month, day) = (
        field(year).ok_or_else(bad)?,
        field(month).ok_or_else(bad)?,
        field(day).ok_or_else(bad)?,
    );
    let time = rest.strip_prefix(['T', 't', ' ']).ok_or_else(bad)?;
    let (clock, offset_s) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0i64)
    } else {
        let at = time.rfind(['+', '-']).ok_or_else(bad)?;
        let (clock, offset) = time.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset[1..].split_once(':').ok_or_else(bad)?;
        let (h, m) = (field(h).ok_or_else(bad)?, field(m).ok_or_else(bad)?);
        if h > 23 || m > 59 {
            return Err(bad());
        }
        (clock, sign * (h * 3600 + m * 60) as i64)
    };
    let (hms, fraction) = clock.split_once('.').map_or((clock, None), |(a, b)| (a, Some(b)));
    let mut hms = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (hms.next(), hms.next(), hms.next(), hms.next()) else {
        return Err(bad());
    };
    let (h, m, s) = (
        field(h).ok_or_else(bad)?,
        field(m).ok_or_else(bad)?,
        field(s).ok_or_else(bad)?,
    );
    let days_in_month = match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return Err(bad()),
    };
    // 60 is a leap second, which Unix time folds into the next.
    if !(1970..=9999).contains(&year) || day == 0 || day > days_in_month || h > 23 || m > 59 || s > 60 {
        return Err(bad());
    }
    let nanos = match fraction {
        Some(f) => nanoseconds(f).ok_or_else(bad)?,
        None => 0,
    };
    let seconds = sluice_units::calendar::days_from_civil(year as i64, month as u32, day as u32) * 86_400
        + (h * 3600 + m * 60 + s) as i64
        - offset_s;
    u64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000)?.checked_add(nanos))
        .ok_or_else(|| format!("`{text}` is before 1970"))
}

fn seconds_and_fraction(text: &str) -> Option<u64> {
    let (seconds, fraction) = text.split_once('.').map_or((text, None), |(a, b)| (a, Some(b)));
    if seconds.is_empty() || !seconds.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nanos = match fraction {
        Some(f) => nanoseconds(f)?,
        None => 0,
    };
    seconds
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(nanos)
}

/// The digits after a decimal point, as nanoseconds (at most nine).
fn nanoseconds(digits: &str) -> Option<u64> {
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse::<u64>().ok()? * 10u64.pow(9 - digits.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_rfc_3339_or_unix_seconds() {
        assert_eq!(parse_time("2024-01-01T00:00:05Z"), Ok(1_704_067_205_000_000_000));
        assert_eq!(parse_time("2024-01-01T00:00:05.5Z"), Ok(1_704_067_205_500_000_000));
        assert_eq!(parse_time("2024-01-01T01:00:05.5+01:00"), Ok(1_704_067_205_500_000_000));
        assert_eq!(parse_time("2023-12-31T23:00:05.5-01:00"), Ok(1_704_067_205_500_000_000));
        assert_eq!(parse_time("1704067205.5"), Ok(1_704_067_205_500_000_000));
        assert_eq!(parse_time("1704067205.000000001"), Ok(1_704_067_205_000_000_001));
        assert_eq!(parse_time("1704067205"), Ok(1_704_067_205_000_000_000));
        assert_eq!(parse_time("2024-02-29T00:00:00Z"), Ok(1_709_164_800_000_000_000));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2024-01-01T00:00:05",
            "2024-01-01T24:00:00Z",
            "2024-1-01T00:00:05Z",
            "1704067205.1234567891",
            "-5",
            "1704067205.",
            "2024-01-01T00:00:05.Z",
            "1970-01-01T00:00:00+01:00",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
