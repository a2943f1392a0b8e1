//! The `flows` listener's IPFIX sink (`flows: {ipfix: udp://HOST:PORT}`,
//! `--ipfix`): each worker encodes its records as IPFIX data records
//! (`sluice_export::ipfix`) straight into messages of at most an MTU, and
//! an exporter thread numbers the messages and sends them as they lie to
//! a collector over UDP or TCP, or writes them to a file (RFC 5655's IPFIX
//! file: messages one after another).
//!
//! Over UDP the templates go out first and again every
//! [`TEMPLATE_REFRESH`] (a collector that starts late, or lost them, learns
//! them again); what the socket refuses is counted as failed. Over TCP they
//! go once per connection; a write that the collector does not take at
//! once is back-pressure, counted with the time waited, and a broken
//! connection is retried every second, its records counted as failed
//! meanwhile. A file gets the templates once, and its writes wait for the
//! disk: no record is lost.
//!
//! The statistics, alarms and calls listeners of the run send their
//! records on the same session, each kind with its template
//! (`sluice_export::ipfix_lines`): their threads encode each line and
//! queue it as a chunk of its own ([`IpfixLines`]).

use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::RecvTimeoutError;
use sluice_export::ipfix::{IpfixEncoder, MESSAGE_HEADER, Messages, Packer, message_len};
use sluice_export::ipfix_lines::{LineKind, encode_line};
use sluice_export::schema::Record;

use crate::listen::export::{Chunk, ChunkEncoder, ExportReport, ExportWorker, Inbox, Queue, QueueEnd, queue};
use crate::probe::RunError;
use crate::publish::Published;

/// How often the templates are sent again over UDP.
pub(crate) const TEMPLATE_REFRESH: Duration = Duration::from_secs(30);

/// The MTU messages are sized to over TCP, and over UDP when the kernel
/// does not say the path's.
pub(crate) const DEFAULT_MTU: usize = 1500;

/// The MTU of the route of a connected UDP socket, as the kernel knows it
/// (`IP_MTU`, `IPV6_MTU`): the interface's, or less when an ICMP message
/// said the path's is.
fn path_mtu(socket: &UdpSocket) -> Option<usize> {
    let mtu = if socket.peer_addr().ok()?.is_ipv6() {
        rustix::net::sockopt::ipv6_mtu(socket)
    } else {
        rustix::net::sockopt::ip_mtu(socket)
    };
    mtu.ok().map(|m| m as usize)
}

/// How long a TCP write may wait for the collector before the connection
/// is taken for dead.
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A write slower than this was held back by the collector.
const BACKPRESSURE: Duration = Duration::from_millis(1);

/// Where the messages go, as `udp://HOST:PORT`, `tcp://HOST:PORT` or
/// `file:PATH` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    Udp(String),
    Tcp(String),
    File(PathBuf),
}

impl Destination {
    pub fn parse(text: &str) -> Result<Destination, String> {
        let bad = || format!("{text:?}: give udp://HOST:PORT, tcp://HOST:PORT or file:PATH (the IPFIX port is 4739)");
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err(bad());
            }
            return Ok(Destination::File(PathBuf::from(path)));
        }
        let (scheme, address) = text.split_once("://").ok_or_else(bad)?;
        let has_port = address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !has_port {
            return Err(bad());
        }
        match scheme {
            "udp" => Ok(Destination::Udp(address.to_string())),
            "tcp" => Ok(Destination::Tcp(address.to_string())),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Udp(a) => write!(f, "udp://{a}"),
            Destination::Tcp(a) => write!(f, "tcp://{a}"),
            Destination::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

/// A worker's records written into whole messages in its chunks, which
/// the exporter stamps and sends as they lie.
struct Framed {
    encoder: IpfixEncoder,
    messages: Messages,
}

impl ChunkEncoder for Framed {
    fn encode(&mut self, record: &Record, chunk: &mut Vec<u8>) -> bool {
        let prepared = self.encoder.prepare(record);
        let encoder = &mut self.encoder;
        self.messages
            .push(chunk, prepared.template(), |out| encoder.write(record, &prepared, out))
    }

    fn seal(&mut self, chunk: &mut Vec<u8>) {
        self.messages.close(chunk);
    }
}

/// The sink: its queue and its exporter thread.
pub(crate) struct Ipfix {
    queue: Queue,
    /// The longest message, but for a record longer alone.
    max_len: usize,
    thread: thread::JoinHandle<ExportReport>,
}

impl Ipfix {
    /// Opens the destination (a TCP collector must be listening) and
    /// starts the exporter. `lines`: the kinds of the probe's other records
    /// that will be sent too ([`Ipfix::lines`]), whose templates go with the
    /// flows'. `live`: the probe captures from interfaces, which a slow
    /// collector must not hold back; reading files, the workers wait for
    /// room in the exporter's queue rather than drop.
    pub(crate) fn start(
        destination: &str,
        live: bool,
        mtu: Option<usize>,
        rate: Option<sluice_units::Rate>,
        workers: usize,
        published: Published,
        lines: &[LineKind],
    ) -> Result<Ipfix, RunError> {
        let config = |message: String| {
            RunError::Config(crate::config::ConfigError::Value {
                key: "flows.ipfix".into(),
                message,
            })
        };
        let destination = Destination::parse(destination).map_err(config)?;
        let lossless = matches!(destination, Destination::File(_)) || !live;
        let transport = Transport::open(&destination, live).map_err(|e| config(format!("{destination}: {e}")))?;
        // A message fits in one IP packet of the path's MTU: the one given,
        // else over UDP the one the kernel has for the connected socket's
        // route (loopback's is 65,536, so a local collector gets messages
        // of up to the largest a datagram holds).
        let ip_header = match &transport {
            Transport::Udp(s) if s.peer_addr().is_ok_and(|a| a.is_ipv6()) => 40,
            _ => 20,
        };
        let mtu = match (mtu, &transport) {
            (Some(mtu), _) => Some(mtu),
            (None, Transport::Udp(socket)) => Some(path_mtu(socket).unwrap_or(DEFAULT_MTU)),
            // A file's messages are no packets: as long as a message can
            // be, so that headers and writes are few.
            (None, Transport::File(_)) => None,
            (None, Transport::Tcp(..)) => Some(DEFAULT_MTU),
        };
        // An IPv4 datagram's total length, header included, is 16 bits.
        let max_len = mtu.map_or(u16::MAX as usize, |mtu| {
            mtu.min(u16::MAX as usize).saturating_sub(ip_header + 8).max(512)
        });
        let (queue, inbox) = queue(workers, lossless);
        let mut packer = Packer::new(max_len, 1);
        let mut report = ExportReport {
            sink: "ipfix",
            destination: destination.to_string(),
            ..ExportReport::default()
        };
        report.counters.insert("max_message_bytes", max_len as u64);
        for &kind in lines {
            packer.add_templates(kind.template_records());
            report.counters.insert(kind_counter(kind), 0);
        }
        let exporter = Exporter {
            transport,
            packer,
            report,
            pending: [0; 3],
            destination,
            templates_sent: None,
            published,
            pace: rate.map(|rate| Pace {
                rate,
                next: Instant::now(),
            }),
        };
        let thread = thread::Builder::new()
            .name("sluice-ipfix".into())
            .spawn(move || exporter.run(inbox))
            .map_err(|source| RunError::Threads { source })?;
        Ok(Ipfix { queue, max_len, thread })
    }

    pub(crate) fn worker_part(&self) -> impl crate::listen::FlowListener + use<> {
        let part: ExportWorker<Framed> = self.queue.worker_part(Framed {
            encoder: IpfixEncoder::default(),
            messages: Messages::new(self.max_len),
        });
        part
    }

    /// Where a thread sends records of `kind` (its templates were given to
    /// [`Ipfix::start`]).
    pub(crate) fn lines(&self, kind: LineKind) -> IpfixLines {
        IpfixLines {
            kind,
            end: self.queue.end(),
        }
    }

    /// Once every worker has dropped its part, and every [`IpfixLines`]
    /// is dropped: the last messages, and what the sink did.
    pub(crate) fn finish(self) -> ExportReport {
        drop(self.queue);
        self.thread.join().expect("the IPFIX exporter panicked")
    }
}

/// The summary's counter of the records of a kind.
fn kind_counter(kind: LineKind) -> &'static str {
    match kind {
        LineKind::Stats => "stats_records",
        LineKind::Alarms => "alarms_records",
        LineKind::Calls => "calls_records",
    }
}

fn kind_index(kind: LineKind) -> usize {
    match kind {
        LineKind::Stats => 0,
        LineKind::Alarms => 1,
        LineKind::Calls => 2,
    }
}

/// A thread's way to send its records of one kind (statistics intervals,
/// alarms, calls) on the IPFIX session: each is encoded here, in the
/// sending thread, and queued as a chunk of its own.
pub(crate) struct IpfixLines {
    kind: LineKind,
    end: QueueEnd,
}

impl IpfixLines {
    /// Sends one record, a JSON object as its file's line holds it. One
    /// too long for an IPFIX message is counted as failed.
    pub(crate) fn send(&self, line: &serde_json::Value) {
        let mut record = Vec::with_capacity(1024);
        let mut bytes = Vec::new();
        let mut message = Messages::new(u16::MAX as usize);
        match encode_line(self.kind, line, &mut record) {
            Some(template) if message.push(&mut bytes, template, |out| out.extend_from_slice(&record)) => {
                message.close(&mut bytes);
                self.end.send(Chunk { bytes, records: 1 });
            }
            _ => {
                self.end.counters.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends a line of JSON text (its newline left off).
    fn send_text(&self, line: &[u8]) {
        match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(value) => self.send(&value),
            // The writers write JSON; a line that is not is kept whole.
            Err(_) => self.send(&serde_json::Value::String(String::from_utf8_lossy(line).into_owned())),
        }
    }
}

/// Writes what it is given and sends each complete line on the IPFIX
/// session: the alarms' and calls' files.
pub(crate) struct LineTee<W> {
    inner: W,
    lines: IpfixLines,
    line: Vec<u8>,
}

impl<W> LineTee<W> {
    pub(crate) fn new(inner: W, lines: IpfixLines) -> LineTee<W> {
        LineTee {
            inner,
            lines,
            line: Vec::new(),
        }
    }
}

impl<W: Write> Write for LineTee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let mut rest = &buf[..n];
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            self.lines.send_text(&self.line);
            self.line.clear();
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

enum Transport {
    /// Connected to the collector: a datagram it refused (ICMP port
    /// unreachable) makes the next send fail, and that is counted.
    Udp(UdpSocket),
    Tcp(Option<TcpStream>, Vec<SocketAddr>, Instant),
    File(Box<dyn Write + Send>),
}

fn resolve(address: &str) -> std::io::Result<Vec<SocketAddr>> {
    let addresses: Vec<SocketAddr> = address.to_socket_addrs()?.collect();
    if addresses.is_empty() {
        return Err(std::io::Error::other("the name has no address"));
    }
    Ok(addresses)
}

impl Transport {
    fn open(destination: &Destination, live: bool) -> std::io::Result<Transport> {
        match destination {
            Destination::Udp(address) => {
                let to = resolve(address)?[0];
                let local: SocketAddr = if to.is_ipv6() {
                    "[::]:0".parse().expect("an address")
                } else {
                    "0.0.0.0:0".parse().expect("an address")
                };
                let socket = UdpSocket::bind(local)?;
                socket.connect(to)?;
                Ok(Transport::Udp(socket))
            }
            Destination::Tcp(address) => {
                let addresses = resolve(address)?;
                let stream = connect(&addresses)?;
                Ok(Transport::Tcp(Some(stream), addresses, Instant::now()))
            }
            Destination::File(path) => {
                // As the records' files: with `O_DIRECT` reading files, where
                // only the whole file matters and the page cache's fresh
                // pages cost more than the disk; through the page cache on a
                // live link, so that messages are readable soon after their
                // flows end.
                let file: Box<dyn Write + Send> = match live {
                    false => Box::new(sluice_store::DirectWriter::create(path)?),
                    true => Box::new(sluice_store::WriteThrough::new(std::fs::File::create(path)?)),
                };
                Ok(Transport::File(file))
            }
        }
    }
}

fn connect(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = None;
    for a in addresses {
        match TcpStream::connect_timeout(a, Duration::from_secs(2)) {
            Ok(stream) => {
                stream.set_write_timeout(Some(TCP_WRITE_TIMEOUT))?;
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address")))
}

struct Exporter {
    transport: Transport,
    destination: Destination,
    packer: Packer,
    report: ExportReport,
    /// When the templates last went out (on this connection).
    templates_sent: Option<Instant>,
    published: Published,
    pace: Option<Pace>,
    /// Records of each kind of line in the open message, by
    /// [`kind_index`].
    pending: [u32; 3],
}

/// Spaces messages to a rate, in bursts of at most a millisecond's worth.
struct Pace {
    rate: sluice_units::Rate,
    /// When the next message is due.
    next: Instant,
}

impl Pace {
    fn wait(&mut self, bytes: usize) {
        let now = Instant::now();
        if self.next > now + Duration::from_millis(1) {
            thread::sleep(self.next - now);
        }
        let gap = match self.rate {
            sluice_units::Rate::PacketsPerSec(n) => Duration::from_secs_f64(1.0 / n.max(1) as f64),
            sluice_units::Rate::BitsPerSec(n) => Duration::from_secs_f64(bytes as f64 * 8.0 / n.max(1) as f64),
        };
        self.next = self.next.max(now) + gap;
    }
}

fn unix_seconds() -> u32 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

impl Exporter {
    fn run(mut self, inbox: Inbox) -> ExportReport {
        let mut last_publish = Instant::now();
        loop {
            match inbox.chunks.recv_timeout(Duration::from_secs(1)) {
                Ok(mut chunk) => {
                    self.export(&mut chunk.bytes);
                    chunk.bytes.clear();
                    let _ = inbox.empty.try_send(chunk.bytes);
                }
                Err(RecvTimeoutError::Timeout) => self.templates_if_due(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if last_publish.elapsed() >= Duration::from_secs(1) {
                self.totals(&inbox).publish("ipfix", &self.published);
                last_publish = Instant::now();
            }
        }
        if let Transport::File(file) = &mut self.transport
            && let Err(e) = file.flush()
        {
            self.report.last_error = Some(format!("{}: {e}", self.destination));
        }
        let report = self.totals(&inbox);
        report.publish("ipfix", &self.published);
        report
    }

    /// The report with what the other threads counted.
    fn totals(&mut self, inbox: &Inbox) -> ExportReport {
        self.report.dropped_queue_full = inbox.counters.queue_full.load(Ordering::Relaxed);
        let mut report = self.report.clone();
        let refused = inbox.counters.refused.load(Ordering::Relaxed);
        if refused > 0 {
            report.failed += refused;
            report.counters.insert("too_long", refused);
            report
                .last_error
                .get_or_insert_with(|| "a record too long for an IPFIX message".into());
        }
        report
    }

    /// Sends the templates when none went out yet (on this connection), or
    /// over UDP when the last were sent long enough ago.
    fn templates_if_due(&mut self) {
        self.reconnect_if_due();
        let due = match (&self.transport, self.templates_sent) {
            (_, None) => true,
            (Transport::Udp(_), Some(at)) => at.elapsed() >= TEMPLATE_REFRESH,
            _ => false,
        };
        if due {
            let mut packer = std::mem::replace(&mut self.packer, Packer::new(0, 0));
            packer.templates(unix_seconds(), &mut |m, n| self.send(m, 1, n));
            self.packer = packer;
            self.templates_sent = Some(Instant::now());
            *self.report.counters.entry("template_messages").or_default() += 1;
        }
    }

    /// A broken TCP connection is tried again once a second; a new one
    /// starts without templates.
    fn reconnect_if_due(&mut self) {
        if let Transport::Tcp(stream @ None, addresses, retry_at) = &mut self.transport
            && retry_at.elapsed() >= Duration::from_secs(1)
        {
            *retry_at = Instant::now();
            if let Ok(s) = connect(addresses) {
                *stream = Some(s);
                *self.report.counters.entry("reconnections").or_default() += 1;
                self.templates_sent = None;
            }
        }
    }

    /// Stamps and sends the messages of a chunk: to a file in one write
    /// (unless paced), else one by one.
    fn export(&mut self, chunk: &mut [u8]) {
        self.templates_if_due();
        let now = unix_seconds();
        let whole = matches!(self.transport, Transport::File(_)) && self.pace.is_none();
        let (mut at, mut messages, mut records) = (0, 0, 0);
        while at + MESSAGE_HEADER <= chunk.len() {
            let len = message_len(&chunk[at..]);
            let message = &mut chunk[at..at + len];
            let n = self.packer.stamp(message, now);
            // The probe's other records come one to a message.
            let first_set = u16::from_be_bytes([message[MESSAGE_HEADER], message[MESSAGE_HEADER + 1]]);
            if let Some((kind, _)) = LineKind::of_template(first_set) {
                self.pending[kind_index(kind)] += n;
            }
            if whole {
                messages += 1;
                records += n;
            } else {
                self.send(message, 1, n);
            }
            at += len;
        }
        if whole && messages > 0 {
            self.send(chunk, messages, records);
        }
    }

    fn fail(&mut self, records: u32, error: std::io::Error) {
        self.report.failed += u64::from(records);
        self.report.last_error = Some(error.to_string());
    }

    /// Sends `messages` messages, one after another in `bytes`, holding
    /// `records` records.
    fn send(&mut self, bytes: &[u8], messages: u64, records: u32) {
        if let Some(pace) = &mut self.pace {
            pace.wait(bytes.len());
        }
        let lines = std::mem::take(&mut self.pending);
        let result = match &mut self.transport {
            Transport::Udp(socket) => socket.send(bytes).map(|_| ()),
            Transport::File(file) => file.write_all(bytes),
            Transport::Tcp(stream, _, retry_at) => match stream {
                None => Err(std::io::Error::other("not connected to the collector")),
                Some(s) => {
                    let started = Instant::now();
                    let written = s.write_all(bytes);
                    let waited = started.elapsed();
                    if waited >= BACKPRESSURE {
                        *self.report.counters.entry("backpressure_waits").or_default() += 1;
                        *self.report.counters.entry("backpressure_ms").or_default() += waited.as_millis() as u64;
                    }
                    if written.is_err() {
                        *stream = None;
                        *retry_at = Instant::now();
                    }
                    written
                }
            },
        };
        match result {
            Ok(()) => {
                // `records` counts the flows; the other kinds have counters.
                self.report.records += u64::from(records - lines.iter().sum::<u32>());
                for kind in LineKind::ALL {
                    let n = lines[kind_index(kind)];
                    if n > 0 {
                        *self.report.counters.entry(kind_counter(kind)).or_default() += u64::from(n);
                    }
                }
                self.report.messages += messages;
                self.report.bytes += bytes.len() as u64;
            }
            Err(e) => self.fail(records, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse_and_print_back() {
        for text in [
            "udp://127.0.0.1:4739",
            "tcp://collector.example:4739",
            "udp://[::1]:4739",
            "file:out.ipfix",
        ] {
            assert_eq!(Destination::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "127.0.0.1:4739",
            "udp://127.0.0.1",
            "sctp://h:1",
            "file:",
            "udp://:4739",
        ] {
            let e = Destination::parse(bad).unwrap_err();
            assert!(e.contains("udp://HOST:PORT"), "{bad}: {e}");
        }
    }
}
