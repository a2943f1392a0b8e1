//! NoMachine's NX protocol (TCP port 4000): the client greets with `NXSH-` and
//! the server with `NXD-`, each followed by a dotted version number; the line is
//! kept as the sender's banner.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NoMachine",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"N")),
    prefix: Prefix::ANY,
    inspect,
}];

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let tag: &[u8] = if pkt.side == Side::Up { b"NXSH-" } else { b"NXD-" };
    let head = &data[..data.len().min(tag.len())];
    if !tag.starts_with(head) {
        return Verdict::No;
    }
    match data.get(tag.len()) {
        None => Verdict::Maybe,
        Some(c) if c.is_ascii_digit() => {
            let line = data.split(|&b| b == b'\n').next().unwrap_or(data);
            let field = match pkt.side {
                Side::Up => &mut ctx.meta.client_banner,
                Side::Down => &mut ctx.meta.server_banner,
            };
            Metadata::set_once(field, line);
            Verdict::Yes(Found::new("NoMachine"))
        }
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (48084, 4000), data)
    }

    #[test]
    fn greetings() {
        let (v, tc) = run(Side::Up, b"NXSH-8.10.1\n");
        assert_eq!(v, Verdict::Yes(Found::new("NoMachine")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("NXSH-8.10.1"));
        assert_eq!(
            run(Side::Down, b"NXD-8.10.1\n").0,
            Verdict::Yes(Found::new("NoMachine"))
        );
        assert_eq!(run(Side::Down, b"NX").0, Verdict::Maybe);
    }

    #[test]
    fn not_nomachine() {
        assert_eq!(run(Side::Up, b"NXD-8.10.1\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"NXSH-x\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"SSH-2.0-x\r\n").0, Verdict::No);
    }
}
