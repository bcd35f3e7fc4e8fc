//! One stage or several: a plain profile is one stage; `sweep` measures synchronous and
//! throughput stages first, then `--sweep-points` constant rates evenly between them (as GuideLLM
//! does). Every stage is bounded by the plan's requests and duration.

use goodput_metrics::StopReason;
use goodput_results::Run;
use goodput_results::plan::RunPlan;
use goodput_workload::{Arrivals, Load, Profile};

use crate::seam::{Control, Stage, StageError, Target};

/// Whether a stage's end ends the whole sequence (an interruption, the error budget, an
/// over-saturated server: the stages after it ask for more load still).
pub fn ends_everything(r: &Run) -> bool {
    matches!(r.stop, StopReason::Interrupted | StopReason::MaxErrors | StopReason::OverSaturated)
}

/// Runs the plan's stages in order on `target`: `control` gives each stage its control (its
/// observer, its interrupt), `on_run` sees each run as it ends.
pub async fn run<T: Target>(
    target: &mut T,
    plan: &RunPlan,
    mut control: impl FnMut(&Stage) -> Control,
    mut on_run: impl FnMut(&Run),
) -> Result<Vec<Run>, StageError> {
    let mut out = Vec::new();
    let mut go = async |stage: Stage, out: &mut Vec<Run>| -> Result<bool, StageError> {
        let ctl = control(&stage);
        let r = target.run(&stage, &ctl).await?;
        on_run(&r);
        let stop = ends_everything(&r);
        out.push(r);
        Ok(!stop)
    };
    if plan.load.profile != Profile::Sweep {
        go(Stage::single(plan), &mut out).await?;
        return Ok(out);
    }
    let cap = plan.load.max_concurrency;
    let seed = plan.load.seed;
    let stage = |name: String, load: Load, seed: u64| Stage { name: Some(name), plan: plan.clone(), load, seed };
    if !go(stage("synchronous".into(), Load::closed(1), seed), &mut out).await? {
        return Ok(out);
    }
    let lo = out[0].summary.request_throughput;
    let throughput = Load::Open { arrivals: Arrivals::AllAtOnce, max_concurrency: cap };
    if !go(stage("throughput".into(), throughput, seed + 1), &mut out).await? {
        return Ok(out);
    }
    let hi = out[1].summary.request_throughput.max(lo);
    let k = plan.load.sweep_points.unwrap_or(5);
    for i in 1..=k {
        let rate = lo + (hi - lo) * i as f64 / (k + 1) as f64;
        if rate.is_nan() || rate <= 0.0 {
            continue;
        }
        let load = Load::Open { arrivals: Arrivals::Constant { rate }, max_concurrency: cap };
        if !go(stage(format!("constant@{rate:.2}"), load, seed + 1 + i as u64), &mut out).await? {
            break;
        }
    }
    Ok(out)
}
