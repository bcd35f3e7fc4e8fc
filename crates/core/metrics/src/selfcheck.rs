//! What a measuring client reports about itself beside its records: how late its async runtime
//! woke ([`RuntimeLag`]) and what its bookkeeping did ([`Bookkeeping`]). The simulator has
//! neither. Definitions and thresholds: `docs/metrics.md`, Client self-check.

use serde::{Deserialize, Serialize};

use crate::stats::{PercentileMethod, Samples};

/// Runtime lag p99 (ms) above which a run is `client_bound`: the client's runtime read responses
/// so late that TTFT and E2E carry the client's delay.
///
/// Why 5 ms: tokio's timer has a 1 ms resolution, so an idle runtime already wakes up to 1 ms
/// late, and a busy but healthy one polls its timers and sockets only every few dozen tasks,
/// which adds a millisecond or two at thousands of requests per second. A CPU hog or an
/// oversubscribed client shows as the OS scheduler's slices (several ms). 5 ms sits above the
/// first and below the second, and is a 10% error on a 50 ms TTFT.
pub const RUNTIME_LAG_LIMIT_MS: f64 = 5.0;

/// How late a probe task on the client's async runtime woke from sleeps to absolute deadlines
/// 10 ms apart, in ms: bytes that arrive while the runtime is that late wait as long to be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeLag {
    /// Wake-ups measured.
    pub n: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl RuntimeLag {
    /// The statistics of the probe's lags (ms; possibly sketched: a long run's probe keeps its
    /// ticks in bounded memory); `None` without any.
    pub fn of(lags_ms: &mut Samples, method: PercentileMethod) -> Option<Self> {
        let d = lags_ms.describe(method);
        Some(RuntimeLag { n: d.n, p50: d.p50?, p99: d.p99?, max: d.max? })
    }

    /// Two clients' lags as one bound: the worse of each statistic (percentiles of separate
    /// probes cannot be combined exactly; the worse one is an upper bound for the verdict).
    pub fn worst(self, o: Self) -> Self {
        RuntimeLag { n: self.n + o.n, p50: self.p50.max(o.p50), p99: self.p99.max(o.p99), max: self.max.max(o.max) }
    }

    /// The runtime was too late for the latencies to be the server's alone.
    pub fn too_late(&self) -> bool {
        self.p99 > RUNTIME_LAG_LIMIT_MS
    }
}

/// What the client's bookkeeping (token counting off the load loop) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bookkeeping {
    /// Records finished by the bookkeeping thread.
    pub finished: u64,
    /// Records finished on a request's task, without our counts, because the queue was full.
    pub overflowed: u64,
    /// Records finished without our tokenizer's counts (overflowed, or the run ended first).
    pub skipped: u64,
}

/// Streams whose body went on after `[DONE]` (measured runs). A request ends at `[DONE]`; what is
/// left of its body is drained apart from the load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfterDone {
    /// Streams whose body had not ended when `[DONE]` was read (most servers' terminating chunk
    /// simply arrives a moment later).
    pub drained: u64,
    /// Of those, the streams the server had not closed within the grace (2 s, or the idle
    /// timeout if shorter): their connections were dropped.
    pub left_open: u64,
}

impl std::ops::Add for AfterDone {
    type Output = Self;

    /// Two clients' streams together.
    fn add(self, o: Self) -> Self {
        AfterDone { drained: self.drained + o.drained, left_open: self.left_open + o.left_open }
    }
}

impl std::ops::Add for Bookkeeping {
    type Output = Self;

    /// Two clients' bookkeeping together.
    fn add(self, o: Self) -> Self {
        Bookkeeping {
            finished: self.finished + o.finished,
            overflowed: self.overflowed + o.overflowed,
            skipped: self.skipped + o.skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_samples(lags_ms: &[f64], method: PercentileMethod) -> Option<RuntimeLag> {
        RuntimeLag::of(&mut lags_ms.iter().copied().collect(), method)
    }

    #[test]
    fn sketched_lags_keep_their_count_and_bound() {
        // what a probe past its exact ticks reports: the same statistics within the sketch's bound
        let lags: Vec<f64> = (1..=1000).map(|k| k as f64 / 100.0).collect(); // 0.01 … 10 ms
        let mut sketched = Samples::with_limit(10);
        lags.iter().for_each(|&v| sketched.push(v));
        let l = RuntimeLag::of(&mut sketched, PercentileMethod::Linear).unwrap();
        let exact = from_samples(&lags, PercentileMethod::Linear).unwrap();
        assert_eq!((l.n, l.max), (1000, 10.0));
        for (got, want) in [(l.p50, exact.p50), (l.p99, exact.p99)] {
            assert!((got - want).abs() <= want / 128.0 + 1e-12, "{got} vs {want}");
        }
        assert!(l.too_late() && exact.too_late());
    }

    #[test]
    fn lag_statistics_and_the_limit() {
        // 100 wake-ups: 98 at 0.5 ms, one at 6 ms, one at 40 ms
        let mut lags = vec![0.5; 98];
        lags.extend([6.0, 40.0]);
        let l = from_samples(&lags, PercentileMethod::Linear).unwrap();
        assert_eq!((l.n, l.p50, l.max), (100, 0.5, 40.0));
        // rank 0.99 · 99 = 98.01: 6 + 0.01 · (40 − 6)
        assert!((l.p99 - 6.34).abs() < 1e-9, "{}", l.p99);
        assert!(l.too_late());
        let calm = from_samples(&[0.2, 0.9, 1.0], PercentileMethod::Linear).unwrap();
        assert!(!calm.too_late());
        let both = calm.worst(l);
        assert_eq!((both.n, both.p50, both.p99, both.max), (103, 0.9, l.p99, 40.0));
        assert_eq!(from_samples(&[], PercentileMethod::Linear), None);
    }

    #[test]
    fn bookkeeping_adds_up() {
        let a = Bookkeeping { finished: 10, overflowed: 2, skipped: 3 };
        assert_eq!(a + a, Bookkeeping { finished: 20, overflowed: 4, skipped: 6 });
    }
}
