//! What the line-oriented mail and file-transfer dissectors share: the
//! complete lines of a stream head, and the `220` greeting that FTP and SMTP
//! servers both open with, whose words tell the two apart.

use super::ByteSet;

/// Longest command or reply line believed (RFC 5321 allows 512, IMAP lines run longer).
pub(super) const MAX_LINE: usize = 2048;
/// Lines read at most from one stream head.
pub(super) const MAX_LINES: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Smtp,
    Ftp,
    Unknown,
}

pub(super) enum Greeting {
    Bad,
    /// Not ended yet; what its complete lines say.
    Short(Kind),
    Done(Kind),
}

/// A `220` greeting, one line or several (`220-...`), and what its words say it is.
pub(super) fn greeting(data: &[u8]) -> Greeting {
    // Most flows are told apart by their first bytes, before any line is looked for.
    if !b"220".starts_with(&data[..data.len().min(3)]) {
        return Greeting::Bad;
    }
    let mut kind = Kind::Unknown;
    let mut lines = Lines::new(data);
    for line in lines.by_ref() {
        if !is_text(line) || !line.starts_with(b"220") {
            return Greeting::Bad;
        }
        let last = match line.get(3) {
            None | Some(b' ') => true,
            Some(b'-') => false,
            Some(_) => return Greeting::Bad,
        };
        kind = match (kind, words_kind(&line[3..])) {
            (Kind::Unknown, k) | (k, Kind::Unknown) => k,
            (a, b) if a == b => a,
            // Both kinds of words: let the client tell.
            _ => {
                return if last {
                    Greeting::Done(Kind::Unknown)
                } else {
                    Greeting::Short(Kind::Unknown)
                };
            }
        };
        if last {
            return Greeting::Done(kind);
        }
    }
    let rest = lines.rest();
    let n = rest.len().min(4);
    let prefix_ok = b"220 "[..n] == rest[..n] || b"220-"[..n] == rest[..n];
    if prefix_ok && rest.len() < MAX_LINE && is_text(rest) {
        Greeting::Short(kind)
    } else {
        Greeting::Bad
    }
}

/// What the words of a greeting name: SMTP software or FTP software.
fn words_kind(text: &[u8]) -> Kind {
    let mut smtp = false;
    let mut ftp = false;
    // Host names (anything with a dot) say nothing: `ftp.example.com` may run SMTP.
    let words = text.split(u8::is_ascii_whitespace).filter(|w| !w.contains(&b'.'));
    for word in words
        .flat_map(|w| w.split(|b| !b.is_ascii_alphanumeric()))
        .filter(|w| !w.is_empty())
    {
        smtp |= [&b"ESMTP"[..], b"SMTP", b"Postfix", b"Exim", b"Sendmail", b"qmail"]
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w));
        ftp |= word.windows(3).any(|w| w.eq_ignore_ascii_case(b"FTP")) || word.eq_ignore_ascii_case(b"FileZilla");
    }
    match (smtp, ftp) {
        (true, false) => Kind::Smtp,
        (false, true) => Kind::Ftp,
        _ => Kind::Unknown,
    }
}

/// The bytes `is_text` takes, as a first-byte set: a reply after the
/// client spoke may start with any of them.
pub(super) const TEXT: ByteSet = ByteSet::range(0x20, 0x7e)
    .union(ByteSet::range(0x80, 0xff))
    .with(b'\t')
    .with(b'\r');

/// Printable ASCII, tabs and UTF-8: what these lines may hold.
pub(super) fn is_text(line: &[u8]) -> bool {
    // A fold without early exit, which the compiler turns into vector
    // code: the lines are text nearly always, and read to their end anyway.
    line.iter().fold(true, |ok, &b| {
        ok & ((b >= 0x20) & (b != 0x7f) | (b == b'\t') | (b == b'\r'))
    })
}

/// The complete lines at the start of a stream, without their CR LF.
pub(super) struct Lines<'a> {
    data: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Lines<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Lines {
            data,
            at: 0,
            left: MAX_LINES,
        }
    }

    /// What follows the lines returned so far.
    pub(super) fn rest(&self) -> &'a [u8] {
        self.data.get(self.at..).unwrap_or_default()
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        self.left = self.left.checked_sub(1)?;
        let rest = self.rest();
        let len = memchr::memchr(b'\n', &rest[..rest.len().min(MAX_LINE)])?;
        self.at += len + 1;
        let line = &rest[..len];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_printable_ascii_tab_cr_and_utf8() {
        for b in 0..=255u8 {
            let expected = (b >= 0x20 && b != 0x7f) || b == b'\t' || b == b'\r';
            assert_eq!(is_text(&[b]), expected, "{b:#x}");
            let mut long = b"EHLO mail.example.com and then some".to_vec();
            long[20] = b;
            assert_eq!(is_text(&long), expected, "{b:#x} among others");
        }
    }

    #[test]
    fn lines_end_at_lf_within_the_longest_line() {
        let mut lines = Lines::new(b"220 hi\r\nEHLO x\nrest");
        assert_eq!(lines.next(), Some(&b"220 hi"[..]));
        assert_eq!(lines.next(), Some(&b"EHLO x"[..]));
        assert_eq!(lines.next(), None);
        assert_eq!(lines.rest(), b"rest");
        let mut long = vec![b'a'; MAX_LINE];
        long.push(b'\n');
        assert_eq!(Lines::new(&long).next(), None, "no end within MAX_LINE");
        assert_eq!(Lines::new(&long[1..]).next().map(<[u8]>::len), Some(MAX_LINE - 1));
        let many = b"x\n".repeat(MAX_LINES + 3);
        assert_eq!(Lines::new(&many).count(), MAX_LINES);
    }
}
