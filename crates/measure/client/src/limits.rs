//! The client's own limits, checked before a run so that they are never blamed on the server:
//! open files (each connection is a file descriptor; the embedded engine's server side takes one
//! more per connection).

/// Descriptors a run needs besides its connections: the runtime, logs, the tokenizer, probes,
/// the scraper and a margin.
pub const FD_MARGIN: u64 = 64;

/// The process's open-file limits: (soft, hard).
#[cfg(unix)]
pub fn fd_limits() -> Option<(u64, u64)> {
    // SAFETY: an all-zero rlimit is valid; getrlimit fills it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid resource and a pointer to a live rlimit.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some((r.rlim_cur as u64, r.rlim_max as u64))
}

#[cfg(not(unix))]
pub fn fd_limits() -> Option<(u64, u64)> {
    None
}

/// Raises the soft open-file limit to the hard one (as far as the system allows); the soft limit
/// now in force.
#[cfg(unix)]
pub fn raise_fd_limit() -> Option<u64> {
    let (soft, hard) = fd_limits()?;
    if soft < hard {
        // macOS refuses more than OPEN_MAX for an unlimited hard limit: try the hard limit, then
        // a bounded one
        for want in [hard, hard.min(1 << 20), hard.min(10_240)] {
            let r = libc::rlimit { rlim_cur: want as libc::rlim_t, rlim_max: hard as libc::rlim_t };
            // SAFETY: a valid resource and a pointer to a live rlimit.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
                break;
            }
        }
    }
    fd_limits().map(|(s, _)| s)
}

#[cfg(not(unix))]
pub fn raise_fd_limit() -> Option<u64> {
    None
}

/// Raises the limit, then checks that `connections` connections (each taking
/// `fds_per_connection` descriptors) fit under it; why not, when they do not.
pub fn ensure_fds(connections: u64, fds_per_connection: u64) -> Result<(), FdShortage> {
    let Some(soft) = raise_fd_limit() else { return Ok(()) };
    let need = connections.saturating_mul(fds_per_connection) + FD_MARGIN;
    if need <= soft {
        return Ok(());
    }
    let hard = fd_limits().map_or(soft, |(_, h)| h);
    Err(FdShortage { need, soft, hard })
}

/// More connections than the process may open files for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "needs about {need} open files (one per connection, plus {FD_MARGIN}); this process may open {soft} \
     (`ulimit -n`; hard limit {hard}): raise the limit (ulimit -n {need}, as root if over the hard limit)"
)]
pub struct FdShortage {
    pub need: u64,
    pub soft: u64,
    pub hard: u64,
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let (_, hard) = fd_limits().unwrap();
        let soft = raise_fd_limit().unwrap();
        assert!(soft == hard || hard > 1 << 20, "{soft} of {hard}");
        assert!(ensure_fds(4, 1).is_ok());
        let e = ensure_fds(u64::MAX / 4, 2).unwrap_err();
        assert!(e.to_string().contains("ulimit -n"), "{e}");
    }
}
