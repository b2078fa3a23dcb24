//! The process's memory policy (glibc): few malloc arenas, and freed memory handed back to the
//! system once work is done. Measured on the embedder and LanceDB searches (docs/benchmarks.md,
//! "Memory"): with glibc's default of one arena per thread (eight per core), the threads of ONNX
//! Runtime, LanceDB and tokio each kept freed memory of their own, 40 MB more after a few dozen
//! searches; memory freed after a batch or a search stayed mapped until the next one; and a
//! search's large buffers, once glibc's moving mmap threshold had risen past them, too.
//!
//! Invariant: [`limit_arenas`] runs before any thread starts (first thing in `main`), and
//! [`trim`] never runs more than once a second (it walks every arena).

use std::sync::atomic::{AtomicU64, Ordering};

/// Blocks this large or larger are mapped on their own and unmapped when freed. glibc's default
/// threshold rises with every large block freed (up to 32 MiB), after which a vector search's
/// 1.5 and 12 MiB buffers land in the arenas and stay there until a trim: 40-65 MB over a few
/// dozen questions. Fixed, it no longer rises.
const MMAP_THRESHOLD: i32 = 1 << 20;

/// Two malloc arenas for the whole process, and large blocks given back as soon as they are
/// freed (glibc; elsewhere nothing). Call before any thread.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Hands memory freed since the last call back to the system (after an embedding pass, an
/// answer): at most once a second.
pub fn trim() {
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let last = LAST_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) < 1000 || LAST_MS.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
