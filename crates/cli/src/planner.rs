//! `goodput plan`: the flags become a typed [`PlanSearch`] once (candidates, the shared run plan,
//! the capacity search's options, the money), checked before anything runs; the search itself
//! (every candidate's engine, its capacity in virtual time on every core, its price, the
//! ranking) is `goodput_decide::planner`. A candidate that does not fit in memory is listed with
//! why.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_decide::capacity::CapacityOptions;
use goodput_decide::planner::presets::{self, WorkloadPreset};
use goodput_decide::planner::{Mechanism, Money, PlanSearch, enumerate};
use goodput_engine::config::Named;
use goodput_engine::{Dtype, Preset};
use goodput_results::ResultDoc;
use goodput_results::plan::{LoadPlan, OutputPlan, RunPlan};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::args::{PlanArgs, SloArgs, WorkloadArgs};
use crate::outcome::Outcome;
use crate::plan::{self, UsageError};

fn usage(flag: &str, m: impl std::fmt::Display) -> UsageError {
    UsageError(format!("{flag}: {m}"))
}

/// The validated command: the search, and where its answer goes.
struct Planned {
    search: PlanSearch,
    out: Option<std::path::PathBuf>,
    html: Option<std::path::PathBuf>,
    quiet: bool,
}

fn list(flag: &str, v: &str) -> Result<Vec<String>, UsageError> {
    let items: Vec<String> = v.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    if items.is_empty() { Err(usage(flag, "expected a comma-separated list")) } else { Ok(items) }
}

/// `gpu=2.99/h` (or `gpu=30000`) pairs; `per_hour`: the `/h` suffix is allowed.
fn prices(flag: &str, values: &[String], per_hour: bool) -> Result<BTreeMap<String, f64>, UsageError> {
    let mut out = BTreeMap::new();
    for item in values.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let (gpu, price) = item.split_once('=').ok_or_else(|| usage(flag, format!("`{item}`: expected GPU=PRICE")))?;
        let number = if per_hour { price.trim().trim_end_matches("/h") } else { price.trim() };
        let p: f64 = number
            .trim_start_matches('$')
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| usage(flag, format!("`{item}`: the price must be a number of dollars, at least 0")))?;
        out.insert(gpu.trim().to_ascii_lowercase(), p);
    }
    Ok(out)
}

/// The workload and SLO flags, with the preset's values where the flags were not given.
fn with_preset(a: &PlanArgs, preset: Option<&WorkloadPreset>) -> (WorkloadArgs, SloArgs) {
    let (mut w, mut slo) = (a.workload.clone(), a.slo.clone());
    if let Some(p) = preset {
        w.input_tokens.get_or_insert_with(|| p.input.into());
        w.output_tokens.get_or_insert_with(|| p.output.into());
        if let (Some(r), None) = (p.reasoning, &w.reasoning_tokens) {
            w.reasoning_tokens = Some(r.into());
        }
        if let (Some((groups, tokens)), None) = (p.prefix, w.prefix_groups) {
            w.prefix_groups = Some(groups);
            w.prefix_tokens = Some(tokens);
        }
        if slo.slo.is_empty() && slo.slo_preset.is_empty() {
            slo.slo = vec![p.slo.into()];
        }
    }
    (w, slo)
}

/// A comma-separated list of names of `T`, each checked.
fn named_list<T: Named>(flag: &str, v: &str, what: &str) -> Result<Vec<T>, UsageError> {
    list(flag, v)?
        .iter()
        .map(|n| {
            T::NAMES.iter().find(|(_, name)| name == n).map(|(v, _)| *v).ok_or_else(|| {
                let known: Vec<&str> = T::NAMES.iter().map(|(_, n)| *n).collect();
                usage(flag, format!("unknown {what} `{n}`; known: {}", known.join(", ")))
            })
        })
        .collect()
}

fn validate(a: &PlanArgs) -> Result<Planned, UsageError> {
    let preset = a.preset.as_deref().map(presets::preset).transpose().map_err(|m| usage("--preset", m))?;
    let tps = list("--tp", &a.tp)?
        .iter()
        .map(|t| {
            t.parse::<u32>()
                .ok()
                .filter(|&n| (1..=64).contains(&n))
                .ok_or_else(|| usage("--tp", format!("`{t}`: a whole number from 1 to 64")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtypes = list("--dtype", &a.dtype)?
        .iter()
        .map(|d| Dtype::parse(d).ok_or_else(|| usage("--dtype", format!("`{d}`: expected bf16, fp8 or fp4"))))
        .collect::<Result<Vec<_>, _>>()?;
    let engines: Vec<Preset> = named_list("--engines", &a.engines, "engine")?;
    let mechanisms: Vec<Mechanism> = named_list("--mechanisms", &a.mechanisms, "mechanism set")?;
    let gpus = list("--gpus", &a.gpus)?;
    // every GPU name must be known before anything runs
    let catalog = plan::catalog(a.gpu_spec.as_deref())?;
    for g in &gpus {
        catalog.gpu(g).map_err(|e| usage("--gpus", e))?;
    }
    let model = plan::model_arch(a.model.as_deref(), a.model_config.as_deref(), &catalog)?;
    let attainment = a.attainment.unwrap_or(preset.map_or(0.99, |p| p.attainment));
    if !(attainment > 0.0 && attainment <= 1.0) {
        return Err(usage("--attainment", "must be in (0, 1]"));
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        return Err(usage("--precision", "must be in (0, 1)"));
    }
    if a.target_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(usage("--target-rate", "must be a rate above 0 requests per second"));
    }
    if a.budget.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
        return Err(usage("--budget", "must be dollars per hour above 0"));
    }
    let step_s = plan::parse_duration("--step-time", &a.step_time)?.as_secs_f64();
    let shard = match &a.shard {
        Some(s) => Some(s.parse::<goodput_workload::Shard>().map_err(|e| usage("--shard", e))?),
        None => None,
    };
    let money = Money {
        prices: prices("--price", &a.price, true)?,
        purchase: prices("--purchase", &a.purchase, false)?,
        running: prices("--running-cost", &a.running_cost, true)?,
        target_rate: a.target_rate,
        budget: a.budget,
    };
    // the workload, SLO and load every candidate shares (each capacity step sets its own rate)
    let (workload_args, slo_args) = with_preset(a, preset);
    let slo = plan::slo_plan(&slo_args)?;
    if slo.slo().is_none() {
        return Err(usage("--slo", "plan needs an SLO (--slo, --slo-preset or --preset)"));
    }
    let (workload, res) = plan::workload(&workload_args, a.seed)?;
    let base = RunPlan::simulated(LoadPlan::poisson(1.0, 200, a.seed), workload, slo, OutputPlan::default());
    let candidates = enumerate(&gpus, &tps, &dtypes, &engines, &mechanisms);
    if let Some(o) = &a.out {
        plan::writable("--out", o)?;
    }
    if let Some(h) = &a.html {
        plan::writable("--html", h)?;
        if a.out.as_ref().is_some_and(|o| plan::same_file(o, h)) {
            return Err(usage("--html", "must differ from --out"));
        }
    }
    if let Some(d) = &a.draft {
        catalog.model(d).map_err(|e| usage("--draft", e))?;
    }
    let search = PlanSearch {
        model,
        catalog,
        base,
        res,
        candidates,
        capacity: CapacityOptions {
            attainment,
            start_rate: 1.0,
            precision: a.precision,
            max_steps: 14,
            step_s,
            max_step_s: None,
            min_requests: 200,
        },
        money,
        preset: preset.map(|p| p.name.to_string()),
        shard,
        draft: a.draft.clone(),
    };
    // the workload must fit at least one candidate's engine
    if !search.candidates.iter().any(|c| search.engine(c).is_ok())
        && let Some(first) = search.candidates.first()
    {
        let why = search.engine(first).err().unwrap_or_default();
        return Err(usage("--gpus", format!("no candidate fits; the first: {why}")));
    }
    Ok(Planned { search, out: a.out.clone(), html: a.html.clone(), quiet: a.quiet })
}

fn progress(n: usize, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} candidates {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }
    bar
}

pub fn run(a: PlanArgs) -> anyhow::Result<Outcome> {
    let p = validate(&a)?;
    let bar = progress(p.search.mine().len(), p.quiet);
    let done = AtomicU64::new(0);
    let report = p.search.run(|| bar.set_position(done.fetch_add(1, Ordering::Relaxed) + 1));
    bar.finish_and_clear();
    say!("{}", goodput_render::render_plan(&report));
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), Vec::new());
    doc.plan = Some(report.clone());
    if let Some(path) = &p.out {
        crate::output::write_result(&doc, path)?;
        say!("  results      {}\n", path.display());
    }
    if let Some(path) = &p.html {
        let source = p.out.as_deref().and_then(|o| o.file_name()).map(|n| n.to_string_lossy().into_owned());
        crate::output::write_html(path, &doc, source.as_deref().unwrap_or("goodput plan"))?;
    }
    // a shard's few candidates may all fail to serve: the merged plan gives the answer
    let serves = report.shard.is_some() || report.candidates.iter().any(|c| c.capacity.is_some());
    Ok(if serves { Outcome::Ok } else { Outcome::Failed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn plan_args(args: &[&str]) -> PlanArgs {
        let argv = ["goodput", "plan"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).expect("clap parse").command {
            Command::Plan(p) => p,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_preset_fills_only_what_the_flags_left_out() {
        let chat = presets::preset("chat").unwrap();
        // `--input-tokens 512` is the default's value, but given: the preset must not replace it
        let (w, slo) = with_preset(&plan_args(&["--preset", "chat", "--input-tokens", "512"]), Some(chat));
        assert_eq!(w.input_tokens.as_deref(), Some("512"));
        assert_eq!(w.output_tokens.as_deref(), Some(chat.output));
        assert_eq!(slo.slo, vec![chat.slo.to_string()]);
        let (w, _) = with_preset(&plan_args(&["--preset", "chat"]), Some(chat));
        assert_eq!(w.input_tokens.as_deref(), Some(chat.input));
    }

    #[test]
    fn the_shared_load_is_what_sim_would_plan_from_its_flags() {
        // the planner builds its base load from values; it must equal what the flags give
        let argv = ["goodput", "sim", "--rate", "1", "--requests", "200", "--seed", "9"];
        let Command::Sim(s) = Cli::try_parse_from(argv).unwrap().command else { unreachable!() };
        let from_flags = plan::sim(&s).unwrap().plan.load;
        assert_eq!(LoadPlan::poisson(1.0, 200, 9), from_flags);
    }

    #[test]
    fn engines_and_mechanisms_are_checked_by_name() {
        let e = validate(&plan_args(&["--slo", "ttft<=1s", "--engines", "vllm,tgi"])).err().unwrap();
        assert_eq!(e.0, "--engines: unknown engine `tgi`; known: vllm, sglang, trtllm");
        let e = validate(&plan_args(&["--slo", "ttft<=1s", "--mechanisms", "turbo"])).err().unwrap();
        assert!(e.0.starts_with("--mechanisms: unknown mechanism set `turbo`; known: baseline, spec"), "{}", e.0);
    }
}
