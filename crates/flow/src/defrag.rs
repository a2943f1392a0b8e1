//! IPv4 and IPv6 datagram reassembly, so that the flow abstractor sees whole
//! datagrams (and their transport headers) where the network sent fragments.
//!
//! Written here because nothing fits: etherparse's `defrag::IpDefragPool`
//! (behind its `std` feature, which this workspace leaves off) re-parses
//! every packet, has no memory bound or timeout (its own documentation says
//! it is not safe against memory exhaustion) and merges overlapping
//! fragments where RFC 5722 requires dropping the datagram.
//!
//! # Policies
//!
//! * **Identity.** A datagram is (source, destination, protocol, IP id,
//!   VLAN, tunnel id, IP version), all of the innermost IP header. For IPv6
//!   the protocol is the Fragment header's next header.
//! * **Header.** The first fragment (offset 0) supplies the header fields of
//!   the reassembled datagram; options and extension headers of the
//!   unfragmentable part are dropped (see [`Defrag::Complete`]).
//! * **Lengths.** A fragment's data length comes from the IP length fields
//!   (IPv4 total length, IPv6 payload length), never from the capture
//!   length. A fragment the snap length cut short can never complete its
//!   datagram: the datagram is dropped as `malformed`.
//! * **Duplicates and overlaps.** A fragment with exactly the offset and
//!   length of one already held is ignored (`duplicates`); its bytes are not
//!   compared. Any other overlap drops the whole datagram (`overlaps`), as
//!   RFC 5722 requires for IPv6 and Linux does for IPv4 since 4.19.
//! * **Malformed.** A non-last fragment whose length is not a multiple of 8,
//!   an empty fragment, a fragment ending after the known end of the
//!   datagram, a second last fragment with another end, a last fragment
//!   ending before data already held, or one the decoder calls a fragment
//!   but whose headers do not say so, drops the datagram (`malformed`).
//! * **Too large.** A datagram that would be longer than 65535 bytes (IPv4,
//!   with the 20-byte header written here) or carry more than 65535 payload
//!   bytes (IPv6) is dropped (`too_large`).
//! * **Tombstones.** After a datagram is dropped for an overlap, a malformed
//!   or a too-large fragment, its later fragments are thrown away (counted in
//!   `dropped_fragments`) until the timeout of the dropped datagram runs
//!   out, rather than starting a new datagram that can never complete. At
//!   most `max_datagrams` tombstones are kept; beyond that the oldest is
//!   forgotten. Timed-out and evicted datagrams leave no tombstone.
//! * **Timeout.** A datagram is given up (`timed_out`) once packet time is
//!   more than `timeout_ns` past its first fragment (the first to arrive,
//!   whatever its offset). [`Defragmenter::push`] expires old datagrams on
//!   every fragment; call [`Defragmenter::expire`] now and then as well so
//!   that a quiet fragment stream does not hold memory.
//! * **Memory.** At most `max_datagrams` datagrams are in progress and at
//!   most `max_bytes` are held, where each held fragment is charged its data
//!   plus [`FRAGMENT_OVERHEAD`] bytes of bookkeeping (so a flood of tiny
//!   fragments cannot hold more memory than the budget suggests). When a new
//!   datagram or fragment does not fit, the oldest datagrams (by first
//!   fragment) are evicted (`evicted`); the fragment's own datagram goes last.
//!
//! Every fragment pushed ends up in exactly one place: a reassembled
//! datagram, `duplicates`, `dropped_fragments`, or still held; and at the
//! end of the input ([`Defragmenter::finish`]) nothing is held: what is
//! left is dropped, and its datagrams counted as `incomplete_at_end`.
//!
//! Packets are fragmented at the innermost IP header the decoder reached. A
//! tunnel whose outer header is fragmented (GTP-U or VXLAN over a small MTU)
//! is not reassembled: the decoder descends into the first fragment's inner
//! packet, so its later fragments find no first fragment and time out.

use std::collections::{BTreeMap, HashMap};

use sluice_wire::bytes::internet_checksum;
use sluice_wire::{Decoded, Fragment, IpVersion};

/// Limits of a [`Defragmenter`]. All times are packet time.
#[derive(Clone, Copy, Debug)]
pub struct DefragConfig {
    /// Datagrams being reassembled at once; when full, the oldest is evicted.
    pub max_datagrams: usize,
    /// Bytes held in total (fragment data plus [`FRAGMENT_OVERHEAD`] per
    /// fragment); when full, the oldest datagrams are evicted.
    pub max_bytes: usize,
    /// Packet time after a datagram's first fragment before giving up.
    pub timeout_ns: u64,
}

impl Default for DefragConfig {
    fn default() -> Self {
        DefragConfig {
            max_datagrams: 4096,
            max_bytes: 32 << 20,
            // Linux's ipfrag_time.
            timeout_ns: 30_000_000_000,
        }
    }
}

/// What happened to the fragments pushed so far. Datagram counts except
/// `fragments`, `duplicates` and `dropped_fragments`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DefragCounters {
    /// Fragments pushed.
    pub fragments: u64,
    /// Datagrams returned whole.
    pub reassembled: u64,
    /// Datagrams given up after the timeout.
    pub timed_out: u64,
    /// Datagrams thrown away to stay within `max_datagrams` or `max_bytes`.
    pub evicted: u64,
    /// Datagrams dropped because fragments overlapped with different extents.
    pub overlaps: u64,
    /// Exact duplicate fragments ignored.
    pub duplicates: u64,
    /// Datagrams whose reassembled size would exceed 65535 (IPv4) or whose
    /// payload would (IPv6).
    pub too_large: u64,
    /// Datagrams dropped for a malformed or truncated fragment (see the
    /// module documentation), and fragments whose IP headers could not be
    /// read at all.
    pub malformed: u64,
    /// Datagrams still incomplete when the input ended
    /// ([`Defragmenter::finish`]).
    pub incomplete_at_end: u64,
    /// Fragments thrown away: with the datagrams above, or because their
    /// datagram had already been dropped.
    pub dropped_fragments: u64,
}

/// The verdict on one packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Defrag<'a> {
    /// Not a fragment: use the frame as it is.
    NotFragment,
    /// Held until the rest of its datagram arrives (or thrown away: see the
    /// counters).
    Held,
    /// The last missing fragment arrived: a complete raw IP datagram (no link
    /// header) with the fragment fields cleared (IPv4: fresh 20-byte header,
    /// MF=0, offset 0, correct total length and checksum, same
    /// id/tos/ttl/proto/src/dst; IPv6: fresh 40-byte header, payload length
    /// set, next header = the Fragment header's next header, extension
    /// headers of the unfragmentable part dropped), followed by the
    /// reassembled payload.
    ///
    /// Decode it with `sluice_wire::decode(LinkType::RawIp, bytes)`; the
    /// caller copies VLAN and tunnel from the original packet.
    Complete(&'a [u8]),
}

/// Bytes charged for each held fragment on top of its data: its map entry
/// and its own allocation.
pub const FRAGMENT_OVERHEAD: usize = 48;

/// The largest IPv4 datagram, and the largest IPv6 payload.
const MAX_IP_LEN: usize = 65535;

/// Reassembles fragmented IPv4 and IPv6 datagrams within bounded memory.
/// One per worker; single-threaded.
pub struct Defragmenter {
    config: DefragConfig,
    datagrams: HashMap<DatagramKey, Datagram>,
    /// The datagrams in progress, oldest first.
    by_age: BTreeMap<Age, DatagramKey>,
    /// Dropped datagrams whose fragments are still thrown away, by age.
    tombstones: HashMap<DatagramKey, Age>,
    tombstones_by_age: BTreeMap<Age, DatagramKey>,
    held: usize,
    serial: u64,
    counters: DefragCounters,
    /// Fragments that went into reassembled datagrams (for the accounting
    /// identity checked by the tests).
    used_fragments: u64,
    /// The last reassembled datagram, lent out by [`Defrag::Complete`].
    out: Vec<u8>,
}

/// (time of the first fragment, arrival serial): orders datagrams by age.
type Age = (u64, u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct DatagramKey {
    src: [u8; 16],
    dst: [u8; 16],
    id: u32,
    tunnel_id: u32,
    vlan: u16,
    proto: u8,
    version: IpVersion,
}

struct Datagram {
    age: Age,
    /// Fragment data by offset; never overlapping.
    pieces: BTreeMap<u32, Box<[u8]>>,
    /// Sum of the pieces' lengths.
    covered: u32,
    /// The datagram's length, once the last fragment has been seen.
    end: Option<u32>,
    /// The first fragment's IP header (the fixed part): 20 bytes for IPv4,
    /// 40 for IPv6.
    header: Option<[u8; 40]>,
    /// Bytes charged against `max_bytes`.
    charge: usize,
}

/// One fragment, as its own headers describe it.
struct Piece<'f> {
    key: DatagramKey,
    start: u32,
    /// Data length from the IP length fields.
    len: u32,
    more: bool,
    /// The captured data, cut at `len`; shorter when the snap length cut it.
    data: &'f [u8],
    header: Option<[u8; 40]>,
}

impl Piece<'_> {
    fn end(&self) -> u32 {
        self.start + self.len
    }
}

/// What a fragment does to its datagram.
enum Verdict {
    New,
    Duplicate,
    Drop(Reason),
}

/// Why a datagram is dropped.
#[derive(Clone, Copy)]
enum Reason {
    Overlap,
    Malformed,
    TooLarge,
}

impl Defragmenter {
    pub fn new(config: DefragConfig) -> Defragmenter {
        Defragmenter {
            config,
            datagrams: HashMap::new(),
            by_age: BTreeMap::new(),
            tombstones: HashMap::new(),
            tombstones_by_age: BTreeMap::new(),
            held: 0,
            serial: 0,
            counters: DefragCounters::default(),
            used_fragments: 0,
            out: Vec::new(),
        }
    }

    /// Takes the `decoded` summary and `frame` of one packet (`frame` being
    /// the captured bytes that `decoded` indexes) at packet time `ts_ns`.
    /// Packets that are not fragments return at once.
    #[inline]
    pub fn push(&mut self, ts_ns: u64, decoded: &Decoded, frame: &[u8]) -> Defrag<'_> {
        let (id, offset, more) = match decoded.fragment {
            Fragment::None => return Defrag::NotFragment,
            Fragment::First { id } => (id, 0, true),
            Fragment::Later { id, offset, more } => (id, offset, more),
        };
        self.fragment(ts_ns, decoded, frame, id, offset, more)
    }

    /// Drops the datagrams (and tombstones) whose first fragment is more
    /// than the timeout older than packet time `now_ns`.
    pub fn expire(&mut self, now_ns: u64) {
        let timeout = self.config.timeout_ns;
        while let Some((&age, &key)) = self.by_age.first_key_value() {
            if now_ns.saturating_sub(age.0) <= timeout {
                break;
            }
            self.counters.timed_out += 1;
            self.discard(&key);
        }
        while let Some((&age, &key)) = self.tombstones_by_age.first_key_value() {
            if now_ns.saturating_sub(age.0) <= timeout {
                break;
            }
            self.tombstones_by_age.remove(&age);
            self.tombstones.remove(&key);
        }
    }

    /// The input has ended: the datagrams still incomplete are given up
    /// (`incomplete_at_end`) and their fragments counted as dropped, so
    /// that every fragment pushed is accounted for. The defragmenter is
    /// empty afterwards and can be used again.
    pub fn finish(&mut self) {
        while let Some((_, &key)) = self.by_age.first_key_value() {
            self.counters.incomplete_at_end += 1;
            self.discard(&key);
        }
        self.tombstones.clear();
        self.tombstones_by_age.clear();
    }

    pub fn counters(&self) -> &DefragCounters {
        &self.counters
    }

    /// Bytes held: fragment data plus [`FRAGMENT_OVERHEAD`] per fragment.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Datagrams in progress.
    pub fn pending(&self) -> usize {
        self.datagrams.len()
    }

    #[cold]
    #[inline(never)]
    fn fragment(&mut self, ts: u64, decoded: &Decoded, frame: &[u8], id: u32, offset: u16, more: bool) -> Defrag<'_> {
        self.counters.fragments += 1;
        self.expire(ts);
        let Some(piece) = parse(decoded, frame, id, offset, more) else {
            // Not even a datagram to blame.
            self.counters.malformed += 1;
            self.counters.dropped_fragments += 1;
            return Defrag::Held;
        };
        if self.tombstones.contains_key(&piece.key) {
            self.counters.dropped_fragments += 1;
            return Defrag::Held;
        }
        let key = piece.key;
        match self.check(&piece) {
            Verdict::Drop(reason) => {
                self.drop_datagram(ts, key, reason);
                return Defrag::Held;
            }
            Verdict::Duplicate => {
                self.counters.duplicates += 1;
                if !piece.more
                    && let Some(datagram) = self.datagrams.get_mut(&key)
                {
                    datagram.end = Some(piece.end());
                }
            }
            Verdict::New => {
                if !self.insert(ts, piece) {
                    return Defrag::Held;
                }
            }
        }
        self.complete(&key)
    }

    /// What `piece` does to its datagram.
    fn check(&self, piece: &Piece) -> Verdict {
        if piece.len == 0 || (piece.more && !piece.len.is_multiple_of(8)) {
            return Verdict::Drop(Reason::Malformed);
        }
        let header = match piece.key.version {
            IpVersion::V4 => 20,
            IpVersion::V6 => 0,
        };
        if header + piece.end() as usize > MAX_IP_LEN {
            return Verdict::Drop(Reason::TooLarge);
        }
        let truncated = (piece.data.len() as u32) < piece.len;
        let Some(datagram) = self.datagrams.get(&piece.key) else {
            return if truncated {
                Verdict::Drop(Reason::Malformed)
            } else {
                Verdict::New
            };
        };
        let end = piece.end();
        if piece.more {
            if datagram.end.is_some_and(|known| end > known) {
                return Verdict::Drop(Reason::Malformed);
            }
        } else {
            let held_end = datagram.pieces.last_key_value().map_or(0, |(&s, p)| s + p.len() as u32);
            if datagram.end.is_some_and(|known| end != known) || held_end > end {
                return Verdict::Drop(Reason::Malformed);
            }
        }
        if datagram
            .pieces
            .get(&piece.start)
            .is_some_and(|p| p.len() == piece.len as usize)
        {
            // Even a truncated copy: the data is already held.
            return Verdict::Duplicate;
        }
        if truncated {
            return Verdict::Drop(Reason::Malformed);
        }
        if let Some((&start, p)) = datagram.pieces.range(..=piece.start).next_back()
            && start + p.len() as u32 > piece.start
        {
            return Verdict::Drop(Reason::Overlap);
        }
        if let Some((&start, _)) = datagram.pieces.range(piece.start + 1..).next()
            && start < end
        {
            return Verdict::Drop(Reason::Overlap);
        }
        Verdict::New
    }

    /// Adds `piece` to its datagram, making one and making room as needed.
    /// Returns false when it could not be held (its datagram evicted).
    fn insert(&mut self, ts: u64, piece: Piece) -> bool {
        let key = piece.key;
        let charge = piece.len as usize + FRAGMENT_OVERHEAD;
        let exists = self.datagrams.contains_key(&key);
        if !exists {
            while self.datagrams.len() >= self.config.max_datagrams && self.evict_oldest(None) {}
        }
        while self.held + charge > self.config.max_bytes && self.evict_oldest(Some(&key)) {}
        let room =
            self.held + charge <= self.config.max_bytes && (exists || self.datagrams.len() < self.config.max_datagrams);
        if !room {
            // Only this fragment's own datagram is left and it does not fit:
            // it is the one evicted.
            self.counters.evicted += 1;
            self.counters.dropped_fragments += 1;
            self.discard(&key);
            return false;
        }
        let serial = &mut self.serial;
        let by_age = &mut self.by_age;
        let datagram = self.datagrams.entry(key).or_insert_with(|| {
            *serial += 1;
            let age = (ts, *serial);
            by_age.insert(age, key);
            Datagram {
                age,
                pieces: BTreeMap::new(),
                covered: 0,
                end: None,
                header: None,
                charge: 0,
            }
        });
        if piece.start == 0 {
            datagram.header = piece.header;
        }
        if !piece.more {
            datagram.end = Some(piece.end());
        }
        datagram.covered += piece.len;
        datagram.charge += charge;
        datagram.pieces.insert(piece.start, piece.data.into());
        self.held += charge;
        true
    }

    /// Returns the datagram `key` if it is whole, and forgets it.
    fn complete(&mut self, key: &DatagramKey) -> Defrag<'_> {
        let Some(datagram) = self.datagrams.get(key) else {
            return Defrag::Held;
        };
        let (Some(end), Some(header)) = (datagram.end, datagram.header) else {
            return Defrag::Held;
        };
        if datagram.covered != end {
            return Defrag::Held;
        }
        let Some(datagram) = self.remove(key) else {
            return Defrag::Held;
        };
        self.counters.reassembled += 1;
        self.used_fragments += datagram.pieces.len() as u64;
        let out = &mut self.out;
        out.clear();
        match key.version {
            IpVersion::V4 => {
                let total = (20 + end) as u16;
                out.extend_from_slice(&[0x45, header[1]]);
                out.extend_from_slice(&total.to_be_bytes());
                out.extend_from_slice(&header[4..6]);
                out.extend_from_slice(&[0, 0, header[8], key.proto, 0, 0]);
                out.extend_from_slice(&header[12..20]);
                let checksum = internet_checksum(&out[..20]);
                out[10..12].copy_from_slice(&checksum.to_be_bytes());
            }
            IpVersion::V6 => {
                out.extend_from_slice(&header[..4]);
                out.extend_from_slice(&(end as u16).to_be_bytes());
                out.extend_from_slice(&[key.proto, header[7]]);
                out.extend_from_slice(&header[8..40]);
            }
        }
        for data in datagram.pieces.values() {
            out.extend_from_slice(data);
        }
        Defrag::Complete(&self.out)
    }

    /// Drops the datagram `key` (held or not yet started) for `reason`, with
    /// the fragment that caused it, and leaves a tombstone.
    fn drop_datagram(&mut self, ts: u64, key: DatagramKey, reason: Reason) {
        match reason {
            Reason::Overlap => self.counters.overlaps += 1,
            Reason::Malformed => self.counters.malformed += 1,
            Reason::TooLarge => self.counters.too_large += 1,
        }
        self.counters.dropped_fragments += 1;
        let age = match self.discard(&key) {
            Some(age) => age,
            None => {
                self.serial += 1;
                (ts, self.serial)
            }
        };
        if self.config.max_datagrams == 0 {
            return;
        }
        while self.tombstones.len() >= self.config.max_datagrams {
            let Some((_, oldest)) = self.tombstones_by_age.pop_first() else {
                break;
            };
            self.tombstones.remove(&oldest);
        }
        self.tombstones.insert(key, age);
        self.tombstones_by_age.insert(age, key);
    }

    /// Evicts the oldest datagram other than `spare`. Returns false when
    /// there is none.
    fn evict_oldest(&mut self, spare: Option<&DatagramKey>) -> bool {
        let victim = self.by_age.values().find(|k| Some(*k) != spare).copied();
        match victim {
            Some(key) => {
                self.counters.evicted += 1;
                self.discard(&key);
                true
            }
            None => false,
        }
    }

    /// Forgets a datagram, counting its fragments as dropped. Returns its age.
    fn discard(&mut self, key: &DatagramKey) -> Option<Age> {
        let datagram = self.remove(key)?;
        self.counters.dropped_fragments += datagram.pieces.len() as u64;
        Some(datagram.age)
    }

    fn remove(&mut self, key: &DatagramKey) -> Option<Datagram> {
        let datagram = self.datagrams.remove(key)?;
        self.by_age.remove(&datagram.age);
        self.held -= datagram.charge;
        Some(datagram)
    }
}

/// Reads a fragment's identity, extent and data from its own IP headers.
/// `None` when they do not describe a fragment.
fn parse<'f>(decoded: &Decoded, frame: &'f [u8], id: u32, offset: u16, more: bool) -> Option<Piece<'f>> {
    let ip = frame.get(decoded.ip_offset as usize..)?;
    let mut key = DatagramKey {
        src: [0; 16],
        dst: [0; 16],
        id,
        tunnel_id: decoded.key.tunnel_id,
        vlan: decoded.key.vlan,
        proto: 0,
        version: IpVersion::V4,
    };
    let (data_start, data_len) = match ip.first()? >> 4 {
        4 => {
            let header_len = (ip[0] & 0x0f) as usize * 4;
            if header_len < 20 || ip.len() < header_len {
                return None;
            }
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            key.src[..4].copy_from_slice(&ip[12..16]);
            key.dst[..4].copy_from_slice(&ip[16..20]);
            key.proto = ip[9];
            (header_len, total.checked_sub(header_len)?)
        }
        6 => {
            if ip.len() < 40 {
                return None;
            }
            // A jumbogram (payload length 0) cannot be fragmented.
            let end = 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize;
            let fragment_header = ipv6_fragment_header(ip, end)?;
            key.version = IpVersion::V6;
            key.src.copy_from_slice(&ip[8..24]);
            key.dst.copy_from_slice(&ip[24..40]);
            key.proto = ip[fragment_header];
            let data_start = fragment_header + 8;
            (data_start, end.checked_sub(data_start)?)
        }
        _ => return None,
    };
    let header = (offset == 0).then(|| {
        let mut h = [0; 40];
        let n = ip.len().min(40);
        h[..n].copy_from_slice(&ip[..n]);
        h
    });
    let captured = ip.get(data_start..)?;
    Some(Piece {
        key,
        start: offset as u32,
        len: data_len as u32,
        more,
        data: &captured[..captured.len().min(data_len)],
        header,
    })
}

/// Where the first Fragment header is in the IPv6 packet `ip`, walking the
/// unfragmentable part (hop-by-hop, routing and destination options; AH is
/// tolerated) but not past `end`.
fn ipv6_fragment_header(ip: &[u8], end: usize) -> Option<usize> {
    let mut next = ip[6];
    let mut at = 40;
    loop {
        let len = match next {
            44 => {
                return (at + 8 <= end.min(ip.len())).then_some(at);
            }
            0 | 43 | 60 => (*ip.get(at + 1)? as usize + 1) * 8,
            51 => (*ip.get(at + 1)? as usize + 2) * 4,
            _ => return None,
        };
        next = *ip.get(at)?;
        at += len;
        if at > end {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_wire::{LinkType, decode};

    const S: u64 = 1_000_000_000;
    const SRC4: [u8; 4] = [192, 0, 2, 1];
    const DST4: [u8; 4] = [198, 51, 100, 7];

    fn udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = src_port.to_be_bytes().to_vec();
        u.extend_from_slice(&dst_port.to_be_bytes());
        u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        u
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// A raw IPv4 fragment: `offset` in bytes.
    fn ipv4_fragment(id: u16, offset: u16, more: bool, proto: u8, data: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0x10];
        p.extend_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&((offset >> 3) | if more { 0x2000 } else { 0 }).to_be_bytes());
        p.extend_from_slice(&[61, proto, 0, 0]);
        p.extend_from_slice(&SRC4);
        p.extend_from_slice(&DST4);
        p.extend_from_slice(data);
        p
    }

    /// `datagram` (the IP payload) cut into raw IPv4 fragments of `chunk` bytes.
    fn ipv4_fragments(id: u16, proto: u8, datagram: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let pieces: Vec<&[u8]> = datagram.chunks(chunk).collect();
        let last = pieces.len() - 1;
        let frames = pieces.iter().enumerate();
        frames
            .map(|(i, piece)| ipv4_fragment(id, (i * chunk) as u16, i < last, proto, piece))
            .collect()
    }

    /// A raw IPv6 fragment, with a hop-by-hop header before the Fragment
    /// header when asked; `next` is the Fragment header's next header.
    fn ipv6_fragment(hop_by_hop: bool, id: u32, offset: u16, more: bool, next: u8, data: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        if hop_by_hop {
            body.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]);
        }
        body.extend_from_slice(&[next, 0]);
        body.extend_from_slice(&(offset | more as u16).to_be_bytes());
        body.extend_from_slice(&id.to_be_bytes());
        body.extend_from_slice(data);
        let mut ip = vec![0x60, 0x0a, 0xbc, 0xde];
        ip.extend_from_slice(&(body.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[if hop_by_hop { 0 } else { 44 }, 55]);
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        ip.extend_from_slice(&body);
        ip
    }

    fn ipv6_fragments(hop_by_hop: bool, id: u32, next: u8, datagram: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let pieces: Vec<&[u8]> = datagram.chunks(chunk).collect();
        let last = pieces.len() - 1;
        let frames = pieces.iter().enumerate();
        frames
            .map(|(i, piece)| ipv6_fragment(hop_by_hop, id, (i * chunk) as u16, i < last, next, piece))
            .collect()
    }

    /// Pushes one frame of `link`; the reassembled datagram when it completes one.
    fn feed_link(d: &mut Defragmenter, ts: u64, link: LinkType, frame: &[u8]) -> Option<Vec<u8>> {
        let decoded = decode(link, frame).expect("the test frame decodes");
        match d.push(ts, &decoded, frame) {
            Defrag::NotFragment => panic!("not a fragment"),
            Defrag::Held => None,
            Defrag::Complete(bytes) => Some(bytes.to_vec()),
        }
    }

    fn feed(d: &mut Defragmenter, ts: u64, frame: &[u8]) -> Option<Vec<u8>> {
        feed_link(d, ts, LinkType::RawIp, frame)
    }

    fn defrag() -> Defragmenter {
        Defragmenter::new(DefragConfig::default())
    }

    /// The datagram decodes as a whole UDP datagram 5353 -> 53 carrying `payload`.
    fn assert_udp(datagram: &[u8], payload: &[u8]) {
        let d = decode(LinkType::RawIp, datagram).expect("the reassembled datagram decodes");
        assert_eq!(d.fragment, Fragment::None);
        assert_eq!((d.key.proto, d.key.src_port, d.key.dst_port), (17, 5353, 53));
        assert_eq!(d.payload_len as usize, payload.len());
        let start = d.payload_offset as usize;
        assert_eq!(&datagram[start..start + d.payload_captured as usize], payload);
    }

    fn assert_ipv4_header(datagram: &[u8], id: u16) {
        assert_eq!(datagram[0], 0x45);
        assert_eq!(datagram[1], 0x10, "tos kept");
        assert_eq!(u16::from_be_bytes([datagram[2], datagram[3]]) as usize, datagram.len());
        assert_eq!(u16::from_be_bytes([datagram[4], datagram[5]]), id);
        assert_eq!(&datagram[6..8], &[0, 0], "MF and offset cleared");
        assert_eq!(datagram[8], 61, "ttl kept");
        assert_eq!(internet_checksum(&datagram[..20]), 0, "checksum valid");
        assert_eq!(&datagram[12..20], &[SRC4, DST4].concat()[..]);
    }

    /// Every fragment is in exactly one place, and memory is within bounds.
    fn assert_accounted(d: &Defragmenter) {
        let c = d.counters();
        let held: usize = d.datagrams.values().map(|g| g.pieces.len()).sum();
        assert_eq!(
            c.fragments,
            d.used_fragments + c.duplicates + c.dropped_fragments + held as u64,
            "{c:?}"
        );
        let charged: usize = d
            .datagrams
            .values()
            .flat_map(|g| g.pieces.values())
            .map(|p| p.len() + FRAGMENT_OVERHEAD)
            .sum();
        assert_eq!(d.held_bytes(), charged);
        assert!(d.held_bytes() <= d.config.max_bytes);
        assert!(d.pending() <= d.config.max_datagrams);
        assert_eq!(d.by_age.len(), d.pending());
        assert_eq!(d.tombstones.len(), d.tombstones_by_age.len());
        assert!(d.tombstones.len() <= d.config.max_datagrams);
    }

    /// Datagrams still incomplete when the input ends are counted, and so
    /// are their fragments: three first fragments alone, and a flood of
    /// more datagrams than can be held.
    #[test]
    fn fragments_of_datagrams_incomplete_at_the_end_are_counted() {
        let mut d = defrag();
        for id in 0..3 {
            let frames = ipv4_fragments(id, 17, &udp(5353, 53, &data(3000)), 1480);
            assert_eq!(feed(&mut d, S, &frames[0]), None);
        }
        d.finish();
        let c = *d.counters();
        assert_eq!((c.fragments, c.incomplete_at_end, c.dropped_fragments), (3, 3, 3));
        assert_eq!((d.pending(), d.held_bytes()), (0, 0));
        assert_accounted(&d);

        let mut d = Defragmenter::new(DefragConfig {
            max_datagrams: 64,
            ..DefragConfig::default()
        });
        for id in 0..1000u16 {
            let frames = ipv4_fragments(id, 17, &udp(5353, 53, &data(3000)), 1480);
            feed(&mut d, S, &frames[0]);
            feed(&mut d, S, &frames[2]);
        }
        d.finish();
        let c = *d.counters();
        assert_eq!((c.evicted, c.incomplete_at_end), (1000 - 64, 64));
        assert_eq!(c.fragments, c.dropped_fragments, "{c:?}");
        assert_accounted(&d);
    }

    #[test]
    fn non_fragments_pass_through() {
        let frame = ipv4_fragment(1, 0, false, 17, &udp(5353, 53, b"hello"));
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        let mut d = defrag();
        assert_eq!(d.push(0, &decoded, &frame), Defrag::NotFragment);
        assert_eq!(*d.counters(), DefragCounters::default());
    }

    #[test]
    fn ipv4_in_order() {
        let payload = data(3000);
        let frames = ipv4_fragments(0x4242, 17, &udp(5353, 53, &payload), 1480);
        assert_eq!(frames.len(), 3);
        let mut d = defrag();
        assert_eq!(feed(&mut d, S, &frames[0]), None);
        assert_eq!(feed(&mut d, S + 1, &frames[1]), None);
        assert_eq!((d.pending(), d.held_bytes()), (1, 2 * (1480 + FRAGMENT_OVERHEAD)));
        let whole = feed(&mut d, S + 2, &frames[2]).expect("complete");
        assert_eq!(whole.len(), 20 + 8 + 3000);
        assert_ipv4_header(&whole, 0x4242);
        assert_udp(&whole, &payload);
        let c = d.counters();
        assert_eq!((c.fragments, c.reassembled, c.dropped_fragments), (3, 1, 0));
        assert_eq!((d.pending(), d.held_bytes()), (0, 0));
        assert_accounted(&d);
    }

    #[test]
    fn ipv4_reversed_and_shuffled() {
        let payload = data(5000);
        let frames = ipv4_fragments(7, 17, &udp(5353, 53, &payload), 1024);
        let mut d = defrag();
        let mut whole = None;
        for frame in frames.iter().rev() {
            assert_eq!(whole, None, "complete before the last fragment");
            whole = feed(&mut d, S, frame);
        }
        assert_udp(&whole.expect("complete"), &payload);
        for order in [[2, 0, 4, 1, 3], [4, 3, 0, 1, 2]] {
            let mut whole = None;
            for i in order {
                whole = feed(&mut d, S, &frames[i]);
            }
            assert_udp(&whole.expect("complete"), &payload);
        }
        assert_eq!(d.counters().reassembled, 3);
        assert_accounted(&d);
    }

    #[test]
    fn exact_duplicates_are_ignored() {
        let payload = data(3000);
        let frames = ipv4_fragments(9, 17, &udp(5353, 53, &payload), 1480);
        let mut d = defrag();
        for frame in [&frames[0], &frames[1], &frames[1], &frames[0]] {
            assert_eq!(feed(&mut d, S, frame), None);
        }
        // A copy cut by the snap length is a duplicate too: the data is held.
        assert_eq!(feed(&mut d, S, &frames[1][..100]), None);
        assert_eq!(d.held_bytes(), 2 * (1480 + FRAGMENT_OVERHEAD));
        assert_udp(&feed(&mut d, S, &frames[2]).expect("complete"), &payload);
        let c = d.counters();
        assert_eq!((c.duplicates, c.overlaps, c.reassembled, c.fragments), (3, 0, 1, 6));
        assert_accounted(&d);
    }

    #[test]
    fn overlap_drops_the_datagram_until_its_timeout() {
        let payload = data(3000);
        let datagram = udp(5353, 53, &payload);
        let frames = ipv4_fragments(11, 17, &datagram, 1480);
        let mut d = defrag();
        assert_eq!(feed(&mut d, S, &frames[0]), None);
        // Same start, other length: an overlap, not a duplicate.
        let shifted = ipv4_fragment(11, 8, true, 17, &datagram[8..8 + 1480]);
        assert_eq!(feed(&mut d, 2 * S, &shifted), None);
        let c = *d.counters();
        assert_eq!(
            (c.overlaps, c.dropped_fragments, d.pending(), d.held_bytes()),
            (1, 2, 0, 0)
        );
        // The rest of the datagram does not start a new one...
        assert_eq!(feed(&mut d, 3 * S, &frames[1]), None);
        assert_eq!(feed(&mut d, 4 * S, &frames[2]), None);
        assert_eq!((d.counters().dropped_fragments, d.pending()), (4, 0));
        assert_accounted(&d);
        // ... until the dropped datagram's timeout has run out.
        for frame in &frames[..2] {
            assert_eq!(feed(&mut d, 32 * S, frame), None);
        }
        assert_udp(&feed(&mut d, 32 * S, &frames[2]).expect("complete"), &payload);
        // An overlap at the end of a held fragment is one too.
        assert_eq!(feed(&mut d, 33 * S, &frames[1]), None);
        let tail = ipv4_fragment(11, 1480 + 1472, false, 17, &datagram[1480 + 1472..]);
        assert_eq!(feed(&mut d, 33 * S, &tail), None);
        assert_eq!(d.counters().overlaps, 2);
        assert_accounted(&d);
    }

    #[test]
    fn datagrams_time_out_in_packet_time() {
        let payload = data(3000);
        let frames = ipv4_fragments(13, 17, &udp(5353, 53, &payload), 1480);
        let mut d = defrag();
        assert_eq!(feed(&mut d, 0, &frames[0]), None);
        assert_eq!(feed(&mut d, 10 * S, &frames[1]), None);
        d.expire(30 * S);
        assert_eq!(d.pending(), 1);
        d.expire(30 * S + 1);
        let c = *d.counters();
        assert_eq!(
            (c.timed_out, c.dropped_fragments, d.pending(), d.held_bytes()),
            (1, 2, 0, 0)
        );
        // The last fragment alone starts a datagram that cannot complete...
        assert_eq!(feed(&mut d, 31 * S, &frames[2]), None);
        assert_eq!(d.pending(), 1);
        // ... and push expires it on the way.
        let other = ipv4_fragments(14, 17, &udp(5353, 53, &payload), 1480);
        assert_eq!(feed(&mut d, 62 * S, &other[0]), None);
        assert_eq!((d.counters().timed_out, d.pending()), (2, 1));
        assert_accounted(&d);
    }

    #[test]
    fn the_oldest_datagram_is_evicted_when_full() {
        let payload = data(3000);
        let datagram = udp(5353, 53, &payload);
        let frames: Vec<_> = (0..3).map(|id| ipv4_fragments(id, 17, &datagram, 1480)).collect();
        let mut d = Defragmenter::new(DefragConfig {
            max_datagrams: 2,
            ..DefragConfig::default()
        });
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(feed(&mut d, i as u64 * S, &f[0]), None);
        }
        assert_eq!(
            (d.counters().evicted, d.counters().dropped_fragments, d.pending()),
            (1, 1, 2)
        );
        // Datagram 0 lost its first fragment; 1 and 2 complete.
        assert_eq!(feed(&mut d, 4 * S, &frames[1][1]), None);
        assert_udp(&feed(&mut d, 4 * S, &frames[1][2]).expect("complete"), &payload);
        assert_eq!(feed(&mut d, 4 * S, &frames[0][1]), None);
        assert_eq!(feed(&mut d, 4 * S, &frames[0][2]), None);
        assert_eq!(d.pending(), 2);
        assert_accounted(&d);

        // The byte budget evicts the oldest too, but never for its own datagram's sake first.
        let charge = 1480 + FRAGMENT_OVERHEAD;
        let mut d = Defragmenter::new(DefragConfig {
            max_bytes: 2 * charge + 100,
            ..DefragConfig::default()
        });
        assert_eq!(feed(&mut d, S, &frames[0][0]), None);
        assert_eq!(feed(&mut d, 2 * S, &frames[1][0]), None);
        assert_eq!(feed(&mut d, 3 * S, &frames[0][1]), None);
        assert_eq!((d.counters().evicted, d.pending(), d.held_bytes()), (1, 1, 2 * charge));
        assert_udp(&feed(&mut d, 3 * S, &frames[0][2]).expect("complete"), &payload);
        assert_accounted(&d);

        // A fragment that alone exceeds the budget is never held.
        let mut d = Defragmenter::new(DefragConfig {
            max_bytes: 1000,
            ..DefragConfig::default()
        });
        assert_eq!(feed(&mut d, S, &frames[0][0]), None);
        let c = *d.counters();
        assert_eq!(
            (c.evicted, c.dropped_fragments, d.pending(), d.held_bytes()),
            (1, 1, 0, 0)
        );
        assert_accounted(&d);
    }

    #[test]
    fn oversized_datagrams_are_dropped() {
        let mut d = defrag();
        // 20 + 65512 + 8 = 65540 bytes.
        assert_eq!(feed(&mut d, S, &ipv4_fragment(1, 65512, false, 17, &[0; 8])), None);
        // IPv6 counts the payload only: 65520 + 8 fits, 65528 + 16 does not.
        assert_eq!(
            feed(&mut d, S, &ipv6_fragment(false, 1, 65520, false, 17, &[0; 8])),
            None
        );
        assert_eq!(
            feed(&mut d, S, &ipv6_fragment(false, 2, 65528, false, 17, &[0; 16])),
            None
        );
        let c = *d.counters();
        assert_eq!((c.too_large, c.dropped_fragments, d.pending()), (2, 2, 1));
        assert_accounted(&d);
    }

    #[test]
    fn malformed_fragments_drop_their_datagram() {
        let payload = data(3000);
        let datagram = udp(5353, 53, &payload);
        let frames = ipv4_fragments(21, 17, &datagram, 1480);
        let mut d = defrag();
        // A non-last fragment whose length is not a multiple of 8.
        assert_eq!(feed(&mut d, S, &ipv4_fragment(1, 0, true, 17, &datagram[..1484])), None);
        // Data past the known end of the datagram.
        let mut ts = S;
        for id in [2, 3] {
            let f = ipv4_fragments(id, 17, &datagram, 1480);
            assert_eq!(feed(&mut d, ts, &f[2]), None);
            let past = ipv4_fragment(id, 2960, true, 17, &[0; 56]);
            let other_end = ipv4_fragment(id, 1480, false, 17, &[0; 8]);
            assert_eq!(feed(&mut d, ts, if id == 2 { &past } else { &other_end }), None);
            ts += S;
        }
        // A last fragment ending before data already held.
        assert_eq!(feed(&mut d, ts, &ipv4_fragments(4, 17, &datagram, 1480)[1]), None);
        assert_eq!(feed(&mut d, ts, &ipv4_fragment(4, 8, false, 17, &[0; 8])), None);
        assert_eq!(d.counters().malformed, 4);
        // A fragment the snap length cut: its datagram can never complete.
        assert_eq!(feed(&mut d, ts, &frames[0]), None);
        assert_eq!(feed(&mut d, ts, &frames[1][..200]), None);
        assert_eq!(feed(&mut d, ts, &frames[2]), None);
        let c = *d.counters();
        assert_eq!((c.malformed, c.reassembled, d.pending(), d.held_bytes()), (5, 0, 0, 0));
        assert_eq!(c.dropped_fragments, c.fragments);
        assert_accounted(&d);
    }

    #[test]
    fn ipv6_with_and_without_hop_by_hop() {
        let payload = data(4000);
        let datagram = udp(5353, 53, &payload);
        for hop_by_hop in [false, true] {
            let frames = ipv6_fragments(hop_by_hop, 0xdead_beef, 17, &datagram, 1448);
            let mut d = defrag();
            assert_eq!(feed(&mut d, S, &frames[1]), None);
            assert_eq!(feed(&mut d, S, &frames[0]), None);
            let whole = feed(&mut d, S, &frames[2]).expect("complete");
            assert_eq!(whole.len(), 40 + datagram.len());
            assert_eq!(
                &whole[..4],
                &[0x60, 0x0a, 0xbc, 0xde],
                "traffic class and flow label kept"
            );
            assert_eq!(u16::from_be_bytes([whole[4], whole[5]]) as usize, datagram.len());
            assert_eq!(
                (whole[6], whole[7]),
                (17, 55),
                "next header from the Fragment header, hop limit kept"
            );
            assert_eq!(&whole[8..40], &frames[0][8..40]);
            assert_udp(&whole, &payload);
            let decoded = decode(LinkType::RawIp, &whole).unwrap();
            assert_eq!(decoded.key.src_ip().to_string(), "2001:db8::1");
            assert_accounted(&d);
        }
    }

    #[test]
    fn ipv6_fragmentable_extension_headers_are_kept() {
        // Destination options after the Fragment header belong to the
        // fragmentable part: they travel in the first fragment's data.
        let payload = data(3000);
        let mut datagram = vec![17, 0, 1, 4, 0, 0, 0, 0];
        datagram.extend_from_slice(&udp(5353, 53, &payload));
        let frames = ipv6_fragments(true, 5, 60, &datagram, 1448);
        let mut d = defrag();
        let mut whole = None;
        for frame in frames.iter().rev() {
            whole = feed(&mut d, S, frame);
        }
        let whole = whole.expect("complete");
        assert_eq!(whole[6], 60);
        assert_udp(&whole, &payload);
    }

    #[test]
    fn vlans_and_versions_separate_datagrams() {
        let payload = data(2000);
        let datagram = udp(5353, 53, &payload);
        let frames = ipv4_fragments(3, 17, &datagram, 1480);
        let tagged = |vlan: u16, ip: &[u8]| {
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0];
            f.extend_from_slice(&vlan.to_be_bytes());
            f.extend_from_slice(&[0x08, 0x00]);
            f.extend_from_slice(ip);
            f
        };
        let mut d = defrag();
        assert_eq!(feed_link(&mut d, S, LinkType::Ethernet, &tagged(10, &frames[0])), None);
        assert_eq!(feed_link(&mut d, S, LinkType::Ethernet, &tagged(20, &frames[1])), None);
        assert_eq!(feed(&mut d, S, &ipv6_fragments(false, 3, 17, &datagram, 1480)[0]), None);
        assert_eq!(d.pending(), 3);
        let whole = feed_link(&mut d, S, LinkType::Ethernet, &tagged(10, &frames[1])).expect("complete");
        assert_udp(&whole, &payload);
        assert_eq!(d.pending(), 2);
    }

    /// One fragment of datagram `which` (0..4: even ones IPv4, odd IPv6),
    /// of protocol 253 so that its data is never read as a transport header.
    fn arbitrary_fragment(which: u8, offset8: u16, len: usize, more: bool) -> Vec<u8> {
        let offset = offset8 * 8;
        let bytes: Vec<u8> = (offset as usize..offset as usize + len)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        if which.is_multiple_of(2) {
            ipv4_fragment(which as u16, offset, more, 253, &bytes)
        } else {
            ipv6_fragment(which == 3, which as u32, offset, more, 253, &bytes)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn fragment_sequences_never_panic_and_stay_bounded(
            max_datagrams in 0usize..6,
            max_bytes in 0usize..4000,
            timeout in 1u64..10,
            streams in 1u8..5,
            ops in prop::collection::vec(
                (0u8..4, 0u8..20, 1usize..100, 0usize..300, 0u64..6, any::<bool>()),
                0..150,
            ),
        ) {
            let mut d = Defragmenter::new(DefragConfig { max_datagrams, max_bytes, timeout_ns: timeout * S });
            let mut ts = 0;
            let mut sent = [0u16; 4];
            for (which, shape, len, cut, dt, expire) in ops {
                // Each datagram's six slots come in a scrambled order, then again.
                let which = which % streams;
                let n = sent[which as usize];
                sent[which as usize] += 1;
                let slot = (n * if which < 2 { 5 } else { 1 } + which as u16) % 6;
                // Mostly the six 32-byte fragments of a 192-byte datagram,
                // sometimes shifted, longer, odd-sized or cut.
                let (offset8, len, more) = match shape {
                    0..=15 => (slot * 4, 32, slot < 5),
                    16 => (slot * 4, 40, slot < 5),
                    17 => (slot * 4 + 1, 32, slot < 5),
                    18 => (slot * 4, len, !expire),
                    _ => (slot * 4, 32, expire),
                };
                if dt >= 4 {
                    ts += (dt - 3) * S;
                }
                if expire && dt == 3 {
                    d.expire(ts);
                    assert_accounted(&d);
                    continue;
                }
                let mut frame = arbitrary_fragment(which, offset8, len, more);
                let cut = if expire && shape == 18 { cut.min(frame.len()) } else { 0 };
                frame.truncate(frame.len() - cut);
                let Ok(decoded) = decode(LinkType::RawIp, &frame) else { continue };
                match d.push(ts, &decoded, &frame) {
                    // Or the cut took the Fragment header away.
                    Defrag::NotFragment => prop_assert!(offset8 == 0 && !more || cut > 0),
                    Defrag::Held => {}
                    Defrag::Complete(whole) => {
                        let whole = whole.to_vec();
                        let header = if which.is_multiple_of(2) { 20 } else { 40 };
                        let expected: Vec<u8> = (0..whole.len() - header).map(|i| (i * 7 + i / 251) as u8).collect();
                        prop_assert_eq!(&whole[header..], &expected[..]);
                        let decoded = decode(LinkType::RawIp, &whole).expect("reassembled datagrams decode");
                        prop_assert_eq!(decoded.fragment, Fragment::None);
                        prop_assert_eq!(decoded.key.proto, 253);
                    }
                }
                assert_accounted(&d);
            }
            d.finish();
            assert_accounted(&d);
            prop_assert_eq!(d.pending(), 0);
        }

        #[test]
        fn arbitrary_frames_and_summaries_never_panic(
            frame in prop::collection::vec(any::<u8>(), 0..200),
            ip_offset in 0u16..220,
            id in 0u32..3,
            offset in any::<u16>(),
            more in any::<bool>(),
            first in any::<bool>(),
        ) {
            let mut d = Defragmenter::new(DefragConfig { max_datagrams: 2, max_bytes: 4000, timeout_ns: S });
            let decoded = Decoded {
                ip_offset,
                fragment: if first { Fragment::First { id } } else { Fragment::Later { id, offset, more } },
                ..Decoded::default()
            };
            for ts in 0..3 {
                let _ = d.push(ts * S, &decoded, &frame);
                assert_accounted(&d);
            }
        }
    }
}
