//! The runtime-lag probe: how late the client's async runtime runs what is ready.
//!
//! A closed loop's next request goes out from the task whose stream just ended, so a starved
//! runtime (a CPU hog beside the client, too many streams for its cores) leaves no gap between a
//! reply and the next send: it delays *reading* the bytes instead, which lands inside TTFT and
//! E2E. This probe is a task on the same runtime that sleeps to absolute deadlines [`PERIOD`]
//! apart and records how late it wakes: a ready socket waits as long as a ready timer. The
//! summary reports the lags (`runtime_lag_ms`) and judges them against
//! `goodput_metrics::RUNTIME_LAG_LIMIT_MS`.
//!
//! It sleeps on tokio's timer, not with `goodput_pacing`'s sleep-then-spin: spinning would take
//! the very CPU it measures, and it is the runtime's lateness, timer rounding included (up to
//! 1 ms, which the limit allows for), that delays reads. Deadlines are absolute, so a stall of
//! `L` ms shows as lags `L`, `L − 10`, … : every tick it held up counts, as it would for the
//! streams waiting behind it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goodput_metrics::Samples;

/// Time between the probe's deadlines.
pub const PERIOD: Duration = Duration::from_millis(10);

/// Ticks kept exactly (10 minutes of probing); a longer run's lags are sketched from there on
/// (percentiles within 1/128, relative), so that an hour-long soak's probe does not grow with it.
pub const EXACT_TICKS: usize = 60_000;

/// A running probe (stops when dropped).
pub struct LagProbe {
    lags: Arc<Mutex<Samples>>,
    task: tokio::task::JoinHandle<()>,
}

impl LagProbe {
    /// Starts probing on the current runtime, deadlines counted from `t0`.
    pub fn start(t0: Instant) -> Self {
        let lags = Arc::new(Mutex::new(Samples::with_limit(EXACT_TICKS)));
        let out = Arc::clone(&lags);
        let task = tokio::spawn(async move {
            for k in 1u32.. {
                let deadline = t0 + PERIOD * k;
                tokio::time::sleep_until(deadline.into()).await;
                let late = Instant::now().saturating_duration_since(deadline);
                out.lock().expect("lag lock").push(late.as_secs_f64() * 1e3);
            }
        });
        LagProbe { lags, task }
    }

    /// Stops probing; the lags measured, ms.
    pub fn stop(self) -> Samples {
        self.task.abort();
        std::mem::take(&mut *self.lags.lock().expect("lag lock"))
    }
}

impl Drop for LagProbe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_blocked_runtime_shows_as_lag() {
        let probe = LagProbe::start(Instant::now());
        tokio::time::sleep(Duration::from_millis(35)).await;
        // hold the runtime's only thread: the probe cannot wake for 60 ms
        std::thread::sleep(Duration::from_millis(60));
        tokio::time::sleep(Duration::from_millis(25)).await;
        let mut lags = probe.stop();
        let d = lags.describe(goodput_metrics::PercentileMethod::Linear);
        // the tick due during the block woke at its end, at least 30 ms late (lower bound only:
        // a slow machine only makes it later)
        assert!(d.max.unwrap() >= 30.0, "{d:?}");
        assert!(d.n >= 9, "{d:?}");
    }
}
