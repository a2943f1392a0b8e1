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

/// Has the kernel back the pages under `v`'s elements from its length up
/// to `ahead` elements further (within its capacity) now, in one system
/// call, where writing them one by one would trap once a page. Returns the
/// number of elements from the start whose memory is backed, or the whole
/// capacity where the kernel cannot (before Linux 5.14), so that the
/// caller stops asking and the pages fault in as they are written.
pub(crate) fn back_ahead<T>(v: &Vec<T>, ahead: usize) -> usize {
    let upto = (v.len() + ahead).min(v.capacity());
    match back(v, v.len(), upto) {
        Some(backed) => backed,
        None => v.capacity(),
    }
}

/// Has the kernel back the whole pages under elements `from..upto` of
/// `v`'s allocation (its capacity) now, in one system call. Returns the
/// number of elements from the start whose memory is then backed, or
/// `None` if the range holds no whole page or the kernel cannot.
pub(crate) fn back<T>(v: &Vec<T>, from: usize, upto: usize) -> Option<usize> {
    let size = std::mem::size_of::<T>().max(1);
    let base = v.as_ptr() as usize;
    let upto = upto.min(v.capacity());
    let start = (base + from * size) & !(PAGE - 1);
    // A page that reaches past the allocation may not be ours.
    let end = (base + upto * size) & !(PAGE - 1);
    (end > start && populate_write(start, end - start)).then(|| (end - base) / size)
}

const PAGE: usize = 4096;

/// `MADV_POPULATE_WRITE` over `[start, start + len)`, page-aligned and
/// inside one of the process's own private writable mappings.
#[allow(unsafe_code)]
fn populate_write(start: usize, len: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range lies inside an allocation of this process
        // (the caller's vector); populating for write backs its pages as
        // a first write would and changes no byte the program has written.
        unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (start, len);
        false
    }
}

/// Drops `v`'s values and gives the whole pages under its capacity back
/// to the kernel (`MADV_DONTNEED`) now, rather than at the process's exit:
/// each worker's thread frees its own table's pages as it ends, in
/// parallel, where the exit freed them all on one core.
#[allow(unsafe_code)]
pub(crate) fn give_back<T>(v: &mut Vec<T>) {
    v.clear();
    #[cfg(target_os = "linux")]
    {
        let base = v.as_ptr() as usize;
        let start = base.next_multiple_of(PAGE);
        let end = (base + v.capacity() * std::mem::size_of::<T>()) & !(PAGE - 1);
        if end > start {
            // SAFETY: whole pages inside the vector's own allocation, which
            // holds no value now (cleared); they read as zeros if touched
            // again, and the allocator never assumes more of freed memory.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
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
    use super::{PAGE, back_ahead, give_back, lines};

    /// Pages of `[start, end)` the kernel has backed (`mincore`).
    #[allow(unsafe_code)]
    fn resident(start: usize, end: usize) -> Vec<bool> {
        let pages = (end - start).div_ceil(PAGE);
        let mut flags = vec![0u8; pages];
        // SAFETY: page-aligned range of this process's own allocation;
        // `flags` holds one byte per page.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, end - start, flags.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        flags.iter().map(|f| f & 1 == 1).collect()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn backing_ahead_backs_the_whole_pages_under_the_next_slots_only() {
        // Large enough for the allocator to map it fresh from the kernel.
        let mut v: Vec<[u8; 704]> = Vec::with_capacity(100_000);
        v.push([1; 704]);
        let backed = back_ahead(&v, 1_000);
        let base = v.as_ptr() as usize;
        let frontier = (base + 1_001 * 704) & !(PAGE - 1);
        assert_eq!(backed, (frontier - base) / 704);
        let first = base & !(PAGE - 1);
        assert!(
            resident(first, frontier).iter().all(|&r| r),
            "every page up to the frontier"
        );
        let beyond = resident(frontier, frontier + 64 * PAGE);
        assert!(beyond.iter().all(|&r| !r), "none beyond it");
        // The elements themselves are untouched: the first still reads back.
        assert_eq!(v[0], [1; 704]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn given_back_pages_are_no_longer_backed() {
        let mut v: Vec<[u8; 640]> = Vec::with_capacity(10_000);
        v.resize(10_000, [3; 640]);
        let base = v.as_ptr() as usize;
        let (first, last) = (base.next_multiple_of(PAGE), (base + 10_000 * 640) & !(PAGE - 1));
        assert!(resident(first, last).iter().all(|&r| r), "filled, every page is backed");
        give_back(&mut v);
        assert!(v.is_empty());
        assert!(resident(first, last).iter().all(|&r| !r), "given back, none is");
    }

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
