//! The XDP program's cost per frame, measured by the kernel's own test run
//! (`BPF_PROG_TEST_RUN` with a repeat count) over every frame of a capture:
//!
//!   cargo run --release -p sluice-balance --example xdp_cost -- TRACE.pcap [CELLS] [REPEAT] [inline]
//!
//! Each distinct frame is run REPEAT times (default 1,000); the figure is
//! the mean over the capture's frames of the kernel's time per run, and
//! the rate one core would reach at it. Needs root (CAP_BPF).
//!
//! `inline` loads the program in inline mode, every cell's pair pointed at
//! `lo`: the time is the program's own, up to its broadcast redirect, which
//! a test run returns without carrying out (the copies the kernel then
//! makes, one per interface, are not in it).

use sluice_balance::xdp::XdpBalancer;
use sluice_balance::{CellTable, HashMode};
use sluice_capture::CaptureFile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: xdp_cost TRACE.pcap [CELLS] [REPEAT]")?;
    let cells: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    let repeat: u32 = args.next().map_or(Ok(1000), |s| s.parse())?;
    let inline = match args.next().as_deref() {
        None => false,
        Some("inline") => true,
        Some(other) => return Err(format!("{other:?}: the fourth argument is `inline` or nothing").into()),
    };
    let table = CellTable::new(cells)?;
    let xdp = if inline {
        let mut xdp = XdpBalancer::load_inline(&table, HashMode::Symmetric5tuple)?;
        xdp.set_inline(&vec!["lo".to_string(); cells], "lo")?;
        xdp
    } else {
        XdpBalancer::load(&table, HashMode::Symmetric5tuple)?
    };
    let file = CaptureFile::open(&path)?;
    let (mut frames, mut total_ns) = (0u64, 0f64);
    for raw in file.reader()? {
        let d = xdp.time(raw.data, repeat)?;
        frames += 1;
        total_ns += d.as_nanos() as f64;
    }
    if frames == 0 {
        return Err(format!("{path}: no frames").into());
    }
    let per_frame = total_ns / frames as f64;
    let counts = xdp.counts()?;
    let passed: u64 = counts.passed.iter().map(|(_, n)| n).sum();
    println!(
        "{frames} frames x {repeat} runs, {cells} cells{}: {per_frame:.1} ns per frame, {:.2} Mpps per core; {passed} runs passed to user space",
        if inline { ", inline" } else { "" },
        1e3 / per_frame
    );
    Ok(())
}
