//! The port table: a guess from well-known ports, and exact labels for IP
//! protocols that are an application by themselves.

use sluice_wire::FlowKey;

use crate::{Classifier, Label};

const TCP: u8 = 6;
const UDP: u8 = 17;

/// The ports `service` names, TCP's then UDP's, a bit each, worked out
/// at compile time: most ports of a flood or a scan name none, and a bit
/// says so for less than the match's search.
static NAMED: [[u64; 1024]; 2] = {
    let mut named = [[0; 1024]; 2];
    let mut port = 0usize;
    while port < 1 << 16 {
        let mut t = 0;
        while t < 2 {
            if service([TCP, UDP][t], port as u16).is_some() {
                named[t][port / 64] |= 1 << (port % 64);
            }
            t += 1;
        }
        port += 1;
    }
    named
};

/// `service`, asking the bitmap first.
fn named(proto: u8, port: u16) -> Option<&'static str> {
    let t = match proto {
        TCP => 0,
        UDP => 1,
        _ => return service(proto, port),
    };
    let port_bit = usize::from(port);
    if NAMED[t][port_bit / 64] & (1 << (port_bit % 64)) == 0 {
        return None;
    }
    service(proto, port)
}

/// nDPI's name for the service usually found on `port`.
const fn service(proto: u8, port: u16) -> Option<&'static str> {
    Some(match (proto, port) {
        (TCP, 80 | 8080 | 8000) => "HTTP",
        (TCP, 443 | 8443) => "TLS",
        (UDP, 443) => "QUIC",
        (_, 53) => "DNS",
        (TCP, 22) => "SSH",
        (TCP, 21) => "FTP_CONTROL",
        (TCP, 20) => "FTP_DATA",
        (TCP, 23) => "Telnet",
        (TCP, 25 | 587) => "SMTP",
        (TCP, 465) => "SMTPS",
        (TCP, 110) => "POP3",
        (TCP, 995) => "POPS",
        (TCP, 143) => "IMAP",
        (TCP, 993) => "IMAPS",
        (TCP, 119) => "Usenet",
        (TCP, 179) => "BGP",
        (_, 389) => "LDAP",
        (_, 88) => "Kerberos",
        (TCP, 445) => "SMBv23",
        (_, 137..=139) => "NetBIOS",
        (TCP, 3306) => "MySQL",
        (TCP, 5432) => "PostgreSQL",
        (TCP, 6379) => "Redis",
        (TCP, 1433) => "MsSQL-TDS",
        (TCP, 1521) => "Oracle",
        (TCP, 27017) => "MongoDB",
        (_, 3389) => "RDP",
        (TCP, 5900..=5903) => "VNC",
        (TCP, 1883 | 8883) => "MQTT",
        (TCP, 5222 | 5223) => "Jabber",
        (TCP, 554) | (UDP, 554) => "RTSP",
        (_, 5060 | 5061) => "SIP",
        (TCP, 6881..=6889) | (UDP, 6881..=6889) => "BitTorrent",
        (TCP, 9418) => "Git",
        (TCP, 873) => "RSYNC",
        (TCP, 1723) => "PPTP",
        (_, 1194) => "OpenVPN",
        (UDP, 123) => "NTP",
        (UDP, 67 | 68) => "DHCP",
        (UDP, 546 | 547) => "DHCPV6",
        (UDP, 161 | 162) => "SNMP",
        (UDP, 5353) => "MDNS",
        (UDP, 5355) => "LLMNR",
        (UDP, 1900) => "SSDP",
        (UDP, 500 | 4500) => "IPSec",
        (UDP, 51820) => "WireGuard",
        (UDP, 3478 | 19302) => "STUN",
        (UDP, 514) => "Syslog",
        (UDP, 1812 | 1813) => "Radius",
        (UDP, 69) => "TFTP",
        (_, 427) => "Service_Location_Protocol",
        (UDP, 3544) => "Teredo",
        (UDP, 2152) => "GTP_U",
        (UDP, 2123) => "GTP_C",
        (UDP, 1701) => "L2TP",
        (UDP, 5246 | 5247) => "CAPWAP",
        (TCP, 1080) => "SOCKS",
        (TCP, 3128) => "HTTP_Proxy",
        (TCP, 502) => "Modbus",
        (UDP, 47808) => "BACnet",
        (TCP, 102) => "S7Comm",
        (TCP, 20000) | (UDP, 20000) => "DNP3",
        // IANA's assignments for protocols with a dissector of their own.
        (UDP, 4789) => "VXLAN",
        (UDP, 6343) => "sFlow",
        (UDP, 3784 | 4784) => "BFD",
        (UDP, 5351) => "NAT-PMP",
        (TCP, 6653) => "OpenFlow",
        (UDP, 177) => "XDMCP",
        (TCP, 135) => "DCERPC",
        (TCP, 8009) => "AJP",
        (TCP, 2775) => "SMPP",
        (TCP, 1720) => "H323",
        (TCP, 1935) => "RTMP",
        (UDP, 4569) => "IAX",
        (UDP, 8805) => "PFCP",
        (UDP, 319 | 320) => "PTPv2",
        (UDP, 25826) => "collectd",
        (UDP, 3702) => "WSD",
        (UDP, 9875) => "SAP",
        (TCP, 1099) => "JRMI",
        (TCP, 683) => "Corba",
        (TCP, 3300 | 6789) => "Ceph",
        (UDP, 7400 | 7401) => "RTPS",
        (TCP, 4840) => "OPC-UA",
        (TCP, 4880) => "HiSLIP",
        (TCP, 104) => "Dicom",
        (UDP, 3386) => "GTP_PRIME",
        // And for protocols known by their port alone.
        (TCP, 514) => "RSH",
        (TCP, 1352) => "LotusNotes",
        (UDP, 9987) => "TeamSpeak",
        (_, 2190) => "TiVoConnect",
        (UDP, 8611..=8614) => "BJNP",
        (_, 64738) => "Mumble",
        (_, 5094) => "HART-IP",
        (UDP, 9600) => "FINS",
        (UDP, 8116) => "CPHA",
        (UDP, 5678) => "Mikrotik",
        (_, 655) => "TINC",
        (TCP, 210) => "Z3950",
        (UDP, 4341 | 4342) => "LISP",
        (TCP, 988) => "Lustre",
        (_, 44818) | (UDP, 2222) => "EthernetIP",
        (UDP, 17224 | 17225) => "TRDP",
        (TCP, 61616) => "OpenWire",
        (_, 902) => "VMware",
        (TCP, 30303) => "Ethereum",
        (TCP, 18080) => "Monero",
        (_, 1153) => "ANSI_C1222",
        (UDP, 1044) => "UFTP",
        _ => return None,
    })
}

/// IP protocols that name the application by themselves.
fn ip_protocol(proto: u8) -> Option<&'static str> {
    Some(match proto {
        1 => "ICMP",
        2 => "IGMP",
        4 => "IP_in_IP",
        8 => "EGP",
        47 => "GRE",
        50 | 51 => "IPSec",
        58 => "ICMPV6",
        89 => "OSPF",
        103 => "IP_PIM",
        112 => "VRRP",
        113 => "PGM",
        132 => "SCTP",
        _ => return None,
    })
}

/// Labels a flow from its key alone: exactly for protocol-level
/// applications, as a low-confidence guess from the server port (or, for
/// flows picked up mid-stream, either port) otherwise.
pub fn port_label(key: &FlowKey) -> Option<(Label, Classifier, f32)> {
    if let Some(name) = ip_protocol(key.proto) {
        return Some((
            Label {
                master: name,
                app: None,
            },
            Classifier::Protocol,
            1.0,
        ));
    }
    let name = named(key.proto, key.dst_port).or_else(|| named(key.proto, key.src_port))?;
    Some((
        Label {
            master: name,
            app: None,
        },
        Classifier::Port,
        0.3,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(proto: u8, src_port: u16, dst_port: u16) -> FlowKey {
        FlowKey {
            proto,
            src_port,
            dst_port,
            ..FlowKey::default()
        }
    }

    #[test]
    fn server_port_wins_over_client_port() {
        let (label, classifier, _) = port_label(&key(TCP, 53, 443)).unwrap();
        assert_eq!(label.master, "TLS");
        assert_eq!(classifier, Classifier::Port);
    }

    #[test]
    fn midstream_flows_fall_back_to_the_source_port() {
        assert_eq!(port_label(&key(UDP, 123, 40000)).unwrap().0.master, "NTP");
        assert!(port_label(&key(UDP, 40001, 40000)).is_none());
    }

    /// The bitmap in front of the match names what the match names, on
    /// every port of every transport the table knows.
    #[test]
    fn the_bitmap_agrees_with_the_match() {
        for proto in [TCP, UDP, 132, 0] {
            for port in 0..=u16::MAX {
                assert_eq!(named(proto, port), service(proto, port), "{proto}/{port}");
            }
        }
    }

    #[test]
    fn protocol_level_applications_are_exact() {
        let (label, classifier, confidence) = port_label(&key(58, 0, 0)).unwrap();
        assert_eq!(
            (label.master, classifier, confidence),
            ("ICMPV6", Classifier::Protocol, 1.0)
        );
    }
}
