//! The XDP fast path against the user-space path.
//!
//! - The checked-in object is what `bpf/build.sh` makes of the source
//!   (where clang is installed).
//! - Over every Ethernet frame of nDPI's reference captures
//!   (`../shared/data/ndpi-dev`, or `NDPI_DEV_DIR`), run through the
//!   kernel with `BPF_PROG_TEST_RUN`, each frame the program takes gets the
//!   flow hash and the cell the user-space path gives it (fragments
//!   resolved by the same rules); the frames it passes are counted by
//!   reason. Inline, the program takes the same decisions, returns
//!   `XDP_REDIRECT` (a broadcast to the cell and OUT) for each frame it
//!   takes, and passes (counted as a redirect failure) a frame whose cell
//!   has no pair. Loading XDP needs root (CAP_BPF, CAP_NET_ADMIN): without it
//!   the test says so and skips.

use sluice_balance::xdp::{Decision, PassReason, XdpBalancer, XdpLoadError};
use sluice_balance::{CellTable, HashMode, flow_hash};
use sluice_capture::CaptureFile;
use sluice_flow::FragmentResolver;
use sluice_wire::LinkType;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bpf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf")
}

#[test]
fn the_checked_in_object_is_the_sources() {
    if Command::new("clang").arg("--version").output().is_err() {
        eprintln!("skipping: no clang to rebuild bpf/balance.bpf.o with");
        return;
    }
    let out = std::env::temp_dir().join(format!("sluice-balance-{}.bpf.o", std::process::id()));
    let status = Command::new("sh")
        .arg(bpf_dir().join("build.sh"))
        .arg(&out)
        .status()
        .expect("sh runs");
    assert!(status.success(), "bpf/build.sh failed");
    let rebuilt = std::fs::read(&out).expect("the rebuilt object");
    std::fs::remove_file(&out).ok();
    let checked_in = std::fs::read(bpf_dir().join("balance.bpf.o")).expect("the checked-in object");
    if rebuilt == checked_in {
        return;
    }
    // Another clang may lay the file out differently: then the program's
    // instructions and the maps must still be the same.
    let disassemble = |path: &Path| {
        let out = Command::new("llvm-objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(path)
            .output()
            .expect("llvm-objdump runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.contains("file format"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let tmp = std::env::temp_dir().join(format!("sluice-balance-{}-2.bpf.o", std::process::id()));
    std::fs::write(&tmp, &rebuilt).unwrap();
    let (a, b) = (disassemble(&tmp), disassemble(&bpf_dir().join("balance.bpf.o")));
    std::fs::remove_file(&tmp).ok();
    assert_eq!(
        a, b,
        "bpf/balance.bpf.o is stale: run crates/balance/bpf/build.sh and commit it"
    );
}

fn reference_captures() -> Option<Vec<PathBuf>> {
    let root = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    let dir = root.join("pcap");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipping: no nDPI reference captures at {}", dir.display());
        return None;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    Some(paths)
}

/// Loads the program in test mode, or says why not (no privileges).
fn load(table: &CellTable, mode: HashMode) -> Option<XdpBalancer> {
    skip_without_privileges(XdpBalancer::load_for_tests(table, mode))
}

fn skip_without_privileges(loaded: Result<XdpBalancer, XdpLoadError>) -> Option<XdpBalancer> {
    match loaded {
        Ok(b) => Some(b),
        Err(e) if e.to_string().contains("permitted") || e.to_string().contains("ermission") => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[derive(Default)]
struct Tally {
    taken: u64,
    passed: BTreeMap<PassReason, u64>,
    not_runnable: u64,
    fragments: u64,
    vlan: u64,
    v6: u64,
    failures: Vec<String>,
    mismatches: u64,
}

fn compare(mode: HashMode) -> Option<Tally> {
    let paths = reference_captures()?;
    let table = CellTable::new(4).unwrap();
    let mut tally = Tally::default();
    let mut xdp = load(&table, mode)?;
    for path in &paths {
        let Ok(file) = CaptureFile::open(path) else {
            continue;
        };
        let Ok(reader) = file.reader() else {
            continue;
        };
        // The fragments of one file only, as the user-space path has a
        // fresh resolver per run.
        xdp.clear_fragments().expect("the fragment map");
        let mut resolver = FragmentResolver::new(1 << 16);
        for (index, raw) in reader.enumerate() {
            if raw.link != LinkType::Ethernet {
                break;
            }
            let decoded = sluice_wire::decode(raw.link, raw.data);
            let user = decoded.as_ref().ok().map(|d| {
                let mut d = *d;
                resolver.resolve(&mut d);
                (flow_hash(&d.key, mode), d)
            });
            let decision = match xdp.decide(raw.data) {
                Ok(d) => d,
                Err(_) => {
                    // Shorter than an Ethernet header, or longer than a
                    // test run's page: the kernel does not run it.
                    tally.not_runnable += 1;
                    continue;
                }
            };
            match decision {
                Decision::Pass(reason) => *tally.passed.entry(reason).or_default() += 1,
                Decision::Cell { cell, hash } => {
                    tally.taken += 1;
                    let Some((user_hash, d)) = user else {
                        tally.mismatches += 1;
                        if tally.failures.len() < 20 {
                            tally.failures.push(format!(
                                "{} frame {index}: XDP took it (cell {cell}), the decoder refused it: {:?}",
                                path.display(),
                                decoded.err()
                            ));
                        }
                        continue;
                    };
                    tally.fragments += u64::from(!matches!(d.fragment, sluice_wire::Fragment::None));
                    tally.vlan += u64::from(d.key.vlan != 0);
                    tally.v6 += u64::from(d.key.version == sluice_wire::IpVersion::V6);
                    let user_cell = table.cell_of(user_hash);
                    if (hash, cell) != (user_hash, user_cell) {
                        tally.mismatches += 1;
                        if tally.failures.len() < 20 {
                            tally.failures.push(format!(
                                "{} frame {index}: XDP hash {hash:#x} cell {cell}, user space {user_hash:#x} cell {user_cell} ({:?})",
                                path.display(),
                                d.key
                            ));
                        }
                    }
                }
            }
        }
    }
    Some(tally)
}

fn check(mode: HashMode) {
    let Some(tally) = compare(mode) else {
        return;
    };
    eprintln!(
        "{mode}: {} frames taken by XDP ({} fragments, {} VLAN-tagged, {} IPv6), {} not runnable",
        tally.taken, tally.fragments, tally.vlan, tally.v6, tally.not_runnable
    );
    for (reason, n) in &tally.passed {
        eprintln!("  passed, {}: {n}", reason.name());
    }
    assert!(
        tally.failures.is_empty(),
        "{} of {} frames differ:\n{}",
        tally.mismatches,
        tally.taken,
        tally.failures.join("\n")
    );
    // The captures hold all of these: a program that passed them all
    // would compare nothing.
    assert!(tally.taken > 40_000, "only {} frames taken", tally.taken);
    assert!(tally.fragments > 0 && tally.vlan > 0 && tally.v6 > 0);
    assert!(tally.passed.get(&PassReason::Tunnel).copied().unwrap_or(0) > 0);
}

#[test]
fn xdp_and_user_space_choose_the_same_cell_for_every_frame_of_the_reference_captures() {
    check(HashMode::Symmetric5tuple);
}

#[test]
fn xdp_and_user_space_agree_with_the_ip_pair_hash() {
    check(HashMode::IpPair);
}

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

/// Inline: the program loaded with `inline_out` set chooses as the
/// mirroring one does, frame for frame, and redirects (a broadcast to the
/// cell's pair) each frame it takes; a cell whose pair is missing gets its
/// frames passed to the user-space path, each counted as a redirect
/// failure. `lo` stands for every interface: a test run does not send.
#[test]
fn inline_xdp_chooses_as_mirroring_does_and_redirects_to_the_cells_pair() {
    let Some(paths) = reference_captures() else {
        return;
    };
    let table = CellTable::new(4).unwrap();
    let Some(mut mirroring) = load(&table, HashMode::Symmetric5tuple) else {
        return;
    };
    let mut inline = XdpBalancer::load_inline_for_tests(&table, HashMode::Symmetric5tuple)
        .expect("the verifier accepts the inline program");
    // Cell 2 has no pair: its frames must be passed and counted.
    let cells: Vec<String> = ["lo", "lo", "-", "lo"].map(String::from).to_vec();
    inline.set_inline(&cells, "lo").expect("the inline maps");
    let (mut taken, mut to_cell_2, mut passed) = (0u64, 0u64, 0u64);
    for path in paths.iter().take(60) {
        let Ok(file) = CaptureFile::open(path) else {
            continue;
        };
        let Ok(reader) = file.reader() else {
            continue;
        };
        mirroring.clear_fragments().unwrap();
        inline.clear_fragments().unwrap();
        for (index, raw) in reader.enumerate() {
            if raw.link != LinkType::Ethernet {
                break;
            }
            let Ok(expected) = mirroring.decide(raw.data) else {
                continue;
            };
            let (decision, action) = inline.decide_and_act(raw.data).expect("runs as the mirroring one did");
            assert_eq!(decision, expected, "{} frame {index}", path.display());
            match decision {
                Decision::Cell { cell: 2, .. } => {
                    to_cell_2 += 1;
                    assert_eq!(action, XDP_PASS, "{} frame {index}: cell 2 has no pair", path.display());
                }
                Decision::Cell { .. } => {
                    taken += 1;
                    assert_eq!(action, XDP_REDIRECT, "{} frame {index}", path.display());
                }
                Decision::Pass(_) => {
                    passed += 1;
                    assert_eq!(action, XDP_PASS, "{} frame {index}", path.display());
                }
            }
        }
    }
    eprintln!("inline: {taken} frames redirected, {to_cell_2} to the cell without a pair, {passed} passed");
    assert!(
        taken > 1000 && to_cell_2 > 100,
        "{taken} redirected, {to_cell_2} to cell 2"
    );
    let counts = inline.counts().unwrap();
    assert_eq!(counts.redirect_failures, to_cell_2, "{counts:?}");
    assert_eq!(counts.cells[2].0, to_cell_2, "{counts:?}");
    assert_eq!(
        counts.cells.iter().map(|c| c.0).sum::<u64>(),
        taken + to_cell_2,
        "{counts:?}"
    );
    // The mirroring program refuses to be pointed inline, and the other way
    // round.
    assert!(mirroring.set_inline(&cells, "lo").is_err());
    assert!(inline.attach_in("lo", &cells, &[]).is_err());
}
