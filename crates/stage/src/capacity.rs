//! The capacity search: the highest Poisson request rate at which SLO attainment stays at or
//! above a target. Bracket (double or halve from the start rate), then bisect; each step is a
//! bounded stage with a warm-up. A step fails when its attainment is below the target or when it
//! is saturated: stopped early because requests piled up far beyond what the SLO allows, or its
//! queue was still growing (schedule-anchored TTFT rising through the step, see
//! `goodput_metrics::trend`), which a short step's attainment would hide. Works on any
//! [`Target`]; a simulated one gets longer steps, since they cost nothing.

use std::time::Duration;

use goodput_metrics::slo::Metric;
use goodput_metrics::{ClientVerdict, Edge, StopReason, Summary};
use goodput_results::plan::RunPlan;
use goodput_results::{CapacityPoint, CapacityReport, Run};
use goodput_workload::{Arrivals, Load, SourceInfo};

use crate::{Control, Stage, StageError, Target};

/// How the search proceeds.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    /// Share of requests that must meet the SLO.
    pub attainment: f64,
    /// First rate tried, req/s.
    pub start_rate: f64,
    /// Stop bisecting when the bracket is narrower than this share of the rate.
    pub precision: f64,
    /// Most steps.
    pub max_steps: u32,
    /// Each step sends at least this many seconds of arrivals.
    pub step_s: f64,
    /// And at most this many (`None`: unbounded), unless that leaves too few arrivals.
    pub max_step_s: Option<f64>,
    /// Each step sends at least this many arrivals.
    pub min_requests: u64,
}

/// What the search found.
#[derive(Debug)]
pub struct CapacityOutcome {
    pub report: CapacityReport,
    /// One run per step, in the order measured.
    pub runs: Vec<Run>,
    /// The search was interrupted (Ctrl-C).
    pub interrupted: bool,
    /// A step had no success at all: the target could not be used.
    pub unusable: bool,
}

/// Most requests in one simulated step (bounds the memory and time of a step at high rates).
const SIM_STEP_REQUESTS: f64 = 500_000.0;

/// Fewest arrivals a step expects, whatever bounds it: a step with nothing measured says nothing.
pub const MIN_STEP_ARRIVALS: f64 = 20.0;

/// Highest rate tried (requests per second).
pub const MAX_RATE: f64 = 1e6;

/// Lowest rate tried.
pub const MIN_RATE: f64 = 0.001;

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

/// The queue grows without bound: TTFT from the schedule rises by at least 2% of elapsed time
/// (arrivals outpace service by 2% or more) and by at least half the TTFT budget over the step
/// (at least 50 ms), so noise in a stable queue does not count.
pub fn growing(slope: f64, growth_ms: f64, ttft_budget_ms: f64) -> bool {
    slope >= 0.02 && growth_ms >= (0.5 * ttft_budget_ms).max(50.0)
}

/// Searches `plan` (its workload and SLO) on `target`. `control` gives each step its control
/// (with the in-flight limit past which it is saturated), `on_run` sees each step as it ends.
pub async fn search<T: Target>(
    target: &mut T,
    plan: &RunPlan,
    o: &CapacityOptions,
    mut control: impl FnMut(&Stage, Option<u64>) -> Control,
    mut on_run: impl FnMut(&Run),
) -> Result<CapacityOutcome, StageError> {
    let (slo, _) = plan.slo.slo().unwrap_or_default();
    let spec = &plan.workload.spec;
    let sim = target.is_simulated();
    // a step is saturated when requests in flight exceed twice what the SLO allows (Little's law)
    let mean_out = match &spec.source {
        SourceInfo { kind, .. } if kind == "synthetic" => spec.output_tokens.mean(),
        _ => 256.0,
    };
    // a queue that grew by half the TTFT budget within one step is growing without bound
    let ttft_budget_ms = [Metric::Ttft, Metric::TtftSched, Metric::E2e, Metric::E2eSched]
        .into_iter()
        .find_map(|m| slo.limit(m))
        .unwrap_or(1000.0);
    let e2e_budget_s = match (slo.limit(Metric::E2e), slo.limit(Metric::Ttft), slo.limit(Metric::Tpot)) {
        (Some(e), _, _) => e / 1000.0,
        (None, Some(t), Some(p)) => (t + mean_out * p) / 1000.0,
        (None, Some(t), None) => t / 1000.0 * 10.0,
        _ => 60.0,
    };
    let cap = plan.load.max_concurrency;
    let seed = plan.load.seed;
    let mut runs: Vec<Run> = Vec::new();
    let mut curve: Vec<CapacityPoint> = Vec::new();
    let mut interrupted = false;

    let mut measure = async |rate: f64, runs: &mut Vec<Run>| -> Result<Option<CapacityPoint>, StageError> {
        let secs = step_seconds(rate, o.step_s, o.min_requests, o.max_step_s, sim);
        let mut p = plan.clone();
        p.load.requests = None;
        p.load.duration = Some(Duration::from_secs_f64(secs));
        p.load.warmup = Edge::Seconds(secs / 10.0);
        let stage = Stage {
            name: Some(format!("rate@{rate:.3}")),
            load: Load::Open { arrivals: Arrivals::Poisson { rate }, max_concurrency: cap },
            seed: seed + runs.len() as u64,
            plan: p,
        };
        let limit = (!sim).then(|| ((rate * 2.0 * e2e_budget_s).ceil() as u64).max(16));
        let ctl = control(&stage, limit);
        if ctl.interrupt.is_cancelled() {
            return Ok(None);
        }
        let r = target.run(&stage, &ctl).await?;
        on_run(&r);
        let point = point(rate, &r, ttft_budget_ms);
        runs.push(r);
        Ok(Some(point))
    };
    let passes = |p: &CapacityPoint| !p.saturated && p.attainment >= o.attainment;
    // a step in which nothing succeeded says the target is unusable, not that the rate is too high
    let dead = |runs: &[Run]| runs.last().is_some_and(|r| r.summary.completed == 0 && r.summary.attempted > 0);
    let mut unusable = false;

    // bracket
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = o.start_rate;
    while runs.len() < o.max_steps as usize {
        let Some(p) = measure(rate, &mut runs).await? else {
            interrupted = true;
            break;
        };
        interrupted |= runs.last().is_some_and(|r| r.stop == StopReason::Interrupted);
        let ok = passes(&p);
        curve.push(p);
        if dead(&runs) {
            unusable = true;
            break;
        }
        if interrupted {
            break;
        }
        if ok {
            lo = Some(rate);
            if hi.is_some() {
                break;
            }
            rate *= 2.0;
            if rate > MAX_RATE {
                break;
            }
        } else {
            hi = Some(rate);
            if lo.is_some() || rate / 2.0 < MIN_RATE {
                break;
            }
            rate /= 2.0;
        }
    }
    // bisect
    while runs.len() < o.max_steps as usize && !interrupted && !unusable {
        let (Some(l), Some(h)) = (lo, hi) else { break };
        if (h - l) / l <= o.precision {
            break;
        }
        let mid = (l + h) / 2.0;
        let Some(p) = measure(mid, &mut runs).await? else {
            interrupted = true;
            break;
        };
        interrupted |= runs.last().is_some_and(|r| r.stop == StopReason::Interrupted);
        if passes(&p) {
            lo = Some(mid);
        } else {
            hi = Some(mid);
        }
        curve.push(p);
        if dead(&runs) {
            unusable = true;
        }
    }
    curve.sort_by(|x, y| x.rate.total_cmp(&y.rate));

    let described = describe_slo(&slo);
    let what = target.describe();
    let pct = format!("{}%", o.attainment * 100.0);
    let answer = match (lo, hi) {
        _ if unusable => {
            let classes: Vec<String> = runs
                .last()
                .map(|r| r.summary.failed_by_class.iter().map(|(k, v)| format!("{}: {v}", k.as_str())).collect())
                .unwrap_or_default();
            format!(
                "The search stopped: no request succeeded in the last step ({}), so the target could not be used.",
                classes.join(", ")
            )
        }
        (Some(l), Some(h)) => {
            format!("At most {l:.2} req/s (±{:.2}) keeps {pct} of requests within {described} {what}.", (h - l) / 2.0)
        }
        (Some(l), None) => format!(
            "At least {l:.2} req/s keeps {pct} of requests within {described} {what} (no failing rate found within {} steps).",
            o.max_steps
        ),
        (None, Some(h)) => format!("Even {h:.3} req/s does not keep {pct} of requests within {described} {what}."),
        (None, None) => "No step completed.".to_string(),
    };
    let mut notes = Vec::new();
    if let Some(p) = lo.and_then(|l| curve.iter().find(|p| p.rate == l))
        && let Some([ci_lo, ci_hi]) = p.attainment_ci
    {
        notes.push(format!(
            "Measured attainment at {:.2} req/s: {:.1}% (95% CI {:.1}–{:.1}%).",
            p.rate,
            p.attainment * 100.0,
            ci_lo * 100.0,
            ci_hi * 100.0
        ));
    }
    let bound: Vec<String> =
        curve.iter().filter(|p| p.verdict == ClientVerdict::ClientBound).map(|p| format!("{:.2}", p.rate)).collect();
    if !bound.is_empty() {
        notes.push(format!(
            "Warning: the load generator was client-bound at {} req/s (its sends lagged the schedule at p99 by \
             more than the larger of 1 ms and 5% of TTFT p50, or fell below 97% of its rate; see those runs' \
             warnings): those steps measured the \
             client as well as the server.",
            bound.join(", ")
        ));
    }
    let report = CapacityReport {
        rate: lo,
        uncertainty: lo.zip(hi).map(|(l, h)| (h - l) / 2.0),
        per_gpu: lo.zip(target.gpus()).map(|(l, n)| l / n.max(1) as f64),
        attainment_target: o.attainment,
        slo: slo.describe(),
        answer,
        notes,
        curve,
    };
    Ok(CapacityOutcome { report, runs, interrupted, unusable })
}

fn point(rate: f64, r: &Run, ttft_budget_ms: f64) -> CapacityPoint {
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

/// `ttft<=200ms, p99(tpot)<=40ms` → "TTFT ≤ 200 ms and TPOT ≤ 40 ms" (the sentence says which
/// share of requests must meet them).
fn describe_slo(slo: &goodput_metrics::Slo) -> String {
    slo.predicates
        .iter()
        .map(|p| {
            let name = p.metric.name().to_uppercase().replace("_SCHED", " (sched)").replace("ITL_MAX", "max ITL");
            let limit =
                if p.limit_ms >= 1000.0 { format!("{} s", p.limit_ms / 1000.0) } else { format!("{} ms", p.limit_ms) };
            // attainment counts requests, so a percentile bound reads as a per-request one here
            format!("{name} ≤ {limit}")
        })
        .collect::<Vec<_>>()
        .join(" and ")
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
}
