//! One run or several: a plain profile is one stage; `sweep` measures synchronous and
//! throughput stages first, then `--sweep-points` constant rates evenly between them (as GuideLLM
//! does). Every stage is bounded by the plan's requests and duration. Shared by bench and sim.

use std::future::Future;

use goodput_client::StopReason;
use goodput_metrics::result::Run;
use goodput_metrics::{Edge, Summary, SummaryOptions, summarize};
use goodput_workload::{Arrivals, Load};

use crate::Outcome;
use crate::plan::{LoadPlan, Profile};

/// What one stage runs.
#[derive(Clone, Debug)]
pub struct Stage {
    /// `None` for a single-stage run.
    pub name: Option<String>,
    pub load: Load,
    pub seed: u64,
}

/// What one stage produced.
pub struct StageResult {
    pub run: Run,
    pub stop: StopReason,
    /// Stopped early because requests piled up without bound (capacity search).
    pub saturated: bool,
}

/// Runs the plan's stages in order, calling `f` for each; a stage that was interrupted or hit
/// `--max-errors` ends the sweep.
pub async fn run_stages<F, Fut>(plan: &LoadPlan, mut f: F) -> anyhow::Result<Vec<StageResult>>
where
    F: FnMut(Stage) -> Fut,
    Fut: Future<Output = anyhow::Result<StageResult>>,
{
    if plan.profile != Profile::Sweep {
        return Ok(vec![f(Stage { name: None, load: plan.load.clone(), seed: plan.seed }).await?]);
    }
    let cap = plan.max_concurrency;
    let mut out = Vec::new();
    let ended = |r: &StageResult| matches!(r.stop, StopReason::Interrupted | StopReason::MaxErrors);
    let sync = f(Stage { name: Some("synchronous".into()), load: Load::closed(1), seed: plan.seed }).await?;
    let lo = sync.run.summary.request_throughput;
    let stop = ended(&sync);
    out.push(sync);
    if stop {
        return Ok(out);
    }
    let thr = f(Stage {
        name: Some("throughput".into()),
        load: Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: cap },
        seed: plan.seed + 1,
    })
    .await?;
    let hi = thr.run.summary.request_throughput.max(lo);
    let stop = ended(&thr);
    out.push(thr);
    if stop {
        return Ok(out);
    }
    let k = plan.sweep_points.unwrap_or(5);
    for i in 1..=k {
        let rate = lo + (hi - lo) * i as f64 / (k + 1) as f64;
        if rate.is_nan() || rate <= 0.0 {
            continue;
        }
        let r = f(Stage {
            name: Some(format!("constant@{rate:.2}")),
            load: Load::Open { arrivals: Arrivals::Constant { rate }, max_concurrency: cap },
            seed: plan.seed + 1 + i as u64,
        })
        .await?;
        let stop = ended(&r);
        out.push(r);
        if stop {
            break;
        }
    }
    Ok(out)
}

/// How a stage is summarized.
pub fn options(
    plan: &LoadPlan,
    load: &Load,
    percentiles: goodput_metrics::PercentileMethod,
    exact_output: bool,
    compare_input_counts: bool,
    slo: &crate::plan::SloPlan,
) -> SummaryOptions {
    SummaryOptions {
        percentiles,
        slo: slo.slo.clone(),
        warmup: plan.warmup,
        cooldown: plan.cooldown,
        offered_rate: load.offered_rate(),
        offered_is_drawn: matches!(load, Load::Open { arrivals: Arrivals::Ramp { .. } | Arrivals::Replay { .. }, .. }),
        compare_input_counts,
        expect_exact_output: exact_output,
        closed_loop: match load {
            Load::Closed { concurrency, .. } => Some(*concurrency),
            Load::Open { .. } => None,
        },
        ..SummaryOptions::new()
    }
}

/// The summary over the measurement window, and over the whole run when a window narrowed it.
pub fn summaries(records: &[goodput_metrics::RequestRecord], opts: &SummaryOptions) -> (Summary, Option<Summary>) {
    let s = summarize(records, opts);
    let full = (opts.warmup != Edge::None || opts.cooldown != Edge::None)
        .then(|| summarize(records, &SummaryOptions { warmup: Edge::None, cooldown: Edge::None, ..opts.clone() }));
    (s, full)
}

/// The exit outcome of a whole run.
pub fn outcome(results: &[StageResult]) -> Outcome {
    if results.iter().any(|r| r.stop == StopReason::MaxErrors) {
        Outcome::Failed
    } else if results.iter().any(|r| r.stop == StopReason::Interrupted) {
        Outcome::Interrupted
    } else if results.iter().all(|r| r.run.summary.completed == 0) {
        Outcome::Failed
    } else {
        Outcome::Ok
    }
}

/// A short description of a load.
pub fn describe(load: &Load) -> String {
    match load {
        Load::Closed { concurrency: 1, .. } => "synchronous".into(),
        Load::Closed { concurrency, think } if think.is_zero() => format!("concurrency {concurrency}"),
        Load::Closed { concurrency, think } => format!("concurrency {concurrency}, think {think}"),
        Load::Open { arrivals, max_concurrency } => {
            let a = match arrivals {
                Arrivals::Constant { rate } => format!("constant {rate:.2} req/s"),
                Arrivals::Poisson { rate } => format!("poisson {rate} req/s"),
                Arrivals::Gamma { rate, burstiness } => format!("gamma {rate} req/s, burstiness {burstiness}"),
                Arrivals::Ramp { from, to, over_s } => format!("ramp {from}→{to} req/s over {over_s:.0} s"),
                Arrivals::AllAtOnce => "throughput (all at once)".into(),
                Arrivals::Replay { time_scale } => format!("replay ×{time_scale}"),
            };
            match max_concurrency {
                Some(c) => format!("{a}, at most {c} in flight"),
                None => a,
            }
        }
    }
}
