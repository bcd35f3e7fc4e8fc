//! `goodput capacity`: the highest Poisson request rate at which SLO attainment stays at or above
//! a target. Bracket (double or halve from `--start-rate`), then bisect; each step is a bounded
//! run with a warm-up. A step fails when its attainment is below the target or when it is
//! saturated: stopped early because requests piled up far beyond what the SLO allows, or its
//! queue was still growing (schedule-anchored TTFT rising through the step, see
//! `goodput_metrics::trend`), which a short step's attainment would hide. Works against a URL,
//! the embedded engine, or in virtual time (`--sim`, with longer steps since they cost nothing).

use serde::Serialize;

use goodput_client::cancel_pair;
use goodput_metrics::slo::Metric;
use goodput_metrics::{Summary, Verdict};
use goodput_workload::{Arrivals, Load, Source};

use crate::Outcome;
use crate::args::{CapacityArgs, SimArgs};
use crate::plan::{BenchPlan, Profile, SimPlan, SloPlan, TargetPlan, UsageError};
use crate::report::write_doc;
use crate::stages::{Stage, StageResult};

/// One measured rate.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub rate: f64,
    pub attainment: f64,
    pub request_goodput: f64,
    pub token_goodput: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    /// Stopped early with requests piling up, or the queue kept growing through the step.
    pub saturated: bool,
    /// Stopped early (measuring only): more requests in flight than the SLO allows.
    pub stopped_early: bool,
    /// 95% Wilson interval of the attainment.
    pub attainment_ci: Option<[f64; 2]>,
    /// How much longer the step's last request waited for its first token than its first did
    /// (fitted; ms): the queue's growth.
    pub queue_growth_ms: Option<f64>,
    /// Requests sent per second, and whether the load generator kept up with its schedule.
    pub achieved_rate: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Serialize)]
struct Capacity {
    rate: Option<f64>,
    uncertainty: Option<f64>,
    per_gpu: Option<f64>,
    attainment_target: f64,
    slo: String,
    answer: String,
    notes: Vec<String>,
    curve: Vec<Point>,
}

enum Target {
    Bench(Box<BenchPlan>, String),
    Sim(Box<SimPlan>),
}

fn usage(flag: &str, m: &str) -> anyhow::Error {
    UsageError(format!("{flag}: {m}")).into()
}

/// The step plan's load flags: Poisson, bounded per step.
fn step_args(a: &CapacityArgs) -> anyhow::Result<crate::args::BenchArgs> {
    let l = &a.bench.load;
    let chosen = [
        (l.profile.is_some(), "--profile"),
        (l.rate.is_some(), "--rate"),
        (l.concurrency.is_some(), "--concurrency"),
        (l.rate_start.is_some(), "--rate-start"),
        (l.sweep_points.is_some(), "--sweep-points"),
        (l.time_scale.is_some(), "--time-scale"),
        (l.export_schedule.is_some(), "--export-schedule"),
        (l.max_errors.is_some(), "--max-errors"),
    ];
    if let Some((_, flag)) = chosen.iter().find(|(given, _)| *given) {
        return Err(usage(flag, "capacity chooses the rates itself (Poisson arrivals); use --start-rate"));
    }
    if !(a.attainment > 0.0 && a.attainment <= 1.0) {
        return Err(usage("--attainment", "must be in (0, 1]"));
    }
    if !(crate::plan::MIN_RATE..=MAX_RATE).contains(&a.start_rate) {
        return Err(usage(
            "--start-rate",
            &format!("must be between {} and {MAX_RATE} requests per second", crate::plan::MIN_RATE),
        ));
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        return Err(usage("--precision", "must be in (0, 1)"));
    }
    if a.max_steps < 2 {
        return Err(usage("--max-steps", "must be at least 2"));
    }
    let mut b = a.bench.clone();
    b.load.profile = Some(Profile::Poisson);
    b.load.rate = Some(a.start_rate.to_string());
    b.load.requests = Some(b.load.requests.unwrap_or(200));
    if b.load.warmup.is_some() || b.load.cooldown.is_some() {
        return Err(usage(
            "--warmup",
            "capacity steps warm up on their first tenth; --warmup and --cooldown do not apply",
        ));
    }
    Ok(b)
}

pub async fn run(a: CapacityArgs) -> anyhow::Result<Outcome> {
    let b = step_args(&a)?;
    // virtual seconds cost nothing: simulated steps run long enough for a slow queue to show
    let step_time = a.step_time.as_deref().unwrap_or(if a.sim { SIM_STEP } else { "10s" });
    let step_s = crate::plan::parse_duration("--step-time", step_time)?.as_secs_f64();
    let max_step_s = match &a.bench.load.duration {
        Some(d) => Some(crate::plan::parse_duration("--duration", d)?.as_secs_f64()),
        None if a.sim => None,
        None => Some(step_s.max(60.0)),
    };
    let slo = SloPlan::from_args(&b.slo)?;
    let Some((slo_set, _)) = slo.slo.clone() else {
        return Err(usage("--slo", "capacity needs an SLO (--slo or --slo-preset)"));
    };
    let target = if a.sim {
        if b.url.is_some() {
            return Err(usage("--sim", "simulates the engine model: drop --url"));
        }
        let s = SimArgs {
            model: b.model.clone(),
            no_ignore_eos: b.no_ignore_eos,
            engine: b.engine.clone(),
            load: b.load.clone(),
            workload: b.workload.clone(),
            slo: b.slo.clone(),
            output: b.output.clone(),
        };
        Target::Sim(Box::new(SimPlan::from_args(&s)?))
    } else {
        let mut plan = BenchPlan::from_args(&b)?;
        let model = crate::bench::resolve_model(&plan).await?;
        plan.model = Some(model.clone());
        Target::Bench(Box::new(plan), model)
    };
    let (load, workload, out_path, tp, what) = match &target {
        Target::Bench(p, _) => {
            let (tp, what) = match &p.target {
                TargetPlan::Url { url } => (None, format!("on {url}")),
                TargetPlan::Embedded { engine } => {
                    (Some(engine.config.tp), format!("on the embedded {}", engine.short()))
                }
            };
            (&p.load, &p.workload, p.output.out.clone(), tp, what)
        }
        Target::Sim(p) => (
            &p.load,
            &p.workload,
            p.output.out.clone(),
            Some(p.engine.config.tp),
            format!("on {} (simulated)", p.engine.short()),
        ),
    };
    let cap = load.max_concurrency;
    // a step is saturated when requests in flight exceed twice what the SLO allows (Little's law)
    let mean_out = match &workload.spec.source {
        Source::Synthetic => workload.spec.output_tokens.mean(),
        Source::Dataset(_) => 256.0,
    };
    // a queue that grew by half the TTFT budget within one step is growing without bound
    let ttft_budget_ms = [Metric::Ttft, Metric::TtftSched, Metric::E2e, Metric::E2eSched]
        .into_iter()
        .find_map(|m| slo_set.limit(m))
        .unwrap_or(1000.0);
    let e2e_budget_s = match (slo_set.limit(Metric::E2e), slo_set.limit(Metric::Ttft), slo_set.limit(Metric::Tpot)) {
        (Some(e), _, _) => e / 1000.0,
        (None, Some(t), Some(p)) => (t + mean_out * p) / 1000.0,
        (None, Some(t), None) => t / 1000.0 * 10.0,
        _ => 60.0,
    };
    let seed = load.seed;
    let min_requests = load.requests.unwrap_or(200);
    let (interrupt, token) = cancel_pair();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupt.cancel();
        }
    });

    let mut runs = Vec::new();
    let mut curve: Vec<Point> = Vec::new();
    let measure = async |rate: f64, runs: &mut Vec<goodput_metrics::result::Run>| -> anyhow::Result<Option<Point>> {
        if token.is_cancelled() {
            return Ok(None);
        }
        let stage = Stage {
            name: Some(format!("rate@{rate:.3}")),
            load: Load::Open { arrivals: Arrivals::Poisson { rate }, max_concurrency: cap },
            seed: seed + runs.len() as u64,
        };
        let first = runs.is_empty();
        let secs = step_seconds(rate, step_s, min_requests, max_step_s, a.sim);
        let bound = |l: &mut crate::plan::LoadPlan| {
            l.requests = None;
            l.duration = Some(std::time::Duration::from_secs_f64(secs));
            l.warmup = goodput_metrics::Edge::Seconds(secs / 10.0);
        };
        let r: StageResult = match &target {
            Target::Bench(p, model) => {
                let limit = ((rate * 2.0 * e2e_budget_s).ceil() as u64).max(16);
                let mut p = (**p).clone();
                bound(&mut p.load);
                crate::bench::run_stage(&p, model, stage, token.clone(), !first, true, Some(limit)).await?
            }
            Target::Sim(p) => {
                let mut p = (**p).clone();
                bound(&mut p.load);
                crate::sim::run_stage(&p, stage, true)?
            }
        };
        let p = point(rate, &r, ttft_budget_ms);
        runs.push(r.run);
        Ok(Some(p))
    };
    let passes = |p: &Point| !p.saturated && p.attainment >= a.attainment;
    // a step in which nothing succeeded says the target is unusable, not that the rate is too high
    let dead = |runs: &[goodput_metrics::result::Run]| {
        runs.last().is_some_and(|r| r.summary.completed == 0 && r.summary.attempted > 0)
    };
    let mut unusable = false;

    // bracket
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = a.start_rate;
    while runs.len() < a.max_steps as usize {
        let Some(p) = measure(rate, &mut runs).await? else { break };
        let ok = passes(&p);
        curve.push(p);
        if dead(&runs) {
            unusable = true;
            break;
        }
        if ok {
            lo = Some(rate);
            if hi.is_some() {
                break;
            }
            rate *= 2.0;
        } else {
            hi = Some(rate);
            if lo.is_some() || rate / 2.0 < crate::plan::MIN_RATE {
                break;
            }
            rate /= 2.0;
        }
    }
    // bisect
    while runs.len() < a.max_steps as usize {
        let (Some(l), Some(h)) = (lo, hi) else { break };
        if (h - l) / l <= a.precision {
            break;
        }
        let mid = (l + h) / 2.0;
        let Some(p) = measure(mid, &mut runs).await? else { break };
        if passes(&p) {
            lo = Some(mid);
        } else {
            hi = Some(mid);
        }
        curve.push(p);
        if dead(&runs) {
            unusable = true;
            break;
        }
    }
    curve.sort_by(|x, y| x.rate.total_cmp(&y.rate));

    let described = describe_slo(&slo_set);
    let pct = format!("{}%", a.attainment * 100.0);
    let answer = match (lo, hi) {
        (Some(l), Some(h)) => {
            format!("At most {l:.2} req/s (±{:.2}) keeps {pct} of requests within {described} {what}.", (h - l) / 2.0)
        }
        (Some(l), None) => format!(
            "At least {l:.2} req/s keeps {pct} of requests within {described} {what} (no failing rate found within {} steps).",
            a.max_steps
        ),
        (None, Some(h)) => format!("Even {h:.3} req/s does not keep {pct} of requests within {described} {what}."),
        (None, None) => "No step completed.".to_string(),
    };
    let answer = if unusable {
        let r = runs.last().map(|r| &r.summary);
        let classes: Vec<String> =
            r.map(|s| s.failed_by_class.iter().map(|(k, v)| format!("{k}: {v}")).collect()).unwrap_or_default();
        format!(
            "The search stopped: no request succeeded in the last step ({}), so the target could not be used.",
            classes.join(", ")
        )
    } else {
        answer
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
        curve.iter().filter(|p| p.verdict == Verdict::ClientBound).map(|p| format!("{:.2}", p.rate)).collect();
    if !bound.is_empty() {
        notes.push(format!(
            "Warning: the load generator was client-bound at {} req/s (its sends lagged the schedule by over \
             1 ms at p99, or fell below 97% of its rate; see those runs' warnings): those steps measured the \
             client as well as the server.",
            bound.join(", ")
        ));
    }
    say!("{}", crate::console::render_capacity(&curve, a.attainment));
    say!("\n{answer}\n");
    for n in &notes {
        say!("{n}\n");
    }
    let capacity = Capacity {
        rate: lo,
        uncertainty: lo.zip(hi).map(|(l, h)| (h - l) / 2.0),
        per_gpu: lo.zip(tp).map(|(l, tp)| l / tp.max(1) as f64),
        attainment_target: a.attainment,
        slo: slo_set.describe(),
        answer,
        notes,
        curve,
    };
    if let Some(path) = &out_path {
        write_doc(path, runs, Some(serde_json::to_value(&capacity)?))?;
        say!("  results      {}\n", path.display());
    }
    Ok(if token.is_cancelled() {
        Outcome::Interrupted
    } else if unusable {
        Outcome::Failed
    } else {
        Outcome::Ok
    })
}

/// Default `--step-time` in virtual time: long, because a queue near saturation drifts for
/// minutes before it shows whether it is stable, and simulated minutes cost milliseconds.
const SIM_STEP: &str = "600s";

/// Highest `--start-rate` accepted (requests per second).
const MAX_RATE: f64 = 1e6;

/// Most requests in one simulated step (bounds the memory and time of a step at high rates).
const SIM_STEP_REQUESTS: f64 = 500_000.0;

/// Fewest arrivals a step expects, whatever bounds it: a step with nothing measured says nothing.
const MIN_STEP_ARRIVALS: f64 = 20.0;

/// How long a step sends arrivals: `--step-time`, longer if needed to send `--requests`, never
/// beyond `max_s` (`--duration`, or 60 s when measuring) unless that leaves fewer than
/// [`MIN_STEP_ARRIVALS`], and for a simulation at most [`SIM_STEP_REQUESTS`] arrivals. Its first
/// tenth is warm-up.
fn step_seconds(rate: f64, step_s: f64, min_requests: u64, max_s: Option<f64>, sim: bool) -> f64 {
    let mut secs = step_s.max(min_requests as f64 / rate);
    if let Some(m) = max_s {
        secs = secs.min(m).max(MIN_STEP_ARRIVALS / rate);
    }
    if sim {
        secs = secs.min(SIM_STEP_REQUESTS / rate);
    }
    secs
}

fn point(rate: f64, r: &StageResult, ttft_budget_ms: f64) -> Point {
    let s: &Summary = &r.run.summary;
    let slo = s.slo.as_ref();
    // a step stopped early counts its cancelled requests against it
    let (good, attempted) = match slo {
        Some(g) if r.saturated => (g.good, g.attempted + s.cancelled),
        Some(g) => (g.good, g.attempted),
        None => (0, 0),
    };
    let trend = goodput_metrics::trend::ttft_trend(&r.run.requests, s.window.start_ms);
    let growing = trend.is_some_and(|t| growing(t.slope, t.growth_ms, ttft_budget_ms));
    Point {
        rate,
        attainment: if attempted > 0 { good as f64 / attempted as f64 } else { 0.0 },
        request_goodput: slo.map_or(0.0, |g| g.request_goodput),
        token_goodput: slo.map_or(0.0, |g| g.token_goodput),
        ttft_p50_ms: s.ttft_ms.p50,
        ttft_p99_ms: s.ttft_ms.p99,
        tpot_p50_ms: s.tpot_ms.p50,
        tpot_p99_ms: s.tpot_ms.p99,
        saturated: r.saturated || growing,
        stopped_early: r.saturated,
        attainment_ci: goodput_metrics::confidence::proportion_ci(good, attempted),
        queue_growth_ms: trend.map(|t| t.growth_ms),
        achieved_rate: s.achieved_rate,
        verdict: s.verdict,
    }
}

/// The queue grows without bound: TTFT from the schedule rises by at least 2% of elapsed time
/// (arrivals outpace service by 2% or more) and by at least half the TTFT budget over the step
/// (at least 50 ms), so noise in a stable queue does not count.
fn growing(slope: f64, growth_ms: f64, ttft_budget_ms: f64) -> bool {
    slope >= 0.02 && growth_ms >= (0.5 * ttft_budget_ms).max(50.0)
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
