//! Finding a recording's records again, past whatever is not one.
//!
//! A recording can hold bytes that are not records: a bit flipped on the
//! disk, a stretch written over, the zeros or the torn last record that a
//! crash leaves. `extract` and `repair` go through a file with a
//! [`Scanner`], which takes a record only when its header is plausible
//! ([`FileHeader::plausible_record`]), the record is whole, and what
//! follows it is plausible too: the next record's header, or the end of
//! the stretch being read. Otherwise it looks for the next place where
//! [`CHAIN`] plausible records follow each other (or records run exactly
//! to the end), and reports the bytes in between as unreadable, with
//! their offset, rather than giving up on the rest of the file.
//!
//! A record whose header is plausible but whose successor's is not is
//! either the last good record before damage, or a record whose length
//! was damaged. It is taken unless a chain of records starts inside the
//! bytes it claims, which a wrong length would show.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::format::{CaptureFormat, FileHeader, RecordHeader};

/// Plausible records that must follow each other where reading starts
/// again after unreadable bytes.
pub(crate) const CHAIN: usize = 3;

/// Bytes read at once when going through a file.
const CHUNK: u64 = 4 << 20;

/// Part of a file in memory, read with positioned reads as a reader goes
/// forward through it.
pub(crate) struct Window {
    file: File,
    len: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    at: u64,
    bytes_read: u64,
}

impl Window {
    /// `len` is the file's length (when it was planned: a file still being
    /// recorded grows past it, and that part is not read).
    pub(crate) fn new(file: File, len: u64) -> Window {
        Window {
            file,
            len,
            buf: Vec::new(),
            at: 0,
            bytes_read: 0,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Bytes read from the file so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// `want` bytes of the file from `offset` (fewer at its end). What is
    /// read beyond them goes on up to `read_to`, at most [`CHUNK`] bytes
    /// from `offset`: a block is read in one call, and nothing past it for
    /// nothing.
    pub(crate) fn get(&mut self, offset: u64, want: usize, read_to: u64) -> io::Result<&[u8]> {
        let end = offset.saturating_add(want as u64).min(self.len);
        let offset = offset.min(end);
        let buf_end = self.at + self.buf.len() as u64;
        if offset < self.at || end > buf_end {
            // What is already here from `offset` on is kept.
            if offset >= self.at && offset < buf_end {
                self.buf.drain(..(offset - self.at) as usize);
            } else {
                self.buf.clear();
            }
            self.at = offset;
            let have = self.at + self.buf.len() as u64;
            let target = end.max(read_to.min(offset.saturating_add(CHUNK))).min(self.len);
            if target > have {
                let old = self.buf.len();
                self.buf.resize(old + (target - have) as usize, 0);
                self.file.read_exact_at(&mut self.buf[old..], have)?;
                self.bytes_read += target - have;
            }
        }
        Ok(&self.buf[(offset - self.at) as usize..(end - self.at) as usize])
    }

    /// Bytes within those [`Window::get`] last returned.
    pub(crate) fn slice(&self, offset: u64, len: usize) -> &[u8] {
        let start = (offset - self.at) as usize;
        &self.buf[start..start + len]
    }
}

/// What the bytes a [`Scanner`] could not read are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Records follow them (or the stretch being read ends before the
    /// file does).
    Middle,
    /// Zeros up to the end of the file: a recorder killed while it closed
    /// the file (the padding of its last direct write).
    Zeros,
    /// The start of a record that the file ends inside: a recorder killed
    /// while it wrote.
    Torn,
    /// Anything else up to the end of the file.
    Garbage,
}

/// One step through a stretch of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A record at `at`; its bytes are in the window.
    Record {
        at: u64,
        record: RecordHeader,
    },
    /// `len` bytes at `at` that are not records, skipped.
    Unreadable {
        at: u64,
        len: u64,
        kind: Unreadable,
    },
    End,
}

/// How a record looks where it starts.
enum Check {
    /// Plausible, whole, and followed by a plausible header or the end.
    Confirmed(RecordHeader),
    /// Plausible and whole, but what follows is not plausible.
    Unconfirmed(RecordHeader),
    No,
}

/// Goes through the records that start in `[start, end)` of a file; the
/// last may end past `end`.
pub(crate) struct Scanner {
    header: FileHeader,
    pos: u64,
    end: u64,
    /// The time of the last record whose successor confirmed it.
    previous_ts: Option<u64>,
}

impl Scanner {
    pub(crate) fn new(header: FileHeader, start: u64, end: u64) -> Scanner {
        Scanner {
            header,
            pos: start,
            end,
            previous_ts: None,
        }
    }

    /// Where the next step starts.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    pub(crate) fn next(&mut self, w: &mut Window) -> io::Result<Step> {
        let end = self.end.min(w.len());
        loop {
            if self.pos >= end {
                return Ok(Step::End);
            }
            let at = self.pos;
            match self.check(w, at, self.previous_ts)? {
                Check::Confirmed(record) => {
                    self.pos += record.len as u64;
                    self.previous_ts = Some(record.ts_ns);
                    return Ok(Step::Record { at, record });
                }
                Check::Unconfirmed(record) => {
                    let claimed = (at + record.len as u64).min(end);
                    if let Some(q) = self.search(w, at + self.step(), claimed)? {
                        self.pos = q;
                        return Ok(unreadable(at, q, Unreadable::Middle));
                    }
                    // Its length holds up; the damage is after it. The
                    // window may have moved while searching.
                    w.get(at, record.len, self.end)?;
                    self.pos += record.len as u64;
                    return Ok(Step::Record { at, record });
                }
                Check::No => match self.search(w, at, end)? {
                    // A chain starts here after all: the timestamp stepped
                    // back further than a record is believed to, and the
                    // records after it agree with it.
                    Some(q) if q == at && self.previous_ts.is_some() => self.previous_ts = None,
                    Some(q) if q > at => {
                        self.pos = q;
                        return Ok(unreadable(at, q, Unreadable::Middle));
                    }
                    _ => {
                        self.pos = end;
                        let kind = if end < w.len() {
                            Unreadable::Middle
                        } else {
                            self.tail(w, at)?
                        };
                        return Ok(unreadable(at, end, kind));
                    }
                },
            }
        }
    }

    /// Candidate record starts are this far apart: pcapng blocks are
    /// aligned to 4 bytes.
    fn step(&self) -> u64 {
        match self.header.format {
            CaptureFormat::Pcap => 1,
            CaptureFormat::PcapNg => 4,
        }
    }

    fn check(&self, w: &mut Window, at: u64, previous_ts: Option<u64>) -> io::Result<Check> {
        let head_len = self.header.record_head_len();
        let Some(record) = self
            .header
            .plausible_record(w.get(at, head_len, self.end)?, previous_ts)
        else {
            return Ok(Check::No);
        };
        let next = at + record.len as u64;
        if next > w.len() {
            return Ok(Check::No);
        }
        // A successor's header is looked at unless the record ends the
        // stretch, or the file ends before a whole header would.
        let ends = next == self.end || next + head_len as u64 > w.len();
        let want = if ends { record.len } else { record.len + head_len };
        let bytes = w.get(at, want, self.end)?;
        if !self.header.record_complete(&bytes[..record.len]) {
            return Ok(Check::No);
        }
        if ends
            || self
                .header
                .plausible_record(&bytes[record.len..], Some(record.ts_ns))
                .is_some()
        {
            Ok(Check::Confirmed(record))
        } else {
            Ok(Check::Unconfirmed(record))
        }
    }

    /// Whether [`CHAIN`] plausible records follow each other from `at`,
    /// or records run from there exactly to the end of the stretch or of
    /// the file.
    fn chain_starts(&self, w: &mut Window, at: u64) -> io::Result<bool> {
        let head_len = self.header.record_head_len();
        let (mut at, mut previous_ts) = (at, None);
        for i in 0..CHAIN {
            if i > 0 && (at == self.end || at == w.len()) {
                return Ok(true);
            }
            let Some(record) = self
                .header
                .plausible_record(w.get(at, head_len, self.end)?, previous_ts)
            else {
                return Ok(false);
            };
            if at + record.len as u64 > w.len() || !self.header.record_complete(w.get(at, record.len, self.end)?) {
                return Ok(false);
            }
            previous_ts = Some(record.ts_ns);
            at += record.len as u64;
        }
        Ok(true)
    }

    /// The first place in `[from, to)` where a chain of records starts.
    fn search(&self, w: &mut Window, from: u64, to: u64) -> io::Result<Option<u64>> {
        let mut q = from;
        while q < to {
            if self.chain_starts(w, q)? {
                return Ok(Some(q));
            }
            q += self.step();
        }
        Ok(None)
    }

    /// What the unreadable bytes from `at` to the end of the file are.
    fn tail(&self, w: &mut Window, at: u64) -> io::Result<Unreadable> {
        let head_len = self.header.record_head_len();
        let len = w.len() - at;
        let mut zeros = true;
        let mut offset = at;
        while zeros && offset < w.len() {
            let chunk = w.get(offset, 1 << 20, w.len())?;
            zeros = chunk.iter().all(|&b| b == 0);
            offset += chunk.len() as u64;
        }
        if zeros {
            return Ok(Unreadable::Zeros);
        }
        if len < head_len as u64 {
            return Ok(Unreadable::Torn);
        }
        let torn = self
            .header
            .plausible_record(w.get(at, head_len, w.len())?, self.previous_ts)
            .is_some_and(|record| record.len as u64 > len);
        Ok(if torn { Unreadable::Torn } else { Unreadable::Garbage })
    }
}

fn unreadable(at: u64, to: u64, kind: Unreadable) -> Step {
    Step::Unreadable { at, len: to - at, kind }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::EPB_HEAD;

    const T0: u64 = 1_700_000_000_000_000_000;

    fn record(format: CaptureFormat, ts_ns: u64, data: &[u8]) -> Vec<u8> {
        let mut head = [0u8; EPB_HEAD];
        let mut trailer = [0u8; 8];
        let n = format.record_head(ts_ns, data.len() as u32, data.len() as u32, &mut head);
        let m = format.record_trailer(data.len() as u32, &mut trailer);
        [&head[..n], data, &trailer[..m]].concat()
    }

    /// A file of `n` records of 60 to 160 bytes; its bytes and where each
    /// record starts.
    fn file(format: CaptureFormat, n: usize) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = format.file_header(1, 2000);
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(bytes.len() as u64);
            let data: Vec<u8> = (0..60 + i * 37 % 100).map(|j| (i + j) as u8).collect();
            bytes.extend(record(format, T0 + i as u64 * 1000, &data));
        }
        (bytes, starts)
    }

    fn scan(bytes: &[u8]) -> Vec<Step> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        let header = FileHeader::parse(bytes).unwrap();
        let mut w = Window::new(File::open(&path).unwrap(), bytes.len() as u64);
        let mut scanner = Scanner::new(header.clone(), header.len, bytes.len() as u64);
        let mut steps = Vec::new();
        loop {
            match scanner.next(&mut w).unwrap() {
                Step::End => return steps,
                step => steps.push(step),
            }
        }
    }

    fn records(steps: &[Step]) -> Vec<u64> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Record { at, .. } => Some(*at),
                _ => None,
            })
            .collect()
    }

    fn unreadable_of(steps: &[Step]) -> Vec<(u64, u64, Unreadable)> {
        steps
            .iter()
            .filter_map(|s| match *s {
                Step::Unreadable { at, len, kind } => Some((at, len, kind)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn damage_in_the_middle_is_skipped_and_every_other_record_read() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let (clean, starts) = file(format, 50);
            assert_eq!(records(&scan(&clean)), starts);
            // A captured length made larger (twice in a row, then by 8
            // bytes less than a wrap): only that record is lost each time.
            let length_at = match format {
                CaptureFormat::Pcap => 8,
                CaptureFormat::PcapNg => 20,
            };
            for (victim, change) in [(20usize, 1u32 << 24), (21, 1 << 24), (30, 0x7fff_fff8)] {
                let mut bytes = clean.clone();
                let at = starts[victim] as usize + length_at;
                let length = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
                bytes[at..at + 4].copy_from_slice(&length.wrapping_add(change).to_le_bytes());
                let steps = scan(&bytes);
                let expected: Vec<u64> = starts.iter().copied().filter(|&s| s != starts[victim]).collect();
                assert_eq!(
                    records(&steps),
                    expected,
                    "{format:?}, record {victim} changed by {change:#x}"
                );
                assert_eq!(
                    unreadable_of(&steps),
                    [(starts[victim], starts[victim + 1] - starts[victim], Unreadable::Middle)]
                );
            }
            // A captured length made 8 bytes shorter: in pcap nothing but
            // the record after it says so, and the 8 bytes between are
            // what is skipped; in pcapng the block's length disagrees.
            let mut bytes = clean.clone();
            let at = starts[40] as usize + length_at;
            let length = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            bytes[at..at + 4].copy_from_slice(&(length - 8).to_le_bytes());
            let steps = scan(&bytes);
            match format {
                CaptureFormat::Pcap => {
                    assert_eq!(records(&steps), starts);
                    assert_eq!(unreadable_of(&steps), [(starts[41] - 8, 8, Unreadable::Middle)]);
                }
                CaptureFormat::PcapNg => {
                    assert_eq!(records(&steps).len(), 49);
                    assert_eq!(
                        unreadable_of(&steps),
                        [(starts[40], starts[41] - starts[40], Unreadable::Middle)]
                    );
                }
            }
            // Garbage where records should be.
            let mut bytes = clean.clone();
            let (from, to) = (starts[10] as usize, starts[13] as usize);
            bytes[from..to].fill(0xa5);
            let steps = scan(&bytes);
            assert_eq!(records(&steps).len(), 47);
            assert_eq!(
                unreadable_of(&steps),
                [(from as u64, (to - from) as u64, Unreadable::Middle)]
            );
        }
    }

    #[test]
    fn what_a_crash_leaves_at_the_end_is_told_apart() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let (clean, starts) = file(format, 20);
            let last = starts[19];
            // Torn inside the last record, inside its header, and zeros.
            for (bytes, kind) in [
                (clean[..last as usize + 30].to_vec(), Unreadable::Torn),
                (clean[..last as usize + 5].to_vec(), Unreadable::Torn),
                ([&clean[..], &[0; 4096]].concat(), Unreadable::Zeros),
                ([&clean[..], &[0x77; 100]].concat(), Unreadable::Garbage),
            ] {
                let steps = scan(&bytes);
                let whole = records(&steps).len();
                let tail = unreadable_of(&steps);
                assert_eq!(tail.len(), 1, "{format:?} {kind:?}: {steps:?}");
                assert_eq!(tail[0].2, kind, "{format:?}");
                assert_eq!(tail[0].0 + tail[0].1, bytes.len() as u64);
                assert!(whole == 19 || whole == 20, "{format:?} {kind:?}: {whole}");
            }
        }
    }

    #[test]
    fn a_clock_stepped_back_is_followed_when_the_records_after_it_agree() {
        let format = CaptureFormat::Pcap;
        let mut bytes = format.file_header(1, 2000);
        for i in 0..10u64 {
            let ts = if i < 5 { T0 + i } else { T0 - 3600 * 1_000_000_000 + i };
            bytes.extend(record(format, ts, &[i as u8; 80]));
        }
        let steps = scan(&bytes);
        assert_eq!(records(&steps).len(), 10, "{steps:?}");
    }
}
