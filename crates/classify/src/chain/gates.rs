//! The dissectors' `prefix` fields compiled for one pass: by transport
//! and first byte, the fields of every dissector that first byte leaves,
//! four at a time, each read from the same words of the data's first bytes
//! and judged without a branch, so that the dissectors whose fields rule the
//! data out are struck off together for a fraction of what their calls and
//! refusals cost.

use std::collections::HashMap;

use super::Candidates;
use crate::dissectors::{Dissector, Field, Prefix, Transport};

/// The data's first bytes as every field may read them: the four bytes
/// ending at each offset, big-endian, then the four from each offset,
/// little-endian, so that a field is its word ANDed with its mask.
type Words = [u32; 2 * Prefix::BYTES];

/// What flips a number's top bit, so that numbers compared as signed
/// compare as they would unsigned.
const TOP: u32 = 1 << 31;

/// Four fields, compiled, of dissectors of one word of a candidate set.
/// Aligned so that each group of four loads whole into a vector register.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
struct Block {
    mask: [u32; 4],
    /// The field's least value, less `TOP`: a value less this is its
    /// distance from the least, top bit flipped.
    min: [u32; 4],
    /// Of the range's width, the top bit flipped.
    span: [u32; 4],
    /// The data's length from which the field is judged.
    from: [u32; 4],
    /// The field's word.
    at: [u8; 4],
    /// The dissectors' word in a candidate set.
    word: u8,
    /// By the fields that rule the data out (a bit each), the dissectors
    /// struck off.
    struck: [u64; 16],
}

impl Block {
    /// Whether the four fields (a bit each) rule out data of `len` bytes
    /// whose words are `words`: written lane by lane for the compiler to
    /// judge the four at once.
    #[inline(always)]
    fn rules_out(&self, words: &Words, len: i32) -> usize {
        let values = self.at.map(|at| words[usize::from(at) % words.len()]);
        let mut out = [0i32; 4];
        for (lane, out) in out.iter_mut().enumerate() {
            let distance = (values[lane] & self.mask[lane]).wrapping_sub(self.min[lane]) as i32;
            // `ruled` is all ones when the value is out of range, `short`
            // when the data is too short for the field to be judged (`len`
            // and `from` are far from overflowing).
            let ruled = -i32::from(distance > self.span[lane] as i32);
            let short = (len - self.from[lane] as i32) >> 31;
            *out = ruled & !short;
        }
        (out[0] & 1 | out[1] & 2 | out[2] & 4 | out[3] & 8) as usize
    }
}

/// The data's first bytes, zeros past its end: with the data's length up
/// to the greatest length a field waits for, all that the fields judge.
type Head = [u8; Prefix::BYTES];

fn head_of(data: &[u8]) -> Head {
    let mut head = [0; Prefix::BYTES];
    let n = data.len().min(Prefix::BYTES);
    head[..n].copy_from_slice(&data[..n]);
    head
}

fn words_of(head: &Head) -> Words {
    // Three zero bytes before the data, for the big-endian words of the
    // fields that end in its first three bytes, and three after.
    let mut padded = [0; 3 + Prefix::BYTES + 3];
    padded[3..3 + Prefix::BYTES].copy_from_slice(head);
    let mut words = [0; 2 * Prefix::BYTES];
    for (at, bytes) in padded.windows(4).enumerate().take(Prefix::BYTES) {
        let bytes: [u8; 4] = bytes.try_into().unwrap_or_default();
        words[at] = u32::from_be_bytes(bytes);
    }
    for (at, bytes) in padded[3..].windows(4).enumerate().take(Prefix::BYTES) {
        let bytes: [u8; 4] = bytes.try_into().unwrap_or_default();
        words[Prefix::BYTES + at] = u32::from_le_bytes(bytes);
    }
    words
}

/// What the last pass judged, and the dissectors it struck off.
#[derive(Debug, Default)]
struct Last {
    transport: usize,
    head: Head,
    /// The data's length, clipped to `Gates::reach`.
    len: u32,
    struck: Candidates,
}

/// Every dissector's fields, by transport and first byte.
#[derive(Debug, Default)]
pub(super) struct Gates {
    blocks: Vec<Block>,
    /// By transport and first byte, the blocks of the fields of the
    /// dissectors that accept that first byte (first bytes that leave the
    /// same fields share them).
    spans: Vec<[(u32, u32); 256]>,
    /// By transport, the dissectors with fields.
    fixing: [Candidates; 2],
    /// The greatest length a field waits for: data as long or longer are
    /// judged alike.
    reach: u32,
    /// A scan or a flood brings flow after flow with the same first bytes
    /// (a fixed probe, zeros): those are judged once.
    last: Option<Last>,
}

impl Gates {
    pub(super) fn new(dissectors: &[Dissector]) -> Gates {
        let mut blocks = Vec::new();
        let mut spans = vec![[(0, 0); 256]; 2];
        let mut fixing = [Candidates::default(); 2];
        // By the dissectors' fields (a dissector's index and a field's), the
        // blocks compiled for them.
        let mut compiled: HashMap<Vec<(usize, usize)>, (u32, u32)> = HashMap::new();
        for (t, transport) in [Transport::Tcp, Transport::Udp].into_iter().enumerate() {
            for first in 0..=255u8 {
                let mut fields = Vec::new();
                for (d, dissector) in dissectors.iter().enumerate() {
                    if !dissector.wants.accepts(transport) || !dissector.first_byte.on(transport).contains(first) {
                        continue;
                    }
                    let own = dissector.prefix.on(transport);
                    if !own.is_empty() {
                        fixing[t][d / 64] |= 1 << (d % 64);
                    }
                    // A field of the first byte alone, judged from one
                    // byte on, says the same of all data with that first
                    // byte: one that admits it is left out.
                    fields.extend(
                        own.iter()
                            .enumerate()
                            .filter(|(_, f)| !(f.offset == 0 && f.width == 1 && f.from <= 1 && f.admits(&[first])))
                            .map(|(i, _)| (d, i)),
                    );
                }
                spans[t][usize::from(first)] = *compiled.entry(fields).or_insert_with_key(|fields| {
                    let start = blocks.len() as u32;
                    for word in 0..fixing[t].len() {
                        let of_word: Vec<(usize, Field)> = fields
                            .iter()
                            .filter(|(d, _)| d / 64 == word)
                            .map(|&(d, i)| (d, dissectors[d].prefix.on(transport)[i]))
                            .collect();
                        blocks.extend(of_word.chunks(4).map(|four| Block::of(four, word)));
                    }
                    (start, blocks.len() as u32)
                });
            }
        }
        let reach = blocks.iter().flat_map(|b| b.from).max().unwrap_or(0);
        Gates {
            blocks,
            spans,
            fixing,
            reach,
            last: None,
        }
    }

    /// Whether dissector `d` has fields on `transport` (0 TCP, 1 UDP).
    #[inline(always)]
    pub(super) fn fixes(&self, d: usize, transport: usize) -> bool {
        self.fixing[transport][d / 64] & (1 << (d % 64)) != 0
    }

    /// Strikes off `candidates` every dissector a field of which rules out
    /// `data` on `transport` (0 TCP, 1 UDP): one pass over the fields of
    /// the dissectors its first byte leaves, or none when the data are
    /// judged as the last pass's were.
    pub(super) fn strike(&mut self, transport: usize, data: &[u8], candidates: &mut Candidates) {
        let head = head_of(data);
        let len = data.len().min(self.reach as usize) as u32;
        let struck = match &self.last {
            Some(last) if last.head == head && last.len == len && last.transport == transport => last.struck,
            _ => {
                let struck = self.pass(transport, &head, len);
                self.last = Some(Last {
                    transport,
                    head,
                    len,
                    struck,
                });
                struck
            }
        };
        for (live, struck) in candidates.iter_mut().zip(struck) {
            *live &= !struck;
        }
    }

    /// The dissectors whose fields rule out data of `len` bytes (clipped to
    /// `reach`) beginning with `head`.
    fn pass(&self, transport: usize, head: &Head, len: u32) -> Candidates {
        let (start, end) = self.spans[transport][usize::from(head[0])];
        let words = words_of(head);
        let len = len as i32;
        let mut struck = Candidates::default();
        for block in &self.blocks[start as usize..end as usize] {
            let word = usize::from(block.word) % struck.len();
            struck[word] |= block.struck[block.rules_out(&words, len) % block.struck.len()];
        }
        struck
    }
}

impl Block {
    /// Up to four fields of dissectors of candidate word `word`; a lane
    /// left over never rules anything out.
    fn of(fields: &[(usize, Field)], word: usize) -> Block {
        let mut block = Block {
            word: word as u8,
            min: [0u32.wrapping_sub(TOP); 4],
            span: [u32::MAX ^ TOP; 4],
            ..Block::default()
        };
        for (lane, &(d, f)) in fields.iter().enumerate() {
            let at = if f.little {
                Prefix::BYTES + usize::from(f.offset)
            } else {
                usize::from(f.offset + f.width) - 1
            };
            block.at[lane] = at as u8;
            block.mask[lane] = f.mask;
            block.min[lane] = f.min.wrapping_sub(TOP);
            block.span[lane] = (f.max - f.min) ^ TOP;
            block.from[lane] = u32::from(f.from);
            for (ruling, struck) in block.struck.iter_mut().enumerate() {
                if ruling & (1 << lane) != 0 {
                    *struck |= 1 << (d % 64);
                }
            }
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissectors::registry;

    /// The compiled fields answer as `Field::admits` does, on data of every
    /// length up to past the prefix, random and of each field's bounds.
    /// Striking off by the compiled fields leaves what `Dissector::admits`
    /// admits, on data of every length up to past the prefix, random and
    /// with each field's bounds, and their neighbours, in place; so does
    /// striking again the data just struck, and the same data with zeros
    /// after them (the same first bytes as the last pass saw, longer).
    #[test]
    fn gates_strike_what_the_fields_rule_out() {
        let dissectors = registry();
        let mut gates = Gates::new(dissectors);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut struck = 0;
        for dissector in dissectors {
            for (t, transport) in [Transport::Tcp, Transport::Udp].into_iter().enumerate() {
                let fields = dissector.prefix.on(transport);
                for round in 0..400 {
                    let len = 1 + (next() % 24) as usize;
                    let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                    if round % 2 == 0
                        && let Some(&first) = (0..=255u8)
                            .filter(|&b| dissector.first_byte.on(transport).contains(b))
                            .collect::<Vec<_>>()
                            .get(round % 7)
                    {
                        data[0] = first;
                    }
                    if let Some(f) = fields.get(round % fields.len().max(1)) {
                        let value = [f.min, f.max, f.min.wrapping_sub(1), f.max.wrapping_add(1)][round % 4];
                        let bytes = if f.little {
                            value.to_le_bytes()
                        } else {
                            (value << (8 * (4 - u32::from(f.width)))).to_be_bytes()
                        };
                        for (i, b) in bytes.iter().take(usize::from(f.width)).enumerate() {
                            if let Some(slot) = data.get_mut(usize::from(f.offset) + i) {
                                *slot = *b;
                            }
                        }
                    }
                    let mut longer = data.clone();
                    longer.resize(len + 1 + (next() % 8) as usize, 0);
                    for data in [&data, &data, &longer, &longer] {
                        let mut candidates = [u64::MAX; 4];
                        gates.strike(t, data, &mut candidates);
                        for (d, other) in dissectors.iter().enumerate() {
                            let live = candidates[d / 64] & (1 << (d % 64)) != 0;
                            let admitted = !other.wants.accepts(transport)
                                || !other.first_byte.on(transport).contains(data[0])
                                || other.prefix.admits(transport, data);
                            assert_eq!(live, admitted, "{} on {transport:?}: {data:?}", other.name);
                            struck += usize::from(!live);
                        }
                    }
                }
            }
        }
        assert!(struck > 0);
    }
}
