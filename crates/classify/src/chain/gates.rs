//! The dissectors' `prefix` fields compiled for one pass: by transport
//! and first byte, the fields of every dissector that first byte leaves,
//! each read from the same words of the data's first bytes without a
//! branch, so that the dissectors whose fields rule the data out are struck
//! off together for a fraction of what their calls and refusals cost.

use super::Candidates;
use crate::dissectors::{Dissector, Field, Prefix, Transport};

/// The data's first bytes as every field may read them: the four bytes
/// from each offset, big-endian, then the same little-endian.
type Words = [u32; 2 * Prefix::BYTES];

/// One field, compiled, with the dissector it belongs to.
#[derive(Clone, Copy, Debug)]
struct Gate {
    /// The offset, in the little-endian words when the field is.
    word_at: u8,
    /// The data's length from which the field is judged.
    from: u8,
    /// What a big-endian field of less than four bytes is shifted right.
    shift: u8,
    /// The dissector's word and bit in a candidate set.
    word: u8,
    bit: u8,
    mask: u32,
    min: u32,
    span: u32,
}

impl Gate {
    fn of(f: &Field, d: usize) -> Gate {
        let little = usize::from(f.little) * Prefix::BYTES;
        Gate {
            word_at: (little + usize::from(f.offset)) as u8,
            from: f.from,
            shift: if f.little { 0 } else { 8 * (4 - f.width) },
            word: (d / 64) as u8,
            bit: (d % 64) as u8,
            mask: f.mask,
            min: f.min,
            span: f.max - f.min,
        }
    }

    /// Whether the field rules out data of `len` bytes whose words are
    /// `words`: no branch, so that a pass over many costs a few
    /// instructions each.
    #[inline(always)]
    fn rules_out(&self, words: &Words, len: usize) -> bool {
        let value = (words[usize::from(self.word_at) % words.len()] >> self.shift) & self.mask;
        (len >= usize::from(self.from)) & (value.wrapping_sub(self.min) > self.span)
    }
}

fn words_of(data: &[u8]) -> Words {
    let mut head = [0; Prefix::BYTES + 3];
    let n = data.len().min(Prefix::BYTES);
    head[..n].copy_from_slice(&data[..n]);
    let mut words = [0; 2 * Prefix::BYTES];
    for (at, bytes) in head.windows(4).enumerate() {
        let bytes: [u8; 4] = bytes.try_into().unwrap_or_default();
        words[at] = u32::from_be_bytes(bytes);
        words[Prefix::BYTES + at] = u32::from_le_bytes(bytes);
    }
    words
}

/// Every dissector's fields, by transport and first byte.
#[derive(Debug, Default)]
pub(super) struct Gates {
    gates: Vec<Gate>,
    /// By transport and first byte, the fields of the dissectors that
    /// accept that first byte, their range of `gates`: first the first
    /// field of each, then the others.
    spans: Vec<[Span; 256]>,
    /// By transport, the dissectors with fields.
    fixing: [Candidates; 2],
}

#[derive(Clone, Copy, Debug, Default)]
struct Span {
    start: u32,
    /// Where the dissectors' other fields start.
    others: u32,
    end: u32,
}

impl Gates {
    pub(super) fn new(dissectors: &[Dissector]) -> Gates {
        let mut gates = Vec::new();
        let mut spans = vec![[Span::default(); 256]; 2];
        let mut fixing = [Candidates::default(); 2];
        for (t, transport) in [Transport::Tcp, Transport::Udp].into_iter().enumerate() {
            for first in 0..=255u8 {
                let fields: Vec<(usize, &[Field])> = dissectors
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.wants.accepts(transport) && d.first_byte.on(transport).contains(first))
                    .map(|(i, d)| (i, d.prefix.on(transport)))
                    .filter(|(_, fields)| !fields.is_empty())
                    .collect();
                let start = gates.len() as u32;
                for &(d, f) in &fields {
                    gates.push(Gate::of(&f[0], d));
                    fixing[t][d / 64] |= 1 << (d % 64);
                }
                let others = gates.len() as u32;
                for &(d, f) in &fields {
                    gates.extend(f[1..].iter().map(|f| Gate::of(f, d)));
                }
                let end = gates.len() as u32;
                spans[t][usize::from(first)] = Span { start, others, end };
            }
        }
        Gates { gates, spans, fixing }
    }

    /// Whether dissector `d` has fields on `transport` (0 TCP, 1 UDP).
    #[inline(always)]
    pub(super) fn fixes(&self, d: usize, transport: usize) -> bool {
        self.fixing[transport][d / 64] & (1 << (d % 64)) != 0
    }

    /// Strikes off `candidates` every dissector a field of which rules out
    /// `data` on `transport` (0 TCP, 1 UDP): a pass over the first field
    /// of each dissector its first byte leaves, then over the other fields
    /// of those still standing.
    pub(super) fn strike(&self, transport: usize, data: &[u8], candidates: &mut Candidates) {
        let span = self.spans[transport][usize::from(data[0])];
        let words = words_of(data);
        let mut struck = Candidates::default();
        for g in &self.gates[span.start as usize..span.others as usize] {
            let word = usize::from(g.word) % struck.len();
            struck[word] |= u64::from(g.rules_out(&words, data.len())) << g.bit;
        }
        for (live, struck) in candidates.iter_mut().zip(struck) {
            *live &= !struck;
        }
        for g in &self.gates[span.others as usize..span.end as usize] {
            let word = usize::from(g.word) % candidates.len();
            if candidates[word] & (1 << g.bit) != 0 && g.rules_out(&words, data.len()) {
                candidates[word] &= !(1 << g.bit);
            }
        }
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
    /// with each field's bounds, and their neighbours, in place.
    #[test]
    fn gates_strike_what_the_fields_rule_out() {
        let dissectors = registry();
        let gates = Gates::new(dissectors);
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
                    let mut candidates = [u64::MAX; 4];
                    gates.strike(t, &data, &mut candidates);
                    for (d, other) in dissectors.iter().enumerate() {
                        let live = candidates[d / 64] & (1 << (d % 64)) != 0;
                        let admitted = !other.wants.accepts(transport)
                            || !other.first_byte.on(transport).contains(data[0])
                            || other.prefix.admits(transport, &data);
                        assert_eq!(live, admitted, "{} on {transport:?}: {data:?}", other.name);
                        struck += usize::from(!live);
                    }
                }
            }
        }
        assert!(struck > 0);
    }
}
