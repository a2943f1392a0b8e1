//! How numbers and strings are spelled in both formats. A record is some
//! 200 short pieces (keys, numbers, names), so each piece is written
//! straight into the output's spare capacity: no intermediate buffer, no
//! call into libc's `memcpy` for a few bytes.

/// Takes `n` more bytes of the spare capacity, which the caller wrote.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn set_len(out: &mut Vec<u8>, n: usize) {
    debug_assert!(n <= out.capacity() - out.len());
    // SAFETY: the caller initialised the first `n` bytes of the spare
    // capacity (`put`, `JsonlEncoder::key`).
    unsafe { out.set_len(out.len() + n) };
}

/// Appends a short slice. Up to 32 bytes go as two overlapping fixed-size
/// moves: the call into libc for each cost more than the JSON encoding
/// itself (it was 11 % of a worker's time).
#[inline(always)]
pub(crate) fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if n > 32 {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(32);
    let spare = &mut out.spare_capacity_mut()[..32];
    if n >= 16 {
        spare[..16].write_copy_of_slice(&bytes[..16]);
        spare[n - 16..][..16].write_copy_of_slice(&bytes[n - 16..][..16]);
    } else if n >= 8 {
        spare[..8].write_copy_of_slice(&bytes[..8]);
        spare[n - 8..][..8].write_copy_of_slice(&bytes[n - 8..][..8]);
    } else if n >= 4 {
        spare[..4].write_copy_of_slice(&bytes[..4]);
        spare[n - 4..][..4].write_copy_of_slice(&bytes[n - 4..][..4]);
    } else {
        for (to, &b) in spare.iter_mut().zip(bytes) {
            to.write(b);
        }
    }
    set_len(out, n);
}

/// A number in decimal. Single digits, most of a record's counters (TCP
/// flags, retransmissions, directions), skip the general formatter.
#[inline(always)]
pub(crate) fn write_u64(out: &mut Vec<u8>, value: u64) {
    if value < 10 {
        out.push(b'0' + value as u8);
    } else {
        put(out, itoa::Buffer::new().format(value).as_bytes());
    }
}

/// Shortest round-trip decimal (what `ryu` writes), with non-finite
/// values (never produced, but never allowed to corrupt a line either) as
/// `null`. Most of a record's decimals are whole or have at most three
/// decimals (the schema rounds means, deviations and confidences), and
/// those are written in integer code; the rest go through `ryu`.
pub(crate) fn write_f64(out: &mut Vec<u8>, value: f64) {
    // Whole is tested by a round trip through an integer, two
    // instructions, where `fract` calls a software `trunc` on the baseline
    // x86-64 target. `ryu` writes whole numbers below 10^16 as `N.0`.
    if (0.0..1e15).contains(&value) && value.is_sign_positive() {
        if (value as u64) as f64 == value {
            write_u64(out, value as u64);
            put(out, b".0");
            return;
        }
        if value < 1e12 && write_thousandths(out, value) {
            return;
        }
    }
    if value.is_finite() {
        put(out, ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Writes a positive `value` below 10^12 that is the double nearest to a
/// number of thousandths, as that decimal without trailing zeros, and
/// says whether it was. Such a decimal has at most 15 significant digits,
/// and two of those never share a double, so it is the shortest text that
/// reads back as `value`: the one `ryu` would write.
#[inline]
fn write_thousandths(out: &mut Vec<u8>, value: f64) -> bool {
    // Adding a half rather than calling `round` (a libm call on the
    // baseline x86-64 target) can miss at a tie, which the check catches.
    let thousandths = (value * 1000.0 + 0.5) as u64;
    if thousandths as f64 / 1000.0 != value {
        return false;
    }
    write_u64(out, thousandths / 1000);
    let fraction = (thousandths % 1000) as usize;
    let digits = [
        b'.',
        b'0' + (fraction / 100) as u8,
        b'0' + (fraction / 10 % 10) as u8,
        b'0' + (fraction % 10) as u8,
    ];
    let kept = if fraction.is_multiple_of(100) {
        2
    } else if fraction.is_multiple_of(10) {
        3
    } else {
        4
    };
    put(out, &digits[..kept]);
    true
}

/// Whether `s` holds a byte that a JSON string must escape: a control
/// character, `"` or `\`. Host names, URIs, user agents, fingerprints and
/// labels almost never hold one, and are then copied whole. No byte is
/// tested alone unless the string is shorter than eight: sixteen bytes at
/// a time (vector compares), eight at a time below sixteen, and the tail
/// as a last block that overlaps the one before.
#[inline]
pub(crate) fn needs_json_escape(s: &[u8]) -> bool {
    let n = s.len();
    if n >= 16 {
        s.chunks_exact(16).any(block_escapes) || block_escapes(&s[n - 16..])
    } else if n >= 8 {
        word_escapes(&s[..8]) || word_escapes(&s[n - 8..])
    } else {
        s.iter().any(|&b| escaped(b))
    }
}

#[inline(always)]
fn escaped(b: u8) -> bool {
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// Sixteen bytes without a branch inside, which the compiler turns into
/// a few vector compares.
#[inline(always)]
fn block_escapes(block: &[u8]) -> bool {
    block[..16].iter().fold(false, |hit, &b| hit | escaped(b))
}

/// Eight bytes as one word. Exact for "any byte": a false hit in one byte
/// needs a true one in a lower byte (the borrow), so the word as a whole
/// is never wrong.
#[inline(always)]
fn word_escapes(word: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let any_below = |w: u64, n: u8| w.wrapping_sub(ONES * n as u64) & !w & HIGHS != 0;
    let any_equal = |w: u64, b: u8| any_below(w ^ (ONES * b as u64), 1);
    let w = u64::from_le_bytes(word[..8].try_into().expect("8 bytes"));
    any_below(w, 0x20) | any_equal(w, b'"') | any_equal(w, b'\\')
}

#[cfg(test)]
mod tests {
    use super::{needs_json_escape, put, write_f64, write_u64};

    #[test]
    fn integers_read_as_std_writes_them() {
        let mut values: Vec<u64> = vec![0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX / 10];
        for digits in 1..=19 {
            let power = 10u64.pow(digits);
            values.extend([power - 1, power, power + 1, power / 2 + 7]);
        }
        values.extend((0..5000).map(|i| i * 7919));
        values.push(1_704_067_200_206_485_000);
        for v in values {
            let mut out = b"x".to_vec();
            write_u64(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), format!("x{v}"));
        }
    }

    #[test]
    fn numbers_read_as_ryu_writes_them() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            9.0,
            10.0,
            175.0,
            0.5,
            0.001,
            0.0005,
            0.999,
            1e15 - 1.0,
            1e15,
            1e16,
            1e17,
            1e12 - 0.001,
            1e12 + 0.5,
            -3.0,
            -2.125,
            2.5e-7,
            4379669461.538462,
            f64::MIN_POSITIVE,
        ];
        values.extend((0..2000).map(|i| f64::from(i) * 37.0));
        values.extend((0..2000).map(|i| f64::from(i) / 7.0));
        values.extend((0..20000).map(|i| f64::from(i) / 1000.0));
        values.extend((0..20000).map(|i| (f64::from(i) * 7.77 * 1000.0).round() / 1000.0));
        values.extend((0..2000).map(|i| (f64::from(i) * 123_456_789.123).round() / 1000.0));
        for v in values {
            let mut out = Vec::new();
            write_f64(&mut out, v);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                ryu::Buffer::new().format_finite(v),
                "{v}"
            );
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut out = Vec::new();
            write_f64(&mut out, v);
            assert_eq!(out, b"null");
        }
    }

    #[test]
    fn put_appends_every_length_exactly() {
        let source: Vec<u8> = (0..48u8).map(|b| b'a' + b % 26).collect();
        for n in 0..=source.len() {
            let mut out = b"head".to_vec();
            put(&mut out, &source[..n]);
            put(&mut out, b"|");
            assert_eq!(&out[..4], b"head");
            assert_eq!(&out[4..4 + n], &source[..n], "length {n}");
            assert_eq!(out.len(), 5 + n);
        }
    }

    /// Every byte value at every place of strings of every length up to
    /// 40 (two blocks and a tail): the test by blocks and words agrees
    /// with the byte-wise one.
    #[test]
    fn escape_test_agrees_with_bytewise_on_every_byte_and_place() {
        let bytewise = |s: &[u8]| s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        for len in 0..=40 {
            for place in 0..len {
                for byte in 0..=255u8 {
                    let mut s = vec![b'a'; len];
                    s[place] = byte;
                    assert_eq!(needs_json_escape(&s), bytewise(&s), "{s:?}");
                    // Neighbours that trip a naive borrow test.
                    s.iter_mut().for_each(|b| *b = 0x21);
                    s[place] = byte;
                    assert_eq!(needs_json_escape(&s), bytewise(&s), "{s:?}");
                }
            }
        }
        assert!(!needs_json_escape("t13d1516h2_8daaf6152771".as_bytes()));
        assert!(!needs_json_escape("ünïcödé".as_bytes()));
    }
}
