//! Bytes on their way to a consumer: header lines and copied bodies in a
//! buffer of their own, and bodies left where they lie in the mapped
//! capture file, to be written from there.
//!
//! With SF-TAP's workload nearly every byte an analyzer reads is a
//! payload of the capture file. Copying each payload into a queue, and a
//! held request twice (into its flow, then into the queue), was the
//! largest copying capture did; the writer's `writev` now takes those
//! bodies straight from the file's mapping.

use sluice_capture::FileBytes;

/// Bodies shorter than this are copied: an entry of the writer's `writev`
/// costs more than copying a few hundred bytes.
const LEND_AT: usize = 512;

/// The file whose bodies may be queued by reference: the one being read.
/// A body is looked at when it is queued, and the frames it comes from
/// are then the current file's (what reassembly or defragmentation holds
/// is copied), so older files need no look. The writer thread holds a
/// clone of every file lent (`Job::Lend`), from before the first body of
/// it is queued until it exits, so the memory of a lent body stays mapped
/// for as long as anything may write it out.
#[derive(Default)]
pub struct Lenders {
    current: Option<std::ops::Range<usize>>,
}

impl Lenders {
    pub fn add(&mut self, bytes: &FileBytes) {
        let start = bytes.as_ptr() as usize;
        self.current = Some(start..start + bytes.len());
    }

    /// Whether `body` may be queued by reference.
    #[inline]
    pub fn lends(&self, body: &[u8]) -> bool {
        let (start, end) = (body.as_ptr() as usize, body.as_ptr() as usize + body.len());
        body.len() >= LEND_AT && self.current.as_ref().is_some_and(|r| r.start <= start && end <= r.end)
    }
}

/// A body queued by reference, after the owned bytes up to `own_end`.
#[derive(Clone, Copy, Debug)]
struct Lent {
    own_end: usize,
    ptr: *const u8,
    len: usize,
}

/// Bytes for one consumer, in order: owned bytes, and lent bodies between
/// them.
#[derive(Debug, Default)]
pub struct Queued {
    own: Vec<u8>,
    lent: Vec<Lent>,
    lent_bytes: usize,
}

// SAFETY: a `Lent` points into a file mapping that `Lenders::lends`
// vouched for. The mapping is read-only, and the writer thread, the only
// one that reads lent bodies once they leave capture, holds the mapping
// from before the first body lent from it was queued until it exits.
#[allow(unsafe_code)]
unsafe impl Send for Queued {}

impl Queued {
    pub fn with_capacity(own: usize) -> Queued {
        Queued {
            own: Vec::with_capacity(own),
            ..Queued::default()
        }
    }

    /// Bytes queued, owned and lent.
    pub fn len(&self) -> usize {
        self.own.len() + self.lent_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.own.capacity()
    }

    /// The memory this buffer takes: its own bytes' allocation and the
    /// references to lent bodies (which take none: they are the file's).
    pub fn memory(&self) -> usize {
        self.own.capacity() + self.lent.capacity() * std::mem::size_of::<Lent>()
    }

    pub fn clear(&mut self) {
        self.own.clear();
        self.lent.clear();
        self.lent_bytes = 0;
    }

    /// Where owned bytes are appended (header lines).
    pub fn own_mut(&mut self) -> &mut Vec<u8> {
        &mut self.own
    }

    /// Takes back the owned bytes appended since `own_len` (a header whose
    /// body turned out not to fit).
    pub fn truncate_own(&mut self, own_len: usize) {
        debug_assert!(self.lent.last().is_none_or(|l| l.own_end <= own_len));
        self.own.truncate(own_len);
    }

    pub fn own_len(&self) -> usize {
        self.own.len()
    }

    /// Appends a body: by reference if `lenders` lends it, else a copy.
    #[inline]
    pub fn push_body(&mut self, body: &[u8], lenders: &Lenders) {
        if lenders.lends(body) {
            self.lent.push(Lent {
                own_end: self.own.len(),
                ptr: body.as_ptr(),
                len: body.len(),
            });
            self.lent_bytes += body.len();
        } else {
            self.own.extend_from_slice(body);
        }
    }

    /// Appends everything `other` holds, its lent bodies still lent.
    pub fn append(&mut self, other: &Queued) {
        let base = self.own.len();
        self.own.extend_from_slice(&other.own);
        self.lent.extend(other.lent.iter().map(|l| Lent {
            own_end: base + l.own_end,
            ..*l
        }));
        self.lent_bytes += other.lent_bytes;
    }

    /// The queued bytes in order, as (address, length) pieces for
    /// `writev`: each is readable while this buffer is neither changed nor
    /// dropped and its lent bodies' files stay mapped.
    pub fn pieces(&self, piece: &mut impl FnMut(*const u8, usize)) {
        let mut own_at = 0;
        for l in &self.lent {
            if l.own_end > own_at {
                piece(self.own[own_at..].as_ptr(), l.own_end - own_at);
            }
            piece(l.ptr, l.len);
            own_at = l.own_end;
        }
        if self.own.len() > own_at {
            piece(self.own[own_at..].as_ptr(), self.own.len() - own_at);
        }
    }

    /// The queued bytes, copied out in order.
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.pieces(&mut |ptr, len| {
            // SAFETY: each piece lies in `self.own` or in a file the test
            // still maps, as `pieces` documents.
            #[allow(unsafe_code)]
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
        });
        out
    }
}

/// A capture file's mapped bytes, for tests: a pcap header, then `bytes`
/// from offset 24 (the records are never read).
#[cfg(test)]
pub(crate) fn mapped_capture(bytes: &[u8]) -> (tempfile::NamedTempFile, FileBytes) {
    use std::io::Write;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]).unwrap();
    file.write_all(&[0; 8]).unwrap();
    file.write_all(&[0xff, 0xff, 0, 0, 1, 0, 0, 0]).unwrap();
    file.write_all(bytes).unwrap();
    file.flush().unwrap();
    let mapped = sluice_capture::CaptureFile::open(file.path()).unwrap().bytes();
    (file, mapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_and_owned_bytes_keep_their_order() {
        let text: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        let (_file, file) = mapped_capture(&text);
        let bytes = &file[24..];
        let mut lenders = Lenders::default();
        lenders.add(&file);
        let mut q = Queued::default();
        q.own_mut().extend_from_slice(b"head1\n");
        q.push_body(&bytes[100..1100], &lenders);
        q.push_body(&bytes[2000..2010], &lenders);
        q.push_body(&text[0..600], &lenders);
        q.push_body(&bytes[3000..3600], &lenders);
        q.push_body(&bytes[3600..4096], &lenders);
        q.own_mut().extend_from_slice(b"tail\n");
        assert_eq!(q.lent.len(), 2, "long bodies of the file only");
        let mut expected = b"head1\n".to_vec();
        for part in [
            &text[100..1100],
            &text[2000..2010],
            &text[0..600],
            &text[3000..3600],
            &text[3600..4096],
        ] {
            expected.extend_from_slice(part);
        }
        expected.extend_from_slice(b"tail\n");
        assert_eq!(q.len(), expected.len());
        assert_eq!(q.to_vec(), expected);

        let mut both = Queued::default();
        both.own_mut().extend_from_slice(b"first\n");
        both.append(&q);
        both.append(&q);
        let mut twice = b"first\n".to_vec();
        twice.extend_from_slice(&expected);
        twice.extend_from_slice(&expected);
        assert_eq!(both.to_vec(), twice);
        both.clear();
        assert!(both.is_empty() && both.to_vec().is_empty());
    }

    #[test]
    fn only_bodies_wholly_inside_a_lent_file_are_lent() {
        let (_file, file) = mapped_capture(&[7u8; 2048]);
        let bytes = &file[24..];
        let mut lenders = Lenders::default();
        assert!(!lenders.lends(&bytes[..1024]), "nothing lent yet");
        lenders.add(&file);
        assert!(lenders.lends(&bytes[..1024]) && lenders.lends(&bytes[1024..]));
        assert!(!lenders.lends(&bytes[..LEND_AT - 1]), "short bodies are copied");
        let elsewhere = vec![7u8; 1024];
        assert!(!lenders.lends(&elsewhere));
    }
}
