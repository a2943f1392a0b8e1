//! Link-layer types (the `LINKTYPE_*` values of pcap and pcapng).

/// The link types Sluice decodes. Values are tcpdump.org's `LINKTYPE_*`
/// numbers; `DLT_*` aliases that some systems write into files (12, 14) are
/// folded into [`LinkType::RawIp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    Null,
    Ethernet,
    /// PPP with the 2-byte protocol field (optionally behind HDLC address/control).
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
}

impl LinkType {
    /// Maps a `LINKTYPE_*` number to a supported link type.
    ///
    /// The upper bits of the pcap header's link-type field carry FCS
    /// information, which is masked off here.
    pub fn from_linktype(value: u32) -> Option<LinkType> {
        Some(match value & 0x03ff_ffff {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            9 | 50 => LinkType::Ppp,
            104 => LinkType::CiscoHdlc,
            12 | 14 | 101 => LinkType::RawIp,
            228 => LinkType::RawIpv4,
            229 => LinkType::RawIpv6,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            105 => LinkType::Ieee80211,
            192 => LinkType::Ppi,
            127 => LinkType::Radiotap,
            _ => return None,
        })
    }

    /// The `LINKTYPE_*` number written to files for this link type.
    pub fn to_linktype(self) -> u32 {
        match self {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::Ppp => 9,
            LinkType::CiscoHdlc => 104,
            LinkType::RawIp => 101,
            LinkType::RawIpv4 => 228,
            LinkType::RawIpv6 => 229,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Ieee80211 => 105,
            LinkType::Ppi => 192,
            LinkType::Radiotap => 127,
        }
    }
}
