//! Writing packets to disk: a buffered pcap writer with nanosecond
//! timestamps (used by the generator and by tests), and the line-rate
//! [`Recorder`] (pcap or pcapng) with its block [`Index`] and crash
//! [`repair`]; reading recordings back by time, filter or flow with
//! [`extract`]; and [`DirectWriter`] and [`WriteThrough`], for large
//! outputs written once.

mod direct;
pub mod extract;
mod format;
mod index;
mod recorder;
mod repair;
mod scan;
mod write_through;

pub use direct::{ALIGN, DirectWriter};
pub use extract::{
    ExtractReport, ExtractWarning, FlowSpan, RecordingSet, Selection, extract, link_type, recording_sets, recordings,
};
pub use format::CaptureFormat;
pub use index::{BLOOM_BITS, BlockEntry, ENTRY_BYTES, FLAG_NON_IP, INDEX_MAGIC, INDEX_VERSION, Index, index_path};
pub use recorder::{
    DEFAULT_BLOCK_BYTES, MIN_BLOCK_BYTES, Recorder, RecorderConfig, RecorderStats, RecorderSummary, WriteMode,
    file_name, is_recording,
};
pub use repair::{Moved, RepairReport, SIDE_MAGIC, repair};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
pub use write_through::WriteThrough;

/// Writes a nanosecond-resolution pcap file (magic `a1b23c4d`).
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    packets: u64,
}

impl PcapWriter<BufWriter<File>> {
    pub fn create(path: impl AsRef<Path>, linktype: u32, snaplen: u32) -> io::Result<Self> {
        let file = File::create(path.as_ref())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.as_ref().display())))?;
        PcapWriter::new(BufWriter::with_capacity(1 << 20, file), linktype, snaplen)
    }
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, linktype: u32, snaplen: u32) -> io::Result<Self> {
        let mut header = [0u8; 24];
        header[..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        header[16..20].copy_from_slice(&snaplen.to_le_bytes());
        header[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter {
            out,
            snaplen,
            packets: 0,
        })
    }

    /// Writes one frame, cut to the snap length; `wire_len` is the length
    /// the frame had on the wire.
    pub fn write(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8]) -> io::Result<()> {
        let captured = frame.len().min(self.snaplen as usize);
        let mut header = [0u8; 16];
        header[..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        header[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        header[8..12].copy_from_slice(&(captured as u32).to_le_bytes());
        header[12..16].copy_from_slice(&wire_len.max(captured as u32).to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(&frame[..captured])?;
        self.packets += 1;
        Ok(())
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_with_ns_timestamps_and_snap_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let mut w = PcapWriter::create(&path, 1, 64).unwrap();
        w.write(1_700_000_000_123_456_789, 100, &[0xab; 100]).unwrap();
        w.write(1_700_000_001_000_000_001, 20, &[0xcd; 20]).unwrap();
        w.finish().unwrap();
        let file = sluice_capture::CaptureFile::open(&path).unwrap();
        let packets: Vec<_> = file.reader().unwrap().collect();
        assert_eq!(packets.len(), 2);
        assert_eq!(packets[0].ts_ns, 1_700_000_000_123_456_789);
        assert_eq!((packets[0].data.len(), packets[0].wire_len), (64, 100));
        assert_eq!(packets[1].ts_ns, 1_700_000_001_000_000_001);
    }
}
