//! Link-layer types (the `LINKTYPE_*` values of pcap and pcapng).

/// The link types Sluice decodes. Values are tcpdump.org's `LINKTYPE_*`
/// numbers; `DLT_*` aliases that some systems write into files (12, 14 for
/// raw IP, 11 for RFC 1483 ATM) are folded into the link type they name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    Null,
    Ethernet,
    /// PPP with the 1- or 2-byte protocol field (optionally behind HDLC address/control).
    Ppp,
    /// Cisco HDLC: address, control, then an Ethernet type.
    CiscoHdlc,
    /// Raw IPv4 or IPv6, told apart by the version nibble.
    RawIp,
    RawIpv4,
    RawIpv6,
    /// OpenBSD loopback: like `Null` but always big-endian.
    Loop,
    /// Linux "cooked" capture, version 1 (16-byte header).
    LinuxSll,
    /// Linux "cooked" capture, version 2 (20-byte header).
    LinuxSll2,
    /// IEEE 802.11 data frames without a radio header.
    Ieee80211,
    /// Per-Packet Information header in front of another link type.
    Ppi,
    /// Radiotap header in front of IEEE 802.11.
    Radiotap,
    /// Prism monitoring header (or AVS) in front of IEEE 802.11.
    Prism,
    /// AVS radio header in front of IEEE 802.11.
    Avs,
    /// SLIP with its 16-byte pseudo-header.
    Slip,
    /// Frame Relay: a Q.922 address, then RFC 2427 or Cisco encapsulation.
    FrameRelay,
    /// Frame Relay behind a direction byte.
    FrameRelayWithDirection,
    /// RFC 1483 LLC/SNAP-encapsulated ATM.
    AtmRfc1483,
    /// IP over InfiniBand (RFC 4391): an Ethernet type and 2 reserved bytes.
    IpOverInfiniband,
    /// Linux netfilter's NFLOG log messages, the packet in a TLV.
    Nflog,
    /// Ethernet with a 4-byte Broadcom switch tag after the source address.
    DsaBroadcom,
    /// Ethernet behind a 4-byte Broadcom switch tag.
    DsaBroadcomPrepend,
    /// Ethernet with a 4-byte Marvell DSA tag after the source address.
    DsaMarvell,
    /// Ethernet with an 8-byte Marvell EDSA tag after the source address.
    DsaMarvellEdsa,
    /// PPP behind a direction byte.
    PppWithDirection,
    /// Cisco HDLC behind a direction byte.
    CiscoHdlcWithDirection,
    /// PPPoE: the session header, then PPP's protocol field.
    PppoE,
    /// An MPLS label stack.
    Mpls,
    /// Ethernet behind Hilscher netANALYZER's 4-byte header.
    NetAnalyzer,
    /// Like `NetAnalyzer`, with the preamble and start-of-frame delimiter.
    NetAnalyzerTransparent,
    /// OpenBSD's pf log: a pfloghdr, then IP.
    Pflog,
    /// OpenBSD's IPsec enc(4) device: a 12-byte header, then IP.
    Enc,
}

/// Every link type with its `LINKTYPE_*` number, in the order of the enum.
const NUMBERS: [(LinkType, u32); 33] = [
    (LinkType::Null, 0),
    (LinkType::Ethernet, 1),
    (LinkType::Ppp, 9),
    (LinkType::CiscoHdlc, 104),
    (LinkType::RawIp, 101),
    (LinkType::RawIpv4, 228),
    (LinkType::RawIpv6, 229),
    (LinkType::Loop, 108),
    (LinkType::LinuxSll, 113),
    (LinkType::LinuxSll2, 276),
    (LinkType::Ieee80211, 105),
    (LinkType::Ppi, 192),
    (LinkType::Radiotap, 127),
    (LinkType::Prism, 119),
    (LinkType::Avs, 163),
    (LinkType::Slip, 8),
    (LinkType::FrameRelay, 107),
    (LinkType::FrameRelayWithDirection, 206),
    (LinkType::AtmRfc1483, 100),
    (LinkType::IpOverInfiniband, 242),
    (LinkType::Nflog, 239),
    (LinkType::DsaBroadcom, 281),
    (LinkType::DsaBroadcomPrepend, 282),
    (LinkType::DsaMarvell, 284),
    (LinkType::DsaMarvellEdsa, 285),
    (LinkType::PppWithDirection, 204),
    (LinkType::CiscoHdlcWithDirection, 205),
    (LinkType::PppoE, 51),
    (LinkType::Mpls, 219),
    (LinkType::NetAnalyzer, 240),
    (LinkType::NetAnalyzerTransparent, 241),
    (LinkType::Pflog, 117),
    (LinkType::Enc, 109),
];

impl LinkType {
    /// Maps a `LINKTYPE_*` number to a supported link type.
    ///
    /// The upper bits of the pcap header's link-type field carry FCS
    /// information, which is masked off here.
    pub fn from_linktype(value: u32) -> Option<LinkType> {
        let value = value & 0x03ff_ffff;
        match value {
            // PPP in HDLC-like framing.
            50 => return Some(LinkType::Ppp),
            12 | 14 => return Some(LinkType::RawIp),
            11 => return Some(LinkType::AtmRfc1483),
            _ => {}
        }
        NUMBERS.iter().find(|(_, n)| *n == value).map(|(link, _)| *link)
    }

    /// The `LINKTYPE_*` number written to files for this link type.
    pub fn to_linktype(self) -> u32 {
        NUMBERS.iter().find(|(link, _)| *link == self).map_or(0, |(_, n)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers of tcpdump.org's list of link-layer header types.
    #[test]
    fn linktype_numbers_round_trip() {
        for (link, number) in NUMBERS {
            assert_eq!(LinkType::from_linktype(number), Some(link), "{number}");
            assert_eq!(link.to_linktype(), number, "{link:?}");
            // FCS length bits (and the flag saying they are present) do not
            // change the link type.
            assert_eq!(LinkType::from_linktype(number | 0x1400_0000), Some(link));
        }
        let aliases = [
            (50, LinkType::Ppp),
            (12, LinkType::RawIp),
            (14, LinkType::RawIp),
            (11, LinkType::AtmRfc1483),
        ];
        for (number, link) in aliases {
            assert_eq!(LinkType::from_linktype(number), Some(link), "{number}");
        }
        // USB, Bluetooth HCI, CAN (SocketCAN), IEEE 802.15.4: no IP to find.
        for number in [189, 201, 227, 195, 2, 3, 147] {
            assert_eq!(LinkType::from_linktype(number), None, "{number}");
        }
        let mut numbers: Vec<u32> = NUMBERS.iter().map(|(_, n)| *n).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), NUMBERS.len(), "a number given twice");
    }
}
