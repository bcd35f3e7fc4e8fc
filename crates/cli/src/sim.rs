//! `goodput sim`: predict a run in virtual time with the engine model, one stage or a sweep.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use goodput_engine::Engine;
use goodput_metrics::result::{Run, Target};
use goodput_sim::{SimConfig, simulate};
use goodput_workload::Workload;

use crate::Outcome;
use crate::args::SimArgs;
use crate::console;
use crate::plan::SimPlan;
use crate::report::{schedule_line, write_doc};
use crate::stages::{self, Stage, StageResult};

pub async fn run(args: SimArgs) -> anyhow::Result<Outcome> {
    let plan = SimPlan::from_args(&args)?;
    let sweep = plan.load.sweep_points.is_some();
    let results = stages::run_stages(&plan.load, |stage| {
        let r = run_stage(&plan, stage, sweep);
        async move { r }
    })
    .await?;
    if sweep {
        say!("{}", console::render_sweep(&results.iter().map(|r| &r.run).collect::<Vec<_>>()));
    }
    if let Some(path) = &plan.load.export_schedule {
        export(path, &results[0].run)?;
    }
    if let Some(path) = &plan.output.out {
        write_doc(path, results.iter().map(|r| r.run.clone()).collect(), None)?;
        say!("  results      {}\n", path.display());
    }
    Ok(stages::outcome(&results))
}

pub(crate) fn run_stage(plan: &SimPlan, stage: Stage, sweep: bool) -> anyhow::Result<StageResult> {
    let mut engine = Engine::new(plan.engine.config.clone())?;
    let mut spec = plan.workload.spec.clone();
    spec.seed = stage.seed;
    let workload = Workload::counts(spec, Some(plan.workload.tk.clone()))?;
    let cfg = SimConfig {
        load: stage.load.clone(),
        // every record is kept (about 1 KB each): a duration alone never runs past the limit
        requests: Some(plan.load.requests.unwrap_or(crate::plan::MAX_SIM_REQUESTS)),
        duration_s: plan.load.duration.map(|d| d.as_secs_f64()),
        ignore_eos: plan.ignore_eos,
        seed: stage.seed,
        max_errors: plan.load.max_errors,
    };
    let started = Instant::now();
    let out = simulate(&mut engine, &cfg, workload);
    let wall = started.elapsed().as_secs_f64();
    let opts = stages::options(&plan.load, &stage.load, plan.output.percentiles, plan.ignore_eos, false, &plan.slo);
    let (summary, summary_full) = stages::summaries(&out.records, &opts);
    if sweep {
        say!("{}\n", console::stage_line(stage.name.as_deref().unwrap_or("-"), &summary));
    } else {
        let title = format!(
            "goodput sim · {} · {} · {} requests in {:.1} s of virtual time ({:.2} s to simulate)",
            plan.engine.config.model.name,
            stages::describe(&stage.load),
            out.records.len(),
            out.end_s,
            wall
        );
        say!("{}", console::render(&title, &summary));
        say!("{}", console::render_engine(&plan.engine, &out.stats));
    }
    if plan.load.requests.is_none() && out.records.len() as u64 >= crate::plan::MAX_SIM_REQUESTS {
        say!("  stopped early: {} requests, the most one simulated run keeps\n", crate::plan::MAX_SIM_REQUESTS);
    }
    if out.max_errors_reached() {
        say!("  stopped early: --max-errors reached\n");
    }
    let model = plan.engine.config.model.name.clone();
    let run = Run {
        name: stage.name,
        plan: serde_json::to_value(plan)?,
        target: Target {
            kind: "sim".into(),
            url: None,
            model: Some(model),
            engine: Some(serde_json::to_value(&plan.engine)?),
        },
        interrupted: out.max_errors_reached(),
        summary,
        summary_full,
        engine_stats: Some(serde_json::to_value(&out.stats)?),
        requests: out.records,
    };
    let stop = out.stop;
    Ok(StageResult { run, stop, saturated: false })
}

/// The simulated schedule: when each request arrived and its lengths (the simulator has no
/// text; replaying it sends synthetic prompts of those lengths).
fn export(path: &std::path::Path, run: &Run) -> anyhow::Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for r in &run.requests {
        let body = serde_json::json!({"max_tokens": r.requested_output_tokens});
        let line = schedule_line(r.scheduled_ms, r.session, r.turn, r.input_tokens, &body);
        serde_json::to_writer(&mut f, &line)?;
        f.write_all(b"\n")?;
    }
    f.flush()?;
    Ok(())
}
