//! The system allocator, with large blocks backed by the kernel's transparent huge pages.
//!
//! A capture is hundreds of megabytes written once (Whisper tiny's encoder alone: 4 layers × 6
//! heads × 1,500² weights, 216 MB), and a fresh process pays for every page it touches the
//! first time. On this project's machines (virtual, transparent huge pages on `madvise`),
//! touching 216 MB costs about 0.19 s in 4 KiB pages and 0.04 s in 2 MiB ones
//! (`docs/performance.md`, "Speech: Whisper"). So blocks of at least [`HUGE_MIN`] are marked
//! `MADV_HUGEPAGE` before they are first touched; the kernel backs their 2 MiB-aligned
//! stretches with huge pages where it has them and with small pages where it does not. A
//! hint only: nothing else about the allocation changes, and elsewhere than Linux it is the
//! system allocator as it is.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks from this size on are marked (two huge pages: a smaller block rarely holds an aligned
/// one).
const HUGE_MIN: usize = 4 << 20;

/// [`System`], with blocks of [`HUGE_MIN`] or more marked for huge pages.
pub struct HugePages;

#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, size: usize) {
    if ptr.is_null() || size < HUGE_MIN {
        return;
    }
    const PAGE: usize = 4096;
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + size) & !(PAGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated, which this process owns;
        // the advice changes how its pages are backed, never their contents. Failure (an old
        // kernel, huge pages off) leaves small pages: the result is ignored on purpose.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_: *mut u8, _: usize) {}

// SAFETY: every call is the system allocator's own; `advise` only adds a hint on memory the
// allocation owns.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.realloc(ptr, layout, new_size) };
        advise(ptr, new_size);
        ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size through the allocator keep their contents, zeroed ones start at
    /// zero, and growing one keeps what it held.
    #[test]
    fn blocks_of_every_size_behave_as_the_systems() {
        for size in [1usize, 4095, HUGE_MIN - 1, HUGE_MIN, 3 * HUGE_MIN + 17] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a non-zero size; each block is freed once with its layout.
            unsafe {
                let z = HugePages.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                let p = HugePages.alloc(layout);
                std::ptr::write_bytes(p, 7, size);
                let q = HugePages.realloc(p, layout, size * 2);
                assert!(std::slice::from_raw_parts(q, size).iter().all(|&b| b == 7));
                HugePages.dealloc(q, Layout::from_size_align(size * 2, 64).unwrap());
                HugePages.dealloc(z, layout);
            }
        }
    }
}
