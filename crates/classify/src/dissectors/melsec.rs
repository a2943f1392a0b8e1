//! MELSEC communication protocol (Mitsubishi Electric's "MELSEC
//! Communication Protocol Reference Manual", SH-080008, the MC protocol's
//! 3E and 4E frames in binary code), over TCP or UDP on ports the PLC's
//! Ethernet module is configured with. A 3E request starts with the
//! subheader 0x50 0x00, a 4E request with 0x54 0x00, a 2-byte serial
//! number and two bytes of 0; responses with 0xD0 0x00 and 0xD4 0x00
//! alike. Then come the network number, the PC number (1 to 120, 0x7D,
//! 0x7E or 0xFF for the connected station), the request destination
//! module's I/O number (0x03FF the connected CPU, 0x03E0 to 0x03E3 a
//! multiple-CPU system's, 0x03D0 to 0x03D3 a redundant system's, 0x0000
//! to 0x01FF a multidrop station), its station number and the length of
//! what follows, all little-endian. A request then has a monitoring
//! timer, a command (its upper byte one of the manual's command groups) and
//! a subcommand below 0x0100; a response has an end code, and when that is
//! not 0, the 9 bytes of error information alone. The whole message must
//! be there and end where its length says (on TCP, another may follow).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MELSEC",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[0x50, 0x54, 0xd0, 0xd4])),
    prefix: Prefix::ANY,
    inspect,
}];

fn le16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (request, frame_4e) = match (pkt.side, data[0]) {
        (Side::Up, 0x50) => (true, false),
        (Side::Up, 0x54) => (true, true),
        (Side::Down, 0xd0) => (false, false),
        (Side::Down, 0xd4) => (false, true),
        _ => return Verdict::No,
    };
    // The subheader's second byte, and a 4E frame's two bytes of 0.
    let fixed_ok = data.get(1).is_none_or(|&b| b == 0)
        && (!frame_4e || data.get(4..6.min(data.len())).is_none_or(|b| b.iter().all(|&b| b == 0)));
    if !fixed_ok {
        return Verdict::No;
    }
    let at = if frame_4e { 6 } else { 2 };
    // Network number, PC number, I/O number, station number, length.
    let Some(head) = data.get(at..at + 7) else {
        return Verdict::Maybe;
    };
    let pc_ok = matches!(head[1], 1..=120 | 0x7d | 0x7e | 0xff);
    let io = u16::from_le_bytes([head[2], head[3]]);
    let io_ok = matches!(io, 0x0000..=0x01ff | 0x03d0..=0x03d3 | 0x03e0..=0x03e3 | 0x03ff);
    let length = usize::from(u16::from_le_bytes([head[5], head[6]]));
    if !pc_ok || !io_ok {
        return Verdict::No;
    }
    let body_at = at + 7;
    let end = body_at + length;
    if data.len() < end {
        // On TCP the rest may come in the next segment.
        let could = pkt.transport == Transport::Tcp && body_ok(&data[body_at..], length, request, true);
        return if could { Verdict::Maybe } else { Verdict::No };
    }
    if data.len() > end && pkt.transport == Transport::Udp {
        return Verdict::No;
    }
    if body_ok(&data[body_at..end], length, request, false) {
        Verdict::Yes(Found::new("MELSEC"))
    } else {
        Verdict::No
    }
}

/// The command groups of the manual's command list: device, label and
/// buffer memory access, monitoring, remote operation, CPU model, loopback,
/// error clear, passwords and files.
fn command_ok(command: u16) -> bool {
    matches!(command >> 8, 0x01 | 0x04 | 0x06 | 0x08 | 0x10 | 0x14 | 0x16 | 0x18)
}

/// Whether `body` (all of it, or its start when `partial`) is a request's
/// or a response's of `length` bytes.
fn body_ok(body: &[u8], length: usize, request: bool, partial: bool) -> bool {
    if request {
        // Timer, command and subcommand.
        if length < 6 {
            return false;
        }
        le16(body, 2).is_none_or(command_ok) && body.get(5).is_none_or(|&b| b == 0)
    } else {
        if length < 2 {
            return false;
        }
        match le16(body, 0) {
            None => partial,
            Some(0) => true,
            // Error information: network, PC, I/O, station, command, subcommand.
            Some(_) => length == 11 && le16(body, 7).is_none_or(command_ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(transport: Transport, side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, side, (50000, 5007), data)
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("MELSEC"))
    }

    /// The route to the connected station: network 0, PC 0xFF, I/O
    /// 0x03FF, station 0.
    const ROUTE: [u8; 5] = [0x00, 0xff, 0xff, 0x03, 0x00];

    fn frame(subheader: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = subheader.to_vec();
        out.extend_from_slice(&ROUTE);
        out.extend_from_slice(&(body.len() as u16).to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    /// Batch read in word units (command 0x0401, subcommand 0x0000) of 3
    /// words from D100 (device code 0xA8), timer 250 ms x 16.
    const BATCH_READ: [u8; 12] = [0x10, 0x00, 0x01, 0x04, 0x00, 0x00, 0x64, 0x00, 0x00, 0xa8, 0x03, 0x00];
    /// Its answer: end code 0 and three words.
    const WORDS: [u8; 8] = [0x00, 0x00, 0x95, 0x19, 0x02, 0x12, 0x30, 0x11];

    #[test]
    fn frames_3e_and_4e() {
        for transport in [Transport::Tcp, Transport::Udp] {
            assert_eq!(run(transport, Side::Up, &frame(&[0x50, 0x00], &BATCH_READ)), yes());
            assert_eq!(run(transport, Side::Down, &frame(&[0xd0, 0x00], &WORDS)), yes());
            assert_eq!(
                run(
                    transport,
                    Side::Up,
                    &frame(&[0x54, 0x00, 0x34, 0x12, 0, 0], &BATCH_READ)
                ),
                yes()
            );
            assert_eq!(
                run(transport, Side::Down, &frame(&[0xd4, 0x00, 0x34, 0x12, 0, 0], &WORDS)),
                yes()
            );
        }
        // An error answer (0xC059, wrong command) with its information.
        let error = [0x59, 0xc0, 0x00, 0xff, 0xff, 0x03, 0x00, 0x01, 0x04, 0x00, 0x00];
        assert_eq!(run(Transport::Udp, Side::Down, &frame(&[0xd0, 0x00], &error)), yes());
        // Remote RUN (0x1001) to CPU No. 2 of a multiple-CPU system.
        let mut remote_run = frame(&[0x50, 0x00], &[0x10, 0, 0x01, 0x10, 0, 0, 0x01, 0, 0, 0]);
        remote_run[4] = 0xe1;
        assert_eq!(run(Transport::Tcp, Side::Up, &remote_run), yes());
        // On TCP a request split over segments, then two back to back.
        let whole = frame(&[0x50, 0x00], &BATCH_READ);
        assert_eq!(run(Transport::Tcp, Side::Up, &whole[..14]), Verdict::Maybe);
        let mut two = whole.clone();
        two.extend_from_slice(&whole);
        assert_eq!(run(Transport::Tcp, Side::Up, &two), yes());
    }

    #[test]
    fn near_misses_are_refused() {
        let request = frame(&[0x50, 0x00], &BATCH_READ);
        // Subheader 0x5001, PC number 0, I/O number 0x0300, command 0x2401,
        // subcommand 0x0100, a length one too long.
        for (at, byte) in [(1, 0x01), (3, 0x00), (4, 0x00), (12, 0x24), (14, 0x01), (7, 13)] {
            let mut data = request.clone();
            data[at] = byte;
            assert_eq!(
                run(Transport::Udp, Side::Up, &data),
                Verdict::No,
                "byte {at} = {byte:#x}"
            );
        }
        // Truncated on UDP; longer than its length on UDP.
        assert_eq!(run(Transport::Udp, Side::Up, &request[..20]), Verdict::No);
        let mut long = request.clone();
        long.push(0);
        assert_eq!(run(Transport::Udp, Side::Up, &long), Verdict::No);
        // A 4E frame whose fixed bytes are not 0.
        let mut four = frame(&[0x54, 0x00, 0x34, 0x12, 0, 1], &BATCH_READ);
        assert_eq!(run(Transport::Udp, Side::Up, &four), Verdict::No);
        four[5] = 0;
        assert_eq!(run(Transport::Udp, Side::Up, &four), yes());
        // A request from the server, a response from the client.
        assert_eq!(run(Transport::Udp, Side::Down, &request), Verdict::No);
        assert_eq!(
            run(Transport::Udp, Side::Up, &frame(&[0xd0, 0x00], &WORDS)),
            Verdict::No
        );
        // An error end code without its 9 bytes of information; a request
        // too short for its command.
        assert_eq!(
            run(Transport::Udp, Side::Down, &frame(&[0xd0, 0x00], &[0x59, 0xc0])),
            Verdict::No
        );
        assert_eq!(
            run(Transport::Udp, Side::Up, &frame(&[0x50, 0x00], &[0x10, 0, 0x01, 0x04])),
            Verdict::No
        );
    }
}
