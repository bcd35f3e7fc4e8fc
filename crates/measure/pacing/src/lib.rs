//! Waiting until an absolute deadline, precisely: the one pacing helper of the load generator's
//! load thread and the embedded engine's thread.
//!
//! OS timers wake late (Linux's default timer slack is 50 µs; tokio's timer rounds up to 1 ms),
//! so a wait sleeps to [`SPIN`] short of the deadline, then spins the rest. The sleep is whatever
//! the caller waits on (a channel's timed receive, a thread park), so it can be woken early by
//! work; deadlines are absolute, so repeated waits never drift.

use std::time::{Duration, Instant};

/// How long before a deadline a wait stops sleeping and spins. With 1 µs timer slack
/// ([`precise_timers`]) a sleep wakes within tens of µs; a longer spin only takes CPU from the
/// threads beside it (the load thread shares one core with the runtime in `bench-ceiling.sh`:
/// at 5,000 req/s an 80 µs spin took 40% of it).
pub const SPIN: Duration = Duration::from_micros(30);

/// How long before a deadline [`wait_until`] stops sleeping and spins: [`SPIN`] where this
/// process may run on more than one CPU, none where it may run on one (`taskset -c 0`, a one-CPU
/// container). There a spin takes the only CPU from the threads that do the work the wait paces
/// (at 5,000 req/s a 30 µs spin per request is 15% of it), while a sleep with 1 µs timer slack
/// still wakes within tens of microseconds.
pub fn spin() -> Duration {
    static S: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *S.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus > 1 { SPIN } else { Duration::ZERO }
    })
}

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Woken<T> {
    /// The deadline came.
    Due,
    /// Something woke the wait first.
    Early(T),
}

/// Waits until `deadline`. `sleep(left)` sleeps for at most `left` and returns `None` when it
/// timed out, or `Some(x)` when something woke it (then the wait ends early with `x`). The last
/// [`spin`] before the deadline is spun, not slept.
pub fn wait_until<T>(deadline: Instant, mut sleep: impl FnMut(Duration) -> Option<T>) -> Woken<T> {
    let spin = spin();
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Woken::Due;
        }
        let left = deadline - now;
        if left > spin {
            if let Some(x) = sleep(left - spin) {
                return Woken::Early(x);
            }
        } else {
            spin_until(deadline);
            return Woken::Due;
        }
    }
}

/// Spins until `deadline` (for the last microseconds only).
pub fn spin_until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Wake within microseconds of a timed wait's end on this thread (Linux: 1 µs timer slack).
pub fn precise_timers() {
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_spin_where_the_process_has_one_cpu() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(spin(), if cpus > 1 { SPIN } else { Duration::ZERO });
    }

    #[test]
    fn due_or_early() {
        let d = Instant::now() + Duration::from_millis(3);
        assert_eq!(
            wait_until(d, |left| -> Option<()> {
                std::thread::sleep(left);
                None
            }),
            Woken::Due
        );
        assert!(Instant::now() >= d);
        let d = Instant::now() + Duration::from_secs(60);
        assert_eq!(wait_until(d, |_| Some(7)), Woken::Early(7));
    }
}
