//! Armagetron Advanced, the open-source light-cycle game, over UDP (its
//! network layer, `src/network/nNetwork.cpp` of the game's sources). A
//! datagram is a run of messages followed by the sender's 16-bit user id
//! (0 before login). Each message is three big-endian 16-bit words, the
//! descriptor (the message's type), the message id and the length of its
//! data in 16-bit words, then the data. Everything is counted in 16-bit
//! words, so a datagram has an even length, and its messages must fill it
//! exactly up to the two-byte sender id.
//!
//! One datagram whose message lengths add up could still be chance, so a
//! flow is named when its second datagram (either direction) parses too:
//! the dissector keeps no state, but the chain asks again only after a
//! `Maybe`, so being asked about a later datagram means every earlier one
//! parsed.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Armagetron",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        // The descriptor's high byte.
        udp: ByteSet::range(0, (MAX_DESCRIPTOR >> 8) as u8),
    },
    prefix: Prefix::ANY,
    inspect,
}];

/// The game's message types number a few hundred; a larger descriptor is
/// not one of its messages.
const MAX_DESCRIPTOR: u16 = 0x03ff;
/// More messages than the game packs into one datagram.
const MAX_MESSAGES: usize = 64;
const HEADER: usize = 6;
const SENDER_ID: usize = 2;

/// The number of messages of `data`, when they fill it exactly.
fn messages(data: &[u8]) -> Option<usize> {
    if data.len() < HEADER + SENDER_ID || !data.len().is_multiple_of(2) {
        return None;
    }
    let end = data.len() - SENDER_ID;
    let mut at = 0;
    let mut count = 0;
    while at < end {
        let header = data.get(at..at + HEADER)?;
        let descriptor = u16::from_be_bytes([header[0], header[1]]);
        let words = usize::from(u16::from_be_bytes([header[4], header[5]]));
        if descriptor == 0 || descriptor > MAX_DESCRIPTOR {
            return None;
        }
        at += HEADER + 2 * words;
        count += 1;
        if count > MAX_MESSAGES {
            return None;
        }
    }
    (at == end).then_some(count)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if messages(pkt.data).is_none() {
        return Verdict::No;
    }
    if pkt.index + pkt.other_index == 0 {
        Verdict::Maybe
    } else {
        Verdict::Yes(Found::new("Armagetron"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, test_packet};
    use super::*;
    use crate::dissectors::TestContext;

    /// A datagram of `messages` (descriptor, message id, data words) from
    /// the sender `sender`.
    fn datagram(messages: &[(u16, u16, &[u16])], sender: u16) -> Vec<u8> {
        let mut out = Vec::new();
        for (descriptor, id, data) in messages {
            out.extend_from_slice(&descriptor.to_be_bytes());
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            for word in *data {
                out.extend_from_slice(&word.to_be_bytes());
            }
        }
        out.extend_from_slice(&sender.to_be_bytes());
        out
    }

    fn run(side: Side, index: u32, other_index: u32, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(Transport::Udp, side, 50000, 4534, data);
        pkt.index = index;
        pkt.other_index = other_index;
        let mut tc = TestContext::new();
        inspect(&pkt, &mut tc.ctx())
    }

    /// A login: one message of type 11 carrying a few words, sent before
    /// the client has a user id.
    fn login() -> Vec<u8> {
        datagram(&[(11, 0, &[0x0001, 0x0002, 0x0000, 0x0008])], 0)
    }

    /// The server's answer: an acknowledgement and a second message.
    fn answer() -> Vec<u8> {
        datagram(&[(1, 7, &[0x0000]), (5, 8, &[0x0003, 0x4142, 0x4300])], 1)
    }

    #[test]
    fn a_login_and_its_answer() {
        assert_eq!(messages(&login()), Some(1));
        assert_eq!(messages(&answer()), Some(2));
        assert_eq!(run(Side::Up, 0, 0, &login()), Verdict::Maybe);
        let yes = Verdict::Yes(Found::new("Armagetron"));
        assert_eq!(run(Side::Down, 0, 1, &answer()), yes);
        assert_eq!(run(Side::Up, 1, 0, &login()), yes);
    }

    #[test]
    fn a_message_without_data() {
        let data = datagram(&[(51, 0, &[])], 0);
        assert_eq!(data.len(), 8);
        assert_eq!(run(Side::Up, 0, 0, &data), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let login = login();
        // A length one word too long, one too short.
        for words in [5u16, 3] {
            let mut data = login.clone();
            data[4..6].copy_from_slice(&words.to_be_bytes());
            assert_eq!(run(Side::Up, 1, 1, &data), Verdict::No, "{words} words");
        }
        // A descriptor of 0, and one past the game's messages.
        for descriptor in [0u16, 0x0400, 0xffff] {
            let mut data = login.clone();
            data[0..2].copy_from_slice(&descriptor.to_be_bytes());
            assert_eq!(run(Side::Up, 1, 1, &data), Verdict::No, "descriptor {descriptor}");
        }
        // A byte more or less: odd lengths, and the sender id cut.
        let mut long = login.clone();
        long.push(0);
        assert_eq!(run(Side::Up, 1, 1, &long), Verdict::No);
        assert_eq!(run(Side::Up, 1, 1, &login[..login.len() - 1]), Verdict::No);
        assert_eq!(run(Side::Up, 1, 1, &login[..login.len() - 2]), Verdict::No);
        // Only a header, or nothing but the sender id.
        assert_eq!(run(Side::Up, 1, 1, &login[..6]), Verdict::No);
        assert_eq!(run(Side::Up, 1, 1, &[0, 1]), Verdict::No);
        // A second message whose length runs past the datagram.
        let mut data = answer();
        data[12..14].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(run(Side::Down, 1, 1, &data), Verdict::No);
        // All zeros, and a run of more messages than a datagram holds.
        assert_eq!(run(Side::Up, 1, 1, &[0u8; 64]), Verdict::No);
        let many: Vec<(u16, u16, &[u16])> = (0..65).map(|i| (1, i, &[][..])).collect();
        assert_eq!(run(Side::Up, 1, 1, &datagram(&many, 0)), Verdict::No);
    }
}
