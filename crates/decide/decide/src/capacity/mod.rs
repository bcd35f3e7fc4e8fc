//! The capacity search: the highest Poisson request rate at which SLO attainment stays at or
//! above a target, on any [`Target`] (a server at a URL, the embedded engine, the simulator).
//!
//! Four parts: the SLO's budgets and a step's length ([`budget`]); the bracket-and-bisect
//! state machine that picks the next rate ([`search::Search`], pure); a measured step as a point
//! on the curve ([`point`]); and the driver here, which runs each step as a bounded stage with a
//! warm-up on the target. A step fails when its attainment is below the target or when it is
//! saturated: stopped early because requests piled up far beyond what the SLO allows, or its
//! queue was not in steady state: schedule-anchored TTFT rising through the step (see
//! `goodput_metrics::trend`) faster than a ten-minute run allows, judged with the slope's
//! standard error ([`queue_trend`]), which a short step's attainment would hide. A step too short
//! to tell runs again at the same rate, twice as long (up to [`MAX_STRETCH`] times), for measured
//! servers too. A simulated target gets longer steps, since they cost little, and its answer is
//! confirmed: the rate the search ends on is run again for [`HORIZON_S`] (when its steps are
//! shorter), and if it fails there, the bracket reopens below it. What was found is a typed
//! [`CapacityFinding`]; the renderer puts it into words.

pub mod budget;
pub mod point;
pub mod search;

use std::time::Duration;

use goodput_metrics::{Edge, StopReason};
use goodput_results::plan::RunPlan;
use goodput_results::{CapacityFinding, CapacityReport, Run};
use goodput_stage::{Control, Stage, StageError, Target};
use goodput_workload::{Arrivals, Load};

pub use budget::{
    Budgets, HORIZON_S, MAX_STRETCH, MIN_STEP_ARRIVALS, QueueTrend, growing, queue_trend, step_seconds, tpot_trend,
};
pub use search::{MAX_RATE, MIN_RATE, Search};

/// How the search proceeds.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    /// Share of requests that must meet the SLO.
    pub attainment: f64,
    /// First rate tried, req/s.
    pub start_rate: f64,
    /// Stop bisecting when the bracket is narrower than this share of the rate.
    pub precision: f64,
    /// Most search steps. A simulated answer's confirmations come on top: at most one per rate
    /// that passed, since a failed one withdraws that rate.
    pub max_steps: u32,
    /// Each step sends at least this many seconds of arrivals.
    pub step_s: f64,
    /// And at most this many (`None`: unbounded), unless that leaves too few arrivals.
    pub max_step_s: Option<f64>,
    /// Each step sends at least this many arrivals.
    pub min_requests: u64,
}

/// One measured step: the rate it offered and its run.
#[derive(Clone, Debug)]
pub struct Step {
    pub rate: f64,
    pub run: Run,
}

/// What the search found.
#[derive(Debug)]
pub struct CapacityOutcome {
    pub report: CapacityReport,
    /// What was found, before it was put into words (the report's `answer`).
    pub finding: CapacityFinding,
    /// Every step, in the order measured.
    pub steps: Vec<Step>,
    /// The search was interrupted (Ctrl-C).
    pub interrupted: bool,
    /// A step had no success at all: the target could not be used.
    pub unusable: bool,
}

impl CapacityOutcome {
    /// The steps' runs, in the order measured.
    pub fn runs(&self) -> Vec<Run> {
        self.steps.iter().map(|s| s.run.clone()).collect()
    }

    /// The step run at `rate`, the last one if several were.
    pub fn step_at(&self, rate: f64) -> Option<&Step> {
        self.steps.iter().rev().find(|s| s.rate == rate)
    }
}

/// The name of the step at `rate` (in the result document and on the console).
pub fn step_name(rate: f64) -> String {
    format!("rate@{rate:.3}")
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
    let budgets = Budgets::of(&slo, &plan.workload.spec);
    let sim = target.is_simulated();
    let mut search = Search::new(o.start_rate, o.precision, o.max_steps);
    let mut steps: Vec<Step> = Vec::new();
    let mut curve = Vec::new();
    let (mut interrupted, mut unusable) = (false, false);
    // a step whose trend is unclear runs again at the same rate, twice as long
    let mut stretch = 1;
    // a simulated search's answer holds over the horizon: the rate that passed last is run again
    // for HORIZON_S before it is the answer (a load near a deployment's limit can hold its queue
    // for minutes before the queue runs away); `held`: the rate that passed a step that long
    let confirm_stretch = if sim { (HORIZON_S / o.step_s).ceil().max(1.0) as u32 } else { 1 };
    let mut held: Option<f64> = None;
    loop {
        let (rate, confirming) = match (search.next(), search.bracket().0) {
            (Some(rate), _) => (rate, false),
            (None, Some(pass)) if confirm_stretch > 1 && held != Some(pass) => (pass, true),
            (None, _) => break,
        };
        let k = if confirming { confirm_stretch } else { stretch };
        let stage = step_stage(plan, rate, o, sim, steps.len() as u64, k);
        let ctl = control(&stage, Some(budgets.in_flight_limit(rate)));
        if ctl.interrupt.is_cancelled() {
            interrupted = true;
            break;
        }
        let run = target.run(&stage, &ctl).await?;
        on_run(&run);
        let p = point::point(rate, &run, &budgets, confirming || stretch >= MAX_STRETCH);
        interrupted |= run.stop == StopReason::Interrupted;
        // a step in which nothing succeeded says the target is unusable, not that the rate is
        // too high
        unusable = run.summary.completed == 0 && run.summary.attempted > 0;
        let unclear = p.queue_trend.as_deref() == Some(QueueTrend::Unclear.name());
        steps.push(Step { rate, run });
        if interrupted || unusable {
            curve.push(p);
            break;
        }
        // the curve keeps the step that decided
        curve.retain(|q: &goodput_results::CapacityPoint| q.rate != rate);
        curve.push(p.clone());
        if unclear && p.attainment >= o.attainment && !confirming {
            stretch *= 2;
            continue;
        }
        let passed = point::passes(&p, o.attainment);
        if passed && k >= confirm_stretch {
            held = Some(rate);
        }
        stretch = 1;
        search.record(rate, passed);
    }
    curve.sort_by(|x, y| x.rate.total_cmp(&y.rate));
    let (pass, fail) = search.bracket();
    let finding = match (pass, fail) {
        _ if unusable => CapacityFinding::Unusable {
            failures: steps
                .last()
                .map(|s| s.run.summary.failed_by_class.iter().map(|(k, v)| (k.as_str().to_string(), *v)).collect())
                .unwrap_or_default(),
        },
        (Some(pass), Some(fail)) => CapacityFinding::Bracketed { pass, fail },
        (Some(pass), None) => CapacityFinding::AtLeast { pass, max_steps: o.max_steps },
        (None, Some(fail)) => CapacityFinding::Below { fail },
        (None, None) => CapacityFinding::Nothing,
    };
    let report = CapacityReport {
        rate: pass,
        uncertainty: pass.zip(fail).map(|(l, h)| (h - l) / 2.0),
        per_gpu: pass.zip(target.gpus()).map(|(l, n)| l / n.max(1) as f64),
        attainment_target: o.attainment,
        slo: slo.describe(),
        answer: goodput_render::capacity::answer(&finding, &slo, o.attainment, &target.describe()),
        notes: goodput_render::capacity::notes(&curve, pass),
        curve,
    };
    Ok(CapacityOutcome { report, finding, steps, interrupted, unusable })
}

/// The stage of the step at `rate`: the plan's workload as Poisson arrivals for the step's
/// length (`stretch` times the usual), its first tenth warm-up; `index` varies the seed from
/// step to step.
fn step_stage(plan: &RunPlan, rate: f64, o: &CapacityOptions, sim: bool, index: u64, stretch: u32) -> Stage {
    let k = f64::from(stretch);
    let secs = step_seconds(rate, o.step_s * k, o.min_requests * stretch as u64, o.max_step_s.map(|m| m * k), sim);
    let mut p = plan.clone();
    p.load.requests = None;
    p.load.duration = Some(Duration::from_secs_f64(secs));
    p.load.warmup = Edge::Seconds(secs / 10.0);
    Stage {
        name: Some(step_name(rate)),
        load: Load::Open { arrivals: Arrivals::Poisson { rate }, max_concurrency: plan.load.max_concurrency },
        seed: plan.load.seed + index,
        plan: p,
    }
}
