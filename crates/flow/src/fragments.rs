use sluice_wire::{Decoded, FlowKey, Fragment};

/// Gives later IP fragments the ports of their datagram's first fragment,
/// so that every fragment lands in the flow (and on the worker) of its
/// datagram. It runs where packets are dispatched, before hashing.
///
/// Memory is a fixed array indexed by a hash of (addresses, protocol, IP
/// id); a colliding datagram overwrites the older entry. Fragments whose
/// first fragment was not seen (or was overwritten) keep ports 0 and are
/// counted as unresolved.
///
/// The array is allocated a chunk at a time, when a first fragment lands
/// in it: most captures hold few fragments or none, and filling the whole
/// array up front (3 MiB for the reader's 65,536 entries) cost every run
/// its page faults before the first packet was read.
pub struct FragmentResolver {
    chunks: Box<[Option<Box<[Entry; CHUNK]>>]>,
    mask: usize,
    pub resolved: u64,
    pub unresolved: u64,
}

const CHUNK: usize = 1024;

#[derive(Clone, Copy, Default)]
struct Entry {
    key: FlowKey,
    id: u32,
    used: bool,
}

impl FragmentResolver {
    pub fn new(slots: usize) -> Self {
        let slots = slots.next_power_of_two().max(CHUNK);
        FragmentResolver {
            chunks: vec![None; slots / CHUNK].into_boxed_slice(),
            mask: slots - 1,
            resolved: 0,
            unresolved: 0,
        }
    }

    fn slot(&self, key: &FlowKey, id: u32) -> usize {
        let mut k = *key;
        k.src_port = 0;
        k.dst_port = 0;
        let h = k.symmetric_hash() ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h as usize) & self.mask
    }

    fn entry(&self, slot: usize) -> Option<&Entry> {
        self.chunks[slot / CHUNK].as_ref().map(|chunk| &chunk[slot % CHUNK])
    }

    fn entry_mut(&mut self, slot: usize) -> &mut Entry {
        let chunk = self.chunks[slot / CHUNK].get_or_insert_with(|| Box::new([Entry::default(); CHUNK]));
        &mut chunk[slot % CHUNK]
    }

    /// Records a first fragment (anything else is left alone). Where
    /// packets are dispatched a window at a time, noting the window's first
    /// fragments before resolving any of its packets gives the ports also
    /// to later fragments sent before their first (some stacks send a
    /// datagram's fragments last first), when both are in the window.
    #[inline]
    pub fn note_first(&mut self, decoded: &Decoded) {
        if let Fragment::First { id } = decoded.fragment {
            let slot = self.slot(&decoded.key, id);
            *self.entry_mut(slot) = Entry {
                key: decoded.key,
                id,
                used: true,
            };
        }
    }

    /// Records first fragments and fills in the ports of later ones.
    #[inline]
    pub fn resolve(&mut self, decoded: &mut Decoded) {
        match decoded.fragment {
            Fragment::None => {}
            Fragment::First { .. } => self.note_first(decoded),
            Fragment::Later { id, .. } => {
                let slot = self.slot(&decoded.key, id);
                let key = &decoded.key;
                let ports = self
                    .entry(slot)
                    .filter(|e| {
                        e.used
                            && e.id == id
                            && e.key.src == key.src
                            && e.key.dst == key.dst
                            && e.key.proto == key.proto
                            && e.key.vlan == key.vlan
                    })
                    .map(|e| (e.key.src_port, e.key.dst_port));
                match ports {
                    Some((src_port, dst_port)) => {
                        decoded.key.src_port = src_port;
                        decoded.key.dst_port = dst_port;
                        self.resolved += 1;
                    }
                    None => self.unresolved += 1,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::IpVersion;

    fn fragment(src: u8, fragment: Fragment, ports: (u16, u16)) -> Decoded {
        let mut d = Decoded::default();
        d.key.version = IpVersion::V4;
        d.key.src[..4].copy_from_slice(&[10, 0, 0, src]);
        d.key.dst[..4].copy_from_slice(&[10, 0, 0, 99]);
        d.key.proto = 17;
        (d.key.src_port, d.key.dst_port) = ports;
        d.fragment = fragment;
        d
    }

    fn later(id: u32) -> Fragment {
        Fragment::Later {
            id,
            offset: 1480,
            more: false,
        }
    }

    #[test]
    fn later_fragments_borrow_the_ports_of_their_first() {
        let mut resolver = FragmentResolver::new(1 << 16);
        assert!(
            resolver.chunks.iter().all(Option::is_none),
            "nothing allocated before a fragment"
        );
        resolver.resolve(&mut fragment(1, Fragment::First { id: 7 }, (5353, 53)));
        assert_eq!(resolver.chunks.iter().filter(|c| c.is_some()).count(), 1);

        let mut second = fragment(1, later(7), (0, 0));
        resolver.resolve(&mut second);
        assert_eq!((second.key.src_port, second.key.dst_port), (5353, 53));

        // Another datagram id, another sender, or no first fragment at all:
        // the ports stay 0 and the fragment counts as unresolved.
        for (src, id) in [(1, 8), (2, 7)] {
            let mut stray = fragment(src, later(id), (0, 0));
            resolver.resolve(&mut stray);
            assert_eq!((stray.key.src_port, stray.key.dst_port), (0, 0));
        }
        assert_eq!((resolver.resolved, resolver.unresolved), (1, 2));
    }

    /// Fragments sent last first: noted ahead, the first gives the later
    /// ones before it their ports.
    #[test]
    fn a_first_fragment_noted_ahead_resolves_the_later_ones_before_it() {
        let mut resolver = FragmentResolver::new(1 << 16);
        let mut window = [
            fragment(1, later(9), (0, 0)),
            fragment(1, Fragment::First { id: 9 }, (5060, 5060)),
        ];
        for d in &window {
            resolver.note_first(d);
        }
        for d in &mut window {
            resolver.resolve(d);
        }
        assert_eq!((window[0].key.src_port, window[0].key.dst_port), (5060, 5060));
        assert_eq!((resolver.resolved, resolver.unresolved), (1, 0));
    }

    #[test]
    fn a_datagram_in_the_same_slot_overwrites_the_older_one() {
        // One chunk, one slot per id modulo the size: ids that share a slot
        // must evict each other rather than mix up their ports.
        let mut resolver = FragmentResolver::new(1);
        let first = |id| fragment(1, Fragment::First { id }, (1000 + id as u16, 53));
        let slot_of = |r: &FragmentResolver, id| r.slot(&first(id).key, id);
        let a = 1;
        let b = (2..100_000)
            .find(|&id| slot_of(&resolver, id) == slot_of(&resolver, a))
            .unwrap();
        resolver.resolve(&mut first(a));
        resolver.resolve(&mut first(b));
        let mut late_a = fragment(1, later(a), (0, 0));
        let mut late_b = fragment(1, later(b), (0, 0));
        resolver.resolve(&mut late_a);
        resolver.resolve(&mut late_b);
        assert_eq!(late_a.key.src_port, 0);
        assert_eq!(late_b.key.src_port, 1000 + b as u16);
        assert_eq!((resolver.resolved, resolver.unresolved), (1, 1));
    }
}
