//! The flow index: slot numbers found by hash.
//!
//! Written here rather than taken from a general hash map because the
//! worker needs to prefetch a packet's bucket several packets ahead, and
//! that needs the bucket's address from the hash alone. Open addressing
//! with linear probing over one array of `u64`, kept at most half full:
//! the upper half of an entry is the low 32 bits of the flow hash (the
//! bucket position and a tag), the lower half is slot + 1, and 0 is empty.
//! Deletion shifts later entries back, so there are no tombstones and
//! probe chains stay short however many flows come and go.

use crate::memory::{advise_huge_pages, back, give_back, prefetch};

pub(crate) struct FlowIndex {
    entries: Vec<u64>,
    mask: usize,
    len: usize,
    max_buckets: usize,
    huge_pages: bool,
}

/// Buckets of a new index: memory grows with the flows actually held.
const INITIAL_BUCKETS: usize = 1 << 12;

impl FlowIndex {
    /// An index for up to `capacity` flows. It starts small and doubles
    /// while more than half full, up to twice `capacity` buckets; or, with
    /// `prefault`, starts at that size with every page written. With
    /// `huge_pages`, its array asks for transparent huge pages.
    pub(crate) fn new(capacity: usize, prefault: bool, huge_pages: bool) -> Self {
        let max_buckets = (capacity * 2).next_power_of_two().max(16);
        let buckets = if prefault {
            max_buckets
        } else {
            INITIAL_BUCKETS.min(max_buckets)
        };
        let mut entries = Vec::with_capacity(buckets);
        if huge_pages {
            advise_huge_pages(&entries);
        }
        // Zeroed memory from the allocator may be pages not yet backed:
        // written, they are.
        entries.resize(buckets, 0u64);
        FlowIndex {
            entries,
            mask: buckets - 1,
            len: 0,
            max_buckets,
            huge_pages,
        }
    }

    /// Rebuilds the index at twice the size. Entries keep the low 32 bits
    /// of their hash, which is all a bucket position needs.
    fn grow(&mut self) {
        let buckets = self.entries.len() * 2;
        let old = std::mem::replace(&mut self.entries, vec![0u64; buckets]);
        if self.huge_pages {
            advise_huge_pages(&self.entries);
        }
        // Fresh zeroed pages, first read below, would map the shared zero
        // page and then be copied on their first write, each copy
        // flushing the translations of every core the process runs on.
        let _ = back(&self.entries, 0, buckets);
        self.mask = buckets - 1;
        for e in old.into_iter().filter(|&e| e != 0) {
            let mut i = (e >> 32) as usize & self.mask;
            while self.entries[i] != 0 {
                i = (i + 1) & self.mask;
            }
            self.entries[i] = e;
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & self.mask
    }

    #[inline]
    fn tag(hash: u64) -> u64 {
        hash & 0xffff_ffff
    }

    /// Gives the array's memory back to the kernel; the index is not used
    /// again.
    pub(crate) fn give_back(&mut self) {
        give_back(&mut self.entries);
    }

    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        prefetch(&self.entries[self.home(hash)]);
    }

    /// Calls `f` with every slot whose entry carries this hash's tag: the
    /// candidates a lookup will compare keys against.
    #[inline]
    pub(crate) fn candidates(&self, hash: u64, mut f: impl FnMut(u32)) {
        let tag = Self::tag(hash);
        let mut i = self.home(hash);
        loop {
            let e = self.entries[i];
            if e == 0 {
                return;
            }
            if e >> 32 == tag {
                f((e as u32).wrapping_sub(1));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The first slot whose entry carries this hash's tag, if any: nearly
    /// always the only candidate (tags are 32 bits), found without the
    /// walk on to the chain's end that [`Self::candidates`] takes.
    #[inline]
    pub(crate) fn first_candidate(&self, hash: u64) -> Option<u32> {
        self.find(hash, |_| true)
    }

    /// The slot for which `eq` holds, among those with this hash's tag.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let tag = Self::tag(hash);
        let mut i = self.home(hash);
        loop {
            let e = self.entries[i];
            if e == 0 {
                return None;
            }
            if e >> 32 == tag {
                let slot = (e as u32).wrapping_sub(1);
                if eq(slot) {
                    return Some(slot);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Adds a slot that is not in the index yet.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, slot: u32) {
        if (self.len + 1) * 2 > self.entries.len() && self.entries.len() < self.max_buckets {
            self.grow();
        }
        self.len += 1;
        let mut i = self.home(hash);
        while self.entries[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.entries[i] = (Self::tag(hash) << 32) | (slot as u64 + 1);
    }

    /// Removes `slot`, filed under `hash`.
    pub(crate) fn remove(&mut self, hash: u64, slot: u32) {
        let wanted = (Self::tag(hash) << 32) | (slot as u64 + 1);
        let mut hole = self.home(hash);
        loop {
            match self.entries[hole] {
                0 => return,
                e if e == wanted => {
                    self.len -= 1;
                    break;
                }
                _ => hole = (hole + 1) & self.mask,
            }
        }
        // Backward shift: pull each following entry of the chain into the
        // hole when its home position allows it to sit there.
        let mut i = hole;
        loop {
            i = (i + 1) & self.mask;
            let e = self.entries[i];
            if e == 0 {
                break;
            }
            let home = (e >> 32) as usize & self.mask;
            if (i.wrapping_sub(home) & self.mask) >= (i.wrapping_sub(hole) & self.mask) {
                self.entries[hole] = e;
                hole = i;
            }
        }
        self.entries[hole] = 0;
    }

    /// Removes every entry at once: one sequential pass, where removing
    /// each flow would be a cache miss per flow.
    pub(crate) fn clear(&mut self) {
        self.entries.fill(0);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Any sequence of inserts and removes leaves the index agreeing
        /// with a reference map, including under heavy collisions.
        #[test]
        fn agrees_with_a_reference_map(ops in prop::collection::vec((any::<bool>(), 0u64..64, 0u64..8), 1..400)) {
            let mut index = FlowIndex::new(64, false, true);
            let mut reference: HashMap<u32, u64> = HashMap::new();
            let mut next_slot = 0u32;
            for (insert, key, bucket) in ops {
                // Few distinct low bits: long chains that wrap and collide.
                let hash = (key << 40) | bucket | 0x7f0;
                let present = reference.iter().find(|(_, h)| **h == hash).map(|(s, _)| *s);
                match (insert, present) {
                    (true, None) if reference.len() < 64 => {
                        index.insert(hash, next_slot);
                        reference.insert(next_slot, hash);
                        next_slot += 1;
                    }
                    (false, Some(slot)) => {
                        index.remove(hash, slot);
                        reference.remove(&slot);
                    }
                    _ => {}
                }
                for (slot, hash) in &reference {
                    prop_assert_eq!(index.find(*hash, |s| s == *slot), Some(*slot));
                    let mut first = None;
                    index.candidates(*hash, |s| {
                        first.get_or_insert(s);
                    });
                    prop_assert_eq!(index.first_candidate(*hash), first);
                }
            }
            let live = index.entries.iter().filter(|e| **e != 0).count();
            prop_assert_eq!(live, reference.len());
        }
    }
}
