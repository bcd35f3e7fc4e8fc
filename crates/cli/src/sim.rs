//! `goodput sim`: predict a run in virtual time with the engine model.

use std::time::Instant;

use goodput_engine::{Engine, SimConfig, simulate};
use goodput_metrics::result::{Run, Target};
use goodput_metrics::{SummaryOptions, summarize};
use goodput_workload::Workload;

use crate::Outcome;
use crate::args::SimArgs;
use crate::console;
use crate::plan::SimPlan;
use crate::report::write_doc;

pub fn run(args: SimArgs) -> anyhow::Result<Outcome> {
    let plan = SimPlan::from_args(&args)?;
    let mut engine = Engine::new(plan.engine.config.clone())?;
    let mut workload = Workload::counts_only(plan.workload.spec.clone())?;
    let cfg = SimConfig {
        load: plan.load.load.clone(),
        requests: plan.load.requests,
        duration_s: plan.load.duration.map(|d| d.as_secs_f64()),
        ignore_eos: plan.ignore_eos,
        seed: plan.load.seed,
    };
    let started = Instant::now();
    let out = simulate(&mut engine, &cfg, &mut workload);
    let wall = started.elapsed().as_secs_f64();
    let opts = SummaryOptions {
        percentiles: plan.output.percentiles,
        offered_rate: plan.load.offered_rate(),
        expect_exact_output: plan.ignore_eos,
        ..SummaryOptions::new()
    };
    let summary = summarize(&out.records, &opts);
    let title = format!(
        "goodput sim · {} · {} requests in {:.1} s of virtual time ({:.2} s to simulate)",
        plan.engine.config.model.name,
        out.records.len(),
        out.end_s,
        wall
    );
    say!("{}", console::render(&title, &summary));
    say!("{}", console::render_engine(&plan.engine, &out.stats));
    let model = plan.engine.config.model.name.clone();
    let run = Run {
        name: None,
        plan: serde_json::to_value(&plan)?,
        target: Target {
            kind: "sim".into(),
            url: None,
            model: Some(model),
            engine: Some(serde_json::to_value(&plan.engine)?),
        },
        interrupted: false,
        summary: summary.clone(),
        summary_full: None,
        engine_stats: Some(serde_json::to_value(&out.stats)?),
        requests: out.records,
    };
    if let Some(path) = &plan.output.out {
        write_doc(path, vec![run], None)?;
        say!("  results      {}\n", path.display());
    }
    Ok(if summary.completed == 0 { Outcome::Failed } else { Outcome::Ok })
}
