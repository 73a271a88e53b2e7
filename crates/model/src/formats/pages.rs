//! Dropping a file mapping's pages from the process once their contents have been copied.
//!
//! A weight read in place stays mapped; one that is repacked (GGUF rows reordered, gpt-oss's
//! MXFP4 blocks moved into ggml's layout, f32 packed for the kernels) is read once and never
//! again. Its pages would still count in the process's resident size on top of the copy, doubling
//! the peak for the tensors concerned, until the kernel needed the memory. `MADV_DONTNEED` lets
//! the process give them up now: they stay in the page cache, and touching them again simply
//! maps them again, with the file's contents.

/// Advise the kernel that the whole pages inside `bytes`, which must lie in a read-only file
/// mapping (never heap memory: there `MADV_DONTNEED` would zero them), are not needed.
/// Elsewhere than Linux, nothing.
pub(crate) fn release_mapped(bytes: &[u8]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = (bytes.as_ptr() as usize).next_multiple_of(PAGE);
        let end = (bytes.as_ptr() as usize + bytes.len()) / PAGE * PAGE;
        if end > start {
            // SAFETY: advice on whole pages inside a read-only file mapping that the caller
            // keeps alive; their contents stay what the file holds.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    /// Resident kilobytes of the mapping that holds `addr`, from `/proc/self/smaps`.
    fn resident_kb(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("Rss:") {
                    return kb.trim().trim_end_matches("kB").trim().parse().unwrap();
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// A mapped file's pages leave the process's resident set and read back unchanged.
    #[test]
    fn released_pages_leave_the_resident_set_and_keep_their_contents() {
        let mut file = tempfile::tempfile().unwrap();
        let contents: Vec<u8> = (0..4 << 20).map(|i: usize| (i * 7 % 251) as u8).collect();
        file.write_all(&contents).unwrap();
        // SAFETY: a private temporary file that nothing else writes.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let sum: u64 = map.iter().map(|&b| b as u64).sum();
        let addr = map.as_ptr() as usize;
        let before = resident_kb(addr);
        assert!(before >= 4 << 10, "touched 4 MiB, resident {before} kB");
        release_mapped(&map);
        let after = resident_kb(addr);
        assert!(after < 64, "{after} kB still resident of 4 MiB released");
        assert_eq!(map.iter().map(|&b| b as u64).sum::<u64>(), sum);
        assert_eq!(&map[..], &contents[..]);
    }
}
