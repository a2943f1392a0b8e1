//! Ethereum's node discovery, version 4 (devp2p's `discv4` specification, UDP, port
//! 30303 by default). Every packet is `hash || signature || packet-type || packet-data`:
//! a 32-byte Keccak-256 hash of everything after it, a 65-byte secp256k1 signature whose
//! last byte, the recovery id, is 0 or 1, a type from 1 (Ping) to 6 (ENRResponse) and
//! an RLP list filling the rest of the packet, which is at most 1280 bytes. The hash is
//! checked, so one packet decides, on any port; the cheap conditions go first, and the
//! hash is computed only for a packet that meets them all.
//!
//! Discovery v5 masks its header with the recipient's node id, and RLPx, devp2p's TCP
//! transport on the same port, is encrypted from its first message (an ECIES-encrypted
//! auth): neither shows anything to recognise, so those flows are named by the port.

use tiny_keccak::{Hasher, Keccak};

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Ethereum",
    wants: Wants::Udp,
    // The packet opens with a hash.
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const HASH: usize = 32;
const SIGNATURE: usize = 65;
const RECOVERY_ID: usize = HASH + SIGNATURE - 1;
const TYPE: usize = HASH + SIGNATURE;
const BODY: usize = TYPE + 1;
const MAX_PACKET: usize = 1280;
const TYPES: std::ops::RangeInclusive<u8> = 1..=6;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if is_discv4(pkt.data) {
        Verdict::Yes(Found::new("Ethereum"))
    } else {
        Verdict::No
    }
}

/// The length an RLP list header at the start of `data` announces, with the header's.
fn rlp_list_len(data: &[u8]) -> Option<usize> {
    let first = *data.first()?;
    match first {
        0xc0..=0xf7 => Some(1 + usize::from(first - 0xc0)),
        0xf8..=0xff => {
            let len_of_len = usize::from(first - 0xf7);
            let bytes = data.get(1..1 + len_of_len)?;
            // A long form must not have a leading zero nor hold a short length.
            if bytes[0] == 0 || len_of_len > 2 {
                return None;
            }
            let len = bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b));
            (len > 55).then_some(1 + len_of_len + len)
        }
        _ => None,
    }
}

fn is_discv4(data: &[u8]) -> bool {
    if data.len() <= BODY || data.len() > MAX_PACKET {
        return false;
    }
    if data[RECOVERY_ID] > 1 || !TYPES.contains(&data[TYPE]) {
        return false;
    }
    if rlp_list_len(&data[BODY..]) != Some(data.len() - BODY) {
        return false;
    }
    let mut keccak = Keccak::v256();
    keccak.update(&data[HASH..]);
    let mut hash = [0u8; HASH];
    keccak.finalize(&mut hash);
    hash[..] == data[..HASH]
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("Ethereum"));

    /// A packet of `kind` around the RLP `body`, hashed as the specification says; the
    /// signature is arbitrary bytes with recovery id 1 (the hash covers it, nothing here
    /// recovers a key from it).
    fn packet(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0; HASH];
        p.extend((0..SIGNATURE - 1).map(|i| i as u8 ^ 0x5a));
        p.push(1);
        p.push(kind);
        p.extend_from_slice(body);
        seal(&mut p);
        p
    }

    fn seal(p: &mut [u8]) {
        let mut keccak = Keccak::v256();
        keccak.update(&p[HASH..]);
        let mut hash = [0u8; HASH];
        keccak.finalize(&mut hash);
        p[..HASH].copy_from_slice(&hash);
    }

    /// Ping: [version 4, from [ip, udp, tcp], to [ip, udp, tcp], expiration].
    fn ping() -> Vec<u8> {
        let endpoint = |ip: [u8; 4]| {
            let mut e = vec![0xc9, 0x84];
            e.extend_from_slice(&ip);
            e.extend_from_slice(&[0x82, 0x76, 0x5f, 0x82, 0x76, 0x5f]);
            e
        };
        let mut items = vec![0x04];
        items.extend(endpoint([192, 0, 2, 1]));
        items.extend(endpoint([198, 51, 100, 7]));
        items.extend_from_slice(&[0x84, 0x65, 0x43, 0x21, 0x00]);
        let mut body = vec![0xc0 + items.len() as u8];
        body.extend(items);
        packet(1, &body)
    }

    /// Neighbors with a long list (the RLP long form): 4 nodes of 79 bytes each.
    fn neighbors() -> Vec<u8> {
        let node = {
            let mut n = vec![
                0xf8, 0x4d, 0x84, 192, 0, 2, 9, 0x82, 0x76, 0x5f, 0x82, 0x76, 0x5f, 0xb8, 0x40,
            ];
            n.extend([0x33; 64]);
            n
        };
        let mut nodes = Vec::new();
        for _ in 0..4 {
            nodes.extend_from_slice(&node);
        }
        let mut list = vec![0xf9];
        list.extend_from_slice(&(nodes.len() as u16).to_be_bytes());
        list.extend(nodes);
        list.extend_from_slice(&[0x84, 0x65, 0x43, 0x21, 0x00]);
        let mut body = vec![0xf9];
        body.extend_from_slice(&((list.len()) as u16).to_be_bytes());
        body.extend(list);
        packet(4, &body)
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (30303, 30303), data)
    }

    #[test]
    fn discovery_packets_on_any_port() {
        assert_eq!(run(&ping()), YES);
        assert_eq!(run(&neighbors()), YES);
        assert_eq!(
            verdict_of(inspect, Transport::Udp, Side::Down, (40000, 51234), &ping()),
            YES
        );
    }

    #[test]
    fn near_misses() {
        // One bit flipped anywhere breaks the hash.
        let good = ping();
        for at in [0, HASH, RECOVERY_ID - 1, good.len() - 1] {
            let mut p = good.clone();
            p[at] ^= 0x01;
            assert_eq!(run(&p), Verdict::No, "bit at {at}");
        }
        // Hashed right, but a recovery id of 2, type 0 or 7, a list one byte short of the
        // packet or a byte too long, a string instead of a list.
        let mut recovery = good.clone();
        recovery[RECOVERY_ID] = 2;
        seal(&mut recovery);
        assert_eq!(run(&recovery), Verdict::No);
        for kind in [0, 7] {
            let mut p = good.clone();
            p[TYPE] = kind;
            seal(&mut p);
            assert_eq!(run(&p), Verdict::No, "type {kind}");
        }
        let mut longer = good.clone();
        longer.push(0x80);
        seal(&mut longer);
        assert_eq!(run(&longer), Verdict::No);
        let mut shorter = good[..good.len() - 1].to_vec();
        seal(&mut shorter);
        assert_eq!(run(&shorter), Verdict::No);
        let mut string = good.clone();
        string[BODY] = 0x80 + (string.len() - BODY - 1) as u8;
        seal(&mut string);
        assert_eq!(run(&string), Verdict::No);
        // Over the size limit, and the header alone.
        let mut big = packet(4, &[0xf9, 0x05, 0x00]);
        big.resize(BODY + 3 + 0x500, 0x80);
        seal(&mut big);
        assert!(big.len() > MAX_PACKET);
        assert_eq!(run(&big), Verdict::No);
        assert_eq!(run(&good[..BODY]), Verdict::No);
    }
}
