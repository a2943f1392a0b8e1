//! Call recording (`voip: {record_media: ...}`): which calls' RTP payloads
//! are written, the writer each worker's tracker hands them to, and the
//! reader `sluice calls --wav` decodes them with.
//!
//! Whether a call is recorded is a function of its Call-ID, From and To
//! (all calls, a share of them chosen by a hash of the Call-ID, or those
//! from or to given URIs), which every SIP message carries. The worker
//! that reads a session description of a recorded call publishes the media
//! endpoints it names, with the description's input position, in a
//! [`Selected`] set at once ([`PublishingSink`]); the call table does too,
//! and takes them out when the call leaves it. A worker's tracker asks the
//! set when a media flow starts, whenever the set has changed since it last
//! asked (a generation counter, one atomic load per packet of a flow not
//! recorded), and when the flow ends. Payloads of a flow not recorded are
//! held until every worker has read past them (`crate::media`), so that a
//! flow whose description another worker reads late is recorded from its
//! first packet after that description.
//!
//! Each worker writes the payloads of its recorded flows into one file,
//! `media/worker-N.rtp` under the output directory, opened at the first
//! recorded payload and written as the packet recorder writes its files
//! (4 MiB aligned writes, `O_DIRECT` where the file system takes it; the
//! staged tail reaches the file when the run ends): an 8-byte magic `SLRTP\0\0\x01`, then per RTP packet
//! a 30-byte little-endian header (record id u64, capture time ns u64, RTP
//! timestamp u32, SSRC u32, sequence number u16, payload type u8,
//! direction u8 (0 from the flow's first sender), payload length u16) and
//! the payload. The record id is the media flow's; call records name the
//! file and id of each of their flows (`media`).

use std::collections::{BTreeSet, VecDeque};
use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use sluice_store::DirectWriter;

use crate::media::{Chosen, MediaTap, Payload};
use crate::stream::RtpPacket;
use crate::tracker::{Event, EventSink};

/// The file's first bytes.
pub const MAGIC: [u8; 8] = *b"SLRTP\0\0\x01";
/// A packet's header in the file.
pub const HEADER_LEN: usize = 30;
/// Payload bytes a worker holds for flows not (yet) recorded, at most:
/// beyond, the oldest are decided early.
const HOLD_BYTES: usize = 32 << 20;
/// On a live link, where no input order tells how far the other workers
/// have read, a payload is held this long (capture time).
const HOLD_LIVE_NS: u64 = 2_000_000_000;

/// `record_media` as written in `probe.yaml`: `none`, `all`, a share
/// (`1%`), a URI, or a list of URIs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordMedia {
    Which(String),
    Uris(Vec<String>),
}

impl Default for RecordMedia {
    fn default() -> Self {
        RecordMedia::Which("none".into())
    }
}

/// Which calls are recorded.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    None,
    All,
    /// Calls whose Call-ID hashes below this share of the hash space
    /// (parts per million).
    Share(u32),
    /// Calls whose `from` or `to` URI is one of these.
    Uris(Vec<String>),
}

impl RecordMedia {
    /// Reads the setting; the error says what is accepted.
    pub fn selection(&self) -> Result<Selection, String> {
        let list = |uris: Vec<String>| {
            if uris.is_empty() || uris.iter().any(|u| u.is_empty()) {
                Err("an empty URI; give none, all, a share such as 1%, or a list of URIs".to_string())
            } else {
                Ok(Selection::Uris(uris))
            }
        };
        match self {
            RecordMedia::Uris(uris) => list(uris.clone()),
            RecordMedia::Which(w) => {
                let w = w.trim();
                match w {
                    "none" => Ok(Selection::None),
                    "all" => Ok(Selection::All),
                    _ if w.ends_with('%') => {
                        let share: f64 = w[..w.len() - 1]
                            .trim()
                            .parse()
                            .map_err(|_| format!("{w:?}: not a share; give a percentage such as 1% or 0.5%"))?;
                        if !(share > 0.0 && share <= 100.0) {
                            return Err(format!("{w:?}: a share is more than 0% and at most 100%"));
                        }
                        Ok(Selection::Share((share * 10_000.0).round() as u32))
                    }
                    _ if w.contains(':') => list(w.split(',').map(|u| u.trim().to_string()).collect()),
                    _ => Err(format!(
                        "{w:?}: give none, all, a share such as 1%, or URIs (sip:alice@example.com, comma-separated or a YAML list)"
                    )),
                }
            }
        }
    }
}

impl Selection {
    /// Whether the call of this Call-ID, From and To is recorded.
    pub fn records(&self, call_id: &str, from: &str, to: &str) -> bool {
        match self {
            Selection::None => false,
            Selection::All => true,
            Selection::Share(ppm) => fnv1a(call_id.as_bytes()) % 1_000_000 < u64::from(*ppm),
            Selection::Uris(uris) => uris.iter().any(|u| u == from || u == to),
        }
    }
}

/// FNV-1a, 64 bits: a hash that stays the same from run to run and build
/// to build, so that the same calls are chosen.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The media endpoints of recorded calls, shared by the call table (which
/// writes them) and the workers' writers (which read them), each with the
/// input position of the first description that named it.
#[derive(Default)]
pub struct Selected {
    generation: AtomicU64,
    endpoints: RwLock<FxHashMap<SocketAddr, u64>>,
}

impl Selected {
    /// A description read at input position `order` named `addr`.
    pub fn add(&self, addr: SocketAddr, order: u64) {
        let mut set = self.endpoints.write().expect("no holder panicked");
        match set.entry(addr) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if order < *o.get() {
                    *o.get_mut() = order;
                }
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(order);
                self.generation.fetch_add(1, Ordering::Release);
            }
        }
    }

    pub fn remove(&self, addr: &SocketAddr) {
        self.endpoints.write().expect("no holder panicked").remove(addr);
    }

    /// Since when a flow between `a` and `b` is recorded, if it is.
    fn since(&self, a: &SocketAddr, b: &SocketAddr) -> Option<u64> {
        let set = self.endpoints.read().expect("no holder panicked");
        match (set.get(a), set.get(b)) {
            (Some(&x), Some(&y)) => Some(x.min(y)),
            (x, y) => x.or(y).copied(),
        }
    }
}

/// A worker's event sink that, before passing a SIP message with a
/// session description on, publishes the media endpoints it names when its
/// call is recorded: the workers' recorders learn them in packet order on
/// this worker, without waiting for the call table's thread.
pub struct PublishingSink<S: EventSink> {
    pub inner: S,
    selection: Selection,
    selected: Option<Arc<Selected>>,
}

impl<S: EventSink> PublishingSink<S> {
    pub fn new(inner: S, selection: Selection, selected: Option<Arc<Selected>>) -> PublishingSink<S> {
        PublishingSink {
            inner,
            selection,
            selected,
        }
    }
}

impl<S: EventSink> EventSink for PublishingSink<S> {
    fn send(&mut self, event: Event) {
        if let (Event::Sip(e), Some(selected)) = (&event, &self.selected)
            && let Some(sdp) = &e.sdp
            && self.selection.records(&e.call_id, &e.from.uri, &e.to.uri)
        {
            for m in sdp.media.iter().filter(|m| m.is_rtp() && m.port != 0) {
                if let Some(addr) = m.addr {
                    selected.add(SocketAddr::new(addr, m.port), e.order);
                }
            }
        }
        self.inner.send(event);
    }
}

/// What the writers counted, summed over the workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordCounters {
    /// Media flows recorded.
    pub recorded_flows: u64,
    /// RTP payloads written, and their bytes (headers excluded).
    pub recorded_payloads: u64,
    pub recorded_bytes: u64,
    /// Payloads lost to a write error (the first error stops the worker's
    /// recording; its message is in `record_error`).
    pub record_lost_payloads: u64,
    /// RTP packets of recorded flows not written: they went by before the
    /// description that chose their call (in input order), or, on a live
    /// link, more than 2 s before it was read, or beyond the hold's 32 MiB.
    pub record_missed_payloads: u64,
    pub record_error: Option<String>,
}

/// A payload held for a flow not (yet) recorded; its body is the next
/// `len` bytes of the hold's bytes.
#[derive(Clone, Copy)]
struct Held {
    flow: u64,
    order: u64,
    dir: u8,
    ssrc: u32,
    packet: RtpPacket,
    len: u32,
    /// Written already, when its flow was chosen.
    gone: bool,
}

/// A media flow the writer was told of: its endpoints, and the payloads
/// written from the hold.
struct Known {
    src: SocketAddr,
    dst: SocketAddr,
    flushed: u64,
}

/// One worker's writer.
pub struct MediaWriter {
    selected: Arc<Selected>,
    out_dir: PathBuf,
    name: String,
    out: Option<DirectWriter>,
    failed: bool,
    counters: RecordCounters,
    total: Arc<Mutex<RecordCounters>>,
    /// Payloads of flows not recorded, oldest first, and their bodies.
    held: VecDeque<Held>,
    held_bytes: VecDeque<u8>,
    flows: FxHashMap<u64, Known>,
    /// Reading files: held payloads wait for [`MediaTap::reached`];
    /// live, they are held `HOLD_LIVE_NS`.
    ordered: bool,
    scratch: Vec<u8>,
}

impl MediaWriter {
    /// `total` receives the writer's counters when it finishes; `ordered`
    /// when reading files, where [`MediaTap::reached`] tells how far every
    /// worker has read.
    pub fn new(
        out_dir: &Path,
        worker: usize,
        selected: Arc<Selected>,
        total: Arc<Mutex<RecordCounters>>,
        ordered: bool,
    ) -> MediaWriter {
        MediaWriter {
            selected,
            out_dir: out_dir.to_path_buf(),
            name: format!("media/worker-{worker}.rtp"),
            out: None,
            failed: false,
            counters: RecordCounters::default(),
            total,
            held: VecDeque::new(),
            held_bytes: VecDeque::new(),
            flows: FxHashMap::default(),
            ordered,
            scratch: Vec::new(),
        }
    }

    fn fail(&mut self, e: std::io::Error) {
        self.failed = true;
        self.out = None;
        self.counters.record_lost_payloads += 1;
        self.counters.record_error = Some(format!("{}: {e}", self.out_dir.join(&self.name).display()));
    }

    fn open(&mut self) -> std::io::Result<()> {
        let path = self.out_dir.join(&self.name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // The recorder's writer: large aligned writes around the page
        // cache (O_DIRECT where the file system takes it), so that a busy
        // link's payloads do not fill the cache with pages never read again.
        let mut out = DirectWriter::create(&path)?;
        out.write_all(&MAGIC)?;
        self.out = Some(out);
        Ok(())
    }

    fn write(&mut self, record: u64, dir: u8, ssrc: u32, packet: &RtpPacket, body: &[u8]) {
        if self.failed {
            self.counters.record_lost_payloads += 1;
            return;
        }
        if self.out.is_none()
            && let Err(e) = self.open()
        {
            return self.fail(e);
        }
        let body = &body[..body.len().min(usize::from(u16::MAX))];
        let mut header = [0u8; HEADER_LEN];
        header[0..8].copy_from_slice(&record.to_le_bytes());
        header[8..16].copy_from_slice(&packet.ts_ns.to_le_bytes());
        header[16..20].copy_from_slice(&packet.timestamp.to_le_bytes());
        header[20..24].copy_from_slice(&ssrc.to_le_bytes());
        header[24..26].copy_from_slice(&packet.seq.to_le_bytes());
        header[26] = packet.payload_type;
        header[27] = dir;
        header[28..30].copy_from_slice(&(body.len() as u16).to_le_bytes());
        let out = self.out.as_mut().expect("opened");
        if let Err(e) = out.write_all(&header).and_then(|()| out.write_all(body)) {
            return self.fail(e);
        }
        self.counters.recorded_payloads += 1;
        self.counters.recorded_bytes += body.len() as u64;
    }

    /// Writes a held payload (its body at `at` in the hold's bytes).
    fn write_held(&mut self, h: &Held, at: usize) {
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        body.extend(self.held_bytes.range(at..at + h.len as usize));
        self.write(h.flow, h.dir, h.ssrc, &h.packet, &body);
        self.scratch = body;
        if let Some(known) = self.flows.get_mut(&h.flow) {
            known.flushed += 1;
        }
    }

    /// Decides the oldest held payload: written when a description read
    /// before it chose its flow, let go otherwise.
    fn release_one(&mut self) {
        let Some(h) = self.held.pop_front() else {
            return;
        };
        if !h.gone
            && let Some(known) = self.flows.get(&h.flow)
            && self
                .selected
                .since(&known.src, &known.dst)
                .is_some_and(|since| since < h.order)
        {
            self.write_held(&h, 0);
        }
        self.held_bytes.drain(..h.len as usize);
    }
}

impl MediaTap for MediaWriter {
    fn start(&mut self, flow: u64, src: SocketAddr, dst: SocketAddr) -> Option<Chosen> {
        self.flows.entry(flow).or_insert(Known { src, dst, flushed: 0 });
        let since = self.selected.since(&src, &dst)?;
        self.counters.recorded_flows += 1;
        // What was held for the flow since the description goes out now.
        let mut at = 0;
        for i in 0..self.held.len() {
            let h = self.held[i];
            if h.flow == flow && !h.gone && h.order > since {
                self.write_held(&h, at);
                self.held[i].gone = true;
            }
            at += h.len as usize;
        }
        Some(Chosen { record: flow, since })
    }

    fn changed(&self, seen: &mut u64) -> bool {
        let now = self.selected.generation.load(Ordering::Acquire);
        let changed = now != *seen;
        *seen = now;
        changed
    }

    fn payload(&mut self, record: u64, p: &Payload<'_>) {
        self.write(record, p.dir, p.ssrc, p.packet, p.body);
    }

    fn hold(&mut self, flow: u64, p: &Payload<'_>) {
        let len = p.body.len().min(usize::from(u16::MAX));
        if !self.ordered {
            let horizon = p.packet.ts_ns.saturating_sub(HOLD_LIVE_NS);
            while self.held.front().is_some_and(|h| h.packet.ts_ns < horizon) {
                self.release_one();
            }
        }
        while !self.held.is_empty() && self.held_bytes.len() + len > HOLD_BYTES {
            self.release_one();
        }
        self.held.push_back(Held {
            flow,
            order: p.order,
            dir: p.dir,
            ssrc: p.ssrc,
            packet: *p.packet,
            len: len as u32,
            gone: false,
        });
        self.held_bytes.extend(&p.body[..len]);
    }

    fn ordered(&self) -> bool {
        self.ordered
    }

    fn reached(&mut self, order: u64) {
        while self.held.front().is_some_and(|h| h.order < order) {
            self.release_one();
        }
    }

    fn flushed(&mut self, flow: u64) -> u64 {
        self.flows.remove(&flow).map_or(0, |k| k.flushed)
    }

    fn missed(&mut self, packets: u64) {
        self.counters.record_missed_payloads += packets;
    }

    fn file_name(&self) -> String {
        self.name.clone()
    }

    fn finish(&mut self) {
        while !self.held.is_empty() {
            self.release_one();
        }
        if let Some(mut out) = self.out.take()
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
        let mut total = self.total.lock().expect("no worker panicked");
        total.recorded_flows += self.counters.recorded_flows;
        total.recorded_payloads += self.counters.recorded_payloads;
        total.recorded_bytes += self.counters.recorded_bytes;
        total.record_lost_payloads += self.counters.record_lost_payloads;
        total.record_missed_payloads += self.counters.record_missed_payloads;
        if total.record_error.is_none() {
            total.record_error.clone_from(&self.counters.record_error);
        }
    }
}

/// One recorded RTP packet, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub record: u64,
    pub ts_ns: u64,
    pub timestamp: u32,
    pub ssrc: u32,
    pub seq: u16,
    pub payload_type: u8,
    pub dir: u8,
    pub payload: Vec<u8>,
}

/// Reads the packets of `records` from a recording file.
pub fn read_recording(path: &Path, records: &BTreeSet<u64>) -> Result<Vec<Recorded>, String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.get(..8) != Some(&MAGIC[..]) {
        return Err(format!(
            "{}: offset 0: not a sluice media recording (no SLRTP magic)",
            path.display()
        ));
    }
    let mut at = MAGIC.len();
    let mut out = Vec::new();
    while at < bytes.len() {
        let Some(h) = bytes.get(at..at + HEADER_LEN) else {
            return Err(format!(
                "{}: offset {at}: a packet header cut short ({} of {HEADER_LEN} bytes); the recording was cut",
                path.display(),
                bytes.len() - at
            ));
        };
        let le64 = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let le32 = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let len = usize::from(u16::from_le_bytes([h[28], h[29]]));
        let body = at + HEADER_LEN;
        let Some(payload) = bytes.get(body..body + len) else {
            return Err(format!(
                "{}: offset {at}: a payload of {len} bytes cut short; the recording was cut",
                path.display()
            ));
        };
        let record = le64(0);
        if records.contains(&record) {
            out.push(Recorded {
                record,
                ts_ns: le64(8),
                timestamp: le32(16),
                ssrc: le32(20),
                seq: u16::from_le_bytes([h[24], h[25]]),
                payload_type: h[26],
                dir: h[27],
                payload: payload.to_vec(),
            });
        }
        at = body + len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_media_reads_every_form_and_refuses_the_rest() {
        let which = |s: &str| RecordMedia::Which(s.into()).selection();
        assert_eq!(which("none"), Ok(Selection::None));
        assert_eq!(which("all"), Ok(Selection::All));
        assert_eq!(which("1%"), Ok(Selection::Share(10_000)));
        assert_eq!(which("0.5%"), Ok(Selection::Share(5_000)));
        assert_eq!(
            which("sip:a@x, sip:b@y"),
            Ok(Selection::Uris(vec!["sip:a@x".into(), "sip:b@y".into()]))
        );
        assert_eq!(
            RecordMedia::Uris(vec!["sip:a@x".into()]).selection(),
            Ok(Selection::Uris(vec!["sip:a@x".into()]))
        );
        for bad in ["some", "0%", "101%", "x%", ""] {
            assert!(which(bad).is_err(), "{bad}");
        }
        assert!(RecordMedia::Uris(vec![]).selection().is_err());
    }

    #[test]
    fn a_share_records_about_that_share_of_calls() {
        let s = Selection::Share(100_000);
        let n = (0..20_000).filter(|i| s.records(&format!("{i}@host"), "", "")).count();
        assert!((1_700..2_300).contains(&n), "{n} of 20000 at 10 %");
        assert!(Selection::Uris(vec!["sip:b@y".into()]).records("x", "sip:a@x", "sip:b@y"));
        assert!(!Selection::Uris(vec!["sip:c@y".into()]).records("x", "sip:a@x", "sip:b@y"));
    }

    fn packet(seq: u16) -> RtpPacket {
        RtpPacket {
            ts_ns: 1_000 + u64::from(seq),
            seq,
            timestamp: 160 * u32::from(seq),
            extended_timestamp: 0,
            payload_type: 8,
            marker: false,
            ip_len: 0,
            payload_len: 3,
        }
    }

    fn payload<'a>(order: u64, packet: &'a RtpPacket, body: &'a [u8]) -> Payload<'a> {
        Payload {
            order,
            dir: 1,
            ssrc: 99,
            packet,
            body,
        }
    }

    #[test]
    fn held_payloads_are_written_from_the_description_that_chose_their_flow() {
        let tmp = tempfile::tempdir().unwrap();
        let selected = Arc::new(Selected::default());
        let total = Arc::new(Mutex::new(RecordCounters::default()));
        let mut w = MediaWriter::new(tmp.path(), 0, selected.clone(), total.clone(), true);
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let c: SocketAddr = "10.0.0.3:6000".parse().unwrap();
        // Two flows not chosen yet: their payloads at positions 10..=14
        // are held.
        assert_eq!(w.start(1, a, b), None);
        assert_eq!(w.start(2, a, c), None);
        let packets: Vec<RtpPacket> = (0..5).map(packet).collect();
        for (i, p) in packets.iter().enumerate() {
            w.hold(1, &payload(10 + i as u64, p, &[i as u8]));
            w.hold(2, &payload(10 + i as u64, p, &[9]));
        }
        // Another worker reads a description at position 12 naming flow
        // 1's destination: its payloads after 12 go out when it is asked
        // again, and those after once every worker has read past them.
        selected.add(b, 12);
        assert_eq!(w.start(1, a, b), Some(Chosen { record: 1, since: 12 }));
        w.reached(u64::MAX);
        assert_eq!(w.flushed(1), 2);
        assert_eq!(w.flushed(2), 0);
        w.finish();
        let back = read_recording(&tmp.path().join(w.file_name()), &BTreeSet::from([1, 2])).unwrap();
        let seqs: Vec<(u64, u16, Vec<u8>)> = back.iter().map(|r| (r.record, r.seq, r.payload.clone())).collect();
        assert_eq!(seqs, vec![(1, 3, vec![3]), (1, 4, vec![4])]);
        // Flow 2, never chosen, was let go; one chosen after the fact is
        // written when every worker has read past its payloads.
        let mut w = MediaWriter::new(tmp.path(), 1, selected.clone(), total.clone(), true);
        assert_eq!(w.start(3, a, c), None);
        for (i, p) in packets.iter().enumerate() {
            w.hold(3, &payload(20 + i as u64, p, &[7]));
        }
        selected.add(c, 21);
        w.reached(23);
        w.reached(u64::MAX);
        assert_eq!(w.flushed(3), 3, "20 and 21 are not after the description");
        w.finish();
        assert_eq!(total.lock().unwrap().recorded_payloads, 2 + 1 + 2);
    }

    #[test]
    fn what_is_written_reads_back_and_a_cut_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let selected = Arc::new(Selected::default());
        let total = Arc::new(Mutex::new(RecordCounters::default()));
        let mut w = MediaWriter::new(tmp.path(), 3, selected.clone(), total.clone(), true);
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let mut seen = 0;
        assert!(!w.changed(&mut seen));
        assert_eq!(w.start(7, a, b), None);
        selected.add(b, 0);
        assert!(w.changed(&mut seen));
        assert!(!w.changed(&mut seen));
        assert_eq!(w.start(7, a, b), Some(Chosen { record: 7, since: 0 }));
        w.payload(7, &payload(1, &packet(1), &[1, 2, 3]));
        w.payload(
            8,
            &Payload {
                dir: 0,
                ssrc: 98,
                ..payload(2, &packet(2), &[4])
            },
        );
        w.finish();
        let path = tmp.path().join(w.file_name());
        assert_eq!(w.file_name(), "media/worker-3.rtp");
        let back = read_recording(&path, &BTreeSet::from([7])).unwrap();
        assert_eq!(
            back,
            vec![Recorded {
                record: 7,
                ts_ns: 1_001,
                timestamp: 160,
                ssrc: 99,
                seq: 1,
                payload_type: 8,
                dir: 1,
                payload: vec![1, 2, 3],
            }]
        );
        assert_eq!(total.lock().unwrap().recorded_payloads, 2);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let e = read_recording(&path, &BTreeSet::from([7])).unwrap_err();
        assert!(
            e.contains("worker-3.rtp") && e.contains(&format!("offset {}", 8 + HEADER_LEN + 3)),
            "{e}"
        );
    }
}
