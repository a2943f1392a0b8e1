//! No sequence of bytes may make the decoder panic, for any link type.

use proptest::prelude::*;
use sluice_wire::{LinkType, decode};

/// Every link type the decoder knows.
fn link_types() -> Vec<LinkType> {
    (0..1024).filter_map(LinkType::from_linktype).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn arbitrary_bytes(link in prop::sample::select(link_types()), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(link, &bytes);
    }

    /// Mostly-valid Ethernet/IPv4 headers reach the deeper decoders, which
    /// random bytes alone rarely do.
    #[test]
    fn plausible_ipv4(tail in prop::collection::vec(any::<u8>(), 0..120), proto in prop::sample::select(&[1u8, 4, 6, 17, 41, 47, 58, 132][..]), port in prop::sample::select(&[2152u16, 4789, 4790, 6081, 53][..])) {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 200, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        if proto == 17 {
            frame.extend_from_slice(&[0x30, 0x39]);
            frame.extend_from_slice(&port.to_be_bytes());
            frame.extend_from_slice(&[0, 100, 0, 0]);
        }
        frame.extend_from_slice(&tail);
        let _ = decode(LinkType::Ethernet, &frame);
    }

    /// Ethernet types whose headers the decoder walks (tags, labels,
    /// PPPoE, NSH, MACsec), each before random bytes.
    #[test]
    fn ethernet_layers(ethertype in prop::sample::select(&[0x8100u16, 0x88a8, 0x8847, 0x8864, 0x894f, 0x88e5, 0x893f, 0x8926][..]), tail in prop::collection::vec(any::<u8>(), 0..120)) {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(&tail);
        let _ = decode(LinkType::Ethernet, &frame);
    }
}
