//! The `record` listener: every packet, as the source read it, to indexed
//! capture files (`sluice-store`'s recorder: large aligned writes,
//! rotation, retention, a block index of times and flows). The source has
//! decoded the frame already; the index takes its flow hash from there.
//!
//! Reading files, one recorder writes into the record directory in input
//! order. Live, each worker's ring thread has a recorder of its own (its
//! packets are its ring's), in `DIR/w0`, `DIR/w1`, ..., which `sluice
//! extract` merges by time; with no flow listener (`sluice record -i`) the
//! one capture thread records into the directory itself.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_store::{CaptureFormat, Recorder, RecorderConfig, RecorderStats};
use sluice_wire::LinkType;

use crate::config::RecordConfig;
use crate::listen::{ListenerFailed, PacketListener, SourcePacket};
use crate::summary::{RecordingReport, WorkerRecording};

/// One record listener's settings and what its recorders did.
pub(crate) struct Recording {
    name: String,
    dir: PathBuf,
    template: RecorderConfig,
    /// Per recorder: its directory, its counts as of its last report, the
    /// files it left, and its error.
    parts: Arc<Mutex<Vec<Part>>>,
    /// Asked by the forensic module: record on disk up to this time.
    flush: Arc<AtomicU64>,
}

#[derive(Clone, Default)]
struct Part {
    dir: PathBuf,
    stats: RecorderStats,
    files_left: u64,
    error: Option<String>,
    /// Every packet this recorder had before this time is on disk.
    covered_ns: u64,
}

/// What the forensic module (the alarms) sees of a recording: where it is,
/// and how far back it can be read.
#[derive(Clone)]
pub(crate) struct RecordingHandle {
    pub dir: PathBuf,
    parts: Arc<Mutex<Vec<Part>>>,
    flush: Arc<AtomicU64>,
}

impl RecordingHandle {
    /// Asks every recorder to put what it holds from before `ts_ns` on
    /// disk: each closes its file at its first packet from `ts_ns` on (live,
    /// also when its link is quiet and the clock has passed `ts_ns`).
    pub(crate) fn ask(&self, ts_ns: u64) {
        self.flush.fetch_max(ts_ns, Ordering::Relaxed);
    }

    /// The time before which every recorder's packets are on disk.
    pub(crate) fn covered_ns(&self) -> u64 {
        let parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.iter().map(|p| p.covered_ns).min().unwrap_or(0)
    }
}

impl Recording {
    pub(crate) fn new(config: &RecordConfig, snaplen: u32) -> Result<Recording, String> {
        let mut template = RecorderConfig::new(&config.dir, LinkType::Ethernet, snaplen);
        template.format = match config.format.as_str() {
            "pcap" => CaptureFormat::Pcap,
            "pcapng" => CaptureFormat::PcapNg,
            other => return Err(format!("record.format: {other:?}: one of pcap, pcapng")),
        };
        template.lossless = match config.policy.as_str() {
            "lossless" => true,
            "drop" => false,
            other => return Err(format!("record.policy: {other:?}: one of lossless, drop")),
        };
        template.block_bytes = (config.block as usize).max(sluice_store::MIN_BLOCK_BYTES);
        template.queue_blocks = config.queue_blocks.max(1);
        template.rotate_bytes = config.rotate;
        template.rotate_ns = config.rotate_time.map(|d| d.as_nanos().min(u64::MAX as u128) as u64);
        template.keep_bytes = config.keep;
        template.direct = !config.buffered;
        // The source decodes every frame already and hands the recorder its
        // flow hash: no thread of the recorder's own reads the blocks again.
        template.index_thread = false;
        if let (Some(keep), Some(rotate)) = (config.keep, config.rotate)
            && keep < rotate
        {
            return Err(format!(
                "record.keep ({keep} bytes) must be at least the rotation size ({rotate} bytes), or every file would be deleted as it closes"
            ));
        }
        Ok(Recording {
            name: config.name.clone().unwrap_or_else(|| "record".into()),
            dir: config.dir.clone(),
            template,
            parts: Arc::default(),
            flush: Arc::default(),
        })
    }

    pub(crate) fn handle(&self) -> RecordingHandle {
        RecordingHandle {
            dir: self.dir.clone(),
            parts: Arc::clone(&self.parts),
            flush: Arc::clone(&self.flush),
        }
    }

    /// The recorder of source thread `index` of `threads`, for frames of
    /// `link`, in `DIR/wINDEX` with `subdirs`; `--keep` is shared out
    /// equally. A `live` source's recorder backs its blocks at start: a
    /// file's reader can wait for the kernel to back them as they are
    /// first used, and a small file then never pays for the whole pool.
    pub(crate) fn recorder(
        &self,
        index: usize,
        threads: usize,
        subdirs: bool,
        link: LinkType,
        live: bool,
    ) -> Result<RecordListener, ListenerFailed> {
        let mut config = self.template.clone();
        config.prefault = live;
        if subdirs || threads > 1 {
            config.dir = self.dir.join(format!("w{index}"));
            config.keep_bytes = config.keep_bytes.map(|k| k / threads as u64);
        }
        config.link = link;
        let dir = config.dir.clone();
        let recorder = Recorder::start(config).map_err(|e| ListenerFailed {
            listener: self.name.clone(),
            error: format!("recording to {}: {e}", dir.display()),
        })?;
        let slot = {
            let mut parts = self.parts.lock().expect("not poisoned");
            parts.push(Part { dir, ..Part::default() });
            parts.len() - 1
        };
        Ok(RecordListener {
            name: self.name.clone(),
            recorder: Some(recorder),
            parts: Arc::clone(&self.parts),
            slot,
            failed: None,
            flush: Arc::clone(&self.flush),
            honoured_ns: 0,
            writing: None,
        })
    }

    /// The counts so far of every recorder together.
    pub(crate) fn stats(&self) -> RecorderStats {
        let parts = self.parts.lock().expect("not poisoned");
        let mut total = RecorderStats::default();
        for p in parts.iter() {
            add(&mut total, &p.stats);
        }
        total
    }

    /// The account for the summary, once every recorder has finished.
    pub(crate) fn report(&self) -> RecordingReport {
        let parts = self.parts.lock().expect("not poisoned").clone();
        let mut total = RecorderStats::default();
        let mut files_left = 0;
        for p in &parts {
            add(&mut total, &p.stats);
            files_left += p.files_left;
        }
        RecordingReport {
            name: self.name.clone(),
            dir: self.dir.clone(),
            format: self.template.format.extension(),
            policy: if self.template.lossless { "lossless" } else { "drop" },
            packets: total.packets,
            bytes: total.bytes,
            wire_bytes: total.wire_bytes,
            written_bytes: total.written_bytes,
            writer_waits: total.writer_waits,
            writer_wait_ms: total.writer_wait_ns as f64 / 1e6,
            dropped: total.dropped,
            files_written: total.files_written,
            files_deleted: total.files_deleted,
            bytes_deleted: total.bytes_deleted,
            files_left,
            write_mode: total.write_mode().as_str(),
            direct_files: total.direct_files,
            buffered_files: total.buffered_files,
            workers: parts
                .into_iter()
                .map(|p| WorkerRecording {
                    dir: p.dir,
                    packets: p.stats.packets,
                    writer_waits: p.stats.writer_waits,
                    writer_wait_ms: p.stats.writer_wait_ns as f64 / 1e6,
                    files_written: p.stats.files_written,
                    files_deleted: p.stats.files_deleted,
                    error: p.error,
                })
                .collect(),
        }
    }
}

fn add(total: &mut RecorderStats, s: &RecorderStats) {
    total.packets += s.packets;
    total.bytes += s.bytes;
    total.wire_bytes += s.wire_bytes;
    total.written_bytes += s.written_bytes;
    total.writer_waits += s.writer_waits;
    total.writer_wait_ns += s.writer_wait_ns;
    total.dropped += s.dropped;
    total.files_written += s.files_written;
    total.files_deleted += s.files_deleted;
    total.bytes_deleted += s.bytes_deleted;
    total.direct_files += s.direct_files;
    total.buffered_files += s.buffered_files;
}

/// One source thread's recorder.
pub(crate) struct RecordListener {
    name: String,
    recorder: Option<Recorder>,
    parts: Arc<Mutex<Vec<Part>>>,
    slot: usize,
    /// The recorder's first failure: nothing is pushed after it.
    failed: Option<String>,
    flush: Arc<AtomicU64>,
    /// The last time asked for that this recorder has closed its file for.
    honoured_ns: u64,
    /// That time and the files begun when it was asked, until they are on
    /// disk.
    writing: Option<(u64, u64)>,
}

impl RecordListener {
    fn failure(&mut self, error: std::io::Error) -> ListenerFailed {
        let error = error.to_string();
        self.failed = Some(error.clone());
        ListenerFailed {
            listener: self.name.clone(),
            error,
        }
    }

    fn tell(&self) {
        if let Some(r) = &self.recorder {
            self.parts.lock().expect("not poisoned")[self.slot].stats = r.stats();
        }
    }

    /// The forensic module's request: at a packet (or, live, a clock) past
    /// the time asked, the open file closes; once it is on disk, the time
    /// is covered.
    #[inline]
    fn flush_if_asked(&mut self, now_ns: u64) -> Result<(), ListenerFailed> {
        let asked = self.flush.load(Ordering::Relaxed);
        if asked <= self.honoured_ns && self.writing.is_none() {
            return Ok(());
        }
        self.flush_slow(asked, now_ns)
    }

    #[cold]
    fn flush_slow(&mut self, asked: u64, now_ns: u64) -> Result<(), ListenerFailed> {
        let Some(recorder) = self.recorder.as_mut() else {
            return Ok(());
        };
        if asked > self.honoured_ns && now_ns >= asked {
            let files = match recorder.close_now() {
                Ok(files) => files,
                Err(e) => return Err(self.failure(e)),
            };
            self.honoured_ns = asked;
            self.writing = Some((asked, files));
        }
        // Packets recorded since go to a new file: the files begun before
        // the request are what must be written.
        if let Some((t, files)) = self.writing
            && recorder.written_through(files)
        {
            self.writing = None;
            let part = &mut self.parts.lock().expect("not poisoned")[self.slot];
            part.covered_ns = part.covered_ns.max(t);
        }
        Ok(())
    }
}

impl PacketListener for RecordListener {
    #[inline]
    fn packet(&mut self, p: &SourcePacket<'_>) -> Result<(), ListenerFailed> {
        let Some(recorder) = self.recorder.as_mut() else {
            return Ok(());
        };
        if self.failed.is_some() {
            return Ok(());
        }
        if p.link != recorder.link()
            && let Err(e) = recorder.set_link(p.link)
        {
            return Err(self.failure(e));
        }
        self.flush_if_asked(p.ts_ns)?;
        let Some(recorder) = self.recorder.as_mut() else {
            return Ok(());
        };
        let hash = p.decoded.as_ref().ok().map(|&(_, hash)| hash);
        match recorder.push_decoded(p.ts_ns, p.wire_len, p.frame, hash) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failure(e)),
        }
    }

    fn idle(&mut self) {
        self.tell();
        if self.failed.is_none() {
            // Live: a quiet link's clock is the wall clock.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let _ = self.flush_if_asked(now);
        }
    }

    fn lost(&self, into: &mut BTreeMap<(String, String), u64>) {
        if let Some(r) = &self.recorder {
            *into.entry((self.name.clone(), "dropped".into())).or_default() += r.stats().dropped;
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), ListenerFailed> {
        let Some(recorder) = self.recorder.take() else {
            return Ok(());
        };
        let so_far = recorder.stats();
        let (stats, files_left, error) = match recorder.finish() {
            Ok(summary) => (summary.stats, summary.files.len() as u64, self.failed.take()),
            Err(e) => (so_far, 0, Some(self.failed.take().unwrap_or_else(|| e.to_string()))),
        };
        let part = &mut self.parts.lock().expect("not poisoned")[self.slot];
        part.stats = stats;
        part.files_left = files_left;
        part.covered_ns = u64::MAX;
        part.error.clone_from(&error);
        match error {
            Some(error) => Err(ListenerFailed {
                listener: self.name.clone(),
                error,
            }),
            None => Ok(()),
        }
    }
}
