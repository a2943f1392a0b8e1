//! Messages of the long-lived, low-rate UDP flows beside the calls of the
//! `voip` profile: syslog (RFC 3164) and SNMPv2c polling (RFC 3416).

use std::io::{self, Write};

use crate::START_NS;

pub(crate) const SYSLOG_PORT: u16 = 514;
pub(crate) const SNMP_PORT: u16 = 161;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// One BSD syslog line from device `device`, the `n`th it sends: a priority,
/// the timestamp of `ts_ns`, the host name, then a message of a kind such
/// devices send all day.
pub(crate) fn syslog(ts_ns: u64, device: u32, n: u32, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    let secs = ts_ns / 1_000_000_000;
    let (_, month, day) = sluice_units::calendar::civil_from_days((secs / 86_400) as i64);
    let month = month as usize - 1;
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let pri = [38, 86, 30, 187][n as usize % 4];
    write!(out, "<{pri}>{} {day:>2} {h:02}:{m:02}:{s:02} ", MONTHS[month])?;
    let pid = 1000 + (device.wrapping_mul(7919).wrapping_add(n) % 30_000);
    match n % 4 {
        0 => write!(
            out,
            "srv-{device:05} sshd[{pid}]: Accepted publickey for admin from 10.255.0.5 port {} ssh2",
            40_000 + n % 20_000
        ),
        1 => write!(
            out,
            "srv-{device:05} CRON[{pid}]: pam_unix(cron:session): session opened for user root by (uid=0)"
        ),
        2 => write!(
            out,
            "srv-{device:05} systemd[1]: Started Daily apt download activities."
        ),
        _ => write!(
            out,
            "sw-{device:05} %LINK-3-UPDOWN: Interface GigabitEthernet0/{}, changed state to {}",
            n % 48,
            if n % 8 < 4 { "down" } else { "up" }
        ),
    }
}

/// Appends a BER tag and a one-byte length to be filled in by `close`.
fn open(out: &mut Vec<u8>, tag: u8) -> usize {
    out.extend_from_slice(&[tag, 0]);
    out.len()
}

fn close(out: &mut [u8], content: usize) {
    let len = out.len() - content;
    debug_assert!(len < 0x80, "every generated SNMP message fits short-form lengths");
    out[content - 1] = len as u8;
}

/// An unsigned integer of type `tag` in as few bytes as BER allows.
fn uint(out: &mut Vec<u8>, tag: u8, value: u32) {
    let bytes = value.to_be_bytes();
    let skip = bytes.iter().take(3).take_while(|&&b| b == 0).count();
    let sign = bytes[skip] & 0x80 != 0;
    out.extend_from_slice(&[tag, (4 - skip + usize::from(sign)) as u8]);
    if sign {
        out.push(0);
    }
    out.extend_from_slice(&bytes[skip..]);
}

/// What one SNMP poll asks an agent for: its uptime and the octets in on
/// its first interface.
const OIDS: [&[u8]; 2] = [
    // sysUpTime.0 (1.3.6.1.2.1.1.3.0)
    &[0x2b, 6, 1, 2, 1, 1, 3, 0],
    // ifInOctets.1 (1.3.6.1.2.1.2.2.1.10.1)
    &[0x2b, 6, 1, 2, 1, 2, 2, 1, 10, 1],
];

/// What an agent answers a poll with.
pub(crate) struct Values {
    /// Hundredths of a second since the agent started.
    pub(crate) uptime: u32,
    pub(crate) in_octets: u32,
}

/// An SNMPv2c GetRequest for `OIDS` with community `public`, or, given the
/// values, its GetResponse.
pub(crate) fn snmp(request_id: u32, answer: Option<&Values>, out: &mut Vec<u8>) {
    out.clear();
    let message = open(out, 0x30);
    uint(out, 0x02, 1);
    out.extend_from_slice(&[0x04, 6]);
    out.extend_from_slice(b"public");
    let pdu = open(out, if answer.is_some() { 0xa2 } else { 0xa0 });
    uint(out, 0x02, request_id);
    uint(out, 0x02, 0);
    uint(out, 0x02, 0);
    let bindings = open(out, 0x30);
    for (i, oid) in OIDS.iter().enumerate() {
        let binding = open(out, 0x30);
        out.extend_from_slice(&[0x06, oid.len() as u8]);
        out.extend_from_slice(oid);
        match (answer, i) {
            (None, _) => out.extend_from_slice(&[0x05, 0]),
            // TimeTicks, Counter32.
            (Some(v), 0) => uint(out, 0x43, v.uptime),
            (Some(v), _) => uint(out, 0x41, v.in_octets),
        }
        close(out, binding);
    }
    close(out, bindings);
    close(out, pdu);
    close(out, message);
}

/// Hundredths of a second from the start of generated traffic to `ts_ns`.
pub(crate) fn ticks_since_start(ts_ns: u64) -> u32 {
    ((ts_ns - START_NS) / 10_000_000) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_lines_carry_the_calendar_date() {
        let mut out = Vec::new();
        syslog(START_NS + 3_723_000_000_000, 7, 2, &mut out).unwrap();
        let line = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            line,
            "<30>Jan  1 01:02:03 srv-00007 systemd[1]: Started Daily apt download activities."
        );
        syslog(START_NS + 31 * 86_400_000_000_000, 7, 0, &mut out).unwrap();
        assert!(out.starts_with(b"<38>Feb  1 00:00:00 "));
        syslog(START_NS + 60 * 86_400_000_000_000, 7, 0, &mut out).unwrap();
        assert!(out.starts_with(b"<38>Mar  1 00:00:00 "), "2024 is a leap year");
    }

    #[test]
    fn snmp_messages_are_one_exact_ber_sequence() {
        let mut out = Vec::new();
        snmp(0x0123_4567, None, &mut out);
        assert_eq!(out[..2], [0x30, (out.len() - 2) as u8]);
        assert_eq!(out[2..5], [0x02, 1, 1]);
        assert_eq!(out[13], 0xa0);
        let values = Values {
            uptime: 0x80,
            in_octets: 0xffff_ffff,
        };
        snmp(0x0123_4567, Some(&values), &mut out);
        assert_eq!(out[..2], [0x30, (out.len() - 2) as u8]);
        assert_eq!(out[13], 0xa2);
        // Unsigned values with the top bit set get a leading zero byte.
        assert!(out.windows(4).any(|w| w == [0x43, 2, 0, 0x80]));
        assert!(out.windows(7).any(|w| w == [0x41, 5, 0, 0xff, 0xff, 0xff, 0xff]));
    }
}
