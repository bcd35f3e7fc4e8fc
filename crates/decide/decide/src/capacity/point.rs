//! One measured step as a point on the capacity curve: its attainment (with its confidence
//! interval), goodput, latencies, and whether it was saturated.

use goodput_metrics::{StopReason, Summary};
use goodput_results::{CapacityPoint, Run};

use super::budget::growing;

/// The point of the step `r`, run at `rate`; `ttft_budget_ms` judges its queue's growth.
pub fn point(rate: f64, r: &Run, ttft_budget_ms: f64) -> CapacityPoint {
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
    let grew = trend.is_some_and(|t| growing(t.slope, t.growth_ms, ttft_budget_ms));
    CapacityPoint {
        rate,
        attainment: if attempted > 0 { good as f64 / attempted as f64 } else { 0.0 },
        request_goodput: slo.map_or(0.0, |g| g.request_goodput),
        token_goodput: slo.map_or(0.0, |g| g.token_goodput),
        ttft_p50_ms: s.ttft_ms.p50,
        ttft_p99_ms: s.ttft_ms.p99,
        tpot_p50_ms: s.tpot_ms.p50,
        tpot_p99_ms: s.tpot_ms.p99,
        saturated: stopped_early || grew,
        stopped_early,
        attainment_ci: goodput_metrics::confidence::proportion_ci(good, attempted),
        queue_growth_ms: trend.map(|t| t.growth_ms),
        achieved_rate: s.achieved_rate,
        verdict: s.verdict,
    }
}

/// The step held the SLO: attainment at or above `target`, and not saturated.
pub fn passes(p: &CapacityPoint, target: f64) -> bool {
    !p.saturated && p.attainment >= target
}
