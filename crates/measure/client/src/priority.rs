//! Scheduling priority for the load generator's threads, so that the measuring side is never the
//! bottleneck on a busy machine (for instance when the embedded engine shares its two cores).
//!
//! Linux only and best effort: raising a priority needs privileges (root or CAP_SYS_NICE); where
//! it is refused nothing changes, and the run's self-check reports any lag it causes.

/// The pacer thread: real-time FIFO priority (it sleeps between arrivals and spins only the last
/// tens of microseconds before each), else a strongly raised nice value; timers that wake within
/// microseconds of their deadline.
pub fn pacer() {
    goodput_pacing::precise_timers();
    #[cfg(target_os = "linux")]
    unsafe {
        let p = libc::sched_param { sched_priority: 10 };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, -15);
        }
    }
}

/// A worker thread of the load generator's runtime: nice −10.
pub fn worker() {
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, -10);
    }
}
