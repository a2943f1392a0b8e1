//! What the flow table's random access pattern needs from the hardware
//! and the kernel: prefetches, huge pages, memory made ahead. None changes
//! what the program computes.

/// Asks for the cache line holding `value` ahead of its use.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    sluice_wire::prefetch((value as *const T).cast());
}

/// Prefetches every cache line of `value`.
#[inline(always)]
pub(crate) fn prefetch_all<T>(value: &T) {
    lines(value).for_each(sluice_wire::prefetch);
}

/// An address in each cache line of `value`'s own bytes (the address of a
/// pointer to it, a stack slot, would prefetch nothing of use).
#[inline(always)]
fn lines<T>(value: &T) -> impl Iterator<Item = *const u8> {
    let base: *const u8 = (value as *const T).cast();
    // `wrapping_add` avoids any claim about provenance.
    (0..std::mem::size_of::<T>())
        .step_by(64)
        .map(move |offset| base.wrapping_add(offset))
}

/// Backs a large, randomly accessed allocation with transparent huge
/// pages: a flow table of a million flows spans ~700 MB, and with 4 KiB
/// pages nearly every lookup would also miss the TLB.
#[allow(unsafe_code)]
pub(crate) fn advise_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        let start = v.as_ptr() as usize;
        let end = start + v.capacity() * std::mem::size_of::<T>();
        let aligned = start.next_multiple_of(4096);
        if end > aligned + (2 << 20) {
            // SAFETY: the range lies inside the vector's own allocation, and
            // MADV_HUGEPAGE only changes how the kernel backs those pages,
            // never their contents. Failure (no THP support) is harmless.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Writes every byte of `v`'s spare capacity (zeros, which make no value
/// of `T`: the length is unchanged), so that the kernel backs all of it now.
pub(crate) fn fault_in<T>(v: &mut Vec<T>) {
    for slot in v.spare_capacity_mut() {
        *slot = std::mem::MaybeUninit::zeroed();
    }
}

#[cfg(test)]
mod tests {
    use super::lines;

    #[test]
    fn every_line_prefetched_is_one_of_the_objects_own() {
        let object = [7u8; 700];
        let start = object.as_ptr() as usize;
        let addresses: Vec<usize> = lines(&object).map(|a| a as usize).collect();
        assert_eq!(addresses.len(), 700usize.div_ceil(64));
        assert!(addresses.iter().all(|&a| (start..start + 700).contains(&a)));
        assert_eq!(addresses[0], start);
    }
}
