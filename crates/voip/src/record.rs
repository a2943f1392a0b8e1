//! Call recording (`voip: {record_media: ...}`): which calls' RTP payloads
//! are written, the writer each worker's tracker hands them to, and the
//! reader `sluice calls --wav` decodes them with.
//!
//! Whether a call is recorded is a function of its Call-ID, From and To
//! (all calls, a share of them chosen by a hash of the Call-ID, or those
//! from or to given URIs), which every SIP message carries. The worker
//! that reads a session description of a recorded call publishes the media
//! endpoints it names in a [`Selected`] set at once ([`PublishingSink`]);
//! the call table does too, and takes them out when the call leaves it. A
//! worker's tracker asks the set when a media flow starts, and again
//! whenever the set has changed since it last asked (a generation counter,
//! one atomic load per packet of a flow not recorded), so that a flow that
//! starts before another worker has read the description naming it is
//! recorded from the packet after.
//!
//! Each worker writes the payloads of its recorded flows into one file,
//! `media/worker-N.rtp` under the output directory, opened at the first
//! recorded payload: an 8-byte magic `SLRTP\0\0\x01`, then per RTP packet
//! a 30-byte little-endian header (record id u64, capture time ns u64, RTP
//! timestamp u32, SSRC u32, sequence number u16, payload type u8,
//! direction u8 (0 from the flow's first sender), payload length u16) and
//! the payload. The record id is the media flow's; call records name the
//! file and id of each of their flows (`media`).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

use crate::media::MediaTap;
use crate::stream::RtpPacket;
use crate::tracker::{Event, EventSink};

/// The file's first bytes.
pub const MAGIC: [u8; 8] = *b"SLRTP\0\0\x01";
/// A packet's header in the file.
pub const HEADER_LEN: usize = 30;
/// The writer's buffer: payloads go out in large writes.
const WRITE_BUFFER: usize = 1 << 20;

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
/// writes them) and the workers' writers (which read them).
#[derive(Default)]
pub struct Selected {
    generation: AtomicU64,
    endpoints: RwLock<FxHashSet<SocketAddr>>,
}

impl Selected {
    pub fn add(&self, addr: SocketAddr) {
        if self.endpoints.write().expect("no holder panicked").insert(addr) {
            self.generation.fetch_add(1, Ordering::Release);
        }
    }

    pub fn remove(&self, addr: &SocketAddr) {
        self.endpoints.write().expect("no holder panicked").remove(addr);
    }

    fn contains(&self, a: &SocketAddr, b: &SocketAddr) -> bool {
        let set = self.endpoints.read().expect("no holder panicked");
        set.contains(a) || set.contains(b)
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
                    selected.add(SocketAddr::new(addr, m.port));
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
    pub record_error: Option<String>,
}

/// One worker's writer.
pub struct MediaWriter {
    selected: Arc<Selected>,
    out_dir: PathBuf,
    name: String,
    out: Option<BufWriter<File>>,
    failed: bool,
    counters: RecordCounters,
    total: Arc<Mutex<RecordCounters>>,
}

impl MediaWriter {
    /// `total` receives the writer's counters when it finishes.
    pub fn new(
        out_dir: &Path,
        worker: usize,
        selected: Arc<Selected>,
        total: Arc<Mutex<RecordCounters>>,
    ) -> MediaWriter {
        MediaWriter {
            selected,
            out_dir: out_dir.to_path_buf(),
            name: format!("media/worker-{worker}.rtp"),
            out: None,
            failed: false,
            counters: RecordCounters::default(),
            total,
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
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, File::create(&path)?);
        out.write_all(&MAGIC)?;
        self.out = Some(out);
        Ok(())
    }
}

impl MediaTap for MediaWriter {
    fn start(&mut self, flow: u64, src: SocketAddr, dst: SocketAddr) -> Option<u64> {
        let recorded = self.selected.contains(&src, &dst);
        if recorded {
            self.counters.recorded_flows += 1;
        }
        recorded.then_some(flow)
    }

    fn changed(&self, seen: &mut u64) -> bool {
        let now = self.selected.generation.load(Ordering::Acquire);
        let changed = now != *seen;
        *seen = now;
        changed
    }

    fn payload(&mut self, record: u64, dir: u8, ssrc: u32, packet: &RtpPacket, body: &[u8]) {
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

    fn file_name(&self) -> String {
        self.name.clone()
    }

    fn finish(&mut self) {
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

    #[test]
    fn what_is_written_reads_back_and_a_cut_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let selected = Arc::new(Selected::default());
        let total = Arc::new(Mutex::new(RecordCounters::default()));
        let mut w = MediaWriter::new(tmp.path(), 3, selected.clone(), total.clone());
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let mut seen = 0;
        assert!(!w.changed(&mut seen));
        assert_eq!(w.start(7, a, b), None);
        selected.add(b);
        assert!(w.changed(&mut seen));
        assert!(!w.changed(&mut seen));
        assert_eq!(w.start(7, a, b), Some(7));
        let packet = |seq: u16| RtpPacket {
            ts_ns: 1_000 + u64::from(seq),
            seq,
            timestamp: 160 * u32::from(seq),
            extended_timestamp: 0,
            payload_type: 8,
            marker: false,
            ip_len: 0,
            payload_len: 3,
        };
        w.payload(7, 1, 99, &packet(1), &[1, 2, 3]);
        w.payload(8, 0, 98, &packet(2), &[4]);
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
