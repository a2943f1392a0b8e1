//! How far every worker has read, in input order: what makes the records of
//! a file the same for every number of workers.
//!
//! A DNS answer or an FTP/SIP announcement read by one worker labels flows
//! that another worker owns. The reader numbers every packet it deals; a
//! fact is stamped with its packet's number (`sluice_classify::History`),
//! and a flow asks what was learned before its first packet only once
//! every worker has read past that packet, so the answer never depends on
//! which worker ran ahead. Until then a flow that ends waits in its
//! worker (`worker.rs`); nobody ever waits for another thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// One worker's mark, on a cache line of its own: each worker writes its
/// own after every batch and reads everybody's.
#[repr(align(128))]
#[derive(Default)]
struct Mark(AtomicU64);

pub(crate) struct InputOrder {
    /// Worker i has processed every packet dealt to it before this number.
    read: Box<[Mark]>,
    /// Every flow of worker i that began before this number has used up
    /// the announcements it found (`sluice_classify::use_announced`).
    used: Box<[Mark]>,
    /// Every flow of worker i that began before this number has asked.
    asked: Box<[Mark]>,
}

impl InputOrder {
    pub(crate) fn new(workers: usize) -> Self {
        InputOrder {
            read: (0..workers).map(|_| Mark::default()).collect(),
            used: (0..workers).map(|_| Mark::default()).collect(),
            asked: (0..workers).map(|_| Mark::default()).collect(),
        }
    }

    /// Worker `me` has processed (and taught all it learned from) every
    /// packet before `upto` that was dealt to it; returns the number
    /// before which every worker has.
    pub(crate) fn read_before(&self, me: usize, upto: u64) -> u64 {
        self.read[me].0.fetch_max(upto, Ordering::Release);
        min(&self.read)
    }

    /// Worker `me`'s flows that began before `order` have all used up what
    /// they found; returns the number before which every worker's have.
    pub(crate) fn used_before(&self, me: usize, order: u64) -> u64 {
        self.used[me].0.fetch_max(order, Ordering::Release);
        min(&self.used)
    }

    /// Worker `me`'s flows that began before `order` have all asked;
    /// returns the number before which every worker's have.
    pub(crate) fn asked_before(&self, me: usize, order: u64) -> u64 {
        self.asked[me].0.fetch_max(order, Ordering::Release);
        min(&self.asked)
    }
}

fn min(marks: &[Mark]) -> u64 {
    marks.iter().map(|m| m.0.load(Ordering::Acquire)).min().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_worker_sets_the_mark() {
        let order = InputOrder::new(3);
        assert_eq!(order.read_before(0, 100), 0);
        assert_eq!(order.read_before(1, 50), 0);
        assert_eq!(order.read_before(2, 70), 50);
        assert_eq!(order.read_before(1, 120), 70);
        // Marks never go back.
        assert_eq!(order.read_before(2, 10), 70);
        assert_eq!(order.asked_before(0, 5), 0);
    }
}
