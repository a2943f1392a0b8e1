//! The listeners: what a probe does with the packets its source reads.
//!
//! Two kinds, one capture:
//!
//! - **Packet listeners** ([`PacketListener`]) see every frame as the source
//!   reads it, decoded once, before any flow table: the recorder
//!   ([`record`]) and the flow abstractor ([`abstractor`]). They run where
//!   the packet is read: in the reading turn for files, in each ring's
//!   thread live.
//! - **Flow listeners** ([`FlowListener`]) live in each worker beside its
//!   flow table and classifier chain, which every packet meets once: flow
//!   records ([`records`]), their exporting sinks ([`export`]: [`ipfix`]),
//!   per-interval statistics ([`stats`]) and VoIP call tracking
//!   ([`voip`]).
//!
//! Each listener states its loss policy. The recorder is lossless (the
//! slowest listener holds the source back, HPCAP's rule) or drops and
//! counts; the abstractor holds a file's reader back for its consumers, or
//! drops and counts on a live link; records and statistics never drop.
//! Every drop is in the summary per listener.

pub(crate) mod abstractor;
pub(crate) mod alarms;
pub(crate) mod balance;
pub(crate) mod breakdowns;
pub(crate) mod export;
pub(crate) mod ipfix;
pub(crate) mod kafka;
pub(crate) mod parquet;
pub(crate) mod record;
pub(crate) mod records;
pub(crate) mod stats;
pub(crate) mod voip;

use sluice_capture::FileBytes;
use sluice_classify::FlowClass;
use sluice_export::schema::Record;
use sluice_flow::{Direction, EndReason, Flow, FlowTable};
use sluice_wire::{DecodeError, Decoded, LinkType};

use crate::source::PacketDesc;
use crate::threads::Waits;

/// A frame as the source read it.
pub(crate) struct SourcePacket<'a> {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub link: LinkType,
    pub frame: &'a [u8],
    /// The decoder's summary (later IP fragments given their first
    /// fragment's ports) and the flow's symmetric hash, or why the frame
    /// yields no flow.
    pub decoded: Result<(&'a Decoded, u64), DecodeError>,
    /// Reading a file: its bytes, and where the frame lies in them.
    pub file: Option<(&'a FileBytes, usize)>,
}

/// The bytes of a packet a worker shows its flow listeners.
pub(crate) struct PacketBytes<'a> {
    /// The packet's direction in its flow.
    pub dir: Direction,
    /// The frame as captured.
    pub frame: &'a [u8],
    /// The transport payload as captured: what the classifier saw.
    pub payload: &'a [u8],
}

/// Why a listener stopped the run: its output failed.
#[derive(Debug, thiserror::Error)]
#[error("{listener}: {error}")]
pub(crate) struct ListenerFailed {
    pub listener: String,
    pub error: String,
}

pub(crate) trait PacketListener: Send {
    fn packet(&mut self, packet: &SourcePacket<'_>) -> Result<(), ListenerFailed>;

    /// No packet for a while (a quiet link): time for periodic work.
    fn idle(&mut self) {}

    /// Reading a file: the offset before which the listener needs none of
    /// the file's bytes any more (it may hold some after their packet).
    fn needs_file_from(&self) -> Option<usize> {
        None
    }

    /// Adds what the listener lost so far (running totals) under its name
    /// and each counter's.
    fn lost(&self, _into: &mut std::collections::BTreeMap<(String, String), u64>) {}

    /// The source ended: write out what is held.
    fn finish(self: Box<Self>) -> Result<(), ListenerFailed>;
}

/// A worker's view of a listener that works on flows.
pub(crate) trait FlowListener: Send {
    /// Whether [`FlowListener::packet`] is to be called (a call per packet).
    fn sees_packets(&self) -> bool {
        false
    }

    /// Whether [`FlowListener::prefetch_slot`] and
    /// [`FlowListener::prefetch_state`] are to be called (calls per
    /// packet ahead).
    fn prefetches(&self) -> bool {
        false
    }

    /// A packet of the flow that may be in `slot` comes some packets from
    /// now: ask for what finds the listener's state by slot. A hint: it
    /// changes nothing.
    fn prefetch_slot(&self, _slot: u32) {}

    /// The same, closer: what [`FlowListener::prefetch_slot`] asked for is
    /// in cache, ask for the state itself, of the packet's direction `dir`
    /// (0 or 1, as `sluice_flow::Direction`) in the flow in `slot`.
    fn prefetch_state(&self, _slot: u32, _dir: usize) {}

    /// A packet was accounted in the flow in `slot` of the worker's table
    /// and shown to the classifier.
    fn packet(&mut self, _slot: u32, _flow: &mut Flow<FlowClass>, _packet: &PacketDesc, _bytes: &PacketBytes<'_>) {}

    /// A flow ended, with its label as far as it is known now.
    fn ended(&mut self, _flow: &mut Flow<FlowClass>, _end: EndReason) {}

    /// Reading files: every worker has processed every packet before input
    /// position `order` (never called on a live link).
    fn reached(&mut self, _order: u64) {}

    /// Reading files: this worker has processed every packet dealt to it
    /// while the input's clock reached `clock_ns` (never called on a live
    /// link).
    fn caught_up(&mut self, _clock_ns: u64) {}

    /// A flow's record, with its final label: written after
    /// [`FlowListener::ended`], later for a flow that waits for what other
    /// workers learn before its start.
    fn record(&mut self, _record: &Record, _waits: &mut Waits) {}

    /// Packets from now on count in the statistics interval that began at
    /// `start_ns`.
    fn interval(&mut self, _start_ns: u64) {}

    /// The statistics interval that began at `start_ns` is over.
    fn interval_over(&mut self, _start_ns: u64, _table: &mut FlowTable<FlowClass>) {}

    /// Live, once a second: hand over what is held (records waiting for a
    /// full chunk).
    fn idle(&mut self, _waits: &mut Waits) {}

    /// Every flow has ended: hand over what is held.
    fn finish(&mut self, _table: &mut FlowTable<FlowClass>, _waits: &mut Waits) {}
}
