//! Thread priorities: the embedded server's threads yield to the load generator's.

/// Sets the calling thread's nice value to `n` when positive (Linux; lowering a priority is always
/// permitted).
pub(crate) fn lower_priority(n: i32) {
    #[cfg(target_os = "linux")]
    if n > 0 {
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, n);
        }
    }
    let _ = n;
}

/// Lowers the calling thread's priority by `delta` nice steps (Linux; once per thread: a pool
/// thread that already did it keeps its level).
pub(crate) fn lower_priority_by(delta: i32) {
    thread_local!(static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    #[cfg(target_os = "linux")]
    unsafe {
        let cur = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, (cur + delta).min(19));
    }
    let _ = delta;
}
