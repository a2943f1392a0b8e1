//! The contract between the classifier chain and its protocol dissectors.
//!
//! A dissector is a plain function over the first bytes of a flow. It keeps
//! no state of its own: for TCP the chain hands it the in-order head of the
//! direction's byte stream, grown by each new segment, so a message split
//! over several segments is simply seen again, longer. This file depends on
//! nothing else in the crate so that a dissector and its tests can be built
//! on their own.

use std::net::IpAddr;

/// The transport a packet came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
}

/// Which way a packet goes. The client is the side that opened the flow
/// (the SYN's sender for TCP, the first packet's sender otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// What a dissector is shown of one packet.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    pub transport: Transport,
    pub side: Side,
    pub client: IpAddr,
    pub client_port: u16,
    pub server: IpAddr,
    pub server_port: u16,
    /// UDP: this datagram's payload. TCP: this direction's stream from its
    /// first byte, including this segment, capped at the chain's head size
    /// (4 KiB by default). Never empty.
    pub data: &'a [u8],
    /// Payload-carrying packets this direction had before this one.
    pub index: u32,
    /// Payload-carrying packets the other direction has had so far.
    pub other_index: u32,
}

impl Packet<'_> {
    /// The port of the sender of this packet.
    pub fn src_port(&self) -> u16 {
        match self.side {
            Side::Up => self.client_port,
            Side::Down => self.server_port,
        }
    }

    pub fn dst_port(&self) -> u16 {
        match self.side {
            Side::Up => self.server_port,
            Side::Down => self.client_port,
        }
    }

    /// Either port equals `port`.
    pub fn has_port(&self, port: u16) -> bool {
        self.client_port == port || self.server_port == port
    }
}

/// A dissector's finding: nDPI's protocol name and, when the protocol
/// itself names it, the application on top (`Master.App`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub master: &'static str,
    pub app: Option<&'static str>,
    /// Show me this flow's later packets too (within the chain's depth),
    /// to fill metadata from the other direction or refine the label.
    pub more: bool,
    /// Keep showing me this flow past the chain's depth, up to its follow
    /// limit: control sessions announce other flows' ports all along (an
    /// FTP PASV per transfer, a SIP re-INVITE per call).
    pub follow: bool,
}

impl Found {
    pub const fn new(master: &'static str) -> Found {
        Found {
            master,
            app: None,
            more: false,
            follow: false,
        }
    }

    pub const fn more(mut self) -> Found {
        self.more = true;
        self
    }

    pub const fn follow(mut self) -> Found {
        self.more = true;
        self.follow = true;
        self
    }

    pub const fn app(mut self, app: &'static str) -> Found {
        self.app = Some(app);
        self
    }
}

/// A dissector's answer for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not this protocol: the chain will not ask again for this flow.
    No,
    /// Could be: show me the next packet. Only while the bytes that have
    /// arrived could still begin the protocol: a field that rules it out
    /// calls for `No` at once, whole message or not, or the flow stays
    /// inspected, its state held, to the chain's depth.
    Maybe,
    /// It is. After a `Yes` with `more`, the chain keeps calling only this
    /// dissector; a later `Yes` replaces the label, `No` or `Maybe` stop it.
    Yes(Found),
}

/// Longest text kept in any metadata field; longer values are cut.
pub const MAX_TEXT: usize = 256;
/// Most list entries kept in any metadata field (answers, commands).
pub const MAX_LIST: usize = 8;

/// A metadata text: printable ASCII, kept inline up to 24 bytes.
pub type Text = compact_str::CompactString;

/// Protocol metadata of a flow, filled by the dissector that decided it.
/// Every field is optional; texts are printable ASCII, cut to `MAX_TEXT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    /// The server name the client asked for: HTTP Host, TLS/QUIC SNI, DNS
    /// query name, DHCP host name, SIP request URI host, ...
    pub host: Option<Text>,
    pub http_method: Option<Text>,
    pub http_uri: Option<Text>,
    pub http_user_agent: Option<Text>,
    pub http_status: Option<u16>,
    pub http_content_type: Option<Text>,
    /// `TLSv1.2`, `TLSv1.3`, `DTLSv1.2`, ...: the version the server chose
    /// when its hello was seen, else the client's.
    pub tls_version: Option<Text>,
    /// ALPN protocols the client offered, comma-separated.
    pub tls_alpn: Option<Text>,
    /// JA3 client fingerprint, lowercase hex MD5.
    pub ja3: Option<Fingerprint>,
    /// JA4 client fingerprint (`t13d1516h2_8daaf6152771_b186095e22b6`).
    pub ja4: Option<Fingerprint>,
    /// `v1`, `v2`, `draft-29`, or the version in hex.
    pub quic_version: Option<Text>,
    /// DNS (and mDNS/LLMNR) query type of the first question.
    pub dns_qtype: Option<u16>,
    pub dns_rcode: Option<u8>,
    /// Answer data: addresses and names, in order.
    pub dns_answers: Vec<Text>,
    /// First line the client sent that identifies its software (SSH
    /// banner, ...).
    pub client_banner: Option<Text>,
    /// First line the server sent (SSH banner, SMTP/FTP/POP3/IMAP greeting,
    /// MySQL version, ...).
    pub server_banner: Option<Text>,
    /// Commands or methods the client sent (SMTP `EHLO`, FTP `USER`, SIP
    /// `INVITE`, ...), the verb and its argument.
    pub commands: Vec<Text>,
}

impl Metadata {
    /// True when no field is set; cheaper than comparing with a default,
    /// which builds (and drops) one.
    pub fn is_empty(&self) -> bool {
        let Metadata {
            host,
            http_method,
            http_uri,
            http_user_agent,
            http_status,
            http_content_type,
            tls_version,
            tls_alpn,
            ja3,
            ja4,
            quic_version,
            dns_qtype,
            dns_rcode,
            dns_answers,
            client_banner,
            server_banner,
            commands,
        } = self;
        [
            host,
            http_method,
            http_uri,
            http_user_agent,
            http_content_type,
            tls_version,
            tls_alpn,
            quic_version,
            client_banner,
            server_banner,
        ]
        .iter()
        .all(|t| t.is_none())
            && ja3.is_none()
            && ja4.is_none()
            && http_status.is_none()
            && dns_qtype.is_none()
            && dns_rcode.is_none()
            && dns_answers.is_empty()
            && commands.is_empty()
    }

    /// Empties every field, keeping the lists' capacity for the next flow.
    pub fn clear(&mut self) {
        let mut dns_answers = std::mem::take(&mut self.dns_answers);
        let mut commands = std::mem::take(&mut self.commands);
        dns_answers.clear();
        commands.clear();
        *self = Metadata {
            dns_answers,
            commands,
            ..Metadata::default()
        };
    }

    /// Printable ASCII of `bytes`, other bytes as `.`, cut to `MAX_TEXT`.
    pub fn text(bytes: &[u8]) -> Text {
        // Host names and URIs of every flow come through here, and most
        // are short enough to be kept inline, with no allocation: their
        // buffer is as short, where zeroing one of `MAX_TEXT` bytes took
        // more instructions than the rest of this function.
        let bytes = &bytes[..bytes.len().min(MAX_TEXT)];
        if bytes.len() <= INLINE_TEXT {
            printable::<INLINE_TEXT>(bytes)
        } else {
            printable::<MAX_TEXT>(bytes)
        }
    }

    /// Sets `field` from `bytes` unless it is already set.
    pub fn set_once(field: &mut Option<Text>, bytes: &[u8]) {
        if field.is_none() {
            *field = Some(Metadata::text(bytes));
        }
    }

    /// Appends to a list field unless it already holds `MAX_LIST` entries.
    pub fn push(list: &mut Vec<Text>, bytes: &[u8]) {
        if list.len() < MAX_LIST {
            list.push(Metadata::text(bytes));
        }
    }
}

/// The longest [`Text`] kept inline.
const INLINE_TEXT: usize = std::mem::size_of::<Text>();

/// `bytes` (at most `N`) with those not printable ASCII replaced by `.`,
/// in a replacing pass the compiler vectorises, into a buffer on the stack.
#[allow(unsafe_code)]
fn printable<const N: usize>(bytes: &[u8]) -> Text {
    let mut buffer = [0u8; N];
    let printable = &mut buffer[..bytes.len()];
    for (out, &b) in printable.iter_mut().zip(bytes) {
        *out = if b.wrapping_sub(0x20) < 0x5f { b } else { b'.' };
    }
    // SAFETY: printable ASCII, made so above, is UTF-8; validating it
    // again would be work done for every text of every flow.
    unsafe { Text::from_utf8_unchecked(printable) }
}

/// A flow that a control flow announced (FTP PASV, SIP/SDP media, RTSP
/// transport): the next flow to or from this address and port gets the
/// label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub addr: IpAddr,
    pub port: u16,
    pub transport: Transport,
    pub master: &'static str,
    pub app: Option<&'static str>,
}

/// Where a dissector writes what it learns besides its verdict.
#[derive(Debug)]
pub struct Context<'a> {
    pub meta: MetadataWriter<'a>,
    pub expect: &'a mut Vec<Expectation>,
    /// Addresses a DNS answer gave for the name in `meta.host`: the chain
    /// remembers them with that name's service, for flows to them that show
    /// no name of their own.
    pub resolved: &'a mut Vec<IpAddr>,
}

impl<'a> Context<'a> {
    pub fn new(meta: &'a mut Metadata, expect: &'a mut Vec<Expectation>, resolved: &'a mut Vec<IpAddr>) -> Self {
        Context {
            meta: MetadataWriter { meta, written: false },
            expect,
            resolved,
        }
    }
}

/// A TLS client fingerprint as text: JA3's 32 hex digits or JA4's 36
/// characters. Kept inline, where a [`Text`] this long is a heap
/// allocation: a worker meets the same few hellos again and again (the
/// TLS dissector remembers their fingerprints), and copying one costs less
/// than allocating it for every flow.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    len: u8,
    text: [u8; Fingerprint::CAPACITY],
}

impl Fingerprint {
    pub const CAPACITY: usize = 36;

    /// `None` when `text` is longer than a JA4 or not printable ASCII.
    pub fn new(text: &str) -> Option<Fingerprint> {
        let bytes = text.as_bytes();
        if bytes.len() > Fingerprint::CAPACITY || !bytes.iter().all(u8::is_ascii_graphic) {
            return None;
        }
        let mut fingerprint = Fingerprint {
            len: bytes.len() as u8,
            text: [0; Fingerprint::CAPACITY],
        };
        fingerprint.text[..bytes.len()].copy_from_slice(bytes);
        Some(fingerprint)
    }
}

impl std::ops::Deref for Fingerprint {
    type Target = str;

    fn deref(&self) -> &str {
        // Printable ASCII by construction.
        std::str::from_utf8(&self.text[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// A dissector's metadata that remembers whether it was written to. Each
/// undecided flow meets dozens of dissectors, and what an undecided one
/// noted must be wiped before the next: asking this flag is one load,
/// where looking at every field was some forty instructions a dissector.
#[derive(Debug)]
pub struct MetadataWriter<'a> {
    meta: &'a mut Metadata,
    written: bool,
}

impl MetadataWriter<'_> {
    /// True once the metadata was borrowed mutably, whether or not a field
    /// changed.
    pub fn written(&self) -> bool {
        self.written
    }
}

impl std::ops::Deref for MetadataWriter<'_> {
    type Target = Metadata;

    fn deref(&self) -> &Metadata {
        self.meta
    }
}

impl std::ops::DerefMut for MetadataWriter<'_> {
    fn deref_mut(&mut self) -> &mut Metadata {
        self.written = true;
        self.meta
    }
}

/// Which transports a dissector wants to see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wants {
    Tcp,
    Udp,
    Both,
}

impl Wants {
    pub fn accepts(self, transport: Transport) -> bool {
        matches!(
            (self, transport),
            (Wants::Both, _) | (Wants::Tcp, Transport::Tcp) | (Wants::Udp, Transport::Udp)
        )
    }
}

/// A set of byte values, built at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    pub const ANY: ByteSet = ByteSet([u64::MAX; 4]);
    pub const NONE: ByteSet = ByteSet([0; 4]);

    /// The bytes of `bytes`.
    pub const fn of(bytes: &[u8]) -> ByteSet {
        let mut set = ByteSet::NONE;
        let mut i = 0;
        while i < bytes.len() {
            set = set.with(bytes[i]);
            i += 1;
        }
        set
    }

    /// The bytes from `first` to `last`, both included.
    pub const fn range(first: u8, last: u8) -> ByteSet {
        let mut set = ByteSet::NONE;
        let mut b = first as u16;
        while b <= last as u16 {
            set = set.with(b as u8);
            b += 1;
        }
        set
    }

    pub const fn with(self, b: u8) -> ByteSet {
        let mut words = self.0;
        words[(b >> 6) as usize] |= 1 << (b & 63);
        ByteSet(words)
    }

    pub const fn union(self, other: ByteSet) -> ByteSet {
        let (a, b) = (self.0, other.0);
        ByteSet([a[0] | b[0], a[1] | b[1], a[2] | b[2], a[3] | b[3]])
    }

    pub const fn contains(self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }
}

/// Per transport, the first bytes of a direction's data (a TCP stream's
/// head, a UDP datagram) that a dissector can answer anything but `No` to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstByte {
    pub tcp: ByteSet,
    pub udp: ByteSet,
}

impl FirstByte {
    /// The first byte proves nothing (a random transaction id, a length).
    pub const ANY: FirstByte = FirstByte::is(ByteSet::ANY);

    /// The same set on either transport.
    pub const fn is(set: ByteSet) -> FirstByte {
        FirstByte { tcp: set, udp: set }
    }

    pub const fn on(self, transport: Transport) -> ByteSet {
        match transport {
            Transport::Tcp => self.tcp,
            Transport::Udp => self.udp,
        }
    }
}

/// A field of the first [`Prefix::BYTES`] bytes of a direction's data (a TCP
/// stream's head, a UDP datagram): `width` bytes (1, 2 or 4) from `offset`,
/// big-endian unless `little`, ANDed with `mask`, must lie in `min..=max`
/// once the data holds `from` bytes (the field's end, unless the dissector
/// waits for more before it reads the field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: u8,
    pub width: u8,
    pub little: bool,
    pub from: u8,
    pub mask: u32,
    pub min: u32,
    pub max: u32,
}

impl Field {
    /// The byte at `offset` equals `value`.
    pub const fn byte(offset: u8, value: u8) -> Field {
        Field::u8(offset, value, value)
    }

    /// The byte at `offset` lies in `min..=max`.
    pub const fn u8(offset: u8, min: u8, max: u8) -> Field {
        Field::masked(offset, 1, 0xFF, min as u32, max as u32)
    }

    /// The 16-bit number at `offset` lies in `min..=max`.
    pub const fn u16(offset: u8, min: u16, max: u16) -> Field {
        Field::masked(offset, 2, 0xFFFF, min as u32, max as u32)
    }

    /// The 32-bit number at `offset` lies in `min..=max`.
    pub const fn u32(offset: u8, min: u32, max: u32) -> Field {
        Field::masked(offset, 4, u32::MAX, min, max)
    }

    /// The little-endian 16-bit number at `offset` lies in `min..=max`.
    pub const fn le16(offset: u8, min: u16, max: u16) -> Field {
        Field::u16(offset, min, max).little()
    }

    /// The little-endian 32-bit number at `offset` lies in `min..=max`.
    pub const fn le32(offset: u8, min: u32, max: u32) -> Field {
        Field::u32(offset, min, max).little()
    }

    /// The four bytes at `offset` are `bytes`.
    pub const fn bytes(offset: u8, bytes: &[u8; 4]) -> Field {
        let value = u32::from_be_bytes(*bytes);
        Field::u32(offset, value, value)
    }

    /// The bits of `mask` of the `width`-byte number at `offset` lie in
    /// `min..=max`.
    pub const fn masked(offset: u8, width: u8, mask: u32, min: u32, max: u32) -> Field {
        assert!(matches!(width, 1 | 2 | 4) && offset as usize + width as usize <= Prefix::BYTES);
        assert!(min <= max && max & !mask == 0 && (width == 4 || mask >> (8 * width as u32) == 0));
        Field {
            offset,
            width,
            little: false,
            from: offset + width,
            mask,
            min,
            max,
        }
    }

    const fn little(mut self) -> Field {
        self.little = true;
        self
    }

    /// The field is judged only once the data holds `len` bytes: before,
    /// the dissector waits for more whatever the field holds.
    pub const fn once(mut self, len: u8) -> Field {
        assert!(len >= self.offset + self.width);
        self.from = len;
        self
    }

    /// False when `data` is long enough for the field to be judged and its
    /// value is out of range.
    #[inline(always)]
    pub fn admits(&self, data: &[u8]) -> bool {
        if data.len() < usize::from(self.from) {
            return true;
        }
        let at = usize::from(self.offset);
        let value = match (data.get(at..at + usize::from(self.width)), self.little) {
            (Some(&[a]), _) => u32::from(a),
            (Some(&[a, b]), false) => u32::from(u16::from_be_bytes([a, b])),
            (Some(&[a, b]), true) => u32::from(u16::from_le_bytes([a, b])),
            (Some(&[a, b, c, d]), false) => u32::from_be_bytes([a, b, c, d]),
            (Some(&[a, b, c, d]), true) => u32::from_le_bytes([a, b, c, d]),
            _ => return true,
        };
        (value & self.mask).wrapping_sub(self.min) <= self.max - self.min
    }
}

/// Per transport, fields of the first bytes of a direction's data (a TCP
/// stream's head, a UDP datagram) that the protocol's definition fixes: when
/// the data is long enough for a field to be judged and its value lies
/// outside the field's range, `inspect` answers `No` and notes nothing, on
/// either side, at any packet index, on any ports. Of shorter data the
/// field says nothing. The chain tests the fields of many dissectors before it asks
/// any, and never asks those whose fields rule the data out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub tcp: &'static [Field],
    pub udp: &'static [Field],
}

impl Prefix {
    /// The longest prefix a field may reach into.
    pub const BYTES: usize = 16;

    /// No field is fixed.
    pub const ANY: Prefix = Prefix { tcp: &[], udp: &[] };

    /// The same fields on either transport.
    pub const fn is(fields: &'static [Field]) -> Prefix {
        Prefix {
            tcp: fields,
            udp: fields,
        }
    }

    pub const fn on(self, transport: Transport) -> &'static [Field] {
        match transport {
            Transport::Tcp => self.tcp,
            Transport::Udp => self.udp,
        }
    }

    /// False when some field rules `data` out.
    #[inline(always)]
    pub fn admits(self, transport: Transport, data: &[u8]) -> bool {
        self.on(transport).iter().all(|f| f.admits(data))
    }
}

/// One protocol dissector. `inspect` must never panic, loop without bound
/// or allocate more than the metadata it stores, whatever the bytes.
#[derive(Clone, Copy, Debug)]
pub struct Dissector {
    /// nDPI's name for the protocol it recognises (the main one, when it
    /// recognises several).
    pub name: &'static str,
    pub wants: Wants,
    /// The first bytes of a direction's data (a TCP stream's head, a UDP
    /// datagram) that `inspect` can answer anything but `No` to, on either
    /// side and at any packet index. For any other first byte the chain
    /// takes the `No` as given and never makes the call: most undecided
    /// flows meet every dissector, and most dissectors refuse on the first
    /// byte. `FirstByte::ANY` when the first byte proves nothing (a random
    /// transaction id, a length). The set must hold every byte `inspect`
    /// may accept: `tests/first_byte.rs` checks it on random and on real
    /// payloads.
    pub first_byte: FirstByte,
    /// The fields of its data's first bytes the protocol fixes: the chain
    /// takes the `No` to data they rule out as given, as it does for a
    /// first byte outside `first_byte`. The first is tested for every
    /// flow, the others only while the first admits the data: the most
    /// selective (a magic, a type, a length that must hold a header) comes
    /// first. `tests/first_byte.rs` checks them too.
    pub prefix: Prefix,
    pub inspect: fn(&Packet, &mut Context) -> Verdict,
}

impl Dissector {
    /// False when `first_byte` or `prefix` rules `data` out: `inspect`
    /// would answer `No`.
    pub fn admits(&self, transport: Transport, data: &[u8]) -> bool {
        data.first().is_none_or(|&b| self.first_byte.on(transport).contains(b)) && self.prefix.admits(transport, data)
    }
}

/// The dissectors read numbers with the wire layer's readers.
pub use sluice_wire::bytes::{be16, be24, be32};

/// Bytes from hex digits, whitespace ignored: captured messages in tests.
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A scratch context for dissector tests.
#[cfg(test)]
pub(crate) struct TestContext {
    pub meta: Metadata,
    pub expect: Vec<Expectation>,
    pub resolved: Vec<IpAddr>,
}

#[cfg(test)]
impl TestContext {
    pub fn new() -> Self {
        TestContext {
            meta: Metadata::default(),
            expect: Vec::new(),
            resolved: Vec::new(),
        }
    }

    pub fn ctx(&mut self) -> Context<'_> {
        Context::new(&mut self.meta, &mut self.expect, &mut self.resolved)
    }
}

/// A TCP flow for dissector tests: each message gets the next packet index
/// of its side, as the chain would number it.
#[cfg(test)]
pub(crate) struct TestFlow {
    pub tc: TestContext,
    port: u16,
    up: u32,
    down: u32,
}

#[cfg(test)]
impl TestFlow {
    pub fn new(port: u16) -> Self {
        TestFlow {
            tc: TestContext::new(),
            port,
            up: 0,
            down: 0,
        }
    }

    pub fn send(&mut self, inspect: fn(&Packet, &mut Context) -> Verdict, side: Side, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(Transport::Tcp, side, 50000, self.port, data);
        let (index, other) = match side {
            Side::Up => (&mut self.up, self.down),
            Side::Down => (&mut self.down, self.up),
        };
        pkt.index = *index;
        pkt.other_index = other;
        *index += 1;
        inspect(&pkt, &mut self.tc.ctx())
    }
}

/// A packet for dissector tests: client 10.0.0.1:`client_port`, server
/// 10.0.0.2:`server_port`.
#[cfg(test)]
pub(crate) fn test_packet(
    transport: Transport,
    side: Side,
    client_port: u16,
    server_port: u16,
    data: &[u8],
) -> Packet<'_> {
    Packet {
        transport,
        side,
        client: IpAddr::from([10, 0, 0, 1]),
        client_port,
        server: IpAddr::from([10, 0, 0, 2]),
        server_port,
        data,
        index: 0,
        other_index: 0,
    }
}

/// What `inspect` answers about `data`, sent from `side` of a flow between
/// a client port and a server port, with nothing noted before.
#[cfg(test)]
pub(crate) fn verdict_of(
    inspect: fn(&Packet, &mut Context) -> Verdict,
    transport: Transport,
    side: Side,
    ports: (u16, u16),
    data: &[u8],
) -> Verdict {
    inspect_fresh(inspect, transport, side, ports, data).0
}

/// [`verdict_of`] and what `inspect` noted and announced.
#[cfg(test)]
pub(crate) fn inspect_fresh(
    inspect: fn(&Packet, &mut Context) -> Verdict,
    transport: Transport,
    side: Side,
    (client_port, server_port): (u16, u16),
    data: &[u8],
) -> (Verdict, TestContext) {
    let mut tc = TestContext::new();
    let verdict = inspect(
        &test_packet(transport, side, client_port, server_port, data),
        &mut tc.ctx(),
    );
    (verdict, tc)
}

#[cfg(test)]
mod tests {
    use super::{Fingerprint, INLINE_TEXT, MAX_TEXT, Metadata};

    #[test]
    fn a_fingerprint_holds_a_ja4_and_refuses_what_no_fingerprint_is() {
        let ja4 = "t13d1516h2_8daaf6152771_b186095e22b6";
        assert_eq!(Fingerprint::new(ja4).as_deref(), Some(ja4));
        assert_eq!(Fingerprint::new("").as_deref(), Some(""));
        assert_eq!(Fingerprint::new(&format!("{ja4}0")), None);
        assert_eq!(Fingerprint::new("d551fafc 4f40"), None);
        assert_eq!(format!("{:?}", Fingerprint::new("ab").unwrap()), "\"ab\"");
    }

    #[test]
    fn text_keeps_printable_ascii_replaces_the_rest_and_is_cut() {
        assert_eq!(Metadata::text(b"www.example.com"), "www.example.com");
        assert_eq!(Metadata::text(b"a\tb\x00c\x7f\xc3\xa9~ "), "a.b.c...~ ");
        let long = vec![b'x'; MAX_TEXT + 10];
        assert_eq!(Metadata::text(&long).len(), MAX_TEXT);
        assert_eq!(Metadata::text(b""), "");
        // Either side of the inline buffer's size, replaced alike.
        for len in [INLINE_TEXT - 1, INLINE_TEXT, INLINE_TEXT + 1, MAX_TEXT - 1, MAX_TEXT] {
            let bytes: Vec<u8> = (0..len).map(|i| [b'a', 0x80, b'~', b'\n'][i % 4]).collect();
            let expected: String = (0..len).map(|i| ['a', '.', '~', '.'][i % 4]).collect();
            assert_eq!(Metadata::text(&bytes), expected, "{len} bytes");
        }
    }
}
