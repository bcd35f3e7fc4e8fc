//! A cache-line prefetch hint for the engine's hot walks.

/// Asks the CPU to bring `x`'s cache line in ahead of its use: the engine's walks (running
/// sequences in admission order, the prefix cache's least recently used blocks) and its drivers'
/// per-token bookkeeping go where no hardware prefetcher looks. A hint only: nothing is read, and
/// results cannot change.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetching is a hint; it reads nothing and cannot fault
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
