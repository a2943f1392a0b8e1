//! Lustre's network layer, LNet, over TCP (port 988): as Lustre's sources
//! define it (lnet/include/uapi/linux/lnet/lnet-idl.h and socklnd), a
//! connection opens with the acceptor's connection request, the magic
//! 0xacce7100, the acceptor protocol's version (1) and the NID the client
//! wants to reach, whose low 32 bits are the server's IPv4 address, then
//! the socket LND's hello, the magic 0x45726963 ("Eric"), the version and
//! the sender's and receiver's NIDs. All are little-endian unless the peer
//! is big-endian, which the magic's byte order tells.

use std::net::IpAddr;

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Lustre",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0x00, 0xac, 0x63, 0x45]),
        udp: ByteSet::NONE,
    },
    // Either magic, in either byte order.
    prefix: Prefix::is(&[Field::u32(0, ACCEPTOR_MAGIC.swap_bytes(), ACCEPTOR_MAGIC)]),
    inspect,
}];

const ACCEPTOR_MAGIC: u32 = 0xacce_7100;
const HELLO_MAGIC: u32 = 0x4572_6963;

fn u32_at(data: &[u8], at: usize, little: bool) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(if little {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

/// The address half of a 64-bit NID at `at`: its low 32 bits.
fn nid_addr(data: &[u8], at: usize, little: bool) -> Option<u32> {
    u32_at(data, if little { at } else { at + 4 }, little)
}

/// The IPv4 address an LNet NID's address half holds, as a number.
fn ipv4(addr: IpAddr) -> Option<u32> {
    match addr {
        IpAddr::V4(a) => Some(u32::from(a)),
        IpAddr::V6(_) => None,
    }
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    // The magics first: every undecided stream whose first byte is one of
    // theirs comes here, and nearly all are turned away by the next few
    // bytes, compared in place rather than as slices of any length.
    let head = &data[..data.len().min(4)];
    let starts = |magic: u32| {
        let is = |bytes: [u8; 4]| head.iter().zip(bytes).all(|(&a, b)| a == b);
        if is(magic.to_le_bytes()) {
            Some(true)
        } else if is(magic.to_be_bytes()) {
            Some(false)
        } else {
            None
        }
    };
    let (acceptor, little) = match (starts(ACCEPTOR_MAGIC), starts(HELLO_MAGIC)) {
        (Some(little), _) => (true, little),
        (None, Some(little)) => (false, little),
        (None, None) => return Verdict::No,
    };
    let (sender, receiver) = match pkt.side {
        Side::Up => (pkt.client, pkt.server),
        Side::Down => (pkt.server, pkt.client),
    };
    let (Some(sender), Some(receiver)) = (ipv4(sender), ipv4(receiver)) else {
        return Verdict::No;
    };
    // The acceptor's request is 16 bytes long; a hello has two NIDs.
    let (Some(version), Some(at_8)) = (u32_at(data, 4, little), nid_addr(data, 8, little)) else {
        return Verdict::Maybe;
    };
    let found = if acceptor {
        // Version 1, and the NID to reach is the receiver's address.
        pkt.side == Side::Up && version == 1 && at_8 == receiver
    } else {
        let Some(at_16) = nid_addr(data, 16, little) else {
            return Verdict::Maybe;
        };
        // The socket LND's hello, versions 2 and 3: the sender's NID, then
        // the receiver's (or none: 0, or LNET_NID_ANY's all ones).
        (2..=3).contains(&version) && at_8 == sender && (at_16 == receiver || at_16 == 0 || at_16 == u32::MAX)
    };
    if found {
        Verdict::Yes(Found::new("Lustre"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    const CLIENT: [u8; 4] = [10, 0, 0, 1];
    const SERVER: [u8; 4] = [10, 0, 0, 2];

    fn nid(addr: [u8; 4]) -> [u8; 8] {
        let mut n = [0; 8];
        n[..4].copy_from_slice(&u32::from_be_bytes(addr).to_le_bytes());
        n[4..].copy_from_slice(&(2u32 << 16).to_le_bytes());
        n
    }

    fn acceptor(to: [u8; 4]) -> Vec<u8> {
        let mut m = ACCEPTOR_MAGIC.to_le_bytes().to_vec();
        m.extend_from_slice(&1u32.to_le_bytes());
        m.extend_from_slice(&nid(to));
        m
    }

    fn hello(from: [u8; 4], to: Option<[u8; 4]>) -> Vec<u8> {
        let mut m = HELLO_MAGIC.to_le_bytes().to_vec();
        m.extend_from_slice(&3u32.to_le_bytes());
        m.extend_from_slice(&nid(from));
        m.extend_from_slice(&to.map_or([0; 8], nid));
        m.extend_from_slice(&12345u32.to_le_bytes());
        m.resize(64, 0);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        let mut tc = TestContext::new();
        inspect(&test_packet(Transport::Tcp, side, 1023, 988, data), &mut tc.ctx())
    }

    const YES: Verdict = Verdict::Yes(Found::new("Lustre"));

    #[test]
    fn acceptor_request_and_hellos() {
        assert_eq!(run(Side::Up, &acceptor(SERVER)), YES);
        assert_eq!(run(Side::Up, &hello(CLIENT, None)), YES);
        assert_eq!(run(Side::Down, &hello(SERVER, Some(CLIENT))), YES);
        let mut big = ACCEPTOR_MAGIC.to_be_bytes().to_vec();
        big.extend_from_slice(&1u32.to_be_bytes());
        big.extend_from_slice(&((2u64 << 48) | u64::from(u32::from_be_bytes(SERVER))).to_be_bytes());
        assert_eq!(run(Side::Up, &big), YES);
        assert_eq!(run(Side::Up, &acceptor(SERVER)[..3]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &acceptor(SERVER)[..10]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &hello(CLIENT, None)[..18]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        // A request for another address, or from the server; another version.
        assert_eq!(run(Side::Up, &acceptor(CLIENT)), Verdict::No);
        assert_eq!(run(Side::Down, &acceptor(CLIENT)), Verdict::No);
        let mut version = acceptor(SERVER);
        version[4] = 2;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        // A hello naming someone else as its sender or its receiver.
        assert_eq!(run(Side::Up, &hello(SERVER, None)), Verdict::No);
        assert_eq!(run(Side::Down, &hello(SERVER, Some([10, 0, 0, 3]))), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 64]), Verdict::No);
        assert_eq!(run(Side::Up, b"\xac\xce\x71\x01"), Verdict::No);
    }
}
