//! Where packets come from. A source reads each packet once, decodes it
//! once and hands it to the packet listeners (recorder, abstractor) and,
//! by the symmetric flow hash, to one worker's flow table:
//!
//! - [`files`]: capture files (and pipes) in order, read by the workers in
//!   turns and dealt to them in batches;
//! - [`rings`]: network interfaces, one `TPACKET_V3` ring per worker and
//!   interface, in fanout groups that keep both directions of a flow on
//!   one worker.
//!
//! Both start when every thread exists, stop at the end of the input, at
//! the stop flag (SIGINT/SIGTERM) or after a duration, drain what was
//! already captured, and count everything they could not deliver.

pub(crate) mod files;
#[cfg(target_os = "linux")]
pub(crate) mod rings;

use std::path::PathBuf;

use sluice_capture::FileBytes;
use sluice_wire::{DecodeError, Decoded};

use crate::summary::Drops;

/// What a run reads.
#[derive(Clone, Debug)]
pub enum Source {
    /// Capture files, read in order as one capture.
    Files(Vec<PathBuf>),
    /// Network interfaces, captured until stopped.
    Interfaces(Vec<String>),
}

/// A decoded packet on its way to a worker: the decoder's summary and where
/// the frame's bytes are in the mapped file. About 120 bytes, no pointers.
#[derive(Clone, Copy, Default)]
pub(crate) struct PacketDesc {
    pub ts_ns: u64,
    pub offset: usize,
    pub captured: u32,
    pub wire_len: u32,
    pub hash: u64,
    pub decoded: Decoded,
    /// Its position in the input, as the reader dealt it.
    pub order: u64,
    /// The input's clock at this packet: the latest packet time dealt so
    /// far, this one's included. Flows expire by it, so that which flows a
    /// packet finds over does not depend on which worker had news of the
    /// clock when (it is the packet's own time unless timestamps went back).
    pub clock_ns: u64,
}

/// Packets of one file for one worker. Batches travel back to the reader
/// empty, so their buffers are allocated once per run, not per batch.
pub(crate) struct Batch {
    pub bytes: Option<FileBytes>,
    pub packets: Vec<PacketDesc>,
    /// The worker it was dealt to.
    pub worker: usize,
    /// Every packet before this position that goes to this worker is in
    /// this batch or an earlier one.
    pub upto: u64,
    /// The latest packet time the reader had dealt when it sent the batch:
    /// flows expire by the whole input's clock, not by whichever of its
    /// packets happened to reach this worker.
    pub clock_ns: u64,
    /// The statistics interval the batch's packets count in, by its start.
    pub interval: Option<u64>,
    /// After this batch, that interval is over: the next packet read is
    /// later than its end.
    pub interval_over: bool,
}

/// Counts a frame that yields no flow under its reason.
pub(crate) fn count_undecodable(d: &mut Drops, e: DecodeError) {
    match e {
        DecodeError::NotIp { .. } => d.non_ip_frames += 1,
        DecodeError::Truncated { .. } => d.truncated_frames += 1,
        DecodeError::Malformed { .. } => d.malformed_frames += 1,
        DecodeError::TooDeep => d.too_deeply_tunnelled += 1,
        DecodeError::Encrypted { .. } => d.encrypted_frames += 1,
    }
}
