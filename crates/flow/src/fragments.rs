use sluice_wire::{Decoded, FlowKey, Fragment};

/// Gives later IP fragments the ports of their datagram's first fragment,
/// so that every fragment lands in the flow (and on the worker) of its
/// datagram. It runs where packets are dispatched, before hashing.
///
/// Memory is a fixed array indexed by a hash of (addresses, protocol, IP
/// id); a colliding datagram overwrites the older entry. Fragments whose
/// first fragment was not seen (or was overwritten) keep ports 0 and are
/// counted as unresolved.
pub struct FragmentResolver {
    entries: Box<[Entry]>,
    pub resolved: u64,
    pub unresolved: u64,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: FlowKey,
    id: u32,
    used: bool,
}

impl FragmentResolver {
    pub fn new(slots: usize) -> Self {
        FragmentResolver {
            entries: vec![Entry::default(); slots.next_power_of_two()].into_boxed_slice(),
            resolved: 0,
            unresolved: 0,
        }
    }

    fn slot(&self, key: &FlowKey, id: u32) -> usize {
        let mut k = *key;
        k.src_port = 0;
        k.dst_port = 0;
        let h = k.symmetric_hash() ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h as usize) & (self.entries.len() - 1)
    }

    /// Records first fragments and fills in the ports of later ones.
    #[inline]
    pub fn resolve(&mut self, decoded: &mut Decoded) {
        match decoded.fragment {
            Fragment::None => {}
            Fragment::First { id } => {
                let slot = self.slot(&decoded.key, id);
                self.entries[slot] = Entry {
                    key: decoded.key,
                    id,
                    used: true,
                };
            }
            Fragment::Later { id, .. } => {
                let slot = self.slot(&decoded.key, id);
                let e = &self.entries[slot];
                let same = e.used
                    && e.id == id
                    && e.key.src == decoded.key.src
                    && e.key.dst == decoded.key.dst
                    && e.key.proto == decoded.key.proto
                    && e.key.vlan == decoded.key.vlan;
                if same {
                    decoded.key.src_port = e.key.src_port;
                    decoded.key.dst_port = e.key.dst_port;
                    self.resolved += 1;
                } else {
                    self.unresolved += 1;
                }
            }
        }
    }
}
