//! Two hints to the hardware and the kernel that the flow table's random
//! access pattern needs. Neither changes what the program computes.

/// Asks for the cache line holding `value` ahead of its use.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect; the
    // pointer comes from a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(value as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Prefetches every cache line of `value`.
#[inline(always)]
pub(crate) fn prefetch_all<T>(value: &T) {
    let bytes = std::mem::size_of::<T>();
    let base = value as *const T as *const u8;
    let mut offset = 0;
    while offset < bytes {
        // Stepping through the object's own bytes keeps the address inside
        // it; `wrapping_add` avoids any claim about provenance.
        prefetch(&base.wrapping_add(offset));
        offset += 64;
    }
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
