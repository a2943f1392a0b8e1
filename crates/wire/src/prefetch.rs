//! A hint to the processor that memory is about to be read. The reader of
//! capture files and the flow tables both use it; it lives here, in the
//! layer both build on.

/// Asks for the cache line holding `address` ahead of its use. It reads
/// nothing and changes nothing the program computes.
#[inline(always)]
#[allow(unsafe_code)]
pub fn prefetch(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE, the feature the intrinsic needs, is part of the x86_64
    // baseline, and a prefetch never faults and has no architectural effect,
    // whatever the address.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
