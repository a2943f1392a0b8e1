//! The spare-inspection pool: boxes of decided and ended flows kept for
//! the next flows, so that most flows allocate nothing.

use super::*;

/// The boxes of decided and ended flows, kept for the next flows: a box
/// handed back while its lines are still in cache is cheaper than the
/// allocator's, whose free blocks are mostly cold (allocation was a tenth
/// of the chain's profile samples on the realistic mix; recycling saves
/// about a percent of a classified run). Boxed as the flows hold them, so
/// that handing one over moves a pointer.
#[derive(Default)]
#[allow(clippy::vec_box)]
pub(super) struct Spares {
    /// Those of flows decided just now at the back, where the next flow
    /// takes one; those of flows that ended, long out of cache, at the
    /// front.
    inspections: VecDeque<Box<Inspection>>,
    /// The fewest inspections spare since the last trim, and the takes
    /// since: boxes spare throughout [`TRIM_EVERY`] takes were not needed,
    /// and go back to the allocator (a burst's boxes are not held for
    /// good).
    low: usize,
    takes: u32,
    /// Each empty, its lists' capacity kept.
    metadata: Vec<Box<Metadata>>,
    media_windows: Vec<Box<[MediaWindows; 2]>>,
}

impl Spares {
    /// A spare inspection, if any, for a flow's first payload.
    fn take_inspection(&mut self) -> Option<Box<Inspection>> {
        let taken = self.inspections.pop_back();
        self.low = self.low.min(self.inspections.len());
        self.takes += 1;
        if self.takes == TRIM_EVERY {
            // The coldest first: those of flows that ended, at the front.
            self.inspections.drain(..self.low);
            self.low = self.inspections.len();
            self.takes = 0;
        }
        taken
    }

    /// Empty metadata.
    pub(super) fn metadata(&mut self) -> Box<Metadata> {
        let meta = self.metadata.pop().unwrap_or_default();
        // Mostly taken as the chain's scratch, written when a dissector
        // next notes something, some packets on: asked for now, the box is
        // in cache by then. The next spare is asked for too, for a flow
        // whose dissector writes to it straight away.
        prefetch_whole(&*meta);
        if let Some(next) = self.metadata.last() {
            prefetch_whole(&**next);
        }
        meta
    }

    /// Fresh windows.
    pub(super) fn media_windows(&mut self) -> Box<[MediaWindows; 2]> {
        match self.media_windows.pop() {
            Some(mut windows) => {
                *windows = Default::default();
                windows
            }
            None => Box::default(),
        }
    }

    /// Keeps `inspection` for a flow to come; `warm` when its flow was
    /// inspected just now.
    pub(super) fn keep_inspection(&mut self, mut inspection: Box<Inspection>, warm: bool) {
        if self.inspections.len() >= SPARE_INSPECTIONS {
            if !warm {
                return;
            }
            self.inspections.pop_front();
        }
        for side in &mut inspection.sides {
            if side.head.capacity() > SPARE_HEAD_BYTES {
                side.head = Vec::new();
            }
        }
        if warm {
            self.inspections.push_back(inspection);
        } else {
            self.inspections.push_front(inspection);
        }
    }

    pub(super) fn keep_metadata(&mut self, mut meta: Box<Metadata>) {
        if self.metadata.len() < SPARE_BOXES {
            meta.clear();
            self.metadata.push(meta);
        }
    }

    pub(super) fn keep_media_windows(&mut self, windows: Box<[MediaWindows; 2]>) {
        if self.media_windows.len() < SPARE_BOXES {
            self.media_windows.push(windows);
        }
    }
}

/// Asks for every cache line of `value` ahead of its use.
pub(super) fn prefetch_whole<T>(value: &T) {
    let start: *const u8 = (value as *const T).cast();
    for line in (0..size_of::<T>()).step_by(64) {
        sluice_wire::prefetch(start.wrapping_add(line));
    }
}

/// Spare inspections a chain keeps at most. Undecided flows hold theirs
/// until their depth is spent or they end, in bursts when the clock
/// expires them, and a trace of short flows keeps a hundred thousand
/// undecided at once, each given a box at its first payload and handing
/// it back at its second: a pool of a few hundred ran dry between the
/// bursts, and nearly every flow allocated a box and a stream head. The
/// pool never holds more boxes than the flows held at once (a box is
/// made only when none is spare), and never more than this.
const SPARE_INSPECTIONS: usize = 1 << 18;

/// Takes of a spare inspection between two trims of the pool: long enough
/// that a trace's bursts (the flows the clock expires together) come and
/// go within it.
const TRIM_EVERY: u32 = 1 << 16;

/// A spare keeps a stream head of this capacity at most (a full segment):
/// a flow that needed a longer one gives it back to the allocator.
const SPARE_HEAD_BYTES: usize = 1536;

/// Spare metadata (about 400 bytes each) and media windows (112) a chain
/// keeps at most: flows end in bursts, when the clock expires them.
const SPARE_BOXES: usize = 256;

impl Chain {
    /// An inspection for a flow's first payload, from the spares when
    /// there are any: most flows are decided within a packet or two, and
    /// an allocation for the box, its stream heads and its rule matches
    /// per flow cost more than the rest of its inspection.
    pub(super) fn fresh_inspection(&mut self, transport: Transport) -> Box<Inspection> {
        let mut inspection = self.spares.take_inspection().unwrap_or_default();
        // The next flow's spare is asked for now, some packets ahead: the
        // first touch of a spare, out of cache by the time it was taken,
        // was half of this function's time.
        if let Some(next) = self.spares.inspections.back() {
            prefetch_whole(&**next);
        }
        inspection.dissecting = Dissecting {
            candidates: match transport {
                Transport::Tcp => self.tcp,
                Transport::Udp => self.udp,
            },
            ..Dissecting::default()
        };
        inspection.withheld = [None; 2];
        let set = &self.config.rules;
        match &mut inspection.rules {
            Some(cursor) if set.has_patterns(transport) => set.reset_cursor(transport, cursor),
            rules => *rules = set.has_patterns(transport).then(|| set.cursor(transport)),
        }
        for side in &mut inspection.sides {
            let head = std::mem::take(&mut side.head);
            *side = SideState {
                head,
                ..SideState::default()
            };
            side.head.clear();
        }
        inspection
    }

    /// Takes back the boxes of a flow whose record is written (or that is
    /// dropped), for the flows to come.
    pub fn release(&mut self, class: &mut FlowClass) {
        if let Some(inspection) = class.inspection.take() {
            self.spares.keep_inspection(inspection, false);
        }
        if let Some(meta) = class.meta.take() {
            self.spares.keep_metadata(meta);
        }
        if let Some(windows) = class.media_windows.take() {
            self.spares.keep_media_windows(windows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boxes spare throughout a span of takes go back to the allocator at
    /// its end; those taken in it stay.
    #[test]
    fn boxes_spare_throughout_a_span_are_given_back() {
        let mut spares = Spares::default();
        for _ in 0..1000 {
            spares.keep_inspection(Box::default(), false);
        }
        // A burst's 1,000 boxes, then flows one at a time: each takes a
        // box and hands it back, so that 999 are never needed. The first
        // span (from the pool's start) gives nothing back.
        for _ in 0..TRIM_EVERY {
            let taken = spares.take_inspection().expect("a spare");
            spares.keep_inspection(taken, true);
        }
        assert_eq!(spares.inspections.len(), 1000);
        for _ in 0..TRIM_EVERY - 1 {
            let taken = spares.take_inspection().expect("a spare");
            spares.keep_inspection(taken, true);
        }
        assert_eq!(spares.inspections.len(), 1000, "trimmed before the span's end");
        let taken = spares.take_inspection().expect("a spare");
        assert_eq!(spares.inspections.len(), 0, "the 999 unused boxes are kept");
        spares.keep_inspection(taken, true);
        // A pool in use to its last box keeps all of it.
        for _ in 0..TRIM_EVERY {
            let a = spares.take_inspection().expect("a spare");
            spares.keep_inspection(a, true);
        }
        assert_eq!(spares.inspections.len(), 1);
    }
}
