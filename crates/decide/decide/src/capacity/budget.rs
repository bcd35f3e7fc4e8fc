//! What a capacity step is judged against, and how long it runs: the SLO's latency budgets
//! ([`Budgets`]), the tests that a step's queue grows without bound ([`growing`]) or faster than
//! a ten-minute run allows ([`queue_trend`]), and a step's length ([`step_seconds`]).

use goodput_metrics::Slo;
// the steady-state judgement lives with the trends it judges (a run's over-saturation stop uses it too)
use goodput_metrics::slo::Metric;
pub use goodput_metrics::trend::{
    HORIZON_S, QueueTrend, growing, judge_in_flight as in_flight_trend, judge_tpot as tpot_trend, queue_trend, worse,
};
use goodput_workload::{SourceInfo, WorkloadSpec};

/// Most requests in one simulated step (bounds the memory and time of a step at high rates).
const SIM_STEP_REQUESTS: f64 = 500_000.0;

/// Fewest arrivals a step expects, whatever bounds it: a step with nothing measured says nothing.
pub const MIN_STEP_ARRIVALS: f64 = 20.0;

/// The latency an SLO allows a request, as the search uses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// The first-token budget (TTFT, or end to end where only that is bounded; 1 s without
    /// either), ms: a queue that grew by half of it within one step is growing without bound.
    pub ttft_ms: f64,
    /// The time a whole request may take, s: requests in flight beyond twice `rate × e2e_s`
    /// (Little's law) mean a step is saturated.
    pub e2e_s: f64,
    /// The TPOT budget, ms, where the SLO bounds TPOT: a TPOT rising through the step by half of
    /// it over [`HORIZON_S`] is not a steady state.
    pub tpot_ms: Option<f64>,
}

impl Budgets {
    /// The budgets of `slo` for requests of `spec`'s mean output length (256 tokens where the
    /// lengths come from a dataset).
    pub fn of(slo: &Slo, spec: &WorkloadSpec<SourceInfo>) -> Self {
        let mean_out = if spec.source.kind == "synthetic" { spec.output_tokens.mean() } else { 256.0 };
        // a reasoning model's thinking comes before its answer: in the request's time
        let mean_thought = spec.reasoning_tokens.as_ref().map_or(0.0, |d| d.mean());
        let ttft_ms = [Metric::Ttft, Metric::TtftSched, Metric::Ttfo, Metric::E2e, Metric::E2eSched]
            .into_iter()
            .find_map(|m| slo.limit(m))
            .unwrap_or(1000.0);
        let first = slo.limit(Metric::Ttft).or(slo.limit(Metric::Ttfo));
        let pace = slo.limit(Metric::Tpot).or(slo.limit(Metric::TpotAnswer));
        let e2e_s = match (slo.limit(Metric::E2e), first, pace) {
            (Some(e), _, _) => e / 1000.0,
            (None, Some(t), Some(p)) => (t + (mean_out + mean_thought) * p) / 1000.0,
            (None, Some(t), None) => t / 1000.0 * 10.0,
            _ => 60.0,
        };
        Budgets { ttft_ms, e2e_s, tpot_ms: pace }
    }

    /// The most requests in flight a step at `rate` (measured or simulated) holds before it is
    /// stopped as saturated: twice what the SLO allows, at least 16.
    pub fn in_flight_limit(&self, rate: f64) -> u64 {
        ((rate * 2.0 * self.e2e_s).ceil() as u64).max(16)
    }
}

/// How often an unclear step is run again, twice as long each time.
pub const MAX_STRETCH: u32 = 8;

/// How long a step sends arrivals: `step_s`, longer if needed to send `min_requests`, never
/// beyond `max_s` unless that leaves fewer than [`MIN_STEP_ARRIVALS`], and for a simulation at
/// most [`SIM_STEP_REQUESTS`] arrivals. Its first tenth is warm-up.
pub fn step_seconds(rate: f64, step_s: f64, min_requests: u64, max_s: Option<f64>, sim: bool) -> f64 {
    let mut secs = step_s.max(min_requests as f64 / rate);
    if let Some(m) = max_s {
        secs = secs.min(m).max(MIN_STEP_ARRIVALS / rate);
    }
    if sim {
        secs = secs.min(SIM_STEP_REQUESTS / rate);
    }
    secs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_must_be_steep_and_large() {
        // 2% of elapsed time and half a 200 ms TTFT budget
        assert!(growing(0.02, 100.0, 200.0));
        assert!(!growing(0.019, 1000.0, 200.0), "too shallow: noise in a stable queue");
        assert!(!growing(0.5, 99.0, 200.0), "too small against the budget");
        assert!(!growing(0.5, 49.0, 20.0), "under 50 ms");
        assert!(growing(0.5, 50.0, 20.0));
    }

    #[test]
    fn a_trend_is_judged_against_the_horizon_with_its_error() {
        use goodput_metrics::trend::Trend;
        // a 200 ms TTFT budget allows 100 ms of growth over 600 s: a slope of 1/6000
        let allowed = 100.0 / 600_000.0;
        let t = |slope: f64, se: f64| Trend { slope, growth_ms: slope * 60_000.0, n: 100, slope_stderr: se };
        assert_eq!(queue_trend(&t(allowed * 3.0, allowed / 2.0), 200.0, false), QueueTrend::Growing);
        assert_eq!(queue_trend(&t(0.0, allowed / 4.0), 200.0, false), QueueTrend::Steady);
        assert_eq!(queue_trend(&t(allowed, allowed), 200.0, false), QueueTrend::Unclear);
        // the last try decides by the slope itself
        assert_eq!(queue_trend(&t(allowed * 1.01, allowed), 200.0, true), QueueTrend::Growing);
        assert_eq!(queue_trend(&t(allowed * 0.99, allowed), 200.0, true), QueueTrend::Steady);
        // steep and large within the step: growing whatever its error
        assert_eq!(queue_trend(&t(0.05, 1.0), 200.0, false), QueueTrend::Growing);
    }

    #[test]
    fn step_length() {
        // 10 s at 100 req/s is 1000 arrivals, more than the 200 asked for
        assert_eq!(step_seconds(100.0, 10.0, 200, Some(60.0), false), 10.0);
        // at 1 req/s, 200 arrivals take 200 s, cut to the 60 s bound
        assert_eq!(step_seconds(1.0, 10.0, 200, Some(60.0), false), 60.0);
        // at 0.1 req/s, 60 s would hold about 6 arrivals: it runs for 20 of them instead
        assert_eq!(step_seconds(0.1, 10.0, 200, Some(60.0), false), 200.0);
        // simulated: unbounded in time, at most 500,000 arrivals
        assert_eq!(step_seconds(1.0, 600.0, 200, None, true), 600.0);
        assert_eq!(step_seconds(10_000.0, 600.0, 200, None, true), 50.0);
    }

    #[test]
    fn budgets_by_hand() {
        let spec = WorkloadSpec::default().info();
        // TTFT 200 ms + 128 output tokens × 40 ms = 5.32 s end to end
        let slo = Slo::parse("ttft<=200ms,tpot<=40ms").unwrap();
        let b = Budgets::of(&slo, &spec);
        assert_eq!(b.ttft_ms, 200.0);
        assert!((b.e2e_s - (0.2 + spec.output_tokens.mean() * 0.04)).abs() < 1e-12);
        // 10 req/s × 2 × 5.32 s = 106.4 → 107 in flight
        assert_eq!(b.in_flight_limit(10.0), (10.0 * 2.0 * b.e2e_s).ceil() as u64);
        let e2e = Slo::parse("e2e<=30m").unwrap();
        assert_eq!(Budgets::of(&e2e, &spec), Budgets { ttft_ms: 1_800_000.0, e2e_s: 1800.0, tpot_ms: None });
        assert_eq!(b.tpot_ms, Some(40.0));
        assert_eq!(Budgets::of(&e2e, &spec).in_flight_limit(0.001), 16, "at least 16");
    }
}
