//! `goodput capacity`: the highest Poisson rate at which SLO attainment stays at or above a
//! target. The flags are checked here; the search is `goodput_decide::capacity`.

use goodput_decide::capacity::{CapacityOptions, MAX_RATE, MIN_RATE, MIN_STEP_ARRIVALS, search};
use goodput_stage::{AnyTarget, Target};
use goodput_workload::Profile;

use crate::args::{BenchArgs, CapacityArgs, SimArgs};
use crate::outcome::Outcome;
use crate::output::{result_doc, write_doc, write_html};
use crate::plan::{self, Planned, UsageError, parse_duration};
use crate::run::{control, interrupt_on_ctrl_c, source_name, target};

fn usage(flag: &str, m: &str) -> anyhow::Error {
    UsageError(format!("{flag}: {m}")).into()
}

/// Default `--step-time` in virtual time: long, because a queue near saturation drifts for
/// minutes before it shows whether it is stable, and simulated minutes cost milliseconds.
const SIM_STEP: &str = "600s";

/// The step plan's load flags: Poisson, bounded per step.
fn step_args(a: &CapacityArgs) -> anyhow::Result<BenchArgs> {
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
    if !(MIN_RATE..=MAX_RATE).contains(&a.start_rate) {
        return Err(usage("--start-rate", &format!("must be between {MIN_RATE} and {MAX_RATE} requests per second")));
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        return Err(usage("--precision", "must be in (0, 1)"));
    }
    if a.max_steps < 2 {
        return Err(usage("--max-steps", "must be at least 2"));
    }
    if l.warmup.is_some() || l.cooldown.is_some() {
        return Err(usage(
            "--warmup",
            "capacity steps warm up on their first tenth; --warmup and --cooldown do not apply",
        ));
    }
    let mut b = a.bench.clone();
    b.load.profile = Some(Profile::Poisson);
    b.load.rate = Some(goodput_workload::Rate::PerSecond(a.start_rate));
    b.load.requests = Some(b.load.requests.unwrap_or(200));
    Ok(b)
}

/// The plan of every step: `bench`'s flags, or `sim`'s with `--sim`.
fn step_plan(a: &CapacityArgs, b: &BenchArgs) -> anyhow::Result<Planned> {
    if !a.sim {
        return Ok(plan::bench(b)?);
    }
    if b.url.is_some() {
        return Err(usage("--sim", "simulates the engine model: drop --url"));
    }
    let s = SimArgs {
        model: b.model.clone(),
        no_ignore_eos: b.no_ignore_eos,
        api: None,
        engine: b.engine.clone(),
        load: b.load.clone(),
        workload: b.workload.clone(),
        slo: b.slo.clone(),
        output: b.output.clone(),
    };
    Ok(plan::sim(&s)?)
}

/// A step must hold at least [`MIN_STEP_ARRIVALS`] arrivals at the first rate tried: a shorter
/// one (`--step-time 0s`, `1ms`) would leave each step's length to `--requests` alone and change
/// the answer.
fn step_holds_arrivals(step_s: f64, start_rate: f64) -> anyhow::Result<()> {
    if step_s * start_rate < MIN_STEP_ARRIVALS {
        return Err(usage(
            "--step-time",
            &format!(
                "a step of {step_s} s holds {:.3} arrivals at --start-rate {start_rate} req/s; it must hold at least \
                 {MIN_STEP_ARRIVALS} (at least {} s at this rate)",
                step_s * start_rate,
                MIN_STEP_ARRIVALS / start_rate
            ),
        ));
    }
    Ok(())
}

pub async fn run(a: CapacityArgs) -> anyhow::Result<Outcome> {
    let b = step_args(&a)?;
    // virtual seconds cost nothing: simulated steps run long enough for a slow queue to show
    let step_time = a.step_time.as_deref().unwrap_or(if a.sim { SIM_STEP } else { "10s" });
    let step_s = parse_duration("--step-time", step_time)?.as_secs_f64();
    step_holds_arrivals(step_s, a.start_rate)?;
    let max_step_s = match &a.bench.load.duration {
        Some(d) => Some(parse_duration("--duration", d)?.as_secs_f64()),
        None if a.sim => None,
        None => Some(step_s.max(60.0)),
    };
    let mut p = step_plan(&a, &b)?;
    if p.plan.slo.slo().is_none() {
        return Err(usage("--slo", "capacity needs an SLO (--slo or --slo-preset)"));
    }
    let opts = CapacityOptions {
        attainment: a.attainment,
        start_rate: a.start_rate,
        precision: a.precision,
        max_steps: a.max_steps,
        step_s,
        max_step_s,
        min_requests: p.plan.load.requests.unwrap_or(200),
    };
    let mut t: AnyTarget = target(&mut p).await?;
    let interrupt = interrupt_on_ctrl_c();
    let measured = !t.is_simulated();
    let mut first = true;
    let found = search(
        &mut t,
        &p.plan,
        &opts,
        |stage, saturation| {
            let mut ctl = control(&p, stage, &interrupt, &mut first, measured);
            ctl.saturation = saturation;
            ctl
        },
        |run| say!("{}\n", goodput_render::stage_line(run.name.as_deref().unwrap_or("-"), &run.summary)),
    )
    .await?;
    let runs = found.runs();
    let mut found = found;
    found.report.notes.extend(p.extrapolated.iter().map(|n| format!("Twin: {n}.")));
    say!("{}", goodput_render::render_capacity(&found.report));
    if let Some(path) = &p.html {
        write_html(path, &result_doc(runs.clone(), Some(found.report.clone())), &source_name(&p, "capacity"))?;
    }
    if let Some(path) = &p.plan.output.out {
        write_doc(path, runs, Some(found.report))?;
        say!("  results      {}\n", path.display());
    }
    Ok(if found.interrupted {
        Outcome::Interrupted
    } else if found.unusable {
        Outcome::Failed
    } else {
        Outcome::Ok
    })
}
