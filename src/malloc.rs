//! What genied asks of glibc's allocator: thresholds that stay where they start, and free
//! memory given back after the documents search index's writer worked. No-ops on any other
//! C library (musl's allocator has neither knob).
//!
//! Why: glibc raises its mmap threshold, up to 32 MiB, each time a block it had mapped on
//! its own is freed, and its trim threshold with it (to twice that). Blocks of that size
//! then come from the thread's arena, and what they leave when freed stays resident at the
//! arena's top, which `malloc_trim` trims for the main arena only. The index's writer makes
//! and frees megabyte buffers (tantivy's 1 MiB memory pages, the batches' texts), so after a
//! start that built the index of 10,000 documents the server's anonymous memory stayed at
//! 17–23 MB, and the build peaked at 85–88 MB; with the thresholds fixed, 12.5–14 MB and
//! 69–70 MB (docs/performance.md, round thirty-seven). A request makes no block that large:
//! under strace, some 15,000 requests of four kinds made as many `mmap` calls either way (66)
//! and 364 `madvise` calls instead of 18, the arenas' tops given back as they shrink.

/// glibc's own starting value of both thresholds (128 KiB), kept.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const THRESHOLD: libc::c_int = 128 * 1024;

/// Fixes glibc's mmap and trim thresholds at their starting values. Called first thing by
/// `main`; tests that build the app in-process keep glibc's default.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn keep_thresholds_fixed() {
    // SAFETY: `mallopt` takes a parameter number and an int, and changes the allocator's
    // settings under its own lock; setting either threshold turns its dynamic adjustment off.
    // It touches no block in use.
    let ok = unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD)
            & libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD)
    };
    debug_assert_eq!(ok, 1, "mallopt");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_thresholds_fixed() {}

/// Returns the allocator's free pages to the system (glibc's `malloc_trim`): what the freed
/// blocks inside the arenas hold, which the fixed trim threshold does not reach. Called when
/// the search index's writer closes, which is after indexing only, never on a request's path:
/// after indexing 10,000 documents a server's anonymous memory stayed at 100–116 MB before
/// either change, 13–17 MB after a trim (round thirty-six).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() {
    // SAFETY: `malloc_trim` takes a byte count and works on the allocator's own free lists
    // under the allocator's locks; it frees no block in use and returns a flag.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}
