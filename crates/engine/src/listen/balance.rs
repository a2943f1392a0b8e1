//! The `balance` listener: SF-TAP's cell incubator as a packet listener.
//! Every frame, as the source read it and decoded it once, goes to one cell
//! chosen by its flow (`sluice-balance`): to a capture file per cell when
//! the probe reads files, to an interface per cell when it reads
//! interfaces (the user-space path: the probe's `TPACKET_V3` rings in,
//! `AF_PACKET` sockets out). Inline, every frame is also forwarded to one
//! more interface, in the order read.
//!
//! The balancer needs no flow table, so a probe with it alone reads with
//! one thread: the order of the frames is kept in each cell and on the
//! inline link. Its loss policy is the recorder's lossless one: a cell
//! whose link is full holds the reader back (the kernel's queue is tried
//! again), so what is lost is lost at the input ring, counted as kernel
//! drops; frames a cell's interface refuses (longer than its MTU) are
//! counted per cell as redirect failures, and what the cell's interface
//! itself dropped as its drops.
//!
//! With `xdp`, the listener also attaches the kernel fast path to the one
//! input interface (`sluice_balance::xdp`) and holds it for the run: what
//! the program redirects never reaches the listener, so its counts are read
//! from the program's maps whenever the listener publishes (every
//! `PUBLISH_EVERY` frames, and at the source's idle calls, at least once a
//! second) and at the end, into the report's `xdp` section. Inline, the
//! program sends each frame it takes to its cell and the inline link both
//! (a broadcast redirect); the frames it passes reach this listener, which
//! sends them to their cell and the inline link as without XDP.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sluice_balance::xdp::{XdpBalancer, XdpMode};
use sluice_balance::{BalanceReport, Balancer, CellCounts, CellTable, HashMode, XdpReport};
use sluice_inject::{Injector, SendStats};
use sluice_store::PcapWriter;
use sluice_wire::LinkType;

use crate::config::BalanceConfig;
use crate::listen::{ListenerFailed, PacketListener, SourcePacket};
use crate::publish::Published;

/// Frames held per output before they go to the kernel in one call.
const BATCH: usize = 64;

/// Frames between two publications of the counts.
const PUBLISH_EVERY: u64 = 1 << 14;

/// A balance listener's settings and what it did.
pub(crate) struct Balancing {
    table: CellTable,
    mode: HashMode,
    cells: Vec<String>,
    inline: Option<String>,
    /// Each listener's counts (one per reading thread).
    parts: Arc<Mutex<Vec<BalanceReport>>>,
    published: Published,
    /// The XDP fast path, when asked for.
    xdp: Option<Arc<FastPath>>,
}

/// The XDP program attached for the run (detached when dropped), or why it
/// could not be.
struct FastPath {
    attached: Option<(Mutex<XdpBalancer>, XdpMode)>,
    /// What the summary says when nothing could be read.
    empty: XdpReport,
    cells: Vec<String>,
}

impl FastPath {
    fn attach(config: &BalanceConfig, table: &CellTable, mode: HashMode, input: &str, modes: &[XdpMode]) -> FastPath {
        // Inline, the program sends each frame it takes to its cell and the
        // inline link both; what it passes, this listener forwards to both
        // as it does without XDP.
        let attached = match &config.inline {
            None => XdpBalancer::load(table, mode).and_then(|mut xdp| {
                let how = xdp.attach_in(input, &config.cells, modes)?;
                Ok((xdp, how))
            }),
            Some(out) => XdpBalancer::load_inline(table, mode).and_then(|mut xdp| {
                let how = xdp.attach_inline(input, &config.cells, out, modes)?;
                Ok((xdp, how))
            }),
        };
        let mut empty = XdpReport {
            interface: input.to_string(),
            ..XdpReport::default()
        };
        match attached {
            Ok((xdp, how)) => {
                empty.mode = sluice_balance::xdp::mode_name(how).to_string();
                FastPath {
                    attached: Some((Mutex::new(xdp), how)),
                    empty,
                    cells: config.cells.clone(),
                }
            }
            Err(e) => {
                // The run goes on without it: the user-space path takes
                // every frame, and the summary says why.
                eprintln!("XDP fast path not attached: {e}; the user-space path takes every frame");
                empty.mode = "none".into();
                empty.error = Some(e.to_string());
                FastPath {
                    attached: None,
                    empty,
                    cells: config.cells.clone(),
                }
            }
        }
    }

    /// The program's counts now.
    fn report(&self) -> XdpReport {
        let Some((xdp, how)) = &self.attached else {
            return self.empty.clone();
        };
        let xdp = xdp.lock().unwrap_or_else(|p| p.into_inner());
        match xdp.counts() {
            Ok(counts) => counts.report(&self.empty.interface, *how, &self.cells),
            Err(e) => XdpReport {
                error: Some(format!("reading the XDP program's counters: {e}")),
                ..self.empty.clone()
            },
        }
    }
}

impl Balancing {
    pub(crate) fn new(
        config: &BalanceConfig,
        interfaces: &[String],
        live: bool,
        published: Published,
    ) -> Result<Balancing, String> {
        let mode = config
            .hash
            .parse::<HashMode>()
            .map_err(|e| format!("balance.hash: {e}"))?;
        let present: Vec<bool> = config.cells.iter().map(|c| c != "-").collect();
        let table = CellTable::with_present(&present).map_err(|e| format!("balance.cells: {e}"))?;
        let xdp = if config.xdp || config.xdp_mode.is_some() {
            let input = match interfaces {
                [input] if live => input,
                _ => {
                    return Err(
                        "balance.xdp needs one input interface (-i IFACE): the XDP program is attached to it".into(),
                    );
                }
            };
            let modes: &[XdpMode] = match config.xdp_mode.as_deref() {
                None => &[XdpMode::Driver, XdpMode::Skb],
                Some("driver") => &[XdpMode::Driver],
                Some("generic") => &[XdpMode::Skb],
                Some(other) => {
                    return Err(format!("balance.xdp_mode {other:?}: one of driver, generic"));
                }
            };
            Some(Arc::new(FastPath::attach(config, &table, mode, input, modes)))
        } else {
            None
        };
        Ok(Balancing {
            table,
            mode,
            cells: config.cells.clone(),
            inline: config.inline.clone(),
            parts: Arc::default(),
            published,
            xdp,
        })
    }

    /// The listener for a source that reads files: one capture file per
    /// cell, of the input's link type, created at the first frame.
    pub(crate) fn to_files(&self, snaplen: u32) -> Result<BalanceListener, ListenerFailed> {
        if self.inline.is_some() {
            return Err(failed(
                "inline forwarding needs interfaces: read with -i, not -r".into(),
            ));
        }
        let paths = self
            .cells
            .iter()
            .map(|c| (c != "-").then(|| PathBuf::from(c)))
            .collect();
        Ok(self.listener(Outputs::Files {
            paths,
            writers: Vec::new(),
            link: None,
            snaplen,
        }))
    }

    /// The listener for a source that reads interfaces: one raw socket per
    /// cell's interface, and one for the inline link.
    pub(crate) fn to_links(&self) -> Result<BalanceListener, ListenerFailed> {
        let open = |name: &str| Injector::open(name).map_err(|e| failed(format!("cell {name}: {e}")));
        let mut cells = Vec::with_capacity(self.cells.len());
        for cell in &self.cells {
            cells.push(if cell == "-" {
                None
            } else {
                Some(Link::new(open(cell)?))
            });
        }
        let inline = self.inline.as_deref().map(open).transpose()?.map(Link::new);
        Ok(self.listener(Outputs::Links { cells, inline }))
    }

    fn listener(&self, outputs: Outputs) -> BalanceListener {
        let balancer = Balancer::new(self.table.clone(), self.mode, &self.cells);
        let part = {
            let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
            parts.push(balancer.report());
            parts.len() - 1
        };
        BalanceListener {
            balancer,
            outputs,
            inline_name: self.inline.clone(),
            parts: Arc::clone(&self.parts),
            part,
            published: self.published.clone(),
            since_publish: 0,
            failure: None,
            xdp: self.xdp.clone(),
        }
    }

    /// What the listeners did, with the fast path's final counts.
    pub(crate) fn report(&self) -> Option<BalanceReport> {
        let mut report = total(&self.parts.lock().unwrap_or_else(|p| p.into_inner()))?;
        report.xdp = self.xdp.as_ref().map(|x| x.report());
        Some(report)
    }
}

fn total(parts: &[BalanceReport]) -> Option<BalanceReport> {
    let (first, rest) = parts.split_first()?;
    let mut total = first.clone();
    for part in rest {
        total.add(part);
    }
    Some(total)
}

fn create_files(
    paths: &[Option<PathBuf>],
    link: LinkType,
    snaplen: u32,
) -> Result<Vec<Option<PcapWriter<BufWriter<File>>>>, ListenerFailed> {
    paths
        .iter()
        .map(|path| {
            path.as_ref()
                .map(|path| {
                    PcapWriter::create(path, link.to_linktype(), snaplen)
                        .map_err(|e| failed(format!("cannot create the cell's capture file: {e}")))
                })
                .transpose()
        })
        .collect()
}

fn failed(error: String) -> ListenerFailed {
    ListenerFailed {
        listener: "balance".into(),
        error,
    }
}

enum Outputs {
    Files {
        paths: Vec<Option<PathBuf>>,
        writers: Vec<Option<PcapWriter<BufWriter<File>>>>,
        link: Option<LinkType>,
        snaplen: u32,
    },
    Links {
        cells: Vec<Option<Link>>,
        inline: Option<Link>,
    },
}

/// An interface's socket and the frames waiting for it, copied into one
/// buffer that keeps its capacity.
struct Link {
    injector: Injector,
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Frames refused so far, as counted when last sent.
    refused: u64,
}

impl Link {
    fn new(injector: Injector) -> Link {
        Link {
            injector,
            bytes: Vec::with_capacity(BATCH * 1514),
            ends: Vec::with_capacity(BATCH),
            refused: 0,
        }
    }

    /// Holds a frame; sends the batch once full. Returns the frames the
    /// interface refused in this call.
    fn push(&mut self, frame: &[u8]) -> Result<u64, String> {
        self.bytes.extend_from_slice(frame);
        self.ends.push(self.bytes.len());
        if self.ends.len() == BATCH {
            return self.flush();
        }
        Ok(0)
    }

    fn flush(&mut self) -> Result<u64, String> {
        if self.ends.is_empty() {
            return Ok(0);
        }
        let mut frames = [&[][..]; BATCH];
        let mut start = 0;
        for (frame, &end) in frames.iter_mut().zip(&self.ends) {
            *frame = &self.bytes[start..end];
            start = end;
        }
        let result = self.injector.send_batch(&frames[..self.ends.len()]);
        self.bytes.clear();
        self.ends.clear();
        result.map_err(|e| e.to_string())?;
        let errors = self.injector.stats().errors;
        let new = errors - self.refused;
        self.refused = errors;
        Ok(new)
    }

    fn stats(&self) -> SendStats {
        self.injector.stats()
    }
}

pub(crate) struct BalanceListener {
    balancer: Balancer,
    outputs: Outputs,
    inline_name: Option<String>,
    parts: Arc<Mutex<Vec<BalanceReport>>>,
    part: usize,
    published: Published,
    since_publish: u64,
    /// An output failed while the link was quiet: the next frame, or the
    /// end, reports it.
    failure: Option<ListenerFailed>,
    xdp: Option<Arc<FastPath>>,
}

impl BalanceListener {
    fn flush_links(&mut self) -> Result<(), ListenerFailed> {
        if let Outputs::Links { cells, inline } = &mut self.outputs {
            for (c, link) in cells.iter_mut().enumerate() {
                if let Some(link) = link {
                    for _ in 0..link.flush().map_err(failed)? {
                        self.balancer.failed(c);
                    }
                }
            }
            if let Some(link) = inline {
                link.flush().map_err(failed)?;
            }
        }
        Ok(())
    }

    /// The counts so far, with what the interfaces say.
    fn current(&self) -> BalanceReport {
        let mut report = self.balancer.report();
        if let Outputs::Links { cells, inline } = &self.outputs {
            for (counts, link) in report.cells.iter_mut().zip(cells) {
                if let Some(link) = link {
                    counts.drops = link.stats().interface_tx_dropped.unwrap_or(0);
                }
            }
            report.inline = inline.as_ref().map(|link| {
                let s = link.stats();
                CellCounts {
                    cell: self.inline_name.clone().unwrap_or_default(),
                    packets: s.frames,
                    bytes: s.bytes,
                    flows: 0,
                    drops: s.interface_tx_dropped.unwrap_or(0),
                    redirect_failures: s.errors,
                }
            });
        }
        report
    }

    fn publish(&mut self) {
        self.since_publish = 0;
        let report = self.current();
        let total = {
            let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
            parts[self.part] = report;
            total(&parts)
        };
        self.published.lock().balance = self.with_xdp(total);
    }

    /// The total with the fast path's counts as they are now.
    fn with_xdp(&self, total: Option<BalanceReport>) -> Option<BalanceReport> {
        total.map(|mut t| {
            t.xdp = self.xdp.as_ref().map(|x| x.report());
            t
        })
    }
}

impl PacketListener for BalanceListener {
    fn packet(&mut self, packet: &SourcePacket<'_>) -> Result<(), ListenerFailed> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        let cell = self
            .balancer
            .choose(packet.decoded.map(|(decoded, _)| decoded), packet.wire_len);
        match &mut self.outputs {
            Outputs::Files {
                paths,
                writers,
                link,
                snaplen,
            } => {
                match *link {
                    None => {
                        *link = Some(packet.link);
                        *writers = create_files(paths, packet.link, *snaplen)?;
                    }
                    Some(l) if l != packet.link => {
                        return Err(failed(format!(
                            "the input changes link type ({l:?} to {:?}) and each cell's capture file holds one: balance such inputs one at a time",
                            packet.link
                        )));
                    }
                    Some(_) => {}
                }
                let file = writers[cell].as_mut().expect("a present cell");
                if let Err(e) = file.write(packet.ts_ns, packet.wire_len, packet.frame) {
                    self.balancer.failed(cell);
                    let path = paths[cell].as_ref().expect("a present cell");
                    return Err(failed(format!("writing {}: {e}", path.display())));
                }
            }
            Outputs::Links { cells, inline } => {
                if let Some(inline) = inline {
                    inline.push(packet.frame).map_err(failed)?;
                }
                let link = cells[cell].as_mut().expect("a present cell");
                for _ in 0..link.push(packet.frame).map_err(failed)? {
                    self.balancer.failed(cell);
                }
            }
        }
        self.since_publish += 1;
        if self.since_publish == PUBLISH_EVERY {
            self.publish();
        }
        Ok(())
    }

    fn idle(&mut self) {
        if let Err(e) = self.flush_links() {
            self.failure.get_or_insert(e);
        }
        self.publish();
    }

    fn lost(&self, into: &mut std::collections::BTreeMap<(String, String), u64>) {
        let report = self.balancer.report();
        let failures: u64 = report.cells.iter().map(|c| c.redirect_failures).sum();
        *into.entry(("balance".into(), "redirect_failures".into())).or_default() += failures;
    }

    fn finish(mut self: Box<Self>) -> Result<(), ListenerFailed> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        self.flush_links()?;
        let report = self.current();
        if let Outputs::Files {
            paths,
            mut writers,
            link,
            snaplen,
        } = std::mem::replace(
            &mut self.outputs,
            Outputs::Links {
                cells: Vec::new(),
                inline: None,
            },
        ) {
            if link.is_none() {
                // Nothing was read: each cell still gets its (empty) file.
                writers = create_files(&paths, LinkType::Ethernet, snaplen)?;
            }
            for (file, path) in writers.into_iter().zip(&paths) {
                if let (Some(file), Some(path)) = (file, path) {
                    file.finish()
                        .map_err(|e| failed(format!("writing {}: {e}", path.display())))?;
                }
            }
        }
        self.since_publish = 0;
        let total = {
            let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
            parts[self.part] = report;
            total(&parts)
        };
        self.published.lock().balance = self.with_xdp(total);
        Ok(())
    }
}
