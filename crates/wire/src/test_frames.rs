//! Hand-built frames for the decoder's unit tests.

pub struct TcpSpec<'a> {
    pub flags: u8,
    pub options: &'a [u8],
    pub payload: &'a [u8],
}

impl Default for TcpSpec<'_> {
    fn default() -> Self {
        TcpSpec {
            flags: crate::tcp_flags::ACK,
            options: &[],
            payload: b"",
        }
    }
}

const MACS: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MACS.to_vec();
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(payload);
    p
}

pub fn eth_ipv4_tcp(spec: &TcpSpec) -> Vec<u8> {
    let header_len = 20 + spec.options.len();
    let mut tcp = vec![0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0];
    tcp.push(((header_len / 4) as u8) << 4);
    tcp.push(spec.flags);
    tcp.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(spec.options);
    tcp.extend_from_slice(spec.payload);
    ethernet(0x0800, &ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp))
}

/// An IPv6 UDP datagram fragment behind a hop-by-hop header. `offset` is in
/// 8-byte units; the first fragment carries the UDP header.
pub fn eth_ipv6_udp_fragment(offset: u16, more: bool, id: u32) -> Vec<u8> {
    let mut body = vec![44, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop, next = fragment
    body.extend_from_slice(&[17, 0]);
    body.extend_from_slice(&((offset << 3) | more as u16).to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    if offset == 0 {
        body.extend_from_slice(&[0x14, 0xe9, 0, 53, 0, 16, 0, 0]);
    }
    body.extend_from_slice(&[0xaa; 8]);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(body.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 64]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0].repeat(4));
    ip.extend_from_slice(&body);
    ethernet(0x86dd, &ip)
}

/// An IPv4 fragment: `offset` in bytes (a multiple of 8), `data` the
/// fragment's share of the datagram (the transport header included when
/// `offset` is 0).
pub fn eth_ipv4_fragment(proto: u8, id: u16, offset: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut ip = ipv4(proto, [10, 0, 0, 1], [10, 0, 0, 2], data);
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6..8].copy_from_slice(&((offset >> 3) | if more { 0x2000 } else { 0 }).to_be_bytes());
    ethernet(0x0800, &ip)
}

/// An IPv6 fragment straight after the fixed header: `next` is the Fragment
/// header's next header, `offset` in bytes.
pub fn eth_ipv6_fragment(next: u8, id: u32, offset: u16, more: bool, data: &[u8]) -> Vec<u8> {
    let mut body = vec![next, 0];
    body.extend_from_slice(&(offset | more as u16).to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(data);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(body.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[44, 64]);
    ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8].repeat(4));
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0].repeat(4));
    ip.extend_from_slice(&body);
    ethernet(0x86dd, &ip)
}

fn udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = vec![0x30, 0x39];
    u.extend_from_slice(&dst_port.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn outer_ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ethernet(0x0800, &ipv4(proto, [192, 0, 2, 1], [192, 0, 2, 2], payload))
}

pub fn vxlan(inner_ethernet: &[u8], vni: u32) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(inner_ethernet);
    outer_ipv4(17, &udp(4789, &v))
}

pub fn gtpu(inner_ip: &[u8]) -> Vec<u8> {
    // With the sequence flag set and one PDU-session extension header.
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((inner_ip.len() + 12) as u16).to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 0x85, 1, 0x10, 0x05, 0]);
    g.extend_from_slice(inner_ip);
    outer_ipv4(17, &udp(2152, &g))
}

pub fn gre(inner_ip: &[u8]) -> Vec<u8> {
    let mut g = vec![0x20, 0, 0x08, 0, 0, 0, 0, 7]; // key present
    g.extend_from_slice(inner_ip);
    outer_ipv4(47, &g)
}

pub fn ipip(inner_ip: &[u8]) -> Vec<u8> {
    outer_ipv4(4, inner_ip)
}
