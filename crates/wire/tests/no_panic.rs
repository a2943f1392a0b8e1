//! No sequence of bytes may make the decoder panic, for any link type.

use proptest::prelude::*;
use sluice_wire::{LinkType, decode};

const LINK_TYPES: [u32; 13] = [0, 1, 9, 101, 104, 105, 108, 113, 127, 192, 228, 229, 276];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn arbitrary_bytes(link in prop::sample::select(&LINK_TYPES[..]), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let link = LinkType::from_linktype(link).unwrap();
        let _ = decode(link, &bytes);
    }

    /// Mostly-valid Ethernet/IPv4 headers reach the deeper decoders, which
    /// random bytes alone rarely do.
    #[test]
    fn plausible_ipv4(tail in prop::collection::vec(any::<u8>(), 0..120), proto in prop::sample::select(&[1u8, 4, 6, 17, 41, 47, 58, 132][..]), port in prop::sample::select(&[2152u16, 4789, 53][..])) {
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
}
