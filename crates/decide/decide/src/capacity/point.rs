//! One measured step as a point on the capacity curve: its attainment (with its confidence
//! interval), goodput, latencies, and whether it was saturated.

use goodput_metrics::{StopReason, Summary};
use goodput_results::{CapacityPoint, Run};

use super::budget::{Budgets, QueueTrend, in_flight_trend, queue_trend, tpot_trend, worse};

/// The point of the step `r`, run at `rate`; `budgets` judge its trends (TTFT, TPOT where the
/// SLO bounds it, and the requests in flight), `last`: the step cannot be run longer (an
/// unclear trend is then judged by its slope).
pub fn point(rate: f64, r: &Run, budgets: &Budgets, last: bool) -> CapacityPoint {
    let ttft_budget_ms = budgets.ttft_ms;
    let s: &Summary = &r.summary;
    let slo = s.slo.as_ref();
    let stopped_early = r.stop == StopReason::Saturated;
    // a step stopped early counts its cancelled requests against it
    let (good, attempted) = match slo {
        Some(g) if stopped_early => (g.good, g.attempted + s.cancelled),
        Some(g) => (g.good, g.attempted),
        None => (0, 0),
    };
    let trend = goodput_metrics::trend::ttft_trend(&r.requests, s.window.start_ms);
    let tpot = budgets.tpot_ms.and_then(|b| {
        goodput_metrics::trend::tpot_trend(&r.requests, s.window.start_ms).map(|t| tpot_trend(&t, b, last))
    });
    let in_flight = goodput_metrics::trend::in_flight_trend(&r.requests, s.window.start_ms)
        .map(|t| in_flight_trend(&t, s.mean_concurrency));
    let judged =
        [trend.map(|t| queue_trend(&t, ttft_budget_ms, last)), tpot, in_flight].into_iter().flatten().reduce(worse);
    CapacityPoint {
        rate,
        attainment: if attempted > 0 { good as f64 / attempted as f64 } else { 0.0 },
        request_goodput: slo.map_or(0.0, |g| g.request_goodput),
        token_goodput: slo.map_or(0.0, |g| g.token_goodput),
        ttft_p50_ms: s.ttft_ms.p50,
        ttft_p99_ms: s.ttft_ms.p99,
        tpot_p50_ms: s.tpot_ms.p50,
        tpot_p99_ms: s.tpot_ms.p99,
        saturated: stopped_early || judged == Some(QueueTrend::Growing),
        stopped_early,
        attainment_ci: goodput_metrics::confidence::proportion_ci(good, attempted),
        queue_growth_ms: trend.map(|t| t.growth_ms),
        queue_trend: judged.map(|j| j.name().to_string()),
        step_s: Some(s.duration_s),
        achieved_rate: s.achieved_rate,
        verdict: s.verdict,
    }
}

/// The step held the SLO: attainment at or above `target`, and not saturated.
pub fn passes(p: &CapacityPoint, target: f64) -> bool {
    !p.saturated && p.attainment >= target
}
