//! The kernel fast path: `bpf/balance.bpf.c`, an XDP program that chooses
//! each frame's cell exactly as [`crate::Balancer`] does and redirects it
//! through a DEVMAP to the cell's interface. Frames it does not parse
//! (tunnels, MPLS, PPPoE, LLC, frames the decoder refuses) it passes to the
//! user-space path, counted by [`PassReason`].
//!
//! Inline ([`XdpBalancer::load_inline`], [`XdpBalancer::attach_inline`]),
//! each frame it takes goes to its cell and to OUT both: XDP copies a frame
//! only by a broadcast redirect, which sends it to every interface of a
//! device map, so each cell has a map of two, {the cell, OUT}, in an array
//! of maps the program looks the cell up in.
//!
//! The object is compiled by Debian's clang and checked in beside its
//! source (`bpf/build.sh`), so building Sluice needs no clang. It is loaded
//! with `aya`, which is pure Rust (no libbpf to build or find) and builds on
//! the workspace's Rust; aya keeps its `unsafe` to itself.

use crate::{CellTable, HashMode, SLOTS};
use aya::maps::{Array, ArrayOfMaps, DevMap, HashMap, MapData, PerCpuArray};
use aya::programs::{TestRun, TestRunOptions, Xdp};
use aya::{Ebpf, EbpfLoader, include_bytes_aligned};

/// The compiled program, as `bpf/build.sh` makes it.
pub static OBJECT: &[u8] = include_bytes_aligned!("../bpf/balance.bpf.o");

/// Why the program passed a frame to the user-space path, in the order of
/// the program's `enum reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PassReason {
    Short,
    NotIp,
    VlanDepth,
    IpHeader,
    Tunnel,
    Ipv6Extensions,
    TcpHeader,
    NoCell,
}

impl PassReason {
    pub const ALL: [PassReason; 8] = [
        PassReason::Short,
        PassReason::NotIp,
        PassReason::VlanDepth,
        PassReason::IpHeader,
        PassReason::Tunnel,
        PassReason::Ipv6Extensions,
        PassReason::TcpHeader,
        PassReason::NoCell,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PassReason::Short => "short",
            PassReason::NotIp => "not-ip",
            PassReason::VlanDepth => "vlan-depth",
            PassReason::IpHeader => "ip-header",
            PassReason::Tunnel => "tunnel",
            PassReason::Ipv6Extensions => "ipv6-extensions",
            PassReason::TcpHeader => "tcp-header",
            PassReason::NoCell => "no-cell",
        }
    }
}

const STAT_RESOLVED: u32 = PassReason::ALL.len() as u32;
const STAT_UNRESOLVED: u32 = STAT_RESOLVED + 1;
const STAT_REDIRECT_FAILURES: u32 = STAT_RESOLVED + 2;

/// What the program did with one frame (from a test run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Sent to this cell; `hash` is the flow hash it chose by.
    Cell {
        cell: usize,
        hash: u64,
    },
    Pass(PassReason),
}

/// The fast path's counters, summed over the CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XdpCounts {
    /// Per cell: frames and bytes redirected (or, without a DEVMAP entry,
    /// chosen).
    pub cells: Vec<(u64, u64)>,
    /// Frames passed to the user-space path, by reason.
    pub passed: Vec<(PassReason, u64)>,
    pub resolved_fragments: u64,
    pub unresolved_fragments: u64,
    pub redirect_failures: u64,
}

impl XdpCounts {
    /// The counts as the summary has them, each cell named as in `cells`.
    pub fn report(&self, interface: &str, mode: XdpMode, cells: &[String]) -> crate::XdpReport {
        crate::XdpReport {
            interface: interface.to_string(),
            mode: mode_name(mode).to_string(),
            error: None,
            cells: cells
                .iter()
                .zip(&self.cells)
                .map(|(cell, &(packets, bytes))| crate::XdpCellCounts {
                    cell: cell.clone(),
                    packets,
                    bytes,
                })
                .collect(),
            passed: self
                .passed
                .iter()
                .map(|(reason, n)| (reason.name().to_string(), *n))
                .collect(),
            resolved_fragments: self.resolved_fragments,
            unresolved_fragments: self.unresolved_fragments,
            redirect_failures: self.redirect_failures,
        }
    }
}

/// How the program is attached, as the summary says it.
pub fn mode_name(mode: XdpMode) -> &'static str {
    match mode {
        XdpMode::Default => "default",
        XdpMode::Skb => "generic",
        XdpMode::Driver => "driver",
        XdpMode::Hardware => "hardware",
    }
}

/// Loading, filling or attaching the program failed.
#[derive(Debug, thiserror::Error)]
pub enum XdpLoadError {
    #[error("loading the XDP program: {0} (XDP needs CAP_BPF and CAP_NET_ADMIN, or root)")]
    Load(String),
    #[error("the XDP program's map {0}: {1}")]
    Map(&'static str, String),
    #[error("cell interface {name:?}: {why}")]
    Interface { name: String, why: String },
    #[error("attaching XDP to {interface}: {why}")]
    Attach { interface: String, why: String },
    /// What this kernel, or the way the program was loaded, cannot do.
    #[error("{0}")]
    Unsupported(String),
}

/// The loaded program and its maps.
pub struct XdpBalancer {
    ebpf: Ebpf,
    cells: usize,
    inline: bool,
}

/// How a program is loaded: the read-only globals it is given.
#[derive(Clone, Copy)]
struct Globals {
    test: bool,
    inline: bool,
}

// `XdpMode` is in the signatures above: its users need not depend on aya.
pub use aya::programs::XdpMode;

fn map_err(name: &'static str) -> impl Fn(aya::maps::MapError) -> XdpLoadError {
    move |e| XdpLoadError::Map(name, e.to_string())
}

impl XdpBalancer {
    /// Loads the program with `table`'s slots and the hash `mode`.
    pub fn load(table: &CellTable, mode: HashMode) -> Result<XdpBalancer, XdpLoadError> {
        XdpBalancer::load_with(
            table,
            mode,
            Globals {
                test: false,
                inline: false,
            },
        )
    }

    /// Loads the program for inline mode: each frame it takes goes to its
    /// cell and to OUT ([`XdpBalancer::attach_inline`]).
    pub fn load_inline(table: &CellTable, mode: HashMode) -> Result<XdpBalancer, XdpLoadError> {
        XdpBalancer::load_with(
            table,
            mode,
            Globals {
                test: false,
                inline: true,
            },
        )
    }

    /// Loads the program in test mode: each run writes its decision over
    /// the frame's Ethernet header, which [`XdpBalancer::decide`] reads
    /// back. Never attach a program loaded so.
    pub fn load_for_tests(table: &CellTable, mode: HashMode) -> Result<XdpBalancer, XdpLoadError> {
        XdpBalancer::load_with(
            table,
            mode,
            Globals {
                test: true,
                inline: false,
            },
        )
    }

    /// As [`XdpBalancer::load_for_tests`], in inline mode.
    pub fn load_inline_for_tests(table: &CellTable, mode: HashMode) -> Result<XdpBalancer, XdpLoadError> {
        XdpBalancer::load_with(
            table,
            mode,
            Globals {
                test: true,
                inline: true,
            },
        )
    }

    fn load_with(table: &CellTable, mode: HashMode, globals: Globals) -> Result<XdpBalancer, XdpLoadError> {
        if globals.inline {
            broadcast_redirects()?;
        }
        // The hash, the test mode and inline mode are read-only globals,
        // fixed before the verifier sees the program, so it prunes what
        // they turn off.
        let ip_pair = u32::from(mode == HashMode::IpPair);
        let test_mode = u32::from(globals.test);
        let inline_out = u32::from(globals.inline);
        let mut ebpf = EbpfLoader::new()
            .override_global("ip_pair", &ip_pair, true)
            .override_global("test_mode", &test_mode, true)
            .override_global("inline_out", &inline_out, true)
            .load(OBJECT)
            .map_err(|e| XdpLoadError::Load(e.to_string()))?;
        let program: &mut Xdp = ebpf
            .program_mut("balance")
            .ok_or_else(|| XdpLoadError::Load("no program `balance` in the object".into()))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| XdpLoadError::Load(e.to_string()))?;
        program.load().map_err(|e| XdpLoadError::Load(verifier(&e)))?;
        let mut balancer = XdpBalancer {
            ebpf,
            cells: table.cells(),
            inline: globals.inline,
        };
        let mut slots: Array<&mut MapData, u32> =
            Array::try_from(balancer.ebpf.map_mut("slots").expect("slots")).map_err(map_err("slots"))?;
        for (slot, &owner) in table.owners().iter().enumerate().take(SLOTS) {
            slots.set(slot as u32, u32::from(owner), 0).map_err(map_err("slots"))?;
        }
        Ok(balancer)
    }

    /// Points each cell at its interface (by name; `-` for a cell that
    /// left: it owns no slot) and attaches the program to `input`, in the
    /// driver's mode where it has one, else the generic mode.
    pub fn attach(&mut self, input: &str, cells: &[String]) -> Result<XdpMode, XdpLoadError> {
        self.attach_in(input, cells, &[XdpMode::Driver, XdpMode::Skb])
    }

    /// As [`XdpBalancer::attach`], trying the given modes in order.
    pub fn attach_in(&mut self, input: &str, cells: &[String], modes: &[XdpMode]) -> Result<XdpMode, XdpLoadError> {
        if self.inline {
            return Err(XdpLoadError::Unsupported(
                "the program was loaded for inline mode: attach it with attach_inline".into(),
            ));
        }
        self.point_cells(cells)?;
        self.attach_program(input, modes)
    }

    /// Inline (the program loaded by [`XdpBalancer::load_inline`]): points
    /// each cell at its interface and OUT, and attaches the program to
    /// `input` in the first of `modes` that works. Each frame the program
    /// takes goes to its cell and to `out`; what it passes, the user-space
    /// path must send to both.
    pub fn attach_inline(
        &mut self,
        input: &str,
        cells: &[String],
        out: &str,
        modes: &[XdpMode],
    ) -> Result<XdpMode, XdpLoadError> {
        self.set_inline(cells, out)?;
        self.attach_program(input, modes)
    }

    /// Fills the inline map: for each cell present, a device map of two,
    /// {its interface, `out`}, which a broadcast redirect sends the frame
    /// to both of.
    pub fn set_inline(&mut self, cells: &[String], out: &str) -> Result<(), XdpLoadError> {
        if !self.inline {
            return Err(XdpLoadError::Unsupported(
                "the program was not loaded for inline mode (load_inline)".into(),
            ));
        }
        let out_index = if_index(out)?;
        let mut outer: ArrayOfMaps<&mut MapData, DevMap<MapData>> =
            ArrayOfMaps::try_from(self.ebpf.map_mut("inline_cells").expect("inline_cells"))
                .map_err(map_err("inline_cells"))?;
        for (cell, name) in cells.iter().enumerate() {
            if name == "-" {
                continue;
            }
            let index = if_index(name)?;
            // The inner map must be what the program's `struct
            // cell_and_out` declares: a DEVMAP of two, 4-byte keys, the
            // kernel's 8-byte `struct bpf_devmap_val` as values (broadcast
            // redirects need Linux 5.14, which has it).
            let definition =
                aya_obj::Map::new_from_params(aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_DEVMAP as u32, 4, 8, 2, 0);
            let data =
                MapData::create(definition, &format!("sluice_cell{cell}"), None).map_err(map_err("inline_cells"))?;
            let mut both =
                DevMap::<MapData>::try_from(aya::maps::Map::DevMap(data)).map_err(map_err("inline_cells"))?;
            for (key, (ifname, ifindex)) in [(name.as_str(), index), (out, out_index)].into_iter().enumerate() {
                both.set(key as u32, ifindex, None, 0)
                    .map_err(|e| XdpLoadError::Interface {
                        name: ifname.to_string(),
                        why: e.to_string(),
                    })?;
            }
            outer.set(cell as u32, &both, 0).map_err(map_err("inline_cells"))?;
        }
        Ok(())
    }

    fn point_cells(&mut self, cells: &[String]) -> Result<(), XdpLoadError> {
        let mut devmap = DevMap::try_from(self.ebpf.map_mut("cells").expect("cells")).map_err(map_err("cells"))?;
        for (cell, name) in cells.iter().enumerate() {
            if name == "-" {
                continue;
            }
            let index = if_index(name)?;
            devmap
                .set(cell as u32, index, None, 0)
                .map_err(|e| XdpLoadError::Interface {
                    name: name.clone(),
                    why: e.to_string(),
                })?;
        }
        Ok(())
    }

    fn attach_program(&mut self, input: &str, modes: &[XdpMode]) -> Result<XdpMode, XdpLoadError> {
        let program: &mut Xdp = self
            .ebpf
            .program_mut("balance")
            .expect("loaded")
            .try_into()
            .expect("an XDP program");
        let mut last = String::new();
        for &mode in modes {
            match program.attach(input, mode) {
                Ok(_) => return Ok(mode),
                Err(e) => last = e.to_string(),
            }
        }
        Err(XdpLoadError::Attach {
            interface: input.to_string(),
            why: last,
        })
    }

    /// Forgets the first fragments seen (between inputs, as a new
    /// user-space resolver would).
    pub fn clear_fragments(&mut self) -> Result<(), XdpLoadError> {
        // The key: two addresses of 16 bytes, the IP id, VLAN, protocol and
        // version (`struct frag_key`).
        let mut map: HashMap<&mut MapData, [u8; 40], u32> =
            HashMap::try_from(self.ebpf.map_mut("fragments").expect("fragments")).map_err(map_err("fragments"))?;
        let keys: Vec<[u8; 40]> = map.keys().filter_map(Result::ok).collect();
        for key in keys {
            map.remove(&key).map_err(map_err("fragments"))?;
        }
        Ok(())
    }

    /// Runs the program once on `frame` with `BPF_PROG_TEST_RUN` (test mode
    /// must be on) and reads its decision back.
    pub fn decide(&self, frame: &[u8]) -> Result<Decision, String> {
        self.decide_and_act(frame).map(|(decision, _)| decision)
    }

    /// As [`XdpBalancer::decide`], with the action the program returned
    /// (`XDP_PASS` 2, `XDP_REDIRECT` 4; a test run does not carry out the
    /// redirect).
    pub fn decide_and_act(&self, frame: &[u8]) -> Result<(Decision, u32), String> {
        let program: &Xdp = self
            .ebpf
            .program("balance")
            .expect("loaded")
            .try_into()
            .expect("an XDP program");
        let mut out = vec![0u8; frame.len() + 512];
        let mut opts = TestRunOptions::new();
        opts.data_in = Some(frame);
        opts.data_out = Some(&mut out);
        opts.repeat = 1;
        let action = program.test_run(opts).map_err(|e| e.to_string())?.return_value;
        let cell = u32::from_ne_bytes(out[0..4].try_into().expect("4 bytes"));
        let reason = u16::from_ne_bytes(out[4..6].try_into().expect("2 bytes"));
        let hash = u64::from_ne_bytes(out[6..14].try_into().expect("8 bytes"));
        if cell == u32::MAX {
            return PassReason::ALL
                .get(reason as usize)
                .map(|&r| (Decision::Pass(r), action))
                .ok_or_else(|| format!("unknown pass reason {reason}"));
        }
        Ok((
            Decision::Cell {
                cell: cell as usize,
                hash,
            },
            action,
        ))
    }

    /// Runs the program `repeat` times on `frame`; the kernel's mean time
    /// per run.
    pub fn time(&self, frame: &[u8], repeat: u32) -> Result<std::time::Duration, String> {
        let program: &Xdp = self
            .ebpf
            .program("balance")
            .expect("loaded")
            .try_into()
            .expect("an XDP program");
        let mut opts = TestRunOptions::new();
        opts.data_in = Some(frame);
        opts.repeat = repeat;
        program.test_run(opts).map(|r| r.duration).map_err(|e| e.to_string())
    }

    /// The counters, summed over the CPUs.
    pub fn counts(&self) -> Result<XdpCounts, XdpLoadError> {
        let per_cell: PerCpuArray<&MapData, [u64; 2]> =
            PerCpuArray::try_from(self.ebpf.map("cell_counts").expect("cell_counts"))
                .map_err(map_err("cell_counts"))?;
        let stats: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.ebpf.map("stats").expect("stats")).map_err(map_err("stats"))?;
        let stat = |index: u32| -> Result<u64, XdpLoadError> {
            Ok(stats.get(&index, 0).map_err(map_err("stats"))?.iter().sum())
        };
        let mut counts = XdpCounts::default();
        for cell in 0..self.cells as u32 {
            let values = per_cell.get(&cell, 0).map_err(map_err("cell_counts"))?;
            counts
                .cells
                .push(values.iter().fold((0, 0), |(p, b), v| (p + v[0], b + v[1])));
        }
        for (i, reason) in PassReason::ALL.iter().enumerate() {
            counts.passed.push((*reason, stat(i as u32)?));
        }
        counts.resolved_fragments = stat(STAT_RESOLVED)?;
        counts.unresolved_fragments = stat(STAT_UNRESOLVED)?;
        counts.redirect_failures = stat(STAT_REDIRECT_FAILURES)?;
        Ok(counts)
    }
}

/// Broadcast redirects (`BPF_F_BROADCAST`) came with Linux 5.14; an older
/// kernel would load the inline program and abort each of its redirects,
/// dropping the frame, so it is refused at load.
fn broadcast_redirects() -> Result<(), XdpLoadError> {
    let path = "/proc/sys/kernel/osrelease";
    let release = std::fs::read_to_string(path).map_err(|e| XdpLoadError::Unsupported(format!("{path}: {e}")))?;
    let mut numbers = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    if version < (5, 14) {
        return Err(XdpLoadError::Unsupported(format!(
            "inline XDP copies each frame to its cell and OUT with a broadcast redirect, which needs Linux 5.14 or later; this kernel is {}",
            release.trim()
        )));
    }
    Ok(())
}

/// The verifier's log is long; its last lines say what it refused.
fn verifier(e: &aya::programs::ProgramError) -> String {
    let text = format!("{e:?}");
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// An interface's index, as the kernel publishes it in sysfs.
fn if_index(name: &str) -> Result<u32, XdpLoadError> {
    let path = format!("/sys/class/net/{name}/ifindex");
    let text = std::fs::read_to_string(&path).map_err(|e| XdpLoadError::Interface {
        name: name.to_string(),
        why: format!("{path}: {e} (no such interface?)"),
    })?;
    text.trim().parse().map_err(|e| XdpLoadError::Interface {
        name: name.to_string(),
        why: format!("{path}: {e}"),
    })
}
