//! The `connections` profile: SF-TAP's benchmark workload (seed 004),
//! short HTTP connections one after another. Each is a three-way
//! handshake, one 1400-byte request, one 1400-byte response and a
//! FIN, FIN-ACK, ACK teardown: 8 packets, so that connections per second
//! through reassembly and delivery can be measured.
//!
//! Connections arrive at exponential gaps and each has its own round-trip
//! time, so a few are open at once and their packets interleave; one heap
//! of due packets keeps the capture in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use etherparse::{PacketBuilder, TcpHeader, TcpOptionElement};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::{FrameSink, GenSummary, L4, MAC_A, MAC_B, START_NS, TruthRow, TruthSink, openings};

const PACKETS_PER_CONNECTION: u64 = 8;
/// TCP payload of the request and of the response, as in SF-TAP's workload.
const PAYLOAD: usize = 1400;

const US: u64 = 1_000;
/// Mean gap between connection starts: 50 K connections per second of
/// packet time, the rate SF-TAP reached.
const ARRIVAL_MEAN_NS: f64 = 20_000.0;
/// Half a connection's round trip: from the capture point to either end and
/// back. Drawn per connection; with the arrivals above about seven
/// connections are open at once.
const HALF_RTT_NS: (u64, u64) = (10 * US, 50 * US);
/// How long the server takes to answer a request.
const SERVER_THINK_NS: (u64, u64) = (5 * US, 40 * US);
/// How long a client takes to send after the packet that let it.
const CLIENT_THINK_NS: (u64, u64) = (US, 5 * US);
const SERVERS: u32 = 16;
/// Client ports 1024 to 65535; the next client address takes over after.
const CLIENT_PORTS: u32 = 65_536 - 1024;

pub(crate) fn generate(
    packets: u64,
    seed: u64,
    sink: &mut impl FrameSink,
    truth: &mut impl TruthSink,
) -> io::Result<GenSummary> {
    Connections::new(seed).run(packets, sink, truth)
}

/// One connection: its ends, initial sequence numbers and when each of its
/// packets crosses the capture point.
struct Connection {
    index: u64,
    client: [u8; 4],
    server: [u8; 4],
    client_port: u16,
    isn: [u32; 2],
    host: usize,
    at: [u64; PACKETS_PER_CONNECTION as usize],
}

/// Which end sends each step, its flags, and whether it carries the
/// request (client) or the response (server).
const STEPS: [(bool, u8, bool); PACKETS_PER_CONNECTION as usize] = [
    (true, SYN, false),
    (false, SYN | ACK, false),
    (true, ACK, false),
    (true, ACK | PSH, true),
    (false, ACK | PSH, true),
    (true, FIN | ACK, false),
    (false, FIN | ACK, false),
    (true, ACK, false),
];

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

impl Connection {
    fn new(index: u64, start: u64, rng: &mut Pcg64Mcg) -> Connection {
        let half = rng.random_range(HALF_RTT_NS.0..=HALF_RTT_NS.1);
        let mut client_think = || rng.random_range(CLIENT_THINK_NS.0..=CLIENT_THINK_NS.1);
        let (think_ack, think_request, think_fin) = (client_think(), client_think(), client_think());
        let server_think = rng.random_range(SERVER_THINK_NS.0..=SERVER_THINK_NS.1);
        let syn = start;
        let syn_ack = syn + half;
        let ack = syn_ack + half + think_ack;
        let request = ack + think_request;
        let response = request + half + server_think;
        let fin = response + half + think_fin;
        let fin_ack = fin + half;
        let last_ack = fin_ack + half;
        let client = 0x0a00_0001 + (index / u64::from(CLIENT_PORTS)) as u32;
        Connection {
            index,
            client: client.to_be_bytes(),
            server: [172, 16, 0, 1 + (index % u64::from(SERVERS)) as u8],
            client_port: 1024 + (index % u64::from(CLIENT_PORTS)) as u16,
            isn: [rng.random(), rng.random()],
            host: rng.random_range(0..openings::HOSTS.len()),
            at: [syn, syn_ack, ack, request, response, fin, fin_ack, last_ack],
        }
    }

    fn truth(&self) -> TruthRow {
        TruthRow {
            src_ip: self.client.into(),
            src_port: self.client_port,
            dst_ip: self.server.into(),
            dst_port: 80,
            l4: L4::Tcp,
            class: "HTTP",
            media: None,
        }
    }

    /// The sequence number direction `dir` (0: client) is at when `step`
    /// is sent: what its earlier packets consumed, one for a SYN or FIN and
    /// `PAYLOAD` for a message. It is also what the other end acknowledges.
    fn seq(&self, dir: usize, step: usize) -> u32 {
        let consumed: u32 = STEPS[..step]
            .iter()
            .filter(|&&(from_client, _, _)| from_client == (dir == 0))
            .map(|&(_, flags, message)| u32::from(flags & (SYN | FIN) != 0) + if message { PAYLOAD as u32 } else { 0 })
            .sum();
        self.isn[dir].wrapping_add(consumed)
    }
}

/// A GET request padded with a header to exactly `PAYLOAD` bytes.
fn request(index: u64, host: &str, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    write!(
        out,
        "GET /objects/{index} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sluice-gen/0.1\r\nAccept: */*\r\n\
         Connection: close\r\nX-Padding: "
    )?;
    let end = b"\r\n\r\n";
    let fill = PAYLOAD - out.len() - end.len();
    out.extend((0..fill).map(|i| b'a' + (i % 26) as u8));
    out.extend_from_slice(end);
    Ok(())
}

/// A 200 response whose body fills it to exactly `PAYLOAD` bytes.
fn response(out: &mut Vec<u8>) -> io::Result<()> {
    let head = |body: usize, out: &mut Vec<u8>| {
        out.clear();
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body}\r\nConnection: close\r\n\
             Server: sluice-gen\r\n\r\n"
        )
    };
    // The length's own digits are part of the head: size it with a guess
    // of the same number of digits, then write it for real.
    head(PAYLOAD, out)?;
    let body = PAYLOAD - out.len();
    head(body, out)?;
    debug_assert_eq!(PAYLOAD - out.len(), body, "as many digits as the guess");
    out.extend((0..body).map(|i| b'A' + (i % 26) as u8));
    Ok(())
}

struct Connections {
    rng: Pcg64Mcg,
    /// (when, connection slot, step), smallest first; the slot breaks ties
    /// reproducibly.
    heap: BinaryHeap<Reverse<(u64, usize, usize)>>,
    open: Vec<Option<Connection>>,
    free: Vec<usize>,
    frame: Vec<u8>,
    request: Vec<u8>,
    response: Vec<u8>,
}

impl Connections {
    fn new(seed: u64) -> Connections {
        let mut response_bytes = Vec::with_capacity(PAYLOAD);
        response(&mut response_bytes).expect("writing to a Vec cannot fail");
        Connections {
            rng: Pcg64Mcg::seed_from_u64(seed),
            heap: BinaryHeap::new(),
            open: Vec::new(),
            free: Vec::new(),
            frame: Vec::with_capacity(1600),
            request: Vec::with_capacity(PAYLOAD),
            response: response_bytes,
        }
    }

    fn open(&mut self, index: u64, start: u64) {
        let connection = Connection::new(index, start, &mut self.rng);
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.open.push(None);
                self.open.len() - 1
            }
        };
        self.heap.push(Reverse((start, slot, 0)));
        self.open[slot] = Some(connection);
    }

    /// Writes `packets` packets: `packets / 8` connections, rounded up, the
    /// packets of the last ones cut where the count ends.
    fn run(mut self, packets: u64, sink: &mut impl FrameSink, truth: &mut impl TruthSink) -> io::Result<GenSummary> {
        let mut summary = GenSummary::default();
        let connections = packets.div_ceil(PACKETS_PER_CONNECTION);
        let mut next_start = START_NS;
        let mut opened = 0;
        while summary.packets < packets {
            // A connection opens once the packets due before its start are
            // out, so only the connections open at once are held.
            while opened < connections && self.heap.peek().is_none_or(|Reverse((at, _, _))| *at >= next_start) {
                self.open(opened, next_start);
                opened += 1;
                let u: f64 = self.rng.random_range(1e-12..1.0);
                next_start += (-u.ln() * ARRIVAL_MEAN_NS) as u64;
            }
            let Reverse((now, slot, step)) = self
                .heap
                .pop()
                .expect("a connection is open until the count is reached");
            let c = self.open[slot].as_ref().expect("a scheduled connection is open");
            if step == 0 {
                summary.flows += 1;
                truth.flow(&c.truth())?;
            }
            if step == 3 {
                request(c.index, openings::HOSTS[c.host], &mut self.request)?;
            }
            let (from_client, flags, message) = STEPS[step];
            let payload: &[u8] = match (message, from_client) {
                (false, _) => &[],
                (true, true) => &self.request,
                (true, false) => &self.response,
            };
            tcp_frame(c, step, from_client, flags, payload, &mut self.frame)?;
            sink.frame(now, &self.frame)?;
            summary.packets += 1;
            summary.bytes += self.frame.len() as u64;
            if step + 1 < STEPS.len() {
                self.heap.push(Reverse((c.at[step + 1], slot, step + 1)));
            } else {
                self.open[slot] = None;
                self.free.push(slot);
            }
        }
        Ok(summary)
    }
}

fn tcp_frame(
    c: &Connection,
    step: usize,
    from_client: bool,
    flags: u8,
    payload: &[u8],
    frame: &mut Vec<u8>,
) -> io::Result<()> {
    let dir = usize::from(!from_client);
    let (src, dst, sport, dport, macs, ttl) = if from_client {
        (c.client, c.server, c.client_port, 80, (MAC_A, MAC_B), 64)
    } else {
        (c.server, c.client, 80, c.client_port, (MAC_B, MAC_A), 52)
    };
    let mut header = TcpHeader::new(sport, dport, c.seq(dir, step), 64_240);
    header.syn = flags & SYN != 0;
    header.fin = flags & FIN != 0;
    header.psh = flags & PSH != 0;
    if flags & ACK != 0 {
        header.ack = true;
        header.acknowledgment_number = c.seq(1 - dir, step);
    }
    if header.syn {
        header
            .set_options(&[
                TcpOptionElement::MaximumSegmentSize(1460),
                TcpOptionElement::Noop,
                TcpOptionElement::WindowScale(7),
            ])
            .map_err(io::Error::other)?;
    }
    frame.clear();
    PacketBuilder::ethernet2(macs.0, macs.1)
        .ipv4(src, dst, ttl)
        .tcp_header(header)
        .write(frame, payload)
        .map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use etherparse::{SlicedPacket, TransportSlice};

    use super::*;
    use crate::Profile;
    use crate::testing::run;

    #[test]
    fn messages_are_exactly_1400_bytes_of_http() {
        let mut out = Vec::new();
        request(123_456, "www.example.com", &mut out).unwrap();
        assert_eq!(out.len(), PAYLOAD);
        assert!(out.starts_with(b"GET /objects/123456 HTTP/1.1\r\nHost: www.example.com\r\n"));
        assert!(out.ends_with(b"\r\n\r\n"));
        response(&mut out).unwrap();
        assert_eq!(out.len(), PAYLOAD);
        let text = std::str::from_utf8(&out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
    }

    /// Every connection is the whole exchange, in order, with sequence and
    /// acknowledgement numbers a reassembler accepts; connections overlap,
    /// and no two share a 4-tuple.
    #[test]
    fn each_connection_is_a_whole_exchange() {
        let out = run(Profile::Connections, 8 * 5_000, 9);
        assert_eq!(out.summary.flows, 5_000);
        assert_eq!(out.truth.len(), 5_000);
        assert_eq!(run(Profile::Connections, 8 * 5_000, 9), out, "same seed, same bytes");
        assert_ne!(run(Profile::Connections, 8 * 5_000, 10).frames, out.frames);

        /// One packet as the test sees it.
        struct Seen {
            from_client: bool,
            flags: u8,
            len: usize,
            seq: u32,
            ack: u32,
        }
        // Per 4-tuple, its packets in order; and how many connections were
        // open at once at most.
        let mut conns: HashMap<_, Vec<Seen>> = HashMap::new();
        let mut open = 0usize;
        let mut most_open = 0;
        for (_, frame) in &out.frames {
            let sliced = SlicedPacket::from_ethernet(frame).unwrap();
            let Some(TransportSlice::Tcp(tcp)) = sliced.transport else {
                panic!("only TCP")
            };
            let from_client = tcp.destination_port() == 80;
            let net = match sliced.net.unwrap() {
                etherparse::NetSlice::Ipv4(ip) => ip,
                _ => panic!("only IPv4"),
            };
            let (src, dst) = (net.header().source_addr(), net.header().destination_addr());
            let key = if from_client {
                (src, tcp.source_port(), dst)
            } else {
                (dst, tcp.destination_port(), src)
            };
            let flags =
                u8::from(tcp.fin()) | u8::from(tcp.syn()) << 1 | u8::from(tcp.psh()) << 3 | u8::from(tcp.ack()) << 4;
            if flags == SYN {
                open += 1;
                most_open = most_open.max(open);
            }
            let packets = conns.entry(key).or_default();
            packets.push(Seen {
                from_client,
                flags,
                len: tcp.payload().len(),
                seq: tcp.sequence_number(),
                ack: tcp.acknowledgment_number(),
            });
            if packets.len() == 8 {
                open -= 1;
            }
        }
        assert_eq!(conns.len(), 5_000, "distinct 4-tuples");
        assert!((2..100).contains(&most_open), "a few connections at once: {most_open}");
        for packets in conns.values() {
            let shape: Vec<_> = packets.iter().map(|p| (p.from_client, p.flags, p.len)).collect();
            assert_eq!(
                shape,
                STEPS
                    .iter()
                    .map(|&(c, f, m)| (c, f, if m { PAYLOAD } else { 0 }))
                    .collect::<Vec<_>>()
            );
            let (isn_c, isn_s) = (packets[0].seq, packets[1].seq);
            assert_eq!(packets[1].ack, isn_c.wrapping_add(1));
            assert_eq!(packets[4].seq, isn_s.wrapping_add(1));
            assert_eq!(packets[4].ack, isn_c.wrapping_add(1 + PAYLOAD as u32));
            assert_eq!(packets[5].seq, isn_c.wrapping_add(1 + PAYLOAD as u32));
            assert_eq!(packets[6].ack, isn_c.wrapping_add(2 + PAYLOAD as u32));
            assert_eq!(packets[7].ack, isn_s.wrapping_add(2 + PAYLOAD as u32));
        }
    }

    #[test]
    fn a_count_short_of_whole_connections_cuts_the_last() {
        let out = run(Profile::Connections, 8 * 10 + 3, 1);
        assert_eq!(out.frames.len(), 83);
        assert_eq!(out.summary.flows, 11);
    }
}
